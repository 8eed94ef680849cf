//! BFS with snapshots (`--store snapshots`): breadth-first search without a complete Closed
//! set. The engine keeps the Open set — the level being expanded (`cur`) and the level being
//! built (`next`), each a hash-indexed arena — and checks every successor against `next`,
//! `cur`, then the store (snapshots held in the caches and the Backtrack set). A successor
//! found nowhere is numbered anew and joins `next`, whether it is new or a duplicate the
//! search forgot: an unrecognised duplicate becomes a redundant state of the output LTS.
//! Every numbered state is expanded once, with an edge to some number of each successor,
//! so all the numbers given to one model state are strongly bisimilar, and the output is
//! strongly bisimilar to the state space (`spillway lts reduce` removes the copies). Every
//! transition of the state space is traversed (each state is numbered, hence expanded, at
//! least once).
//!
//! When a level is expanded the store's first cache may take it as a snapshot
//! ([`SnapshotStore::level_done`]); then `next` becomes `cur`. The search ends at the first
//! empty level; the stream's termination guarantee (checked before the run) is what makes
//! that level come.
//!
//! The Backtrack set (`--backtrack`) learns, at expansion time, a state with more than one
//! successor whose successors were all recognised in one old snapshot (rule 1) or all in
//! the Backtrack set (rule 2).
//!
//! Checkpoints are taken between two expansions, wherever the poll says one is due (in the
//! middle of a level too): the two levels are written whole into an image
//! (`snapshots.open.G`, [`crate::storage::image`]) and the position in `cur` goes into the
//! manifest with the depth and the expansion count; the store writes its own part
//! ([`SnapshotStore`]'s checkpoint). A resumed run rebuilds both levels' indexes from their
//! states and continues at the recorded position: it meets the same states in the same
//! order against the same structures, so it numbers, takes snapshots and learns exactly as
//! the uninterrupted run.

use super::observe::{Phase, Position};
use super::{commit_checkpoint, EngineOptions, ExploreStats, Order, Run, Session};
use crate::checkpoint::EngineMark;
use crate::error::{ExploreError, StorageError, StoreError};
use crate::lts::LtsSink;
use crate::model::{LabelId, Model};
use crate::storage::image::Images;
use crate::storage::{FileMark, Storage};
use crate::store::full::state_hash;
use crate::store::snapshots::{Rule, SnapshotStore};
use crate::store::{StateBatch, StateId};

/// One BFS level: states back to back, their hashes, and an index; the output numbers of a
/// level are consecutive from `first_id`.
#[derive(Default)]
struct Level {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    hashes: Vec<u64>,
    first_id: StateId,
    index: hashbrown::HashTable<u32>,
}

impl Level {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn find(&self, state: &[u8], hash: u64) -> Option<StateId> {
        self.index
            .find(hash, |&i| {
                self.hashes[i as usize] == hash && self.get(i as usize) == state
            })
            .map(|&i| self.first_id + i as u64)
    }

    fn push(&mut self, state: &[u8], hash: u64, id: StateId) {
        let i = self.len();
        if i == 0 {
            self.first_id = id;
        }
        debug_assert_eq!(
            self.first_id + i as u64,
            id,
            "a level's numbers are consecutive"
        );
        self.bytes.extend_from_slice(state);
        self.ends.push(self.bytes.len());
        self.hashes.push(hash);
        let hashes = &self.hashes;
        self.index
            .insert_unique(hash, i as u32, |&j| hashes[j as usize]);
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.hashes.clear();
        self.index.clear();
    }

    /// Bytes of RAM it takes (its arrays' capacities).
    fn ram_bytes(&self) -> u64 {
        (self.bytes.capacity() + self.ends.capacity() * 8 + self.hashes.capacity() * 8) as u64
            + self.index.capacity() as u64 * 4
    }

    /// A level of more than 2^32 − 1 states cannot be indexed by `u32`.
    fn full(&self) -> bool {
        self.len() >= u32::MAX as usize
    }

