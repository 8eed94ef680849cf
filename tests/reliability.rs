//! Defects found by the reliability campaign (issue #18) that live in the explore driver:
//! budgets a store cannot honour, zero-width states, run directories and partial outputs
//! left behind, stats of resumed runs, budgets larger than the machine. Every model here
//! is built by the test itself (no `../shared` needed).

mod common;

use common::{bin, placeless_file, toggles_file, STORES};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn explore(model: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("explore")
        .arg(model)
        .args(["--no-progress"])
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn counts(v: &serde_json::Value) -> (u64, u64) {
    (
        v["states"].as_u64().unwrap(),
        v["transitions"].as_u64().unwrap(),
    )
}

/// Item 3: every store either fits its budget or stops at the start with exit 6 naming the
/// minimum; none runs over a 1 MiB budget (ComBack used to finish at 32.7 MB RSS, the Δ
/// store to crawl for minutes).
#[test]
fn every_store_refuses_a_budget_it_cannot_honour() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 14);
    for store in STORES {
        for order in ["bfs", "dfs"] {
            let started = Instant::now();
            let o = explore(
                &model,
                &["-q", "--store", store, "--order", order, "--memory", "1M"],
            );
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(6), "{store} {order}: {err}");
            assert!(
                err.contains("raise --memory to") && err.contains("M at least"),
                "{store} {order} names the minimum: {err}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{store} {order} refused at the start"
            );
            // The minimum it names is enough to start (and this small model then fits).
            let min = err
                .split("raise --memory to ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .unwrap()
                .to_string();
            let o = explore(
                &model,
                &["-q", "--store", store, "--order", order, "--memory", &min],
            );
            assert!(
                o.status.code() == Some(0),
                "{store} {order} with --memory {min}: {}",
                stderr(&o)
            );
        }
    }
}

/// Item 3, growth: hash compaction's table is charged to the budget when it grows; past
/// its share it spills to disk (it finished at 79.8 MB RSS under --memory 1M before, and
/// stopped with exit 6 until its table could spill). The tree store, whose tables do not
/// spill, stops with exit 6 naming the table.
#[test]
fn hash_compaction_growth_stops_at_the_budget() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 18);
    let json = t.path().join("s.json");
    let o = explore(
        &model,
        &[
            "-q",
            "--store",
            "hashcompact",
            "--memory",
            "12M",
            "--stats-json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["states"].as_u64(), Some(1 << 18));
    assert!(v["store_details"]["index_spilled_states"].as_u64().unwrap() > 0);
    let o = explore(&model, &["-q", "--store", "tree", "--memory", "12M"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains("tree store"), "{err}");
}

/// Item 4: a net without places (zero-width states) works with every store and order,
/// with and without --memory, and checkpointed (it was an internal error under --memory).
#[test]
fn zero_width_states_work_everywhere() {
    let t = tempfile::tempdir().unwrap();
    for transitions in [0u32, 2] {
        let model = placeless_file(t.path(), transitions);
        for store in STORES {
            for order in ["bfs", "dfs"] {
                let stats = t.path().join("s.json");
                let stats_arg = stats.to_str().unwrap();
                let mut variants: Vec<Vec<&str>> =
                    vec![vec![], vec!["--memory", "64M"], vec!["--spill", "always"]];
                let run = t.path().join("run");
                let out = t.path().join("out.aut");
                if *store != "bitstate" {
                    variants.push(vec![
                        "--checkpoint-every",
                        "1h",
                        "--workdir",
                        run.to_str().unwrap(),
                        "-o",
                        out.to_str().unwrap(),
                    ]);
                }
                for v in variants {
                    let mut args = vec![
                        "-q",
                        "--store",
                        store,
                        "--order",
                        order,
                        "--stats-json",
                        stats_arg,
                    ];
                    args.extend(&v);
                    let o = explore(&model, &args);
                    assert_eq!(
                        o.status.code(),
                        Some(0),
                        "{store} {order} {v:?}: {}",
                        stderr(&o)
                    );
                    assert_eq!(
                        counts(&json(&stats)),
                        (1, transitions as u64),
                        "{store} {order} {v:?}"
                    );
                }
            }
        }
    }
}

/// `spillway explore` with a checkpoint every `interval`, started in the background.
fn checkpointed(model: &Path, dir: &Path, interval: &str, extra: &[&str]) -> std::process::Child {
    Command::new(bin())
        .arg("explore")
        .arg(model)
        .args([
            "-q",
            "--no-progress",
            "--checkpoint-every",
            interval,
            "--workdir",
        ])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Items 7 and 9: a run killed after its first checkpoint and resumed removes the run
/// directory `explore` created, and its stats cover the whole run (both legs) and this
/// leg separately, with the number of resumes.
#[test]
fn resumed_run_removes_its_directory_and_reports_the_whole_run() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 19);
    let out = t.path().join("out.slts");
    let reference = t.path().join("ref.slts");
    let o = explore(&model, &["-q", "-o", reference.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let run = t.path().join("run");
    let mut child = checkpointed(&model, &run, "0.2s", &["-o", out.to_str().unwrap()]);
    wait_for(|| run.join("manifest").exists(), "the first checkpoint");
    let _ = child.kill();
    let status = child.wait().unwrap();
    if status.success() {
        eprintln!("the run finished before it could be killed; nothing to resume");
        return;
    }
    let stats = t.path().join("s.json");
    let o = Command::new(bin())
        .args(["resume", "-q", "--no-progress", "--stats-json"])
        .arg(&stats)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !run.exists(),
        "the run directory explore created is removed"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&reference).unwrap()
    );
    let v = json(&stats);
    assert_eq!(counts(&v), (1 << 19, 19 << 19));
    assert_eq!(v["resumes"], 1);
    let f = |k: &str| v[k].as_f64().unwrap();
    assert!(f("wall_seconds") > f("leg_wall_seconds"), "{v}");
    assert!(f("cpu_seconds") > f("leg_cpu_seconds"), "{v}");
    assert!(v["leg_states"].as_u64().unwrap() < 1 << 19, "{v}");
    let rate = (1u64 << 19) as f64 / f("wall_seconds");
    assert!((f("states_per_second") - rate).abs() < rate * 1e-6, "{v}");
}

/// Item 7: a run killed before its first checkpoint leaves a directory that `resume`
/// explains and that a new `explore` reuses.
#[test]
fn a_run_killed_before_its_first_checkpoint_can_start_over() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 20);
    let run = t.path().join("run");
    let mut child = checkpointed(&model, &run, "off", &[]);
    wait_for(|| run.join("lock").exists(), "the run directory");
    std::thread::sleep(Duration::from_millis(100));
    let _ = child.kill();
    child.wait().unwrap();
    assert!(!run.join("manifest").exists());
    let o = Command::new(bin())
        .arg("resume")
        .arg(&run)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("start it again with the same"), "{err}");
    let stats = t.path().join("s.json");
    let o = explore(
        &model,
        &[
            "-q",
            "--checkpoint-every",
            "1h",
            "--workdir",
            run.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(counts(&json(&stats)), (1 << 20, 20 << 20));
    // A directory with files spillway did not write is still refused.
    let foreign = t.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let o = explore(
        &model,
        &[
            "-q",
            "--checkpoint-every",
            "1h",
            "--workdir",
            foreign.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(foreign.join("notes.txt").exists());
}

/// Item 7: when the output cannot be written (a file-size limit stands in for a full
/// disk), the unfinished `OUT.partial` is removed when no checkpoint refers to it, with and
/// without checkpointing.
#[test]
fn a_failed_run_does_not_leave_its_partial_output() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 18);
    let out = t.path().join("out.aut");
    let run = t.path().join("run");
    for checkpoint in [false, true] {
        let mut script = format!(
            "ulimit -f 512; exec {} explore {} -q --no-progress -o {}",
            bin(),
            model.display(),
            out.display()
        );
        if checkpoint {
            script += &format!(" --checkpoint-every 1h --workdir {}", run.display());
        }
        let o = Command::new("sh").args(["-c", &script]).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(4),
            "checkpoint {checkpoint}: {}",
            stderr(&o)
        );
        assert!(!out.exists());
        assert!(
            !t.path().join("out.aut.partial").exists(),
            "checkpoint {checkpoint}: OUT.partial removed"
        );
        assert!(!run.exists(), "the run directory it created is removed");
    }
}

