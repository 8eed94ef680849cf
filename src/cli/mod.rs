//! Command-line definitions (clap) and the step from raw arguments to a validated config.

use crate::engine::run::{ExploreConfig, StoreKind, StoreOptions};
use crate::engine::{EngineOptions, Order};
use crate::model::petri::TokenWidth;
use crate::store::comback::{
    CombackOptions, MoveToFront, PathOptimisation, Reconstruction, WaitingSet,
};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

pub const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    internal error
  2    bad command line
  3    malformed or unsupported model
  4    I/O error (missing file, unwritable output, disk full)
  5    corrupted or truncated data file
  6    resource limit hit (state-id space, place counter width)
  130  interrupted";

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
}

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// The model: a P/T net (.pnml) or an explicit LTS (.aut).
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

    /// ComBack: full-state cache entries (0 = no cache).
    #[arg(long, default_value_t = CombackOptions::default().cache, value_name = "N")]
    pub comback_cache: usize,

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

    /// Write the run's statistics as one JSON object to this file.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,

    /// Bits per place counter for P/T nets: auto (start narrow, widen on overflow), 8, 16 or 32.
    #[arg(long, default_value = "auto", value_parser = parse_token_bits)]
    pub token_bits: TokenWidth,

    /// Do not show the live progress line.
    #[arg(long)]
    pub no_progress: bool,

    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
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
                },
                bitstate_log2_bits: self.bitstate_log2_bits,
                bitstate_k: self.bitstate_k,
            },
            token_width: self.token_bits,
            output: self.output.clone(),
            engine: EngineOptions {
                progress: !self.no_progress && !self.quiet,
            },
        }
    }
}
