//! What the stores whose index spills to disk share (the full store and ComBack; see
//! docs/ARCHITECTURE.md, "The disk-resident visited set"): the window's checkpoint record,
//! the budget share of the index, the size of a delayed batch and the spilled index's stats.

use crate::error::{StorageError, StoreError};
use crate::storage::budget::UNTRACKED_RESERVE;
use crate::storage::runs::{HashRuns, RunsMark};
use crate::storage::{Account, Budget, FileMark, MemoryLimit};
use std::path::PathBuf;
use std::sync::Arc;

/// Which part of a spilled index a lookup asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything; a state not found is inserted.
    All,
    /// The RAM window only; nothing is inserted (a delayed batch's first step).
    Window,
    /// The young table only (the rest was asked already); a state not found is inserted.
    Young,
}

/// The smallest window table, in slots: below this, spilling would rotate for every few
/// states.
pub const MIN_TABLE: usize = 1 << 12;

/// An index once it has outgrown its share of the budget: the store's own table is the
/// young half of a window of two tables of recent states in RAM; `old` is the other half,
/// and everything older is in sorted runs on disk (see docs/ARCHITECTURE.md, "The
/// disk-resident visited set"). `T` is the store's table type.
pub struct Spill<T> {
    /// The previous window table: ids `[old_start, young_start)` (empty right after
    /// spilling began).
    pub old: T,
    pub old_start: u64,
    /// Capacity of each window table, in slots (fixed once spilling began).
    pub table_cap: usize,
    pub runs: HashRuns,
    /// Window rotations (each writes the old table's states to the runs).
    pub rotations: u64,
}

impl<T> Spill<T> {
    /// The error of a batch of `extra` successors that a window table cannot take whole.
    pub fn too_small(&self, store: &'static str, extra: u64) -> crate::error::StoreError {
        crate::error::StoreError::CapacityExceeded {
            store,
            message: format!(
                "a batch of {extra} successors does not fit the index window of {} slots; raise --memory",
                self.table_cap
            ),
        }
    }

    /// The window's checkpoint record, given the young table's first id; the runs' files go
    /// to `files`.
    pub fn checkpoint(
        &mut self,
        young_start: u64,
        files: &mut Vec<FileMark>,
    ) -> Result<WindowMark, StorageError> {
        let (runs, run_files) = self.runs.checkpoint()?;
        files.extend(
            run_files
                .into_iter()
                .map(|(name, len)| FileMark { name, len }),
        );
        Ok(WindowMark {
            old_start: self.old_start,
            young_start,
            table_cap: self.table_cap as u64,
            rotations: self.rotations,
            runs,
        })
    }

    /// The spilled index's figures (`index_*` keys of `--stats-json`), for a store of
    /// `count` states.
    pub fn report(&self, m: &mut serde_json::Map<String, serde_json::Value>, count: u64) {
        report_runs(m, &self.runs, count - self.old_start, self.rotations);
    }
}

/// A store's index table, one half of a window.
pub trait WindowTable {
    /// Its slots.
    fn window_slots(&self) -> usize;
    /// The RAM its slots take.
    fn window_bytes(&self) -> u64;
}

/// What the window's life cycle ([`start_spilling`], [`rotate`], [`flush_to_runs`]) needs
/// from a store whose index spills: its tables, its accounts and its (hash, id) pairs. Each
/// store implements only these; the order of frees, charges and allocations that keeps the
/// peak within the budget is written once, below.
pub trait WindowHost {
    /// The store's index table (one window half).
    type Table: WindowTable;
    /// What a new window table is made like, fixed before the table in use is handed over
    /// (Δ: its hash bits; `()` elsewhere).
    type Shape: Copy + Default;
    /// Stem of the runs' file names and account (`full.index` → `full.index.run.G`).
    const RUNS: &'static str;

    /// Where the runs go, whether they outlive the process, and the budget they claim from.
    fn runs_place(&self) -> (PathBuf, bool, Arc<Budget>);
    /// The young table, the first id it holds, and the spill (`None` until spilling began).
    #[allow(clippy::type_complexity)]
    fn window(
        &mut self,
    ) -> (
        &mut Self::Table,
        &mut u64,
        &mut Option<Box<Spill<Self::Table>>>,
    );
    /// States stored (the next id).
    fn count(&self) -> u64;
    /// A table that holds no memory worth counting.
    fn empty_table(&self) -> Self::Table;
    /// The shape of a window table of `cap` slots, from the young table in use (default:
    /// the one shape there is).
    fn shape(&mut self, _cap: usize) -> Self::Shape {
        Self::Shape::default()
    }
    /// The slots of each of the two window tables that replace a young table of `cap` slots
    /// when the index first spills (default: half each, so that the index's RAM stays
    /// what it was).
    fn spilled_window_slots(&self, cap: usize) -> usize {
        cap / 2
    }
    /// An empty table of `cap` slots (allocated zeroed: its pages are not resident until
    /// written, so it may exist a moment before it is charged).
    fn new_table(&self, cap: usize, shape: Self::Shape) -> Result<Self::Table, StoreError>;
    /// Charges the index's tables plus `extra` bytes (a sort buffer, a table about to be
    /// installed) to the store's account.
    fn charge(&mut self, extra: u64);
    /// Lets the caches that size themselves from the budget shrink to what it leaves them.
    fn trim_caches(&mut self) -> Result<(), StoreError>;
    /// Tells the budget what the store holds now.
    fn publish(&mut self);
    /// Calls `f(id, hash)` for the states `[from, to)` in id order.
    fn pairs_in<F>(&mut self, from: u64, to: u64, f: F) -> Result<(), StoreError>
    where
        F: FnMut(u64, u64) -> Result<(), StoreError>;
}