    /// About the RAM a level of `states` states in `bytes` bytes takes (what a resume asks
    /// the budget for before reading one back).
    fn estimate(states: u64, bytes: u64) -> u64 {
        bytes.saturating_add(states.saturating_mul(8 + 8 + 8))
    }
}

/// Name of the engine's images (its two levels).
const OPEN_IMAGE: &str = "snapshots.open";

/// Writes the two levels into a new image; returns the engine's mark and files.
fn checkpoint_levels(
    images: &mut Images,
    storage: &Storage,
    cur: &Level,
    next: &Level,
    depth: u64,
    position: usize,
    expansions: u64,
) -> Result<(EngineMark, Vec<FileMark>), StorageError> {
    let (image, files) = images.write(storage, |w| {
        for level in [cur, next] {
            for i in 0..level.len() {
                w.push(level.get(i))?;
            }
        }
        Ok(())
    })?;
    let mark = EngineMark::Snapshots {
        depth,
        position: position as u64,
        expansions,
        cur_first: cur.first_id,
        cur_states: cur.len() as u64,
        cur_bytes: cur.bytes.len() as u64,
        next_first: next.first_id,
        next_states: next.len() as u64,
        next_bytes: next.bytes.len() as u64,
        image,
    };
    Ok((mark, files))
}

/// Where a resumed run continues: the engine's mark, read back.
struct Resumed {
    depth: u64,
    position: usize,
    expansions: u64,
    images: Images,
}

/// Reads the levels of a checkpoint (`mark`) back into `cur` and `next`, after asking the
/// `--memory` backstop whether they fit (the baseline was taken before the resume read
/// anything, so they count against the budget as in the uninterrupted run).
fn resume_levels(
    mark: EngineMark,
    storage: Option<&Storage>,
    cur: &mut Level,
    next: &mut Level,
) -> Result<Resumed, ExploreError> {
    let EngineMark::Snapshots {
        depth,
        position,
        expansions,
        cur_first,
        cur_states,
        cur_bytes,
        next_first,
        next_states,
        next_bytes,
        image,
    } = mark
    else {
        return Err(super::corrupt_mark(
            storage,
            "the engine's mark is not of a BFS-with-snapshots run (--store snapshots)".into(),
        ));
    };
    let Some(storage) = storage else {
        return Err(ExploreError::Config(
            "resuming BFS with snapshots needs the run's storage".into(),
        ));
    };
    let more = Level::estimate(cur_states, cur_bytes) + Level::estimate(next_states, next_bytes);
    crate::sys::check_budget_more(more, || {
        (
            format!(
                "resuming, the snapshots engine would take back its levels of {cur_states} and {next_states} states ({} MiB)",
                more >> 20
            ),
            "",
        )
    })?;
    let images = Images::new(storage, OPEN_IMAGE, Some(&image));
    let mut r = images.read(storage, &image)?;
    for (level, first, states, bytes, what) in [
        (
            &mut *cur,
            cur_first,
            cur_states,
            cur_bytes,
            "a state of the level being expanded",
        ),
        (
            &mut *next,
            next_first,
            next_states,
            next_bytes,
            "a state of the level being built",
        ),
    ] {
        for k in 0..states {
            r.next(what)?;
            let state = r.record();
            let hash = state_hash(state);
            if level.full() || level.find(state, hash).is_some() {
                return Err(r.bad("a state its level does not hold yet").into());
            }
            level.push(state, hash, first + k);
        }
        if level.bytes.len() as u64 != bytes {
            return Err(r
                .bad(&format!(
                    "the last state of a level of {bytes} bytes (found {})",
                    level.bytes.len()
                ))
                .into());
        }
        level.first_id = first;
    }
    r.finish()?;
    if position > cur_states || (position == cur_states && cur_states > 0) {
        return Err(super::corrupt_mark(
            Some(storage),
            format!("the snapshots engine's position {position} is past its level of {cur_states} states"),
        ));
    }
    // Every level before this one holds a state, numbered before this level's first: a
    // deeper level cannot be (a depth near u64::MAX wrapped and kept the search going).
    if depth > cur_first {
        return Err(super::corrupt_mark(
            Some(storage),
            format!("the snapshots engine's depth {depth} is past its level's first state number {cur_first}"),
        ));
    }
    Ok(Resumed {
        depth,
        position: position as usize,
        expansions,
        images,
    })
}

