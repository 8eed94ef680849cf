//! Δ-markings: semi-explicit storage with reconstitution (Evangelista & Pradat-Peyre).
//!
//! Every state has a *record*, numbered by its id. A state met at depth `d` with
//! `d mod kδ = 0` (and the initial state) is stored **explicitly**: its record points into
//! [`explicit::ExplicitStates`]. Every other state is stored **symbolically** as a Δ record
//! `(predecessor id, transition id)`. Invariant: following predecessors from any record reaches
//! an explicit record in at most `kδ − 1` steps (its *distance*). Membership is decided by
//! **reconstitution**: the hash index ([`index::Index`]) gives candidate ids; a candidate is
//! rebuilt by firing its sequence forward from its explicit ancestor (or, with backward
//! firing, the new state is unfired along the candidate's sequence and compared with the
//! explicit ancestor), and compared with the new state.
//!
//! Record layout (bit-packed, eight records to one `bits`-byte record of a segment vector of
//! the run's storage, so a record costs exactly `bits = t_bits + p_bits` bits before the
//! vector compresses its blocks):
//!
//! ```text
//! | pred id or explicit index : p_bits | transition code : t_bits |
//! ```
//!
//! The transition code is the transition id for a Δ record and `transition_count` (one past
//! the last id) for an explicit record, so `t_bits = bits(transition_count)`; `p_bits` fits
//! every id so far and widens (all records re-encoded, amortised O(1) per record) when the
//! count reaches `2^p_bits`. The index grows without states and, past its hash prefix,
//! is rebuilt by reconstituting every state once (see [`index`]).
//!
//! **Stratified caching** ([`Replacement`], `--delta-index-limit`, DFS only): the index keeps
//! at most a given number of entries; when full, it forgets the entries of one stratum
//! (depth mod S at insertion, tagged in the index) after another, except the states on the
//! DFS search path. Records stay (they are on disk, ids are dense, and other records may
//! reconstitute through them): forgetting a state only means that meeting it again numbers it
//! again. The search still visits every reachable state and terminates (a path never
//! repeats a state, since path states are never forgotten); the counts become upper bounds
//! and the LTS is strongly bisimilar to the state space ([`Exactness::Revisiting`]).
//!
//! Optimisations (each can be switched off):
//! * **predecessor update** ([`PredUpdate`]): when a state is met again from a parent whose
//!   distance + 1 is smaller than the state's distance, its record is repointed to that
//!   parent; every record that reaches the explicit state through it is shortened too. Only
//!   exact distances are compared, so chains never grow. A record is repointed only where
//!   the write is free (hot, or in a cached block that is dirty already), never at the
//!   price of rewriting a sealed block: see `maybe_repoint`.
//! * **backward firing** ([`Firing`]): for models that can fire backwards, the new state is
//!   unfired along the candidate's sequence, abandoning at the first disabled unfiring (a
//!   negative marking), and compared at the end with the explicit ancestor *encoded* (no
//!   decoding of the explicit state).
//! * **state collapsing** ([`Collapse`]): explicit states as per-component dictionary
//!   indices.
//!
//! A small direct-mapped cache of recently built states (id → state, distance) shortens
//! reconstitutions: a walk stops at the first cached ancestor. New states, reconstituted
//! states and every intermediate state of a successful forward or backward check are
//! cached. It is bounded (about 512 KiB by default, `--delta-cache-states`), counted in the
//! RAM figures, and never changes an answer.

pub mod bits;
pub mod explicit;
pub mod index;

use super::full::{eq_bytes, state_hash};
use super::path::{self, Link, PathRecords, Repoint, Repointed, Unfired, Walker};
use super::records::{Disk, Layout};
use super::state_cache::{Packing, Region, Wide};
use super::window::{
    delayed_batch_len, index_share, rotate, start_spilling, Scope, Spill, WindowHost, WindowMark,
    WindowTable, MIN_TABLE, RAM_BATCH,
};
use super::{
    decode_blob, encode_blob, Exactness, Insert, Order, StateBatch, StateId, StateStore,
    StatesBack, StoreMark, Via,
};
use super::{
    records_edges_inserts, storage_needed, BatchScratch, PathStep, RecordsEdges, RunShape,
    StoreSpec,
};
use crate::error::StoreError;
use crate::model::{Fired, Model, TransitionId};
use crate::storage::filter::Filter;
use crate::storage::runs::HashRuns;
use crate::storage::{Account, MemoryLimit, Storage};
use bits::{bits_for, PackedArray, PackedMark};
pub use explicit::Collapse;
use explicit::{Equal, ExplicitMark, ExplicitStates};
use index::{GrowError, Index, Placement, Step};

/// Whether Δ records are repointed to shorter paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PredUpdate {
    On,
    Off,
}

/// How a candidate is compared with a new state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Firing {
    /// Unfire the new state along the candidate's sequence when the model supports it
    /// (otherwise fire forward).
    Backward,
    /// Always rebuild the candidate by firing forward from its explicit ancestor.
    Forward,
}

/// Options of the Δ store.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeltaOptions {
    /// kδ ≥ 1: states at depths multiple of kδ are explicit.
    pub k: u32,
    pub pred_update: PredUpdate,
    pub firing: Firing,
    pub collapse: Collapse,
    /// Entries of the reconstitution cache (rounded up to a power of two; 0 = a default of
    /// about 512 KiB of states).
    pub cache_states: usize,
    /// Stratified caching: forget index entries to keep at most a number of them.
    pub replace: Option<Replacement>,
    /// Under `--memory`, spill the index once it would pass this many slots (hidden
    /// `--delta-index-slots`: tests and benchmarks of the spilled index on small models;
    /// `None`: half the budget decides).
    #[serde(default)]
    pub index_slots: Option<u64>,
}

/// Stratified caching settings (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Replacement {
    /// Most entries of the index (states remembered).
    pub limit: u64,
    /// Number of strata S ≥ 1: an entry's stratum is its depth at insertion mod S.
    pub strata: u32,
}

impl Default for DeltaOptions {
    fn default() -> Self {
        DeltaOptions {
            k: 20,
            pred_update: PredUpdate::On,
            firing: Firing::Backward,
            collapse: Collapse::PerComponent,
            cache_states: 0,
            replace: None,
            index_slots: None,
        }
    }
}

impl StoreSpec for DeltaOptions {
    fn name(&self) -> &'static str {
        STORE
    }

    fn refuse(&self, run: &RunShape) -> Option<String> {
        self.replace?;
        let why = if run.order != Order::Dfs {
            "it needs --order dfs (a DFS never forgets the states of its search path, so it terminates; a BFS could meet forgotten states forever)"
        } else if run.checkpointed {
            "a run that forgets states cannot be checkpointed (its index is not saved)"
        } else {
            return None;
        };
        Some(format!("--delta-index-limit cannot be used here: {why}"))
    }

    /// Records and explicit states always live in segment files.
    fn needs_storage(&self) -> bool {
        true
    }

    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let st = storage.ok_or_else(|| storage_needed(self.name()))?;
        Ok(Box::new(DeltaStore::new(model, self.clone(), st)?))
    }

    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(DeltaStore::resume(
            model,
            self.clone(),
            storage,
            mark,
        )?))
    }
}

