//! The full-state cache of a ComBack store (variant 2): a bounded set of state vectors keyed
//! by state number, in two direct-mapped regions (7/8 and 1/8 of the entries).
//!
//! * **recent**: slot `id mod n`. Every new state is written here when it is inserted, so in
//!   BFS it holds the newest states (the frontier, where most successors land) and serves the
//!   waiting set; batch reconstruction of the waiting set also fills it.
//! * **replayed**: slot `mix(id) mod n`. States rebuilt by a replay, and the ancestors a
//!   replay passes through, go here, so later replays start from the nearest cached ancestor
//!   and often-matched old states (hubs near the initial state) stay available.
//!
//! Each entry keeps the state's depth too, so path optimisation can decide without reading
//! the backedge table.

use crate::store::state_cache::{Entry, Narrow, Packing};
use crate::store::StateId;

pub use crate::store::state_cache::UNKNOWN_DEPTH;

/// ComBack's regions: 6-byte headers.
type Region = crate::store::state_cache::Region<Narrow>;

/// Which region an entry was found in (for the stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRegion {
    Recent,
    Replayed,
}

/// Puts per window when choosing the packing; the cache switches to a wider packing when
/// more than 1/[`MISFIT_SHARE`] of a window's states did not fit.
const WINDOW: u32 = 4096;
const MISFIT_SHARE: u32 = 16;

pub struct Cache {
    recent: Region,
    /// `⌊2^64 / n⌋ + 1` for the recent region's `n` slots ([`Cache::recent_slot`]).
    recent_m: u64,
    replayed: Region,
    /// Packing of fixed-width entries: starts at [`Packing::Bits`] and widens (the cache is
    /// emptied) while too many states do not fit. A state that does not fit is not cached.
    packing: Packing,
    width: usize,
    entries: usize,
    recent_eighths: usize,
    puts: u32,
    misfits: u32,
    /// Set when the packing widened (the cache's RAM changed).
    resized: bool,
}

#[inline(always)]
fn mix(id: StateId) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

impl Cache {
    /// A cache of `n` entries in total, `recent_eighths`/8 of them recent, the rest
    /// replayed; `n = 0` caches nothing. Fixed-width entries take `6 + packed width` bytes
    /// each.
    pub fn new(n: usize, width: Option<usize>, recent_eighths: usize) -> Self {
        let packing = match width {
            Some(_) => Packing::Bits,
            None => Packing::Bytes,
        };
        Self::with_packing(n, width, packing, recent_eighths)
    }

    /// Bytes of a cache of `n` entries once its packing has widened to whole bytes (the
    /// most it can take), `None` past `u64`.
    pub fn max_bytes(n: usize, width: Option<usize>) -> Option<u64> {
        Region::bytes_for(n, width, Packing::Bytes)
    }

    fn with_packing(
        n: usize,
        width: Option<usize>,
        packing: Packing,
        recent_eighths: usize,
    ) -> Self {
        let recent = if n < 8 {
            n.div_ceil(2)
        } else {
            n / 8 * recent_eighths.clamp(1, 7) + n % 8
        };
        Cache {
            recent_m: (u64::MAX / recent.max(1) as u64).wrapping_add(1),
            recent: Region::new(recent, width, packing),
            replayed: Region::new(n - recent, width, packing),
            packing,
            width: width.unwrap_or(0),
            entries: n,
            recent_eighths,
            puts: 0,
            misfits: 0,
            resized: false,
        }
    }

    pub fn recent_len(&self) -> usize {
        self.recent.slots()
    }

    /// Entries in all (both regions).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// RAM bytes of one entry with the current packing (fixed-width states; for variable
    /// widths an estimate from `width_hint`).
    pub fn entry_bytes(&self, width_hint: usize) -> usize {
        // Variable width: id, depth and the vector's own allocation.
        self.recent.stride().unwrap_or(12 + 24 + width_hint)
    }

    /// The RAM bytes `n` entries would take with the current packing.
    pub fn bytes_for(&self, n: usize, width_hint: usize) -> u64 {
        (n * self.entry_bytes(width_hint)) as u64
    }

