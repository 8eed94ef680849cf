//! ComBack: exact hash compaction with a backedge table (Westergaard, Kristensen, Brodal,
//! Arge, "The ComBack Method – Extending Hash Compaction with Backtracking", 2007).
//!
//! Each new state gets the next number `N`. The [`table::StateTable`] maps the state's
//! *descriptor* (the top `b` bits of its stable hash, `--hash-bits b`) to a collision list of
//! state numbers, 6 bytes per slot in RAM. The [`backedge::BackedgeTable`] maps `N` to
//! (parent number, transition, depth), the search-tree edge that reached it, and keeps the
//! descriptors in a second, sequentially read file. To
//! decide whether a successor `s'` is new, every state `n` in the collision list of `H(s')`
//! is *reconstructed* by replaying transitions from the initial state along the backedges
//! and compared with `s'` as a full vector: the answer is exact whatever `b` is.
//!
//! The paper's variants, each selectable ([`CombackOptions`]):
//! 1. **path optimisation** ([`PathOptimisation`]): when a state already seen is reached by
//!    a shorter path, its backedge is repointed (depth is stored in the record), so later
//!    replays are shorter. BFS always finds the shortest path first, so this matters in DFS.
//! 2. **full-state cache** (`--comback-cache N`, [`cache::Cache`]): `N` state vectors in two
//!    direct-mapped regions (newest states; states rebuilt by replays and their ancestors).
//!    A candidate in the cache is compared without a replay; a replay starts from the nearest
//!    cached ancestor. **Move-to-front** ([`MoveToFront`]): a matched state moves to the front
//!    of its collision list.
//! 3. **backward reconstruction** ([`Reconstruction::Backward`]): the candidate's backedge
//!    path is *unfired* starting from `s'` itself; the walk stops at the first transition that
//!    cannot be unfired (a negative token count: `s'` is not that state) and otherwise compares
//!    with the nearest cached ancestor or the initial state. Needs `Model::unfire` (P/T nets);
//!    other models fall back to forward replay.
//! 4. **compact waiting set** ([`WaitingSet::StateNumbers`]): the store answers
//!    `StateStore::get` by reconstruction, so the BFS engine keeps only the range of state
//!    numbers to expand. A miss reconstructs the next `N/4` states together, walking the union
//!    of their spanning-tree paths once (in BFS, siblings share parents: about one firing per
//!    state) into the cache.
//! 5. **non-deterministic transitions**: handled by the front end, not here. The `.aut` front
//!    end numbers each state's out-edges, and uses the out-edge index as the transition id, so
//!    `(state, id)` has one successor even when a label has several; a backedge therefore
//!    names exactly one successor and no set of candidate states has to be carried through a
//!    replay (the paper's alternative, pruned by stored hashes, would cost a hash per state on
//!    the path and sets that can grow on each step). The price is that ids are local to a
//!    state (`transition_count` is the largest out-degree), which the replay never minds.

pub mod backedge;
pub mod cache;
mod shared;
pub mod sizing;
pub mod table;

pub use shared::Shared;

use super::full::eq_bytes;
use super::path::{self, Link, PathRecords, Rebuilt, Repoint, Scratch, Unfired, Walker};
use super::records::Disk;
use super::window::{
    delayed_batch_len, index_share, rotate, start_spilling, Scope, Spill, WindowHost, WindowMark,
    WindowTable, MIN_TABLE, RAM_BATCH,
};
use super::{
    decode_blob, descriptor, encode_blob, top_mask, Exactness, Insert, NewState, Resolver,
    SharedIndex, StateBatch, StateId, StateStore, StatesBack, StoreMark, Via,
};
use super::{
    records_edges_inserts, storage_needed, BatchScratch, PathStep, RecordsEdges, StoreSpec,
};
use crate::error::StoreError;
use crate::model::{Model, TransitionId};
use crate::storage::runs::HashRuns;
use crate::storage::vec::SegReader;
use crate::storage::{Account, MemoryLimit, Storage};
use backedge::{Backedge, BackedgeMark, BackedgeTable, NO_PARENT};
use cache::{Cache, SearchPath, UNKNOWN_DEPTH};
use serde_json::json;
use sizing::Levels;
use table::{StateTable, MAX_STATES, SLOT_BYTES};

/// Replays cache every ancestor whose depth is a multiple of this (and the target). Measured
/// (BFS, cache 2^17): 16 → 4 cut replay firings from 29 M to 16 M on SharedMemory-PT-000010
/// and from 20 M to 11 M on Peterson-PT-3; 1 (every ancestor) flushes the region on the long
/// replays of DFS. With bit-packed entries the replayed region holds more, and 4 → 2 cut
/// Peterson-PT-3's replay firings (2^16 entries, vectors) from 14.4 M to 12.5 M and
/// SharedMemory-PT-000010's from 14.5 M to 10.8 M.
const REPLAY_CHECKPOINT: u32 = 2;

/// How much of the state cache is the *recent* region, in eighths (the rest holds replayed
/// states). With state numbers in the waiting set the recent region also serves the
/// waiting set's rebuilds, and BFS lookups land mostly on the last levels; with vectors in the
/// waiting set, replays matter more. Measured in BFS with bit-packed entries and replay
/// checkpoints every 2 levels (CPU s): Peterson-PT-3, vectors, 2^16 entries: 7/8 recent 6.45,
/// 1/2 5.93, 1/4 5.85 (2^17 entries, 1/4: 5.41, 5.9 M replay firings instead of 14 M);
/// SharedMemory-PT-000010, 2^16 entries: 7/8 3.42, 3/4 3.39, 1/2 3.44, 1/4 3.48;
/// Kanban-PT-00005, 360,000 entries: 7/8 2.87, 3/4 2.82.
fn recent_eighths(waiting: WaitingSet) -> usize {
    match waiting {
        WaitingSet::StateNumbers => 6,
        WaitingSet::Vectors => 2,
    }
}

/// Most states the waiting set rebuilds at once (a sixteenth of the recent region below).
const WAITING_BATCH_MAX: u64 = 512;

/// Variant 1: repoint backedges to shorter paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PathOptimisation {
    On,
    Off,
}

/// Variant 2 (part): move a matched state to the front of its collision list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MoveToFront {
    On,
    Off,
}

/// Variant 3: how a candidate is rebuilt for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Reconstruction {
    /// Replay the path forward from the nearest cached ancestor (or the initial state).
    Forward,
    /// Unfire the path backward from the new state; stop at the first invalid state.
    Backward,
}

/// Variant 4: what the BFS waiting set holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WaitingSet {
    /// State numbers only; vectors are reconstructed on dequeue.
    StateNumbers,
    /// (number, vector) records kept by the engine.
    Vectors,
}

/// `CombackOptions::cache` for a cache sized by the store ([`sizing`]; the default).
pub const AUTO_CACHE: usize = usize::MAX;

/// ComBack settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CombackOptions {
    /// Descriptor width `b` in bits (1..=64).
    pub hash_bits: u32,
    /// Full-state cache entries (0: no cache; [`AUTO_CACHE`]: sized by the store from the
    /// BFS level widths and the memory budget, see [`sizing`]).
    pub cache: usize,
    pub path_optimisation: PathOptimisation,
    pub move_to_front: MoveToFront,
    pub reconstruction: Reconstruction,
    pub waiting_set: WaitingSet,
    /// Bytes of the backedge file's block cache (0: automatic, see
    /// [`backedge::cache_bytes_for`]). Under `--memory` the budget decides.
    #[serde(default)]
    pub block_cache: u64,
    /// Under `--memory`, spill the state table once it would pass this many slots (hidden
    /// `--comback-index-slots`: tests and benchmarks of the spilled index on small models;
    /// `None`: half the budget decides).
    #[serde(default)]
    pub index_slots: Option<u64>,
}

impl Default for CombackOptions {
    fn default() -> Self {
        CombackOptions {
            hash_bits: 64,
            cache: AUTO_CACHE,
            path_optimisation: PathOptimisation::On,
            move_to_front: MoveToFront::On,
            reconstruction: Reconstruction::Forward,
            waiting_set: WaitingSet::StateNumbers,
            block_cache: 0,
            index_slots: None,
        }
    }
}

impl StoreSpec for CombackOptions {
    fn name(&self) -> &'static str {
        "comback"
    }

    /// Backedges and descriptors always live in segment files.
    fn needs_storage(&self) -> bool {
        true
    }

    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let st = storage.ok_or_else(|| storage_needed(self.name()))?;
        Ok(Box::new(CombackStore::new(model, *self, st)?))
    }

    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(CombackStore::resume(model, *self, storage, mark)?))
    }
}

