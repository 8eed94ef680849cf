//! The driver behind `spillway explore`: model file in, stats (and an LTS file) out.
//!
//! The output is written to `OUT.partial` and renamed to `OUT` only once it is complete, so a
//! failed or killed run never replaces an earlier good file; the partial file has no footer
//! (native) or no header counts (`.aut`) and every reader rejects it.
//!
//! P/T nets start with the narrowest place counters that hold the initial marking; if a place
//! overflows, the run restarts from scratch with wider counters (8 → 16 → 32 bits) and says so.
//! Overflow at 32 bits is an error.

use super::{EngineOptions, ExploreStats, Order, Session};
use crate::checkpoint::{self, Checkpointer, Manifest, RunSpec};
use crate::error::{CheckpointError, ExploreError, LtsError, ModelError};
use crate::lts::{LtsFormat, LtsSink, NullSink};
use crate::model::petri::{self, TokenWidth};
use crate::model::{Model, Source};
use crate::storage::{MemoryLimit, Storage, StorageConfig};
use crate::store::bitstate::BitstateStore;
use crate::store::comback::{CombackOptions, CombackStore};
use crate::store::delta::{DeltaOptions, DeltaStore};
use crate::store::full::FullStore;
use crate::store::hashcompact::HashCompactStore;
use crate::store::{StateStore, StoreMark};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The visited-state store to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// Full state table (exact baseline).
    Full,
    /// Δ-markings: every kδ-th depth explicit, other states as (predecessor, transition).
    Delta,
    /// ComBack: hash → state numbers + backedge table, exact by reconstruction.
    Comback,
    /// Hash compaction: a b-bit hash per state (inexact baseline).
    Hashcompact,
    /// Bit-state hashing: k bits per state in a bit array (inexact baseline, no LTS output).
    Bitstate,
}

/// Settings of the memory-reduced stores (ignored by the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// ComBack settings; `comback.hash_bits` is also the hash-compaction width.
    pub comback: CombackOptions,
    /// Bit-state array size: `2^bitstate_log2_bits` bits.
    pub bitstate_log2_bits: u32,
    /// Bit-state hash functions per state.
    pub bitstate_k: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            comback: CombackOptions::default(),
            bitstate_log2_bits: 30,
            bitstate_k: 3,
        }
    }
}

/// Everything `explore` needs besides the model path.
#[derive(Clone, Debug)]
pub struct ExploreConfig {
    pub order: Order,
    pub store: StoreKind,
    pub store_options: StoreOptions,
    pub token_width: TokenWidth,
    pub output: Option<PathBuf>,
    pub engine: EngineOptions,
    /// RAM budget, work directory and spill policy.
    pub storage: StorageConfig,
    /// Options of the Δ store (used with `StoreKind::Delta`).
    pub delta: DeltaOptions,
    /// Checkpointing (`--checkpoint-every`): the run directory, the interval, and how the
    /// run was started.
    pub checkpoint: Option<CheckpointConfig>,
}

/// Settings of a checkpointed run.
#[derive(Clone, Debug)]
pub struct CheckpointConfig {
    /// The run directory: holds the segment files and the manifest.
    pub dir: PathBuf,
    /// Time between periodic checkpoints (`None`: only on SIGUSR1, SIGINT, SIGTERM).
    pub interval: Option<Duration>,
    /// The `spillway explore` arguments, recorded so that `resume` rebuilds the options.
    pub args: Vec<String>,
}

impl Default for ExploreConfig {
    fn default() -> Self {
        ExploreConfig {
            order: Order::Bfs,
            store: StoreKind::Full,
            store_options: StoreOptions::default(),
            token_width: TokenWidth::Auto,
            output: None,
            engine: EngineOptions::default(),
            storage: StorageConfig::default(),
            delta: DeltaOptions::default(),
            checkpoint: None,
        }
    }
}

/// Whether the store keeps its records in segment vectors whatever the spill policy (ComBack
/// and Δ: their backedges and records are meant for disk), so that it needs a [`Storage`].
pub fn needs_storage(kind: StoreKind) -> bool {
    matches!(kind, StoreKind::Comback | StoreKind::Delta)
}

fn storage_needed(kind: StoreKind) -> ExploreError {
    ExploreError::Config(format!(
        "--store {} keeps its records in segment files and needs a storage",
        format!("{kind:?}").to_lowercase()
    ))
}

