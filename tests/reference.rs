//! Every P/T net and explicit LTS in ../shared/models/REFERENCE.tsv explores to exactly the
//! published state and transition counts, in BFS and in DFS, with every exact store — ComBack
//! with each of its variants, and with deliberately weak hashes (8 and 16 bits) whose
//! collisions only reconstruction can resolve; 8-bit hashes on models up to 5,000 states.
//!
//! The default suite covers models up to 200,000 states; the rest up to 3,000,000 run with
//! `cargo test --release --test reference -- --ignored`.
//!
//! Tree store: BFS and DFS (≤ 200,000 states by default, ≤ 3,000,000 with `--ignored`), and
//! its BFS native files byte for byte against the full store's.
//!
//! `--threads 2` (the full store, ComBack and the tree store, the ones that run in parallel),
//! BFS, on every model up to 200,000 states: the same native file as one thread.
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
use spillway::engine::{EngineOptions, Order};
use spillway::run::{ExploreConfig, Search};
use spillway::storage::{MemoryLimit, SegOptions, SpillPolicy, StorageConfig};
use spillway::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet,
};
use spillway::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate};
use spillway::store::full::FullOptions;
use spillway::store::tree::TreeOptions;
use spillway::store::StoreConfig;

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
    store: StoreConfig,
    spill: Spill,
    /// `--memory`, in bytes (none: unlimited).
    memory: Option<u64>,
    /// Appended to failure messages to name the variant.
    variant: String,
}

impl Case {
    fn new(order: Order, store: StoreConfig) -> Self {
        Case {
            order,
            store,
            spill: Spill::InRam,
            memory: None,
            variant: String::new(),
        }
    }

    fn spill(mut self, spill: Spill) -> Self {
        self.spill = spill;
        self.variant = format!(" {spill:?}");
        self
    }