/// Writes the (hash, id) pairs of states `[from, to)` to `runs`, sorted in chunks of at most
/// `chunk` pairs (callers pass the bytes of the table they just freed, as 16-byte pairs: the
/// sort buffer takes its place). The buffer and the runs' new filters are charged before
/// they exist, so that the caches give way first.
pub fn flush_to_runs<H: WindowHost>(
    h: &mut H,
    runs: &mut HashRuns,
    from: u64,
    to: u64,
    chunk: usize,
) -> Result<(), StoreError> {
    let chunk = chunk.max(1024).min((to - from).max(1) as usize);
    h.charge(chunk as u64 * std::mem::size_of::<(u64, u32)>() as u64);
    runs.reserve_filter(to - from);
    h.trim_caches()?;
    let mut feed = runs.feed(chunk, to - from);
    h.pairs_in(from, to, |id, x| Ok(feed.push(x, id as u32)?))?;
    feed.finish()?;
    h.publish();
    Ok(())
}

/// The table has outgrown its share of the budget: every state indexed so far goes to the
/// runs, and the window starts over with two tables of [`WindowHost::spilled_window_slots`]
/// each (half the size, or a third for ComBack).
pub fn start_spilling<H: WindowHost>(h: &mut H) -> Result<(), StoreError> {
    let (cap, bytes) = {
        let (young, _, _) = h.window();
        (young.window_slots(), young.window_bytes())
    };
    let each = h.spilled_window_slots(cap).max(MIN_TABLE);
    let shape = h.shape(each);
    let (dir, kept, budget) = h.runs_place();
    let mut runs = HashRuns::new(&dir, H::RUNS, kept, budget);
    let empty = h.empty_table();
    *h.window().0 = empty;
    let n = h.count();
    flush_to_runs(h, &mut runs, 0, n, (bytes / 16) as usize)?;
    let old = h.empty_table();
    let (_, young_start, spill) = h.window();
    *spill = Some(Box::new(Spill {
        old,
        old_start: n,
        table_cap: each,
        runs,
        rotations: 1,
    }));
    *young_start = n;
    new_young(h, each, shape)
}

/// The young table is full: the old one's states go to the runs, the young one becomes the
/// old one, and a new young one starts at the next id.
pub fn rotate<H: WindowHost>(h: &mut H) -> Result<(), StoreError> {
    let (mut sp, from, to, chunk) = {
        let (young, young_start, spill) = h.window();
        let sp = spill
            .take()
            .expect("rotating a window that has not spilled");
        let chunk = sp.old.window_bytes().max(young.window_bytes()) / 16;
        let from = sp.old_start;
        (sp, from, *young_start, chunk as usize)
    };
    let shape = h.shape(sp.table_cap);
    sp.old = h.empty_table();
    if let Err(e) = flush_to_runs(h, &mut sp.runs, from, to, chunk) {
        *h.window().2 = Some(sp);
        return Err(e);
    }
    let empty = h.empty_table();
    let n = h.count();
    let (young, young_start, spill) = h.window();
    sp.old = std::mem::replace(young, empty);
    sp.old_start = *young_start;
    sp.rotations += 1;
    let cap = sp.table_cap;
    *spill = Some(sp);
    *young_start = n;
    new_young(h, cap, shape)
}

/// Installs an empty young table of `cap` slots, charged before its pages are written so
/// that the caches give way first.
fn new_young<H: WindowHost>(h: &mut H, cap: usize, shape: H::Shape) -> Result<(), StoreError> {
    let t = h.new_table(cap, shape)?;
    h.charge(t.window_bytes());
    h.trim_caches()?;
    *h.window().0 = t;
    h.publish();
    Ok(())
}

/// The first step of making room for `extra` more states in a table kept at most 3/4 full
/// (the full store's and hash compaction's): `Ok(true)` when the young table takes them, or
/// took them after a rotation of a spilled window; `Ok(false)` when the index has not
/// spilled and the table must grow (or spill) first. `store` names the store in errors.
pub fn room_at_three_quarters<H: WindowHost>(
    h: &mut H,
    store: &'static str,
    extra: u64,
) -> Result<bool, StoreError> {
    let n = h.count();
    let (young, young_start, spill) = h.window();
    if (n - *young_start + extra) * 4 <= young.window_slots() as u64 * 3 {
        return Ok(true);
    }
    match spill {
        None => Ok(false),
        Some(sp) if extra * 4 > sp.table_cap as u64 * 3 => Err(sp.too_small(store, extra)),
        Some(_) => rotate(h).map(|()| true),
    }
}