/// A decoded record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rec {
    Explicit(u64),
    Delta { pred: u64, t: TransitionId },
}

/// Where a predecessor walk stopped.
#[derive(Clone, Copy, Debug)]
enum Root {
    /// At an explicit record (its explicit index).
    Explicit(u64),
    /// At a cached state (its cache slot and its distance).
    Cached { slot: usize, dist: u32 },
}

/// Counters reported in the stats.
#[derive(Default, Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Counters {
    reconstitutions: u64,
    backward_checks: u64,
    fired: u64,
    unfired: u64,
    early_abandons: u64,
    cache_hits: u64,
    false_candidates: u64,
    pred_updates: u64,
    /// Possibly shorter paths (by the distance bound) not repointed because the write was
    /// not free (see `maybe_repoint`).
    pred_updates_skipped: u64,
    record_widenings: u64,
    gets: u64,
    /// Index entries forgotten by stratified caching, and the passes that forgot them.
    forgotten: u64,
    replacement_passes: u64,
}

/// Δ's state cache: one direct-mapped region of the path stores' state cache
/// ([`state_cache::Region`]: 12-byte headers, 64-bit state numbers, the states unpacked),
/// slot `id mod n`, the distance to the nearest explicit state as the path length.
struct StateCache {
    width: usize,
    mask: usize,
    region: Region<Wide>,
}

impl StateCache {
    fn new(entries: usize, width: usize) -> Self {
        let n = entries.next_power_of_two().max(1);
        StateCache {
            width,
            mask: n - 1,
            region: Region::new(n, Some(width), Packing::Bytes),
        }
    }
    #[inline(always)]
    fn slot(&self, id: u64) -> usize {
        id as usize & self.mask
    }
    #[inline(always)]
    fn find(&self, id: u64) -> Option<usize> {
        let s = self.slot(id);
        self.region
            .lookup(s, id, Packing::Bytes, self.width)
            .map(|_| s)
    }
    #[inline(always)]
    fn state(&self, slot: usize) -> &[u8] {
        self.region.packed(slot)
    }
    #[inline(always)]
    fn dist(&self, slot: usize) -> u32 {
        self.region.depth(slot)
    }
    #[inline(always)]
    fn put(&mut self, id: u64, state: &[u8], dist: u32) {
        let s = self.slot(id);
        self.region.put(s, id, dist, state, Packing::Bytes);
    }
    fn set_dist(&mut self, id: u64, dist: u32) {
        let s = self.slot(id);
        self.region.set_depth(s, id, dist);
    }
    fn ram_bytes(&self) -> u64 {
        self.region.ram_bytes()
    }
}

/// Scratch space and counters of reconstitutions and candidate checks.
struct Inner {
    /// The path core's scratch (`walk.a`: the state a reconstitution rebuilt; `walk.trail`:
    /// the states met while unfiring, cached on success).
    walk: Walker,
    cache: StateCache,
    c: Counters,
}

/// How records are coded: the transition code's width and the code of explicit records.
#[derive(Clone, Copy, Debug)]
struct Codes {
    t_bits: u32,
    transitions: u64,
}

impl Codes {
    #[inline]
    fn decode(self, v: u64) -> Rec {
        let p = v >> self.t_bits;
        let code = v & ((1 << self.t_bits) - 1);
        if code == self.transitions {
            Rec::Explicit(p)
        } else {
            Rec::Delta {
                pred: p,
                t: TransitionId(code as u32),
            }
        }
    }
}

/// Δ's records as the path core walks them ([`path::PathRecords`]): starts are the cached
/// states and the explicit ones ([`path::RootPolicy::EveryK`]).
struct Walk<'a> {
    records: &'a PackedArray,
    codes: Codes,
    explicit: &'a mut ExplicitStates,
    cache: &'a mut StateCache,
    k: u32,
    cache_hits: &'a mut u64,
}

impl PathRecords for Walk<'_> {
    type Start = Root;
    const STORE: &'static str = STORE;

    /// Every record reaches an explicit one in at most kδ − 1 steps.
    fn max_edges(&self) -> usize {
        self.k as usize - 1
    }

    #[inline(always)]
    fn link(&mut self, id: StateId) -> Result<Link<Root>, StoreError> {
        if let Some(slot) = self.cache.find(id) {
            *self.cache_hits += 1;
            return Ok(Link::Start(Root::Cached {
                slot,
                dist: self.cache.dist(slot),
            }));
        }
        Ok(match self.codes.decode(self.records.get(id)?) {
            Rec::Explicit(x) => Link::Start(Root::Explicit(x)),
            Rec::Delta { pred, t } => Link::Edge {
                parent: pred,
                transition: t,
                depth: 0,
            },
        })
    }

    fn load(&mut self, start: Root, out: &mut Vec<u8>) -> Result<(), StoreError> {
        match start {
            Root::Explicit(x) => self.explicit.get(x, out),
            Root::Cached { slot, .. } => {
                out.clear();
                out.extend_from_slice(self.cache.state(slot));
                Ok(())
            }
        }
    }

    fn equals(&mut self, start: Root, state: &[u8]) -> Result<bool, StoreError> {
        Ok(match start {
            Root::Explicit(x) => self.explicit.equals(x, state)? == Equal::Yes,
            Root::Cached { slot, .. } => eq_bytes(self.cache.state(slot), state),
        })
    }

    /// Every state rebuilt is cached, with its distance.
    #[inline(always)]
    fn replayed(&mut self, start: Root, id: StateId, _: u32, edges: u32, state: &[u8]) {
        self.cache.put(id, state, start.dist() + edges);
    }
}

impl Root {
    /// Edges from the start to its explicit ancestor.
    fn dist(self) -> u32 {
        match self {
            Root::Explicit(_) => 0,
            Root::Cached { dist, .. } => dist,
        }
    }
}

/// Sizes of the record vector (groups of eight records, 20–64 bytes): 4 KiB blocks (about
/// 1,000 records; a miss reads and decompresses one), a 32 KiB hot window of the newest
/// records and a 2 MiB block cache. Reconstitutions walk at most kδ − 1 predecessors, which
/// in BFS lie in the last kδ levels; the reconstitution cache (states) spares most walks, and
/// the block cache holds the record blocks that the remaining walks revisit. Every byte of it
/// counts against the ~10 bytes a state of the whole store (RAM + disk); since the filtered
/// records take about 1.2 bytes a state on disk instead of 3.3–3.9, the cache can be larger
/// than the 512 KiB it was: at kδ = 50, 512 KiB → 2 MiB cut block misses from 349,000 to
/// 144,000 on Peterson-PT-3 (13.4 → 10.0 s CPU, +0.4 byte a state) and from 1.1 million to
/// 190,000 on TCPcondis-PT-05 (19.6 → 10.8 s); 4 MiB would take QuasiCertifProtocol-PT-06
/// (2.3 million states) over 10 bytes a state (9.54 → 10.47). The blocks are filtered
/// ([`Filter::PackedFields`], split at the transition code) so that the predecessor ids,
/// which grow slowly from record to record, compress as small differences.
fn records_layout(t_bits: u32) -> Layout {
    Layout {
        block_bytes: 4 << 10,
        hot_blocks: 8,
        cache_bytes: 2 << 20,
        zstd_level: crate::storage::segment::ZSTD_LEVEL,
        filter: Filter::PackedFields {
            low_bits: t_bits as u8,
        },
        codec: crate::storage::segment::Codec::Zstd,
    }
}

