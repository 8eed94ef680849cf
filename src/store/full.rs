//! The full state table: every state vector kept whole. The exact baseline.
//!
//! Layout: state vectors are appended to one arena in id order (fixed-width states need no
//! offsets; variable-width ones keep an end offset per state). The index is an open-addressing
//! table with linear probing of 8-byte slots `hash_hi:32 | (id + 1):32` (0 = empty): the bucket
//! comes from the low hash bits, the stored high bits filter almost every false comparison, so
//! a lookup costs one slot load plus, on a match, one arena compare. Growing the table
//! re-hashes the arena sequentially, in id order. Hashes are xxh3-64 with seed 0 (stable
//! across builds).
//!
//! Batches (all successors of one state) are inserted in two passes: first every bucket is
//! loaded, so the cache misses of a batch overlap, then the states are probed and inserted in
//! order (a duplicate within the batch is found by the probe of its second occurrence).

use super::slots::Slots;
use super::StoreSpec;
use super::{
    decode_blob, encode_blob, Exactness, Insert, StateBatch, StateId, StateStore, StatesBack,
    StoreMark, Via,
};
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::storage::segment::HashId;
use crate::storage::{Account, Budget, FileMark, SegVec, Storage, VecMark};
use std::sync::Arc;

/// Stable state hash: xxh3-64, seed 0. Its identity is recorded wherever hashes are persisted.
#[inline]
pub fn state_hash(state: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(state)
}

/// Spilled states wider than this also get their hash stored on disk (see `Arena::Seg`).
const HASHES_ABOVE_WIDTH: usize = 32;

/// Largest number of states: ids are stored as `id + 1` in 32 bits.
const MAX_STATES: u64 = u32::MAX as u64 - 1;

/// File names of the spilled state vectors and hashes.
const STATES: &str = "full.states";
const HASHES: &str = "full.hashes";

/// What a checkpoint records (see [`StateStore::checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Mark {
    width: usize,
    count: u64,
    states: VecMark,
    hashes: Option<VecMark>,
}

/// The full state table.
pub struct FullStore {
    /// Fixed state width, when every state has the same length.
    width: Option<usize>,
    /// State vectors in id order: in RAM, or in a segment vector when spilling.
    arena: Arena,
    count: u64,
    /// Open-addressing slots, length a power of two, at most 3/4 full. Always in RAM.
    slots: Slots,
    hashes: Vec<u64>,
    /// The index's account and the budget it claims from, when spilling.
    index_account: Option<(Account, Arc<Budget>)>,
}

/// Where the state vectors live.
enum Arena {
    /// A RAM arena; for variable-width states `ends[i]` is the end of state `i`.
    Ram { bytes: Vec<u8>, ends: Vec<u64> },
    /// A segment vector of fixed-width records (hot window mapped, the rest compressed),
    /// and, for states wider than [`HASHES_ABOVE_WIDTH`] bytes, a second one with each
    /// state's 64-bit hash (LE), read back sequentially to rebuild the index when it grows, so
    /// that growing never decompresses the (wide) state vectors. Narrow states are re-hashed
    /// from the vectors instead: that reads no more than the hashes would take on disk.
    Seg {
        states: Box<SegVec>,
        hashes: Option<Box<SegVec>>,
    },
}

#[inline(always)]
fn slice<'a>(arena: &'a [u8], ends: &[u64], width: Option<usize>, id: usize) -> &'a [u8] {
    match width {
        Some(w) => &arena[id * w..(id + 1) * w],
        None => {
            let end = ends[id] as usize;
            let start = if id == 0 { 0 } else { ends[id - 1] as usize };
            &arena[start..end]
        }
    }
}

