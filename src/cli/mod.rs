//! Command-line definitions (clap) and the step from raw arguments to a validated config.

use crate::engine::run::{CheckpointConfig, ExploreConfig, StoreKind, StoreOptions};
use crate::engine::{EngineOptions, Order};
use crate::model::petri::TokenWidth;
use crate::storage::budget::{parse_size, MemoryLimit};
use crate::storage::{SegOptions, SpillPolicy, StorageConfig};
use crate::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet,
};
use crate::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate, Replacement};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

pub mod lts;
pub use lts::LtsArgs;

pub const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    internal error
  2    bad command line
  3    malformed or unsupported model
  4    I/O error (missing file, unwritable output, disk full)
  5    corrupted or truncated data file
  6    resource limit hit (memory budget, state-id space, place counter width)
  7    stopped by SIGINT/SIGTERM after writing a checkpoint (continue: spillway resume DIR)
  130  interrupted without a checkpoint";

#[derive(Debug, Parser)]
#[command(
    name = "spillway",
    version,
    about = "Generate very large state spaces on modest machines",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Explore every reachable state of a model and optionally write its LTS.
    #[command(after_help = EXIT_CODES)]
    Explore(ExploreArgs),
    /// Continue a checkpointed run (started with --workdir DIR --checkpoint-every …).
    #[command(after_help = RESUME_HELP)]
    Resume(ResumeArgs),
    /// Work on finished LTS files: info, convert, reduce, compare, deadlocks.
    #[command(subcommand_required = true)]
    Lts(LtsArgs),
}

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// The model: a P/T net (.pnml), an explicit LTS (.aut) or a DVE process system (.dve).
    pub model: PathBuf,

    /// Search order.
    #[arg(long, value_enum, default_value = "bfs")]
    pub order: Order,

    /// Visited-state store.
    #[arg(long, value_enum, default_value = "full")]
    pub store: StoreKind,

    /// Hash width in bits (1-64) for --store comback (the state descriptor; any width stays
    /// exact) and --store hashcompact (fewer bits: less RAM, more omitted states).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub hash_bits: u32,

    /// ComBack: full-state cache entries (0 = no cache). An entry takes 6 bytes + the state
    /// packed: 1 bit per byte while states hold only 0s and 1s, 4 bits while every byte is at
    /// most 15, else the bytes themselves (chosen automatically).
    #[arg(long, default_value_t = CombackOptions::default().cache, value_name = "N")]
    pub comback_cache: usize,

    /// ComBack: bytes of decompressed backedge blocks to cache (0 = automatic: the whole
    /// backedge table up to 2 MiB, at least 512 KiB; under --memory the budget decides).
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub comback_block_cache: u64,

    /// ComBack: repoint a state's backedge when a shorter path to it is found.
    #[arg(long, value_enum, default_value = "on")]
    pub comback_path_opt: PathOptimisation,

    /// ComBack: move a matched state to the front of its collision list.
    #[arg(long, value_enum, default_value = "on")]
    pub comback_mtf: MoveToFront,

    /// ComBack: rebuild candidates by forward replay, or by unfiring from the new state
    /// (P/T nets; other models fall back to forward).
    #[arg(long, value_enum, default_value = "forward")]
    pub comback_reconstruct: Reconstruction,

    /// ComBack (BFS): keep only state numbers in the waiting set and rebuild states on
    /// dequeue, or keep (number, vector) records.
    #[arg(long, value_enum, default_value = "state-numbers")]
    pub comback_waiting: WaitingSet,

    /// Bit-state hashing: the bit array has 2^N bits (10-40).
    #[arg(long, default_value_t = 30, value_name = "N", value_parser = clap::value_parser!(u32).range(10..=40))]
    pub bitstate_log2_bits: u32,

    /// Bit-state hashing: hash functions (bits set) per state (1-32).
    #[arg(long, default_value_t = 3, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub bitstate_k: u32,

    /// Write the LTS here: .slts (native, compressed) or .aut (Aldebaran).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,

    /// Write the run's statistics as one JSON object to this file (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,

    /// Bits per place counter for P/T nets: auto (start narrow, widen on overflow), 8, 16 or 32.
    #[arg(long, default_value = "auto", value_parser = parse_token_bits)]
    pub token_bits: TokenWidth,

    /// RAM budget, e.g. 64M or 8G (powers of 1024). Structures that do not fit spill to
    /// compressed segment files in the work directory; the state table's index must fit.
    /// Default: unlimited (everything stays in RAM, no files).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    pub memory: Option<u64>,

    /// Where segment files go: a fresh subdirectory is created here and removed at exit.
    /// Default: the system temporary directory.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// Checkpoint the run every INTERVAL (e.g. 30s, 10m, 2h; `off`: only on signals) into
    /// --workdir DIR, which then holds the run's files itself and must be new or empty.
    /// SIGINT/SIGTERM write a checkpoint and stop (exit 7); SIGUSR1 writes one and goes on.
    /// Continue with `spillway resume DIR`. Needs a .slts or .aut output, if any.
    #[arg(long, value_name = "INTERVAL", value_parser = parse_interval, requires = "workdir")]
    pub checkpoint_every: Option<Interval>,

    /// When structures use segment files: auto (only under --memory) or always (forces the
    /// state vectors to disk even without a budget; for testing and benchmarks).
    #[arg(long, value_enum, default_value = "auto")]
    pub spill: SpillPolicy,

    /// Raw bytes per segment block (tuning; default 32K).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory, hide = true)]
    pub block_size: Option<u64>,

    /// Decompressed-block cache of spilled state vectors when no --memory is given
    /// (tuning; default 64M). Under --memory the cache takes what the budget leaves.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory, hide = true)]
    pub cache: Option<u64>,
    /// Δ store: states at depths that are multiples of K are stored explicitly, the others as
    /// (predecessor, transition); membership replays at most K-1 transitions.
    #[arg(long = "k-delta", value_name = "K", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub k_delta: u32,

    /// Δ store: do not repoint Δ records to shorter paths (predecessor update).
    #[arg(long)]
    pub no_pred_update: bool,

    /// Δ store: compare candidates by forward firing only (no "unfire and check").
    #[arg(long)]
    pub no_backward: bool,

    /// Δ store: store explicit states as raw vectors (no per-component dictionaries).
    #[arg(long)]
    pub no_collapse: bool,

    /// Δ store: entries of the reconstitution cache (0 = about 512 KiB of states).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub delta_cache_states: usize,

    /// Δ store, DFS only: stratified caching. The hash index remembers at most N states
    /// (about 5 bytes of RAM each); when full it forgets a stratum of states (depth mod
    /// --delta-strata), never those on the search path. Every state is still visited, but
    /// forgotten states met again are numbered again: counts become upper bounds and the LTS
    /// is strongly bisimilar to the state space (`spillway lts reduce` gives the exact one).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub delta_index_limit: Option<u64>,

    /// Δ store: number of strata for --delta-index-limit (a state's stratum is its depth
    /// mod S; one stratum is forgotten at a time).
    #[arg(long, value_name = "S", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub delta_strata: u32,

    /// Do not show the live progress line.
    #[arg(long)]
    pub no_progress: bool,

    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// A checkpoint interval; `None` checkpoints only on signals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval(pub Option<std::time::Duration>);

