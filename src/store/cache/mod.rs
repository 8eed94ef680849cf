//! `--store cache`: state space caching (Godefroid, Holzmann, Pirottin, "State space caching
//! revisited"). The store remembers the states on the DFS stack — always, which is what makes
//! the search terminate: a cycle closes on the stack — plus at most `--cache-size` other
//! visited states, evicting with a [`replacement`] strategy. A state that was evicted and is
//! met again is explored again, under a new number: every reachable state is visited, but
//! counts are of visits, not of distinct states. The search itself (re-exploration, sleep
//! sets) is `engine/caching.rs`; this module is the table and its bookkeeping.
//!
//! Layout: one entry per remembered state in a slot array (state vectors in a flat arena when
//! the model's states have a fixed width), a `hashbrown::HashTable` of slot numbers keyed by
//! the xxh3 hash of the vector (stored in the entry, so growth never rehashes vectors), and a
//! free list of slots. An entry is on the stack or in the cache; only cache entries are known
//! to the replacement policy, so a state on the stack is never evicted.
//!
//! A checkpoint records the table whole (`CacheCheckpoint`): the slots with their states,
//! the free list, the strategies' per-slot arrays and dense lists, the transitions left
//! asleep and the deadlocks in an image (`cache.table.G`, [`crate::storage::image`]), each
//! cache's small state (random generator, list ends, clock, sampler, counters) in the blob.
//! Slot numbers are kept as they are: they decide LLNR's ties, the random victim (an index
//! into a dense list) and which slot a new state takes, so a resumed store evicts and
//! numbers exactly as the uninterrupted one.

pub mod replacement;

use super::snapshots::spec::{Growth, Replacement, Sampler, Sampling, StreamSpec};
use super::{
    decode_blob, encode_blob, Exactness, Insert, StateId, StateStore, StatesBack, StoreMark,
    StoreSpec, Via,
};
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::storage::budget::Account;
use crate::storage::image::{ImageMark, ImageReader, Images};
use crate::storage::Storage;
use hashbrown::HashTable;
use replacement::{Policy, PolicyMark, Slots, SlotsMark, Strategy};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// `--store cache` and its options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheOptions {
    /// Visited states remembered besides those on the stack (`--cache-size`).
    pub size: u64,
    /// Which cached state to forget when the cache is full (`--replacement`).
    pub replacement: Strategy,
    /// A stream of caches instead of one (`--caches SPEC`, the notation of
    /// `--store snapshots`; see [`Tier`]): `size` and `replacement` are then unused.
    pub stream: Option<StreamSpec>,
    /// Explore with sleep sets (`--sleep-sets`): fewer transitions, hence fewer revisits; the
    /// explored graph then lacks transitions by design, so no LTS is written.
    pub sleep_sets: bool,
    /// Seed of the random and type-oriented strategies (`--cache-seed`).
    pub seed: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            size: 10_000,
            replacement: Strategy::Random,
            stream: None,
            sleep_sets: false,
            seed: 1,
        }
    }
}

impl StoreSpec for CacheOptions {
    fn name(&self) -> &'static str {
        "cache"
    }

    fn refuse(&self, run: &super::RunShape) -> Option<String> {
        if run.order != super::Order::Dfs {
            return Some(
                "--store cache needs --order dfs: it keeps the DFS stack, whose states are what makes a search with forgetting terminate (a BFS has no stack to close cycles on)".into(),
            );
        }
        if run.writes_lts && self.sleep_sets {
            return Some(
                "--sleep-sets cannot write an LTS (-o): sleep sets skip transitions by design (every state is visited, but not every transition is explored), so the graph would lack edges; drop -o, or drop --sleep-sets to write an LTS in which re-explored states appear more than once".into(),
            );
        }
        None
    }

    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        if let Some(st) = storage {
            self.claim(model, st)?;
        }
        let mut store = CacheStore::new(
            self.clone(),
            model.state_len(),
            storage.map(|st| st.budget.account("cache.table")),
        );
        store.storage = storage.map(Storage::handle);
        Ok(Box::new(store))
    }

    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        // The same up-front refusal as a fresh run's: the budget may have changed.
        self.claim(model, storage)?;
        Ok(Box::new(CacheStore::resume(
            self.clone(),
            model.state_len(),
            storage,
            mark,
        )?))
    }
}

/// RAM per cached state besides its vector, for the up-front check against `--memory`:
/// the entry (32 bytes), its hash table slot and control byte at 7/8 load (about 6), its
/// free-list slot (4) and the replacement bookkeeping (up to 69: five `u32` arrays, a stamp,
/// a kind byte and, for LFU/MFU, a B-tree entry). 48 had let a cache that could not fit be
/// accepted and stopped mid-run. The arrays' doubling slack is not counted (the engines'
/// backstop stops a run that passes the budget).
const ENTRY_BYTES: u64 = 112;

impl CacheOptions {
    /// Refuses up front the caches that, full, cannot fit the budget (the stack comes on
    /// top; the engines' backstop catches the rest): an estimate per state of its vector
    /// plus the entry, its table slot and the strategy's bookkeeping.
    fn claim(&self, model: &dyn Model, st: &Storage) -> Result<(), StoreError> {
        if let Some(states) = self.capacity() {
            let per = model.state_len().unwrap_or(32) as u64 + ENTRY_BYTES;
            st.budget.claim(
                "the --store cache table",
                states.saturating_mul(per),
                0,
                &format!("{states} cached states of about {per} bytes each, once the caches are full; a cache larger than the state space never fills, so lower --cache-size (or the caches of --caches) to what the model can reach"),
            )?;
        }
        Ok(())
    }

