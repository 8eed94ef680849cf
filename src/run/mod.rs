//! The driver above the engines: model in, stats (and an LTS file) out. [`Search`] is the
//! one way to start or resume a search (`spillway explore` and `resume` use it, and so does
//! a library user).
//!
//! The output is written to `OUT.partial` and renamed to `OUT` only once it is complete, so a
//! failed or killed run never replaces an earlier good file; the partial file has no footer
//! (native) or no header counts (`.aut`) and every reader rejects it.
//!
//! P/T nets start with the narrowest place counters that hold the initial marking; if a place
//! overflows, the run restarts from scratch with wider counters (8 → 16 → 32 bits) and says so.
//! Overflow at 32 bits is an error.

use crate::checkpoint::{self, Checkpointer, Leg, Manifest, RunSpec};
use crate::engine::observe::{Clock, MetricsConfig, Observer};
use crate::engine::{EngineOptions, ExploreStats, Order, Session};
use crate::error::{CheckpointError, ExploreError, LtsError, ModelError};
use crate::lts::{LtsFormat, LtsSink, NullSink};
use crate::model::petri::{self, TokenWidth};
use crate::model::{Model, Source};
use crate::storage::{MemoryLimit, Storage, StorageConfig};
use crate::store::{RunShape, StateStore, StoreConfig, StoreMark};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything `explore` needs besides the model path.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ExploreConfig {
    pub order: Order,
    /// The store and its options.
    pub store: StoreConfig,
    pub token_width: TokenWidth,
    pub output: Option<PathBuf>,
    /// Write a `.dot` output above its size limit (`--force`).
    pub force: bool,
    pub engine: EngineOptions,
    /// RAM budget, work directory and spill policy.
    pub storage: StorageConfig,
    /// Checkpointing (`--checkpoint-every`): the run directory, the interval, and how the
    /// run was started.
    pub checkpoint: Option<CheckpointConfig>,
    /// `--metrics`: a JSON line per interval to this file.
    pub metrics: Option<MetricsConfig>,
    /// Without a budget (`storage.memory` unlimited): stop with exit 6 at a ceiling taken
    /// from the machine (`sys::default_ceiling`) rather than grow until the kernel's OOM
    /// killer ends the run. What `spillway explore` does without `--memory`;
    /// `--memory unlimited` turns it off.
    pub machine_ceiling: bool,
}

/// Settings of a checkpointed run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CheckpointConfig {
    /// The run directory: holds the segment files and the manifest.
    pub dir: PathBuf,
    /// Time between periodic checkpoints (`None`: only on SIGUSR1, SIGINT, SIGTERM).
    pub interval: Option<Duration>,
}

impl Default for ExploreConfig {
    fn default() -> Self {
        ExploreConfig {
            order: Order::Bfs,
            store: StoreConfig::default(),
            token_width: TokenWidth::Auto,
            output: None,
            force: false,
            engine: EngineOptions::default(),
            storage: StorageConfig::default(),
            checkpoint: None,
            metrics: None,
            machine_ceiling: false,
        }
    }
}

/// Builds the store `cfg.store`, or reopens it from a checkpoint's `mark`.
pub fn make_store<'m>(
    cfg: &ExploreConfig,
    model: &'m dyn Model,
    storage: Option<&Storage>,
    mark: Option<&StoreMark>,
) -> Result<Box<dyn StateStore + 'm>, ExploreError> {
    let spec = cfg.store.spec();
    Ok(match (mark, storage) {
        // The store's record in the manifest is checksummed with it, so a record the store
        // cannot take back (it does not decode, or it contradicts itself or the model) was
        // written wrong: corrupted checkpoint data (exit 5) naming the manifest, not an
        // internal error.
        (Some(m), Some(st)) => spec.resume(model, st, m).map_err(|e| match e {
            crate::error::StoreError::Invalid { store, message } => {
                ExploreError::Checkpoint(CheckpointError::Corrupt {
                    path: st.dir().join(checkpoint::MANIFEST),
                    problem: format!("the {store} store's record: {message}"),
                })
            }
            e => e.into(),
        })?,
        (Some(_), None) => {
            return Err(ExploreError::Config(
                "resuming a store needs the run's kept storage".into(),
            ))
        }
        (None, st) => spec.build(model, st)?,
    })
}

/// Refuses, before the search starts, a `--memory` budget below what the run needs at the
/// least: the store's own minimum ([`StateStore::min_ram_bytes`]), the minimal buffers of
/// the engine's open set or stack when they spill, and the output writer's buffers, plus
/// the reserve for the rest of the process. Exit 6, naming the figure.
fn check_minimum(
    storage: &Storage,
    store: &dyn StateStore,
    engine_spills: bool,
    cfg: &ExploreConfig,
) -> Result<(), ExploreError> {
    if storage.config.memory == MemoryLimit::Unlimited {
        return Ok(());
    }
    let engine = if engine_spills {
        storage.min_container_bytes()
    } else {
        0
    };
    let writer = match &cfg.output {
        Some(out) => LtsFormat::from_path(out)?.writer_ram_bytes(),
        None => 0,
    };
    storage.budget.claim(
        &format!("the {} store", store.name()),
        store.min_ram_bytes(),
        engine + writer,
        "its tables, caches and minimal file buffers at the start, next to the engine's open set or stack and the output writer",
    )?;
    Ok(())
}

pub use crate::files::{partial_path, PartialOutput};

