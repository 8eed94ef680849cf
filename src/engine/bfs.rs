//! Breadth-first exploration.
//!
//! With a store that keeps state vectors, BFS order *is* id order: the open set is the id range
//! `[head, store.len())` and needs no separate queue. Other stores get a [`Queue`] of
//! `(id, state)` records, or a [`SegQueue`] of `id: u64 LE | state` records when the run has
//! a storage budget (its middle spills to compressed segment files). Level boundaries are tracked by counting: level `d + 1` is complete
//! when every state of level `d` has been expanded.

use super::observe::{Phase, Position};
use super::parallel::{Expanders, Part, Workers, CANDIDATE, SAME};
use super::{commit_checkpoint, EngineOptions, ExploreStats, Order, Run, Session};
use crate::checkpoint::{EngineMark, OpenMark};
use crate::error::{ExploreError, StoreError};
use crate::lts::LtsSink;
use crate::model::{LabelId, Model};
use crate::storage::frontier::Queue;
use crate::storage::{Account, MemoryLimit};
use crate::store::full::eq_bytes;
use crate::store::{Insert, NewState, Resolver, StateBatch, StateStore, StatesBack, Via};
use std::sync::MutexGuard;

/// The open set: an id range when the store gives states back, else a queue of
/// `id: u64 LE | state` records (in RAM, or in segment files when the run has a storage).
enum Open {
    /// The store keeps states: the open set is the id range `[next, store.len())`.
    ById {
        next: u64,
    },
    Queue(Queue),
}

impl Open {
    fn push(&mut self, id: u64, state: &[u8], rec: &mut Vec<u8>) -> Result<(), ExploreError> {
        if let Open::Queue(q) = self {
            rec.clear();
            rec.extend_from_slice(&id.to_le_bytes());
            rec.extend_from_slice(state);
            q.push(rec)?;
        }
        Ok(())
    }
}

