//! Visited-state stores. Every store answers one question — was this state seen before? — and
//! numbers states densely in insertion (discovery) order, the initial state first.

pub mod bitstate;
pub mod cache;
pub mod comback;
pub mod config;
pub mod delta;
pub mod full;
pub mod hashcompact;
pub mod path;
pub mod records;
pub mod slots;
pub mod snapshots;
pub mod tree;
pub mod window;

use crate::error::StoreError;
use crate::model::{Model, TransitionId};
use crate::storage::vec::SegReader;
use crate::storage::{FileMark, Storage};

pub use config::StoreConfig;

/// The search order. Defined here, below the engines, because stores depend on it too
/// (stratified caching needs DFS; the Δ store's explicit depths are BFS levels or DFS stack
/// sizes); `crate::engine::Order` is the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Breadth-first: depth is the number of BFS levels.
    Bfs,
    /// Depth-first: depth is the largest stack size.
    Dfs,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Bfs => "bfs",
            Order::Dfs => "dfs",
        }
    }
}

/// A state number: dense, in discovery order, the initial state is 0.
pub type StateId = u64;

/// The number reported by stores that cannot number states already seen (bit-state hashing
/// keeps no state numbers): `Insert::Seen(UNNUMBERED)`. Such a store cannot feed an LTS file.
pub const UNNUMBERED: StateId = u64::MAX;

/// The compressed state descriptor of `b` bits used by ComBack and hash compaction: the top
/// `b` bits of the stable state hash (xxh3-64, seed 0), left-aligned (the low `64 - b` bits
/// are zero). `b` is in `1..=64`.
#[inline(always)]
pub fn descriptor(state: &[u8], bits: u32) -> u64 {
    full::state_hash(state) & top_mask(bits)
}

/// The search-tree edge of every candidate of a delayed batch (see
/// [`StateStore::insert_many`]), into `out`.
pub fn batch_vias(
    parents: &[(StateId, u32)],
    parent_depth: u64,
    batch: &StateBatch,
    out: &mut Vec<Via>,
) {
    out.clear();
    for &(parent, count) in parents {
        for _ in 0..count {
            out.push(Via {
                parent,
                transition: batch.transition(out.len()),
                depth: parent_depth + 1,
            });
        }
    }
    debug_assert_eq!(out.len(), batch.len());
}

/// A change of the DFS search path ([`StateStore::on_search_path`]).
#[derive(Clone, Copy, Debug)]
pub enum PathStep<'a> {
    /// The engine starts expanding `id` (vector `state`) at `depth` (the initial state at 0).
    Expand {
        id: StateId,
        depth: u64,
        state: &'a [u8],
    },
    /// The engine is back at `id`, at `depth`: deeper states are off the path.
    Backtrack { id: StateId, depth: u64 },
}

/// A store that records each state's search-tree edge (ComBack's backedges, Δ's records):
/// `insert_batch` and `insert_many` both come down to a batch with one [`Via`] per
/// successor ([`insert_with_vias`]).
pub(crate) trait RecordsEdges {
    /// Finds or inserts the states of `batch` in order, successor `i` reached by `vias[i]`,
    /// one at a time.
    fn insert_all(
        &mut self,
        batch: &StateBatch,
        vias: &[Via],
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError>;
    /// The same for a delayed batch ([`StateStore::insert_many`]) once the index has
    /// spilled: resolved against the runs in sorted sweeps.
    fn insert_many_spilled(
        &mut self,
        batch: &StateBatch,
        vias: &[Via],
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError>;
    /// The store's reusable vector of a batch's edges, and whether its index has spilled.
    fn edges(&mut self) -> (&mut Vec<Via>, bool);
}

/// [`StateStore::insert_many`] of a [`RecordsEdges`] store (`delayed`), and its
/// `insert_batch` (one parent with every successor of the batch).
pub(crate) fn insert_with_vias<S: RecordsEdges>(
    s: &mut S,
    parents: &[(StateId, u32)],
    parent_depth: u64,
    batch: &StateBatch,
    delayed: bool,
    out: &mut Vec<Insert>,
) -> Result<(), StoreError> {
    let (scratch, spilled) = s.edges();
    let mut vias = std::mem::take(scratch);
    batch_vias(parents, parent_depth, batch, &mut vias);
    let r = if delayed && spilled {
        s.insert_many_spilled(batch, &vias, out)
    } else {
        s.insert_all(batch, &vias, out)
    };
    *s.edges().0 = vias;
    r
}

/// A mask of the top `bits` bits of a `u64` (`bits` in `1..=64`).
#[inline(always)]
pub fn top_mask(bits: u32) -> u64 {
    debug_assert!((1..=64).contains(&bits));
    u64::MAX << (64 - bits)
}

/// The result of inserting a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// The state was not in the store; it now has this number.
    New(StateId),
    /// The state was already stored under this number.
    Seen(StateId),
}

/// How a state was reached: the search-tree edge from its parent. Stores that keep paths
/// instead of states (ComBack, Δ-markings) record it; others ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Via {
    pub parent: StateId,
    pub transition: TransitionId,
    /// Depth of the new state: the parent's depth + 1 (the initial state has depth 0).
    pub depth: u64,
}

