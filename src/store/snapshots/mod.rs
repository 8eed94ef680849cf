//! `--store snapshots`: BFS with snapshots and hierarchical caches (BFS without a complete
//! Closed set; CADP's OPEN/CÆSAR paper). The engine (`engine/snapshots.rs`) keeps the Open
//! set — the level being expanded and the one being built — and asks this store about
//! every successor it does not find there; the store holds what the search remembers of
//! older levels:
//!
//! * the **snapshots**: complete levels taken by the stream of caches ([`cache::Stream`],
//!   from the notation of [`spec`]), after their expansion;
//! * the **Backtrack set** (`--backtrack`): states learned by the paper's two rules, never
//!   forgotten;
//!
//! both in one *pool* where each state is stored once with a reference count (the snapshots
//! holding it, plus one if it is in the Backtrack set): a state learned while its level is
//! expanded and then taken as part of that level's snapshot costs one entry. Each pool
//! entry keeps the state's output number, so a recognised duplicate is an edge to it.
//!
//! Snapshots that leave the stream (evicted from the last cache, or declined by the next
//! cache's sampling) are appended to a compressed segment file (`snapshots.evicted`,
//! `level | id | state` records) in the run's work directory. They serve the statistics
//! (how many states the search forgot, and what they take compressed) and can be read
//! with the segment tools while the run lives; the search never reads them back: a batched
//! late duplicate check could not merge states already streamed to the LTS.
//!
//! A checkpoint records the store whole: the stream (snapshots' metadata, samplers, the
//! random generator, counters) in the manifest's blob, and the pool (every slot, with its
//! state, output number, snapshots and Backtrack flag, and the free slots), the snapshots'
//! members, the distinct-state sketch and the audit set in an image (`snapshots.pool.G`,
//! [`crate::storage::image`]). A resumed store is the interrupted one slot for slot, so it
//! answers every later lookup, takes and evicts every later snapshot and learns every later
//! Backtrack state exactly as the uninterrupted run does: same numbering, same LTS.
//!
//! `spec` and `cache` know nothing of states, so the DFS cache search (`--store cache`,
//! issue #14) can reuse the notation, the presets, the termination check and the
//! replacement strategies.

pub mod cache;
pub mod spec;

use super::{
    decode_blob, encode_blob, Exactness, Insert, StateId, StateStore, StatesBack, StoreMark,
    StoreSpec, Via,
};
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::storage::image::{ImageMark, ImageReader, Images};
use crate::storage::{FileMark, QueueMark, SegQueue, Storage};
use cache::{Handle, Stream};
use serde::{Deserialize, Serialize};
use serde_json::json;
use spec::{Preset, StreamSpec, Termination};

const NAME: &str = "snapshots";

/// `--store snapshots` and its options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotsOptions {
    /// The stream of caches (`--caches SPEC`, or a preset's).
    pub stream: StreamSpec,
    /// The preset the stream came from, if any (for the stats).
    pub preset: Option<Preset>,
    /// Learn the Backtrack set (`--backtrack`).
    pub backtrack: bool,
    /// Run a stream whose termination is not guaranteed (`--allow-nontermination`).
    pub allow_nontermination: bool,
    /// Keep the 64-bit hash of every expanded state (8 bytes each, not counted in the
    /// states held) to count distinct and redundant states and transitions exactly
    /// (`--snapshots-audit`); without it distinct states are estimated (HyperLogLog).
    pub audit: bool,
    /// The watchdog (`--snapshots-watchdog F`, 0 = off): when the output reaches `F` times
    /// the distinct states expanded so far, the last cache stops evicting, which makes
    /// termination certain whatever the stream. Lemma 1 only covers cycles: with a bounded
    /// stream, a whole level can still oscillate between two halves that never both sit in
    /// the caches (docs/SNAPSHOTS.md has an example).
    pub watchdog: u32,
}

/// The default watchdog factor: far above the redundancy of any preset run measured
/// (at most 6x on the reference models, 40x on the ring of 10,000 states).
pub const DEFAULT_WATCHDOG: u32 = 64;

impl Default for SnapshotsOptions {
    fn default() -> Self {
        SnapshotsOptions {
            stream: Preset::FrontierSafetyNet.stream(),
            preset: Some(Preset::FrontierSafetyNet),
            backtrack: false,
            allow_nontermination: false,
            audit: false,
            watchdog: DEFAULT_WATCHDOG,
        }
    }
}

impl StoreSpec for SnapshotsOptions {
    fn name(&self) -> &'static str {
        NAME
    }

    fn refuse(&self, run: &super::RunShape) -> Option<String> {
        if run.order != super::Order::Bfs {
            return Some(
                "--store snapshots is BFS with snapshots (--order bfs); the same caches for DFS (--store cache --caches) are not integrated yet"
                    .into(),
            );
        }
        if let Termination::NotGuaranteed(why) = self.stream.termination() {
            if !self.allow_nontermination {
                return Some(format!("--caches: termination is not guaranteed: {why}"));
            }
        }
        None
    }

    /// Evicted snapshots go to a segment file, with or without `--memory`.
    fn needs_storage(&self) -> bool {
        true
    }

    fn build<'m>(
        &self,
        _model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let storage = storage.ok_or_else(|| super::storage_needed(NAME))?;
        Ok(Box::new(SnapshotStore::new(self.clone(), Some(storage))?))
    }

    fn resume<'m>(
        &self,
        _model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(SnapshotStore::resume(
            self.clone(),
            storage,
            mark,
        )?))
    }
}

