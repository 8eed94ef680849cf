//! Parallel BFS (`--threads N`) for a store with a shared index (docs/ARCHITECTURE.md,
//! "Parallel BFS").
//!
//! The BFS loop hands a chunk of consecutive parents (in the order a one-thread BFS expands
//! them) to N threads. The chunk is cut into [`SPLIT`] × N contiguous *parts*, shorter
//! towards its end ([`part_start`]); a thread
//! claims the next unclaimed part, generates its parents' successors with its own copy of
//! the model ([`Model::fork`]) and looks every successor up in the store's read-only view
//! ([`StateStore::shared_index`](crate::store::StateStore::shared_index)). A successor
//! found there was stored before the chunk began, so its id is the one a sequential BFS
//! finds; the others are *candidates*, each vector once per part. The store is not changed
//! while the threads run (they hold it borrowed immutably).
//!
//! The calling thread numbers the parts in order, each as soon as it is complete and
//! expands parts itself when the next one to number is not ready: the numbering of part k
//! overlaps the expansion of the parts after it, so only the last part's numbering is left
//! when the threads finish. It numbers, parent by parent, the candidates that no earlier
//! part had: new ids are handed out by one thread in sequential order, so the numbering, the
//! counts and the LTS file do not depend on N or on the scheduling. The new states' vectors
//! reach the store only after the threads have stopped reading it.

use crate::error::ExploreError;
use crate::model::{LabelId, Model};
use crate::par::{self, THREAD_BYTES};
use crate::storage::vec::SegReader;
use crate::store::full::{eq_bytes, SharedVectors, Vectors};
use crate::store::path::{Rebuilt, Scratch};
use crate::store::{tree, Extra, Found, Lookup, SharedIndex, StateBatch};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// `known[i]` of a successor that was not found in the shared index, the first of its part
/// with that vector: the next entry of `cand`.
pub(super) const CANDIDATE: u64 = u64::MAX;
/// `known[i] = SAME | m`: the successor equals the part's candidate `m`, met earlier in the
/// part (a diamond inside the chunk); it gets the id that candidate gets.
pub(super) const SAME: u64 = 1 << 63;

/// Parents whose successors are looked up together: enough misses in flight to cover the
/// memory latency, few enough that their slots stay in L1.
const GROUP: usize = 8;

/// Bytes of successor vectors a chunk takes per thread: large enough that starting the
/// threads costs little against the work (a few milliseconds per chunk), small enough that
/// a part stays in cache. Under a budget, less (see [`Workers::new`]).
const PART_BYTES: usize = 2 << 20;

/// [`PART_BYTES`] for a store that asks for small chunks
/// ([`StateStore::small_chunks`](crate::store::StateStore::small_chunks)).
const SMALL_PART_BYTES: usize = 512 << 10;

/// [`Workers::expected_bytes`] of `threads` threads taking `part_bytes` each (and
/// [`THREAD_BYTES`] for each thread but the main one).
fn expected_bytes(part_bytes: usize, threads: usize) -> u64 {
    2 * (part_bytes * threads) as u64 + THREAD_BYTES * (threads as u64 - 1)
}

/// Bytes of successor vectors each of `threads` threads takes under `budget` (the run's
/// memory limit, if any): `most` ([`PART_BYTES`] or [`SMALL_PART_BYTES`]), or 1/64 of the
/// budget shared by the threads (at least 64 KiB each).
fn part_bytes(budget: Option<u64>, threads: usize, most: usize) -> usize {
    budget.map_or(most, |b| {
        (b / 64 / threads as u64).clamp(64 << 10, most as u64) as usize
    })
}

/// The most threads, up to `threads` and at least one, whose buffers
/// ([`expected_bytes`]) take at most 1/16 of `budget`.
fn threads_within_budget(threads: usize, budget: Option<u64>) -> usize {
    let mut threads = threads.max(1);
    if let Some(b) = budget {
        while threads > 1
            && expected_bytes(part_bytes(budget, threads, PART_BYTES), threads) > b / 16
        {
            threads -= 1;
        }
    }
    threads
}