/// New states a window takes before its young table must rotate (or, before spilling, a
/// share of the table), which bounds a delayed batch: the young table takes it whole.
fn window_room<T>(spill: Option<&Spill<T>>, young_slots: usize) -> usize {
    match spill {
        Some(sp) => sp.table_cap / 4,
        None => (young_slots / 8).max(MIN_TABLE / 4),
    }
}

/// A spilled index's layout at a checkpoint: the RAM window's id ranges and the runs.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct WindowMark {
    pub old_start: u64,
    pub young_start: u64,
    pub table_cap: u64,
    pub rotations: u64,
    pub runs: RunsMark,
}

/// The index's tables may take this share (1/N) of `--memory`, less the reserve for what no
/// account tracks ([`index_share`]), before older states go to disk.
pub const INDEX_SHARE: u64 = 2;

/// Bytes the index's tables may take under a budget of `limit` bytes: [`INDEX_SHARE`] of what
/// the untracked reserve leaves. A share of the whole budget left the reserve to nobody:
/// Peterson-PT-3 under `--memory 32M -o` had 31.8 MiB in its accounts (the index 16, the LTS
/// writer 4, the threads' buffers 4.7, the batch 2, the runs' filters 2.4) and was stopped
/// at 38 MiB resident.
pub fn index_share(limit: u64) -> u64 {
    limit.saturating_sub(UNTRACKED_RESERVE) / INDEX_SHARE
}

/// RAM a candidate of a delayed batch costs besides its vector: the engine's batch record,
/// label and result, and the store's hash, match, search-tree edge and lookup records.
const BATCH_BYTES_PER_STATE: u64 = 128;

/// Candidates of a delayed batch at most while the index is in RAM. A batch's lookups ask
/// for their home slots and cache entries all at once before the first is probed (the
/// stores' `prepare`), so the misses overlap; past a few thousand candidates the lines
/// asked for first leave the CPU caches before they are used. Measured on
/// Kanban-PT-00005, ComBack, one thread: per parent (about 10 successors) 5.6–6.5 s, 1,024
/// 4.9–5.1 s, 4,096 5.4–5.9 s, 16,384 6.0–6.7 s; under `--memory 256M`, where the batch
/// had been the budget's (about 100,000), 7.3–8.1 → 5.1–6.0 s.
pub const RAM_BATCH: usize = 1024;

/// The number of candidates of a delayed batch under `limit`, for states of `width` bytes
/// and an index whose young table has `young_slots` slots (`spill`: its window, once it
/// has spilled), so that the young table takes the batch whole (and at most [`RAM_BATCH`]
/// before it spills); charged to `account` (the engine's batch and the store's
/// per-candidate vectors), so that the caches that size themselves from the budget leave
/// room for them.
///
/// Without a budget: `unbudgeted` while the index is in RAM, else `None` (one parent at a
/// time). ComBack and Δ, several misses per candidate (slot, then cached vector), pass
/// `Some(RAM_BATCH)` (Kanban-PT-00005, one thread: ComBack 5.6–6.5 → 4.9–5.1 s, Δ 15.1–15.6
/// → 13.1–13.7 s); the hash-compaction store, one miss per candidate, gained nothing and
/// passes `None`, as does the full store, whose index in RAM takes the chunked path.
pub fn delayed_batch_len<T>(
    limit: MemoryLimit,
    width: Option<usize>,
    spill: Option<&Spill<T>>,
    young_slots: usize,
    account: &Account,
    unbudgeted: Option<usize>,
) -> Option<usize> {
    let MemoryLimit::Bytes(limit) = limit else {
        return unbudgeted.filter(|_| spill.is_none());
    };
    let window_room = window_room(spill, young_slots);
    // Vectors grow by doubling: count a candidate's vector twice.
    let per = 2 * width.unwrap_or(1) as u64 + BATCH_BYTES_PER_STATE;
    let by_budget = (limit / 16 / per).max(256);
    let mut n = (by_budget as usize).min(window_room).max(64);
    if spill.is_none() {
        // Only the runs' sorted lookups want large batches.
        n = n.min(RAM_BATCH);
    }
    account.set(n as u64 * per, 0, 0);
    Some(n)
}

/// The spilled index's figures (`index_*` keys of `--stats-json`).
fn report_runs(
    m: &mut serde_json::Map<String, serde_json::Value>,
    runs: &HashRuns,
    window_states: u64,
    rotations: u64,
) {
    let st = runs.stats();
    for (k, v) in [
        ("index_spilled_states", runs.pairs()),
        ("index_window_states", window_states),
        ("index_runs", runs.run_count() as u64),
        ("index_rotations", rotations),
        ("index_run_merges", st.merges),
        ("index_filter_bytes", runs.filter_bytes()),
        ("index_disk_lookups", st.probes),
        ("index_disk_found", st.found),
        ("index_false_matches", st.false_matches),
        ("index_block_reads", st.block_reads),
        ("index_bytes_read", st.bytes_read),
        ("index_bytes_written", st.bytes_written),
    ] {
        m.insert(k.into(), v.into());
    }
}
