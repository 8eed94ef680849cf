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
pub mod state_cache;
pub mod tree;
pub mod window;

use crate::error::StoreError;
use crate::model::{Model, TransitionId};
use crate::storage::vec::SegReader;
use crate::storage::{FileMark, Storage};
use window::Scope;

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
#[inline]
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

/// Reusable vectors of a [`RecordsEdges`] store's batches: the search-tree edges, and in a
/// spilled batch the `(key, candidate)` run lookups and `(id, candidate)` run matches.
#[derive(Default)]
pub(crate) struct BatchScratch {
    /// The batch's keys.
    pub keys: Vec<u64>,
    pub vias: Vec<Via>,
    pub lookups: Vec<(u64, u32)>,
    pub matches: Vec<(u64, u32)>,
}

/// A store that records each state's search-tree edge (ComBack's backedges, Δ's records):
/// `insert_batch` and `insert_many` both come down to a batch with one [`Via`] per
/// successor ([`insert_with_vias`]), inserted by the one batch loop below
/// ([`RecordsEdges::insert_all`], and [`RecordsEdges::insert_many_spilled`] once the index
/// has spilled). A state's *key* is what the index holds of it (Δ: its hash; ComBack: its
/// descriptor).
pub(crate) trait RecordsEdges: window::WindowHost {
    /// Checks the states of a batch and makes room in the index for all of them.
    fn make_room(&mut self, batch: &StateBatch) -> Result<(), StoreError>;
    /// The key of a state.
    fn key(&self, state: &[u8]) -> u64;
    /// Asks for the home slot of `key` with a `prefetch`, not a load: a load waits in the
    /// reorder buffer for its line, so fewer of a batch's misses overlap (Δ's demand loads
    /// cost Kanban-PT-00005 15%: docs/DELTA.md).
    fn touch_key(&self, key: u64);
    /// After a batch: tell the budget what changed (default: nothing to tell).
    fn batch_done(&mut self) {}
    /// A second prefetch pass over a batch's keys before the lookups (default: none).
    fn touch_candidates(&mut self, _keys: &[u64]) {}
    /// Looks `state` (`key`) up in `scope` and, unless the scope is the window only, inserts
    /// it if new (`None`: not in the window); the index has room.
    fn insert_keyed(
        &mut self,
        state: &[u8],
        key: u64,
        via: Option<Via>,
        scope: Scope,
    ) -> Result<Option<Insert>, StoreError>;
    /// Whether state `id`, which a run holds under `key`, is `state`: `Some(bound of its
    /// path length)` when it is.
    fn run_match(&mut self, id: StateId, state: &[u8], key: u64)
        -> Result<Option<u32>, StoreError>;
    /// State `id` (path length at most `bound`) was met again through `via`: the store's
    /// repoint rule, if it is on ([`path::repoint_if_shorter`]).
    fn repoint(&mut self, id: StateId, bound: u32, via: Via) -> Result<(), StoreError>;
    fn scratch(&mut self) -> &mut BatchScratch;

    /// Checks a batch, makes room for it, and returns its keys (the scratch vector, handed
    /// back by [`RecordsEdges::give_back`]), each home slot touched so that the cache misses
    /// overlap.
    #[inline]
    fn prepare(&mut self, batch: &StateBatch) -> Result<Vec<u64>, StoreError> {
        self.make_room(batch)?;
        let mut keys = std::mem::take(&mut self.scratch().keys);
        keys.clear();
        for i in 0..batch.len() {
            let k = self.key(batch.get(i));
            self.touch_key(k);
            keys.push(k);
        }
        Ok(keys)
    }

    /// Takes the keys back after a batch.
    fn give_back(&mut self, keys: Vec<u64>) {
        self.scratch().keys = keys;
        self.batch_done();
    }

    /// Inserts a batch in order, `vias[i]` the search-tree edge of candidate `i`.
    #[inline]
    fn insert_all(
        &mut self,
        batch: &StateBatch,
        vias: &[Via],
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        with_keys(self, batch, out, |s, keys, out| {
            s.touch_candidates(keys);
            keys.iter().enumerate().try_for_each(|(i, &k)| {
                let ins = s.insert_keyed(batch.get(i), k, Some(vias[i]), Scope::All)?;
                out.push(ins.expect("scope All inserts"));
                Ok(())
            })
        })
    }