#[derive(Default, Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Counters {
    generated: u64,
    reconstructions: u64,
    reconstruction_fires: u64,
    backward_unfires: u64,
    backward_early_rejects: u64,
    backward_fallbacks: u64,
    cache_hits: u64,
    stack_hits: u64,
    false_candidates: u64,
    descriptor_collisions: u64,
    max_collision_list: u64,
    path_repoints: u64,
    move_to_front_swaps: u64,
    waiting_batches: u64,
    waiting_reconstructed: u64,
    table_rebuilds: u64,
}

/// Mutable working state of lookups and rebuilds (a field of its own, so that the
/// associated functions that rebuild states borrow it next to the immutable parts).
struct Inner {
    cache: Cache,
    /// Variant 4: the batch of waiting states rebuilt last, `first..first + ends.len()`.
    waiting: WaitingBuffer,
    stack: SearchPath,
    counters: Counters,
    /// The path core's scratch (`walk.a`: the state a replay rebuilt).
    walk: Walker,
    /// A cached state [`StateStore::get`] unpacked.
    got: Vec<u8>,
    /// Parallel BFS: the numbering thread's scratch for what the workers left undecided
    /// (and what it rebuilt during a chunk), and its reader of backedge blocks.
    scratch: Scratch,
    reader: SegReader,
}

impl Inner {
    /// The path core's scratch, the records as it walks them towards state `target`, and
    /// the counters.
    fn walker<'a>(
        &'a mut self,
        back: &'a BackedgeTable,
        initial: &'a [u8],
        target: StateId,
    ) -> (&'a mut Walker, Walk<'a>, &'a mut Counters) {
        let recs = Walk {
            back,
            initial,
            cache: &mut self.cache,
            stack: &self.stack,
            target,
        };
        (&mut self.walk, recs, &mut self.counters)
    }
}

#[derive(Default)]
struct WaitingBuffer {
    first: StateId,
    ends: Vec<usize>,
    data: Vec<u8>,
}

impl WaitingBuffer {
    fn get(&self, id: StateId) -> Option<&[u8]> {
        let k = id.checked_sub(self.first)? as usize;
        let end = *self.ends.get(k)?;
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        Some(&self.data[start..end])
    }

    fn ram_bytes(&self) -> u64 {
        (self.ends.capacity() * 8 + self.data.capacity()) as u64
    }
}

/// Where a ComBack walk starts: a cached state, the initial state, or a pinned state of
/// the DFS search path (id, stored depth).
#[derive(Clone, Copy, Debug)]
enum Start {
    Cached(StateId),
    Initial,
    Pinned(StateId, u32),
}

/// ComBack's records as the path core walks them ([`path::PathRecords`]): the backedges,
/// and as starts the state cache, the pinned search path and the initial state
/// ([`path::RootPolicy::Initial`]).
struct Walk<'a> {
    back: &'a BackedgeTable,
    initial: &'a [u8],
    cache: &'a mut Cache,
    stack: &'a SearchPath,
    /// The state a replay rebuilds (cached whatever its depth).
    target: StateId,
}

impl PathRecords for Walk<'_> {
    type Start = Start;
    const STORE: &'static str = "comback";

    /// Stored depths strictly grow along backedges, so no path is longer than the states.
    fn max_edges(&self) -> usize {
        self.back.len() as usize
    }

    #[inline(always)]
    fn link(&mut self, id: StateId) -> Result<Link<Start>, StoreError> {
        if self.cache.contains(id) {
            return Ok(Link::Start(Start::Cached(id)));
        }
        if id == 0 {
            return Ok(Link::Start(Start::Initial));
        }
        let e = self.back.get(id)?;
        if self.stack.get(id, e.depth).is_some() {
            return Ok(Link::Start(Start::Pinned(id, e.depth)));
        }
        Ok(Link::Edge {
            parent: e.parent,
            transition: e.transition,
            depth: e.depth,
        })
    }

    fn load(&mut self, start: Start, out: &mut Vec<u8>) -> Result<(), StoreError> {
        out.clear();
        match start {
            Start::Cached(id) => self.cache.get(id).expect("just found").0.append_to(out),
            Start::Initial => out.extend_from_slice(self.initial),
            Start::Pinned(id, d) => out.extend_from_slice(self.stack.get(id, d).expect("pinned")),
        }
        Ok(())
    }

    fn equals(&mut self, start: Start, state: &[u8]) -> Result<bool, StoreError> {
        Ok(match start {
            Start::Cached(id) => self.cache.get(id).expect("just found").0.matches(state),
            Start::Initial => eq_bytes(self.initial, state),
            Start::Pinned(id, d) => eq_bytes(self.stack.get(id, d).expect("pinned"), state),
        })
    }

    /// Caches the target and sampled ancestors: a long replay leaves checkpoints instead of
    /// flushing the region.
    #[inline(always)]
    fn replayed(&mut self, _: Start, id: StateId, depth: u32, _: u32, state: &[u8]) {
        if id == self.target || depth.is_multiple_of(REPLAY_CHECKPOINT) {
            self.cache.put_replayed(id, depth, state);
        }
    }
}

/// The rule of variant 1 ([`path::repoint_if_shorter`]) on stored depths.
impl Repoint for CombackStore<'_> {
    /// The parent's stored depth: it may be smaller than the engine's, and keeping
    /// depth(parent) < depth(child) for stored depths keeps the backedges acyclic.
    fn parent_len(&mut self, parent: StateId) -> Result<u32, StoreError> {
        Ok(match self.inner.cache.get(parent) {
            Some((_, d, _)) if d != UNKNOWN_DEPTH => d,
            _ => self.back.get(parent)?.depth,
        })
    }

    fn writable(&mut self, _: StateId) -> bool {
        true
    }

    /// The stored depth is exact.
    fn exact_len(&mut self, _: StateId, bound: u32) -> Result<u32, StoreError> {
        Ok(bound)
    }

    fn set_edge(&mut self, id: StateId, via: Via, len: u32) -> Result<(), StoreError> {
        let mut e = self.back.get(id)?;
        e.parent = via.parent;
        e.transition = via.transition;
        e.depth = len;
        self.back.set(id, &e)?;
        self.inner.cache.set_depth(id, len);
        self.inner.counters.path_repoints += 1;
        Ok(())
    }
}

/// What one candidate of a collision list turned out to be.
enum Candidate {
    Match {
        depth: u32,
    },
    /// Not the state; `same_descriptor` when its descriptor is equal (a real collision).
    Mismatch {
        same_descriptor: bool,
    },
}

/// What the state cache says of a candidate ([`CombackStore::cached_answer`]).
enum Cached {
    /// The answer, from the cached vector alone.
    Decided(Candidate),
    /// The cached vector is the state; its depth is in the backedge table.
    MatchAtUnknownDepth,
    /// The cached vector is not the state; whether the descriptors are equal (a real
    /// collision) is for the descriptor file to say.
    MismatchOfUnknownDescriptor,
    /// Not cached.
    Absent,
}

/// What a checkpoint of a ComBack store records (`StoreMark::blob`): the marks of the
/// backedge and descriptor files, the options, the state table's size and the counters. The
/// state table itself is rebuilt on resume from the descriptor file.
#[derive(serde::Serialize, serde::Deserialize)]
struct CombackCheckpoint {
    opts: CombackOptions,
    table_slots: u64,
    counters: Counters,
    backedges: BackedgeMark,
    /// The spilled index's window and runs, once it has spilled.
    window: Option<WindowMark>,
}

/// States ahead whose home slots [`StateStore::add_new`] asks for.
const AHEAD: usize = 8;

/// Backedge blocks each thread's reader keeps in parallel BFS (768 KiB): a replay climbs
/// through blocks all over the file, and the shared block cache takes a thread's misses
/// only when the chunk ends (with the default 8, the threads decompressed the same blocks
/// again and again: 9% of Peterson-PT-3's samples, 2% with 256).
const READER_BLOCKS: usize = 256;

/// Name of the index runs' files (`comback.index.run.G`).
const RUNS: &str = "comback.index";

/// The pinned DFS search path takes at most 1/N of `--memory` (see [`SearchPath`]): 1.5 MiB
/// under 24M, where Kanban-PT-00005's unbounded pins grew to 19 MiB of capacity.
const PATH_SHARE: u64 = 16;

