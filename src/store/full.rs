//! The full state table: every state vector kept whole. The exact baseline.
//!
//! Layout: state vectors are appended to one arena in id order (fixed-width states need no
//! offsets; variable-width ones keep an end offset per state). The index is an open-addressing
//! table with linear probing of 8-byte slots `hash_hi:32 | (id + 1):32` (0 = empty): the bucket
//! comes from the low bits of the stored high bits ([`home`]), which also filter almost
//! every false comparison, so a lookup costs one slot load plus, on a match, one arena
//! compare. A growing table is filled from the old one's slots ([`regrow`]), no vector read.
//! Hashes are xxh3-64 with seed 0 (stable across builds).
//!
//! Batches (all successors of one state) are inserted in two passes: first every bucket is
//! loaded, so the cache misses of a batch overlap, then the states are probed and inserted in
//! order (a duplicate within the batch is found by the probe of its second occurrence).

use super::slots::{prefetch, Slots};
use super::window::{
    delayed_batch_len, index_share, room_at_three_quarters, start_spilling, Spill, WindowHost,
    WindowMark, WindowTable, MIN_TABLE,
};
use super::StoreSpec;
use super::{
    decode_blob, encode_blob, Exactness, Found, Insert, Lookup, NewState, SharedIndex, StateBatch,
    StateId, StateStore, StatesBack, StoreMark, Via,
};
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::par;
use crate::storage::runs::{HashRuns, RunLookup};
use crate::storage::segment::HashId;
use crate::storage::vec::{SegReader, SegView};
use crate::storage::{Account, Budget, FileMark, MemoryLimit, SegVec, Storage, VecMark};
use std::sync::Arc;

/// Stable state hash: xxh3-64, seed 0. Its identity is recorded wherever hashes are persisted.
///
/// `twox-hash`'s implementation: `xxhash-rust` picks its vector width when it is compiled
/// (SSE2 for a portable x86-64 binary), `twox-hash` at run time (AVX2 here), and its
/// 129–240-byte path is faster too. Measured on this machine, one hash: 132 bytes 18.7 →
/// 14.7 ns, 260 bytes 22.9 → 19.3 ns, 512 bytes 32.4 → 23.6 ns, up to 128 bytes equal;
/// SharedMemory-PT-000010's (132-byte vectors) hashing 1,030–1,197 → 521–551 `perf`
/// samples of a one-thread run. Both compute the same XXH3 (`state_hash_is_xxh3` checks it
/// against `xxhash-rust`), so files that hold hashes are unchanged.
#[inline]
pub fn state_hash(state: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(state)
}

/// The stored bits of a slot: the upper half of the state's hash (`id + 1` below them).
const TAG: u64 = 0xffff_ffff_0000_0000;

/// The home slot of hash `h` in a table of `mask + 1` slots: the low bits of the stored tag
/// (the hash's upper half), then, in tables of more than 2^32 slots, the lower half's.
/// Taking the home from the tag lets a doubling table re-place its entries from their slots
/// alone ([`regrow`]) instead of hashing every stored vector again; the price is that the
/// entries a probe meets with the same home share those tag bits, so only the other `32 −
/// log2(slots)` bits filter false compares among them (9 bits at 2^23 slots).
#[inline(always)]
fn home(h: u64, mask: usize) -> usize {
    h.rotate_right(32) as usize & mask
}

/// Puts state `id` of hash `h` into the first empty slot from its home (one thread alone
/// fills `slots`; [`claim_slot`] is the threads' way).
#[inline(always)]
fn place(slots: &mut [u64], h: u64, id: u64) {
    let mask = slots.len() - 1;
    let mut i = home(h, mask);
    while slots[i] != 0 {
        i = (i + 1) & mask;
    }
    slots[i] = (h & TAG) | (id + 1);
}

/// Spilled states wider than this also get their hash stored on disk (see `Arena::Seg`).
const HASHES_ABOVE_WIDTH: usize = 32;

/// Largest number of states: ids are stored as `id + 1` in 32 bits.
const MAX_STATES: u64 = u32::MAX as u64 - 1;

/// File names of the spilled state vectors and hashes.
const STATES: &str = "full.states";
const HASHES: &str = "full.hashes";

/// What a checkpoint records (see [`StateStore::checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Mark {
    width: usize,
    count: u64,
    states: VecMark,
    hashes: Option<VecMark>,
    window: Option<WindowMark>,
}

/// Name of the index runs' files (`full.index.run.G`) and of their account.
const RUNS: &str = "full.index";

/// The full state table.
pub struct FullStore {
    /// Fixed state width, when every state has the same length.
    width: Option<usize>,
    /// State vectors in id order: in RAM, or in a segment vector when spilling.
    arena: Arena,
    count: u64,
    /// Open-addressing slots, length a power of two, at most 3/4 full. Always in RAM.
    slots: Slots,
    hashes: Vec<u64>,
    /// The index's account and the budget it claims from, when spilling.
    index_account: Option<(Account, Arc<Budget>)>,
    /// First id the table `slots` holds: 0 until the index spills, then the window's start.
    young_start: u64,
    /// The older part of the index, once it has spilled.
    spill: Option<Box<Spill<Slots>>>,
    /// Where index runs go, and whether they must outlive the process (checkpoints).
    run_dir: Option<(std::path::PathBuf, bool)>,
    /// Whether the search looks states up one at a time (a DFS: see
    /// [`Storage::with_random_lookups`]); its spilled window is then smaller.
    random_lookups: bool,
    /// What a delayed batch takes in RAM (see [`StateStore::delayed_batch`]).
    batch_account: Account,
    /// See [`FullOptions::index_slots`].
    index_slots: Option<u64>,
    /// A delayed batch's `(id, candidate)` matches and `(hash, candidate)` disk lookups.
    #[allow(clippy::type_complexity)]
    scratch: (Vec<(u64, u32)>, Vec<(u64, u32)>),
    /// One per thread that resolves a spilled delayed batch ([`StateStore::set_threads`]),
    /// the calling thread's first.
    shares: Vec<BatchShare>,
    /// Where each vector block's matches start in a spilled batch's sorted matches.
    block_starts: Vec<usize>,
    /// What the shares hold in RAM (registered at the first spilled batch).
    threads_account: Option<Account>,
    /// The state [`StateStore::get`] read last from the segment vector.
    got: Vec<u8>,
    /// A checkpointed run without a budget: the RAM arena's copy in segment files.
    mirror: Option<Mirror>,
    /// States stored when a mirrored arena moved to its segment files.
    moved_at: Option<u64>,
}

/// One thread's buffers for resolving a spilled delayed batch: its reader of the state
/// vectors, its run lookups' cache, and what it found (kept between batches).
#[derive(Default)]
struct BatchShare {
    reader: SegReader,
    runs: RunLookup,
    found: Vec<(u64, u32)>,
}

/// Candidates a thread takes at a time in a spilled batch's probes (of the window's tables
/// and the runs' filters: a memory load each).
const PROBE_PIECE: usize = 512;
/// The same for its run lookups, which may read a block each: small pieces, so that a
/// thread that meets many uncached blocks takes fewer of them.
const READ_PIECE: usize = 64;
/// Vector blocks whose matches a thread compares at a time (each may be decompressed).
const COMPARE_BLOCKS: usize = 2;

/// Every share's `found`, in share order, into `all` (cleared first), sorted.
fn gather(shares: &[BatchShare], all: &mut Vec<(u64, u32)>) {
    all.clear();
    for sh in shares {
        all.extend_from_slice(&sh.found);
    }
    all.sort_unstable();
}

/// Compares every `(id, candidate)` of `matches` (sorted by id) with the stored vector,
/// the threads taking pieces of [`COMPARE_BLOCKS`] vector blocks' matches in id order
/// through `view` (cut at block boundaries, so that no two threads decompress one block;
/// `starts`: scratch); leaves in the shares' `found` (cleared first) the matches whose
/// vectors are equal.
fn compare_shares(
    view: SegView<'_>,
    shares: &mut [BatchShare],
    matches: &[(u64, u32)],
    starts: &mut Vec<usize>,
    batch: &StateBatch,
) -> Result<(), StoreError> {
    shares.iter_mut().for_each(|sh| sh.found.clear());
    // Where each block's matches start, and the end.
    starts.clear();
    let mut last = u64::MAX;
    for (k, &(id, _)) in matches.iter().enumerate() {
        let b = view.block_of(id);
        if b != last {
            starts.push(k);
            last = b;
        }
    }
    starts.push(matches.len());
    let starts = &starts[..];
    par::pieces(shares, starts.len() - 1, COMPARE_BLOCKS, |sh, blocks| {
        for &(id, i) in &matches[starts[blocks.start]..starts[blocks.end]] {
            let st = batch.get(i as usize);
            if view.with(&mut sh.reader, id, |r| eq_bytes(&r[..st.len()], st))? {
                sh.found.push((id, i));
            }
        }
        Ok::<_, StorageError>(())
    })?;
    Ok(())
}

