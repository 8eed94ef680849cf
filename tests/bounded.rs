//! Bounded RAM (issue #19): the index of the full store, ComBack, Δ and hash compaction spills to sorted runs
//! on disk under a budget far below what the index needs (the tree store hands its states
//! over to the full store's disk path when its tables outgrow their share), and the run stays exact — same counts, the same
//! LTS file as an unbounded run, peak RSS within the budget plus the binary's baseline — also
//! across a checkpoint taken after the index spilled. Generated models only: no `../shared`.

mod common;

use common::{bin, run_measured, same_file, toggles_file};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn explore_json(
    model: &Path,
    dir: &Path,
    name: &str,
    args: &[&str],
) -> (common::Measured, serde_json::Value) {
    let f = dir.join(format!("{name}.json"));
    let m = run_measured(
        Command::new(bin())
            .arg("explore")
            .arg(model)
            .args(["-q", "--no-progress", "--stats-json"])
            .arg(&f)
            .args(args),
    );
    assert_eq!(m.code, Some(0), "{name} {args:?}: {}", m.stderr());
    let v = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    (m, v)
}

/// The stores whose index spills, each with its hidden option that caps the index table
/// (the tree store's also hands its states over to the full store at that many states).
const SPILLING: [(&str, &str); 5] = [
    ("full", "--full-index-slots"),
    ("comback", "--comback-index-slots"),
    ("delta", "--delta-index-slots"),
    ("hashcompact", "--hashcompact-index-slots"),
    ("tree", "--tree-index-slots"),
];

/// The stem of a store's index runs' files (the tree store's are the full store's it hands
/// its states to).
fn runs_stem(store: &str) -> &str {
    if store == "tree" {
        "full"
    } else {
        store
    }
}

fn counts(v: &serde_json::Value) -> (u64, u64, u64) {
    let n = |k: &str| v[k].as_u64().unwrap();
    (n("states"), n("transitions"), n("deadlocks"))
}