    fn config(&self) -> ExploreConfig {
        let mut storage = match self.spill {
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
        if let Some(bytes) = self.memory {
            storage.memory = MemoryLimit::Bytes(bytes);
        }
        ExploreConfig {
            order: self.order,
            store: self.store.clone(),
            engine: EngineOptions {
                progress: false,
                threads: 1,
            },
            storage,
            ..ExploreConfig::default()
        }
    }
}

fn check_case(rows: &[Reference], case: &Case) {
    let cfg = case.config();
    let (order, store, variant) = (case.order, case.store.name(), &case.variant);
    let mut failures = Vec::new();
    for r in rows {
        match Search::file(&r.path).config(cfg.clone()).run() {
            Ok(s) if (s.states, s.transitions) == (r.states, r.transitions) && s.exact => {}
            Ok(s) => failures.push(format!(
                "{}: {order:?}/{store}{variant}: got {} states {} transitions (exact: {}), expected {} / {}",
                r.rel, s.states, s.transitions, s.exact, r.states, r.transitions
            )),
            Err(e) => failures.push(format!(
                "{}: {order:?}/{store}{variant}: error {e}",
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
        "{} models match REFERENCE.tsv ({order:?}, {store}{variant})",
        rows.len()
    );
}

fn check(rows: &[Reference], order: Order, store: StoreConfig) {
    check_case(rows, &Case::new(order, store));
}

const SMALL: u64 = 200_000;
const LARGE: u64 = 3_000_000;
const TINY: u64 = 5_000;

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_full() {
    check(
        &reference_rows(0, SMALL),
        Order::Bfs,
        StoreConfig::Full(FullOptions::default()),
    );
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_dfs_full() {
    check(
        &reference_rows(0, SMALL),
        Order::Dfs,
        StoreConfig::Full(FullOptions::default()),
    );
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_full_spilled() {
    let case =
        Case::new(Order::Bfs, StoreConfig::Full(FullOptions::default())).spill(Spill::Forced);
    check_case(&reference_rows(0, SMALL), &case);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_dfs_full_spilled() {
    let case =
        Case::new(Order::Dfs, StoreConfig::Full(FullOptions::default())).spill(Spill::Forced);
    check_case(&reference_rows(0, SMALL), &case);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_full_spilled() {
    let case =
        Case::new(Order::Bfs, StoreConfig::Full(FullOptions::default())).spill(Spill::Always);
    check_case(&reference_rows(SMALL, LARGE), &case);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_full() {
    check(
        &reference_rows(SMALL, LARGE),
        Order::Bfs,
        StoreConfig::Full(FullOptions::default()),
    );
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_dfs_full() {
    check(
        &reference_rows(SMALL, LARGE),
        Order::Dfs,
        StoreConfig::Full(FullOptions::default()),
    );
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

/// The kδ values of the Δ matrices: `SPILLWAY_DELTA_KS=50,20` runs only those, in that order
/// (to split the opt-in matrices across processes or machines).
fn delta_ks() -> Vec<u32> {
    match std::env::var("SPILLWAY_DELTA_KS") {
        Ok(v) => v
            .split(',')
            .map(|k| {
                k.trim()
                    .parse()
                    .expect("SPILLWAY_DELTA_KS: comma-separated kδ values")
            })
            .collect(),
        Err(_) => KS.to_vec(),
    }
}

/// Whether a Δ variant runs: `SPILLWAY_DELTA_VARIANTS=no-collapse,all-on` runs only those
/// (again to split the opt-in matrices; unset runs all four).
fn delta_variant_selected(name: &str) -> bool {
    match std::env::var("SPILLWAY_DELTA_VARIANTS") {
        Ok(v) => v
            .split(',')
            .any(|w| name.ends_with(&format!(" {}", w.trim()))),
        Err(_) => true,
    }
}

fn delta_matrix(rows: &[Reference], order: Order) {
    for k in delta_ks() {
        for (opts, name) in delta_variants(k) {
            if !delta_variant_selected(&name) {
                continue;
            }
            let case = Case {
                variant: name,
                ..Case::new(order, StoreConfig::Delta(opts))
            };
            check_case(rows, &case);
        }
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_delta_matrix() {
    delta_matrix(&reference_rows(0, MATRIX_MAX), Order::Bfs);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_dfs_delta_matrix() {
    delta_matrix(&reference_rows(0, MATRIX_MAX), Order::Dfs);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn medium_models_bfs_delta_matrix() {
    delta_matrix(&reference_rows(MATRIX_MAX, SMALL), Order::Bfs);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
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

fn comback_case(order: Order, opts: CombackOptions, name: &str) -> Case {
    Case {
        variant: format!(" {name}"),
        ..Case::new(order, StoreConfig::Comback(opts))
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
        check_case(
            &reference_rows(min, limit),
            &comback_case(order, opts, name),
        );
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_comback_every_variant() {
    check_comback(0, SMALL, Order::Bfs, SMALL);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_dfs_comback_every_variant() {
    // Every variant, the no-cache one included (DFS replays start from the pinned search
    // path, so the no-cache variant is no longer slow here).
    check_comback(0, SMALL, Order::Dfs, SMALL);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn weak_16_bit_hashes_are_resolved_by_reconstruction() {
    for order in [Order::Bfs, Order::Dfs] {
        for (name, reconstruction) in [
            ("16-bit", Reconstruction::Forward),
            ("16-bit,backward", Reconstruction::Backward),
        ] {
            let opts = CombackOptions {
                hash_bits: 16,
                reconstruction,
                ..CombackOptions::default()
            };
            check_case(&reference_rows(0, SMALL), &comback_case(order, opts, name));
        }
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn weak_8_bit_hashes_are_resolved_by_reconstruction() {
    for order in [Order::Bfs, Order::Dfs] {
        for (name, opts) in comback_variants() {
            let opts = CombackOptions {
                hash_bits: 8,
                ..opts
            };
            let case = comback_case(order, opts, &format!("8-bit,{name}"));
            check_case(&reference_rows(0, TINY), &case);
        }
    }
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_comback_every_variant() {
    check_comback(SMALL, LARGE, Order::Bfs, LARGE);
}

// Tree compression (`--store tree`): exact counts in both orders, and in BFS the same native
// LTS file as the full store.

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_tree() {
    check(
        &reference_rows(0, SMALL),
        Order::Bfs,
        StoreConfig::Tree(TreeOptions::default()),
    );
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_dfs_tree() {
    check(
        &reference_rows(0, SMALL),
        Order::Dfs,
        StoreConfig::Tree(TreeOptions::default()),
    );
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_tree() {
    check(
        &reference_rows(SMALL, LARGE),
        Order::Bfs,
        StoreConfig::Tree(TreeOptions::default()),
    );
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_dfs_tree() {
    check(
        &reference_rows(SMALL, LARGE),
        Order::Dfs,
        StoreConfig::Tree(TreeOptions::default()),
    );
}

/// The tree store numbers states like the full store (root reference = state number), so
/// its BFS native file is the full store's, byte for byte, on every model up to 200,000
/// states.
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_tree_writes_the_full_stores_lts() {
    let t = tempfile::tempdir().unwrap();
    let rows = reference_rows(0, SMALL);
    assert!(!rows.is_empty());
    let mut differ = Vec::new();
    for r in &rows {
        let mut files = Vec::new();
        for store in [
            StoreConfig::Full(FullOptions::default()),
            StoreConfig::Tree(TreeOptions::default()),
        ] {
            let out = t.path().join(format!("{}.slts", store.name()));
            let cfg = ExploreConfig {
                output: Some(out.clone()),
                ..Case::new(Order::Bfs, store).config()
            };
            let s = Search::file(&r.path).config(cfg.clone()).run().unwrap();
            assert_eq!(
                (s.states, s.transitions),
                (r.states, r.transitions),
                "{}",
                r.rel
            );
            files.push(std::fs::read(&out).unwrap());
        }
        if files[0] != files[1] {
            differ.push(r.rel.clone());
        }
    }
    assert!(
        differ.is_empty(),
        "tree and full LTS files differ: {differ:?}"
    );
    eprintln!(
        "{} models: identical BFS files from tree and full",
        rows.len()
    );
}

/// Parallel BFS (`--threads 2`: the full store, ComBack, the tree store) writes the native file of a
/// one-thread run, byte for byte, with the reference counts, on every model up to 200,000
/// states (up to 3,000,000 with `--ignored`; `.aut` rows, which do not fork, run on one
/// thread) — the full store with the vectors in RAM, and in segment files of tiny blocks
/// behind a small cache (the threads read them through a view, most sealed reads missing
/// the cache); ComBack with its defaults, and with weak descriptors and a tiny cache; the
/// tree store (its threads fold every successor against its parent's tree).
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn small_models_bfs_two_threads_write_the_one_thread_lts() {
    two_threads_write_the_one_thread_lts(0, SMALL);
}

#[test]
#[ignore = "large: run with --ignored (release build recommended)"]
fn large_models_bfs_two_threads_write_the_one_thread_lts() {
    two_threads_write_the_one_thread_lts(SMALL, LARGE);
}

fn two_threads_write_the_one_thread_lts(min: u64, max: u64) {
    let t = tempfile::tempdir().unwrap();
    let rows = reference_rows(min, max);
    assert!(!rows.is_empty());
    let full = Case::new(Order::Bfs, StoreConfig::Full(FullOptions::default()));
    // Under a budget with an index of at most 1,024 slots: every model past a few hundred
    // states spills its index, and the delayed batches resolve on the threads
    // (`FullStore::insert_many_parallel`).
    let mut spilled = Case::new(
        Order::Bfs,
        StoreConfig::Full(FullOptions {
            index_slots: Some(1024),
        }),
    )
    .spill(Spill::Forced);
    spilled.memory = Some(64 << 20);
    spilled.variant = " Forced, index spilled".into();
    // ComBack: its threads rebuild the matches the cache does not hold; with 16-bit
    // descriptors and a 64-entry cache (only up to 200,000 states: its replays grow with the
    // depth), most matches are rebuilt and collisions go to the numbering thread.
    let comback = comback_case(Order::Bfs, CombackOptions::default(), "default");
    let weak = comback_case(
        Order::Bfs,
        CombackOptions {
            hash_bits: 16,
            cache: 64,
            ..CombackOptions::default()
        },
        "16-bit, tiny-cache",
    );
    let tree = Case::new(Order::Bfs, StoreConfig::Tree(TreeOptions::default()));
    let mut cases = vec![
        full.clone(),
        full.spill(Spill::Forced),
        spilled,
        comback,
        tree,
    ];
    if max <= SMALL {
        cases.push(weak);
    }
    let mut differ = Vec::new();
    let mut spilled_runs = 0;
    for r in &rows {
        for case in &cases {
            let store = &case.store;
            let mut files = Vec::new();
            for threads in [1, 2] {
                let out = t.path().join(format!("{}-{threads}.slts", store.name()));
                let mut cfg = ExploreConfig {
                    output: Some(out.clone()),
                    ..case.config()
                };
                cfg.engine.threads = threads;
                let s = Search::file(&r.path).config(cfg).run().unwrap();
                assert_eq!(
                    (s.states, s.transitions),
                    (r.states, r.transitions),
                    "{} {}{} threads {threads}",
                    r.rel,
                    store.name(),
                    case.variant
                );
                // `.aut` models do not fork: one thread.
                let forks = !r.rel.ends_with(".aut");
                let used = if forks { threads as u64 } else { 1 };
                assert_eq!(
                    s.threads, used,
                    "{}{} threads {threads}",
                    r.rel, case.variant
                );
                if case.memory.is_some() && s.store_details.contains_key("index_spilled_states") {
                    let on = s.store_details["index_threads"].as_u64();
                    assert_eq!(on, Some(threads as u64), "{}{}", r.rel, case.variant);
                    spilled_runs += 1;
                }
                files.push(std::fs::read(&out).unwrap());
            }
            if files[0] != files[1] {
                differ.push(format!("{} {}{}", r.rel, store.name(), case.variant));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "two threads wrote another LTS than one: {differ:?}"
    );
    // The models of more than a few hundred states spill their 1,024-slot index (a third
    // of the default suite's rows, two runs each).
    assert!(
        spilled_runs >= rows.len() / 2,
        "only {spilled_runs} runs of {} rows spilled their index",
        rows.len()
    );
    eprintln!(
        "{} models × {} full-store cases: identical BFS files with one and two threads \
         ({spilled_runs} runs resolved batches of a spilled index)",
        rows.len(),
        cases.len()
    );
}