pub fn explore(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
    mut session: Session,
) -> Result<ExploreStats, ExploreError> {
    let storage = session.storage;
    let mut run = Run::new(model, sink, opts, session.observer.take())?;
    let mut state = Vec::new();
    let mut p = Pending::default();
    let mut rec: Vec<u8> = Vec::new();
    let mut lv = Levels {
        depth: 0,
        level_left: 1,
        next_level: 0,
        level_states: 1,
    };
    let mut open = match session.resume.take() {
        Some((mark, counters)) => {
            let EngineMark::Bfs {
                depth: d,
                level_left: l,
                next_level: n,
                level_states: s,
                open,
            } = mark
            else {
                return Err(super::corrupt_mark(
                    storage,
                    "the engine's mark is not of a BFS run".into(),
                ));
            };
            run.restore(&counters);
            lv = Levels {
                depth: d,
                level_left: l,
                next_level: n,
                level_states: s,
            };
            match (open, storage) {
                // The open set is the ids `[next, len)`: a `next` past the stored states
                // would expand states that do not exist.
                (OpenMark::ById { next }, _) if next > store.len() => {
                    return Err(super::corrupt_mark(
                        storage,
                        format!(
                            "the BFS's open set starts at state {next}, of {} stored",
                            store.len()
                        ),
                    ))
                }
                (OpenMark::ById { next }, _) => Open::ById { next },
                (OpenMark::Queue(m), Some(st)) => {
                    Open::Queue(Queue::Spilled(Box::new(st.open_queue(OPEN, &m)?)))
                }
                (OpenMark::Queue(_), None) => {
                    return Err(ExploreError::Config(
                        "resuming a BFS queue needs the run's storage".into(),
                    ))
                }
            }
        }
        None => {
            model.initial_state(&mut state)?;
            let open = match store.insert(&state, None)? {
                Insert::New(0) | Insert::Seen(0) => {
                    if store.states_back() != StatesBack::No {
                        Open::ById { next: 0 }
                    } else {
                        let mut q = Open::Queue(match storage {
                            Some(st) => Queue::Spilled(Box::new(st.queue(OPEN)?)),
                            None => Queue::in_ram(),
                        });
                        q.push(0, &state, &mut rec)?;
                        q
                    }
                }
                other => unreachable!("the initial state is numbered 0, got {other:?}"),
            };
            run.max_depth = 1;
            open
        }
    };
    let mut polls: u64 = 0;
    run.phase = Phase::Expanding;
    // Delayed duplicate detection: the successors of many parents are collected and handed
    // to the store at once (`Pending`), and their edges are written when the batch is
    // resolved, in the same order as one by one.
    let mut delayed = store.delayed_batch();
    // A spilled index resolves its delayed batches on the threads its budget allows.
    store.set_threads(opts.threads);
    // The chunked path's threads and buffers, made when it is first taken (with their
    // account in the run's budget).
    let mut workers: Option<(Workers, Chunk, Option<Account>)> = None;
    // The parent the chunked path last ticked at.
    let mut ticked: u64 = 0;
    // The threads that expand a spilled index's delayed batches (`None` inside when fewer
    // than two threads would run), made when first wanted.
    let mut expanders: Option<Option<(Expanders, Option<Account>)>> = None;
    loop {
        if p.parents.is_empty() {
            polls += 1;
            // With delayed batches or chunks the loop passes here once per batch or chunk
            // (thousands of expansions): ask every time, or a SIGINT waits for 256 of them.
            let count = if delayed.is_some() || workers.is_some() {
                0
            } else {
                polls
            };
            if let Some((ck, due)) = session.poll(count) {
                let (open_mark, files) = match &mut open {
                    Open::ById { next } => (OpenMark::ById { next: *next }, Vec::new()),
                    Open::Queue(q) => {
                        let (m, files) = q.checkpoint()?;
                        (OpenMark::Queue(m), files)
                    }
                };
                let mark = EngineMark::Bfs {
                    depth: lv.depth,
                    level_left: lv.level_left,
                    next_level: lv.next_level,
                    level_states: lv.level_states,
                    open: open_mark,
                };
                commit_checkpoint(ck, due, &mut run, store, mark, files)?;
                if let Open::Queue(q) = &mut open {
                    q.checkpointed()?;
                }
            }
        }
        // `--threads`: a store with a shared index (its index in RAM) expands its open id
        // range by chunks on every thread (engine/parallel.rs), between delayed batches; once
        // the index has spilled, its delayed batches run on this thread.
        if let (true, Open::ById { next }) = (p.parents.is_empty(), &mut open) {
            if store.shared_index().is_some() {
                let small = store.small_chunks();
                let (w, chunk, account) = workers.get_or_insert_with(|| {
                    let limit = storage.and_then(|st| match st.budget.limit() {
                        MemoryLimit::Bytes(b) => Some(b),
                        MemoryLimit::Unlimited => None,
                    });
                    let w = Workers::new(model, opts.threads, limit, small);
                    let account = storage.map(|st| st.budget.account("bfs.threads"));
                    if let Some(a) = &account {
                        // Counted before the first chunk fills them.
                        a.set(w.expected_bytes(), 0, 0);
                    }
                    (w, Chunk::default(), account)
                });
                if w.threads() == 1 && !store.chunks_on_one_thread() {
                    // One thread after all (the model does not fork, or the budget leaves
                    // room for one): a store whose delayed batches beat the chunks there
                    // stops sharing, and the buffers go below.
                    store.set_threads(1);
                    continue;
                }
                let more = expand_chunk(w, chunk, model, store, &mut run, next, &mut lv)?;
                if let Some(a) = account {
                    // The chunk's buffers keep their size: count them against the budget.
                    a.set(w.ram_bytes() + chunk.ram_bytes(), 0, 0);
                }
                if !more {
                    break;
                }
                run.threads = w.threads() as u64;
                // As the one-parent loop: every 16,384 parents or so (a chunk of a
                // narrow level holds one or two; reading the RSS each time was a fifth of
                // such a run).
                if *next >= ticked + 0x4000 {
                    ticked = *next;
                    run.tick(store, lv.position())?;
                }
                delayed = store.delayed_batch();
                continue;
            }
            if let Some((w, chunk, account)) = workers.take() {
                // The index has spilled: the delayed batches take over for good, and the
                // threads' buffers give their share of the budget back.
                drop((w, chunk));
                crate::sys::release_freed_memory();
                if let Some(a) = account {
                    a.set(0, 0, 0);
                }
            }
        }
        // A delayed batch of a store that shares its vectors (a spilled index): its parents
        // are expanded on every thread, a prefix of the level at a time.
        if let (Some(limit), Open::ById { next }) = (delayed, &mut open) {
            let avail = if lv.level_left == 0 {
                lv.next_level
            } else {
                lv.level_left
            };
            let count = avail.min(store.len() - *next);
            // (Asked first: the threads and their account are made only for a store that
            // shares its vectors.)
            if count > 1 && opts.threads > 1 && store.shared_vectors().is_some() {
                let ex = expanders.get_or_insert_with(|| {
                    let limit = storage.and_then(|st| match st.budget.limit() {
                        MemoryLimit::Bytes(b) => Some(b),
                        MemoryLimit::Unlimited => None,
                    });
                    let ex = Expanders::new(model, opts.threads, limit);
                    let account = ex.as_ref().and_then(|ex| {
                        let a = storage.map(|st| st.budget.account("bfs.expand"))?;
                        // Counted before the first round fills them.
                        a.set(ex.expected_bytes(), 0, 0);
                        Some(a)
                    });
                    ex.map(|ex| (ex, account))
                });
                if let (Some((ex, account)), Some(vectors)) = (ex, store.shared_vectors()) {
                    let first = *next;
                    let room = limit.saturating_sub(p.batch.len());
                    let done = ex.expand(
                        vectors,
                        first..first + count,
                        room,
                        &mut p.batch,
                        &mut p.labels,
                        &mut p.parents,
                    )?;
                    if let Some(a) = account {
                        a.set(ex.ram_bytes(), 0, 0);
                    }
                    run.threads = run.threads.max(ex.threads() as u64);
                    *next += done;
                    let parents = &p.parents[p.parents.len() - done as usize..];
                    for &(head, count) in parents {
                        lv.take(&mut run);
                        if count == 0 {
                            run.deadlocks += 1;
                        }
                        if head & 0x3fff == 0 {
                            run.tick(store, lv.position())?;
                        }
                    }
                    if lv.level_left == 0 || p.batch.len() >= limit {
                        p.resolve(store, &mut run, &mut lv, &mut open, &mut rec)?;
                        delayed = store.delayed_batch();
                    }
                    continue;
                }
            }
        }
        // `None`: the open set is empty for now (a pending batch may still add to it).
        let head = match &mut open {
            Open::ById { next } => {
                if *next == store.len() {
                    None
                } else {
                    let name = store.name();
                    let Some(s) = store.get(*next)? else {
                        return Err(StoreError::Invalid {
                            store: name,
                            message: format!("could not return state {next} for expansion"),
                        }
                        .into());
                    };
                    state.clear();
                    state.extend_from_slice(s);
                    *next += 1;
                    Some(*next - 1)
                }
            }
            Open::Queue(q) => {
                // A record is a state number and a state: one of another shape, or naming a
                // state not numbered, comes from a queue or mark recorded wrong (a resumed
                // checkpoint's; the blocks' checksums held), not from this run.
                let width = model.state_len();
                let popped = q.pop_with(&mut rec, |r| {
                    if r.len() < 8 || width.is_some_and(|w| r.len() != 8 + w) {
                        return Err(r.len());
                    }
                    state.clear();
                    state.extend_from_slice(&r[8..]);
                    Ok(u64::from_le_bytes(r[..8].try_into().unwrap()))
                })?;
                match popped {
                    None => None,
                    Some(Ok(id)) if id < store.len() => Some(id),
                    Some(bad) => {
                        return Err(super::corrupt_mark(
                            storage,
                            match bad {
                                Err(len) => format!(
                                    "the BFS's open queue holds a record of {len} bytes, not a state number and a state{}",
                                    width.map_or(String::new(), |w| format!(" of {w} bytes"))
                                ),
                                Ok(id) => format!(
                                    "the BFS's open queue names state {id}, of {} stored",
                                    store.len()
                                ),
                            },
                        ))
                    }
                }
            }
        };
        let Some(head) = head else {
            if p.parents.is_empty() {
                break;
            }
            p.resolve(store, &mut run, &mut lv, &mut open, &mut rec)?;
            continue;
        };
        lv.take(&mut run);
        if let Some(limit) = delayed {
            let before = p.batch.len();
            model.successors(&state, &mut |t, label, succ| {
                p.batch.push(t, succ);
                p.labels.push(label);
            })?;
            let count = p.batch.len() - before;
            if count == 0 {
                run.deadlocks += 1;
            }
            p.parents.push((head, count as u32));
            // A level is resolved before the next starts: its new states are the next
            // level's count.
            if lv.level_left == 0 || p.batch.len() >= limit {
                p.resolve(store, &mut run, &mut lv, &mut open, &mut rec)?;
                // The store's batch size follows its index (it grows, then spills).
                delayed = store.delayed_batch();
            }
        } else {
            p.batch.clear();
            p.labels.clear();
            model.successors(&state, &mut |t, label, succ| {
                p.batch.push(t, succ);
                p.labels.push(label);
            })?;
            store.insert_batch(head, lv.depth, &p.batch, &mut p.results)?;
            for (i, (&label, ins)) in p.labels.iter().zip(&p.results).enumerate() {
                let id = match *ins {
                    Insert::New(id) => {
                        lv.next_level += 1;
                        open.push(id, p.batch.get(i), &mut rec)?;
                        id
                    }
                    Insert::Seen(id) => id,
                };
                run.edge(head, label, id)?;
            }
            if p.labels.is_empty() {
                run.deadlocks += 1;
            }
            if head & 0xfff == 0 {
                // A store may start batching later (the tree store, once its states went to
                // the full store's disk path); a delayed batch starts empty.
                delayed = store.delayed_batch();
                p.batch.clear();
                p.labels.clear();
            }
        }
        if head & 0x3fff == 0 {
            run.tick(store, lv.position())?;
        }
    }
    run.position = lv.position();
    run.finish(store)?;
    Ok(run.stats(store, Order::Bfs))
}