/// Where a successor was recognised in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its output number.
    pub id: StateId,
    /// It is in the Backtrack set.
    pub backtrack: bool,
    /// A snapshot holding it, and whether that snapshot is old (not in the first cache).
    pub snapshot: Option<(Handle, bool)>,
}

/// A state of the pool.
struct Entry {
    state: Box<[u8]>,
    hash: u64,
    id: StateId,
    /// The snapshots holding it (usually one), and whether it is in the Backtrack set:
    /// the reference count is their number.
    snaps: Vec<Handle>,
    backtrack: bool,
}

/// States stored once, with reference counts.
#[derive(Default)]
struct Pool {
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    index: hashbrown::HashTable<u32>,
    live: u64,
    bytes: u64,
}

/// Bytes a pool entry costs besides its state (the entry, its index slot, the allocation).
const ENTRY_OVERHEAD: u64 = std::mem::size_of::<Option<Entry>>() as u64 + 4 + 16;

impl Pool {
    fn find(&self, state: &[u8], hash: u64) -> Option<u32> {
        self.index
            .find(hash, |&i| {
                self.entries[i as usize]
                    .as_ref()
                    .is_some_and(|e| e.hash == hash && *e.state == *state)
            })
            .copied()
    }

    fn entry(&self, i: u32) -> &Entry {
        self.entries[i as usize]
            .as_ref()
            .expect("a live pool entry")
    }

    fn entry_mut(&mut self, i: u32) -> &mut Entry {
        self.entries[i as usize]
            .as_mut()
            .expect("a live pool entry")
    }

    /// The entry of `state`, made if it is not in the pool (with no reference yet).
    fn get_or_add(&mut self, state: &[u8], hash: u64, id: StateId) -> Result<u32, StoreError> {
        if let Some(i) = self.find(state, hash) {
            return Ok(i);
        }
        if self.free.is_empty() && self.entries.len() >= u32::MAX as usize {
            return Err(StoreError::CapacityExceeded {
                store: NAME,
                message: format!(
                    "the snapshots and the Backtrack set hold {} states, the most a 32-bit pool position can name; use smaller caches",
                    self.live
                ),
            });
        }
        let e = Entry {
            state: state.into(),
            hash,
            id,
            snaps: Vec::new(),
            backtrack: false,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = Some(e);
                i
            }
            None => {
                self.entries.push(Some(e));
                (self.entries.len() - 1) as u32
            }
        };
        let entries = &self.entries;
        self.index.insert_unique(hash, i, |&j| {
            entries[j as usize].as_ref().map_or(0, |e| e.hash)
        });
        self.live += 1;
        self.bytes += state.len() as u64 + ENTRY_OVERHEAD;
        Ok(i)
    }

    /// Drops snapshot `h`'s reference to entry `i`, and the entry when nothing holds it.
    fn release(&mut self, i: u32, h: Handle) {
        let e = self.entry_mut(i);
        e.snaps.retain(|&x| x != h);
        if !e.snaps.is_empty() || e.backtrack {
            return;
        }
        let hash = e.hash;
        let len = e.state.len() as u64;
        if let Ok(slot) = self.index.find_entry(hash, |&j| j == i) {
            slot.remove();
        }
        self.entries[i as usize] = None;
        self.free.push(i);
        self.live -= 1;
        self.bytes -= len + ENTRY_OVERHEAD;
    }
}

/// A HyperLogLog sketch (2^14 registers, standard error ≈ 0.8%) of the expanded states'
/// hashes: the distinct-state estimate when the run keeps no audit set.
struct Sketch {
    registers: Vec<u8>,
}

const SKETCH_BITS: u32 = 14;

impl Sketch {
    fn new() -> Sketch {
        Sketch {
            registers: vec![0; 1 << SKETCH_BITS],
        }
    }

    fn add(&mut self, hash: u64) {
        let i = (hash >> (64 - SKETCH_BITS)) as usize;
        let rest = (hash << SKETCH_BITS) | (1 << (SKETCH_BITS - 1));
        let rank = rest.leading_zeros() as u8 + 1;
        if rank > self.registers[i] {
            self.registers[i] = rank;
        }
    }

    fn estimate(&self) -> f64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.registers.iter().map(|&r| 2f64.powi(-(r as i32))).sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        if raw <= 2.5 * m && zeros > 0 {
            // Linear counting: exact enough for small sets.
            m * (m / zeros as f64).ln()
        } else {
            raw
        }
    }
}