    /// A delayed batch ([`StateStore::insert_many`]) once the index has spilled: (1) every
    /// candidate is looked up in the RAM window; (2) those some run's filter lets through
    /// are sorted by key and looked up in the runs in one sweep, and their matches compared
    /// in id order (neighbouring ids share record blocks and ancestors); (3) the rest are
    /// new or repeat an earlier candidate of the batch: inserted in order, which numbers
    /// them as a one-by-one insertion would.
    fn insert_many_spilled(
        &mut self,
        batch: &StateBatch,
        vias: &[Via],
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        with_keys(self, batch, out, |s, keys, out| {
            spilled_steps(s, batch, keys, vias, out)
        })
    }
}

/// Runs `f` over a non-empty batch's keys ([`RecordsEdges::prepare`]), `out` cleared, and
/// hands the keys back whatever `f` returns.
#[inline(always)]
fn with_keys<S: RecordsEdges + ?Sized>(
    s: &mut S,
    batch: &StateBatch,
    out: &mut Vec<Insert>,
    f: impl FnOnce(&mut S, &[u64], &mut Vec<Insert>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    out.clear();
    if batch.is_empty() {
        return Ok(());
    }
    let keys = s.prepare(batch)?;
    let r = f(s, &keys, out);
    s.give_back(keys);
    r
}

/// The three steps of [`RecordsEdges::insert_many_spilled`].
fn spilled_steps<S: RecordsEdges + ?Sized>(
    s: &mut S,
    batch: &StateBatch,
    keys: &[u64],
    vias: &[Via],
    out: &mut Vec<Insert>,
) -> Result<(), StoreError> {
    const OPEN: Insert = Insert::Seen(StateId::MAX);
    // (1) The window.
    for (i, &k) in keys.iter().enumerate() {
        let r = s.insert_keyed(batch.get(i), k, Some(vias[i]), Scope::Window)?;
        out.push(r.unwrap_or(OPEN));
    }
    // (2) The runs.
    let mut lookups = std::mem::take(&mut s.scratch().lookups);
    let mut matches = std::mem::take(&mut s.scratch().matches);
    lookups.clear();
    matches.clear();
    {
        let sp = s.window().2.as_mut().expect("spilled");
        for (i, &k) in keys.iter().enumerate() {
            if out[i] == OPEN && sp.runs.may_contain(k) {
                lookups.push((k, i as u32));
            }
        }
        lookups.sort_unstable();
        sp.runs
            .find_sorted(&lookups, |i, id| matches.push((id, i)))?;
    }
    matches.sort_unstable();
    for &(id, i) in &matches {
        let i = i as usize;
        if out[i] != OPEN {
            continue;
        }
        let found = s.run_match(id, batch.get(i), keys[i])?;
        let sp = s.window().2.as_mut().expect("spilled");
        sp.runs.count_outcome(found.is_some());
        if let Some(bound) = found {
            out[i] = Insert::Seen(id);
            s.repoint(id, bound, vias[i])?;
        }
    }
    let scratch = s.scratch();
    scratch.lookups = lookups;
    scratch.matches = matches;
    // (3) New states, or repeats of an earlier candidate of this batch.
    for (i, &k) in keys.iter().enumerate() {
        if out[i] == OPEN {
            let ins = s.insert_keyed(batch.get(i), k, Some(vias[i]), Scope::Young)?;
            out[i] = ins.expect("scope Young inserts");
        }
    }
    Ok(())
}

/// [`StateStore::insert_many`] of a [`RecordsEdges`] store (`delayed`), and its
/// `insert_batch` (one parent with every successor of the batch).
#[inline]
pub(crate) fn insert_with_vias<S: RecordsEdges>(
    s: &mut S,
    parents: &[(StateId, u32)],
    parent_depth: u64,
    batch: &StateBatch,
    delayed: bool,
    out: &mut Vec<Insert>,
) -> Result<(), StoreError> {
    let mut vias = std::mem::take(&mut s.scratch().vias);
    batch_vias(parents, parent_depth, batch, &mut vias);
    let r = if delayed && s.window().2.is_some() {
        s.insert_many_spilled(batch, &vias, out)
    } else {
        s.insert_all(batch, &vias, out)
    };
    s.scratch().vias = vias;
    r
}

/// The human-readable line of a lossy store (hash compaction, bitstate): what it found
/// against what it generated.
pub(crate) fn lossy_summary(found: u64, generated: u64) -> String {
    format!("{found} states found of {generated} generated (lossy)")
}

/// `insert_batch` and `insert_many` of a [`RecordsEdges`] store's [`StateStore`] impl: both
/// come down to [`insert_with_vias`] (`insert_batch`: one parent, never delayed).
macro_rules! records_edges_inserts {
    () => {
        fn insert_batch(
            &mut self,
            parent: $crate::store::StateId,
            parent_depth: u64,
            batch: &$crate::store::StateBatch,
            out: &mut Vec<$crate::store::Insert>,
        ) -> Result<(), $crate::error::StoreError> {
            let parents = [(parent, batch.len() as u32)];
            $crate::store::insert_with_vias(self, &parents, parent_depth, batch, false, out)
        }

        fn insert_many(
            &mut self,
            parents: &[($crate::store::StateId, u32)],
            parent_depth: u64,
            batch: &$crate::store::StateBatch,
            out: &mut Vec<$crate::store::Insert>,
        ) -> Result<(), $crate::error::StoreError> {
            $crate::store::insert_with_vias(self, parents, parent_depth, batch, true, out)
        }
    };
}
pub(crate) use records_edges_inserts;

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

/// A read-only view of a store's index that the worker threads of parallel BFS search while
/// the store is borrowed, so nothing they read can change under them (see
/// [`StateStore::shared_index`]; engine/parallel.rs).
#[derive(Clone, Copy)]
pub enum SharedIndex<'a> {
    /// The full store, its index and vectors in RAM.
    Ram(full::Index<'a, full::RamVectors<'a>>),
    /// The full store under a budget: the index in RAM, the vectors in a segment file.
    Seg(full::Index<'a, crate::storage::vec::SegView<'a>>),
    /// ComBack: its state table, state cache and the chunk's rebuilt parents.
    Comback(comback::Shared<'a>),
    /// The tree store: its node and root tables and the tree's shape.
    Tree(tree::Shared<'a>),
}

impl SharedIndex<'_> {
    /// The hash the threads key a successor by (the full store's index and the chunk's
    /// tables; ComBack's descriptor is its top bits).
    #[inline]
    pub fn hash(state: &[u8]) -> u64 {
        full::state_hash(state)
    }
}

/// What a worker thread learns of a successor from a [`SharedIndex`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// It was stored before the chunk, under this id.
    Stored(StateId),
    /// It was not.
    Absent,
    /// The view cannot tell without the store's full lookup (ComBack: a fingerprint match
    /// that is another state, after which the probe goes on); the numbering thread asks
    /// the [`Resolver`] of [`StateStore::shared_split`].
    Undecided,
}

