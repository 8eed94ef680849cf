//! One node table of the tree store: pairs of 32-bit children interned under dense 32-bit
//! references. The pairs live in an append-only array indexed by reference (so references
//! never move: a parent node keeps its children's references through any growth), and an
//! open-addressing index of 4-byte slots finds a pair's reference. The array is bit-packed
//! to the widest children stored so far ([`Pairs`]).
//!
//! Index slot: `tag | (ref + 1)` (0 = empty). `ref + 1` needs `id_bits = bits(capacity)`
//! bits (the table is never full, so `ref + 1 <= capacity`); the `32 - id_bits` bits left
//! hold hash bits that filter almost every false comparison, so a lookup rarely reads a
//! pair it does not want (one random access fewer per probe than a bare reference). Linear
//! probing, home slot by multiply-shift of the hash's top 32 bits (any capacity works), at
//! most 7/8 full. Growing frees the old index first and rebuilds the new one from the pair
//! array, so old and new indexes never coexist (no transient of twice the index).

use super::shared::ABSENT;
use crate::error::StoreError;
use crate::par;
use crate::storage::budget::{Account, Budget, MemoryLimit, UNTRACKED_RESERVE};
use crate::storage::SegVec;
use crate::store::slots::prefetch;
use memmap2::MmapMut;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Pairs per chunk of the pair array: growing the array maps a chunk and never copies (a
/// doubling vector would briefly hold 1.5 times its contents). Chunks are anonymous
/// mappings, resident only as far as they are written. Unlike the index they are not
/// advised for huge pages: that made each table's last chunk wholly resident (3 MB more
/// peak RSS on Peterson-PT-3, 4 MB on the smallest models) for no measurable speed-up. The
/// budget is charged whole chunks (at most 2 MiB per table more than is resident).
const CHUNK_BITS: u32 = 18;
const CHUNK: usize = 1 << CHUNK_BITS;

/// Bytes after a chunk's last pair, so that every pair is read and written as one unaligned
/// 16-byte word.
const PAD: usize = 16;

/// Entries of a [`Memo`]: 2^13 of 16 bytes, 128 KiB, which stays in the 1 MiB L2 cache
/// next to a batch's buffers.
const MEMO_BITS: u32 = 13;

/// Identities of node tables, so that a thread's [`Memo`] knows which table it remembers.
static NEXT_TABLE: AtomicU64 = AtomicU64::new(1);

fn next_table() -> u64 {
    NEXT_TABLE.fetch_add(1, Ordering::Relaxed)
}

/// A direct-mapped cache of recent lookups in one node table, `(pair, ref + 1)` at the low
/// bits of the pair's hash (0: empty; the home slot takes the top bits). For inner nodes,
/// whose lookups are nearly all hits on few pairs (a successor changes a few leaves; the
/// nodes above them recur from state to state), it answers 86–93% of them from L2 on
/// SharedMemory-PT-000010 and Peterson-PT-3, instead of an index slot and then a pair in L3
/// or RAM. References never move, so an entry stays true as long as its table lives; only
/// references the table gave out are kept, never an absence.
#[derive(Default)]
pub struct Memo {
    /// The table remembered ([`NodeTable`]'s identity; 0: none yet).
    table: u64,
    slots: Vec<(u64, u32)>,
    /// Lookups answered.
    pub hits: u64,
}

impl Memo {
    /// A memo of table `table`.
    fn of(table: u64) -> Memo {
        Memo {
            table,
            slots: vec![(0, 0); 1 << MEMO_BITS],
            hits: 0,
        }
    }

    fn bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<(u64, u32)>()) as u64
    }

    /// The reference remembered for `pair`, whose [`pair_hash`] is `h`.
    #[inline(always)]
    fn recall(&mut self, pair: u64, h: u64) -> Option<u32> {
        let (p, r1) = self.slots[h as usize & ((1 << MEMO_BITS) - 1)];
        if r1 != 0 && p == pair {
            self.hits += 1;
            return Some(r1 - 1);
        }
        None
    }

    #[inline(always)]
    fn keep(&mut self, pair: u64, h: u64, r: u32) {
        self.slots[h as usize & ((1 << MEMO_BITS) - 1)] = (pair, r + 1);
    }

    /// [`Find::find_hashed`] through the memo (a thread's own, for the tables a parallel
    /// chunk reads): forgets what it held if `table` is another table than the one it
    /// remembers.
    #[inline]
    pub fn find(&mut self, table: &Find<'_>, pair: u64, h: u64) -> Option<u32> {
        if self.table != table.id {
            *self = Memo::of(table.id);
        }
        if let Some(r) = self.recall(pair, h) {
            return Some(r);
        }
        let r = table.find_hashed(pair, h)?;
        self.keep(pair, h, r);
        Some(r)
    }
}

/// Entries of a [`Steps`] memo: 2^15 of 8 bytes, 256 KiB, beside the [`Memo`] in the 512 KiB
/// L2 cache of a core. Of the subtrees a step would look up, 2^13 entries left 1.2–1.3 times
/// as many to be interned again as 2^15 (Peterson-PT-3, QuasiCertifProtocol-PT-06), 2^17 0.8
/// times.
const STEPS_BITS: u32 = 15;

/// Widest key a [`Steps`] entry can tell apart: the slot's [`STEPS_BITS`] and 32 stored bits.
const STEPS_KEY_BITS: u32 = STEPS_BITS + 32;

