//! Memory estimates printed before the tools that hold a whole LTS start, computed from the
//! counts in the file's header or footer, and the measured peak for comparison.

/// Bytes in a mebibyte.
pub const MIB: f64 = 1024.0 * 1024.0;

// Estimates are computed in u128 from the header's u64 counts: a header may declare up to
// 2^64 - 1 states, and 80 bytes times that still fits, so no estimate can wrap around to a
// small figure (a header of 2^63 - 1 states once printed "needs about 0.0 MiB").

/// Peak bytes to load an LTS of `n` states and `m` transitions into CSR form: the edge list
/// as three `u32` arrays, then offsets and sort cursors per state.
pub fn load_bytes(n: u64, m: u64) -> u128 {
    12 * m as u128 + 8 * n as u128
}

/// Peak bytes for [`crate::post::reduce::minimise`] on `n` states and `m` transitions.
///
/// Per transition: 12 bytes while loading; during refinement the source, label and counter
/// link (12) plus at most one counter (4) = 16; 20 transiently while transitions are
/// renumbered by target (the target array still exists) and while the quotient's edge list is
/// built when almost nothing merges. Per state: CSR offsets, the block partition (state order,
/// positions, block numbers), up to one block record (24 bytes) and one compound record (8)
/// per state, and three scratch arrays.
pub fn reduce_bytes(n: u64, m: u64) -> u128 {
    20 * m as u128 + 60 * n as u128
}

/// Peak bytes for [`crate::post::branching::minimise_branching`]: the loaded LTS (8
/// bytes/transition) and the collapsed edge list (12) at first; later the collapsed LTS by
/// source and by target (8 + 8, 12 while being sorted) and finally the quotient's edge list
/// (up to 12); per state the SCC arrays, partition, bottom flags and scratch marks.
pub fn branching_bytes(n: u64, m: u64) -> u128 {
    28 * m as u128 + 80 * n as u128
}

/// Peak bytes for `lts deadlocks`: the CSR plus BFS parent links and queue.
pub fn deadlock_bytes(n: u64, m: u64) -> u128 {
    load_bytes(n, m).max(8 * m as u128 + 16 * n as u128)
}

/// "123.4 MiB" below 1 GiB, then "1.5 GiB", "3.0 TiB", … up to EiB (so that a huge estimate
/// stays readable).
pub fn fmt_mib(bytes: impl Into<u128>) -> String {
    let bytes = bytes.into();
    let units = ["MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64 / MIB;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", units[unit])
}

/// The machine's physical memory in bytes, if the system says.
pub fn physical_ram() -> Option<u64> {
    // SAFETY: sysconf only reads system configuration; it has no memory-safety preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| (pages as u64).saturating_mul(page as u64))
}

/// Refuses, before anything is allocated, a tool whose estimated need exceeds the machine's
/// physical memory: the header's counts are then either a claim the file does not back (a
/// 4-line `.aut` declaring 2^32 − 2 states) or an LTS this machine cannot hold, and trying
/// would only end in swapping or the OOM killer, not in a clean error.
pub fn check_fits(tool: &str, estimate: u128) -> Result<(), crate::error::PostError> {
    match physical_ram() {
        Some(ram) if estimate > ram as u128 => Err(crate::error::PostError::Limit(format!(
            "{tool} needs about {}, more than this machine's {} of RAM",
            fmt_mib(estimate),
            fmt_mib(ram)
        ))),
        _ => Ok(()),
    }
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
        assert_eq!(fmt_mib(3u64 * 1024 * 1024 / 2), "1.5 MiB");
        assert_eq!(fmt_mib(3u64 << 30), "3.0 GiB");
    }

    #[test]
    fn huge_headers_do_not_wrap_around() {
        // 2^63 - 1 states: 60 bytes each is 480 EiB, not the 0.0 MiB a u64 wrap-around gave.
        let n = (1u64 << 63) - 1;
        assert_eq!(fmt_mib(reduce_bytes(n, 0)), "480.0 EiB");
        assert_eq!(fmt_mib(deadlock_bytes(n, n)), "192.0 EiB");
        assert_eq!(fmt_mib(branching_bytes(u64::MAX, u64::MAX)), "1728.0 EiB");
    }
}