/// How a store answers [`StateStore::get`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatesBack {
    /// It keeps every vector (a copy out of its tables or files).
    Kept,
    /// It rebuilds them (replaying paths): each `get` costs firings.
    Rebuilt,
    /// It cannot: the engine keeps the vectors it still needs.
    No,
}

/// Whether a store can lose states.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Exactness {
    /// Every reachable state is found and told apart from every other.
    Exact,
    /// States may be omitted (hash collisions); the estimate is an upper bound.
    Probabilistic { omission_probability: f64 },
    /// Every reachable state is visited, but the store forgot `forgotten` states to bound
    /// its memory (stratified caching), and a forgotten state met again is numbered again:
    /// state and transition counts are upper bounds, and the LTS is strongly bisimilar to the
    /// state space (minimising it gives the exact quotient).
    Revisiting { forgotten: u64 },
}

/// A visited-state store.
pub trait StateStore {
    /// The name used in stats (`--store` value).
    fn name(&self) -> &'static str;
    /// Inserts a state reached by `via` (`None` for the initial state), numbering it if new.
    fn insert(&mut self, state: &[u8], via: Option<Via>) -> Result<Insert, StoreError>;
    /// Inserts every successor in `batch` of state `parent` (at depth `parent_depth`), in
    /// order; `out[i]` is the result for successor `i`. Stores override this to overlap the
    /// memory latency of a batch's lookups.
    fn insert_batch(
        &mut self,
        parent: StateId,
        parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        out.clear();
        for i in 0..batch.len() {
            let via = Via {
                parent,
                transition: batch.transition(i),
                depth: parent_depth + 1,
            };
            out.push(self.insert(batch.get(i), Some(via))?);
        }
        Ok(())
    }
    /// Delayed duplicate detection: `Some(n)` when the store wants BFS to hand it the
    /// successors of many consecutive parents at once, up to about `n` of them (its index has
    /// a part on disk that it reads in sorted batches: see `insert_many`). `None` (the
    /// default): one parent at a time through `insert_batch`.
    fn delayed_batch(&self) -> Option<usize> {
        None
    }
    /// Inserts the successors of several consecutive parents (in BFS order) at once, for a
    /// store that asked for it ([`StateStore::delayed_batch`]): the results, and so the
    /// numbering, are exactly those of inserting them one by one in order.
    ///
    /// `parents` lists the batch's parents in order, each with its number of successors in
    /// the batch, all at depth `parent_depth` (a batch never spans two BFS levels): what the
    /// stores that record search-tree edges need ([`batch_vias`]).
    fn insert_many(
        &mut self,
        parents: &[(StateId, u32)],
        parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        out.clear();
        let mut vias = Vec::new();
        batch_vias(parents, parent_depth, batch, &mut vias);
        for (i, &via) in vias.iter().enumerate() {
            out.push(self.insert(batch.get(i), Some(via))?);
        }
        Ok(())
    }
    /// DFS: the search path now ends with state `id` at `depth` (see [`PathStep`]) — the
    /// engine calls it when it starts expanding a state and when it backtracks to one, so a
    /// store never has to infer the path from its inserts. Stores that use the path follow
    /// it (ComBack pins some of its states to rebuild from; Δ's stratified caching never
    /// forgets them); the default ignores it.
    fn on_search_path(&mut self, _step: PathStep<'_>) {}
    /// The number of distinct states stored.
    fn len(&self) -> u64;
    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether and how the store gives state vectors back ([`StateStore::get`]): the BFS
    /// engine keeps its own queue of vectors only for [`StatesBack::No`].
    fn states_back(&self) -> StatesBack;
    /// A read-only view of the index that worker threads may search while the store is not
    /// changed (parallel BFS, engine/parallel.rs): it finds states stored before it was taken
    /// and reads their vectors. `None` (the default): workers only generate successors and
    /// every one of them goes through [`StateStore::insert_batch`] on the main thread.
    fn shared_index(&mut self) -> Option<full::SharedIndex<'_>> {
        None
    }
    /// Once the store's index has spilled (its delayed batches): its state vectors, for
    /// threads that read them at once to expand a batch's parents while the store is
    /// borrowed. `None` (the default) when it has none to share; the parents are then read
    /// with [`StateStore::get`] on the calling thread.
    fn shared_vectors(&mut self) -> Option<full::SharedVectors<'_>> {
        None
    }
    /// Threads the store may use for its own batch work: resolving a delayed batch once its
    /// index has spilled (the full store). The engine says it once, before the first batch,
    /// with the threads the run's budget leaves room for; the default ignores it.
    fn set_threads(&mut self, _threads: usize) {}
    /// After the threads have read a [`StateStore::shared_index`] and before the store
    /// changes: takes back what they read on their own (a segment vector's blocks, which
    /// its cache adopts). The default has nothing to take.
    fn adopt_reads(&mut self, _readers: &mut [SegReader]) -> Result<(), StoreError> {
        Ok(())
    }
    /// With a [`StateStore::shared_index`]: stores `count` states known to be new (in
    /// neither the index nor one another) under the next ids, the `i`-th with the vector and
    /// hash `new(i)`, using up to `threads` threads.
    fn add_new<'a>(
        &mut self,
        _count: usize,
        _new: &(dyn Fn(usize) -> (&'a [u8], u64) + Sync + 'a),
        _threads: usize,
    ) -> Result<(), StoreError> {
        Err(StoreError::Invalid {
            store: self.name(),
            message: "this store does not take states from parallel BFS".into(),
        })
    }
    /// State `id`, if the store gives state vectors back (it keeps them, or rebuilds them,
    /// as ComBack does: see [`StateStore::states_back`]) and `id` is stored; `None`
    /// otherwise (the default, for stores of [`StatesBack::No`]). `&mut self`: a store that
    /// rebuilds states does it in its own buffers, which the answer borrows. Rebuilding can
    /// fail, hence the `Result`.
    fn get(&mut self, _id: StateId) -> Result<Option<&[u8]>, StoreError> {
        Ok(None)
    }
    /// Exact or probabilistic.
    fn exactness(&self) -> Exactness;
    /// Bytes held in RAM by the store's structures.
    fn ram_bytes(&self) -> u64;
    /// Bytes the store keeps on disk.
    fn disk_bytes(&self) -> u64 {
        0
    }
    /// The least RAM the store can work in from now on: its fixed structures (tables, bit
    /// arrays, caches it cannot do without) and the minimal buffers of its files. Under
    /// `--memory` the driver refuses, before exploring, a budget below this plus the
    /// engine's and the writer's minimum (exit 6, naming the figure), instead of running
    /// over the budget or crawling in a cache of a few blocks.
    fn min_ram_bytes(&self) -> u64 {
        self.ram_bytes()
    }
    /// Store-specific counters for the stats (e.g. reconstructions), as JSON values. Only
    /// reads: [`StateStore::sync_accounts`] is what brings budget accounts up to date.
    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// One line for humans about the store's own work, printed after the run's figures
    /// (e.g. ComBack's reconstructions), when it has something to say.
    fn summary(&self) -> Option<String> {
        None
    }
    /// Brings the budget accounts of the store's structures up to date (the driver calls it
    /// before it reads them for the stats).
    fn sync_accounts(&self) {}
    /// The stack-and-cache table of `--store cache`, which the DFS engine drives itself
    /// (`engine/caching.rs`: it pushes, pops and re-explores); `None` for every other store.
    fn as_cache(&mut self) -> Option<&mut cache::CacheStore> {
        None
    }
    /// Makes everything stored so far durable (flushes and syncs the store's segment files)
    /// and says how to reopen the store exactly as it is now (see docs/CHECKPOINT.md). Costs
    /// time in what changed since the last checkpoint, never a copy of the visited set: RAM
    /// indexes are rebuilt from the files on resume. Only stores built on a kept
    /// [`crate::storage::Storage`] can do it.
    /// The BFS-with-snapshots store, which the driver hands to its own engine
    /// (`engine::snapshots`) instead of the plain BFS loop; `None` for every other store.
    fn as_snapshots(&mut self) -> Option<&mut snapshots::SnapshotStore> {
        None
    }
    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        Err(StoreError::Invalid {
            store: self.name(),
            message: "this store cannot be checkpointed (it keeps no files)".into(),
        })
    }
}

