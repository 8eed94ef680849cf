//! The compact hash index of the Δ store: hash → record id, in RAM.
//!
//! A Robin Hood linear-probing table of `m` bit-packed slots (`m` need not be a power of
//! two). Every entry keeps a fixed [`HASH_BITS`]-bit prefix `x` of its 64-bit hash, split
//! into a *quotient* implied by the position and a stored *offset*:
//!
//! ```text
//! home(x) = ⌊x·m / 2^HASH_BITS⌋          lo(home) = ⌈home · 2^HASH_BITS / m⌉
//! slot    = | tag : tag_bits | offset x − lo(home) : ⌈log2(2^HASH_BITS / m)⌉ | displacement : DISP_BITS | id + 1 : bits(m) |
//! ```
//!
//! The tag (0 bits unless asked for) is the stratum of the entry when the store replaces
//! entries (stratified caching, [`Index::remove_where`]).
//!
//! (0 = empty). The home slot is recovered as position − displacement, so `x = lo(home) +
//! offset` is known exactly and the table can grow to **any** size without the states: growth
//! re-places every entry from its `x`. It grows by a quarter when 9/10 full, so the load stays
//! between 0.72 and 0.9 and a slot costs `HASH_BITS + DISP_BITS + 1` bits or so at any size.
//! As the table grows the offset keeps fewer bits (8 at 4 million slots): false candidates
//! become more frequent, which costs comparisons, never a wrong answer (the store compares
//! states).
//!
//! Robin Hood order (a cluster is sorted by home slot) lets an unsuccessful lookup stop at the
//! first slot whose displacement is smaller than the probe distance. A displacement that would
//! not fit `DISP_BITS` makes the table grow early instead of failing.

use super::bits::{bits_for, get_bits, set_bits};

/// Bits of the hash every entry keeps (quotient + offset) in a new index. When the index
/// would need more than `2^(hash_bits − 4)` slots, the store rebuilds it with 8 more bits
/// (reconstituting every state once).
pub const HASH_BITS: u32 = 30;
/// The most hash bits an index can keep.
pub const MAX_HASH_BITS: u32 = 54;
/// Bits of the displacement field.
pub const DISP_BITS: u32 = 6;
const DISP_MAX: u64 = (1 << DISP_BITS) - 1;
/// Load limit: 9/10.
const LOAD_NUM: u64 = 9;
const LOAD_DEN: u64 = 10;

/// Why the index could not grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrowError {
    /// More than [`Index::max_slots`] would be needed: rebuild with more hash bits.
    TooLarge,
    /// Too many entries share a hash prefix for the displacement field.
    Clustered,
}

/// A position in a probe sequence.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pos: u64,
    dist: u64,
    off: u64,
}

/// One step of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A slot with the same hash prefix: the caller must compare the states.
    Candidate(u64),
    /// The state is not in the table; `insert_at` with this probe places it.
    Vacant,
}

/// Why an insertion did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Placed,
    /// A displacement would overflow its field: grow and probe again.
    NeedsGrowth,
}

pub struct Index {
    m: u64,
    hash_bits: u32,
    id_bits: u32,
    off_bits: u32,
    tag_bits: u32,
    /// The least id width asked for ([`Index::ensure_id`]); kept through growths.
    min_id_bits: u32,
    slot_bits: u32,
    words: Vec<u64>,
    len: u64,
    growths: u64,
    max_disp: u64,
}

impl Index {
    /// An empty index of `m` slots keeping `hash_bits` bits of each hash.
    pub fn new(m: u64, hash_bits: u32) -> Self {
        Self::with_tags(m, hash_bits, 0)
    }

    /// An empty index whose entries also keep a `tag_bits`-bit tag.
    pub fn with_tags(m: u64, hash_bits: u32, tag_bits: u32) -> Self {
        Self::build(m, hash_bits, tag_bits, 0)
    }

