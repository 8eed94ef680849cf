//! Checkpoints of a running exploration, and resuming from them (docs/CHECKPOINT.md).
//!
//! A checkpoint is a consistent cut taken between two expansions: the engine's position
//! (BFS level counters and open queue, or DFS top frame and stack), the store, the output
//! writer and the counters. Every component first makes its own files durable and returns a
//! small *mark* (lengths, counters, pending bytes); [`Checkpointer::commit`] then checksums
//! the new bytes of every file, writes the manifest — marks, file lengths and CRC-32s —
//! to `manifest.tmp`, fsyncs it and the directory, and renames it over `manifest`. The
//! rename is the commit point: before it the previous checkpoint stands, after it the new
//! one. Files are append-only (segments never rewrite a byte a checkpoint covers), so a
//! checkpoint costs time in what changed since the last one, not in the size of the
//! state space.
//!
//! On resume, [`load`] checks the manifest (magic, version, length, checksum) and the CRC-32
//! of every file prefix it names *before* anything is opened for writing, so a damaged
//! checkpoint is refused with nothing changed on disk.

use crate::error::CheckpointError;
use crate::lts::SinkMark;
use crate::storage::{FileMark, QueueMark, StackMark};
use crate::store::StoreMark;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// File name of the manifest in the run directory.
pub const MANIFEST: &str = "manifest";
const MANIFEST_TMP: &str = "manifest.tmp";
pub const MAGIC: &[u8; 8] = b"SPILLCKP";
/// Manifest format version; a manifest of another version is refused.
pub const VERSION: u32 = 13;
/// Magic + version + payload length.
const PREFIX_LEN: usize = 8 + 4 + 8;

/// Everything needed to continue a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// 1 for the first checkpoint of a run, then +1 per checkpoint.
    pub generation: u64,
    /// The spillway version that wrote it (informative).
    pub spillway: String,
    pub run: RunSpec,
    pub engine: EngineMark,
    pub store: StoreMark,
    /// The output writer's mark, when the run writes an LTS.
    pub output: Option<SinkMark>,
    pub counters: Counters,
    /// Every file the checkpoint needs, with the length and CRC-32 of the needed prefix.
    pub files: Vec<FileEntry>,
}

/// How the run was started: enough to rebuild its configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSpec {
    /// The run's whole configuration, paths absolute, encoded by the driver (which alone
    /// knows its type): `resume` continues with it, changing only the settings the driver
    /// declares may change.
    pub config: Vec<u8>,
    /// The model file (absolute) and the xxh3-64 of its bytes: a changed model is refused.
    pub model: PathBuf,
    pub model_digest: u64,
    /// Place-counter bits in use (P/T nets; 0 for other models).
    pub token_bits: u8,
    /// The final output path (absolute), if any; the run writes `OUT.partial` until done.
    pub output: Option<PathBuf>,
    /// Whether `explore` created the run directory (then the run that completes removes it).
    pub created_dir: bool,
}

/// The engine's counters at the checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Counters {
    pub transitions: u64,
    pub deadlocks: u64,
    pub max_depth: u64,
    /// The label of the first transition found to lead to the model's error state (DVE), in
    /// any leg up to this checkpoint: a resumed run reports it even though the leg that
    /// found it was interrupted.
    pub error_transition: Option<String>,
    /// Wall-clock seconds of the run up to this checkpoint, over every process (leg) of
    /// it, from each leg's start (model loading and index rebuilding included). Time a
    /// killed leg spent after its last checkpoint is not counted: that work is done again.
    pub elapsed_seconds: f64,
    /// CPU seconds (user + system), counted the same way.
    pub cpu_seconds: f64,
    /// How many times the run was resumed before this checkpoint's leg started.
    pub resumes: u64,
}

