//! The suite that means something in a plain clone: every store and order on models the test
//! builds itself, whose counts come from closed forms or from an independent search written
//! here (a plain BFS over markings or LTS states, sharing no code with spillway), in RAM,
//! under a small `--memory`, and checkpointed, killed and resumed. No `../shared` needed.

mod common;

use common::{bin, Arcs, STORES};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A P/T net: initial marking and, per transition, (input arcs, output arcs).
struct Net {
    name: String,
    initial: Vec<u32>,
    transitions: Vec<(Arcs, Arcs)>,
}

impl Net {
    fn pnml(&self) -> String {
        common::pnml(&self.initial, &self.transitions)
    }

    /// The oracle: states, transitions ((marking, enabled transition) pairs) and deadlocks
    /// by a plain BFS.
    fn counts(&self) -> (u64, u64, u64) {
        let mut seen = HashSet::from([self.initial.clone()]);
        let mut queue = VecDeque::from([self.initial.clone()]);
        let (mut edges, mut deadlocks) = (0u64, 0u64);
        while let Some(m) = queue.pop_front() {
            let mut enabled = 0;
            for (ins, outs) in &self.transitions {
                if ins.iter().any(|&(p, w)| m[p] < w) {
                    continue;
                }
                enabled += 1;
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
            edges += enabled;
            deadlocks += (enabled == 0) as u64;
        }
        (seen.len() as u64, edges, deadlocks)
    }
}

/// `tokens` tokens on a ring of `n` places; transition i moves one token on, transition n+i
/// moves two at once, and a last transition is a self-loop on place 0 (parallel paths of
/// different lengths, self-loops).
fn ring(n: usize, tokens: u32) -> Net {
    let mut initial = vec![0; n];
    initial[0] = tokens;
    let mut transitions = Vec::new();
    for w in [1, 2] {
        for i in 0..n {
            transitions.push((vec![(i, w)], vec![((i + 1) % n, w)]));
        }
    }
    transitions.push((vec![(0, 1)], vec![(0, 1)]));
    Net {
        name: format!("ring-{n}-{tokens}"),
        initial,
        transitions,
    }
}

/// A bounded producer/consumer chain with deadlocks: stage i passes items to stage i+1
/// through a buffer of capacity 2; the last stage consumes, the first produces `items`.
fn pipeline(stages: usize, items: u32) -> Net {
    // Places: for each stage a "full" place and a "free" place of its buffer.
    let mut initial = Vec::new();
    for s in 0..stages {
        initial.push(if s == 0 { items } else { 0 });
        initial.push(if s == 0 { 0 } else { 2 });
    }
    let mut transitions = Vec::new();
    for s in 0..stages - 1 {
        let (full, next_full, next_free) = (2 * s, 2 * (s + 1), 2 * (s + 1) + 1);
        let mut outs = vec![(next_full, 1)];
        if s > 0 {
            outs.push((2 * s + 1, 1));
        }
        transitions.push((vec![(full, 1), (next_free, 1)], outs));
    }
    let last = 2 * (stages - 1);
    transitions.push((vec![(last, 1)], vec![(last + 1, 1)]));
    Net {
        name: format!("pipeline-{stages}-{items}"),
        initial,
        transitions,
    }
}

/// A pseudo-random explicit LTS (fixed seed) with unreachable states, self-loops, parallel
/// edges and deadlocks, as `.aut` text, with its reachable counts by the oracle.
fn random_aut(states: u32, edges: u32, seed: u64) -> (String, (u64, u64, u64)) {
    let mut x = seed;
    let mut next = |m: u32| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as u32
    };
    let mut list = Vec::new();
    for _ in 0..edges {
        // Mostly forward edges, so that most states are reachable but some are not.
        let s = next(states);
        let d = if next(10) < 8 {
            (s + 1 + next(5)) % states
        } else {
            next(states)
        };
        list.push((s, next(4), d));
    }
    let mut text = format!("des (0, {}, {states})\n", list.len());
    let mut out: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(s, l, d) in &list {
        text += &format!("({s}, \"a{l}\", {d})\n");
        out.entry(s).or_default().push(d);
    }
    let mut seen = HashSet::from([0u32]);
    let mut queue = VecDeque::from([0u32]);
    let (mut e, mut dead) = (0u64, 0u64);
    while let Some(s) = queue.pop_front() {
        let succ = out.get(&s).cloned().unwrap_or_default();
        e += succ.len() as u64;
        dead += succ.is_empty() as u64;
        for d in succ {
            if seen.insert(d) {
                queue.push_back(d);
            }
        }
    }
    (text, (seen.len() as u64, e, dead))
}

