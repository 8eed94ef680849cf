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

use crate::store::StateId;

/// Bytes before the state in a fixed-width entry: `id + 1: u32 | depth: u16`.
const HEADER: usize = 6;

/// The depth [`Cache::get`] returns for a state cached with a depth of 65,535 or more (the
/// caller reads the real one from the backedge record).
pub const UNKNOWN_DEPTH: u32 = u32::MAX;

#[inline(always)]
fn narrow_depth(depth: u32) -> u16 {
    depth.min(u16::MAX as u32) as u16
}

#[inline(always)]
fn wide_depth(lo: u8, hi: u8) -> u32 {
    match u16::from_le_bytes([lo, hi]) {
        u16::MAX => UNKNOWN_DEPTH,
        d => d as u32,
    }
}

/// One direct-mapped region. Fixed-width states: one contiguous entry per slot,
/// `id + 1: u32 | depth: u16 | state`, so a lookup costs one cache miss (a depth of 65,535 or
/// more is stored as [`UNKNOWN_DEPTH`]: the caller reads it from the backedge record; six
/// bytes of header instead of eight give Kanban-PT-00005, 16-byte states, 9% more entries
/// for the same RAM). Variable width:
/// parallel vectors.
enum Region {
    Flat {
        stride: usize,
        slots: usize,
        bytes: Vec<u8>,
    },
    Boxed {
        ids: Vec<u32>,
        depths: Vec<u32>,
        data: Vec<Vec<u8>>,
    },
}

impl Region {
    fn new(n: usize, width: Option<usize>) -> Self {
        match width {
            Some(w) => Region::Flat {
                stride: HEADER + w,
                slots: n,
                bytes: vec![0; n * (HEADER + w)],
            },
            None => Region::Boxed {
                ids: vec![0; n],
                depths: vec![0; n],
                data: vec![Vec::new(); n],
            },
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        match self {
            Region::Flat { slots, .. } => *slots,
            Region::Boxed { ids, .. } => ids.len(),
        }
    }

    /// The entry in slot `i` if it holds state `id`.
    #[inline(always)]
    fn lookup(&self, i: usize, id: StateId) -> Option<(&[u8], u32)> {
        let raw = id as u32 + 1;
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &bytes[i * stride..(i + 1) * stride];
                (u32::from_le_bytes(e[0..4].try_into().unwrap()) == raw)
                    .then(|| (&e[HEADER..], wide_depth(e[4], e[5])))
            }
            Region::Boxed { ids, depths, data } => {
                (ids[i] == raw).then(|| (&data[i][..], depths[i]))
            }
        }
    }

    /// Touches slot `i` (prefetch).
    #[inline(always)]
    fn touch(&self, i: usize) -> u32 {
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &bytes[i * stride..(i + 1) * stride];
                super::prefetch(e.as_ptr());
                // An entry may straddle two CPU cache lines.
                super::prefetch(e[e.len() - 1..].as_ptr());
                0
            }
            Region::Boxed { ids, .. } => ids[i],
        }
    }

    #[inline(always)]
    fn put(&mut self, i: usize, id: StateId, depth: u32, state: &[u8]) {
        let raw = id as u32 + 1;
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &mut bytes[i * *stride..(i + 1) * *stride];
                e[0..4].copy_from_slice(&raw.to_le_bytes());
                e[4..6].copy_from_slice(&narrow_depth(depth).to_le_bytes());
                e[HEADER..].copy_from_slice(state);
            }
            Region::Boxed { ids, depths, data } => {
                ids[i] = raw;
                depths[i] = depth;
                data[i].clear();
                data[i].extend_from_slice(state);
            }
        }
    }

    fn set_depth(&mut self, i: usize, id: StateId, depth: u32) {
        let raw = id as u32 + 1;
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &mut bytes[i * *stride..(i + 1) * *stride];
                if u32::from_le_bytes(e[0..4].try_into().unwrap()) == raw {
                    e[4..6].copy_from_slice(&narrow_depth(depth).to_le_bytes());
                }
            }
            Region::Boxed { ids, depths, .. } => {
                if ids[i] == raw {
                    depths[i] = depth;
                }
            }
        }
    }

    fn ram_bytes(&self) -> u64 {
        (match self {
            Region::Flat { bytes, .. } => bytes.capacity(),
            Region::Boxed { ids, depths, data } => {
                ids.capacity() * 4
                    + depths.capacity() * 4
                    + data.iter().map(|x| x.capacity() + 24).sum::<usize>()
            }
        }) as u64
    }
}