/// Successors per parent (at least one) of `(parents, successors)` expanded so far; `None`
/// before any parent was.
fn fanout((parents, succs): (u64, u64)) -> Option<usize> {
    succs.checked_div(parents).map(|f| f.max(1) as usize)
}

/// What a thread found for one part of a chunk, in parent order.
#[derive(Default)]
pub(super) struct Part {
    /// Successors per parent, and candidates per parent.
    pub counts: Vec<u32>,
    pub cand_counts: Vec<u32>,
    /// Per successor: its label, and its id if it was found in the shared index, else
    /// [`CANDIDATE`] or [`SAME`].
    pub labels: Vec<LabelId>,
    pub known: Vec<u64>,
    /// The candidates' transitions and vectors, in order, each vector once.
    pub cand: StateBatch,
    /// The candidates' hashes, and a table of them by vector.
    pub cand_hashes: Vec<u64>,
    table: hashbrown::HashTable<u32>,
    /// The ids the candidates got (the numbering thread's).
    pub ids: Vec<u64>,
    /// The candidates the shared index left [`Found::Undecided`], in order (the numbering
    /// thread asks the store's resolver about them).
    pub undecided: Vec<u32>,
    /// Why a parent of the part could not be expanded (the model failed, or its vector
    /// or a compared one could not be read back).
    error: Option<ExploreError>,
    /// What the shared index handed on for each candidate (or nothing).
    pub cand_extra: Extra,
    /// The scratch of a store that rebuilds states to compare them (ComBack); what it
    /// rebuilt is handed to the store after the chunk ([`Workers::rebuilt`]).
    scratch: Scratch,
    /// The candidates are told apart by their `cand_extra` words, and `cand` holds no
    /// vectors ([`Lookup::EXTRA_NAMES_STATE`]).
    pub by_extra: bool,
}

/// A thread's buffers for one group of parents at a time, whichever part it fills: per
/// thread rather than per part (8 parts a thread), since a group's successors are gone
/// once its candidates are in the part (SharedMemory-PT-000010, tree store, two threads:
/// 2.3 MiB of a 32 MiB peak).
#[derive(Default)]
struct Group {
    /// The group's successors and their hashes.
    tmp: StateBatch,
    hashes: Vec<u64>,
    /// What the shared index answered for each successor, and what it handed on for them.
    found: Vec<Found>,
    extra: Extra,
    /// The tree store's parent trees and fold buffers.
    tree: tree::Reader,
}

impl Group {
    fn ram_bytes(&self) -> u64 {
        (self.hashes.capacity() * 8
            + self.found.capacity() * std::mem::size_of::<Found>()
            + self.tmp.ram_bytes()) as u64
            + self.extra.ram_bytes()
            + self.tree.ram_bytes()
    }
}

impl Part {
    /// RAM the part's buffers hold.
    fn ram_bytes(&self) -> u64 {
        ((self.counts.capacity() + self.cand_counts.capacity()) * 4
            + self.labels.capacity() * std::mem::size_of::<LabelId>()
            + (self.known.capacity() + self.cand_hashes.capacity() + self.ids.capacity()) * 8
            + self.undecided.capacity() * 4
            + self.table.capacity() * 5
            + self.cand.ram_bytes()) as u64
            + self.scratch.ram_bytes()
            + self.cand_extra.ram_bytes()
    }

    fn clear(&mut self) {
        self.counts.clear();
        self.cand_counts.clear();
        self.labels.clear();
        self.known.clear();
        self.cand.clear();
        self.cand_hashes.clear();
        self.cand_extra.clear();
        self.table.clear();
        self.ids.clear();
        self.undecided.clear();
        self.error = None;
    }