/// How a worker thread reads one kind of [`SharedIndex`]; `Reader` is its own state for
/// that (the blocks it read itself from a segment file, a tree store's parent trees, or
/// nothing).
pub trait Lookup: Sync {
    type Reader: Default + Send;
    /// Whether the words a lookup hands on for a successor it did not find (`extra` of
    /// [`Lookup::find_group`]) name the state: two such successors of a chunk are the same
    /// state exactly when their words are equal (the tree store's: the nodes its tables
    /// lack, children before parents, with their children's values). The chunk then
    /// compares its candidates by their words, a few dozen bytes, and keeps no vectors for
    /// them; their `hashes` are [`Extra::hash`]es of the words.
    const EXTRA_NAMES_STATE: bool = false;
    /// Calls `f` with the vector of parent `id` (a state of the chunk).
    fn with_parent<R>(
        &self,
        r: &mut Self::Reader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, crate::error::StorageError>;
    /// Looks up the successors of a group of parents (the parents went through
    /// [`Lookup::with_parent`] in order since the previous group): `batch` holds them in
    /// parent order, `counts[k]` of the `k`-th parent; pushes each successor's
    /// [`SharedIndex::hash`] onto `hashes` (the chunk's tables key the candidates by it: a
    /// successor found [`Found::Stored`] may get any value) and its answer onto `found`. A
    /// whole group at once, so that the lookups' cache misses overlap. `model` (the
    /// thread's copy) and `scratch` serve a store that rebuilds states to compare them
    /// (what it rebuilds stays in `scratch.rebuilt` for [`StateStore::shared_done`]).
    ///
    /// `extra`: what the lookup learnt of each successor it did not find, for
    /// [`StateStore::add_new`] ([`NewState::extra`]); a store that needs nothing leaves it
    /// empty.
    #[allow(clippy::too_many_arguments)]
    fn find_group(
        &self,
        r: &mut Self::Reader,
        model: &dyn Model,
        scratch: &mut path::Scratch,
        batch: &StateBatch,
        counts: &[u32],
        hashes: &mut Vec<u64>,
        found: &mut Vec<Found>,
        extra: &mut Extra,
    ) -> Result<(), StoreError>;
}

/// Words per successor, back to back: those of successor `i` end at `ends[i]` (either
/// every successor of a group has an entry, or none has: `ends` is then empty).
#[derive(Default)]
pub struct Extra {
    pub words: Vec<u32>,
    pub ends: Vec<u32>,
}

impl Extra {
    pub fn clear(&mut self) {
        self.words.clear();
        self.ends.clear();
    }

