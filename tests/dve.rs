//! The DVE front end end to end.
//!
//! * Every BEEM instance of ../shared/models/beem explores, in BFS, to exactly the state count
//!   of REFERENCE.tsv (and its transition count where one is listed) with every exact store:
//!   full, ComBack and Δ (plus the full store in DFS). Instances up to 200,000 states run in
//!   the default suite; the others up to 3,000,000 with
//!   `cargo test --release --test dve -- --ignored`. Without ../shared the tests say how many
//!   instances they skipped, and fail instead when the environment variable `CI` is set.
//! * Small DVE models written here check rendez-vous, buffered channels, committed states,
//!   arrays and evaluation errors against closed forms or against an independent search coded
//!   directly in Rust, and the CLI's labels and exit codes.
//! * A fuzz test feeds a few thousand mutated DVE sources (BEEM files and the sources here)
//!   to the parser and compiler: no panic, every error with a line and column, and models
//!   that compile explore a few hundred states without panicking either.

mod common;

use common::{bin, shared_models};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use spillway::run::{ExploreConfig, Search};
use spillway::store::comback::CombackOptions;
use spillway::store::delta::DeltaOptions;
use spillway::store::full::FullOptions;
use spillway::store::tree::TreeOptions;
use spillway::store::StoreConfig;

/// The exact stores, each with its default options.
#[derive(Clone, Copy, Debug)]
enum StoreKind {
    Full,
    Comback,
    Delta,
    Tree,
}

impl StoreKind {
    fn config(self) -> StoreConfig {
        match self {
            StoreKind::Full => StoreConfig::Full(FullOptions::default()),
            StoreKind::Comback => StoreConfig::Comback(CombackOptions::default()),
            StoreKind::Delta => StoreConfig::Delta(DeltaOptions::default()),
            StoreKind::Tree => StoreConfig::Tree(TreeOptions::default()),
        }
    }
}
use spillway::engine::{EngineOptions, Order};
use spillway::model::dve;
use spillway::{ModelError, TransitionId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------------------------
// BEEM reference instances

/// One `beem/` row of REFERENCE.tsv.
struct Beem {
    rel: String,
    path: PathBuf,
    states: u64,
    transitions: Option<u64>,
}

/// Whether a missing reference must fail the test (`CI` is set) rather than skip it.
fn strict() -> bool {
    std::env::var_os("CI").is_some()
}

/// The BEEM rows with `min < states <= max` whose model file exists; reports (and under
/// `CI` refuses) what is skipped.
fn beem_rows(min: u64, max: u64) -> Vec<Beem> {
    let Some(dir) = shared_models() else {
        let msg = "skipped every BEEM instance: ../shared/models/REFERENCE.tsv not found";
        assert!(!strict(), "{msg} (CI is set, so this is a failure)");
        eprintln!("{msg}");
        return Vec::new();
    };
    let text = std::fs::read_to_string(dir.join("REFERENCE.tsv")).unwrap();
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 5 || !f[0].starts_with("beem/") {
            continue;
        }
        let Ok(states) = f[3].parse::<u64>() else {
            continue;
        };
        if states <= min || states > max {
            continue;
        }
        let path = dir.join(f[0]);
        if !path.is_file() {
            missing.push(f[0].to_string());
            continue;
        }
        rows.push(Beem {
            rel: f[0].to_string(),
            path,
            states,
            transitions: f[4].parse().ok(),
        });
    }
    if !missing.is_empty() {
        let msg = format!(
            "skipped {} BEEM instance(s) whose file is missing: {}",
            missing.len(),
            missing.join(", ")
        );
        assert!(!strict(), "{msg} (CI is set, so this is a failure)");
        eprintln!("{msg}");
    }
    assert!(
        !rows.is_empty() || !strict(),
        "no BEEM instance between {min} and {max} states in REFERENCE.tsv"
    );
    rows.sort_by_key(|r| r.states);
    rows
}

fn config(order: Order, store: StoreKind) -> ExploreConfig {
    ExploreConfig {
        order,
        store: store.config(),
        engine: EngineOptions {
            progress: false,
            threads: 1,
        },
        ..ExploreConfig::default()
    }
}

