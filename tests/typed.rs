//! The typed Rust API: the example model in models/rust explores to the same counts as the
//! equivalent MCC net.

#[path = "../models/rust/philosophers.rs"]
mod philosophers;

use philosophers::Philosophers;
use spillway::engine::{EngineOptions, Order};
use spillway::model::typed::Typed;
use spillway::run::{ExploreConfig, Search};

#[test]
fn typed_philosophers_match_the_net() {
    for order in [Order::Bfs, Order::Dfs] {
        let cfg = ExploreConfig {
            order,
            engine: EngineOptions {
                progress: false,
                threads: 1,
            },
            ..ExploreConfig::default()
        };
        let s = Search::model(&Typed::new(Philosophers { n: 5 }))
            .config(cfg.clone())
            .run()
            .unwrap();
        assert_eq!(
            (s.states, s.transitions, s.deadlocks),
            (243, 945, 2),
            "{order:?}"
        );
        let s = Search::model(&Typed::new(Philosophers { n: 10 }))
            .config(cfg.clone())
            .run()
            .unwrap();
        // Philosophers-PT-000010 in REFERENCE.tsv.
        assert_eq!((s.states, s.transitions), (59049, 459270), "{order:?}");
    }
}