/// The ComBack store.
pub struct CombackStore<'m> {
    model: &'m dyn Model,
    disk: Disk,
    /// The budget account of the RAM structures (state table, caches), so that under
    /// `--memory` the backedge vector's cache leaves room for them.
    ram_account: crate::storage::Account,
    opts: CombackOptions,
    width: Option<usize>,
    table: StateTable,
    back: BackedgeTable,
    initial: Vec<u8>,
    inner: Inner,
    /// First state number `table` holds: 0 until the index spills, then the window's young
    /// start.
    young_start: u64,
    /// The older part of the index, once it has spilled.
    spill: Option<Box<Spill<StateTable>>>,
    /// What a delayed batch takes in RAM (see [`StateStore::delayed_batch`]).
    batch_account: Account,
    /// A batch's search-tree edges and a spilled batch's run lookups.
    scratch: BatchScratch,
    /// Widths of the levels of new states (for the automatic cache size).
    levels: Levels,
    /// The automatic cache is reconsidered when the widest level passes this (never with a
    /// cache size given).
    grow_at: u64,
    /// Threads the run may use ([`StateStore::set_threads`]): with more than one, BFS
    /// expands chunks of parents on all of them through [`Shared`].
    threads: usize,
}

pub(crate) use super::slots::prefetch;

impl<'m> CombackStore<'m> {
    /// A new store whose backedge table is a segment vector of `storage`.
    pub fn new(
        model: &'m dyn Model,
        opts: CombackOptions,
        storage: &Storage,
    ) -> Result<Self, StoreError> {
        let disk = Disk::new(storage);
        let mut back = BackedgeTable::new(&disk)?;
        back.fit_cache(0, opts.block_cache)?;
        Self::assemble(model, opts, disk, back, StateTable::new(opts.hash_bits))
    }

    /// Reopens the store of a checkpoint (`mark` from [`StateStore::checkpoint`]) made with
    /// the same model: the backedge file is cut back to the mark and the state table is
    /// rebuilt by one sequential read of it (the full-state cache starts empty). `opts` may
    /// differ from the checkpointed run's only in the cache size and the variants; the
    /// descriptor width must be the same. From then on the store answers exactly as the
    /// interrupted one would have.
    pub fn resume(
        model: &'m dyn Model,
        opts: CombackOptions,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Self, StoreError> {
        let c: CombackCheckpoint = decode_blob("comback", &mark.blob)?;
        if c.opts.hash_bits != opts.hash_bits {
            return Err(StoreError::Invalid {
                store: "comback",
                message: format!(
                    "the checkpoint has {}-bit descriptors, not {}",
                    c.opts.hash_bits, opts.hash_bits
                ),
            });
        }
        let disk = Disk::new(storage);
        let back = BackedgeTable::open(&disk, &c.backedges)?;
        let bits = opts.hash_bits;
        let count = back.len();
        let (young_start, old, table) = match &c.window {
            None => (
                0,
                None,
                StateTable::with_slots(bits, c.table_slots as usize),
            ),
            Some(w) => {
                let cap = w.table_cap as usize;
                let old = StateTable::with_slots(bits, cap);
                (w.young_start, Some(old), StateTable::with_slots(bits, cap))
            }
        };
        let mut table = table;
        if table.needs_growth(count - young_start) {
            return Err(StoreError::Invalid {
                store: "comback",
                message: format!(
                    "{} states do not fit the checkpointed table of {} slots",
                    count - young_start,
                    table.capacity()
                ),
            });
        }
        let fill = |t: &mut StateTable, from: u64, to: u64| {
            t.refill(|push| {
                back.descriptors_in(from, to, |id, d| {
                    push(id, d);
                    Ok(())
                })
            })
        };
        fill(&mut table, young_start, count)?;
        let spill = match (c.window, old) {
            (Some(w), Some(mut old)) => {
                fill(&mut old, w.old_start, w.young_start)?;
                let runs = HashRuns::open(storage.dir(), RUNS, storage.budget.clone(), &w.runs)?;
                Some(Box::new(Spill {
                    old,
                    old_start: w.old_start,
                    table_cap: w.table_cap as usize,
                    runs,
                    rotations: w.rotations,
                }))
            }
            _ => None,
        };
        let mut back = back;
        back.fit_cache(table.capacity() as u64, opts.block_cache)?;
        let mut s = Self::assemble(model, opts, disk, back, table)?;
        s.inner.counters = c.counters;
        s.young_start = young_start;
        s.spill = spill;
        s.publish_ram();
        Ok(s)
    }

    fn assemble(
        model: &'m dyn Model,
        opts: CombackOptions,
        disk: Disk,
        back: BackedgeTable,
        table: StateTable,
    ) -> Result<Self, StoreError> {
        if !(1..=64).contains(&opts.hash_bits) {
            return Err(StoreError::Invalid {
                store: "comback",
                message: format!("hash width {} is not in 1..=64", opts.hash_bits),
            });
        }
        let mut initial = Vec::new();
        model
            .initial_state(&mut initial)
            .map_err(|e| StoreError::Reconstruction {
                store: "comback",
                id: 0,
                message: e.to_string(),
            })?;
        let width = model.state_len();
        let ram_account = disk.shared_account("comback.table");
        let batch_account = disk.budget().account("bfs.batch");
        let auto = opts.cache == AUTO_CACHE;
        let entries = if auto { sizing::FLOOR } else { opts.cache };
        if !auto {
            crate::sys::check_structure(
                &format!("the ComBack state cache of {entries} entries (--comback-cache)"),
                Cache::max_bytes(entries, width),
            )?;
        }
        let cache = Cache::new(entries, width, recent_eighths(opts.waiting_set));
        let grow_at = if auto {
            sizing::levels_held(cache.entries()).max(1)
        } else {
            u64::MAX
        };
        let mut stack = SearchPath::default();
        if let MemoryLimit::Bytes(limit) = disk.budget().limit() {
            stack.set_cap((limit / PATH_SHARE) as usize);
        }
        let s = CombackStore {
            model,
            disk,
            ram_account,
            opts,
            width,
            table,
            back,
            initial,
            young_start: 0,
            spill: None,
            batch_account,
            scratch: Default::default(),
            levels: Levels::default(),
            grow_at,
            threads: 1,
            inner: Inner {
                cache,
                stack,
                waiting: WaitingBuffer::default(),
                counters: Counters::default(),
                walk: Walker::default(),
                got: Vec::new(),
                scratch: Scratch::default(),
                reader: SegReader::default(),
            },
        };
        s.publish_ram();
        Ok(s)
    }

    /// Tells the budget what the RAM structures hold (called when the table grows).
    fn publish_ram(&self) {
        self.ram_account.set(self.ram_without_backedges(), 0, 0);
    }

    /// Republishes the RAM figures when the state cache changed its packing.
    fn publish_if_resized(&mut self) {
        if self.inner.cache.take_resized() {
            self.publish_ram();
        }
    }

    pub fn options(&self) -> CombackOptions {
        self.opts
    }

    /// Makes room for `extra` more states in the table: rebuilds it 4/3 larger from the
    /// descriptors in the backedge table, or, under a budget whose share ([`index_share`])
    /// the larger table would pass, spills the index to disk; once spilled, rotates the
    /// window.
    ///
    /// The old table is freed before the new one is allocated (the new one is rebuilt from
    /// the descriptor file, not copied), and under `--memory` the new one is claimed from the
    /// budget and charged before it exists, so that the block caches give way first and the
    /// peak stays within the budget.
    fn grow(&mut self, extra: u64) -> Result<(), StoreError> {
        if let Some(sp) = &self.spill {
            if extra * 20 > sp.table_cap as u64 * 17 {
                return Err(sp.too_small("comback", extra));
            }
            rotate(self)?;
            return self.leave_block_cache_room();
        }
        let old = self.table.ram_bytes();
        let new = self.table.grown_bytes();
        let mut others = self.ram_without_backedges() - old;
        let budget = self.disk.budget().clone();
        match budget.limit() {
            MemoryLimit::Bytes(limit) => {
                if self.opts.cache == AUTO_CACHE
                    && self.inner.cache.entries() > sizing::FLOOR
                    && budget
                        .claim("", others + new, backedge::MIN_CACHE, "")
                        .is_err()
                {
                    // The table comes first: an automatic cache that leaves it no room
                    // shrinks back to its floor (the budget is never exceeded for the
                    // cache's sake, not even by a copy beside the old one).
                    let inner = &mut self.inner;
                    let before = inner.cache.ram_bytes();
                    inner.cache.shrink_empty(sizing::FLOOR);
                    inner.cache.take_resized();
                    others = others - before + inner.cache.ram_bytes();
                    self.grow_at = u64::MAX;
                }
                let slots = self.table.grown_slots() as u64;
                let over_share = new > index_share(limit)
                    || self.opts.index_slots.is_some_and(|max| slots > max);
                let claim = budget.claim(
                    "the ComBack state table",
                    others + new,
                    backedge::MIN_CACHE + HashRuns::min_ram_bytes(),
                    &format!(
                        "a table of {new} bytes for more than {} states",
                        self.back.len()
                    ),
                );
                if (over_share || claim.is_err()) && self.table.capacity() >= MIN_TABLE * 2 {
                    start_spilling(self)?;
                    return self.leave_block_cache_room();
                }
                claim?;
            }
            MemoryLimit::Unlimited => {
                crate::sys::check_ceiling("the ComBack state table", new)?;
            }
        }
        let bits = self.opts.hash_bits;
        let cap = self.table.grown_slots();
        self.table = StateTable::with_slots(bits, 0);
        self.ram_account.set(others + new, 0, 0);
        self.back.trim_cache()?;
        let mut g = StateTable::with_slots(bits, cap);
        g.refill(|push| self.back.scan_descriptors(push))?;
        self.table = g;
        // Sized for the states the table holds before it grows again.
        self.back
            .fit_cache(self.table.capacity() as u64, self.opts.block_cache)?;
        self.inner.counters.table_rebuilds += 1;
        self.publish_ram();
        if self.opts.cache == AUTO_CACHE && self.grow_at != u64::MAX {
            // The cap follows the states stored.
            self.grow_cache()?;
        }
        Ok(())
    }

    /// Looks `state` (descriptor `d`) up in the old window table and then, if `runs`, in
    /// the runs.
    #[allow(clippy::too_many_arguments)]
    fn find_older(
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        opts: &CombackOptions,
        inner: &mut Inner,
        sp: &mut Spill<StateTable>,
        state: &[u8],
        d: u64,
        fp_exact: bool,
        runs: bool,
    ) -> Result<Option<(StateId, u32)>, StoreError> {
        let found = sp.old.find(d, |_, id| {
            match Self::candidate(model, back, initial, opts, inner, id, state, d, fp_exact)? {
                Candidate::Match { depth } => Ok(Some((id, depth))),
                Candidate::Mismatch { .. } => Ok::<_, StoreError>(None),
            }
        })?;
        if let Ok(x) = found {
            return Ok(Some(x));
        }
        if !runs || !sp.runs.may_contain(d) {
            return Ok(None);
        }
        let mut ids = Vec::new();
        sp.runs.find_sorted(&[(d, 0)], |_, id| ids.push(id))?;
        for id in ids {
            let c = Self::candidate(model, back, initial, opts, inner, id, state, d, true)?;
            sp.runs.count_outcome(matches!(c, Candidate::Match { .. }));
            if let Candidate::Match { depth } = c {
                return Ok(Some((id, depth)));
            }
        }
        Ok(None)
    }

    fn check(&self, state: &[u8], extra: u64) -> Result<(), StoreError> {
        if let Some(w) = self.width {
            if state.len() != w {
                return Err(StoreError::Invalid {
                    store: "comback",
                    message: format!(
                        "state of {} bytes in a store of {w}-byte states",
                        state.len()
                    ),
                });
            }
        }
        if self.back.len() + extra > MAX_STATES {
            return Err(StoreError::CapacityExceeded {
                store: "comback",
                message: format!("more than {MAX_STATES} states (32-bit state numbers)"),
            });
        }
        Ok(())
    }

    /// Forward replay: writes state `id` into `inner.walk.a`, from the nearest cached
    /// ancestor, pinned search-path state or the initial state. The rebuilt state and every
    /// [`REPLAY_CHECKPOINT`]-th ancestor replayed go to the cache's replayed region.
    fn reconstruct_forward(
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        inner: &mut Inner,
        id: StateId,
    ) -> Result<(), StoreError> {
        let (walk, mut recs, counters) = inner.walker(back, initial, id);
        path::replay(walk, model, &mut recs, id)?;
        counters.reconstructions += 1;
        counters.reconstruction_fires += walk.path.len() as u64;
        Ok(())
    }

    /// Backward reconstruction: unfires `id`'s path from `state`. `Ok(None)` when the model
    /// cannot fire backwards.
    fn compare_backward(
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        inner: &mut Inner,
        id: StateId,
        state: &[u8],
    ) -> Result<Option<bool>, StoreError> {
        let (walk, mut recs, counters) = inner.walker(back, initial, id);
        let (outcome, unfires) = path::unfire(walk, model, &mut recs, id, state, false)?;
        counters.reconstructions += 1;
        counters.backward_unfires += unfires;
        Ok(match outcome {
            Unfired::Equal(_) => Some(true),
            Unfired::Different => Some(false),
            Unfired::NoPredecessor => {
                counters.backward_early_rejects += 1;
                Some(false)
            }
            Unfired::Unsupported => None,
        })
    }

    /// What the state cache says of candidate `id`. Nothing in it can fail, so a lookup
    /// keeps a [`Cached::Decided`] answer in registers and calls the fallible
    /// [`Self::candidate_undecided`] only for the rest: when the whole decision returned a
    /// `Result` (large, for its error), every answer was written to the stack a byte and a
    /// word at a time and read back as one load, which waited on store forwarding (10% of
    /// `insert_descriptor` on Kanban-PT-00005).
    #[inline(always)]
    fn cached_answer(inner: &mut Inner, id: StateId, state: &[u8], fp_exact: bool) -> Cached {
        let Some((v, depth, _)) = inner.cache.get(id) else {
            return Cached::Absent;
        };
        inner.counters.cache_hits += 1;
        if v.matches(state) {
            if depth == UNKNOWN_DEPTH {
                Cached::MatchAtUnknownDepth
            } else {
                Cached::Decided(Candidate::Match { depth })
            }
        } else if fp_exact {
            Cached::Decided(Candidate::Mismatch {
                same_descriptor: true,
            })
        } else {
            Cached::MismatchOfUnknownDescriptor
        }
    }

    /// Decides whether candidate `id` (fingerprint match) is `state`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn candidate(
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        opts: &CombackOptions,
        inner: &mut Inner,
        id: StateId,
        state: &[u8],
        d: u64,
        fp_exact: bool,
    ) -> Result<Candidate, StoreError> {
        match Self::cached_answer(inner, id, state, fp_exact) {
            Cached::Decided(c) => Ok(c),
            cached => Self::candidate_undecided(
                cached, model, back, initial, opts, inner, id, state, d, fp_exact,
            ),
        }
    }

