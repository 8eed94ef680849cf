//! The ComBack state table: descriptor → collision list of state numbers, 6 bytes per slot.
//!
//! An open-addressing table with linear probing. A slot holds a 32-bit state number and a
//! 16-bit fingerprint (the low 16 bits of the descriptor's value); the home slot comes from
//! the descriptor's high 32 bits by multiply-shift range reduction, so the capacity need not
//! be a power of two. The descriptor itself is not kept in RAM: it is in the backedge record,
//! and growing the table re-inserts every state by a sequential scan of the backedge table.
//! Growth is by 4/3 at 85% load, so the load stays in about [0.64, 0.85]: 7–9.4 bytes per
//! state.
//!
//! The *collision list* of a descriptor `H` is the set of slots of its probe run whose state
//! has descriptor `H`; equal descriptors have equal home slots, so their entries can be
//! swapped freely (move-to-front). The fingerprint only filters; correctness never depends
//! on it (with `--hash-bits 8` every fingerprint is the whole 8-bit descriptor).

/// One slot: state number + 1 in two halves (0 = empty), fingerprint.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Slot {
    id_lo: u16,
    id_hi: u16,
    fp: u16,
}

impl Slot {
    #[inline(always)]
    fn raw_id(self) -> u32 {
        self.id_lo as u32 | (self.id_hi as u32) << 16
    }
}

/// `n` empty slots, in transparent huge pages where the kernel offers them (see
/// [`crate::sys::huge_pages`]): every lookup is a random access, and with 4 KiB pages most of
/// them also miss the TLB.
fn zeroed_slots(n: usize) -> Vec<Slot> {
    let mut v: Vec<Slot> = Vec::with_capacity(n);
    crate::sys::huge_pages(v.as_ptr() as *const u8, n * std::mem::size_of::<Slot>());
    v.resize(n, Slot::default());
    v
}

/// Bytes of one slot.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// Largest number of states (ids are stored as `id + 1` in 32 bits).
pub const MAX_STATES: u64 = u32::MAX as u64 - 1;

pub struct StateTable {
    slots: Vec<Slot>,
    count: u64,
    /// Descriptor width in bits.
    bits: u32,
}

/// Where a probe stopped.
pub struct Probe {
    pub pos: usize,
}

impl StateTable {
    pub fn new(bits: u32) -> Self {
        StateTable {
            slots: zeroed_slots(1024),
            count: 0,
            bits,
        }
    }

    #[inline(always)]
    pub fn fingerprint(&self, descriptor: u64) -> u16 {
        (descriptor >> (64 - self.bits)) as u16
    }

    /// Whether equal fingerprints mean equal descriptors (descriptors of at most 16 bits).
    #[inline(always)]
    pub fn fingerprint_is_descriptor(&self) -> bool {
        self.bits <= 16
    }