/// What a checkpoint of a Δ store records (`StoreMark::blob`). The hash index is not saved:
/// resume rebuilds it by reconstituting every state once.
#[derive(serde::Serialize, serde::Deserialize)]
struct DeltaCheckpoint {
    opts: DeltaOptions,
    backward: Firing,
    t_bits: u32,
    p_bits: u32,
    count: u64,
    records: PackedMark,
    explicit: ExplicitMark,
    index_slots: u64,
    index_hash_bits: u32,
    index_rebuilds: u64,
    counters: Counters,
    /// The spilled index's window and runs, once it has spilled.
    window: Option<WindowMark>,
}

/// Name of the index runs' files (`delta.index.run.G`).
const RUNS: &str = "delta.index";

/// The Δ-markings store.
pub struct DeltaStore<'m> {
    model: &'m dyn Model,
    disk: Disk,
    /// The budget account of the RAM structures (index, cache, dictionaries), so that under
    /// `--memory` the vectors' caches leave room for them.
    ram_account: crate::storage::Account,
    opts: DeltaOptions,
    width: usize,
    t_bits: u32,
    /// The model's transition count: the transition code of explicit records.
    transitions: u64,
    p_bits: u32,
    records: PackedArray,
    explicit: ExplicitStates,
    index: Index,
    count: u64,
    /// Backward firing is in use (asked for and supported by the model).
    backward: Firing,
    inner: Inner,
    index_rebuilds: u64,
    /// (parent id, its exact distance) of the last parent whose distance was needed.
    parent_memo: Option<(u64, u32)>,
    /// With stratified caching: the DFS search path (`dfs_path[d]` is the state at depth `d`
    /// whose successors are being inserted, and its ancestors), as the engine reports it
    /// ([`StateStore::on_search_path`]).
    dfs_path: Vec<u64>,
    /// The stratum the next replacement pass forgets first.
    next_victim: u32,
    /// First state number `index` holds, which stores ids relative to it: 0 until the index
    /// spills, then the window's young start.
    young_start: u64,
    /// The older part of the index once it has spilled (see docs/ARCHITECTURE.md, "The
    /// disk-resident visited set"): `old` stores ids relative to `old_start`; the runs hold
    /// (state hash, id) pairs, written by reconstituting the states in id order.
    spill: Option<Box<Spill<Index>>>,
    /// What a delayed batch takes in RAM (see [`StateStore::delayed_batch`]).
    batch_account: Account,
    /// A batch's search-tree edges and a spilled batch's run lookups.
    scratch: BatchScratch,
}

const STORE: &str = "delta";

fn invalid(message: String) -> StoreError {
    StoreError::Invalid {
        store: STORE,
        message,
    }
}

impl<'m> DeltaStore<'m> {
    /// A Δ store for the states of `model`, which must have fixed-width states; its records
    /// and explicit states are segment vectors of `storage`.
    pub fn new(
        model: &'m dyn Model,
        opts: DeltaOptions,
        storage: &Storage,
    ) -> Result<Self, StoreError> {
        Self::with_hash_bits(model, opts, index::HASH_BITS, storage)
    }

    fn records_name(bits: u32) -> String {
        format!("delta.records.w{bits}")
    }