    /// States the caches hold when full; `None` when a cache or the stream is unbounded.
    pub fn capacity(&self) -> Option<u64> {
        match &self.stream {
            None => Some(self.size),
            Some(spec) if spec.growth == Growth::Pebble => None,
            Some(spec) => spec.caches.iter().map(|c| c.capacity.bound()).sum(),
        }
    }
}

/// Where a state found in the table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// On the DFS stack, in this slot (a cycle closes here).
    Stack(StateId),
    /// In the cache: explored before and still remembered.
    Cache(StateId),
}

#[derive(Clone, Copy)]
struct Entry {
    hash: u64,
    id: StateId,
    kind: u8,
    /// The cache of the stream holding it (when not on the stack).
    tier: u8,
    /// Stack depth when it was pushed (what LLNR ranks by).
    depth: u32,
    /// Frames of the state on the stack: 0 in the cache; more than 1 when the sleep-set
    /// search reopened it while it was on the stack (see [`CacheStore::reopen`]).
    on_stack: u32,
}

/// State vectors by slot.
enum Vectors {
    Fixed { width: usize, bytes: Vec<u8> },
    Var(Vec<Vec<u8>>),
}

impl Vectors {
    fn get(&self, slot: u32) -> &[u8] {
        match self {
            Vectors::Fixed { width, bytes } => {
                &bytes[slot as usize * width..(slot as usize + 1) * width]
            }
            Vectors::Var(v) => &v[slot as usize],
        }
    }

    fn set(&mut self, slot: u32, state: &[u8]) {
        match self {
            Vectors::Fixed { width, bytes } => {
                let at = slot as usize * *width;
                if bytes.len() < at + *width {
                    bytes.resize(at + *width, 0);
                }
                bytes[at..at + *width].copy_from_slice(state);
            }
            Vectors::Var(v) => {
                if v.len() <= slot as usize {
                    v.resize_with(slot as usize + 1, Vec::new);
                }
                let e = &mut v[slot as usize];
                e.clear();
                e.extend_from_slice(state);
            }
        }
    }

    fn ram_bytes(&self) -> u64 {
        match self {
            Vectors::Fixed { bytes, .. } => bytes.capacity() as u64,
            Vectors::Var(v) => v.iter().map(|e| e.capacity() as u64 + 24).sum(),
        }
    }
}

/// Counters the caching engine keeps for the report (Table 1 of the paper and sleep sets).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct EngineCounters {
    /// Distinct deadlock states (remembered exactly, see `engine/caching.rs`).
    pub deadlocks: u64,
    /// Visits of deadlock states, repetitions included (what the LTS output holds).
    pub deadlock_visits: u64,
    /// Enabled transitions not executed because they were in the sleep set.
    pub slept: u64,
}

/// One cache of the stream (`--caches`; a single one for `--cache-size`). The unit is a
/// state, not a BFS level: a state leaving the stack is offered to the first cache, what a
/// full cache evicts to the next, what the last one evicts (or a cache declines) is
/// forgotten. Sampling counts offers, as levels are counted in BFS: `cN` takes every
/// `N`th state offered, `N` takes offers 0, N, 3N, 6N … (the gap grows by N). A trailing
/// `+` appends a copy of the last cache whenever it is full (taking every offer). DFS needs
/// no termination rule: cycles close on the stack, which is always remembered.
struct Tier {
    policy: Policy,
    /// `None`: never evicts.
    cap: Option<u64>,
    sampler: Sampler,
    appended: bool,
    offers: u64,
    taken: u64,
    evicted: u64,
    declined: u64,
    hits: u64,
}

impl Tier {
    fn new(strategy: Strategy, cap: Option<u64>, sampling: Sampling, seed: u64) -> Tier {
        Tier {
            policy: Policy::new(strategy, seed),
            cap,
            sampler: Sampler::new(sampling),
            appended: false,
            offers: 0,
            taken: 0,
            evicted: 0,
            declined: 0,
            hits: 0,
        }
    }

    /// The tiers of `opts`: its stream, or one cache of `--cache-size` states.
    fn stream(opts: &CacheOptions) -> Vec<Tier> {
        match &opts.stream {
            None => vec![Tier::new(
                opts.replacement,
                Some(opts.size),
                Sampling::Constant(1),
                opts.seed,
            )],
            Some(spec) => spec
                .caches
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let strategy = match c.replacement {
                        Replacement::Lru => Strategy::Lru,
                        Replacement::Mru => Strategy::Mru,
                        Replacement::Lfu => Strategy::Lfu,
                        Replacement::Mfu => Strategy::Mfu,
                        Replacement::Rnd => Strategy::Random,
                        Replacement::Llnr => Strategy::Llnr,
                    };
                    let cap = c.capacity.bound();
                    Tier::new(strategy, cap, c.sampling, opts.seed.wrapping_add(i as u64))
                })
                .collect(),
        }
    }

    /// Whether the sampling function takes the next offer (and then advances).
    fn samples(&mut self) -> bool {
        self.offers += 1;
        self.sampler.samples(self.offers - 1, self.appended)
    }

    fn full(&self) -> bool {
        self.cap.is_some_and(|c| self.policy.len() as u64 >= c)
    }
}

