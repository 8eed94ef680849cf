//! Every P/T net and explicit LTS in ../shared/models/REFERENCE.tsv explores to exactly the
//! published state and transition counts, in BFS and in DFS, with every exact store — ComBack
//! with each of its variants, and with deliberately weak hashes (8 and 16 bits) whose
//! collisions only reconstruction can resolve.
//!
//! The default suite covers models up to 200,000 states (5,000 for 8-bit hashes); the rest up
//! to 3,000,000 run with `cargo test --release --test reference -- --ignored`.

mod common;

use common::{reference_rows, Reference};
use spillway::engine::run::{explore_file, ExploreConfig, StoreKind, StoreOptions};
use spillway::engine::{EngineOptions, Order};
use spillway::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet,
};

fn check(rows: &[Reference], order: Order, store: StoreKind) {
    check_with(rows, order, store, StoreOptions::default(), "default");
}

fn check_with(
    rows: &[Reference],
    order: Order,
    store: StoreKind,
    store_options: StoreOptions,
    variant: &str,
) {
    let mut failures = Vec::new();
    for r in rows {
        let cfg = ExploreConfig {
            order,
            store,
            store_options,
            engine: EngineOptions { progress: false },
            ..ExploreConfig::default()
        };
        match explore_file(&r.path, &cfg, &mut |_| {}) {
            Ok(s) if (s.states, s.transitions) == (r.states, r.transitions) && s.exact => {}
            Ok(s) => failures.push(format!(
                "{}: {:?}/{:?}/{variant}: got {} states {} transitions (exact: {}), expected {} / {}",
                r.rel, order, store, s.states, s.transitions, s.exact, r.states, r.transitions
            )),
            Err(e) => failures.push(format!(
                "{}: {:?}/{:?}/{variant}: error {e}",
                r.rel, order, store
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
        "{} models match REFERENCE.tsv ({order:?}, {store:?}, {variant})",
        rows.len()
    );
}

const SMALL: u64 = 200_000;
const LARGE: u64 = 3_000_000;
const TINY: u64 = 5_000;

/// The ComBack variant combinations every matrix runs.
fn comback_variants() -> Vec<(&'static str, CombackOptions)> {
    let d = CombackOptions::default();
    vec![
        ("default", d),
        ("no-cache", CombackOptions { cache: 0, ..d }),
        (
            "backward",
            CombackOptions {
                reconstruction: Reconstruction::Backward,
                cache: 256,
                ..d
            },
        ),
        (
            "vector-waiting-set,no-path-opt,no-mtf",
            CombackOptions {
                waiting_set: WaitingSet::Vectors,
                path_optimisation: PathOptimisation::Off,
                move_to_front: MoveToFront::Off,
                cache: 1024,
                ..d
            },
        ),
        ("tiny-cache", CombackOptions { cache: 64, ..d }),
    ]
}

fn comback(opts: CombackOptions) -> StoreOptions {
    StoreOptions {
        comback: opts,
        ..StoreOptions::default()
    }
}

/// Runs every variant; `no-cache` (one replay from the initial state per candidate) only up to
/// `no_cache_max` states, as its cost grows with depth × revisits.
fn check_comback(min: u64, max: u64, order: Order, no_cache_max: u64) {
    for (name, opts) in comback_variants() {
        let limit = if opts.cache == 0 {
            max.min(no_cache_max)
        } else {
            max
        };
        check_with(
            &reference_rows(min, limit),
            order,
            StoreKind::Comback,
            comback(opts),
            name,
        );
    }
}

#[test]
fn small_models_bfs_full() {
    check(&reference_rows(0, SMALL), Order::Bfs, StoreKind::Full);
}

#[test]
fn small_models_dfs_full() {
    check(&reference_rows(0, SMALL), Order::Dfs, StoreKind::Full);
}

#[test]
fn small_models_bfs_comback_every_variant() {
    check_comback(0, SMALL, Order::Bfs, SMALL);
}

#[test]
fn small_models_dfs_comback_every_variant() {
    check_comback(0, SMALL, Order::Dfs, 20_000);
}

#[test]
fn weak_16_bit_hashes_are_resolved_by_reconstruction() {
    for order in [Order::Bfs, Order::Dfs] {
        for (name, opts) in [
            ("16-bit", CombackOptions::default()),
            (
                "16-bit,backward",
                CombackOptions {
                    reconstruction: Reconstruction::Backward,
                    ..CombackOptions::default()
                },
            ),
        ] {
            let opts = CombackOptions {
                hash_bits: 16,
                ..opts
            };
            check_with(
                &reference_rows(0, SMALL),
                order,
                StoreKind::Comback,
                comback(opts),
                name,
            );
        }
    }
}

#[test]
fn weak_8_bit_hashes_are_resolved_by_reconstruction() {
    for order in [Order::Bfs, Order::Dfs] {
        for (name, opts) in comback_variants() {
            let opts = CombackOptions {
                hash_bits: 8,
                ..opts
            };
            check_with(
                &reference_rows(0, TINY),
                order,
                StoreKind::Comback,
                comback(opts),
                &format!("8-bit,{name}"),
            );
        }
    }
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

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_comback_every_variant() {
    check_comback(SMALL, LARGE, Order::Bfs, LARGE);
}