/// When this process's part of a run (a *leg*: the first `explore`, or one `resume`)
/// started, and the run's totals before it, so that stats and checkpoints report the whole
/// run's time across interruptions and this leg's separately.
#[derive(Clone, Copy, Debug)]
pub struct Leg {
    pub started: Instant,
    /// The process's CPU seconds when the leg started.
    pub cpu_at_start: f64,
    /// The run's totals before this leg (zero for a fresh run).
    pub elapsed_before: f64,
    pub cpu_before: f64,
    /// Resumes before this leg, this one included when it is a resume.
    pub resumes: u64,
}

impl Leg {
    /// A leg starting now: a fresh run, or the resume of `from`.
    pub fn start(from: Option<&Counters>) -> Leg {
        Leg {
            started: Instant::now(),
            cpu_at_start: crate::sys::process_cpu_seconds(),
            elapsed_before: from.map_or(0.0, |c| c.elapsed_seconds),
            cpu_before: from.map_or(0.0, |c| c.cpu_seconds),
            resumes: from.map_or(0, |c| c.resumes + 1),
        }
    }

    /// Wall-clock and CPU seconds of this leg so far.
    pub fn spent(&self) -> (f64, f64) {
        (
            self.started.elapsed().as_secs_f64(),
            (crate::sys::process_cpu_seconds() - self.cpu_at_start).max(0.0),
        )
    }
}

/// Where the search stood.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum EngineMark {
    Bfs {
        /// Depth of the level being expanded, states left in it, states found for the next.
        depth: u64,
        level_left: u64,
        next_level: u64,
        /// States in the level being expanded (for the progress line and the metrics).
        level_states: u64,
        open: OpenMark,
    },
    /// BFS with snapshots (`--store snapshots`, `engine/snapshots.rs`): its two levels live
    /// in RAM and are written whole into an image (`snapshots.open.G`): the level being
    /// expanded, then the level being built, one record per state.
    Snapshots {
        /// Depth of the level being expanded, and the position in it of the next state to
        /// expand (the states before it are expanded; the level is kept whole, for the
        /// duplicate checks and the snapshot it may become).
        depth: u64,
        position: u64,
        /// States expanded so far (the engine's tick and peak bookkeeping follow it).
        expansions: u64,
        /// The output number of each level's first state and the level's size in states and
        /// bytes (what the resume asks the budget for before reading them).
        cur_first: u64,
        cur_states: u64,
        cur_bytes: u64,
        next_first: u64,
        next_states: u64,
        next_bytes: u64,
        image: crate::storage::image::ImageMark,
    },
    Dfs {
        /// Frames on the stack plus the top.
        depth: u64,
        /// The decoded top frame, encoded as a stack record.
        top: Vec<u8>,
        stack: StackMark,
    },
    /// DFS with state space caching (`--store cache`, `engine/caching.rs`): a stack as
    /// [`EngineMark::Dfs`]'s (its frames also name the state's slot in the store and the
    /// sleep-set updates to undo on backtrack), and the sleep set itself; the table, the
    /// caches and the deadlocks are the store's part.
    Caching {
        /// Frames on the stack plus the top.
        depth: u64,
        /// The decoded top frame, encoded as a stack record.
        top: Vec<u8>,
        stack: StackMark,
        /// The sleep set's members, in the order the engine keeps them (empty without
        /// `--sleep-sets`).
        sleep: Vec<u32>,
    },
}

/// The BFS open set.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum OpenMark {
    /// The store keeps states: the open set is the id range `[next, store.len())`.
    ById { next: u64 },
    /// A segment queue of `(id, state)` records.
    Queue(QueueMark),
}

/// A file a checkpoint needs: its first `len` bytes, whose CRC-32 is `crc`. `name` is
/// relative to the run directory, or absolute (the output file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    pub len: u64,
    pub crc: u32,
}

pub use crate::codec::{decode, encode};

/// Why a checkpoint is taken now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// The interval elapsed.
    Periodic,
    /// SIGUSR1: write one and continue.
    OnDemand,
    /// SIGINT or SIGTERM: write one and stop.
    Stop(&'static str),
}

