//! Every P/T net and explicit LTS in ../shared/models/REFERENCE.tsv explores to exactly the
//! published state and transition counts, in BFS and in DFS, with every store.
//!
//! The default suite covers models up to 200,000 states; the rest up to 3,000,000 run with
//! `cargo test --release --test reference -- --ignored`.

mod common;

use common::{reference_rows, Reference};
use spillway::engine::run::{explore_file, ExploreConfig, StoreKind};
use spillway::engine::{EngineOptions, Order};

fn check(rows: &[Reference], order: Order, store: StoreKind) {
    let mut failures = Vec::new();
    for r in rows {
        let cfg = ExploreConfig {
            order,
            store,
            engine: EngineOptions { progress: false },
            ..ExploreConfig::default()
        };
        match explore_file(&r.path, &cfg, &mut |_| {}) {
            Ok(s) if (s.states, s.transitions) == (r.states, r.transitions) => {}
            Ok(s) => failures.push(format!(
                "{}: {:?}/{:?}: got {} states {} transitions, expected {} / {}",
                r.rel, order, store, s.states, s.transitions, r.states, r.transitions
            )),
            Err(e) => failures.push(format!("{}: {:?}/{:?}: error {e}", r.rel, order, store)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} models match REFERENCE.tsv ({order:?}, {store:?})",
        rows.len()
    );
}

const SMALL: u64 = 200_000;
const LARGE: u64 = 3_000_000;

#[test]
fn small_models_bfs_full() {
    check(&reference_rows(0, SMALL), Order::Bfs, StoreKind::Full);
}

#[test]
fn small_models_dfs_full() {
    check(&reference_rows(0, SMALL), Order::Dfs, StoreKind::Full);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_full() {
    check(&reference_rows(SMALL, LARGE), Order::Bfs, StoreKind::Full);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_dfs_full() {
    check(&reference_rows(SMALL, LARGE), Order::Dfs, StoreKind::Full);
}
