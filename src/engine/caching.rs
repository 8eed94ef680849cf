//! Depth-first search with state space caching and, optionally, sleep sets (Godefroid,
//! Holzmann, Pirottin, "State space caching revisited"). The store
//! ([`crate::store::cache::CacheStore`]) remembers the states on the stack and at most
//! `--cache-size` others; a successor found in neither is explored (again), under a new
//! number. Since the states on the stack are always remembered, every cycle closes on the
//! stack and the search terminates; since nothing is pruned but re-exploration, every
//! reachable state is visited.
//!
//! The stack is `engine/dfs.rs`'s: the top frame decoded, the others as byte records on a
//! [`Stack`] (RAM, or a spilling `SegStack` when the run has a storage). A frame here is
//! `id: u64 | slot: u32 | via: u32 | cursor: u32 | n: u32 | r: u32 | a: u32 | n enabled |
//! r removed | a added | state` (`via`: the transition that reached the state; `slot`: its
//! entry in the store, for [`CacheStore::pop`]).
//!
//! **Sleep sets** (`--sleep-sets`). One sleep set for the whole search, a bit set plus the
//! list of its members; a frame holds only the *updates* needed to restore it on backtrack,
//! as the paper does:
//! * a state's enabled transitions are filtered once, on entry: transitions in Sleep are not
//!   executed;
//! * executing `t` into a new state removes from Sleep every transition dependent on `t`
//!   ([`Model::dependent`]); the new frame records those (`removed`);
//! * when `t` is backtracked, the child's `added` are taken out and its `removed` put back
//!   (Sleep is the parent's again), then `t` is added to Sleep — recorded in the parent's
//!   `added` — unless its target was on the stack (a cycle: its exploration is not finished,
//!   so `t` must stay awake). A target found in the cache counts as explored.
//!
//! **Matching under sleep sets.** Each remembered state keeps the enabled transitions its
//! visits left asleep ([`CacheStore::slept`]; most states have none). A state met again is
//! matched only if all of those are still asleep in the sleep set it is reached with
//! (Sleep minus the dependents of `t`); otherwise it is *reopened*: pushed again under its
//! number with just the awake ones to explore (Godefroid's sleep-set search with state
//! matching). Matching without this comparison, as the rules above alone would, loses
//! states once the cache evicts: the states behind a transition left asleep were covered by
//! a visit whose subtree was later forgotten (SafeBus-PT-03 with a cache of half its states:
//! 4,609 of 4,650 states visited). Reopening a state already on the stack puts a second
//! frame of it there; it enters the cache when its last frame is popped.
//!
//! **Deadlocks.** A state without enabled transitions (all of them, asleep or not) is a
//! deadlock. A deadlock can be visited several times; the engine keeps the vectors of the
//! deadlocks it found (a set: deadlocks are few in the models worth caching) so that the
//! count it reports is of distinct states, equal to a full store's. The LTS output, whose
//! re-explored states have new numbers, holds one deadlock state per visit; its footer
//! records that number, the stats' `deadlock_visits`. The set lives in the store, whose
//! checkpoint records it.
//!
//! **Checkpoints.** Polled between two steps, as in `engine/dfs.rs`: the stack is flushed
//! and its mark, the encoded top frame, the depth and the sleep set's members (in their
//! order) go into `EngineMark::Caching`; the store writes its table (the slots, caches,
//! transitions left asleep and deadlocks). A resumed search decodes the top frame after
//! checking it fits and is on the store's stack, rebuilds the sleep set and continues: it
//! meets the same states against the same table, so it counts, evicts and numbers exactly
//! as the uninterrupted one.

use super::observe::{Phase, Position};
use super::{commit_checkpoint, EngineOptions, ExploreStats, Order, Run, Session};
use crate::checkpoint::EngineMark;
use crate::error::{CheckpointError, ExploreError};
use crate::lts::LtsSink;
use crate::model::{Model, TransitionId};
use crate::storage::frontier::Stack;
use crate::storage::Storage;
use crate::store::cache::{CacheOptions, CacheStore, Found};

/// The decoded top frame.
#[derive(Default)]
struct Top {
    id: u64,
    slot: u32,
    via: u32,
    cursor: usize,
    enabled: Vec<TransitionId>,
    /// Sleep members removed on entry (dependent on `via`), put back on backtrack.
    removed: Vec<u32>,
    /// Transitions added to Sleep at this state (explored ones), taken out on backtrack.
    added: Vec<u32>,
    state: Vec<u8>,
}