/// Explores one model with the given store and writes the output, if any.
/// A checkpointed configuration is refused: a checkpoint records the model file (and its
/// digest) to continue from, so checkpointed runs go through [`explore_file`].
fn explore_model(model: &dyn Model, cfg: &ExploreConfig) -> Result<ExploreStats, ExploreError> {
    if cfg.checkpoint.is_some() {
        return Err(ExploreError::Config(
            "a checkpointed run needs its model file: use explore_file (explore_model cannot record what to resume from)".into(),
        ));
    }
    let partial = lock_output(cfg, true)?;
    // Nothing can resume this run (it has no checkpoint), so an unfinished `OUT.partial` goes
    // whether the run fails or the model panics, as `finish_run_dir` does for the command
    // line; the library had left one behind after every failed run. After success the file
    // is renamed and `discard` does nothing.
    struct Discard<'a>(Option<&'a PartialOutput>);
    impl Drop for Discard<'_> {
        fn drop(&mut self) {
            if let Some(p) = self.0 {
                p.discard();
            }
        }
    }
    let _discard = Discard(partial.as_ref());
    explore_model_from(model, cfg, None, None, &Leg::start(None), partial.as_ref())
}

/// Locks the `OUT.partial` of `cfg`'s output, if it has one ([`PartialOutput::lock`]):
/// refused at once when another process writes the same output.
fn lock_output(cfg: &ExploreConfig, create: bool) -> Result<Option<PartialOutput>, ExploreError> {
    Ok(cfg
        .output
        .as_deref()
        .map(|out| PartialOutput::lock(out, create))
        .transpose()?)
}

/// [`explore_model`] for a checkpointed run (`spec` says how it was started), continuing
/// from `resume` when given (already checked by [`checkpoint::load`]). `partial` is the
/// locked `OUT.partial` of `cfg.output`.
fn explore_model_from(
    model: &dyn Model,
    cfg: &ExploreConfig,
    spec: Option<RunSpec>,
    resume: Option<&Manifest>,
    leg: &Leg,
    partial: Option<&PartialOutput>,
) -> Result<ExploreStats, ExploreError> {
    let shape = RunShape {
        order: cfg.order,
        writes_lts: cfg.output.is_some(),
        checkpointed: cfg.checkpoint.is_some(),
    };
    if let Some(why) = cfg.store.spec().refuse(&shape) {
        // A resumed configuration is the one the manifest records (checksummed with it):
        // one its own run would have refused was recorded wrong.
        return Err(match (resume, &cfg.checkpoint) {
            (Some(_), Some(ck)) => CheckpointError::Corrupt {
                path: ck.dir.join(checkpoint::MANIFEST),
                problem: format!("the recorded configuration: {why}"),
            }
            .into(),
            _ => ExploreError::Config(why),
        });
    }
    // Declared before the store so that it is dropped after it: the work directory goes last.
    // ComBack and Δ always keep their records in segment files (a scratch storage when the
    // run does not spill); the engine's own structures spill only when the run does (or is
    // checkpointed).
    let storage = match &cfg.checkpoint {
        Some(ck) => Some(Storage::kept(&ck.dir, &cfg.storage)),
        None if cfg.storage.spills() || cfg.store.spec().needs_storage() => {
            Some(Storage::new(&cfg.storage)?)
        }
        None => None,
    }
    .map(|st| st.with_random_lookups(cfg.order == Order::Dfs));
    let engine_storage = storage
        .as_ref()
        .filter(|_| cfg.storage.spills() || cfg.checkpoint.is_some());
    let mut store = make_store(cfg, model, storage.as_ref(), resume.map(|m| &m.store))?;
    if let Some(st) = &storage {
        check_minimum(st, store.as_ref(), engine_storage.is_some(), cfg)?;
    }
    let states_at_start = store.len();
    let mut checkpointer = match (&cfg.checkpoint, spec) {
        (Some(ck), Some(spec)) => Some(Checkpointer::new(
            &ck.dir,
            ck.interval,
            spec,
            partial.map(|p| p.path().to_path_buf()),
            resume,
            *leg,
        )),
        _ => None,
    };
    // The output writer's buffers are resident too: charge them to the budget, so that the
    // caches leave them room.
    let _writer_account = match (&storage, &cfg.output) {
        (Some(st), Some(out)) if st.config.memory != MemoryLimit::Unlimited => {
            let a = st.budget.account("lts.writer");
            a.set(LtsFormat::from_path(out)?.writer_ram_bytes(), 0, 0);
            Some(a)
        }
        _ => None,
    };
    let mut sink: Box<dyn LtsSink> = match (&cfg.output, partial) {
        (Some(out), Some(partial)) => {
            let format = LtsFormat::from_path(out)?;
            match resume.and_then(|m| m.output.as_ref().map(|o| (m, o))) {
                Some((m, mark)) => {
                    // The mark comes from a manifest whose checksum held: a mark that does
                    // not fit the file (a writer state that does not decode, a length past
                    // its end) is corrupted checkpoint data, named by the manifest (exit 5),
                    // not a bad command line. Refused before the file is cut or written.
                    let manifest = cfg.checkpoint.as_ref().map_or_else(
                        || partial.path().to_path_buf(),
                        |ck| ck.dir.join(checkpoint::MANIFEST),
                    );
                    let corrupt = |problem: String| CheckpointError::Corrupt {
                        path: manifest.clone(),
                        problem,
                    };
                    let name = partial.path().display().to_string();
                    let crc = checkpoint::recorded_crc(m, &name).ok_or_else(|| {
                        corrupt(format!(
                            "it has a writer state for {name} but no checksum of that file"
                        ))
                    })?;
                    format
                        .resume(partial.writer()?, out, mark, crc)
                        .map_err(|e| match e {
                            LtsError::Invalid(problem) => corrupt(problem).into(),
                            e => ExploreError::from(e),
                        })?
                }
                None => {
                    partial.truncate()?;
                    format.create_on(
                        partial.writer()?,
                        out,
                        &crate::lts::SinkOptions {
                            force: cfg.force,
                            states: None,
                        },
                    )?
                }
            }
        }
        (Some(_), None) => {
            return Err(ExploreError::Config(
                "an output needs its locked OUT.partial".into(),
            ))
        }
        (None, _) => Box::new(NullSink),
    };
    let mut observer = Observer::new(
        Clock {
            started: leg.started,
            cpu_at_start: leg.cpu_at_start,
            elapsed_before: leg.elapsed_before,
            cpu_before: leg.cpu_before,
        },
        storage.as_ref().map(|st| st.budget.clone()),
        match cfg.storage.memory {
            MemoryLimit::Bytes(b) => Some(b),
            MemoryLimit::Unlimited => None,
        },
        cfg.metrics.as_ref(),
    )?;
    starting_line(&mut observer, store.as_ref(), cfg.order, resume);
    let session = Session {
        storage: engine_storage,
        checkpoint: checkpointer.as_mut(),
        resume: resume.map(|m| (m.engine.clone(), m.counters.clone())),
        observer: Some(observer),
    };
    let mut stats = crate::engine::explore_session(
        model,
        store.as_mut(),
        sink.as_mut(),
        cfg.order,
        &cfg.engine,
        session,
    )?;
    drop(sink);
    if let (Some(out), Some(partial)) = (&cfg.output, partial) {
        // Renamed under the lock, which the caller drops afterwards.
        partial.rename()?;
        stats.output = Some(out.display().to_string());
        stats.output_bytes = std::fs::metadata(out).ok().map(|m| m.len());
    }
    stats.model = model.describe();
    // Time of the whole run, over every leg, and of this leg alone; rates over the
    // matching spans (every state over the whole run, this leg's new states over it).
    let (leg_wall, leg_cpu) = leg.spent();
    stats.leg_wall_seconds = leg_wall;
    stats.leg_cpu_seconds = leg_cpu;
    stats.leg_states = stats.states.saturating_sub(states_at_start);
    stats.leg_states_per_second = rate(stats.leg_states, leg_wall);
    stats.wall_seconds = leg.elapsed_before + leg_wall;
    stats.cpu_seconds = leg.cpu_before + leg_cpu;
    stats.states_per_second = rate(stats.states, stats.wall_seconds);
    stats.resumes = leg.resumes;
    // Documented as the same as `wall_seconds` (kept for older scripts): in every run.
    stats.run_seconds = Some(stats.wall_seconds);
    if let Some(ck) = &checkpointer {
        stats.checkpoints = ck.written;
        stats.checkpoint_seconds = ck.seconds;
    }
    stats.resumed_from = resume.map(|m| m.generation);
    if let Some(st) = &storage {
        store.sync_accounts();
        stats.structures = st.budget.usage();
        stats.workdir = Some(st.dir().display().to_string());
        stats.memory_limit_bytes = match st.config.memory {
            crate::storage::MemoryLimit::Bytes(b) => Some(b),
            crate::storage::MemoryLimit::Unlimited => None,
        };
    }
    Ok(stats)
}

