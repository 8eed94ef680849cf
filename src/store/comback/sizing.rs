//! The automatic size of the full-state cache (`--comback-cache auto`, the default).
//!
//! In BFS, states are numbered level by level and the recent region (slot `id mod n`) holds
//! the `n` newest states. The successors of a state at depth `d` that are already known lie
//! mostly in the last few levels, and the state being expanded is itself in level `d`; so the
//! recent region should hold several of the widest levels, and grow as the levels widen. The
//! store counts the new states of each depth ([`Levels`]) and, whenever [`LEVELS_COVERED`]
//! times the widest level outgrows the recent region, resizes the cache ([`wanted_entries`],
//! by at least 3/2 so that a run resizes it a few times only). The size is bounded:
//!
//! * never below [`FLOOR`] entries (the former fixed default);
//! * never more entries than states stored so far ([`states_cap`]), nor more than
//!   [`BYTES_PER_STATE`] bytes per state stored ([`states_bytes_cap`]; both reconsidered
//!   when the state table grows);
//! * never more bytes than 1/4 of the `--memory` budget or, without one, 1/16 of the
//!   machine's memory ceiling ([`cap_bytes`]); under `--memory` a resize takes no more than
//!   the budget's headroom (plus what the backedge block caches give back) holds next to the
//!   old cache, the state table's next growth and the smallest backedge block cache, and
//!   when the state table's growth does not fit the budget the cache falls back to
//!   [`FLOOR`] before the index spills.
//!
//! The rule sizes for the default waiting set of state numbers (3/4 of the entries recent);
//! with `--comback-waiting vectors` the cache gets the same number of entries.
//!
//! In DFS a "level" is the run of consecutive new states at one depth (the new successors of
//! one state at most), so the cache stays at [`FLOOR`] unless states have huge out-degrees.

use crate::storage::MemoryLimit;

/// How many of the widest levels the recent region holds. Measured in BFS (CPU time against
/// the full store, 2026-11-24, loaded machine): see docs/COMBACK.md.
pub const LEVELS_COVERED: u64 = 8;

/// The most entries an automatic cache may have with `states` states stored: no more than
/// there are states (more would hold nothing), and never less than [`FLOOR`].
pub fn states_cap(states: u64) -> u64 {
    states.max(FLOOR as u64)
}

/// The most bytes an automatic cache may take per state stored: on nets with long state
/// vectors a cache of as many entries as states would make ComBack nearly as large as the
/// full store, and slower (QuasiCertifProtocol-PT-06, 141-byte entries: 290 MB of cache,
/// 6.3 s CPU against 4.9 s with 2^16 entries; with this cap 33 MB, 4.6 s). Measured with 8
/// too: SharedMemory-PT-000010 1.25× the full store instead of 1.14×, Kanban-PT-00005 1.32×
/// instead of 1.27×.
pub const BYTES_PER_STATE: u64 = 16;

/// The cap in bytes of an automatic cache with `states` states stored
/// ([`BYTES_PER_STATE`] each, at least what [`FLOOR`] entries of `entry_bytes` take).
pub fn states_bytes_cap(states: u64, entry_bytes: u64) -> u64 {
    states
        .saturating_mul(BYTES_PER_STATE)
        .max(FLOOR as u64 * entry_bytes)
}

/// Fewest entries of an automatic cache (the former fixed default, 2^16).
pub const FLOOR: usize = 1 << 16;

/// An automatic cache grows at least by this factor (in eighths) when it grows, so that a
/// run resizes it a few times only (each resize copies the cache once).
const GROWTH_EIGHTHS: usize = 12;

/// Widths of the levels of new states seen so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Levels {
    depth: u32,
    count: u64,
    widest: u64,
}

impl Levels {
    /// Counts a new state at `depth`.
    #[inline(always)]
    pub fn record(&mut self, depth: u32) {
        if depth != self.depth {
            self.depth = depth;
            self.count = 0;
        }
        self.count += 1;
        if self.count > self.widest {
            self.widest = self.count;
        }
    }

    /// The most new states seen at one depth in a row (a BFS level; the current level counts
    /// as far as it got).
    pub fn widest(&self) -> u64 {
        self.widest
    }
}