/// Builds the store `cfg.store`; ComBack and Δ borrow the model to replay paths and keep their
/// records in segment vectors of `storage`, which they need ([`needs_storage`]). With
/// `storage`, the full store keeps its state vectors in segment files.
pub fn make_store<'m>(
    cfg: &ExploreConfig,
    model: &'m dyn Model,
    storage: Option<&Storage>,
) -> Result<Box<dyn StateStore + 'm>, ExploreError> {
    let opts = &cfg.store_options;
    Ok(match (cfg.store, storage) {
        (StoreKind::Full, None) => Box::new(FullStore::new(model.state_len())),
        (StoreKind::Full, Some(st)) => Box::new(FullStore::spilling(model.state_len(), st)?),
        (StoreKind::Delta, Some(st)) => Box::new(DeltaStore::new(model, cfg.delta.clone(), st)?),
        (StoreKind::Comback, Some(st)) => Box::new(CombackStore::new(model, opts.comback, st)?),
        (kind @ (StoreKind::Delta | StoreKind::Comback), None) => return Err(storage_needed(kind)),
        // A checkpointed run's lossy stores log their hashes so that a resume can rebuild
        // them without the checkpoint copying them.
        (StoreKind::Hashcompact, Some(st)) if st.is_kept() => {
            Box::new(HashCompactStore::logged(opts.comback.hash_bits, st)?)
        }
        (StoreKind::Bitstate, Some(st)) if st.is_kept() => Box::new(BitstateStore::logged(
            opts.bitstate_log2_bits,
            opts.bitstate_k,
            st,
        )?),
        (StoreKind::Hashcompact, _) => Box::new(HashCompactStore::new(opts.comback.hash_bits)?),
        (StoreKind::Bitstate, _) => Box::new(BitstateStore::new(
            opts.bitstate_log2_bits,
            opts.bitstate_k,
        )?),
    })
}

/// Reopens the store `cfg.store` of a checkpoint from its `mark` (see
/// [`StateStore::checkpoint`]); `storage` is the checkpointed run's kept storage.
pub fn resume_store<'m>(
    cfg: &ExploreConfig,
    model: &'m dyn Model,
    storage: &Storage,
    mark: &StoreMark,
) -> Result<Box<dyn StateStore + 'm>, ExploreError> {
    let opts = &cfg.store_options;
    Ok(match cfg.store {
        StoreKind::Full => Box::new(FullStore::resume(storage, mark)?),
        StoreKind::Hashcompact => Box::new(HashCompactStore::resume(storage, mark)?),
        StoreKind::Bitstate => Box::new(BitstateStore::resume(storage, mark)?),
        StoreKind::Delta => Box::new(DeltaStore::resume(model, cfg.delta.clone(), storage, mark)?),
        StoreKind::Comback => Box::new(CombackStore::resume(model, opts.comback, storage, mark)?),
    })
}

/// The temporary name an output file has until it is complete.
pub fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Explores one model with the given store and writes the output, if any.
pub fn explore_model(model: &dyn Model, cfg: &ExploreConfig) -> Result<ExploreStats, ExploreError> {
    explore_model_from(model, cfg, None, None)
}

