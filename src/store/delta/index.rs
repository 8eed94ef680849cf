//! The compact hash index of the Δ store: hash → record id, in RAM.
//!
//! A Robin Hood linear-probing table of `2^q` bit-packed slots. The home slot of a state is the
//! top `q` bits of its 64-bit hash (its *quotient*); a slot stores
//!
//! ```text
//! | remainder : HASH_BITS - q | displacement : DISP_BITS | id + 1 : q + 1 |   (0 = empty)
//! ```
//!
//! where the remainder is the next `HASH_BITS - q` hash bits and the displacement is the
//! distance from the home slot. The quotient is implied by the position (position −
//! displacement), so a slot costs `HASH_BITS + DISP_BITS + 1` bits whatever the table size, and
//! the table can double **without the states**: the new home is `2·home + top remainder bit`,
//! the remainder loses that bit. Every state therefore keeps a fixed `HASH_BITS`-bit hash
//! prefix; as the table grows fewer bits are left to filter false candidates (10 at 4 million
//! slots), which costs only extra comparisons, never a wrong answer — the store compares states.
//!
//! Robin Hood order (a cluster is sorted by home slot) lets an unsuccessful lookup stop at the
//! first slot whose displacement is smaller than the probe distance. A displacement that would
//! not fit `DISP_BITS` makes the table double early instead of failing.

use super::bits::{get_bits, set_bits};

/// Bits of the hash every entry keeps (quotient + remainder).
pub const HASH_BITS: u32 = 32;
/// Bits of the displacement field.
pub const DISP_BITS: u32 = 6;
const DISP_MAX: u64 = (1 << DISP_BITS) - 1;
/// The largest table: at least 4 remainder bits are kept.
pub const MAX_Q: u32 = HASH_BITS - 4;
/// Load limit: 7/8.
const LOAD_NUM: u64 = 7;
const LOAD_DEN: u64 = 8;

/// Why the index could not grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrowError {
    /// More than `2^MAX_Q` slots would be needed.
    TooLarge,
    /// Too many entries share a hash prefix for the displacement field.
    Clustered,
}

/// A position in a probe sequence.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pos: u64,
    dist: u64,
    rem: u64,
}

/// One step of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A slot with the same home and remainder: the caller must compare the states.
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
    q: u32,
    slot_bits: u32,
    words: Vec<u64>,
    len: u64,
    growths: u64,
}