    /// Resizes the cache to `n` entries (same packing, same share of recent entries), keeping
    /// what the new regions can hold: the old cache is walked once and every entry put
    /// again in its slot of the new size. Both exist during the copy.
    pub fn resize(&mut self, n: usize) {
        if n == self.entries {
            return;
        }
        let width = self.recent.stride().map(|_| self.width);
        let mut new = Self::with_packing(n, width, self.packing, self.recent_eighths);
        new.puts = self.puts;
        new.misfits = self.misfits;
        let mut buf = Vec::new();
        // Replayed entries first, recent ones last: where both want a slot of the same
        // region, the newest states win.
        for (region, recent) in [(&self.replayed, false), (&self.recent, true)] {
            region.for_each(self.packing, self.width, |id, depth, e| {
                buf.clear();
                e.append_to(&mut buf);
                let slot = if recent {
                    new.recent_slot(id).map(|i| (i, true))
                } else {
                    new.replayed_slot(id).map(|i| (i, false))
                };
                if let Some((i, r)) = slot {
                    let dst = if r {
                        &mut new.recent
                    } else {
                        &mut new.replayed
                    };
                    dst.put(i, id, depth, &buf, new.packing);
                }
            });
        }
        *self = new;
        self.resized = true;
    }

    /// Shrinks the cache to `n` entries by starting it again empty: unlike [`Self::resize`]
    /// the old cache is freed before the new one is allocated, so that giving RAM back never
    /// holds both (what it held is only lost replays, never a state).
    pub fn shrink_empty(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let width = self.recent.stride().map(|_| self.width);
        let (packing, eighths, puts, misfits) =
            (self.packing, self.recent_eighths, self.puts, self.misfits);
        *self = Self::with_packing(0, width, packing, eighths);
        *self = Self::with_packing(n, width, packing, eighths);
        self.puts = puts;
        self.misfits = misfits;
        self.resized = true;
    }

    pub fn packing(&self) -> Packing {
        self.packing
    }

    /// Whether the packing widened since the last call (the cache's RAM changed).
    pub fn take_resized(&mut self) -> bool {
        std::mem::take(&mut self.resized)
    }

    /// `id mod n` for the recent region, by Lemire's multiply-based remainder (two
    /// multiplications instead of a 64-bit division, which cost about a tenth of the run on
    /// Kanban-PT-00005: every lookup computes up to two slots); a division only when `id` or
    /// `n` does not fit 32 bits.
    #[inline(always)]
    fn recent_slot(&self, id: StateId) -> Option<usize> {
        let n = self.recent.slots() as u64;
        if n == 0 {
            return None;
        }
        Some(if id <= u32::MAX as u64 && n <= u32::MAX as u64 {
            let low = self.recent_m.wrapping_mul(id);
            ((low as u128 * n as u128) >> 64) as usize
        } else {
            (id % n) as usize
        })
    }

    /// A hashed slot of the replayed region (multiply-shift range reduction).
    #[inline(always)]
    fn replayed_slot(&self, id: StateId) -> Option<usize> {
        let n = self.replayed.slots() as u64;
        (n > 0).then(|| ((mix(id) as u128 * n as u128) >> 64) as usize)
    }

    /// The cached state and depth of `id`, if any.
    #[inline(always)]
    pub fn get(&self, id: StateId) -> Option<(Entry<'_>, u32, CacheRegion)> {
        if let Some(i) = self.recent_slot(id) {
            if let Some((v, d)) = self.recent.lookup(i, id, self.packing, self.width) {
                return Some((v, d, CacheRegion::Recent));
            }
        }
        if let Some(i) = self.replayed_slot(id) {
            if let Some((v, d)) = self.replayed.lookup(i, id, self.packing, self.width) {
                return Some((v, d, CacheRegion::Replayed));
            }
        }
        None
    }

    /// Whether `id` is cached.
    #[inline(always)]
    pub fn contains(&self, id: StateId) -> bool {
        self.get(id).is_some()
    }

    /// Touches the slots `id` would occupy, so a later `get` finds them in the CPU cache.
    #[inline(always)]
    pub fn touch(&self, id: StateId) -> u32 {
        let mut t = 0;
        if let Some(i) = self.recent_slot(id) {
            t ^= self.recent.touch(i);
        }
        if let Some(i) = self.replayed_slot(id) {
            t ^= self.replayed.touch(i);
        }
        t
    }

    /// Counts a put; widens the packing (emptying the cache) when too many did not fit.
    #[inline(always)]
    fn count(&mut self, fitted: bool) {
        self.puts += 1;
        self.misfits += !fitted as u32;
        if self.puts == WINDOW {
            if self.misfits * MISFIT_SHARE > WINDOW && self.packing != Packing::Bytes {
                let width = Some(self.width);
                *self = Self::with_packing(
                    self.entries,
                    width,
                    self.packing.wider(),
                    self.recent_eighths,
                );
                self.resized = true;
            }
            self.puts = 0;
            self.misfits = 0;
        }
    }