    /// The words of entry `i` (none when there are no entries).
    #[inline]
    pub fn get(&self, i: usize) -> &[u32] {
        match self.ends.get(i) {
            Some(&end) => {
                let start = if i == 0 { 0 } else { self.ends[i - 1] };
                &self.words[start as usize..end as usize]
            }
            None => &[],
        }
    }

    /// Appends `words` as the next entry.
    #[inline]
    pub fn push(&mut self, words: &[u32]) {
        self.words.extend_from_slice(words);
        self.ends.push(self.words.len() as u32);
    }

    /// The hash of a successor named by `words` ([`Lookup::EXTRA_NAMES_STATE`]).
    #[inline]
    pub fn hash(words: &[u32]) -> u64 {
        full::state_hash(bytemuck::cast_slice(words))
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.words.capacity() + self.ends.capacity()) as u64 * 4
    }
}

/// A [`Lookup`] by hash probes, one successor at a time ([`probe_group`] overlaps a group's
/// misses): the full store's index and ComBack's state table.
pub trait Probe: Lookup {
    /// Asks for the slot where the probe of hash `h` starts, so that the misses of a group
    /// of lookups overlap.
    fn prefetch_slot(&self, h: u64);
    /// Once the slot is in cache: asks for what the lookup compares next.
    fn prefetch_state(&self, h: u64);
    /// Looks `state` (hash `h`) up.
    fn find(
        &self,
        r: &mut Self::Reader,
        model: &dyn Model,
        scratch: &mut path::Scratch,
        state: &[u8],
        h: u64,
    ) -> Result<Found, StoreError>;
}

/// [`Lookup::find_group`] of a [`Probe`]: a lookup is two dependent misses (the slot, then
/// what it names), so every slot of the group is asked for as soon as its hash is known,
/// then everything they name, then the group is probed.
#[inline(always)]
pub fn probe_group<P: Probe>(
    p: &P,
    r: &mut P::Reader,
    model: &dyn Model,
    scratch: &mut path::Scratch,
    batch: &StateBatch,
    hashes: &mut Vec<u64>,
    found: &mut Vec<Found>,
) -> Result<(), StoreError> {
    let at = hashes.len();
    for i in 0..batch.len() {
        let h = SharedIndex::hash(batch.get(i));
        p.prefetch_slot(h);
        hashes.push(h);
    }
    let hashes = &hashes[at..];
    for &h in hashes {
        p.prefetch_state(h);
    }
    for (i, &h) in hashes.iter().enumerate() {
        found.push(p.find(r, model, scratch, batch.get(i), h)?);
    }
    Ok(())
}