/// 2^21 markings, 21 successors each; the full store's index would need 32 MiB of slots,
/// ComBack's state table 16 MiB, Δ's index about 10 MiB, hash compaction's table 48 MiB. Under 20M the index gets 10 MiB: it
/// spills, its window rotates several times, runs are merged, and BFS (delayed duplicate
/// detection, batched) stays exact and within the budget. Δ checks each match on disk by
/// walking up to kδ records back: it runs 2^18 markings, its window capped by the hidden
/// option, to keep the suite's time.
#[test]
fn index_spills_and_stays_exact_within_the_budget() {
    let t = tempfile::tempdir().unwrap();
    let tiny = toggles_file(t.path(), 3);
    let budget: u64 = 20 << 20;
    let out = t.path().join("out.slts");
    let scratch = t.path().join("scratch.slts");
    let (base, _) = explore_json(
        &tiny,
        t.path(),
        "tiny",
        &["--memory", "20M", "-o", scratch.to_str().unwrap()],
    );
    let cases: [(&str, u32, &[&str]); 5] = [
        ("full", 21, &[]),
        ("comback", 21, &[]),
        ("delta", 18, &["--delta-index-slots", "16384"]),
        // 64-bit descriptors: no omission among 2^21 states (P < 2^-23), so the LTS is the
        // full store's.
        ("hashcompact", 21, &[]),
        // Its tables reach their 10 MiB share at about 260,000 states; the full store's
        // index takes over from there.
        ("tree", 21, &[]),
    ];
    for (store, k, extra) in cases {
        let model = toggles_file(t.path(), k);
        let expect = (1u64 << k, k as u64 * (1u64 << k), 0);
        let reference = t.path().join(format!("ref-{k}.slts"));
        if !reference.exists() {
            let (_, v) = explore_json(
                &model,
                t.path(),
                "ref",
                &["-o", reference.to_str().unwrap()],
            );
            assert_eq!(counts(&v), expect, "unbounded");
        }
        let mut args = vec![
            "--store",
            store,
            "--memory",
            "20M",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (mut m, mut v) = explore_json(&model, t.path(), store, &args);
        if m.max_rss > budget + base.max_rss {
            // Under the parallel tests `wait4` has twice reported 48 MiB for a child whose
            // own VmHWM was 22-24 MiB (alone, wait4 and VmHWM agree at 24 MiB, run after
            // run): measured once more. A real overrun is deterministic and fails again.
            eprintln!(
                "{store}: wait4 says {} MiB, VmHWM {} MiB: measuring again",
                m.max_rss >> 20,
                v["peak_rss_bytes"].as_u64().unwrap_or(0) >> 20
            );
            (m, v) = explore_json(&model, t.path(), store, &args);
        }
        assert_eq!(counts(&v), expect, "{store} under 20M");
        assert!(
            same_file(&out, &reference),
            "{store}: the LTS under 20M differs from the unbounded run's"
        );
        let d = &v["store_details"];
        let n = |key: &str| d[key].as_u64().unwrap_or_else(|| panic!("{key} in {d}"));
        // ComBack's table takes 6 bytes a slot, the full store's 8: it fills its window later.
        let rotations = if store == "comback" || store == "delta" {
            2
        } else {
            3
        };
        assert!(n("index_rotations") >= rotations, "{store}: {d}");
        if store == "tree" {
            // Handed over mid-run: the tables held the first states.
            assert!(n("tree_handed_over_at") >= 100_000, "{d}");
        }
        assert!(n("index_run_merges") >= 1, "{store}: {d}");
        assert!(n("index_spilled_states") >= 1 << (k - 1), "{store}: {d}");
        assert!(
            n("index_disk_lookups") > 0 && n("index_disk_found") > 0,
            "{store}: {d}"
        );
        assert!(
            m.max_rss <= budget + base.max_rss,
            "{store}: peak RSS {} MiB (VmHWM {} MiB) over the budget 20 MiB + baseline {} MiB",
            m.max_rss >> 20,
            v["peak_rss_bytes"].as_u64().unwrap_or(0) >> 20,
            base.max_rss >> 20
        );
    }
}

/// With a small window (hidden `--full-index-slots`, `--comback-index-slots`,
/// `--delta-index-slots`) the index
/// spills early and rotates dozens of times on a small model, in BFS and DFS (one lookup at a
/// time), with exact counts and the unbounded run's LTS file.
#[test]
fn small_window_rotates_often_in_bfs_and_dfs() {
    let t = tempfile::tempdir().unwrap();
    let k = 16;
    let model = toggles_file(t.path(), k);
    let expect = (1u64 << k, k as u64 * (1u64 << k), 0);
    for (order, (store, slots)) in ["bfs", "dfs"]
        .into_iter()
        .flat_map(|o| SPILLING.into_iter().map(move |s| (o, s)))
    {
        let reference = t.path().join(format!("ref-{order}.slts"));
        let out = t.path().join(format!("out-{order}.slts"));
        let (_, v) = explore_json(
            &model,
            t.path(),
            "ref",
            &["--order", order, "-o", reference.to_str().unwrap()],
        );
        assert_eq!(counts(&v), expect, "{order} unbounded");
        let (_, v) = explore_json(
            &model,
            t.path(),
            "small",
            &[
                "--order",
                order,
                "--store",
                store,
                "--memory",
                "32M",
                slots,
                "8192",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(counts(&v), expect, "{store} {order} small window");
        assert!(
            same_file(&out, &reference),
            "{store} {order}: the LTS with a small window differs from the unbounded run's"
        );
        let d = &v["store_details"];
        let n = |key: &str| d[key].as_u64().unwrap_or_else(|| panic!("{key} in {d}"));
        assert!(n("index_rotations") >= 10, "{store} {order}: {d}");
        assert!(n("index_run_merges") >= 5, "{store} {order}: {d}");
        assert!(n("index_disk_found") > 0, "{store} {order}: {d}");
    }
    // The hidden option is the full store's: refused with another store.
    let o = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["-q", "--store", "tree", "--full-index-slots", "8192"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A checkpoint taken after the index spilled (its runs named in the manifest) resumes, after
/// SIGKILL, to the LTS file of an uninterrupted run; runs retired by merges in between are
/// not needed.
#[test]
fn spilled_index_survives_sigkill_and_resume() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 18);
    let reference = t.path().join("ref.slts");
    let (_, v) = explore_json(
        &model,
        t.path(),
        "ref",
        &["-o", reference.to_str().unwrap()],
    );
    let expect = counts(&v);
    for (store, slots) in SPILLING {
        let run = t.path().join(format!("run-{store}"));
        let out = t.path().join(format!("out-{store}.slts"));
        let mut child = Command::new(bin())
            .arg("explore")
            .arg(&model)
            .args([
                "-q",
                "--no-progress",
                "--store",
                store,
                "--memory",
                "32M",
                slots,
                "8192",
                "--checkpoint-every",
                "0.1s",
            ])
            .arg("--workdir")
            .arg(&run)
            .arg("-o")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill once a checkpoint names a run file (the manifest is rewritten at each checkpoint).
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut killed = false;
        let mut finished_early = false;
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                finished_early = true;
                break;
            }
            let manifest = std::fs::read(run.join("manifest")).unwrap_or_default();
            let runs = format!("{}.index.run", runs_stem(store));
            if manifest.windows(runs.len()).any(|w| w == runs.as_bytes()) {
                let _ = child.kill();
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill();
        let status = child.wait().unwrap();
        assert!(
            !finished_early,
            "{store}: finished before a checkpoint with a spilled index: {status:?}"
        );
        assert!(killed, "{store}: no checkpoint named an index run in time");
        let f = t.path().join(format!("resumed-{store}.json"));
        let o = Command::new(bin())
            .args(["resume", "-q", "--no-progress", "--stats-json"])
            .arg(&f)
            .arg(&run)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(counts(&v), expect, "{store} resumed");
        assert!(
            same_file(&out, &reference),
            "{store}: the resumed LTS differs from the uninterrupted run's"
        );
    }
}

/// Without `--memory`, a run under an address-space limit (`ulimit -v`) smaller than its
/// unbounded need stops at the default ceiling with exit 6 and says what to do, instead of
/// dying of a failed allocation (it was killed by SIGABRT before the ceiling).
#[test]
fn default_ceiling_stops_a_run_before_the_system_kills_it() {
    let t = tempfile::tempdir().unwrap();
    // 2^23 markings: about 190 MiB of state vectors and 128 MiB of index in RAM.
    let model = toggles_file(t.path(), 23);
    let out = t.path().join("out.slts");
    let m = run_measured(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 400000 && exec \"$0\" \"$@\"")
            .arg(bin())
            .arg("explore")
            .arg(&model)
            .args(["--no-progress", "-o"])
            .arg(&out),
    );
    let err = m.stderr();
    assert_eq!(m.signal, None, "killed: {err}");
    assert_eq!(m.code, Some(6), "{err}");
    assert!(err.contains("memory ceiling: "), "{err}");
    assert!(err.contains("address-space limit"), "{err}");
    assert!(
        err.contains("stopped at the default memory ceiling") && err.contains("--memory SIZE"),
        "{err}"
    );
    assert!(!out.exists(), "no partial output passed off as complete");
}

/// A checkpointed run without `--memory` keeps the full store's vectors in RAM (copied to
/// segment files at each checkpoint, so BFS runs on every thread) until they pass a quarter
/// of the default ceiling; then they move to the segment files and the run goes on exactly,
/// where vectors in RAM would have stopped it at the ceiling.
#[test]
fn a_checkpointed_run_moves_its_vectors_to_disk_at_a_quarter_of_the_ceiling() {
    let t = tempfile::tempdir().unwrap();
    // 2^22 markings of 44 places: 176 MiB of state vectors and 64 MiB of index, more than
    // the ceiling the address-space limit leaves (vectors and index in RAM stop at it).
    let model = toggles_file(t.path(), 22);
    let reference = t.path().join("ref.slts");
    let (_, r) = explore_json(
        &model,
        t.path(),
        "ref",
        &["-o", reference.to_str().unwrap()],
    );
    assert_eq!(r["states"], 1u64 << 22);
    let out = t.path().join("out.slts");
    let stats = t.path().join("ck.json");
    let run = t.path().join("run");
    let m = run_measured(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 500000 && exec \"$0\" \"$@\"")
            .arg(bin())
            .arg("explore")
            .arg(&model)
            .args([
                "-q",
                "--no-progress",
                "--threads",
                "2",
                "--checkpoint-every",
                "1h",
            ])
            .arg("--workdir")
            .arg(&run)
            .arg("--stats-json")
            .arg(&stats)
            .arg("-o")
            .arg(&out),
    );
    assert_eq!(m.code, Some(0), "{}", m.stderr());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(
        (&v["states"], &v["transitions"]),
        (&r["states"], &r["transitions"])
    );
    let moved = v["store_details"]["full_vectors_to_disk_at"]
        .as_u64()
        .unwrap_or_else(|| panic!("the vectors never moved to disk: {v}"));
    assert!(moved > 1 << 16 && moved < 1 << 22, "moved at {moved}");
    assert_eq!(v["threads"], 2, "parallel until the vectors moved");
    assert!(
        same_file(&out, &reference),
        "the LTS differs from the run in RAM"
    );
}

/// The stores whose RAM structures do not spill keep `--memory` a ceiling too: bit-state
/// hashing sizes its array from the budget and finishes within it; state space caching refuses up front a cache that cannot
/// fit, and stops an unbounded cache stream (or a deep stack) before its arrays double past
/// the budget; BFS with snapshots, whose pool is sized by its options, not the budget, is
/// stopped before a level that would pass it, or by the engines' backstop (the resident
/// set checked against the budget plus the baseline every 16,384 steps) — each with exit 6
/// and a message naming the store. The snapshots case may pass the budget by one check
/// period (the test allows it 8 MiB); the cache cases may not pass it at all.
#[test]
fn stores_that_do_not_spill_stay_within_the_budget_or_stop_with_exit_6() {
    let t = tempfile::tempdir().unwrap();
    let tiny = toggles_file(t.path(), 3);
    let model = toggles_file(t.path(), 21);
    let budget: u64 = 20 << 20;
    let (base, _) = explore_json(&tiny, t.path(), "tiny", &["--memory", "20M"]);
    let (m, v) = explore_json(
        &model,
        t.path(),
        "bitstate",
        &["--store", "bitstate", "--memory", "20M"],
    );
    assert!(v["states"].as_u64().unwrap() <= 1 << 21);
    assert!(
        m.max_rss <= budget + base.max_rss,
        "bitstate: peak RSS {} MiB over 20 MiB + baseline {} MiB",
        m.max_rss >> 20,
        base.max_rss >> 20
    );
    let cases: [(&[&str], &str); 3] = [
        (&["--store", "snapshots"], "stopped: resident memory"),
        // Refused up front: the cache, full, would not fit.
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--cache-size",
                "2100000",
            ],
            "the --store cache table",
        ),
        // An unbounded cache cannot be checked up front: the backstop stops it.
        (
            &[
                "--order",
                "dfs",
                "--store",
                "cache",
                "--caches",
                "(c1,LRU,inf)",
            ],
            "stopped: resident memory",
        ),
    ];
    for (args, why) in cases {
        let m = run_measured(
            Command::new(bin())
                .arg("explore")
                .arg(&model)
                .args(["-q", "--no-progress", "--memory", "20M"])
                .args(args),
        );
        let err = m.stderr();
        assert_eq!(m.code, Some(6), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        if why.starts_with("stopped") {
            // A store whose visited set stays in RAM is pointed to one that spills.
            assert!(
                err.contains("use a store whose index spills"),
                "{args:?}: {err}"
            );
        }
        let slack = if args.contains(&"snapshots") {
            8 << 20
        } else {
            0
        };
        assert!(
            m.max_rss <= budget + base.max_rss + slack,
            "{args:?}: peak RSS {} MiB, budget 20 MiB + baseline {} MiB: {err}",
            m.max_rss >> 20,
            base.max_rss >> 20
        );
    }
}