    /// Caches a new (or waiting-set) state in the recent region.
    #[inline(always)]
    pub fn put_recent(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let Some(i) = self.recent_slot(id) {
            let fitted = self.recent.put(i, id, depth, state, self.packing);
            self.count(fitted);
        }
    }

    /// Caches a state rebuilt by a replay in the replayed region.
    #[inline(always)]
    pub fn put_replayed(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let Some(i) = self.replayed_slot(id) {
            let fitted = self.replayed.put(i, id, depth, state, self.packing);
            self.count(fitted);
        }
    }

    /// Updates the depth of a cached state (path optimisation repointed it).
    pub fn set_depth(&mut self, id: StateId, depth: u32) {
        if let Some(i) = self.recent_slot(id) {
            self.recent.set_depth(i, id, depth);
        }
        if let Some(i) = self.replayed_slot(id) {
            self.replayed.set_depth(i, id, depth);
        }
    }

    pub fn ram_bytes(&self) -> u64 {
        self.recent.ram_bytes() + self.replayed.ram_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_slots_are_id_mod_n() {
        for n in [1usize, 2, 3, 7, 8, 100, 315_000, 1 << 20, 3_000_017] {
            let c = Cache::with_packing(n + n.div_ceil(7), None, Packing::Bytes, 7);
            let n = c.recent_len() as u64;
            for id in (0..5000u64)
                .chain([u32::MAX as u64 - 1, u32::MAX as u64, 1 << 40])
                .chain((0..1000).map(|i| i * 4_294_967 + 12_345))
            {
                assert_eq!(c.recent_slot(id), Some((id % n) as usize), "n {n} id {id}");
            }
            if c.replayed.slots() > 0 {
                assert!(c.replayed_slot(1 << 31).unwrap() < c.replayed.slots());
            }
        }
    }

    #[test]
    fn packing_widens_when_states_do_not_fit() {
        let mut c = Cache::new(64, Some(3), 7);
        assert_eq!(c.packing(), Packing::Bits);
        c.put_recent(1, 1, &[0, 1, 1]);
        assert_eq!(c.get(1).unwrap().0.to_vec(), vec![0, 1, 1]);
        // A state that does not fit is not cached (and evicts the slot's entry).
        c.put_recent(1, 1, &[0, 2, 1]);
        assert!(c.get(1).is_none());
        for id in 0..WINDOW as u64 {
            c.put_recent(id, 1, &[0, 9, 1]);
        }
        assert_eq!(c.packing(), Packing::Nibbles);
        assert!(c.take_resized());
        c.put_recent(5, 2, &[0, 9, 1]);
        assert_eq!(c.get(5).unwrap().0.to_vec(), vec![0, 9, 1]);
        for id in 0..WINDOW as u64 {
            c.put_recent(id, 1, &[0, 90, 1]);
        }
        assert_eq!(c.packing(), Packing::Bytes);
        assert_eq!(c.get(WINDOW as u64 - 1).unwrap().0.to_vec(), vec![0, 90, 1]);
        assert_eq!(
            c.ram_bytes(),
            64 * (<Narrow as crate::store::state_cache::Header>::BYTES as u64 + 3)
        );
    }

    #[test]
    fn resize_keeps_entries_packing_and_depths() {
        for width in [Some(3), None] {
            let mut c = Cache::new(64, width, 6);
            for id in 0..40u64 {
                c.put_recent(id, id as u32, &[0, (id & 1) as u8, 1]);
            }
            c.put_replayed(3, 70_000, &[1, 1, 0]);
            let before: Vec<_> = (0..40u64)
                .map(|id| c.get(id).map(|(v, d, _)| (v.to_vec(), d)))
                .collect();
            c.resize(1000);
            assert_eq!(c.entries(), 1000);
            assert!(c.take_resized());
            assert_eq!(c.packing(), before_packing(width));
            for (id, b) in before.iter().enumerate() {
                if let Some(b) = b {
                    let (v, d, _) = c.get(id as u64).expect("kept");
                    assert_eq!(&(v.to_vec(), d), b, "id {id}");
                }
            }
            // Every recent entry of the small cache is still there (the new region is larger).
            for id in 1..40u64 {
                assert!(c.contains(id), "{id}");
            }
            c.resize(8);
            assert_eq!(c.entries(), 8);
            assert!(c.get(39).is_some(), "the newest state wins its slot");
        }
    }

    fn before_packing(width: Option<usize>) -> Packing {
        match width {
            Some(_) => Packing::Bits,
            None => Packing::Bytes,
        }
    }

    #[test]
    fn direct_mapped_regions_evict_and_answer() {
        for width in [Some(2), None] {
            let mut c = Cache::with_packing(8, width, Packing::Bytes, 7);
            for id in 0..10u64 {
                c.put_recent(id, id as u32, &[id as u8, 1]);
            }
            assert!(c.get(0).is_none(), "0 evicted by 7 (7 recent slots)");
            let (v, d, r) = c.get(9).unwrap();
            assert_eq!((v.to_vec(), d, r), (vec![9u8, 1], 9, CacheRegion::Recent));
            c.put_replayed(0, 0, &[0, 1]);
            assert_eq!(c.get(0).unwrap().2, CacheRegion::Replayed);
            c.set_depth(0, 7);
            assert_eq!(c.get(0).unwrap().1, 7);
            // Depths that do not fit the fixed-width entry's 16 bits read as unknown.
            c.put_recent(1, 70_000, &[1, 1]);
            let want = if width.is_some() {
                UNKNOWN_DEPTH
            } else {
                70_000
            };
            assert_eq!(c.get(1).unwrap().1, want);
            c.put_recent(1, 65_534, &[1, 1]);
            assert_eq!(c.get(1).unwrap().1, 65_534);
            assert!(Cache::new(0, width, 7).get(3).is_none());
        }
    }
}

/// The current search path, pinned every [`PIN_EVERY`] levels: the state last inserted as new
/// at each depth that is a multiple of `PIN_EVERY`. In DFS this samples the engine's stack (a
/// new state at depth `k` is pushed on a stack of `k` frames), and every state seen so far
/// descends from a stack state, so a replay climbs only to the nearest pinned stack state,
/// never to the initial state. Sampling keeps the copy at 1/`PIN_EVERY` of the engine's stack
/// (DFS stacks can be as deep as the state space). In BFS it holds a few states and costs
/// nothing. A state is found by its stored depth, checked by number.
///
/// Under a budget the copy holds at most [`SearchPath::set_cap`] bytes: when it is full, every
/// other pin is dropped and the spacing doubles, so a path of any depth stays sampled from
/// its root to its top, with replays at most twice as long per doubling. (Unbounded, the
/// pins of Kanban-PT-00005's 2.4 M-deep DFS stack took 9.6 MiB, 19 MiB of capacity, outside
/// every cache's reach: ComBack under `--memory 24M -o` was stopped with exit 6.)
pub struct SearchPath {
    /// Entry `i` is the state at depth `i * every`.
    ids: Vec<StateId>,
    ends: Vec<usize>,
    data: Vec<u8>,
    /// Depth spacing of the pins: [`PIN_EVERY`], doubled at each thinning.
    every: usize,
    /// Most bytes the entries may take (`usize::MAX`: no budget).
    cap: usize,
}

impl Default for SearchPath {
    fn default() -> Self {
        SearchPath {
            ids: Vec::new(),
            ends: Vec::new(),
            data: Vec::new(),
            every: PIN_EVERY,
            cap: usize::MAX,
        }
    }
}

/// Depth sampling of the pinned search path (measured on Kanban-PT-00005 in DFS: pinning
/// every level cost 52 B/state for a stack as deep as the state space).
pub const PIN_EVERY: usize = 8;

/// Pins a capped path keeps whatever its cap, before it thins.
const MIN_PINS: usize = 1024;

impl SearchPath {
    /// Bounds the entries' bytes (see the type's docs).
    pub fn set_cap(&mut self, bytes: usize) {
        self.cap = bytes;
    }