    /// [`Self::candidate`] of a candidate the state cache did not decide: a cached one whose
    /// depth or descriptor is read from the backedge table, or one not cached (the search
    /// path, a replay or a backward check). Kept out of line so that the cache's answer,
    /// most candidates, stays inlined in the lookups (callgrind, SharedMemory-PT-000010: the
    /// call cost 0.5 G instructions when the whole decision was one function).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn candidate_undecided(
        cached: Cached,
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        opts: &CombackOptions,
        inner: &mut Inner,
        id: StateId,
        state: &[u8],
        d: u64,
        fp_exact: bool,
    ) -> Result<Candidate, StoreError> {
        match cached {
            Cached::MatchAtUnknownDepth => Ok(Candidate::Match {
                depth: back.get(id)?.depth,
            }),
            Cached::MismatchOfUnknownDescriptor => Ok(Candidate::Mismatch {
                same_descriptor: back.descriptor(id)? == d,
            }),
            Cached::Decided(c) => Ok(c),
            Cached::Absent => {
                Self::candidate_uncached(model, back, initial, opts, inner, id, state, d, fp_exact)
            }
        }
    }

    /// [`Self::candidate`] of a candidate not in the state cache.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn candidate_uncached(
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        opts: &CombackOptions,
        inner: &mut Inner,
        id: StateId,
        state: &[u8],
        d: u64,
        fp_exact: bool,
    ) -> Result<Candidate, StoreError> {
        // The descriptor is not checked first: it is read only to classify a mismatch (a
        // fingerprint match with another descriptor is rare: ~2^-16 per probed slot, and the
        // full comparison is exact anyway), saving a random read per candidate.
        let e = back.get(id)?;
        let mismatch = |inner: &mut Inner| -> Result<Candidate, StoreError> {
            let same_descriptor = fp_exact || back.descriptor(id)? == d;
            if !same_descriptor {
                inner.counters.false_candidates += 1;
            }
            Ok(Candidate::Mismatch { same_descriptor })
        };
        if let Some(v) = inner.stack.get(id, e.depth) {
            inner.counters.stack_hits += 1;
            return if eq_bytes(v, state) {
                Ok(Candidate::Match { depth: e.depth })
            } else {
                mismatch(inner)
            };
        }
        let equal = match opts.reconstruction {
            Reconstruction::Backward => {
                match Self::compare_backward(model, back, initial, inner, id, state)? {
                    Some(eq) => eq,
                    None => {
                        inner.counters.backward_fallbacks += 1;
                        Self::reconstruct_forward(model, back, initial, inner, id)?;
                        eq_bytes(&inner.walk.a, state)
                    }
                }
            }
            Reconstruction::Forward => {
                Self::reconstruct_forward(model, back, initial, inner, id)?;
                eq_bytes(&inner.walk.a, state)
            }
        };
        if equal {
            if opts.reconstruction == Reconstruction::Backward {
                inner.cache.put_replayed(id, e.depth, state);
            }
            Ok(Candidate::Match { depth: e.depth })
        } else {
            mismatch(inner)
        }
    }

    /// Variant 1: repoints `id` (at stored `depth`) to `via` if that path is shorter.
    fn maybe_repoint(&mut self, id: StateId, depth: u32, via: Via) -> Result<(), StoreError> {
        // The engine's depth of the parent is a cheap filter (in BFS it rejects nearly every
        // call without reading the parent's record); the rule compares stored depths.
        if via.depth >= depth as u64 {
            return Ok(());
        }
        path::repoint_if_shorter(self, id, depth, via)?;
        Ok(())
    }

    /// Variant 4: reconstructs states `[first, end)` together into the waiting buffer, walking
    /// the union of their paths once, parents before children. The buffer is separate from the
    /// cache so that rebuilding the waiting set does not evict the newest states, which most
    /// lookups need (measured on SharedMemory-PT-000010, cache 2^18: 3.4 M → 1.9 M replays).
    fn reconstruct_range(
        model: &dyn Model,
        back: &BackedgeTable,
        initial: &[u8],
        inner: &mut Inner,
        first: StateId,
        end: StateId,
    ) -> Result<(), StoreError> {
        // About one path state per waiting state in BFS (siblings share parents).
        let mut needed: hashbrown::HashMap<StateId, Backedge> =
            hashbrown::HashMap::with_capacity(2 * (end - first) as usize);
        for n in first..end {
            let mut cur = n;
            while cur != 0 && !inner.cache.contains(cur) && !needed.contains_key(&cur) {
                let e = back.get(cur)?;
                needed.insert(cur, e);
                cur = e.parent;
            }
        }
        let mut order: Vec<(u32, StateId)> = needed.iter().map(|(&n, e)| (e.depth, n)).collect();
        order.sort_unstable();
        let mut arena: Vec<u8> = Vec::with_capacity(order.len() * initial.len());
        let mut at: hashbrown::HashMap<StateId, (usize, usize)> =
            hashbrown::HashMap::with_capacity(order.len());
        let mut src: Vec<u8> = Vec::new();
        let mut dst: Vec<u8> = Vec::new();
        for &(_, n) in &order {
            let e = needed[&n];
            src.clear();
            if let Some(&(s, t)) = at.get(&e.parent) {
                src.extend_from_slice(&arena[s..t]);
            } else if let Some((v, _, _)) = inner.cache.get(e.parent) {
                v.append_to(&mut src);
            } else if e.parent == 0 {
                src.extend_from_slice(initial);
            } else {
                return Err(StoreError::Reconstruction {
                    store: "comback",
                    id: n,
                    message: format!("parent {} neither rebuilt nor cached", e.parent),
                });
            }
            path::fire("comback", model, &src, e.transition, &mut dst, n, n)?;
            let s = arena.len();
            arena.extend_from_slice(&dst);
            at.insert(n, (s, arena.len()));
        }
        inner.counters.reconstruction_fires += order.len() as u64;
        inner.counters.waiting_batches += 1;
        let w = &mut inner.waiting;
        w.first = first;
        w.ends.clear();
        w.data.clear();
        for n in first..end {
            if let Some(&(s, t)) = at.get(&n) {
                w.data.extend_from_slice(&arena[s..t]);
                inner.counters.waiting_reconstructed += 1;
            } else if let Some((v, _, _)) = inner.cache.get(n) {
                v.append_to(&mut w.data);
            } else if n == 0 {
                w.data.extend_from_slice(initial);
            } else {
                return Err(StoreError::Reconstruction {
                    store: "comback",
                    id: n,
                    message: "waiting-set state neither rebuilt nor cached".into(),
                });
            }
            w.ends.push(w.data.len());
        }
        Ok(())
    }

    /// Looks `state` (descriptor `d`) up in `scope` and, unless the scope is the window
    /// only, inserts it if new (`None`: not in the window); the table has room.
    fn insert_descriptor(
        &mut self,
        state: &[u8],
        via: Option<Via>,
        d: u64,
        scope: Scope,
    ) -> Result<Option<Insert>, StoreError> {
        let model = self.model;
        let opts = self.opts;
        let back = &self.back;
        let initial = &self.initial[..];
        let inner = &mut self.inner;
        // The table only offers candidates whose fingerprint matches; when the fingerprint
        // is the whole descriptor, their descriptors need not be read.
        let fp_exact = self.table.fingerprint_is_descriptor();
        if scope != Scope::Young {
            inner.counters.generated += 1;
        }
        // First slot of an equal-descriptor entry (move-to-front target) and list length.
        let mut first_equal: Option<usize> = None;
        let mut equal_seen: u64 = 0;
        let found = self.table.find(d, |pos, id| {
            // `candidate`'s two steps, so that a decided answer never becomes a `Result`.
            let c = match Self::cached_answer(inner, id, state, fp_exact) {
                Cached::Decided(c) => c,
                cached => Self::candidate_undecided(
                    cached, model, back, initial, &opts, inner, id, state, d, fp_exact,
                )?,
            };
            match c {
                Candidate::Match { depth } => Ok(Some((pos, id, depth))),
                Candidate::Mismatch { same_descriptor } => {
                    if same_descriptor {
                        inner.counters.descriptor_collisions += 1;
                        equal_seen += 1;
                        first_equal.get_or_insert(pos);
                    }
                    Ok::<_, StoreError>(None)
                }
            }
        })?;
        let older = match (&found, &mut self.spill, scope) {
            (Err(_), Some(sp), Scope::All | Scope::Window) => {
                // A delayed batch asks the runs afterwards, sorted.
                let runs = scope == Scope::All;
                Self::find_older(
                    model, back, initial, &opts, inner, sp, state, d, fp_exact, runs,
                )?
            }
            _ => None,
        };
        if let Some((id, depth)) = older {
            if let (PathOptimisation::On, Some(via)) = (opts.path_optimisation, via) {
                self.maybe_repoint(id, depth, via)?;
            }
            return Ok(Some(Insert::Seen(id)));
        }
        match found {
            Ok((pos, id, depth)) => {
                if opts.move_to_front == MoveToFront::On {
                    if let Some(front) = first_equal {
                        self.table.swap(front, pos);
                        inner.counters.move_to_front_swaps += 1;
                    }
                }
                if let (PathOptimisation::On, Some(via)) = (opts.path_optimisation, via) {
                    self.maybe_repoint(id, depth, via)?;
                }
                Ok(Some(Insert::Seen(id)))
            }
            Err(_) if scope == Scope::Window => Ok(None),
            Err(probe) => {
                let list = equal_seen + 1;
                if list > inner.counters.max_collision_list {
                    inner.counters.max_collision_list = list;
                }
                let (parent, transition, depth) = match via {
                    Some(v) => (v.parent, v.transition, v.depth.min(u32::MAX as u64) as u32),
                    None => (NO_PARENT, TransitionId(0), 0),
                };
                let id = self.back.push(
                    &Backedge {
                        parent,
                        transition,
                        depth,
                    },
                    d,
                )?;
                self.table.insert_at(probe.pos, d, id);
                inner.cache.put_recent(id, depth, state);
                self.new_state_sized(depth)?;
                Ok(Some(Insert::New(id)))
            }
        }
    }

    /// Whether BFS may expand chunks on several threads through [`Shared`]: more than one
    /// thread, no `--memory` (under a budget the chunk's buffers and the threads' readers
    /// come out of the state cache's share, and a cache that no longer holds a level costs
    /// more than the second thread gains: Kanban-PT-00005 under 64M, 1.15 M → 1.01 M
    /// entries, 2.6 times the replays, 5.7 → 6.3 s), and state numbers in the waiting set
    /// (the open set is then the id range the chunks are cut from).
    fn shares_index(&self) -> bool {
        self.threads > 1
            && self.disk.budget().limit() == MemoryLimit::Unlimited
            && self.spill.is_none()
            && self.opts.waiting_set == WaitingSet::StateNumbers
    }

    /// Counts a new state at `depth` and, with an automatic cache, grows the cache when the
    /// widest level outgrew it ([`sizing`]).
    #[inline(always)]
    fn new_state_sized(&mut self, depth: u32) -> Result<(), StoreError> {
        self.levels.record(depth);
        if self.levels.widest() > self.grow_at {
            self.grow_cache()?;
        }
        Ok(())
    }

    /// Resizes an automatic cache to [`sizing::wanted_entries`], within the cap of
    /// [`sizing::cap_bytes`] and, under `--memory`, to what the budget's headroom (with what
    /// the backedge block caches give back) holds next to the old cache, the state table's
    /// next growth and the smallest block cache.
    #[cold]
    fn grow_cache(&mut self) -> Result<(), StoreError> {
        let width_hint = self.width.unwrap_or(self.initial.len());
        let budget = self.disk.budget().clone();
        let limit = budget.limit();
        let total = match (limit, crate::sys::ceiling()) {
            (crate::storage::MemoryLimit::Unlimited, None) => {
                crate::sys::MachineMemory::read().total
            }
            _ => None,
        };
        let cap_bytes = sizing::cap_bytes(limit, crate::sys::ceiling(), total);
        let others = self.ram_without_backedges();
        let inner = &mut self.inner;
        let cur = inner.cache.entries();
        let entry = inner.cache.entry_bytes(width_hint).max(1) as u64;
        let cap_bytes = cap_bytes.min(sizing::states_bytes_cap(self.back.len(), entry));
        let cap = (cap_bytes / entry)
            .min(sizing::states_cap(self.back.len()))
            .min(usize::MAX as u64 / 2) as usize;
        let mut want = sizing::wanted_entries(self.levels.widest(), cur, cap);
        if let Some(room) = budget.headroom(&self.ram_account) {
            // The backedge table's block caches live on what the budget leaves and give it
            // back (`trim_cache` below) down to their working size: past that, a state cache
            // that saves replays is worth more than blocks to replay from. The old and the
            // new cache coexist while entries are copied (`others` holds the old one), next
            // to the state table's next growth and the block caches' working size. What the
            // rule wants and the budget cannot hold, the budget's share of it can.
            let avail = (room + self.back.spare_cache_bytes())
                .saturating_sub(others + self.table.grown_bytes() + backedge::WORKING_CACHE);
            let fit = (avail / entry).min(usize::MAX as u64 / 2) as usize;
            want = want.min(fit);
        }
        // A resize copies the cache: not for less than an eighth more.
        if want > cur + cur / 8 {
            let new_bytes = inner.cache.bytes_for(want, width_hint);
            self.ram_account.set(others + new_bytes, 0, 0);
            self.back.trim_cache()?;
            let inner = &mut self.inner;
            inner.cache.resize(want);
            inner.cache.take_resized();
            self.publish_ram();
        }
        let inner = &mut self.inner;
        let covered = sizing::levels_held(inner.cache.entries());
        let widest = self.levels.widest();
        // Capped (or refused by the budget): try again when the levels are a quarter wider.
        self.grow_at = if covered >= widest {
            covered
        } else {
            widest + widest / 4 + 1
        };
        Ok(())
    }

    /// Under a budget, once the index spilled and after each rotation: an automatic state
    /// cache gives back entries (not below its floor) until the backedge table's block
    /// caches can hold [`backedge::WORKING_CACHE`] again. The cache was sized before the
    /// spill's batch, filters and sort buffers came in, which then took their room from
    /// the block caches alone. It starts again empty rather than copied: the copy would
    /// hold the old and the new cache at once, in room the budget does not have.
    fn leave_block_cache_room(&mut self) -> Result<(), StoreError> {
        if self.opts.cache != AUTO_CACHE {
            return Ok(());
        }
        let budget = self.disk.budget().clone();
        let Some(room) = budget.headroom(&self.ram_account) else {
            return Ok(());
        };
        let others = self.ram_without_backedges();
        let blocks = self.back.ram_bytes() + room.saturating_sub(others);
        let work = backedge::WORKING_CACHE;
        if blocks >= work {
            return Ok(());
        }
        let width_hint = self.width.unwrap_or(self.initial.len());
        let inner = &mut self.inner;
        let entry = inner.cache.entry_bytes(width_hint).max(1) as u64;
        let cur = inner.cache.entries();
        let give = ((work - blocks).div_ceil(entry)) as usize;
        let want = cur.saturating_sub(give).max(sizing::FLOOR);
        if want >= cur {
            return Ok(());
        }
        inner.cache.shrink_empty(want);
        inner.cache.take_resized();
        self.publish_ram();
        Ok(())
    }

    fn ram_without_backedges(&self) -> u64 {
        let inner = &self.inner;
        // Once spilling, the old window table's share is charged whether it is allocated or
        // not: the caches that size themselves from the budget must not grow into it
        // between rotations.
        let old = self.spill.as_ref().map_or(0, |sp| {
            (sp.old.capacity().max(sp.table_cap) * SLOT_BYTES) as u64
        });
        old + self.table.ram_bytes()
            + inner.cache.ram_bytes()
            + inner.stack.ram_bytes()
            + inner.waiting.ram_bytes()
            + inner.scratch.ram_bytes()
            + self.parallel_readers_bytes()
            + self.initial.capacity() as u64
    }

    /// What the backedge readers of parallel BFS may hold (the numbering thread's and each
    /// worker's, the latter counted again with the engine's buffers): counted from the
    /// first chunk, before they fill.
    fn parallel_readers_bytes(&self) -> u64 {
        if !self.shares_index() {
            return self.inner.reader.ram_bytes();
        }
        let per = (READER_BLOCKS * backedge::BLOCK_BYTES) as u64 + (128 << 10);
        per * (self.threads as u64 + 1)
    }
}