/// Writes the metrics file's first line, phase `starting`, before the search (the engines
/// write the next ones at their ticks, every 16,384 expansions or steps, when one is due):
/// the store as built or reopened, and where a resumed search stands (its checkpoint's
/// level or depth and transitions), so a plot starts at the start, for DFS too.
fn starting_line(
    observer: &mut Observer,
    store: &dyn StateStore,
    order: Order,
    resume: Option<&Manifest>,
) {
    use crate::checkpoint::EngineMark;
    use crate::engine::observe::{Head, Phase, Position};
    if !observer.has_metrics() {
        return;
    }
    let position = match (resume.map(|m| &m.engine), order) {
        (
            Some(EngineMark::Bfs {
                depth,
                level_states,
                ..
            }),
            _,
        ) => Position::Bfs {
            level: *depth,
            level_states: *level_states,
        },
        (
            Some(EngineMark::Snapshots {
                depth, cur_states, ..
            }),
            _,
        ) => Position::Bfs {
            level: *depth,
            level_states: *cur_states,
        },
        (Some(EngineMark::Dfs { depth, .. } | EngineMark::Caching { depth, .. }), _) => {
            Position::Dfs { depth: *depth }
        }
        (None, Order::Bfs) => Position::Bfs {
            level: 0,
            level_states: 1,
        },
        (None, Order::Dfs) => Position::Dfs { depth: 0 },
    };
    store.sync_accounts();
    let head = Head {
        phase: Phase::Starting,
        states: store.len(),
        transitions: resume.map_or(0, |m| m.counters.transitions),
        position,
    };
    let sample = observer.sample(head, true);
    observer.write(&sample, std::time::Instant::now());
}

