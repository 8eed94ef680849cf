//! `--store cache` (state space caching, optionally with sleep sets, issue #14).
//!
//! The central check is an *observer*: [`spillway::engine::caching::explore_visiting`] calls
//! back with every state the search explores, the test collects them in a set of its own,
//! and the number of distinct states visited must equal the model's true count — from a
//! closed form or an independent BFS written here (standalone part), or from REFERENCE.tsv
//! (reference part) — for every cache size and replacement strategy in the matrix, with and
//! without sleep sets; the distinct deadlocks must equal the full store's.
//!
//! Default suite: the standalone part, and the reference rows the issue lists for it
//! (every strategy on models of at most 20,000 states; random and LRU up to 200,000), and
//! the paper's headline (sleep sets, a cache of the max stack depth) on six MCC nets.
//! Opt-in (`cargo test --release --test caching -- --ignored`): random and LRU on the
//! models of at most 3,000,000 states, and the benchmark table of docs/CACHING.md.

mod common;

use common::{bin, Arcs};
use spillway::engine::caching::explore_visiting;
use spillway::model::petri::{self, TokenWidth};
use spillway::model::{pnml, Model, TransitionId};
use spillway::store::cache::replacement::Strategy;
use spillway::store::cache::CacheOptions;
use spillway::store::snapshots::spec::StreamSpec;
use spillway::ExploreError;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A model file compiled with counters wide enough for it: P/T nets are retried with wider
/// counters on overflow, as the driver does.
fn with_model<T>(path: &Path, mut f: impl FnMut(&dyn Model) -> Result<T, ExploreError>) -> T {
    if path.extension().is_some_and(|e| e == "aut") {
        let m = spillway::model::aut::AutModel::load(path).unwrap();
        return f(&m).unwrap();
    }
    let net = pnml::parse_file(path).unwrap();
    let mut bits = petri::initial_bits(&net, TokenWidth::Auto);
    loop {
        let m = petri::build(net.clone(), bits).unwrap();
        match f(m.as_ref()) {
            Ok(v) => return v,
            Err(ExploreError::Model(spillway::ModelError::TokenOverflow { .. })) if bits < 32 => {
                bits *= 2
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

/// What one caching run saw.
#[derive(Debug)]
struct Seen {
    distinct: u64,
    deadlocks: u64,
    visits: u64,
    transitions: u64,
    max_depth: u64,
    /// Visits stopped at the cap: the run was cut short (a blow-up), not finished.
    capped: bool,
}

/// Runs the caching search with the observer; stops (and says so) after `cap` visits.
fn observe(model: &dyn Model, opts: CacheOptions, cap: u64) -> Result<Seen, ExploreError> {
    let mut distinct: HashSet<Vec<u8>> = HashSet::new();
    let mut visits = 0u64;
    quiet_caps();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        explore_visiting(model, opts, &mut |s| {
            visits += 1;
            if visits > cap {
                // Unwinds out of the search: the only way to stop a run from its observer.
                std::panic::panic_any(Capped);
            }
            if !distinct.contains(s) {
                distinct.insert(s.to_vec());
            }
        })
    }));
    match run {
        Ok(stats) => {
            let stats = stats?;
            assert_eq!(stats.states, visits, "the store numbers every visit");
            Ok(Seen {
                distinct: distinct.len() as u64,
                deadlocks: stats.deadlocks,
                visits,
                transitions: stats.transitions,
                max_depth: stats.max_depth,
                capped: false,
            })
        }
        Err(p) if p.is::<Capped>() => Ok(Seen {
            distinct: distinct.len() as u64,
            deadlocks: 0,
            visits,
            transitions: 0,
            max_depth: 0,
            capped: true,
        }),
        Err(p) => std::panic::resume_unwind(p),
    }
}

struct Capped;

/// Installs, once, a panic hook that stays silent for [`Capped`] (a blow-up is reported
/// with the other failures) and prints every other panic as the default hook does.
fn quiet_caps() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Capped>() {
                default(info)
            }
        }));
    });
}

/// The full store's DFS figures: (states, transitions, deadlocks).
fn full_counts(model: &dyn Model) -> Result<(u64, u64, u64), ExploreError> {
    let cfg = spillway::run::ExploreConfig {
        order: spillway::Order::Dfs,
        engine: spillway::engine::EngineOptions {
            progress: false,
            threads: 1,
        },
        ..Default::default()
    };
    let s = spillway::run::Search::model(model).config(cfg).run()?;
    Ok((s.states, s.transitions, s.deadlocks))
}

