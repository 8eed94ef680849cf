//! Stratified caching of the Δ store (`--delta-index-limit`, DFS): every reachable state is
//! visited, forgotten states met again are numbered again, so the LTS written is strongly
//! bisimilar to the full store's (checked with `spillway lts compare`), the counts are upper
//! bounds of the reference counts, and the index never holds more entries than the limit.

mod common;

use std::path::Path;
use std::process::Command;

fn spillway(args: &[&str]) -> std::process::Output {
    Command::new(common::bin()).args(args).output().unwrap()
}

fn stats(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (model, index limit, kδ, strata, extra flags): limits of 40–80% of the states.
const CASES: &[(&str, u64, &str, &str, &[&str])] = &[
    ("mcc/Peterson/Peterson-PT-2.pnml", 10_000, "5", "8", &[]),
    ("mcc/Sudoku/Sudoku-PT-AN03.pnml", 4_710, "1", "1", &[]),
    (
        "mcc/Raft/Raft-PT-02.pnml",
        5_904,
        "20",
        "4",
        &["--no-backward"],
    ),
    (
        "mcc/DoubleExponent/DoubleExponent-PT-002.pnml",
        1_483,
        "50",
        "8",
        &["--no-collapse"],
    ),
    (
        "mcc/LamportFastMutEx/LamportFastMutEx-PT-3.pnml",
        15_793,
        "5",
        "16",
        &["--no-pred-update"],
    ),
];

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn forgetting_states_keeps_the_lts_bisimilar() {
    let Some(models) = common::shared_models() else {
        return;
    };
    let refs = common::reference_rows(0, u64::MAX);
    let dir = tempfile::tempdir().unwrap();
    for &(rel, limit, k, strata, extra) in CASES {
        let r = refs.iter().find(|r| r.rel == rel).expect("reference row");
        let model = models.join(rel);
        let full = dir.path().join("full.slts");
        let cached = dir.path().join("cached.slts");
        let json = dir.path().join("s.json");
        let out = spillway(&[
            "explore",
            model.to_str().unwrap(),
            "-q",
            "-o",
            full.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{rel}: full store failed");
        let limit_s = limit.to_string();
        let mut args = vec![
            "explore",
            model.to_str().unwrap(),
            "-q",
            "--store",
            "delta",
            "--order",
            "dfs",
            "--k-delta",
            k,
            "--delta-index-limit",
            &limit_s,
            "--delta-strata",
            strata,
            "-o",
            cached.to_str().unwrap(),
            "--stats-json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = spillway(&args);
        assert!(
            out.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = stats(&json);
        let d = &s["store_details"];
        let forgotten = s["forgotten_states"].as_u64().unwrap();
        assert!(
            forgotten > 0,
            "{rel}: the limit should have forced forgetting"
        );
        assert_eq!(d["forgotten_states"].as_u64(), Some(forgotten));
        assert_eq!(s["exact"], false, "{rel}");
        assert_eq!(s["omission_probability"], 0.0, "{rel}");
        assert!(
            d["remembered_states"].as_u64().unwrap() <= limit,
            "{rel}: index over its limit"
        );
        let states = s["states"].as_u64().unwrap();
        let transitions = s["transitions"].as_u64().unwrap();
        assert!(
            states >= r.states && transitions >= r.transitions,
            "{rel}: {states} states / {transitions} transitions, reference {} / {}",
            r.states,
            r.transitions
        );
        let out = spillway(&[
            "lts",
            "compare",
            full.to_str().unwrap(),
            cached.to_str().unwrap(),
            "-q",
        ]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "equivalent (strong bisimulation)\n",
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn an_index_limit_below_the_search_depth_is_a_clear_error() {
    let Some(models) = common::shared_models() else {
        return;
    };
    let model = models.join("mcc/Peterson/Peterson-PT-2.pnml");
    // Peterson-PT-2's DFS stack reaches 600 states.
    let out = spillway(&[
        "explore",
        model.to_str().unwrap(),
        "-q",
        "--store",
        "delta",
        "--order",
        "dfs",
        "--delta-index-limit",
        "100",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(6),
        "exit 6 (a limit was reached): {err}"
    );
    assert!(
        err.contains("--delta-index-limit 100 is too small") && err.contains("on the search path"),
        "{err}"
    );
}

#[test]
fn the_index_limit_is_refused_where_it_cannot_work() {
    let model = common::shipped("Philosophers-PT-000005.pnml");
    let m = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path().join("run");
    for (args, why) in [
        (
            vec!["--store", "delta", "--order", "bfs"],
            "it needs --order dfs",
        ),
        (vec!["--store", "full", "--order", "dfs"], "--store delta"),
        (
            vec![
                "--store",
                "delta",
                "--order",
                "dfs",
                "--workdir",
                wd.to_str().unwrap(),
                "--checkpoint-every",
                "off",
            ],
            "cannot be checkpointed",
        ),
    ] {
        let mut all = vec!["explore", m, "-q", "--delta-index-limit", "1000"];
        all.extend(args);
        let out = spillway(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(why), "{all:?}: {err}");
    }
    assert!(!wd.exists(), "a refused run leaves no directory");
}