/// What settles the [`Found::Undecided`] answers of a [`SharedIndex`] on the numbering
/// thread while the workers still read the view: it reads what they read, and defers what
/// it would write (ComBack's replayed states, cached at [`StateStore::shared_done`]).
pub trait Resolver {
    /// The id of `state` (hash `h`) if it was stored before the chunk.
    fn resolve(&mut self, state: &[u8], h: u64) -> Result<Option<StateId>, StoreError>;
    /// The chunk's next new state, in id order, as the numbering thread numbers it: what
    /// its lookup handed on ([`NewState::extra`]). A store may prepare its entry here,
    /// while the other threads still expand, without changing what they read
    /// ([`StateStore::add_new`] enters it after the chunk). The default does nothing.
    fn numbered(&mut self, _extra: &[u32]) -> Result<(), StoreError> {
        Ok(())
    }
}

/// A new state of a parallel chunk, for [`StateStore::add_new`]: its vector, its
/// [`SharedIndex::hash`] and its search-tree edge.
#[derive(Clone, Copy)]
pub struct NewState<'a> {
    pub state: &'a [u8],
    pub hash: u64,
    pub via: Via,
    /// What the lookup that did not find it handed on ([`Lookup::find_group`]'s `extra`).
    pub extra: &'a [u32],
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
    /// a part on disk that it reads in sorted batches: see `insert_many`; or its lookups in
    /// RAM overlap their cache misses across a batch: [`window::RAM_BATCH`]). `None` (the
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
    fn shared_index(&mut self) -> Option<SharedIndex<'_>> {
        None
    }
    /// Before [`StateStore::shared_index`] for a chunk of parents `parents` (consecutive
    /// ids): makes their vectors readable through the view (ComBack rebuilds them into its
    /// waiting buffer). The default has them at hand.
    fn prepare_shared(&mut self, _parents: std::ops::Range<StateId>) -> Result<(), StoreError> {
        Ok(())
    }
    /// Whether the store's visited set moves to disk under `--memory` when it outgrows its
    /// share (the full store, ComBack, Δ and hash compaction spill their index; the tree
    /// store hands its states over to the full store's): the exit-6 message suggests such
    /// a store only to the others. The default: no.
    fn index_spills(&self) -> bool {
        false
    }
    /// Whether parallel BFS should cut its chunks small (a quarter of the default): for a
    /// store whose own structures are small, so that the chunk's buffers, the same size
    /// whatever the store, do not dwarf them (ComBack). The default: no.
    fn small_chunks(&self) -> bool {
        false
    }
    /// Whether the chunked path beats the store's own batches when one thread runs it (the
    /// model does not fork, or the budget leaves room for one thread): the full store's
    /// grouped lookups do (the default); ComBack's delayed batches are faster, as they
    /// insert a new state in the pass that looked it up.
    fn chunks_on_one_thread(&self) -> bool {
        true
    }
    /// [`StateStore::shared_index`] with the [`Resolver`] of the answers it may leave
    /// undecided (`None`: it leaves none, the default).
    #[allow(clippy::type_complexity)]
    fn shared_split(&mut self) -> Option<(SharedIndex<'_>, Option<Box<dyn Resolver + '_>>)> {
        self.shared_index().map(|v| (v, None))
    }
    /// After the threads have read a [`StateStore::shared_split`] and before the chunk's new
    /// states go in: takes what its resolver deferred and what the threads rebuilt
    /// (`rebuilt`, emptied). The default has nothing to take.
    fn shared_done(&mut self, _rebuilt: &mut [&mut path::Rebuilt]) -> Result<(), StoreError> {
        Ok(())
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
    /// neither the index nor one another) under the next ids, the `i`-th as `new(i)`, using
    /// up to `threads` threads. `looked_up`: the successors the chunk looked up (for the
    /// store's counters).
    fn add_new<'a>(
        &mut self,
        _count: usize,
        _new: &(dyn Fn(usize) -> NewState<'a> + Sync + 'a),
        _threads: usize,
        _looked_up: u64,
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
