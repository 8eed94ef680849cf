//! What the operating system says about this process and this machine: peak and current
//! resident memory, CPU time, and how much memory the machine (or the cgroup the process
//! runs in) can give. Linux `/proc` and `/sys/fs/cgroup`; elsewhere the figures are 0 or
//! unknown, never an error. And one CPU hint, [`prefetch`], for the batched probes of the
//! stores' tables and the spilled index's filters, and two memory hints, [`huge_pages`] and
//! [`populate`].

/// Writes to standard error and ignores a failure: a message that cannot be shown has
/// nowhere else to go, and `eprint!` would panic (exit 101, with a backtrace) where the run
/// should end with its own exit code (`spillway resume DIR 2>/dev/full`, a closed terminal).
pub fn to_stderr(args: std::fmt::Arguments) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `eprintln!` that never panics ([`to_stderr`]).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::sys::to_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Peak resident set size of this process (the kernel's VmHWM), in bytes.
pub fn peak_rss_bytes() -> u64 {
    proc_status_kb("VmHWM:") * 1024
}

/// Current resident set size (VmRSS), in bytes: the second field of `/proc/self/statm`
/// (pages), the figure `/proc/self/status` prints as VmRSS. Read once per parallel chunk by
/// the ceiling check, while the other threads wait: `/proc/self/status` formats some fifty
/// lines for it, which took 2.4% of the main thread's samples of a two-thread run
/// (SharedMemory-PT-000010); `statm` is seven numbers, and the file stays open (a read
/// from offset 0 renders it again), as opening it was half of what was left.
pub fn rss_bytes() -> u64 {
    use std::os::unix::fs::FileExt;
    static STATM: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let Some(file) = STATM.get_or_init(|| std::fs::File::open("/proc/self/statm").ok()) else {
        return 0;
    };
    let mut buf = [0u8; 128];
    let Ok(n) = file.read_at(&mut buf, 0) else {
        return 0;
    };
    let pages = std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|t| t.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    pages * page_bytes()
}

/// The size of a memory page (4 KiB when the system does not say).
fn page_bytes() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf only reads a system constant.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            p as u64
        } else {
            4096
        }
    })
}

/// (current, peak) resident set size in bytes from one read of `/proc/self/status`.
pub fn rss_and_peak_bytes() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key| kb_field(&text, key).unwrap_or(0) * 1024;
    (kb("VmRSS:"), kb("VmHWM:"))
}

fn proc_status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| kb_field(&s, key))
        .unwrap_or(0)
}

/// The number after `key` in a `/proc` file of `key value kB` lines.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// Hands the memory that threads freed back to the system. Freed blocks of less than the
/// mmap threshold (main.rs) stay in the freeing thread's allocator arena, which the main
/// thread does not reuse: without this, buffers a finished group of threads held would stay
/// resident, outside every account. Does nothing where the allocator is not glibc's.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// CPU seconds (user + system) this process has used so far.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a pointer to a rusage struct we own; getrusage only writes it.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Memory the machine can give this process, as far as it can be known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineMemory {
    /// Physical RAM (MemTotal).
    pub total: Option<u64>,
    /// What can be allocated now without swapping (MemAvailable).
    pub available: Option<u64>,
    /// The memory limit of the process's cgroup (v2 `memory.max`, v1
    /// `memory.limit_in_bytes`), when one is set.
    pub cgroup_limit: Option<u64>,
}

impl MachineMemory {
    /// Reads `/proc/meminfo` and the cgroup's limit.
    pub fn read() -> MachineMemory {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        MachineMemory {
            total: kb_field(&meminfo, "MemTotal:").map(|k| k * 1024),
            available: kb_field(&meminfo, "MemAvailable:").map(|k| k * 1024),
            cgroup_limit: cgroup_limit(),
        }
    }

    /// The most a run can count on: the smaller of what is available and the cgroup limit.
    pub fn usable(&self) -> Option<u64> {
        match (self.available, self.cgroup_limit) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        }
    }

    /// A warning when a `--memory` budget is more than the machine can give now (naming
    /// both figures), `None` when it fits or nothing is known.
    pub fn warn_if_short(&self, budget: u64) -> Option<String> {
        let usable = self.usable()?;
        if budget <= usable {
            return None;
        }
        let gib = |b: u64| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64);
        let mut what = Vec::new();
        if let Some(a) = self.available {
            what.push(format!(
                "{} available now (MemAvailable{})",
                gib(a),
                self.total
                    .map(|t| format!(", of {} physical", gib(t)))
                    .unwrap_or_default()
            ));
        }
        if let Some(c) = self.cgroup_limit {
            what.push(format!("a cgroup limit of {}", gib(c)));
        }
        Some(format!(
            "--memory {} is more than this machine can give: {}; if the run grows to its budget the kernel may kill it (lower --memory to at most {} to stay safe)",
            gib(budget),
            what.join(" and "),
            gib(usable)
        ))
    }
}

