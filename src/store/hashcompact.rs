//! Hash compaction (Wolper & Leroy): only a `b`-bit descriptor of each state is kept
//! (`--hash-bits b`), with its state number so the LTS can name states seen before. Two
//! different states with equal descriptors are taken for one: the second is *omitted*
//! (inexact), which the stats report with an estimate of the probability that it happened.
//!
//! Layout: open addressing with linear probing, power-of-two capacity, at most 3/4 full; a
//! slot is the descriptor (8 bytes) and the state number + 1 (4 bytes, 0 = empty). Home slot:
//! the descriptor multiplied by a fixed odd constant, top bits (works for any `b`).
//!
//! Under `--memory` the table is a budgeted structure that spills like the full store's
//! index (docs/ARCHITECTURE.md, "The disk-resident visited set"): past its share of the
//! budget, the descriptors of older states go to sorted runs on disk and the table becomes
//! a window of two tables of recent states. A descriptor found in a run is a match, as in
//! RAM (there is nothing more to compare): spilling changes neither the numbering nor the
//! omission estimate.
//!
//! Omission estimate, as TLC reports it: with `n` distinct states stored out of `g` generated,
//! each of the `g - n` revisits could have been a new state that collided with one of at most
//! `n` descriptors, so `P(omission) <= n (g - n) / 2^b` (capped at 1).

use super::window::{
    delayed_batch_len, index_share, room_at_three_quarters, start_spilling, Spill, WindowHost,
    WindowMark, WindowTable, MIN_TABLE,
};
use super::{
    decode_blob, descriptor, encode_blob, Exactness, Insert, StateBatch, StateId, StateStore,
    StatesBack, StoreMark, Via,
};
use super::{lossy_summary, StoreSpec};
use crate::error::StoreError;
use crate::model::Model;
use crate::storage::budget::{Account, Budget, MemoryLimit};
use crate::storage::runs::HashRuns;
use crate::storage::segment::HashId;
use crate::storage::{FileMark, SegVec, Storage, VecMark};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

const MAX_STATES: u64 = u32::MAX as u64 - 1;

/// `--store hashcompact` and its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HashCompactOptions {
    /// Bits of the state hash kept per state (`--hash-bits`, 1..=64).
    pub bits: u32,
    /// Under a budget, spill once the table would pass this many slots (hidden
    /// `--hashcompact-index-slots`, for tests of the spilled index on small models).
    pub index_slots: Option<u64>,
}

impl Default for HashCompactOptions {
    fn default() -> Self {
        HashCompactOptions {
            bits: 64,
            index_slots: None,
        }
    }
}

impl StoreSpec for HashCompactOptions {
    fn name(&self) -> &'static str {
        "hashcompact"
    }

    /// With a run directory (`--memory`, checkpoints) the store logs its descriptors, so
    /// that a resume or a growth can rebuild the table and a spill can write them to runs;
    /// under `--memory` the table is charged to the budget and spills past its share.
    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let mut s = HashCompactStore::new(self.bits)?;
        s.index_slots = self.index_slots;
        s.width = model.state_len();
        if let Some(st) = storage {
            s.attach(st, None)?;
        }
        Ok(Box::new(s))
    }

    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let mut s = HashCompactStore::resume(storage, mark, self.index_slots)?;
        s.width = model.state_len();
        Ok(Box::new(s))
    }
}

/// One open-addressing table: descriptors and state numbers + 1 (0 = empty), a power-of-two
/// number of slots (none for an empty window half).
#[derive(Default)]
pub struct Table {
    keys: Vec<u64>,
    ids: Vec<u32>,
    shift: u32,
}

impl Table {
    fn with_slots(cap: usize) -> Self {
        debug_assert!(cap.is_power_of_two());
        // Zeroed vectors come from calloc: their pages are not resident until written.
        Table {
            keys: vec![0; cap],
            ids: vec![0; cap],
            shift: 64 - cap.trailing_zeros(),
        }
    }

    fn slots(&self) -> usize {
        self.keys.len()
    }

    fn bytes(&self) -> u64 {
        (self.keys.capacity() * 8 + self.ids.capacity() * 4) as u64
    }