static STOP_INT: AtomicBool = AtomicBool::new(false);
static STOP_TERM: AtomicBool = AtomicBool::new(false);
static ON_DEMAND: AtomicBool = AtomicBool::new(false);
/// `CLOCK_MONOTONIC` nanoseconds (+1, so that 0 means none) of the first SIGINT/SIGTERM.
static FIRST_STOP_NS: AtomicU64 = AtomicU64::new(0);
/// Whether a checkpoint of this run is on disk (one was committed, or the run resumed one):
/// a second signal then stops with exit 7, not 130/143.
static CHECKPOINT_ON_DISK: AtomicBool = AtomicBool::new(false);
/// What a second signal prints when a checkpoint is on disk (it names the run directory;
/// built before the first checkpoint can exist, read by the handler without allocating).
static RESUME_HINT: OnceLock<Box<[u8]>> = OnceLock::new();

/// Signals this close to the first are the same interruption delivered twice: `timeout(1)`
/// sends its signal to the process and then to its process group, systemd to the main
/// process and its control group, within microseconds. Taken as a second interruption, the
/// duplicate had stopped a run in the middle of its checkpoint with exit 130, which tells a
/// wrapper script that nothing can be resumed (4 of 22 runs under `timeout -s INT`).
const SAME_SIGNAL_NS: u64 = 250_000_000;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only `ts`, and is async-signal-safe (POSIX), so it may
    // run in the signal handler below.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The handler of SIGINT (`flag` [`STOP_INT`], `code` 130) and SIGTERM ([`STOP_TERM`],
/// 143): the first asks for a checkpoint and a clean stop; a second, from 250 ms after the
/// first, stops at once — with exit 7 if a checkpoint is on disk (it is intact: files are
/// append-only and the manifest is renamed into place), else `code`. Runs in signal
/// context: atomics, `clock_gettime`, `write` and `_exit` only.
fn on_stop_signal(flag: &AtomicBool, code: i32) {
    let now = monotonic_ns().wrapping_add(1);
    match FIRST_STOP_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        Err(first) if now.wrapping_sub(first) < SAME_SIGNAL_NS => {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        Err(_) => {}
    }
    let (msg, code): (&[u8], i32) = match RESUME_HINT.get() {
        Some(hint) if CHECKPOINT_ON_DISK.load(Ordering::SeqCst) => (hint, crate::error::exit::CHECKPOINTED),
        _ => (
            b"spillway: stopped at once by a second signal, before the first checkpoint was written: nothing to resume\n",
            code,
        ),
    };
    // SAFETY: write(2) and _exit(2) are async-signal-safe; `msg` is a live byte slice.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::_exit(code);
    }
}