    /// Expands the parents (state ids) `parents`; `reader` reads vectors from segment files,
    /// `g` holds a group's successors (both the thread's).
    fn fill(
        &mut self,
        model: &dyn Model,
        view: SharedIndex<'_>,
        reader: &mut SegReader,
        g: &mut Group,
        parents: Range<u64>,
    ) -> Result<(), ExploreError> {
        // One dispatch per part: the RAM path's loop stays free of the reader.
        match view {
            SharedIndex::Ram(v) => self.fill_with(model, &v, &mut (), g, parents),
            SharedIndex::Seg(v) => self.fill_with(model, &v, reader, g, parents),
            SharedIndex::Comback(v) => self.fill_with(model, &v, reader, g, parents),
            SharedIndex::Tree(v) => {
                // Taken out of the group's buffers while they are lent with it.
                let mut tr = std::mem::take(&mut g.tree);
                let r = self.fill_with(model, &v, &mut tr, g, parents);
                g.tree = tr;
                r
            }
        }
    }

    fn fill_with<L: Lookup>(
        &mut self,
        model: &dyn Model,
        view: &L,
        r: &mut L::Reader,
        g: &mut Group,
        parents: Range<u64>,
    ) -> Result<(), ExploreError> {
        self.clear();
        let mut start = parents.start;
        while start < parents.end {
            let group = start..(start + GROUP as u64).min(parents.end);
            let group_len = (group.end - group.start) as usize;
            start = group.end;
            g.tmp.clear();
            for parent in group {
                let before = self.labels.len();
                let (tmp, labels) = (&mut g.tmp, &mut self.labels);
                view.with_parent(r, parent, |s| {
                    model.successors(s, &mut |t, label, succ| {
                        tmp.push(t, succ);
                        labels.push(label);
                    })
                })??;
                self.counts.push((self.labels.len() - before) as u32);
            }
            let group_counts = &self.counts[self.counts.len() - group_len..];
            g.hashes.clear();
            g.found.clear();
            g.extra.clear();
            view.find_group(
                r,
                model,
                &mut self.scratch,
                &g.tmp,
                group_counts,
                &mut g.hashes,
                &mut g.found,
                &mut g.extra,
            )?;
            let (cand, hashes, table) = (&mut self.cand, &mut self.cand_hashes, &mut self.table);
            let (extra, cand_extra) = (&g.extra, &mut self.cand_extra);
            let by_extra = L::EXTRA_NAMES_STATE;
            self.by_extra = by_extra;
            let mut i = 0;
            for &count in group_counts {
                let before = cand.len();
                for i in i..i + count as usize {
                    let (s, h, found) = (g.tmp.get(i), g.hashes[i], g.found[i]);
                    let same = |m: u32| {
                        if by_extra {
                            cand_extra.get(m as usize) == extra.get(i)
                        } else {
                            eq_bytes(cand.get(m as usize), s)
                        }
                    };
                    if let Found::Stored(id) = found {
                        self.known.push(id);
                    } else if let Some(&m) = table.find(h, |&m| same(m)) {
                        // Equal vectors: an undecided `m` is settled for both.
                        self.known.push(SAME | m as u64);
                    } else {
                        if found == Found::Undecided {
                            self.undecided.push(cand.len() as u32);
                        }
                        table.insert_unique(h, cand.len() as u32, |&m| hashes[m as usize]);
                        hashes.push(h);
                        if !extra.ends.is_empty() {
                            cand_extra.push(extra.get(i));
                        }
                        cand.push(g.tmp.transition(i), if by_extra { &[] } else { s });
                        self.known.push(CANDIDATE);
                    }
                }
                i += count as usize;
                self.cand_counts.push((cand.len() - before) as u32);
            }
        }
        Ok(())
    }
}

/// Parts per thread in a chunk: enough that the numbering thread, which also expands,
/// rarely waits for the part it must number next, and that only a small last part is
/// numbered after the others finish; few enough that a part's overhead stays small.
const SPLIT: usize = 8;

