//! `spillway lts <tool>`: the command-line arguments (clap) and the drivers that run a tool
//! of [`crate::post`], print its report and return the exit code. Results go to stdout;
//! memory estimates, timings and notes to stderr. `post/` itself knows nothing of clap.

use super::EXIT_CODES;
use crate::error::{exit, PostError};
use crate::lts::LtsFormat;
use crate::post::compare::{compare_with, Equivalence, Explanation, Side, TraceSearch};
use crate::post::convert::{check_dot_size, convert, LabelOptions, SizeLimit};
use crate::post::graph::{backed_transitions, Lts};
use crate::post::input::Input;
use crate::post::memory::{self, fmt_mib};
use crate::post::{branching, deadlocks, info, reduce, Bisimulation};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::time::Instant;

/// Runs one `lts` tool; errors are returned for `main` to report.
pub fn run(args: &LtsArgs) -> Result<i32, PostError> {
    match &args.command {
        LtsCommand::Info(a) => run_info(a),
        LtsCommand::Convert(a) => run_convert(a),
        LtsCommand::Reduce(a) => run_reduce(a),
        LtsCommand::Compare(a) => run_compare(a),
        LtsCommand::Deadlocks(a) => run_deadlocks(a),
    }
}

fn stdout_err(e: std::io::Error) -> PostError {
    PostError::Lts(crate::error::LtsError::Io {
        path: "<stdout>".into(),
        source: e,
    })
}

fn relation_name(r: Bisimulation) -> &'static str {
    match r {
        Bisimulation::Strong => "strong bisimulation",
        Bisimulation::Branching => "branching bisimulation",
    }
}

/// The relation `--branching` asks for (strong bisimulation without it).
fn relation(branching: bool) -> Bisimulation {
    if branching {
        Bisimulation::Branching
    } else {
        Bisimulation::Strong
    }
}

/// Says (unless `quiet`) how much memory the job `what` needs, then refuses it if that is
/// more than the machine has ([`memory::check_fits`], which names `tool`).
fn check_needs(tool: &str, what: &str, bytes: u128, quiet: bool) -> Result<(), PostError> {
    if !quiet {
        crate::say!("spillway: {what} needs about {}", fmt_mib(bytes));
    }
    memory::check_fits(tool, bytes)
}

fn estimate(r: Bisimulation, n: u64, m: u64) -> u128 {
    match r {
        Bisimulation::Strong => memory::reduce_bytes(n, m),
        Bisimulation::Branching => memory::branching_bytes(n, m),
    }
}

/// What a file's header says, for a memory estimate.
struct Counts {
    states: u64,
    /// As the header announces them.
    transitions: u64,
    /// As many as the file can hold ([`backed_transitions`]): what the estimate counts, so
    /// that a cut-short text file is reported truncated (exit 5) by the load, not refused as
    /// too large (exit 6) on its header's word.
    backed: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} states, {} transitions",
            self.states, self.transitions
        )?;
        if self.backed < self.transitions {
            write!(f, " (the file can hold at most {})", self.backed)?;
        }
        Ok(())
    }
}

fn counts(path: &Path) -> Result<Counts, PostError> {
    let h = Input::open(path)?.header()?;
    Ok(Counts {
        states: h.states,
        transitions: h.transitions,
        backed: backed_transitions(&h),
    })
}

fn run_info(a: &InfoArgs) -> Result<i32, PostError> {
    let i = info::info(&a.file)?;
    emit(a.json, &i, |out| info::print_text(&i, out))
}

/// Prints a report to stdout as pretty JSON or, without `--json`, with its text printer.
fn emit<T: serde::Serialize>(
    json: bool,
    report: &T,
    text: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>,
) -> Result<i32, PostError> {
    let mut out = std::io::stdout().lock();
    if json {
        let json =
            serde_json::to_string_pretty(report).map_err(|e| PostError::Usage(e.to_string()))?;
        writeln!(out, "{json}").map_err(stdout_err)?;
    } else {
        text(&mut out).map_err(stdout_err)?;
    }
    Ok(exit::OK)
}

fn run_convert(a: &ConvertArgs) -> Result<i32, PostError> {
    let opts = LabelOptions {
        internal: a.internal.clone(),
        hide: a.hide.clone(),
    };
    let limit = if a.force {
        SizeLimit::Force
    } else {
        SizeLimit::Enforce
    };
    let r = convert(&a.input, &a.output, &opts, limit)?;
    // A native output keeps the flag; the text formats cannot record it.
    if r.states_may_repeat && !a.quiet && LtsFormat::from_path(&a.output)? != LtsFormat::Native {
        crate::say!(
            "spillway: note: {} may hold a state more than once (its explorer forgot visited states and numbered them again), and {} cannot record that: its state and deadlock counts are of visits; `spillway lts reduce` merges the copies",
            a.input.display(),
            a.output.display()
        );
    }
    if !a.quiet {
        writeln!(
            std::io::stdout().lock(),
            "wrote {}: {} states, {} transitions, {} labels, initial state {}{}",
            a.output.display(),
            r.summary.states,
            r.summary.transitions,
            r.labels,
            r.summary.initial,
            if a.hide.is_empty() {
                String::new()
            } else {
                format!(" ({} transitions hidden)", r.hidden_transitions)
            }
        )
        .map_err(stdout_err)?;
    }
    Ok(exit::OK)
}