    /// The depth spacing of the pins now.
    pub fn spacing(&self) -> usize {
        self.every
    }

    /// Records state `id` inserted as new at `depth`, dropping entries that are no longer on
    /// the path. True if the copy's capacity changed (its RAM figure is stale).
    #[inline]
    pub fn push(&mut self, depth: u32, id: StateId, state: &[u8]) -> bool {
        let k = depth as usize;
        let mut slot = k / self.every;
        if !k.is_multiple_of(self.every) {
            // Entries at depths < k stay ancestors; deeper ones are off the path.
            self.truncate(slot + 1);
            return false;
        }
        if slot > self.ids.len() {
            return false;
        }
        self.truncate(slot);
        let mut grown = false;
        if self.ids.len() == self.ids.capacity() {
            let per = 2 * std::mem::size_of::<usize>() + state.len();
            let most = (self.cap / per).max(MIN_PINS);
            if self.ids.len() >= most {
                self.thin();
                if !k.is_multiple_of(self.every) {
                    return false;
                }
                slot = k / self.every;
                debug_assert_eq!(slot, self.ids.len());
            } else {
                // Exact growth: a doubling would pass the cap by up to half of it.
                let want = (self.ids.len() * 2).clamp(64, most) - self.ids.len();
                self.ids.reserve_exact(want);
                self.ends.reserve_exact(want);
                self.data.reserve_exact(want * state.len());
                grown = true;
            }
        }
        debug_assert_eq!(slot, self.ids.len());
        self.ids.push(id);
        self.data.extend_from_slice(state);
        self.ends.push(self.data.len());
        grown
    }