/// `via` of the initial state.
const ROOT: u32 = u32::MAX;

fn put(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn encode(top: &Top, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&top.id.to_le_bytes());
    put(out, top.slot);
    put(out, top.via);
    put(out, top.cursor as u32);
    put(out, top.enabled.len() as u32);
    put(out, top.removed.len() as u32);
    put(out, top.added.len() as u32);
    for t in &top.enabled {
        put(out, t.0);
    }
    for &t in top.removed.iter().chain(&top.added) {
        put(out, t);
    }
    out.extend_from_slice(&top.state);
}

/// Whether `rec` is a whole frame ([`decode`] indexes it unchecked): the checkpoint's top
/// frame is checked before it is decoded.
fn frame_fits(rec: &[u8]) -> bool {
    let u32_at = |at: usize| {
        rec.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
    };
    match (u32_at(16), u32_at(20), u32_at(24), u32_at(28)) {
        (Some(cursor), Some(n), Some(r), Some(a)) => {
            cursor <= n && 32 + 4 * (n + r + a) <= rec.len() as u64
        }
        _ => false,
    }
}

fn decode(rec: &[u8], top: &mut Top) {
    let u32_at = |at: usize| u32::from_le_bytes(rec[at..at + 4].try_into().unwrap());
    top.id = u64::from_le_bytes(rec[0..8].try_into().unwrap());
    top.slot = u32_at(8);
    top.via = u32_at(12);
    top.cursor = u32_at(16) as usize;
    let (n, r, a) = (
        u32_at(20) as usize,
        u32_at(24) as usize,
        u32_at(28) as usize,
    );
    let mut at = 32;
    top.enabled.clear();
    top.enabled
        .extend((0..n).map(|i| TransitionId(u32_at(at + 4 * i))));
    at += 4 * n;
    top.removed.clear();
    top.removed.extend((0..r).map(|i| u32_at(at + 4 * i)));
    at += 4 * r;
    top.added.clear();
    top.added.extend((0..a).map(|i| u32_at(at + 4 * i)));
    at += 4 * a;
    top.state.clear();
    top.state.extend_from_slice(&rec[at..]);
}

/// The sleep set: a bit per transition for membership, and the members in a list (sleep
/// sets are small: iterating the list is what removing the dependents of a transition costs).
#[derive(Default)]
struct Sleep {
    bits: Vec<u64>,
    members: Vec<u32>,
}

impl Sleep {
    fn new(transitions: usize) -> Sleep {
        Sleep {
            bits: vec![0; transitions.div_ceil(64)],
            members: Vec::new(),
        }
    }

    #[inline]
    fn contains(&self, t: u32) -> bool {
        self.bits
            .get(t as usize / 64)
            .is_some_and(|w| w & (1 << (t % 64)) != 0)
    }

    fn insert(&mut self, t: u32) {
        let i = t as usize / 64;
        if i >= self.bits.len() {
            self.bits.resize(i + 1, 0);
        }
        if self.bits[i] & (1 << (t % 64)) == 0 {
            self.bits[i] |= 1 << (t % 64);
            self.members.push(t);
        }
    }

    fn remove(&mut self, t: u32) {
        if self.contains(t) {
            self.bits[t as usize / 64] &= !(1 << (t % 64));
            if let Some(i) = self.members.iter().rposition(|&m| m == t) {
                self.members.swap_remove(i);
            }
        }
    }

    /// Removes every member dependent on `t` and lists them in `out` (cleared first).
    fn remove_dependent(&mut self, model: &dyn Model, t: TransitionId, out: &mut Vec<u32>) {
        out.clear();
        let mut i = 0;
        while i < self.members.len() {
            let m = self.members[i];
            if model.dependent(t, TransitionId(m)) {
                self.bits[m as usize / 64] &= !(1 << (m % 64));
                self.members.swap_remove(i);
                out.push(m);
            } else {
                i += 1;
            }
        }
    }
}

/// Runs the caching DFS within a session (the driver's way in, through
/// [`super::explore_session`], when the store is `--store cache`).
pub(crate) fn explore(
    model: &dyn Model,
    store: &mut CacheStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
    mut session: Session,
) -> Result<ExploreStats, ExploreError> {
    search(model, store, sink, opts, &mut session, &mut |_| {})
}

