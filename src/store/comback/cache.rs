//! The full-state cache of a ComBack store (variant 2): a bounded set of state vectors keyed
//! by state number, in two direct-mapped regions.
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

const EMPTY: StateId = u64::MAX;

struct Region {
    ids: Vec<StateId>,
    depths: Vec<u32>,
    /// Fixed-width states: `width` bytes per slot; variable width: one vector per slot.
    data: Data,
}

enum Data {
    Flat { width: usize, bytes: Vec<u8> },
    Boxed(Vec<Vec<u8>>),
}

impl Region {
    fn new(n: usize, width: Option<usize>) -> Self {
        Region {
            ids: vec![EMPTY; n],
            depths: vec![0; n],
            data: match width {
                Some(w) => Data::Flat {
                    width: w,
                    bytes: vec![0; n * w],
                },
                None => Data::Boxed(vec![Vec::new(); n]),
            },
        }
    }

    #[inline(always)]
    fn slot_bytes(&self, i: usize) -> &[u8] {
        match &self.data {
            Data::Flat { width, bytes } => &bytes[i * width..(i + 1) * width],
            Data::Boxed(v) => &v[i],
        }
    }

    #[inline(always)]
    fn put(&mut self, i: usize, id: StateId, depth: u32, state: &[u8]) {
        self.ids[i] = id;
        self.depths[i] = depth;
        match &mut self.data {
            Data::Flat { width, bytes } => {
                bytes[i * *width..(i + 1) * *width].copy_from_slice(state)
            }
            Data::Boxed(v) => {
                v[i].clear();
                v[i].extend_from_slice(state);
            }
        }
    }

    fn ram_bytes(&self) -> u64 {
        let data = match &self.data {
            Data::Flat { bytes, .. } => bytes.capacity(),
            Data::Boxed(v) => v.iter().map(|x| x.capacity() + 24).sum(),
        };
        (self.ids.capacity() * 8 + self.depths.capacity() * 4 + data) as u64
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
        let recent = n.div_ceil(2);
        Cache {
            recent: Region::new(recent, width),
            replayed: Region::new(n - recent, width),
        }
    }

    pub fn recent_len(&self) -> usize {
        self.recent.ids.len()
    }

    #[inline(always)]
    fn recent_slot(&self, id: StateId) -> Option<usize> {
        let n = self.recent.ids.len();
        (n > 0).then(|| (id % n as u64) as usize)
    }

    #[inline(always)]
    fn replayed_slot(&self, id: StateId) -> Option<usize> {
        let n = self.replayed.ids.len();
        (n > 0).then(|| (mix(id) % n as u64) as usize)
    }

    /// The cached vector and depth of `id`, if any.
    #[inline(always)]
    pub fn get(&self, id: StateId) -> Option<(&[u8], u32, CacheRegion)> {
        if let Some(i) = self.recent_slot(id) {
            if self.recent.ids[i] == id {
                return Some((
                    self.recent.slot_bytes(i),
                    self.recent.depths[i],
                    CacheRegion::Recent,
                ));
            }
        }
        if let Some(i) = self.replayed_slot(id) {
            if self.replayed.ids[i] == id {
                return Some((
                    self.replayed.slot_bytes(i),
                    self.replayed.depths[i],
                    CacheRegion::Replayed,
                ));
            }
        }
        None
    }

    /// Whether `id` is cached.
    #[inline(always)]
    pub fn contains(&self, id: StateId) -> bool {
        self.recent_slot(id)
            .is_some_and(|i| self.recent.ids[i] == id)
            || self
                .replayed_slot(id)
                .is_some_and(|i| self.replayed.ids[i] == id)
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
            if self.recent.ids[i] == id {
                self.recent.depths[i] = depth;
            }
        }
        if let Some(i) = self.replayed_slot(id) {
            if self.replayed.ids[i] == id {
                self.replayed.depths[i] = depth;
            }
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
            assert!(c.get(0).is_none(), "0 evicted by 4 and 8");
            let (v, d, r) = c.get(9).unwrap();
            assert_eq!((v, d, r), (&[9u8, 1][..], 9, CacheRegion::Recent));
            c.put_replayed(0, 0, &[0, 1]);
            assert_eq!(c.get(0).unwrap().2, CacheRegion::Replayed);
            c.set_depth(0, 7);
            assert_eq!(c.get(0).unwrap().1, 7);
            assert!(Cache::new(0, width).get(3).is_none());
        }
    }
}