    /// Keeps the pins at even entries (depths that are multiples of twice the spacing) and
    /// doubles the spacing; the capacity stays, for the pins to come.
    fn thin(&mut self) {
        let (mut kept, mut at, mut start) = (0, 0, 0);
        for i in 0..self.ids.len() {
            let end = self.ends[i];
            if i % 2 == 0 {
                self.ids[kept] = self.ids[i];
                self.data.copy_within(start..end, at);
                at += end - start;
                self.ends[kept] = at;
                kept += 1;
            }
            start = end;
        }
        self.ids.truncate(kept);
        self.ends.truncate(kept);
        self.data.truncate(at);
        self.every *= 2;
    }

    fn truncate(&mut self, n: usize) {
        if n < self.ids.len() {
            self.ids.truncate(n);
            self.ends.truncate(n);
            self.data.truncate(self.ends.last().copied().unwrap_or(0));
        }
    }

    /// The vector of `id` if it is pinned at `depth`.
    #[inline(always)]
    pub fn get(&self, id: StateId, depth: u32) -> Option<&[u8]> {
        let k = depth as usize;
        if !k.is_multiple_of(self.every) {
            return None;
        }
        let k = k / self.every;
        if self.ids.get(k) != Some(&id) {
            return None;
        }
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        Some(&self.data[start..self.ends[k]])
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.ids.capacity() * 8 + self.ends.capacity() * 8 + self.data.capacity()) as u64
    }
}

#[cfg(test)]
mod path_tests {
    use super::*;

    fn vector(depth: u32) -> [u8; 16] {
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(&depth.to_le_bytes());
        v[15] = 0xa5;
        v
    }

    /// A capped path thins as it deepens: its RAM stays within the cap, the spacing doubles,
    /// every pin it still holds is the right vector of the right state, and pins cover the
    /// path from its root to its top (no gap wider than the spacing).
    #[test]
    fn a_capped_path_thins_and_keeps_the_right_pins() {
        let mut p = SearchPath::default();
        let cap = 64 << 10;
        p.set_cap(cap);
        let deep = 400_000u32;
        // A DFS descends, backs off a little and descends again (ids are depth + 1_000_000
        // on the first descent, fresh ones after a backtrack).
        for d in 0..deep {
            p.push(d, d as u64 + 1_000_000, &vector(d));
            assert!(p.ram_bytes() <= cap as u64 + 4096, "at depth {d}");
        }
        for d in (deep - 5_000)..deep {
            p.push(d, d as u64 + 5_000_000, &vector(d));
        }
        let every = p.spacing();
        assert!(every > PIN_EVERY, "the path thinned (spacing {every})");
        assert!(every.is_power_of_two());
        let mut pinned = 0;
        for d in 0..deep {
            let old = d as u64 + 1_000_000;
            let new = d as u64 + 5_000_000;
            let id = if d >= deep - 5_000 { new } else { old };
            match p.get(id, d) {
                Some(v) => {
                    assert_eq!(v, &vector(d)[..]);
                    pinned += 1;
                }
                None => assert!(!(d as usize).is_multiple_of(every), "depth {d} unpinned"),
            }
            if d >= deep - 5_000 {
                assert!(p.get(old, d).is_none(), "a pin off the path at {d}");
            }
        }
        assert_eq!(pinned, (deep as usize).div_ceil(every));
        // Unbounded (no budget): the spacing stays.
        let mut u = SearchPath::default();
        for d in 0..deep {
            u.push(d, d as u64, &vector(d));
        }
        assert_eq!(u.spacing(), PIN_EVERY);
        assert_eq!(u.get(8 * 1000, 8 * 1000), Some(&vector(8000)[..]));
    }
}
