//! Helpers shared by the integration tests: where the reference models are and their counts.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `../shared/models` next to the checkout (read-only reference models with published counts),
/// or the directory `SPILLWAY_SHARED_MODELS` names. Tests that need it are marked
/// `#[cfg_attr(not(shared_models), ignore = "needs ../shared/models")]` (build.rs sets the
/// cfg), so without it they are reported as ignored; one that is not marked fails here
/// rather than pass on nothing.
pub fn shared_models() -> Option<PathBuf> {
    let p = match std::env::var_os("SPILLWAY_SHARED_MODELS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models"),
    };
    if p.join("REFERENCE.tsv").is_file() {
        Some(p)
    } else {
        panic!(
            "{} not found: this test needs the reference models (mark it #[cfg_attr(not(shared_models), ignore = \"needs ../shared/models\")])",
            p.display()
        );
    }
}

/// One row of REFERENCE.tsv.
#[derive(Clone, Debug)]
pub struct Reference {
    pub path: PathBuf,
    pub rel: String,
    pub states: u64,
    pub transitions: u64,
}

/// Rows for P/T nets (`mcc/`) and explicit LTSs (`vlts/`) with `min < states <= max`.
pub fn reference_rows(min: u64, max: u64) -> Vec<Reference> {
    let Some(dir) = shared_models() else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(dir.join("REFERENCE.tsv")).unwrap();
    let mut rows = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if !(f[0].starts_with("mcc/") || f[0].starts_with("vlts/")) {
            continue;
        }
        let (Ok(states), Ok(transitions)) = (f[3].parse::<u64>(), f[4].parse::<u64>()) else {
            continue;
        };
        if states > min && states <= max {
            rows.push(Reference {
                path: dir.join(f[0]),
                rel: f[0].to_string(),
                states,
                transitions,
            });
        }
    }
    rows.sort_by_key(|r| r.states);
    rows
}

/// The path of the built `spillway` binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_spillway")
}

/// A model shipped in the repository's `models/` directory.
pub fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
}

/// A P/T net the tests build themselves: `k` independent toggles (place `a_i` marked,
/// `b_i` empty; `t_i: a_i → b_i`, `u_i: b_i → a_i`). Exactly `2^k` reachable markings and
/// `k · 2^k` (marking, enabled transition) pairs: every marking enables one transition of
/// each toggle. Counts known in closed form, no `../shared` needed.
pub fn toggles_pnml(k: u32) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<pnml xmlns=\"http://www.pnml.org/version-2009/grammar/pnml\">\n<net id=\"toggles\" type=\"http://www.pnml.org/version-2009/grammar/ptnet\">\n<page id=\"page\">\n",
    );
    for i in 0..k {
        s += &format!("<place id=\"a{i}\"><initialMarking><text>1</text></initialMarking></place>\n<place id=\"b{i}\"/>\n");
        s += &format!("<transition id=\"t{i}\"/>\n<transition id=\"u{i}\"/>\n");
        s += &format!("<arc id=\"ta{i}\" source=\"a{i}\" target=\"t{i}\"/><arc id=\"tb{i}\" source=\"t{i}\" target=\"b{i}\"/>\n");
        s += &format!("<arc id=\"ub{i}\" source=\"b{i}\" target=\"u{i}\"/><arc id=\"ua{i}\" source=\"u{i}\" target=\"a{i}\"/>\n");
    }
    s += "</page>\n</net>\n</pnml>\n";
    s
}

/// Writes [`toggles_pnml`] into `dir` and returns its path.
pub fn toggles_file(dir: &Path, k: u32) -> PathBuf {
    let p = dir.join(format!("toggles-{k}.pnml"));
    std::fs::write(&p, toggles_pnml(k)).unwrap();
    p
}

/// A P/T net with no places: one state. With `transitions` always-enabled transitions (no
/// arcs), each a self-loop.
pub fn placeless_file(dir: &Path, transitions: u32) -> PathBuf {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<pnml xmlns=\"http://www.pnml.org/version-2009/grammar/pnml\">\n<net id=\"placeless\" type=\"http://www.pnml.org/version-2009/grammar/ptnet\">\n<page id=\"page\">\n",
    );
    for i in 0..transitions {
        s += &format!("<transition id=\"t{i}\"/>\n");
    }
    s += "</page>\n</net>\n</pnml>\n";
    let p = dir.join(format!("placeless-{transitions}.pnml"));
    std::fs::write(&p, s).unwrap();
    p
}