/// The state vectors of a RAM arena copied into the run's segment vectors (the files and
/// layout of [`Arena::Seg`]) up to the last checkpoint. A checkpointed run without
/// `--memory` or `--spill always` keeps its vectors in RAM, where parallel BFS can read
/// them, and writes the states added since the last checkpoint when the next one is taken
/// (so a checkpoint also takes the time to compress them). Once the arena passes
/// [`mirror_limit`], the store moves to the segment vectors for good
/// ([`FullStore::move_to_segments`]): with the run's default memory ceiling, vectors on disk let
/// a larger state space finish than vectors in RAM would.
struct Mirror {
    states: Box<SegVec>,
    hashes: Option<Box<SegVec>>,
    /// The vectors' block cache once they serve reads (after a move): a mirror is only
    /// written, so it keeps one block meanwhile.
    cache_bytes: u64,
}

/// Bytes of vectors a mirrored RAM arena may hold: a quarter of the run's memory ceiling
/// (none without one: `--memory unlimited`).
fn mirror_limit() -> u64 {
    crate::sys::ceiling().map_or(u64::MAX, |c| c / 4)
}

/// Where the state vectors live.
enum Arena {
    /// A RAM arena; for variable-width states `ends[i]` is the end of state `i`.
    Ram { bytes: Vec<u8>, ends: Vec<u64> },
    /// A segment vector of fixed-width records (hot window mapped, the rest compressed),
    /// and, for states wider than [`HASHES_ABOVE_WIDTH`] bytes, a second one with each
    /// state's 64-bit hash (LE), read back sequentially to rebuild the index when it grows, so
    /// that growing never decompresses the (wide) state vectors. Narrow states are re-hashed
    /// from the vectors instead: that reads no more than the hashes would take on disk.
    Seg {
        states: Box<SegVec>,
        hashes: Option<Box<SegVec>>,
    },
}

#[inline(always)]
fn slice<'a>(arena: &'a [u8], ends: &[u64], width: Option<usize>, id: usize) -> &'a [u8] {
    match width {
        Some(w) => &arena[id * w..(id + 1) * w],
        None => {
            let end = ends[id] as usize;
            let start = if id == 0 { 0 } else { ends[id - 1] as usize };
            &arena[start..end]
        }
    }
}

/// Slice equality a word at a time: state vectors are short, and an inlined word loop beats
/// a call to `bcmp` on them (measured: ~4.5% of BFS CPU time on Kanban-PT-00005).
#[inline(always)]
pub fn eq_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_ne_bytes(a[i..i + 8].try_into().unwrap());
        let y = u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
        if x != y {
            return false;
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Walks the probe run of `h` in `slots` (entries `hash_hi:32 | id+1:32`), calling `f(id)`
/// for every entry whose stored hash bits match, until it answers `Some`.
#[inline(always)]
fn scan<T, E>(
    slots: &[u64],
    h: u64,
    mut f: impl FnMut(u64) -> Result<Option<T>, E>,
) -> Result<Option<T>, E> {
    if slots.is_empty() {
        return Ok(None);
    }
    let mask = slots.len() - 1;
    let hi = h & TAG;
    let mut i = home(h, mask);
    loop {
        let s = slots[i];
        if s == 0 {
            return Ok(None);
        }
        if s & TAG == hi {
            if let Some(x) = f((s as u32 - 1) as u64)? {
                return Ok(Some(x));
            }
        }
        i = (i + 1) & mask;
    }
}

/// The id in `slots` whose stored hash bits match `h` and whose state `same` confirms.
#[inline]
fn probe(
    slots: &Slots,
    h: u64,
    same: impl Fn(u64) -> Result<bool, StorageError>,
) -> Result<Option<StateId>, StoreError> {
    Ok(scan(slots, h, |id| {
        Ok::<_, StorageError>(same(id)?.then_some(id))
    })?)
}

/// Asks for the slot of `slots` where the probe of hash `h` starts (see [`prefetch`]).
#[inline(always)]
fn prefetch_home(slots: &[u64], h: u64) {
    if !slots.is_empty() {
        prefetch(&slots[home(h, slots.len() - 1)] as *const u64 as *const u8);
    }
}

/// The vectors' block cache a DFS's spilled window leaves room for when it can (see
/// `spilled_window_slots`): Kanban-PT-00005 hit 92% of its compares with 3.9 MiB and 9%
/// with 1.3 MiB.
const DFS_WORKING_CACHE: u64 = 4 << 20;

/// How far ahead of its probes a spilled batch's loop asks for the slots and filter lines
/// it will probe: enough misses in flight to cover the memory latency of tables of
/// gigabytes (a TLB miss and a cache miss each).
const AHEAD: usize = 8;

/// Calls `body(i)` for every `i` of `items`, and `ahead(i + AHEAD)` just before it (and
/// `ahead` of the first [`AHEAD`] items first), so that the misses `ahead` asks for are in
/// flight when `body` needs them.
#[inline(always)]
fn prefetched(items: std::ops::Range<usize>, ahead: impl Fn(usize), mut body: impl FnMut(usize)) {
    (items.start..(items.start + AHEAD).min(items.end)).for_each(&ahead);
    for i in items.clone() {
        if i + AHEAD < items.end {
            ahead(i + AHEAD);
        }
        body(i);
    }
}

/// Calls `f(id)` for every entry of `slots` whose stored hash bits match `h`.
#[inline]
fn collect(slots: &Slots, h: u64, mut f: impl FnMut(u64)) {
    let none = scan(slots, h, |id| {
        f(id);
        Ok::<Option<()>, std::convert::Infallible>(None)
    });
    debug_assert!(matches!(none, Ok(None)));
}

/// Looks `state` (hash `h`) up in the old window table, then in the runs.
#[inline(never)]
fn find_in_spill(
    sp: &mut Spill<Slots>,
    arena: &Arena,
    state: &[u8],
    h: u64,
) -> Result<Option<StateId>, StoreError> {
    let Arena::Seg { states, .. } = arena else {
        unreachable!("only spilling stores spill their index")
    };
    let same = |id: u64| states.with(id, |r| eq_bytes(&r[..state.len()], state));
    if let Some(id) = probe(&sp.old, h, same)? {
        return Ok(Some(id));
    }
    Ok(sp.runs.find(h, same)?)
}

/// A read-only view of the full store's state vectors alone (see
/// [`StateStore::shared_vectors`]), for threads that expand a delayed batch's parents once
/// the index has spilled.
#[derive(Clone, Copy)]
pub enum SharedVectors<'a> {
    Ram(RamVectors<'a>),
    Seg(SegView<'a>),
}

/// How a [`SharedIndex`] reaches the stored vectors; `Reader` is a thread's own state for
/// that (none in RAM; the blocks it read itself for a segment vector).
pub trait Vectors: Copy + Sync {
    type Reader: Default + Send;
    /// Calls `f` with the vector of state `id`.
    fn with<R>(
        &self,
        r: &mut Self::Reader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError>;
    /// Asks for the vector of state `id` ahead of its compare, where that is a memory load.
    fn prefetch(&self, id: usize);
}

/// State vectors in the RAM arena.
#[derive(Clone, Copy)]
pub struct RamVectors<'a> {
    bytes: &'a [u8],
    ends: &'a [u64],
    width: Option<usize>,
}

impl Vectors for RamVectors<'_> {
    type Reader = ();

    #[inline(always)]
    fn with<R>(
        &self,
        _: &mut (),
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        Ok(f(slice(self.bytes, self.ends, self.width, id as usize)))
    }

    #[inline]
    fn prefetch(&self, id: usize) {
        let at = match self.width {
            Some(w) => id * w,
            None if id == 0 => 0,
            None => self.ends[id - 1] as usize,
        };
        if at < self.bytes.len() {
            prefetch(self.bytes[at..].as_ptr());
        }
    }
}

impl Vectors for SegView<'_> {
    type Reader = SegReader;

    #[inline]
    fn with<R>(
        &self,
        r: &mut SegReader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        SegView::with(self, r, id, f)
    }

    /// Only a record in RAM (hot or cached) is prefetched; another needs a block read.
    #[inline]
    fn prefetch(&self, id: usize) {
        if let Some(p) = self.address(id as u64) {
            prefetch(p);
        }
    }
}

/// The index and one way to the vectors.
#[derive(Clone, Copy)]
pub struct Index<'a, V> {
    slots: &'a [u64],
    vectors: V,
}

impl<V: Vectors> Index<'_, V> {
    /// Calls `f` with the stored vector of state `id`.
    #[inline]
    pub fn with_state<R>(
        &self,
        r: &mut V::Reader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        self.vectors.with(r, id, f)
    }

    /// Asks for the slot where the probe of hash `h` starts, so that the cache misses of a
    /// batch overlap.
    #[inline]
    pub fn prefetch_slot(&self, h: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[home(h, self.slots.len() - 1)] as *const u64 as *const u8);
        }
    }

    /// Once the slot is in cache: asks for the vector of the state it names when its hash
    /// bits match `h` (the compare of a found state is the lookup's second miss).
    #[inline]
    pub fn prefetch_state(&self, h: u64) {
        if self.slots.is_empty() {
            return;
        }
        let s = self.slots[home(h, self.slots.len() - 1)];
        if s != 0 && s & TAG == h & TAG {
            self.vectors.prefetch((s as u32 - 1) as usize);
        }
    }

    /// The id of `state` (hash `h`) if it is stored.
    #[inline]
    pub fn find(
        &self,
        r: &mut V::Reader,
        state: &[u8],
        h: u64,
    ) -> Result<Option<StateId>, StorageError> {
        scan(self.slots, h, |id| {
            Ok(self
                .vectors
                .with(r, id, |v| eq_bytes(v, state))?
                .then_some(id))
        })
    }
}

