//! Watching a long run: the phase the engine is in, the live progress line on stderr and
//! the `--metrics` file of JSON lines.
//!
//! Both are driven by [`super::Run::tick`], which the engines call every 16,384 expansions
//! (BFS) or steps (DFS): the clock is read there, never per state, so a run without a
//! terminal and without `--metrics` pays one branch per tick. A sample (RSS from `/proc`,
//! the budget's accounts) is only taken when a line is due.

use crate::storage::{Budget, Usage};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the run is doing. The engines set it; the disk-resident index will add phases
/// (merging, spilling) that last long enough to be worth naming on the progress line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before the first expansion: initial state, reopening a checkpoint.
    Starting,
    /// Expanding states (BFS) or firing transitions (DFS).
    Expanding,
    /// Stopped by SIGINT/SIGTERM after a checkpoint (the last line of a leg that
    /// `spillway resume` continues).
    Stopped,
    /// The search is over (the last metrics line).
    Done,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Expanding => "expanding",
            Phase::Stopped => "stopped",
            Phase::Done => "done",
        }
    }
}

/// `--metrics FILE --metrics-every INTERVAL`. Part of [`crate::run::ExploreConfig`], so a
/// checkpoint records it and a resume continues the same file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsConfig {
    pub path: PathBuf,
    pub every: Duration,
}

/// The default `--metrics-every`.
pub const DEFAULT_METRICS_EVERY: Duration = Duration::from_secs(1);

/// Where the search stands when the engine ticks.
#[derive(Clone, Copy, Debug)]
pub enum Position {
    /// The BFS level being expanded (0: the initial state) and how many states it holds.
    Bfs { level: u64, level_states: u64 },
    /// The current DFS stack depth.
    Dfs { depth: u64 },
}

/// One line of a metrics file (its keys are documented in the README).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run started, over every leg of a resumed run.
    pub wall_seconds: f64,
    /// CPU seconds (user + system), over every leg.
    pub cpu_seconds: f64,
    pub phase: Phase,
    pub states: u64,
    pub transitions: u64,
    /// `bfs` or `dfs`: says whether `level` is a BFS level or a DFS depth.
    pub order: String,
    /// The BFS level being expanded, or the DFS stack depth.
    pub level: u64,
    /// States in that BFS level (`null` for DFS).
    pub level_states: Option<u64>,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// The `--memory` budget (`null`: unlimited).
    pub memory_limit_bytes: Option<u64>,
    /// Bytes the run's structures keep on disk now (segment files).
    pub disk_bytes: u64,
    /// Bytes read from and written to segment files by this process (this leg).
    pub disk_read_bytes: u64,
    pub disk_written_bytes: u64,
    /// RAM and disk per structure (empty when nothing is accounted: no storage).
    pub structures: Vec<Usage>,
}

/// The run's clock over legs: a resumed run continues the wall and CPU seconds.
#[derive(Clone, Debug)]
pub struct Clock {
    pub started: Instant,
    pub cpu_at_start: f64,
    pub elapsed_before: f64,
    pub cpu_before: f64,
}

impl Clock {
    pub fn now() -> Clock {
        Clock {
            started: Instant::now(),
            cpu_at_start: crate::sys::process_cpu_seconds(),
            elapsed_before: 0.0,
            cpu_before: 0.0,
        }
    }

    fn wall(&self) -> f64 {
        self.elapsed_before + self.started.elapsed().as_secs_f64()
    }

    fn cpu(&self) -> f64 {
        self.cpu_before + (crate::sys::process_cpu_seconds() - self.cpu_at_start).max(0.0)
    }
}

/// An open metrics file (standard output for `-`, as for `--stats-json -`).
struct MetricsFile {
    path: PathBuf,
    file: Box<dyn Write>,
    every: Duration,
    /// When the last line was written; `None` before the first, which the first tick writes
    /// (so a plot starts at the start).
    last: Option<Instant>,
}

/// What the run is watched with, built by the driver (which knows the run's clock, budget
/// and metrics file) and handed to the engine through [`super::Session`].
pub struct Observer {
    clock: Clock,
    budget: Option<Arc<Budget>>,
    memory_limit: Option<u64>,
    metrics: Option<MetricsFile>,
    /// Segment I/O counters when this leg started (they are process-wide).
    io_at_start: (u64, u64),
}

impl Observer {
    /// Opens (appends to, creating it if missing) the metrics file of `metrics`.
    pub fn new(
        clock: Clock,
        budget: Option<Arc<Budget>>,
        memory_limit: Option<u64>,
        metrics: Option<&MetricsConfig>,
    ) -> Result<Observer, crate::error::ExploreError> {
        let metrics = match metrics {
            Some(m) => Some(MetricsFile {
                file: if m.path.as_os_str() == "-" {
                    Box::new(std::io::stdout())
                } else {
                    Box::new(
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(&m.path)
                            .map_err(|source| crate::error::ExploreError::Io {
                                path: m.path.clone(),
                                what: "cannot open the metrics file",
                                source,
                            })?,
                    )
                },
                path: m.path.clone(),
                every: m.every,
                last: None,
            }),
            None => None,
        };
        Ok(Observer {
            clock,
            budget,
            memory_limit,
            metrics,
            io_at_start: crate::storage::segment::io_bytes(),
        })
    }

    /// An observer with no budget and no metrics file: the progress line only.
    pub fn plain() -> Observer {
        Observer {
            clock: Clock::now(),
            budget: None,
            memory_limit: None,
            metrics: None,
            io_at_start: crate::storage::segment::io_bytes(),
        }
    }