/// The store: the cache stream, the pool of remembered states, the counters.
pub struct SnapshotStore {
    opts: SnapshotsOptions,
    stream: Stream,
    pool: Pool,
    /// Pool entries of each live snapshot, by handle.
    members: Vec<Vec<u32>>,
    evicted: Option<SegQueue>,
    /// The run's storage (a handle on it), where checkpoints write the pool's images.
    storage: Option<Storage>,
    /// The pool's images, made at the first checkpoint (or from the resumed one).
    images: Option<Images>,
    numbered: u64,
    backtrack_states: u64,
    // Counters.
    open_now: u64,
    open_bytes: u64,
    peak_held: u64,
    peak_snapshot_states: u64,
    peak_open: u64,
    level_states_dropped: u64,
    evicted_snapshots: u64,
    evicted_states: u64,
    backtrack_hits: u64,
    snapshot_hits: u64,
    learned_rule1: u64,
    learned_rule2: u64,
    sketch: Sketch,
    audit: Option<Audit>,
    record: Vec<u8>,
    /// Output size at which the watchdog looks again (doubling: the estimate costs 16 K
    /// register reads), and the level where it fired.
    watch_at: u64,
    watchdog_fired: Option<u64>,
}

/// `--snapshots-audit`: the hashes of expanded states, to tell first expansions from
/// redundant ones.
#[derive(Default)]
struct Audit {
    seen: hashbrown::HashSet<u64>,
    redundant_states: u64,
    redundant_transitions: u64,
}

impl SnapshotStore {
    /// A new store; `storage` receives the evicted snapshots (without one they are only
    /// counted: the library's tests).
    pub fn new(
        opts: SnapshotsOptions,
        storage: Option<&Storage>,
    ) -> Result<SnapshotStore, StoreError> {
        let evicted = match storage {
            Some(st) => Some(st.queue("snapshots.evicted")?),
            None => None,
        };
        Ok(SnapshotStore {
            stream: Stream::new(&opts.stream),
            audit: opts.audit.then(Audit::default),
            opts,
            pool: Pool::default(),
            members: Vec::new(),
            evicted,
            storage: storage.map(Storage::handle),
            images: None,
            numbered: 0,
            backtrack_states: 0,
            open_now: 0,
            open_bytes: 0,
            peak_held: 0,
            peak_snapshot_states: 0,
            peak_open: 0,
            level_states_dropped: 0,
            evicted_snapshots: 0,
            evicted_states: 0,
            backtrack_hits: 0,
            snapshot_hits: 0,
            learned_rule1: 0,
            learned_rule2: 0,
            sketch: Sketch::new(),
            record: Vec::new(),
            watch_at: 4096,
            watchdog_fired: None,
        })
    }

    pub fn options(&self) -> &SnapshotsOptions {
        &self.opts
    }

    /// Numbers a new output state (a state not recognised: new, or a redundant copy).
    #[inline]
    pub fn number(&mut self) -> StateId {
        self.numbered += 1;
        self.numbered - 1
    }

    /// The engine expands a state with this hash and `out` successors: the distinct-state
    /// sketch and the audit count it.
    pub fn expanded(&mut self, hash: u64, out: u64) {
        self.sketch.add(hash);
        if let Some(a) = &mut self.audit {
            if !a.seen.insert(hash) {
                a.redundant_states += 1;
                a.redundant_transitions += out;
            }
        }
    }

    /// Looks `state` up in the snapshots and the Backtrack set while level `now` is
    /// expanded, crediting the hit to the snapshot (and its cache) that holds it.
    #[inline]
    pub fn lookup(&mut self, state: &[u8], hash: u64, now: u64) -> Option<Found> {
        if self.pool.live == 0 {
            return None;
        }
        let i = self.pool.find(state, hash)?;
        let e = self.pool.entry(i);
        let snapshot = e.snaps.first().copied();
        let found = Found {
            id: e.id,
            backtrack: e.backtrack,
            snapshot: snapshot.map(|h| (h, self.stream.is_old(h))),
        };
        if let Some(h) = snapshot {
            self.stream.hit(h, now);
            self.snapshot_hits += 1;
        } else {
            self.backtrack_hits += 1;
        }
        Some(found)
    }

    /// Whether the Backtrack set is learned.
    pub fn learns(&self) -> bool {
        self.opts.backtrack
    }

    /// Adds `state` (output number `id`) to the Backtrack set, by rule 1 (its successors all
    /// lie in one old snapshot) or rule 2 (they all lie in the Backtrack set).
    pub fn learn(
        &mut self,
        state: &[u8],
        hash: u64,
        id: StateId,
        rule: Rule,
    ) -> Result<(), StoreError> {
        let i = self.pool.get_or_add(state, hash, id)?;
        let e = self.pool.entry_mut(i);
        if e.backtrack {
            return Ok(());
        }
        e.backtrack = true;
        self.backtrack_states += 1;
        match rule {
            Rule::OldSnapshot => self.learned_rule1 += 1,
            Rule::AllBacktrack => self.learned_rule2 += 1,
        }
        Ok(())
    }

    /// The engine's Open set now holds `states` states in `bytes` bytes (for the peaks).
    pub fn note_open(&mut self, states: u64, bytes: u64) {
        self.open_now = states;
        self.open_bytes = bytes;
        self.peak_open = self.peak_open.max(states);
        self.peak_held = self.peak_held.max(self.pool.live + states);
    }

