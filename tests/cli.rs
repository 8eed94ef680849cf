//! The `spillway explore` command end to end: outputs, stats, bad input and exit codes.

mod common;

use common::{bin, reference_rows, shared_models, shipped};
use spillway::lts::aut::AutReader;
use spillway::lts::native;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

fn spillway(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run spillway")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Reads a whole `.aut` file: header, every edge (each line must parse), and the labels.
fn read_aut(path: &Path) -> (spillway::lts::aut::AutHeader, Vec<(u64, String, u64)>) {
    let mut r = AutReader::open(path).unwrap();
    let mut edges = Vec::new();
    while let Some((s, l, d)) = r.next_edge().unwrap() {
        edges.push((s, r.labels()[l.0 as usize].clone(), d));
    }
    (r.header(), edges)
}

fn label_multiset(edges: &[(u64, String, u64)]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (_, l, _) in edges {
        *m.entry(l.clone()).or_default() += 1;
    }
    m
}

#[test]
fn philosophers_to_aut_has_reference_header_and_parses() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.aut");
    let model = shipped("Philosophers-PT-000005.pnml");
    let o = spillway(&[
        "explore",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--no-progress",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    let first = text.lines().next().unwrap().trim_end();
    assert_eq!(first, "des (0, 945, 243)");
    let (h, edges) = read_aut(&out);
    assert_eq!((h.initial, h.transitions, h.states), (0, 945, 243));
    assert_eq!(edges.len(), 945);
    assert!(!dir.path().join("p.aut.partial").exists());
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn vlts_aut_roundtrip_keeps_counts_and_labels() {
    let Some(models) = shared_models() else {
        return;
    };
    for name in [
        "vasy_0_1.aut",
        "cwi_1_2.aut",
        "vasy_5_9.aut",
        "vasy_8_24.aut",
    ] {
        let input = models.join("vlts").join(name);
        let (h_in, e_in) = read_aut(&input);
        for order in ["bfs", "dfs"] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out.aut");
            let o = spillway(&[
                "explore",
                input.to_str().unwrap(),
                "--order",
                order,
                "-o",
                out.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{name}: {}", stderr(&o));
            let (h_out, e_out) = read_aut(&out);
            assert_eq!(
                (h_out.states, h_out.transitions),
                (h_in.states, h_in.transitions),
                "{name}"
            );
            assert_eq!(
                label_multiset(&e_out),
                label_multiset(&e_in),
                "{name} {order}"
            );
        }
    }
}

#[test]
fn native_output_reads_back_and_matches_aut_output() {
    let dir = tempfile::tempdir().unwrap();
    let model = shipped("Philosophers-PT-000005.pnml");
    let slts = dir.path().join("p.slts");
    let aut = dir.path().join("p.aut");
    for out in [&slts, &aut] {
        let o = spillway(&[
            "explore",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let lts = native::read_all(&slts).unwrap();
    assert_eq!(
        (
            lts.footer.states,
            lts.footer.transitions,
            lts.footer.deadlocks
        ),
        (243, 945, 2)
    );
    let (_, aut_edges) = read_aut(&aut);
    let native_edges: Vec<(u64, String, u64)> = lts
        .edges
        .iter()
        .map(|&(s, l, d)| (s, lts.labels[l.0 as usize].clone(), d))
        .collect();
    assert_eq!(native_edges, aut_edges);
}

#[test]
fn truncated_or_bit_flipped_native_file_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let model = shipped("Philosophers-PT-000005.pnml");
    let good = dir.path().join("p.slts");
    let o = spillway(&[
        "explore",
        model.to_str().unwrap(),
        "-o",
        good.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let bytes = std::fs::read(&good).unwrap();

    // A run killed before `finish` leaves a file without footer: any prefix must be rejected.
    for cut in [0, 10, 32, 100, bytes.len() / 2, bytes.len() - 1] {
        let p = dir.path().join(format!("cut{cut}.slts"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let e = native::read_all(&p).unwrap_err().to_string();
        assert!(e.contains(&format!("cut{cut}.slts")), "{e}");
        assert!(e.contains("truncated") || e.contains("corrupted"), "{e}");
    }
    // Every single bit flip anywhere in the file is detected.
    for pos in (0..bytes.len()).step_by(7) {
        let mut b = bytes.clone();
        b[pos] ^= 1 << (pos % 8);
        let p = dir.path().join("flip.slts");
        std::fs::write(&p, &b).unwrap();
        let r = native::read_all(&p);
        assert!(r.is_err(), "bit flip at byte {pos} not detected");
        assert!(r.unwrap_err().to_string().contains("flip.slts"));
    }
}

fn write_model(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

const NET: &str = r#"<?xml version="1.0"?>
<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">
  <net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet">
    <page id="g">
      <place id="p"><initialMarking><text>1</text></initialMarking></place>
      <place id="q"/>
      <transition id="t"/>
      <arc id="a1" source="p" target="t"/>
      <arc id="a2" source="t" target="q"/>
    </page>
  </net>
</pnml>"#;

#[test]
fn malformed_models_exit_nonzero_with_one_line_cause() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "broken.pnml",
            NET.replace("</page>", "</pag>"),
            "broken.pnml:10:5:",
            3,
        ),
        (
            "missing.pnml",
            NET.replace(r#"target="q""#, r#"target="nowhere""#),
            "'nowhere'",
            3,
        ),
        (
            "colored.pnml",
            NET.replace("grammar/ptnet", "grammar/symmetricnet"),
            "unsupported",
            3,
        ),
        ("empty.pnml", String::new(), "empty.pnml", 3),
        (
            "dupmark.pnml",
            NET.replace(
                "<initialMarking><text>1</text></initialMarking>",
                "<initialMarking><text>1</text></initialMarking><initialMarking><text>1</text></initialMarking>",
            ),
            "dupmark.pnml:5:68: a second <initialMarking> in place 'p'",
            3,
        ),
        (
            "duparc.pnml",
            NET.replace(r#"<arc id="a2""#, r#"<arc id="a1""#),
            "duparc.pnml:9:7: duplicate id 'a1' (first used at 8:7)",
            3,
        ),
        (
            "nul.pnml",
            NET.replace(r#"<place id="q"/>"#, "<place id=\"q\0\"/>"),
            "nul.pnml:6:19: character U+0000",
            3,
        ),
        (
            // Found by tests/fuzz_readers.rs: the counter overflow did not name the file.
            "bigmark.pnml",
            NET.replace("<text>1</text>", "<text>4294967296</text>"),
            "bigmark.pnml:5:",
            6,
        ),
        (
            "emptymark.pnml",
            NET.replace("<text>1</text>", "<text></text>"),
            "emptymark.pnml:5:",
            3,
        ),
        (
            "bad.aut",
            "des (0, 1, 1)\n(0, a)\n".to_string(),
            "bad.aut:2:",
            3,
        ),
    ];
    for (name, text, needle, code) in cases {
        let path = write_model(dir.path(), name, &text);
        let o = spillway(&["explore", &path]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
    }
    // The well-formed net itself works: 2 states, 1 transition, 1 deadlock.
    let ok = write_model(dir.path(), "ok.pnml", NET);
    let stats = dir.path().join("s.json");
    let o = spillway(&["explore", &ok, "--stats-json", stats.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["states"], 2);
    assert_eq!(v["transitions"], 1);
    assert_eq!(v["deadlocks"], 1);
}

#[test]
fn bad_flags_and_missing_files() {
    let model = shipped("Philosophers-PT-000005.pnml");
    let m = model.to_str().unwrap();
    let o = spillway(&["explore", m, "--order", "sideways"]);
    assert_eq!(o.status.code(), Some(2));
    let o = spillway(&["explore", "/nonexistent/x.pnml"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/x.pnml"));
    let o = spillway(&["explore", "model.xyz"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("unknown model format '.xyz'"));
    let o = spillway(&["explore", "model"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("model: no file extension to tell the model format by"),
        "{}",
        stderr(&o)
    );
    let o = spillway(&["lts", "info", "model"]);
    assert!(
        stderr(&o).contains("model: no file extension to tell the LTS format by"),
        "{}",
        stderr(&o)
    );
    let o = spillway(&["explore", m, "-o", "/tmp/out.unknown"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = spillway(&["explore", m, "-o", "/nonexistent-dir/out.slts"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
}

#[test]
fn stats_json_has_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("s.json");
    let model = shipped("Philosophers-PT-000005.pnml");
    for order in ["bfs", "dfs"] {
        let o = spillway(&[
            "explore",
            model.to_str().unwrap(),
            "--order",
            order,
            "--stats-json",
            stats.to_str().unwrap(),
        ]);
        assert!(o.status.success());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        for key in [
            "states",
            "transitions",
            "deadlocks",
            "max_depth",
            "wall_seconds",
            "peak_rss_bytes",
            "store",
            "order",
            "exact",
        ] {
            assert!(v.get(key).is_some(), "missing key {key}");
        }
        assert_eq!(v["states"], 243);
        assert_eq!(v["transitions"], 945);
        assert_eq!(v["deadlocks"], 2);
        assert_eq!(v["order"], order);
        assert_eq!(v["store"], "full");
        assert_eq!(v["exact"], true);
        assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0);
        // Documented as the same as `wall_seconds` (kept for older scripts): in every run,
        // not only in checkpointed ones (it was null in the others).
        assert_eq!(v["run_seconds"], v["wall_seconds"]);
        if order == "bfs" {
            // Philosophers-5 has its deepest states at distance 5: six BFS levels.
            assert_eq!(v["max_depth"], 6);
        }
    }
}

/// Under a small memory budget the Δ record cache is small, so most shorter paths found in
/// DFS point into clean sealed blocks: those repoints are skipped (`pred_updates_skipped`),
/// the free ones made, and the run stays exact (same LTS as the full store, reference counts).
#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn delta_dfs_repoints_only_where_free() {
    if shared_models().is_none() {
        return;
    }
    // With the shared models present, a missing row is a failure, not a skip.
    let r = reference_rows(0, u64::MAX)
        .into_iter()
        .find(|r| r.rel.ends_with("SimpleLoadBal-PT-05.pnml"))
        .expect("SimpleLoadBal-PT-05 in REFERENCE.tsv");
    let dir = tempfile::tempdir().unwrap();
    let (full, delta, stats) = (
        dir.path().join("full.slts"),
        dir.path().join("delta.slts"),
        dir.path().join("s.json"),
    );
    let m = r.path.to_str().unwrap();
    let o = spillway(&["explore", m, "--order", "dfs", "-o", full.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = spillway(&[
        "explore",
        m,
        "--order",
        "dfs",
        "--store",
        "delta",
        "--k-delta",
        "50",
        "--memory",
        "24M",
        "-o",
        delta.to_str().unwrap(),
        "--stats-json",
        stats.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&full).unwrap(),
        std::fs::read(&delta).unwrap()
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["states"].as_u64().unwrap(), r.states);
    assert_eq!(v["transitions"].as_u64().unwrap(), r.transitions);
    let d = &v["store_details"];
    assert!(d["pred_updates"].as_u64().unwrap() > 0, "{d}");
    assert!(d["pred_updates_skipped"].as_u64().unwrap() > 0, "{d}");
}

/// The Δ store numbers states exactly like the full store, so the LTS files are identical;
/// its counters appear under `store_details`.
#[test]
fn delta_store_writes_the_same_lts_as_the_full_store() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("s.json");
    for model in [
        shipped("Philosophers-PT-000005.pnml"),
        shipped("vasy_0_1.aut"),
    ] {
        let m = model.to_str().unwrap();
        for order in ["bfs", "dfs"] {
            let full = dir.path().join("full.aut");
            let o = spillway(&[
                "explore",
                m,
                "--order",
                order,
                "-o",
                full.to_str().unwrap(),
                "--no-progress",
            ]);
            assert!(o.status.success(), "{}", stderr(&o));
            for extra in [
                &["--k-delta", "3"][..],
                &["--k-delta", "1"],
                &["--k-delta", "4", "--no-pred-update", "--no-backward"],
                &[
                    "--k-delta",
                    "2",
                    "--no-collapse",
                    "--delta-cache-states",
                    "1",
                ],
            ] {
                let delta = dir.path().join("delta.aut");
                let mut args = vec![
                    "explore",
                    m,
                    "--order",
                    order,
                    "--store",
                    "delta",
                    "-o",
                    delta.to_str().unwrap(),
                    "--no-progress",
                    "--stats-json",
                    stats.to_str().unwrap(),
                ];
                args.extend_from_slice(extra);
                let o = spillway(&args);
                assert!(o.status.success(), "{}", stderr(&o));
                assert_eq!(
                    std::fs::read(&full).unwrap(),
                    std::fs::read(&delta).unwrap(),
                    "{m} {order} {extra:?}"
                );
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
                assert_eq!(v["store"], "delta");
                assert_eq!(v["exact"], true);
                let d = &v["store_details"];
                for key in [
                    "k_delta",
                    "explicit_states",
                    "delta_states",
                    "reconstitutions",
                    "transitions_fired",
                    "transitions_unfired",
                    "early_abandons",
                    "record_bytes",
                    "index_bytes",
                    "total_bytes_per_state",
                ] {
                    assert!(d.get(key).is_some(), "missing store_details.{key}");
                }
                assert_eq!(
                    d["explicit_states"].as_u64().unwrap() + d["delta_states"].as_u64().unwrap(),
                    v["states"].as_u64().unwrap()
                );
                assert!(v.get("store_disk_bytes").is_some());
            }
        }
    }
    let m = shipped("Philosophers-PT-000005.pnml");
    let o = spillway(&[
        "explore",
        m.to_str().unwrap(),
        "--store",
        "delta",
        "--k-delta",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn explore_refuses_to_overwrite_its_model() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("x.aut");
    std::fs::copy(shipped("vasy_0_1.aut"), &input).unwrap();
    let original = std::fs::read(&input).unwrap();
    std::os::unix::fs::symlink("x.aut", dir.path().join("sym.aut")).unwrap();
    std::fs::hard_link(&input, dir.path().join("hard.aut")).unwrap();
    // OUT.partial is a link to the model: writing through it would replace the model.
    std::os::unix::fs::symlink("x.aut", dir.path().join("p.aut.partial")).unwrap();
    for output in ["x.aut", "./x.aut", "sym.aut", "hard.aut", "p.aut"] {
        let o = Command::new(bin())
            .current_dir(dir.path())
            .args(["explore", "x.aut", "-o", output, "--no-progress"])
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{output}: {err}");
        assert!(
            err.contains(output) && err.contains("x.aut") && err.contains("same file"),
            "{output}: {err}"
        );
        assert_eq!(std::fs::read(&input).unwrap(), original, "{output}");
    }
    let o = Command::new(bin())
        .current_dir(dir.path())
        .args(["explore", "x.aut", "-o", "new.aut", "--no-progress"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&input).unwrap(), original);
}

#[test]
fn explore_to_dot_is_refused_above_the_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain.aut");
    let mut text = String::from("des (0, 2500, 2501)\n");
    for i in 0..2500 {
        text.push_str(&format!("({i}, \"a\", {})\n", i + 1));
    }
    std::fs::write(&chain, text).unwrap();
    let dot = dir.path().join("chain.dot");
    let o = spillway(&[
        "explore",
        chain.to_str().unwrap(),
        "-o",
        dot.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--force") && stderr(&o).contains("chain.dot"),
        "{}",
        stderr(&o)
    );
    assert!(!dot.exists());
    // A small model is drawn.
    let o = spillway(&[
        "explore",
        shipped("vasy_0_1.aut").to_str().unwrap(),
        "-o",
        dot.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&dot)
        .unwrap()
        .starts_with("digraph lts {"));
}

/// A net whose counter overflows at the widest width while exploring (not while reading)
/// is a limit error (exit 6) that names the file and the place, and says why.
#[test]
fn counter_overflow_while_exploring_names_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let net = r#"<?xml version="1.0"?>
<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml"><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="p">
<place id="a"><initialMarking><text>4294967290</text></initialMarking></place>
<transition id="t"/>
<arc id="x" source="t" target="a"/>
</page></net></pnml>
"#;
    let path = write_model(dir.path(), "growing.pnml", net);
    for extra in [&[][..], &["--token-bits", "32"][..]] {
        let mut args = vec!["explore", &path, "-q", "--no-progress"];
        args.extend_from_slice(extra);
        let o = spillway(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "{extra:?}: {err}");
        assert!(
            err.contains("growing.pnml: place 'a' would hold more than 4294967295 tokens"),
            "{extra:?}: {err}"
        );
        assert!(err.contains("32-bit counters"), "{extra:?}: {err}");
        assert!(err.contains("the net is unbounded"), "{extra:?}: {err}");
    }
    // With narrower fixed counters the advice is to widen them.
    let o = spillway(&[
        "explore",
        &path,
        "-q",
        "--no-progress",
        "--token-bits",
        "16",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains("--token-bits"), "{err}");
}

/// An explicit `--threads` that the run could not use is noted (it defaults to the cores, so
/// it is never refused); a parallel run says nothing, and `-q` silences the note.
#[test]
fn unused_threads_are_noted() {
    let model = shipped("Philosophers-PT-000005.pnml");
    let model = model.to_str().unwrap();
    let o = spillway(&["explore", model, "--store", "delta", "--threads", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("note: --threads 2: one thread ran"),
        "{}",
        stderr(&o)
    );
    // What runs in parallel, as the README's "Parallel exploration" has it: not only the
    // full store (the note had said that parallel BFS needs it).
    assert!(
        stderr(&o)
            .contains("with the full store, or with ComBack or the tree store without --memory"),
        "{}",
        stderr(&o)
    );
    let o = spillway(&["explore", model, "--threads", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("--threads 2:"), "{}", stderr(&o));
    let o = spillway(&["explore", model, "--store", "delta", "--threads", "2", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("note"), "{}", stderr(&o));
}

/// Runs spillway with standard output or standard error on `/dev/full` (every write fails
/// with ENOSPC), the other one captured.
fn spillway_full(args: &[&str], full_stdout: bool) -> Output {
    let full = std::fs::File::create("/dev/full").expect("open /dev/full");
    let mut cmd = Command::new(bin());
    cmd.args(args);
    if full_stdout {
        cmd.stdout(std::process::Stdio::from(full));
    } else {
        cmd.stderr(std::process::Stdio::from(full));
    }
    cmd.output().expect("run spillway")
}

/// The shipped 243-state model copied into `dir` as `phil.pnml`, and its bytes: the tests
/// that try to make a run overwrite its model check them afterwards.
fn phil_copy(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let model = dir.join("phil.pnml");
    std::fs::copy(shipped("Philosophers-PT-000005.pnml"), &model).unwrap();
    let bytes = std::fs::read(&model).unwrap();
    (model, bytes)
}

/// A standard output that cannot be written is an I/O error (exit 4, `<stdout>` named),
/// not a panic (exit 101); the LTS is written all the same. A standard error that cannot
/// be written loses the messages but not the exit code.
#[test]
#[cfg(target_os = "linux")]
fn unwritable_stdout_or_stderr_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (model, original) = phil_copy(dir.path());
    let m = model.to_str().unwrap();
    let out = dir.path().join("p.slts");
    let o = spillway_full(&["explore", m, "-o", out.to_str().unwrap()], true);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("spillway: error: <stdout>: No space left on device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(native::read_all(&out).unwrap().footer.states, 243);
    let o = spillway_full(&["explore", m, "-q", "--stats-json", "-"], true);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("-: cannot write stats"), "{err}");
    // Stderr on /dev/full: a successful run still exits 0, a failed one with its own code.
    let o = spillway_full(&["explore", m], false);
    assert_eq!(o.status.code(), Some(0));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = spillway_full(&["resume", empty.to_str().unwrap()], false);
    assert_eq!(o.status.code(), Some(2));
    let o = spillway_full(&["explore", m, "-o", m], false);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read(&model).unwrap(), original);
}

/// An interval too long for a `Duration` is a bad command line (exit 2), not a panic, for
/// every option that takes one, in explore and in resume; nothing is written.
#[test]
fn huge_intervals_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (model, original) = phil_copy(dir.path());
    let m = model.to_str().unwrap();
    let metrics = dir.path().join("m.jsonl");
    let metrics = metrics.to_str().unwrap();
    let work = dir.path().join("work");
    let work = work.to_str().unwrap();
    for value in ["1e99", "99999999999999999h", "1e308h"] {
        for (args, option) in [
            (
                vec!["explore", m, "--metrics", metrics, "--metrics-every", value],
                "--metrics-every",
            ),
            (
                vec![
                    "explore",
                    m,
                    "-o",
                    "x.slts",
                    "--workdir",
                    work,
                    "--checkpoint-every",
                    value,
                ],
                "--checkpoint-every",
            ),
            (
                vec!["resume", work, "--metrics-every", value],
                "--metrics-every",
            ),
            (
                vec!["resume", work, "--checkpoint-every", value],
                "--checkpoint-every",
            ),
        ] {
            let o = Command::new(bin())
                .current_dir(dir.path())
                .args(&args)
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("invalid value '{value}' for '{option}"))
                    && err.contains("too long an interval"),
                "{args:?}: {err}"
            );
            assert!(!Path::new(metrics).exists() && !Path::new(work).exists());
            assert!(!dir.path().join("x.slts").exists());
            assert_eq!(std::fs::read(&model).unwrap(), original);
        }
    }
}

/// A size beyond 2^60 bytes is refused (exit 2) rather than clamped to 16 EiB and run.
#[test]
fn oversized_memory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (model, original) = phil_copy(dir.path());
    let m = model.to_str().unwrap();
    let stats = dir.path().join("s.json");
    let s = stats.to_str().unwrap();
    for value in [
        "1e99",
        "99999999999999999999G",
        "18446744073709551615",
        "1048577T",
    ] {
        for args in [
            vec!["explore", m, "--memory", value, "--stats-json", s],
            vec!["resume", "nowhere", "--memory", value, "--stats-json", s],
        ] {
            let o = spillway(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("invalid value '{value}' for '--memory"))
                    && err.contains("more than 2^60 bytes"),
                "{args:?}: {err}"
            );
            assert!(!stats.exists());
            assert_eq!(std::fs::read(&model).unwrap(), original);
        }
    }
    // 2^60 bytes itself is a size (far above this machine: the run says so and goes on).
    let o = spillway(&["explore", m, "-q", "--memory", "1048576T"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// `--metrics`, `--stats-json` and `-o` each name their own file: two of them on one file
/// (by any path: `./`, a symlink, a hard link, a file not created yet) or one on the model
/// are refused with exit 2 before anything is written, as `-o MODEL` is.
#[test]
fn output_files_may_not_overwrite_one_another_or_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(shipped("Philosophers-PT-000005.pnml"), d.join("phil.pnml")).unwrap();
    std::os::unix::fs::symlink("phil.pnml", d.join("sym.pnml")).unwrap();
    std::fs::hard_link(d.join("phil.pnml"), d.join("hard.pnml")).unwrap();
    std::fs::write(d.join("old.jsonl"), "keep\n").unwrap();
    let run = |args: &[&str]| {
        Command::new(bin())
            .current_dir(d)
            .args(args)
            .output()
            .unwrap()
    };
    let model = std::fs::read(d.join("phil.pnml")).unwrap();
    for (args, said) in [
        (
            &["--metrics", "phil.pnml"][..],
            "--metrics phil.pnml is the model file phil.pnml",
        ),
        (
            &["--metrics", "hard.pnml"][..],
            "--metrics hard.pnml is the model file",
        ),
        (
            &["--stats-json", "sym.pnml"][..],
            "--stats-json sym.pnml is the model file",
        ),
        (
            &["-o", "out.slts", "--stats-json", "./out.slts"][..],
            "--stats-json ./out.slts is the same file as -o out.slts",
        ),
        (
            &["-o", "s2.aut", "--metrics", "s2.aut"][..],
            "--metrics s2.aut is the same file as -o s2.aut",
        ),
        (
            &["-o", "s2.aut", "--metrics", "s2.aut.partial"][..],
            "--metrics s2.aut.partial is the same file as the unfinished output s2.aut.partial",
        ),
        (
            &["--metrics", "old.jsonl", "--stats-json", "old.jsonl"][..],
            "--stats-json old.jsonl is the same file as --metrics old.jsonl",
        ),
    ] {
        let mut all = vec!["explore", "phil.pnml", "-q"];
        all.extend_from_slice(args);
        let o = run(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("spillway: error: ") && err.contains(said),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read(d.join("phil.pnml")).unwrap(), model);
        assert_eq!(std::fs::read(d.join("old.jsonl")).unwrap(), b"keep\n");
        for new in ["out.slts", "s2.aut", "s2.aut.partial"] {
            assert!(!d.join(new).exists(), "{args:?}: {new} was written");
        }
    }
    // Standard output is no file: both may go there.
    let o = run(&[
        "explore",
        "phil.pnml",
        "-q",
        "--metrics",
        "-",
        "--stats-json",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // plot: the SVG may not replace the metrics it is drawn from.
    let o = run(&["explore", "phil.pnml", "-q", "--metrics", "m.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let metrics = std::fs::read(d.join("m.jsonl")).unwrap();
    let o = run(&["plot", "m.jsonl", "-o", "./m.jsonl"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the output ./m.jsonl is the input m.jsonl"),
        "{err}"
    );
    assert_eq!(std::fs::read(d.join("m.jsonl")).unwrap(), metrics);
    let o = run(&["plot", "m.jsonl", "-o", "m.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `resume` checks `--stats-json` and `--metrics` against the model and the output the
/// checkpoint records: refused with exit 2, the model and the checkpoint unchanged, and the
/// run then resumes.
#[test]
fn resume_outputs_may_not_overwrite_the_model_or_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = common::toggles_file(d, 18);
    let out = d.join("t.slts");
    let partial = d.join("t.slts.partial");
    let work = d.join("run");
    let mut child = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["-q", "--no-progress", "--threads", "1", "--memory", "64M"])
        .args(["--checkpoint-every", "0.02s", "--workdir"])
        .arg(&work)
        .arg("-o")
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !work.join("manifest").exists() {
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        assert!(std::time::Instant::now() < deadline, "no checkpoint");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(7));
    let before = |p: &Path| std::fs::read(p).unwrap();
    let (m0, k0, p0) = (
        before(&model),
        before(&work.join("manifest")),
        before(&partial),
    );
    let w = work.to_str().unwrap();
    for (flag, victim, said) in [
        ("--stats-json", &model, "is the model file"),
        ("--metrics", &model, "is the model file"),
        ("--stats-json", &out, "is the same file as -o"),
        (
            "--metrics",
            &partial,
            "is the same file as the unfinished output",
        ),
    ] {
        let o = spillway(&["resume", w, "-q", flag, victim.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {victim:?}: {err}");
        assert!(err.contains(flag) && err.contains(said), "{err}");
        assert_eq!(before(&model), m0);
        assert_eq!(before(&work.join("manifest")), k0);
        assert_eq!(before(&partial), p0);
        assert!(!out.exists());
    }
    let stats = d.join("s.json");
    let o = spillway(&[
        "resume",
        w,
        "-q",
        "--checkpoint-every",
        "off",
        "--stats-json",
        stats.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(native::read_all(&out).unwrap().footer.states, 1 << 18);
}

/// A checkpointed run with a `.fsm` or `.dot` output (formats without a checkpoint) is
/// refused at the start, naming the output, before the run directory is made: it used to
/// run until its first checkpoint (or SIGINT) and throw the work away there.
#[test]
fn checkpointed_run_refuses_uncheckpointable_output_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, _) = phil_copy(d);
    let m = model.to_str().unwrap();
    for (out, every) in [("w.fsm", "10s"), ("w.dot", "off"), ("W.FSM", "1m")] {
        let output = d.join(out);
        // An existing file of that name is left as it was.
        std::fs::write(&output, "keep").unwrap();
        let work = d.join("work");
        let o = spillway(&[
            "explore",
            m,
            "-q",
            "-o",
            output.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            "--checkpoint-every",
            every,
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(
            err.starts_with(&format!("spillway: error: -o {}: ", output.display()))
                && err.contains("cannot be checkpointed")
                && err.contains(".slts or .aut"),
            "{out}: {err}"
        );
        assert_eq!(std::fs::read(&output).unwrap(), b"keep");
        assert!(!work.exists(), "{out}: the run directory was made");
        assert!(!d.join(format!("{out}.partial")).exists());
        std::fs::remove_file(&output).unwrap();
    }
}

/// An `-o` (or `--stats-json`) that is an existing directory is refused before the search
/// (exit 4, the path named): it used to be found when the finished LTS was renamed onto it,
/// and the whole search was lost.
#[test]
fn output_that_is_a_directory_is_refused_before_the_search() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, _) = phil_copy(d);
    let m = model.to_str().unwrap();
    let taken = d.join("d.slts");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("inside"), "keep").unwrap();
    std::os::unix::fs::symlink("d.slts", d.join("link.aut")).unwrap();
    let t = taken.to_str().unwrap();
    for (args, named, option) in [
        (vec!["-o", t, "--stats-json", "s.json"], t, "-o"),
        (
            vec!["-o", "link.aut", "--stats-json", "s.json"],
            "link.aut",
            "-o",
        ),
        (
            vec!["-o", "fine.slts", "--stats-json", t],
            t,
            "--stats-json",
        ),
    ] {
        let o = Command::new(bin())
            .current_dir(d)
            .args(["explore", m])
            .args(&args)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(4), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("spillway: error: {named}: "))
                && err.contains(&format!("is a directory; {option} needs a file path")),
            "{args:?}: {err}"
        );
        // Refused before the search: no statistics were printed or written, nothing made.
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(!d.join("s.json").exists() && !d.join("fine.slts").exists());
        assert!(!d.join("d.slts.partial").exists() && !d.join("link.aut.partial").exists());
        assert_eq!(std::fs::read(taken.join("inside")).unwrap(), b"keep");
    }
}

/// `--metrics -` (standard output) stays standard output in a resumed run: the recorded
/// path had been made absolute, and the resume wrote its metrics to a file named `-` in
/// the working directory.
#[test]
fn metrics_to_stdout_stay_on_stdout_after_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = common::toggles_file(d, 18);
    let work = d.join("run");
    let mut child = Command::new(bin())
        .current_dir(d)
        .arg("explore")
        .arg(&model)
        .args(["-q", "--no-progress", "--threads", "1", "--metrics", "-"])
        .args(["--checkpoint-every", "0.02s", "--workdir"])
        .arg(&work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !work.join("manifest").exists() {
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        assert!(std::time::Instant::now() < deadline, "no checkpoint");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(7));
    let o = Command::new(bin())
        .current_dir(d)
        .arg("resume")
        .arg(&work)
        .args(["-q", "--no-progress"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !d.join("-").exists(),
        "the metrics went to a file named '-'"
    );
    let lines = String::from_utf8_lossy(&o.stdout);
    assert!(
        lines.lines().any(|l| l.contains("\"states\":262144")),
        "the last metrics line on stdout: {lines}"
    );
}

/// An option that would have no effect in the run is refused at the start (exit 2), naming
/// the option and why, before the model is read: these runs name a model that does not
/// exist, which would otherwise be an I/O error (exit 4), and nothing is written. The same
/// options where they do act are accepted, so the check is not over-eager.
#[test]
fn options_without_effect_are_refused_before_the_model_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = |name: &str| d.join(name).to_str().unwrap().to_string();
    let (pnml, aut, dve) = (path("absent.pnml"), path("absent.aut"), path("absent.dve"));
    let (slts, work) = (path("x.slts"), path("work"));
    let refused: Vec<(Vec<&str>, &[&str])> = vec![
        // Model kind.
        (
            vec![&aut, "--token-bits", "8"],
            &[
                "--token-bits applies to P/T nets (.pnml) only",
                "absent.aut is an Aldebaran LTS",
            ],
        ),
        (
            vec![&dve, "--token-bits", "auto"],
            &[
                "--token-bits applies to P/T nets",
                "absent.dve is a DVE process system",
            ],
        ),
        // Output format.
        (
            vec![&pnml, "--force"],
            &["--force", "writes no LTS (no -o)"],
        ),
        (
            vec![&pnml, "--force", "-o", &slts],
            &[
                "--force only lifts the size limit of .dot output",
                "native (.slts)",
            ],
        ),
        (
            vec![&pnml, "-o", "x.aut", "--force"],
            &["--force", "Aldebaran (.aut)"],
        ),
        (
            vec![&pnml, "-o", "x.fsm", "--force"],
            &["--force", "mCRL2 FSM (.fsm)"],
        ),
        // Storage: no segment files to put in the work directory; a policy a budget implies.
        (
            vec![&pnml, "--workdir", &work],
            &["--workdir has no effect", "--store full"],
        ),
        (
            vec![
                &pnml,
                "--store",
                "tree",
                "--workdir",
                &work,
                "--memory",
                "unlimited",
            ],
            &["--workdir has no effect", "--store tree"],
        ),
        (
            vec![&pnml, "--store", "hashcompact", "--workdir", &work],
            &["--workdir has no effect"],
        ),
        (
            vec![&pnml, "--spill", "always", "--memory", "64M"],
            &["--spill always has no effect under --memory SIZE"],
        ),
        // Store options that act only in some runs of their store.
        (
            vec![
                &pnml,
                "--order",
                "dfs",
                "--store",
                "comback",
                "--comback-waiting",
                "vectors",
            ],
            &["--comback-waiting", "a DFS has none"],
        ),
        (
            vec![
                &pnml,
                "--order",
                "dfs",
                "--store",
                "comback",
                "--comback-waiting",
                "state-numbers",
            ],
            &["--comback-waiting", "a DFS has none"],
        ),
        (
            vec![
                &pnml,
                "--store",
                "comback",
                "--comback-block-cache",
                "1000000",
                "--memory",
                "64M",
            ],
            &["--comback-block-cache has no effect under --memory SIZE"],
        ),
        (
            vec![
                &pnml,
                "--order",
                "dfs",
                "--store",
                "delta",
                "--delta-strata",
                "3",
            ],
            &["--delta-strata", "--delta-index-limit N"],
        ),
        (
            vec![&pnml, "--store", "delta", "--delta-strata", "3"],
            &["--delta-strata", "--delta-index-limit N"],
        ),
        (
            vec![&pnml, "--store", "snapshots", "--allow-nontermination"],
            &[
                "--allow-nontermination has no effect",
                "(8,LLNR,4) samples with an increasing period",
            ],
        ),
        (
            vec![
                &pnml,
                "--store",
                "snapshots",
                "--caches",
                "(c1,LRU,3)+",
                "--allow-nontermination",
            ],
            &["--allow-nontermination has no effect", "it grows ('+')"],
        ),
        (
            vec![
                &pnml,
                "--store",
                "snapshots",
                "--caches",
                "(c2,LRU,inf)",
                "--allow-nontermination",
            ],
            &[
                "--allow-nontermination has no effect",
                "(c2,LRU,inf) never evicts",
            ],
        ),
        (
            vec![
                &pnml,
                "--order",
                "dfs",
                "--store",
                "cache",
                "--cache-size",
                "10",
                "--replacement",
                "lru",
                "--cache-seed",
                "2",
            ],
            &["--cache-seed", "--replacement lru"],
        ),
        (
            vec![
                &pnml,
                "--order",
                "dfs",
                "--store",
                "cache",
                "--caches",
                "(c1,MFU,20)(c1,LRU,10)",
                "--cache-seed",
                "2",
            ],
            &["--cache-seed", "has no RND cache"],
        ),
        // A store's own refusals come before the model is read too.
        (
            vec![&pnml, "--store", "bitstate", "-o", &slts],
            &["--store bitstate", "cannot write an LTS"],
        ),
        (
            vec![&pnml, "--store", "delta", "--delta-index-limit", "1000"],
            &[
                "--delta-index-limit cannot be used here",
                "it needs --order dfs",
            ],
        ),
    ];
    for (args, expect) in &refused {
        let mut all = vec!["explore", "--no-progress"];
        all.extend(args.iter().copied());
        let o = spillway(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        for e in *expect {
            assert!(err.contains(e), "{all:?}: {err}");
        }
        assert!(
            !Path::new(&slts).exists() && !Path::new(&work).exists(),
            "{all:?}"
        );
    }

    // Where the same options act, they are accepted.
    let phil = shipped("Philosophers-PT-000005.pnml");
    let phil = phil.to_str().unwrap();
    let vasy = shipped("vasy_0_1.aut");
    let vasy = vasy.to_str().unwrap();
    let (dot, run, run2) = (path("x.dot"), path("run"), path("run2"));
    let accepted: Vec<Vec<&str>> = vec![
        vec![phil, "--token-bits", "16"],
        vec![phil, "-o", &dot, "--force"],
        vec![phil, "--workdir", &work, "--memory", "64M"],
        vec![phil, "--workdir", &work, "--spill", "always"],
        vec![phil, "--workdir", &work, "--store", "delta"],
        // Checkpointed: `resume --memory unlimited` would lift the budget, and then the
        // policy and the block cache act.
        vec![
            phil,
            "--spill",
            "always",
            "--memory",
            "64M",
            "--checkpoint-every",
            "1h",
            "--workdir",
            &run,
            "-o",
            &slts,
        ],
        vec![
            phil,
            "--store",
            "comback",
            "--comback-block-cache",
            "1000000",
            "--memory",
            "64M",
            "--checkpoint-every",
            "1h",
            "--workdir",
            &run2,
        ],
        vec![
            phil,
            "--store",
            "comback",
            "--comback-block-cache",
            "1000000",
        ],
        vec![phil, "--store", "comback", "--comback-waiting", "vectors"],
        // Falls back to forward replay on a model that cannot fire backwards (its help says
        // so); the matches are still cached as backward reconstruction caches them.
        vec![vasy, "--store", "comback", "--comback-backward"],
        vec![
            phil,
            "--order",
            "dfs",
            "--store",
            "delta",
            "--delta-index-limit",
            "1000",
            "--delta-strata",
            "4",
        ],
        vec![
            phil,
            "--store",
            "snapshots",
            "--caches",
            "(c1,LRU,3)",
            "--allow-nontermination",
        ],
        vec![
            phil,
            "--order",
            "dfs",
            "--store",
            "cache",
            "--cache-size",
            "300",
            "--cache-seed",
            "2",
        ],
        vec![
            phil,
            "--order",
            "dfs",
            "--store",
            "cache",
            "--cache-size",
            "300",
            "--replacement",
            "type",
            "--cache-seed",
            "2",
        ],
        vec![
            phil,
            "--order",
            "dfs",
            "--store",
            "cache",
            "--caches",
            "(c1,RND,300)",
            "--cache-seed",
            "2",
        ],
        // Not refused: it defaults to the cores in every run; a note says it went unused.
        vec![phil, "--order", "dfs", "--threads", "2"],
    ];
    for args in &accepted {
        let mut all = vec!["explore", "-q", "--no-progress"];
        all.extend(args.iter().copied());
        let o = spillway(&all);
        assert_eq!(o.status.code(), Some(0), "{all:?}: {}", stderr(&o));
    }
}

/// A second `explore -o OUT` while another process writes `OUT` is refused at once: it
/// neither empties the other's `OUT.partial` nor removes it, and a run directory it made
/// for itself is gone again. (Two runs had shared the file, and one reported success for a
/// file mixed from both.)
#[test]
fn explore_refuses_an_output_another_process_is_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, _) = phil_copy(d);
    let m = model.to_str().unwrap();
    for ext in ["slts", "aut", "fsm", "dot"] {
        let out = d.join(format!("o.{ext}"));
        let partial = d.join(format!("o.{ext}.partial"));
        std::fs::write(&partial, "the other run's bytes").unwrap();
        let lock = std::fs::OpenOptions::new()
            .write(true)
            .open(&partial)
            .unwrap();
        lock.try_lock().unwrap();
        let o = out.to_str().unwrap();
        let mut runs = vec![vec!["explore", m, "-q", "--force", "-o", o]];
        if ext == "slts" || ext == "aut" {
            runs.push(vec![
                "explore",
                m,
                "-q",
                "-o",
                o,
                "--checkpoint-every",
                "1s",
                "--workdir",
                "run",
            ]);
        }
        for args in runs {
            let args: Vec<&str> = args
                .into_iter()
                .filter(|a| *a != "--force" || ext == "dot")
                .collect();
            let r = Command::new(bin())
                .current_dir(d)
                .args(&args)
                .output()
                .unwrap();
            let err = stderr(&r);
            assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(
                err.trim_end(),
                format!(
                    "spillway: error: another spillway process is writing {o} ({o}.partial is locked); wait for it to finish, or choose another output path"
                ),
                "{args:?}"
            );
            assert_eq!(
                std::fs::read(&partial).unwrap(),
                b"the other run's bytes",
                "{args:?}"
            );
            assert!(!out.exists() && !d.join("run").exists(), "{args:?}");
        }
        // The library refuses the same way.
        let net = spillway::model::pnml::parse_file(&model).unwrap();
        let model_built = spillway::model::petri::build(net, 8).unwrap();
        let cfg = spillway::run::ExploreConfig {
            output: Some(out.clone()),
            force: true,
            ..Default::default()
        };
        let e = spillway::run::Search::model(model_built.as_ref())
            .config(cfg.clone())
            .run()
            .unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert_eq!(std::fs::read(&partial).unwrap(), b"the other run's bytes");
        // Once the other writer is gone, its leftover is overwritten.
        drop(lock);
        // `--force` is refused where it has no effect: only a .dot output takes it.
        let force: &[&str] = if ext == "dot" { &["--force"] } else { &[] };
        let r = Command::new(bin())
            .current_dir(d)
            .args(["explore", m, "-q", "-o", o])
            .args(force)
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", stderr(&r));
        assert!(out.exists() && !partial.exists());
    }
}

/// `--stats-json FILE` is written through a temporary file renamed into place: a failed
/// write (a full disk; here a file size limit) is exit 4 and keeps the previous file whole.
#[test]
fn a_failed_stats_write_keeps_the_previous_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, _) = phil_copy(d);
    let stats = d.join("s.json");
    let old = format!("{{\"previous\": \"{}\"}}\n", "x".repeat(4000));
    std::fs::write(&stats, &old).unwrap();
    let mut cmd = Command::new(bin());
    cmd.arg("explore")
        .arg(&model)
        .args(["-q", "--no-progress", "--stats-json"])
        .arg(&stats);
    let o = common::limit_file_size(&mut cmd, 256).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!("{}: cannot write stats", stats.display())),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&stats).unwrap(), old);
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        2,
        "no temporary file left"
    );
    // Without the limit it is replaced by the run's statistics.
    let o = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["-q", "--no-progress", "--stats-json"])
        .arg(&stats)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["states"], 243);
}

/// `--stats-json` into a missing directory is refused before the search (exit 4), as
/// `--metrics` is, not after it with the statistics lost; `-` stays standard output.
#[test]
fn stats_json_in_a_missing_directory_is_refused_before_the_search() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, _) = phil_copy(d);
    let out = d.join("o.slts");
    let missing = d.join("missing/s.json");
    let o = Command::new(bin())
        .arg("explore")
        .arg(&model)
        .args(["--no-progress", "-o"])
        .arg(&out)
        .arg("--stats-json")
        .arg(&missing)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "spillway: error: {}: cannot write there: No such file or directory (os error 2)",
            missing.display()
        )
    );
    // Nothing was explored: no statistics printed, no output written, nothing left.
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 1, "only the model");
    let o = spillway(&[
        "explore",
        model.to_str().unwrap(),
        "-q",
        "--stats-json",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["states"], 243);
}
