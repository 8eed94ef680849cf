//! ComBack and the two lossy baselines end to end: identical native LTS files from ComBack and
//! the full table in BFS (same numbering, same edges), the stats keys, and the inexact stores'
//! reports.

mod common;

use common::{bin, reference_rows, shipped, toggles_file};
use spillway::engine::{EngineOptions, Order};
use spillway::run::{ExploreConfig, Search};
use spillway::store::bitstate::BitstateOptions;
use spillway::store::comback::{CombackOptions, Reconstruction, WaitingSet};
use spillway::store::hashcompact::HashCompactOptions;
use spillway::store::StoreConfig;
use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run spillway")
}

/// Writes `model`'s native LTS with the given extra flags; returns the file's bytes.
fn native_file(model: &Path, dir: &Path, name: &str, flags: &[&str]) -> Vec<u8> {
    let out = dir.join(format!("{name}.slts"));
    let mut args = vec![
        "explore",
        model.to_str().unwrap(),
        "-q",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let o = run(&args);
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(&out).unwrap()
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn bfs_native_file_from_comback_is_identical_to_full() {
    let dir = tempfile::tempdir().unwrap();
    let mut models = vec![
        shipped("Philosophers-PT-000005.pnml"),
        shipped("vasy_0_1.aut"),
    ];
    // A few reference models of different shapes, up to 60,000 states.
    models.extend(
        reference_rows(10_000, 60_000)
            .into_iter()
            .step_by(3)
            .map(|r| r.path),
    );
    for m in &models {
        let full = native_file(m, dir.path(), "full", &["--store", "full"]);
        for (name, flags) in [
            ("comback", vec!["--store", "comback"]),
            (
                "comback-8bit-nocache",
                vec![
                    "--store",
                    "comback",
                    "--comback-hash-bits",
                    "8",
                    "--comback-cache",
                    "0",
                ],
            ),
            (
                "comback-backward-vectors",
                vec![
                    "--store",
                    "comback",
                    "--comback-backward",
                    "--comback-waiting",
                    "vectors",
                    "--comback-cache",
                    "100",
                ],
            ),
        ] {
            let cb = native_file(m, dir.path(), name, &flags);
            assert!(
                cb == full,
                "{}: {name} wrote a different native file ({} vs {} bytes)",
                m.display(),
                cb.len(),
                full.len()
            );
        }
    }
}

fn explore(model: &Path, order: Order, store: StoreConfig) -> spillway::ExploreStats {
    let cfg = ExploreConfig {
        order,
        store,
        engine: EngineOptions {
            progress: false,
            threads: 1,
        },
        ..ExploreConfig::default()
    };
    Search::file(model).config(cfg).run().unwrap()
}

#[test]
fn comback_stats_report_reconstructions_collisions_and_bytes() {
    let m = shipped("Philosophers-PT-000005.pnml");
    let s = explore(
        &m,
        Order::Bfs,
        StoreConfig::Comback(CombackOptions {
            hash_bits: 6,
            cache: 0,
            ..CombackOptions::default()
        }),
    );
    assert_eq!((s.states, s.transitions), (243, 945));
    assert!(s.exact);
    let d = &s.store_details;
    for key in [
        "hash_bits",
        "reconstructions",
        "reconstruction_fires",
        "longest_collision_list",
        "state_table_bytes",
        "state_table_bytes_per_state",
        "backedge_bytes",
        "backedge_bytes_per_state",
        "cache_bytes",
        "generated_states",
    ] {
        assert!(d.contains_key(key), "missing {key}: {d:?}");
    }
    assert_eq!(d["hash_bits"], 6);
    assert!(d["reconstructions"].as_u64().unwrap() > 0);
    assert!(d["reconstruction_fires"].as_u64().unwrap() > 0);
    // 243 states in 64 descriptors.
    assert!(d["longest_collision_list"].as_u64().unwrap() >= 4);
    assert!(d["backedge_bytes"].as_u64().unwrap() >= 243 * 24);
    assert_eq!(d["generated_states"].as_u64().unwrap(), 946);
}

#[test]
fn backward_reconstruction_stops_early_on_petri_nets_and_falls_back_on_aut() {
    let opts = |bits| {
        StoreConfig::Comback(CombackOptions {
            hash_bits: bits,
            cache: 0,
            reconstruction: Reconstruction::Backward,
            waiting_set: WaitingSet::Vectors,
            ..CombackOptions::default()
        })
    };
    let s = explore(&shipped("Philosophers-PT-000005.pnml"), Order::Bfs, opts(4));
    assert_eq!((s.states, s.transitions), (243, 945));
    let d = &s.store_details;
    assert!(d["backward_unfires"].as_u64().unwrap() > 0, "{d:?}");
    assert!(d["backward_early_rejects"].as_u64().unwrap() > 0, "{d:?}");
    assert_eq!(d["backward_fallbacks"], 0);
    let s = explore(&shipped("vasy_0_1.aut"), Order::Bfs, opts(4));
    assert!(s.exact);
    assert!(s.store_details["backward_fallbacks"].as_u64().unwrap() > 0);
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn lossy_stores_report_inexact_with_an_omission_probability() {
    for r in reference_rows(0, 20_000) {
        let hc = explore(
            &r.path,
            Order::Bfs,
            StoreConfig::Hashcompact(HashCompactOptions::default()),
        );
        assert!(!hc.exact, "{}", r.rel);
        // n (g - n) / 2^64 with g = transitions + 1 generated: zero only without revisits.
        let revisits = r.transitions + 1 > r.states;
        assert_eq!(hc.omission_probability > 0.0, revisits, "{}", r.rel);
        assert!(
            hc.omission_probability < 1e-9,
            "{}: {}",
            r.rel,
            hc.omission_probability
        );
        assert_eq!(
            (hc.states, hc.transitions),
            (r.states, r.transitions),
            "{}",
            r.rel
        );
        let bs = explore(
            &r.path,
            Order::Dfs,
            StoreConfig::Bitstate(BitstateOptions {
                log2_bits: Some(30),
                k: 3,
            }),
        );
        assert!(!bs.exact, "{}", r.rel);
        assert!(
            bs.omission_probability > 0.0 && bs.omission_probability < 1e-3,
            "{}: {}",
            r.rel,
            bs.omission_probability
        );
        assert_eq!(
            (bs.states, bs.transitions),
            (r.states, r.transitions),
            "{}",
            r.rel
        );
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn lossy_stores_with_few_bits_lose_states_and_say_so() {
    let Some(r) = reference_rows(5_000, 200_000).into_iter().next() else {
        return;
    };
    let hc = explore(
        &r.path,
        Order::Bfs,
        StoreConfig::Hashcompact(HashCompactOptions {
            bits: 10,
            ..Default::default()
        }),
    );
    assert!(
        hc.states <= 1024 && hc.states < r.states,
        "{}: {}",
        r.rel,
        hc.states
    );
    assert_eq!(hc.omission_probability, 1.0);
    let bs = explore(
        &r.path,
        Order::Bfs,
        StoreConfig::Bitstate(BitstateOptions {
            log2_bits: Some(10),
            k: 2,
        }),
    );
    assert!(bs.states < r.states, "{}: {}", r.rel, bs.states);
    assert_eq!(bs.omission_probability, 1.0);
}

#[test]
fn bitstate_refuses_to_write_an_lts_and_cli_prints_inexact() {
    let dir = tempfile::tempdir().unwrap();
    let m = shipped("Philosophers-PT-000005.pnml");
    let out = dir.path().join("x.slts");
    let o = run(&[
        "explore",
        m.to_str().unwrap(),
        "--store",
        "bitstate",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot write an LTS"));
    assert!(!out.exists());
    let o = run(&[
        "explore",
        m.to_str().unwrap(),
        "--store",
        "hashcompact",
        "--hash-bits",
        "32",
    ]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("omission probability"), "{text}");
    assert!(text.contains("states        243"), "{text}");
    let o = run(&["explore", m.to_str().unwrap(), "--hash-bits", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Options of another store than the chosen one are refused (exit 2) with the option and
/// its store named, never silently ignored; switches have one form, `--X` / `--no-X`, the
/// later winning; `--help` lists each store's options under its own heading.
#[test]
fn options_of_another_store_are_refused() {
    let m = shipped("Philosophers-PT-000005.pnml");
    let m = m.to_str().unwrap();
    for (store, flag, owner) in [
        ("comback", "--no-backward", "delta"),
        ("comback", "--hash-bits=8", "hashcompact"),
        ("full", "--comback-cache=5", "comback"),
        ("delta", "--no-comback-mtf", "comback"),
        ("hashcompact", "--k-delta=5", "delta"),
        ("full", "--bitstate-k=2", "bitstate"),
    ] {
        let o = run(&["explore", m, "--store", store, flag]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{store} {flag}: {err}");
        assert!(
            err.contains(&format!("option of --store {owner}"))
                && err.contains(flag.split('=').next().unwrap()),
            "{store} {flag}: {err}"
        );
    }
    let o = run(&["explore", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for heading in [
        "ComBack store (--store comback)",
        "Δ-markings store (--store delta)",
        "Hash compaction (--store hashcompact)",
        "Bit-state hashing (--store bitstate)",
    ] {
        assert!(help.contains(heading), "{heading} in\n{help}");
    }
    // Every switch comes as a pair: --X and --no-X.
    for line in help.lines().map(str::trim_start) {
        if let Some(rest) = line.strip_prefix("--no-") {
            let name = rest.split_whitespace().next().unwrap();
            if name != "progress" {
                assert!(
                    help.contains(&format!("--{name} ")) || help.contains(&format!("--{name}\n")),
                    "--no-{name} without --{name}"
                );
            }
        }
    }
    let stats = |flags: &[&str]| {
        let mut args = vec![
            "explore",
            m,
            "-q",
            "--stats-json",
            "-",
            "--store",
            "comback",
        ];
        args.extend_from_slice(flags);
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["store_details"]["comback_move_to_front"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(stats(&[]), "on");
    assert_eq!(stats(&["--no-comback-mtf"]), "off");
    assert_eq!(stats(&["--no-comback-mtf", "--comback-mtf"]), "on");
    assert_eq!(stats(&["--comback-mtf", "--no-comback-mtf"]), "off");
}

/// The automatic state cache (`--comback-cache auto`, the default): in BFS it grows with the
/// widest level (toggles-k: level d holds C(k, d) states) up to the states stored, stays at
/// its floor in DFS, keeps to 1/4 of a `--memory` budget, and a given size is kept as is.
#[test]
fn automatic_cache_follows_levels_states_and_budget() {
    let dir = tempfile::tempdir().unwrap();
    let details = |k: u32, flags: &[&str]| {
        let m = toggles_file(dir.path(), k);
        let mut args = vec![
            "explore",
            m.to_str().unwrap(),
            "-q",
            "--no-progress",
            "--stats-json",
            "-",
            "--store",
            "comback",
        ];
        args.extend_from_slice(flags);
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["states"], 1u64 << k);
        assert_eq!(v["transitions"], k as u64 * (1u64 << k));
        let d = &v["store_details"];
        (
            d["comback_cache_entries"].as_u64().unwrap(),
            d["cache_bytes"].as_u64().unwrap(),
            d["comback_widest_level"].as_u64().unwrap(),
            d["comback_cache_auto"].as_bool().unwrap(),
        )
    };
    let floor = spillway::store::comback::sizing::FLOOR as u64;
    // Narrow levels (toggles-12: 4,096 states): the floor.
    let (n, _, widest, auto) = details(12, &[]);
    assert!(auto);
    assert_eq!((n, widest), (floor, 924));
    // toggles-17: widest level C(17, 8) = 24,310; 8 such levels want 259,307 entries, more
    // than the 131,072 states: the cache grows past the floor, to at most the states stored.
    let (n, _, widest, _) = details(17, &[]);
    assert_eq!(widest, 24_310);
    assert!(n > floor && n <= 1 << 17, "{n} entries");
    // DFS: runs of new states at one depth are short; the floor.
    let (n, _, _, _) = details(17, &["--order", "dfs"]);
    assert_eq!(n, floor);
    // Under a budget: at most 1/4 of it (toggles-20 would want 1.97 M entries of 10 bytes,
    // 8 levels of C(20, 10) = 184,756 states; under 24M a quarter is 6 MiB).
    let (n, bytes, _, _) = details(20, &["--memory", "24M"]);
    assert!(n > 1 << 18, "{n} entries");
    assert!(bytes <= (24 << 20) / 4, "{bytes} bytes");
    // Given sizes are kept; 0 is no cache.
    assert_eq!(details(17, &["--comback-cache", "1000"]).0, 1000);
    assert_eq!(details(17, &["--comback-cache", "0"]).0, 0);
    assert!(!details(17, &["--comback-cache", "0"]).3);
    assert!(details(17, &["--comback-cache", "auto"]).3);
}