/// A direct-mapped memo of *steps*: `(transition t, inner node k, the parent's reference at
/// k) → the successor's reference at k`. It is true because of the contract of
/// [`crate::model::Model::touched_units`]: firing `t` sets each unit it touches to a value
/// that depends only on `t` and that unit's old value, and leaves every other unit alone,
/// so the subtree below `k` after `t` depends only on `t` and the subtree before it. A hit
/// answers a whole subtree with one lookup, where folding it would gather its touched
/// leaves and intern every node on their paths (QuasiCertifProtocol-PT-06: 12 inner nodes
/// a successor, of which 2 remain to be interned with the memo). The references are the
/// node table's, which never move: an entry never goes stale while the table lives.
///
/// An entry is 8 bytes, so that the memo stays in L2 (16-byte entries, the whole key beside
/// the answer, filled a core's 512 KiB and the compare's load was a quarter of the fold's
/// samples on QuasiCertifProtocol-PT-06). The key `(t × nodes + k) · 2^from_bits + from`
/// has `key_bits` bits (at most [`STEPS_KEY_BITS`]); its multiple by an odd constant modulo
/// `2^key_bits` — a bijection — gives the slot (top [`STEPS_BITS`] bits) and the 32-bit
/// `check` kept in the entry (the rest), so that slot and check together name exactly one
/// key: a hit is never a false one. The answer takes the other half; [`ABSENT`] there, never
/// a reference, marks an empty entry. References grow past `from_bits`: the memo then
/// widens the field and forgets what it held (about once per doubling of the node table).
pub struct Steps {
    slots: Vec<u64>,
    /// Inner nodes below the root of a tree (plan indexes `0..nodes`).
    nodes: u64,
    /// Bits of `t × nodes + k`, and of the parents' references the keys can hold.
    tk_bits: u32,
    from_bits: u32,
    /// Subtrees answered, and looked up.
    pub hits: u64,
    pub lookups: u64,
}

impl Steps {
    /// A memo for trees of `nodes` inner nodes below the root and `transitions` transitions;
    /// `None` if an entry could not tell their keys apart with references of 16 bits.
    pub fn new(nodes: usize, transitions: usize) -> Option<Steps> {
        let span = (nodes as u64).checked_mul(transitions as u64)?;
        let tk_bits = u64::BITS - span.saturating_sub(1).leading_zeros();
        // Never a key narrower than a slot number; room for a few thousand nodes at first.
        let from_bits = STEPS_BITS.saturating_sub(tk_bits).max(12);
        // Room for at least 2^16 references; beyond what it has room for, the memo keeps
        // what it learnt and learns no more.
        (tk_bits + 16 <= STEPS_KEY_BITS).then(|| Steps {
            slots: vec![Self::EMPTY; 1 << STEPS_BITS],
            nodes: nodes as u64,
            tk_bits,
            from_bits,
            hits: 0,
            lookups: 0,
        })
    }

    const EMPTY: u64 = (ABSENT as u64) << 32;

    pub fn bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<u64>()) as u64
    }

    /// The slot and check of a key (`from` fits `from_bits`).
    #[inline(always)]
    fn key(&self, t: u32, k: usize, from: u32) -> (usize, u64) {
        debug_assert!((k as u64) < self.nodes);
        debug_assert!(u64::from(from) >> self.from_bits == 0);
        let tk = u64::from(t) * self.nodes + k as u64;
        let bits = self.tk_bits + self.from_bits;
        let key = (tk << self.from_bits) | u64::from(from);
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) & ((1u64 << bits) - 1);
        let low = bits - STEPS_BITS;
        ((h >> low) as usize, h & ((1u64 << low) - 1))
    }

    /// The successor's reference at inner node `k` after transition `t` from a parent whose
    /// reference there is `from`, if remembered.
    #[inline(always)]
    pub fn recall(&mut self, t: u32, k: usize, from: u32) -> Option<u32> {
        self.lookups += 1;
        if u64::from(from) >> self.from_bits != 0 {
            return None;
        }
        let (slot, check) = self.key(t, k, from);
        let e = self.slots[slot];
        if e as u32 as u64 == check && (e >> 32) as u32 != ABSENT {
            self.hits += 1;
            return Some((e >> 32) as u32);
        }
        None
    }

    #[inline(always)]
    pub fn keep(&mut self, t: u32, k: usize, from: u32, to: u32) {
        debug_assert!(to != ABSENT);
        if u64::from(from) >> self.from_bits != 0 && !self.widen(from) {
            return;
        }
        let (slot, check) = self.key(t, k, from);
        self.slots[slot] = u64::from(to) << 32 | check;
    }

    /// Makes room for references as large as `from` (three more bits than it needs, so that
    /// this happens once per eight-fold growth of the node table, about six times a run),
    /// forgetting every entry; false if keys would then be too wide, and the memo keeps
    /// what it has.
    #[cold]
    fn widen(&mut self, from: u32) -> bool {
        let want = (u32::BITS - from.leading_zeros() + 3).min(u32::BITS);
        let want = want.min(STEPS_KEY_BITS - self.tk_bits);
        if u64::from(from) >> want != 0 {
            return false;
        }
        self.from_bits = want;
        self.slots.fill(Self::EMPTY);
        true
    }
}

/// Significant bits of `x` (0 for 0).
#[inline(always)]
fn bits(x: u32) -> u32 {
    u32::BITS - x.leading_zeros()
}

/// The children of packed bits `v` whose left field is `left` bits wide.
#[inline(always)]
fn unpack(v: u64, left: u32) -> (u32, u32) {
    ((v & ((1u64 << left) - 1)) as u32, (v >> left) as u32)
}

/// Children `l` and `r` as packed bits with a left field of `left` bits (each child fits
/// its field).
#[inline(always)]
fn repack_fields(l: u32, r: u32, left: u32) -> u64 {
    l as u64 | (r as u64) << left
}

/// The pair array, bit-packed: each pair takes `left + right` bits, the widest left and
/// right child stored so far (a root's children are node references, which need
/// ⌈log2 nodes⌉ bits: 20 on Peterson-PT-3, 5 bytes a state instead of 8). A child wider than
/// its field repacks the array chunk by chunk into the new widths (a pair keeps its chunk
/// and place), so the transient is one chunk; the fields widen one bit per doubling of the
/// largest reference, so a run repacks about 30 times, mostly while small.
#[derive(Default)]
struct Pairs {
    chunks: Vec<MmapMut>,
    left: u32,
    right: u32,
}

impl Pairs {
    /// Bits per pair.
    #[inline(always)]
    fn width(&self) -> u32 {
        self.left + self.right
    }

    /// Bytes of a chunk of pairs of `width` bits.
    fn chunk_bytes(width: u32) -> usize {
        CHUNK * width as usize / 8 + PAD
    }

    fn bytes(&self) -> u64 {
        (self.chunks.len() * Self::chunk_bytes(self.width())) as u64
    }

