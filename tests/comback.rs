//! ComBack and the two lossy baselines end to end: identical native LTS files from ComBack and
//! the full table in BFS (same numbering, same edges), the stats keys, and the inexact stores'
//! reports.

mod common;

use common::{bin, reference_rows, shipped};
use spillway::engine::run::{explore_file, ExploreConfig, StoreKind, StoreOptions};
use spillway::engine::{EngineOptions, Order};
use spillway::store::comback::{CombackOptions, Reconstruction, WaitingSet};
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
                    "--hash-bits",
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
                    "--comback-reconstruct",
                    "backward",
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

fn explore(
    model: &Path,
    order: Order,
    store: StoreKind,
    opts: StoreOptions,
) -> spillway::ExploreStats {
    let cfg = ExploreConfig {
        order,
        store,
        store_options: opts,
        engine: EngineOptions { progress: false },
        ..ExploreConfig::default()
    };
    explore_file(model, &cfg, &mut |_| {}).unwrap()
}

#[test]
fn comback_stats_report_reconstructions_collisions_and_bytes() {
    let m = shipped("Philosophers-PT-000005.pnml");
    let s = explore(
        &m,
        Order::Bfs,
        StoreKind::Comback,
        StoreOptions {
            comback: CombackOptions {
                hash_bits: 6,
                cache: 0,
                ..CombackOptions::default()
            },
            ..StoreOptions::default()
        },
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
    let opts = |bits| StoreOptions {
        comback: CombackOptions {
            hash_bits: bits,
            cache: 0,
            reconstruction: Reconstruction::Backward,
            waiting_set: WaitingSet::Vectors,
            ..CombackOptions::default()
        },
        ..StoreOptions::default()
    };
    let s = explore(
        &shipped("Philosophers-PT-000005.pnml"),
        Order::Bfs,
        StoreKind::Comback,
        opts(4),
    );
    assert_eq!((s.states, s.transitions), (243, 945));
    let d = &s.store_details;
    assert!(d["backward_unfires"].as_u64().unwrap() > 0, "{d:?}");
    assert!(d["backward_early_rejects"].as_u64().unwrap() > 0, "{d:?}");
    assert_eq!(d["backward_fallbacks"], 0);
    let s = explore(
        &shipped("vasy_0_1.aut"),
        Order::Bfs,
        StoreKind::Comback,
        opts(4),
    );
    assert!(s.exact);
    assert!(s.store_details["backward_fallbacks"].as_u64().unwrap() > 0);
}

#[test]
fn lossy_stores_report_inexact_with_an_omission_probability() {
    for r in reference_rows(0, 20_000) {
        let hc = explore(
            &r.path,
            Order::Bfs,
            StoreKind::Hashcompact,
            StoreOptions::default(),
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
            StoreKind::Bitstate,
            StoreOptions {
                bitstate_log2_bits: 30,
                bitstate_k: 3,
                ..StoreOptions::default()
            },
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
fn lossy_stores_with_few_bits_lose_states_and_say_so() {
    let Some(r) = reference_rows(5_000, 200_000).into_iter().next() else {
        return;
    };
    let hc = explore(
        &r.path,
        Order::Bfs,
        StoreKind::Hashcompact,
        StoreOptions {
            comback: CombackOptions {
                hash_bits: 10,
                ..CombackOptions::default()
            },
            ..StoreOptions::default()
        },
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
        StoreKind::Bitstate,
        StoreOptions {
            bitstate_log2_bits: 10,
            bitstate_k: 2,
            ..StoreOptions::default()
        },
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
