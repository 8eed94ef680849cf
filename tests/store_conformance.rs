//! One conformance suite for the `StateStore` trait, run against every exact store: the full
//! table, tree compression, ComBack with each variant and with weak hashes, and Δ-markings with several kδ and
//! each optimisation off. The suite drives the store the
//! way the engines do (BFS and DFS, single inserts and batches, re-inserting every state) and
//! checks every answer against an oracle map of state vectors.

mod common;

use spillway::model::{aut::AutModel, petri, pnml, Model, TransitionId};
use spillway::run::{make_store, ExploreConfig};
use spillway::storage::{Storage, StorageConfig};
use spillway::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet,
};
use spillway::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate};
use spillway::store::full::FullOptions;
use spillway::store::tree::TreeOptions;
use spillway::store::StoreConfig;
use spillway::store::{Exactness, Insert, StateBatch, StateStore, Via};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug)]
enum Walk {
    Bfs,
    Dfs,
}

/// Explores `model` with `store`, checking every answer against an oracle; returns the number
/// of states. Every successor is inserted with the real edge that produced it.
fn conform(model: &dyn Model, store: &mut dyn StateStore, walk: Walk, label: &str) -> u64 {
    let mut oracle: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut states: Vec<Vec<u8>> = Vec::new();
    let mut depth: Vec<u64> = Vec::new();
    let mut edges: Vec<(u64, TransitionId, u64)> = Vec::new();
    let mut init = Vec::new();
    model.initial_state(&mut init).unwrap();
    assert_eq!(
        store.insert(&init, None).unwrap(),
        Insert::New(0),
        "{label}"
    );
    oracle.insert(init.clone(), 0);
    states.push(init);
    depth.push(0);
    let mut work: Vec<u64> = vec![0];
    let mut batch = StateBatch::default();
    let mut results = Vec::new();
    let mut expanded = 0u64;
    while let Some(id) = match walk {
        Walk::Bfs => (expanded < states.len() as u64).then_some(expanded),
        Walk::Dfs => work.pop(),
    } {
        expanded += 1;
        let src = states[id as usize].clone();
        batch.clear();
        model
            .successors(&src, &mut |t, _, s| batch.push(t, s))
            .unwrap();
        // Alternate batch and single inserts.
        if id % 2 == 0 {
            store
                .insert_batch(id, depth[id as usize], &batch, &mut results)
                .unwrap();
        } else {
            results.clear();
            for i in 0..batch.len() {
                let via = Via {
                    parent: id,
                    transition: batch.transition(i),
                    depth: depth[id as usize] + 1,
                };
                results.push(store.insert(batch.get(i), Some(via)).unwrap());
            }
        }
        assert_eq!(results.len(), batch.len(), "{label}");
        for (i, r) in results.iter().enumerate() {
            let s = batch.get(i);
            let expect = match oracle.get(s) {
                Some(&known) => Insert::Seen(known),
                None => {
                    let n = states.len() as u64;
                    oracle.insert(s.to_vec(), n);
                    states.push(s.to_vec());
                    depth.push(depth[id as usize] + 1);
                    work.push(n);
                    Insert::New(n)
                }
            };
            assert_eq!(*r, expect, "{label}: successor {i} of state {id}");
            let dst = match expect {
                Insert::New(n) | Insert::Seen(n) => n,
            };
            edges.push((id, batch.transition(i), dst));
        }
        assert_eq!(store.len(), states.len() as u64, "{label}");
    }
    // Every state again, through every edge that reaches it (path optimisation may repoint).
    for &(src, t, dst) in &edges {
        let via = Via {
            parent: src,
            transition: t,
            depth: depth[src as usize] + 1,
        };
        assert_eq!(
            store.insert(&states[dst as usize], Some(via)).unwrap(),
            Insert::Seen(dst),
            "{label}: re-insert {dst}"
        );
    }
    // Vectors come back (when the store gives them) in any order, after repointing.
    for id in (0..states.len() as u64).rev().step_by(3) {
        if let Some(out) = store.get(id).unwrap() {
            assert_eq!(out, states[id as usize], "{label}: get({id})");
        }
    }
    assert!(store.get(states.len() as u64).unwrap().is_none(), "{label}");
    assert_eq!(store.exactness(), Exactness::Exact, "{label}");
    assert_eq!(store.len(), states.len() as u64, "{label}");
    assert!(store.ram_bytes() > 0, "{label}");
    states.len() as u64
}

fn models() -> Vec<(&'static str, Box<dyn Model>)> {
    let net = pnml::parse_file(&common::shipped("Philosophers-PT-000005.pnml")).unwrap();
    let aut = AutModel::load(&common::shipped("vasy_0_1.aut")).unwrap();
    vec![
        ("philosophers", petri::build(net, 8).unwrap()),
        ("vasy_0_1", Box::new(aut)),
    ]
}

