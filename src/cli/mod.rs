//! Command-line definitions (clap) and the step from raw arguments to a validated config.

use crate::engine::observe::{MetricsConfig, DEFAULT_METRICS_EVERY};
use crate::engine::{EngineOptions, Order};
use crate::model::petri::TokenWidth;
use crate::run::{CheckpointConfig, ExploreConfig};
use crate::storage::budget::{parse_size, MemoryLimit, SizeError};
use crate::storage::{SegOptions, SpillPolicy, StorageConfig};
use crate::store::bitstate::BitstateOptions;
use crate::store::cache::replacement::Strategy;
use crate::store::cache::CacheOptions;
use crate::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet, AUTO_CACHE,
};
use crate::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate, Replacement};
use crate::store::full::FullOptions;
use crate::store::hashcompact::HashCompactOptions;
use crate::store::snapshots::spec::{Preset, StreamSpec};
use crate::store::snapshots::SnapshotsOptions;
use crate::store::tree::TreeOptions;
use crate::store::StoreConfig;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

pub mod lts;
pub use lts::LtsArgs;

pub const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    internal error; for `lts compare`: the LTSs are not equivalent
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
    Explore(Box<ExploreArgs>),
    /// Continue a checkpointed run (started with --workdir DIR --checkpoint-every …).
    #[command(after_help = RESUME_HELP)]
    Resume(ResumeArgs),
    /// Work on finished LTS files: info, convert, reduce, compare, deadlocks.
    #[command(subcommand_required = true)]
    Lts(LtsArgs),
    /// Draw a --metrics file as an SVG: states and RSS over time, BFS level sizes.
    #[command(after_help = PLOT_HELP)]
    Plot(PlotArgs),
}

pub const PLOT_HELP: &str = "\
Exit codes: 0 success; 2 the output is the input; 3 malformed metrics file (the line is
named); 4 I/O error (missing input, unwritable output).";

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A metrics file written by `spillway explore --metrics FILE` (or resume).
    pub file: PathBuf,

    /// The SVG to write.
    #[arg(short = 'o', long = "output", value_name = "OUT.svg")]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// The model: a P/T net (.pnml), an explicit LTS (.aut) or a DVE process system (.dve).
    pub model: PathBuf,

    /// Search order.
    #[arg(long, default_value = "bfs", value_parser = parse_order)]
    pub order: Order,

    /// Visited-state store; each store's own options are listed under its heading below,
    /// and an option of another store than the chosen one is refused, as is every option
    /// that would have no effect in the run (its help says where it applies).
    #[arg(long, default_value = "full",
          value_parser = ["full", "comback", "delta", "hashcompact", "bitstate", "tree", "snapshots", "cache"])]
    pub store: String,

    /// Write the LTS here: .slts (native, compressed), .aut (Aldebaran), .fsm (mCRL2) or
    /// .dot (GraphViz, small LTSs only).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,

    /// Write the run's statistics as one JSON object to this file (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,

    /// Append one JSON line of the run's figures (time, states, RSS, disk, BFS level, …)
    /// to this file every --metrics-every, and one at the end; `spillway plot` draws them.
    /// `-` writes them to standard output.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,

    /// Time between two --metrics lines (e.g. 1s, 0.5s, 1m; default 1s).
    #[arg(long, value_name = "INTERVAL", value_parser = parse_metrics_every, requires = "metrics")]
    pub metrics_every: Option<std::time::Duration>,

    /// Write a .dot output even above its size limit (2,000 states, 10,000 transitions);
    /// only with -o OUT.dot.
    #[arg(long)]
    pub force: bool,

    /// Bits per place counter for P/T nets (.pnml only): auto (start narrow, widen on
    /// overflow), 8, 16 or 32.
    #[arg(long, default_value = "auto", value_parser = parse_token_bits)]
    pub token_bits: TokenWidth,

    /// RAM budget, e.g. 64M or 8G (powers of 1024), or `unlimited`. Structures that do not
    /// fit spill to compressed segment files in the work directory (the full store's index
    /// too, in BFS); a budget below what the chosen store needs at the least is refused at
    /// the start (exit 6, naming that figure). Default: everything in RAM, no files, up to a
    /// ceiling of 3/4 of the RAM (or of the cgroup's limit; half the room an address-space
    /// ulimit leaves), printed at the start, where the run stops with exit 6 instead of being
    /// killed by the kernel; `unlimited` lifts that ceiling.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_limit)]
    pub memory: Option<MemoryLimit>,

    /// Where segment files go (created if missing): a fresh subdirectory is made in it and
    /// removed at exit. Default: the system temporary directory. Refused for a run that
    /// writes none: the full, tree, hashcompact, bitstate and cache stores without --memory
    /// SIZE, --spill always or --checkpoint-every.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// Checkpoint the run every INTERVAL (e.g. 30s, 10m, 2h; `off`: only on signals) into
    /// --workdir DIR, which then holds the run's files itself and must be new or empty.
    /// SIGINT/SIGTERM write a checkpoint and stop (exit 7); SIGUSR1 writes one and goes on.
    /// Continue with `spillway resume DIR`. Needs a .slts or .aut output, if any.
    #[arg(long, value_name = "INTERVAL", value_parser = parse_interval, requires = "workdir")]
    pub checkpoint_every: Option<Interval>,

    /// When structures use segment files: auto (only under --memory) or always (forces the
    /// state vectors to disk even without a budget; for testing and benchmarks; refused
    /// under --memory SIZE, which spills anyway, unless the run is checkpointed).
    #[arg(long, default_value = "auto", value_parser = parse_spill)]
    pub spill: SpillPolicy,

    /// Raw bytes per segment block (tuning; default 32K; a DFS's state vectors take 4K
    /// blocks, or this when smaller).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory, hide = true)]
    pub block_size: Option<u64>,

    /// Decompressed-block cache of spilled state vectors when no --memory is given
    /// (tuning; default 64M). Under --memory the cache takes what the budget leaves.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory, hide = true)]
    pub cache: Option<u64>,

    /// Do not show the live progress line.
    #[arg(long)]
    pub no_progress: bool,

    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,

    /// Threads expanding states in BFS with the full store (default: the available cores;
    /// checkpointed runs and runs under --memory too, fewer under a budget too small for
    /// their buffers), ComBack and the tree store (not under --memory); once the full
    /// store's index has spilled under --memory, they expand and resolve its delayed
    /// batches. The numbering and the LTS file are the same whatever the number. Other
    /// stores, DFS, and .aut and Rust models run on one thread (the `threads` statistic
    /// says how many ran).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

    #[command(flatten)]
    pub comback: CombackArgs,

    #[command(flatten)]
    pub delta: DeltaArgs,

    #[command(flatten)]
    pub full: FullArgs,

    #[command(flatten)]
    pub hashcompact: HashCompactArgs,

    #[command(flatten)]
    pub tree: TreeArgs,

    #[command(flatten)]
    pub bitstate: BitstateArgs,

    #[command(flatten)]
    pub snapshots: SnapshotsArgs,

    #[command(flatten)]
    pub caching: CacheArgs,
}

