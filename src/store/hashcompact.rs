//! Hash compaction (Wolper & Leroy): only a `b`-bit descriptor of each state is kept
//! (`--hash-bits b`), with its state number so the LTS can name states seen before. Two
//! different states with equal descriptors are taken for one: the second is *omitted*
//! (inexact), which the stats report with an estimate of the probability that it happened.
//!
//! Layout: open addressing with linear probing, power-of-two capacity, at most 3/4 full; a
//! slot is the descriptor (8 bytes) and the state number + 1 (4 bytes, 0 = empty). Home slot:
//! the descriptor multiplied by a fixed odd constant, top bits (works for any `b`).
//!
//! Omission estimate, as TLC reports it: with `n` distinct states stored out of `g` generated,
//! each of the `g - n` revisits could have been a new state that collided with one of at most
//! `n` descriptors, so `P(omission) <= n (g - n) / 2^b` (capped at 1).

use super::StoreSpec;
use super::{
    decode_blob, descriptor, encode_blob, Exactness, Insert, StateId, StateStore, StatesBack,
    StoreMark, Via,
};
use crate::error::StoreError;
use crate::model::Model;
use crate::storage::budget::{Account, Budget, MemoryLimit};
use crate::storage::segment::HashId;
use crate::storage::{FileMark, SegVec, Storage, VecMark};
use serde_json::json;
use std::sync::Arc;

const MAX_STATES: u64 = u32::MAX as u64 - 1;

/// `--store hashcompact` and its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HashCompactOptions {
    /// Bits of the state hash kept per state (`--hash-bits`, 1..=64).
    pub bits: u32,
}

impl Default for HashCompactOptions {
    fn default() -> Self {
        HashCompactOptions { bits: 64 }
    }
}

impl StoreSpec for HashCompactOptions {
    fn name(&self) -> &'static str {
        "hashcompact"
    }

    /// A checkpointed run's store logs its descriptors so that a resume can rebuild the
    /// table without the checkpoint copying it; under `--memory` the table is charged to
    /// the budget.
    fn build<'m>(
        &self,
        _model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(match storage {
            Some(st) if st.is_kept() => HashCompactStore::logged(self.bits, st)?.budgeted(st),
            Some(st) => HashCompactStore::new(self.bits)?.budgeted(st),
            None => HashCompactStore::new(self.bits)?,
        }))
    }

    fn resume<'m>(
        &self,
        _model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(HashCompactStore::resume(storage, mark)?))
    }
}

pub struct HashCompactStore {
    bits: u32,
    keys: Vec<u64>,
    ids: Vec<u32>,
    count: u64,
    generated: u64,
    shift: u32,
    /// Checkpointed runs: every new state's descriptor in id order, so that a resume can
    /// rebuild the table (a checkpoint never copies it).
    log: Option<SegVec>,
    /// Under `--memory`: the table's account and the budget a growth must fit in (old and
    /// new tables coexist while it re-inserts).
    budget: Option<(Account, Arc<Budget>)>,
}

/// What a checkpoint records (see [`StateStore::checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Mark {
    bits: u32,
    count: u64,
    generated: u64,
    log: VecMark,
}

const LOG: &str = "hashcompact.log";