fn exact_stores() -> Vec<(String, StoreConfig)> {
    let d = CombackOptions::default();
    let mut v = vec![
        (
            "full".to_string(),
            StoreConfig::Full(FullOptions::default()),
        ),
        (
            "tree".to_string(),
            StoreConfig::Tree(TreeOptions::default()),
        ),
    ];
    let variants = [
        ("default", d),
        ("no-cache", CombackOptions { cache: 0, ..d }),
        ("cache-4", CombackOptions { cache: 4, ..d }),
        (
            "backward",
            CombackOptions {
                reconstruction: Reconstruction::Backward,
                cache: 16,
                ..d
            },
        ),
        (
            "vectors,no-path-opt,no-mtf",
            CombackOptions {
                waiting_set: WaitingSet::Vectors,
                path_optimisation: PathOptimisation::Off,
                move_to_front: MoveToFront::Off,
                ..d
            },
        ),
    ];
    for bits in [64, 16, 4, 1] {
        for (name, o) in variants {
            v.push((
                format!("comback {name} {bits}-bit"),
                StoreConfig::Comback(CombackOptions {
                    hash_bits: bits,
                    ..o
                }),
            ));
        }
    }
    v
}

/// The store a configuration names, built the way the driver builds it: no spilling, and a
/// scratch storage for the stores that keep their records in segment vectors (returned so
/// that it outlives the store).
fn store_for<'m>(
    cfg: &ExploreConfig,
    model: &'m dyn Model,
) -> (Box<dyn StateStore + 'm>, Option<Storage>) {
    let storage = cfg
        .store
        .spec()
        .needs_storage()
        .then(|| Storage::new(&StorageConfig::default()).unwrap());
    (
        make_store(cfg, model, storage.as_ref(), None).unwrap(),
        storage,
    )
}

fn config(store: StoreConfig) -> ExploreConfig {
    ExploreConfig {
        store,
        ..ExploreConfig::default()
    }
}

/// Δ-markings: kδ in {1, 3, 7}, all optimisations on and each one off.
fn delta_stores() -> Vec<(String, ExploreConfig)> {
    let mut v = Vec::new();
    for k in [1, 3, 7] {
        let on = DeltaOptions {
            k,
            ..DeltaOptions::default()
        };
        let variants = [
            ("all-on", on.clone()),
            (
                "no-pred-update",
                DeltaOptions {
                    pred_update: PredUpdate::Off,
                    ..on.clone()
                },
            ),
            (
                "forward",
                DeltaOptions {
                    firing: Firing::Forward,
                    ..on.clone()
                },
            ),
            (
                "no-collapse",
                DeltaOptions {
                    collapse: Collapse::Off,
                    ..on.clone()
                },
            ),
        ];
        for (name, d) in variants {
            v.push((format!("delta k={k} {name}"), config(StoreConfig::Delta(d))));
        }
    }
    v
}

#[test]
fn every_exact_store_conforms() {
    let stores: Vec<(String, ExploreConfig)> = exact_stores()
        .into_iter()
        .map(|(name, store)| (name, config(store)))
        .chain(delta_stores())
        .collect();
    for (mname, model) in models() {
        for (sname, cfg) in &stores {
            for walk in [Walk::Bfs, Walk::Dfs] {
                let (mut store, _storage) = store_for(cfg, model.as_ref());
                let label = format!("{mname} / {sname} / {walk:?}");
                let n = conform(model.as_ref(), store.as_mut(), walk, &label);
                assert!(n > 100, "{label}");
            }
        }
    }
}

#[test]
fn weak_hashes_really_collide_and_repoints_happen() {
    let (_, model) = models().swap_remove(0);
    let opts = StoreConfig::Comback(CombackOptions {
        hash_bits: 4,
        // No cache: every candidate must be rebuilt.
        cache: 0,
        ..CombackOptions::default()
    });
    let (mut store, _storage) = store_for(&config(opts), model.as_ref());
    conform(
        model.as_ref(),
        store.as_mut(),
        Walk::Dfs,
        "philosophers 4-bit dfs",
    );
    let r = store.report();
    let n = |k: &str| r[k].as_u64().unwrap();
    // 243 states in 16 descriptors: long collision lists, resolved by replay.
    assert!(n("longest_collision_list") >= 243 / 16, "{r:?}");
    assert!(n("descriptor_collisions") > 0, "{r:?}");
    assert!(n("reconstructions") > 0, "{r:?}");
    // DFS finds long paths first; the re-insert pass offers shorter ones.
    assert!(n("path_repoints") > 0, "{r:?}");
}