    /// The packed bits of pair `off` of `chunk`, for pairs of `width` bits.
    #[inline(always)]
    fn load(chunk: &[u8], off: usize, width: u32) -> u64 {
        let bit = off * width as usize;
        let at = bit / 8;
        let word = u128::from_le_bytes(chunk[at..at + 16].try_into().expect("16 bytes"));
        ((word >> (bit % 8)) & ((1u128 << width) - 1)) as u64
    }

    /// Writes `packed` as pair `off` of a chunk whose bits there are still zero.
    #[inline(always)]
    fn store(chunk: &mut [u8], off: usize, width: u32, packed: u64) {
        let bit = off * width as usize;
        let at = bit / 8;
        let word = u128::from_le_bytes(chunk[at..at + 16].try_into().expect("16 bytes"))
            | (packed as u128) << (bit % 8);
        chunk[at..at + 16].copy_from_slice(&word.to_le_bytes());
    }

    /// Pair `r` as one `u64`, left child in the low half.
    #[inline(always)]
    fn get(&self, r: u32) -> u64 {
        let v = Self::load(
            &self.chunks[(r >> CHUNK_BITS) as usize],
            r as usize & (CHUNK - 1),
            self.width(),
        );
        let (l, r) = unpack(v, self.left);
        pack(l, r)
    }

    /// Whether `pair` fits the current fields.
    #[inline(always)]
    fn fits(&self, pair: u64) -> bool {
        bits(pair as u32) <= self.left && bits((pair >> 32) as u32) <= self.right
    }

    /// The fields `pair` needs: the current ones, widened where it is wider.
    fn widths_for(&self, pair: u64) -> (u32, u32) {
        (
            self.left.max(bits(pair as u32)),
            self.right.max(bits((pair >> 32) as u32)),
        )
    }

    /// Writes pair `r` (the next one; its chunk exists).
    #[inline(always)]
    fn set(&mut self, r: u64, pair: u64) {
        let width = self.width();
        let packed = repack_fields(pair as u32, (pair >> 32) as u32, self.left);
        Self::store(
            &mut self.chunks[r as usize >> CHUNK_BITS],
            r as usize & (CHUNK - 1),
            width,
            packed,
        );
    }

    /// Repacks the first `len` pairs into fields of `left` and `right` bits, chunk by chunk.
    /// A mapping that fails part-way leaves chunks of both widths: the error ends the run
    /// (exit 6) and the table is not read again; a checkpoint's logs hold the pairs unpacked.
    fn repack(&mut self, len: u64, left: u32, right: u32) -> std::io::Result<()> {
        let (old, width) = (self.width(), left + right);
        for c in 0..self.chunks.len() {
            let mut map = MmapMut::map_anon(Self::chunk_bytes(width))?;
            let n = (len - (c as u64) * CHUNK as u64).min(CHUNK as u64) as usize;
            for off in 0..n {
                let v = Self::load(&self.chunks[c], off, old);
                let (l, r) = unpack(v, self.left);
                Self::store(&mut map, off, width, repack_fields(l, r, left));
            }
            self.chunks[c] = map;
        }
        (self.left, self.right) = (left, right);
        Ok(())
    }
}

/// The smallest index.
const MIN_SLOTS: usize = 1 << 10;

/// Most entries a table holds: references are `u32` and `ref + 1` must fit in a slot.
pub const MAX_ENTRIES: u64 = u32::MAX as u64 - 1;