#[inline(always)]
fn home(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

impl HashCompactStore {
    pub fn new(bits: u32) -> Result<Self, StoreError> {
        if !(1..=64).contains(&bits) {
            return Err(StoreError::Invalid {
                store: "hashcompact",
                message: format!("hash width {bits} is not in 1..=64"),
            });
        }
        Ok(HashCompactStore {
            bits,
            keys: vec![0; 1 << 10],
            ids: vec![0; 1 << 10],
            count: 0,
            generated: 0,
            shift: 64 - 10,
            log: None,
            budget: None,
        })
    }

    /// Charges the table to `storage`'s budget (when it has a limit): growing past it is
    /// a clear error (exit 6), not a silent overrun.
    pub fn budgeted(mut self, storage: &Storage) -> Self {
        if storage.config.memory != MemoryLimit::Unlimited {
            let a = storage.budget.account("hashcompact.table");
            a.set(self.ram_bytes(), 0, 0);
            self.budget = Some((a, storage.budget.clone()));
        }
        self
    }

    /// A store that logs its descriptors in `storage` (a checkpointed run's directory).
    pub fn logged(bits: u32, storage: &Storage) -> Result<Self, StoreError> {
        let mut s = Self::new(bits)?;
        s.log = Some(storage.sequential_vec(LOG, 8, HashId::None)?);
        Ok(s)
    }

    /// Reopens a store checkpointed at `mark`: the table is rebuilt from the log.
    pub fn resume(storage: &Storage, mark: &StoreMark) -> Result<Self, StoreError> {
        let m: Mark = decode_blob("hashcompact", &mark.blob)?;
        let log = storage.open_sequential_vec(LOG, m.log)?;
        let mut s = Self::new(m.bits)?;
        let mut grown = Ok(());
        log.scan(|id, k| {
            if (id + 1) * 4 > s.keys.len() as u64 * 3 && grown.is_ok() {
                grown = s.grow();
            }
            let k = u64::from_le_bytes(k.try_into().expect("8-byte records"));
            let mask = s.keys.len() - 1;
            let mut i = home(k, s.shift);
            while s.ids[i] != 0 {
                i = (i + 1) & mask;
            }
            s.keys[i] = k;
            s.ids[i] = id as u32 + 1;
        })?;
        grown?;
        s.count = m.count;
        s.generated = m.generated;
        s.log = Some(log);
        Ok(s)
    }

    fn grow(&mut self) -> Result<(), StoreError> {
        let cap = self.keys.len() * 2;
        if let Some((account, budget)) = &self.budget {
            let old = self.ram_bytes();
            budget.claim(
                "the hash-compaction table",
                old + cap as u64 * 12,
                0,
                &format!(
                    "{cap} slots of 12 bytes for more than {} states, while the old table is re-inserted",
                    self.count
                ),
            )?;
            account.set(cap as u64 * 12, 0, 0);
        }
        let shift = self.shift - 1;
        let mut keys = vec![0u64; cap];
        let mut ids = vec![0u32; cap];
        for (i, &raw) in self.ids.iter().enumerate() {
            if raw == 0 {
                continue;
            }
            let k = self.keys[i];
            let mut j = home(k, shift);
            while ids[j] != 0 {
                j = (j + 1) & (cap - 1);
            }
            keys[j] = k;
            ids[j] = raw;
        }
        self.keys = keys;
        self.ids = ids;
        self.shift = shift;
        Ok(())
    }

    /// The estimated probability that at least one state was omitted.
    pub fn omission_probability(&self) -> f64 {
        let n = self.count as f64;
        let g = self.generated as f64;
        (n * (g - n) / 2f64.powi(self.bits as i32)).min(1.0)
    }
}

impl StateStore for HashCompactStore {
    fn name(&self) -> &'static str {
        "hashcompact"
    }

    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        if self.count >= MAX_STATES {
            return Err(StoreError::CapacityExceeded {
                store: "hashcompact",
                message: format!("more than {MAX_STATES} states"),
            });
        }
        if (self.count + 1) * 4 > self.keys.len() as u64 * 3 {
            self.grow()?;
        }
        self.generated += 1;
        let k = descriptor(state, self.bits);
        let mask = self.keys.len() - 1;
        let mut i = home(k, self.shift);
        loop {
            let raw = self.ids[i];
            if raw == 0 {
                break;
            }
            if self.keys[i] == k {
                return Ok(Insert::Seen(raw as u64 - 1));
            }
            i = (i + 1) & mask;
        }
        let id = self.count;
        self.keys[i] = k;
        self.ids[i] = id as u32 + 1;
        self.count += 1;
        if let Some(log) = &mut self.log {
            log.push(&k.to_le_bytes())?;
        }
        Ok(Insert::New(id))
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        let Some(log) = &mut self.log else {
            return Err(StoreError::Invalid {
                store: "hashcompact",
                message: "built without a descriptor log; cannot checkpoint".into(),
            });
        };
        let lm = log.flush()?;
        Ok(StoreMark {
            blob: encode_blob(&Mark {
                bits: self.bits,
                count: self.count,
                generated: self.generated,
                log: lm,
            }),
            files: vec![FileMark::segment(LOG, lm.segment_len)],
        })
    }

    fn disk_bytes(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.disk_bytes())
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn states_back(&self) -> StatesBack {
        StatesBack::No
    }

    fn get(&self, _id: StateId, _out: &mut Vec<u8>) -> Result<bool, StoreError> {
        Ok(false)
    }

    fn exactness(&self) -> Exactness {
        Exactness::Probabilistic {
            omission_probability: self.omission_probability(),
        }
    }

    fn ram_bytes(&self) -> u64 {
        (self.keys.capacity() * 8 + self.ids.capacity() * 4) as u64
    }

    fn summary(&self) -> Option<String> {
        Some(format!(
            "{} states found of {} generated (lossy)",
            self.count, self.generated
        ))
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("hash_bits".into(), json!(self.bits));
        m.insert("generated_states".into(), json!(self.generated));
        m.insert(
            "omission_estimate".into(),
            json!("n*(g-n)/2^b with n distinct, g generated states, b hash bits"),
        );
        m
    }
}