    /// Reopens the store of a checkpoint (`mark` from [`StateStore::checkpoint`]) made with
    /// the same model and options. The record and explicit-state vectors are cut back to
    /// their marks; the hash index is rebuilt by reconstituting every state once, in id
    /// order (about one firing per state: a state's predecessor is usually still in the
    /// reconstitution cache). From then on the store answers exactly as the interrupted one
    /// would have.
    pub fn resume(
        model: &'m dyn Model,
        opts: DeltaOptions,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Self, StoreError> {
        let c: DeltaCheckpoint = decode_blob(STORE, &mark.blob)?;
        // The index's hash width is one the index can hold (another had failed an assertion
        // in the index: a panic).
        if !(8..=index::MAX_HASH_BITS).contains(&c.index_hash_bits) {
            return Err(invalid(format!(
                "an index of {}-bit hashes; the index keeps 8 to {}",
                c.index_hash_bits,
                index::MAX_HASH_BITS
            )));
        }
        if c.opts.k != opts.k || c.opts.collapse != opts.collapse {
            return Err(invalid(format!(
                "the checkpoint was made with kδ = {} and collapsing {:?}, not kδ = {} and {:?}",
                c.opts.k, c.opts.collapse, opts.k, opts.collapse
            )));
        }
        let mut st = Self::build(model, opts, c.index_hash_bits, Disk::new(storage), Some(&c))?;
        if st.t_bits != c.t_bits {
            return Err(invalid(format!(
                "the checkpoint has {}-bit transition codes, this model needs {}",
                c.t_bits, st.t_bits
            )));
        }
        if st.records.len() != c.count || st.records.bits() != c.t_bits + c.p_bits {
            return Err(invalid(format!(
                "the record file holds {} records of {} bits, the checkpoint {} of {}",
                st.records.len(),
                st.records.bits(),
                c.count,
                c.t_bits + c.p_bits
            )));
        }
        st.count = c.count;
        st.backward = c.backward;
        st.index_rebuilds = c.index_rebuilds;
        // Rebuild the index (or, once spilled, the window's two tables) from the states
        // themselves.
        match c.window {
            None => {
                st.index = st.index_of(c.index_slots, c.index_hash_bits, 0, st.count)?;
            }
            Some(w) => {
                let cap = w.table_cap;
                let old = st.index_of(cap, c.index_hash_bits, w.old_start, w.young_start)?;
                st.index = st.index_of(cap, c.index_hash_bits, w.young_start, st.count)?;
                st.young_start = w.young_start;
                let runs = HashRuns::open(storage.dir(), RUNS, storage.budget.clone(), &w.runs)?;
                st.spill = Some(Box::new(Spill {
                    old,
                    old_start: w.old_start,
                    table_cap: cap as usize,
                    runs,
                    rotations: w.rotations,
                }));
            }
        }
        st.inner.c = c.counters;
        st.publish_ram();
        Ok(st)
    }

    /// An index of `slots` slots (grown if need be) keeping `hash_bits` bits, holding the
    /// states `[from, to)` with ids relative to `from`, reconstituted in id order (about one
    /// firing per state: a state's predecessor is usually still in the cache).
    fn index_of(
        &mut self,
        slots: u64,
        hash_bits: u32,
        from: u64,
        to: u64,
    ) -> Result<Index, StoreError> {
        // The slot count comes from a checkpoint: an index larger than the machine can hold
        // is a resource limit (exit 6), not an allocation that aborts the process.
        crate::sys::check_structure(
            &format!("the delta store's index of {slots} slots"),
            slots.checked_mul(8),
        )?;
        let mut ix = Index::new(slots, hash_bits);
        self.hashes_in(from, to, |id, h| {
            if !ix.has_room(1) {
                ix.grow().map_err(grow_error)?;
            }
            ix.place(h, id - from).map_err(grow_error)
        })?;
        Ok(ix)
    }

    /// Calls `f(id, hash)` for the states `[from, to)`, reconstituted in id order.
    fn hashes_in(
        &mut self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, u64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for id in from..to {
            let Some(s) = self.get(id)? else {
                return Err(invalid(format!("state {id} does not reconstitute")));
            };
            f(id, state_hash(s))?;
        }
        Ok(())
    }

    /// As [`DeltaStore::new`], with an index that starts with `hash_bits` hash bits (tests
    /// use few to exercise the rebuild).
    pub(crate) fn with_hash_bits(
        model: &'m dyn Model,
        opts: DeltaOptions,
        hash_bits: u32,
        storage: &Storage,
    ) -> Result<Self, StoreError> {
        Self::build(model, opts, hash_bits, Disk::new(storage), None)
    }

    /// A new store, or (`from`) one whose vectors are reopened at a checkpoint's marks.
    fn build(
        model: &'m dyn Model,
        opts: DeltaOptions,
        hash_bits: u32,
        disk: Disk,
        from: Option<&DeltaCheckpoint>,
    ) -> Result<Self, StoreError> {
        if opts.k == 0 {
            return Err(invalid("kδ must be at least 1".into()));
        }
        if let Some(r) = opts.replace {
            if r.strata == 0 || r.strata > 64 || r.limit == 0 {
                return Err(invalid(format!(
                    "stratified caching needs 1..=64 strata and a limit of at least one state, not {} strata and {}",
                    r.strata, r.limit
                )));
            }
            if from.is_some() {
                return Err(invalid(
                    "a run with stratified caching (--delta-index-limit) cannot be resumed: its index is not checkpointed".into(),
                ));
            }
        }
        let Some(width) = model.state_len() else {
            return Err(invalid(
                "the Δ store needs fixed-width states (this model's vary)".into(),
            ));
        };
        let t_bits = bits_for(model.transition_count() as u64).max(1);
        let p_bits = 8;
        let backward = match opts.firing {
            Firing::Forward => Firing::Forward,
            Firing::Backward => {
                let mut s = Vec::new();
                let mut d = Vec::new();
                let supported = model.transition_count() > 0
                    && model.initial_state(&mut s).is_ok()
                    && !matches!(
                        model.unfire(&s, TransitionId(0), &mut d),
                        Ok(Fired::Unsupported) | Err(_)
                    );
                if supported {
                    Firing::Backward
                } else {
                    Firing::Forward
                }
            }
        };
        let cache_states = if opts.cache_states == 0 {
            // About 512 KiB: a fixed cost, whatever the number of states.
            let n = ((1usize << 19) / (width + 12)).clamp(256, 1 << 15);
            1 << (usize::BITS - 1 - n.leading_zeros())
        } else {
            crate::sys::check_structure(
                &format!(
                    "the reconstitution cache of {} states (--delta-cache-states)",
                    opts.cache_states
                ),
                opts.cache_states
                    .checked_next_power_of_two()
                    .and_then(|n| Region::<Wide>::bytes_for(n, Some(width), Packing::Bytes)),
            )?;
            opts.cache_states
        };
        let (records, explicit, p_bits) = match from {
            None => (
                PackedArray::new(
                    &disk,
                    &Self::records_name(t_bits + p_bits),
                    t_bits + p_bits,
                    records_layout(t_bits),
                )?,
                ExplicitStates::new(&disk, width, opts.collapse)?,
                p_bits,
            ),
            Some(c) => (
                PackedArray::open(&disk, &c.records, records_layout(t_bits))?,
                ExplicitStates::open(&disk, width, &c.explicit)?,
                c.p_bits,
            ),
        };
        let ram_account = disk.shared_account("delta.index");
        let batch_account = disk.budget().account("bfs.batch");
        let st = DeltaStore {
            model,
            disk,
            ram_account,
            width,
            t_bits,
            transitions: model.transition_count() as u64,
            p_bits,
            records,
            explicit,
            index: Index::with_tags(1024, hash_bits, Self::tag_bits(&opts)),
            count: 0,
            backward,
            inner: Inner {
                walk: Walker::default(),
                cache: StateCache::new(cache_states, width),
                c: Counters::default(),
            },
            index_rebuilds: 0,
            parent_memo: None,
            dfs_path: Vec::new(),
            next_victim: 0,
            young_start: 0,
            spill: None,
            batch_account,
            scratch: Default::default(),
            opts,
        };
        st.publish_ram();
        Ok(st)
    }

    /// Tag bits of the index: the stratum of each entry, with stratified caching.
    fn tag_bits(opts: &DeltaOptions) -> u32 {
        opts.replace.map_or(0, |r| bits_for(r.strata as u64 - 1))
    }

    /// The index tag of a state inserted at `depth`.
    fn stratum(&self, depth: u64) -> u64 {
        self.opts.replace.map_or(0, |r| depth % r.strata as u64)
    }

    /// Stratified caching: makes room for `extra` entries under the limit by forgetting
    /// the entries of one stratum after another (never those on the DFS path), until the
    /// index holds at most S/(S + 1) of the limit with the new entries (so that a pass, which
    /// scans the whole table, frees about one stratum's worth at a time), or every stratum
    /// has been tried (then only path states are left, and too many of them is a capacity
    /// error).
    fn forget(&mut self, extra: u64) -> Result<(), StoreError> {
        let Some(r) = self.opts.replace else {
            return Ok(());
        };
        if self.index.len() + extra <= r.limit {
            return Ok(());
        }
        let target = r.limit - r.limit / (r.strata as u64 + 1);
        let on_path: std::collections::HashSet<u64> = self.dfs_path.iter().copied().collect();
        let mut tried = 0;
        while self.index.len() + extra > target && tried < r.strata {
            let victim = self.next_victim as u64;
            self.next_victim = (self.next_victim + 1) % r.strata;
            tried += 1;
            let n = self
                .index
                .remove_where(|id, tag| tag == victim && !on_path.contains(&id));
            let c = &mut self.inner.c;
            c.forgotten += n;
            c.replacement_passes += 1;
        }
        if self.index.len() + extra > r.limit {
            return Err(StoreError::CapacityExceeded {
                store: STORE,
                message: format!(
                    "--delta-index-limit {} is too small: {} states on the search path cannot be forgotten",
                    r.limit,
                    self.index.len()
                ),
            });
        }
        Ok(())
    }

    /// Tells the budget what the RAM structures hold (called when the index grows).
    fn publish_ram(&self) {
        self.ram_account.set(
            self.index_ram_bytes() + self.explicit.dict_bytes() + self.inner.cache.ram_bytes(),
            0,
            0,
        );
    }

    /// The index's tables. Once spilling, the old window table's share is charged whether it
    /// is allocated or not: the caches that size themselves from the budget must not grow
    /// into it between rotations.
    fn index_ram_bytes(&self) -> u64 {
        let old = self
            .spill
            .as_ref()
            .map_or(0, |sp| sp.old.ram_bytes().max(self.index.ram_bytes()));
        self.index.ram_bytes() + old
    }

    /// Whether candidates are compared by backward firing.
    pub fn firing(&self) -> Firing {
        self.backward
    }

    fn encode(&self, r: Rec) -> u64 {
        match r {
            Rec::Explicit(x) => self.transitions | (x << self.t_bits),
            Rec::Delta { pred, t } => t.0 as u64 | (pred << self.t_bits),
        }
    }

    #[inline]
    fn rec(&self, id: u64) -> Result<Rec, StoreError> {
        Ok(self.codes().decode(self.records.get(id)?))
    }

    fn codes(&self) -> Codes {
        Codes {
            t_bits: self.t_bits,
            transitions: self.transitions,
        }
    }

    /// The path core's scratch and the records as it walks them.
    fn walker(&mut self) -> (&mut Walker, Walk<'_>) {
        let codes = self.codes();
        let Inner { walk, cache, c, .. } = &mut self.inner;
        let recs = Walk {
            records: &self.records,
            codes,
            explicit: &mut self.explicit,
            cache,
            k: self.opts.k,
            cache_hits: &mut c.cache_hits,
        };
        (walk, recs)
    }

    /// The exact distance of `id` from its explicit ancestor (records only, no firing).
    fn exact_dist(&self, id: u64) -> Result<u32, StoreError> {
        let mut cur = id;
        let mut d = 0u32;
        loop {
            match self.rec(cur)? {
                Rec::Explicit(_) => return Ok(d),
                Rec::Delta { pred, .. } => {
                    d += 1;
                    if d >= self.opts.k {
                        return Err(invalid(format!(
                            "record {id}: no explicit ancestor within kδ = {} steps",
                            self.opts.k
                        )));
                    }
                    cur = pred;
                }
            }
        }
    }

    fn parent_dist(&mut self, parent: u64) -> Result<u32, StoreError> {
        if let Some((p, d)) = self.parent_memo {
            if p == parent {
                return Ok(d);
            }
        }
        let d = self.exact_dist(parent)?;
        self.parent_memo = Some((parent, d));
        Ok(d)
    }

    /// Rebuilds state `id` into `inner.walk.a` by forward firing; returns its distance
    /// bound.
    fn reconstitute(&mut self, id: u64) -> Result<u32, StoreError> {
        self.inner.c.reconstitutions += 1;
        let model = self.model;
        let (walk, mut recs) = self.walker();
        let start = path::replay(walk, model, &mut recs, id)?;
        let n = walk.path.len() as u32;
        self.inner.c.fired += n as u64;
        Ok(start.dist() + n)
    }

    /// Compares candidate `c` with `s`; `Some(distance bound of c)` when equal.
    fn same(&mut self, c: u64, s: &[u8]) -> Result<Option<u32>, StoreError> {
        let inner = &mut self.inner;
        if let Some(slot) = inner.cache.find(c) {
            inner.c.cache_hits += 1;
            return Ok(eq_bytes(inner.cache.state(slot), s).then_some(inner.cache.dist(slot)));
        }
        if self.backward == Firing::Backward {
            if let Some(found) = self.same_backward(c, s)? {
                return Ok(found);
            }
            // The model stopped supporting backward firing: fire forward.
        }
        let d = self.reconstitute(c)?;
        Ok(eq_bytes(&self.inner.walk.a, s).then_some(d))
    }

    /// [`DeltaStore::same`] by unfiring `s` along `c`'s sequence; `None` when the model
    /// cannot fire backwards.
    fn same_backward(&mut self, c: u64, s: &[u8]) -> Result<Option<Option<u32>>, StoreError> {
        self.inner.c.backward_checks += 1;
        let model = self.model;
        let (walk, mut recs) = self.walker();
        let (outcome, unfires) = path::unfire(walk, model, &mut recs, c, s, true)?;
        let inner = &mut self.inner;
        inner.c.unfired += unfires;
        let start = match outcome {
            Unfired::Equal(start) => start,
            Unfired::Different => return Ok(Some(None)),
            Unfired::NoPredecessor => {
                inner.c.early_abandons += 1;
                return Ok(Some(None));
            }
            Unfired::Unsupported => return Ok(None),
        };
        // The unfired states were c's ancestors: cache them like forward firing would.
        let Inner { walk, cache, .. } = inner;
        let dist = walk.path.len() as u32 + start.dist();
        let w = self.width;
        for k in 1..walk.path.len() {
            cache.put(
                walk.path[k].0,
                &walk.trail[(k - 1) * w..k * w],
                dist - k as u32,
            );
        }
        cache.put(c, s, dist);
        Ok(Some(Some(dist)))
    }

    /// Predecessor update ([`path::repoint_if_shorter`]): repoints `c` to `via` when that
    /// path to an explicit state is shorter. `bound` is an upper bound of c's distance.
    fn maybe_repoint(&mut self, c: u64, bound: u32, via: Via) -> Result<(), StoreError> {
        if self.opts.pred_update == PredUpdate::Off {
            return Ok(());
        }
        if path::repoint_if_shorter(self, c, bound, via)? == Repointed::Skipped {
            self.inner.c.pred_updates_skipped += 1;
        }
        Ok(())
    }

    /// Re-encodes every record with one more predecessor bit.
    fn widen_records(&mut self) -> Result<(), StoreError> {
        let bits = self.t_bits + self.p_bits + 1;
        if bits > 64 {
            return Err(StoreError::CapacityExceeded {
                store: STORE,
                message: format!("more than 2^{} states", self.p_bits),
            });
        }
        let mut wider = PackedArray::new(
            &self.disk,
            &Self::records_name(bits),
            bits,
            records_layout(self.t_bits),
        )?;
        for i in 0..self.records.len() {
            wider.push(self.records.get(i)?)?;
        }
        std::mem::replace(&mut self.records, wider).give_up();
        self.p_bits += 1;
        self.inner.c.record_widenings += 1;
        Ok(())
    }

    fn check(&self, state: &[u8]) -> Result<(), StoreError> {
        if state.len() != self.width {
            return Err(invalid(format!(
                "state of {} bytes in a store of {}-byte states",
                state.len(),
                self.width
            )));
        }
        Ok(())
    }

    fn reserve(&mut self, extra: u64) -> Result<(), StoreError> {
        self.forget(extra)?;
        if self.index.has_room(extra) {
            return Ok(());
        }
        if let Some(sp) = &self.spill {
            if extra * 10 > sp.table_cap as u64 * 9 {
                return Err(sp.too_small(STORE, extra));
            }
            return rotate(self);
        }
        while !self.index.has_room(extra) {
            if self.should_spill()? {
                return start_spilling(self);
            }
            match self.index.grow() {
                Ok(()) => {}
                Err(GrowError::TooLarge) => self.rebuild_index()?,
                Err(e) => return Err(grow_error(e)),
            }
        }
        self.publish_ram();
        Ok(())
    }

    /// Under a budget (and without stratified caching, whose index is a cache): whether the
    /// index, grown by a quarter, would pass its share of the budget or not fit next to the
    /// old table while it is rehashed. Then it spills instead.
    fn should_spill(&mut self) -> Result<bool, StoreError> {
        let budget = self.disk.budget().clone();
        let bytes = self.index.ram_bytes();
        let new = bytes + bytes / 4;
        match budget.limit() {
            MemoryLimit::Bytes(limit) if self.opts.replace.is_none() => {
                let slots = self.index.slots() + self.index.slots() / 4;
                let over_share = new > index_share(limit)
                    || self.opts.index_slots.is_some_and(|max| slots > max);
                let others = self.explicit.dict_bytes() + self.inner.cache.ram_bytes();
                let claim = budget.claim(
                    "the Δ index",
                    others + bytes + new,
                    records_layout(self.t_bits).cache_bytes + HashRuns::min_ram_bytes(),
                    &format!(
                        "a table of {new} bytes rehashed next to the {bytes} it replaces, for more than {} states",
                        self.count
                    ),
                );
                // What the other structures hold now (the LTS writer, the batch, the runs'
                // filters) counts too: a growth that would leave the records' cache less than
                // its working size spills instead. Peterson-PT-3 under `--memory 32M -o`
                // grew to 11.8 MiB, left the cache 0.1 MiB and ran 100 times slower.
                let cache = records_layout(self.t_bits).cache_bytes;
                let room = budget
                    .headroom(&self.ram_account)
                    .map_or(u64::MAX, |r| r + self.records.spare_cache_bytes());
                let over_room = others + bytes + new + cache > room;
                if (over_share || over_room || claim.is_err())
                    && self.index.slots() >= 2 * MIN_TABLE as u64
                {
                    return Ok(true);
                }
                claim?;
                // Charged before it exists, and the records' cache trimmed to what is left:
                // old and new table are both resident while it is rehashed (Peterson-PT-3
                // under 32M peaked 2.2 MiB over the budget and the baseline when the cache
                // was left to notice on its next read).
                self.ram_account.set(others + bytes + new, 0, 0);
                self.records.trim_cache()?;
                Ok(false)
            }
            MemoryLimit::Bytes(_) => Ok(false),
            MemoryLimit::Unlimited => {
                crate::sys::check_ceiling("the Δ index", new)?;
                Ok(false)
            }
        }
    }

    /// Hash bits of a window table of `slots` slots: the index's, or more where the table
    /// would outgrow them (a window table never grows, so it never needs the rebuild).
    fn window_hash_bits(&self, slots: usize) -> u32 {
        (bits_for(slots as u64) + 8)
            .max(self.index.hash_bits())
            .min(index::MAX_HASH_BITS)
    }

    /// Looks `s` (hash `h`) up in the old window table and then, if `runs`, in the runs;
    /// `Some((id, distance bound))` when found.
    fn find_older(
        &mut self,
        s: &[u8],
        h: u64,
        runs: bool,
    ) -> Result<Option<(u64, u32)>, StoreError> {
        let Some(mut sp) = self.spill.take() else {
            return Ok(None);
        };
        let r = self.find_in(&mut sp, s, h, runs);
        self.spill = Some(sp);
        r
    }

    fn find_in(
        &mut self,
        sp: &mut Spill<Index>,
        s: &[u8],
        h: u64,
        runs: bool,
    ) -> Result<Option<(u64, u32)>, StoreError> {
        let mut p = sp.old.probe(h);
        while let Step::Candidate(local) = sp.old.next(&mut p) {
            let c = local + sp.old_start;
            match self.same(c, s)? {
                Some(bound) => return Ok(Some((c, bound))),
                None => self.inner.c.false_candidates += 1,
            }
        }
        if !runs || !sp.runs.may_contain(h) {
            return Ok(None);
        }
        let mut ids = Vec::new();
        sp.runs.find_sorted(&[(h, 0)], |_, id| ids.push(id))?;
        for c in ids {
            let found = self.same(c, s)?;
            sp.runs.count_outcome(found.is_some());
            if let Some(bound) = found {
                return Ok(Some((c, bound)));
            }
        }
        Ok(None)
    }

    /// Rebuilds the index with 8 more hash bits, a quarter more slots, by reconstituting every
    /// state once (ids in order, so parents are usually cached). Needed only when the index
    /// outgrows its hash prefix (2^26 slots with the default 30 bits).
    fn rebuild_index(&mut self) -> Result<(), StoreError> {
        let bits = self.index.hash_bits() + 8;
        if bits > index::MAX_HASH_BITS {
            return Err(grow_error(GrowError::TooLarge));
        }
        let mut ix = Index::with_tags(
            self.index.slots() + self.index.slots() / 4,
            bits,
            Self::tag_bits(&self.opts),
        );
        // The entries the index holds (all states, unless stratified caching forgot some).
        let entries: Vec<(u64, u64)> = if self.opts.replace.is_some() {
            let mut v = Vec::with_capacity(self.index.len() as usize);
            self.index.for_each(|id, tag| v.push((id, tag)));
            v.sort_unstable();
            v
        } else {
            Vec::new()
        };
        if self.count > 0 {
            ix.ensure_id(self.count - 1).map_err(grow_error)?;
        }
        let all = self.opts.replace.is_none();
        let n = if all {
            self.count
        } else {
            entries.len() as u64
        };
        for k in 0..n {
            let (id, tag) = if all { (k, 0) } else { entries[k as usize] };
            let Some(s) = self.get(id)? else {
                return Err(invalid(format!(
                    "rebuilding the index: state {id} does not reconstitute"
                )));
            };
            let h = state_hash(s);
            if !ix.has_room(1) {
                ix.grow().map_err(grow_error)?;
            }
            ix.place_tagged(h, id, tag).map_err(grow_error)?;
        }
        self.index = ix;
        self.index_rebuilds += 1;
        Ok(())
    }

    /// Looks `s` (hash `h`) up in `scope` and, unless the scope is the window only, inserts
    /// it if new (`None`: not in the window); the index has room.
    fn insert_hashed(
        &mut self,
        s: &[u8],
        h: u64,
        via: Option<Via>,
        scope: Scope,
    ) -> Result<Option<Insert>, StoreError> {
        if self.opts.replace.is_some() {
            // Forgotten states keep their ids: ids outgrow the slot count.
            self.index.ensure_id(self.count).map_err(grow_error)?;
        }
        let mut p = self.index.probe(h);
        let mut found = None;
        while let Step::Candidate(local) = self.index.next(&mut p) {
            let c = local + self.young_start;
            match self.same(c, s)? {
                Some(bound) => {
                    found = Some((c, bound));
                    break;
                }
                None => self.inner.c.false_candidates += 1,
            }
        }
        if found.is_none() && scope != Scope::Young {
            // A delayed batch asks the runs afterwards, sorted.
            found = self.find_older(s, h, scope == Scope::All)?;
        }
        if let Some((c, bound)) = found {
            if let Some(v) = via {
                self.maybe_repoint(c, bound, v)?;
            }
            return Ok(Some(Insert::Seen(c)));
        }
        if scope == Scope::Window {
            return Ok(None);
        }
        let id = self.count;
        let tag = self.stratum(via.map_or(0, |v| v.depth));
        let (rec, dist) = match via {
            None => (None, 0),
            Some(v) => {
                let pd = self.parent_dist(v.parent)?;
                if path::RootPolicy::EveryK(self.opts.k).is_root(v.depth, Some(pd)) {
                    (None, 0)
                } else {
                    (
                        Some(Rec::Delta {
                            pred: v.parent,
                            t: v.transition,
                        }),
                        pd + 1,
                    )
                }
            }
        };
        let rec = match rec {
            Some(r) => r,
            None => Rec::Explicit(self.explicit.push(s)?),
        };
        while id >> self.p_bits != 0 {
            self.widen_records()?;
        }
        self.records.push(self.encode(rec))?;
        let local = id - self.young_start;
        match self.index.insert_tagged(&p, local, tag) {
            Placement::Placed => {}
            Placement::NeedsGrowth => match self.index.place_tagged(h, local, tag) {
                Ok(()) => {}
                // A window table keeps enough hash bits never to need the rebuild.
                Err(GrowError::TooLarge) if self.spill.is_none() => {
                    self.rebuild_index()?;
                    self.index.place_tagged(h, id, tag).map_err(grow_error)?;
                }
                Err(e) => return Err(grow_error(e)),
            },
        }
        self.count += 1;
        self.inner.cache.put(id, s, dist);
        Ok(Some(Insert::New(id)))
    }

    /// RAM bytes of the record array (its vector's hot window, cache and block index).
    pub fn record_bytes(&self) -> u64 {
        self.records.ram_bytes()
    }
}

/// The predecessor update's side of the rule ([`path::repoint_if_shorter`]) on distances to
/// the explicit ancestor.
impl Repoint for DeltaStore<'_> {
    fn parent_len(&mut self, parent: StateId) -> Result<u32, StoreError> {
        self.parent_dist(parent)
    }