/// Where part `k` of `n` starts among a chunk's `len` parents: part `j` takes a share
/// `3n - 2j` of them (the first about three times the last), so that the parts claimed
/// last, which one thread may still be filling when the other has nothing left, are short.
fn part_start(k: usize, n: u64, len: u64) -> u64 {
    let k = k as u64;
    let below = |k: u64| 3 * n * k - k * k.saturating_sub(1);
    (len as u128 * below(k) as u128 / below(n) as u128) as u64
}

/// Chunks of fewer parents are expanded as one part on the calling thread. A chain of
/// 3,964,928 states (levels of one state, a DVE model) took 53.8 s with two threads
/// against 14.8 s with one when every chunk was cut into 16 parts and handed to the workers.
const SOLO_PARENTS: u64 = 64;

/// A part and whether its expansion is complete (set by whichever thread filled it).
#[derive(Default)]
struct Slot {
    part: Mutex<Part>,
    done: AtomicBool,
}

/// Marks a part done when its expansion ends, even by a panic: the numbering thread must
/// not wait for it forever (it finds the lock poisoned and stops; the scope then passes the
/// panic on).
struct Done<'a>(&'a AtomicBool);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Waits until another thread has completed a part.
fn wait(done: &AtomicBool) {
    let mut spins = 0u32;
    while !done.load(Ordering::Acquire) {
        if spins < 100 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            // More threads than cores (`--threads 4` on two): let the one we wait for run.
            std::thread::yield_now();
        }
    }
}

/// The forked models and the per-part buffers.
pub(super) struct Workers {
    forks: Vec<Box<dyn Model + Send>>,
    slots: Vec<Slot>,
    /// The parts the last chunk was cut into: all of `slots`, or the first alone for a
    /// chunk of fewer than [`SOLO_PARENTS`] parents. The others hold an older chunk's.
    used: usize,
    /// The chunk's parents: consecutive ids of the open set, in BFS order.
    pub parents: Range<u64>,
    /// Parents expanded and successors found so far, to size the chunks.
    seen: (u64, u64),
    /// Bytes of a state vector (a guess for variable-width models).
    width: usize,
    /// Bytes of successor vectors a chunk takes per thread.
    part_bytes: usize,
    /// Each thread's reader of vectors in segment files and its group buffers (the
    /// calling thread's first).
    readers: Vec<SegReader>,
    groups: Vec<Group>,
}

impl Workers {
    /// Workers for `threads` threads (the calling one included), fewer if the model cannot
    /// be forked (then the calling thread alone: the chunked path with its grouped lookups
    /// is faster than the one-parent-at-a-time loop even on one thread).
    ///
    /// `budget`: the run's memory limit, if any. The chunk's buffers then take at most a
    /// sixteenth of it ([`Workers::ram_bytes`] says how much they hold), with fewer threads
    /// if need be: what they take, the vectors' block cache loses, and two threads reading
    /// a cache too small for both thrash it (toggles-2^21 under `--memory 20M`: 58 times the
    /// misses and twice the time of one thread).
    ///
    /// `small`: the store asks for chunks of a quarter of the size ([`SMALL_PART_BYTES`]).
    pub fn new(model: &dyn Model, threads: usize, budget: Option<u64>, small: bool) -> Workers {
        let threads = threads_within_budget(threads, budget);
        let forks: Vec<_> = (1..threads).map_while(|_| model.fork()).collect();
        let parts = if forks.is_empty() {
            1
        } else {
            SPLIT * (forks.len() + 1)
        };
        Workers {
            slots: (0..parts).map(|_| Slot::default()).collect(),
            used: 0,
            part_bytes: part_bytes(
                budget,
                forks.len() + 1,
                if small { SMALL_PART_BYTES } else { PART_BYTES },
            ),
            readers: (0..=forks.len()).map(|_| SegReader::default()).collect(),
            groups: (0..=forks.len()).map(|_| Group::default()).collect(),
            forks,
            parents: 0..0,
            seen: (0, 0),
            width: model.state_len().unwrap_or(64).max(1),
        }
    }