    /// Level `level` (its states with their hashes and output numbers) is expanded: the
    /// first cache may take it as a snapshot; snapshots that leave the stream are written
    /// to the evicted file and their states released.
    pub fn level_done<'a>(
        &mut self,
        level: u64,
        size: u64,
        states: impl Iterator<Item = (&'a [u8], u64, StateId)>,
    ) -> Result<(), StoreError> {
        let mut dropped = Vec::new();
        match self.stream.offer_level(level, size, &mut dropped) {
            Some(h) => {
                let mut states = states.peekable();
                if let Some((first, _, _)) = states.peek() {
                    // The level enters the pool at once (an entry, a boxed copy of its
                    // state, a member slot), with no `--memory` check until it is in: ask
                    // first, so that a run stops before the step that would pass the
                    // budget, not after it (the engine's check every 1,024 expansions had
                    // let Kanban-PT-00005 reach 11 MiB past --memory 128M here).
                    let per = ENTRY_OVERHEAD + 4 + (first.len() as u64 + 8).next_multiple_of(16);
                    let more = size.saturating_mul(per);
                    crate::sys::check_budget_more(more, || {
                        (
                            format!(
                                "the snapshots store holds {} states and would take a level of {size} more ({} MiB)",
                                self.pool.live,
                                more >> 20
                            ),
                            ", or use a store whose index spills to disk (full, comback, delta, hashcompact, tree)",
                        )
                    })?;
                }
                let mut members = Vec::with_capacity(size as usize);
                for (state, hash, id) in states {
                    let i = self.pool.get_or_add(state, hash, id)?;
                    self.pool.entry_mut(i).snaps.push(h);
                    members.push(i);
                }
                if self.members.len() <= h as usize {
                    self.members.resize_with(h as usize + 1, Vec::new);
                }
                self.members[h as usize] = members;
            }
            None => self.level_states_dropped += size,
        }
        for (h, level) in dropped {
            self.leave(h, level)?;
        }
        self.watch(level);
        // The peak of states held is taken by the engine's `note_open` calls: here the
        // level just taken is still counted in Open.
        self.peak_snapshot_states = self.peak_snapshot_states.max(self.stream.held_states);
        Ok(())
    }

    /// The watchdog: fires once, when the output passes `watchdog` times the distinct
    /// states expanded so far.
    fn watch(&mut self, level: u64) {
        let factor = self.opts.watchdog as u64;
        if factor == 0 || self.watchdog_fired.is_some() || self.numbered < self.watch_at {
            return;
        }
        let (distinct, _) = self.distinct_states();
        if self.numbered > factor.saturating_mul(distinct.max(1)) {
            self.stream.make_last_unbounded();
            self.watchdog_fired = Some(level);
        } else {
            self.watch_at = self.numbered.saturating_mul(2);
        }
    }

    /// The level where the watchdog made the last cache unbounded, if it did.
    pub fn watchdog_fired(&self) -> Option<u64> {
        self.watchdog_fired
    }

    /// Snapshot `h` left the stream: its states go to the evicted file and are released.
    fn leave(&mut self, h: Handle, level: u64) -> Result<(), StoreError> {
        let members = std::mem::take(&mut self.members[h as usize]);
        self.evicted_snapshots += 1;
        self.evicted_states += members.len() as u64;
        for &i in &members {
            if let Some(q) = &mut self.evicted {
                let e = self.pool.entry(i);
                self.record.clear();
                self.record.extend_from_slice(&level.to_le_bytes());
                self.record.extend_from_slice(&e.id.to_le_bytes());
                self.record.extend_from_slice(&e.state);
                q.push(&self.record)?;
            }
            self.pool.release(i, h);
        }
        Ok(())
    }

    /// States held now: the pool (snapshots and Backtrack set, each state once) and Open.
    pub fn held(&self) -> u64 {
        self.pool.live + self.open_now
    }

    pub fn peak_held(&self) -> u64 {
        self.peak_held
    }

    /// Distinct states: exact with the audit, else the sketch's estimate.
    pub fn distinct_states(&self) -> (u64, bool) {
        match &self.audit {
            Some(a) => (a.seen.len() as u64, true),
            None => (self.sketch.estimate().round() as u64, false),
        }
    }

    /// Snapshots and states that left memory (levels not taken, snapshots evicted).
    fn forgotten(&self) -> u64 {
        self.level_states_dropped + self.evicted_states
    }
}