/// Installs the handlers of a checkpointed run in `dir`: SIGINT and SIGTERM ask for a
/// checkpoint and a clean stop (a second one, not a duplicate of the first, stops at once,
/// the last checkpoint intact), SIGUSR1 for a checkpoint. `resumed`: the run continues a
/// checkpoint, which is on disk from the start. Also ignores SIGXFSZ, so that a file-size
/// limit is an I/O error (EFBIG), not a crash.
pub fn install_signal_handlers(dir: &Path, resumed: bool) -> Result<(), CheckpointError> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
    let io = |e: std::io::Error| {
        CheckpointError::Refused(format!("cannot install signal handlers: {e}"))
    };
    let _ = RESUME_HINT.set(
        format!(
            "spillway: stopped at once by a second signal; the last checkpoint is intact (continue: spillway resume {})\n",
            dir.display()
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    if resumed && dir.join(MANIFEST).is_file() {
        CHECKPOINT_ON_DISK.store(true, Ordering::SeqCst);
    }
    // SAFETY: the actions only touch atomics and call async-signal-safe functions
    // (`on_stop_signal`), as signal_hook's low-level registration requires.
    unsafe {
        signal_hook::low_level::register(SIGINT, || on_stop_signal(&STOP_INT, 130)).map_err(io)?;
        signal_hook::low_level::register(SIGTERM, || on_stop_signal(&STOP_TERM, 143))
            .map_err(io)?;
    }
    signal_hook::flag::register(SIGUSR1, &ON_DEMAND).map_err(io)?;
    ignore_file_size_signal()
}

/// Ignores SIGXFSZ, so that a file-size limit (`ulimit -f`) is an I/O error (EFBIG) that
/// the run reports and cleans up after, not a crash that leaves `OUT.partial` behind.
pub fn ignore_file_size_signal() -> Result<(), CheckpointError> {
    static IGNORED: AtomicBool = AtomicBool::new(false);
    signal_hook::flag::register(signal_hook::consts::SIGXFSZ, &IGNORED)
        .map(|_| ())
        .map_err(|e| CheckpointError::Refused(format!("cannot install signal handlers: {e}")))
}

/// Parses a checkpoint interval: `30s`, `10m`, `2h`, a number of seconds, or `off` (only
/// on signals).
pub fn parse_interval(s: &str) -> Result<Option<Duration>, String> {
    let t = s.trim();
    if t == "off" || t == "never" {
        return Ok(None);
    }
    let (num, unit) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1.0),
        Some('m') => (&t[..t.len() - 1], 60.0),
        Some('h') => (&t[..t.len() - 1], 3600.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not an interval (examples: 30s, 10m, 2h, off)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("'{s}' is not a positive interval"));
    }
    // `from_secs_f64` panics on a value above `Duration::MAX` (`1e99`, `99999999999999999h`),
    // and a value that rounds to no time at all would checkpoint at every step.
    match Duration::try_from_secs_f64(v * unit) {
        Ok(d) if d.is_zero() => Err(format!("'{s}' is not a positive interval")),
        Ok(d) => Ok(Some(d)),
        Err(_) => Err(format!(
            "'{s}' is too long an interval (at most {} hours)",
            Duration::MAX.as_secs() / 3600
        )),
    }
}

/// Takes the checkpoints of one run.
pub struct Checkpointer {
    dir: PathBuf,
    interval: Option<Duration>,
    last: Instant,
    pub spec: RunSpec,
    generation: u64,
    /// Length and CRC-32 of each file's prefix at the last checkpoint.
    ledger: HashMap<String, (u64, u32)>,
    /// Where the output is written until it is complete (absolute), when there is one.
    pub output_partial: Option<PathBuf>,
    /// Checkpoints written by this process and the seconds they took (the store's and
    /// the writer's flushes included, see `engine::commit_checkpoint`).
    pub written: u64,
    pub seconds: f64,
    /// This leg's start and the run's totals before it.
    pub leg: Leg,
}