    /// RAM the buffers will hold once filled: a chunk's successor vectors and their
    /// per-successor arrays, and each extra thread's stack and allocator arena.
    pub fn expected_bytes(&self) -> u64 {
        expected_bytes(self.part_bytes, self.threads())
    }

    /// RAM the buffers hold now: the parts' and the readers', and what each extra thread
    /// holds beside them.
    pub fn ram_bytes(&mut self) -> u64 {
        let parts: u64 = self
            .slots
            .iter_mut()
            .map(|s| s.part.get_mut().map_or(0, |p| p.ram_bytes()))
            .sum();
        parts
            + self.readers.iter().map(SegReader::ram_bytes).sum::<u64>()
            + self.groups.iter().map(Group::ram_bytes).sum::<u64>()
            + THREAD_BYTES * self.forks.len() as u64
    }

    /// The threads' readers of vectors in segment files, to hand to
    /// [`StateStore::adopt_reads`](crate::store::StateStore::adopt_reads) after a chunk.
    pub fn readers(&mut self) -> &mut [SegReader] {
        &mut self.readers
    }

    /// Threads that expand states (the calling one included).
    pub fn threads(&self) -> usize {
        self.forks.len() + 1
    }

    /// How many parents the next chunk takes: about [`PART_BYTES`] of successor vectors per
    /// thread, judged from the chunks so far.
    pub fn chunk_parents(&self) -> usize {
        let fanout = fanout(self.seen).unwrap_or(8);
        (self.part_bytes / (fanout * self.width)).clamp(16, 16_384) * self.threads()
    }

    /// What the threads rebuilt during the last chunk (for
    /// [`StateStore::shared_done`](crate::store::StateStore::shared_done)).
    pub fn rebuilt(&mut self) -> Vec<&mut Rebuilt> {
        let parts = self.slots[..self.used].iter_mut().map(|s| s.part.get_mut());
        parts
            .map(|p| &mut p.unwrap_or_else(PoisonError::into_inner).scratch.rebuilt)
            .collect()
    }

    /// The parts of the last chunk (after [`Workers::expand`]).
    pub fn parts(&mut self) -> Vec<&Part> {
        let parts = self.slots[..self.used].iter_mut().map(|s| s.part.get_mut());
        parts
            .map(|p| &*p.unwrap_or_else(PoisonError::into_inner))
            .collect()
    }