/// The memory limit of this process's cgroup, if one is set.
fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut candidates: Vec<String> = Vec::new();
    for line in own.lines() {
        // v2: "0::/path"; v1: "N:memory:/path" (or "N:...,memory,...:/path").
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        if ctrl.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
            candidates.push("/sys/fs/cgroup/memory.max".into());
        } else if ctrl.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
            candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".into());
        }
    }
    candidates.iter().find_map(|p| {
        let v = std::fs::read_to_string(p).ok()?;
        let v = v.trim();
        // "max" (v2) or a huge number (v1, no limit) mean unlimited.
        let n: u64 = v.parse().ok()?;
        (n < 1 << 60).then_some(n)
    })
}

/// The default memory ceiling of a run without `--memory` (0: none). Process-global: the
/// stores' RAM structures and the engines' periodic check read it without plumbing.
static CEILING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets (or, with `None`, lifts) the ceiling.
pub fn set_ceiling(bytes: Option<u64>) {
    CEILING.store(bytes.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
}

/// The ceiling, if one is set.
pub fn ceiling() -> Option<u64> {
    match CEILING.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        b => Some(b),
    }
}

/// Checks that `structure` may take `more` bytes on top of the resident memory now without
/// passing the ceiling (`more` = 0: that the process is still under it).
pub fn check_ceiling(structure: &str, more: u64) -> Result<(), crate::error::StorageError> {
    let Some(limit) = ceiling() else {
        return Ok(());
    };
    let rss = rss_bytes();
    if rss.saturating_add(more) <= limit {
        return Ok(());
    }
    Err(crate::error::StorageError::Ceiling {
        structure: structure.to_string(),
        rss,
        more,
        limit,
    })
}

/// Under `--memory`: the budget and the resident memory the process held before exploring
/// (the binary's baseline: code, model, buffers of the front end); 0 when there is none.
static BUDGET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static BASELINE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets (or, with `None`, lifts) the hard ceiling of a run under `--memory`: `budget` plus
/// the resident memory now.
pub fn set_budget_ceiling(budget: Option<u64>) {
    use std::sync::atomic::Ordering::Relaxed;
    BASELINE.store(rss_bytes(), Relaxed);
    BUDGET.store(budget.unwrap_or(0), Relaxed);
}