    /// Only where the write is free: the record is hot or its block is cached and dirty
    /// already. A repoint in a clean sealed block costs that block a re-filter,
    /// recompression and rewrite when it leaves the cache. In DFS nearly every state is met
    /// again by a shorter path, anywhere in the file (Kanban-PT-00005, kδ = 50: 2.77 M
    /// repoints for 2.55 M states), and those rewrites made the run 5× slower than without
    /// repoints; allowing them for up to 1/16 or 1/256 of the records still cost 1.3–1.6×
    /// (docs/DELTA.md). In BFS most repoints are skipped too, at no cost in time. A skipped
    /// repoint only leaves a longer chain: exactly what `PredUpdate::Off` leaves.
    fn writable(&mut self, id: StateId) -> bool {
        self.records.set_is_free(id)
    }

    /// An explicit record is its own root (0: never repointed).
    fn exact_len(&mut self, id: StateId, _: u32) -> Result<u32, StoreError> {
        match self.rec(id)? {
            Rec::Explicit(_) => Ok(0),
            Rec::Delta { .. } => self.exact_dist(id),
        }
    }

    fn set_edge(&mut self, id: StateId, via: Via, len: u32) -> Result<(), StoreError> {
        let v = self.encode(Rec::Delta {
            pred: via.parent,
            t: via.transition,
        });
        self.records.set(id, v)?;
        self.inner.cache.set_dist(id, len);
        self.inner.c.pred_updates += 1;
        if self.parent_memo.map(|(p, _)| p) == Some(id) {
            self.parent_memo = None;
        }
        Ok(())
    }
}