/// The store's part of a checkpoint's manifest (its blob). The pool, the snapshots'
/// members, the sketch and the audit set are in the image `snapshots.pool.G`, in this
/// order, with the counts below saying how many records each takes:
///
/// 1. the sketch's registers (one record);
/// 2. the audit set's hashes (`u64` LE, [`crate::storage::image::CHUNK`] a record), when the run keeps one;
/// 3. one record per pool slot, empty for a free slot, else `id: u64 | backtrack: u8 |
///    n: u32 | n snapshot handles: u32 | state` (all LE);
/// 4. the free slots, in the order they are taken again (`u32`, [`crate::storage::image::CHUNK`] a record);
/// 5. per snapshot handle, its member count (`u64`) then its members' slots (`u32`,
///    [`crate::storage::image::CHUNK`] a record).
#[derive(Serialize, Deserialize)]
struct SnapshotsCheckpoint {
    stream: Stream,
    numbered: u64,
    backtrack_states: u64,
    open_now: u64,
    peak_held: u64,
    peak_snapshot_states: u64,
    peak_open: u64,
    level_states_dropped: u64,
    evicted_snapshots: u64,
    evicted_states: u64,
    backtrack_hits: u64,
    snapshot_hits: u64,
    learned_rule1: u64,
    learned_rule2: u64,
    watch_at: u64,
    watchdog_fired: Option<u64>,
    /// The audit set's size and counters, when the run keeps one.
    audit: Option<(u64, u64, u64)>,
    pool_slots: u64,
    pool_free: u64,
    pool_live: u64,
    pool_bytes: u64,
    handles: u64,
    evicted: QueueMark,
    image: ImageMark,
}

/// Name of the pool's images.
const POOL_IMAGE: &str = "snapshots.pool";