/// How to reopen a store as it was at a checkpoint: the store's own small description
/// (`blob`, serialised with [`encode_blob`]) and the files whose first bytes it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreMark {
    pub blob: Vec<u8>,
    pub files: Vec<FileMark>,
}

/// Serialises a store's checkpoint description ([`crate::codec::encode`]).
pub fn encode_blob<T: serde::Serialize>(v: &T) -> Vec<u8> {
    crate::codec::encode(v)
}

/// Reads back what [`encode_blob`] wrote; a blob that does not decode (or has bytes left
/// over) is an error naming `store`.
pub fn decode_blob<T: serde::de::DeserializeOwned>(
    store: &'static str,
    blob: &[u8],
) -> Result<T, StoreError> {
    crate::codec::decode(blob).map_err(|e| StoreError::Invalid {
        store,
        message: format!("checkpoint description {e}"),
    })
}

/// A batch of successor states (all successors of one state, or of several consecutive
/// ones for [`StateStore::insert_many`]) with the transitions that produced them, stored
/// contiguously.
#[derive(Default)]
pub struct StateBatch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    transitions: Vec<TransitionId>,
}

impl StateBatch {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.transitions.clear();
    }
    pub fn push(&mut self, t: TransitionId, state: &[u8]) {
        self.bytes.extend_from_slice(state);
        self.ends.push(self.bytes.len());
        self.transitions.push(t);
    }
    #[inline]
    pub fn transition(&self, i: usize) -> TransitionId {
        self.transitions[i]
    }
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// Bytes of state vectors held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }
    /// RAM the batch's buffers hold (their capacities).
    pub fn ram_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self.transitions.capacity() * std::mem::size_of::<TransitionId>()
    }
    /// Where state `i`'s bytes start.
    #[inline]
    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1]
        }
    }
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.start(i)..self.ends[i]]
    }
    /// Appends the states `range` of `other`, in order.
    pub fn extend_from(&mut self, other: &StateBatch, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let (from, to) = (other.start(range.start), other.ends[range.end - 1]);
        let shift = self.bytes.len() as isize - from as isize;
        self.bytes.extend_from_slice(&other.bytes[from..to]);
        self.ends.extend(
            other.ends[range.clone()]
                .iter()
                .map(|&e| (e as isize + shift) as usize),
        );
        self.transitions
            .extend_from_slice(&other.transitions[range]);
    }
}