/// Where the successors of the state being expanded were recognised (for the Backtrack
/// set's rules).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AllIn {
    /// No successor seen yet.
    Start,
    /// All so far in this old snapshot.
    OldSnapshot(u32),
    /// All so far in the Backtrack set.
    Backtrack,
    /// All so far in both this old snapshot and the Backtrack set.
    Both(u32),
    /// Neither rule applies.
    None,
}

impl AllIn {
    fn and(self, old: Option<u32>, backtrack: bool) -> AllIn {
        let this = match (old, backtrack) {
            (Some(h), true) => AllIn::Both(h),
            (Some(h), false) => AllIn::OldSnapshot(h),
            (None, true) => AllIn::Backtrack,
            (None, false) => AllIn::None,
        };
        match (self, this) {
            (AllIn::Start, t) => t,
            (AllIn::None, _) | (_, AllIn::None) => AllIn::None,
            (AllIn::Both(a), AllIn::Both(b)) if a == b => AllIn::Both(a),
            (AllIn::Both(a) | AllIn::OldSnapshot(a), AllIn::Both(b) | AllIn::OldSnapshot(b))
                if a == b =>
            {
                AllIn::OldSnapshot(a)
            }
            (AllIn::Both(_) | AllIn::Backtrack, AllIn::Both(_) | AllIn::Backtrack) => {
                AllIn::Backtrack
            }
            _ => AllIn::None,
        }
    }
}