/// The stack-plus-cache table.
pub struct CacheStore {
    opts: CacheOptions,
    table: HashTable<u32>,
    entries: Vec<Entry>,
    vectors: Vectors,
    free: Vec<u32>,
    /// The stream of caches (one for `--cache-size`).
    tiers: Vec<Tier>,
    /// The caches' per-slot bookkeeping, one set of arrays for them all.
    slots: Slots,
    /// Numbers handed out: visits, repetitions included.
    numbered: u64,
    on_stack: u64,
    peak: u64,
    matched_stack: u64,
    matched_cache: u64,
    evictions: u64,
    account: Option<Account>,
    /// Sleep sets: per remembered state with some, its enabled transitions that no visit
    /// has executed yet (asleep when it was entered).
    slept: hashbrown::HashMap<u32, Vec<u32>>,
    reopened: u64,
    /// The deadlock states found, kept so that the count is of distinct states though a
    /// deadlock may be visited several times (deadlocks are few in the models worth
    /// caching). The engine's, kept here so that the store's checkpoint records it.
    deadlocks: std::collections::HashSet<Vec<u8>>,
    /// Written by the engine, read by the report.
    pub engine: EngineCounters,
    /// The run's storage (a handle on it), where checkpoints write the table's images.
    storage: Option<Storage>,
    /// The table's images, made at the first checkpoint (or from the resumed one).
    images: Option<Images>,
}

impl CacheStore {
    pub fn new(opts: CacheOptions, width: Option<usize>, account: Option<Account>) -> CacheStore {
        let tiers = Tier::stream(&opts);
        CacheStore {
            opts,
            table: HashTable::new(),
            entries: Vec::new(),
            vectors: match width {
                Some(width) => Vectors::Fixed {
                    width,
                    bytes: Vec::new(),
                },
                None => Vectors::Var(Vec::new()),
            },
            free: Vec::new(),
            tiers,
            slots: Slots::default(),
            numbered: 0,
            on_stack: 0,
            peak: 0,
            matched_stack: 0,
            matched_cache: 0,
            evictions: 0,
            account,
            slept: hashbrown::HashMap::new(),
            reopened: 0,
            deadlocks: std::collections::HashSet::new(),
            engine: EngineCounters::default(),
            storage: None,
            images: None,
        }
    }

    /// Records a visit of the deadlock `state`; returns the distinct deadlocks so far.
    pub fn note_deadlock(&mut self, state: &[u8]) -> u64 {
        self.engine.deadlock_visits += 1;
        if !self.deadlocks.contains(state) {
            self.deadlocks.insert(state.to_vec());
        }
        self.deadlocks.len() as u64
    }

    /// Distinct deadlock states found.
    pub fn distinct_deadlocks(&self) -> u64 {
        self.deadlocks.len() as u64
    }

    /// Whether `slot` holds `state` with a frame of it on the stack: what a resumed engine
    /// checks of its top frame before it pops into the table.
    pub fn holds_on_stack(&self, slot: u32, state: &[u8]) -> bool {
        self.entries
            .get(slot as usize)
            .is_some_and(|e| e.on_stack > 0 && !self.is_free(slot))
            && self.vectors.get(slot) == state
    }

    fn is_free(&self, slot: u32) -> bool {
        !live_at(&self.table, &self.entries, slot)
    }

    pub fn options(&self) -> &CacheOptions {
        &self.opts
    }

    /// Looks `state` up; a cache hit counts as a use for the replacement strategy. Returns
    /// where it is and its slot.
    pub fn find(&mut self, state: &[u8]) -> Option<(Found, u32)> {
        let hash = super::full::state_hash(state);
        let (entries, vectors) = (&self.entries, &self.vectors);
        let slot = *self.table.find(hash, |&s| {
            entries[s as usize].hash == hash && vectors.get(s) == state
        })?;
        let e = self.entries[slot as usize];
        if e.on_stack > 0 {
            self.matched_stack += 1;
            Some((Found::Stack(e.id), slot))
        } else {
            self.matched_cache += 1;
            let t = &mut self.tiers[e.tier as usize];
            t.policy.hit(&mut self.slots, slot);
            t.hits += 1;
            Some((Found::Cache(e.id), slot))
        }
    }

    /// The enabled transitions of the state in `slot` that no visit has executed (sleep
    /// sets; empty without them).
    pub fn slept(&self, slot: u32) -> &[u32] {
        self.slept.get(&slot).map_or(&[], |v| v.as_slice())
    }

    /// Records what [`CacheStore::slept`] gives for `slot`.
    pub fn set_slept(&mut self, slot: u32, slept: Vec<u32>) {
        if slept.is_empty() {
            self.slept.remove(&slot);
        } else {
            self.slept.insert(slot, slept);
        }
    }

    /// Puts a remembered state (in the cache or already on the stack) on the stack once more,
    /// under its number: the sleep-set search reached it with transitions awake that its
    /// earlier visits left asleep, and explores those. Until the matching
    /// [`CacheStore::pop`] it cannot be evicted.
    pub fn reopen(&mut self, slot: u32) {
        let e = &mut self.entries[slot as usize];
        if e.on_stack == 0 {
            self.tiers[e.tier as usize]
                .policy
                .remove(&mut self.slots, slot);
        }
        e.on_stack += 1;
        self.on_stack += 1;
        self.reopened += 1;
        self.peak = self.peak.max(self.stored());
    }