/// Runs the caching DFS on `model` with no output, calling `visit` with every state it
/// explores — repetitions included: a state evicted from the cache and met again is visited
/// again. What a test needs to check that every reachable state is visited, and what a
/// library user needs to check a property of every state without storing them all.
///
/// ```
/// use spillway::store::cache::CacheOptions;
/// use std::collections::HashSet;
/// # let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/Philosophers-PT-000005.pnml");
/// # let model = spillway::model::petri::build(spillway::model::pnml::parse_file(&path).unwrap(), 8).unwrap();
/// let mut distinct = HashSet::new();
/// let opts = CacheOptions { size: 150, sleep_sets: true, ..Default::default() };
/// let stats = spillway::engine::caching::explore_visiting(model.as_ref(), opts, &mut |s| {
///     distinct.insert(s.to_vec());
/// })
/// .unwrap();
/// assert_eq!(distinct.len(), 243);
/// assert!(stats.states >= 243);
/// ```
pub fn explore_visiting(
    model: &dyn Model,
    opts: CacheOptions,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<ExploreStats, ExploreError> {
    let mut store = CacheStore::new(opts, model.state_len(), None);
    let mut sink = crate::lts::NullSink;
    let mut session = Session::default();
    let mut stats = search(
        model,
        &mut store,
        &mut sink,
        &EngineOptions {
            progress: false,
            threads: 1,
        },
        &mut session,
        visit,
    )?;
    stats.model = model.describe();
    Ok(stats)
}

fn search(
    model: &dyn Model,
    store: &mut CacheStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
    session: &mut Session,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<ExploreStats, ExploreError> {
    let sleeping = store.options().sleep_sets;
    let storage = session.storage;
    let mut run = Run::new(model, sink, opts, session.observer.take())?;
    let mut sleep = Sleep::new(if sleeping {
        model.transition_count()
    } else {
        0
    });
    let mut rec: Vec<u8> = Vec::new();
    let mut succ: Vec<u8> = Vec::new();
    let mut removed: Vec<u32> = Vec::new();
    let mut awake: Vec<u32> = Vec::new();
    let mut top = Top::default();
    let mut depth: u64 = 1;
    let mut frames = match session.resume.take() {
        Some((mark, counters)) => {
            let (stack, d) = resume_top(mark, storage, model, store, &mut top, &mut sleep)?;
            run.restore(&counters);
            depth = d;
            stack
        }
        None => {
            let frames = match storage {
                Some(st) => Stack::Spilled(Box::new(st.stack(STACK)?)),
                None => Stack::Ram(Vec::new()),
            };
            model.initial_state(&mut top.state)?;
            let (slot, id) = store.push(&top.state, 0)?;
            (top.slot, top.id, top.via) = (slot, id, ROOT);
            visit(&top.state);
            enter(model, store, &mut top, &sleep, &mut run)?;
            run.max_depth = 1;
            frames
        }
    };
    let mut steps: u64 = 0;
    run.phase = Phase::Expanding;
    loop {
        // Between two steps: the top frame, the stack, the sleep set and the store are a
        // consistent cut.
        if let Some((ck, due)) = session.poll(steps) {
            let (stack, files) = frames.checkpoint(STACK)?;
            encode(&top, &mut rec);
            let mark = EngineMark::Caching {
                depth,
                top: rec.clone(),
                stack,
                sleep: sleep.members.clone(),
            };
            commit_checkpoint(ck, due, &mut run, &mut *store, mark, files)?;
        }
        if top.cursor < top.enabled.len() {
            let t = top.enabled[top.cursor];
            top.cursor += 1;
            let label = super::fire_enabled(model, &top.state, t, &mut succ)?;
            match store.find(&succ) {
                Some((found, slot)) => {
                    let (Found::Stack(id) | Found::Cache(id)) = found;
                    run.edge(top.id, label, id)?;
                    if sleeping {
                        // Awake in the successor: what is not in Sleep or depends on t.
                        awake.clear();
                        awake.extend(store.slept(slot).iter().copied().filter(|&u| {
                            !sleep.contains(u) || model.dependent(t, TransitionId(u))
                        }));
                        if !awake.is_empty() {
                            // Its earlier visits left asleep transitions that are awake now:
                            // explore those from it (same number), as a new frame.
                            let rest: Vec<u32> = store
                                .slept(slot)
                                .iter()
                                .copied()
                                .filter(|u| !awake.contains(u))
                                .collect();
                            store.set_slept(slot, rest);
                            store.reopen(slot);
                            encode(&top, &mut rec);
                            frames.push(&rec)?;
                            sleep.remove_dependent(model, t, &mut removed);
                            std::mem::swap(&mut top.state, &mut succ);
                            std::mem::swap(&mut top.removed, &mut removed);
                            (top.id, top.slot, top.via, top.cursor) = (id, slot, t.0, 0);
                            top.added.clear();
                            top.enabled.clear();
                            top.enabled.extend(awake.iter().map(|&u| TransitionId(u)));
                            depth += 1;
                            run.max_depth = run.max_depth.max(depth);
                        } else if matches!(found, Found::Cache(_)) {
                            sleep.insert(t.0);
                            top.added.push(t.0);
                        }
                    }
                }
                None => {
                    let (slot, id) = store.push(&succ, model.transition_kind(t))?;
                    run.edge(top.id, label, id)?;
                    visit(&succ);
                    encode(&top, &mut rec);
                    frames.push(&rec)?;
                    if sleeping {
                        sleep.remove_dependent(model, t, &mut removed);
                    }
                    std::mem::swap(&mut top.state, &mut succ);
                    std::mem::swap(&mut top.removed, &mut removed);
                    (top.id, top.slot, top.via, top.cursor) = (id, slot, t.0, 0);
                    top.added.clear();
                    enter(model, store, &mut top, &sleep, &mut run)?;
                    depth += 1;
                    run.max_depth = run.max_depth.max(depth);
                }
            }
        } else {
            // The top state is explored: it leaves the stack (into the cache), Sleep becomes
            // its parent's again, and the transition that reached it goes to sleep.
            let still_on_stack = store.pop(top.slot);
            if sleeping {
                for &t in &top.added {
                    sleep.remove(t);
                }
                for &t in &top.removed {
                    sleep.insert(t);
                }
            }
            let via = top.via;
            if !frames.pop(&mut rec)? {
                break;
            }
            decode(&rec, &mut top);
            depth -= 1;
            if sleeping && !still_on_stack {
                sleep.insert(via);
                top.added.push(via);
            }
        }
        steps += 1;
        if steps & 0x3fff == 0 {
            run.tick(&*store, Position::Dfs { depth })?;
        }
    }
    store.engine.deadlocks = store.distinct_deadlocks();
    run.position = Position::Dfs { depth: 0 };
    if store.evictions() > 0 {
        run.sink.states_may_repeat();
    }
    run.finish(&*store)?;
    let mut stats = run.stats(&*store, Order::Dfs);
    // The run counted deadlock visits (what the LTS holds); the stats give distinct ones.
    stats.deadlocks = store.distinct_deadlocks();
    Ok(stats)
}

/// Reads a checkpoint's engine mark back: the top frame into `top`, the sleep set into
/// `sleep`, and the stack reopened at its mark; returns the stack and the depth. What the
/// manifest holds is checked before it is used (a frame that does not decode, a top that
/// is not on the store's stack, a sleeping transition the model does not have), so that a
/// checkpoint that does not fit is refused as corrupt, not a panic.
fn resume_top(
    mark: EngineMark,
    storage: Option<&Storage>,
    model: &dyn Model,
    store: &CacheStore,
    top: &mut Top,
    sleep: &mut Sleep,
) -> Result<(Stack, u64), ExploreError> {
    let (
        EngineMark::Caching {
            depth,
            top: t,
            stack,
            sleep: members,
        },
        Some(st),
    ) = (mark, storage)
    else {
        return Err(super::corrupt_mark(
            storage,
            "the engine's mark is not of a DFS run with --store cache and segment storage".into(),
        ));
    };
    let corrupt = |problem: String| {
        ExploreError::Checkpoint(CheckpointError::Corrupt {
            path: st.dir().join(crate::checkpoint::MANIFEST),
            problem,
        })
    };
    if !frame_fits(&t) {
        return Err(corrupt(format!(
            "the caching search's top frame ({} bytes) does not decode",
            t.len()
        )));
    }
    decode(&t, top);
    // A transition the model lacks would be fired as if enabled (a model error, exit 3).
    let transitions = model.transition_count();
    if let Some(bad) = top
        .enabled
        .iter()
        .map(|t| t.0 as usize)
        .chain(top.removed.iter().chain(&top.added).map(|&m| m as usize))
        .find(|&t| t >= transitions)
    {
        return Err(corrupt(format!(
            "the caching search's top frame names transition {bad}; the model has {transitions}"
        )));
    }
    if depth == 0 || !store.holds_on_stack(top.slot, &top.state) {
        return Err(corrupt(format!(
            "the caching search's top frame (slot {}, depth {depth}) is not on the store's stack",
            top.slot
        )));
    }
    let sleeping = store.options().sleep_sets;
    for &m in &members {
        if !sleeping || m as usize >= transitions || sleep.contains(m) {
            return Err(corrupt(format!(
                "the caching search's sleep set names transition {m} (of {transitions}) wrongly"
            )));
        }
        sleep.insert(m);
    }
    Ok((
        Stack::Spilled(Box::new(st.open_stack(STACK, stack)?)),
        depth,
    ))
}

/// A state was just pushed as `top` (id, slot, via, removed set): reads its enabled
/// transitions, records a deadlock, and filters out the sleeping transitions.
fn enter(
    model: &dyn Model,
    store: &mut CacheStore,
    top: &mut Top,
    sleep: &Sleep,
    run: &mut Run,
) -> Result<(), ExploreError> {
    model.enabled(&top.state, &mut top.enabled)?;
    if top.enabled.is_empty() {
        run.deadlocks += 1;
        store.note_deadlock(&top.state);
    } else if !sleep.members.is_empty() {
        let slept: Vec<u32> = top
            .enabled
            .iter()
            .filter(|t| sleep.contains(t.0))
            .map(|t| t.0)
            .collect();
        if !slept.is_empty() {
            store.engine.slept += slept.len() as u64;
            top.enabled.retain(|t| !sleep.contains(t.0));
            store.set_slept(top.slot, slept);
        }
    }
    Ok(())
}

/// Name of the stack's file.
const STACK: &str = "cache.stack";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ModelError;
    use crate::model::Fired;

    #[test]
    fn frames_round_trip() {
        let top = Top {
            id: 1 << 40,
            slot: 7,
            via: ROOT,
            cursor: 2,
            enabled: vec![TransitionId(3), TransitionId(9), TransitionId(11)],
            removed: vec![4],
            added: vec![3, 9],
            state: vec![1, 2, 3, 250],
        };
        let mut rec = Vec::new();
        encode(&top, &mut rec);
        let mut back = Top::default();
        decode(&rec, &mut back);
        assert_eq!(
            (back.id, back.slot, back.via, back.cursor),
            (top.id, top.slot, top.via, top.cursor)
        );
        assert_eq!(
            (&back.enabled, &back.removed, &back.added, &back.state),
            (&top.enabled, &top.removed, &top.added, &top.state)
        );
    }

    /// A model of `n` transitions where `a` and `b` are dependent when `a % 3 == b % 3`.
    struct Mod3(usize);

    impl Model for Mod3 {
        fn describe(&self) -> String {
            "mod3".into()
        }
        fn initial_state(&self, out: &mut Vec<u8>) -> Result<(), ModelError> {
            out.clear();
            Ok(())
        }
        fn state_len(&self) -> Option<usize> {
            Some(0)
        }
        fn transition_count(&self) -> usize {
            self.0
        }
        fn successors(
            &self,
            _: &[u8],
            _: &mut dyn FnMut(TransitionId, crate::model::LabelId, &[u8]),
        ) -> Result<(), ModelError> {
            Ok(())
        }
        fn fire(&self, _: &[u8], _: TransitionId, _: &mut Vec<u8>) -> Result<Fired, ModelError> {
            Ok(Fired::Disabled)
        }
        fn dependent(&self, a: TransitionId, b: TransitionId) -> bool {
            a.0 % 3 == b.0 % 3
        }
        fn label_count(&self) -> usize {
            0
        }
        fn label_name(&self, _: crate::model::LabelId) -> String {
            String::new()
        }
    }

    #[test]
    fn sleep_removes_dependents_and_restores() {
        let m = Mod3(200);
        let mut s = Sleep::new(200);
        for t in [1, 4, 5, 130, 199] {
            s.insert(t);
        }
        s.insert(4);
        assert_eq!(
            s.members.len(),
            5,
            "inserting a member twice keeps one copy"
        );
        let mut removed = Vec::new();
        s.remove_dependent(&m, TransitionId(7), &mut removed);
        removed.sort();
        assert_eq!(removed, vec![1, 4, 130, 199]);
        assert!(s.contains(5) && !s.contains(1) && !s.contains(199));
        for &t in &removed {
            s.insert(t);
        }
        s.remove(5);
        let mut members = s.members.clone();
        members.sort();
        assert_eq!(members, vec![1, 4, 130, 199]);
        assert!(!s.contains(5) && s.contains(130));
    }
}
