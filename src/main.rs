//! The `spillway` command: parse the command line, run, map errors to exit codes.

use clap::{CommandFactory, FromArgMatches};
use spillway::cli::{Cli, Command, ExploreArgs, Interval, LtsArgs, ResumeArgs};
use spillway::engine::ExploreStats;
use spillway::error::{exit, CheckpointError, ExploreError, LtsError, PostError};
use spillway::run::{ResumeOverrides, Search};
use spillway::say;
use std::io::Write;
use std::process::ExitCode;

/// Fixes glibc's allocation thresholds. By default glibc raises its mmap threshold after a
/// large block is freed (up to 32 MiB) and keeps freed heap memory below twice that: a run
/// that frees a filter or a buffer of a few MiB then keeps it resident, outside every
/// structure's account, and `--memory` is no ceiling. Fixed thresholds send every block of
/// 1 MiB or more to its own mapping, returned to the system when freed, and give back the
/// heap's top once 1 MiB of it is free (a trim threshold of 4 MiB kept about 2 MiB of freed
/// batch and block buffers resident in a Δ run: SharedMemory-PT-000010, kδ = 50, peak RSS
/// 32.6 → 30.9 MiB, with no measurable change in time).
fn bound_the_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 20);
    }
}

fn main() -> ExitCode {
    bound_the_allocator();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let code = match cli.command {
        Command::Explore(args) => {
            let sub = matches
                .subcommand_matches("explore")
                .expect("parsed as explore");
            match spillway::cli::refuse_unusable_options(sub, &args) {
                Ok(()) => explore(&args),
                Err(msg) => {
                    say!("spillway: error: {msg}");
                    exit::USAGE
                }
            }
        }
        Command::Resume(args) => resume(&args),
        Command::Lts(args) => lts(&args),
        Command::Plot(args) => match spillway::plot::plot_file(&args.file, &args.output) {
            Ok(()) => exit::OK,
            Err(e) => {
                say!("spillway: error: {e}");
                e.exit_code()
            }
        },
    };
    ExitCode::from(code as u8)
}

fn explore(args: &ExploreArgs) -> i32 {
    let cfg = args.config();
    let quiet = args.quiet;
    if let Err(e) = spillway::checkpoint::ignore_file_size_signal() {
        return report(&e.into());
    }
    if let Some(ck) = &cfg.checkpoint {
        if let Err(e) = spillway::checkpoint::install_signal_handlers(&ck.dir, false) {
            return report(&e.into());
        }
    }
    let mut search = Search::file(&args.model).config(cfg);
    // The driver checks the stats file against the model, the output and the metrics.
    if let Some(stats) = &args.stats_json {
        search = search.also_writes("--stats-json", stats);
    }
    let result = search
        .notes(|note| {
            if !quiet {
                say!("spillway: note: {note}");
            }
        })
        .run();
    note_unused_threads(&result, args.threads, quiet);
    finish(result, quiet, args.stats_json.as_deref())
}

fn resume(args: &ResumeArgs) -> i32 {
    if let Some(msg) = args.refusal() {
        say!("spillway: error: {msg}");
        return exit::USAGE;
    }
    if let Err(e) = spillway::checkpoint::install_signal_handlers(&args.dir, true) {
        return report(&e.into());
    }
    let overrides = ResumeOverrides {
        memory: args.memory,
        interval: args.checkpoint_every.map(|Interval(i)| i),
        progress: Some(!args.no_progress && !args.quiet),
        metrics: args.metrics.clone(),
        metrics_every: args.metrics_every,
        threads: Some(spillway::cli::threads(args.threads)),
    };
    let quiet = args.quiet;
    let mut search = Search::resume(&args.dir, overrides);
    if let Some(stats) = &args.stats_json {
        search = search.also_writes("--stats-json", stats);
    }
    let result = search
        .notes(|note| {
            if !quiet {
                say!("spillway: note: {note}");
            }
        })
        .run();
    note_unused_threads(&result, args.threads, quiet);
    finish(result, quiet, args.stats_json.as_deref())
}

/// `--threads` is taken by every run, explored or resumed (it defaults to the cores, so it is
/// not refused where it cannot apply); say so when one given explicitly could not be used,
/// rather than leave the user to wonder.
fn note_unused_threads(
    result: &Result<ExploreStats, ExploreError>,
    asked: Option<u32>,
    quiet: bool,
) {
    if let (Ok(stats), Some(n), false) = (result, asked, quiet) {
        if stats.threads < u64::from(n) {
            say!(
                "spillway: note: --threads {n}: {} ran; BFS runs on several threads with the full store, or with ComBack or the tree store without --memory, on a P/T net or DVE model, and under --memory with at least 32 MiB per extra thread (README, \"Parallel exploration\")",
                match stats.threads {
                    1 => "one thread".to_string(),
                    t => format!("{t} threads"),
                }
            );
        }
    }
}