    /// Numbers a state that is not in the table and puts it on the stack; returns its slot
    /// (for [`CacheStore::pop`]) and number. `kind` is the kind of the transition that
    /// reached it (the type-oriented strategy ranks cache entries by it).
    pub fn push(&mut self, state: &[u8], kind: u8) -> Result<(u32, StateId), StoreError> {
        let hash = super::full::state_hash(state);
        if self.free.is_empty() && self.entries.len() == self.entries.capacity() {
            self.check_growth()?;
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = u32::try_from(self.entries.len()).map_err(|_| {
                    StoreError::CapacityExceeded {
                        store: "cache",
                        message: "more than 2^32 states on the stack and in the cache".into(),
                    }
                })?;
                self.entries.push(Entry {
                    hash: 0,
                    id: 0,
                    kind: 0,
                    tier: 0,
                    depth: 0,
                    on_stack: 0,
                });
                s
            }
        };
        let id = self.numbered;
        self.numbered += 1;
        self.entries[slot as usize] = Entry {
            hash,
            id,
            kind,
            tier: 0,
            depth: self.on_stack.min(u32::MAX as u64) as u32,
            on_stack: 1,
        };
        self.vectors.set(slot, state);
        let entries = &self.entries;
        self.table
            .insert_unique(hash, slot, |&s| entries[s as usize].hash);
        self.on_stack += 1;
        self.peak = self.peak.max(self.stored());
        Ok((slot, id))
    }

    /// Under `--memory`, before the arrays double (the entries, then the table and the
    /// vectors with them: the stack is unbounded, so only the caches were claimed up
    /// front): refused if the resident set plus what the doubled arrays take would pass
    /// the budget. The engines' check every 16,384 steps had let Kanban-PT-00005 reach
    /// 7.8 MiB past `--memory 64M` with `--cache-size 100000`.
    fn check_growth(&self) -> Result<(), StoreError> {
        let len = self.entries.len().max(1) as u64;
        let width = match &self.vectors {
            Vectors::Fixed { width, .. } => *width as u64,
            Vectors::Var(_) => 32,
        };
        // The doubled arrays' new half, and the largest array's old copy while it moves;
        // the caches' per-slot arrays follow the slots.
        let more = len.saturating_mul(ENTRY_BYTES + 2 * width + self.slots.bytes_per_slot());
        crate::sys::check_budget_more(more, || {
            (
                format!(
                    "the cache store holds {} states ({} on the stack) and would grow by {} MiB",
                    self.stored(),
                    self.on_stack,
                    more >> 20
                ),
                ", or cache fewer states (--cache-size, --caches; the stack is always kept), or use a store whose index spills to disk (full, comback, delta, hashcompact, tree)",
            )
        })?;
        Ok(())
    }

    /// A frame of the state in `slot` leaves the stack (its subtree is explored). Returns
    /// whether another frame of it is still on the stack; if not, it enters the cache,
    /// evicting one cached state when the cache is full, or is forgotten at once by a cache
    /// of size 0.
    pub fn pop(&mut self, slot: u32) -> bool {
        let e = &mut self.entries[slot as usize];
        e.on_stack -= 1;
        self.on_stack -= 1;
        if e.on_stack > 0 {
            return true;
        }
        self.offer(slot);
        false
    }

    /// Offers a state that left the stack to the stream: each cache that takes it may evict
    /// one state, offered to the next cache; what the last cache evicts, or a cache
    /// declines, is forgotten.
    fn offer(&mut self, mut slot: u32) {
        let mut i = 0;
        loop {
            let Some(t) = self.tiers.get_mut(i) else {
                self.forget(slot);
                self.evictions += 1;
                return;
            };
            if !t.samples() {
                t.declined += 1;
                self.forget(slot);
                self.evictions += 1;
                return;
            }
            if t.cap == Some(0) {
                // A cache of nothing (`--cache-size 0`) forgets at once; what a cache before
                // it evicted counts as evicted.
                self.forget(slot);
                if i > 0 {
                    self.evictions += 1;
                }
                return;
            }
            let victim = if t.full() {
                t.policy.evict(&mut self.slots)
            } else {
                None
            };
            let e = &mut self.entries[slot as usize];
            e.tier = i as u8;
            t.policy
                .insert_at(&mut self.slots, slot, e.kind, e.depth as u64);
            t.taken += 1;
            let Some(v) = victim else {
                return;
            };
            t.evicted += 1;
            let (strategy, cap, sampling) = (t.policy.strategy(), t.cap, t.sampler.sampling());
            let last = i + 1 == self.tiers.len();
            if last && matches!(&self.opts.stream, Some(s) if s.growth == Growth::Pebble) {
                let mut copy = Tier::new(
                    strategy,
                    cap,
                    sampling,
                    self.opts.seed.wrapping_add(self.tiers.len() as u64),
                );
                copy.appended = true;
                if self.tiers.len() >= u8::MAX as usize {
                    // Entries name their cache in a byte: past 255 caches the last one
                    // stops evicting instead of appending.
                    self.tiers[i].cap = None;
                } else {
                    self.tiers.push(copy);
                }
            }
            slot = v;
            i += 1;
        }
    }

    fn forget(&mut self, slot: u32) {
        self.slept.remove(&slot);
        let hash = self.entries[slot as usize].hash;
        if let Ok(e) = self.table.find_entry(hash, |&s| s == slot) {
            e.remove();
        }
        self.free.push(slot);
    }

    /// States remembered now: the stack and the cache.
    pub fn stored(&self) -> u64 {
        self.on_stack
            + self
                .tiers
                .iter()
                .map(|t| t.policy.len() as u64)
                .sum::<u64>()
    }

    /// The most states remembered at once (the paper's "stored states").
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// States matched (found on the stack or in the cache).
    pub fn matched(&self) -> u64 {
        self.matched_stack + self.matched_cache
    }

    /// Cached states forgotten to make room.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }
}