fn parse_interval(s: &str) -> Result<Interval, String> {
    crate::checkpoint::parse_interval(s).map(Interval)
}

pub const RESUME_HELP: &str = "\
Only --memory, --checkpoint-every, --stats-json, --no-progress and --quiet can change on
resume: every other option shaped the files the checkpoint is made of.

Exit codes: as for `spillway explore`; 5 when the checkpoint is damaged (nothing is changed).";

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run directory given as --workdir to `spillway explore … --checkpoint-every`.
    pub dir: PathBuf,

    /// A new RAM budget (see `spillway explore --memory`).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    pub memory: Option<u64>,

    /// A new checkpoint interval (see `spillway explore --checkpoint-every`).
    #[arg(long, value_name = "INTERVAL", value_parser = parse_interval)]
    pub checkpoint_every: Option<Interval>,

    /// Write the run's statistics as one JSON object to this file (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,

    /// Do not show the live progress line.
    #[arg(long)]
    pub no_progress: bool,

    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,

    /// Other `explore` options are refused, with the reason.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub other: Vec<String>,
}

impl ResumeArgs {
    /// Why the first option in `other` cannot change on resume, if there is one.
    pub fn refusal(&self) -> Option<String> {
        let first = self.other.first()?;
        let flag = first.split('=').next().unwrap_or(first);
        let why = match flag {
            "-o" | "--output" => "the output file is part of the checkpoint",
            "--workdir" => "the run directory is resume's argument",
            "--order" | "--store" | "--hash-bits" | "--k-delta" | "--token-bits"
            | "--bitstate-log2-bits" | "--bitstate-k" | "--spill" | "--block-size" => {
                "the checkpoint's files were written with the recorded value, and the resumed run must finish the run that was started"
            }
            f if f.starts_with("--comback-") || f.starts_with("--no-") || f.starts_with("--delta-") => {
                "the checkpoint's files were written with the recorded value, and the resumed run must finish the run that was started"
            }
            _ => "it is not an option of `spillway resume`",
        };
        Some(format!(
            "cannot use '{first}' with resume: {why}. Only --memory, --checkpoint-every, --stats-json, --no-progress and --quiet may change"
        ))
    }
}

