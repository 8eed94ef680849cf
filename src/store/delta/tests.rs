//! Unit tests of the Δ store: reconstitution, backward firing, predecessor update, the record
//! invariant and the conformance of numbering with the full store.

use super::*;
use crate::model::petri;
use crate::model::pnml;
use crate::storage::{Storage, StorageConfig};
use crate::store::full::FullStore;
use std::path::Path;

/// A scratch storage for a store's segment vectors.
fn scratch() -> Storage {
    Storage::new(&StorageConfig::default()).unwrap()
}

/// `tokens` tokens on a ring of `n` places; transition `i` moves one token from place `i` to
/// place `i + 1`, and a second transition `n + i` moves two at once (so a state has several
/// paths of different lengths from the initial one).
fn ring(n: usize, tokens: u32) -> Box<dyn Model> {
    let mut x = String::from(r#"<pnml><net id="r" type="ptnet"><page id="g">"#);
    for i in 0..n {
        let m = if i == 0 { tokens } else { 0 };
        x += &format!(
            r#"<place id="p{i}"><initialMarking><text>{m}</text></initialMarking></place>"#
        );
    }
    for i in 0..n {
        let j = (i + 1) % n;
        x += &format!(
            r#"<transition id="t{i}"/><arc id="a{i}" source="p{i}" target="t{i}"/><arc id="b{i}" source="t{i}" target="p{j}"/>"#
        );
    }
    for i in 0..n {
        let j = (i + 1) % n;
        x += &format!(
            r#"<transition id="u{i}"/><arc id="c{i}" source="p{i}" target="u{i}"><inscription><text>2</text></inscription></arc><arc id="d{i}" source="u{i}" target="p{j}"><inscription><text>2</text></inscription></arc>"#
        );
    }
    x += "</page></net></pnml>";
    let net = pnml::parse(x.as_bytes(), Path::new("ring.pnml")).unwrap();
    petri::build(net, 8).unwrap()
}

/// Explores `model` in BFS or DFS order with both stores side by side, checking that every
/// insert gives the same answer and that every Δ state reconstitutes to its full vector.
fn conform(model: &dyn Model, opts: DeltaOptions, dfs: bool) -> Counters {
    let mut full = FullStore::new(model.state_len());
    let storage = scratch();
    let mut delta = DeltaStore::new(model, opts.clone(), &storage).unwrap();
    let mut init = Vec::new();
    model.initial_state(&mut init).unwrap();
    assert_eq!(full.insert(&init, None).unwrap(), Insert::New(0));
    assert_eq!(delta.insert(&init, None).unwrap(), Insert::New(0));
    // Work list of (id, depth); BFS pops the front, DFS the back (a DFS-like order whose
    // depths are consistent with predecessors, which is all the store relies on).
    let mut work = std::collections::VecDeque::from([(0u64, 0u64)]);
    while let Some((id, depth)) = if dfs {
        work.pop_back()
    } else {
        work.pop_front()
    } {
        let s = full.get(id).unwrap().expect("stored").to_vec();
        let d = delta.get(id).unwrap().expect("stored").to_vec();
        assert_eq!(s, d, "state {id} reconstitutes wrongly");
        let mut succ = Vec::new();
        model
            .successors(&s, &mut |t, _, x| succ.push((t, x.to_vec())))
            .unwrap();
        for (t, x) in succ {
            let via = Via {
                parent: id,
                transition: t,
                depth: depth + 1,
            };
            let a = full.insert(&x, Some(via)).unwrap();
            let b = delta.insert(&x, Some(via)).unwrap();
            assert_eq!(a, b, "state {x:?} from {id} by {t:?}");
            if let Insert::New(n) = a {
                work.push_back((n, depth + 1));
            }
        }
    }
    // Invariant: every record reaches an explicit record within kδ − 1 steps, and every
    // state reconstitutes (with the cache emptied).
    delta.inner = Inner {
        walk: Walker::default(),
        cache: StateCache::new(1, delta.width),
        c: delta.inner.c.clone(),
    };
    for id in 0..full.len() {
        assert!(delta.exact_dist(id).unwrap() < opts.k);
        let s = full.get(id).unwrap().expect("stored").to_vec();
        assert_eq!(delta.get(id).unwrap(), Some(&s[..]));
    }
    assert_eq!(delta.len(), full.len());
    delta.inner.c.clone()
}

fn opts(k: u32) -> DeltaOptions {
    DeltaOptions {
        k,
        cache_states: 1,
        ..DeltaOptions::default()
    }
}

#[test]
fn matches_full_store_for_every_option() {
    let m = ring(6, 4);
    for k in [1, 2, 3, 7] {
        for dfs in [false, true] {
            for pred_update in [PredUpdate::On, PredUpdate::Off] {
                for firing in [Firing::Backward, Firing::Forward] {
                    for collapse in [Collapse::PerComponent, Collapse::Off] {
                        let o = DeltaOptions {
                            pred_update,
                            firing,
                            collapse,
                            ..opts(k)
                        };
                        conform(m.as_ref(), o, dfs);
                    }
                }
            }
        }
    }
}

#[test]
fn reconstitution_fires_at_most_k_minus_1() {
    let m = ring(5, 5);
    let c = conform(
        m.as_ref(),
        DeltaOptions {
            firing: Firing::Forward,
            ..opts(4)
        },
        false,
    );
    assert!(c.reconstitutions > 0);
    assert!(c.fired > 0);
    assert!(c.fired <= c.reconstitutions * 3, "{c:?}");
    assert_eq!(c.unfired, 0);
}

#[test]
fn backward_firing_abandons_early() {
    // Whole run: candidates are checked backwards and agree with the full store.
    let m = ring(6, 4);
    let c = conform(m.as_ref(), opts(8), false);
    assert!(c.backward_checks > 0 && c.unfired > 0, "{c:?}");
    // A false candidate (as a hash-remainder collision would give): state 2 was reached by
    // t0 twice from [4,0,..]; [0,0,4,0,0,0] cannot be unfired by t0 (place 1 is empty), so
    // the check stops after one unfiring, before looking at the explicit state.
    let storage = scratch();
    let mut st = DeltaStore::new(m.as_ref(), opts(8), &storage).unwrap();
    let mut s0 = Vec::new();
    m.initial_state(&mut s0).unwrap();
    st.insert(&s0, None).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    m.fire(&s0, TransitionId(0), &mut a).unwrap();
    m.fire(&a, TransitionId(0), &mut b).unwrap();
    for (i, (p, s)) in [(0u64, &a), (1, &b)].into_iter().enumerate() {
        st.insert(
            s,
            Some(Via {
                parent: p,
                transition: TransitionId(0),
                depth: i as u64 + 1,
            }),
        )
        .unwrap();
    }
    st.inner = Inner {
        walk: Walker::default(),
        cache: StateCache::new(1, st.width),
        c: Counters::default(),
    };
    let other = [0u8, 0, 4, 0, 0, 0];
    assert_eq!(st.same(2, &other).unwrap(), None);
    let c = st.inner.c.clone();
    assert_eq!((c.unfired, c.early_abandons, c.fired), (1, 1, 0), "{c:?}");
    // The true state is confirmed by unfiring both steps and comparing encoded states.
    assert_eq!(st.same(2, &b).unwrap(), Some(2));
    assert_eq!(st.inner.c.unfired, 3);
}

#[test]
fn backward_falls_back_to_forward_without_unfire() {
    let aut = "des (0, 3, 3)\n(0, \"a\", 1)\n(1, \"b\", 2)\n(2, \"c\", 0)\n";
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.aut");
    std::fs::write(&p, aut).unwrap();
    let m = crate::model::aut::AutModel::load(&p).unwrap();
    let storage = scratch();
    let store = DeltaStore::new(&m, opts(2), &storage).unwrap();
    assert_eq!(store.firing(), Firing::Forward);
    let c = conform(&m, opts(2), false);
    assert_eq!(c.unfired, 0);
}

#[test]
fn predecessor_update_shortens_chains() {
    // DFS meets states first along long paths, then again along short ones.
    let m = ring(7, 4);
    let on = conform(m.as_ref(), opts(9), true);
    assert!(on.pred_updates > 0, "{on:?}");
    let off = conform(
        m.as_ref(),
        DeltaOptions {
            pred_update: PredUpdate::Off,
            ..opts(9)
        },
        true,
    );
    assert_eq!(off.pred_updates, 0);
}

#[test]
fn repointing_shortens_descendants() {
    let m = ring(4, 3);
    let storage = scratch();
    let mut st = DeltaStore::new(m.as_ref(), opts(10), &storage).unwrap();
    let mut s0 = Vec::new();
    m.initial_state(&mut s0).unwrap();
    st.insert(&s0, None).unwrap();
    // Chain 0 -t0-> 1 -t0-> 2 -t1-> 3, then reach 2 directly from 0 by u0 (two tokens).
    let fire = |src: &[u8], t: u32| {
        let mut d = Vec::new();
        assert!(matches!(
            m.fire(src, TransitionId(t), &mut d).unwrap(),
            Fired::Enabled(_)
        ));
        d
    };
    let a = fire(&s0, 0);
    let b = fire(&a, 0);
    let c = fire(&b, 1);
    let via = |parent, t, depth| {
        Some(Via {
            parent,
            transition: TransitionId(t),
            depth,
        })
    };
    assert_eq!(st.insert(&a, via(0, 0, 1)).unwrap(), Insert::New(1));
    assert_eq!(st.insert(&b, via(1, 0, 2)).unwrap(), Insert::New(2));
    assert_eq!(st.insert(&c, via(2, 1, 3)).unwrap(), Insert::New(3));
    assert_eq!(st.exact_dist(2).unwrap(), 2);
    assert_eq!(st.exact_dist(3).unwrap(), 3);
    assert_eq!(fire(&s0, 4), b, "u0 moves two tokens at once");
    assert_eq!(st.insert(&b, via(0, 4, 1)).unwrap(), Insert::Seen(2));
    assert_eq!(st.exact_dist(2).unwrap(), 1);
    assert_eq!(st.exact_dist(3).unwrap(), 2, "descendant shortened too");
    assert_eq!(st.inner.c.pred_updates, 1);
    // The original, longer path does not repoint it back.
    assert_eq!(st.insert(&b, via(1, 0, 2)).unwrap(), Insert::Seen(2));
    assert_eq!(st.exact_dist(2).unwrap(), 1);
    assert_eq!(st.get(3).unwrap(), Some(&c[..]));
}

#[test]
fn explicit_exactly_at_multiples_of_k() {
    let m = ring(5, 3);
    let storage = scratch();
    let mut st = DeltaStore::new(m.as_ref(), opts(3), &storage).unwrap();
    let mut s = Vec::new();
    m.initial_state(&mut s).unwrap();
    st.insert(&s, None).unwrap();
    // Walk a path 0 -> 1 -> ... moving tokens, depth d; explicit iff d % 3 == 0.
    let mut parent = 0;
    for d in 1..=9u64 {
        let mut next = Vec::new();
        let mut t = 0;
        while !matches!(
            m.fire(&s, TransitionId(t), &mut next).unwrap(),
            Fired::Enabled(_)
        ) {
            t += 1;
        }
        let Insert::New(id) = st
            .insert(
                &next,
                Some(Via {
                    parent,
                    transition: TransitionId(t),
                    depth: d,
                }),
            )
            .unwrap()
        else {
            continue;
        };
        let explicit = matches!(st.rec(id).unwrap(), Rec::Explicit(_));
        assert_eq!(explicit, d % 3 == 0, "depth {d}");
        parent = id;
        s = next;
    }
}

#[test]
fn corrupt_records_are_reported_not_looped() {
    let m = ring(4, 2);
    let storage = scratch();
    let mut st = DeltaStore::new(m.as_ref(), opts(3), &storage).unwrap();
    let mut s = Vec::new();
    m.initial_state(&mut s).unwrap();
    st.insert(&s, None).unwrap();
    let mut n = Vec::new();
    m.fire(&s, TransitionId(0), &mut n).unwrap();
    st.insert(
        &n,
        Some(Via {
            parent: 0,
            transition: TransitionId(0),
            depth: 1,
        }),
    )
    .unwrap();
    // Point record 1 at itself: a cycle without an explicit state.
    let v = st.encode(Rec::Delta {
        pred: 1,
        t: TransitionId(0),
    });
    st.records.set(1, v).unwrap();
    st.inner = Inner {
        walk: Walker::default(),
        cache: StateCache::new(1, st.width),
        c: Counters::default(),
    };
    assert!(st.get(1).is_err());
    assert!(st.exact_dist(1).is_err());
}

#[test]
fn rejects_k_zero() {
    let m = ring(3, 1);
    let storage = scratch();
    assert!(DeltaStore::new(m.as_ref(), DeltaOptions { k: 0, ..opts(1) }, &storage).is_err());
}

#[test]
fn records_widen_past_256_states() {
    let m = ring(8, 5);
    let c = conform(m.as_ref(), opts(5), false);
    assert!(c.record_widenings > 0, "{c:?}");
}

#[test]
fn index_rebuilds_with_more_hash_bits_when_it_outgrows_its_prefix() {
    // 14 hash bits allow 2^10 slots: the 922nd state forces a rebuild by reconstitution.
    let m = ring(9, 6);
    let mut full = FullStore::new(m.state_len());
    let storage = scratch();
    let mut st = DeltaStore::with_hash_bits(m.as_ref(), opts(5), 14, &storage).unwrap();
    let mut s0 = Vec::new();
    m.initial_state(&mut s0).unwrap();
    full.insert(&s0, None).unwrap();
    st.insert(&s0, None).unwrap();
    let (mut batch, mut a, mut b) = (crate::store::StateBatch::default(), Vec::new(), Vec::new());
    let mut depth = vec![0u64];
    let mut next = 0u64;
    while next < full.len() {
        let s = full.get(next).unwrap().expect("stored").to_vec();
        batch.clear();
        m.successors(&s, &mut |t, _, x| batch.push(t, x)).unwrap();
        full.insert_batch(next, depth[next as usize], &batch, &mut a)
            .unwrap();
        st.insert_batch(next, depth[next as usize], &batch, &mut b)
            .unwrap();
        assert_eq!(a, b);
        while (depth.len() as u64) < full.len() {
            depth.push(depth[next as usize] + 1);
        }
        next += 1;
    }
    assert!(full.len() > 2000, "{}", full.len());
    assert!(st.index_rebuilds >= 1);
    assert_eq!(st.index.hash_bits(), 22);
}

/// A false candidate whose unfiring would overflow a token counter is a mismatch, not an
/// error: place `p` holds 255 tokens (8-bit counters) and `t` moves one to `q`; checking
/// whether the initial marking (255, 0) is state (254, 1) unfires `t` from it, which would
/// put 256 tokens on `p`. Then the whole run gives the exact count.
#[test]
fn unfiring_that_overflows_a_counter_is_a_mismatch() {
    let x = r#"<pnml><net id="o" type="ptnet"><page id="g">
        <place id="p"><initialMarking><text>255</text></initialMarking></place><place id="q"/>
        <transition id="t"/><arc id="a" source="p" target="t"/><arc id="b" source="t" target="q"/>
        <transition id="u"/><arc id="c" source="q" target="u"/><arc id="d" source="u" target="p"/>
        </page></net></pnml>"#;
    let net = pnml::parse(x.as_bytes(), Path::new("overflow.pnml")).unwrap();
    let m = petri::build(net, 8).unwrap();
    let mut o = opts(5);
    o.cache_states = 1;
    let storage = scratch();
    let mut st = DeltaStore::new(m.as_ref(), o.clone(), &storage).unwrap();
    assert_eq!(st.firing(), Firing::Backward);
    let mut s0 = Vec::new();
    m.initial_state(&mut s0).unwrap();
    let t = TransitionId(0);
    let mut s1 = Vec::new();
    m.fire(&s0, t, &mut s1).unwrap();
    let mut s2 = Vec::new();
    m.fire(&s1, t, &mut s2).unwrap();
    st.insert(&s0, None).unwrap();
    let via = |parent, depth| {
        Some(Via {
            parent,
            transition: t,
            depth,
        })
    };
    assert_eq!(st.insert(&s1, via(0, 1)).unwrap(), Insert::New(1));
    // Evicts state 1 from the one-entry cache, so that checking it needs the unfiring.
    assert_eq!(st.insert(&s2, via(1, 2)).unwrap(), Insert::New(2));
    assert_eq!(st.same(1, &s0).unwrap(), None, "(255, 0) is not state 1");
    assert!(st.inner.c.early_abandons >= 1);
    // Whole searches in both orders answer as the full store does (256 states).
    for dfs in [false, true] {
        conform(m.as_ref(), o.clone(), dfs);
    }
}