/// The models of this suite, written into `dir`, with their oracle counts.
fn models(dir: &Path) -> Vec<(PathBuf, (u64, u64, u64))> {
    let mut v = Vec::new();
    for net in [ring(7, 5), pipeline(5, 4), ring(4, 12)] {
        let p = dir.join(format!("{}.pnml", net.name));
        std::fs::write(&p, net.pnml()).unwrap();
        v.push((p, net.counts()));
    }
    let (text, counts) = random_aut(3_000, 9_000, 7);
    let p = dir.join("random.aut");
    std::fs::write(&p, text).unwrap();
    v.push((p, counts));
    v
}

fn explore(model: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("explore")
        .arg(model)
        .args(["-q", "--no-progress"])
        .args(args)
        .output()
        .unwrap()
}

fn stats(model: &Path, dir: &Path, args: &[&str]) -> serde_json::Value {
    let f = dir.join("stats.json");
    let mut a = vec!["--stats-json", f.to_str().unwrap()];
    a.extend_from_slice(args);
    let o = explore(model, &a);
    assert!(
        o.status.success(),
        "{} {args:?}: {}",
        model.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
}

fn triple(v: &serde_json::Value) -> (u64, u64, u64) {
    let n = |k: &str| v[k].as_u64().unwrap();
    (n("states"), n("transitions"), n("deadlocks"))
}

/// Every store and order, in RAM and under a small budget (its structures spill), gives the
/// oracle's counts; exact stores write, in BFS, the same native LTS file as the full store.
#[test]
fn every_store_and_order_gives_the_oracle_counts() {
    let t = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (model, expect) in models(t.path()) {
        let reference = t.path().join("full.slts");
        let v = stats(&model, t.path(), &["-o", reference.to_str().unwrap()]);
        assert_eq!(triple(&v), expect, "{} full bfs", model.display());
        for store in STORES {
            for order in ["bfs", "dfs"] {
                for memory in [None, Some("24M")] {
                    let out = t.path().join("out.slts");
                    let mut args = vec!["--store", store, "--order", order];
                    if let Some(m) = memory {
                        args.extend(["--memory", m]);
                    }
                    let writes = *store != "bitstate";
                    if writes {
                        args.extend(["-o", out.to_str().unwrap()]);
                    }
                    let v = stats(&model, t.path(), &args);
                    let label = format!("{} {args:?}", model.display());
                    assert_eq!(triple(&v), expect, "{label}");
                    let exact = v["exact"].as_bool().unwrap();
                    assert_eq!(
                        exact,
                        !["hashcompact", "bitstate"].contains(store),
                        "{label}"
                    );
                    if exact && order == "bfs" {
                        assert!(
                            std::fs::read(&out).unwrap() == std::fs::read(&reference).unwrap(),
                            "{label}: the LTS differs from the full store's"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 4 * STORES.len() * 2 * 2);
}

/// Every store and order, checkpointed and killed with SIGKILL after its first checkpoint,
/// resumes to the counts and (BFS, DFS) the LTS file of an uninterrupted run.
#[test]
fn every_store_resumes_after_sigkill() {
    let t = tempfile::tempdir().unwrap();
    let net = ring(12, 10);
    let expect = net.counts();
    assert!(expect.0 > 300_000, "{expect:?}");
    let model = t.path().join("ring.pnml");
    std::fs::write(&model, net.pnml()).unwrap();
    let mut killed = 0;
    for store in STORES {
        for order in ["bfs", "dfs"] {
            let label = format!("{store} {order}");
            let out = t.path().join(format!("{store}-{order}.aut"));
            let reference = t.path().join(format!("{store}-{order}-ref.aut"));
            let mut common = vec!["--store", store, "--order", order];
            let writes = *store != "bitstate";
            if writes {
                common.extend(["-o", reference.to_str().unwrap()]);
            }
            let v = stats(&model, t.path(), &common);
            assert_eq!(triple(&v), expect, "{label}");
            let run = t.path().join(format!("run-{store}-{order}"));
            let mut args: Vec<&str> = vec![
                "--store",
                store,
                "--order",
                order,
                "--checkpoint-every",
                "0.05s",
                "--workdir",
                run.to_str().unwrap(),
                // Checkpointed with four threads, resumed with one: the checkpoint does not
                // depend on the thread count.
                "--threads",
                "4",
            ];
            if writes {
                args.extend(["-o", out.to_str().unwrap()]);
            }
            let mut child = Command::new(bin())
                .arg("explore")
                .arg(&model)
                .args(["-q", "--no-progress"])
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            let finished = loop {
                if let Some(st) = child.try_wait().unwrap() {
                    assert!(st.success(), "{label}: {st:?}");
                    break true;
                }
                if run.join("manifest").exists() {
                    let _ = child.kill();
                    break child.wait().unwrap().code().is_some();
                }
                assert!(Instant::now() < deadline, "{label}: no checkpoint");
                std::thread::sleep(Duration::from_millis(1));
            };
            if !finished {
                killed += 1;
                let f = t.path().join("resumed.json");
                let o = Command::new(bin())
                    .args([
                        "resume",
                        "-q",
                        "--no-progress",
                        "--threads",
                        "1",
                        "--stats-json",
                    ])
                    .arg(&f)
                    .arg(&run)
                    .output()
                    .unwrap();
                assert!(
                    o.status.success(),
                    "{label}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
                assert_eq!(triple(&v), expect, "{label} resumed");
                assert_eq!(v["resumes"], 1, "{label}");
            }
            if writes {
                assert!(
                    std::fs::read(&out).unwrap() == std::fs::read(&reference).unwrap(),
                    "{label}: the resumed LTS differs from the uninterrupted one"
                );
            }
            assert!(!run.exists(), "{label}: run directory left behind");
        }
    }
    assert!(killed >= 5, "only {killed} of 10 runs were killed mid-way");
}

/// The stores that write an LTS.
const THREADED: &[&str] = &["full", "comback", "delta", "hashcompact", "tree"];

/// Parents with many successors: 17 toggles give every state 17, so a group of 8 parents
/// has 136, more than a thread settles at once (the tree store's slices of 128), and the
/// parallel stores' answers must still be the one-thread run's, in order.
#[test]
fn wide_fanout_groups_give_the_one_thread_file() {
    let t = tempfile::tempdir().unwrap();
    let model = common::toggles_file(t.path(), 17);
    let expect = (1 << 17, 17 << 17, 0);
    for store in ["full", "comback", "tree"] {
        let mut files = Vec::new();
        for threads in ["1", "2"] {
            let out = t.path().join(format!("{store}-{threads}.slts"));
            let args = [
                "--store",
                store,
                "--threads",
                threads,
                "-o",
                out.to_str().unwrap(),
            ];
            let v = stats(&model, t.path(), &args);
            assert_eq!(triple(&v), expect, "{store} {threads}");
            assert_eq!(
                v["threads"].to_string(),
                threads,
                "{store}: ran in parallel"
            );
            files.push(std::fs::read(&out).unwrap());
        }
        assert!(
            files[0] == files[1],
            "{store}: two threads wrote another file"
        );
    }
}

/// `--threads N` changes nothing in the output: every store that writes an LTS gives, in
/// BFS, with 2 and 4 threads the file of a one-thread run, in RAM and under a budget (the
/// full store expands in parallel while its index is in RAM, ComBack and the tree store
/// without a budget; the others, and a spilled index, take the count and run on one thread).
#[test]
fn threads_do_not_change_the_output() {
    let t = tempfile::tempdir().unwrap();
    let mut nets = vec![ring(7, 5), pipeline(5, 4), ring(4, 12), ring(12, 6)];
    let mut checked = 0;
    for net in nets.drain(..) {
        let model = t.path().join(format!("{}.pnml", net.name));
        std::fs::write(&model, net.pnml()).unwrap();
        let expect = net.counts();
        for store in THREADED {
            // In RAM; under a budget (vectors in segment files, read by the threads through
            // the block cache) large enough for every thread's buffers, and under one too
            // small for a second thread's; checkpointed without a budget (vectors in RAM,
            // copied to segment files at each checkpoint: parallel like a run in RAM).
            for mode in ["ram", "128M", "24M", "checkpointed"] {
                let mut files = Vec::new();
                for threads in ["1", "2", "4"] {
                    let out = t.path().join(format!("{store}-{threads}.slts"));
                    let run = t.path().join(format!("run-{store}-{threads}"));
                    let mut args = vec!["--store", store, "--threads", threads];
                    args.extend(["-o", out.to_str().unwrap()]);
                    match mode {
                        "24M" | "128M" => args.extend(["--memory", mode]),
                        "checkpointed" => args.extend([
                            "--checkpoint-every",
                            "0.01s",
                            "--workdir",
                            run.to_str().unwrap(),
                        ]),
                        _ => {}
                    }
                    let label = format!("{} {args:?}", model.display());
                    let v = stats(&model, t.path(), &args);
                    assert_eq!(triple(&v), expect, "{label}");
                    // Only the full store (not under a budget that its threads' buffers
                    // would crowd), ComBack and the tree store (not under a budget at all)
                    // expand in parallel; they must, or this test would compare one-thread
                    // runs with each other.
                    let parallel = match *store {
                        "full" => mode != "24M",
                        "comback" | "tree" => matches!(mode, "ram" | "checkpointed"),
                        _ => false,
                    };
                    let used = if parallel { threads } else { "1" };
                    assert_eq!(v["threads"].to_string(), used, "{label}");
                    files.push((label, std::fs::read(&out).unwrap()));
                }
                for (label, f) in &files[1..] {
                    assert!(
                        *f == files[0].1,
                        "{label}: the LTS differs from the one-thread run's"
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * THREADED.len() * 4);
}

/// Parallel ComBack leaves to the calling thread every lookup its threads cannot settle
/// from the state cache (a fingerprint match not cached, or a cached vector that differs):
/// with 8-bit descriptors and no cache nearly all of them, with 10-bit descriptors many
/// collisions. The files are the full store's, whatever the threads; the runs did use them,
/// and count each successor once (`generated_states` is the transitions plus the initial
/// state, as on one thread).
#[test]
fn comback_threads_settle_undecided_lookups_on_the_calling_thread() {
    let t = tempfile::tempdir().unwrap();
    for net in [ring(7, 5), pipeline(5, 4)] {
        let model = t.path().join(format!("{}.pnml", net.name));
        std::fs::write(&model, net.pnml()).unwrap();
        let full = t.path().join("full.slts");
        stats(
            &model,
            t.path(),
            &["--threads", "1", "-o", full.to_str().unwrap()],
        );
        let full = std::fs::read(&full).unwrap();
        for flags in [
            ["--comback-hash-bits", "8", "--comback-cache", "0"],
            ["--comback-hash-bits", "10", "--comback-cache", "64"],
        ] {
            for threads in ["1", "2", "4"] {
                let out = t.path().join("cb.slts");
                let mut args = vec!["--store", "comback", "--threads", threads];
                args.extend(flags);
                args.extend(["-o", out.to_str().unwrap()]);
                let label = format!("{} {args:?}", net.name);
                let v = stats(&model, t.path(), &args);
                assert_eq!(triple(&v), net.counts(), "{label}");
                assert_eq!(v["threads"].to_string(), threads, "{label}");
                let d = &v["store_details"];
                assert_eq!(
                    d["generated_states"].as_u64(),
                    Some(v["transitions"].as_u64().unwrap() + 1),
                    "{label}"
                );
                assert!(
                    std::fs::read(&out).unwrap() == full,
                    "{label}: not the full store's file"
                );
            }
        }
    }
}

/// Without `-o` parallel BFS numbers only the candidates for new states (the edges are only
/// counted): states, transitions, deadlocks and depth are those of a run that writes the
/// LTS, with 1, 2 and 4 threads, on nets whose levels end inside a chunk's parts and whose
/// chains end in deadlocks.
#[test]
fn runs_without_output_count_what_runs_with_output_count() {
    let t = tempfile::tempdir().unwrap();
    for net in [pipeline(5, 4), ring(12, 6), pipeline(3, 9)] {
        let model = t.path().join(format!("{}.pnml", net.name));
        std::fs::write(&model, net.pnml()).unwrap();
        let expect = net.counts();
        let out = t.path().join("with.slts");
        let with = stats(
            &model,
            t.path(),
            &["--threads", "2", "-o", out.to_str().unwrap()],
        );
        assert_eq!(triple(&with), expect, "{}", net.name);
        for threads in ["1", "2", "4"] {
            let v = stats(&model, t.path(), &["--threads", threads]);
            let label = format!("{} without -o, {threads} threads", net.name);
            assert_eq!(triple(&v), expect, "{label}");
            assert_eq!(v["max_depth"], with["max_depth"], "{label}");
            assert_eq!(v["threads"].to_string(), threads, "{label}");
        }
    }
}

/// Runs `model` with 1, 2 and 4 threads under 128M with the full store's index capped at
/// 8,192 slots (so that it spills), each writing an LTS: every run gives `expect`, resolves
/// its delayed batches on all its threads (`index_threads`) and passes `check(threads,
/// stats)`; the three files are the same, byte for byte.
fn spilled_on_threads(
    dir: &Path,
    model: &Path,
    expect: (u64, u64, u64),
    check: impl Fn(&str, &serde_json::Value),
) {
    let mut files = Vec::new();
    for threads in ["1", "2", "4"] {
        let out = dir.join(format!("spilled-{threads}.slts"));
        let mut args = vec!["--threads", threads, "-o", out.to_str().unwrap()];
        args.extend(["--memory", "128M", "--full-index-slots", "8192"]);
        let v = stats(model, dir, &args);
        assert_eq!(triple(&v), expect, "{threads} threads");
        let d = &v["store_details"];
        assert_eq!(d["index_threads"].to_string(), threads, "{d}");
        check(threads, &v);
        files.push(std::fs::read(&out).unwrap());
    }
    for (threads, f) in ["2", "4"].iter().zip(&files[1..]) {
        assert!(
            *f == files[0],
            "{threads} threads: the LTS differs from 1 thread's"
        );
    }
}

/// Once the full store's index has spilled (under a budget, its table capped at 8,192
/// slots), its delayed batches are expanded (the `bfs.expand` account) and resolved
/// (`index_threads`) on every thread: with 2 and 4 threads the LTS is the one-thread run's,
/// byte for byte.
#[test]
fn spilled_index_batches_on_threads_write_one_file() {
    let t = tempfile::tempdir().unwrap();
    let net = ring(12, 8);
    let model = t.path().join("ring.pnml");
    std::fs::write(&model, net.pnml()).unwrap();
    spilled_on_threads(t.path(), &model, net.counts(), |threads, v| {
        let d = &v["store_details"];
        // Several rotations of the window, and runs looked up on disk.
        assert!(d["index_rotations"].as_u64() > Some(2), "{d}");
        assert!(d["index_disk_found"].as_u64() > Some(0), "{d}");
        let expand = v["structures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "bfs.expand");
        match threads {
            "1" => assert!(expand.is_none(), "one thread expands alone: {expand:?}"),
            _ => assert!(
                expand.is_some_and(|s| s["ram_bytes"].as_u64() > Some(0)),
                "{threads} threads: the delayed batches were not expanded on threads"
            ),
        }
    });
}

/// A spilled index's delayed batches stay within its window when every parent has many
/// successors: 14 toggles and 300 always-enabled self-loops, 314 successors a state, under
/// a budget with an 8,192-slot index. Pieces of 16 parents let each thread run up to 5,024
/// successors past the batch's bound and overflowed the window ("a batch of … successors
/// does not fit the index window", exit 6) before pieces were sized from the fan-out.
#[test]
fn spilled_batches_of_a_wide_fanout_fit_the_window() {
    let t = tempfile::tempdir().unwrap();
    let (k, loops) = (14u32, 300u32);
    let mut text = common::toggles_pnml(k);
    let self_loops: String = (0..loops)
        .map(|i| format!("<transition id=\"loop{i}\"/>\n"))
        .collect();
    text = text.replace("</page>", &format!("{self_loops}</page>"));
    let model = t.path().join("wide.pnml");
    std::fs::write(&model, text).unwrap();
    let states = 1u64 << k;
    let expect = (states, states * (k + loops) as u64, 0);
    spilled_on_threads(t.path(), &model, expect, |_, v| {
        let d = &v["store_details"];
        assert!(d["index_rotations"].as_u64() > Some(0), "{d}");
    });
}

/// Twenty runs with four threads on two cores (heavy interleaving) write the same file,
/// byte for byte, as one thread does.
#[test]
fn twenty_runs_with_four_threads_write_one_file() {
    let t = tempfile::tempdir().unwrap();
    let net = ring(12, 8);
    let expect = net.counts();
    assert!(expect.0 > 50_000, "{expect:?}");
    let model = t.path().join("ring.pnml");
    std::fs::write(&model, net.pnml()).unwrap();
    let one = t.path().join("one.slts");
    let args = ["--threads", "1", "-o", one.to_str().unwrap()];
    assert_eq!(triple(&stats(&model, t.path(), &args)), expect);
    let reference = std::fs::read(&one).unwrap();
    for run in 0..20 {
        let out = t.path().join("four.slts");
        let args = ["--threads", "4", "-o", out.to_str().unwrap()];
        let v = stats(&model, t.path(), &args);
        assert_eq!(triple(&v), expect, "run {run}");
        assert_eq!(v["threads"], 4, "run {run}");
        assert!(
            std::fs::read(&out).unwrap() == reference,
            "run {run} with four threads wrote another file"
        );
    }
}
