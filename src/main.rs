//! The `spillway` command: parse the command line, run, map errors to exit codes.

use clap::Parser;
use spillway::checkpoint::RunSpec;
use spillway::cli::{Cli, Command, ExploreArgs, Interval, LtsArgs, ResumeArgs};
use spillway::engine::run::{explore_file, resume_dir, ExploreConfig, ResumeOverrides};
use spillway::engine::ExploreStats;
use spillway::error::{exit, CheckpointError, ExploreError, LtsError, PostError};
use spillway::storage::MemoryLimit;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Explore(args) => explore(&args),
        Command::Resume(args) => resume(&args),
        Command::Lts(args) => lts(&args),
    };
    ExitCode::from(code as u8)
}

fn explore(args: &ExploreArgs) -> i32 {
    let mut cfg = args.config();
    let quiet = args.quiet;
    if let Some(ck) = &mut cfg.checkpoint {
        // Recorded in the manifest: `resume` parses them again to rebuild the options.
        ck.args = std::env::args()
            .skip_while(|a| a != "explore")
            .skip(1)
            .collect();
        if let Err(e) = spillway::checkpoint::install_signal_handlers() {
            return report(&e.into());
        }
    }
    let result = explore_file(&args.model, &cfg, &mut |note| {
        if !quiet {
            eprintln!("spillway: note: {note}");
        }
    });
    finish(result, quiet, args.stats_json.as_deref())
}

fn resume(args: &ResumeArgs) -> i32 {
    if let Some(msg) = args.refusal() {
        eprintln!("spillway: error: {msg}");
        return exit::USAGE;
    }
    if let Err(e) = spillway::checkpoint::install_signal_handlers() {
        return report(&e.into());
    }
    let overrides = ResumeOverrides {
        memory: args.memory.map(MemoryLimit::Bytes),
        interval: args.checkpoint_every.map(|Interval(i)| i),
        progress: Some(!args.no_progress && !args.quiet),
    };
    let quiet = args.quiet;
    let result = resume_dir(&args.dir, &overrides, &rebuild, &mut |note| {
        if !quiet {
            eprintln!("spillway: note: {note}");
        }
    });
    finish(result, quiet, args.stats_json.as_deref())
}

/// The configuration of a checkpointed run, from the arguments it was started with.
fn rebuild(spec: &RunSpec) -> Result<ExploreConfig, ExploreError> {
    let argv = ["spillway", "explore"]
        .into_iter()
        .map(String::from)
        .chain(spec.args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        ExploreError::Config(format!(
            "the checkpoint's recorded options do not parse any more: {e}"
        ))
    })?;
    let Command::Explore(mut args) = cli.command else {
        unreachable!("parsed as explore")
    };
    args.resolve_paths(&spec.cwd);
    Ok(args.config())
}

fn finish(
    result: Result<ExploreStats, ExploreError>,
    quiet: bool,
    stats_json: Option<&std::path::Path>,
) -> i32 {
    match result {
        Ok(stats) => {
            if !quiet {
                print_stats(&stats);
            }
            if let Some(path) = stats_json {
                let json = serde_json::to_string_pretty(&stats).expect("stats serialise");
                // `-` is standard output, as for most command-line tools.
                let written = if path == std::path::Path::new("-") {
                    use std::io::Write;
                    writeln!(std::io::stdout().lock(), "{json}")
                } else {
                    std::fs::write(path, json + "\n")
                };
                if let Err(e) = written {
                    eprintln!(
                        "spillway: error: {}: cannot write stats: {e}",
                        path.display()
                    );
                    return exit::IO;
                }
            }
            exit::OK
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
            eprintln!("spillway: error: {e}");
            e.exit_code()
        }
    }
}

fn report(e: &ExploreError) -> i32 {
    if let ExploreError::Checkpoint(CheckpointError::Stopped { .. }) = e {
        eprintln!("spillway: {e}");
        return e.exit_code();
    }
    eprintln!("spillway: error: {e}");
    e.exit_code()
}

fn print_stats(s: &ExploreStats) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("model         {}", s.model);
    println!("states        {}", s.states);
    println!("transitions   {}", s.transitions);
    println!("deadlocks     {}", s.deadlocks);
    println!(
        "depth         {} ({})",
        s.max_depth,
        if s.order == "bfs" {
            "BFS levels"
        } else {
            "max DFS stack"
        }
    );
    println!(
        "store         {} ({}), {:.1} MiB in RAM, {:.1} bytes/state",
        s.store,
        match (s.exact, s.forgotten_states) {
            (true, _) => "exact".to_string(),
            (false, Some(n)) =>
                format!("complete; {n} states forgotten, so counts include states visited again"),
            (false, None) => format!("omission probability <= {:.3e}", s.omission_probability),
        },
        mib(s.store_ram_bytes),
        s.store_ram_bytes_per_state
    );
    if let Some(limit) = s.memory_limit_bytes {
        println!("memory budget {:.1} MiB", mib(limit));
    }
    for u in &s.structures {
        println!(
            "  {:<14}{:>9.1} MiB RAM {:>9.1} MiB disk{}",
            u.name,
            mib(u.ram_bytes),
            mib(u.disk_bytes),
            u.compression_ratio
                .map(|r| format!(", compression {r:.1}x"))
                .unwrap_or_default()
        );
    }
    println!(
        "time          {:.3} s ({:.0} states/s)",
        s.wall_seconds, s.states_per_second
    );
    let d = &s.store_details;
    let num = |k: &str| d.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    if d.contains_key("reconstructions") {
        println!(
            "comback       {} reconstructions ({} firings), longest collision list {}, {}-bit hashes, backedges {:.1} MiB ({:.1} bytes/state)",
            num("reconstructions"),
            num("reconstruction_fires"),
            num("longest_collision_list"),
            num("hash_bits"),
            mib(num("backedge_bytes")),
            num("backedge_bytes") as f64 / s.states.max(1) as f64
        );
    } else if d.contains_key("generated_states") && !s.exact {
        println!(
            "lossy         {} states found of {} generated",
            s.states,
            num("generated_states")
        );
    }
    println!("peak RSS      {:.1} MiB", mib(s.peak_rss_bytes));
    if let (Some(out), Some(bytes)) = (&s.output, s.output_bytes) {
        println!(
            "output        {out} ({bytes} bytes, {:.2} bytes/transition)",
            bytes as f64 / s.transitions.max(1) as f64
        );
    }
}