    /// Expands the chunk's parents on every thread (`model` is the calling thread's) and
    /// calls `number` on this thread with parts `0..=k` each time part `k` is complete, in
    /// order: it numbers the last of them. Stops at the first part (in order) that the model
    /// could not expand, or at the first error of `number`.
    pub fn expand(
        &mut self,
        model: &dyn Model,
        view: SharedIndex<'_>,
        mut number: impl FnMut(&mut [MutexGuard<'_, Part>], bool) -> Result<(), ExploreError>,
    ) -> Result<(), ExploreError> {
        let (slots, first) = (&self.slots, self.parents.start);
        let len = self.parents.end - first;
        // A handful of parents (the first chunks of a level; every chunk of a narrow,
        // deep state space) is one part on this thread: waking the others and numbering
        // 16 parts would cost more than the expansion.
        let n = if len < SOLO_PARENTS { 1 } else { slots.len() };
        self.used = n;
        for slot in &slots[..n] {
            slot.done.store(false, Ordering::Relaxed);
        }
        let n64 = n as u64;
        let claim = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let fill = |k: usize, m: &dyn Model, r: &mut SegReader, g: &mut Group| {
            let _done = Done(&slots[k].done);
            let mut part = slots[k].part.lock().unwrap_or_else(PoisonError::into_inner);
            part.error = part
                .fill(
                    m,
                    view,
                    r,
                    g,
                    first + part_start(k, n64, len)..first + part_start(k + 1, n64, len),
                )
                .err();
        };
        let (reader, fork_readers) = self.readers.split_first_mut().expect("a reader per thread");
        let (group, fork_groups) = self.groups.split_first_mut().expect("buffers per thread");
        // Each helper thread's model copy, reader and group buffers (locked once per chunk,
        // never contended).
        let helpers: Vec<_> = self
            .forks
            .iter_mut()
            .zip(fork_readers.iter_mut().zip(fork_groups))
            .map(Mutex::new)
            .collect();
        let helper = |t: usize| {
            let mut h = helpers[t - 1]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (m, (r, g)) = &mut *h;
            loop {
                let k = claim.fetch_add(1, Ordering::Relaxed);
                if k >= n || stop.load(Ordering::Relaxed) {
                    break;
                }
                fill(k, &***m, r, g);
            }
        };
        let threads = if n == 1 { 1 } else { helpers.len() + 1 };
        let result = par::with_workers(threads, &helper, || {
            let mut done: Vec<MutexGuard<'_, Part>> = Vec::with_capacity(n);
            let mut result = Ok(());
            while done.len() < n {
                let k = done.len();
                if !slots[k].done.load(Ordering::Acquire) {
                    let c = claim.fetch_add(1, Ordering::Relaxed);
                    if c < n {
                        fill(c, model, reader, group);
                        continue;
                    }
                    wait(&slots[k].done);
                }
                // Poisoned: the thread that filled it panicked; the step passes it on.
                let Ok(mut part) = slots[k].part.lock() else {
                    break;
                };
                if let Some(e) = part.error.take() {
                    result = Err(e);
                    break;
                }
                done.push(part);
                let all = done.len() == n;
                result = number(&mut done, all);
                if result.is_err() {
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            result
        });
        result?;
        let succs: usize = self.slots[..n]
            .iter_mut()
            .map(|s| s.part.get_mut().map_or(0, |p| p.labels.len()))
            .sum();
        self.seen.0 += len;
        self.seen.1 += succs as u64;
        Ok(())
    }
}

/// Parents a thread of [`Expanders`] claims at a time, at most: few, so that a round stops
/// close to its bound; enough that claiming costs nothing against expanding them (fewer
/// when the room is small against the fan-out, see [`Expanders::expand`]).
const EXPAND_PIECE: usize = 16;

/// Bytes a successor takes in an [`Expanders`] round beside its vector: its end offset,
/// transition and label.
const PER_SUCCESSOR: usize = 24;

/// Parallel expansion of a delayed batch's parents once the store's index has spilled
/// (`--threads`, docs/ARCHITECTURE.md "Parallel BFS"). The parents are consecutive ids of
/// the open set, read through [`StateStore::shared_vectors`](crate::store::StateStore::shared_vectors);
/// each thread expands pieces of up to [`EXPAND_PIECE`] parents with its own copy of the model
/// into its own buffers, and the calling thread appends the pieces to the delayed batch in
/// parent order: the batch is the one the one-parent loop would have collected, so its
/// resolution, the numbering and the LTS do not depend on the threads.
pub(super) struct Expanders {
    shares: Vec<Expander>,
    /// Successors a round may take, all threads together (bounds the buffers).
    round: usize,
    /// Bytes of successor vectors a round takes per thread.
    part_bytes: usize,
    /// Parents expanded and successors found so far, to size the pieces.
    seen: (u64, u64),
}

/// One thread's model copy, vector reader and buffers.
struct Expander {
    reader: SegReader,
    out: Expanded,
}

/// What a thread expanded in a round: per piece `(first parent, end parent, first count,
/// first successor)` (offsets from the round's first parent), the successor counts, the
/// successors and their labels.
struct Expanded {
    model: Box<dyn Model + Send>,
    pieces: Vec<(usize, usize, usize, usize)>,
    counts: Vec<u32>,
    labels: Vec<LabelId>,
    batch: StateBatch,
}

impl Expanded {
    fn clear(&mut self) {
        self.pieces.clear();
        self.counts.clear();
        self.labels.clear();
        self.batch.clear();
    }

    /// Expands the parents `first + piece`; returns their successors.
    fn fill<V: Vectors>(
        &mut self,
        v: &V,
        r: &mut V::Reader,
        first: u64,
        piece: Range<usize>,
    ) -> Result<usize, ExploreError> {
        let (counts_at, at) = (self.counts.len(), self.batch.len());
        let Expanded {
            model,
            counts,
            labels,
            batch,
            ..
        } = self;
        for k in piece.clone() {
            let before = batch.len();
            v.with(r, first + k as u64, |s| {
                model.successors(s, &mut |t, label, succ| {
                    batch.push(t, succ);
                    labels.push(label);
                })
            })??;
            counts.push((batch.len() - before) as u32);
        }
        self.pieces.push((piece.start, piece.end, counts_at, at));
        Ok(self.batch.len() - at)
    }
}

impl Expanders {
    /// Expanders for `threads` threads (the calling one included) whose buffers take at
    /// most a sixteenth of `budget` (the run's memory limit, if any), as [`Workers::new`]
    /// sizes a chunk's; `None` when fewer than two threads would run or the model cannot
    /// be copied.
    pub fn new(model: &dyn Model, threads: usize, budget: Option<u64>) -> Option<Expanders> {
        let threads = threads_within_budget(threads, budget);
        let forks: Vec<_> = (0..threads).map_while(|_| model.fork()).collect();
        if forks.len() < 2 {
            return None;
        }
        let part_bytes = part_bytes(budget, forks.len(), PART_BYTES);
        let width = model.state_len().unwrap_or(64);
        Some(Expanders {
            round: (part_bytes * forks.len() / (width + PER_SUCCESSOR)).max(EXPAND_PIECE),
            part_bytes,
            seen: (0, 0),
            shares: forks
                .into_iter()
                .map(|model| Expander {
                    reader: SegReader::default(),
                    out: Expanded {
                        model,
                        pieces: Vec::new(),
                        counts: Vec::new(),
                        labels: Vec::new(),
                        batch: StateBatch::default(),
                    },
                })
                .collect(),
        })
    }

    pub fn threads(&self) -> usize {
        self.shares.len()
    }

    /// RAM the buffers will hold once filled (as [`Workers::expected_bytes`]).
    pub fn expected_bytes(&self) -> u64 {
        expected_bytes(self.part_bytes, self.threads())
    }

    /// RAM the buffers and readers hold now, and what each extra thread holds beside them.
    pub fn ram_bytes(&self) -> u64 {
        let held: usize = self
            .shares
            .iter()
            .map(|s| {
                let o = &s.out;
                o.batch.ram_bytes()
                    + o.counts.capacity() * 4
                    + o.labels.capacity() * std::mem::size_of::<LabelId>()
                    + o.pieces.capacity() * 32
            })
            .sum();
        let readers: u64 = self.shares.iter().map(|s| s.reader.ram_bytes()).sum();
        held as u64 + readers + THREAD_BYTES * (self.threads() as u64 - 1)
    }

    /// Expands the parents `ids` on every thread until about `room` (at most one round of)
    /// successors were found, and appends them in parent order to `batch`, `labels` and
    /// `parents` (each parent with its number of successors), as the one-parent loop does.
    /// Returns how many parents were expanded: a prefix of `ids`, at least one parent when
    /// `ids` is not empty.
    pub fn expand(
        &mut self,
        vectors: SharedVectors<'_>,
        ids: Range<u64>,
        room: usize,
        batch: &mut StateBatch,
        labels: &mut Vec<LabelId>,
        parents: &mut Vec<(u64, u32)>,
    ) -> Result<u64, ExploreError> {
        let room = room.clamp(1, self.round);
        let batch_before = batch.len();
        let (first, n) = (
            ids.start,
            (ids.end - ids.start).min(u32::MAX as u64) as usize,
        );
        // Every thread may finish one piece past `room`, and the batch must stay within
        // what the store's window takes (four times the room): pieces of at most a quarter
        // of the room shared by the threads, judged by the fan-out so far (with pieces of
        // 16, a net with 314 successors a parent overflowed a window of 4,096 slots).
        // Before any fan-out is known, one parent at a time.
        let fanout = fanout(self.seen).unwrap_or(usize::MAX);
        let piece = (room / (4 * self.threads()).saturating_mul(fanout)).clamp(1, EXPAND_PIECE);
        let found = AtomicUsize::new(0);
        let more = || found.load(Ordering::Relaxed) < room;
        let done = match vectors {
            SharedVectors::Ram(v) => {
                par::pieces_while(&mut self.shares, n, piece, more, |sh, p| {
                    let got = sh.out.fill(&v, &mut (), first, p)?;
                    found.fetch_add(got, Ordering::Relaxed);
                    Ok::<_, ExploreError>(())
                })
            }
            SharedVectors::Seg(v) => {
                par::pieces_while(&mut self.shares, n, piece, more, |sh, p| {
                    let got = sh.out.fill(&v, &mut sh.reader, first, p)?;
                    found.fetch_add(got, Ordering::Relaxed);
                    Ok::<_, ExploreError>(())
                })
            }
        };
        // Parents are read in id order once: their blocks are not worth caching.
        let mut pieces = Vec::new();
        for (t, sh) in self.shares.iter_mut().enumerate() {
            sh.reader.forget();
            pieces.extend(sh.out.pieces.iter().map(|&p| (p, t)));
        }
        let r = done.map(|done| {
            pieces.sort_unstable_by_key(|&((start, ..), _)| start);
            for &((start, end, counts_at, at), t) in &pieces {
                let o = &self.shares[t].out;
                let counts = &o.counts[counts_at..counts_at + (end - start)];
                let succs = counts.iter().map(|&c| c as usize).sum::<usize>();
                batch.extend_from(&o.batch, at..at + succs);
                labels.extend_from_slice(&o.labels[at..at + succs]);
                for (k, &c) in counts.iter().enumerate() {
                    parents.push((first + (start + k) as u64, c));
                }
            }
            done as u64
        });
        for sh in &mut self.shares {
            sh.out.clear();
        }
        if let Ok(done) = r {
            self.seen.0 += done;
            self.seen.1 += (batch.len() - batch_before) as u64;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::part_start;

    #[test]
    fn parts_cover_the_chunk_and_shrink_towards_its_end() {
        for n in [1u64, 2, 16, 32] {
            for len in [0u64, 1, 7, 16, 100, 3_000, 16_384 * 4] {
                assert_eq!(part_start(0, n, len), 0);
                assert_eq!(part_start(n as usize, n, len), len);
                let sizes: Vec<u64> = (0..n as usize)
                    .map(|k| part_start(k + 1, n, len) - part_start(k, n, len))
                    .collect();
                assert_eq!(sizes.iter().sum::<u64>(), len);
                if len >= 100 * n {
                    // Shorter towards the end; with the 8 parts a thread or more that a
                    // chunk has, the last under half the first ((n + 2) / 3n).
                    assert!(
                        sizes.windows(2).all(|w| w[1] <= w[0]),
                        "{n} {len} {sizes:?}"
                    );
                    assert!(n < 8 || sizes[n as usize - 1] * 2 < sizes[0], "{sizes:?}");
                }
            }
        }
    }
}
