//! What the stores whose index spills to disk share (the full store and ComBack; see
//! docs/ARCHITECTURE.md, "The disk-resident visited set"): the window's checkpoint record,
//! the budget share of the index, the size of a delayed batch and the spilled index's stats.

use crate::error::StorageError;
use crate::storage::runs::{HashRuns, RunsMark};
use crate::storage::{Account, FileMark, MemoryLimit};

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

/// A spilled index's layout at a checkpoint: the RAM window's id ranges and the runs.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct WindowMark {
    pub old_start: u64,
    pub young_start: u64,
    pub table_cap: u64,
    pub rotations: u64,
    pub runs: RunsMark,
}

/// The index's tables may take this share of `--memory` (1/N) before older states go to disk.
pub const INDEX_SHARE: u64 = 2;

/// RAM a candidate of a delayed batch costs besides its vector: the engine's batch record,
/// label and result, and the store's hash, match, search-tree edge and lookup records.
const BATCH_BYTES_PER_STATE: u64 = 128;

/// The number of candidates of a delayed batch under `limit`, for states of `width` bytes
/// and a window that takes `window_room` new states between two rotations; charged to
/// `account` (the engine's batch and the store's per-candidate vectors), so that the caches
/// that size themselves from the budget leave room for them. `None` without a budget.
pub fn delayed_batch_len(
    limit: MemoryLimit,
    width: Option<usize>,
    window_room: usize,
    account: &Account,
) -> Option<usize> {
    let MemoryLimit::Bytes(limit) = limit else {
        return None;
    };
    // Vectors grow by doubling: count a candidate's vector twice.
    let per = 2 * width.unwrap_or(1) as u64 + BATCH_BYTES_PER_STATE;
    let by_budget = (limit / 16 / per).max(256);
    let n = (by_budget as usize).min(window_room).max(64);
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