/// The options of `--store cache`.
#[derive(Debug, Args)]
#[command(next_help_heading = "State space caching (--store cache)")]
pub struct CacheArgs {
    /// Visited states remembered besides those on the DFS stack (which are always kept, so
    /// the search terminates). When the cache is full one is forgotten (--replacement); a
    /// forgotten state met again is explored again under a new number. Required.
    #[arg(long, value_name = "N")]
    pub cache_size: Option<u64>,

    /// Which cached state to forget: random, lru, mru, lfu, mfu, or type (of 16 entries
    /// looked at, one reached by the lowest kind of transition; P/T nets: local steps before
    /// forks before synchronisations).
    #[arg(long, value_name = "STRATEGY", default_value = "random",
          value_parser = Strategy::parse)]
    pub replacement: Strategy,

    /// Explore with sleep sets: a transition independent of the ones explored since it was
    /// explored is not executed again, so far fewer states are reached twice and a tiny
    /// cache suffices. Every state is still visited (deadlocks are exact), but not every
    /// transition, so no LTS (-o) can be written.
    #[arg(long)]
    pub sleep_sets: bool,

    /// Seed of the random and type strategies and of RND caches in --caches, for --store
    /// cache (runs with equal seeds are identical); refused when no cache uses one. BFS with
    /// snapshots gives its RND caches a fixed seed.
    #[arg(long, value_name = "SEED", default_value_t = 1)]
    pub cache_seed: u64,
}

/// The options of `--store comback`.
#[derive(Debug, Args)]
#[command(next_help_heading = "ComBack store (--store comback)")]
pub struct CombackArgs {
    /// Descriptor width in bits (1-64): the top bits of the state hash kept in the table.
    /// Any width stays exact (fewer bits: longer collision lists, more replays).
    #[arg(long, default_value_t = 64, value_name = "B",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub comback_hash_bits: u32,

    /// Full-state cache entries (0 = no cache; auto = sized by the store: at least 65,536,
    /// growing in BFS until the recent part holds 8 levels as wide as the widest so far, up
    /// to as many entries as states and 16 bytes per state, within 1/16 of --memory, or of
    /// the machine's memory ceiling without it). An entry
    /// takes 6 bytes + the state packed: 1 bit per byte while states hold only 0s and 1s, 4
    /// bits while every byte is at most 15, else the bytes themselves (chosen automatically).
    #[arg(long, default_value = "auto", value_name = "N|auto", value_parser = parse_comback_cache)]
    pub comback_cache: usize,