/// The pair hash: the finaliser of MurmurHash3 (a bijection on `u64` with full avalanche),
/// fast enough to be recomputed for every entry when the index grows.
#[inline(always)]
pub fn pair_hash(p: u64) -> u64 {
    let mut x = p ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A pair as one `u64`: left child in the low half.
#[inline(always)]
pub fn pack(left: u32, right: u32) -> u64 {
    left as u64 | (right as u64) << 32
}

/// The zeroed `u32` slots of an index, in an anonymous mapping advised for transparent huge
/// pages (random probes of a large table otherwise also miss the TLB; see `store/slots.rs`).
#[derive(Default)]
struct Index {
    map: Option<MmapMut>,
    cap: usize,
}

impl Index {
    fn zeroed(cap: usize) -> std::io::Result<Index> {
        let map = MmapMut::map_anon(cap * 4)?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(Index {
            map: Some(map),
            cap,
        })
    }
    #[inline(always)]
    fn slots(&self) -> &[u32] {
        match &self.map {
            // Page-aligned and a multiple of 4 bytes long: the cast cannot fail.
            Some(m) => bytemuck::cast_slice(&m[..self.cap * 4]),
            None => &[],
        }
    }
    /// The slots as atomics, for threads that fill an empty index at once
    /// ([`NodeTable::grow`] on several threads: compare-and-swap on empty slots). While this
    /// borrow lives no `&mut` to the slots can exist, so every access is through the atomics.
    fn atomic(&self) -> &[AtomicU32] {
        match &self.map {
            // SAFETY: `AtomicU32` has the size and bit validity of `u32`, and the mapping is
            // page-aligned, so each slot is 4-byte aligned as `AtomicU32` requires; the
            // mapping is at least `cap * 4` bytes and lives as long as `self`, whose shared
            // borrow the slice keeps (no plain write can happen meanwhile).
            Some(m) => unsafe {
                std::slice::from_raw_parts(m.as_ptr() as *const AtomicU32, self.cap)
            },
            None => &[],
        }
    }
    #[inline(always)]
    fn slots_mut(&mut self) -> &mut [u32] {
        match &mut self.map {
            Some(m) => bytemuck::cast_slice_mut(&mut m[..self.cap * 4]),
            None => &mut [],
        }
    }
}

/// Where the home slot of hash `h` is in an index of `cap` slots.
#[inline(always)]
fn home(h: u64, cap: usize) -> usize {
    (((h >> 32) * cap as u64) >> 32) as usize
}

/// Entries from which [`NodeTable::index_refs`] indexes on every thread it may use (an
/// index rebuilt, a parallel chunk's new entries), and the references a thread claims at a
/// time.
const PARALLEL_INDEX: u64 = 2 * GROW_PIECE as u64;
const GROW_PIECE: usize = 1024;

/// Home slots asked for ahead of their insertion while an index is rebuilt.
const AHEAD: usize = 8;

/// Indexes references `refs` of `pairs` into the empty slots `slots`, which other threads
/// fill at the same time: an empty slot is claimed with compare-and-swap, a lost race
/// moves on (the references are distinct, so no two threads insert the same one). Each
/// home slot is asked for [`AHEAD`] references before it is claimed. A slot passed on the
/// way whose tag matches has its pair compared: an equal pair under another reference
/// would break the table's one reference per pair (and so the store's exactness), and is
/// returned as `(new reference, old reference)` instead of being indexed.
fn index_atomic(
    slots: &[AtomicU32],
    pairs: &Pairs,
    refs: Range<u64>,
    tag_mask: u32,
) -> Option<(u32, u32)> {
    let cap = slots.len();
    let mut ring = [0u64; AHEAD];
    let ask = |ring: &mut [u64; AHEAD], r: u64| {
        let h = pair_hash(pairs.get(r as u32));
        ring[r as usize % AHEAD] = h;
        prefetch(&slots[home(h, cap)] as *const AtomicU32 as *const u8);
    };
    for r in refs.start..(refs.start + AHEAD as u64).min(refs.end) {
        ask(&mut ring, r);
    }
    for r in refs.clone() {
        let h = ring[r as usize % AHEAD];
        if r + (AHEAD as u64) < refs.end {
            ask(&mut ring, r + AHEAD as u64);
        }
        let (tag, pair) = (h as u32 & tag_mask, pairs.get(r as u32));
        let entry = tag | (r as u32 + 1);
        let mut i = home(h, cap);
        loop {
            // Relaxed: the threads only claim slots; the step's end publishes the index.
            // The pairs were all written before the step began.
            let s = slots[i].load(Ordering::Relaxed);
            if s == 0 {
                match slots[i].compare_exchange(0, entry, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => break,
                    Err(s) => {
                        if let Some(old) = same(s, tag, tag_mask, pairs, pair) {
                            return Some((r as u32, old));
                        }
                    }
                }
            } else if let Some(old) = same(s, tag, tag_mask, pairs, pair) {
                return Some((r as u32, old));
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
    }
    None
}

/// The reference in slot value `s` if its tag is `tag` and its pair is `pair`.
#[inline(always)]
fn same(s: u32, tag: u32, tag_mask: u32, pairs: &Pairs, pair: u64) -> Option<u32> {
    let r = (s & !tag_mask).wrapping_sub(1);
    (s & tag_mask == tag && pairs.get(r) == pair).then_some(r)
}

/// The inner nodes a parallel chunk adds, pair to reference, until they are appended to
/// the node table unindexed ([`NodeTable::append`]): two new states of a chunk may share
/// a new node, which must get one reference. Open addressing at the hash's low bits, at
/// most half full (doubling when it would be more); `(pair, ref + 1)`, 0 empty. It holds
/// one chunk's new nodes, so it stays in cache where the node table's index would miss.
#[derive(Default)]
pub struct Fresh {
    slots: Vec<(u64, u32)>,
    len: usize,
}

impl Fresh {
    /// Empties the table, with room for `most` nodes before it grows.
    pub fn clear(&mut self, most: usize) {
        let cap = (2 * most).next_power_of_two().max(16);
        self.slots.clear();
        self.slots.resize(cap, (0, 0));
        self.len = 0;
    }

    pub fn bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<(u64, u32)>()) as u64
    }

    /// Doubles the table, placing its entries again.
    #[cold]
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![(0, 0); cap]);
        for (p, r1) in old.into_iter().filter(|&(_, r1)| r1 != 0) {
            let mut i = pair_hash(p) as usize & (cap - 1);
            while self.slots[i].1 != 0 {
                i = (i + 1) & (cap - 1);
            }
            self.slots[i] = (p, r1);
        }
    }

    /// The reference of `pair` (whose [`pair_hash`] is `h`), made by `make` if the table
    /// lacks it.
    #[inline]
    pub fn get_or(
        &mut self,
        pair: u64,
        h: u64,
        make: impl FnOnce() -> Result<u32, StoreError>,
    ) -> Result<u32, StoreError> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let (p, r1) = self.slots[i];
            if r1 == 0 {
                let r = make()?;
                self.slots[i] = (pair, r + 1);
                self.len += 1;
                return Ok(r);
            }
            if p == pair {
                return Ok(r1 - 1);
            }
            i = (i + 1) & mask;
        }
    }
}

/// A table's budget account, when the run has a limit.
pub struct Charge {
    pub account: Account,
    pub budget: Arc<Budget>,
}

pub struct NodeTable {
    /// What the table is called in errors and accounts (`tree.roots`, `tree.nodes`).
    name: &'static str,
    /// Pair `r` is pair `r & (CHUNK - 1)` of chunk `r >> CHUNK_BITS`; chunks are full except
    /// the last.
    pairs: Pairs,
    len: u64,
    index: Index,
    /// Slot bits above the `ref + 1` field: where the hash tag goes.
    tag_mask: u32,
    /// Grow the index before `len` reaches this (7/8 of its capacity).
    limit: u64,
    charge: Option<Charge>,
    /// Checkpointed runs: every pair in reference order, so that a resume can rebuild the
    /// table (a checkpoint never copies it).
    pub log: Option<SegVec>,
    /// Index slots compared against a stored pair and found different (tag collisions).
    pub false_compares: u64,
    /// Threads an index rebuild may use ([`NodeTable::set_threads`]).
    threads: usize,
    /// Recent lookups, if the table keeps them ([`NodeTable::remember`]).
    pub memo: Option<Memo>,
    /// Recent steps, if the store keeps them ([`NodeTable::remember_steps`]).
    pub steps: Option<Steps>,
    /// This table's identity, for the threads' memos ([`Memo::find`]).
    id: u64,
}

impl NodeTable {
    pub fn new(name: &'static str, charge: Option<Charge>, log: Option<SegVec>) -> Self {
        NodeTable {
            name,
            pairs: Pairs::default(),
            len: 0,
            index: Index::default(),
            tag_mask: 0,
            limit: 0,
            charge,
            log,
            false_compares: 0,
            threads: 1,
            memo: None,
            steps: None,
            id: next_table(),
        }
    }

    /// Gives the table a [`Memo`] of its recent lookups (the inner nodes': roots recur
    /// less).
    pub fn remember(&mut self) {
        self.memo = Some(Memo::of(self.id));
    }