impl RecordsEdges for CombackStore<'_> {
    fn make_room(&mut self, batch: &StateBatch) -> Result<(), StoreError> {
        let n = batch.len();
        for i in 0..n {
            self.check(batch.get(i), n as u64)?;
        }
        while self.table.needs_growth(n as u64) {
            self.grow(n as u64)?;
        }
        Ok(())
    }

    #[inline]
    fn key(&self, state: &[u8]) -> u64 {
        descriptor(state, self.opts.hash_bits)
    }

    #[inline]
    fn touch_key(&self, key: u64) {
        self.table.touch(key)
    }

    fn batch_done(&mut self) {
        self.publish_if_resized();
    }

    /// Pass 2 of a batch: the cache entry of each first candidate, so that the cache misses
    /// of a batch overlap (pass 1, in `prepare`, touched the home slots).
    fn touch_candidates(&mut self, keys: &[u64]) {
        let mut touch = 0u32;
        for &d in keys {
            if let Some(id) = self.table.first_candidate(d) {
                touch ^= self.inner.cache.touch(id);
            }
        }
        std::hint::black_box(touch);
    }

    fn insert_keyed(
        &mut self,
        state: &[u8],
        key: u64,
        via: Option<Via>,
        scope: Scope,
    ) -> Result<Option<Insert>, StoreError> {
        self.insert_descriptor(state, via, key, scope)
    }

    /// The runs hold whole descriptors: no fingerprint to read.
    fn run_match(
        &mut self,
        id: StateId,
        state: &[u8],
        key: u64,
    ) -> Result<Option<u32>, StoreError> {
        let c = Self::candidate(
            self.model,
            &self.back,
            &self.initial,
            &self.opts,
            &mut self.inner,
            id,
            state,
            key,
            true,
        )?;
        Ok(match c {
            Candidate::Match { depth } => Some(depth),
            Candidate::Mismatch { .. } => None,
        })
    }

    fn repoint(&mut self, id: StateId, bound: u32, via: Via) -> Result<(), StoreError> {
        if self.opts.path_optimisation == PathOptimisation::On {
            self.maybe_repoint(id, bound, via)?;
        }
        Ok(())
    }

    fn scratch(&mut self) -> &mut BatchScratch {
        &mut self.scratch
    }
}

