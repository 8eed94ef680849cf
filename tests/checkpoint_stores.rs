//! Checkpoint and resume of the ComBack and Δ stores: an exploration's insert sequence is
//! driven against a store that is checkpointed at several points, written on past each
//! checkpoint (records appended and updated beyond the marks, then thrown away), dropped, and
//! resumed from the mark; every answer must equal the uninterrupted store's, in BFS and in a
//! DFS-like order, for each ComBack variant and several Δ settings.

mod common;

use spillway::model::{petri, pnml, Model};
use spillway::run::{make_store, ExploreConfig};
use spillway::storage::{Storage, StorageConfig};
use spillway::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet,
};
use spillway::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate};
use spillway::store::hashcompact::HashCompactOptions;
use spillway::store::StoreConfig;
use spillway::store::{Insert, StateBatch, StateStore, StoreMark, Via};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Walk {
    Bfs,
    Dfs,
}

/// The driver's side of an exploration: everything it derives from the store's answers.
#[derive(Clone, Default)]
struct Explorer {
    states: Vec<Vec<u8>>,
    depth: Vec<u64>,
    work: Vec<u64>,
    expanded: u64,
    results: Vec<Insert>,
}

impl Explorer {
    fn start(model: &dyn Model, store: &mut dyn StateStore) -> Explorer {
        let mut init = Vec::new();
        model.initial_state(&mut init).unwrap();
        let r = store.insert(&init, None).unwrap();
        Explorer {
            states: vec![init],
            depth: vec![0],
            work: vec![0],
            expanded: 0,
            results: vec![r],
        }
    }

    /// Expands one state; `false` when there is none left.
    fn step(&mut self, model: &dyn Model, store: &mut dyn StateStore, walk: Walk) -> bool {
        let next = match walk {
            Walk::Bfs => (self.expanded < self.states.len() as u64).then_some(self.expanded),
            Walk::Dfs => self.work.pop(),
        };
        let Some(id) = next else { return false };
        self.expanded += 1;
        let src = self.states[id as usize].clone();
        let mut batch = StateBatch::default();
        model
            .successors(&src, &mut |t, _, s| batch.push(t, s))
            .unwrap();
        let mut out = Vec::new();
        let d = self.depth[id as usize];
        if id % 2 == 0 {
            store.insert_batch(id, d, &batch, &mut out).unwrap();
        } else {
            for i in 0..batch.len() {
                let via = Via {
                    parent: id,
                    transition: batch.transition(i),
                    depth: d + 1,
                };
                out.push(store.insert(batch.get(i), Some(via)).unwrap());
            }
        }
        for (i, r) in out.iter().enumerate() {
            if let Insert::New(n) = *r {
                assert_eq!(n, self.states.len() as u64);
                self.states.push(batch.get(i).to_vec());
                self.depth.push(d + 1);
                self.work.push(n);
            }
        }
        self.results.extend(out);
        true
    }
}

fn model() -> Option<Box<dyn Model>> {
    let rows = common::reference_rows(10_000, 100_000);
    if rows.is_empty() {
        return None;
    }
    let row = rows
        .iter()
        .find(|r| r.rel.ends_with("Peterson-PT-2.pnml"))
        .expect("Peterson-PT-2 in REFERENCE.tsv");
    assert_eq!(row.states, 20_754);
    let net = pnml::parse_file(&row.path).unwrap();
    Some(petri::build(net, 8).unwrap())
}

fn scratch() -> Storage {
    Storage::new(&StorageConfig::default()).unwrap()
}

/// Runs `cfg` uninterrupted, then again with checkpoints after `at` expansions (each
/// followed by `waste` expansions that are thrown away, a drop and a resume), and compares.
fn check(model: &dyn Model, cfg: &ExploreConfig, walk: Walk, at: &[u64], label: &str) {
    let st = scratch();
    let mut store = make_store(cfg, model, Some(&st), None).unwrap();
    let mut plain = Explorer::start(model, store.as_mut());
    while plain.step(model, store.as_mut(), walk) {}
    let total = plain.states.len() as u64;
    drop(store);

    let dir = tempfile::tempdir().unwrap();
    let mut kept = Storage::kept(dir.path(), &cfg.storage);
    let mut store = make_store(cfg, model, Some(&kept), None).unwrap();
    let mut run = Explorer::start(model, store.as_mut());
    let mut checkpoints = at.iter().copied().peekable();
    let mut marks = 0;
    loop {
        if checkpoints.peek() == Some(&run.expanded) {
            checkpoints.next();
            let mark: StoreMark = store.checkpoint().unwrap();
            assert!(!mark.files.is_empty(), "{label}");
            for f in &mark.files {
                let len = std::fs::metadata(dir.path().join(&f.name)).unwrap().len();
                assert!(len >= f.len, "{label}: {} shorter than its mark", f.name);
            }
            let saved = run.clone();
            // Written past the mark, then lost: appends, updates, maybe growth.
            for _ in 0..(total / 10).max(50) {
                if !run.step(model, store.as_mut(), walk) {
                    break;
                }
            }
            drop(store);
            drop(kept);
            // A new process: a fresh storage on the same directory.
            kept = Storage::kept(dir.path(), &cfg.storage);
            store = make_store(cfg, model, Some(&kept), Some(&mark)).unwrap();
            run = saved;
            marks += 1;
            assert_eq!(
                store.len(),
                run.states.len() as u64,
                "{label}: resumed count"
            );
            // States come back after resume (by replay or reconstitution).
            for id in (0..run.states.len() as u64).step_by(97) {
                if let Some(out) = store.get(id).unwrap() {
                    assert_eq!(out, run.states[id as usize], "{label}: get({id})");
                }
            }
        }
        if !run.step(model, store.as_mut(), walk) {
            break;
        }
    }
    assert_eq!(marks, at.len(), "{label}: checkpoints taken");
    assert_eq!(run.states.len(), plain.states.len(), "{label}: states");
    assert_eq!(run.results.len(), plain.results.len(), "{label}: answers");
    if let Some(i) = (0..run.results.len()).find(|&i| run.results[i] != plain.results[i]) {
        panic!(
            "{label}: answer {i} is {:?} after resume, {:?} uninterrupted",
            run.results[i], plain.results[i]
        );
    }
    assert_eq!(store.len(), total, "{label}");
    eprintln!(
        "{label}: {total} states, {} answers, {} bytes on disk",
        plain.results.len(),
        store.disk_bytes()
    );
    // A checkpoint of the finished store, resumed once more, still knows every state.
    let mark = store.checkpoint().unwrap();
    drop(store);
    let mut store = make_store(cfg, model, Some(&kept), Some(&mark)).unwrap();
    assert_eq!(store.len(), total, "{label}");
    for id in (0..total).step_by(31) {
        if let Some(out) = store.get(id).unwrap() {
            assert_eq!(out, plain.states[id as usize], "{label}: final get({id})");
        }
    }
}