    /// Gives the table a [`Steps`] memo for trees of `nodes` inner nodes below the root
    /// and `transitions` transitions (none if their keys would not fit; the store then
    /// folds every subtree).
    pub fn remember_steps(&mut self, nodes: usize, transitions: usize) {
        self.steps = Steps::new(nodes, transitions);
        self.update_account();
    }

    fn memo_bytes(&self) -> u64 {
        self.memo.as_ref().map_or(0, Memo::bytes) + self.steps.as_ref().map_or(0, Steps::bytes)
    }

    /// Threads an index rebuild may use (the run's `--threads`; the rebuilds happen between
    /// parallel steps, when the other threads are idle).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// The pair of reference `r` (`r < len`).
    #[inline(always)]
    pub fn pair(&self, r: u32) -> u64 {
        self.pairs.get(r)
    }

    /// The pair of reference `r`, or an error naming the table when `r` is not stored.
    pub fn checked_pair(&self, r: u64) -> Result<u64, StoreError> {
        if r >= self.len {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!("{}: reference {r} of {} entries", self.name, self.len),
            });
        }
        Ok(self.pair(r as u32))
    }

    pub fn index_bytes(&self) -> u64 {
        self.index.cap as u64 * 4
    }

    pub fn pair_bytes(&self) -> u64 {
        self.pairs.bytes()
    }

    /// RAM held: pair chunks, index, memo, and the log's buffers.
    pub fn ram_bytes(&self) -> u64 {
        self.pair_bytes()
            + self.index_bytes()
            + self.memo_bytes()
            + self.log.as_ref().map_or(0, |l| l.ram_bytes())
    }

    /// What the table cannot work without: its index and pairs, at least one chunk and the
    /// smallest index (so that a budget that passes this check holds the first states).
    pub fn min_ram_bytes(&self) -> u64 {
        self.pair_bytes().max(Pairs::chunk_bytes(64) as u64)
            + self.index_bytes().max(MIN_SLOTS as u64 * 4)
            + self.memo_bytes()
            + self.log.as_ref().map_or(0, |l| l.min_ram_bytes())
    }

    /// Bytes of pairs and index the table will hold once it has taken `extra` more entries
    /// (with each field one bit wider: the new entries may widen them).
    pub fn bytes_after(&self, extra: u64) -> u64 {
        let len = self.len + extra;
        let chunks = len.div_ceil(CHUNK as u64);
        let mut cap = self.index.cap.max(MIN_SLOTS) as u64;
        while len * 8 > cap * 7 {
            cap *= 2;
        }
        let width = (self.pairs.left + 1).min(32) + (self.pairs.right + 1).min(32);
        chunks * Pairs::chunk_bytes(width) as u64 + cap * 4
    }

    /// Whether the budget lets the table grow to `need` bytes of pairs and index next to
    /// what every other structure holds now (what a growth would claim).
    pub fn can_hold(&self, need: u64) -> bool {
        need <= self.pair_bytes() + self.index_bytes() || self.claim(need, "").is_ok()
    }

    /// Frees the pairs and the index and zeroes the account (the log is closed, its file
    /// left to whoever retires it).
    pub fn release(&mut self) {
        self.pairs = Pairs::default();
        self.index = Index::default();
        self.memo = None;
        self.steps = None;
        // Whatever a thread remembers of the old table must not be taken for this one.
        self.id = next_table();
        self.len = 0;
        self.limit = 0;
        if let Some(l) = self.log.take() {
            l.account().set(0, 0, 0);
        }
        if let Some(c) = &self.charge {
            c.account.set(0, 0, 0);
        }
    }

    /// Checks that the table can hold `need` bytes of RAM next to what every other
    /// structure of the run holds now (`BudgetTooSmall`, exit 6, otherwise).
    fn claim(&self, need: u64, what: &str) -> Result<(), StoreError> {
        let Some(c) = &self.charge else {
            return Ok(());
        };
        let MemoryLimit::Bytes(limit) = c.budget.limit() else {
            return Ok(());
        };
        let headroom = c.budget.headroom(&c.account).unwrap_or(u64::MAX);
        let others = limit
            .saturating_sub(UNTRACKED_RESERVE)
            .saturating_sub(headroom);
        c.budget.claim(
            &format!("the tree store's {}", self.name),
            need,
            others,
            what,
        )?;
        Ok(())
    }

    pub fn update_account(&self) {
        if let Some(c) = &self.charge {
            c.account.set(self.ram_bytes(), 0, 0);
        }
        if let Some(l) = &self.log {
            l.update_account();
        }
    }

    /// Rebuilds the index with room for more entries: frees the old one first, then
    /// re-inserts every pair in reference order.
    fn grow(&mut self) -> Result<(), StoreError> {
        self.grow_for(self.len + 1)
    }

    /// [`NodeTable::grow`] with room for `need` entries in all.
    fn grow_for(&mut self, need: u64) -> Result<(), StoreError> {
        if need > MAX_ENTRIES {
            return Err(StoreError::CapacityExceeded {
                store: "tree",
                message: format!(
                    "{} would hold {need} entries, more than {MAX_ENTRIES}",
                    self.name
                ),
            });
        }
        let mut cap = self.index.cap.max(MIN_SLOTS);
        while need * 8 > cap as u64 * 7 {
            cap *= 2;
        }
        // `ref + 1 <= len < cap` must fit in the slot: at most 2^32 - 1 slots.
        let cap = cap.min(u32::MAX as usize);
        let bytes = cap as u64 * 4;
        self.claim(
            self.pair_bytes() + bytes,
            &format!(
                "an index of {cap} slots of 4 bytes for more than {} entries",
                self.len
            ),
        )?;
        self.index = Index::default();
        let index = Index::zeroed(cap).map_err(|e| StoreError::CapacityExceeded {
            store: "tree",
            message: format!("cannot allocate {} MiB for {}: {e}", bytes >> 20, self.name),
        })?;
        let id_bits = usize::BITS - cap.leading_zeros();
        self.tag_mask = if id_bits >= 32 {
            0
        } else {
            !((1u32 << id_bits) - 1)
        };
        self.index = index;
        self.limit = cap as u64 * 7 / 8;
        self.update_account();
        self.index_refs(0..self.len, self.threads)
    }

    /// Enters references `refs` of the pair array, none of them indexed yet, in the index
    /// (which has room for them), on up to `threads` threads when they are many. An entry
    /// whose pair the index already holds is an error: the table gives one reference per
    /// pair, and a second would let two trees of one state differ.
    fn index_refs(&mut self, refs: Range<u64>, threads: usize) -> Result<(), StoreError> {
        let tag_mask = self.tag_mask;
        let twice = if threads > 1 && refs.end - refs.start >= PARALLEL_INDEX {
            // Pieces claimed in turn: where an entry lands in its probe run depends on the
            // scheduling, but not what a lookup finds (references are the pair array's).
            let (slots, pairs, end) = (self.index.atomic(), &self.pairs, refs.end);
            let mut pieces: Vec<_> = refs
                .step_by(GROW_PIECE)
                .map(|start| (start..(start + GROW_PIECE as u64).min(end), None))
                .collect();
            par::claim(threads, &mut pieces, |(refs, twice)| {
                *twice = index_atomic(slots, pairs, refs.clone(), tag_mask)
            });
            pieces.into_iter().find_map(|(_, twice)| twice)
        } else {
            // On this thread alone, still through the atomics: a locked compare-and-swap
            // costs less than the misses the ring of home slots asked ahead overlaps.
            index_atomic(self.index.atomic(), &self.pairs, refs, tag_mask)
        };
        match twice {
            None => Ok(()),
            Some((r, old)) => Err(StoreError::Invalid {
                store: "tree",
                message: format!("{}: entry {r} repeats the pair of entry {old}", self.name),
            }),
        }
    }

    /// Appends `pair` to the pair array without indexing it, for a caller that knows the
    /// table lacks it ([`NodeTable::index_appended`] indexes such pairs together).
    pub fn append(&mut self, pair: u64) -> Result<u32, StoreError> {
        let r = self.len as u32;
        self.push_pair(pair)?;
        Ok(r)
    }

    /// Makes room in the index for `extra` more entries, so that appended pairs can be
    /// indexed without a rebuild.
    pub fn reserve(&mut self, extra: u64) -> Result<(), StoreError> {
        if self.len + extra > self.limit {
            self.grow_for(self.len + extra)?;
        }
        Ok(())
    }

    /// Indexes the pairs appended since reference `from` ([`NodeTable::append`]; room was
    /// [`NodeTable::reserve`]d), on up to `threads` threads.
    pub fn index_appended(&mut self, from: u64, threads: usize) -> Result<(), StoreError> {
        if self.len > self.limit {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!(
                    "{}: {} entries appended past the room reserved ({})",
                    self.name,
                    self.len - from,
                    self.limit
                ),
            });
        }
        self.index_refs(from..self.len, threads)
    }

    /// A read-only view for worker threads (parallel BFS) while the table does not change.
    pub fn view(&self) -> Find<'_> {
        Find {
            pairs: &self.pairs,
            slots: self.index.slots(),
            tag_mask: self.tag_mask,
            id: self.id,
        }
    }

    /// The reference of `pair`, inserting it if new: `(reference, new)`.
    #[inline]
    pub fn intern(&mut self, pair: u64) -> Result<(u32, bool), StoreError> {
        self.intern_hashed(pair, pair_hash(pair))
    }

    /// [`NodeTable::intern`] of a pair whose [`pair_hash`] is `h` (batches hash each node
    /// once, to prefetch its home slot, and intern it later).
    #[inline]
    pub fn intern_hashed(&mut self, pair: u64, h: u64) -> Result<(u32, bool), StoreError> {
        debug_assert_eq!(h, pair_hash(pair));
        if self.len >= self.limit {
            self.grow()?;
        }
        if let Some(r) = self.memo.as_mut().and_then(|m| m.recall(pair, h)) {
            return Ok((r, false));
        }
        let (found, false_compares) = self.view().probe_hashed(pair, h);
        self.false_compares += false_compares;
        let (r, new) = match found {
            Ok(r) => (r, false),
            Err(i) => {
                let r = self.len as u32;
                self.push_pair(pair)?;
                self.index.slots_mut()[i] = (h as u32 & self.tag_mask) | (r + 1);
                (r, true)
            }
        };
        if let Some(m) = &mut self.memo {
            m.keep(pair, h, r);
        }
        Ok((r, new))
    }

    /// Appends `pair` to the pair array (and the log) without indexing it.
    fn push_pair(&mut self, pair: u64) -> Result<(), StoreError> {
        if !self.pairs.fits(pair) {
            let (left, right) = self.pairs.widths_for(pair);
            let chunks = self.pairs.chunks.len();
            self.claim(
                (chunks * Pairs::chunk_bytes(left + right)) as u64
                    + Pairs::chunk_bytes(self.pairs.width()) as u64
                    + self.index_bytes(),
                &format!("its pairs repacked into {left} + {right} bits"),
            )?;
            self.pairs
                .repack(self.len, left, right)
                .map_err(|e| self.alloc_error(e))?;
            self.update_account();
        }
        if self.len as usize & (CHUNK - 1) == 0 {
            let width = self.pairs.width();
            self.claim(
                self.pair_bytes() + Pairs::chunk_bytes(width) as u64 + self.index_bytes(),
                &format!("one more block of {CHUNK} pairs of {width} bits"),
            )?;
            let map =
                MmapMut::map_anon(Pairs::chunk_bytes(width)).map_err(|e| self.alloc_error(e))?;
            self.pairs.chunks.push(map);
            if let Some(c) = &self.charge {
                c.account.set(self.ram_bytes(), 0, 0);
            }
        }
        self.pairs.set(self.len, pair);
        self.len += 1;
        if let Some(log) = &mut self.log {
            log.push(&pair.to_le_bytes())?;
        }
        Ok(())
    }

    fn alloc_error(&self, e: std::io::Error) -> StoreError {
        StoreError::CapacityExceeded {
            store: "tree",
            message: format!("cannot allocate a block of {}: {e}", self.name),
        }
    }

    /// Reloads the pairs of a checkpoint's log (the table must be empty and keep `log`);
    /// the index is built once at the end.
    pub fn reload(&mut self, count: u64) -> Result<(), StoreError> {
        let Some(log) = self.log.take() else {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!("{}: no log to reload", self.name),
            });
        };
        if log.len() != count {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!(
                    "{}: the checkpoint names {count} entries, its log holds {}",
                    self.name,
                    log.len()
                ),
            });
        }
        let mut failed = Ok(());
        log.scan(|r, rec| {
            if r < count && failed.is_ok() {
                let p = u64::from_le_bytes(rec.try_into().expect("8-byte records"));
                failed = self.push_pair(p);
            }
        })?;
        failed?;
        self.log = Some(log);
        self.grow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps memo's 8-byte entries keep part of the key only: it must still never answer
    /// a key with another key's reference, across its widenings (references growing from
    /// 2^10 to 2^30) and with keys as wide as an entry tells apart; and it answers most
    /// recent keys while they fit.
    #[test]
    fn steps_answer_only_what_they_were_taught() {
        for (nodes, transitions) in [(3usize, 2usize), (60, 330), (1 << 10, 1 << 7)] {
            let mut steps = Steps::new(nodes, transitions).unwrap();
            let mut taught = std::collections::HashMap::new();
            let mut x = 0x2545_f491_4f6c_dd1du64;
            let mut next = |m: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % m
            };
            // Sixteen (t, k) pairs from the whole range, so that keys repeat as a run's do.
            let pairs: Vec<(u32, usize)> = (0..16)
                .map(|_| (next(transitions as u64) as u32, next(nodes as u64) as usize))
                .collect();
            let (mut hits, mut asked) = (0u64, 0u64);
            for round in 0..200_000u64 {
                let top = 1u64 << (10 + round / 10_000);
                let (t, k) = pairs[next(16) as usize];
                let from = (next(64) + top.saturating_sub(64)) as u32;
                if next(2) == 0 {
                    let to = next(u64::from(u32::MAX - 1)) as u32;
                    steps.keep(t, k, from, to);
                    taught.insert((t, k, from), to);
                } else {
                    asked += 1;
                    if let Some(to) = steps.recall(t, k, from) {
                        hits += 1;
                        assert_eq!(taught.get(&(t, k, from)), Some(&to), "{t} {k} {from}");
                    }
                }
            }
            assert!(hits > asked / 4, "{nodes} {transitions}: {hits} of {asked}");
        }
        // Every key of a dense range taught, then asked: keys whose slots coincide must
        // still be told apart (393,216 keys, three quarters of the key space once the memo
        // has widened to 16-bit references, for 32,768 slots).
        let mut steps = Steps::new(3, 2).unwrap();
        let to = |t: u32, k: usize, from: u32| from * 6 + t * 3 + k as u32;
        for from in 0..1 << 16 {
            for t in 0..2 {
                for k in 0..3 {
                    steps.keep(t, k, from, to(t, k, from));
                }
            }
        }
        let mut hits = 0;
        for from in 0..1 << 16 {
            for t in 0..2 {
                for k in 0..3 {
                    if let Some(r) = steps.recall(t, k, from) {
                        assert_eq!(r, to(t, k, from));
                        hits += 1;
                    }
                }
            }
        }
        assert!(hits > 10_000, "{hits}");
        // A key wider than an entry can tell apart is refused, not folded onto another.
        assert!(Steps::new(1 << 16, 1 << 16).is_none());
    }

    /// A table with a memo gives every pair the reference and the news a table without one
    /// gives, though most lookups repeat pairs that collide in the memo; a thread's memo
    /// answers as the table's view does, and forgets a table for another, so that it never
    /// answers with the first table's references.
    #[test]
    fn memos_answer_as_the_index_does() {
        let (mut plain, mut kept) = (
            NodeTable::new("a", None, None),
            NodeTable::new("b", None, None),
        );
        kept.remember();
        // 4,000 distinct pairs, each looked up 25 times, every 4,000 lookups.
        let pair_of = |i: u64| {
            let x = (i * 2_654_435_761) % 4_000;
            pack(x as u32 % 97, (x / 97) as u32)
        };
        for i in 0..100_000 {
            assert_eq!(
                plain.intern(pair_of(i)).unwrap(),
                kept.intern(pair_of(i)).unwrap(),
                "{i}"
            );
        }
        assert!(kept.memo.as_ref().unwrap().hits > 10_000);
        let mut other = NodeTable::new("c", None, None);
        for i in 0..1_000 {
            other.intern(pack(i, i)).unwrap();
        }
        // The pairs of `kept` and `(i, i)` pairs, which `other` holds for i < 1,000 under
        // other references: asked of `kept`, then `other`, then `kept` again.
        let mut memo = Memo::default();
        for table in [&kept, &other, &kept] {
            let view = table.view();
            for i in 0..40_000u64 {
                for p in [pair_of(i), pack(i as u32 % 2_000, i as u32 % 2_000)] {
                    let h = pair_hash(p);
                    assert_eq!(memo.find(&view, p, h), view.find_hashed(p, h), "{i}");
                }
            }
            assert!(memo.hits > 1_000);
        }
    }

    /// An index rebuilt on several threads (compare-and-swap claims) finds every pair under
    /// its reference, as one rebuilt on one thread does, through interns and the threads'
    /// read-only view; a pair never stored is not found.
    #[test]
    fn indexes_rebuilt_on_threads_find_every_pair() {
        let pair_of = |i: u64| pack(i as u32 ^ 0x5555, (i.wrapping_mul(0x9E37_79B9) >> 7) as u32);
        let n = 3 * (1 << 16) + 1_234;
        for threads in [1, 2, 4] {
            let mut t = NodeTable::new("test", None, None);
            t.set_threads(threads);
            for i in 0..n {
                assert_eq!(
                    t.intern(pair_of(i)).unwrap(),
                    (i as u32, true),
                    "{threads}: {i}"
                );
            }
            let view = t.view();
            for i in (0..n).step_by(7) {
                let p = pair_of(i);
                assert_eq!(
                    view.find_hashed(p, pair_hash(p)),
                    Some(i as u32),
                    "{threads}: {i}"
                );
            }
            assert_eq!(view.find_hashed(pack(1, 2), pair_hash(pack(1, 2))), None);
            for i in (0..n).step_by(5) {
                assert_eq!(
                    t.intern(pair_of(i)).unwrap(),
                    (i as u32, false),
                    "{threads}: {i}"
                );
            }
        }
    }

    /// Pairs whose children widen step by step (a repack at every new width, also once
    /// the first chunk is full), up to 32 bits on each side.
    #[test]
    fn packed_pairs_read_back_through_repacks_and_chunks() {
        let mut t = NodeTable::new("test", None, None);
        let n = CHUNK as u64 + 5_000;
        let pair_of = |i: u64| -> u64 {
            // The left child is as wide as i (19 bits at the first chunk's end), then 32
            // bits; the right one is 3 bits wide, then 32 bits after the first chunk.
            let left = if i < CHUNK as u64 + 2_500 {
                (i.wrapping_mul(0x9E37_79B9) as u32)
                    .checked_shr(32 - bits(i as u32))
                    .unwrap_or(0)
            } else {
                u32::MAX - i as u32
            };
            let right = if i < CHUNK as u64 {
                (i % 7) as u32
            } else {
                u32::MAX - i as u32
            };
            pack(left, right)
        };
        let mut widths = std::collections::BTreeSet::new();
        for i in 0..n {
            let (r, new) = t.intern(pair_of(i)).unwrap();
            widths.insert(t.pairs.width());
            if new {
                assert_eq!(t.pair(r), pair_of(i), "pair {i}");
            }
        }
        assert!(widths.len() > 20, "{widths:?}");
        assert_eq!(t.pairs.width(), 64);
        let mut seen = std::collections::HashSet::new();
        for i in 0..n {
            let p = pair_of(i);
            let (r, new) = t.intern(p).unwrap();
            assert!(!new);
            assert_eq!(t.pair(r), p);
            seen.insert(p);
        }
        assert_eq!(t.len(), seen.len() as u64);
    }

    /// Pairs appended unindexed and then indexed together (a parallel chunk's new nodes, on
    /// one thread and on several) are found as interned ones are, through a rebuild that
    /// the reserve made; a pair appended although the table held it, or twice, is refused
    /// when indexed, on one thread and on several.
    #[test]
    fn appended_pairs_are_indexed_and_a_repeated_pair_is_refused() {
        let pair_of = |i: u64| pack(i as u32 ^ 0x3C3C, (i.wrapping_mul(0x9E37_79B9) >> 5) as u32);
        for threads in [1, 2, 4] {
            let mut t = NodeTable::new("test", None, None);
            for i in 0..1_000 {
                t.intern(pair_of(i)).unwrap();
            }
            // Past the index's room: the reserve rebuilds it before the appends.
            let n = 50_000;
            t.reserve(n).unwrap();
            for i in 1_000..1_000 + n {
                assert_eq!(t.append(pair_of(i)).unwrap(), i as u32);
            }
            t.index_appended(1_000, threads).unwrap();
            for i in (0..1_000 + n).step_by(3) {
                assert_eq!(
                    t.intern(pair_of(i)).unwrap(),
                    (i as u32, false),
                    "{threads}: {i}"
                );
            }
            let len = t.len();
            // A pair the table held before, appended among new ones; a new pair appended
            // twice.
            for (again, at) in [
                (pair_of(17), [12_345, u64::MAX]),
                (pack(7, 7), [9_000, 19_999]),
            ] {
                let mut t = NodeTable::new("test", None, None);
                for i in 0..1_000 {
                    t.intern(pair_of(i)).unwrap();
                }
                t.reserve(19_000).unwrap();
                for i in 1_000..20_000 {
                    t.append(if at.contains(&i) { again } else { pair_of(i) })
                        .unwrap();
                }
                let err = t.index_appended(1_000, threads).unwrap_err().to_string();
                assert!(err.contains("repeats the pair"), "{threads}: {err}");
            }
            assert_eq!(len, 1_000 + n);
        }
    }

    #[test]
    fn narrow_pairs_take_their_bits_only() {
        let mut t = NodeTable::new("test", None, None);
        for i in 0..(2 * CHUNK as u32) {
            t.intern(pack(i % 1000, i / 1000)).unwrap();
        }
        // 10 + 10 bits a pair: two chunks of 2^18 pairs take 2 × 640 KiB (+ padding).
        assert_eq!(t.pairs.width(), 20);
        assert_eq!(t.pair_bytes(), 2 * (CHUNK as u64 * 20 / 8 + PAD as u64));
        for i in (0..(2 * CHUNK as u32)).step_by(997) {
            assert_eq!(t.pair(i), pack(i % 1000, i / 1000));
        }
    }
}

