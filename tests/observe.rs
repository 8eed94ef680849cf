//! Watching a run (#19): `--metrics` JSON lines from explore and resume, and
//! `spillway plot`. Generated models only (`common::toggles_file`), no `../shared` needed.

mod common;

use common::{bin, toggles_file};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1))
        })
        .collect()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every line has every documented key with the right type; time, CPU and states never go
/// back; each leg's first line is a `starting` line (written before the search, so a plot
/// starts at the start, DFS too), the last line is the `done` line, the others `expanding`
/// (or `stopped`: the last line of a leg stopped by a signal).
fn check_well_formed(v: &[Value], order: &str) {
    assert!(v.len() >= 2, "{} lines", v.len());
    for (i, l) in v.iter().enumerate() {
        for k in ["wall_seconds", "cpu_seconds"] {
            assert!(l[k].as_f64().is_some(), "line {i}: {k} in {l}");
        }
        for k in [
            "states",
            "transitions",
            "level",
            "rss_bytes",
            "peak_rss_bytes",
            "disk_bytes",
            "disk_read_bytes",
            "disk_written_bytes",
        ] {
            assert!(l[k].as_u64().is_some(), "line {i}: {k} in {l}");
        }
        assert_eq!(l["order"], order, "line {i}");
        assert!(l["structures"].is_array(), "line {i}");
        assert!(l["rss_bytes"].as_u64().unwrap() > 0, "line {i}");
        assert!(
            l["peak_rss_bytes"].as_u64() >= l["rss_bytes"].as_u64(),
            "line {i}"
        );
        let phase = l["phase"].as_str().unwrap();
        if i == 0 || v[i - 1]["phase"] == "stopped" {
            assert_eq!(phase, "starting", "line {i}: a leg's first line");
        } else if i + 1 == v.len() {
            assert_eq!(phase, "done");
        } else {
            assert!(
                phase == "expanding" || phase == "stopped",
                "line {i}: {phase}"
            );
        }
        if i > 0 {
            let p = &v[i - 1];
            for k in ["wall_seconds", "cpu_seconds"] {
                assert!(l[k].as_f64() >= p[k].as_f64(), "line {i}: {k} went back");
            }
            assert!(l["states"].as_u64() >= p["states"].as_u64(), "line {i}");
        }
    }
}

#[test]
fn metrics_lines_follow_a_bfs_run_and_end_with_its_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 17);
    let (metrics, stats) = (tmp.path().join("m.jsonl"), tmp.path().join("s.json"));
    let st = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args([
            "-q",
            "--memory",
            "64M",
            "--metrics-every",
            "0.001s",
            "--metrics",
        ])
        .arg(&metrics)
        .arg("--stats-json")
        .arg(&stats)
        .status()
        .unwrap();
    assert!(st.success());
    let v = lines(&metrics);
    check_well_formed(&v, "bfs");
    // A tick every 16,384 expansions and a line at each (the interval is shorter): the
    // first at the start, 7 more over 2^17 states, then the final line.
    assert!(v.len() >= 8, "{} lines", v.len());
    assert_eq!(
        (v[0]["states"].as_u64(), v[0]["level"].as_u64()),
        (Some(0), Some(0))
    );
    let (last, s) = (v.last().unwrap(), json(&stats));
    assert_eq!(last["states"], s["states"]);
    assert_eq!(last["transitions"], s["transitions"]);
    assert_eq!(s["states"], 1u64 << 17);
    assert_eq!(last["memory_limit_bytes"], 64u64 << 20);
    // Levels of the toggles net: level d holds C(17, d) markings.
    let choose = |d: u64| (0..d).fold(1u64, |c, i| c * (17 - i) / (i + 1));
    for l in &v[..v.len() - 1] {
        let d = l["level"].as_u64().unwrap();
        assert_eq!(l["level_states"].as_u64(), Some(choose(d)), "{l}");
    }
    // Under --memory the store's structures are accounted and its vectors go to disk.
    let names: Vec<&str> = last["structures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"full.states"), "{names:?}");
    assert!(last["disk_written_bytes"].as_u64().unwrap() > 0, "{last}");
    assert!(last["disk_bytes"].as_u64().unwrap() > 0, "{last}");
}