    /// An empty index with id fields of at least `min_id_bits` bits (ids beyond the slot
    /// count: a store that forgets entries numbers more states than its index holds).
    fn build(m: u64, hash_bits: u32, tag_bits: u32, min_id_bits: u32) -> Self {
        assert!((8..=MAX_HASH_BITS).contains(&hash_bits));
        let m = m.max(16);
        let id_bits = bits_for(m).max(min_id_bits);
        let off_bits = bits_for((1u64 << hash_bits).div_ceil(m) - 1);
        let slot_bits = id_bits + DISP_BITS + off_bits + tag_bits;
        assert!(slot_bits <= 64, "{hash_bits} hash bits do not fit a slot");
        let words = (slot_bits as u64 * m).div_ceil(64) as usize + 1;
        Index {
            m,
            hash_bits,
            id_bits,
            off_bits,
            tag_bits,
            min_id_bits,
            slot_bits,
            words: vec![0; words],
            len: 0,
            growths: 0,
            max_disp: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn slots(&self) -> u64 {
        self.m
    }

    pub fn hash_bits(&self) -> u32 {
        self.hash_bits
    }

    /// The largest table for this many hash bits (at least 4 offset bits are kept).
    pub fn max_slots(&self) -> u64 {
        1 << (self.hash_bits - 4)
    }

    pub fn slot_bits(&self) -> u32 {
        self.slot_bits
    }

    pub fn growths(&self) -> u64 {
        self.growths
    }

    /// The largest displacement ever stored.
    pub fn max_displacement(&self) -> u64 {
        self.max_disp
    }

    pub fn ram_bytes(&self) -> u64 {
        self.words.capacity() as u64 * 8
    }

    #[inline(always)]
    fn prefix(&self, h: u64) -> u64 {
        h >> (64 - self.hash_bits)
    }

    #[inline(always)]
    fn home_of(&self, x: u64) -> u64 {
        if self.hash_bits <= 32 {
            (x * self.m) >> self.hash_bits
        } else {
            ((x as u128 * self.m as u128) >> self.hash_bits) as u64
        }
    }

    #[inline(always)]
    fn lo(&self, home: u64) -> u64 {
        if self.hash_bits <= 32 {
            (home << self.hash_bits).div_ceil(self.m)
        } else {
            ((home as u128) << self.hash_bits).div_ceil(self.m as u128) as u64
        }
    }

    #[inline(always)]
    fn raw(&self, i: u64) -> u64 {
        get_bits(&self.words, i * self.slot_bits as u64, self.slot_bits)
    }

    #[inline(always)]
    fn set_raw(&mut self, i: u64, v: u64) {
        set_bits(
            &mut self.words,
            i * self.slot_bits as u64,
            self.slot_bits,
            v,
        );
    }

    /// (id + 1, displacement, offset) of slot `i`; id + 1 = 0 means empty.
    #[inline(always)]
    fn slot(&self, i: u64) -> (u64, u64, u64) {
        let v = self.raw(i);
        let idb = self.id_bits;
        (
            v & ((1 << idb) - 1),
            (v >> idb) & DISP_MAX,
            (v >> (idb + DISP_BITS)) & ((1 << self.off_bits) - 1),
        )
    }

    /// The tag of slot `i`.
    #[inline(always)]
    fn tag(&self, i: u64) -> u64 {
        if self.tag_bits == 0 {
            return 0;
        }
        self.raw(i) >> (self.id_bits + DISP_BITS + self.off_bits)
    }

    #[inline(always)]
    fn put(&mut self, i: u64, idp1: u64, disp: u64, off: u64, tag: u64) {
        let idb = self.id_bits;
        debug_assert!(off >> self.off_bits == 0);
        debug_assert!(tag >> self.tag_bits == 0);
        let v = idp1
            | (disp << idb)
            | (off << (idb + DISP_BITS))
            | (tag << (idb + DISP_BITS + self.off_bits));
        self.set_raw(i, v);
    }

    #[inline(always)]
    fn next_pos(&self, i: u64) -> u64 {
        if i + 1 == self.m {
            0
        } else {
            i + 1
        }
    }

    /// Whether `extra` more entries fit under the load limit.
    pub fn has_room(&self, extra: u64) -> bool {
        (self.len + extra) * LOAD_DEN <= self.m * LOAD_NUM
    }

    /// Touches the home slot of `h` (to overlap cache misses within a batch).
    #[inline(always)]
    pub fn touch(&self, h: u64) {
        let home = self.home_of(self.prefix(h));
        let w = &self.words[((home * self.slot_bits as u64) / 64) as usize];
        crate::store::slots::prefetch(w as *const u64 as *const u8);
    }

    /// Starts a probe for hash `h`.
    #[inline(always)]
    pub fn probe(&self, h: u64) -> Probe {
        let x = self.prefix(h);
        let home = self.home_of(x);
        Probe {
            pos: home,
            dist: 0,
            off: x - self.lo(home),
        }
    }

    /// Advances `p` to the next candidate, or reports that the state is absent.
    #[inline(always)]
    pub fn next(&self, p: &mut Probe) -> Step {
        loop {
            let (idp1, disp, off) = self.slot(p.pos);
            if idp1 == 0 || disp < p.dist {
                return Step::Vacant;
            }
            let hit = disp == p.dist && off == p.off;
            p.pos = self.next_pos(p.pos);
            p.dist += 1;
            if hit {
                return Step::Candidate(idp1 - 1);
            }
        }
    }

    /// Inserts `id` where the probe `p` (which returned [`Step::Vacant`]) stopped.
    pub fn insert_at(&mut self, p: &Probe, id: u64) -> Placement {
        self.insert_tagged(p, id, 0)
    }

    /// [`Index::insert_at`] with a tag (which must fit the index's tag bits).
    pub fn insert_tagged(&mut self, p: &Probe, id: u64, tag: u64) -> Placement {
        // An id that does not fit would corrupt the neighbouring fields: callers that number
        // beyond the slot count call `ensure_id` first.
        assert!(id + 1 < 1 << self.id_bits, "id {id} does not fit the index");
        if p.dist > DISP_MAX {
            return Placement::NeedsGrowth;
        }
        // The cluster tail [p.pos, end) moves one slot right.
        let mut end = p.pos;
        let mut moved = 0;
        loop {
            let (idp1, disp, _) = self.slot(end);
            if idp1 == 0 {
                break;
            }
            if disp == DISP_MAX {
                return Placement::NeedsGrowth;
            }
            moved = moved.max(disp + 1);
            end = self.next_pos(end);
            if end == p.pos {
                return Placement::NeedsGrowth;
            }
        }
        let mut i = end;
        while i != p.pos {
            let prev = if i == 0 { self.m - 1 } else { i - 1 };
            // The same entry, one slot further from home (displacement + 1, checked above).
            let v = self.raw(prev) + (1 << self.id_bits);
            self.set_raw(i, v);
            i = prev;
        }
        self.put(p.pos, id + 1, p.dist, p.off, tag);
        self.max_disp = self.max_disp.max(moved).max(p.dist);
        self.len += 1;
        Placement::Placed
    }

    /// Grows by a quarter (more, up to four times over, if a displacement overflows),
    /// re-placing every entry from its stored hash prefix; no state is needed. Fails with
    /// [`GrowError`] past [`Index::max_slots`] or when displacements still overflow (more than 63
    /// entries sharing a hash prefix — only adversarial inputs do that).
    pub fn grow(&mut self) -> Result<(), GrowError> {
        let mut m = self.m + self.m / 4;
        for _ in 0..4 {
            if m > self.max_slots() {
                return Err(GrowError::TooLarge);
            }
            if let Some(t) = self.rehash_into(m) {
                *self = t;
                return Ok(());
            }
            m *= 2;
        }
        Err(GrowError::Clustered)
    }

    /// Inserts `id` for hash `h`, known to be absent, growing when a displacement overflows
    /// (at most three times: if that does not help, the entries share a hash prefix).
    pub fn place(&mut self, h: u64, id: u64) -> Result<(), GrowError> {
        self.place_tagged(h, id, 0)
    }

    /// [`Index::place`] with a tag.
    pub fn place_tagged(&mut self, h: u64, id: u64, tag: u64) -> Result<(), GrowError> {
        for _ in 0..4 {
            let mut p = self.probe(h);
            while let Step::Candidate(_) = self.next(&mut p) {}
            match self.insert_tagged(&p, id, tag) {
                Placement::Placed => return Ok(()),
                Placement::NeedsGrowth => self.grow()?,
            }
        }
        Err(GrowError::Clustered)
    }

    /// Calls `f(id, tag)` for every entry.
    pub fn for_each(&self, mut f: impl FnMut(u64, u64)) {
        for i in 0..self.m {
            let (idp1, _, _) = self.slot(i);
            if idp1 != 0 {
                f(idp1 - 1, self.tag(i));
            }
        }
    }

    /// Removes every entry for which `remove(id, tag)` holds, in one pass over the table, and
    /// returns how many were removed. Robin Hood backward-shift deletion: the entries after a
    /// removed one in its cluster move one slot back towards home, so lookups stay correct
    /// without tombstones.
    pub fn remove_where(&mut self, mut remove: impl FnMut(u64, u64) -> bool) -> u64 {
        // Start just after an empty slot: clusters never span it, so every shift moves entries
        // the scan has not reached yet into the slot it is looking at.
        let Some(empty) = (0..self.m).find(|&i| self.slot(i).0 == 0) else {
            return 0;
        };
        let mut removed = 0;
        let mut i = self.next_pos(empty);
        let mut seen = 0;
        while seen < self.m {
            let (idp1, _, _) = self.slot(i);
            if idp1 != 0 && remove(idp1 - 1, self.tag(i)) {
                // Shift the rest of the cluster back by one.
                let mut hole = i;
                loop {
                    let next = self.next_pos(hole);
                    let (nid, ndisp, _) = self.slot(next);
                    if nid == 0 || ndisp == 0 {
                        self.set_raw(hole, 0);
                        break;
                    }
                    let v = self.raw(next) - (1 << self.id_bits);
                    self.set_raw(hole, v);
                    hole = next;
                }
                self.len -= 1;
                removed += 1;
                // Slot i now holds the next entry (or is empty): look at it again.
                continue;
            }
            i = self.next_pos(i);
            seen += 1;
        }
        removed
    }

    /// Makes the id field wide enough for `id` (with 4 bits of headroom, so that this
    /// happens rarely), keeping the slot within 64 bits by keeping fewer hash bits if need
    /// be (more false candidates, never a wrong answer). Only stores that forget entries
    /// number beyond the slot count.
    pub fn ensure_id(&mut self, id: u64) -> Result<(), GrowError> {
        if id + 1 < 1 << self.id_bits {
            return Ok(());
        }
        let want = (bits_for(id + 1) + 4).min(48);
        let mut hb = self.hash_bits;
        loop {
            let off = bits_for((1u64 << hb).div_ceil(self.m) - 1);
            if want + DISP_BITS + off + self.tag_bits <= 64 {
                break;
            }
            if hb <= 8 || self.m > 1 << (hb - 1 - 4) {
                return Err(GrowError::TooLarge);
            }
            hb -= 1;
        }
        match self.rehash_as(self.m, hb, want) {
            Some(t) => {
                *self = t;
                Ok(())
            }
            None => Err(GrowError::Clustered),
        }
    }

    fn rehash_into(&self, m: u64) -> Option<Index> {
        self.rehash_as(m, self.hash_bits, self.min_id_bits)
    }

    /// The same entries in a table of `m` slots keeping `hash_bits ≤ self.hash_bits` bits.
    fn rehash_as(&self, m: u64, hash_bits: u32, min_id_bits: u32) -> Option<Index> {
        let mut t = Index::build(m, hash_bits, self.tag_bits, min_id_bits);
        let drop = self.hash_bits - hash_bits;
        t.growths = self.growths + 1;
        t.max_disp = self.max_disp;
        for i in 0..self.m {
            let (idp1, disp, off) = self.slot(i);
            if idp1 == 0 {
                continue;
            }
            let home = (i + self.m - disp) % self.m;
            let x = (self.lo(home) + off) >> drop;
            let nh = t.home_of(x);
            let mut p = Probe {
                pos: nh,
                dist: 0,
                off: x - t.lo(nh),
            };
            // Walk to the Robin Hood position (no candidates: entries are distinct ids).
            loop {
                let (sid, sdisp, _) = t.slot(p.pos);
                if sid == 0 || sdisp < p.dist {
                    break;
                }
                p.pos = t.next_pos(p.pos);
                p.dist += 1;
            }
            if t.insert_tagged(&p, idp1 - 1, self.tag(i)) == Placement::NeedsGrowth {
                return None;
            }
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u64) -> u64 {
        xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes())
    }

    /// Inserts keys whose "state" is the key itself, growing as needed, and checks that every
    /// key is found exactly once with its id after many doublings.
    #[test]
    fn grows_without_states_and_finds_everything() {
        let mut ix = Index::new(16, HASH_BITS);
        let n = 200_000u64;
        let find = |ix: &Index, i: u64| -> Option<u64> {
            let mut p = ix.probe(h(i));
            while let Step::Candidate(id) = ix.next(&mut p) {
                if id == i {
                    return Some(id);
                }
            }
            None
        };
        for i in 0..n {
            if !ix.has_room(1) {
                ix.grow().unwrap();
            }
            assert_eq!(find(&ix, i), None);
            loop {
                let mut p = ix.probe(h(i));
                while let Step::Candidate(_) = ix.next(&mut p) {}
                match ix.insert_at(&p, i) {
                    Placement::Placed => break,
                    Placement::NeedsGrowth => ix.grow().unwrap(),
                }
            }
        }
        assert_eq!(ix.len(), n);
        assert!(ix.growths() >= 40);
        assert!(
            ix.slots() * 9 / 10 >= n && ix.slots() * 7 / 10 <= n,
            "{}",
            ix.slots()
        );
        for i in 0..n {
            assert_eq!(find(&ix, i), Some(i), "lost {i}");
        }
        assert_eq!(find(&ix, n + 5), None);
    }

    /// Wide prefixes (u128 arithmetic) find everything too.
    #[test]
    fn wide_hash_prefixes() {
        for bits in [33, 46, 54] {
            let mut ix = Index::new(16, bits);
            for i in 0..20_000u64 {
                if !ix.has_room(1) {
                    ix.grow().unwrap();
                }
                ix.place(h(i), i).unwrap();
            }
            for i in 0..20_000u64 {
                let mut p = ix.probe(h(i));
                let mut found = false;
                while let Step::Candidate(id) = ix.next(&mut p) {
                    found |= id == i;
                }
                assert!(found, "{bits} bits: lost {i}");
            }
        }
    }

    /// Tagged entries: removing one tag's entries (backward shift) keeps every other entry
    /// findable with its tag, through later inserts and growths.
    #[test]
    fn remove_by_tag_keeps_the_rest() {
        let mut ix = Index::with_tags(16, HASH_BITS, 2);
        let find = |ix: &Index, i: u64| -> Option<u64> {
            let mut p = ix.probe(h(i));
            loop {
                match ix.next(&mut p) {
                    // The candidate was the slot before the probe's new position.
                    Step::Candidate(id) if id == i => {
                        return Some(ix.tag((p.pos + ix.m - 1) % ix.m));
                    }
                    Step::Candidate(_) => {}
                    Step::Vacant => return None,
                }
            }
        };
        let n = 60_000u64;
        for i in 0..n {
            if !ix.has_room(1) {
                ix.grow().unwrap();
            }
            ix.place_tagged(h(i), i, i % 4).unwrap();
        }
        let mut asked = 0;
        let removed = ix.remove_where(|id, tag| {
            asked += 1;
            assert_eq!(tag, id % 4, "tag of {id}");
            tag == 1 && id % 3 != 0
        });
        assert_eq!(asked as u64, n, "every entry is asked about once");
        let expect_removed = (0..n).filter(|i| i % 4 == 1 && i % 3 != 0).count() as u64;
        assert_eq!(removed, expect_removed);
        assert_eq!(ix.len(), n - removed);
        for i in 0..n {
            let want = (!(i % 4 == 1 && i % 3 != 0)).then_some(i % 4);
            assert_eq!(find(&ix, i), want, "entry {i}");
        }
        for i in n..2 * n {
            if !ix.has_room(1) {
                ix.grow().unwrap();
            }
            ix.place_tagged(h(i), i, 3).unwrap();
        }
        for i in 0..2 * n {
            let want = if i >= n {
                Some(3)
            } else {
                (!(i % 4 == 1 && i % 3 != 0)).then_some(i % 4)
            };
            assert_eq!(find(&ix, i), want, "entry {i} after growth");
        }
    }

    /// Ids far beyond the slot count (a store that forgets entries) widen the id field,
    /// dropping hash bits when the slot would pass 64 bits; every entry stays findable.
    #[test]
    fn ids_beyond_the_slot_count() {
        let mut ix = Index::with_tags(64, HASH_BITS, 3);
        let ids: Vec<u64> = (0..40u64).map(|i| i << 30 | i).collect();
        for (k, &id) in ids.iter().enumerate() {
            ix.ensure_id(id).unwrap();
            if !ix.has_room(1) {
                ix.grow().unwrap();
            }
            ix.place_tagged(h(k as u64), id, k as u64 % 8).unwrap();
        }
        assert!(ix.slot_bits() <= 64);
        for (k, &id) in ids.iter().enumerate() {
            let mut p = ix.probe(h(k as u64));
            let mut found = false;
            while let Step::Candidate(c) = ix.next(&mut p) {
                found |= c == id;
            }
            assert!(found, "lost {id}");
        }
    }

    /// Many keys with the same hash: displacements overflow and force growth, never a wrap.
    #[test]
    fn displacement_overflow_grows() {
        let mut ix = Index::new(256, HASH_BITS);
        for i in 0..100u64 {
            match ix.place(0xdead_beef_0000_0000, i) {
                Ok(()) => assert!(i <= DISP_MAX),
                Err(e) => {
                    assert_eq!(e, GrowError::Clustered);
                    assert_eq!(i, DISP_MAX + 1, "failed at {i}");
                    assert!(ix.slots() <= 1 << 16, "{}", ix.slots());
                    return;
                }
            }
        }
        panic!("100 equal hashes cannot fit 63 displacements");
    }
}