/// Slice equality a word at a time: state vectors are short, and an inlined word loop beats
/// a call to `bcmp` on them (measured: ~4.5% of BFS CPU time on Kanban-PT-00005).
#[inline(always)]
pub fn eq_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_ne_bytes(a[i..i + 8].try_into().unwrap());
        let y = u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
        if x != y {
            return false;
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

fn index_alloc_error(cap: usize, e: std::io::Error) -> StoreError {
    StoreError::CapacityExceeded {
        store: "full",
        message: format!(
            "cannot allocate an index of {cap} slots ({} MiB): {e}",
            cap >> 17
        ),
    }
}

/// `--store full` (it has no options of its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FullOptions;

impl StoreSpec for FullOptions {
    fn name(&self) -> &'static str {
        "full"
    }

    /// With the run's storage (under `--memory`, `--spill always` or checkpoints) the state
    /// vectors live in segment files; without, everything stays in RAM.
    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(match storage {
            Some(st) => FullStore::spilling(model.state_len(), st)?,
            None => FullStore::new(model.state_len()),
        }))
    }

    fn resume<'m>(
        &self,
        _model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(FullStore::resume(storage, mark)?))
    }
}

impl FullStore {
    /// A store for states of `width` bytes, or of varying width when `None`, kept in RAM.
    pub fn new(width: Option<usize>) -> Self {
        FullStore {
            width,
            arena: Arena::Ram {
                bytes: Vec::new(),
                ends: Vec::new(),
            },
            count: 0,
            slots: Slots::default(),
            hashes: Vec::new(),
            index_account: None,
        }
    }

    /// A store whose state vectors live in a segment vector of `storage` (only the index
    /// stays in RAM, claimed from the budget). States must have a fixed width.
    pub fn spilling(width: Option<usize>, storage: &Storage) -> Result<Self, StoreError> {
        let Some(w) = width else {
            return Err(StorageError::Invalid(
                "the full store spills only fixed-width states; this model's states vary in width (run without --memory/--spill)".into(),
            )
            .into());
        };
        // A zero-width state (a net without places) is stored as one padding byte: segment
        // records have a width, and such a model has a single state anyway.
        let states = storage.vec(STATES, w.max(1))?;
        let hashes = if w > HASHES_ABOVE_WIDTH {
            Some(Box::new(storage.sequential_vec(
                HASHES,
                8,
                HashId::Xxh3Seed0,
            )?))
        } else {
            None
        };
        let account = storage.budget.account("full.index");
        let mut s = FullStore::new(width);
        s.arena = Arena::Seg {
            states: Box::new(states),
            hashes,
        };
        account.set((s.slots.len() * 8) as u64, 0, 0);
        s.index_account = Some((account, storage.budget.clone()));
        Ok(s)
    }

    /// Reopens a spilling store checkpointed at `mark`; the index is rebuilt from the stored
    /// hashes (or states), as when it grows.
    pub fn resume(storage: &Storage, mark: &StoreMark) -> Result<Self, StoreError> {
        let m: Mark = decode_blob("full", &mark.blob)?;
        let states = storage.open_vec(STATES, m.states)?;
        let hashes = match m.hashes {
            Some(hm) => Some(Box::new(storage.open_sequential_vec(HASHES, hm)?)),
            None => None,
        };
        let account = storage.budget.account("full.index");
        let mut s = FullStore::new(Some(m.width));
        s.arena = Arena::Seg {
            states: Box::new(states),
            hashes,
        };
        s.index_account = Some((account, storage.budget.clone()));
        s.count = m.count;
        s.reserve(0)?;
        Ok(s)
    }