impl SnapshotStore {
    /// Reopens the store of a checkpoint: the stream and the counters from the blob, the
    /// pool, members, sketch and audit set from the image, the evicted-snapshot queue at its
    /// mark. Before reading the image, asks the `--memory` backstop whether the pool fits
    /// (the process's baseline was taken before the store was reopened, so whatever it
    /// reads counts against the budget as it does in the uninterrupted run).
    fn resume(
        opts: SnapshotsOptions,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<SnapshotStore, StoreError> {
        let c: SnapshotsCheckpoint = decode_blob(NAME, &mark.blob)?;
        let invalid = |message: String| StoreError::Invalid {
            store: NAME,
            message,
        };
        c.stream
            .check()
            .map_err(|why| invalid(format!("the checkpoint's stream of caches: {why}")))?;
        if c.audit.is_some() != opts.audit {
            return Err(invalid(
                "the checkpoint's audit set does not match --snapshots-audit".into(),
            ));
        }
        let more = c
            .pool_bytes
            .saturating_add(
                c.pool_slots
                    .saturating_mul(std::mem::size_of::<Option<Entry>>() as u64),
            )
            .saturating_add(c.stream.held_states.saturating_mul(4))
            .saturating_add(c.audit.map_or(0, |(seen, _, _)| seen.saturating_mul(9)));
        crate::sys::check_budget_more(more, || {
            (
                format!(
                    "resuming, the snapshots store would take back its {} states ({} MiB)",
                    c.pool_live,
                    more >> 20
                ),
                "",
            )
        })?;
        let mut store = SnapshotStore::new(opts, None)?;
        store.evicted = Some(storage.open_queue("snapshots.evicted", &c.evicted)?);
        store.storage = Some(storage.handle());
        let images = Images::new(storage, POOL_IMAGE, Some(&c.image));
        let mut r = images.read(storage, &c.image)?;
        store.read_image(&mut r, &c)?;
        r.finish()?;
        store.images = Some(images);
        store.stream = c.stream;
        store.numbered = c.numbered;
        store.backtrack_states = c.backtrack_states;
        store.open_now = c.open_now;
        store.peak_held = c.peak_held;
        store.peak_snapshot_states = c.peak_snapshot_states;
        store.peak_open = c.peak_open;
        store.level_states_dropped = c.level_states_dropped;
        store.evicted_snapshots = c.evicted_snapshots;
        store.evicted_states = c.evicted_states;
        store.backtrack_hits = c.backtrack_hits;
        store.snapshot_hits = c.snapshot_hits;
        store.learned_rule1 = c.learned_rule1;
        store.learned_rule2 = c.learned_rule2;
        store.watch_at = c.watch_at;
        store.watchdog_fired = c.watchdog_fired;
        Ok(store)
    }

    /// Reads the image (the layout of [`SnapshotsCheckpoint`]) into this new store, and
    /// checks what the methods rely on: every member and free slot names a live (free)
    /// entry, every entry's snapshots are held by the stream.
    fn read_image(
        &mut self,
        r: &mut ImageReader,
        c: &SnapshotsCheckpoint,
    ) -> Result<(), StorageError> {
        r.next("the sketch's registers")?;
        if r.record().len() != self.sketch.registers.len() {
            return Err(r.bad("the sketch's registers"));
        }
        self.sketch.registers.copy_from_slice(r.record());
        if let (Some(a), Some((seen, states, transitions))) = (&mut self.audit, c.audit) {
            a.seen.reserve(seen as usize);
            r.words::<8>(seen, "the audit set's hashes", |h| {
                a.seen.insert(h);
            })?;
            a.redundant_states = states;
            a.redundant_transitions = transitions;
        }
        let pool = &mut self.pool;
        for slot in 0..c.pool_slots {
            const WHAT: &str = "a pool slot (id, Backtrack flag, snapshots, state)";
            r.next(WHAT)?;
            let rec = r.record();
            if rec.is_empty() {
                pool.entries.push(None);
                continue;
            }
            if rec.len() < 13 {
                return Err(r.bad(WHAT));
            }
            let word =
                |at: usize| u32::from_le_bytes([rec[at], rec[at + 1], rec[at + 2], rec[at + 3]]);
            let mut id = [0u8; 8];
            id.copy_from_slice(&rec[..8]);
            let backtrack = match rec[8] {
                0 => false,
                1 => true,
                _ => return Err(r.bad(WHAT)),
            };
            let n = word(9) as usize;
            let state_at = 13 + 4 * n;
            if rec.len() < state_at {
                return Err(r.bad(WHAT));
            }
            let snaps: Vec<Handle> = (0..n).map(|k| word(13 + 4 * k)).collect();
            if snaps.iter().any(|&h| !c.stream.is_live(h)) || (snaps.is_empty() && !backtrack) {
                return Err(r.bad("a pool slot held by live snapshots or the Backtrack set"));
            }
            let state = &rec[state_at..];
            let hash = crate::store::full::state_hash(state);
            if pool.find(state, hash).is_some() {
                return Err(r.bad("a pool slot whose state no other slot holds"));
            }
            let i = slot as u32;
            pool.entries.push(Some(Entry {
                state: state.into(),
                hash,
                id: u64::from_le_bytes(id),
                snaps,
                backtrack,
            }));
            let entries = &pool.entries;
            pool.index.insert_unique(hash, i, |&j| {
                entries[j as usize].as_ref().map_or(0, |e| e.hash)
            });
            pool.live += 1;
            pool.bytes += state.len() as u64 + ENTRY_OVERHEAD;
        }
        if pool.live != c.pool_live || pool.bytes != c.pool_bytes {
            return Err(r.bad(&format!(
                "the last of {} pool slots holding {} states in {} bytes (found {} in {})",
                c.pool_slots, c.pool_live, c.pool_bytes, pool.live, pool.bytes
            )));
        }
        let mut bad_free = false;
        r.words::<4>(c.pool_free, "the pool's free slots", |i| {
            bad_free |= pool.entries.get(i as usize).is_none_or(|e| e.is_some());
            pool.free.push(i as u32);
        })?;
        if bad_free {
            return Err(r.bad("the pool's free slots, each a free slot"));
        }
        for h in 0..c.handles {
            r.next("a snapshot's member count")?;
            let rec = r.record();
            let Ok(count) = <[u8; 8]>::try_from(rec).map(u64::from_le_bytes) else {
                return Err(r.bad("a snapshot's member count"));
            };
            let mut members = Vec::with_capacity(count.min(1 << 24) as usize);
            let mut bad = false;
            r.words::<4>(count, "a snapshot's members", |i| {
                // A member is a live slot that names this snapshot.
                bad |= pool
                    .entries
                    .get(i as usize)
                    .and_then(|e| e.as_ref())
                    .is_none_or(|e| !e.snaps.contains(&(h as Handle)));
                members.push(i as u32);
            })?;
            if bad {
                return Err(r.bad("a snapshot's members, each a pool slot of that snapshot"));
            }
            self.members.push(members);
        }
        Ok(())
    }

    /// Writes the store's part of a checkpoint (see [`SnapshotsCheckpoint`]).
    fn write_checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        let storage = self
            .storage
            .as_ref()
            .ok_or_else(|| super::storage_needed(NAME))?;
        let evicted = self
            .evicted
            .as_mut()
            .ok_or_else(|| super::storage_needed(NAME))?;
        let evicted_mark = evicted.flush()?;
        let mut files: Vec<FileMark> = evicted.files(&evicted_mark);
        let images = self
            .images
            .get_or_insert_with(|| Images::new(storage, POOL_IMAGE, None));
        let (pool, members, sketch, audit) = (&self.pool, &self.members, &self.sketch, &self.audit);
        let (image, image_files) = images.write(storage, |w| {
            let mut buf = Vec::new();
            w.push(&sketch.registers)?;
            if let Some(a) = audit {
                let hashes: Vec<u64> = a.seen.iter().copied().collect();
                w.push_words::<8, u64>(&hashes)?;
            }
            for e in &pool.entries {
                buf.clear();
                if let Some(e) = e {
                    buf.extend_from_slice(&e.id.to_le_bytes());
                    buf.push(e.backtrack as u8);
                    buf.extend_from_slice(&(e.snaps.len() as u32).to_le_bytes());
                    for h in &e.snaps {
                        buf.extend_from_slice(&h.to_le_bytes());
                    }
                    buf.extend_from_slice(&e.state);
                }
                w.push(&buf)?;
            }
            w.push_words::<4, u32>(&pool.free)?;
            for m in members {
                w.push(&(m.len() as u64).to_le_bytes())?;
                w.push_words::<4, u32>(m)?;
            }
            Ok(())
        })?;
        files.extend(image_files);
        let c = SnapshotsCheckpoint {
            stream: self.stream.clone(),
            numbered: self.numbered,
            backtrack_states: self.backtrack_states,
            open_now: self.open_now,
            peak_held: self.peak_held,
            peak_snapshot_states: self.peak_snapshot_states,
            peak_open: self.peak_open,
            level_states_dropped: self.level_states_dropped,
            evicted_snapshots: self.evicted_snapshots,
            evicted_states: self.evicted_states,
            backtrack_hits: self.backtrack_hits,
            snapshot_hits: self.snapshot_hits,
            learned_rule1: self.learned_rule1,
            learned_rule2: self.learned_rule2,
            watch_at: self.watch_at,
            watchdog_fired: self.watchdog_fired,
            audit: self.audit.as_ref().map(|a| {
                (
                    a.seen.len() as u64,
                    a.redundant_states,
                    a.redundant_transitions,
                )
            }),
            pool_slots: self.pool.entries.len() as u64,
            pool_free: self.pool.free.len() as u64,
            pool_live: self.pool.live,
            pool_bytes: self.pool.bytes,
            handles: self.members.len() as u64,
            evicted: evicted_mark,
            image,
        };
        Ok(StoreMark {
            blob: encode_blob(&c),
            files,
        })
    }

