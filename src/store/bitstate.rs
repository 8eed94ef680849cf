//! Bit-state hashing (Holzmann's "supertrace"): `k` hash functions set `k` bits of a bit
//! array of `m = 2^log2_bits` bits per state; a state is taken as seen when all its `k` bits
//! are already set. Nothing else is stored: states seen before have no number
//! ([`UNNUMBERED`]), so this store can count states and transitions but cannot write an LTS.
//!
//! The `k` bit positions come from one stable 128-bit hash (xxh3-128, seed 0) by double
//! hashing, `h1 + i·h2 mod m` (Kirsch & Mitzenmacher), so they are stable across builds.
//!
//! Omission estimate: the `i`-th new state is omitted when its `k` bits were all set by the
//! `i - 1` states before it, with probability about `p_i = (1 - e^{-k(i-1)/m})^k`; the stats
//! report the union bound `min(1, Σ p_i)` over the states found, which is also the expected
//! number of omitted states (`expected_omitted_states`).

use super::{Exactness, Insert, StateId, StateStore, Via, UNNUMBERED};
use crate::error::StoreError;
use serde_json::json;

pub struct BitstateStore {
    words: Vec<u64>,
    log2_bits: u32,
    k: u32,
    count: u64,
    generated: u64,
    expected_omitted: f64,
}

impl BitstateStore {
    /// A bit array of `2^log2_bits` bits (10..=40) and `k` (1..=32) hash functions.
    pub fn new(log2_bits: u32, k: u32) -> Result<Self, StoreError> {
        if !(10..=40).contains(&log2_bits) || !(1..=32).contains(&k) {
            return Err(StoreError::Invalid {
                store: "bitstate",
                message: format!(
                    "bit array of 2^{log2_bits} bits with {k} hash functions: need 2^10..2^40 bits and 1..=32 functions"
                ),
            });
        }
        Ok(BitstateStore {
            words: vec![0; 1usize << (log2_bits - 6)],
            log2_bits,
            k,
            count: 0,
            generated: 0,
            expected_omitted: 0.0,
        })
    }
}

impl StateStore for BitstateStore {
    fn name(&self) -> &'static str {
        "bitstate"
    }

    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        self.generated += 1;
        let h = xxhash_rust::xxh3::xxh3_128(state);
        let (h1, h2) = (h as u64, ((h >> 64) as u64) | 1);
        let mask = (1u64 << self.log2_bits) - 1;
        let mut all_set = true;
        for i in 0..self.k as u64 {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) & mask;
            let (w, b) = ((bit >> 6) as usize, bit & 63);
            if self.words[w] & (1 << b) == 0 {
                all_set = false;
                self.words[w] |= 1 << b;
            }
        }
        if all_set {
            return Ok(Insert::Seen(UNNUMBERED));
        }
        let m = (1u64 << self.log2_bits) as f64;
        let k = self.k as f64;
        self.expected_omitted += (1.0 - (-k * self.count as f64 / m).exp()).powf(k);
        let id = self.count;
        self.count += 1;
        Ok(Insert::New(id))
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn get(&self, _id: StateId, _out: &mut Vec<u8>) -> Result<bool, StoreError> {
        Ok(false)
    }

    fn exactness(&self) -> Exactness {
        Exactness::Probabilistic {
            omission_probability: self.expected_omitted.min(1.0),
        }
    }

    fn ram_bytes(&self) -> u64 {
        self.words.capacity() as u64 * 8
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("bitstate_log2_bits".into(), json!(self.log2_bits));
        m.insert("bitstate_hash_functions".into(), json!(self.k));
        m.insert("generated_states".into(), json!(self.generated));
        m.insert(
            "expected_omitted_states".into(),
            json!(self.expected_omitted),
        );
        m.insert(
            "omission_estimate".into(),
            json!("sum over new states i of (1-exp(-k*i/m))^k (union bound)"),
        );
        m
    }
}