/// Reads a model file and explores it; `note` receives human-readable remarks (e.g. a restart
/// with wider counters).
fn explore_file(
    path: &Path,
    cfg: &ExploreConfig,
    extra: &[(String, PathBuf)],
    note: &mut dyn FnMut(&str),
) -> Result<ExploreStats, ExploreError> {
    // Writing the output (or its `.partial`) must not replace the model being read, nor
    // one output another: each path is examined once.
    check_files(path, cfg, extra)?;
    // The .fsm and .dot writers have no checkpoint: found at the first checkpoint (or at
    // SIGINT), it would stop the run there and throw its work away.
    if let (Some(_), Some(out)) = (&cfg.checkpoint, &cfg.output) {
        let format = LtsFormat::from_path(out)?;
        if !format.checkpointable() {
            return Err(ExploreError::Config(format!(
                "-o {}: {} output cannot be checkpointed: --checkpoint-every needs a .slts or .aut output (or none); write one of those and convert it afterwards with `spillway lts convert`",
                out.display(),
                format.name()
            )));
        }
    }
    let leg = Leg::start(None);
    let ceiling = warn_if_budget_exceeds_machine(cfg, note);
    let (created, _lock) = match &cfg.checkpoint {
        Some(ck) => {
            let (created, lock) = prepare_run_dir(&ck.dir)?;
            (created, Some(lock))
        }
        None => (false, None),
    };
    // Another process writing the same output is refused before the search, and its
    // `OUT.partial` left alone (the run directory just prepared is cleared).
    let partial = match lock_output(cfg, true) {
        Ok(p) => p,
        Err(e) => {
            let result = Err(e);
            finish_run_dir(cfg, created, None, &result);
            return result;
        }
    };
    let start = RunStart {
        leg,
        created_dir: created,
        partial,
    };
    let source = Source::read(path);
    if let (Ok(_), Some(c)) = (&source, &ceiling) {
        note(c);
    }
    arm_budget(cfg);
    let result = match source {
        Err(e) => Err(e.into()),
        Ok(Source::Aut(m)) => run_checkpointed(&m, cfg, path, 0, None, &start),
        Ok(Source::Dve(m)) => run_checkpointed(m.as_ref(), cfg, path, 0, None, &start),
        Ok(Source::Pnml(net)) => {
            let bits = petri::initial_bits(&net, cfg.token_width);
            explore_net(&net, bits, cfg, path, None, note, &start)
        }
    };
    finish_run_dir(cfg, created, start.partial.as_ref(), &result);
    result
}

/// How this process's part of a run began: its leg (times), whether `explore` created
/// the run directory, and the locked `OUT.partial` of the output (held until the run ends,
/// over restarts with wider counters).
struct RunStart {
    leg: Leg,
    created_dir: bool,
    partial: Option<PartialOutput>,
}

fn rate(states: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        states as f64 / seconds
    } else {
        0.0
    }
}

/// Under `--memory`, arms the engines' backstop (`sys::check_budget`): the budget plus what
/// the process holds now, the model read (the binary's baseline).
fn arm_budget(cfg: &ExploreConfig) {
    crate::sys::set_budget_ceiling(match cfg.storage.memory {
        MemoryLimit::Bytes(b) => Some(b),
        MemoryLimit::Unlimited => None,
    });
}

/// Warns (through `note`) when `--memory` is more than the machine can give now; without a
/// budget, sets the machine's ceiling when the configuration asks for one and returns the
/// line that says so (printed once the model has been read, so that a malformed model's
/// error stays the only line).
fn warn_if_budget_exceeds_machine(
    cfg: &ExploreConfig,
    note: &mut dyn FnMut(&str),
) -> Option<String> {
    crate::sys::set_ceiling(None);
    crate::sys::set_budget_ceiling(None);
    match cfg.storage.memory {
        MemoryLimit::Bytes(b) => {
            if let Some(w) = crate::sys::MachineMemory::read().warn_if_short(b) {
                note(&format!("warning: {w}"));
            }
        }
        MemoryLimit::Unlimited if cfg.machine_ceiling => {
            if let Some((bytes, what)) = crate::sys::default_ceiling() {
                crate::sys::set_ceiling(Some(bytes));
                return Some(format!(
                    "memory ceiling: {what}; the run stops there (exit 6) unless given --memory SIZE (spills to disk) or --memory unlimited"
                ));
            }
        }
        MemoryLimit::Unlimited => {}
    }
    None
}

/// Explores a P/T net from `bits`-bit counters, restarting with wider ones on overflow
/// (with `TokenWidth::Auto`); `resume` continues a checkpoint made with `bits`.
fn explore_net(
    net: &petri::PetriNet,
    mut bits: u8,
    cfg: &ExploreConfig,
    path: &Path,
    mut resume: Option<&Manifest>,
    note: &mut dyn FnMut(&str),
    start: &RunStart,
) -> Result<ExploreStats, ExploreError> {
    loop {
        let result = petri::build(net.clone(), bits)
            .map_err(ExploreError::from)
            .and_then(|model| {
                run_checkpointed(model.as_ref(), cfg, path, bits, resume.take(), start)
            });
        match result {
            Err(ExploreError::Model(ModelError::TokenOverflow { place, limit }))
                if cfg.token_width == TokenWidth::Auto =>
            {
                match TokenWidth::wider(bits) {
                    Some(wider) => {
                        note(&format!(
                            "place '{place}' exceeded {limit} tokens with {bits}-bit counters; restarting with {wider}-bit counters"
                        ));
                        if let Some(ck) = &cfg.checkpoint {
                            // The checkpoint's files are of the narrower run: start afresh.
                            clear_dir(&ck.dir, true)?;
                        }
                        bits = wider;
                    }
                    None => {
                        return Err(ModelError::CounterOverflow {
                            path: path.to_path_buf(),
                            place,
                            limit,
                            bits,
                            hint: "the net is unbounded, or bounded above what spillway's widest counters hold",
                        }
                        .into())
                    }
                }
            }
            Err(ExploreError::Model(ModelError::TokenOverflow { place, limit })) => {
                return Err(ModelError::CounterOverflow {
                    path: path.to_path_buf(),
                    place,
                    limit,
                    bits,
                    hint: if TokenWidth::wider(bits).is_some() {
                        "give a wider --token-bits, or leave it at auto (the default), which widens counters and restarts"
                    } else {
                        "the net is unbounded, or bounded above what spillway's widest counters hold"
                    },
                }
                .into())
            }
            other => return other,
        }
    }
}