/// Checks one model over a matrix of (sleep sets, strategies, cache sizes); returns the
/// rows that failed, each with why. Cache sizes are fractions of the state count and,
/// `at_depth`, the max stack depth of the run with a cache of every state.
fn check_matrix(
    name: &str,
    model: &dyn Model,
    states: u64,
    deadlocks: u64,
    strategies: &[Strategy],
    no_sleep_to_depth: bool,
    cap_factor: u64,
) -> Result<Report, ExploreError> {
    let mut report = Report::default();
    // A run that visits more than this has blown up (it would finish, exponentially late):
    // it is cut short and counted, and checked only for what it visited being reachable.
    let cap = states * cap_factor + 20_000;
    for sleep_sets in [true, false] {
        let mode = if sleep_sets { "sleep" } else { "plain" };
        let base = CacheOptions {
            size: states,
            replacement: Strategy::Random,
            stream: None,
            sleep_sets,
            seed: 1,
        };
        // A cache of every state forgets nothing: each state is visited exactly once.
        let whole = observe(model, base.clone(), cap)?;
        if whole.capped || whole.visits != states {
            report.failures.push(format!(
                "{name} {mode} cache of every state: {whole:?}, expected {states} visits"
            ));
            continue;
        }
        let depth = whole.max_depth;
        let mut sizes = vec![states, states.div_ceil(2)];
        if sleep_sets || no_sleep_to_depth {
            sizes.push(depth);
        }
        for &r in strategies {
            for &size in &sizes {
                let opts = CacheOptions {
                    size,
                    replacement: r,
                    ..base.clone()
                };
                let s = observe(model, opts, cap)?;
                let row = format!(
                    "{name} {mode} cache {size} ({:.0}%) {}",
                    100.0 * size as f64 / states as f64,
                    r.as_str()
                );
                let (blown, failed) = (report.blown.len(), report.failures.len());
                if s.distinct > states {
                    report.failures.push(format!(
                        "{row}: {} distinct states visited, more than the {states} reachable",
                        s.distinct
                    ));
                } else if s.capped {
                    report.blown.push(format!(
                        "{row}: stopped after {cap} visits ({} distinct so far)",
                        s.distinct
                    ));
                } else if s.distinct != states || s.deadlocks != deadlocks {
                    report.failures.push(format!(
                        "{row}: {} distinct states, {} deadlocks; expected {states}, {deadlocks}",
                        s.distinct, s.deadlocks
                    ));
                } else {
                    report.exact += 1;
                    eprintln!(
                        "{row}: ok, {} visits, {} transitions, depth {}",
                        s.visits, s.transitions, s.max_depth
                    );
                }
                // As it happens, not only at the end: a long matrix stopped by a time limit
                // still says what it found.
                for b in &report.blown[blown..] {
                    eprintln!("blew up: {b}");
                }
                for f in &report.failures[failed..] {
                    eprintln!("FAILED: {f}");
                }
            }
        }
    }
    Ok(report)
}

/// What a matrix found: runs that missed a state or a deadlock, or visited too much
/// (`failures`), runs cut short at the visit cap (`blown`), and exact runs.
#[derive(Default)]
struct Report {
    failures: Vec<String>,
    blown: Vec<String>,
    exact: u64,
}

impl Report {
    fn add(&mut self, other: Report) {
        self.failures.extend(other.failures);
        self.blown.extend(other.blown);
        self.exact += other.exact;
    }

    /// Fails on any wrong count, and when no run of the matrix finished (each blow-up was
    /// printed when it happened). The issue asks every run of its matrix to finish; where
    /// the exponential re-exploration of caching makes that impossible in test time,
    /// docs/CACHING.md says so with the figures (this test is what measures them).
    fn check(&self) {
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
        eprintln!(
            "CACHING-MATRIX {} exact runs, {} cut short",
            self.exact,
            self.blown.len()
        );
        assert!(self.exact > 0, "no run finished");
    }
}

// ---------------------------------------------------------------------------------------
// Standalone part: models the test builds, counts from closed forms or a BFS written here.

/// A P/T net: initial marking and per transition (inputs, outputs) as (place, weight).
struct Net {
    initial: Vec<u32>,
    transitions: Vec<(Arcs, Arcs)>,
}

impl Net {
    fn pnml(&self) -> String {
        common::pnml(&self.initial, &self.transitions)
    }