    /// Bytes of decompressed backedge blocks to cache (0 = automatic: the whole backedge
    /// table up to 2 MiB, at least 512 KiB). Under --memory SIZE the budget decides, and the
    /// option is refused unless the run is checkpointed (a resume may lift the budget).
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub comback_block_cache: u64,

    /// Repoint a state's backedge when a shorter path to it is found (default: on).
    #[arg(long, overrides_with = "no_comback_path_opt")]
    pub comback_path_opt: bool,
    /// Do not repoint backedges to shorter paths.
    #[arg(long, overrides_with = "comback_path_opt")]
    pub no_comback_path_opt: bool,

    /// Move a matched state to the front of its collision list (default: on).
    #[arg(long, overrides_with = "no_comback_mtf")]
    pub comback_mtf: bool,
    /// Do not move matched states to the front of their collision lists.
    #[arg(long, overrides_with = "comback_mtf")]
    pub no_comback_mtf: bool,

    /// Rebuild candidates by unfiring the path from the new state (P/T nets; other models
    /// fall back to forward replay) instead of replaying it forward (default: off).
    #[arg(long, overrides_with = "no_comback_backward")]
    pub comback_backward: bool,
    /// Rebuild candidates by forward replay only (the default).
    #[arg(long, overrides_with = "comback_backward")]
    pub no_comback_backward: bool,

    /// BFS waiting set: `state-numbers` (numbers only, states rebuilt on dequeue) or
    /// `vectors` ((number, vector) records). BFS only.
    #[arg(long, default_value = "state-numbers", value_parser = parse_waiting)]
    pub comback_waiting: WaitingSet,

    /// Under --memory, spill the state table once it would pass N slots (tests and
    /// benchmarks of the spilled index on small models; default: half the budget decides).
    #[arg(long, value_name = "N", hide = true,
          value_parser = clap::value_parser!(u64).range(8192..))]
    pub comback_index_slots: Option<u64>,
}

/// The options of `--store delta`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Δ-markings store (--store delta)")]
pub struct DeltaArgs {
    /// States at depths that are multiples of K are stored explicitly, the others as
    /// (predecessor, transition); membership replays at most K-1 transitions.
    #[arg(long = "k-delta", value_name = "K", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub k_delta: u32,

    /// Repoint Δ records to shorter paths (predecessor update; default: on).
    #[arg(long, overrides_with = "no_delta_pred_update")]
    pub delta_pred_update: bool,
    /// Do not repoint Δ records to shorter paths.
    #[arg(long, overrides_with = "delta_pred_update", alias = "no-pred-update")]
    pub no_delta_pred_update: bool,

    /// Compare candidates by unfiring the new state ("unfire and check", where the model
    /// can fire backwards; default: on).
    #[arg(long, overrides_with = "no_delta_backward")]
    pub delta_backward: bool,
    /// Compare candidates by forward firing only.
    #[arg(long, overrides_with = "delta_backward", alias = "no-backward")]
    pub no_delta_backward: bool,

    /// Store explicit states as per-component dictionary indices (default: on).
    #[arg(long, overrides_with = "no_delta_collapse")]
    pub delta_collapse: bool,
    /// Store explicit states as raw vectors.
    #[arg(long, overrides_with = "delta_collapse", alias = "no-collapse")]
    pub no_delta_collapse: bool,

    /// Entries of the reconstitution cache (0 = about 512 KiB of states).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub delta_cache_states: usize,

    /// DFS only: stratified caching. The hash index remembers at most N states (about 5
    /// bytes of RAM each); when full it forgets a stratum of states (depth mod
    /// --delta-strata), never those on the search path. Every state is still visited, but
    /// forgotten states met again are numbered again: counts become upper bounds and the LTS
    /// is strongly bisimilar to the state space (`spillway lts reduce` gives the exact one).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub delta_index_limit: Option<u64>,

    /// Number of strata for --delta-index-limit, and only with it (a state's stratum is its
    /// depth mod S; one stratum is forgotten at a time).
    #[arg(long, value_name = "S", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub delta_strata: u32,

    /// Under --memory, spill the index once it would pass N slots (tests and benchmarks of
    /// the spilled index on small models; default: half the budget decides).
    #[arg(long, value_name = "N", hide = true,
          value_parser = clap::value_parser!(u64).range(8192..))]
    pub delta_index_slots: Option<u64>,
}

/// The options of `--store full`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Full store (--store full)")]
pub struct FullArgs {
    /// Under --memory, spill the index once its table would pass N slots (tests and
    /// benchmarks of the spilled index on small models; default: half the budget decides).
    #[arg(long, value_name = "N", hide = true,
          value_parser = clap::value_parser!(u64).range(8192..))]
    pub full_index_slots: Option<u64>,
}