/// [`explore_model`] for a checkpointed run (`spec` says how it was started), continuing
/// from `resume` when given (already checked by [`checkpoint::load`]).
fn explore_model_from(
    model: &dyn Model,
    cfg: &ExploreConfig,
    spec: Option<RunSpec>,
    resume: Option<&Manifest>,
) -> Result<ExploreStats, ExploreError> {
    if cfg.delta.replace.is_some() {
        let why = if cfg.store != StoreKind::Delta {
            Some("it applies to --store delta")
        } else if cfg.order != Order::Dfs {
            Some("it needs --order dfs (a DFS never forgets the states of its search path, so it terminates; a BFS could meet forgotten states forever)")
        } else if cfg.checkpoint.is_some() {
            Some("a run that forgets states cannot be checkpointed (its index is not saved)")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(ExploreError::Config(format!(
                "--delta-index-limit cannot be used here: {why}"
            )));
        }
    }
    if cfg.store == StoreKind::Bitstate && cfg.output.is_some() {
        return Err(ExploreError::Config(
            "--store bitstate keeps no state numbers, so it cannot write an LTS; drop -o or use another store".into(),
        ));
    }
    // Declared before the store so that it is dropped after it: the work directory goes last.
    // ComBack and Δ always keep their records in segment files (a scratch storage when the
    // run does not spill); the engine's own structures spill only when the run does (or is
    // checkpointed).
    let storage = match &cfg.checkpoint {
        Some(ck) => Some(Storage::kept(&ck.dir, &cfg.storage)),
        None if cfg.storage.spills() || needs_storage(cfg.store) => {
            Some(Storage::new(&cfg.storage)?)
        }
        None => None,
    };
    let engine_storage = storage
        .as_ref()
        .filter(|_| cfg.storage.spills() || cfg.checkpoint.is_some());
    let mut store = match (resume, &storage) {
        (Some(m), Some(st)) => resume_store(cfg, model, st, &m.store)?,
        _ => make_store(cfg, model, storage.as_ref())?,
    };
    let partial = cfg.output.as_ref().map(|out| partial_path(out));
    let mut checkpointer = match (&cfg.checkpoint, spec) {
        (Some(ck), Some(spec)) => Some(Checkpointer::new(
            &ck.dir,
            ck.interval,
            spec,
            partial.clone(),
            resume,
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
    let mut sink: Box<dyn LtsSink> = match (&cfg.output, &partial) {
        (Some(out), Some(partial)) => {
            let format = LtsFormat::from_path(out)?;
            match resume.and_then(|m| m.output.as_ref().map(|o| (m, o))) {
                Some((m, mark)) => {
                    let name = partial.display().to_string();
                    let crc = checkpoint::recorded_crc(m, &name).ok_or_else(|| {
                        CheckpointError::Refused(format!(
                            "{name}: the checkpoint has a writer state but no checksum for its output"
                        ))
                    })?;
                    format.resume(partial, mark, crc)?
                }
                None => format.create(partial)?,
            }
        }
        _ => Box::new(NullSink),
    };
    let session = Session {
        storage: engine_storage,
        checkpoint: checkpointer.as_mut(),
        resume: resume.map(|m| (m.engine.clone(), m.counters)),
    };
    let mut stats = super::explore_session(
        model,
        store.as_mut(),
        sink.as_mut(),
        cfg.order,
        &cfg.engine,
        session,
    )?;
    drop(sink);
    if let (Some(out), Some(partial)) = (&cfg.output, &partial) {
        std::fs::rename(partial, out).map_err(|source| LtsError::Io {
            path: out.to_path_buf(),
            source,
        })?;
        stats.output = Some(out.display().to_string());
        stats.output_bytes = std::fs::metadata(out).ok().map(|m| m.len());
    }
    stats.model = model.describe();
    if let Some(ck) = &checkpointer {
        stats.checkpoints = ck.written;
        stats.checkpoint_seconds = ck.seconds;
        stats.run_seconds = Some(ck.elapsed_before + stats.wall_seconds);
    }
    stats.resumed_from = resume.map(|m| m.generation);
    if let Some(st) = &storage {
        store.report();
        stats.structures = st.budget.usage();
        stats.workdir = Some(st.dir().display().to_string());
        stats.memory_limit_bytes = match st.config.memory {
            crate::storage::MemoryLimit::Bytes(b) => Some(b),
            crate::storage::MemoryLimit::Unlimited => None,
        };
    }
    Ok(stats)
}

/// Reads a model file and explores it; `note` receives human-readable remarks (e.g. a restart
/// with wider counters).
pub fn explore_file(
    path: &Path,
    cfg: &ExploreConfig,
    note: &mut dyn FnMut(&str),
) -> Result<ExploreStats, ExploreError> {
    // Writing the output must not replace (or truncate) the model being read.
    if let Some(out) = &cfg.output {
        crate::files::check_output(path, out, &partial_path(out))?;
    }
    let created = match &cfg.checkpoint {
        Some(ck) => prepare_run_dir(&ck.dir)?,
        None => false,
    };
    let _lock = match &cfg.checkpoint {
        Some(ck) => Some(checkpoint::lock_dir(&ck.dir)?),
        None => None,
    };
    let result = match Source::read(path) {
        Err(e) => Err(e.into()),
        Ok(Source::Aut(m)) => run_checkpointed(&m, cfg, path, 0, None),
        Ok(Source::Pnml(net)) => {
            let bits = petri::initial_bits(&net, cfg.token_width);
            explore_net(&net, bits, cfg, path, None, note)
        }
    };
    finish_run_dir(cfg, created, &result);
    result
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
) -> Result<ExploreStats, ExploreError> {
    loop {
        let model = petri::build(net.clone(), bits)?;
        match run_checkpointed(model.as_ref(), cfg, path, bits, resume.take()) {
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
                            clear_dir(&ck.dir)?;
                        }
                        bits = wider;
                    }
                    None => return Err(ModelError::TokenOverflow { place, limit }.into()),
                }
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
) -> Result<ExploreStats, ExploreError> {
    let spec = match (&cfg.checkpoint, resume) {
        (_, Some(m)) => Some(RunSpec {
            token_bits: bits,
            ..m.run.clone()
        }),
        (Some(ck), None) => Some(RunSpec {
            args: ck.args.clone(),
            cwd: std::env::current_dir().map_err(|e| CheckpointError::io(Path::new("."), e))?,
            model: absolute(path)?,
            model_digest: checkpoint::file_digest(path)?,
            token_bits: bits,
            output: cfg.output.as_deref().map(absolute).transpose()?,
        }),
        (None, None) => None,
    };
    explore_model_from(model, cfg, spec, resume)
}

fn absolute(p: &Path) -> Result<PathBuf, ExploreError> {
    std::path::absolute(p).map_err(|e| CheckpointError::io(p, e).into())
}

/// Makes `dir` ready for a new checkpointed run: created if missing; refused if it holds a
/// checkpoint or anything else. Returns whether it was created.
fn prepare_run_dir(dir: &Path) -> Result<bool, ExploreError> {
    if checkpoint::exists(dir) {
        return Err(CheckpointError::Refused(format!(
            "{} holds the checkpoint of an unfinished run: continue it with `spillway resume {}`, or delete the directory",
            dir.display(),
            dir.display()
        ))
        .into());
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CheckpointError::Refused(format!(
                    "{}: a checkpointed run needs an empty or new --workdir (its files are deleted when the run completes)",
                    dir.display()
                ))
                .into());
            }
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
            Ok(true)
        }
        Err(e) => Err(CheckpointError::io(dir, e).into()),
    }
}