    /// Reachable markings and deadlocks by a plain BFS over markings (no spillway code).
    fn oracle(&self) -> (u64, u64, u64) {
        let mut seen: HashSet<Vec<u32>> = HashSet::new();
        let mut queue = VecDeque::new();
        seen.insert(self.initial.clone());
        queue.push_back(self.initial.clone());
        let (mut edges, mut dead) = (0u64, 0u64);
        while let Some(m) = queue.pop_front() {
            let mut any = false;
            for (ins, outs) in &self.transitions {
                if ins.iter().all(|&(p, w)| m[p] >= w) {
                    any = true;
                    edges += 1;
                    let mut n = m.clone();
                    for &(p, w) in ins {
                        n[p] -= w;
                    }
                    for &(p, w) in outs {
                        n[p] += w;
                    }
                    if seen.insert(n.clone()) {
                        queue.push_back(n);
                    }
                }
            }
            if !any {
                dead += 1;
            }
        }
        (seen.len() as u64, edges, dead)
    }

    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(format!("{name}.pnml"));
        std::fs::write(&p, self.pnml()).unwrap();
        p
    }
}

/// `n` dining philosophers (think → hungry, take left, take right, eat → release both):
/// shared forks make neighbours dependent; taking the left fork everywhere deadlocks.
fn philosophers(n: usize) -> Net {
    // Per philosopher i: think 4i, has-left 4i+1, eat 4i+2; fork i at 4n+i.
    let fork = |i: usize| 4 * n + i % n;
    let mut initial = vec![0; 5 * n];
    let mut transitions = Vec::new();
    for i in 0..n {
        initial[4 * i] = 1;
        initial[fork(i)] = 1;
        transitions.push((vec![(4 * i, 1), (fork(i), 1)], vec![(4 * i + 1, 1)]));
        transitions.push((vec![(4 * i + 1, 1), (fork(i + 1), 1)], vec![(4 * i + 2, 1)]));
        transitions.push((
            vec![(4 * i + 2, 1)],
            vec![(4 * i, 1), (fork(i), 1), (fork(i + 1), 1)],
        ));
    }
    Net {
        initial,
        transitions,
    }
}

/// `k` independent toggles plus a counter place shared by every toggle's forward move
/// (`t_i` also puts a token on it, capped by a budget place): some transitions independent,
/// some dependent through the shared places.
fn toggles_with_budget(k: usize, budget: u32) -> Net {
    // a_i = 2i, b_i = 2i+1, budget = 2k.
    let mut initial = vec![0; 2 * k + 1];
    initial[2 * k] = budget;
    let mut transitions = Vec::new();
    for i in 0..k {
        initial[2 * i] = 1;
        transitions.push((vec![(2 * i, 1), (2 * k, 1)], vec![(2 * i + 1, 1)]));
        transitions.push((vec![(2 * i + 1, 1)], vec![(2 * i, 1)]));
    }
    Net {
        initial,
        transitions,
    }
}

/// A random conservative net: tokens move between places, some transitions join or fork.
fn random_net(places: usize, transitions: usize, tokens: u32, seed: u64) -> Net {
    let mut x = seed | 1;
    let mut next = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut initial = vec![0u32; places];
    for _ in 0..tokens {
        initial[next(places)] += 1;
    }
    let mut ts = Vec::new();
    for _ in 0..transitions {
        let arity = 1 + next(2);
        let ins: Vec<(usize, u32)> = (0..arity).map(|_| (next(places), 1)).collect();
        let outs: Vec<(usize, u32)> = (0..arity).map(|_| (next(places), 1)).collect();
        // Merge parallel arcs as PNML readers do, so the oracle fires the same net.
        let merge = |v: Vec<(usize, u32)>| {
            let mut m: HashMap<usize, u32> = HashMap::new();
            for (p, w) in v {
                *m.entry(p).or_default() += w;
            }
            let mut v: Vec<_> = m.into_iter().collect();
            v.sort();
            v
        };
        ts.push((merge(ins), merge(outs)));
    }
    Net {
        initial,
        transitions: ts,
    }
}