    /// A resumed engine's Open set: `states` states in `bytes` bytes, as it holds them now
    /// (its arrays' capacities, not the interrupted process's), so that the store's RAM
    /// figure is what this process holds. The peaks are left as recorded: the Open set has
    /// not changed since the checkpoint.
    pub fn resume_open(&mut self, states: u64, bytes: u64) {
        self.open_now = states;
        self.open_bytes = bytes;
    }
}

/// Which of the paper's rules added a state to the Backtrack set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// More than one successor, all in one old snapshot (not in the first cache).
    OldSnapshot,
    /// More than one successor, all in the Backtrack set.
    AllBacktrack,
}

impl StateStore for SnapshotStore {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The store answers level by level ([`SnapshotStore::lookup`], driven by
    /// `engine::snapshots`), not state by state: a plain insert has no level to check
    /// against.
    fn insert(&mut self, _state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        Err(StoreError::Invalid {
            store: NAME,
            message: "the snapshots store is driven level by level by the snapshots engine (explore_session chooses it), not by single inserts".into(),
        })
    }

    fn len(&self) -> u64 {
        self.numbered
    }

    fn as_snapshots(&mut self) -> Option<&mut SnapshotStore> {
        Some(self)
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        self.write_checkpoint()
    }

    fn states_back(&self) -> StatesBack {
        StatesBack::No
    }

    fn exactness(&self) -> Exactness {
        Exactness::Revisiting {
            forgotten: self.forgotten(),
        }
    }

    fn ram_bytes(&self) -> u64 {
        self.pool.bytes
            + self.pool.index.capacity() as u64 * 4
            + self.open_bytes
            + self.evicted.as_ref().map_or(0, |q| q.ram_bytes())
            + self
                .audit
                .as_ref()
                .map_or(0, |a| a.seen.capacity() as u64 * 9)
            + (1 << SKETCH_BITS)
    }

    fn disk_bytes(&self) -> u64 {
        self.evicted.as_ref().map_or(0, |q| q.disk_bytes())
    }

    fn min_ram_bytes(&self) -> u64 {
        (1 << SKETCH_BITS) + self.evicted.as_ref().map_or(0, |q| q.ram_bytes())
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let (distinct, exact) = self.distinct_states();
        let out = self.numbered;
        let mut m = serde_json::Map::new();
        let v = json!({
            "caches": self.opts.stream.to_string(),
            "preset": self.opts.preset.map(|p| p.name()),
            "termination": match self.opts.stream.termination() {
                Termination::IncreasingPeriod { index } => format!("cache {} has an increasing period", index + 1),
                Termination::UnboundedCache { index } => format!("cache {} is unbounded", index + 1),
                Termination::GrowingStream => "the stream grows (Pebble)".to_string(),
                Termination::NotGuaranteed(_) => "not guaranteed (--allow-nontermination)".to_string(),
            },
            "backtrack": self.opts.backtrack,
            "watchdog": self.opts.watchdog,
            "watchdog_fired_at_level": self.watchdog_fired,
            "output_states": out,
            "distinct_states": distinct,
            "distinct_states_exact": exact,
            "redundant_states": out.saturating_sub(distinct),
            "redundant_transitions": self.audit.as_ref().map(|a| a.redundant_transitions),
            "peak_states_held": self.peak_held,
            "peak_states_held_per_distinct_state": self.peak_held as f64 / distinct.max(1) as f64,
            "peak_snapshot_states": self.peak_snapshot_states,
            "peak_open_states": self.peak_open,
            "backtrack_states": self.backtrack_states,
            "backtrack_rule1": self.learned_rule1,
            "backtrack_rule2": self.learned_rule2,
            "backtrack_hits": self.backtrack_hits,
            "snapshot_hits": self.snapshot_hits,
            "snapshots_held": self.stream.held,
            "states_held_at_end": self.held(),
            "level_states_not_taken": self.level_states_dropped,
            "evicted_snapshots": self.evicted_snapshots,
            "evicted_states": self.evicted_states,
            "evicted_disk_bytes": self.disk_bytes(),
            "per_cache": self.stream.report(),
        });
        if let serde_json::Value::Object(o) = v {
            m.extend(o);
        }
        m
    }

    fn summary(&self) -> Option<String> {
        let (distinct, exact) = self.distinct_states();
        let caches = &self.stream.caches;
        let mut hits: Vec<String> = caches.iter().take(6).map(|c| c.hits.to_string()).collect();
        if caches.len() > 6 {
            // Pebble streams grow long: the rest in one figure.
            let rest: u64 = caches[6..].iter().map(|c| c.hits).sum();
            hits.push(format!("{rest} in {} more", caches.len() - 6));
        }
        Some(format!(
            "{}{}{}: peak {} states held ({:.1}% of {} distinct{}), {} output states ({:.2}x), hits per cache [{}], Backtrack set {} states ({} hits)",
            self.opts.stream,
            if self.opts.backtrack { " + backtrack" } else { "" },
            match self.watchdog_fired {
                Some(l) => format!(" (watchdog: last cache unbounded from level {l})"),
                None => String::new(),
            },
            self.peak_held,
            100.0 * self.peak_held as f64 / distinct.max(1) as f64,
            distinct,
            if exact { "" } else { ", estimated" },
            self.numbered,
            self.numbered as f64 / distinct.max(1) as f64,
            hits.join(", "),
            self.backtrack_states,
            self.backtrack_hits,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(spec: &str) -> SnapshotStore {
        SnapshotStore::new(
            SnapshotsOptions {
                stream: StreamSpec::parse(spec).unwrap(),
                preset: None,
                backtrack: true,
                ..SnapshotsOptions::default()
            },
            None,
        )
        .unwrap()
    }

    fn level(states: &[&'static [u8]], first: u64) -> Vec<(&'static [u8], u64, StateId)> {
        states
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, crate::store::full::state_hash(s), first + i as u64))
            .collect()
    }

    #[test]
    fn a_state_in_the_backtrack_set_and_a_snapshot_is_stored_once() {
        let mut s = store("(c1,LRU,1)");
        let l0 = level(&[b"aa", b"bb"], 0);
        // "aa" is learned while level 0 is expanded, then level 0 becomes a snapshot.
        s.learn(b"aa", l0[0].1, 0, Rule::OldSnapshot).unwrap();
        s.level_done(0, 2, l0.iter().copied()).unwrap();
        assert_eq!(s.pool.live, 2, "aa once, bb once");
        assert_eq!(
            s.pool
                .entry(s.pool.find(b"aa", l0[0].1).unwrap())
                .snaps
                .len(),
            1
        );
        let f = s.lookup(b"aa", l0[0].1, 1).unwrap();
        assert_eq!(
            (f.id, f.backtrack, f.snapshot.map(|(_, old)| old)),
            (0, true, Some(false))
        );
        // Level 1 evicts level 0: bb leaves memory, aa stays for the Backtrack set.
        let l1 = level(&[b"cc"], 2);
        s.level_done(1, 1, l1.iter().copied()).unwrap();
        assert_eq!(s.pool.live, 2, "aa (Backtrack set) and cc (snapshot)");
        assert!(s.lookup(b"bb", l0[1].1, 2).is_none());
        let f = s.lookup(b"aa", l0[0].1, 2).unwrap();
        assert_eq!((f.id, f.backtrack, f.snapshot), (0, true, None));
        assert_eq!(s.backtrack_hits, 1);
        assert_eq!(s.evicted_states, 2);
        assert_eq!(s.forgotten(), 2);
    }

    #[test]
    fn hits_go_to_the_cache_holding_the_snapshot_and_old_means_not_first() {
        let mut s = store("(c1,LLNR,1)(1,LLNR,2)");
        let l0 = level(&[b"x0"], 0);
        let l1 = level(&[b"x1"], 1);
        s.level_done(0, 1, l0.iter().copied()).unwrap();
        s.level_done(1, 1, l1.iter().copied()).unwrap();
        // Level 0 went down to cache 2: old; level 1 is in cache 1.
        let old = s.lookup(b"x0", l0[0].1, 2).unwrap();
        let new = s.lookup(b"x1", l1[0].1, 2).unwrap();
        assert_eq!(old.snapshot.map(|(_, o)| o), Some(true));
        assert_eq!(new.snapshot.map(|(_, o)| o), Some(false));
        let hits: Vec<u64> = s.stream.caches.iter().map(|c| c.hits).collect();
        assert_eq!(hits, vec![1, 1]);
    }

    #[test]
    fn the_sketch_estimates_within_a_few_percent() {
        let mut k = Sketch::new();
        for i in 0..100_000u64 {
            k.add(crate::store::full::state_hash(&i.to_le_bytes()));
        }
        let e = k.estimate();
        assert!((e - 100_000.0).abs() < 3_000.0, "{e}");
        let mut small = Sketch::new();
        for i in 0..100u64 {
            small.add(crate::store::full::state_hash(&i.to_le_bytes()));
        }
        assert!((small.estimate() - 100.0).abs() < 2.0);
    }
}
