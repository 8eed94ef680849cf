//! Command-line definitions (clap) and the step from raw arguments to a validated config.

use crate::engine::run::{ExploreConfig, StoreKind};
use crate::engine::{EngineOptions, Order};
use crate::model::petri::TokenWidth;
use crate::store::delta::{Collapse, DeltaOptions, Firing, PredUpdate};
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

    /// Write the LTS here: .slts (native, compressed) or .aut (Aldebaran).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,

    /// Write the run's statistics as one JSON object to this file.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,

    /// Bits per place counter for P/T nets: auto (start narrow, widen on overflow), 8, 16 or 32.
    #[arg(long, default_value = "auto", value_parser = parse_token_bits)]
    pub token_bits: TokenWidth,

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
            token_width: self.token_bits,
            output: self.output.clone(),
            engine: EngineOptions {
                progress: !self.no_progress && !self.quiet,
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
            },
        }
    }
}