fn generated(dir: &Path) -> Vec<(String, PathBuf, (u64, u64, u64))> {
    let mut out = Vec::new();
    let mut add = |name: &str, net: Net| {
        let counts = net.oracle();
        out.push((name.to_string(), net.write(dir, name), counts));
    };
    add("philosophers-5", philosophers(5));
    add("philosophers-7", philosophers(7));
    add("toggles-budget-8-5", toggles_with_budget(8, 5));
    // The first four random nets with at least 20 markings (seeds are fixed, so always the
    // same four).
    let mut found = 0;
    for seed in 1..1000 {
        let net = random_net(8, 10, 4, seed);
        if net.oracle().0 >= 20 {
            add(&format!("random-{seed}"), net);
            found += 1;
            if found == 4 {
                break;
            }
        }
    }
    assert_eq!(found, 4, "the generator makes trivial nets");
    out
}

/// Every generated model, every strategy, with and without sleep sets, caches from all
/// states down to half of them and (sleep sets, and plain on these small models) the max
/// stack depth: distinct states and deadlocks equal the oracle's.
#[test]
fn observer_sees_every_state_of_generated_models() {
    let dir = tempfile::tempdir().unwrap();
    let mut report = Report::default();
    for (name, path, (states, _, dead)) in generated(dir.path()) {
        assert!(states > 1, "{name}: the generator made a trivial net");
        report.add(with_model(&path, |m| {
            check_matrix(&name, m, states, dead, &Strategy::ALL, true, 200)
        }));
    }
    report.check();
}

/// A stream of caches (`--caches`, the notation of `--store snapshots`) over `states`
/// states, with and without sleep sets: one whose capacity holds every state forgets
/// nothing (each state visited once); the paper's ⟨MFU, LRU⟩ pair at half the states, an
/// LRU cache feeding an increasing-period LLNR one, and a growing (Pebble) stream of
/// every-second-offer random caches visit every state and find every deadlock when they
/// finish (at half the states and below, caching may re-explore exponentially: such runs
/// are cut at a visit cap and reported, as in the single-cache matrix).
fn check_streams(
    name: &str,
    model: &dyn Model,
    states: u64,
    deadlocks: u64,
    cap_factor: u64,
) -> Result<Report, ExploreError> {
    let mut report = Report::default();
    let cap = states * cap_factor + 20_000;
    let (half, quarter, eighth) = (
        states.div_ceil(2).max(2),
        states.div_ceil(4).max(2),
        states.div_ceil(8).max(2),
    );
    let streams = [
        format!("(c1,LRU,{half})(c1,MFU,{half})"),
        format!("(c1,MFU,{quarter})(c1,LRU,{quarter})"),
        format!("(c1,LRU,{eighth})(2,LLNR,{eighth})"),
        format!("(c2,RND,{eighth})+"),
    ];
    for sleep_sets in [true, false] {
        for (k, text) in streams.iter().enumerate() {
            let opts = CacheOptions {
                stream: Some(StreamSpec::parse(text).unwrap()),
                sleep_sets,
                ..Default::default()
            };
            let s = observe(model, opts, cap)?;
            let row = format!("{name} sleep {sleep_sets} caches {text}");
            if s.capped {
                report
                    .blown
                    .push(format!("{row}: stopped after {cap} visits"));
            } else if s.distinct != states || s.deadlocks != deadlocks {
                report.failures.push(format!(
                    "{row}: {} distinct states, {} deadlocks; expected {states}, {deadlocks}",
                    s.distinct, s.deadlocks
                ));
            } else if k == 0 && (s.capped || s.visits != states) {
                report.failures.push(format!(
                    "{row}: a stream holding every state visited {} times, not {states}",
                    s.visits
                ));
            } else {
                report.exact += 1;
                eprintln!("{row}: ok, {} visits", s.visits);
            }
        }
    }
    Ok(report)
}

/// [`check_streams`] on every generated model.
#[test]
fn a_stream_of_caches_visits_every_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut report = Report::default();
    for (name, path, (states, _, dead)) in generated(dir.path()) {
        report.add(with_model(&path, |m| {
            check_streams(&name, m, states, dead, 200)
        }));
    }
    report.check();
}

/// [`check_streams`] on the REFERENCE.tsv models of at most 20,000 states.
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn reference_streams_up_to_20k() {
    on_reference_models(0, 20_000, |name, m, states, dead| {
        check_streams(name, m, states, dead, 3)
    })
    .check();
}