/// [`explore_model_from`] with the run spec of a checkpointed run.
fn run_checkpointed(
    model: &dyn Model,
    cfg: &ExploreConfig,
    path: &Path,
    bits: u8,
    resume: Option<&Manifest>,
    start: &RunStart,
) -> Result<ExploreStats, ExploreError> {
    let spec = match (&cfg.checkpoint, resume) {
        (_, Some(m)) => Some(RunSpec {
            token_bits: bits,
            ..m.run.clone()
        }),
        (Some(_), None) => Some(RunSpec {
            config: crate::codec::encode(&absolute_config(cfg)?),
            model: absolute(path)?,
            model_digest: checkpoint::file_digest(path)?,
            token_bits: bits,
            output: cfg.output.as_deref().map(absolute).transpose()?,
            created_dir: start.created_dir,
        }),
        (None, None) => None,
    };
    explore_model_from(model, cfg, spec, resume, &start.leg, start.partial.as_ref())
}

fn absolute(p: &Path) -> Result<PathBuf, ExploreError> {
    std::path::absolute(p).map_err(|e| CheckpointError::io(p, e).into())
}

/// `cfg` with every path absolute, as a checkpoint records it (a resume may run elsewhere).
fn absolute_config(cfg: &ExploreConfig) -> Result<ExploreConfig, ExploreError> {
    let mut c = cfg.clone();
    c.output = c.output.as_deref().map(absolute).transpose()?;
    c.storage.workdir = c.storage.workdir.as_deref().map(absolute).transpose()?;
    if let Some(ck) = &mut c.checkpoint {
        ck.dir = absolute(&ck.dir)?;
    }
    // `-` is standard output, not a file in the working directory: made absolute it had
    // become a file named `-` once the run was resumed.
    if let Some(m) = c.metrics.as_mut().filter(|m| m.path.as_os_str() != "-") {
        m.path = absolute(&m.path)?;
    }
    Ok(c)
}

/// Refuses, before anything is written, a run two of whose files are one: the model, the
/// output and the `OUT.partial` it is written through, the metrics file and the files the
/// caller writes after the run (`extra`: `--stats-json`). Each would overwrite another, or
/// the model, and the run would still report success. `-` (standard output) is no file.
fn check_files(
    model: &Path,
    cfg: &ExploreConfig,
    extra: &[(String, PathBuf)],
) -> Result<(), ExploreError> {
    use crate::files::Role;
    let stdout = |p: &Path| p.as_os_str() == "-";
    let partial = cfg.output.as_deref().map(partial_path);
    let mut files = vec![Role {
        role: "the model file".into(),
        path: model,
        input: true,
    }];
    if let (Some(out), Some(partial)) = (&cfg.output, &partial) {
        files.push(Role {
            role: "-o".into(),
            path: out,
            input: false,
        });
        files.push(Role {
            role: "the unfinished output".into(),
            path: partial,
            input: false,
        });
    }
    if let Some(m) = cfg.metrics.as_ref().filter(|m| !stdout(&m.path)) {
        files.push(Role {
            role: "--metrics".into(),
            path: &m.path,
            input: false,
        });
    }
    for (role, path) in extra.iter().filter(|(_, p)| !stdout(p)) {
        files.push(Role {
            role: role.clone(),
            path,
            input: false,
        });
    }
    crate::files::check_distinct(&files)?;
    // A directory in the output's place is found only when the finished `OUT.partial` is
    // renamed over it (or the stats are written): after the whole search, whose work is
    // then lost. Nothing the run writes can go there, so it is refused now.
    let directory = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_dir());
    let is_a_directory = |option: &str| {
        std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            format!("is a directory; {option} needs a file path"),
        )
    };
    if let Some(out) = cfg.output.as_ref().filter(|p| directory(p)) {
        return Err(LtsError::Io {
            path: out.clone(),
            source: is_a_directory("-o"),
        }
        .into());
    }
    if let Some(out) = &cfg.output {
        crate::files::check_lts_output(out).map_err(|source| LtsError::Io {
            path: out.clone(),
            source,
        })?;
    }
    if let Some((option, path)) = extra.iter().find(|(_, p)| !stdout(p) && directory(p)) {
        return Err(ExploreError::Io {
            path: path.clone(),
            what: "cannot write there",
            source: is_a_directory(option),
        });
    }
    // Nor can they go into a missing or read-only directory: found now, as `--metrics` is
    // when it is opened, by creating (and removing) the temporary file they are written
    // through — not after the search, with its statistics lost.
    for (_, path) in extra.iter().filter(|(_, p)| !stdout(p)) {
        crate::files::check_writable_beside(path).map_err(|source| ExploreError::Io {
            path: path.clone(),
            what: "cannot write there",
            source,
        })?;
    }
    Ok(())
}

