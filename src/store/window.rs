//! What the stores whose index spills to disk share (the full store and ComBack; see
//! docs/ARCHITECTURE.md, "The disk-resident visited set"): the window's checkpoint record,
//! the budget share of the index, the size of a delayed batch and the spilled index's stats.

use crate::storage::runs::{HashRuns, RunsMark};
use crate::storage::{Account, MemoryLimit};

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
pub fn report_runs(
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