    /// `Ok(id)` of descriptor `k`, or `Err(slot)`: the empty slot where it would go.
    #[inline(always)]
    fn find(&self, k: u64) -> Result<u64, usize> {
        let mask = self.keys.len() - 1;
        let mut i = home(k, self.shift);
        loop {
            let raw = self.ids[i];
            if raw == 0 {
                return Err(i);
            }
            if self.keys[i] == k {
                return Ok(raw as u64 - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of descriptor `k`, if this (possibly empty) table holds it.
    fn get(&self, k: u64) -> Option<u64> {
        if self.keys.is_empty() {
            return None;
        }
        self.find(k).ok()
    }

    fn put(&mut self, k: u64, id: u64) {
        if let Err(i) = self.find(k) {
            self.keys[i] = k;
            self.ids[i] = id as u32 + 1;
        }
    }
}

pub struct HashCompactStore {
    bits: u32,
    /// The table; once spilled, the young half of the window.
    table: Table,
    count: u64,
    generated: u64,
    /// With a run directory: every new state's descriptor in id order, so that a resume or
    /// a growth can rebuild the table and a spill can write runs (never copied by a
    /// checkpoint).
    log: Option<SegVec>,
    /// Under `--memory`: the table's account and the budget a growth must fit in (old and
    /// new tables coexist while it re-inserts).
    budget: Option<(Account, Arc<Budget>)>,
    /// Where runs go and whether they outlive the process.
    run_dir: Option<(PathBuf, bool)>,
    /// First id the young table holds (0 until the index spills).
    young_start: u64,
    spill: Option<Box<Spill<Table>>>,
    index_slots: Option<u64>,
    /// The model's state width, when fixed (what a delayed batch's vectors cost).
    width: Option<usize>,
    /// What a delayed batch takes in RAM, and its scratch: descriptors, run lookups, found.
    batch_account: Account,
    #[allow(clippy::type_complexity)]
    scratch: (Vec<u64>, Vec<(u64, u32)>),
}

/// What a checkpoint records (see [`StateStore::checkpoint`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Mark {
    bits: u32,
    count: u64,
    generated: u64,
    log: VecMark,
    window: Option<WindowMark>,
}

const LOG: &str = "hashcompact.log";

/// Name of the index runs' files (`hashcompact.index.run.G`) and of their account.
const RUNS: &str = "hashcompact.index";

#[inline(always)]
fn home(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// The runs' key of a descriptor: a bijection (so equal keys are equal descriptors) that
/// spreads the few top bits a short descriptor has over the whole word, which the runs'
/// filters and sparse indexes read.
#[inline(always)]
fn run_key(k: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(32)
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
            table: Table::with_slots(1 << 10),
            count: 0,
            generated: 0,
            log: None,
            budget: None,
            run_dir: None,
            young_start: 0,
            spill: None,
            index_slots: None,
            width: None,
            batch_account: Account::detached("bfs.batch"),
            scratch: Default::default(),
        })
    }

    /// Logs the descriptors in `storage` (a new log, or the checkpointed one reopened at
    /// `mark`) and, under a limit, charges the table to its budget: growing past the budget
    /// spills, and what cannot spill is a clear error (exit 6), not a silent overrun.
    fn attach(&mut self, storage: &Storage, mark: Option<VecMark>) -> Result<(), StoreError> {
        self.log = Some(match mark {
            None => storage.sequential_vec(LOG, 8, HashId::None)?,
            Some(m) => storage.open_sequential_vec(LOG, m)?,
        });
        self.run_dir = Some((storage.dir().to_path_buf(), storage.is_kept()));
        if storage.config.memory != MemoryLimit::Unlimited {
            let a = storage.budget.account("hashcompact.table");
            a.set(self.table.bytes(), 0, 0);
            self.budget = Some((a, storage.budget.clone()));
            self.batch_account = storage.budget.account("bfs.batch");
        }
        Ok(())
    }

    /// Reopens a store checkpointed at `mark`: the table (or the window's two tables) is
    /// rebuilt from the log, the runs reopened.
    pub fn resume(
        storage: &Storage,
        mark: &StoreMark,
        index_slots: Option<u64>,
    ) -> Result<Self, StoreError> {
        let m: Mark = decode_blob("hashcompact", &mark.blob)?;
        let mut s = Self::new(m.bits)?;
        s.index_slots = index_slots;
        s.attach(storage, Some(m.log))?;
        s.count = m.count;
        s.generated = m.generated;
        match m.window {
            None => {
                let mut cap = 1 << 10;
                while s.count * 4 > cap as u64 * 3 {
                    cap *= 2;
                }
                s.claim_table(cap, 0)?;
                s.table = s.filled(cap, 0, s.count)?;
            }
            Some(w) => {
                let cap = w.table_cap as usize;
                let old = s.filled(cap, w.old_start, w.young_start)?;
                s.table = s.filled(cap, w.young_start, s.count)?;
                s.young_start = w.young_start;
                s.spill = Some(Box::new(Spill {
                    old,
                    old_start: w.old_start,
                    table_cap: cap,
                    runs: HashRuns::open(storage.dir(), RUNS, storage.budget.clone(), &w.runs)?,
                    rotations: w.rotations,
                }));
            }
        }
        s.publish();
        Ok(s)
    }

    /// A table of `cap` slots holding the states `[from, to)`, read back from the log.
    fn filled(&self, cap: usize, from: u64, to: u64) -> Result<Table, StoreError> {
        let mut t = Table::with_slots(cap);
        self.descriptors_in(from, to, |id, k| {
            t.put(k, id);
            Ok(())
        })?;
        Ok(t)
    }

    /// Calls `f(id, descriptor)` for the states `[from, to)` in id order.
    fn descriptors_in(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, u64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let log = self
            .log
            .as_ref()
            .expect("only a logged store reads its log");
        let key = |r: &[u8]| u64::from_le_bytes(r.try_into().expect("8-byte records"));
        if from == 0 && to == log.len() {
            let mut err = Ok(());
            log.scan(|id, r| {
                if err.is_ok() {
                    err = f(id, key(r));
                }
            })?;
            return err;
        }
        for id in from..to {
            f(id, log.with_sequential(id, key)?)?;
        }
        Ok(())
    }

    /// Claims a table of `cap` slots next to `others` bytes that exist meanwhile, from the
    /// budget or the machine's ceiling.
    fn claim_table(&self, cap: usize, others: u64) -> Result<(), StoreError> {
        let bytes = cap as u64 * 12;
        match &self.budget {
            Some((account, budget)) => {
                budget.claim(
                    "the hash-compaction table",
                    others + bytes,
                    0,
                    &format!(
                        "{cap} slots of 12 bytes for more than {} states",
                        self.count
                    ),
                )?;
                account.set(others + bytes, 0, 0);
            }
            None => crate::sys::check_ceiling("the hash-compaction table", bytes)?,
        }
        Ok(())
    }

    /// Makes room for `extra` more states in the young table: grows it, or under a budget
    /// whose share the larger table would pass, spills; once spilled, rotates the window.
    fn reserve(&mut self, extra: u64) -> Result<(), StoreError> {
        if room_at_three_quarters(self, "hashcompact", extra)? {
            return Ok(());
        }
        let need = self.count - self.young_start + extra;
        let mut cap = self.table.slots();
        while need * 4 > cap as u64 * 3 {
            cap *= 2;
        }
        if let (Some((_, budget)), Some(_)) = (&self.budget, &self.log) {
            let over_share = match budget.limit() {
                MemoryLimit::Bytes(limit) => cap as u64 * 12 > index_share(limit),
                MemoryLimit::Unlimited => false,
            } || self.index_slots.is_some_and(|max| cap as u64 > max);
            // Rebuilt from the log, the larger table never coexists with the old one.
            let claim = self.claim_table(cap, 0);
            if (over_share || claim.is_err()) && self.table.slots() >= MIN_TABLE * 2 {
                return start_spilling(self);
            }
            claim?;
            self.table = Table::default();
            self.table = self.filled(cap, 0, self.count)?;
            return Ok(());
        }
        // Without a budget (or a log), the old table is re-inserted into the new one.
        self.claim_table(cap, self.table.bytes())?;
        let mut t = Table::with_slots(cap);
        for (i, &raw) in self.table.ids.iter().enumerate() {
            if raw != 0 {
                t.put(self.table.keys[i], raw as u64 - 1);
            }
        }
        self.table = t;
        self.publish();
        Ok(())
    }

    /// Finds or inserts descriptor `k` (room reserved); the runs are asked only if `runs`.
    fn insert_key(&mut self, k: u64, runs: bool) -> Result<Insert, StoreError> {
        let slot = match self.table.find(k) {
            Ok(id) => return Ok(Insert::Seen(id)),
            Err(slot) => slot,
        };
        if let Some(sp) = &mut self.spill {
            if let Some(id) = sp.old.get(k) {
                return Ok(Insert::Seen(id));
            }
            let rk = run_key(k);
            if runs && sp.runs.may_contain(rk) {
                if let Some(id) = sp.runs.find(rk, |_| Ok(true))? {
                    return Ok(Insert::Seen(id));
                }
            }
        }
        let id = self.count;
        self.table.keys[slot] = k;
        self.table.ids[slot] = id as u32 + 1;
        self.count += 1;
        if let Some(log) = &mut self.log {
            log.push(&k.to_le_bytes())?;
        }
        Ok(Insert::New(id))
    }

    fn check_room(&self, extra: u64) -> Result<(), StoreError> {
        if self.count + extra > MAX_STATES {
            return Err(StoreError::CapacityExceeded {
                store: "hashcompact",
                message: format!("more than {MAX_STATES} states"),
            });
        }
        Ok(())
    }

    /// A delayed batch once the index has spilled: (1) the window; (2) what some run's
    /// filter lets through, sorted and looked up in one sweep of the runs; (3) the rest
    /// inserted in order, which numbers them as a one-by-one insertion would.
    fn insert_many_spilled(
        &mut self,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        const OPEN: StateId = StateId::MAX;
        let (mut keys, mut maybe) = std::mem::take(&mut self.scratch);
        keys.clear();
        maybe.clear();
        let sp = self.spill.as_mut().expect("spilled");
        for i in 0..batch.len() {
            let k = descriptor(batch.get(i), self.bits);
            keys.push(k);
            let found = self.table.get(k).or_else(|| sp.old.get(k));
            out.push(Insert::Seen(found.unwrap_or(OPEN)));
            if found.is_none() && sp.runs.may_contain(run_key(k)) {
                maybe.push((run_key(k), i as u32));
            }
        }
        if !maybe.is_empty() {
            maybe.sort_unstable();
            let mut found = 0;
            let r = sp.runs.find_sorted(&maybe, |i, id| {
                if out[i as usize] == Insert::Seen(OPEN) {
                    out[i as usize] = Insert::Seen(id);
                    found += 1;
                }
            });
            if let Err(e) = r {
                self.scratch = (keys, maybe);
                return Err(e.into());
            }
            // A descriptor is stored once, so every id found is the match.
            for _ in 0..found {
                sp.runs.count_outcome(true);
            }
        }
        let mut r = Ok(());
        for (i, &k) in keys.iter().enumerate() {
            if out[i] == Insert::Seen(OPEN) {
                match self.insert_key(k, false) {
                    Ok(x) => out[i] = x,
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
        }
        self.scratch = (keys, maybe);
        r
    }

    /// The estimated probability that at least one state was omitted.
    pub fn omission_probability(&self) -> f64 {
        let n = self.count as f64;
        let g = self.generated as f64;
        (n * (g - n) / 2f64.powi(self.bits as i32)).min(1.0)
    }
}

impl WindowTable for Table {
    fn window_slots(&self) -> usize {
        self.slots()
    }

    fn window_bytes(&self) -> u64 {
        self.bytes()
    }
}

impl WindowHost for HashCompactStore {
    type Table = Table;
    type Shape = ();
    const RUNS: &'static str = RUNS;

    fn runs_place(&self) -> (PathBuf, bool, Arc<Budget>) {
        let (dir, kept) = self.run_dir.clone().expect("only a logged store spills");
        let budget = self.budget.as_ref().expect("only a budgeted store spills");
        (dir, kept, budget.1.clone())
    }

    fn window(&mut self) -> (&mut Table, &mut u64, &mut Option<Box<Spill<Table>>>) {
        (&mut self.table, &mut self.young_start, &mut self.spill)
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn empty_table(&self) -> Table {
        Table::default()
    }

    fn new_table(&self, cap: usize, _shape: ()) -> Result<Table, StoreError> {
        Ok(Table::with_slots(cap))
    }

    fn charge(&mut self, extra: u64) {
        if let Some((account, _)) = &self.budget {
            account.set(self.ram_bytes() + extra, 0, 0);
        }
    }

    /// Nothing sizes itself from the budget here.
    fn trim_caches(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn publish(&mut self) {
        self.charge(0);
    }

    fn pairs_in<F>(&mut self, from: u64, to: u64, mut f: F) -> Result<(), StoreError>
    where
        F: FnMut(u64, u64) -> Result<(), StoreError>,
    {
        self.descriptors_in(from, to, |id, k| f(id, run_key(k)))
    }
}

impl StateStore for HashCompactStore {
    fn index_spills(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "hashcompact"
    }

    fn insert(&mut self, state: &[u8], _via: Option<Via>) -> Result<Insert, StoreError> {
        self.check_room(1)?;
        self.reserve(1)?;
        self.generated += 1;
        self.insert_key(descriptor(state, self.bits), true)
    }

    /// Under a budget, so that once the index has spilled, lookups that reach the runs are
    /// batched (sorted against the runs in one sweep).
    fn delayed_batch(&self) -> Option<usize> {
        let (_, budget) = self.budget.as_ref()?;
        self.log.as_ref()?;
        delayed_batch_len(
            budget.limit(),
            self.width,
            self.spill.as_deref(),
            self.table.slots(),
            &self.batch_account,
            None,
        )
    }

    fn insert_many(
        &mut self,
        _parents: &[(StateId, u32)],
        _parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        out.clear();
        let n = batch.len() as u64;
        self.check_room(n)?;
        self.reserve(n)?;
        self.generated += n;
        if self.spill.is_some() {
            return self.insert_many_spilled(batch, out);
        }
        for i in 0..batch.len() {
            out.push(self.insert_key(descriptor(batch.get(i), self.bits), true)?);
        }
        Ok(())
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        let Some(log) = &mut self.log else {
            return Err(StoreError::Invalid {
                store: "hashcompact",
                message: "built without a descriptor log; cannot checkpoint".into(),
            });
        };
        let lm = log.flush()?;
        let mut files = vec![FileMark::segment(LOG, lm.segment_len)];
        let window = match &mut self.spill {
            None => None,
            Some(sp) => Some(sp.checkpoint(self.young_start, &mut files)?),
        };
        Ok(StoreMark {
            blob: encode_blob(&Mark {
                bits: self.bits,
                count: self.count,
                generated: self.generated,
                log: lm,
                window,
            }),
            files,
        })
    }

    fn disk_bytes(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.disk_bytes())
            + self.spill.as_ref().map_or(0, |sp| sp.runs.disk_bytes())
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn states_back(&self) -> StatesBack {
        StatesBack::No
    }

    fn exactness(&self) -> Exactness {
        Exactness::Probabilistic {
            omission_probability: self.omission_probability(),
        }
    }

    /// The window's old half is counted at its full size once spilling: the runs' filters
    /// and the batch must not grow into it between rotations.
    fn ram_bytes(&self) -> u64 {
        let old = self
            .spill
            .as_ref()
            .map_or(0, |sp| sp.old.bytes().max(sp.table_cap as u64 * 12));
        self.table.bytes() + old
    }

    fn summary(&self) -> Option<String> {
        Some(lossy_summary(self.count, self.generated))
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("hash_bits".into(), json!(self.bits));
        m.insert("generated_states".into(), json!(self.generated));
        m.insert(
            "omission_estimate".into(),
            json!("n*(g-n)/2^b with n distinct, g generated states, b hash bits"),
        );
        if let Some(sp) = &self.spill {
            sp.report(&mut m, self.count);
        }
        m
    }
}