/// The options of `--store tree`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Tree compression (--store tree)")]
pub struct TreeArgs {
    /// Under --memory, hand the states over to the full store's disk path once the tables
    /// would hold more than N states, and spill that store's index past N slots (tests of
    /// the hand-over on small models; default: half the budget decides both).
    #[arg(long, value_name = "N", hide = true,
          value_parser = clap::value_parser!(u64).range(8192..))]
    pub tree_index_slots: Option<u64>,
}

/// The options of `--store hashcompact`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Hash compaction (--store hashcompact)")]
pub struct HashCompactArgs {
    /// Bits of the state hash kept per state (1-64): fewer bits, less RAM, more omitted
    /// states.
    #[arg(long, default_value_t = 64, value_name = "B",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub hash_bits: u32,

    /// Under --memory, spill the table once it would pass N slots (tests and benchmarks of
    /// the spilled index on small models; default: half the budget decides).
    #[arg(long, value_name = "N", hide = true,
          value_parser = clap::value_parser!(u64).range(8192..))]
    pub hashcompact_index_slots: Option<u64>,
}

/// The options of `--store bitstate`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Bit-state hashing (--store bitstate)")]
pub struct BitstateArgs {
    /// The bit array has 2^N bits (10-40). Default: 30 (128 MiB), or under --memory the
    /// largest that takes at most half the budget.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(10..=40))]
    pub bitstate_log2_bits: Option<u32>,

    /// Hash functions (bits set) per state (1-32).
    #[arg(long, default_value_t = 3, value_name = "K",
          value_parser = clap::value_parser!(u32).range(1..=32))]
    pub bitstate_k: u32,
}

/// The options of `--store snapshots`.
#[derive(Debug, Args)]
#[command(next_help_heading = "BFS with snapshots and caches (--store snapshots)")]
pub struct SnapshotsArgs {
    /// The stream of caches, in the paper's notation: (SAMPLING,REPLACEMENT,CAPACITY)...,
    /// e.g. (c2,LLNR,5)(2,LFU,10). SAMPLING is cN (every Nth level) or N (a period growing
    /// by N after each sample); REPLACEMENT is LRU, MRU, LFU, MFU, RND or LLNR (lowest level
    /// number); CAPACITY is a number of snapshots or inf. A trailing + appends a copy of the
    /// last cache whenever it is full (Pebble). Default: --preset frontier-safety-net. Also
    /// for --store cache (DFS), instead of --cache-size: caches of states (capacity in
    /// states; sampling counts the states offered; LLNR evicts the shallowest), e.g. the
    /// paper's (c1,MFU,5000)(c1,LRU,5000).
    #[arg(long, value_name = "SPEC", value_parser = StreamSpec::parse, conflicts_with = "preset")]
    pub caches: Option<StreamSpec>,

    /// A named stream: frontier-safety-net = (c1,LRU,2)(c4,LLNR,32)(8,LLNR,4), pebble =
    /// (c1,LRU,2)(c4,LLNR,8)+.
    #[arg(long, value_name = "NAME", value_parser = Preset::parse)]
    pub preset: Option<Preset>,

    /// Learn the Backtrack set: a state with more than one successor whose successors all
    /// lie in one old snapshot (not in the first cache), or all in the Backtrack set, is
    /// remembered for the rest of the run (default: off).
    #[arg(long, overrides_with = "no_backtrack")]
    pub backtrack: bool,
    /// Do not learn the Backtrack set.
    #[arg(long, overrides_with = "backtrack")]
    pub no_backtrack: bool,

    /// Run a stream whose termination is not guaranteed (no cache with an increasing
    /// period, no unbounded cache, no +): the search may go round a long cycle forever.
    /// Refused with a stream that surely terminates.
    #[arg(long)]
    pub allow_nontermination: bool,

    /// Keep the 64-bit hash of every expanded state (8 bytes each, not counted in the states
    /// held) to count distinct and redundant states and redundant transitions exactly;
    /// without it distinct states are estimated (HyperLogLog, about 1%).
    #[arg(long)]
    pub snapshots_audit: bool,

    /// When the output reaches F times the distinct states expanded so far, the last cache
    /// stops evicting, so that the search surely ends (0: never). Lemma 1 guarantees that
    /// cycles are caught; a whole level can still oscillate with a bounded stream.
    #[arg(long, value_name = "F", default_value_t = crate::store::snapshots::DEFAULT_WATCHDOG)]
    pub snapshots_watchdog: u32,
}

/// A `--X` / `--no-X` switch pair: the later on the command line wins (`overrides_with`),
/// neither gives `default`.
fn switch(on: bool, off: bool, default: bool) -> bool {
    if on {
        true
    } else if off {
        false
    } else {
        default
    }
}