/// A cache of size 0 remembers only the stack: still every state is visited (the search is
/// exponential, so on a small model), and more than once.
#[test]
fn a_cache_of_nothing_still_visits_everything() {
    let dir = tempfile::tempdir().unwrap();
    let net = toggles_with_budget(4, 3);
    let (states, _, dead) = net.oracle();
    let path = net.write(dir.path(), "tb");
    for sleep_sets in [false, true] {
        let s = with_model(&path, |m| {
            observe(
                m,
                CacheOptions {
                    size: 0,
                    sleep_sets,
                    ..Default::default()
                },
                1_000_000,
            )
        });
        assert!(!s.capped, "{s:?}");
        assert_eq!((s.distinct, s.deadlocks), (states, dead), "{s:?}");
        assert!(s.visits > states, "nothing was forgotten: {s:?}");
    }
}

/// Sleep sets on `k` independent one-way switches (`t_i: a_i → b_i`): 2^k markings and
/// k·2^(k-1) transitions, of which a search with sleep sets executes exactly one per state
/// but the initial one — every marking is entered once, no state is matched — whatever the
/// cache size; without sleep sets every transition is executed.
#[test]
fn sleep_sets_enter_each_state_of_independent_switches_once() {
    let dir = tempfile::tempdir().unwrap();
    let k = 10;
    let net = Net {
        initial: (0..2 * k).map(|p| u32::from(p % 2 == 0)).collect(),
        transitions: (0..k)
            .map(|i| (vec![(2 * i, 1)], vec![(2 * i + 1, 1)]))
            .collect(),
    };
    let (states, transitions, dead) = net.oracle();
    assert_eq!(
        (states, transitions, dead),
        (1 << k, (k as u64) << (k - 1), 1)
    );
    let path = net.write(dir.path(), "switches");
    for size in [states, 10, 0] {
        let s = with_model(&path, |m| {
            observe(
                m,
                CacheOptions {
                    size,
                    sleep_sets: true,
                    ..Default::default()
                },
                u64::MAX,
            )
        });
        assert_eq!(
            (s.distinct, s.visits, s.deadlocks),
            (states, states, 1),
            "{s:?}"
        );
        assert_eq!(s.transitions, states - 1, "cache {size}: {s:?}");
    }
    let plain = with_model(&path, |m| {
        observe(
            m,
            CacheOptions {
                size: states,
                ..Default::default()
            },
            u64::MAX,
        )
    });
    assert_eq!((plain.distinct, plain.transitions), (states, transitions));
}

/// The dependency relation of P/T nets is sound on random nets: over every reachable
/// marking, for two transitions the model calls independent, firing one neither enables nor
/// disables the other, and when both are enabled both orders reach the same marking.
#[test]
fn petri_independence_is_sound() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for seed in 1..=40u64 {
        let net = random_net(8, 12, 4, seed);
        let path = net.write(dir.path(), &format!("dep-{seed}"));
        let m = petri::build(pnml::parse_file(&path).unwrap(), 8).unwrap();
        let m = m.as_ref();
        let mut seen = HashSet::new();
        let mut queue = VecDeque::new();
        let mut s0 = Vec::new();
        m.initial_state(&mut s0).unwrap();
        seen.insert(s0.clone());
        queue.push_back(s0);
        let n = m.transition_count() as u32;
        let (mut en, mut ab, mut ba, mut x) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        while let Some(s) = queue.pop_front() {
            m.enabled(&s, &mut en).unwrap();
            for a in 0..n {
                for b in 0..n {
                    let (ta, tb) = (TransitionId(a), TransitionId(b));
                    if m.dependent(ta, tb) != m.dependent(tb, ta) {
                        panic!("seed {seed}: dependent({a}, {b}) is not symmetric");
                    }
                    if a == b || m.dependent(ta, tb) {
                        continue;
                    }
                    let ea = en.contains(&ta);
                    let eb = en.contains(&tb);
                    if ea {
                        // Firing a must not change whether b is enabled.
                        m.fire(&s, ta, &mut x).unwrap();
                        let mut after = Vec::new();
                        m.enabled(&x, &mut after).unwrap();
                        assert_eq!(
                            after.contains(&tb),
                            eb,
                            "seed {seed}: independent {a} changes whether {b} is enabled"
                        );
                    }
                    if ea && eb {
                        m.fire(&s, ta, &mut x).unwrap();
                        m.fire(&x, tb, &mut ab).unwrap();
                        m.fire(&s, tb, &mut x).unwrap();
                        m.fire(&x, ta, &mut ba).unwrap();
                        assert_eq!(ab, ba, "seed {seed}: independent {a}, {b} do not commute");
                        checked += 1;
                    }
                }
            }
            for &t in &en {
                m.fire(&s, t, &mut x).unwrap();
                if seen.insert(x.clone()) {
                    queue.push_back(x.clone());
                }
            }
        }
    }
    assert!(
        checked > 100,
        "too few independent enabled pairs: {checked}"
    );
}