fn run_reduce(a: &ReduceArgs) -> Result<i32, PostError> {
    let t0 = Instant::now();
    // Refused before the (possibly long) reduction, not when the result is written.
    crate::post::graph::check_output(&a.input, &a.output)?;
    let c = counts(&a.input)?;
    let (n, m) = (c.states, c.transitions);
    let relation = relation(a.branching);
    let what = format!("reduce ({}) of {c}", relation_name(relation));
    check_needs("reduce", &what, estimate(relation, n, c.backed), a.quiet)?;
    let lts = Lts::load(&a.input)?;
    let load_s = t0.elapsed().as_secs_f64();
    branching::show_progress(!a.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let initial = lts.initial;
    let result = match relation {
        Bisimulation::Strong => reduce::minimise(lts, &[initial])?,
        Bisimulation::Branching => branching::minimise_branching(lts, &[initial])?,
    };
    let reduce_s = t0.elapsed().as_secs_f64() - load_s;
    let q = &result.lts;
    check_dot_size(
        &a.output,
        q.states as u64,
        q.transitions() as u64,
        if a.force {
            SizeLimit::Force
        } else {
            SizeLimit::Enforce
        },
    )?;
    q.write(&a.output, a.force)?;
    if !a.quiet {
        writeln!(
            std::io::stdout().lock(),
            "reduced {}: {n} states, {m} transitions -> {} states, {} transitions ({} classes in all, {} distinct transitions in the input)",
            a.input.display(),
            q.states,
            q.transitions(),
            result.classes,
            result.distinct_transitions
        )
        .map_err(stdout_err)?;
        crate::say!(
            "spillway: load {load_s:.2} s, refine {reduce_s:.2} s, total {:.2} s, peak RSS {}",
            t0.elapsed().as_secs_f64(),
            fmt_mib(memory::peak_rss())
        );
    }
    Ok(exit::OK)
}

fn run_compare(a: &CompareArgs) -> Result<i32, PostError> {
    let t0 = Instant::now();
    let c1 = counts(&a.first)?;
    let c2 = counts(&a.second)?;
    let relation = relation(a.branching);
    let (m, backed) = (
        c1.transitions as u128 + c2.transitions as u128,
        c1.backed as u128 + c2.backed as u128,
    );
    let what = format!(
        "compare ({}) of {} states, {m} transitions in all{}",
        relation_name(relation),
        c1.states as u128 + c2.states as u128,
        if backed < m {
            format!(" (the files can hold at most {backed})")
        } else {
            String::new()
        }
    );
    let need = estimate(relation, c1.states, c1.backed) + estimate(relation, c2.states, c2.backed);
    check_needs("compare", &what, need, a.quiet)?;
    let first = Lts::load(&a.first)?;
    let second = Lts::load(&a.second)?;
    branching::show_progress(!a.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let c = compare_with(first, second, relation)?;
    let rel = relation_name(relation);
    let name = |s: Side| match s {
        Side::First => a.first.display().to_string(),
        Side::Second => a.second.display().to_string(),
    };
    let mut out = std::io::stdout().lock();
    let mut w = |line: String| writeln!(out, "{line}").map_err(stdout_err);
    match &c.verdict {
        Equivalence::Equivalent => w(format!("equivalent ({rel})"))?,
        Equivalence::Different {
            search,
            explanation,
        } => {
            w(format!("not equivalent ({rel})"))?;
            match search {
                TraceSearch::Found { trace, possible_in } => {
                    w(format!(
                        "distinguishing {}trace ({} steps), possible in {} but not in {}:",
                        if relation == Bisimulation::Branching { "weak " } else { "" },
                        trace.len(),
                        name(*possible_in),
                        name(possible_in.other())
                    ))?;
                    for l in trace {
                        w(format!("  {l}"))?;
                    }
                }
                TraceSearch::TraceEquivalent => w(format!(
                    "both have exactly the same {}traces, so no distinguishing trace exists",
                    if relation == Bisimulation::Branching { "weak " } else { "" }
                ))?,
                TraceSearch::GaveUp { pairs_explored } => w(format!(
                    "no distinguishing trace found: the search stopped after {pairs_explored} pairs of state sets"
                ))?,
            }
            match explanation {
                Some(Explanation::Formula { formula, holds_in }) => {
                    w(format!(
                        "distinguishing formula, true in {} and false in {}:",
                        name(*holds_in),
                        name(holds_in.other())
                    ))?;
                    w(format!("  {formula}"))?;
                }
                Some(Explanation::FirstStep { text }) => w(text.clone())?,
                None => {}
            }
        }
    }
    if !a.quiet {
        crate::say!(
            "spillway: {} classes reachable in the minimised union, {:.2} s, peak RSS {}",
            c.union_classes,
            t0.elapsed().as_secs_f64(),
            fmt_mib(memory::peak_rss())
        );
    }
    Ok(match c.verdict {
        Equivalence::Equivalent => exit::OK,
        Equivalence::Different { .. } => exit::NOT_EQUIVALENT,
    })
}

fn run_deadlocks(a: &DeadlocksArgs) -> Result<i32, PostError> {
    let c = counts(&a.file)?;
    let what = format!("deadlocks of {c}");
    check_needs(
        "deadlocks",
        &what,
        memory::deadlock_bytes(c.states, c.backed),
        a.quiet,
    )?;
    let lts = Lts::load(&a.file)?;
    let r = deadlocks::deadlocks(&lts, a.limit)?;
    emit(a.json, &r, |out| deadlocks::print_text(&r, out))
}

/// `spillway lts <tool>`: offline post-processing of LTS files.
#[derive(Debug, Args)]
pub struct LtsArgs {
    #[command(subcommand)]
    pub command: LtsCommand,
}

#[derive(Debug, Subcommand)]
pub enum LtsCommand {
    /// Counts, labels with their counts, deadlocks, format, size and compression of an LTS file.
    #[command(after_help = EXIT_CODES)]
    Info(InfoArgs),
    /// Convert between .slts, .aut and .fsm (mCRL2), or to .dot (GraphViz).
    #[command(after_help = EXIT_CODES)]
    Convert(ConvertArgs),
    /// Minimise an LTS modulo strong (default) or branching bisimulation.
    #[command(after_help = EXIT_CODES)]
    Reduce(ReduceArgs),
    /// Check whether two LTSs are strongly (or branching) bisimilar; show why not. Exit code
    /// 0: equivalent, 1: not equivalent, above 1: error.
    #[command(after_help = EXIT_CODES)]
    Compare(CompareArgs),
    /// Count deadlock states and print shortest traces to them.
    #[command(after_help = EXIT_CODES)]
    Deadlocks(DeadlocksArgs),
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The LTS file (.slts, .aut or .fsm).
    pub file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input LTS (.slts, .aut or .fsm).
    pub input: PathBuf,
    /// Output LTS: .slts, .aut, .fsm or .dot (format from the extension).
    pub output: PathBuf,
    /// Name of the internal action in the output (mCRL2: tau, CADP/LOTOS: i). Input labels
    /// named tau or i, and hidden labels, are written with this name.
    #[arg(long, value_name = "NAME")]
    pub internal: Option<String>,
    /// Rename every label matched as a whole by REGEX to the internal action (repeatable).
    /// Without --internal the internal action is written as i in .aut and tau elsewhere.
    #[arg(long, value_name = "REGEX")]
    pub hide: Vec<String>,
    /// Write .dot output even above the size limit.
    #[arg(long)]
    pub force: bool,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ReduceArgs {
    /// Input LTS (.slts, .aut or .fsm).
    pub input: PathBuf,
    /// Output LTS: .slts, .aut, .fsm or .dot.
    pub output: PathBuf,
    /// Minimise modulo strong bisimulation (the default).
    #[arg(long, conflicts_with = "branching")]
    pub strong: bool,
    /// Minimise modulo branching bisimulation (internal action: labels named tau or i).
    #[arg(long)]
    pub branching: bool,
    /// Write .dot output even above the size limit.
    #[arg(long)]
    pub force: bool,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// First LTS (.slts, .aut or .fsm).
    pub first: PathBuf,
    /// Second LTS (.slts, .aut or .fsm).
    pub second: PathBuf,
    /// Compare modulo strong bisimulation (the default).
    #[arg(long, conflicts_with = "branching")]
    pub strong: bool,
    /// Compare modulo branching bisimulation (internal action: labels named tau or i).
    #[arg(long)]
    pub branching: bool,
    /// Print nothing on stderr (the verdict still goes to stdout).
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct DeadlocksArgs {
    /// The LTS file (.slts, .aut or .fsm).
    pub file: PathBuf,
    /// Print shortest traces to up to N deadlock states, nearest first.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub limit: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print nothing on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}