/// The BFS level counters: level `depth + 1` is complete when every state of level `depth`
/// has been expanded.
struct Levels {
    depth: u64,
    /// States left to expand in the current level, and states found for the next one.
    level_left: u64,
    next_level: u64,
    /// States in the level being expanded (for the progress line and the metrics).
    level_states: u64,
}

impl Levels {
    /// Takes the next parent: starts the next level when the current one is done.
    fn take(&mut self, run: &mut Run) {
        if self.level_left == 0 {
            self.level_left = self.next_level;
            self.level_states = self.next_level;
            self.next_level = 0;
            self.depth += 1;
            run.max_depth = self.depth + 1;
        }
        self.level_left -= 1;
    }

    fn position(&self) -> Position {
        Position::Bfs {
            level: self.depth,
            level_states: self.level_states,
        }
    }
}

/// Expands the next chunk of the open set (ids `next..`) on every thread and numbers its
/// successors parent by parent in BFS order (see engine/parallel.rs); `false` when the open
/// set is empty. Only for a store with a shared index.
fn expand_chunk(
    w: &mut Workers,
    chunk: &mut Chunk,
    model: &dyn Model,
    store: &mut dyn StateStore,
    run: &mut Run,
    next: &mut u64,
    levels: &mut Levels,
) -> Result<bool, ExploreError> {
    let (first, end) = (*next, store.len().min(*next + w.chunk_parents() as u64));
    w.parents = first..end;
    *next = end;
    if first == end {
        return Ok(false);
    }
    let (base, threads) = (store.len(), w.threads());
    store.prepare_shared(first..end)?;
    let Some((view, mut resolver)) = store.shared_split() else {
        unreachable!("parallel chunks are taken only with a shared index")
    };
    chunk.table.clear();
    chunk.new.clear();
    chunk.vias.clear();
    let mut head = first;
    w.expand(model, view, |parts, last| {
        let resolver = resolver.as_deref_mut();
        chunk.number(parts, last, base, &mut head, run, levels, resolver)
    })?;
    drop(resolver);
    store.shared_done(&mut w.rebuilt())?;
    // The threads have stopped reading the store: it takes back the blocks they read
    // themselves; then the new vectors go in, in id order, and are indexed on every thread.
    store.adopt_reads(w.readers())?;
    let parts = w.parts();
    let looked_up = parts.iter().map(|p| p.labels.len() as u64).sum();
    let new = |i: usize| {
        let (k, c) = chunk.new[i];
        let (part, c) = (parts[k as usize], c as usize);
        NewState {
            state: part.cand.get(c),
            hash: part.cand_hashes[c],
            via: chunk.vias[i],
            extra: part.cand_extra.get(c),
        }
    };
    store.add_new(chunk.new.len(), &new, threads, looked_up)?;
    Ok(true)
}