/// Makes `dir` ready for a new checkpointed run and locks it: created if missing; refused
/// if it holds a checkpoint, if another process runs in it, or if it holds files spillway
/// did not make. A directory left by a run stopped before its first checkpoint (spillway's
/// lock file, no manifest, no live lock) is cleared and reused. Returns whether it was
/// created, and the lock.
fn prepare_run_dir(dir: &Path) -> Result<(bool, checkpoint::DirLock), ExploreError> {
    if checkpoint::exists(dir) {
        return Err(CheckpointError::Refused(format!(
            "{} holds the checkpoint of an unfinished run: continue it with `spillway resume {}`, or delete the directory to start over",
            dir.display(),
            dir.display()
        ))
        .into());
    }
    let (created, had_lock) = match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut had_lock = false;
            let mut foreign = None;
            let mut other = None;
            for e in entries.flatten() {
                let name = e.file_name();
                if name == checkpoint::LOCK {
                    had_lock = true;
                } else if checkpoint::is_run_file(&name) && e.path().is_file() {
                    other.get_or_insert(name);
                } else {
                    foreign.get_or_insert(name);
                }
            }
            // A file spillway did not write is refused even beside a stopped run's lock:
            // the run's files are cleared below, and the user's must not be mixed in.
            // Without the lock, files named like a run's are not known to be spillway's.
            if let Some(f) = foreign.or(if had_lock { None } else { other }) {
                return Err(CheckpointError::Refused(format!(
                    "{}: a checkpointed run needs an empty or new --workdir (its files are deleted when the run completes), and this one holds {:?}, which spillway did not write; empty it or pick another directory",
                    dir.display(),
                    f
                ))
                .into());
            }
            (false, had_lock)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
            (true, false)
        }
        Err(e) => return Err(CheckpointError::io(dir, e).into()),
    };
    // Refuses if a live process holds it (a run still going, or a resume).
    let lock = checkpoint::lock_dir(dir)?;
    if had_lock {
        // A run stopped before its first checkpoint: nothing to resume, start over.
        clear_dir(dir, true)?;
    }
    Ok((created, lock))
}

/// Deletes the run's own files in `dir` ([`checkpoint::is_run_file`]: manifest, segments,
/// index runs, the lock — but not the lock when `keep_lock`, as this process holds it).
/// Anything else is left: a user may have put a file in the directory between an
/// interruption and `resume`, or named an output inside it, and only spillway's files are
/// spillway's to delete. The manifest goes first, so that a clean-up cut short never leaves
/// a manifest naming files that are gone.
fn clear_dir(dir: &Path, keep_lock: bool) -> Result<(), ExploreError> {
    let manifest = dir.join(checkpoint::MANIFEST);
    match std::fs::remove_file(&manifest) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(CheckpointError::io(&manifest, e).into())
        }
        _ => {}
    }
    let entries = std::fs::read_dir(dir).map_err(|e| CheckpointError::io(dir, e))?;
    for e in entries.flatten() {
        let name = e.file_name();
        if (keep_lock && name == checkpoint::LOCK) || !checkpoint::is_run_file(&name) {
            continue;
        }
        let p = e.path();
        if p.is_file() {
            std::fs::remove_file(&p).map_err(|e| CheckpointError::io(&p, e))?;
        }
    }
    Ok(())
}

/// After a run: on success a checkpointed run's files go (and the directory, if `explore`
/// made it). After a failure they stay for `spillway resume` — unless no checkpoint was
/// ever committed: then there is nothing to resume, the run directory is emptied (it is
/// reused by the next `explore`) and the unfinished `OUT.partial` is deleted (this
/// process's, `partial`, still locked: never another writer's), so that a full disk gets its
/// space back. A run stopped by a signal after a checkpoint keeps both.
fn finish_run_dir(
    cfg: &ExploreConfig,
    created: bool,
    partial: Option<&PartialOutput>,
    result: &Result<ExploreStats, ExploreError>,
) {
    let resumable = cfg
        .checkpoint
        .as_ref()
        .is_some_and(|ck| checkpoint::exists(&ck.dir));
    if result.is_err() {
        if resumable {
            return;
        }
        if let Some(p) = partial {
            p.discard();
        }
    }
    let Some(ck) = &cfg.checkpoint else {
        return;
    };
    if clear_dir(&ck.dir, false).is_ok() && created {
        let _ = std::fs::remove_dir(&ck.dir);
    }
}

/// What `spillway resume` may change.
#[derive(Clone, Debug, Default)]
pub struct ResumeOverrides {
    pub memory: Option<MemoryLimit>,
    /// `Some(None)`: checkpoint only on signals.
    pub interval: Option<Option<Duration>>,
    pub progress: Option<bool>,
    /// `--metrics FILE` (a new file for this leg and the next ones of this process).
    pub metrics: Option<PathBuf>,
    /// `--metrics-every INTERVAL`.
    pub metrics_every: Option<Duration>,
    /// `--threads N` (or the available cores).
    pub threads: Option<usize>,
}