fn finish(
    result: Result<ExploreStats, ExploreError>,
    quiet: bool,
    stats_json: Option<&std::path::Path>,
) -> i32 {
    match result {
        Ok(stats) => {
            let mut code = exit::OK;
            if !quiet {
                // A full disk or a closed pipe behind stdout is an I/O error like any other
                // (`println!` would panic, exit 101); the stats file is written all the same.
                match print_stats(&stats, &mut std::io::stdout().lock()) {
                    Ok(()) => {}
                    // A reader such as `head` closed the pipe: what it wanted was printed.
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                    Err(e) => {
                        say!("spillway: error: <stdout>: {e}");
                        code = exit::IO;
                    }
                }
            }
            if let Some(path) = stats_json {
                let json = serde_json::to_string_pretty(&stats).expect("stats serialise");
                // `-` is standard output, as for most command-line tools (not tried again
                // once it has failed: one message is enough).
                let stdout = path == std::path::Path::new("-");
                let written = if stdout && code != exit::OK {
                    Ok(())
                } else if stdout {
                    writeln!(std::io::stdout().lock(), "{json}")
                } else {
                    // Through a temporary file renamed into place: a failed write (a full
                    // disk) keeps the previous file.
                    spillway::files::write_atomically(path, (json + "\n").as_bytes())
                };
                if let Err(e) = written {
                    say!(
                        "spillway: error: {}: cannot write stats: {e}",
                        path.display()
                    );
                    code = exit::IO;
                }
            }
            code
        }
        Err(e) => report(&e),
    }
}

fn lts(args: &LtsArgs) -> i32 {
    match spillway::cli::lts::run(args) {
        Ok(code) => code,
        // A reader such as `head` closed the pipe: what it wanted was printed.
        Err(PostError::Lts(LtsError::Io { source, .. }))
            if source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            exit::OK
        }
        Err(e) => {
            say!("spillway: error: {e}");
            e.exit_code()
        }
    }
}

fn report(e: &ExploreError) -> i32 {
    if let ExploreError::Checkpoint(CheckpointError::Stopped { .. }) = e {
        say!("spillway: {e}");
        return e.exit_code();
    }
    say!("spillway: error: {e}");
    e.exit_code()
}

fn print_stats(s: &ExploreStats, out: &mut impl Write) -> std::io::Result<()> {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    writeln!(out, "model         {}", s.model)?;
    writeln!(out, "states        {}", s.states)?;
    writeln!(out, "transitions   {}", s.transitions)?;
    writeln!(out, "deadlocks     {}", s.deadlocks)?;
    if let Some(t) = &s.error_transition {
        writeln!(
            out,
            "error state   reached (first found by {t}): the model's error state (DVE: a division by zero, an index out of bounds or a value out of range in a guard or effect, or a `system sync` step assigning a global twice) is one of the deadlocks"
        )?;
    }
    writeln!(
        out,
        "depth         {} ({})",
        s.max_depth,
        if s.order == "bfs" {
            "BFS levels"
        } else {
            "max DFS stack"
        }
    )?;
    writeln!(
        out,
        "store         {} ({}), {:.1} MiB in RAM, {:.1} bytes/state",
        s.store,
        match (s.exact, s.forgotten_states) {
            (true, _) => "exact".to_string(),
            (false, Some(0)) => "complete; no state forgotten".to_string(),
            (false, Some(1)) =>
                "complete; 1 state forgotten, so counts include states visited again".to_string(),
            (false, Some(n)) =>
                format!("complete; {n} states forgotten, so counts include states visited again"),
            (false, None) => format!("omission probability <= {:.3e}", s.omission_probability),
        },
        mib(s.store_ram_bytes),
        s.store_ram_bytes_per_state
    )?;
    if let Some(limit) = s.memory_limit_bytes {
        writeln!(out, "memory budget {:.1} MiB", mib(limit))?;
    }
    for u in &s.structures {
        writeln!(
            out,
            "  {:<14}{:>9.1} MiB RAM {:>9.1} MiB disk{}",
            u.name,
            mib(u.ram_bytes),
            mib(u.disk_bytes),
            u.compression_ratio
                .map(|r| format!(", compression {r:.1}x"))
                .unwrap_or_default()
        )?;
    }
    if s.resumes == 0 {
        writeln!(
            out,
            "time          {:.3} s, CPU {:.3} s ({:.0} states/s)",
            s.wall_seconds, s.cpu_seconds, s.states_per_second
        )?;
    } else {
        writeln!(
            out,
            "time          {:.3} s, CPU {:.3} s over {} legs (resumed {} time{}) ({:.0} states/s)",
            s.wall_seconds,
            s.cpu_seconds,
            s.resumes + 1,
            s.resumes,
            if s.resumes == 1 { "" } else { "s" },
            s.states_per_second
        )?;
        writeln!(
            out,
            "  this leg    {:.3} s, CPU {:.3} s, {} new states ({:.0} states/s)",
            s.leg_wall_seconds, s.leg_cpu_seconds, s.leg_states, s.leg_states_per_second
        )?;
    }
    if let Some(line) = &s.store_summary {
        writeln!(out, "{:<14}{line}", s.store)?;
    }
    if s.threads > 1 {
        writeln!(out, "threads       {}", s.threads)?;
    }
    writeln!(out, "peak RSS      {:.1} MiB", mib(s.peak_rss_bytes))?;
    if let (Some(lts), Some(bytes)) = (&s.output, s.output_bytes) {
        match s.transitions {
            0 => writeln!(out, "output        {lts} ({bytes} bytes, no transitions)")?,
            m => writeln!(
                out,
                "output        {lts} ({bytes} bytes, {:.2} bytes/transition)",
                bytes as f64 / m as f64
            )?,
        }
    }
    Ok(())
}