/// The full store's answers are always decided: a state is found by its vector.
impl<V: Vectors> Lookup for Index<'_, V> {
    type Reader = V::Reader;

    #[inline(always)]
    fn with_parent<R>(
        &self,
        r: &mut V::Reader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        self.with_state(r, id, f)
    }

    #[inline(always)]
    fn find_group(
        &self,
        r: &mut V::Reader,
        model: &dyn Model,
        scratch: &mut super::path::Scratch,
        batch: &super::StateBatch,
        _counts: &[u32],
        hashes: &mut Vec<u64>,
        found: &mut Vec<Found>,
        _extra: &mut crate::store::Extra,
    ) -> Result<(), StoreError> {
        super::probe_group(self, r, model, scratch, batch, hashes, found)
    }
}

impl<V: Vectors> super::Probe for Index<'_, V> {
    #[inline(always)]
    fn prefetch_slot(&self, h: u64) {
        Index::prefetch_slot(self, h)
    }

    #[inline(always)]
    fn prefetch_state(&self, h: u64) {
        Index::prefetch_state(self, h)
    }

    #[inline(always)]
    fn find(
        &self,
        r: &mut V::Reader,
        _: &dyn Model,
        _: &mut super::path::Scratch,
        state: &[u8],
        h: u64,
    ) -> Result<Found, StoreError> {
        Ok(match Index::find(self, r, state, h)? {
            Some(id) => Found::Stored(id),
            None => Found::Absent,
        })
    }
}

/// States a thread of `add_new` or of an index rebuild claims at a time: small enough that
/// the threads finish a step together, large enough that claiming costs nothing.
const ADD_PIECE: usize = 512;

/// Inserts ids `ids` (hashes by `hash`) into `table`, which other threads fill at the same
/// time: an empty slot is claimed with compare-and-swap, a lost race moves on. The ids are
/// distinct states, so no two threads insert the same one. Each id's home slot is asked
/// for [`AHEAD`] ids before it is claimed (its hash kept in a ring meanwhile, so `hash` runs
/// once per id): the homes are scattered over a table far larger than the caches, and one
/// miss at a time made indexing a fifth of a two-thread chunk's time.
fn index_atomic(
    table: &[std::sync::atomic::AtomicU64],
    ids: std::ops::Range<u64>,
    hash: impl Fn(u64) -> u64,
) {
    let mask = table.len() - 1;
    let mut ring = [0u64; AHEAD];
    let ask = |ring: &mut [u64; AHEAD], id: u64| {
        let h = hash(id);
        ring[id as usize % AHEAD] = h;
        prefetch(&table[home(h, mask)] as *const _ as *const u8);
    };
    for id in ids.start..(ids.start + AHEAD as u64).min(ids.end) {
        ask(&mut ring, id);
    }
    for id in ids.clone() {
        let h = ring[id as usize % AHEAD];
        if id + (AHEAD as u64) < ids.end {
            ask(&mut ring, id + AHEAD as u64);
        }
        claim_slot(table, home(h, mask), (h & TAG) | (id + 1));
    }
}

/// Puts `entry` into the first empty slot of `table` from slot `i` on (linear probing),
/// claimed with compare-and-swap: other threads fill the same table meanwhile, and a lost
/// race moves on.
#[inline(always)]
fn claim_slot(table: &[std::sync::atomic::AtomicU64], mut i: usize, entry: u64) {
    use std::sync::atomic::Ordering;
    let mask = table.len() - 1;
    loop {
        // Relaxed: the threads only claim slots; the step's end publishes the table.
        if table[i].load(Ordering::Relaxed) == 0
            && table[i]
                .compare_exchange(0, entry, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
        i = (i + 1) & mask;
    }
}

/// Slots of the old table a thread of [`regrow`] takes at a time.
const REGROW_PIECE: usize = 1 << 14;

/// Whether a table of `cap` slots can be filled by [`regrow`]: its homes come from the tag
/// alone.
fn regrows_to(cap: usize) -> bool {
    cap as u64 <= 1 << 32
}

/// Re-places every entry of `old` into `table` (empty, of at most 2^32 slots, other threads
/// may insert into it meanwhile) on `threads` threads: an entry's home there is a function of
/// its stored tag ([`home`]), so neither the vectors nor their hashes are read. An entry at
/// old slot `i` has its home at or a little before `i`, and in a table twice as large at
/// that home or `old.len()` after it, so each thread writes two nearly sequential streams
/// (every probe of the old table's runs is in cache). Any order of compare-and-swap claims
/// of the first empty slot from each home makes a valid linear-probing table. Returns the
/// number of entries re-placed: the caller checks that the old table held every state it
/// should (a resumed store starts with an empty one).
fn regrow(old: &[u64], table: &[std::sync::atomic::AtomicU64], threads: usize) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    debug_assert!(regrows_to(table.len()) && table.len() >= old.len());
    let mask = table.len() - 1;
    let mut pieces: Vec<_> = (0..old.len())
        .step_by(REGROW_PIECE)
        .map(|start| start..(start + REGROW_PIECE).min(old.len()))
        .collect();
    let placed = AtomicU64::new(0);
    par::claim(threads, &mut pieces, |range| {
        let mut n = 0;
        for &s in &old[range.clone()] {
            if s == 0 {
                continue;
            }
            n += 1;
            claim_slot(table, home(s & TAG, mask), s);
        }
        placed.fetch_add(n, Ordering::Relaxed);
    });
    placed.into_inner()
}

impl FullStore {
    /// Indexes every stored state (in a RAM arena) into the empty table on `threads`
    /// threads, hashing the vectors again (tables too large for [`regrow`]).
    fn rebuild_index(&mut self, threads: usize) {
        let table = self.slots.atomic();
        let Arena::Ram { bytes, ends } = &self.arena else {
            unreachable!("add_new appends to RAM arenas only")
        };
        let (bytes, ends, width) = (bytes.as_slice(), ends.as_slice(), self.width);
        let hash = |id: u64| state_hash(slice(bytes, ends, width, id as usize));
        let count = self.count;
        let mut pieces: Vec<_> = (0..count)
            .step_by(ADD_PIECE)
            .map(|start| start..(start + ADD_PIECE as u64).min(count))
            .collect();
        par::claim(threads, &mut pieces, |ids| {
            index_atomic(table, ids.clone(), hash)
        });
    }
}

fn index_alloc_error(cap: usize, e: std::io::Error) -> StoreError {
    StoreError::CapacityExceeded {
        store: "full",
        message: format!(
            "cannot allocate an index of {cap} slots ({} MiB): {e}",
            cap >> 17
        ),
    }
}

/// `--store full`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FullOptions {
    /// Under a budget, spill the index once its table would pass this many slots, even if
    /// the budget could hold more (hidden `--full-index-slots`: tests and benchmarks of the
    /// spilled path on small models). `None`: half the budget decides.
    pub index_slots: Option<u64>,
}

impl StoreSpec for FullOptions {
    fn name(&self) -> &'static str {
        "full"
    }

    /// With the run's storage (under `--memory`, `--spill always` or checkpoints) the state
    /// vectors live in segment files; without, everything stays in RAM.
    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(match storage {
            Some(st) if !st.config.spills() && model.state_len().is_some() => {
                let mut s = FullStore::mirrored(model.state_len(), st)?;
                s.index_slots = self.index_slots;
                s
            }
            Some(st) => {
                let mut s = FullStore::spilling(model.state_len(), st)?;
                s.index_slots = self.index_slots;
                s
            }
            None => FullStore::new(model.state_len()),
        }))
    }

    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let mut s = FullStore::resume(storage, mark)?;
        // The record's state width is the model's (a wrong one had sliced past the states
        // read back: a panic).
        if let (Some(model_len), Some(w)) = (model.state_len(), s.width) {
            if model_len != w {
                return Err(StoreError::Invalid {
                    store: "full",
                    message: format!("states of {w} bytes; the model's have {model_len}"),
                });
            }
        }
        s.index_slots = self.index_slots;
        Ok(Box::new(s))
    }
}

impl FullStore {
    /// A store for states of `width` bytes, or of varying width when `None`, kept in RAM.
    pub fn new(width: Option<usize>) -> Self {
        FullStore {
            width,
            arena: Arena::Ram {
                bytes: Vec::new(),
                ends: Vec::new(),
            },
            count: 0,
            slots: Slots::default(),
            hashes: Vec::new(),
            index_account: None,
            young_start: 0,
            spill: None,
            run_dir: None,
            random_lookups: false,
            batch_account: Account::detached("bfs.batch"),
            scratch: Default::default(),
            index_slots: None,
            shares: Vec::new(),
            block_starts: Vec::new(),
            threads_account: None,
            got: Vec::new(),
            mirror: None,
            moved_at: None,
        }
    }