/// Which region an entry was found in (for the stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRegion {
    Recent,
    Replayed,
}

pub struct Cache {
    recent: Region,
    replayed: Region,
}

#[inline(always)]
fn mix(id: StateId) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

impl Cache {
    /// A cache of `n` entries in total (half per region); `n = 0` caches nothing.
    pub fn new(n: usize, width: Option<usize>) -> Self {
        // Measured on Kanban-PT-00005 (BFS, 2^18 entries): 1/2 recent gave 3.7 M replays,
        // 3/4 gave 2.1 M, 7/8 and 9/10 about 1.5 M; with no replayed region they grew 13×
        // longer (no cached ancestors).
        let recent = if n < 8 { n.div_ceil(2) } else { n - n / 8 };
        Cache {
            recent: Region::new(recent, width),
            replayed: Region::new(n - recent, width),
        }
    }

    pub fn recent_len(&self) -> usize {
        self.recent.len()
    }

    #[inline(always)]
    fn recent_slot(&self, id: StateId) -> Option<usize> {
        let n = self.recent.len();
        (n > 0).then(|| (id % n as u64) as usize)
    }

    #[inline(always)]
    fn replayed_slot(&self, id: StateId) -> Option<usize> {
        let n = self.replayed.len();
        (n > 0).then(|| (mix(id) % n as u64) as usize)
    }

    /// The cached vector and depth of `id`, if any.
    #[inline(always)]
    pub fn get(&self, id: StateId) -> Option<(&[u8], u32, CacheRegion)> {
        if let Some(i) = self.recent_slot(id) {
            if let Some((v, d)) = self.recent.lookup(i, id) {
                return Some((v, d, CacheRegion::Recent));
            }
        }
        if let Some(i) = self.replayed_slot(id) {
            if let Some((v, d)) = self.replayed.lookup(i, id) {
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

    /// Caches a new (or waiting-set) state in the recent region.
    #[inline(always)]
    pub fn put_recent(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let Some(i) = self.recent_slot(id) {
            self.recent.put(i, id, depth, state);
        }
    }

    /// Caches a state rebuilt by a replay in the replayed region.
    #[inline(always)]
    pub fn put_replayed(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let Some(i) = self.replayed_slot(id) {
            self.replayed.put(i, id, depth, state);
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
    fn direct_mapped_regions_evict_and_answer() {
        for width in [Some(2), None] {
            let mut c = Cache::new(8, width);
            for id in 0..10u64 {
                c.put_recent(id, id as u32, &[id as u8, 1]);
            }
            assert!(c.get(0).is_none(), "0 evicted by 7 (7 recent slots)");
            let (v, d, r) = c.get(9).unwrap();
            assert_eq!((v, d, r), (&[9u8, 1][..], 9, CacheRegion::Recent));
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
            assert!(Cache::new(0, width).get(3).is_none());
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
#[derive(Default)]
pub struct SearchPath {
    /// Entry `i` is the state at depth `i * PIN_EVERY`.
    ids: Vec<StateId>,
    ends: Vec<usize>,
    data: Vec<u8>,
}

/// Depth sampling of the pinned search path (measured on Kanban-PT-00005 in DFS: pinning
/// every level cost 52 B/state for a stack as deep as the state space).
pub const PIN_EVERY: usize = 8;

impl SearchPath {
    /// Records state `id` inserted as new at `depth`, dropping entries that are no longer on
    /// the path.
    #[inline]
    pub fn push(&mut self, depth: u32, id: StateId, state: &[u8]) {
        let k = depth as usize;
        let slot = k / PIN_EVERY;
        if !k.is_multiple_of(PIN_EVERY) {
            // Entries at depths < k stay ancestors; deeper ones are off the path.
            self.truncate(slot + 1);
            return;
        }
        if slot > self.ids.len() {
            return;
        }
        self.truncate(slot);
        self.ids.push(id);
        self.data.extend_from_slice(state);
        self.ends.push(self.data.len());
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
        if !k.is_multiple_of(PIN_EVERY) {
            return None;
        }
        let k = k / PIN_EVERY;
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
