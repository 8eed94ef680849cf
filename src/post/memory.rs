//! Memory estimates printed before the tools that hold a whole LTS start, computed from the
//! counts in the file's header or footer, and the measured peak for comparison.

/// Bytes in a mebibyte.
pub const MIB: f64 = 1024.0 * 1024.0;

/// Peak bytes to load an LTS of `n` states and `m` transitions into CSR form: the edge list
/// as three `u32` arrays, then offsets and sort cursors per state.
pub fn load_bytes(n: u64, m: u64) -> u64 {
    12 * m + 8 * n
}

/// Peak bytes for [`crate::post::reduce::minimise`] on `n` states and `m` transitions.
///
/// Per transition: 12 bytes while loading; during refinement the source, label and counter
/// link (12) plus at most one counter (4) = 16; 20 transiently while transitions are
/// renumbered by target (the target array still exists) and while the quotient's edge list is
/// built when almost nothing merges. Per state: CSR offsets, the block partition (state order,
/// positions, block numbers), up to one block record (24 bytes) and one compound record (8)
/// per state, and three scratch arrays.
pub fn reduce_bytes(n: u64, m: u64) -> u64 {
    20 * m + 60 * n
}

/// Peak bytes for [`crate::post::branching::minimise_branching`]: the loaded LTS (8
/// bytes/transition) and the collapsed edge list (12) at first; later the collapsed LTS by
/// source and by target (8 + 8, 12 while being sorted) and finally the quotient's edge list
/// (up to 12); per state the SCC arrays, partition, bottom flags and scratch marks.
pub fn branching_bytes(n: u64, m: u64) -> u64 {
    28 * m + 80 * n
}

/// Peak bytes for `lts deadlocks`: the CSR plus BFS parent links and queue.
pub fn deadlock_bytes(n: u64, m: u64) -> u64 {
    load_bytes(n, m).max(8 * m + 4 * n + 12 * n)
}

/// "123.4 MiB".
pub fn fmt_mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB)
}

/// Peak resident set size so far (VmHWM), in bytes; 0 where /proc is unavailable.
pub fn peak_rss() -> u64 {
    crate::engine::peak_rss_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_stay_within_the_budget_per_transition() {
        // The refinement target is at most 16 bytes per transition in steady state; the
        // estimate includes the transient 20-byte phases.
        assert_eq!(reduce_bytes(0, 1_000), 20_000);
        assert_eq!(fmt_mib(3 * 1024 * 1024 / 2), "1.5 MiB");
    }
}