/// A [`NodeTable`] read by worker threads: lookups that never insert (and count nothing).
#[derive(Clone, Copy)]
pub struct Find<'a> {
    pairs: &'a Pairs,
    slots: &'a [u32],
    tag_mask: u32,
    /// The table's identity ([`Memo::find`]).
    id: u64,
}

impl Find<'_> {
    /// The table's identity: another table, or this one after a release, has another.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The pair of reference `r` (a reference the table gave out).
    #[inline(always)]
    pub fn pair(&self, r: u32) -> u64 {
        self.pairs.get(r)
    }

    /// Prefetches the home slot of a pair whose [`pair_hash`] is `h`.
    #[inline(always)]
    pub fn touch_hashed(&self, h: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[home(h, self.slots.len())] as *const u32 as *const u8);
        }
    }

    /// The reference of a pair whose [`pair_hash`] is `h`, if the table holds it.
    #[inline]
    pub fn find_hashed(&self, pair: u64, h: u64) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.probe_hashed(pair, h).0.ok()
    }

    /// Probes for `pair`, whose [`pair_hash`] is `h` (the index must have slots):
    /// `Ok(reference)`, or `Err(slot)`, the empty slot where it would go; and how many
    /// stored pairs with the same tag it compared and found different.
    #[inline(always)]
    fn probe_hashed(&self, pair: u64, h: u64) -> (Result<u32, usize>, u64) {
        debug_assert_eq!(h, pair_hash(pair));
        let cap = self.slots.len();
        let tag = h as u32 & self.tag_mask;
        let mut false_compares = 0;
        let mut i = home(h, cap);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return (Err(i), false_compares);
            }
            if s & self.tag_mask == tag {
                let r = (s & !self.tag_mask) - 1;
                if self.pairs.get(r) == pair {
                    return (Ok(r), false_compares);
                }
                false_compares += 1;
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
    }
}