/// The store's part of a checkpoint's manifest (its blob): the stream's small state and the
/// counters, with the sizes of what the table's image (`cache.table.G`,
/// [`crate::storage::image`]) holds, in this order:
///
/// 1. one record per slot, empty for a free slot, else `id: u64 | kind: u8 | tier: u8 |
///    depth: u32 | on_stack: u32 | state` (all LE);
/// 2. the free slots, in the order they are taken again (`u32`);
/// 3. the shared per-slot arrays of the replacement strategies ([`Slots`]): `pos` (`u32`),
///    `kinds` (`u8`), `prev`, `next`, `hits` (`u32`), `stamp` (`u64`);
/// 4. for each cache whose strategy is random or type, in stream order, its dense list of
///    slots (`u32`);
/// 5. one record per state with transitions left asleep: `slot: u32 | transitions: u32…`;
/// 6. one record per deadlock state found (its vector).
///
/// Arrays of words are [`crate::storage::image::CHUNK`] values a record. The hash table is
/// not written: it is rebuilt from the slots (its order decides nothing). The LFU/MFU/LLNR
/// ordered sets are rebuilt from `hits` and `stamp`, which hold their keys.
#[derive(Serialize, Deserialize)]
struct CacheCheckpoint {
    tiers: Vec<TierMark>,
    numbered: u64,
    on_stack: u64,
    peak: u64,
    matched_stack: u64,
    matched_cache: u64,
    evictions: u64,
    reopened: u64,
    engine: EngineCounters,
    /// Slots (live and free), the entry array's capacity (restored, so that the table grows
    /// — and asks the budget — when the uninterrupted run's does), free slots, and the live
    /// states' bytes.
    slots: u64,
    capacity: u64,
    free: u64,
    state_bytes: u64,
    arrays: SlotsMark,
    /// States with transitions left asleep, and those transitions.
    slept: u64,
    slept_transitions: u64,
    /// Distinct deadlocks and their bytes.
    deadlocks: u64,
    deadlock_bytes: u64,
    image: ImageMark,
}

/// One cache of the stream in a checkpoint: its policy's mark and [`Tier`]'s fields.
#[derive(Serialize, Deserialize)]
struct TierMark {
    policy: PolicyMark,
    cap: Option<u64>,
    sampler: Sampler,
    appended: bool,
    offers: u64,
    taken: u64,
    evicted: u64,
    declined: u64,
    hits: u64,
}

/// Name of the table's images.
const TABLE_IMAGE: &str = "cache.table";

/// Bytes of a slot record before its state.
const SLOT_HEAD: usize = 8 + 1 + 1 + 4 + 4;