/// Item 10: a budget larger than the machine can give is warned about, naming both figures.
#[test]
fn a_budget_beyond_the_machine_is_warned_about() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 4);
    let o = explore(&model, &["--memory", "100T"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("--memory 102400.0 GiB is more than this machine can give")
            && err.contains("GiB available now"),
        "{err}"
    );
    let o = explore(&model, &["--memory", "64M"]);
    assert!(!stderr(&o).contains("more than this machine"));
}

/// A `--workdir` that does not exist yet is created (issue #20).
#[test]
fn a_missing_workdir_is_created() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 10);
    let wd = t.path().join("not/yet/here");
    let stats = t.path().join("s.json");
    let o = explore(
        &model,
        &[
            "-q",
            "--spill",
            "always",
            "--workdir",
            wd.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(counts(&json(&stats)), (1 << 10, 10 << 10));
    assert!(wd.is_dir());
}

/// `--stats-json` naming the model file (by another path) is refused before anything is
/// written: the model stays as it was.
#[test]
fn stats_json_never_overwrites_the_model() {
    let t = tempfile::tempdir().unwrap();
    let model = toggles_file(t.path(), 3);
    let before = std::fs::read(&model).unwrap();
    let link = t.path().join("link.json");
    std::os::unix::fs::symlink(&model, &link).unwrap();
    let o = explore(&model, &["-q", "--stats-json", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is the model file"));
    assert_eq!(std::fs::read(&model).unwrap(), before);
}

/// The tree store charges its tables to the budget as they grow; where they would pass their
/// share, it hands its states over to the full store's disk path and the run stays exact
/// (it stopped with exit 6 before); a budget that holds them keeps the tables to the end.
#[test]
fn tree_hands_over_at_the_budget() {
    let t = tempfile::tempdir().unwrap();
    // 2^20 states: 8 MiB of roots and an 8 MiB root index, past half of a 20 MiB budget.
    let model = toggles_file(t.path(), 20);
    for (memory, handed) in [("20M", true), ("64M", false)] {
        let o = explore(
            &model,
            &[
                "-q",
                "--store",
                "tree",
                "--memory",
                memory,
                "--stats-json",
                "-",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{memory}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["states"].as_u64(), Some(1 << 20), "{memory}");
        assert_eq!(v["transitions"].as_u64(), Some(20 << 20), "{memory}");
        let at = v["store_details"]["tree_handed_over_at"].as_u64();
        assert_eq!(at.is_some(), handed, "{memory}: {v}");
        if let Some(at) = at {
            assert!(at > 0 && at < 1 << 20, "{memory}: handed over at {at}");
        }
    }
}