    pub fn has_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// Whether a metrics line is due at `now`.
    pub fn metrics_due(&self, now: Instant) -> bool {
        self.metrics
            .as_ref()
            .is_some_and(|m| m.last.is_none_or(|l| now.duration_since(l) >= m.every))
    }

    /// The run's figures now. `structures` costs an allocation per structure, so the
    /// progress line alone asks for totals only.
    pub fn sample(&self, head: Head, structures: bool) -> Sample {
        let (rss, peak) = crate::sys::rss_and_peak_bytes();
        let (read, written) = crate::storage::segment::io_bytes();
        let (level, level_states, order) = match head.position {
            Position::Bfs {
                level,
                level_states,
            } => (level, Some(level_states), "bfs"),
            Position::Dfs { depth } => (depth, None, "dfs"),
        };
        let (disk, structures) = match &self.budget {
            Some(b) if structures => {
                let u = b.usage();
                (u.iter().map(|u| u.disk_bytes).sum(), u)
            }
            Some(b) => (b.totals().1, Vec::new()),
            None => (0, Vec::new()),
        };
        Sample {
            wall_seconds: self.clock.wall(),
            cpu_seconds: self.clock.cpu(),
            phase: head.phase,
            states: head.states,
            transitions: head.transitions,
            order: order.to_string(),
            level,
            level_states,
            rss_bytes: rss,
            peak_rss_bytes: peak,
            memory_limit_bytes: self.memory_limit,
            disk_bytes: disk,
            disk_read_bytes: read.saturating_sub(self.io_at_start.0),
            disk_written_bytes: written.saturating_sub(self.io_at_start.1),
            structures,
        }
    }

    /// Appends `sample` as one line. A write error does not stop the run (hours of search
    /// are worth more than its log): the file is dropped with a warning, once.
    pub fn write(&mut self, sample: &Sample, now: Instant) {
        let Some(m) = self.metrics.as_mut() else {
            return;
        };
        let mut line = serde_json::to_string(sample).expect("a sample serialises");
        line.push('\n');
        // One write per line, so that a reader (`tail -f`, `spillway plot` while the run
        // goes on) never sees half a line from a buffer flushed in the middle.
        if let Err(e) = m.file.write_all(line.as_bytes()) {
            crate::say!(
                "spillway: warning: {}: cannot write metrics ({e}); the run goes on without them",
                m.path.display()
            );
            self.metrics = None;
            return;
        }
        m.last = Some(now);
    }

    /// The progress line for `sample`, with the rate since the previous line.
    pub fn progress_line(&self, s: &Sample, rate: f64) -> String {
        let mib = |b: u64| b >> 20;
        let where_ = match s.level_states {
            Some(n) => format!("level {} ({n} states)", s.level),
            None => format!("depth {}", s.level),
        };
        let rss = match s.memory_limit_bytes {
            Some(l) => format!("RSS {}/{} MiB", mib(s.rss_bytes), mib(l)),
            None => format!("RSS {} MiB", mib(s.rss_bytes)),
        };
        let disk = if self.budget.is_some() {
            format!(", disk {} MiB", mib(s.disk_bytes))
        } else {
            String::new()
        };
        format!(
            "{}: {} states, {} transitions, {rate:.0} states/s, {where_}, {rss}{disk}",
            s.phase.as_str(),
            s.states,
            s.transitions
        )
    }
}

/// What the engine knows at a tick.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    pub phase: Phase,
    pub states: u64,
    pub transitions: u64,
    pub position: Position,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(position: Position, limit: Option<u64>) -> Sample {
        let mut o = Observer::plain();
        o.memory_limit = limit;
        o.sample(
            Head {
                phase: Phase::Expanding,
                states: 1234,
                transitions: 5678,
                position,
            },
            false,
        )
    }

    #[test]
    fn progress_line_names_phase_level_and_budget() {
        let mut o = Observer::plain();
        let s = sample(
            Position::Bfs {
                level: 3,
                level_states: 9,
            },
            Some(64 << 20),
        );
        let line = o.progress_line(&s, 100.0);
        assert!(
            line.starts_with(
                "expanding: 1234 states, 5678 transitions, 100 states/s, level 3 (9 states), RSS "
            ),
            "{line}"
        );
        assert!(
            line.ends_with("/64 MiB"),
            "no disk figure without a storage: {line}"
        );
        o.budget = Some(Budget::new(crate::storage::MemoryLimit::Bytes(64 << 20)));
        let line = o.progress_line(&sample(Position::Dfs { depth: 42 }, None), 0.0);
        assert!(
            line.contains("depth 42, RSS ") && line.ends_with(" MiB, disk 0 MiB"),
            "{line}"
        );
        let rss = line.split("RSS ").nth(1).unwrap();
        assert!(!rss.contains('/'), "no budget, no '/': {line}");
    }

    #[test]
    fn metrics_are_due_at_the_first_tick_then_every_interval() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = MetricsConfig {
            path: dir.path().join("m.jsonl"),
            every: Duration::from_secs(3600),
        };
        let mut o = Observer::new(Clock::now(), None, None, Some(&cfg)).unwrap();
        let now = Instant::now();
        assert!(o.metrics_due(now));
        let s = sample(Position::Dfs { depth: 1 }, None);
        o.write(&s, now);
        o.write(&s, now);
        assert!(!o.metrics_due(Instant::now()), "an hour has not passed");
        let text = std::fs::read_to_string(&cfg.path).unwrap();
        assert_eq!(text.lines().count(), 2);
        let back: Sample = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(
            (back.states, back.phase, back.level_states),
            (1234, Phase::Expanding, None)
        );
    }
}