/// Deletes every file in `dir` (a run directory: spillway made them all).
fn clear_dir(dir: &Path) -> Result<(), ExploreError> {
    let entries = std::fs::read_dir(dir).map_err(|e| CheckpointError::io(dir, e))?;
    for e in entries.flatten() {
        let p = e.path();
        if p.is_file() {
            std::fs::remove_file(&p).map_err(|e| CheckpointError::io(&p, e))?;
        }
    }
    Ok(())
}

/// After a checkpointed run: on success its files go (and the directory, if the run made
/// it); after a failure they stay for `spillway resume` — unless no checkpoint was ever
/// committed, in which case there is nothing to resume and the directory is left as found.
fn finish_run_dir(cfg: &ExploreConfig, created: bool, result: &Result<ExploreStats, ExploreError>) {
    let Some(ck) = &cfg.checkpoint else {
        return;
    };
    if result.is_err() && checkpoint::exists(&ck.dir) {
        return;
    }
    if clear_dir(&ck.dir).is_ok() && created {
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
}

/// Continues the checkpointed run in `dir`. `rebuild` turns the recorded arguments into a
/// configuration (the CLI's parser), resolving relative paths against the recorded
/// working directory.
pub fn resume_dir(
    dir: &Path,
    overrides: &ResumeOverrides,
    rebuild: &dyn Fn(&RunSpec) -> Result<ExploreConfig, ExploreError>,
    note: &mut dyn FnMut(&str),
) -> Result<ExploreStats, ExploreError> {
    if !checkpoint::exists(dir) {
        // Checked before locking, so that a wrong path is not given a lock file.
        checkpoint::load(dir)?;
    }
    let _lock = checkpoint::lock_dir(dir)?;
    let manifest = checkpoint::load(dir)?;
    let mut cfg = rebuild(&manifest.run)?;
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
    }
    if let Some(p) = overrides.progress {
        cfg.engine.progress = p;
    }
    let interval = overrides
        .interval
        .unwrap_or_else(|| cfg.checkpoint.as_ref().and_then(|c| c.interval));
    cfg.checkpoint = Some(CheckpointConfig {
        dir: dir.to_path_buf(),
        interval,
        args: manifest.run.args.clone(),
    });
    cfg.output = manifest.run.output.clone();
    note(&format!(
        "resuming checkpoint {} of {}: {} transitions so far",
        manifest.generation,
        manifest.run.model.display(),
        manifest.counters.transitions
    ));
    let path = manifest.run.model.clone();
    let result = match Source::read(&path)? {
        Source::Aut(m) => run_checkpointed(&m, &cfg, &path, 0, Some(&manifest)),
        Source::Pnml(net) => explore_net(
            &net,
            manifest.run.token_bits,
            &cfg,
            &path,
            Some(&manifest),
            note,
        ),
    };
    // A resumed run's directory existed already: keep it, delete only its files.
    finish_run_dir(&cfg, false, &result);
    result
}