impl Index {
    pub fn new(q: u32) -> Self {
        let slot_bits = HASH_BITS + DISP_BITS + 1;
        let words = ((slot_bits as u64) << q).div_ceil(64) as usize + 1;
        Index {
            q,
            slot_bits,
            words: vec![0; words],
            len: 0,
            growths: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn slots(&self) -> u64 {
        1 << self.q
    }

    pub fn growths(&self) -> u64 {
        self.growths
    }

    pub fn ram_bytes(&self) -> u64 {
        self.words.capacity() as u64 * 8
    }

    #[inline(always)]
    fn rem_bits(&self) -> u32 {
        HASH_BITS - self.q
    }

    #[inline(always)]
    fn id_bits(&self) -> u32 {
        self.q + 1
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        (1 << self.q) - 1
    }

    /// (id + 1, displacement, remainder) of slot `i`; id + 1 = 0 means empty.
    #[inline(always)]
    fn slot(&self, i: u64) -> (u64, u64, u64) {
        let v = get_bits(&self.words, i * self.slot_bits as u64, self.slot_bits);
        let idb = self.id_bits();
        (
            v & ((1 << idb) - 1),
            (v >> idb) & DISP_MAX,
            v >> (idb + DISP_BITS),
        )
    }

    #[inline(always)]
    fn put(&mut self, i: u64, idp1: u64, disp: u64, rem: u64) {
        let idb = self.id_bits();
        let v = idp1 | (disp << idb) | (rem << (idb + DISP_BITS));
        set_bits(
            &mut self.words,
            i * self.slot_bits as u64,
            self.slot_bits,
            v,
        );
    }

    /// Whether `extra` more entries fit under the load limit.
    pub fn has_room(&self, extra: u64) -> bool {
        (self.len + extra) * LOAD_DEN <= self.slots() * LOAD_NUM
    }

    /// Touches the home slot of `h` (to overlap cache misses within a batch).
    #[inline(always)]
    pub fn touch(&self, h: u64) -> u64 {
        let home = h >> (64 - self.q);
        self.words[((home * self.slot_bits as u64) / 64) as usize]
    }

    /// Starts a probe for hash `h`.
    #[inline(always)]
    pub fn probe(&self, h: u64) -> Probe {
        Probe {
            pos: h >> (64 - self.q),
            dist: 0,
            rem: (h >> (64 - HASH_BITS)) & ((1 << self.rem_bits()) - 1),
        }
    }

    /// Advances `p` to the next candidate, or reports that the state is absent.
    #[inline(always)]
    pub fn next(&self, p: &mut Probe) -> Step {
        loop {
            let (idp1, disp, rem) = self.slot(p.pos);
            if idp1 == 0 || disp < p.dist {
                return Step::Vacant;
            }
            let here = (idp1, disp == p.dist && rem == p.rem);
            p.pos = (p.pos + 1) & self.mask();
            p.dist += 1;
            if here.1 {
                return Step::Candidate(here.0 - 1);
            }
        }
    }

    /// Inserts `id` where the probe `p` (which returned [`Step::Vacant`]) stopped.
    pub fn insert_at(&mut self, p: &Probe, id: u64) -> Placement {
        debug_assert!(id + 1 < 1 << self.id_bits());
        if p.dist > DISP_MAX {
            return Placement::NeedsGrowth;
        }
        // The cluster tail [p.pos, end) moves one slot right.
        let mask = self.mask();
        let mut end = p.pos;
        loop {
            let (idp1, disp, _) = self.slot(end);
            if idp1 == 0 {
                break;
            }
            if disp == DISP_MAX {
                return Placement::NeedsGrowth;
            }
            end = (end + 1) & mask;
            if end == p.pos {
                return Placement::NeedsGrowth;
            }
        }
        let mut i = end;
        while i != p.pos {
            let prev = (i + mask) & mask;
            let (idp1, disp, rem) = self.slot(prev);
            self.put(i, idp1, disp + 1, rem);
            i = prev;
        }
        self.put(p.pos, id + 1, p.dist, p.rem);
        self.len += 1;
        Placement::Placed
    }

    /// Doubles the table (up to three times if a displacement overflows), re-placing every
    /// entry from its stored quotient and remainder; no state is needed. Fails with
    /// [`GrowError`] past [`MAX_Q`] or when displacements still overflow (more than 63 entries
    /// sharing a hash prefix — only adversarial inputs do that).
    pub fn grow(&mut self) -> Result<(), GrowError> {
        for q in self.q + 1..=self.q + 3 {
            if q > MAX_Q {
                return Err(GrowError::TooLarge);
            }
            if let Some(t) = self.rehash_into(q) {
                *self = t;
                return Ok(());
            }
        }
        Err(GrowError::Clustered)
    }

    /// Inserts `id` for hash `h`, known to be absent, growing when a displacement overflows
    /// (at most three times: if that does not help, the entries share a hash prefix).
    pub fn place(&mut self, h: u64, id: u64) -> Result<(), GrowError> {
        for _ in 0..4 {
            let mut p = self.probe(h);
            while let Step::Candidate(_) = self.next(&mut p) {}
            match self.insert_at(&p, id) {
                Placement::Placed => return Ok(()),
                Placement::NeedsGrowth => self.grow()?,
            }
        }
        Err(GrowError::Clustered)
    }

    fn rehash_into(&self, q: u32) -> Option<Index> {
        let mut t = Index::new(q);
        t.growths = self.growths + 1;
        let shift = q - self.q;
        let old_rem = self.rem_bits();
        let mask = self.mask();
        for i in 0..self.slots() {
            let (idp1, disp, rem) = self.slot(i);
            if idp1 == 0 {
                continue;
            }
            let home = (i + (1 << self.q) - disp) & mask;
            let new_rem_bits = old_rem - shift;
            let new_home = (home << shift) | (rem >> new_rem_bits);
            let mut p = Probe {
                pos: new_home,
                dist: 0,
                rem: rem & ((1 << new_rem_bits) - 1),
            };
            // Walk to the Robin Hood position (no candidates: entries are distinct ids).
            loop {
                let (sid, sdisp, _) = t.slot(p.pos);
                if sid == 0 || sdisp < p.dist {
                    break;
                }
                p.pos = (p.pos + 1) & t.mask();
                p.dist += 1;
            }
            if t.insert_at(&p, idp1 - 1) == Placement::NeedsGrowth {
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
        let mut ix = Index::new(4);
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
        assert!(ix.growths() >= 14);
        for i in 0..n {
            assert_eq!(find(&ix, i), Some(i), "lost {i}");
        }
        assert_eq!(find(&ix, n + 5), None);
    }

    /// Many keys with the same hash: displacements overflow and force growth, never a wrap.
    #[test]
    fn displacement_overflow_grows() {
        let mut ix = Index::new(8);
        for i in 0..100u64 {
            match ix.place(0xdead_beef_0000_0000, i) {
                Ok(()) => assert!(i <= DISP_MAX),
                Err(e) => {
                    assert_eq!(e, GrowError::Clustered);
                    assert_eq!(i, DISP_MAX + 1, "failed at {i}");
                    assert!(ix.slots() <= 1 << 12);
                    return;
                }
            }
        }
        panic!("100 equal hashes cannot fit 63 displacements");
    }
}