#[test]
fn metrics_of_a_dfs_run_give_the_depth() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 15);
    let metrics = tmp.path().join("m.jsonl");
    let st = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args([
            "-q",
            "--order",
            "dfs",
            "--metrics-every",
            "0.001s",
            "--metrics",
        ])
        .arg(&metrics)
        .status()
        .unwrap();
    assert!(st.success());
    let v = lines(&metrics);
    check_well_formed(&v, "dfs");
    // The first line at the start, not after the first 16,384 steps.
    assert_eq!(v[0]["states"], 0);
    let last = v.last().unwrap();
    assert_eq!(last["states"], 1u64 << 15);
    assert_eq!(last["transitions"], 15u64 << 15);
    assert!(v.iter().all(|l| l["level_states"].is_null()));
    assert!(
        v.iter().any(|l| l["level"].as_u64().unwrap() > 1),
        "a depth beyond the root"
    );
}

#[test]
fn metrics_every_is_refused_without_metrics_or_as_off() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 3);
    for args in [
        &["--metrics-every", "1s"][..],
        &["--metrics", "m.jsonl", "--metrics-every", "off"][..],
    ] {
        let out = Command::new(bin())
            .arg("explore")
            .arg(&model)
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert!(!tmp.path().join("m.jsonl").exists());
    // An unwritable metrics file is an I/O error (exit 4) before the search starts.
    let out = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .arg("--metrics")
        .arg(tmp.path().join("no/such/dir/m.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("metrics file"));
}

#[test]
fn a_resumed_run_appends_to_the_same_metrics_file() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 21);
    let (dir, metrics, stats) = (
        tmp.path().join("run"),
        tmp.path().join("m.jsonl"),
        tmp.path().join("s.json"),
    );
    let mut child = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["-q", "--no-progress", "--checkpoint-every", "0.05s"])
        .args(["--metrics-every", "0.01s", "--metrics"])
        .arg(&metrics)
        .arg("--workdir")
        .arg(&dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join("manifest").exists() {
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        assert!(Instant::now() < deadline, "no checkpoint within 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert_eq!(child.wait().unwrap().code(), Some(7), "SIGINT exits 7");
    let before = std::fs::read_to_string(&metrics).unwrap();
    let n = before.lines().count();
    assert!(n >= 1, "the first leg wrote lines");
    let out = Command::new(bin())
        .arg("resume")
        .arg(&dir)
        .args(["-q", "--no-progress", "--stats-json"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::fs::read_to_string(&metrics).unwrap();
    assert!(after.starts_with(&before), "the first leg's lines are kept");
    let v = lines(&metrics);
    assert!(
        v.len() > n + 1,
        "the resume appended: {} then {}",
        n,
        v.len()
    );
    check_well_formed(&v, "bfs");
    let (last, s) = (v.last().unwrap(), json(&stats));
    assert_eq!(s["resumes"], 1);
    assert_eq!(last["states"], s["states"]);
    assert_eq!(last["transitions"], s["transitions"]);
    assert_eq!(s["states"], 1u64 << 21);
}

#[test]
fn plot_draws_a_real_run_and_refuses_bad_files() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 16);
    let metrics = tmp.path().join("m.jsonl");
    let st = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args([
            "-q",
            "--memory",
            "64M",
            "--metrics-every",
            "0.001s",
            "--metrics",
        ])
        .arg(&metrics)
        .status()
        .unwrap();
    assert!(st.success());
    let svg = tmp.path().join("run.svg");
    let out = Command::new(bin())
        .arg("plot")
        .arg(&metrics)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    for caption in [
        "states over time",
        "resident memory over time",
        "states per BFS level",
    ] {
        assert!(text.contains(caption), "{caption}");
    }
    // Each series is a polyline of its colour (axes and ticks are black ones): the states
    // (blue) with a point per metrics line, RSS (red; its legend sample is a red line too),
    // the level sizes (green) with a point
    // per level some line sampled.
    let v = lines(&metrics);
    let series = |colour: &str| -> Vec<usize> {
        text.split("<polyline")
            .filter(|p| p.contains(&format!("stroke=\"{colour}\"")))
            .map(|p| {
                p.split("points=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .count()
            })
            .collect()
    };
    assert_eq!(series("#0000FF"), vec![v.len()], "states");
    assert!(series("#FF0000").contains(&v.len()), "RSS");
    let mut levels: Vec<u64> = v.iter().map(|l| l["level"].as_u64().unwrap()).collect();
    levels.dedup();
    assert_eq!(series("#008000"), vec![levels.len()], "levels");

    // A malformed line is named by its number (exit 3); a missing file is exit 4.
    let mut bad: Vec<String> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    bad[2] = bad[2][..bad[2].len() / 2].to_string();
    let bad_path = tmp.path().join("bad.jsonl");
    std::fs::write(&bad_path, bad.join("\n")).unwrap();
    for (input, code, needle) in [
        (bad_path.clone(), 3, format!("{}:3: ", bad_path.display())),
        (
            tmp.path().join("missing.jsonl"),
            4,
            "missing.jsonl".to_string(),
        ),
    ] {
        let out = Command::new(bin())
            .arg("plot")
            .arg(&input)
            .arg("-o")
            .arg(tmp.path().join("bad.svg"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains(&needle), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!tmp.path().join("bad.svg").exists());
}

/// `--metrics -` writes the lines to standard output (as `--stats-json -` does), not to a
/// file named `-`.
#[test]
fn metrics_dash_is_standard_output() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 10);
    let out = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["--metrics", "-", "-q", "--no-progress"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    check_well_formed(&v, "bfs");
    assert_eq!(v.last().unwrap()["states"], 1024);
    assert!(!tmp.path().join("-").exists());
}

/// A plot whose write fails (a full disk; here a file size limit) keeps the previous SVG
/// whole and leaves no temporary file: it had been truncated and left half-written.
#[test]
fn a_failed_plot_keeps_the_previous_svg() {
    let tmp = tempfile::tempdir().unwrap();
    let model = toggles_file(tmp.path(), 12);
    let metrics = tmp.path().join("m.jsonl");
    let st = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["-q", "--metrics-every", "0.001s", "--metrics"])
        .arg(&metrics)
        .status()
        .unwrap();
    assert!(st.success());
    let svg = tmp.path().join("run.svg");
    let plot = || {
        let mut c = Command::new(bin());
        c.arg("plot").arg(&metrics).arg("-o").arg(&svg);
        c
    };
    assert!(plot().status().unwrap().success());
    let good = std::fs::read(&svg).unwrap();
    assert!(good.len() > 4096);
    let out = common::limit_file_size(&mut plot(), 4096).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains(&format!("{}: ", svg.display())), "{err}");
    assert!(
        std::fs::read(&svg).unwrap() == good,
        "the previous SVG is intact"
    );
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("svg") || n.contains("partial"))
        .collect();
    assert_eq!(left, ["run.svg"], "no temporary file left");
}

/// A metrics file with bytes that are not UTF-8 is malformed (exit 3, its line named), as
/// any other line that is not a metrics line; it had been an I/O error (exit 4, no line).
#[test]
fn plot_of_a_file_that_is_not_utf8_names_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let bin_file = tmp.path().join("bin.jsonl");
    let mut bytes = br#"{"wall_seconds":0.5,"states":10,"rss_bytes":1048576,"memory_limit_bytes":null,"order":"bfs","level":1,"level_states":4}"#.to_vec();
    bytes.extend_from_slice(b"\n\x1f\x8b\x08\x00\xff\n");
    std::fs::write(&bin_file, &bytes).unwrap();
    let out = Command::new(bin())
        .arg("plot")
        .arg(&bin_file)
        .arg("-o")
        .arg(tmp.path().join("b.svg"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2: not a metrics line: byte 0x8b is not valid UTF-8",
            bin_file.display()
        )),
        "{err}"
    );
    assert!(!tmp.path().join("b.svg").exists());
}