/// The calling thread's numbering of a chunk with a shared index: the chunk's new states in
/// id order, as (part, candidate), with their search-tree edges, and a table of them by
/// vector.
#[derive(Default)]
struct Chunk {
    table: ChunkTable,
    new: Vec<(u32, u32)>,
    vias: Vec<Via>,
}

/// The chunk's new states by vector hash, for the numbering thread to find a candidate's
/// equal from an earlier part: open addressing over `u64` words, each the upper half of the
/// hash (the *tag*, which also places it) over `1 +` the state's index in [`Chunk::new`]
/// (its id is `base +` that index); `0` is empty. One cache line answers a probe, the tag
/// spares most compares with another part's vector (which the other core wrote), and the
/// home slot of a candidate a few ahead can be prefetched. A `hashbrown` table of `(part,
/// candidate)` read a control line and a bucket line per probe and compared every
/// candidate whose 7-bit tag matched: on two threads the numbering was 9% of the samples on
/// Kanban-PT-00005 (3.6% on one), mostly those misses.
#[derive(Default)]
struct ChunkTable {
    slots: Vec<u64>,
    len: usize,
}

/// Candidates ahead of the one being numbered whose home slots are prefetched.
const CHUNK_AHEAD: usize = 8;

impl ChunkTable {
    fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// The home slot of tag `tag` in a table of `cap` slots (a power of two).
    #[inline(always)]
    fn home(tag: u32, cap: usize) -> usize {
        ((tag as u64 * cap as u64) >> 32) as usize
    }

