//! Every P/T net and explicit LTS in ../shared/models/REFERENCE.tsv explores to exactly the
//! published state and transition counts, in BFS and in DFS, with every store.
//!
//! The default suite covers models up to 200,000 states; the rest up to 3,000,000 run with
//! `cargo test --release --test reference -- --ignored`.

mod common;

use common::{reference_rows, Reference};
use spillway::engine::run::{explore_file, ExploreConfig, StoreKind};
use spillway::engine::{EngineOptions, Order};
use spillway::storage::{SegOptions, SpillPolicy, StorageConfig};

/// Whether the store's structures are forced into segment files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spill {
    InRam,
    /// Tiny blocks, a one-block hot window and a small cache, so that almost every read of
    /// a stored state goes through a sealed, compressed block.
    Forced,
    /// `--spill always` with the default segment sizes (practical for large models).
    Always,
}

fn check(rows: &[Reference], order: Order, store: StoreKind) {
    check_spill(rows, order, store, Spill::InRam)
}

fn check_spill(rows: &[Reference], order: Order, store: StoreKind, spill: Spill) {
    let mut failures = Vec::new();
    for r in rows {
        let storage = match spill {
            Spill::InRam => StorageConfig::default(),
            Spill::Forced => StorageConfig {
                spill: SpillPolicy::Always,
                segments: SegOptions {
                    block_bytes: 1024,
                    hot_blocks: 1,
                    cache_bytes: 64 << 10,
                    ..SegOptions::default()
                },
                ..StorageConfig::default()
            },
            Spill::Always => StorageConfig {
                spill: SpillPolicy::Always,
                ..StorageConfig::default()
            },
        };
        let cfg = ExploreConfig {
            order,
            store,
            engine: EngineOptions { progress: false },
            storage,
            ..ExploreConfig::default()
        };
        match explore_file(&r.path, &cfg, &mut |_| {}) {
            Ok(s) if (s.states, s.transitions) == (r.states, r.transitions) => {}
            Ok(s) => failures.push(format!(
                "{}: {:?}/{:?}/{:?}: got {} states {} transitions, expected {} / {}",
                r.rel, order, store, spill, s.states, s.transitions, r.states, r.transitions
            )),
            Err(e) => failures.push(format!(
                "{}: {:?}/{:?}/{:?}: error {e}",
                r.rel, order, store, spill
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} models match REFERENCE.tsv ({order:?}, {store:?}, {spill:?})",
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
fn small_models_bfs_full_spilled() {
    check_spill(
        &reference_rows(0, SMALL),
        Order::Bfs,
        StoreKind::Full,
        Spill::Forced,
    );
}

#[test]
fn small_models_dfs_full_spilled() {
    check_spill(
        &reference_rows(0, SMALL),
        Order::Dfs,
        StoreKind::Full,
        Spill::Forced,
    );
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_full_spilled() {
    check_spill(
        &reference_rows(SMALL, LARGE),
        Order::Bfs,
        StoreKind::Full,
        Spill::Always,
    );
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