    /// Makes room for `extra` more states without passing the load limit.
    fn reserve(&mut self, extra: u64) -> Result<(), StoreError> {
        let need = self.count + extra;
        if need * 4 <= self.slots.len() as u64 * 3 {
            return Ok(());
        }
        let mut cap = self.slots.len().max(1 << 10);
        while need * 4 > cap as u64 * 3 {
            cap *= 2;
        }
        let mask = cap - 1;
        if let (Some((account, budget)), Arena::Seg { states, hashes }) =
            (&self.index_account, &mut self.arena)
        {
            let bytes = cap as u64 * 8;
            budget.claim(
                "the full-store index",
                bytes,
                states.min_ram_bytes() + hashes.as_ref().map_or(0, |h| h.min_ram_bytes()),
                &format!("{cap} slots of 8 bytes for more than {} states", self.count),
            )?;
            // The old table is rebuilt from the stored hashes (or states), not copied: free it
            // first so old and new never coexist, then let the state cache shrink to what is
            // left.
            self.slots = Slots::default();
            account.set(bytes, 0, 0);
            states.trim_cache()?;
            let mut slots = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
            let mut put = |id: u64, h: u64| {
                let mut i = h as usize & mask;
                while slots[i] != 0 {
                    i = (i + 1) & mask;
                }
                slots[i] = (h & 0xffff_ffff_0000_0000) | (id + 1);
            };
            match hashes {
                Some(hv) => {
                    hv.scan(|id, h| put(id, u64::from_le_bytes(h.try_into().expect("8 bytes"))))?;
                    hv.update_account();
                }
                None => {
                    let w = self.width.unwrap_or(0);
                    states.scan(|id, st| put(id, state_hash(&st[..w])))?
                }
            }
            self.slots = slots;
            states.update_account();
            return Ok(());
        }
        let mut slots = Slots::zeroed(cap).map_err(|e| index_alloc_error(cap, e))?;
        for id in 0..self.count as usize {
            let h = state_hash(self.ram_state(id));
            let mut i = h as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = (h & 0xffff_ffff_0000_0000) | (id as u64 + 1);
        }
        self.slots = slots;
        Ok(())
    }

    fn ram_state(&self, id: usize) -> &[u8] {
        match &self.arena {
            Arena::Ram { bytes, ends } => slice(bytes, ends, self.width, id),
            Arena::Seg { .. } => unreachable!("only called for RAM arenas"),
        }
    }

    /// Finds or inserts a state with precomputed hash `h`; capacity must have been reserved.
    #[inline(always)]
    fn insert_hashed(&mut self, state: &[u8], h: u64) -> Result<Insert, StoreError> {
        let mask = self.slots.len() - 1;
        let hi = h & 0xffff_ffff_0000_0000;
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                break;
            }
            if s & 0xffff_ffff_0000_0000 == hi {
                let id = (s as u32 - 1) as usize;
                let equal = match &self.arena {
                    Arena::Ram { bytes, ends } => {
                        eq_bytes(slice(bytes, ends, self.width, id), state)
                    }
                    Arena::Seg { states, .. } => {
                        states.with(id as u64, |r| eq_bytes(&r[..state.len()], state))?
                    }
                };
                if equal {
                    return Ok(Insert::Seen(id as StateId));
                }
            }
            i = (i + 1) & mask;
        }
        let id = self.count;
        match &mut self.arena {
            Arena::Ram { bytes, ends } => {
                bytes.extend_from_slice(state);
                if self.width.is_none() {
                    ends.push(bytes.len() as u64);
                }
            }
            Arena::Seg { states, hashes } => {
                states.push(if state.is_empty() { &[0] } else { state })?;
                if let Some(hv) = hashes {
                    hv.push(&h.to_le_bytes())?;
                }
            }
        }
        self.slots[i] = hi | (id + 1);
        self.count += 1;
        Ok(Insert::New(id))
    }

    fn check(&self, state: &[u8], extra: u64) -> Result<(), StoreError> {
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
        if self.count + extra > MAX_STATES {
            return Err(StoreError::CapacityExceeded {
                store: "full",
                message: format!("more than {MAX_STATES} states; use a memory-reduced store"),
            });
        }
        Ok(())
    }
}