    #[inline(always)]
    fn prefetch(&self, h: u64) {
        if !self.slots.is_empty() {
            let at = Self::home((h >> 32) as u32, self.slots.len());
            crate::sys::prefetch(&self.slots[at] as *const u64 as *const u8);
        }
    }

    /// The index of the state of hash `h` that `same` accepts, or `None` after inserting
    /// `next` (the index the state will take) for it.
    #[inline(always)]
    fn find_or_insert(
        &mut self,
        h: u64,
        next: usize,
        same: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        match self.probe(h, same) {
            Ok(j) => Some(j),
            Err(at) => {
                self.slots[at] = (h >> 32) << 32 | (next as u64 + 1);
                self.len += 1;
                None
            }
        }
    }

    /// The index of the state of hash `h` that `same` accepts.
    #[inline(always)]
    fn find(&self, h: u64, same: impl Fn(usize) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        self.probe(h, same).ok()
    }

    /// The index of the state of hash `h` that `same` accepts, or the empty slot where the
    /// probe ended (the table is not empty, and never full).
    #[inline(always)]
    fn probe(&self, h: u64, same: impl Fn(usize) -> bool) -> Result<usize, usize> {
        let tag = (h >> 32) as u32;
        let mask = self.slots.len() - 1;
        let mut at = Self::home(tag, self.slots.len());
        loop {
            let e = self.slots[at];
            if e == 0 {
                return Err(at);
            }
            if (e >> 32) as u32 == tag && same((e as u32 - 1) as usize) {
                return Ok((e as u32 - 1) as usize);
            }
            at = (at + 1) & mask;
        }
    }

    /// Doubles the table (4,096 slots at first), placing the entries again by their tags.
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(4096);
        let old = std::mem::replace(&mut self.slots, vec![0; cap]);
        for e in old.into_iter().filter(|&e| e != 0) {
            let mut at = Self::home((e >> 32) as u32, cap);
            while self.slots[at] != 0 {
                at = (at + 1) & (cap - 1);
            }
            self.slots[at] = e;
        }
    }
}

impl Chunk {
    fn ram_bytes(&self) -> u64 {
        (self.table.slots.capacity() * 8
            + self.new.capacity() * 8
            + self.vias.capacity() * std::mem::size_of::<Via>()) as u64
    }