/// Every `--store` value with the orders it supports.
pub const STORES: &[&str] = &[
    "full",
    "comback",
    "delta",
    "hashcompact",
    "bitstate",
    "tree",
];

/// How a child process ended, with its peak resident set size.
#[derive(Debug)]
pub struct Measured {
    /// The exit code, or `None` if a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The child's own peak RSS (`ru_maxrss` from `wait4`), in bytes.
    pub max_rss: u64,
}

impl Measured {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Runs `cmd` to completion and measures its peak RSS with `wait4`, which reports the
/// resources of that one child (not of every child the test process ever had).
///
/// Linux keeps a process's high-water mark across `exec`, and the child starts in this test
/// process's memory (`posix_spawn` shares it until `exec`), so the figure is at least this
/// process's *peak* RSS so far: an overestimate of the binary's own peak, never an
/// underestimate, which is what an upper bound needs. So that the overestimate is this
/// process's current RSS (a few MiB) rather than the peak some parallel test once caused,
/// the peak is reset first (`/proc/self/clear_refs`, value 5).
pub fn run_measured(cmd: &mut std::process::Command) -> Measured {
    use std::io::{Read, Seek};
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let mut out = tempfile::tempfile().unwrap();
    let mut err = tempfile::tempfile().unwrap();
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain data that wait4 fills in; `status` and `usage` outlive the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = loop {
        // SAFETY: pid is our own child, not yet reaped (the `Child` is never waited on).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    drop(child);
    let read = |f: &mut std::fs::File| {
        let mut v = Vec::new();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut v).unwrap();
        v
    };
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    Measured {
        code,
        signal,
        stdout: read(&mut out),
        stderr: read(&mut err),
        // Linux reports ru_maxrss in KiB.
        max_rss: usage.ru_maxrss as u64 * 1024,
    }
}

/// This process's resident set size now (VmRSS), in bytes; 0 where /proc is unavailable.
pub fn own_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// Whether two files hold the same bytes, compared in chunks: reading whole LTS files into
/// this process would raise its RSS, which children spawned afterwards inherit in their
/// `ru_maxrss` (see [`run_measured`]).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let na = read_full(&mut fa, &mut ba);
        let nb = read_full(&mut fb, &mut bb);
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
    fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> usize {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..]).unwrap() {
                0 => break,
                k => n += k,
            }
        }
        n
    }
}

/// Arcs of a P/T transition: (place, weight).
pub type Arcs = Vec<(usize, u32)>;

/// A P/T net in PNML: places `p0…` with the `initial` marking, transitions `t0…` with
/// their (input arcs, output arcs); for the models the tests build themselves.
pub fn pnml(initial: &[u32], transitions: &[(Arcs, Arcs)]) -> String {
    let mut s = String::from("<?xml version=\"1.0\"?>\n<pnml xmlns=\"http://www.pnml.org/version-2009/grammar/pnml\">\n<net id=\"n\" type=\"http://www.pnml.org/version-2009/grammar/ptnet\">\n<page id=\"g\">\n");
    for (i, m) in initial.iter().enumerate() {
        s += &format!(
            "<place id=\"p{i}\"><initialMarking><text>{m}</text></initialMarking></place>\n"
        );
    }
    let mut arc = 0;
    for (t, (ins, outs)) in transitions.iter().enumerate() {
        s += &format!("<transition id=\"t{t}\"/>\n");
        for &(p, w) in ins {
            s += &format!("<arc id=\"a{arc}\" source=\"p{p}\" target=\"t{t}\"><inscription><text>{w}</text></inscription></arc>\n");
            arc += 1;
        }
        for &(p, w) in outs {
            s += &format!("<arc id=\"a{arc}\" source=\"t{t}\" target=\"p{p}\"><inscription><text>{w}</text></inscription></arc>\n");
            arc += 1;
        }
    }
    s + "</page>\n</net>\n</pnml>\n"
}

/// Makes `cmd`'s process unable to write files past `bytes` (RLIMIT_FSIZE, with SIGXFSZ
/// ignored so that the write fails with EFBIG instead of killing it): a full disk without
/// mounting one.
pub fn limit_file_size(cmd: &mut std::process::Command, bytes: u64) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit and signal are async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0
                || libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}