impl CacheStore {
    /// Writes the store's part of a checkpoint (see [`CacheCheckpoint`]).
    fn write_checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        let storage = self
            .storage
            .as_ref()
            .ok_or_else(|| super::storage_needed("cache"))?;
        let images = self
            .images
            .get_or_insert_with(|| Images::new(storage, TABLE_IMAGE, None));
        let mut free = vec![false; self.entries.len()];
        for &f in &self.free {
            free[f as usize] = true;
        }
        let mut state_bytes = 0u64;
        let (entries, vectors, tiers, slots) =
            (&self.entries, &self.vectors, &self.tiers, &self.slots);
        let (slept, deadlocks) = (&self.slept, &self.deadlocks);
        let free_list = &self.free;
        let (image, files) = images.write(storage, |w| {
            let mut buf = Vec::new();
            for (slot, e) in entries.iter().enumerate() {
                buf.clear();
                if !free[slot] {
                    let state = vectors.get(slot as u32);
                    buf.extend_from_slice(&e.id.to_le_bytes());
                    buf.push(e.kind);
                    buf.push(e.tier);
                    buf.extend_from_slice(&e.depth.to_le_bytes());
                    buf.extend_from_slice(&e.on_stack.to_le_bytes());
                    buf.extend_from_slice(state);
                    state_bytes += state.len() as u64;
                }
                w.push(&buf)?;
            }
            w.push_words::<4, u32>(free_list)?;
            let (pos, kinds, prev, next, hits, stamp) = slots.arrays();
            w.push_words::<4, u32>(pos)?;
            w.push_words::<1, u8>(kinds)?;
            w.push_words::<4, u32>(prev)?;
            w.push_words::<4, u32>(next)?;
            w.push_words::<4, u32>(hits)?;
            w.push_words::<8, u64>(stamp)?;
            for t in tiers {
                w.push_words::<4, u32>(t.policy.dense())?;
            }
            for (&slot, asleep) in slept {
                buf.clear();
                buf.extend_from_slice(&slot.to_le_bytes());
                for t in asleep {
                    buf.extend_from_slice(&t.to_le_bytes());
                }
                w.push(&buf)?;
            }
            for d in deadlocks {
                w.push(d)?;
            }
            Ok(())
        })?;
        let c = CacheCheckpoint {
            tiers: self
                .tiers
                .iter()
                .map(|t| TierMark {
                    policy: t.policy.mark(),
                    cap: t.cap,
                    sampler: t.sampler,
                    appended: t.appended,
                    offers: t.offers,
                    taken: t.taken,
                    evicted: t.evicted,
                    declined: t.declined,
                    hits: t.hits,
                })
                .collect(),
            numbered: self.numbered,
            on_stack: self.on_stack,
            peak: self.peak,
            matched_stack: self.matched_stack,
            matched_cache: self.matched_cache,
            evictions: self.evictions,
            reopened: self.reopened,
            engine: self.engine,
            slots: self.entries.len() as u64,
            capacity: self.entries.capacity() as u64,
            free: self.free.len() as u64,
            state_bytes,
            arrays: self.slots.mark(),
            slept: self.slept.len() as u64,
            slept_transitions: self.slept.values().map(|v| v.len() as u64).sum(),
            deadlocks: self.deadlocks.len() as u64,
            deadlock_bytes: self.deadlocks.iter().map(|d| d.len() as u64).sum(),
            image,
        };
        Ok(StoreMark {
            blob: encode_blob(&c),
            files,
        })
    }

    /// Reopens the store of a checkpoint: the stream and the counters from the blob, the
    /// table, the replacement bookkeeping, the sleep-set records and the deadlocks from the
    /// image. Before reading the image, asks the `--memory` backstop whether they fit (the
    /// process's baseline was taken before the store was reopened, so what it reads counts
    /// against the budget as in the uninterrupted run).
    fn resume(
        opts: CacheOptions,
        width: Option<usize>,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<CacheStore, StoreError> {
        let c: CacheCheckpoint = decode_blob("cache", &mark.blob)?;
        let more = c
            .slots
            .saturating_mul(ENTRY_BYTES)
            .saturating_add(c.state_bytes)
            .saturating_add(c.deadlock_bytes)
            .saturating_add(c.deadlocks.saturating_mul(48))
            .saturating_add(c.slept_transitions.saturating_mul(4))
            .saturating_add(c.slept.saturating_mul(48));
        crate::sys::check_budget_more(more, || {
            (
                format!(
                    "resuming, the cache store would take back its {} states ({} MiB)",
                    c.slots.saturating_sub(c.free),
                    more >> 20
                ),
                ", or cache fewer states (--cache-size, --caches)",
            )
        })?;
        let mut store = CacheStore::new(opts, width, Some(storage.budget.account("cache.table")));
        store.storage = Some(storage.handle());
        let images = Images::new(storage, TABLE_IMAGE, Some(&c.image));
        let mut r = images.read(storage, &c.image)?;
        store.read_image(&mut r, &c)?;
        r.finish()?;
        store.images = Some(images);
        (store.numbered, store.on_stack, store.peak) = (c.numbered, c.on_stack, c.peak);
        (store.matched_stack, store.matched_cache) = (c.matched_stack, c.matched_cache);
        (store.evictions, store.reopened) = (c.evictions, c.reopened);
        store.engine = c.engine;
        store.engine.deadlocks = store.deadlocks.len() as u64;
        Ok(store)
    }

    /// Reads the image (the layout of [`CacheCheckpoint`]) into this new store, checking
    /// what the methods rely on (they index by slot and expect the table, the free list,
    /// the caches and the stack to partition the slots): a checkpoint that breaks it is
    /// refused naming the image, instead of a panic or a wrong count later.
    fn read_image(&mut self, r: &mut ImageReader, c: &CacheCheckpoint) -> Result<(), StorageError> {
        const SLOT: &str = "a slot (id, kind, cache, depth, frames on the stack, state)";
        let base = Tier::stream(&self.opts);
        let pebble = matches!(&self.opts.stream, Some(s) if s.growth == Growth::Pebble);
        let tiers_fit = !base.is_empty()
            && c.tiers.len() <= u8::MAX as usize
            && (c.tiers.len() == base.len() || (pebble && c.tiers.len() > base.len()))
            && c.tiers
                .iter()
                .enumerate()
                .all(|(i, t)| t.policy.strategy == base[i.min(base.len() - 1)].policy.strategy());
        if !tiers_fit || c.slots > u32::MAX as u64 + 1 || c.free > c.slots {
            return Err(r.bad(&format!(
                "the table of the checkpoint's description ({} caches for {} of the options, {} slots, {} free)",
                c.tiers.len(),
                base.len(),
                c.slots,
                c.free
            )));
        }
        let n = c.slots as usize;
        let width = match &self.vectors {
            Vectors::Fixed { width, .. } => Some(*width),
            Vectors::Var(_) => None,
        };
        // The entry array at the recorded capacity (no more than a doubling past the slots:
        // what a vector's growth leaves).
        let capacity = (c.capacity as usize).clamp(n, n.saturating_mul(2).max(16));
        self.entries = Vec::with_capacity(capacity);
        let (mut live, mut on_stack, mut state_bytes) = (0u64, 0u64, 0u64);
        // The cache each slot is in (`u8::MAX`: free or on the stack), and its members.
        let mut cache_of = vec![u8::MAX; n];
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); c.tiers.len()];
        let blank = Entry {
            hash: 0,
            id: 0,
            kind: 0,
            tier: 0,
            depth: 0,
            on_stack: 0,
        };
        for slot in 0..n as u32 {
            r.next(SLOT)?;
            let rec = r.record();
            if rec.is_empty() {
                self.entries.push(blank);
                continue;
            }
            if rec.len() < SLOT_HEAD {
                return Err(r.bad(SLOT));
            }
            let word =
                |at: usize| u32::from_le_bytes([rec[at], rec[at + 1], rec[at + 2], rec[at + 3]]);
            let mut id = [0u8; 8];
            id.copy_from_slice(&rec[..8]);
            let state = &rec[SLOT_HEAD..];
            let e = Entry {
                hash: super::full::state_hash(state),
                id: u64::from_le_bytes(id),
                kind: rec[8],
                tier: rec[9],
                depth: word(10),
                on_stack: word(14),
            };
            if e.id >= c.numbered
                || width.is_some_and(|w| w != state.len())
                || (e.on_stack == 0 && e.tier as usize >= c.tiers.len())
            {
                return Err(r.bad(SLOT));
            }
            let (entries, vectors) = (&self.entries, &self.vectors);
            if self
                .table
                .find(e.hash, |&s| {
                    entries[s as usize].hash == e.hash && vectors.get(s) == state
                })
                .is_some()
            {
                return Err(r.bad("a slot whose state no other slot holds"));
            }
            if e.on_stack == 0 {
                cache_of[slot as usize] = e.tier;
                members[e.tier as usize].push(slot);
            }
            live += 1;
            on_stack += e.on_stack as u64;
            state_bytes += state.len() as u64;
            self.vectors.set(slot, state);
            self.entries.push(e);
            let entries = &self.entries;
            self.table
                .insert_unique(e.hash, slot, |&s| entries[s as usize].hash);
        }
        if live + c.free != c.slots || on_stack != c.on_stack || state_bytes != c.state_bytes {
            return Err(r.bad(&format!(
                "the last of {} slots, {} of them free, {} frames on the stack, {} bytes of states (found {} live, {} frames, {} bytes)",
                c.slots, c.free, c.on_stack, c.state_bytes, live, on_stack, state_bytes
            )));
        }
        // Free slots: each one whose record was empty, once.
        let mut taken = vec![false; n];
        let mut bad = false;
        let mut free = Vec::with_capacity(c.free as usize);
        r.words::<4>(c.free, "the free slots", |s| {
            let s = s as usize;
            bad |= s >= n
                || taken[s]
                || self.entries[s].on_stack > 0
                || live_at(&self.table, &self.entries, s as u32);
            if s < n {
                taken[s] = true;
            }
            free.push(s as u32);
        })?;
        if bad {
            return Err(r.bad("the free slots, each a free slot once"));
        }
        self.free = free;
        // The strategies' arrays: no longer than the slots (they grow to the largest slot a
        // cache took).
        let a = c.arrays;
        if a.pos > c.slots || a.prev > c.slots || a.hits > c.slots {
            return Err(r.bad("the replacement arrays, no longer than the slots"));
        }
        let mut pos = Vec::with_capacity(a.pos as usize);
        r.words::<4>(a.pos, "the replacement positions", |v| pos.push(v as u32))?;
        let mut kinds = Vec::with_capacity(a.pos as usize);
        r.words::<1>(a.pos, "the replacement kinds", |v| kinds.push(v as u8))?;
        let mut prev = Vec::with_capacity(a.prev as usize);
        r.words::<4>(a.prev, "the recency links", |v| prev.push(v as u32))?;
        let mut next = Vec::with_capacity(a.prev as usize);
        r.words::<4>(a.prev, "the recency links", |v| next.push(v as u32))?;
        let mut hits = Vec::with_capacity(a.hits as usize);
        r.words::<4>(a.hits, "the hit counts", |v| hits.push(v as u32))?;
        let mut stamp = Vec::with_capacity(a.hits as usize);
        r.words::<8>(a.hits, "the use stamps", |v| stamp.push(v))?;
        self.slots = Slots::from_arrays(pos, kinds, prev, next, hits, stamp)
            .ok_or_else(|| r.bad("the replacement arrays"))?;
        self.tiers.clear();
        for (i, t) in c.tiers.iter().enumerate() {
            let mut dense = Vec::new();
            if Policy::keeps_dense(t.policy.strategy) {
                r.words::<4>(t.policy.len, "a cache's list of slots", |s| {
                    dense.push(s as u32)
                })?;
            }
            let policy = Policy::restore(&t.policy, dense, &members[i], &self.slots, |s| {
                cache_of.get(s as usize) == Some(&(i as u8))
            })
            .map_err(|why| r.bad(&format!("cache {} of the stream: {why}", i + 1)))?;
            self.tiers.push(Tier {
                policy,
                cap: t.cap,
                sampler: t.sampler,
                appended: t.appended,
                offers: t.offers,
                taken: t.taken,
                evicted: t.evicted,
                declined: t.declined,
                hits: t.hits,
            });
        }
        let mut transitions = 0u64;
        for _ in 0..c.slept {
            const WHAT: &str = "a slot and its transitions left asleep";
            r.next(WHAT)?;
            let rec = r.record();
            if rec.len() < 8 || !rec.len().is_multiple_of(4) {
                return Err(r.bad(WHAT));
            }
            let words: Vec<u32> = rec
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let slot = words[0];
            if slot as usize >= n
                || !live_at(&self.table, &self.entries, slot)
                || self.slept.contains_key(&slot)
            {
                return Err(r.bad("a live slot's transitions left asleep, once"));
            }
            transitions += words.len() as u64 - 1;
            self.slept.insert(slot, words[1..].to_vec());
        }
        if transitions != c.slept_transitions {
            return Err(r.bad(&format!(
                "the last of the {} transitions left asleep (found {transitions})",
                c.slept_transitions
            )));
        }
        let mut bytes = 0u64;
        for _ in 0..c.deadlocks {
            r.next("a deadlock state")?;
            let d = r.record();
            if width.is_some_and(|w| w != d.len()) || self.deadlocks.contains(d) {
                return Err(r.bad("a deadlock state found once"));
            }
            bytes += d.len() as u64;
            self.deadlocks.insert(d.to_vec());
        }
        if bytes != c.deadlock_bytes {
            return Err(r.bad(&format!(
                "the last deadlock state of {} bytes (found {bytes})",
                c.deadlock_bytes
            )));
        }
        Ok(())
    }
}