    /// A store whose state vectors live in a segment vector of `storage` (only the index
    /// stays in RAM, claimed from the budget). States must have a fixed width.
    pub fn spilling(width: Option<usize>, storage: &Storage) -> Result<Self, StoreError> {
        let Some(w) = width else {
            return Err(StorageError::Invalid(
                "the full store spills only fixed-width states; this model's states vary in width (run without --memory/--spill)".into(),
            )
            .into());
        };
        // A zero-width state (a net without places) is stored as one padding byte: segment
        // records have a width, and such a model has a single state anyway.
        let states = storage.vec(STATES, w.max(1))?;
        let hashes = if w > HASHES_ABOVE_WIDTH {
            Some(Box::new(storage.sequential_vec(
                HASHES,
                8,
                HashId::Xxh3Seed0,
            )?))
        } else {
            None
        };
        let account = storage.budget.account("full.index");
        let mut s = FullStore::new(width);
        s.arena = Arena::Seg {
            states: Box::new(states),
            hashes,
        };
        account.set((s.slots.len() * 8) as u64, 0, 0);
        s.index_account = Some((account, storage.budget.clone()));
        s.run_dir = Some((storage.dir().to_path_buf(), storage.is_kept()));
        s.random_lookups = storage.random_lookups();
        s.batch_account = storage.budget.account("bfs.batch");
        Ok(s)
    }

    /// A store in RAM whose vectors are copied to `storage`'s segment vectors at each
    /// checkpoint (see [`Mirror`]): a checkpointed run without a budget.
    pub fn mirrored(width: Option<usize>, storage: &Storage) -> Result<Self, StoreError> {
        let mut s = FullStore::spilling(width, storage)?;
        s.mirror_in_ram(Vec::new(), storage)?;
        Ok(s)
    }

    /// Turns a segment arena into a mirrored RAM arena holding `bytes` (its states).
    fn mirror_in_ram(&mut self, bytes: Vec<u8>, storage: &Storage) -> Result<(), StoreError> {
        let ram = Arena::Ram {
            bytes,
            ends: Vec::new(),
        };
        let Arena::Seg {
            mut states,
            mut hashes,
        } = std::mem::replace(&mut self.arena, ram)
        else {
            unreachable!("a segment arena is mirrored")
        };
        // Written in bursts at checkpoints, while the other threads wait: on every core.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        states.set_cache_bytes(0)?;
        states.set_seal_threads(threads);
        if let Some(h) = &mut hashes {
            h.set_cache_bytes(0)?;
            h.set_seal_threads(threads);
        }
        let cache_bytes = storage.config.segments.cache_bytes;
        self.mirror = Some(Mirror {
            states,
            hashes,
            cache_bytes,
        });
        Ok(())
    }

    /// Copies the states added since the last checkpoint to the mirror.
    fn catch_up(&mut self) -> Result<(), StoreError> {
        let (Some(m), Arena::Ram { bytes, .. }, Some(w)) =
            (&mut self.mirror, &self.arena, self.width)
        else {
            return Ok(());
        };
        for id in m.states.len()..self.count {
            let state = &bytes[id as usize * w..(id as usize + 1) * w];
            m.states.push(if state.is_empty() { &[0] } else { state })?;
            if let Some(hv) = &mut m.hashes {
                hv.push(&state_hash(state).to_le_bytes())?;
            }
        }
        Ok(())
    }

    /// Moves a mirrored store's vectors to its segment vectors once the arena has passed
    /// [`mirror_limit`]: from then on it is a spilling store (one-thread BFS).
    fn move_to_segments(&mut self) -> Result<(), StoreError> {
        match &self.arena {
            Arena::Ram { bytes, .. } if self.mirror.is_some() => {
                if (bytes.len() as u64) <= mirror_limit() {
                    return Ok(());
                }
            }
            _ => return Ok(()),
        }
        self.catch_up()?;
        let mut m = self.mirror.take().expect("checked above");
        m.states.set_cache_bytes(m.cache_bytes)?;
        m.states.set_seal_threads(1);
        if let Some(h) = &mut m.hashes {
            h.set_seal_threads(1);
        }
        self.arena = Arena::Seg {
            states: m.states,
            hashes: m.hashes,
        };
        self.moved_at = Some(self.count);
        Ok(())
    }

    /// Reopens a spilling store checkpointed at `mark`; the index is rebuilt from the stored
    /// hashes (or states), as when it grows. Without a budget (and with the index in RAM)
    /// the vectors are read back into RAM and mirrored, as in the run that took the mark.
    pub fn resume(storage: &Storage, mark: &StoreMark) -> Result<Self, StoreError> {
        let m: Mark = decode_blob("full", &mark.blob)?;
        let states = storage.open_vec(STATES, m.states)?;
        let hashes = match m.hashes {
            Some(hm) => Some(Box::new(storage.open_sequential_vec(HASHES, hm)?)),
            None => None,
        };
        let account = storage.budget.account("full.index");
        let mut s = FullStore::new(Some(m.width));
        s.arena = Arena::Seg {
            states: Box::new(states),
            hashes,
        };
        s.index_account = Some((account, storage.budget.clone()));
        s.run_dir = Some((storage.dir().to_path_buf(), storage.is_kept()));
        s.random_lookups = storage.random_lookups();
        s.batch_account = storage.budget.account("bfs.batch");
        s.count = m.count;
        // As the run that took the mark would have: vectors past the mirror's limit stay on
        // disk.
        let fits = m.count.saturating_mul(m.width as u64) <= mirror_limit();
        if let (false, None, true, Arena::Seg { states, .. }) =
            (storage.config.spills(), &m.window, fits, &s.arena)
        {
            let mut bytes = Vec::new();
            bytes
                .try_reserve_exact(m.count as usize * m.width)
                .map_err(|e| StoreError::CapacityExceeded {
                    store: "full",
                    message: format!("cannot read the {} states back into RAM: {e}", m.count),
                })?;
            // A state shorter than the record's width: the width was recorded wrong (it had
            // sliced past the state, a panic).
            let mut short = None;
            states.scan(|id, st| match st.get(..m.width) {
                Some(b) => bytes.extend_from_slice(b),
                None => {
                    short.get_or_insert((id, st.len()));
                }
            })?;
            if let Some((id, len)) = short {
                return Err(StoreError::Invalid {
                    store: "full",
                    message: format!("states of {} bytes, but state {id} has {len}", m.width),
                });
            }
            s.mirror_in_ram(bytes, storage)?;
        }
        match m.window {
            None => s.reserve(0)?,
            Some(w) => {
                let runs = HashRuns::open(storage.dir(), RUNS, storage.budget.clone(), &w.runs)?;
                let cap = w.table_cap as usize;
                let mut old = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
                s.fill(&mut old, w.old_start, w.young_start)?;
                let mut young = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
                s.fill(&mut young, w.young_start, s.count)?;
                s.slots = young;
                s.young_start = w.young_start;
                s.spill = Some(Box::new(Spill {
                    old,
                    old_start: w.old_start,
                    table_cap: cap,
                    runs,
                    rotations: w.rotations,
                }));
                s.set_index_account();
            }
        }
        Ok(s)
    }

    /// Caps the index table (see [`FullOptions::index_slots`]).
    pub(crate) fn with_index_slots(mut self, index_slots: Option<u64>) -> Self {
        self.index_slots = index_slots;
        self
    }

    /// Appends a state known to be new (distinct from every stored one) under the next id,
    /// without indexing it: for a store that hands its states over in id order
    /// ([`FullStore::index_adopted`] indexes them afterwards). Spilling stores only.
    pub(crate) fn push_unindexed(&mut self, state: &[u8]) -> Result<(), StoreError> {
        let Arena::Seg { states, hashes } = &mut self.arena else {
            unreachable!("states are handed over to a spilling store only")
        };
        if self.count >= MAX_STATES {
            return Err(StoreError::CapacityExceeded {
                store: "full",
                message: format!("more than {MAX_STATES} states; use a memory-reduced store"),
            });
        }
        states.push(if state.is_empty() { &[0] } else { state })?;
        if let Some(hv) = hashes {
            hv.push(&state_hash(state).to_le_bytes())?;
        }
        self.count += 1;
        Ok(())
    }

    /// Indexes the states appended by [`FullStore::push_unindexed`]: a table for all of them
    /// when it fits its share of the budget, else they all go to the runs at once and the
    /// window starts with two empty tables of the size a growing table would have spilled
    /// at (the largest power of two of which two 8-byte tables take at most the share).
    pub(crate) fn index_adopted(&mut self) -> Result<(), StoreError> {
        let Some((_, budget)) = &self.index_account else {
            unreachable!("states are handed over to a spilling store only")
        };
        let MemoryLimit::Bytes(limit) = budget.limit() else {
            return self.reserve(0);
        };
        let share = index_share(limit);
        let mut cap = MIN_TABLE;
        while self.count * 4 > cap as u64 * 3 {
            cap *= 2;
        }
        let max = self.index_slots.unwrap_or(u64::MAX);
        if (cap as u64) * 8 <= share && cap as u64 <= max {
            return self.reserve(0);
        }
        let mut half = MIN_TABLE;
        while (half as u64) * 2 * 2 * 8 <= share && (half as u64) * 2 * 2 <= max {
            half *= 2;
        }
        // `start_spilling` halves the young table's size and frees it before writing the
        // runs; this one is never written, so its pages never become resident.
        self.slots = Slots::zeroed(2 * half).map_err(|e| index_alloc_error(2 * half, e))?;
        start_spilling(self)
    }