fn check_beem(rows: &[Beem], order: Order, store: StoreKind) {
    let cfg = config(order, store);
    let mut failures = Vec::new();
    for r in rows {
        match Search::file(&r.path).config(cfg.clone()).run() {
            Ok(s)
                if s.states == r.states
                    && r.transitions.is_none_or(|t| t == s.transitions)
                    && s.exact => {}
            Ok(s) => failures.push(format!(
                "{}: {order:?}/{store:?}: got {} states, {} transitions; expected {} / {:?}",
                r.rel, s.states, s.transitions, r.states, r.transitions
            )),
            Err(e) => failures.push(format!("{}: {order:?}/{store:?}: error {e}", r.rel)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} BEEM instances match REFERENCE.tsv ({order:?}, {store:?})",
        rows.len()
    );
}

const SMALL: u64 = 200_000;
const LARGE: u64 = 3_000_000;

/// Parallel BFS with the DVE front end (each thread forks the model): with two threads every
/// BEEM instance up to 200,000 states gives the reference counts and the native file of a
/// one-thread run, byte for byte.
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn beem_small_bfs_two_threads_write_the_one_thread_lts() {
    let t = tempfile::tempdir().unwrap();
    let rows = beem_rows(0, SMALL);
    let mut differ = Vec::new();
    for r in &rows {
        let mut files = Vec::new();
        for threads in [1, 2] {
            let out = t.path().join(format!("{threads}.slts"));
            let mut cfg = config(Order::Bfs, StoreKind::Full);
            cfg.engine.threads = threads;
            cfg.output = Some(out.clone());
            let s = Search::file(&r.path).config(cfg).run().unwrap();
            assert_eq!(s.states, r.states, "{} threads {threads}", r.rel);
            assert_eq!(s.threads, threads as u64, "{} forks per thread", r.rel);
            if let Some(tr) = r.transitions {
                assert_eq!(s.transitions, tr, "{} threads {threads}", r.rel);
            }
            files.push(std::fs::read(&out).unwrap());
        }
        if files[0] != files[1] {
            differ.push(r.rel.clone());
        }
    }
    assert!(
        differ.is_empty(),
        "two threads wrote another LTS: {differ:?}"
    );
    eprintln!(
        "{} BEEM instances: identical files with one and two threads",
        rows.len()
    );
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn beem_small_bfs_full() {
    check_beem(&beem_rows(0, SMALL), Order::Bfs, StoreKind::Full);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn beem_small_bfs_comback() {
    check_beem(&beem_rows(0, SMALL), Order::Bfs, StoreKind::Comback);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn beem_small_bfs_delta() {
    check_beem(&beem_rows(0, SMALL), Order::Bfs, StoreKind::Delta);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn beem_small_bfs_tree() {
    check_beem(&beem_rows(0, SMALL), Order::Bfs, StoreKind::Tree);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn beem_small_dfs_full() {
    check_beem(&beem_rows(0, SMALL), Order::Dfs, StoreKind::Full);
}

#[test]
#[ignore = "large: run with --ignored (release build)"]
fn beem_large_bfs_full() {
    check_beem(&beem_rows(SMALL, LARGE), Order::Bfs, StoreKind::Full);
}

#[test]
#[ignore = "large: run with --ignored (release build)"]
fn beem_large_bfs_comback() {
    check_beem(&beem_rows(SMALL, LARGE), Order::Bfs, StoreKind::Comback);
}

#[test]
#[ignore = "large: run with --ignored (release build)"]
fn beem_large_bfs_delta() {
    check_beem(&beem_rows(SMALL, LARGE), Order::Bfs, StoreKind::Delta);
}

#[test]
#[ignore = "large: run with --ignored (release build)"]
fn beem_large_bfs_tree() {
    check_beem(&beem_rows(SMALL, LARGE), Order::Bfs, StoreKind::Tree);
}

// ---------------------------------------------------------------------------------------------
// Small models with known state spaces

/// Writes `src` to a temporary `.dve` file and explores it (BFS) with `store`.
fn explore_src(src: &str, store: StoreKind) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.dve");
    std::fs::write(&path, src).unwrap();
    let s = Search::file(&path)
        .config(config(Order::Bfs, store))
        .run()
        .unwrap_or_else(|e| panic!("{e}\n{src}"));
    (s.states, s.transitions)
}

/// The counts with every exact store; they must agree.
fn counts(src: &str) -> (u64, u64) {
    let full = explore_src(src, StoreKind::Full);
    for store in [StoreKind::Comback, StoreKind::Delta, StoreKind::Tree] {
        assert_eq!(explore_src(src, store), full, "{store:?} differs from full");
    }
    full
}

/// An independent breadth-first search: (states, transitions) of the system given by
/// `init` and `succ`.
fn reference_search<S: Clone + Eq + Hash>(init: S, succ: impl Fn(&S) -> Vec<S>) -> (u64, u64) {
    let mut seen = HashSet::from([init.clone()]);
    let mut queue = VecDeque::from([init]);
    let mut edges = 0;
    while let Some(s) = queue.pop_front() {
        for t in succ(&s) {
            edges += 1;
            if seen.insert(t.clone()) {
                queue.push_back(t);
            }
        }
    }
    (seen.len() as u64, edges)
}

#[test]
fn independent_counters_closed_form() {
    // N processes each counting modulo K: K^N states, N·K^N transitions.
    for (n, k) in [(1u32, 7u64), (3, 5), (4, 3)] {
        let mut src = String::new();
        for i in 0..n {
            src.push_str(&format!(
                "process P{i} {{ byte c; state s; init s; trans s -> s {{ effect c = (c + 1) % {k}; }}; }}\n"
            ));
        }
        src.push_str("system async;\n");
        let states = k.pow(n);
        assert_eq!(counts(&src), (states, n as u64 * states), "{src}");
    }
}

#[test]
fn byte_overflow_goes_to_the_error_state() {
    // 0..=255, then 256 does not fit a byte: one more state (the error state), no successor.
    let src =
        "byte x; process P { state s; init s; trans s -> s { effect x = x + 1; }; } system async;";
    assert_eq!(counts(src), (257, 256));
    // An int goes up to 32767.
    let src = "int x = 32760; process P { state s; init s; trans s -> s { effect x = x + 1; }; } system async;";
    assert_eq!(counts(src), (9, 8));
}

#[test]
fn division_by_zero_and_bad_index_go_to_the_error_state() {
    // i = 0, 1, 2 divide by 3 - i; at i = 3 the guard divides by zero: error state.
    let src = "byte i, q; process P { state s; init s; trans s -> s { guard 12 / (3 - i) >= 0; effect q = 12 / (3 - i), i = i + 1; }; } system async;";
    assert_eq!(counts(src), (5, 4));
    // a[i] for i = 0..3 of a 3-element array: the fourth write is out of bounds.
    let src = "byte a[3], i; process P { state s; init s; trans s -> s { effect a[i] = i + 1, i = i + 1; }; } system async;";
    assert_eq!(counts(src), (5, 4));
    // A short-circuited operand never faults.
    let src = "byte a[3], i; process P { state s; init s; trans s -> s { guard i < 3 && a[i] == 0; effect i = i + 1; }; } system async;";
    assert_eq!(counts(src), (4, 3));
}

/// A server taking requests from N clients by rendez-vous, with value passing: client `i`
/// counts `k` up to 2 while thinking, then sends `3i + k` (and resets `k` — after the value
/// was taken, as sender effects come last); the server answers on the client's own channel.
fn clients_src(n: usize) -> String {
    let mut s = String::from("channel req;\n");
    for i in 0..n {
        s.push_str(&format!("channel ack{i};\n"));
    }
    s.push_str("byte served;\nprocess Server { byte who; state idle, busy; init idle; trans\n");
    s.push_str("  idle -> busy { sync req?who; }");
    for i in 0..n {
        s.push_str(&format!(
            ",\n  busy -> idle {{ guard who / 3 == {i}; sync ack{i}!; effect served = (served + who + 1) % 5; }}"
        ));
    }
    s.push_str(";\n}\n");
    for i in 0..n {
        s.push_str(&format!(
            "process Client{i} {{ byte k; state think, wait; init think; trans\n  think -> think {{ guard k < 2; effect k = k + 1; }},\n  think -> wait {{ sync req!({i} * 3 + k); effect k = 0; }},\n  wait -> think {{ sync ack{i}?; }};\n}}\n"
        ));
    }
    s.push_str("system async;\n");
    s
}

/// The same system coded directly: (server busy, who, served, waiting flags, counters).
fn clients_reference(n: usize) -> (u64, u64) {
    type S = (bool, u8, u8, Vec<bool>, Vec<u8>);
    reference_search((false, 0u8, 0u8, vec![false; n], vec![0u8; n]), |s: &S| {
        let (busy, who, served, waiting, k) = s;
        let mut out = Vec::new();
        for i in 0..n {
            if !waiting[i] && k[i] < 2 {
                let mut k2 = k.clone();
                k2[i] += 1;
                out.push((*busy, *who, *served, waiting.clone(), k2));
            }
            if !busy && !waiting[i] {
                let (mut w, mut k2) = (waiting.clone(), k.clone());
                w[i] = true;
                k2[i] = 0;
                out.push((true, 3 * i as u8 + k[i], *served, w, k2));
            }
            if *busy && *who as usize / 3 == i && waiting[i] {
                let mut w = waiting.clone();
                w[i] = false;
                out.push((false, *who, (served + who + 1) % 5, w, k.clone()));
            }
        }
        out
    })
}

#[test]
fn rendezvous_matches_an_independent_search() {
    for n in 1..=4 {
        assert_eq!(counts(&clients_src(n)), clients_reference(n), "{n} clients");
    }
}

#[test]
fn shipped_dve_model_matches_the_independent_search() {
    let path = common::shipped("dve/clients3.dve");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), clients_src(3));
    let s = Search::file(&path)
        .config(config(Order::Bfs, StoreKind::Full))
        .run()
        .unwrap();
    assert_eq!((s.states, s.transitions), clients_reference(3));
    assert_eq!(
        (s.states, s.transitions),
        (1620, 7020),
        "models/README.md lists these"
    );
}

/// A producer sending 1..=m (then 1 again) into a buffered channel of capacity `cap`; the
/// consumer keeps the last value and a running sum modulo 7.
fn buffer_src(cap: usize, m: u8) -> String {
    format!(
        "channel {{byte, int}} c[{cap}];
         process Producer {{ byte n = 1; state p; init p;
             trans p -> p {{ sync c!{{n, 0 - n}}; effect n = n % {m} + 1; }}; }}
         process Consumer {{ byte last; int neg; byte sum; state q; init q;
             trans q -> q {{ sync c?{{last, neg}}; effect sum = (sum + last - neg) % 7; }}; }}
         system async;"
    )
}

fn buffer_reference(cap: usize, m: u8) -> (u64, u64) {
    type S = (u8, VecDeque<u8>, u8, u8);
    reference_search((1u8, VecDeque::new(), 0u8, 0u8), |s: &S| {
        let (n, q, last, sum) = s;
        let mut out = Vec::new();
        if q.len() < cap {
            let mut q2 = q.clone();
            q2.push_back(*n);
            out.push((n % m + 1, q2, *last, *sum));
        }
        if let Some(&v) = q.front() {
            let mut q2 = q.clone();
            q2.pop_front();
            out.push((*n, q2, v, (sum + 2 * v) % 7));
        }
        out
    })
}

#[test]
fn buffered_channels_match_an_independent_search() {
    for (cap, m) in [(1, 3), (2, 4), (3, 2), (4, 3)] {
        assert_eq!(
            counts(&buffer_src(cap, m)),
            buffer_reference(cap, m),
            "capacity {cap}, {m} values"
        );
    }
}

/// Process A steps a -> b -> c -> a where b is committed and c adds to x; B increments y modulo
/// k freely, except while A is in b. With `commit` dropped, B may interleave anywhere.
fn committed_src(k: u8, commit: bool) -> String {
    format!(
        "byte x, y;
         process A {{ state a, b, c; {} init a;
             trans a -> b {{ effect x = (x + 1) % 3; }}, b -> c {{ effect x = (x + y) % 3; }}, c -> a {{}}; }}
         process B {{ state s; init s; trans s -> s {{ effect y = (y + 1) % {k}; }}; }}
         system async;",
        if commit { "commit b;" } else { "" }
    )
}

fn committed_reference(k: u8, commit: bool) -> (u64, u64) {
    reference_search((0u8, 0u8, 0u8), |&(st, x, y)| {
        let mut out = Vec::new();
        match st {
            0 => out.push((1, (x + 1) % 3, y)),
            1 => out.push((2, (x + y) % 3, y)),
            _ => out.push((0, x, y)),
        }
        if !(commit && st == 1) {
            out.push((st, x, (y + 1) % k));
        }
        out
    })
}

#[test]
fn committed_states_match_an_independent_search() {
    for k in [2, 3, 4] {
        for commit in [true, false] {
            assert_eq!(
                counts(&committed_src(k, commit)),
                committed_reference(k, commit),
                "k = {k}, commit = {commit}"
            );
        }
    }
    // The priority makes a difference.
    assert_ne!(committed_reference(3, true), committed_reference(3, false));
}

/// Adjacent swaps that sort an array (each swap removes one inversion), through a temporary
/// variable: effects are sequential, each assignment sees the previous ones.
fn sort_src(init: &[u8]) -> String {
    let n = init.len();
    let list: Vec<String> = init.iter().map(|v| v.to_string()).collect();
    let mut s = format!(
        "byte a[{n}] = {{{}}};\nbyte t;\nprocess Sort {{ byte j; state s; init s; trans\n",
        list.join(", ")
    );
    // One transition per position, and one that picks the position through a variable index.
    let mut swaps: Vec<String> = (0..n - 1)
        .map(|j| {
            format!(
                "  s -> s {{ guard a[{j}] > a[{j} + 1]; effect t = a[{j}], a[{j}] = a[{j} + 1], a[{j} + 1] = t, t = 0; }}"
            )
        })
        .collect();
    swaps.push(
        "  s -> s { guard a[j] > a[j + 1]; effect t = a[j], a[j] = a[j + 1], a[j + 1] = t, t = 0; }"
            .to_string(),
    );
    swaps.push(format!(
        "  s -> s {{ guard j < {}; effect j = j + 1; }}",
        n - 2
    ));
    swaps.push("  s -> s { guard j > 0; effect j = j - 1; }".to_string());
    s.push_str(&swaps.join(",\n"));
    s.push_str(";\n}\nsystem async;\n");
    s
}

#[test]
fn arrays_match_an_independent_search() {
    for init in [vec![3u8, 1, 2, 0], vec![4, 3, 2, 1, 0], vec![2, 2, 1, 3]] {
        let n = init.len();
        let r = reference_search((init.clone(), 0usize), |(a, j): &(Vec<u8>, usize)| {
            let mut out = Vec::new();
            for p in 0..n - 1 {
                if a[p] > a[p + 1] {
                    let mut b = a.clone();
                    b.swap(p, p + 1);
                    out.push((b, *j));
                }
            }
            if a[*j] > a[j + 1] {
                let mut b = a.clone();
                b.swap(*j, j + 1);
                out.push((b, *j));
            }
            if *j < n - 2 {
                out.push((a.clone(), j + 1));
            }
            if *j > 0 {
                out.push((a.clone(), j - 1));
            }
            out
        });
        assert_eq!(counts(&sort_src(&init)), r, "{init:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Independence

/// Checks `dependent` on the first `limit` states (BFS) of `m`: for every two enabled ids
/// `a`, `b` declared independent, firing them in either order gives the same state, each stays
/// enabled after the other — or, when one of them faults into the error state, it faults after
/// the other too (the error state stays reachable under sleep sets). Returns the pairs checked.
fn check_independence(m: &dve::DveModel, limit: usize) -> usize {
    use spillway::{Fired, Model};
    let fire = |s: &[u8], t: TransitionId| -> Option<Vec<u8>> {
        let mut d = Vec::new();
        match m.fire(s, t, &mut d).unwrap() {
            Fired::Enabled(_) => Some(d),
            _ => None,
        }
    };
    let mut init = Vec::new();
    m.initial_state(&mut init).unwrap();
    let mut seen = HashSet::from([init.clone()]);
    let mut queue = VecDeque::from([init]);
    let mut pairs = 0;
    let mut en = Vec::new();
    while let Some(s) = queue.pop_front() {
        m.enabled(&s, &mut en).unwrap();
        for (i, &a) in en.iter().enumerate() {
            for &b in &en[i + 1..] {
                if m.dependent(a, b) {
                    continue;
                }
                assert!(!m.dependent(b, a), "dependent is not symmetric");
                pairs += 1;
                let sa = fire(&s, a).unwrap();
                let sb = fire(&s, b).unwrap();
                let (ea, eb) = (m.is_error_state(&sa), m.is_error_state(&sb));
                if ea || eb {
                    if ea {
                        let sba = fire(&sb, a).expect("a disabled by an independent b");
                        assert!(m.is_error_state(&sba) || eb, "a faults, but not after b");
                    }
                    if eb {
                        let sab = fire(&sa, b);
                        assert!(ea || sab.is_some_and(|x| m.is_error_state(&x)));
                    }
                    continue;
                }
                let sab = fire(&sa, b).unwrap_or_else(|| {
                    panic!(
                        "{:?} disabled by independent {:?} in {}",
                        b,
                        a,
                        m.format_state(&s)
                    )
                });
                let sba = fire(&sb, a).unwrap_or_else(|| {
                    panic!(
                        "{:?} disabled by independent {:?} in {}",
                        a,
                        b,
                        m.format_state(&s)
                    )
                });
                assert_eq!(
                    sab,
                    sba,
                    "{a:?} and {b:?} do not commute in {}",
                    m.format_state(&s)
                );
            }
        }
        for &t in &en {
            let d = fire(&s, t).unwrap();
            if seen.len() < limit && seen.insert(d.clone()) {
                queue.push_back(d);
            }
        }
    }
    pairs
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn independent_transitions_commute_on_beem_and_test_models() {
    let mut checked = 0;
    for src in [
        clients_src(3),
        buffer_src(2, 3),
        committed_src(3, true),
        sort_src(&[3, 1, 2, 0]),
    ] {
        let m = dve::parse(src.as_bytes(), Path::new("m.dve")).unwrap();
        checked += check_independence(&m, 5_000);
    }
    let rows = beem_rows(0, LARGE);
    for r in &rows {
        let m = dve::load(&r.path).unwrap();
        checked += check_independence(&m, 2_000);
    }
    eprintln!(
        "{checked} independent pairs commute ({} BEEM instances)",
        rows.len()
    );
    assert!(checked > 0);
}

// ---------------------------------------------------------------------------------------------
// The CLI: labels, exit codes

/// A model that faults says so at the end of the run (the error state is otherwise one
/// more deadlock), in the summary and in `--stats-json`, in BFS on two threads and in DFS;
/// a model that does not, says nothing.
#[test]
fn reaching_the_error_state_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = dir.path().join("f.dve");
    // x = 0..255, then the increment overflows the byte: the error state.
    std::fs::write(
        &faulty,
        "byte x;\nprocess P { state s; init s; trans s -> s { effect x = x + 1; }; }\nsystem async;\n",
    )
    .unwrap();
    let fine = dir.path().join("c.dve");
    std::fs::write(&fine, clients_src(2)).unwrap();
    for order in ["bfs", "dfs"] {
        for (model, faults) in [(&faulty, true), (&fine, false)] {
            let o = Command::new(bin())
                .args(["explore", model.to_str().unwrap(), "--order", order])
                .args(["--threads", "2", "--no-progress", "--stats-json", "-"])
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success(),
                "{order}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let json = out.find('{').map(|i| &out[i..]).unwrap_or("");
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            if faults {
                assert_eq!(v["states"], 257, "{order}");
                assert_eq!(v["deadlocks"], 1, "{order}");
                assert_eq!(v["error_transition"], "P.s->s", "{order}");
                assert!(
                    out.contains("error state   reached (first found by P.s->s)"),
                    "{out}"
                );
            } else {
                assert!(v["error_transition"].is_null(), "{order}: {v}");
                assert!(!out.contains("error state"), "{out}");
            }
        }
    }
}

#[test]
fn lts_labels_name_both_halves_of_a_rendezvous() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("c.dve");
    std::fs::write(&model, clients_src(2)).unwrap();
    let out = dir.path().join("c.aut");
    let o = Command::new(bin())
        .args([
            "explore",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--no-progress",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("\"Client0.think->wait|Server.idle->busy\""),
        "{text}"
    );
    assert!(
        text.contains("\"Server.busy->idle#2|Client1.wait->think\""),
        "{text}"
    );
}

#[test]
fn malformed_models_exit_3_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    for (src, want) in [
        ("byte x;\nprocess P {\n  state s;\n  init s;\n  trans s -> t {};\n}\nsystem async;\n", ":5:14:"),
        ("byte x\nprocess P { state s; init s; }\nsystem async;\n", ":2:1:"),
        ("process P { state s; init s; }\nsystem async property P;\n", ":2:14: unsupported"),
        ("channel c;\nprocess P { state s; init s; trans s -> s { sync d!; }; }\nsystem async;\n", ":2:50:"),
        // Extra initialisers with no variable after the array to take them (DiVinE's spill
        // into the following variables stays allowed: BEEM's anderson.* needs it).
        ("byte x[2] = {1,2,3};\nprocess P { state a; init a; trans a -> a {}; }\nsystem async;\n", ":1:13: array 'x' has 2 elements and 3 initialisers"),
        ("process P { byte y[1] = {1,2}; state a; init a; trans a -> a {}; }\nsystem async;\n", ":1:25: array 'y' has 1 element and 2 initialisers"),
        ("const byte K[1] = {1, 2};\nprocess P { state a; init a; trans a -> a {}; }\nsystem async;\n", ":1:19: constant array 'K' has 1 element and 2 initialisers"),
    ] {
        let path = dir.path().join("bad.dve");
        std::fs::write(&path, src).unwrap();
        let o = Command::new(bin())
            .args(["explore", path.to_str().unwrap(), "--no-progress"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{src}\n{err}");
        assert!(err.contains(&format!("bad.dve{want}")), "{src}\n{err}");
    }
    // More rendez-vous pairs than transition ids allowed (2^20): refused at the channel.
    let path = dir.path().join("pairs.dve");
    let trans = |what: &str| vec![format!("s -> s {{ {what} }}"); 1025].join(", ");
    let src = format!(
        "channel c;\nprocess S {{ state s; init s; trans {}; }}\nprocess R {{ state s; init s; trans {}; }}\nsystem async;\n",
        trans("sync c!;"),
        trans("sync c?;")
    );
    std::fs::write(&path, src).unwrap();
    let o = Command::new(bin())
        .args(["explore", path.to_str().unwrap(), "--no-progress"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("pairs.dve:1:9: unsupported: more than 1048576 transition ids (1050625)"),
        "{err}"
    );
}

#[test]
fn exact_stores_write_identical_lts_files() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("c.dve");
    std::fs::write(&model, clients_src(3)).unwrap();
    let mut files = Vec::new();
    for store in ["full", "comback", "delta"] {
        let out = dir.path().join(format!("{store}.aut"));
        let o = Command::new(bin())
            .args([
                "explore",
                model.to_str().unwrap(),
                "--store",
                store,
                "-o",
                out.to_str().unwrap(),
                "--no-progress",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        files.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(files[0], files[1]);
    assert_eq!(files[0], files[2]);
}

// ---------------------------------------------------------------------------------------------
// Fuzzing the parser and compiler

/// Sources to mutate: the models above, and the BEEM files when ../shared is there.
fn fuzz_corpus() -> Vec<(String, String)> {
    let mut corpus = vec![
        ("clients".to_string(), clients_src(2)),
        ("buffer".to_string(), buffer_src(2, 3)),
        ("committed".to_string(), committed_src(3, true)),
        ("sort".to_string(), sort_src(&[3, 1, 2])),
    ];
    // The BEEM files join the corpus when the reference models are there (build.rs).
    if let Some(dir) = cfg!(shared_models).then(shared_models).flatten() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("beem"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|family| {
                std::fs::read_dir(family.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "dve"))
            .collect();
        files.sort();
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                corpus.push((f.display().to_string(), text));
            }
        }
    }
    corpus
}

/// Pieces inserted by mutations: DVE tokens and fragments likely to reach rare paths.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ";",
    ",",
    "->",
    "!",
    "?",
    "=",
    "==",
    "/",
    "% 0",
    "[300]",
    "[-1]",
    "guard",
    "effect",
    "sync",
    "commit",
    "state",
    "init",
    "trans",
    "process",
    "byte",
    "int",
    "const",
    "channel",
    "{byte,int}",
    "[0]",
    "[2]",
    "system sync;",
    "system async;",
    "&&",
    "||",
    "imply",
    "not",
    "~",
    "<<",
    ">>",
    "-",
    "65536",
    "2147483647",
    "x",
    "P.s",
    "a->b",
    "/*",
    "*/",
    "//",
    "\n",
    "\u{e9}",
    "\0",
    "1/0",
    "255+1",
];

/// One mutation of a source text, driven by a few random numbers.
#[derive(Clone, Debug)]
enum Mutation {
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        frag: usize,
    },
    Duplicate {
        at: usize,
        len: usize,
        to: usize,
    },
    Replace {
        at: usize,
        byte: u8,
    },
    Swap {
        a: usize,
        b: usize,
        len: usize,
    },
    /// Replaces the `nth` number (counting from a random start) by `value`: mostly keeps the
    /// model well-formed and reaches evaluation errors (0 divisors, bad indices, overflows).
    Number {
        nth: usize,
        value: usize,
    },
    /// Replaces the `nth` operator by another one.
    Operator {
        nth: usize,
        op: usize,
    },
}

const NUMBERS: &[&str] = &[
    "0", "1", "2", "3", "7", "254", "255", "256", "32767", "32768", "65535",
];
const OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^", "<<", ">>", "&&",
    "||", "imply",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    use proptest::prelude::*;
    prop_oneof![
        1 => (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        1 => (any::<usize>(), 0..FRAGMENTS.len()).prop_map(|(at, frag)| Mutation::Insert { at, frag }),
        1 => (any::<usize>(), 1usize..200, any::<usize>())
            .prop_map(|(at, len, to)| Mutation::Duplicate { at, len, to }),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Replace { at, byte }),
        1 => (any::<usize>(), any::<usize>(), 1usize..30).prop_map(|(a, b, len)| Mutation::Swap {
            a,
            b,
            len
        }),
        4 => (any::<usize>(), 0..NUMBERS.len()).prop_map(|(nth, value)| Mutation::Number { nth, value }),
        4 => (any::<usize>(), 0..OPERATORS.len()).prop_map(|(nth, op)| Mutation::Operator { nth, op }),
    ]
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let n = text.len().max(1);
    match *m {
        Mutation::Delete { at, len } => {
            let at = at % n;
            let end = (at + len).min(text.len());
            if at < end {
                text.drain(at..end);
            }
        }
        Mutation::Insert { at, frag } => {
            let at = at % (text.len() + 1);
            let f = format!(" {} ", FRAGMENTS[frag]);
            text.splice(at..at, f.bytes());
        }
        Mutation::Duplicate { at, len, to } => {
            let at = at % n;
            let end = (at + len).min(text.len());
            let piece: Vec<u8> = text.get(at..end).unwrap_or(&[]).to_vec();
            let to = to % (text.len() + 1);
            text.splice(to..to, piece);
        }
        Mutation::Replace { at, byte } => {
            if !text.is_empty() {
                let at = at % text.len();
                text[at] = byte;
            }
        }
        Mutation::Number { nth, value } => {
            // Numbers only, not the digits of identifiers like `P_0`.
            let runs: Vec<_> = runs_where(text, |b| b.is_ascii_digit())
                .into_iter()
                .filter(|&(a, _)| {
                    a == 0 || !(text[a - 1].is_ascii_alphanumeric() || text[a - 1] == b'_')
                })
                .collect();
            if !runs.is_empty() {
                let (a, b) = runs[nth % runs.len()];
                text.splice(a..b, NUMBERS[value].bytes());
            }
        }
        Mutation::Operator { nth, op } => {
            // Binary operators only (not `->`, `=`, or the `!` of a send).
            let runs: Vec<_> = runs_where(text, |b| b"+-*/%<>=!&|^".contains(&b))
                .into_iter()
                .filter(|&(a, b)| OPERATORS.iter().any(|o| o.as_bytes() == &text[a..b]))
                .collect();
            if !runs.is_empty() {
                let (a, b) = runs[nth % runs.len()];
                text.splice(a..b, format!(" {} ", OPERATORS[op]).bytes());
            }
        }
        Mutation::Swap { a, b, len } => {
            if text.len() > 2 * len {
                let a = a % (text.len() - len);
                let b = b % (text.len() - len);
                if a + len <= b || b + len <= a {
                    for i in 0..len {
                        text.swap(a + i, b + i);
                    }
                }
            }
        }
    }
}

/// The maximal runs of bytes satisfying `f`, as ranges.
fn runs_where(text: &[u8], f: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if f(text[i]) {
            let a = i;
            while i < text.len() && f(text[i]) {
                i += 1;
            }
            runs.push((a, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// Explores at most `limit` states of a model that compiled, exercising the evaluator.
fn explore_a_little(m: &dve::DveModel, limit: usize) {
    use spillway::Model;
    let mut init = Vec::new();
    m.initial_state(&mut init).unwrap();
    let mut seen = HashMap::from([(init.clone(), ())]);
    let mut queue = VecDeque::from([init]);
    let mut dst = Vec::new();
    while let Some(s) = queue.pop_front() {
        let mut succ = Vec::new();
        m.successors(&s, &mut |t, _, d| succ.push((t, d.to_vec())))
            .unwrap();
        for (t, d) in succ {
            let _ = m.fire(&s, t, &mut dst).unwrap();
            assert_eq!(dst, d, "fire differs from successors");
            let _ = m.dependent(t, TransitionId(0));
            if seen.len() < limit && seen.insert(d.clone(), ()).is_none() {
                queue.push_back(d);
            }
        }
        let _ = m.format_state(&s);
    }
}

#[test]
fn fuzzed_sources_never_panic_and_errors_have_positions() {
    let corpus = fuzz_corpus();
    let cases = 3000;
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5d; 32]),
    );
    let strategy = (0..corpus.len(), proptest::collection::vec(mutation(), 1..4));
    let position = regex::Regex::new(r"^fuzz\.dve:\d+:\d+: ").unwrap();
    let (mut compiled, mut refused) = (0, 0);
    for _ in 0..cases {
        let (which, muts) = strategy.new_tree(&mut runner).unwrap().current();
        let mut text = corpus[which].1.clone().into_bytes();
        for m in &muts {
            apply(&mut text, m);
        }
        let result = std::panic::catch_unwind(|| match dve::parse(&text, Path::new("fuzz.dve")) {
            Ok(m) => {
                explore_a_little(&m, 300);
                Ok(())
            }
            Err(e) => Err(e),
        });
        match result {
            Ok(Ok(())) => compiled += 1,
            Ok(Err(e)) => {
                refused += 1;
                assert!(
                    matches!(
                        e,
                        ModelError::Syntax { .. } | ModelError::Unsupported { .. }
                    ),
                    "{e:?}"
                );
                assert!(position.is_match(&e.to_string()), "no position: {e}");
            }
            Err(_) => panic!(
                "panic on a mutation of {} ({muts:?}):\n{}",
                corpus[which].0,
                String::from_utf8_lossy(&text)
            ),
        }
    }
    eprintln!("{cases} mutated sources: {compiled} compiled and explored, {refused} refused with a position");
    assert!(compiled > 0 && refused > 0);
}