/// How a run is shaped, for a store to say whether it can serve it.
#[derive(Clone, Copy, Debug)]
pub struct RunShape {
    pub order: Order,
    /// The run writes an LTS (`-o`).
    pub writes_lts: bool,
    /// The run is checkpointed (`--checkpoint-every`).
    pub checkpointed: bool,
}

/// What each store says about itself to the driver.
pub trait StoreSpec {
    /// The `--store` value (also the `store` key of the stats).
    fn name(&self) -> &'static str;

    /// Why this store, with these options, cannot serve a run of this shape (the driver
    /// refuses it with exit 2 and this reason), or `None`.
    fn refuse(&self, _run: &RunShape) -> Option<String> {
        None
    }

    /// Whether the store keeps its records in segment files whatever the spill policy (then
    /// the driver gives it a scratch [`Storage`] when the run has none of its own).
    fn needs_storage(&self) -> bool {
        false
    }

    /// A new, empty store for `model`; `storage` is the run's (a budget, segment files), if
    /// it has one.
    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError>;

    /// The store of a checkpoint, reopened from its `mark` in the run's kept `storage`.
    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError>;
}

/// The error of a store built without the storage it needs.
pub(crate) fn storage_needed(name: &str) -> StoreError {
    StoreError::Invalid {
        store: "config",
        message: format!("--store {name} keeps its records in segment files and needs a storage"),
    }
}