impl WindowTable for StateTable {
    fn window_slots(&self) -> usize {
        self.capacity()
    }

    fn window_bytes(&self) -> u64 {
        (self.capacity() * SLOT_BYTES) as u64
    }
}

impl WindowHost for CombackStore<'_> {
    type Table = StateTable;
    type Shape = ();
    const RUNS: &'static str = RUNS;

    /// A third each, where the other stores take half: the two windows give a third of the
    /// table's RAM to the state cache and the block caches, which decide how much a far
    /// duplicate costs to settle (a replay), while the windows only decide how many
    /// duplicates are far. Under `--memory 32M -o`, Peterson-PT-3 took 25.4 s with halves
    /// (its block caches squeezed to 0.45 MiB: 5.8 M misses) and 11.1 s with thirds (1.6 MiB,
    /// 0.3 M misses; 4 rotations instead of 3); SharedMemory-PT-000010 20.5 → 12.6 s;
    /// Kanban-PT-00005 under 24M 45.3 → 13.3 s (with the block caches' working size,
    /// [`CombackStore::leave_block_cache_room`]). Where the caches were not short
    /// (SwimmingPool-PT-03 and Anderson-PT-06 under 256M) it was within the runs' noise
    /// (±5%).
    fn spilled_window_slots(&self, cap: usize) -> usize {
        cap / 3
    }

    fn runs_place(
        &self,
    ) -> (
        std::path::PathBuf,
        bool,
        std::sync::Arc<crate::storage::Budget>,
    ) {
        self.disk.runs_place()
    }

    fn window(
        &mut self,
    ) -> (
        &mut StateTable,
        &mut u64,
        &mut Option<Box<Spill<StateTable>>>,
    ) {
        (&mut self.table, &mut self.young_start, &mut self.spill)
    }

    fn count(&self) -> u64 {
        self.back.len()
    }

    fn empty_table(&self) -> StateTable {
        StateTable::with_slots(self.opts.hash_bits, 0)
    }

    fn new_table(&self, cap: usize, _shape: ()) -> Result<StateTable, StoreError> {
        Ok(StateTable::with_slots(self.opts.hash_bits, cap))
    }

    fn charge(&mut self, extra: u64) {
        self.ram_account
            .set(self.ram_without_backedges() + extra, 0, 0);
    }

    fn trim_caches(&mut self) -> Result<(), StoreError> {
        self.back.trim_cache()
    }

    fn publish(&mut self) {
        self.publish_ram();
    }

    fn pairs_in<F>(&mut self, from: u64, to: u64, f: F) -> Result<(), StoreError>
    where
        F: FnMut(u64, u64) -> Result<(), StoreError>,
    {
        self.back.descriptors_in(from, to, f)
    }
}