fn grow_error(e: GrowError) -> StoreError {
    StoreError::CapacityExceeded {
        store: STORE,
        message: match e {
            GrowError::TooLarge => format!(
                "the hash index would need more than 2^{} slots",
                index::MAX_HASH_BITS - 4
            ),
            GrowError::Clustered => format!(
                "more than {} states share a hash prefix",
                (1u32 << index::DISP_BITS) - 1
            ),
        },
    }
}

impl RecordsEdges for DeltaStore<'_> {
    fn make_room(&mut self, batch: &StateBatch) -> Result<(), StoreError> {
        for i in 0..batch.len() {
            self.check(batch.get(i))?;
        }
        self.reserve(batch.len() as u64)
    }

    #[inline]
    fn key(&self, state: &[u8]) -> u64 {
        state_hash(state)
    }

    #[inline]
    fn touch_key(&self, key: u64) {
        self.index.touch(key)
    }

    fn insert_keyed(
        &mut self,
        state: &[u8],
        key: u64,
        via: Option<Via>,
        scope: Scope,
    ) -> Result<Option<Insert>, StoreError> {
        self.insert_hashed(state, key, via, scope)
    }

    fn run_match(&mut self, id: StateId, state: &[u8], _: u64) -> Result<Option<u32>, StoreError> {
        self.same(id, state)
    }

    fn repoint(&mut self, id: StateId, bound: u32, via: Via) -> Result<(), StoreError> {
        self.maybe_repoint(id, bound, via)
    }

    fn scratch(&mut self) -> &mut BatchScratch {
        &mut self.scratch
    }
}