/// Checkpoint points for a run of about `n` expansions: early, middle, late, and twice in a
/// row (a checkpoint right after a resume).
fn points(n: u64) -> Vec<u64> {
    vec![1, n / 7, n / 3, n / 3 + 1, 2 * n / 3]
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn comback_resumes_exactly() {
    let Some(model) = model() else { return };
    let d = CombackOptions::default();
    let variants = [
        ("default", d),
        ("no-cache", CombackOptions { cache: 0, ..d }),
        (
            "backward",
            CombackOptions {
                reconstruction: Reconstruction::Backward,
                cache: 64,
                ..d
            },
        ),
        (
            "vectors",
            CombackOptions {
                waiting_set: WaitingSet::Vectors,
                ..d
            },
        ),
        (
            "no-path-opt-no-mtf",
            CombackOptions {
                path_optimisation: PathOptimisation::Off,
                move_to_front: MoveToFront::Off,
                cache: 256,
                ..d
            },
        ),
        (
            "12-bit",
            CombackOptions {
                hash_bits: 12,
                cache: 1024,
                ..d
            },
        ),
    ];
    let n = 20_754;
    for (name, opts) in variants {
        let cfg = ExploreConfig {
            store: StoreConfig::Comback(opts),
            ..ExploreConfig::default()
        };
        for walk in [Walk::Bfs, Walk::Dfs] {
            check(
                model.as_ref(),
                &cfg,
                walk,
                &points(n),
                &format!("comback {name} {walk:?}"),
            );
        }
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn delta_resumes_exactly() {
    let Some(model) = model() else { return };
    let n = 20_754;
    let mut variants = Vec::new();
    for k in [1, 5, 50] {
        let on = DeltaOptions {
            k,
            ..DeltaOptions::default()
        };
        variants.push((format!("k={k}"), on.clone()));
        if k == 5 {
            variants.push((
                "k=5 no-pred-update".into(),
                DeltaOptions {
                    pred_update: PredUpdate::Off,
                    ..on.clone()
                },
            ));
            variants.push((
                "k=5 forward".into(),
                DeltaOptions {
                    firing: Firing::Forward,
                    ..on.clone()
                },
            ));
            variants.push((
                "k=5 no-collapse small-cache".into(),
                DeltaOptions {
                    collapse: Collapse::Off,
                    cache_states: 16,
                    ..on.clone()
                },
            ));
        }
    }
    for (name, opts) in variants {
        let cfg = ExploreConfig {
            store: StoreConfig::Delta(opts),
            ..ExploreConfig::default()
        };
        for walk in [Walk::Bfs, Walk::Dfs] {
            check(
                model.as_ref(),
                &cfg,
                walk,
                &points(n),
                &format!("delta {name} {walk:?}"),
            );
        }
    }
}

#[test]
#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]
fn checkpoint_needs_a_kept_storage_and_resume_refuses_other_stores() {
    let Some(model) = model() else { return };
    for store in [
        StoreConfig::Comback(CombackOptions::default()),
        StoreConfig::Delta(DeltaOptions::default()),
    ] {
        let name = store.name();
        let cfg = ExploreConfig {
            store,
            ..ExploreConfig::default()
        };
        let st = scratch();
        let mut s = make_store(&cfg, model.as_ref(), Some(&st), None).unwrap();
        Explorer::start(model.as_ref(), s.as_mut());
        assert!(s.checkpoint().is_err(), "{name} on a scratch storage");
    }
    let cfg = ExploreConfig {
        store: StoreConfig::Hashcompact(HashCompactOptions::default()),
        ..ExploreConfig::default()
    };
    let st = scratch();
    assert!(make_store(&cfg, model.as_ref(), Some(&st), Some(&StoreMark::default())).is_err());
}