    /// Numbers the last of `parts` (the others are numbered), parent by parent from `head`,
    /// and writes its edges: a candidate equal to one of an earlier part (found in the
    /// chunk's table) has that one's id, any other is new and gets the next id after `base`
    /// and the chunk's earlier new states. This thread only touches the chunk's own table;
    /// the cache misses of the big index are the expanding threads'. `final_part`: no part
    /// follows in the chunk, so its new states need not be tabled (on one thread, a chunk
    /// is one part and has no table at all).
    #[allow(clippy::too_many_arguments)]
    fn number(
        &mut self,
        parts: &mut [MutexGuard<'_, Part>],
        final_part: bool,
        base: u64,
        head: &mut u64,
        run: &mut Run,
        levels: &mut Levels,
        mut resolver: Option<&mut (dyn Resolver + '_)>,
    ) -> Result<(), ExploreError> {
        let (earlier, last) = parts.split_at_mut(parts.len() - 1);
        let k = earlier.len();
        let Part {
            counts,
            cand_counts,
            labels,
            known,
            cand,
            cand_hashes,
            ids,
            undecided,
            cand_extra,
            by_extra,
            ..
        } = &mut *last[0];
        let by_extra = *by_extra;
        // A part's candidates are distinct vectors: a match in the table is an earlier part's.
        let new = &mut self.new;
        let table = &mut self.table;
        let vias = &mut self.vias;
        let ahead = if k == 0 && final_part { 0 } else { CHUNK_AHEAD };
        for h in cand_hashes.iter().take(ahead) {
            table.prefetch(*h);
        }
        // The id of the part's candidate `c` (of parent `parent`): the stored state's that
        // the store's resolver finds for an undecided one, an earlier part's equal's, or the
        // next one.
        let mut next_undecided = 0;
        let mut resolve = |c: usize, levels: &mut Levels, parent: u64| {
            if let Some(&h) = cand_hashes.get(c + ahead).filter(|_| ahead > 0) {
                table.prefetch(h);
            }
            let (s, h) = (cand.get(c), cand_hashes[c]);
            if undecided.get(next_undecided) == Some(&(c as u32)) {
                next_undecided += 1;
                let Some(r) = resolver.as_deref_mut() else {
                    return Err(ExploreError::Store(StoreError::Invalid {
                        store: "parallel BFS",
                        message: "an undecided lookup and no resolver".into(),
                    }));
                };
                if let Some(id) = r.resolve(s, h)? {
                    return Ok(id);
                }
            }
            // One probe finds an earlier part's equal or the empty slot for it.
            let same = |j: usize| {
                let (q, m) = new[j];
                q as usize != k
                    && if by_extra {
                        earlier[q as usize].cand_extra.get(m as usize) == cand_extra.get(c)
                    } else {
                        eq_bytes(earlier[q as usize].cand.get(m as usize), s)
                    }
            };
            let found = match (k, final_part) {
                (0, true) => None,
                (_, true) => table.find(h, same),
                _ => table.find_or_insert(h, new.len(), same),
            };
            Ok(match found {
                Some(j) => base + j as u64,
                None => {
                    // The open set is the id range: nothing to queue.
                    let id = base + new.len() as u64;
                    if let Some(r) = resolver.as_deref_mut() {
                        r.numbered(cand_extra.get(c))?;
                    }
                    new.push((k as u32, c as u32));
                    vias.push(Via {
                        parent,
                        transition: cand.transition(c),
                        depth: levels.depth + 1,
                    });
                    levels.next_level += 1;
                    id
                }
            })
        };
        if !run.sink.wants_edges() {
            // Only counted: the candidates are numbered, parent by parent (a level may end
            // inside the part), and the other successors' ids are never looked at.
            let mut c = 0;
            for (&count, &n) in counts.iter().zip(cand_counts.iter()) {
                levels.take(run);
                for _ in 0..n {
                    let id = resolve(c, levels, *head)?;
                    ids.push(id);
                    c += 1;
                }
                if count == 0 {
                    run.deadlocks += 1;
                }
                *head += 1;
            }
            run.transitions += labels.len() as u64;
            return Ok(());
        }
        let (mut at, mut c) = (0usize, 0usize);
        for &count in counts.iter() {
            levels.take(run);
            for i in at..at + count as usize {
                let id = match known[i] {
                    CANDIDATE => {
                        let id = resolve(c, levels, *head)?;
                        ids.push(id);
                        c += 1;
                        id
                    }
                    same if same & SAME != 0 => ids[(same & !SAME) as usize],
                    known => known,
                };
                run.edge(*head, labels[i], id)?;
            }
            if count == 0 {
                run.deadlocks += 1;
            }
            at += count as usize;
            *head += 1;
        }
        Ok(())
    }
}

/// The successors collected since the last resolution: their vectors and labels, their
/// parents in order (each with its number of successors in the batch), and the store's
/// answers.
#[derive(Default)]
struct Pending {
    batch: StateBatch,
    labels: Vec<LabelId>,
    parents: Vec<(u64, u32)>,
    results: Vec<Insert>,
}

impl Pending {
    /// Resolves a delayed batch: the store numbers the successors (in order, as one by
    /// one), and their edges are written parent by parent; the batch is emptied.
    fn resolve(
        &mut self,
        store: &mut dyn StateStore,
        run: &mut Run,
        lv: &mut Levels,
        open: &mut Open,
        rec: &mut Vec<u8>,
    ) -> Result<(), ExploreError> {
        store.insert_many(&self.parents, lv.depth, &self.batch, &mut self.results)?;
        let mut i = 0;
        for &(parent, count) in &self.parents {
            for _ in 0..count {
                let id = match self.results[i] {
                    Insert::New(id) => {
                        lv.next_level += 1;
                        open.push(id, self.batch.get(i), rec)?;
                        id
                    }
                    Insert::Seen(id) => id,
                };
                run.edge(parent, self.labels[i], id)?;
                i += 1;
            }
        }
        self.parents.clear();
        self.batch.clear();
        self.labels.clear();
        Ok(())
    }
}

/// Name of the BFS open queue's files.
const OPEN: &str = "bfs.open";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreError;
    use crate::model::{petri, Source};
    use crate::storage::{SegOptions, SpillPolicy, Storage, StorageConfig};
    use crate::store::full::FullStore;
    use crate::store::{Exactness, Via};

    /// The chunk table finds each state by its index among states whose hashes share a tag
    /// (and so a probe run), across its growth; an absent one is inserted once.
    #[test]
    fn chunk_table_finds_equals_among_equal_tags() {
        let mut t = ChunkTable::default();
        // 3 tags for 20,000 states: long probe runs, every compare decided by `same`.
        let hash = |v: u64| (v % 3) << 40 | v;
        let mut keys = Vec::new();
        for v in 0..20_000u64 {
            let same = |j: usize| keys[j] == v;
            assert_eq!(t.find(hash(v), same), None);
            assert_eq!(t.find_or_insert(hash(v), keys.len(), same), None);
            keys.push(v);
        }
        for (i, &v) in keys.iter().enumerate().rev() {
            let same = |j: usize| keys[j] == v;
            assert_eq!(t.find(hash(v), same), Some(i));
            assert_eq!(t.find_or_insert(hash(v), keys.len(), same), Some(i));
        }
        assert_eq!(t.len, keys.len());
        assert!(t.slots.len() >= 2 * keys.len());
        t.clear();
        assert_eq!(t.find(hash(5), |_| true), None);
    }

    /// A full store that hides its state vectors, so BFS must keep its own open queue.
    struct NoVectors(FullStore);

    impl StateStore for NoVectors {
        fn name(&self) -> &'static str {
            "no-vectors"
        }
        fn insert(&mut self, state: &[u8], via: Option<Via>) -> Result<Insert, StoreError> {
            self.0.insert(state, via)
        }
        fn len(&self) -> u64 {
            self.0.len()
        }
        fn states_back(&self) -> crate::store::StatesBack {
            crate::store::StatesBack::No
        }
        fn exactness(&self) -> Exactness {
            Exactness::Exact
        }
        fn ram_bytes(&self) -> u64 {
            0
        }
    }