/// `--memory` is a promise: the stores keep within it by their accounts, and this check,
/// run by every engine every few thousand steps, is the backstop for what no account
/// holds (or a store that holds more than it says). Past the budget plus the baseline the
/// run stops with exit 6; `holder` names what the store holds in RAM and what else to try.
pub fn check_budget(
    holder: impl FnOnce() -> (String, &'static str),
) -> Result<(), crate::error::StorageError> {
    check_budget_more(0, holder)
}

/// [`check_budget`] before a step that takes about `more` bytes at once outside the
/// budget's accounts (a BFS level entering the snapshots' pool): refused before it, where
/// the periodic check would catch it only after. The error reports the resident size with
/// `more` added.
pub fn check_budget_more(
    more: u64,
    holder: impl FnOnce() -> (String, &'static str),
) -> Result<(), crate::error::StorageError> {
    use std::sync::atomic::Ordering::Relaxed;
    let limit = BUDGET.load(Relaxed);
    if limit == 0 {
        return Ok(());
    }
    let baseline = BASELINE.load(Relaxed);
    let rss = rss_bytes().saturating_add(more);
    if rss <= limit.saturating_add(baseline) {
        return Ok(());
    }
    let (holder, hint) = holder();
    Err(crate::error::StorageError::OverBudget {
        reached: if more == 0 { "reached" } else { "would reach" },
        holder,
        hint,
        rss,
        limit,
        baseline,
    })
}

/// What [`check_structure`] tells the user to do about a structure too large for the
/// budget or the machine; `resume`, which keeps the options the run started with, says
/// something else in its place.
pub const LOWER_THE_OPTION: &str = "lower the option that sizes it";

/// Refuses, before it is allocated, a structure whose size an option chose (a cache of N
/// entries, a bit array of 2^N bits): `bytes` (`None`: past the address space) more than
/// the `--memory` budget, than the default ceiling less what is resident, or, with neither,
/// than the machine's physical RAM or the address-space limit. An allocation that size would abort the process or get
/// it killed by the kernel; this is exit 6 naming `structure` (say which option sized it).
pub fn check_structure(
    structure: &str,
    bytes: Option<u64>,
) -> Result<(), crate::error::StorageError> {
    use std::sync::atomic::Ordering::Relaxed;
    let bytes = bytes.unwrap_or(u64::MAX);
    let budget = BUDGET.load(Relaxed);
    if budget > 0 {
        if bytes <= budget {
            return Ok(());
        }
        return Err(crate::error::StorageError::BudgetTooSmall {
            structure: structure.to_string(),
            need: bytes,
            budget,
            message: format!("before anything else; {LOWER_THE_OPTION}"),
            minimum: crate::storage::budget::mib_ceil(bytes.saturating_add(16 << 20)),
        });
    }
    if ceiling().is_some() {
        return check_ceiling(structure, bytes);
    }
    // `--memory unlimited`: no ceiling, but neither the RAM nor the address space it may
    // use (`ulimit -v`) can be exceeded.
    let room = match (MachineMemory::read().total, rlimit_memory()) {
        (Some(t), Some(r)) => Some(t.min(r)),
        (t, r) => t.or(r),
    };
    match room {
        Some(room) if bytes > room => Err(crate::error::StorageError::TooLarge {
            structure: structure.to_string(),
            bytes,
            room,
            hint: LOWER_THE_OPTION.into(),
        }),
        _ => Ok(()),
    }
}

/// The limits of this process's address space and data segment (`ulimit -v`, `ulimit -d`),
/// the smaller one, when set.
pub fn rlimit_memory() -> Option<u64> {
    let get = |r| {
        // SAFETY: an all-zero rlimit is a valid value of this plain C struct.
        let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
        // SAFETY: getrlimit only writes the struct we own.
        if unsafe { libc::getrlimit(r, &mut l) } != 0 || l.rlim_cur == libc::RLIM_INFINITY {
            None
        } else {
            Some(l.rlim_cur)
        }
    };
    match (get(libc::RLIMIT_AS), get(libc::RLIMIT_DATA)) {
        (Some(a), Some(d)) => Some(a.min(d)),
        (a, d) => a.or(d),
    }
}

/// Virtual memory size of this process (VmSize), in bytes.
pub fn virtual_bytes() -> u64 {
    proc_status_kb("VmSize:") * 1024
}

/// The default ceiling of a run without `--memory`, and what it was taken from: 3/4 of the
/// physical RAM or of the cgroup's limit, whichever is smaller; under an address-space limit
/// (`ulimit -v`), half of the room it leaves (mappings count there whether resident or not).
pub fn default_ceiling() -> Option<(u64, String)> {
    let m = MachineMemory::read();
    let gib = |b: u64| {
        if b >= 1 << 30 {
            format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
        } else {
            format!("{} MiB", b >> 20)
        }
    };
    let mut best: Option<(u64, String)> = None;
    let mut offer = |bytes: u64, why: String| {
        if best.as_ref().is_none_or(|(b, _)| bytes < *b) {
            best = Some((bytes, why));
        }
    };
    if let Some(t) = m.total {
        offer(t / 4 * 3, format!("3/4 of {} of RAM", gib(t)));
    }
    if let Some(c) = m.cgroup_limit {
        offer(
            c / 4 * 3,
            format!("3/4 of the cgroup's limit of {}", gib(c)),
        );
    }
    if let Some(l) = rlimit_memory() {
        let room = l.saturating_sub(virtual_bytes());
        offer(
            rss_bytes() + room / 2,
            format!(
                "half the room left by the address-space limit of {}",
                gib(l)
            ),
        );
    }
    best.map(|(b, why)| (b, format!("{} ({why})", gib(b))))
}

/// Whether the storage layer may draw its own progress line ([`activity`]): set by the
/// engine when it shows one.
static ACTIVITY_LINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// When [`activity`] last drew.
static ACTIVITY_DRAWN: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// Lets (or stops) [`activity`] draw on the progress line.
pub fn show_activity(on: bool) {
    ACTIVITY_LINE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`activity`] has drawn since the run began.
pub fn activity_drawn() -> bool {
    ACTIVITY_DRAWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some()
}

/// Shows, at most once a second, what the storage layer is doing inside one long call —
/// `phase` (`spilling`, `merging`), `done` of `total` items — on the progress line: the
/// engine redraws it only between expansions, so a merge of gigabytes of index runs would
/// otherwise freeze it for minutes. Called every million items or so: cheap when off.
pub fn activity(phase: &str, what: &str, done: u64, total: u64) {
    if !ACTIVITY_LINE.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let now = std::time::Instant::now();
    let mut last = ACTIVITY_DRAWN.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1)) {
        return;
    }
    *last = Some(now);
    let pct = done as f64 * 100.0 / total.max(1) as f64;
    to_stderr(format_args!(
        "\r\x1b[K{phase}: {what}, {done} of {total} ({pct:.0}%), RSS {} MiB",
        rss_bytes() >> 20
    ));
}