    /// Inserts the states `[from, to)` into `slots` (empty, large enough), their hashes read
    /// back from the stored hashes or states in id order.
    fn fill(&self, slots: &mut Slots, from: u64, to: u64) -> Result<(), StoreError> {
        self.hashes_in(from, to, |id, h| {
            place(slots, h, id);
            Ok(())
        })
    }

    /// Calls `f(id, hash)` for the states `[from, to)` in id order.
    fn hashes_in(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, u64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        match &self.arena {
            Arena::Ram { .. } => {
                for id in from..to {
                    f(id, state_hash(self.ram_state(id as usize)))?;
                }
            }
            Arena::Seg {
                hashes: Some(hv), ..
            } if from == 0 && to == self.count => {
                let mut err = Ok(());
                hv.scan(|id, h| {
                    if err.is_ok() {
                        err = f(id, u64::from_le_bytes(h.try_into().expect("8 bytes")));
                    }
                })?;
                hv.update_account();
                err?;
            }
            Arena::Seg {
                hashes: Some(hv), ..
            } => {
                for id in from..to {
                    let h = hv.with_sequential(id, |h| {
                        u64::from_le_bytes(h.try_into().expect("8 bytes"))
                    })?;
                    f(id, h)?;
                }
                hv.update_account();
            }
            Arena::Seg { states, .. } => {
                let w = self.width.unwrap_or(0);
                if from == 0 && to == self.count {
                    let mut err = Ok(());
                    states.scan(|id, st| {
                        if err.is_ok() {
                            err = f(id, state_hash(&st[..w]));
                        }
                    })?;
                    err?;
                } else {
                    for id in from..to {
                        let h = states.with_sequential(id, |st| state_hash(&st[..w]))?;
                        f(id, h)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Charges the index's tables to its account. Once spilling, the old table's share is
    /// charged whether it is allocated or not: the caches that size themselves from the
    /// budget must not grow into it between rotations.
    fn set_index_account(&self) {
        if let Some((account, _)) = &self.index_account {
            account.set(self.index_bytes(), 0, 0);
        }
    }

    fn index_bytes(&self) -> u64 {
        let old = self
            .spill
            .as_ref()
            .map_or(0, |sp| sp.old.len().max(sp.table_cap) as u64 * 8);
        self.slots.len() as u64 * 8 + old
    }

    /// Lets the state vectors' cache shrink to what the budget leaves it now.
    fn trim_state_cache(&mut self) -> Result<(), StoreError> {
        if let Arena::Seg { states, .. } = &mut self.arena {
            states.trim_cache()?;
        }
        Ok(())
    }

    /// Makes room for `extra` more states without passing the load limit: grows the table,
    /// or, under a budget whose share the table would pass, spills the older states to disk.
    fn reserve(&mut self, extra: u64) -> Result<(), StoreError> {
        self.move_to_segments()?;
        if room_at_three_quarters(self, "full", extra)? {
            return Ok(());
        }
        let need = self.count - self.young_start + extra;
        let mut cap = self.slots.len().max(1 << 10);
        while need * 4 > cap as u64 * 3 {
            cap *= 2;
        }
        if let (Some((_, budget)), Arena::Seg { states, hashes }) =
            (&self.index_account, &self.arena)
        {
            let bytes = cap as u64 * 8;
            let over_share = match budget.limit() {
                MemoryLimit::Bytes(limit) => bytes > index_share(limit),
                MemoryLimit::Unlimited => false,
            } || self.index_slots.is_some_and(|max| cap as u64 > max);
            let claim = budget.claim(
                "the full-store index",
                bytes,
                states.min_ram_bytes() + hashes.as_ref().map_or(0, |h| h.min_ram_bytes()),
                &format!("{cap} slots of 8 bytes for more than {} states", self.count),
            );
            if (over_share || claim.is_err()) && self.slots.len() >= MIN_TABLE * 2 {
                return start_spilling(self);
            }
            claim?;
        }
        if let (Some((account, _)), Arena::Seg { states, .. }) =
            (&self.index_account, &mut self.arena)
        {
            // The old table is rebuilt from the stored hashes (or states), not copied: free it
            // first so old and new never coexist, then let the state cache shrink to what is
            // left.
            self.slots = Slots::default();
            account.set(cap as u64 * 8, 0, 0);
            states.trim_cache()?;
            let mut slots = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
            self.fill(&mut slots, 0, self.count)?;
            self.slots = slots;
            if let Arena::Seg { states, .. } = &self.arena {
                states.update_account();
            }
            return Ok(());
        }
        // In RAM the old table lives until the new one is filled.
        crate::sys::check_ceiling("the full-store index", cap as u64 * 8)?;
        let mut slots = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
        // In RAM the table holds every state (it never spills without a budget), unless
        // it is the empty one of a resumed store: then, or when a table too large for
        // `regrow` would come out, it is rebuilt from the arena.
        if regrows_to(cap) && !self.slots.is_empty() {
            if regrow(&self.slots, slots.atomic(), 1) == self.count {
                self.slots = slots;
                return Ok(());
            }
            drop(std::mem::take(&mut slots));
            slots = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
        }
        for id in 0..self.count as usize {
            place(&mut slots, state_hash(self.ram_state(id)), id as u64);
        }
        self.slots = slots;
        Ok(())
    }

    fn ram_state(&self, id: usize) -> &[u8] {
        match &self.arena {
            Arena::Ram { bytes, ends } => slice(bytes, ends, self.width, id),
            Arena::Seg { .. } => unreachable!("only called for RAM arenas"),
        }
    }

    /// Finds or inserts a state with precomputed hash `h`; capacity must have been reserved.
    #[inline(always)]
    fn insert_hashed(&mut self, state: &[u8], h: u64) -> Result<Insert, StoreError> {
        let mask = self.slots.len() - 1;
        let hi = h & TAG;
        let mut i = home(h, mask);
        loop {
            let s = self.slots[i];
            if s == 0 {
                break;
            }
            if s & TAG == hi {
                let id = (s as u32 - 1) as usize;
                let equal = match &self.arena {
                    Arena::Ram { bytes, ends } => {
                        eq_bytes(slice(bytes, ends, self.width, id), state)
                    }
                    Arena::Seg { states, .. } => {
                        states.with(id as u64, |r| eq_bytes(&r[..state.len()], state))?
                    }
                };
                if equal {
                    return Ok(Insert::Seen(id as StateId));
                }
            }
            i = (i + 1) & mask;
        }
        if let Some(sp) = &mut self.spill {
            if let Some(id) = find_in_spill(sp, &self.arena, state, h)? {
                return Ok(Insert::Seen(id));
            }
        }
        let id = self.count;
        match &mut self.arena {
            Arena::Ram { bytes, ends } => {
                if bytes.len() + state.len() > bytes.capacity() {
                    // The vector doubles (large blocks are remapped, not copied).
                    crate::sys::check_ceiling(
                        "the full store's state vectors",
                        bytes.capacity() as u64,
                    )?;
                }
                bytes.extend_from_slice(state);
                if self.width.is_none() {
                    ends.push(bytes.len() as u64);
                }
            }
            Arena::Seg { states, hashes } => {
                states.push(if state.is_empty() { &[0] } else { state })?;
                if let Some(hv) = hashes {
                    hv.push(&h.to_le_bytes())?;
                }
            }
        }
        self.slots[i] = hi | (id + 1);
        self.count += 1;
        Ok(Insert::New(id))
    }

    /// [`StateStore::insert_many`] once the index has spilled: (1) every candidate is looked
    /// up in the RAM window, the hash matches compared with the stored vectors in id order;
    /// (2) those some run's filter lets through are sorted by hash and looked up in the runs
    /// in ascending sweeps, and their hash matches compared with the stored vectors in id
    /// order (so a vector block is read about once per batch); (3) the rest are new or
    /// repeat an earlier candidate of the batch: inserted in order, which numbers them as a
    /// one-by-one insertion would. Steps (1) and (2) run on every thread of
    /// [`FullStore::shares`], which take pieces of each (see [`par::pieces`]); step (3)
    /// stays on this thread, in candidate order, so the result is the one-thread result
    /// whatever the threads' timing.
    fn insert_many_spilled(
        &mut self,
        batch: &StateBatch,
        hashes: &[u64],
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        const OPEN: Insert = Insert::Seen(StateId::MAX);
        if self.shares.is_empty() {
            // The engine did not say (a store that took the states over, a test).
            self.set_threads(1);
        }
        if self.threads_account.is_none() {
            // Registered with the first spilled batch: before, the shares hold nothing.
            let budget = &self
                .index_account
                .as_ref()
                .expect("spilled under a budget")
                .1;
            self.threads_account = Some(budget.account("full.threads"));
        }
        let n = hashes.len();
        out.clear();
        out.resize(n, OPEN);
        let (mut matches, mut maybe) = std::mem::take(&mut self.scratch);
        let r = (|| {
            let FullStore {
                slots,
                spill,
                arena,
                shares,
                threads_account,
                block_starts,
                ..
            } = self;
            let sp = spill.as_mut().expect("spilled");
            let Arena::Seg { states, .. } = arena else {
                unreachable!("only spilling stores spill their index")
            };
            if let Some(a) = threads_account {
                let t = shares.len() as u64;
                let held: u64 = shares
                    .iter()
                    .map(|sh| sh.reader.ram_bytes() + sh.runs.ram_bytes())
                    .sum();
                let expected = t * (states.reader_bytes() + RunLookup::RAM_BYTES);
                a.set(held.max(expected) + (t - 1) * par::THREAD_BYTES, 0, 0);
            }
            // (1) The window: probed by shares of the candidates, the matches compared in
            // id order through the block cache (the window's blocks are the ones worth
            // keeping: the cache adopts what the threads read).
            let (young, old) = (&*slots, &sp.old);
            shares.iter_mut().for_each(|sh| sh.found.clear());
            par::pieces(shares, n, PROBE_PIECE, |sh, piece| {
                let ahead = |i: usize| {
                    prefetch_home(young, hashes[i]);
                    prefetch_home(old, hashes[i]);
                };
                prefetched(piece, ahead, |i| {
                    collect(young, hashes[i], |id| sh.found.push((id, i as u32)));
                    collect(old, hashes[i], |id| sh.found.push((id, i as u32)));
                });
                Ok::<_, StoreError>(())
            })?;
            gather(shares, &mut matches);
            compare_shares(states.view(), shares, &matches, block_starts, batch)?;
            for sh in shares.iter_mut() {
                states.adopt(&mut sh.reader)?;
                for &(id, i) in &sh.found {
                    out[i as usize] = Insert::Seen(id);
                }
            }
            // (2) The runs, for what the window did not hold and some filter lets through.
            let (runs, undecided) = (&sp.runs, &out[..]);
            shares.iter_mut().for_each(|sh| sh.found.clear());
            par::pieces(shares, n, PROBE_PIECE, |sh, piece| {
                let ahead = |i: usize| {
                    if undecided[i] == OPEN {
                        runs.prefetch_filters(hashes[i]);
                    }
                };
                prefetched(piece, ahead, |i| {
                    if undecided[i] == OPEN && runs.may_contain(hashes[i]) {
                        sh.found.push((hashes[i], i as u32));
                    }
                });
                Ok::<_, StoreError>(())
            })?;
            gather(shares, &mut maybe);
            if maybe.is_empty() {
                return Ok(());
            }
            shares.iter_mut().for_each(|sh| sh.found.clear());
            par::pieces(shares, maybe.len(), READ_PIECE, |sh, piece| {
                let found = &mut sh.found;
                runs.find_sorted_in(&mut sh.runs, &maybe[piece], |i, id| found.push((id, i)))
            })?;
            gather(shares, &mut matches);
            // Old blocks, read in id order: not worth caching (`with_sequential`).
            compare_shares(states.view(), shares, &matches, block_starts, batch)?;
            let mut equal = 0;
            for sh in shares.iter_mut() {
                sh.reader.forget();
                sp.runs.absorb(&mut sh.runs);
                equal += sh.found.len() as u64;
                for &(id, i) in &sh.found {
                    out[i as usize] = Insert::Seen(id);
                }
            }
            sp.runs.count_outcomes(equal, matches.len() as u64 - equal);
            Ok::<_, StoreError>(())
        })();
        self.scratch = (matches, maybe);
        r?;
        // (3) New states, or repeats of an earlier candidate of this batch. A full hot window
        // of the vectors is compressed on every thread meanwhile (same files).
        self.set_seal_threads(self.shares.len());
        let r = (0..n).try_for_each(|i| -> Result<(), StoreError> {
            if out.get(i + AHEAD) == Some(&OPEN) {
                prefetch_home(&self.slots, hashes[i + AHEAD]);
            }
            if out[i] == OPEN {
                out[i] = self.insert_young(batch.get(i), hashes[i])?;
            }
            Ok(())
        });
        self.set_seal_threads(1);
        r?;
        Ok(())
    }

    /// Finds `state` in the young table only (an earlier candidate of the same batch) or
    /// inserts it there: the rest of the index has been asked already.
    fn insert_young(&mut self, state: &[u8], h: u64) -> Result<Insert, StoreError> {
        let spill = self.spill.take();
        let r = self.insert_hashed(state, h);
        self.spill = spill;
        r
    }

    /// Inserts a batch in order: pass 1 hashes every state and touches its bucket so that
    /// the cache misses overlap; pass 2 probes and inserts in order, one state at a time.
    /// A delayed batch once the index has spilled is hashed on the threads of
    /// [`FullStore::shares`] and resolved in the three sorted steps of
    /// [`FullStore::insert_many_spilled`].
    fn insert_all(
        &mut self,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
        delayed: bool,
    ) -> Result<(), StoreError> {
        out.clear();
        let n = batch.len();
        if n == 0 {
            return Ok(());
        }
        for i in 0..n {
            self.check(batch.get(i), n as u64)?;
        }
        self.reserve(n as u64)?;
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        let r = if delayed && self.spill.is_some() {
            // Hashed on the threads that resolve the batch, and not touched here: its first
            // step probes the window on those threads.
            hashes.resize(n, 0);
            par::fill(&mut hashes, self.shares.len(), |i| state_hash(batch.get(i)));
            self.insert_many_spilled(batch, &hashes, out)
        } else {
            let mask = self.slots.len() - 1;
            let mut touch = 0u64;
            for i in 0..n {
                let h = state_hash(batch.get(i));
                touch ^= self.slots[home(h, mask)];
                hashes.push(h);
            }
            std::hint::black_box(touch);
            hashes.iter().enumerate().try_for_each(|(i, &h)| {
                out.push(self.insert_hashed(batch.get(i), h)?);
                Ok(())
            })
        };
        self.hashes = hashes;
        r
    }

    fn check(&self, state: &[u8], extra: u64) -> Result<(), StoreError> {
        if let Some(w) = self.width {
            if state.len() != w {
                return Err(StoreError::Invalid {
                    store: "full",
                    message: format!(
                        "state of {} bytes in a store of {w}-byte states",
                        state.len()
                    ),
                });
            }
        }
        if self.count + extra > MAX_STATES {
            return Err(StoreError::CapacityExceeded {
                store: "full",
                message: format!("more than {MAX_STATES} states; use a memory-reduced store"),
            });
        }
        Ok(())
    }
}

impl FullStore {
    fn set_seal_threads(&mut self, threads: usize) {
        if let Arena::Seg { states, hashes } = &mut self.arena {
            states.set_seal_threads(threads);
            if let Some(h) = hashes {
                h.set_seal_threads(threads);
            }
        }
    }
}

impl WindowTable for Slots {
    fn window_slots(&self) -> usize {
        self.len()
    }

    fn window_bytes(&self) -> u64 {
        self.len() as u64 * 8
    }
}

impl WindowHost for FullStore {
    type Table = Slots;
    type Shape = ();
    const RUNS: &'static str = RUNS;

    /// Half each, or a quarter in a DFS whose vectors' block cache would keep less than
    /// [`DFS_WORKING_CACHE`] beside halves: a DFS's lookups that the window misses go to the
    /// runs one at a time and compare their match with its vector at once, so a starved
    /// vector cache costs a decompressed block per lookup. Kanban-PT-00005 in DFS under
    /// `--memory 24M -o` (the LTS writer's 4 MiB out of the same budget): 190–197 s with
    /// halves (1.3 MiB of vector cache, 17.2 M misses against 1.8 M hits), 50–57 s with
    /// quarters (3.7 MiB, 1.3 M misses; 16.5 M run lookups instead of 14.6 M). Where the
    /// cache had room (SharedMemory-PT-000010 under 32M: 10 MiB) quarters were 10% slower
    /// in three rounds (more run lookups), so they are taken only when it is short. A BFS
    /// resolves its window misses in sorted batches and keeps the halves.
    fn spilled_window_slots(&self, cap: usize) -> usize {
        let short = match (&self.arena, &self.index_account) {
            (Arena::Seg { states, .. }, Some((_, budget))) if self.random_lookups => {
                budget.headroom(states.account()).is_some_and(|room| {
                    room.saturating_sub(states.min_ram_bytes()) < DFS_WORKING_CACHE
                })
            }
            _ => false,
        };
        if short {
            cap / 4
        } else {
            cap / 2
        }
    }

    fn runs_place(&self) -> (std::path::PathBuf, bool, Arc<Budget>) {
        let (dir, kept) = self
            .run_dir
            .clone()
            .expect("only spilling stores have a budget");
        let budget = self.index_account.as_ref().expect("spilling").1.clone();
        (dir, kept, budget)
    }

    fn window(&mut self) -> (&mut Slots, &mut u64, &mut Option<Box<Spill<Slots>>>) {
        (&mut self.slots, &mut self.young_start, &mut self.spill)
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn empty_table(&self) -> Slots {
        Slots::default()
    }

    fn new_table(&self, cap: usize, _shape: ()) -> Result<Slots, StoreError> {
        Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))
    }

    fn charge(&mut self, extra: u64) {
        if let Some((account, _)) = &self.index_account {
            account.set(self.index_bytes() + extra, 0, 0);
        }
    }

    fn trim_caches(&mut self) -> Result<(), StoreError> {
        self.trim_state_cache()
    }

    fn publish(&mut self) {
        self.set_index_account();
    }

    fn pairs_in<F>(&mut self, from: u64, to: u64, f: F) -> Result<(), StoreError>
    where
        F: FnMut(u64, u64) -> Result<(), StoreError>,
    {
        self.hashes_in(from, to, f)
    }
}

impl StateStore for FullStore {
    fn index_spills(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "full"
    }

    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        self.check(state, 1)?;
        self.reserve(1)?;
        self.insert_hashed(state, state_hash(state))
    }

    fn insert_batch(
        &mut self,
        _parent: StateId,
        _parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        self.insert_all(batch, out, false)
    }

    /// Under a budget: once the index has spilled, lookups that reach the runs are batched
    /// (sorted by hash against the runs, then compared in id order). The batch is bounded so
    /// that the window's young table takes it whole, and so that its vectors stay a small
    /// share of the budget.
    fn shared_index(&mut self) -> Option<SharedIndex<'_>> {
        if self.spill.is_some() {
            return None;
        }
        match &mut self.arena {
            Arena::Ram { bytes, ends } => Some(SharedIndex::Ram(Index {
                slots: &self.slots,
                vectors: RamVectors {
                    bytes,
                    ends,
                    width: self.width,
                },
            })),
            // Under a budget, while the index is all in RAM: the threads read the vectors
            // through a view of the segment vector (its block cache, and their own reads).
            // Zero-width states are stored as one byte there: the one-parent loop serves them.
            Arena::Seg { states, .. } if self.width.is_some_and(|w| w > 0) => {
                Some(SharedIndex::Seg(Index {
                    slots: &self.slots,
                    vectors: states.view(),
                }))
            }
            Arena::Seg { .. } => None,
        }
    }

    /// Only once the index has spilled (before, [`StateStore::shared_index`] serves the
    /// threads), and not for zero-width states (one byte each in the segment vector).
    fn shared_vectors(&mut self) -> Option<SharedVectors<'_>> {
        self.spill.as_ref()?;
        match &mut self.arena {
            Arena::Ram { bytes, ends } => Some(SharedVectors::Ram(RamVectors {
                bytes,
                ends,
                width: self.width,
            })),
            Arena::Seg { states, .. } if self.width.is_some_and(|w| w > 0) => {
                Some(SharedVectors::Seg(states.view()))
            }
            Arena::Seg { .. } => None,
        }
    }

    /// Threads for the spilled delayed batches: as many as `threads` whose readers fit a
    /// sixteenth of the budget (the delayed batch's own share), at least one.
    fn set_threads(&mut self, threads: usize) {
        let (Arena::Seg { states, .. }, Some((_, budget))) = (&self.arena, &self.index_account)
        else {
            return;
        };
        let room = match budget.limit() {
            MemoryLimit::Bytes(b) => Some(b / 16),
            MemoryLimit::Unlimited => None,
        };
        let per = states.reader_bytes() + RunLookup::RAM_BYTES;
        let t = par::threads_within(threads, per, room);
        self.shares = (0..t).map(|_| BatchShare::default()).collect();
    }

    fn adopt_reads(&mut self, readers: &mut [SegReader]) -> Result<(), StoreError> {
        if let Arena::Seg { states, .. } = &mut self.arena {
            for r in readers {
                states.adopt(r)?;
            }
        }
        Ok(())
    }

    /// Each of `threads` threads copies a contiguous share of the vectors into the arena's
    /// spare capacity (taking its page faults: on wide vectors, fresh arena pages are most
    /// of the cost) and claims slots for its states with compare-and-swap on an atomic view
    /// of the table. A table that must grow is rebuilt the same way from every stored state
    /// once the vectors are in. Places in the table then depend on the scheduling; which ids
    /// it holds, and so every lookup's answer, do not.
    fn add_new<'a>(
        &mut self,
        count: usize,
        new: &(dyn Fn(usize) -> NewState<'a> + Sync + 'a),
        threads: usize,
        _looked_up: u64,
    ) -> Result<(), StoreError> {
        if count == 0 {
            return Ok(());
        }
        let mut total = 0;
        match (&self.arena, self.width) {
            // Fixed-width states in RAM: the threads' copies check every length (below), so
            // the new vectors, written by other threads, are not read here first.
            (Arena::Ram { .. }, Some(w)) => {
                self.check(&vec![0; w], count as u64)?;
                total = count * w;
            }
            _ => {
                for i in 0..count {
                    let s = new(i).state;
                    self.check(s, count as u64)?;
                    total += s.len();
                }
            }
        }
        if let Arena::Seg { .. } = self.arena {
            // Under a budget: the index grows (or spills) as for any batch, then each state
            // is appended to the segment vector and indexed, on this thread.
            // The other threads wait meanwhile: full hot blocks are compressed on all of them.
            // Room is made a few states at a time: a chunk may hold more new states than a
            // spilled index's young table takes between rotations.
            self.set_seal_threads(threads);
            let r = (0..count).try_for_each(|i| {
                if i % 64 == 0 {
                    self.reserve((count - i).min(64) as u64)?;
                }
                let n = new(i);
                let id = self.count;
                match self.insert_hashed(n.state, n.hash)? {
                    Insert::New(got) if got == id => Ok(()),
                    other => Err(StoreError::Invalid {
                        store: "full",
                        message: format!(
                            "state {id} of a parallel chunk was not new to the store ({other:?})"
                        ),
                    }),
                }
            });
            self.set_seal_threads(1);
            return r;
        }
        let first = self.count;
        let grow = (first + count as u64) * 4 > self.slots.len() as u64 * 3;
        let mut regrown = false;
        if grow {
            let mut cap = self.slots.len().max(1 << 10);
            while (first + count as u64) * 4 > cap as u64 * 3 {
                cap *= 2;
            }
            crate::sys::check_ceiling("the full-store index", cap as u64 * 8)?;
            let fresh = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
            let old = std::mem::replace(&mut self.slots, fresh);
            // The old entries are re-placed from their slots, and the chunk's new states
            // indexed below with their copies, as without growth; else (a table too large
            // for that, or an old one that lacks states) rebuilt from the arena once the new
            // vectors are in.
            regrown = regrows_to(cap)
                && !old.is_empty()
                && regrow(&old, self.slots.atomic(), threads) == first;
            drop(old);
            if !regrown {
                self.slots = Slots::default();
                self.slots = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
            }
        }
        let rehash = grow && !regrown;
        let Arena::Ram { bytes, ends } = &mut self.arena else {
            unreachable!("segment arenas were handled above")
        };
        let start = bytes.len();
        if bytes.capacity() - start < total {
            let more = bytes.capacity().max(total) as u64;
            crate::sys::check_ceiling("the full store's state vectors", more)?;
            bytes.reserve(total);
        }
        if self.width.is_none() {
            let mut end = start as u64;
            for i in 0..count {
                end += new(i).state.len() as u64;
                ends.push(end);
            }
        }
        // Indexed with the copies unless the table is rebuilt anyway.
        let table = (!rehash).then(|| self.slots.atomic());
        let per = ADD_PIECE;
        // Each piece's first state and destination in the spare bytes.
        let mut shares: Vec<(usize, &mut [std::mem::MaybeUninit<u8>])> = Vec::new();
        let mut spare = &mut bytes.spare_capacity_mut()[..total];
        let mut i = 0;
        while i < count {
            let end = (i + per).min(count);
            let len = match self.width {
                Some(w) => (end - i) * w,
                None => (i..end).map(|k| new(k).state.len()).sum(),
            };
            let (dst, rest) = std::mem::take(&mut spare).split_at_mut(len);
            spare = rest;
            shares.push((i, dst));
            i = end;
        }
        let (bad, width) = (std::sync::atomic::AtomicU64::new(u64::MAX), self.width);
        par::claim(threads, &mut shares, |(i, dst)| {
            let ids = first + *i as u64..first + (*i + per).min(count) as u64;
            // On wide vectors the faults of both threads copying new states into fresh pages
            // were a large share of `add_new` (each takes the memory map's lock).
            crate::sys::populate(dst.as_ptr() as *const u8, dst.len());
            let mut at = 0;
            for id in ids.clone() {
                let v = new((id - first) as usize).state;
                if width.is_some_and(|w| v.len() != w) {
                    // A state of another width: reported below, nothing is stored.
                    bad.fetch_min(id - first, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                // (`write_copy_of_slice` is newer than the crate's MSRV; this loop
                // compiles to the same copy.)
                for (d, &b) in dst[at..at + v.len()].iter_mut().zip(v) {
                    d.write(b);
                }
                at += v.len();
            }
            if let Some(table) = table {
                index_atomic(table, ids, |id| new((id - first) as usize).hash);
            }
        });
        let bad = bad.into_inner();
        if bad != u64::MAX {
            // A model bug; the run stops here (the index may hold some of the chunk's ids).
            return Err(StoreError::Invalid {
                store: "full",
                message: format!(
                    "state of {} bytes in a store of {}-byte states",
                    new(bad as usize).state.len(),
                    width.unwrap_or(0)
                ),
            });
        }
        // SAFETY: the threads, all finished with the step, wrote every byte of the `total`
        // spare bytes after `start` (their shares are disjoint and cover them).
        unsafe { bytes.set_len(start + total) };
        self.count += count as u64;
        if rehash {
            self.rebuild_index(threads);
        }
        self.move_to_segments()
    }

    fn delayed_batch(&self) -> Option<usize> {
        let (_, budget) = self.index_account.as_ref()?;
        delayed_batch_len(
            budget.limit(),
            self.width,
            self.spill.as_deref(),
            self.slots.len(),
            &self.batch_account,
            None,
        )
    }

    fn insert_many(
        &mut self,
        _parents: &[(StateId, u32)],
        _parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        self.insert_all(batch, out, true)
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn states_back(&self) -> StatesBack {
        StatesBack::Kept
    }

    fn get(&mut self, id: StateId) -> Result<Option<&[u8]>, StoreError> {
        if id >= self.count {
            return Ok(None);
        }
        match &self.arena {
            Arena::Ram { bytes, ends } => Ok(Some(slice(bytes, ends, self.width, id as usize))),
            // Engines load states in id order (the BFS head): don't let that pass evict the
            // blocks that duplicate checks keep hitting.
            Arena::Seg { states, .. } => {
                let w = self.width.unwrap_or(0);
                let got = &mut self.got;
                got.clear();
                states.with_sequential(id, |r| got.extend_from_slice(&r[..w]))?;
                Ok(Some(got))
            }
        }
    }

    fn exactness(&self) -> Exactness {
        Exactness::Exact
    }

    fn ram_bytes(&self) -> u64 {
        let arena = match &self.arena {
            Arena::Ram { bytes, ends } => (bytes.capacity() + ends.capacity() * 8) as u64,
            Arena::Seg { states, hashes } => {
                states.ram_bytes() + hashes.as_ref().map_or(0, |h| h.ram_bytes())
            }
        };
        let mirror = self.mirror.as_ref().map_or(0, |m| {
            m.states.ram_bytes() + m.hashes.as_ref().map_or(0, |h| h.ram_bytes())
        });
        arena
            + mirror
            + self.slots.len() as u64 * 8
            + self
                .spill
                .as_ref()
                .map_or(0, |sp| sp.old.len() as u64 * 8 + sp.runs.ram_bytes())
    }

    /// The index (at least its first 1,024 slots) and the state vectors' minimal buffers.
    fn min_ram_bytes(&self) -> u64 {
        let arena = match &self.arena {
            Arena::Ram { .. } => 0,
            Arena::Seg { states, hashes } => {
                states.min_ram_bytes() + hashes.as_ref().map_or(0, |h| h.min_ram_bytes())
            }
        };
        // A budgeted index may spill: then it needs the runs' cache and merge buffers too.
        let runs = if self.index_account.is_some() {
            HashRuns::min_ram_bytes()
        } else {
            0
        };
        arena + self.slots.len().max(1 << 10) as u64 * 8 + runs
    }

    fn disk_bytes(&self) -> u64 {
        let runs = self.spill.as_ref().map_or(0, |sp| sp.runs.disk_bytes());
        match &self.arena {
            Arena::Ram { .. } => self.mirror.as_ref().map_or(0, |m| {
                m.states.disk_bytes() + m.hashes.as_ref().map_or(0, |h| h.disk_bytes())
            }),
            Arena::Seg { states, hashes } => {
                states.disk_bytes() + hashes.as_ref().map_or(0, |h| h.disk_bytes()) + runs
            }
        }
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        self.catch_up()?;
        let vectors = match (&mut self.arena, &mut self.mirror) {
            (Arena::Seg { states, hashes }, _) | (_, Some(Mirror { states, hashes, .. })) => {
                Some((states, hashes))
            }
            _ => None,
        };
        let (Some((states, hashes)), Some(w)) = (vectors, self.width) else {
            return Err(StoreError::Invalid {
                store: "full",
                message: "a store in RAM cannot be checkpointed (it needs segment files)".into(),
            });
        };
        let sm = states.flush()?;
        let hm = match hashes {
            Some(h) => Some(h.flush()?),
            None => None,
        };
        let mut files = vec![FileMark::segment(STATES, sm.segment_len)];
        if let Some(hm) = &hm {
            files.push(FileMark::segment(HASHES, hm.segment_len));
        }
        let window = match &mut self.spill {
            None => None,
            Some(sp) => Some(sp.checkpoint(self.young_start, &mut files)?),
        };
        Ok(StoreMark {
            blob: encode_blob(&Mark {
                width: w,
                count: self.count,
                states: sm,
                hashes: hm,
                window,
            }),
            files,
        })
    }

    fn sync_accounts(&self) {
        if let Some(sp) = &self.spill {
            sp.runs.update_account();
        }
        if let (Arena::Seg { states, hashes }, _) | (_, Some(Mirror { states, hashes, .. })) =
            (&self.arena, &self.mirror)
        {
            states.update_account();
            if let Some(hv) = hashes {
                hv.update_account();
            }
        }
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if let Arena::Seg { states, .. } = &self.arena {
            let (hits, misses) = states.cache_counts();
            m.insert("state_cache_hits".into(), hits.into());
            m.insert("state_cache_misses".into(), misses.into());
        }
        if let Some(sp) = &self.spill {
            sp.report(&mut m, self.count);
            // Threads its delayed batches are resolved on (`set_threads`).
            m.insert("index_threads".into(), self.shares.len().max(1).into());
        }
        if let Some(at) = self.moved_at {
            m.insert("full_vectors_to_disk_at".into(), at.into());
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes are persisted (segment files, checkpoints): the state hash must stay XXH3-64
    /// with seed 0 whichever implementation computes it, at every length (the short, mid,
    /// and long paths, and the long path's stripes and blocks) and alignment.
    #[test]
    fn state_hash_is_xxh3() {
        let bytes: Vec<u8> = (0..4200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..=1100).chain([1024, 2048, 2049, 4095, 4096]) {
            for at in [0, 1, 3] {
                let s = &bytes[at..at + len];
                assert_eq!(
                    state_hash(s),
                    xxhash_rust::xxh3::xxh3_64(s),
                    "length {len} at {at}"
                );
            }
        }
    }

    /// A doubled table re-placed from the old one's slots holds every entry where a probe
    /// from its home finds it, also for runs that wrap around the old table's end and
    /// homes crowded enough to make long runs.
    #[test]
    fn regrown_tables_find_every_entry() {
        for (cap, n, spread) in [(16, 12, 16u64), (1024, 768, 1 << 20), (4096, 3000, 64)] {
            let mut old = vec![0u64; cap];
            // Hashes whose tags crowd `spread` homes, the last ones next to the table's end.
            let hashes: Vec<u64> = (0..n as u64)
                .map(|i| {
                    let tag = (cap as u64 - 1 - (i * 7919) % spread.min(cap as u64))
                        | ((i * 2_654_435_761) % 65_536) << 16;
                    tag << 32 | (i * 40_503)
                })
                .collect();
            for (id, &h) in hashes.iter().enumerate() {
                place(&mut old, h, id as u64);
            }
            for threads in [1, 2] {
                let new = Slots::zeroed(2 * cap).unwrap();
                assert_eq!(regrow(&old, new.atomic(), threads), n as u64);
                let entries = |t: &[u64]| {
                    let mut e: Vec<u64> = t.iter().copied().filter(|&s| s != 0).collect();
                    e.sort_unstable();
                    e
                };
                assert_eq!(
                    entries(&new),
                    entries(&old),
                    "{cap} slots, {threads} threads"
                );
                for (id, &h) in hashes.iter().enumerate() {
                    let found = scan(&new, h, |got| Ok::<_, ()>((got == id as u64).then_some(())));
                    assert_eq!(found, Ok(Some(())), "entry {id} of {cap} slots lost");
                }
            }
        }
    }

    #[test]
    fn numbers_in_insertion_order_fixed_and_variable() {
        for width in [Some(3), None] {
            let mut s = FullStore::new(width);
            let states: Vec<Vec<u8>> = (0..5000u32)
                .map(|i| {
                    let b = i.to_le_bytes();
                    match width {
                        Some(_) => vec![b[0], b[1], 7],
                        None => b[..(i % 4 + 1) as usize].to_vec(),
                    }
                })
                .collect();
            let mut expect_new = 0;
            for st in &states {
                match s.insert(st, None).unwrap() {
                    Insert::New(id) => {
                        assert_eq!(id, expect_new);
                        expect_new += 1;
                    }
                    Insert::Seen(id) => {
                        assert_eq!(s.get(id).unwrap(), Some(&st[..]));
                    }
                }
            }
            for st in &states {
                let Insert::Seen(id) = s.insert(st, None).unwrap() else {
                    panic!("lost {st:?}")
                };
                assert_eq!(s.get(id).unwrap(), Some(&st[..]));
            }
            assert_eq!(s.len(), expect_new);
        }
    }
}