    #[test]
    fn open_queue_in_ram_and_spilled_give_reference_counts() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models/Philosophers-PT-000005.pnml");
        let Source::Pnml(net) = Source::read(&path).unwrap() else {
            panic!("a P/T net")
        };
        let model = petri::build(net, 8).unwrap();
        let cfg = StorageConfig {
            spill: SpillPolicy::Always,
            segments: SegOptions {
                block_bytes: 64,
                hot_blocks: 1,
                cache_bytes: 64,
                ..SegOptions::default()
            },
            ..StorageConfig::default()
        };
        let storage = Storage::new(&cfg).unwrap();
        let mut depths = Vec::new();
        for st in [None, Some(&storage)] {
            let mut store = NoVectors(FullStore::new(model.state_len()));
            let opts = EngineOptions {
                progress: false,
                threads: 1,
            };
            let session = Session {
                storage: st,
                ..Session::default()
            };
            let s = explore(
                model.as_ref(),
                &mut store,
                &mut crate::lts::NullSink,
                &opts,
                session,
            )
            .unwrap();
            assert_eq!((s.states, s.transitions), (243, 945));
            depths.push(s.max_depth);
        }
        assert_eq!(
            depths[0], depths[1],
            "same BFS levels with the queue in RAM or spilled"
        );
        let q = storage.budget.usage();
        let open = q
            .iter()
            .find(|u| u.name == "bfs.open")
            .expect("queue accounted");
        assert!(
            open.raw_bytes > 0,
            "the spilled queue sealed blocks: {open:?}"
        );
    }
}
