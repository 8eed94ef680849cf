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

use super::{
    decode_blob, encode_blob, Exactness, Insert, StateStore, StatesBack, StoreMark, Via, UNNUMBERED,
};
use super::{lossy_summary, RunShape, StoreSpec};
use crate::error::StoreError;
use crate::model::Model;
use crate::storage::budget::{MemoryLimit, UNTRACKED_RESERVE};
use crate::storage::segment::HashId;
use crate::storage::{FileMark, SegVec, Storage, VecMark};
use serde_json::json;

pub struct BitstateStore {
    words: Vec<u64>,
    log2_bits: u32,
    k: u32,
    count: u64,
    generated: u64,
    expected_omitted: f64,
    /// Checkpointed runs: every new state's 128-bit hash in id order, so that a resume can
    /// set the same bits again (a checkpoint never copies the bit array).
    log: Option<SegVec>,
}

/// What a checkpoint records (see [`StateStore::checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Mark {
    log2_bits: u32,
    k: u32,
    count: u64,
    generated: u64,
    expected_omitted: f64,
    log: VecMark,
}

/// `--store bitstate` and its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BitstateOptions {
    /// The array has `2^log2_bits` bits; `None`: 2^30 (128 MiB), or under `--memory` the
    /// largest power of two that takes at most half the budget.
    pub log2_bits: Option<u32>,
    /// Hash functions (bits set) per state.
    pub k: u32,
}

impl Default for BitstateOptions {
    fn default() -> Self {
        BitstateOptions {
            log2_bits: None,
            k: 3,
        }
    }
}

impl BitstateOptions {
    /// The array's size: as asked, or 2^30 bits cut down to half the budget.
    fn bits(&self, storage: Option<&Storage>) -> u32 {
        if let Some(b) = self.log2_bits {
            return b;
        }
        match storage.map(|st| st.config.memory) {
            Some(MemoryLimit::Bytes(limit)) => {
                let bytes = limit.saturating_sub(UNTRACKED_RESERVE) / 2;
                (bytes.max(1) * 8).ilog2().clamp(10, 30)
            }
            _ => 30,
        }
    }
}

impl StoreSpec for BitstateOptions {
    fn name(&self) -> &'static str {
        "bitstate"
    }

    fn refuse(&self, run: &RunShape) -> Option<String> {
        run.writes_lts.then(|| {
            "--store bitstate keeps no state numbers, so it cannot write an LTS; drop -o or use another store".to_string()
        })
    }

    /// A checkpointed run's store logs its hashes so that a resume can set the bits again
    /// without the checkpoint copying the array.
    fn build<'m>(
        &self,
        _model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let bits = self.bits(storage);
        Ok(Box::new(match storage {
            Some(st) if st.is_kept() => BitstateStore::logged(bits, self.k, st)?,
            _ => BitstateStore::new(bits, self.k)?,
        }))
    }

    fn resume<'m>(
        &self,
        _model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(BitstateStore::resume(storage, mark)?))
    }
}

const LOG: &str = "bitstate.log";

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
        crate::sys::check_structure(
            &format!("the bit array of 2^{log2_bits} bits (--bitstate-log2-bits)"),
            Some(1u64 << (log2_bits - 3)),
        )?;
        Ok(BitstateStore {
            words: vec![0; 1usize << (log2_bits - 6)],
            log2_bits,
            k,
            count: 0,
            generated: 0,
            expected_omitted: 0.0,
            log: None,
        })
    }

    /// A store that logs its hashes in `storage` (a checkpointed run's directory).
    pub fn logged(log2_bits: u32, k: u32, storage: &Storage) -> Result<Self, StoreError> {
        let mut s = Self::new(log2_bits, k)?;
        s.log = Some(storage.sequential_vec(LOG, 16, HashId::None)?);
        Ok(s)
    }

    /// Reopens a store checkpointed at `mark`: the bits are set again from the log.
    pub fn resume(storage: &Storage, mark: &StoreMark) -> Result<Self, StoreError> {
        let m: Mark = decode_blob("bitstate", &mark.blob)?;
        let log = storage.open_sequential_vec(LOG, m.log)?;
        let mut s = Self::new(m.log2_bits, m.k)?;
        log.scan(|_, h| {
            s.set_bits(u128::from_le_bytes(h.try_into().expect("16-byte records")));
        })?;
        s.count = m.count;
        s.generated = m.generated;
        s.expected_omitted = m.expected_omitted;
        s.log = Some(log);
        Ok(s)
    }

    /// Sets the `k` bits of hash `h`; whether they were all set already.
    #[inline]
    fn set_bits(&mut self, h: u128) -> bool {
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
        all_set
    }
}

impl StateStore for BitstateStore {
    fn name(&self) -> &'static str {
        "bitstate"
    }

    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        self.generated += 1;
        let h = xxhash_rust::xxh3::xxh3_128(state);
        if self.set_bits(h) {
            return Ok(Insert::Seen(UNNUMBERED));
        }
        if let Some(log) = &mut self.log {
            log.push(&h.to_le_bytes())?;
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

    fn states_back(&self) -> StatesBack {
        StatesBack::No
    }

    fn exactness(&self) -> Exactness {
        Exactness::Probabilistic {
            omission_probability: self.expected_omitted.min(1.0),
        }
    }

    fn ram_bytes(&self) -> u64 {
        self.words.capacity() as u64 * 8
    }

    fn disk_bytes(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.disk_bytes())
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        let Some(log) = &mut self.log else {
            return Err(StoreError::Invalid {
                store: "bitstate",
                message: "built without a hash log; cannot checkpoint".into(),
            });
        };
        let lm = log.flush()?;
        Ok(StoreMark {
            blob: encode_blob(&Mark {
                log2_bits: self.log2_bits,
                k: self.k,
                count: self.count,
                generated: self.generated,
                expected_omitted: self.expected_omitted,
                log: lm,
            }),
            files: vec![FileMark::segment(LOG, lm.segment_len)],
        })
    }

    fn summary(&self) -> Option<String> {
        Some(lossy_summary(self.count, self.generated))
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