/// Continues the checkpointed run in `dir` with the configuration its manifest records and
/// the `overrides` (the only settings a resume may change).
fn resume_dir(
    dir: &Path,
    overrides: &ResumeOverrides,
    extra: &[(String, PathBuf)],
    note: &mut dyn FnMut(&str),
) -> Result<ExploreStats, ExploreError> {
    if !checkpoint::exists(dir) {
        // Checked before locking, so that a wrong path is not given a lock file.
        checkpoint::load(dir)?;
    }
    let _lock = checkpoint::lock_dir(dir)?;
    let manifest = checkpoint::load(dir)?;
    let leg = Leg::start(Some(&manifest.counters));
    // The recorded configuration, and only the declared overrides on top.
    let mut cfg: ExploreConfig =
        crate::codec::decode(&manifest.run.config).map_err(|e| CheckpointError::Corrupt {
            path: dir.join(checkpoint::MANIFEST),
            problem: format!("the recorded configuration {e}"),
        })?;
    let corrupt = |problem: String| -> ExploreError {
        CheckpointError::Corrupt {
            path: dir.join(checkpoint::MANIFEST),
            problem,
        }
        .into()
    };
    // Recorded absolute and non-empty by the run: an empty path names no file (it had been
    // exit 4 with a message naming nothing).
    if manifest.run.model.as_os_str().is_empty() {
        return Err(corrupt("the recorded model path is empty".into()));
    }
    if manifest
        .run
        .output
        .as_ref()
        .is_some_and(|o| o.as_os_str().is_empty())
    {
        return Err(corrupt("the recorded output path is empty".into()));
    }
    let digest = checkpoint::file_digest(&manifest.run.model)?;
    if digest != manifest.run.model_digest {
        return Err(CheckpointError::Refused(format!(
            "{}: the model changed since the run started (its digest differs); a checkpoint only continues the model it was made from",
            manifest.run.model.display()
        ))
        .into());
    }
    if let Some(m) = overrides.memory {
        cfg.storage.memory = m;
        cfg.machine_ceiling = false;
    }
    if let Some(p) = overrides.progress {
        cfg.engine.progress = p;
    }
    if let Some(t) = overrides.threads {
        cfg.engine.threads = t;
    }
    // The file the run started with (recorded absolute) unless the resume names another.
    if let Some(path) = &overrides.metrics {
        cfg.metrics = Some(MetricsConfig {
            path: if path.as_os_str() == "-" {
                path.clone()
            } else {
                absolute(path)?
            },
            every: cfg
                .metrics
                .as_ref()
                .map_or(crate::engine::observe::DEFAULT_METRICS_EVERY, |m| m.every),
        });
    }
    if let Some(every) = overrides.metrics_every {
        match &mut cfg.metrics {
            Some(m) => m.every = every,
            None => return Err(ExploreError::Config(
                "--metrics-every needs --metrics FILE: this run was started without a metrics file"
                    .into(),
            )),
        }
    }
    let interval = overrides
        .interval
        .unwrap_or_else(|| cfg.checkpoint.as_ref().and_then(|c| c.interval));
    cfg.checkpoint = Some(CheckpointConfig {
        dir: dir.to_path_buf(),
        interval,
    });
    cfg.output = manifest.run.output.clone();
    check_files(&manifest.run.model, &cfg, extra)?;
    if let Some(c) = warn_if_budget_exceeds_machine(&cfg, note) {
        note(&c);
    }
    note(&format!(
        "resuming checkpoint {} of {}: {} transitions so far, {:.1} s of the run before (resume {})",
        manifest.generation,
        manifest.run.model.display(),
        manifest.counters.transitions,
        manifest.counters.elapsed_seconds,
        leg.resumes
    ));
    let path = manifest.run.model.clone();
    // The checkpointed output is continued in place: locked, not emptied (another process
    // writing it is refused, and the checkpoint left as it is).
    let partial = lock_output(&cfg, manifest.output.is_none())?;
    let start = RunStart {
        leg,
        created_dir: manifest.run.created_dir,
        partial,
    };
    let source = Source::read(&path)?;
    arm_budget(&cfg);
    let result = match source {
        Source::Aut(m) => run_checkpointed(&m, &cfg, &path, 0, Some(&manifest), &start),
        Source::Dve(m) => run_checkpointed(m.as_ref(), &cfg, &path, 0, Some(&manifest), &start),
        // The counter width the run used: one the nets do not have was recorded wrong (it
        // had been a model error, exit 3).
        Source::Pnml(_) if !matches!(manifest.run.token_bits, 8 | 16 | 32) => {
            Err(corrupt(format!(
                "the recorded place-counter width is {} bits; a P/T net's run uses 8, 16 or 32",
                manifest.run.token_bits
            )))
        }
        Source::Pnml(net) => explore_net(
            &net,
            manifest.run.token_bits,
            &cfg,
            &path,
            Some(&manifest),
            note,
            &start,
        ),
    };
    // The directory goes too if the run's `explore` created it.
    finish_run_dir(
        &cfg,
        manifest.run.created_dir,
        start.partial.as_ref(),
        &result,
    );
    result.map_err(sized_when_started)
}

