//! The driver behind `spillway explore`: model file in, stats (and an LTS file) out.
//!
//! The output is written to `OUT.partial` and renamed to `OUT` only once it is complete, so a
//! failed or killed run never replaces an earlier good file; the partial file has no footer
//! (native) or no header counts (`.aut`) and every reader rejects it.
//!
//! P/T nets start with the narrowest place counters that hold the initial marking; if a place
//! overflows, the run restarts from scratch with wider counters (8 → 16 → 32 bits) and says so.
//! Overflow at 32 bits is an error.

use super::{EngineOptions, ExploreStats, Order};
use crate::error::{ExploreError, LtsError, ModelError};
use crate::lts::{LtsFormat, LtsSink, NullSink};
use crate::model::petri::{self, TokenWidth};
use crate::model::{Model, Source};
use crate::storage::{Storage, StorageConfig};
use crate::store::bitstate::BitstateStore;
use crate::store::comback::{CombackOptions, CombackStore};
use crate::store::delta::{DeltaOptions, DeltaStore};
use crate::store::full::FullStore;
use crate::store::hashcompact::HashCompactStore;
use crate::store::{StateStore, StoreMark};
use std::path::{Path, PathBuf};

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
        StoreKind::Delta => Box::new(DeltaStore::resume(model, cfg.delta.clone(), storage, mark)?),
        StoreKind::Comback => Box::new(CombackStore::resume(model, opts.comback, storage, mark)?),
        kind @ (StoreKind::Full | StoreKind::Hashcompact | StoreKind::Bitstate) => {
            return Err(ExploreError::Config(format!(
                "--store {} cannot be resumed yet",
                format!("{kind:?}").to_lowercase()
            )))
        }
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
    if cfg.store == StoreKind::Bitstate && cfg.output.is_some() {
        return Err(ExploreError::Config(
            "--store bitstate keeps no state numbers, so it cannot write an LTS; drop -o or use another store".into(),
        ));
    }
    // Declared before the store so that it is dropped after it: the work directory goes last.
    // ComBack and Δ always keep their records in segment files (a scratch storage when the
    // run does not spill); the engine's own structures spill only when the run does.
    let storage = if cfg.storage.spills() || needs_storage(cfg.store) {
        Some(Storage::new(&cfg.storage)?)
    } else {
        None
    };
    let engine_storage = storage.as_ref().filter(|_| cfg.storage.spills());
    let mut store = make_store(cfg, model, storage.as_ref())?;
    let mut stats = match &cfg.output {
        None => super::explore_in(
            model,
            store.as_mut(),
            &mut NullSink,
            cfg.order,
            &cfg.engine,
            engine_storage,
        )?,
        Some(out) => {
            let format = LtsFormat::from_path(out)?;
            let partial = partial_path(out);
            let mut sink: Box<dyn LtsSink> = format.create(&partial)?;
            let stats = super::explore_in(
                model,
                store.as_mut(),
                sink.as_mut(),
                cfg.order,
                &cfg.engine,
                engine_storage,
            )?;
            drop(sink);
            std::fs::rename(&partial, out).map_err(|source| LtsError::Io {
                path: out.to_path_buf(),
                source,
            })?;
            stats
        }
    };
    if let Some(out) = &cfg.output {
        stats.output = Some(out.display().to_string());
        stats.output_bytes = std::fs::metadata(out).ok().map(|m| m.len());
    }
    stats.model = model.describe();
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
    match Source::read(path)? {
        Source::Aut(m) => explore_model(&m, cfg),
        Source::Pnml(net) => {
            let mut bits = petri::initial_bits(&net, cfg.token_width);
            loop {
                let model = petri::build(net.clone(), bits)?;
                match explore_model(model.as_ref(), cfg) {
                    Err(ExploreError::Model(ModelError::TokenOverflow { place, limit }))
                        if cfg.token_width == TokenWidth::Auto =>
                    {
                        match TokenWidth::wider(bits) {
                            Some(wider) => {
                                note(&format!(
                                    "place '{place}' exceeded {limit} tokens with {bits}-bit counters; restarting with {wider}-bit counters"
                                ));
                                bits = wider;
                            }
                            None => {
                                return Err(ModelError::TokenOverflow { place, limit }.into());
                            }
                        }
                    }
                    other => return other,
                }
            }
        }
    }
}