fn parse_memory(s: &str) -> Result<u64, String> {
    parse_size(s)
}

fn parse_token_bits(s: &str) -> Result<TokenWidth, String> {
    match s {
        "auto" => Ok(TokenWidth::Auto),
        "8" => Ok(TokenWidth::Bits(8)),
        "16" => Ok(TokenWidth::Bits(16)),
        "32" => Ok(TokenWidth::Bits(32)),
        other => Err(format!("'{other}' is not one of auto, 8, 16, 32")),
    }
}

impl ExploreArgs {
    /// The validated configuration for the engine.
    pub fn config(&self) -> ExploreConfig {
        ExploreConfig {
            order: self.order,
            store: self.store,
            store_options: StoreOptions {
                comback: CombackOptions {
                    hash_bits: self.hash_bits,
                    cache: self.comback_cache,
                    path_optimisation: self.comback_path_opt,
                    move_to_front: self.comback_mtf,
                    reconstruction: self.comback_reconstruct,
                    waiting_set: self.comback_waiting,
                    block_cache: self.comback_block_cache,
                },
                bitstate_log2_bits: self.bitstate_log2_bits,
                bitstate_k: self.bitstate_k,
            },
            token_width: self.token_bits,
            output: self.output.clone(),
            engine: EngineOptions {
                progress: !self.no_progress && !self.quiet,
            },
            storage: StorageConfig {
                memory: self
                    .memory
                    .map_or(MemoryLimit::Unlimited, MemoryLimit::Bytes),
                workdir: self.workdir.clone(),
                spill: self.spill,
                segments: {
                    let mut o = SegOptions::default();
                    if let Some(b) = self.block_size {
                        o.block_bytes = b as usize;
                    }
                    if let Some(c) = self.cache {
                        o.cache_bytes = c;
                    }
                    o
                },
            },
            delta: DeltaOptions {
                k: self.k_delta,
                pred_update: if self.no_pred_update {
                    PredUpdate::Off
                } else {
                    PredUpdate::On
                },
                firing: if self.no_backward {
                    Firing::Forward
                } else {
                    Firing::Backward
                },
                collapse: if self.no_collapse {
                    Collapse::Off
                } else {
                    Collapse::PerComponent
                },
                cache_states: self.delta_cache_states,
                replace: self.delta_index_limit.map(|limit| Replacement {
                    limit,
                    strata: self.delta_strata,
                }),
            },
            checkpoint: match (self.checkpoint_every, &self.workdir) {
                (Some(Interval(interval)), Some(dir)) => Some(CheckpointConfig {
                    dir: dir.clone(),
                    interval,
                    args: Vec::new(),
                }),
                _ => None,
            },
        }
    }

    /// Makes the model, output and work directory paths absolute against `cwd`.
    pub fn resolve_paths(&mut self, cwd: &std::path::Path) {
        let abs = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = cwd.join(&*p);
            }
        };
        abs(&mut self.model);
        if let Some(o) = &mut self.output {
            abs(o);
        }
        if let Some(w) = &mut self.workdir {
            abs(w);
        }
    }
}
