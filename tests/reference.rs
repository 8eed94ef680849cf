//! Every P/T net and explicit LTS in ../shared/models/REFERENCE.tsv explores to exactly the
//! published state and transition counts, in BFS and in DFS, with every store.
//!
//! The default suite covers models up to 200,000 states; the rest up to 3,000,000 run with
//! `cargo test --release --test reference -- --ignored`.
//!
//! Full store: BFS and DFS, in RAM and with every structure forced through small compressed
//! segment blocks (`Spill::Forced`); the large BFS run also with `--spill always`.
//!
//! Δ store (`--store delta`) coverage: every kδ in {1, 5, 20, 50} × {all optimisations on,
//! no predecessor update, no backward firing, no collapsing} × {BFS, DFS}, on
//! * every model up to 200,000 states in the default suite (split at 50,000 states into two
//!   tests per order so they run in parallel; the whole file takes under 2 minutes);
//! * every model of 200,001–3,000,000 states with `--ignored` (hours on two cores).

mod common;

use common::{reference_rows, Reference};
use spillway::engine::run::{explore_file, ExploreConfig, StoreKind};
use spillway::engine::{EngineOptions, Order};
use spillway::storage::{SegOptions, SpillPolicy, StorageConfig};
use spillway::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate};

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

/// One configuration of the matrix.
#[derive(Clone)]
struct Case {
    order: Order,
    store: StoreKind,
    spill: Spill,
    delta: DeltaOptions,
    /// Appended to failure messages to name the variant.
    variant: String,
}

impl Case {
    fn new(order: Order, store: StoreKind) -> Self {
        Case {
            order,
            store,
            spill: Spill::InRam,
            delta: DeltaOptions::default(),
            variant: String::new(),
        }
    }

    fn spill(mut self, spill: Spill) -> Self {
        self.spill = spill;
        self.variant = format!(" {spill:?}");
        self
    }

    fn config(&self) -> ExploreConfig {
        let storage = match self.spill {
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
        ExploreConfig {
            order: self.order,
            store: self.store,
            engine: EngineOptions { progress: false },
            storage,
            delta: self.delta.clone(),
            ..ExploreConfig::default()
        }
    }
}

fn check_case(rows: &[Reference], case: &Case) {
    let cfg = case.config();
    let (order, store, variant) = (case.order, case.store, &case.variant);
    let mut failures = Vec::new();
    for r in rows {
        match explore_file(&r.path, &cfg, &mut |_| {}) {
            Ok(s) if (s.states, s.transitions) == (r.states, r.transitions) => {}
            Ok(s) => failures.push(format!(
                "{}: {order:?}/{store:?}{variant}: got {} states {} transitions, expected {} / {}",
                r.rel, s.states, s.transitions, r.states, r.transitions
            )),
            Err(e) => failures.push(format!(
                "{}: {order:?}/{store:?}{variant}: error {e}",
                r.rel
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
        "{} models match REFERENCE.tsv ({order:?}, {store:?}{variant})",
        rows.len()
    );
}

fn check(rows: &[Reference], order: Order, store: StoreKind) {
    check_case(rows, &Case::new(order, store));
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
    let case = Case::new(Order::Bfs, StoreKind::Full).spill(Spill::Forced);
    check_case(&reference_rows(0, SMALL), &case);
}

#[test]
fn small_models_dfs_full_spilled() {
    let case = Case::new(Order::Dfs, StoreKind::Full).spill(Spill::Forced);
    check_case(&reference_rows(0, SMALL), &case);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_full_spilled() {
    let case = Case::new(Order::Bfs, StoreKind::Full).spill(Spill::Always);
    check_case(&reference_rows(SMALL, LARGE), &case);
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

const KS: [u32; 4] = [1, 5, 20, 50];
/// Where the default-suite matrix is split in two tests per order.
const MATRIX_MAX: u64 = 50_000;

/// The Δ variants: all optimisations on, then each one switched off in turn.
fn delta_variants(k: u32) -> Vec<(DeltaOptions, String)> {
    let on = DeltaOptions {
        k,
        ..DeltaOptions::default()
    };
    vec![
        (on.clone(), format!(" k={k} all-on")),
        (
            DeltaOptions {
                pred_update: PredUpdate::Off,
                ..on.clone()
            },
            format!(" k={k} no-pred-update"),
        ),
        (
            DeltaOptions {
                firing: Firing::Forward,
                ..on.clone()
            },
            format!(" k={k} no-backward"),
        ),
        (
            DeltaOptions {
                collapse: Collapse::Off,
                ..on
            },
            format!(" k={k} no-collapse"),
        ),
    ]
}

fn delta_matrix(rows: &[Reference], order: Order) {
    for k in KS {
        for (opts, name) in delta_variants(k) {
            let case = Case {
                delta: opts,
                variant: name,
                ..Case::new(order, StoreKind::Delta)
            };
            check_case(rows, &case);
        }
    }
}

#[test]
fn small_models_bfs_delta_matrix() {
    delta_matrix(&reference_rows(0, MATRIX_MAX), Order::Bfs);
}

#[test]
fn small_models_dfs_delta_matrix() {
    delta_matrix(&reference_rows(0, MATRIX_MAX), Order::Dfs);
}

#[test]
fn medium_models_bfs_delta_matrix() {
    delta_matrix(&reference_rows(MATRIX_MAX, SMALL), Order::Bfs);
}

#[test]
fn medium_models_dfs_delta_matrix() {
    delta_matrix(&reference_rows(MATRIX_MAX, SMALL), Order::Dfs);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended; hours on two cores)"]
fn large_models_bfs_delta_matrix() {
    delta_matrix(&reference_rows(SMALL, LARGE), Order::Bfs);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended; hours on two cores)"]
fn large_models_dfs_delta_matrix() {
    delta_matrix(&reference_rows(SMALL, LARGE), Order::Dfs);
}