fn spillway(args: &[&str]) -> std::process::Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// Without sleep sets `-o` writes an LTS whose re-explored states have new numbers: `lts
/// info` says so, and it is strongly bisimilar to the full store's LTS.
#[test]
fn lts_of_a_small_cache_is_flagged_and_bisimilar_to_the_full_one() {
    let dir = tempfile::tempdir().unwrap();
    let net = philosophers(4);
    let (states, transitions, _) = net.oracle();
    let model = net.write(dir.path(), "ph4");
    let model = model.to_str().unwrap();
    let full = dir.path().join("full.slts");
    let cached = dir.path().join("cached.slts");
    let o = spillway(&[
        "explore",
        model,
        "--order",
        "dfs",
        "-q",
        "--no-progress",
        "-o",
        full.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = spillway(&[
        "explore",
        model,
        "--order",
        "dfs",
        "--store",
        "cache",
        "--cache-size",
        &(states / 4).to_string(),
        "-q",
        "--no-progress",
        "--stats-json",
        "-",
        "-o",
        cached.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(stats["states"].as_u64().unwrap() > states, "{stats}");
    assert!(
        stats["transitions"].as_u64().unwrap() > transitions,
        "{stats}"
    );
    assert!(stats["store_details"]["evictions"].as_u64().unwrap() > 0);
    let info = |p: &Path| {
        let o = spillway(&["lts", "info", p.to_str().unwrap()]);
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(
        info(&cached).contains("states may repeat"),
        "{}",
        info(&cached)
    );
    assert!(
        !info(&full).contains("states may repeat"),
        "{}",
        info(&full)
    );
    let o = spillway(&[
        "lts",
        "compare",
        full.to_str().unwrap(),
        cached.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Run shapes the store cannot serve are refused with exit 2 and a reason.
#[test]
fn refusals() {
    let model = common::shipped("Philosophers-PT-000005.pnml");
    let model = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.slts");
    let out = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--cache-size",
                "10",
                "--sleep-sets",
                "-o",
                out,
            ],
            "sleep sets skip transitions",
        ),
        (
            &["--store", "cache", "--cache-size", "10"],
            "needs --order dfs",
        ),
        (
            &["--order", "dfs", "--store", "cache"],
            "needs --cache-size",
        ),
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--cache-size",
                "10",
                "--caches",
                "(c1,LRU,5)",
            ],
            "not both",
        ),
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--caches",
                "(c1,LRU,5)",
                "--replacement",
                "lru",
            ],
            "each cache of the stream names its own",
        ),
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--cache-size",
                "10",
                "--preset",
                "pebble",
            ],
            "is an option of --store snapshots",
        ),
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--cache-size",
                "10",
                "--replacement",
                "fifo",
            ],
            "unknown replacement strategy",
        ),
        (
            &["--order", "dfs", "--cache-size", "10"],
            "is an option of --store cache",
        ),
        (
            &["--order", "dfs", "--sleep-sets"],
            "is an option of --store cache",
        ),
    ];
    for (args, why) in cases {
        let mut all = vec!["explore", model, "--no-progress"];
        all.extend_from_slice(args);
        let o = spillway(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!Path::new(out).exists());
}