impl WindowTable for Index {
    fn window_slots(&self) -> usize {
        self.slots() as usize
    }

    fn window_bytes(&self) -> u64 {
        self.ram_bytes()
    }
}

impl WindowHost for DeltaStore<'_> {
    type Table = Index;
    /// Hash bits.
    type Shape = u32;
    const RUNS: &'static str = RUNS;

    fn runs_place(
        &self,
    ) -> (
        std::path::PathBuf,
        bool,
        std::sync::Arc<crate::storage::Budget>,
    ) {
        self.disk.runs_place()
    }

    fn window(&mut self) -> (&mut Index, &mut u64, &mut Option<Box<Spill<Index>>>) {
        (&mut self.index, &mut self.young_start, &mut self.spill)
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn empty_table(&self) -> Index {
        Index::new(16, index::HASH_BITS)
    }

    /// The young table's hash bits, or more where a table of `cap` slots would outgrow them
    /// (a window table never grows, so it never needs the rebuild).
    fn shape(&mut self, cap: usize) -> u32 {
        self.window_hash_bits(cap)
    }

    fn new_table(&self, cap: usize, hash_bits: u32) -> Result<Index, StoreError> {
        Ok(Index::new(cap as u64, hash_bits))
    }

    fn charge(&mut self, extra: u64) {
        self.ram_account.set(self.index_ram_bytes() + extra, 0, 0);
    }

    fn trim_caches(&mut self) -> Result<(), StoreError> {
        self.records.trim_cache()
    }

    fn publish(&mut self) {
        self.publish_ram();
    }

    fn pairs_in<F>(&mut self, from: u64, to: u64, f: F) -> Result<(), StoreError>
    where
        F: FnMut(u64, u64) -> Result<(), StoreError>,
    {
        self.hashes_in(from, to, f)
    }
}