/// Asks the CPU to fetch the cache line at `p` (no effect on other architectures): unlike a
/// load, a prefetch does not hold up the instructions after it, so the misses of a batch
/// overlap even with the work between them (the hash tables of the stores, the filters of a
/// spilled index).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks the kernel to back the 2 MiB-aligned part of `[p, p + len)` (an allocation not yet
/// touched) with transparent huge pages (`MADV_HUGEPAGE`; Linux only, a no-op elsewhere or
/// when refused). Tables read at random (ComBack's state table, the packed state caches of
/// ComBack and Δ) otherwise miss the TLB on nearly every access and pay a page walk.
pub fn huge_pages(p: *const u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = (p as usize).next_multiple_of(HUGE);
    let end = (p as usize + len) & !(HUGE - 1);
    #[cfg(target_os = "linux")]
    madvise(start, end, libc::MADV_HUGEPAGE);
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}

/// Faults in the pages of `[p, p + len)` — memory about to be written — with one
/// `MADV_POPULATE_WRITE` instead of a fault per page (Linux 5.14 and later; refused before,
/// and then the pages fault in as they are written; a no-op elsewhere). Contents are
/// unchanged. Ranges under 16 KiB are left to fault: the call costs about what the few
/// faults it could spare do, and their pages are often resident already (a chain of one
/// state a BFS level appends a vector at a time).
pub fn populate(p: *const u8, len: usize) {
    const PAGE: usize = 4096;
    if len < 4 * PAGE {
        return;
    }
    let start = (p as usize) & !(PAGE - 1);
    let end = if len == 0 {
        start
    } else {
        (p as usize + len).next_multiple_of(PAGE)
    };
    #[cfg(target_os = "linux")]
    madvise(start, end, libc::MADV_POPULATE_WRITE);
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}

/// `madvise(start, end - start, advice)` when the range is not empty; errors ignored (the
/// advice is only ever a hint here).
#[cfg(target_os = "linux")]
fn madvise(start: usize, end: usize, advice: libc::c_int) {
    if end > start {
        // SAFETY: the callers pass pages of an allocation they own and advice that only
        // changes how the kernel backs them (huge pages, or faulting them in now); neither
        // changes their contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, advice);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_only_above_what_is_usable_and_names_both_figures() {
        let m = MachineMemory {
            total: Some(24 << 30),
            available: Some(16 << 30),
            cgroup_limit: Some(8 << 30),
        };
        assert_eq!(m.usable(), Some(8 << 30));
        assert!(m.warn_if_short(4 << 30).is_none());
        let w = m.warn_if_short(20 << 30).unwrap();
        assert!(
            w.contains("20.0 GiB") && w.contains("16.0 GiB") && w.contains("8.0 GiB"),
            "{w}"
        );
        assert!(MachineMemory::default().warn_if_short(1 << 40).is_none());
    }

    #[test]
    fn this_process_has_figures() {
        assert!(peak_rss_bytes() > 0);
        assert!(rss_bytes() > 0);
        // `statm`'s resident pages are status's VmRSS (read a moment apart: a few pages).
        let (status, statm) = (proc_status_kb("VmRSS:") * 1024, rss_bytes());
        assert!(status.abs_diff(statm) < 1 << 20, "{status} against {statm}");
        assert!(MachineMemory::read().total.unwrap_or(1) > 0);
    }
}