    #[inline(always)]
    pub fn home(&self, descriptor: u64) -> usize {
        (((descriptor >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    /// An empty table of `slots` slots (at least 1024), e.g. the size a checkpointed table had.
    pub fn with_slots(bits: u32, slots: usize) -> Self {
        StateTable {
            slots: zeroed_slots(slots.max(1024)),
            count: 0,
            bits,
        }
    }

    /// Whether inserting `extra` more states needs a larger table first.
    #[inline]
    pub fn needs_growth(&self, extra: u64) -> bool {
        (self.count + extra) * 20 > self.slots.len() as u64 * 17
    }

    /// Slots of the table [`StateTable::grown`] makes.
    pub fn grown_slots(&self) -> usize {
        (self.slots.len() * 4 / 3).max(1024)
    }

    /// Bytes of the table [`StateTable::grown`] makes.
    pub fn grown_bytes(&self) -> u64 {
        (self.slots.len() as u64 * 4 / 3).max(1024) * std::mem::size_of::<Slot>() as u64
    }

    /// A new, empty table for at least the current count, 4/3 as large; the caller
    /// re-inserts every state with [`StateTable::refill`].
    pub fn grown(&self) -> StateTable {
        let cap = (self.slots.len() as u64 * 4 / 3).max(1024) as usize;
        StateTable {
            slots: zeroed_slots(cap),
            count: 0,
            bits: self.bits,
        }
    }

    /// Touches the home slot of `descriptor` and the slot five further (to overlap the cache
    /// misses of a batch): a probe run often crosses into the next CPU cache line (a run
    /// that ends in a new state is about eight slots of six bytes at the table's load).
    /// Interleaved CPU medians, one thread, defaults: Kanban-PT-00005 5.61 → 5.39 s,
    /// SharedMemory-PT-000010 6.93 → 6.41 s, Peterson-PT-3 8.06 → 7.61 s; ten slots
    /// further was no better than five.
    #[inline(always)]
    pub fn touch(&self, descriptor: u64) {
        let home = self.home(descriptor);
        let slot = &self.slots[home];
        super::prefetch(slot as *const Slot as *const u8);
        let end = &self.slots[(home + 5).min(self.slots.len() - 1)];
        super::prefetch(end as *const Slot as *const u8);
    }

    /// Walks the probe run of `descriptor` from its home slot, calling `candidate(pos, id)` for
    /// every slot whose fingerprint matches, in order, until it returns `Some`; returns that
    /// value, or `Err(Probe)` naming the empty slot that ends the run (where a new state goes).
    #[inline(always)]
    pub fn find<T, E>(
        &self,
        descriptor: u64,
        mut candidate: impl FnMut(usize, u64) -> Result<Option<T>, E>,
    ) -> Result<Result<T, Probe>, E> {
        let fp = self.fingerprint(descriptor);
        let cap = self.slots.len();
        let mut i = self.home(descriptor);
        loop {
            let s = self.slots[i];
            let raw = s.raw_id();
            if raw == 0 {
                return Ok(Err(Probe { pos: i }));
            }
            if s.fp == fp {
                if let Some(v) = candidate(i, raw as u64 - 1)? {
                    return Ok(Ok(v));
                }
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
    }

    /// The state in the home slot of `descriptor` if its fingerprint matches (for prefetching).
    #[inline(always)]
    pub fn first_candidate(&self, descriptor: u64) -> Option<u64> {
        let s = self.slots[self.home(descriptor)];
        let raw = s.raw_id();
        (raw != 0 && s.fp == self.fingerprint(descriptor)).then(|| raw as u64 - 1)
    }

    /// The first empty slot of the probe run of `descriptor`.
    pub fn probe_empty(&self, descriptor: u64) -> usize {
        let cap = self.slots.len();
        let mut i = self.home(descriptor);
        while self.slots[i].raw_id() != 0 {
            i += 1;
            if i == cap {
                i = 0;
            }
        }
        i
    }

    /// Stores state `id` with `descriptor` in the empty slot `pos` (from a probe).
    #[inline]
    pub fn insert_at(&mut self, pos: usize, descriptor: u64, id: u64) {
        debug_assert!(id < MAX_STATES);
        debug_assert_eq!(self.slots[pos].raw_id(), 0);
        let raw = id as u32 + 1;
        self.slots[pos] = Slot {
            id_lo: raw as u16,
            id_hi: (raw >> 16) as u16,
            fp: self.fingerprint(descriptor),
        };
        self.count += 1;
    }

    /// Inserts `(id, descriptor)` pairs in the order given, each home slot asked for
    /// [`REFILL_AHEAD`] pairs before its insert (see [`Refill`]); `fill` pushes them.
    pub fn refill<E>(
        &mut self,
        fill: impl FnOnce(&mut dyn FnMut(u64, u64)) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut r = Refill {
            table: self,
            ring: [(0, 0); REFILL_AHEAD],
            n: 0,
        };
        fill(&mut |id, d| r.push(id, d))?;
        r.finish();
        Ok(())
    }

    /// Swaps two slots of the same collision list (move-to-front).
    pub fn swap(&mut self, a: usize, b: usize) {
        self.slots.swap(a, b);
    }

    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<Slot>()) as u64
    }
}

/// Pairs a [`Refill`] holds between asking for a home slot and inserting there: enough
/// misses in flight to cover the memory latency.
const REFILL_AHEAD: usize = 16;

/// Re-inserts states into a table in id order (a rebuild after growth, a resume). The
/// descriptors come in id order and their home slots at random, so one insert at a time
/// waits for a miss each: the 28 rebuilds of ComBack's table on Kanban-PT-00005 took 7.5%
/// of its run. The insertion order, and so the table, is the same.
struct Refill<'t> {
    table: &'t mut StateTable,
    ring: [(u64, u64); REFILL_AHEAD],
    n: usize,
}

impl Refill<'_> {
    fn push(&mut self, id: u64, d: u64) {
        self.table.touch(d);
        let slot = &mut self.ring[self.n % REFILL_AHEAD];
        if self.n >= REFILL_AHEAD {
            let (id, d) = *slot;
            let p = self.table.probe_empty(d);
            self.table.insert_at(p, d, id);
        }
        *slot = (id, d);
        self.n += 1;
    }

    fn finish(self) {
        for k in self.n.saturating_sub(REFILL_AHEAD)..self.n {
            let (id, d) = self.ring[k % REFILL_AHEAD];
            let p = self.table.probe_empty(d);
            self.table.insert_at(p, d, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_six_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 6);
    }

    #[test]
    fn finds_every_entry_with_its_descriptor_after_growth() {
        for bits in [8u32, 16, 64] {
            let mask = crate::store::top_mask(bits);
            let desc = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask;
            let mut t = StateTable::new(bits);
            let n = 20_000u64;
            for id in 0..n {
                if t.needs_growth(1) {
                    let mut g = t.grown();
                    g.refill(|push| {
                        (0..id).for_each(|j| push(j, desc(j)));
                        Ok::<_, ()>(())
                    })
                    .unwrap();
                    t = g;
                }
                let p = t.probe_empty(desc(id));
                t.insert_at(p, desc(id), id);
            }
            assert!(t.len() * 20 <= t.capacity() as u64 * 17);
            for id in (0..n).step_by(7) {
                let found = t
                    .find::<u64, ()>(desc(id), |_, c| Ok((c == id).then_some(c)))
                    .unwrap();
                assert_eq!(found.ok(), Some(id), "bits {bits} id {id}");
            }
        }
    }
}