impl Checkpointer {
    /// A checkpointer for a run in `dir`; `last` is the manifest resumed from, if any.
    pub fn new(
        dir: &Path,
        interval: Option<Duration>,
        spec: RunSpec,
        output_partial: Option<PathBuf>,
        last: Option<&Manifest>,
        leg: Leg,
    ) -> Checkpointer {
        Checkpointer {
            dir: dir.to_path_buf(),
            interval,
            last: Instant::now(),
            spec,
            generation: last.map_or(0, |m| m.generation),
            ledger: last
                .map(|m| {
                    m.files
                        .iter()
                        .map(|f| (f.name.clone(), (f.len, f.crc)))
                        .collect()
                })
                .unwrap_or_default(),
            // Absolute: the ledger names files relative to the run directory otherwise.
            output_partial: output_partial.map(|p| std::path::absolute(&p).unwrap_or(p)),
            written: 0,
            seconds: 0.0,
            leg,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether a checkpoint is due: a signal arrived or the interval elapsed. Cheap enough to
    /// call every few hundred expansions.
    pub fn due(&mut self) -> Option<Due> {
        if STOP_INT.load(Ordering::Relaxed) {
            return Some(Due::Stop("SIGINT"));
        }
        if STOP_TERM.load(Ordering::Relaxed) {
            return Some(Due::Stop("SIGTERM"));
        }
        if ON_DEMAND.swap(false, Ordering::Relaxed) {
            return Some(Due::OnDemand);
        }
        match self.interval {
            Some(iv) if self.last.elapsed() >= iv => Some(Due::Periodic),
            _ => None,
        }
    }

    /// Commits a checkpoint whose components have made their files durable and returned
    /// their marks (see the module docs for the protocol). `files` lists the run-directory
    /// files the engine and the store need; the output file is added from `output`.
    pub fn commit(
        &mut self,
        engine: EngineMark,
        store: StoreMark,
        output: Option<SinkMark>,
        mut counters: Counters,
        engine_files: Vec<FileMark>,
    ) -> Result<(), CheckpointError> {
        let t0 = Instant::now();
        let mut marks = engine_files;
        marks.extend(store.files.iter().cloned());
        if let (Some(out), Some(path)) = (&output, &self.output_partial) {
            marks.push(FileMark {
                name: path.display().to_string(),
                len: out.len,
            });
        }
        let mut files = Vec::with_capacity(marks.len());
        for m in &marks {
            let crc = self.prefix_crc(&m.name, m.len)?;
            files.push(FileEntry {
                name: m.name.clone(),
                len: m.len,
                crc,
            });
        }
        let (wall, cpu) = self.leg.spent();
        counters.elapsed_seconds = self.leg.elapsed_before + wall;
        counters.cpu_seconds = self.leg.cpu_before + cpu;
        counters.resumes = self.leg.resumes;
        let manifest = Manifest {
            generation: self.generation + 1,
            spillway: env!("CARGO_PKG_VERSION").to_string(),
            run: self.spec.clone(),
            engine,
            store,
            output,
            counters,
            files,
        };
        // New segment files' directory entries must be durable before the manifest that
        // names them; so must the output file's (it lives elsewhere).
        sync_dir(&self.dir)?;
        if let Some(parent) = self.output_partial.as_ref().and_then(|p| p.parent()) {
            sync_dir(parent)?;
        }
        write_manifest(&self.dir, &manifest)?;
        self.generation = manifest.generation;
        self.ledger = manifest
            .files
            .iter()
            .map(|f| (f.name.clone(), (f.len, f.crc)))
            .collect();
        self.written += 1;
        CHECKPOINT_ON_DISK.store(true, Ordering::SeqCst);
        self.seconds += t0.elapsed().as_secs_f64();
        self.last = Instant::now();
        Ok(())
    }

    /// CRC-32 of the first `len` bytes of file `name`: the ledger's value combined with the
    /// bytes appended since, so only new bytes are read.
    fn prefix_crc(&self, name: &str, len: u64) -> Result<u32, CheckpointError> {
        let path = self.dir.join(name);
        let (from, mut hasher) = match self.ledger.get(name) {
            Some(&(l, c)) if l <= len => (l, crc32fast::Hasher::new_with_initial_len(c, l)),
            _ => (0, crc32fast::Hasher::new()),
        };
        let f = File::open(&path).map_err(|e| CheckpointError::io(&path, e))?;
        let mut tail = crc32fast::Hasher::new();
        read_range(&f, &path, from, len, |b| tail.update(b))?;
        hasher.combine(&tail);
        Ok(hasher.finalize())
    }
}

/// Calls `f` with the bytes `[from, to)` of `f`, in pieces.
fn read_range(
    f: &File,
    path: &Path,
    from: u64,
    to: u64,
    mut each: impl FnMut(&[u8]),
) -> Result<(), CheckpointError> {
    // Small: this runs inside the memory budget (and only once per checkpoint or resume).
    let mut buf = vec![0u8; 256 << 10];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(buf.len());
        let got = f
            .read_at(&mut buf[..n], at)
            .map_err(|e| CheckpointError::io(path, e))?;
        if got == 0 {
            return Err(CheckpointError::Corrupt {
                path: path.to_path_buf(),
                problem: format!("the file ends at byte {at}; the checkpoint needs {to} bytes"),
            });
        }
        each(&buf[..got]);
        at += got as u64;
    }
    Ok(())
}

/// Makes the directory's entries (new files, renames) durable.
pub fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| CheckpointError::io(dir, e))
}