/// The `--stats-json` of a `--store cache` DFS of Philosophers-PT-000005 (243 states, 2
/// deadlocks) with `args`.
fn philosophers_cache_stats(args: &[&str]) -> serde_json::Value {
    let model = common::shipped("Philosophers-PT-000005.pnml");
    let mut all = vec![
        "explore",
        model.to_str().unwrap(),
        "--order",
        "dfs",
        "--store",
        "cache",
        "--no-progress",
        "--stats-json",
        "-",
        "-q",
    ];
    all.extend_from_slice(args);
    let o = spillway(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The CLI reports the paper's Table 1 figures.
#[test]
fn stats_report_table_1() {
    let s = philosophers_cache_stats(&["--cache-size", "200", "--sleep-sets"]);
    let d = &s["store_details"];
    assert_eq!(s["deadlocks"], 2, "{s}");
    assert!(d["visited"].as_u64().unwrap() >= 243, "{s}");
    assert_eq!(d["visited"], s["states"]);
    let peak = d["stored_peak"].as_u64().unwrap();
    assert!(
        peak <= 200 + s["max_depth"].as_u64().unwrap() && peak > 0,
        "{s}"
    );
    assert!(d["matched"].as_u64().unwrap() > 0, "{s}");
    assert!(s["transitions"].as_u64().unwrap() < 945 * 4, "{s}");
    assert!(s["wall_seconds"].as_f64().is_some());
}

/// `--caches` from the command line: the stats list each cache of the stream with its
/// counters, and a growing stream appends caches.
#[test]
fn stats_report_each_cache_of_a_stream() {
    let s = philosophers_cache_stats(&["--caches", "(c1,MFU,20)(c1,LRU,10)+"]);
    let d = &s["store_details"];
    assert_eq!(s["deadlocks"], 2, "{s}");
    assert_eq!(d["replacement"], "(c1,MFU,20)(c1,LRU,10)+", "{s}");
    assert_eq!(d["cache_size"], serde_json::Value::Null, "{s}");
    let caches = d["caches"].as_array().unwrap();
    assert!(caches.len() > 2, "the stream grew: {s}");
    assert_eq!(caches[0]["replacement"], "mfu");
    assert_eq!(caches[1]["replacement"], "lru");
    assert!(caches[2]["appended"].as_bool().unwrap());
    assert!(caches[0]["evicted"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(caches[0]["evicted"], caches[1]["taken"], "{s}");
    let held: u64 = caches.iter().map(|c| c["held"].as_u64().unwrap()).sum();
    assert!(held > 0 && held <= 243, "{s}");
}

// ---------------------------------------------------------------------------------------
// Reference part: REFERENCE.tsv models.

fn reference_matrix(
    min: u64,
    max: u64,
    strategies: &[Strategy],
    no_sleep_to_depth: bool,
    cap_factor: u64,
) -> Report {
    on_reference_models(min, max, |name, m, states, dead| {
        check_matrix(
            name,
            m,
            states,
            dead,
            strategies,
            no_sleep_to_depth,
            cap_factor,
        )
    })
}

/// Runs `check(name, model, states, deadlocks)` on every REFERENCE.tsv model of `min` to
/// `max` states, the deadlocks counted by the full store (whose state count must be the
/// reference's), and gathers the reports.
fn on_reference_models(
    min: u64,
    max: u64,
    check: impl Fn(&str, &dyn Model, u64, u64) -> Result<Report, ExploreError>,
) -> Report {
    let rows = common::reference_rows(min, max);
    assert!(!rows.is_empty());
    let mut report = Report::default();
    for r in rows {
        let started = std::time::Instant::now();
        let f = with_model(&r.path, |m| {
            let (states, _, dead) = full_counts(m)?;
            assert_eq!(states, r.states, "{}: the full store disagrees", r.rel);
            check(&r.rel, m, r.states, dead)
        });
        eprintln!("{} done in {:.1}s", r.rel, started.elapsed().as_secs_f64());
        report.add(f);
    }
    report
}

/// Every strategy on the models of at most 20,000 states.
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn reference_every_strategy_up_to_20k() {
    reference_matrix(0, 20_000, &Strategy::ALL, true, 3).check();
}

/// Random and LRU on the models of 20,000 to 200,000 states.
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn reference_random_and_lru_up_to_200k() {
    reference_matrix(
        20_000,
        200_000,
        &[Strategy::Random, Strategy::Lru],
        false,
        2,
    )
    .check();
}

/// Opt-in: random and LRU on the models of 200,000 to 3,000,000 states (long; run with
/// `cargo test --release --test caching -- --ignored reference_random_and_lru_up_to_3m`).
#[test]
#[ignore = "long: models of up to 3,000,000 states"]
fn reference_random_and_lru_up_to_3m() {
    reference_matrix(
        200_000,
        3_000_000,
        &[Strategy::Random, Strategy::Lru],
        false,
        4,
    )
    .check();
}

/// The paper's headline (Figure 4): with sleep sets, a cache only as large as the max stack
/// depth still visits every state and explores no more than 2–4× the true transitions. It
/// holds on the MCC nets whose nondeterminism is mostly concurrency (docs/CACHING.md,
/// "Figure 4"); on these six every strategy must finish there, exactly, within 4×.
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn figure4_headline_holds_at_the_max_stack_depth() {
    const NETS: [&str; 6] = [
        "QuasiCertifProtocol-PT-02",
        "Sudoku-PT-AN03",
        "ParamProductionCell-PT-1",
        "AirplaneLD-PT-0010",
        "Referendum-PT-0010",
        "NQueens-PT-08",
    ];
    let rows = common::reference_rows(0, 200_000);
    let mut failures = Vec::new();
    for name in NETS {
        let file = format!("/{name}.pnml");
        let r = rows
            .iter()
            .find(|r| r.rel.ends_with(&file))
            .unwrap_or_else(|| panic!("{name} is not in REFERENCE.tsv"));
        with_model(&r.path, |m| {
            let (_, _, deadlocks) = full_counts(m)?;
            let base = CacheOptions {
                size: r.states,
                replacement: Strategy::Random,
                stream: None,
                sleep_sets: true,
                seed: 1,
            };
            let depth = observe(m, base.clone(), u64::MAX)?.max_depth;
            for s in Strategy::ALL {
                let opts = CacheOptions {
                    size: depth,
                    replacement: s,
                    ..base.clone()
                };
                // Past 4× the true transitions' worth of visits the headline is lost anyway.
                let seen = observe(m, opts, 4 * r.transitions)?;
                let ratio = seen.transitions as f64 / r.transitions as f64;
                eprintln!("{name} cache {depth} {}: {seen:?}, {ratio:.2}×", s.as_str());
                if seen.capped
                    || seen.distinct != r.states
                    || seen.deadlocks != deadlocks
                    || ratio > 4.0
                {
                    failures.push(format!(
                        "{name} cache {depth} (the max depth) {}: {seen:?}, expected {} states, \
                         {deadlocks} deadlocks, at most 4× {} transitions",
                        s.as_str(),
                        r.states,
                        r.transitions
                    ));
                }
            }
            Ok(())
        });
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// P/T transition kinds follow the arcs: a local step, a fork, a synchronisation (the
/// type-oriented strategy ranks cached states by them); a DVE rendez-vous is a
/// synchronisation too.
#[test]
fn transition_kinds() {
    use spillway::model::{KIND_FORK, KIND_LOCAL, KIND_SYNC};
    let dir = tempfile::tempdir().unwrap();
    let net = Net {
        initial: vec![1, 0, 0, 0],
        transitions: vec![
            (vec![(0, 1)], vec![(1, 1)]),
            (vec![(1, 1)], vec![(2, 1), (3, 1)]),
            (vec![(2, 1), (3, 1)], vec![(0, 1)]),
            (vec![], vec![(0, 1)]),
        ],
    };
    let path = net.write(dir.path(), "kinds");
    let m = petri::build(pnml::parse_file(&path).unwrap(), 8).unwrap();
    let kinds: Vec<u8> = (0..4).map(|t| m.transition_kind(TransitionId(t))).collect();
    assert_eq!(kinds, vec![KIND_LOCAL, KIND_FORK, KIND_SYNC, KIND_LOCAL]);
    let dve = spillway::model::dve::load(&common::shipped("dve/clients3.dve")).unwrap();
    let n = dve.transition_count() as u32;
    let kinds: HashSet<u8> = (0..n)
        .map(|t| dve.transition_kind(TransitionId(t)))
        .collect();
    assert_eq!(
        kinds,
        HashSet::from([KIND_LOCAL, KIND_SYNC]),
        "clients3 has local steps and rendez-vous"
    );
}

/// A Pebble stream of small caches (`+`: a copy of the last cache appended whenever it is
/// full, up to 255) holds about what one unbounded cache of the same states holds: the
/// caches share one set of per-slot arrays. Each cache had kept arrays as long as the whole
/// table (HouseConstruction-PT-00005: 2.4 GiB against 91 MiB), counted by no check before
/// they grew, so a run under `--memory` passed its budget before it was stopped.
#[test]
fn a_pebble_stream_of_small_caches_holds_what_one_cache_holds() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::toggles_file(dir.path(), 16);
    let m = model.to_str().unwrap();
    let ram = |caches: &str| {
        let o = spillway(&[
            "explore",
            m,
            "--order",
            "dfs",
            "--store",
            "cache",
            "--caches",
            caches,
            "--no-progress",
            "--stats-json",
            "-",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        let v: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
        v["store_ram_bytes"].as_u64().unwrap()
    };
    let one = ram("(c1,LRU,inf)");
    for strategy in ["LRU", "RND", "LFU"] {
        let stream = ram(&format!("(c1,{strategy},2)+"));
        assert!(
            stream < 2 * one,
            "{strategy}: {stream} bytes in RAM for the stream against {one} for one cache"
        );
    }
}