/// Whether `slot` holds a state (it is in the table).
fn live_at(table: &HashTable<u32>, entries: &[Entry], slot: u32) -> bool {
    entries
        .get(slot as usize)
        .is_some_and(|e| table.find(e.hash, |&s| s == slot).is_some())
}

impl StateStore for CacheStore {
    fn name(&self) -> &'static str {
        "cache"
    }

    /// The caching engine uses [`CacheStore::find`] / [`CacheStore::push`] /
    /// [`CacheStore::pop`]; this is the same lookup for callers of the trait: a state not in
    /// the table is numbered and put on the stack (until they `pop` it).
    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        Ok(match self.find(state) {
            Some((Found::Stack(id) | Found::Cache(id), _)) => Insert::Seen(id),
            None => Insert::New(self.push(state, 0)?.1),
        })
    }

    /// Numbers handed out: states visited, repetitions included (the LTS's state count).
    fn len(&self) -> u64 {
        self.numbered
    }

    fn states_back(&self) -> StatesBack {
        StatesBack::No
    }

    fn exactness(&self) -> Exactness {
        Exactness::Revisiting {
            forgotten: self.evictions,
        }
    }

    fn ram_bytes(&self) -> u64 {
        self.table.capacity() as u64 * 4
            + self.entries.capacity() as u64 * std::mem::size_of::<Entry>() as u64
            + self.vectors.ram_bytes()
            + self.free.capacity() as u64 * 4
            + self.tiers.iter().map(|t| t.policy.ram_bytes()).sum::<u64>()
            + self.slots.ram_bytes()
            + self
                .slept
                .values()
                .map(|v| v.capacity() as u64 * 4 + 32)
                .sum::<u64>()
            + self
                .deadlocks
                .iter()
                .map(|d| d.capacity() as u64 + 48)
                .sum::<u64>()
    }

    fn min_ram_bytes(&self) -> u64 {
        0
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        match &self.opts.stream {
            None => {
                m.insert("cache_size".into(), json!(self.opts.size));
                m.insert("replacement".into(), json!(self.opts.replacement.as_str()));
            }
            Some(spec) => {
                // The total capacity (null when a cache or the stream is unbounded).
                let bounded =
                    spec.growth == Growth::Fixed && self.tiers.iter().all(|t| t.cap.is_some());
                let total: u64 = self.tiers.iter().filter_map(|t| t.cap).sum();
                m.insert(
                    "cache_size".into(),
                    if bounded { json!(total) } else { json!(null) },
                );
                m.insert("replacement".into(), json!(spec.to_string()));
                let caches: Vec<serde_json::Value> = self
                    .tiers
                    .iter()
                    .map(|t| {
                        json!({
                            "replacement": t.policy.strategy().as_str(),
                            "capacity": t.cap,
                            "appended": t.appended,
                            "held": t.policy.len(),
                            "taken": t.taken,
                            "evicted": t.evicted,
                            "declined": t.declined,
                            "hits": t.hits,
                        })
                    })
                    .collect();
                m.insert("caches".into(), json!(caches));
            }
        }
        m.insert("sleep_sets".into(), json!(self.opts.sleep_sets));
        m.insert("visited".into(), json!(self.numbered));
        m.insert("stored_peak".into(), json!(self.peak));
        m.insert("matched".into(), json!(self.matched()));
        m.insert("matched_on_stack".into(), json!(self.matched_stack));
        m.insert("matched_in_cache".into(), json!(self.matched_cache));
        m.insert("evictions".into(), json!(self.evictions));
        m.insert("reopened".into(), json!(self.reopened));
        m.insert("deadlock_visits".into(), json!(self.engine.deadlock_visits));
        m.insert("slept_transitions".into(), json!(self.engine.slept));
        m
    }

    fn summary(&self) -> Option<String> {
        Some(format!(
            "cache: {} states visited (repetitions included), at most {} stored (stack + {}{}), {} matched, {} evicted",
            self.numbered,
            self.peak,
            match &self.opts.stream {
                None => format!("cache of {}, {}", self.opts.size, self.opts.replacement.as_str()),
                Some(spec) => format!("caches {spec} ({} now)", self.tiers.len()),
            },
            if self.opts.sleep_sets {
                format!(", sleep sets: {} transitions slept", self.engine.slept)
            } else {
                String::new()
            },
            self.matched(),
            self.evictions
        ))
    }

    fn as_cache(&mut self) -> Option<&mut CacheStore> {
        Some(self)
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        self.write_checkpoint()
    }

    fn sync_accounts(&self) {
        if let Some(a) = &self.account {
            a.set(self.ram_bytes(), 0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_states_stay_and_the_cache_is_bounded() {
        let opts = CacheOptions {
            size: 2,
            replacement: Strategy::Lru,
            ..Default::default()
        };
        let mut c = CacheStore::new(opts, Some(1), None);
        let (s0, id0) = c.push(&[0], 0).unwrap();
        let mut slots = Vec::new();
        for b in 1..=4u8 {
            slots.push(c.push(&[b], 0).unwrap().0);
        }
        assert_eq!(id0, 0);
        assert_eq!(c.find(&[0]).map(|f| f.0), Some(Found::Stack(0)));
        // 1..=4 leave the stack in order; the LRU cache of 2 keeps 3 and 4.
        for s in slots {
            c.pop(s);
        }
        assert_eq!(c.find(&[1]), None);
        assert_eq!(c.find(&[2]), None);
        assert_eq!(c.find(&[3]).map(|f| f.0), Some(Found::Cache(3)));
        assert_eq!(c.find(&[4]).map(|f| f.0), Some(Found::Cache(4)));
        assert_eq!(c.find(&[0]).map(|f| f.0), Some(Found::Stack(0)));
        assert_eq!((c.evictions(), c.peak(), c.stored()), (2, 5, 3));
        // Met again, an evicted state gets a new number.
        assert_eq!(c.push(&[1], 0).unwrap().1, 5);
        c.pop(s0);
        assert_eq!(c.len(), 6);
    }
}