/// The store a help heading of [`ExploreArgs`] belongs to: the `X` of `(--store X)`.
fn heading_store(heading: &str) -> Option<&str> {
    heading.split("(--store ").nth(1)?.strip_suffix(')')
}

/// Refuses an option of a store other than the chosen one (exit 2, naming the option and
/// its store) instead of ignoring it silently. `matches` are the `explore` subcommand's.
pub fn refuse_foreign_options(
    matches: &clap::ArgMatches,
    args: &ExploreArgs,
) -> Result<(), String> {
    use clap::parser::ValueSource;
    let chosen = args.store.as_str();
    if chosen == "cache" {
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        match (args.caching.cache_size, &args.snapshots.caches) {
            (None, None) => return Err(
                "--store cache needs --cache-size N: the number of visited states it may remember besides the DFS stack (e.g. a tenth of the model's states; with --sleep-sets, a few times the stack depth suffices), or --caches SPEC: a stream of caches".into(),
            ),
            (Some(_), Some(_)) => return Err(
                "--cache-size and --caches both size the cache of --store cache: give one cache (--cache-size N [--replacement R]) or a stream of caches (--caches SPEC), not both".into(),
            ),
            (None, Some(_)) if given("replacement") => return Err(
                "--replacement chooses the strategy of the one cache of --cache-size; with --caches each cache of the stream names its own (e.g. --caches '(c1,MFU,1000)(c1,LRU,1000)')".into(),
            ),
            _ => {}
        }
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let explore = cmd
        .find_subcommand("explore")
        .expect("the explore subcommand exists");
    for arg in explore.get_arguments() {
        let Some(owner) = arg.get_help_heading().and_then(heading_store) else {
            continue;
        };
        // The notation of a stream of caches serves DFS state space caching as well.
        let shared = chosen == "cache" && arg.get_id().as_str() == "caches";
        if owner == chosen
            || shared
            || matches.value_source(arg.get_id().as_str()) != Some(ValueSource::CommandLine)
        {
            continue;
        }
        let long = arg.get_long().unwrap_or(arg.get_id().as_str());
        let aliases = arg
            .get_all_aliases()
            .map(|a| {
                a.iter()
                    .map(|x| format!("--{x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|a| !a.is_empty())
            .map(|a| format!(" (or {a})"))
            .unwrap_or_default();
        return Err(format!(
            "--{long}{aliases} is an option of --store {owner}, and this run uses --store {chosen}: drop it or choose --store {owner} (options of another store are refused, not ignored)"
        ));
    }
    Ok(())
}

/// Everything `explore` refuses at the start (exit 2) about its command line, before the
/// model is read: an option of another store ([`refuse_foreign_options`]), an option that
/// has no effect in this run ([`refuse_idle_options`]), and a run the chosen store cannot
/// serve (its [`crate::store::StoreSpec::refuse`], which the driver asks again when the
/// search starts: here it answers before a large model is parsed).
pub fn refuse_unusable_options(
    matches: &clap::ArgMatches,
    args: &ExploreArgs,
) -> Result<(), String> {
    refuse_foreign_options(matches, args)?;
    refuse_idle_options(matches, args)?;
    let cfg = args.config();
    let shape = crate::store::RunShape {
        order: cfg.order,
        writes_lts: cfg.output.is_some(),
        checkpointed: cfg.checkpoint.is_some(),
    };
    match cfg.store.spec().refuse(&shape) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Refuses an option given on the command line that would have no effect in this run: one
/// that only matters for another kind of model (by the model's extension), another output
/// format, another order, or together with an option this run does not have. Each message
/// names the option and why it does nothing here. Not refused, because they do act: the
/// backward-firing switches on models that cannot fire backwards (they fall back to
/// forward replay, as their help says, and ComBack's keeps the matched states cached),
/// options that size a checkpointed run's structures under `--memory` (a resume may drop
/// the budget), and `--threads` (it defaults to the cores in every run; an explicit one a
/// run could not use gets a note at the end). `matches` are the `explore` subcommand's.
pub fn refuse_idle_options(matches: &clap::ArgMatches, args: &ExploreArgs) -> Result<(), String> {
    use crate::lts::LtsFormat;
    use crate::model::ModelFormat;
    use clap::parser::ValueSource;
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    let model = args.model.display();
    let store = args.store.as_str();
    let budget = matches!(args.memory, Some(MemoryLimit::Bytes(_)));
    let checkpointed = args.checkpoint_every.is_some();

    // Model kind, by the extension (an unknown one is the model reader's error).
    if given("token_bits") {
        let kind = match ModelFormat::from_path(&args.model) {
            Ok(ModelFormat::Aut) => Some("an Aldebaran LTS (.aut), whose states are numbers"),
            Ok(ModelFormat::Dve) => Some(
                "a DVE process system (.dve), whose variables have the widths the model declares",
            ),
            _ => None,
        };
        if let Some(kind) = kind {
            return Err(format!(
                "--token-bits applies to P/T nets (.pnml) only; {model} is {kind}: drop --token-bits"
            ));
        }
    }

    // Output format.
    if given("force") {
        match &args.output {
            None => {
                return Err(
                    "--force lets -o write a .dot file above its size limit (2,000 states, 10,000 transitions), and this run writes no LTS (no -o): drop --force".into(),
                )
            }
            Some(out) => match LtsFormat::from_path(out) {
                Ok(LtsFormat::Dot) | Err(_) => {}
                Ok(format) => {
                    return Err(format!(
                        "--force only lifts the size limit of .dot output; -o {} is {} output, which has none: drop --force",
                        out.display(),
                        format.name()
                    ))
                }
            },
        }
    }

    // Storage: the work directory and the spill policy.
    if given("workdir") && !checkpointed && !budget && args.spill != SpillPolicy::Always {
        let cfg = args.config();
        if !cfg.store.spec().needs_storage() {
            return Err(format!(
                "--workdir has no effect here: without --memory SIZE, --spill always or --checkpoint-every, --store {store} keeps everything in RAM and writes no segment files; drop --workdir, or add --memory SIZE to spill there"
            ));
        }
    }
    // A checkpointed run keeps its policy: `resume --memory unlimited` then drops the budget.
    if given("spill") && args.spill == SpillPolicy::Always && budget && !checkpointed {
        return Err(
            "--spill always has no effect under --memory SIZE: the budget already puts the structures in segment files (--spill always forces them there without a budget); drop --spill always".into(),
        );
    }

    // Store options that matter only for some runs of their store (an option of another
    // store has been refused already).
    match store {
        // Under DFS the choice would only change the state cache's split (1/4 of it for
        // recent states with `vectors` instead of 3/4, chosen for a BFS whose waiting set
        // needs no cache), which costs replays: 8 times as many on Philosophers-PT-000010.
        "comback" if given("comback_waiting") && args.order == Order::Dfs => {
            return Err(
                "--comback-waiting chooses what the BFS waiting set holds, and a DFS has none (it keeps its search path): drop --comback-waiting, or use --order bfs".into(),
            );
        }
        // A checkpointed run keeps the option: `resume --memory unlimited` uses it.
        "comback" if given("comback_block_cache") && budget && !checkpointed => {
            return Err(
                "--comback-block-cache has no effect under --memory SIZE: the budget sizes the backedge block caches (what the other structures leave them); drop --comback-block-cache, or run without --memory".into(),
            );
        }
        "delta" if given("delta_strata") && args.delta.delta_index_limit.is_none() => {
            return Err(
                "--delta-strata sets the strata of stratified caching, which only --delta-index-limit N turns on (with --order dfs), and this run has none: drop --delta-strata, or add --delta-index-limit N".into(),
            );
        }
        "snapshots" if given("allow_nontermination") => {
            use crate::store::snapshots::spec::Termination;
            let stream = match (&args.snapshots.caches, args.snapshots.preset) {
                (Some(c), _) => c.clone(),
                (None, p) => p.unwrap_or(Preset::FrontierSafetyNet).stream(),
            };
            let nth = |i: usize| format!("its cache {} {}", i + 1, stream.caches[i]);
            let why = match stream.termination() {
                Termination::NotGuaranteed(_) => None,
                Termination::IncreasingPeriod { index } => {
                    Some(format!("{} samples with an increasing period", nth(index)))
                }
                Termination::UnboundedCache { index } => {
                    Some(format!("{} never evicts", nth(index)))
                }
                Termination::GrowingStream => Some("it grows ('+')".to_string()),
            };
            if let Some(why) = why {
                return Err(format!(
                    "--allow-nontermination has no effect: the stream {stream} surely terminates ({why}); drop --allow-nontermination"
                ));
            }
        }
        "cache" if given("cache_seed") => {
            use crate::store::snapshots::spec::Replacement;
            let (random, what) = match &args.snapshots.caches {
                Some(spec) => (
                    spec.caches
                        .iter()
                        .any(|c| c.replacement == Replacement::Rnd),
                    format!("--caches {spec} has no RND cache"),
                ),
                None => (
                    matches!(args.caching.replacement, Strategy::Random | Strategy::Type),
                    format!("--replacement {}", args.caching.replacement.as_str()),
                ),
            };
            if !random {
                return Err(format!(
                    "--cache-seed seeds the random and type replacement strategies (and RND caches), and this run uses none ({what}): drop --cache-seed"
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// A checkpoint interval; `None` checkpoints only on signals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval(pub Option<std::time::Duration>);

fn parse_interval(s: &str) -> Result<Interval, String> {
    crate::checkpoint::parse_interval(s).map(Interval)
}

pub const RESUME_HELP: &str = "\
Only --memory, --checkpoint-every, --stats-json, --metrics, --metrics-every, --threads,
--no-progress and --quiet can change on resume: every other option shaped the files the checkpoint is
made of. Without --metrics, a run started with one appends to the same file.

Exit codes: as for `spillway explore`; 5 when the checkpoint is damaged (nothing is changed).";

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run directory given as --workdir to `spillway explore … --checkpoint-every`.
    pub dir: PathBuf,

    /// A new RAM budget, or `unlimited` (see `spillway explore --memory`).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_limit)]
    pub memory: Option<MemoryLimit>,

    /// A new checkpoint interval (see `spillway explore --checkpoint-every`).
    #[arg(long, value_name = "INTERVAL", value_parser = parse_interval)]
    pub checkpoint_every: Option<Interval>,

    /// Write the run's statistics as one JSON object to this file (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,

    /// Append the metrics lines to this file instead of the one the run started with (see
    /// `spillway explore --metrics`); a run started without one gets one from now on.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,

    /// A new time between two metrics lines.
    #[arg(long, value_name = "INTERVAL", value_parser = parse_metrics_every)]
    pub metrics_every: Option<std::time::Duration>,

    /// Threads expanding states in BFS (default: the available cores; the output does not
    /// depend on it, so a run checkpointed with N threads resumes with any number).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

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
    /// Why the first option in `other` cannot change on resume, if there is one. Which
    /// options may change is declared once, by [`ResumeArgs`] itself; every other option of
    /// `explore` was recorded in the checkpoint.
    pub fn refusal(&self) -> Option<String> {
        let first = self.other.first()?;
        let flag = first.split('=').next().unwrap_or(first);
        let cmd = <Cli as clap::CommandFactory>::command();
        let longs = |sub: &str| -> Vec<String> {
            cmd.find_subcommand(sub)
                .into_iter()
                .flat_map(|c| c.get_arguments())
                .flat_map(|a| {
                    let mut names: Vec<String> =
                        a.get_long().map(|l| format!("--{l}")).into_iter().collect();
                    names.extend(a.get_short().map(|c| format!("-{c}")));
                    names.extend(
                        a.get_all_aliases()
                            .unwrap_or_default()
                            .into_iter()
                            .map(|x| format!("--{x}")),
                    );
                    names
                })
                .collect()
        };
        let may_change: Vec<String> = longs("resume")
            .into_iter()
            .filter(|l| l.starts_with("--") && l != "--help")
            .collect();
        let why = match flag {
            "-o" | "--output" => "the output file is part of the checkpoint",
            "--workdir" => "the run directory is resume's argument",
            f if longs("explore").iter().any(|l| l == f) => {
                "it was recorded when the run started: the checkpoint's files were written with it, and the resumed run must finish the run that was started"
            }
            _ => "it is not an option of `spillway resume`",
        };
        Some(format!(
            "cannot use '{first}' with resume: {why}. Only {} may change",
            may_change.join(", ")
        ))
    }
}

/// `--threads N`, or the available cores.
pub fn threads(n: Option<u32>) -> usize {
    n.map(|n| n as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// A `--metrics-every` interval: as `--checkpoint-every`, but never `off` (no lines at all
/// is no `--metrics`).
fn parse_metrics_every(s: &str) -> Result<std::time::Duration, String> {
    crate::checkpoint::parse_interval(s)?.ok_or_else(|| {
        format!("'{s}': --metrics-every needs an interval (drop --metrics for no metrics)")
    })
}

fn parse_order(s: &str) -> Result<Order, String> {
    match s {
        "bfs" => Ok(Order::Bfs),
        "dfs" => Ok(Order::Dfs),
        other => Err(format!("'{other}' is not one of bfs, dfs")),
    }
}

fn parse_spill(s: &str) -> Result<SpillPolicy, String> {
    match s {
        "auto" => Ok(SpillPolicy::Auto),
        "always" => Ok(SpillPolicy::Always),
        other => Err(format!("'{other}' is not one of auto, always")),
    }
}

fn parse_comback_cache(s: &str) -> Result<usize, String> {
    match s {
        "auto" => Ok(AUTO_CACHE),
        n => match n.parse::<usize>() {
            Ok(AUTO_CACHE) | Err(_) => Err(format!(
                "'{s}' is not a number of entries or 'auto' (0 = no cache)"
            )),
            Ok(n) => Ok(n),
        },
    }
}

fn parse_waiting(s: &str) -> Result<WaitingSet, String> {
    match s {
        "state-numbers" => Ok(WaitingSet::StateNumbers),
        "vectors" => Ok(WaitingSet::Vectors),
        other => Err(format!("'{other}' is not one of state-numbers, vectors")),
    }
}

fn parse_memory(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn parse_memory_limit(s: &str) -> Result<MemoryLimit, String> {
    if s == "unlimited" {
        return Ok(MemoryLimit::Unlimited);
    }
    // `unlimited` is the other answer to "not a size", not to "too large a size".
    parse_size(s).map(MemoryLimit::Bytes).map_err(|e| match e {
        SizeError::NotASize(_) => format!("{e}, or 'unlimited'"),
        _ => e.to_string(),
    })
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
            store: self.store_config(),
            token_width: self.token_bits,
            output: self.output.clone(),
            force: self.force,
            engine: EngineOptions {
                progress: !self.no_progress && !self.quiet,
                threads: threads(self.threads),
            },
            storage: StorageConfig {
                memory: self.memory.unwrap_or(MemoryLimit::Unlimited),
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
            checkpoint: match (self.checkpoint_every, &self.workdir) {
                (Some(Interval(interval)), Some(dir)) => Some(CheckpointConfig {
                    dir: dir.clone(),
                    interval,
                }),
                _ => None,
            },
            metrics: self.metrics.as_ref().map(|path| MetricsConfig {
                path: path.clone(),
                every: self.metrics_every.unwrap_or(DEFAULT_METRICS_EVERY),
            }),
            machine_ceiling: self.memory.is_none(),
        }
    }

    /// The chosen store with its options (those of other stores were refused).
    fn store_config(&self) -> StoreConfig {
        match self.store.as_str() {
            "comback" => {
                let c = &self.comback;
                StoreConfig::Comback(CombackOptions {
                    hash_bits: c.comback_hash_bits,
                    cache: c.comback_cache,
                    path_optimisation: if switch(c.comback_path_opt, c.no_comback_path_opt, true) {
                        PathOptimisation::On
                    } else {
                        PathOptimisation::Off
                    },
                    move_to_front: if switch(c.comback_mtf, c.no_comback_mtf, true) {
                        MoveToFront::On
                    } else {
                        MoveToFront::Off
                    },
                    reconstruction: if switch(c.comback_backward, c.no_comback_backward, false) {
                        Reconstruction::Backward
                    } else {
                        Reconstruction::Forward
                    },
                    waiting_set: c.comback_waiting,
                    block_cache: c.comback_block_cache,
                    index_slots: c.comback_index_slots,
                })
            }
            "delta" => {
                let d = &self.delta;
                StoreConfig::Delta(DeltaOptions {
                    k: d.k_delta,
                    pred_update: if switch(d.delta_pred_update, d.no_delta_pred_update, true) {
                        PredUpdate::On
                    } else {
                        PredUpdate::Off
                    },
                    firing: if switch(d.delta_backward, d.no_delta_backward, true) {
                        Firing::Backward
                    } else {
                        Firing::Forward
                    },
                    collapse: if switch(d.delta_collapse, d.no_delta_collapse, true) {
                        Collapse::PerComponent
                    } else {
                        Collapse::Off
                    },
                    cache_states: d.delta_cache_states,
                    replace: d.delta_index_limit.map(|limit| Replacement {
                        limit,
                        strata: d.delta_strata,
                    }),
                    index_slots: d.delta_index_slots,
                })
            }
            "hashcompact" => StoreConfig::Hashcompact(HashCompactOptions {
                bits: self.hashcompact.hash_bits,
                index_slots: self.hashcompact.hashcompact_index_slots,
            }),
            "bitstate" => StoreConfig::Bitstate(BitstateOptions {
                log2_bits: self.bitstate.bitstate_log2_bits,
                k: self.bitstate.bitstate_k,
            }),
            "tree" => StoreConfig::Tree(TreeOptions {
                index_slots: self.tree.tree_index_slots,
            }),
            "cache" => StoreConfig::Cache(CacheOptions {
                // `refuse_foreign_options` has refused `--store cache` without a size.
                size: self.caching.cache_size.unwrap_or_default(),
                replacement: self.caching.replacement,
                stream: self.snapshots.caches.clone(),
                sleep_sets: self.caching.sleep_sets,
                seed: self.caching.cache_seed,
            }),
            "snapshots" => {
                let a = &self.snapshots;
                let preset = match (&a.caches, a.preset) {
                    (Some(_), _) => None,
                    (None, p) => Some(p.unwrap_or(Preset::FrontierSafetyNet)),
                };
                StoreConfig::Snapshots(SnapshotsOptions {
                    stream: match (&a.caches, preset) {
                        (Some(c), _) => c.clone(),
                        (None, p) => p.unwrap_or(Preset::FrontierSafetyNet).stream(),
                    },
                    preset,
                    backtrack: switch(a.backtrack, a.no_backtrack, false),
                    allow_nontermination: a.allow_nontermination,
                    audit: a.snapshots_audit,
                    watchdog: a.snapshots_watchdog,
                })
            }
            _ => StoreConfig::Full(FullOptions {
                index_slots: self.full.full_index_slots,
            }),
        }
    }
}
