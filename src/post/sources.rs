//! The set of states that have an outgoing transition, collected while edges stream by, so
//! that the streaming tools (`info`, `convert`) can count deadlocks.
//!
//! A bitset of one bit per *declared* state is the obvious structure, but the declared count
//! comes from the file's header: a 4-line `.aut` file can declare 2^35 states and would cost
//! 4 GiB. The set therefore starts sparse (a map from 64-state word to bits, holding only the
//! words that edges touch) unless the dense bitset is small anyway (≤ 1 MiB), and turns dense
//! once the map would cost more than the bitset. Its memory is at most about the smaller of
//! `states / 8` bytes and 32 bytes per distinct source word actually read.

use crate::error::PostError;
use crate::post::graph::alloc_vec;
use hashbrown::HashMap;

/// Dense from the start when the bitset takes at most this many 64-bit words (1 MiB).
const DENSE_WORDS: u64 = 1 << 17;
/// Bytes one sparse word costs, counting the map's spare capacity (16-byte entries, at most
/// 7/8 full, doubling growth).
const SPARSE_WORD_BYTES: u64 = 32;

enum Repr {
    Dense(Vec<u64>),
    Sparse(HashMap<u64, u64>),
}

/// A set of state numbers below a declared count, sized by what is inserted (see the module
/// documentation).
pub struct SourceSet {
    words: u64,
    repr: Repr,
    /// Sparse mode: the word being filled. Files list a state's transitions together (and
    /// BFS-numbered sources in order), so a run of edges touches the map once.
    pending: Option<(u64, u64)>,
}

impl SourceSet {
    /// An empty set for states `0..states`.
    pub fn new(states: u64) -> Result<Self, PostError> {
        let words = states.div_ceil(64);
        let repr = if words <= DENSE_WORDS {
            Repr::Dense(alloc_vec(words as usize, 0u64, "the deadlock bitset")?)
        } else {
            Repr::Sparse(HashMap::new())
        };
        Ok(SourceSet {
            words,
            repr,
            pending: None,
        })
    }

    /// Adds state `s` (below the declared count: the readers check that).
    pub fn insert(&mut self, s: u64) -> Result<(), PostError> {
        let (w, bit) = (s / 64, 1u64 << (s % 64));
        match &mut self.repr {
            Repr::Dense(v) => {
                v[w as usize] |= bit;
                Ok(())
            }
            Repr::Sparse(_) => match &mut self.pending {
                Some((pw, bits)) if *pw == w => {
                    *bits |= bit;
                    Ok(())
                }
                _ => {
                    self.flush()?;
                    match &mut self.repr {
                        // The flush may have turned the set dense.
                        Repr::Dense(v) => v[w as usize] |= bit,
                        Repr::Sparse(_) => self.pending = Some((w, bit)),
                    }
                    Ok(())
                }
            },
        }
    }

    /// Moves the pending word into the map, growing it (or turning dense) as needed.
    fn flush(&mut self) -> Result<(), PostError> {
        let Some((w, bits)) = self.pending.take() else {
            return Ok(());
        };
        let map = match &mut self.repr {
            Repr::Sparse(map) => map,
            Repr::Dense(v) => {
                v[w as usize] |= bits;
                return Ok(());
            }
        };
        if let Some(old) = map.get_mut(&w) {
            *old |= bits;
            return Ok(());
        }
        if map.len() == map.capacity() {
            // The bitset is now the smaller structure: switch if it can be had (if not, the
            // map keeps growing as long as memory allows).
            if (map.len() as u64 + 1) * SPARSE_WORD_BYTES >= self.words * 8 {
                if let Ok(mut dense) = alloc_vec(self.words as usize, 0u64, "the deadlock bitset") {
                    for (&k, &v) in map.iter() {
                        dense[k as usize] |= v;
                    }
                    dense[w as usize] |= bits;
                    self.repr = Repr::Dense(dense);
                    return Ok(());
                }
            }
            map.try_reserve(map.len().max(64)).map_err(|_| {
                PostError::Limit(format!(
                    "cannot allocate memory for the {} words of the deadlock set",
                    2 * map.len()
                ))
            })?;
        }
        map.insert(w, bits);
        Ok(())
    }

    /// Number of states in the set.
    pub fn count(&mut self) -> Result<u64, PostError> {
        self.flush()?;
        Ok(match &self.repr {
            Repr::Dense(v) => v.iter().map(|w| w.count_ones() as u64).sum(),
            Repr::Sparse(m) => m.values().map(|w| w.count_ones() as u64).sum(),
        })
    }

    /// Whether the set is still sparse (for tests).
    pub fn is_sparse(&self) -> bool {
        matches!(self.repr, Repr::Sparse(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_set_counts_like_a_bitset_and_turns_dense_when_full() {
        let n = 1u64 << 26; // 2^20 words: starts sparse
        let mut s = SourceSet::new(n).unwrap();
        assert!(s.is_sparse());
        let mut x = 12345u64;
        let mut reference = std::collections::HashSet::new();
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 20) % n;
            reference.insert(v);
            s.insert(v).unwrap();
            s.insert(v).unwrap();
        }
        assert!(s.is_sparse());
        assert_eq!(s.count().unwrap(), reference.len() as u64);
        // Touching every word makes the bitset the smaller structure.
        for v in (0..n).step_by(64) {
            s.insert(v).unwrap();
        }
        assert!(!s.is_sparse());
        let extra = (0..n)
            .step_by(64)
            .filter(|v| !reference.contains(v))
            .count() as u64;
        assert_eq!(s.count().unwrap(), reference.len() as u64 + extra);
    }

    #[test]
    fn huge_declared_counts_cost_nothing_up_front() {
        let mut s = SourceSet::new(u64::MAX).unwrap();
        s.insert(u64::MAX - 1).unwrap();
        s.insert(0).unwrap();
        assert_eq!(s.count().unwrap(), 2);
        let mut small = SourceSet::new(100).unwrap();
        assert!(!small.is_sparse());
        small.insert(99).unwrap();
        assert_eq!(small.count().unwrap(), 1);
    }
}
