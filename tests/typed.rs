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

/// A model whose `next` panics after a few states.
struct Faulty;

impl spillway::model::typed::TypedModel for Faulty {
    type State = u32;
    type Action = u32;

    fn initial(&self) -> u32 {
        0
    }

    fn actions(&self, _s: &u32, out: &mut Vec<u32>) {
        out.push(1);
    }

    fn next(&self, s: &u32, a: &u32) -> Option<u32> {
        assert!(*s < 10, "the model's own bug");
        Some(s + a)
    }

    fn label(&self, _a: &u32) -> String {
        "inc".into()
    }
}

/// A library run that fails — a store refusing the model, or the model panicking — leaves no
/// `OUT.partial` behind (nothing can resume it), as `spillway explore` does not; a finished
/// run leaves just its output.
#[test]
fn a_failed_library_run_leaves_no_partial_output() {
    use spillway::store::config::StoreConfig;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.slts");
    let cfg = |store: StoreConfig| ExploreConfig {
        output: Some(out.clone()),
        store,
        engine: EngineOptions {
            progress: false,
            threads: 1,
        },
        ..ExploreConfig::default()
    };
    let left = || {
        let mut v: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    // The Δ store needs fixed-width states; typed states vary.
    let e = Search::model(&Typed::new(Philosophers { n: 3 }))
        .config(cfg(StoreConfig::Delta(Default::default())))
        .run();
    assert!(e.is_err());
    assert!(left().is_empty(), "{:?}", left());
    let panicked = std::panic::catch_unwind(|| {
        Search::model(&Typed::new(Faulty))
            .config(cfg(StoreConfig::Full(Default::default())))
            .run()
    });
    assert!(panicked.is_err());
    assert!(left().is_empty(), "{:?}", left());
    let s = Search::model(&Typed::new(Philosophers { n: 3 }))
        .config(cfg(StoreConfig::Full(Default::default())))
        .run()
        .unwrap();
    assert_eq!(s.states, 27);
    assert_eq!(left(), ["x.slts"]);
}