/// Explores `model` breadth-first with `store`'s snapshots instead of a Closed set.
pub(crate) fn explore(
    model: &dyn Model,
    store: &mut SnapshotStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
    mut session: Session,
) -> Result<ExploreStats, ExploreError> {
    let storage = session.storage;
    let mut run = Run::new(model, sink, opts, session.observer.take())?;
    let mut state = Vec::new();
    let mut batch = StateBatch::default();
    let mut labels: Vec<LabelId> = Vec::new();
    let mut ids: Vec<StateId> = Vec::new();
    let mut cur = Level::default();
    let mut next = Level::default();
    let learns = store.learns();

    let mut depth: u64 = 0;
    let mut expansions: u64 = 0;
    // Where the first level's expansion starts: 0, or a resumed checkpoint's position.
    let mut start = 0;
    let mut images = None;
    match session.resume.take() {
        Some((mark, counters)) => {
            let r = resume_levels(mark, storage, &mut cur, &mut next)?;
            run.restore(&counters);
            (depth, start, expansions) = (r.depth, r.position, r.expansions);
            images = Some(r.images);
            store.resume_open(
                (cur.len() + next.len()) as u64,
                cur.ram_bytes() + next.ram_bytes(),
            );
        }
        None => {
            model.initial_state(&mut state)?;
            let id = store.number();
            cur.push(&state, state_hash(&state), id);
            run.max_depth = 1;
        }
    }
    run.phase = Phase::Expanding;
    while cur.len() > 0 {
        for i in std::mem::take(&mut start)..cur.len() {
            // Between two expansions: the levels, the position and the store are a
            // consistent cut (the checkpoint's poll, every 256 expansions).
            if let Some((ck, due)) = session.poll(expansions) {
                let Some(st) = storage else {
                    return Err(ExploreError::Config(
                        "a checkpointed run of BFS with snapshots needs its storage".into(),
                    ));
                };
                let imgs = images.get_or_insert_with(|| Images::new(st, OPEN_IMAGE, None));
                let (mark, files) = checkpoint_levels(imgs, st, &cur, &next, depth, i, expansions)?;
                commit_checkpoint(ck, due, &mut run, &mut *store, mark, files)?;
            }
            state.clear();
            state.extend_from_slice(cur.get(i));
            let head = cur.first_id + i as u64;
            batch.clear();
            labels.clear();
            model.successors(&state, &mut |t, label, succ| {
                batch.push(t, succ);
                labels.push(label);
            })?;
            ids.clear();
            let mut all_in = AllIn::Start;
            for k in 0..batch.len() {
                let succ = batch.get(k);
                let hash = state_hash(succ);
                let found = match next.find(succ, hash).or_else(|| cur.find(succ, hash)) {
                    Some(id) => {
                        all_in = AllIn::None;
                        id
                    }
                    None => match store.lookup(succ, hash, depth) {
                        Some(f) => {
                            let old = f.snapshot.filter(|&(_, old)| old).map(|(h, _)| h);
                            all_in = all_in.and(old, f.backtrack);
                            f.id
                        }
                        None => {
                            all_in = AllIn::None;
                            if next.full() {
                                return Err(StoreError::CapacityExceeded {
                                    store: "snapshots",
                                    message: format!(
                                        "BFS level {} has more than {} states: the snapshots engine indexes a level with 32-bit positions",
                                        depth + 1,
                                        u32::MAX
                                    ),
                                }
                                .into());
                            }
                            let id = store.number();
                            next.push(succ, hash, id);
                            id
                        }
                    },
                };
                ids.push(found);
            }
            for (&label, &dst) in labels.iter().zip(&ids) {
                run.edge(head, label, dst)?;
            }
            if labels.is_empty() {
                run.deadlocks += 1;
            }
            let hash = cur.hashes[i];
            store.expanded(hash, labels.len() as u64);
            if learns && labels.len() > 1 {
                match all_in {
                    AllIn::OldSnapshot(_) | AllIn::Both(_) => {
                        store.learn(&state, hash, head, Rule::OldSnapshot)?
                    }
                    AllIn::Backtrack => store.learn(&state, hash, head, Rule::AllBacktrack)?,
                    AllIn::Start | AllIn::None => {}
                }
            }
            expansions += 1;
            // More often than the other engines (every 1,024 expansions, not 16,384): the
            // levels and snapshots held grow by every successor, and nothing spills them, so
            // the `--memory` backstop in `tick` must look before they are far past it.
            if expansions & 0x3ff == 0 {
                store.note_open(
                    (cur.len() + next.len()) as u64,
                    cur.ram_bytes() + next.ram_bytes(),
                );
                run.tick(
                    &*store,
                    Position::Bfs {
                        level: depth,
                        level_states: cur.len() as u64,
                    },
                )?;
            }
        }
        store.note_open(
            (cur.len() + next.len()) as u64,
            cur.ram_bytes() + next.ram_bytes(),
        );
        let size = cur.len() as u64;
        let level = &cur;
        store.level_done(
            depth,
            size,
            (0..level.len()).map(|i| (level.get(i), level.hashes[i], level.first_id + i as u64)),
        )?;
        std::mem::swap(&mut cur, &mut next);
        next.clear();
        store.note_open(cur.len() as u64, cur.ram_bytes() + next.ram_bytes());
        if cur.len() > 0 {
            depth += 1;
            run.max_depth = depth + 1;
        }
    }
    run.position = Position::Bfs {
        level: depth,
        level_states: 0,
    };
    run.finish(&*store)?;
    Ok(run.stats(&*store, Order::Bfs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_in_follows_the_rules() {
        let s = AllIn::Start;
        assert!(matches!(
            s.and(Some(3), false).and(Some(3), false),
            AllIn::OldSnapshot(3)
        ));
        assert!(matches!(
            s.and(Some(3), false).and(Some(4), false),
            AllIn::None
        ));
        assert!(matches!(
            s.and(None, true).and(Some(4), true),
            AllIn::Backtrack
        ));
        assert!(matches!(
            s.and(Some(4), true).and(Some(4), false),
            AllIn::OldSnapshot(4)
        ));
        assert!(matches!(
            s.and(Some(4), true).and(Some(4), true),
            AllIn::Both(4)
        ));
        assert!(matches!(s.and(None, false), AllIn::None));
        assert!(matches!(s.and(None, true).and(None, false), AllIn::None));
        assert!(matches!(s.and(Some(3), false).and(None, true), AllIn::None));
    }
}