/// A resume keeps the options that sized the run's structures (a bit array, a cache) and
/// refuses to change them, so "lower the option that sizes it" ([`crate::sys::check_structure`])
/// cannot be followed: say what can be done instead.
fn sized_when_started(e: ExploreError) -> ExploreError {
    use crate::error::{StorageError, StoreError};
    // The option the structure's name gives in parentheses, as `check_structure`'s callers
    // write it: "the bit array of 2^30 bits (--bitstate-log2-bits)".
    let option = |structure: &str| {
        structure
            .rfind("(--")
            .and_then(|i| {
                let rest = &structure[i + 1..];
                rest.find(')').map(|j| rest[..j].to_string())
            })
            .unwrap_or_else(|| "value of the option that sized it".into())
    };
    let reword = |s: StorageError| {
        match s {
        StorageError::BudgetTooSmall {
            structure,
            need,
            budget,
            message,
            minimum,
        } if message.ends_with(crate::sys::LOWER_THE_OPTION) => StorageError::BudgetTooSmall {
            message: format!(
                "before anything else; resume keeps the size the run started with: resume with a larger --memory, or start the run again with a smaller {}",
                option(&structure)
            ),
            structure,
            need,
            budget,
            minimum,
        },
        StorageError::TooLarge {
            structure,
            bytes,
            room,
            hint,
        } if hint == crate::sys::LOWER_THE_OPTION => StorageError::TooLarge {
            hint: format!(
                "resume keeps the size the run started with: start the run again with a smaller {}",
                option(&structure)
            ),
            structure,
            bytes,
            room,
        },
        s => s,
    }
    };
    match e {
        ExploreError::Storage(s) => ExploreError::Storage(reword(s)),
        ExploreError::Store(StoreError::Storage(s)) => {
            ExploreError::Store(StoreError::Storage(reword(s)))
        }
        e => e,
    }
}

/// What a [`Search`] starts from.
enum Start<'a> {
    File(&'a Path),
    Model(&'a dyn Model),
    Resume {
        dir: &'a Path,
        overrides: ResumeOverrides,
    },
}

/// The one way to run a search: from a model file, from a model built in Rust, or resumed
/// from a checkpoint, with human-readable notes (a restart with wider counters, a resume's
/// position, warnings) passed to a callback.
///
/// ```
/// use spillway::run::{ExploreConfig, Search};
/// use std::path::Path;
///
/// let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/Philosophers-PT-000005.pnml");
/// let stats = Search::file(&path).config(ExploreConfig::default()).run().unwrap();
/// assert_eq!((stats.states, stats.transitions), (243, 945));
/// ```
pub struct Search<'a> {
    start: Start<'a>,
    cfg: ExploreConfig,
    note: Box<dyn FnMut(&str) + 'a>,
    extra: Vec<(String, PathBuf)>,
}

impl<'a> Search<'a> {
    fn new(start: Start<'a>) -> Self {
        Search {
            start,
            cfg: ExploreConfig::default(),
            note: Box::new(|_| {}),
            extra: Vec::new(),
        }
    }

    /// Explores the model in `path` (`.pnml`, `.aut`, `.dve`).
    pub fn file(path: &'a Path) -> Self {
        Self::new(Start::File(path))
    }

    /// Explores a model built in Rust (not checkpointable: a checkpoint records its file).
    pub fn model(model: &'a dyn Model) -> Self {
        Self::new(Start::Model(model))
    }

    /// Continues the checkpointed run in `dir` with the configuration its manifest records,
    /// changed only by `overrides`.
    pub fn resume(dir: &'a Path, overrides: ResumeOverrides) -> Self {
        Self::new(Start::Resume { dir, overrides })
    }

    /// The run's configuration (ignored by [`Search::resume`], which has its own).
    pub fn config(mut self, cfg: ExploreConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// Where human-readable notes go.
    pub fn notes(mut self, note: impl FnMut(&str) + 'a) -> Self {
        self.note = Box::new(note);
        self
    }

    /// A file the caller writes after the run, named by its option (`--stats-json`): a run
    /// from a file or a checkpoint refuses to start (exit 2) when it is the model, the
    /// output or the metrics file, rather than let one overwrite the other.
    pub fn also_writes(mut self, option: &str, path: &Path) -> Self {
        self.extra.push((option.to_string(), path.to_path_buf()));
        self
    }

    /// Runs the search to its end (or its first error).
    pub fn run(mut self) -> Result<ExploreStats, ExploreError> {
        match self.start {
            Start::File(path) => explore_file(path, &self.cfg, &self.extra, &mut *self.note),
            Start::Model(model) => explore_model(model, &self.cfg),
            Start::Resume { dir, overrides } => {
                resume_dir(dir, &overrides, &self.extra, &mut *self.note)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StorageError;

    #[test]
    fn a_resume_says_what_can_be_done_about_a_structure_sized_at_the_start() {
        let too_large = ExploreError::Storage(StorageError::TooLarge {
            structure: "the bit array of 2^40 bits (--bitstate-log2-bits)".into(),
            bytes: 1 << 37,
            room: 1 << 34,
            hint: crate::sys::LOWER_THE_OPTION.into(),
        });
        let fresh = too_large.to_string();
        assert!(
            fresh.ends_with("; lower the option that sizes it"),
            "{fresh}"
        );
        let resumed = sized_when_started(too_large).to_string();
        assert!(
            resumed.ends_with(
                "; resume keeps the size the run started with: start the run again with a smaller --bitstate-log2-bits"
            ),
            "{resumed}"
        );
        // Other errors pass unchanged.
        let e = sized_when_started(ExploreError::Config("x".into()));
        assert_eq!(e.to_string(), "x");
    }
}
