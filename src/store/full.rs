//! The full state table: every state vector kept whole. The exact baseline.
//!
//! Layout: state vectors are appended to one arena in id order (fixed-width states need no
//! offsets; variable-width ones keep an end offset per state). The index is a hashbrown
//! `HashTable` of 8-byte entries `(id: u32, hash_hi: u32)`. The table hash is derived from
//! `hash_hi` alone, so growing the table never touches the arena; `hash_hi` also filters almost
//! all byte comparisons on probe. Hashes are xxh3-64 with a fixed seed (stable across builds).

use super::{Exactness, Insert, StateId, StateStore};
use crate::error::StoreError;
use hashbrown::HashTable;

/// Stable state hash: xxh3-64, seed 0. Its identity is recorded wherever hashes are persisted.
#[inline]
pub fn state_hash(state: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(state)
}

#[inline(always)]
fn table_hash(hi: u32) -> u64 {
    // Spread the 32 stored bits over 64 so hashbrown's bucket (low) and tag (top 7) bits differ.
    (hi as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (hi as u64)
}

#[derive(Clone, Copy)]
struct Entry {
    id: u32,
    hi: u32,
}

/// The full state table.
pub struct FullStore {
    /// Fixed state width, when every state has the same length.
    width: Option<usize>,
    arena: Vec<u8>,
    /// For variable-width states: `arena[ends[i-1]..ends[i]]` is state `i`.
    ends: Vec<u64>,
    count: u64,
    table: HashTable<Entry>,
}

impl FullStore {
    /// A store for states of `width` bytes, or of varying width when `None`.
    pub fn new(width: Option<usize>) -> Self {
        FullStore {
            width,
            arena: Vec::new(),
            ends: Vec::new(),
            count: 0,
            table: HashTable::new(),
        }
    }

    #[inline(always)]
    fn slice(&self, id: u32) -> &[u8] {
        match self.width {
            Some(w) => &self.arena[id as usize * w..(id as usize + 1) * w],
            None => {
                let end = self.ends[id as usize] as usize;
                let start = if id == 0 {
                    0
                } else {
                    self.ends[id as usize - 1] as usize
                };
                &self.arena[start..end]
            }
        }
    }
}

impl StateStore for FullStore {
    fn name(&self) -> &'static str {
        "full"
    }

    #[inline]
    fn insert(&mut self, state: &[u8]) -> Result<Insert, StoreError> {
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
        let h = state_hash(state);
        let hi = (h >> 32) as u32;
        let th = table_hash(hi);
        let (arena, width, ends) = (&self.arena, self.width, &self.ends);
        let matches = |e: &Entry| {
            e.hi == hi && {
                let s = match width {
                    Some(w) => &arena[e.id as usize * w..(e.id as usize + 1) * w],
                    None => {
                        let end = ends[e.id as usize] as usize;
                        let start = if e.id == 0 {
                            0
                        } else {
                            ends[e.id as usize - 1] as usize
                        };
                        &arena[start..end]
                    }
                };
                s == state
            }
        };
        if let Some(e) = self.table.find(th, matches) {
            return Ok(Insert::Seen(e.id as StateId));
        }
        let id = u32::try_from(self.count).map_err(|_| StoreError::CapacityExceeded {
            store: "full",
            message: "more than 4,294,967,295 states; use a memory-reduced store".into(),
        })?;
        self.arena.extend_from_slice(state);
        if self.width.is_none() {
            self.ends.push(self.arena.len() as u64);
        }
        self.table
            .insert_unique(th, Entry { id, hi }, |e| table_hash(e.hi));
        self.count += 1;
        Ok(Insert::New(id as StateId))
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn get(&self, id: StateId, out: &mut Vec<u8>) -> bool {
        if id >= self.count {
            return false;
        }
        out.clear();
        out.extend_from_slice(self.slice(id as u32));
        true
    }

    fn exactness(&self) -> Exactness {
        Exactness::Exact
    }

    fn ram_bytes(&self) -> u64 {
        (self.arena.capacity()
            + self.ends.capacity() * 8
            + self.table.capacity() * (std::mem::size_of::<Entry>() + 1)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                match s.insert(st).unwrap() {
                    Insert::New(id) => {
                        assert_eq!(id, expect_new);
                        expect_new += 1;
                    }
                    Insert::Seen(id) => {
                        let mut out = Vec::new();
                        assert!(s.get(id, &mut out));
                        assert_eq!(&out, st);
                    }
                }
            }
            for st in &states {
                let Insert::Seen(id) = s.insert(st).unwrap() else {
                    panic!("lost {st:?}")
                };
                let mut out = Vec::new();
                s.get(id, &mut out);
                assert_eq!(&out, st);
            }
            assert_eq!(s.len(), expect_new);
        }
    }
}