impl StateStore for CombackStore<'_> {
    fn index_spills(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "comback"
    }

    fn insert(&mut self, state: &[u8], via: Option<Via>) -> Result<Insert, StoreError> {
        self.check(state, 1)?;
        if self.table.needs_growth(1) {
            self.grow(1)?;
        }
        let d = descriptor(state, self.opts.hash_bits);
        let r = self.insert_descriptor(state, via, d, Scope::All);
        self.publish_if_resized();
        Ok(r?.expect("scope All inserts"))
    }

    records_edges_inserts!();

    /// Batches of [`RAM_BATCH`] while the index is in RAM (the home slots and the cached
    /// vectors of a batch are asked for together); under a budget once the index has
    /// spilled, so that lookups that reach the runs are batched (sorted by descriptor
    /// against the runs, then rebuilt in state number order), bounded so that the window's
    /// young table takes the batch whole.
    fn delayed_batch(&self) -> Option<usize> {
        delayed_batch_len(
            self.disk.budget().limit(),
            self.width,
            self.spill.as_deref(),
            self.table.capacity(),
            &self.batch_account,
            Some(RAM_BATCH),
        )
    }

    /// Pins every [`cache::PIN_EVERY`]-th state of the DFS search path, to rebuild from
    /// (sparser once the pins fill their [`PATH_SHARE`] of the budget).
    /// A backtrack changes nothing: the pins below the new top are left until a new state
    /// replaces them, since a pin off the path is still the right vector of its id
    /// (measured: truncating them at backtracks cost SwimmingPool-PT-01 in DFS, 64-entry
    /// cache, 2.6% of its search-path hits and 0.7% more replays).
    fn on_search_path(&mut self, step: PathStep<'_>) {
        if let PathStep::Expand { id, depth, state } = step {
            let depth = depth.min(u32::MAX as u64) as u32;
            if self.inner.stack.push(depth, id, state) {
                self.publish_ram();
            }
        }
    }

    fn set_threads(&mut self, threads: usize) {
        self.threads = threads;
        // The parallel path's readers count from now on.
        self.publish_ram();
    }

    /// Its state table and cache take a few bytes a state: chunks of the default size
    /// would add a fifth to its peak RSS on Kanban-PT-00005 (47 → 70 MiB; 59 MiB with
    /// small ones, which were also faster there).
    fn small_chunks(&self) -> bool {
        true
    }

    fn chunks_on_one_thread(&self) -> bool {
        false
    }

    /// With more than one thread, while the index is in RAM and the waiting set holds state
    /// numbers (the BFS open set is then the id range the chunks are cut from): the state
    /// table, the state cache, the backedges and the chunk's parents (see [`Shared`]). On
    /// one thread the delayed batches are faster: they insert each new state in the same
    /// pass that looked it up, where the chunked path probes it again.
    fn shared_index(&mut self) -> Option<SharedIndex<'_>> {
        self.shared_split().map(|(view, _)| view)
    }

    /// The backedge blocks the threads read for their replays.
    fn adopt_reads(&mut self, readers: &mut [SegReader]) -> Result<(), StoreError> {
        for r in readers {
            self.back.adopt(r)?;
        }
        Ok(())
    }

    /// Rebuilds the chunk's parents together into the waiting buffer (variant 4's batch
    /// replay, one walk over the union of their paths).
    fn prepare_shared(&mut self, parents: std::ops::Range<StateId>) -> Result<(), StoreError> {
        let inner = &mut self.inner;
        let w = &inner.waiting;
        let covered = parents.start >= w.first && parents.end <= w.first + w.ends.len() as u64
            || parents.is_empty();
        if covered {
            return Ok(());
        }
        let before = inner.waiting.ram_bytes();
        Self::reconstruct_range(
            self.model,
            &self.back,
            &self.initial,
            inner,
            parents.start,
            parents.end,
        )?;
        if inner.waiting.ram_bytes() != before {
            self.publish_ram();
        }
        Ok(())
    }

    /// The view, and the numbering thread's [`shared::Resolve`] of what it leaves
    /// undecided.
    fn shared_split(&mut self) -> Option<(SharedIndex<'_>, Option<Box<dyn Resolver + '_>>)> {
        if !self.shares_index() {
            return None;
        }
        let fp_exact = self.table.fingerprint_is_descriptor();
        let len = self.back.len();
        let (back, descriptors) = self.back.split(READER_BLOCKS);
        let Inner {
            cache,
            waiting,
            counters,
            scratch,
            reader,
            ..
        } = &mut self.inner;
        let view = Shared {
            table: &self.table,
            cache,
            back,
            len,
            initial: &self.initial,
            waiting,
            mask: top_mask(self.opts.hash_bits),
        };
        let resolve = shared::Resolve {
            view,
            reader,
            descriptors,
            model: self.model,
            fp_exact,
            scratch,
            counters,
        };
        Some((SharedIndex::Comback(view), Some(Box::new(resolve))))
    }

    /// Caches the states rebuilt during the chunk (by the workers and by the numbering
    /// thread), as the one-thread lookup caches what it replays, and takes back the
    /// numbering thread's backedge blocks.
    fn shared_done(&mut self, rebuilt: &mut [&mut Rebuilt]) -> Result<(), StoreError> {
        let Inner {
            cache,
            counters,
            scratch,
            reader,
            ..
        } = &mut self.inner;
        let mut put = |r: &mut Rebuilt| {
            counters.reconstructions += r.replays;
            counters.reconstruction_fires += r.fires;
            counters.cache_hits += r.cache_hits;
            r.drain(|id, depth, state| cache.put_replayed(id, depth, state));
        };
        put(&mut scratch.rebuilt);
        rebuilt.iter_mut().for_each(|r| put(r));
        self.back.adopt(reader)?;
        // The numbering thread's scratch grew during the chunk, when nothing could be
        // published.
        self.publish_ram();
        Ok(())
    }

    /// Inserts the new states one by one in id order through the one-thread path (which
    /// probes for each one's empty slot, appends its backedge and descriptor and caches
    /// it): only the lookups of the chunk's successors ran on the threads.
    fn add_new<'a>(
        &mut self,
        count: usize,
        new: &(dyn Fn(usize) -> NewState<'a> + Sync + 'a),
        _threads: usize,
        looked_up: u64,
    ) -> Result<(), StoreError> {
        // The lookups on the threads, less those the one-thread path counted again.
        let counters = &mut self.inner.counters;
        counters.generated = counters.generated + looked_up - count as u64;
        let mask = top_mask(self.opts.hash_bits);
        // Each insert probes for an empty slot: a random miss, asked for a few states ahead
        // (the lookups that found these states absent ran on other threads).
        for i in 0..count.min(AHEAD) {
            self.table.touch(new(i).hash & mask);
        }
        let r = (0..count).try_for_each(|i| {
            if i + AHEAD < count {
                self.table.touch(new(i + AHEAD).hash & mask);
            }
            let n = new(i);
            self.check(n.state, (count - i) as u64)?;
            if self.table.needs_growth(1) {
                self.grow(1)?;
            }
            let id = self.back.len();
            match self.insert_descriptor(n.state, Some(n.via), n.hash & mask, Scope::All)? {
                Some(Insert::New(got)) if got == id => Ok(()),
                other => Err(StoreError::Invalid {
                    store: "comback",
                    message: format!(
                        "state {id} of a parallel chunk was not new to the store ({other:?})"
                    ),
                }),
            }
        });
        self.publish_if_resized();
        r
    }

    fn len(&self) -> u64 {
        self.back.len()
    }

    /// Rebuilt by replay with state numbers in the waiting set; with vectors in the waiting
    /// set (variant 4 off) the engine keeps them.
    fn states_back(&self) -> StatesBack {
        match self.opts.waiting_set {
            WaitingSet::StateNumbers => StatesBack::Rebuilt,
            WaitingSet::Vectors => StatesBack::No,
        }
    }

    fn get(&mut self, id: StateId) -> Result<Option<&[u8]>, StoreError> {
        if id >= self.back.len() {
            return Ok(None);
        }
        let inner = &mut self.inner;
        if let Some((v, _, _)) = inner.cache.get(id) {
            inner.got.clear();
            v.append_to(&mut inner.got);
            return Ok(Some(&inner.got));
        }
        if id == 0 {
            return Ok(Some(&self.initial));
        }
        if inner.waiting.get(id).is_none() {
            let batch = (inner.cache.recent_len() as u64 / 16).clamp(64, WAITING_BATCH_MAX);
            let end = (id + batch).min(self.back.len());
            Self::reconstruct_range(self.model, &self.back, &self.initial, inner, id, end)?;
        }
        Ok(Some(inner.waiting.get(id).expect("just rebuilt")))
    }

    fn exactness(&self) -> Exactness {
        Exactness::Exact
    }

    /// The state table, the full-state cache, the search path, the waiting-set buffer, and
    /// the backedge vector's hot window, block cache and block index.
    fn ram_bytes(&self) -> u64 {
        self.ram_without_backedges()
            + self.back.ram_bytes()
            + self.spill.as_ref().map_or(0, |sp| sp.runs.ram_bytes())
    }

    fn disk_bytes(&self) -> u64 {
        self.back.disk_bytes() + self.spill.as_ref().map_or(0, |sp| sp.runs.disk_bytes())
    }

    fn sync_accounts(&self) {
        if let Some(sp) = &self.spill {
            sp.runs.update_account();
        }
    }

    /// The RAM structures, plus the smallest backedge block cache that replays can live
    /// with (the automatic size's floor, see [`backedge::cache_bytes_for`]).
    fn min_ram_bytes(&self) -> u64 {
        // A budgeted index may spill: then it needs the runs' cache and merge buffers too.
        let runs = match self.disk.budget().limit() {
            MemoryLimit::Bytes(_) => HashRuns::min_ram_bytes(),
            MemoryLimit::Unlimited => 0,
        };
        self.ram_bytes() + backedge::MIN_CACHE + runs
    }

    /// Flushes the backedge vector (the dirty blocks and the hot window: what changed since
    /// the last checkpoint) and records its mark, the options, the table size and the
    /// counters; the state table and the cache are not saved.
    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        if !self.disk.is_kept() {
            return Err(StoreError::Invalid {
                store: "comback",
                message: "checkpoints need a kept run directory (the storage is scratch)".into(),
            });
        }
        let backedges = self.back.checkpoint()?;
        let mut files = vec![backedges.backedges.file(), backedges.descriptors.file()];
        let window = match &mut self.spill {
            None => None,
            Some(sp) => Some(sp.checkpoint(self.young_start, &mut files)?),
        };
        let blob = encode_blob(&CombackCheckpoint {
            opts: self.opts,
            table_slots: self.table.capacity() as u64,
            counters: self.inner.counters,
            backedges,
            window,
        });
        self.disk.checkpointed();
        Ok(StoreMark { blob, files })
    }

    fn summary(&self) -> Option<String> {
        let c = self.inner.counters;
        let back = self.back.ram_bytes() + self.back.disk_bytes();
        Some(format!(
            "{} reconstructions ({} firings), longest collision list {}, {}-bit hashes, backedges {:.1} MiB ({:.1} bytes/state)",
            c.reconstructions,
            c.reconstruction_fires,
            c.max_collision_list,
            self.opts.hash_bits,
            back as f64 / (1u64 << 20) as f64,
            back as f64 / self.back.len().max(1) as f64
        ))
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let c = self.inner.counters;
        let n = self.back.len().max(1) as f64;
        let o = &self.opts;
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: serde_json::Value| {
            m.insert(k.to_string(), v);
        };
        put("hash_bits", json!(o.hash_bits));
        put("comback_cache_entries", json!(self.inner.cache.entries()));
        put("comback_cache_auto", json!(o.cache == AUTO_CACHE));
        put("comback_widest_level", json!(self.levels.widest()));
        put("comback_block_cache_bytes", json!(o.block_cache));
        put(
            "comback_path_optimisation",
            json!(format!("{:?}", o.path_optimisation).to_lowercase()),
        );
        put(
            "comback_move_to_front",
            json!(format!("{:?}", o.move_to_front).to_lowercase()),
        );
        put(
            "comback_reconstruction",
            json!(format!("{:?}", o.reconstruction).to_lowercase()),
        );
        put(
            "comback_waiting_set",
            json!(match o.waiting_set {
                WaitingSet::StateNumbers => "state-numbers",
                WaitingSet::Vectors => "vectors",
            }),
        );
        put("generated_states", json!(c.generated));
        put("reconstructions", json!(c.reconstructions));
        put("reconstruction_fires", json!(c.reconstruction_fires));
        put("backward_unfires", json!(c.backward_unfires));
        put("backward_early_rejects", json!(c.backward_early_rejects));
        put("backward_fallbacks", json!(c.backward_fallbacks));
        put("cache_hits", json!(c.cache_hits));
        put("search_path_hits", json!(c.stack_hits));
        put("false_candidates", json!(c.false_candidates));
        put("descriptor_collisions", json!(c.descriptor_collisions));
        put("longest_collision_list", json!(c.max_collision_list));
        put("path_repoints", json!(c.path_repoints));
        put("move_to_front_swaps", json!(c.move_to_front_swaps));
        put("waiting_set_batches", json!(c.waiting_batches));
        put("waiting_set_reconstructed", json!(c.waiting_reconstructed));
        put("state_table_rebuilds", json!(c.table_rebuilds));
        put("state_table_slots", json!(self.table.capacity()));
        put("state_table_bytes", json!(self.table.ram_bytes()));
        put(
            "state_table_bytes_per_state",
            json!(self.table.ram_bytes() as f64 / n),
        );
        put("cache_bytes", json!(self.inner.cache.ram_bytes()));
        put("cache_packing", json!(self.inner.cache.packing().name()));
        // The whole backedge table (RAM part + segment file): what `backedge_bytes` always
        // meant; the split follows.
        let back_total = self.back.ram_bytes() + self.back.disk_bytes();
        put("backedge_bytes", json!(back_total));
        put("backedge_bytes_per_state", json!(back_total as f64 / n));
        put("backedge_ram_bytes", json!(self.back.ram_bytes()));
        put(
            "backedge_ram_bytes_per_state",
            json!(self.back.ram_bytes() as f64 / n),
        );
        put("backedge_disk_bytes", json!(self.back.disk_bytes()));
        put(
            "backedge_disk_bytes_per_state",
            json!(self.back.disk_bytes() as f64 / n),
        );
        let (hits, misses) = self.back.cache_counts();
        put("backedge_cache_hits", json!(hits));
        put("backedge_cache_misses", json!(misses));
        // Included in the backedge figures above.
        let (dram, ddisk) = self.back.descriptor_bytes();
        put("descriptor_ram_bytes", json!(dram));
        put("descriptor_disk_bytes", json!(ddisk));
        let (hits, misses) = self.back.descriptor_cache_counts();
        put("descriptor_cache_hits", json!(hits));
        put("descriptor_cache_misses", json!(misses));
        if let Some(sp) = &self.spill {
            sp.report(&mut m, self.back.len());
        }
        m
    }
}