/// The cap of an automatic cache in bytes: 1/4 of the `--memory` budget (under a budget the
/// index spills, and every far duplicate the cache misses is a replay: SwimmingPool-PT-03
/// under 256M, whose rule wants 3.4 M entries of 15 bytes, took 95 s with the former 1/16
/// and 24 M replays, 52 s with this cap and 5.6 k; unbounded 31 s), or without one 1/16
/// of the machine's memory ceiling (`ceiling`, see `sys::default_ceiling`; 3/4 of the RAM
/// with `--memory unlimited` when `total` is known, else 256 MiB).
pub fn cap_bytes(limit: MemoryLimit, ceiling: Option<u64>, total: Option<u64>) -> u64 {
    match limit {
        MemoryLimit::Bytes(b) => b / 4,
        MemoryLimit::Unlimited => match (ceiling, total) {
            (Some(c), _) => c / 16,
            (None, Some(t)) => t / 4 * 3 / 16,
            (None, None) => 256 << 20,
        },
    }
}

/// The recent share, in eighths, the rule sizes for: that of the default waiting set of state
/// numbers. With `--comback-waiting vectors` (1/4 recent, the waiting set needs no cache) the
/// cache gets the same entries, not four times as many.
const RECENT_EIGHTHS: usize = 6;

/// The width of the widest level for which a cache of `entries` still holds
/// [`LEVELS_COVERED`] levels in its recent share ([`RECENT_EIGHTHS`]): past it the cache
/// grows.
pub fn levels_held(entries: usize) -> u64 {
    (entries / 8 * RECENT_EIGHTHS) as u64 / LEVELS_COVERED
}

/// The entries an automatic cache should have now: enough for a recent region of
/// [`RECENT_EIGHTHS`]/8 of them to hold [`LEVELS_COVERED`] levels as wide as the widest so
/// far, at least [`FLOOR`], at most `cap` entries; `current` when that is within the growth
/// step of it (an automatic cache never shrinks by this rule).
pub fn wanted_entries(widest: u64, current: usize, cap: usize) -> usize {
    let recent = widest.saturating_mul(LEVELS_COVERED) as usize;
    let want = recent.saturating_mul(8).div_ceil(RECENT_EIGHTHS).max(FLOOR);
    if want <= current {
        return current;
    }
    let step = current.saturating_mul(GROWTH_EIGHTHS) / 8;
    want.max(step).min(cap).max(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_count_runs_of_one_depth() {
        let mut l = Levels::default();
        for (d, n) in [(0u32, 1), (1, 3), (2, 10), (3, 7)] {
            for _ in 0..n {
                l.record(d);
            }
        }
        assert_eq!(l.widest(), 10);
        // DFS: depths change at every new state.
        let mut l = Levels::default();
        for d in [1u32, 2, 3, 2, 3, 4, 5, 1, 2] {
            l.record(d);
        }
        assert_eq!(l.widest(), 1);
    }

    #[test]
    fn cache_grows_with_the_widest_level_within_the_cap() {
        let cap = 10_000_000;
        // Narrow levels: the floor.
        assert_eq!(wanted_entries(100, FLOOR, cap), FLOOR);
        // Wider levels: the recent share (6/8) covers LEVELS_COVERED of them.
        let w = 100_000;
        let n = wanted_entries(w, FLOOR, cap);
        assert!(n * 6 / 8 >= (w * LEVELS_COVERED) as usize, "{n}");
        assert!(n * 6 / 8 < (w * LEVELS_COVERED) as usize + 8, "{n}");
        assert!(levels_held(n).abs_diff(w) <= 1, "{}", levels_held(n));
        // Wider still: grows, at least by the step.
        let m = wanted_entries(w + 1000, n, cap);
        assert_eq!(m, n * GROWTH_EIGHTHS / 8);
        // Never past the cap, never smaller than it is.
        assert_eq!(wanted_entries(u64::MAX / 2, FLOOR, cap), cap);
        assert_eq!(wanted_entries(u64::MAX / 2, 2 * cap, cap), 2 * cap);
        assert_eq!(wanted_entries(10, 5 * FLOOR, cap), 5 * FLOOR);
    }

    #[test]
    fn caps_follow_the_states_stored() {
        assert_eq!(states_cap(10), FLOOR as u64);
        assert_eq!(states_cap(1 << 20), 1 << 20);
        assert_eq!(states_bytes_cap(10, 20), FLOOR as u64 * 20);
        assert_eq!(states_bytes_cap(1 << 20, 20), BYTES_PER_STATE << 20);
    }

    #[test]
    fn cap_follows_the_budget_or_the_machine() {
        assert_eq!(
            cap_bytes(MemoryLimit::Bytes(64 << 20), Some(1 << 40), None),
            16 << 20
        );
        assert_eq!(
            cap_bytes(MemoryLimit::Unlimited, Some(16 << 30), None),
            1 << 30
        );
        assert_eq!(
            cap_bytes(MemoryLimit::Unlimited, None, Some(32 << 30)),
            (24 << 30) / 16
        );
        assert_eq!(cap_bytes(MemoryLimit::Unlimited, None, None), 256 << 20);
    }
}