impl StateStore for FullStore {
    fn name(&self) -> &'static str {
        "full"
    }

    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        self.check(state, 1)?;
        self.reserve(1)?;
        self.insert_hashed(state, state_hash(state))
    }

    fn insert_batch(
        &mut self,
        _parent: StateId,
        _parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        out.clear();
        let n = batch.len();
        if n == 0 {
            return Ok(());
        }
        for i in 0..n {
            self.check(batch.get(i), n as u64)?;
        }
        self.reserve(n as u64)?;
        let mask = self.slots.len() - 1;
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        // Pass 1: hash and touch every bucket so the misses overlap.
        let mut touch = 0u64;
        for i in 0..n {
            let h = state_hash(batch.get(i));
            touch ^= self.slots[h as usize & mask];
            hashes.push(h);
        }
        std::hint::black_box(touch);
        // Pass 2: probe and insert in order.
        for (i, &h) in hashes.iter().enumerate() {
            match self.insert_hashed(batch.get(i), h) {
                Ok(r) => out.push(r),
                Err(e) => {
                    self.hashes = hashes;
                    return Err(e);
                }
            }
        }
        self.hashes = hashes;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn states_back(&self) -> StatesBack {
        StatesBack::Kept
    }

    fn get(&self, id: StateId, out: &mut Vec<u8>) -> Result<bool, StoreError> {
        if id >= self.count {
            return Ok(false);
        }
        out.clear();
        match &self.arena {
            Arena::Ram { bytes, ends } => {
                out.extend_from_slice(slice(bytes, ends, self.width, id as usize))
            }
            // Engines load states in id order (the BFS head): don't let that pass evict the
            // blocks that duplicate checks keep hitting.
            Arena::Seg { states, .. } => {
                let w = self.width.unwrap_or(0);
                states.with_sequential(id, |r| out.extend_from_slice(&r[..w]))?
            }
        }
        Ok(true)
    }

    fn exactness(&self) -> Exactness {
        Exactness::Exact
    }

    fn ram_bytes(&self) -> u64 {
        let arena = match &self.arena {
            Arena::Ram { bytes, ends } => (bytes.capacity() + ends.capacity() * 8) as u64,
            Arena::Seg { states, hashes } => {
                states.ram_bytes() + hashes.as_ref().map_or(0, |h| h.ram_bytes())
            }
        };
        arena + self.slots.len() as u64 * 8
    }

    /// The index (at least its first 1,024 slots) and the state vectors' minimal buffers.
    fn min_ram_bytes(&self) -> u64 {
        let arena = match &self.arena {
            Arena::Ram { .. } => 0,
            Arena::Seg { states, hashes } => {
                states.min_ram_bytes() + hashes.as_ref().map_or(0, |h| h.min_ram_bytes())
            }
        };
        arena + self.slots.len().max(1 << 10) as u64 * 8
    }

    fn disk_bytes(&self) -> u64 {
        match &self.arena {
            Arena::Ram { .. } => 0,
            Arena::Seg { states, hashes } => {
                states.disk_bytes() + hashes.as_ref().map_or(0, |h| h.disk_bytes())
            }
        }
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        let (Arena::Seg { states, hashes }, Some(w)) = (&mut self.arena, self.width) else {
            return Err(StoreError::Invalid {
                store: "full",
                message: "a store in RAM cannot be checkpointed (it needs segment files)".into(),
            });
        };
        let sm = states.flush()?;
        let hm = match hashes {
            Some(h) => Some(h.flush()?),
            None => None,
        };
        let mut files = vec![FileMark::segment(STATES, sm.segment_len)];
        if let Some(hm) = &hm {
            files.push(FileMark::segment(HASHES, hm.segment_len));
        }
        Ok(StoreMark {
            blob: encode_blob(&Mark {
                width: w,
                count: self.count,
                states: sm,
                hashes: hm,
            }),
            files,
        })
    }

    fn sync_accounts(&self) {
        if let Arena::Seg { states, hashes } = &self.arena {
            states.update_account();
            if let Some(hv) = hashes {
                hv.update_account();
            }
        }
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if let Arena::Seg { states, .. } = &self.arena {
            let (hits, misses) = states.cache_counts();
            m.insert("state_cache_hits".into(), hits.into());
            m.insert("state_cache_misses".into(), misses.into());
        }
        m
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
                match s.insert(st, None).unwrap() {
                    Insert::New(id) => {
                        assert_eq!(id, expect_new);
                        expect_new += 1;
                    }
                    Insert::Seen(id) => {
                        let mut out = Vec::new();
                        assert!(s.get(id, &mut out).unwrap());
                        assert_eq!(&out, st);
                    }
                }
            }
            for st in &states {
                let Insert::Seen(id) = s.insert(st, None).unwrap() else {
                    panic!("lost {st:?}")
                };
                let mut out = Vec::new();
                s.get(id, &mut out).unwrap();
                assert_eq!(&out, st);
            }
            assert_eq!(s.len(), expect_new);
        }
    }
}