/// Writes `manifest` atomically: `manifest.tmp`, fsync, rename, fsync the directory.
fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), CheckpointError> {
    let payload = encode(manifest);
    let mut bytes = Vec::with_capacity(PREFIX_LEN + payload.len() + 4);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&payload);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let tmp = dir.join(MANIFEST_TMP);
    let mut f = File::create(&tmp).map_err(|e| CheckpointError::io(&tmp, e))?;
    f.write_all(&bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| CheckpointError::io(&tmp, e))?;
    drop(f);
    let path = dir.join(MANIFEST);
    std::fs::rename(&tmp, &path).map_err(|e| CheckpointError::io(&path, e))?;
    sync_dir(dir)
}

/// Reads and checks the manifest of `dir`, then checks every file prefix it names. Opens
/// nothing for writing: a refused checkpoint is left exactly as it was.
pub fn load(dir: &Path) -> Result<Manifest, CheckpointError> {
    let path = dir.join(MANIFEST);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(no_checkpoint(dir)),
        Err(e) => return Err(CheckpointError::io(&path, e)),
    };
    let corrupt = |problem: String| CheckpointError::Corrupt {
        path: path.clone(),
        problem,
    };
    if bytes.len() < PREFIX_LEN + 4 {
        return Err(corrupt(format!(
            "truncated: {} bytes, a manifest has at least {}",
            bytes.len(),
            PREFIX_LEN + 4
        )));
    }
    if &bytes[0..8] != MAGIC {
        return Err(corrupt(format!(
            "not a spillway manifest: magic {:02x?}, expected \"SPILLCKP\"",
            &bytes[0..8]
        )));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(corrupt(format!(
            "manifest format version {version}; this spillway reads version {VERSION}"
        )));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
    let want = PREFIX_LEN as u64 + len + 4;
    if bytes.len() as u64 != want {
        return Err(corrupt(format!(
            "truncated or extended: {} bytes, the header says {want}",
            bytes.len()
        )));
    }
    let body = &bytes[..bytes.len() - 4];
    let stored = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let manifest: Manifest =
        decode(&body[PREFIX_LEN..]).map_err(|e| corrupt(format!("payload {e}")))?;
    for f in &manifest.files {
        let p = dir.join(&f.name);
        let file = File::open(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CheckpointError::Corrupt {
                path: p.clone(),
                problem: "missing; the checkpoint needs it".into(),
            },
            _ => CheckpointError::io(&p, e),
        })?;
        let have = file
            .metadata()
            .map_err(|e| CheckpointError::io(&p, e))?
            .len();
        if have < f.len {
            return Err(CheckpointError::Corrupt {
                path: p,
                problem: format!(
                    "truncated: {have} bytes, the checkpoint needs the first {}",
                    f.len
                ),
            });
        }
        let mut h = crc32fast::Hasher::new();
        read_range(&file, &p, 0, f.len, |b| h.update(b))?;
        let crc = h.finalize();
        if crc != f.crc {
            return Err(CheckpointError::Corrupt {
                path: p,
                problem: format!(
                    "its first {} bytes changed since the checkpoint: CRC-32 {crc:#010x}, recorded {:#010x}",
                    f.len, f.crc
                ),
            });
        }
    }
    Ok(manifest)
}

/// Why `dir` holds no manifest, as far as the directory tells, and what to do. A run that
/// completes deletes its checkpoint (and the directory, if its `explore` made it), and so
/// does one that failed before its first checkpoint: a missing or empty directory does not
/// say which, so both are named — a finished run must not be told to start again. A run's
/// lock file without a manifest is a run stopped before its first checkpoint (or, with the
/// lock held, one still before it).
fn no_checkpoint(dir: &Path) -> CheckpointError {
    let d = dir.display();
    let again = format!("start it again with the same `spillway explore … --workdir {d}` command");
    let lock = dir.join(LOCK);
    let message = if lock.is_file() {
        let held = File::open(&lock)
            .is_ok_and(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)));
        if held {
            format!("{d}: no checkpoint here yet: the run is still running and has not written its first checkpoint")
        } else {
            format!("{d}: no checkpoint here: the run was stopped before its first checkpoint, so there is nothing to resume; {again} (it reuses the directory)")
        }
    } else {
        let missing = if dir.exists() {
            ""
        } else {
            " (the directory does not exist; a run that completes deletes the one its `explore` made)"
        };
        format!(
            "{d}: no checkpoint here{missing}: the run finished (its output is complete) or never wrote one; if it never did, check that it was started with --checkpoint-every and this --workdir, and {again}"
        )
    };
    CheckpointError::Refused(message)
}