impl StateStore for DeltaStore<'_> {
    fn index_spills(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        STORE
    }

    fn insert(&mut self, state: &[u8], via: Option<Via>) -> Result<Insert, StoreError> {
        self.check(state)?;
        self.reserve(1)?;
        let r = self.insert_hashed(state, state_hash(state), via, Scope::All)?;
        Ok(r.expect("scope All inserts"))
    }

    records_edges_inserts!();

    /// Without stratified caching: batches of [`RAM_BATCH`] while the index is in RAM (the
    /// home slots of a batch are asked for together); under a
    /// budget once the index has spilled, so that lookups that reach the runs are batched
    /// (sorted by hash against the runs, then compared in id order), bounded so that the
    /// young table takes the batch whole.
    fn delayed_batch(&self) -> Option<usize> {
        if self.opts.replace.is_some() {
            return None;
        }
        delayed_batch_len(
            self.disk.budget().limit(),
            Some(self.width),
            self.spill.as_deref(),
            self.index.slots() as usize,
            &self.batch_account,
            Some(RAM_BATCH),
        )
    }

    /// Stratified caching keeps the search path (`dfs_path[d]`: the state at depth `d`).
    fn on_search_path(&mut self, step: PathStep<'_>) {
        let (PathStep::Expand { id, depth, .. } | PathStep::Backtrack { id, depth }) = step;
        if self.opts.replace.is_some() {
            self.dfs_path.truncate(depth as usize);
            self.dfs_path.push(id);
        }
    }

    fn len(&self) -> u64 {
        self.count
    }

    /// Reconstitutes state `id` (forward firing from its nearest explicit or cached
    /// ancestor). `Ok(false)` when `id` is out of range; an error when the records are corrupt.
    fn states_back(&self) -> StatesBack {
        StatesBack::Rebuilt
    }

    fn get(&mut self, id: StateId) -> Result<Option<&[u8]>, StoreError> {
        if id >= self.count {
            return Ok(None);
        }
        self.inner.c.gets += 1;
        if let Some(slot) = self.inner.cache.find(id) {
            return Ok(Some(self.inner.cache.state(slot)));
        }
        self.reconstitute(id)?;
        Ok(Some(&self.inner.walk.a))
    }

    fn exactness(&self) -> Exactness {
        match self.opts.replace {
            None => Exactness::Exact,
            Some(_) => Exactness::Revisiting {
                forgotten: self.inner.c.forgotten,
            },
        }
    }

    fn ram_bytes(&self) -> u64 {
        self.records.ram_bytes()
            + self.index_ram_bytes()
            + self.spill.as_ref().map_or(0, |sp| sp.runs.ram_bytes())
            + self.explicit.record_bytes()
            + self.explicit.dict_bytes()
            + self.inner.cache.ram_bytes()
    }

    fn disk_bytes(&self) -> u64 {
        self.records.disk_bytes()
            + self.explicit.disk_bytes()
            + self.spill.as_ref().map_or(0, |sp| sp.runs.disk_bytes())
    }

    fn sync_accounts(&self) {
        if let Some(sp) = &self.spill {
            sp.runs.update_account();
        }
    }

    /// The RAM structures, plus the record block cache of [`records_layout`]: below it every
    /// reconstitution reads record blocks back from disk, and a run that fits in seconds
    /// takes minutes re-reading gigabytes.
    fn min_ram_bytes(&self) -> u64 {
        // A budgeted index may spill: then it needs the runs' cache and merge buffers too.
        let runs = match self.disk.budget().limit() {
            MemoryLimit::Bytes(_) if self.opts.replace.is_none() => HashRuns::min_ram_bytes(),
            _ => 0,
        };
        self.ram_bytes() + records_layout(self.t_bits).cache_bytes + runs
    }

    /// Flushes the record and explicit-state vectors (dirty blocks and hot windows: what
    /// changed since the last checkpoint) and records their marks, the options, the
    /// dictionaries, the index size and the counters; the index and the cache are not saved.
    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        if !self.disk.is_kept() {
            return Err(invalid(
                "checkpoints need a kept run directory (the storage is scratch)".into(),
            ));
        }
        let records = self.records.checkpoint()?;
        let explicit = self.explicit.checkpoint()?;
        let mut files = vec![records.groups.file()];
        files.extend(ExplicitStates::files(&explicit));
        let window = match &mut self.spill {
            None => None,
            Some(sp) => Some(sp.checkpoint(self.young_start, &mut files)?),
        };
        let blob = encode_blob(&DeltaCheckpoint {
            opts: self.opts.clone(),
            backward: self.backward,
            t_bits: self.t_bits,
            p_bits: self.p_bits,
            count: self.count,
            records,
            explicit,
            index_slots: self.index.slots(),
            index_hash_bits: self.index.hash_bits(),
            index_rebuilds: self.index_rebuilds,
            counters: self.inner.c.clone(),
            window,
        });
        self.disk.checkpointed();
        Ok(StoreMark { blob, files })
    }

    fn summary(&self) -> Option<String> {
        let c = &self.inner.c;
        Some(format!(
            "kδ {}: {} explicit states, {} reconstitutions, {} firings, {} unfirings",
            self.opts.k,
            self.explicit.len(),
            c.reconstitutions,
            c.fired,
            c.unfired
        ))
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::Value;
        let inner = &self.inner;
        let c = &inner.c;
        let n = self.count.max(1) as f64;
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("k_delta", self.opts.k.into());
        put(
            "pred_update",
            (self.opts.pred_update == PredUpdate::On).into(),
        );
        put(
            "firing",
            match self.backward {
                Firing::Backward => "backward",
                Firing::Forward => "forward",
            }
            .into(),
        );
        put(
            "collapse",
            (self.explicit.collapse() == Collapse::PerComponent).into(),
        );
        put("explicit_states", self.explicit.len().into());
        put("delta_states", (self.count - self.explicit.len()).into());
        put("reconstitutions", c.reconstitutions.into());
        put("backward_checks", c.backward_checks.into());
        put("transitions_fired", c.fired.into());
        put("transitions_unfired", c.unfired.into());
        put("early_abandons", c.early_abandons.into());
        put("false_candidates", c.false_candidates.into());
        put("cache_hits", c.cache_hits.into());
        put("pred_updates", c.pred_updates.into());
        put("pred_updates_skipped", c.pred_updates_skipped.into());
        put("gets", c.gets.into());
        if let Some(r) = self.opts.replace {
            put("index_limit", r.limit.into());
            put("strata", r.strata.into());
            put("forgotten_states", c.forgotten.into());
            put("replacement_passes", c.replacement_passes.into());
            put("remembered_states", self.index.len().into());
        }
        put("record_bits", self.records.bits().into());
        let (hits, misses) = self.records.cache_counts();
        put("record_cache_hits", hits.into());
        put("record_cache_misses", misses.into());
        put("record_compactions", self.records.compactions().into());
        put("record_widenings", c.record_widenings.into());
        put("explicit_record_bytes", self.explicit.record_width().into());
        put("dictionary_widenings", self.explicit.widenings().into());
        put("explicit_reencodings", self.explicit.reencodings().into());
        put("index_slots", self.index.slots().into());
        put("index_growths", self.index.growths().into());
        put("index_slot_bits", self.index.slot_bits().into());
        put("index_hash_bits", self.index.hash_bits().into());
        put("index_rebuilds", self.index_rebuilds.into());
        put(
            "index_max_displacement",
            self.index.max_displacement().into(),
        );
        let rec = self.records.ram_bytes();
        let idx = self.index.ram_bytes();
        let exp = self.explicit.record_bytes();
        let dict = self.explicit.dict_bytes();
        let cache = inner.cache.ram_bytes();
        let disk = self.records.disk_bytes() + self.explicit.disk_bytes();
        put("record_bytes", rec.into());
        put("index_bytes", idx.into());
        put("explicit_bytes", exp.into());
        put("dictionary_bytes", dict.into());
        put("cache_bytes", cache.into());
        put("disk_bytes", disk.into());
        put("record_bytes_per_state", (rec as f64 / n).into());
        put("index_bytes_per_state", (idx as f64 / n).into());
        put(
            "total_bytes_per_state",
            ((rec + idx + exp + dict + cache + disk) as f64 / n).into(),
        );
        if let Some(sp) = &self.spill {
            sp.report(&mut m, self.count);
        }
        m
    }
}

#[cfg(test)]
mod tests;