/// The CRC-32 the manifest records for `name`.
pub fn recorded_crc(manifest: &Manifest, name: &str) -> Option<u32> {
    manifest
        .files
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.crc)
}

/// Name of the lock file a process holds while it runs in a run directory.
pub const LOCK: &str = "lock";

/// An exclusive lock on a run directory, held while a process explores in it, so that two
/// processes (a resume started twice, say) never write the same files. Released when
/// dropped or when the process ends, however it ends.
pub struct DirLock {
    _file: File,
}

/// Locks `dir` (which must exist) for this process, or says who cannot.
pub fn lock_dir(dir: &Path) -> Result<DirLock, CheckpointError> {
    let path = dir.join(LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| CheckpointError::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(DirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(CheckpointError::Refused(format!(
            "{}: another spillway process is running in this directory",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(CheckpointError::io(&path, e)),
    }
}

/// Whether `name` is one of the files a checkpointed run makes in its directory: the
/// manifest (and its `.tmp`), the lock, and the storage layer's files — segments
/// (`NAME.seg`, queue files `NAME.NNNNNN.seg`), hot windows (`NAME.hot`) and index runs
/// (`NAME.run.G`). Cleaning a run directory removes these and nothing else, so that a file
/// a user put there (notes, the `-o` output, a stats file) is never deleted.
pub fn is_run_file(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    if name == MANIFEST || name == MANIFEST_TMP || name == LOCK {
        return true;
    }
    // Every storage file is `STEM.SUFFIX` with a non-empty stem.
    let owned = |suffix: &str| name.len() > suffix.len() && name.ends_with(suffix);
    if owned(".seg") || owned(".hot") {
        return true;
    }
    match name.rsplit_once(".run.") {
        Some((stem, gen)) => {
            !stem.is_empty() && !gen.is_empty() && gen.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// Whether `dir` holds a checkpoint.
pub fn exists(dir: &Path) -> bool {
    dir.join(MANIFEST).exists()
}

/// xxh3-64 of a file's bytes (the model's identity).
pub fn file_digest(path: &Path) -> Result<u64, CheckpointError> {
    let bytes = std::fs::read(path).map_err(|e| CheckpointError::io(path, e))?;
    Ok(xxhash_rust::xxh3::xxh3_64(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_with_units_and_off() {
        assert_eq!(
            parse_interval("30s").unwrap(),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_interval("10m").unwrap(),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            parse_interval("2h").unwrap(),
            Some(Duration::from_secs(7200))
        );
        assert_eq!(
            parse_interval("0.5").unwrap(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_interval("off").unwrap(), None);
        for bad in [
            "",
            "m",
            "-1s",
            "0",
            "ten minutes",
            "inf",
            "1e99",
            "99999999999999999h",
            "1e-300",
        ] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn run_files_are_told_from_foreign_ones() {
        use std::ffi::OsStr;
        for own in [
            "manifest",
            "manifest.tmp",
            "lock",
            "full.states.seg",
            "bfs.open.000012.seg",
            "full.states.hot",
            "full.index.run.3",
        ] {
            assert!(is_run_file(OsStr::new(own)), "{own}");
        }
        for foreign in [
            "NOTES.txt",
            "out.slts",
            "out.aut.partial",
            "stats.json",
            ".seg",
            "x.run.",
            "x.run.3a",
            "manifest.bak",
        ] {
            assert!(!is_run_file(OsStr::new(foreign)), "{foreign}");
        }
    }
}
