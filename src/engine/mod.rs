//! Exploration algorithms. One loop per search order; each takes a [`Model`], a
//! [`StateStore`] and an [`LtsSink`] and returns [`ExploreStats`].
//!
//! Invariants shared by every engine:
//! * states are numbered by the store in discovery order, the initial state is 0;
//! * every (state, enabled transition) pair produces exactly one edge in the sink, so the edge
//!   count equals the MCC "transitions" count (self-loops and parallel edges included);
//! * a label is defined in the sink before the first edge that uses it.

pub mod bfs;
pub mod caching;
pub mod dfs;
pub mod observe;
mod parallel;
pub mod snapshots;

use crate::checkpoint::{Checkpointer, Counters, Due, EngineMark};
use crate::error::{CheckpointError, ExploreError};
use crate::lts::LtsSink;
use crate::model::{Fired, LabelId, Model, TransitionId};
use crate::storage::{FileMark, Storage};
use crate::store::{Exactness, StateStore};
use observe::{Head, Observer, Phase, Position};
use serde::Serialize;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub use crate::store::Order;

/// Options common to every engine.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EngineOptions {
    /// Show a live progress line on stderr (only honoured when stderr is a terminal).
    pub progress: bool,
    /// Threads expanding states in BFS (`--threads`; 1: the calling thread only). The
    /// output does not depend on it.
    pub threads: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            progress: true,
            threads: 1,
        }
    }
}

/// What an exploration found and what it cost. Serialised as the `--stats-json` object.
#[derive(Clone, Debug, Serialize)]
pub struct ExploreStats {
    pub model: String,
    pub states: u64,
    pub transitions: u64,
    pub deadlocks: u64,
    /// The label of the first transition the run found to lead to the model's error
    /// state (DVE: DiVinE's, after a division by zero, a bad index or a value out of
    /// range), which is then one of the `deadlocks`; `null` if none did (in any leg of a
    /// resumed run: the checkpoint records it).
    pub error_transition: Option<String>,
    pub max_depth: u64,
    /// Threads that expanded states (`--threads`; 1 when the run, or its store, order or
    /// model, ran on one thread).
    pub threads: u64,
    pub wall_seconds: f64,
    pub states_per_second: f64,
    pub peak_rss_bytes: u64,
    pub store: String,
    pub order: String,
    pub exact: bool,
    /// Upper bound on the probability that a state was omitted (0 for exact stores).
    pub omission_probability: f64,
    /// States the store forgot to bound its memory (stratified caching) and may have
    /// numbered again when met again: then `states` and `transitions` are upper bounds
    /// (`None` for stores that never forget).
    pub forgotten_states: Option<u64>,
    pub store_ram_bytes: u64,
    pub store_ram_bytes_per_state: f64,
    /// Bytes the store keeps on disk (segment files, record vectors).
    pub store_disk_bytes: u64,
    /// Store-specific counters (`StateStore::report`): reconstitutions, cache hits, …
    pub store_details: serde_json::Map<String, serde_json::Value>,
    /// RAM and disk bytes per structure, when structures spill to segment files.
    pub structures: Vec<crate::storage::Usage>,
    /// The `--memory` budget, if any.
    pub memory_limit_bytes: Option<u64>,
    /// The run's work directory (removed at exit), when structures spill.
    pub workdir: Option<String>,
    pub labels: u64,
    pub output: Option<String>,
    pub output_bytes: Option<u64>,
    /// Checkpoints written by this process and the seconds they took in all.
    pub checkpoints: u64,
    pub checkpoint_seconds: f64,
    /// The checkpoint generation this process resumed from (`spillway resume`).
    pub resumed_from: Option<u64>,
    /// The same as `wall_seconds` (kept for scripts that read it); set by the driver
    /// (`run`) in every run.
    pub run_seconds: Option<f64>,
    /// CPU seconds (user + system) of the whole run, over every leg like `wall_seconds`.
    pub cpu_seconds: f64,
    /// How many times the run was resumed (0 for a run that went through in one process).
    pub resumes: u64,
    /// This process's part of the run (its *leg*: the `explore`, or the last `resume`),
    /// from its start (model loading and index rebuilding included): wall and CPU
    /// seconds, the states it added and their rate.
    pub leg_wall_seconds: f64,
    pub leg_cpu_seconds: f64,
    pub leg_states: u64,
    pub leg_states_per_second: f64,
    /// The store's line for humans ([`StateStore::summary`]); not in the JSON, whose
    /// `store_details` say the same and more.
    #[serde(skip)]
    pub store_summary: Option<String>,
}

pub use crate::sys::{peak_rss_bytes, rss_bytes};

/// Counts and bookkeeping shared by the engines while they run.
pub(crate) struct Run<'a> {
    pub model: &'a dyn Model,
    pub sink: &'a mut dyn LtsSink,
    pub labels_defined: usize,
    pub transitions: u64,
    pub deadlocks: u64,
    pub max_depth: u64,
    /// An earlier leg's first transition into the model's error state (from the checkpoint).
    error_before: Option<String>,
    /// Threads that expanded states (see [`ExploreStats::threads`]).
    pub threads: u64,
    start: Instant,
    cpu_at_start: f64,
    progress: Option<Progress>,
    observer: Observer,
    /// What the engine is doing, for the progress line and the metrics.
    pub phase: Phase,
    /// Where the search stood at the last tick (the final metrics line repeats it).
    position: Position,
}

struct Progress {
    last: Instant,
    last_states: u64,
    shown: bool,
}

impl<'a> Run<'a> {
    pub fn new(
        model: &'a dyn Model,
        sink: &'a mut dyn LtsSink,
        opts: &EngineOptions,
        observer: Option<Observer>,
    ) -> Result<Self, ExploreError> {
        let mut run = Run {
            model,
            sink,
            labels_defined: 0,
            transitions: 0,
            deadlocks: 0,
            max_depth: 0,
            error_before: None,
            threads: 1,
            start: Instant::now(),
            cpu_at_start: crate::sys::process_cpu_seconds(),
            progress: (opts.progress && std::io::stderr().is_terminal()).then(|| Progress {
                last: Instant::now(),
                last_states: 0,
                shown: false,
            }),
            observer: observer.unwrap_or_else(Observer::plain),
            phase: Phase::Starting,
            position: Position::Bfs {
                level: 0,
                level_states: 1,
            },
        };
        crate::sys::show_activity(run.progress.is_some());
        run.define_labels()?;
        Ok(run)
    }

    /// Defines every label the model knows that the sink has not seen yet.
    pub fn define_labels(&mut self) -> Result<(), ExploreError> {
        let n = self.model.label_count();
        while self.labels_defined < n {
            let id = LabelId(self.labels_defined as u32);
            self.sink.define_label(id, &self.model.label_name(id))?;
            self.labels_defined += 1;
        }
        Ok(())
    }

    /// Emits one edge, defining its label first if the model grew its label table.
    #[inline]
    pub fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), ExploreError> {
        if label.0 as usize >= self.labels_defined {
            self.define_labels()?;
        }
        self.transitions += 1;
        self.sink.edge(src, label, dst)?;
        Ok(())
    }

    /// Called by every engine every 16,384 expansions (BFS) or steps (DFS): checks the
    /// resident set against the machine's ceiling (runs without `--memory`: exit 6 past it)
    /// or against `--memory` plus the baseline (`sys::check_budget`),
    /// redraws the progress line about once a second and appends a metrics line when one is
    /// due. The clock is read only here, so per state the engines pay nothing for either.
    pub fn tick(
        &mut self,
        store: &dyn StateStore,
        position: Position,
    ) -> Result<(), crate::error::StorageError> {
        crate::sys::check_ceiling("the run", 0)?;
        crate::sys::check_budget(|| {
            // Only a store whose visited set stays in RAM is told to try one that spills.
            let hint = if store.index_spills() {
                ""
            } else {
                ", or use a store whose index spills to disk (full, comback, delta, hashcompact, tree)"
            };
            let holder = format!(
                "the {} store reports {} MiB in RAM",
                store.name(),
                store.ram_bytes() >> 20
            );
            (holder, hint)
        })?;
        self.position = position;
        if self.progress.is_none() && !self.observer.has_metrics() {
            return Ok(());
        }
        let now = Instant::now();
        let show = self
            .progress
            .as_ref()
            .is_some_and(|p| now.duration_since(p.last) >= Duration::from_secs(1));
        let log = self.observer.metrics_due(now);
        if !show && !log {
            return Ok(());
        }
        // Stores update their accounts lazily; the figures must be current.
        store.sync_accounts();
        let sample = self.observer.sample(self.head(store), log);
        if log {
            self.observer.write(&sample, now);
        }
        if let Some(p) = self.progress.as_mut().filter(|_| show) {
            let dt = now.duration_since(p.last).as_secs_f64();
            let rate = sample.states.saturating_sub(p.last_states) as f64 / dt;
            crate::sys::to_stderr(format_args!(
                "\r\x1b[K{}",
                self.observer.progress_line(&sample, rate)
            ));
            p.last = now;
            p.last_states = sample.states;
            p.shown = true;
        }
        Ok(())
    }

    /// Writes a leg's last metrics line, whenever it is due: the `done` line, or the
    /// `stopped` line of a run stopped by a signal after a checkpoint.
    fn last_line(&mut self, store: &dyn StateStore, phase: Phase) {
        if self.observer.has_metrics() {
            self.phase = phase;
            store.sync_accounts();
            let sample = self.observer.sample(self.head(store), true);
            self.observer.write(&sample, Instant::now());
        }
    }

    fn head(&self, store: &dyn StateStore) -> Head {
        Head {
            phase: self.phase,
            states: store.len(),
            transitions: self.transitions,
            position: self.position,
        }
    }

    /// The counters a checkpoint records.
    pub fn counters(&self) -> Counters {
        Counters {
            transitions: self.transitions,
            deadlocks: self.deadlocks,
            max_depth: self.max_depth,
            error_transition: self.error_transition(),
            elapsed_seconds: 0.0,
            cpu_seconds: 0.0,
            resumes: 0,
        }
    }

    /// Continues from a checkpoint's counters.
    pub fn restore(&mut self, c: &Counters) {
        self.transitions = c.transitions;
        self.deadlocks = c.deadlocks;
        self.max_depth = c.max_depth;
        self.error_before = c.error_transition.clone();
    }

    /// The first transition found to lead to the model's error state: an earlier leg's, else
    /// this process's.
    fn error_transition(&self) -> Option<String> {
        self.error_before
            .clone()
            .or_else(|| self.model.error_transition())
    }

    /// Completes the output LTS.
    pub fn finish(&mut self, store: &dyn StateStore) -> Result<(), ExploreError> {
        self.sink.finish(&crate::lts::LtsSummary {
            states: store.len(),
            transitions: self.transitions,
            initial: 0,
            deadlocks: self.deadlocks,
        })?;
        Ok(())
    }

    /// Clears the progress line and builds the stats.
    /// Writes the final metrics line too, with the counts the stats report.
    pub fn stats(&mut self, store: &dyn StateStore, order: Order) -> ExploreStats {
        if let Some(p) = &self.progress {
            // The storage layer may have drawn on the line too (`sys::activity`).
            crate::sys::show_activity(false);
            if p.shown || crate::sys::activity_drawn() {
                crate::sys::to_stderr(format_args!("\r\x1b[K"));
            }
        }
        self.last_line(store, Phase::Done);
        let wall = self.start.elapsed().as_secs_f64();
        let states = store.len();
        let (exact, omission_probability, forgotten_states) = match store.exactness() {
            Exactness::Exact => (true, 0.0, None),
            Exactness::Probabilistic {
                omission_probability,
            } => (false, omission_probability, None),
            Exactness::Revisiting { forgotten } => (false, 0.0, Some(forgotten)),
        };
        let ram = store.ram_bytes();
        ExploreStats {
            model: String::new(),
            states,
            transitions: self.transitions,
            deadlocks: self.deadlocks,
            error_transition: self.error_transition(),
            max_depth: self.max_depth,
            threads: self.threads,
            wall_seconds: wall,
            states_per_second: if wall > 0.0 {
                states as f64 / wall
            } else {
                0.0
            },
            peak_rss_bytes: peak_rss_bytes(),
            store: store.name().to_string(),
            order: order.as_str().to_string(),
            exact,
            omission_probability,
            forgotten_states,
            store_ram_bytes: ram,
            store_ram_bytes_per_state: if states > 0 {
                ram as f64 / states as f64
            } else {
                0.0
            },
            store_disk_bytes: store.disk_bytes(),
            store_details: store.report(),
            store_summary: store.summary(),
            structures: Vec::new(),
            memory_limit_bytes: None,
            workdir: None,
            labels: self.labels_defined as u64,
            output: None,
            output_bytes: None,
            checkpoints: 0,
            checkpoint_seconds: 0.0,
            resumed_from: None,
            run_seconds: None,
            cpu_seconds: crate::sys::process_cpu_seconds() - self.cpu_at_start,
            resumes: 0,
            leg_wall_seconds: wall,
            leg_cpu_seconds: crate::sys::process_cpu_seconds() - self.cpu_at_start,
            leg_states: states,
            leg_states_per_second: if wall > 0.0 {
                states as f64 / wall
            } else {
                0.0
            },
        }
    }
}

/// A checkpoint's engine mark that does not fit the run resuming it (a mark of another
/// engine, a position past what the store or level holds): the manifest's CRC held, so a
/// spillway recorded it wrong — corrupted checkpoint data naming the manifest (exit 5).
pub(crate) fn corrupt_mark(storage: Option<&Storage>, problem: String) -> ExploreError {
    match storage {
        Some(st) => ExploreError::Checkpoint(CheckpointError::Corrupt {
            path: st.dir().join(crate::checkpoint::MANIFEST),
            problem,
        }),
        None => ExploreError::Config(problem),
    }
}

/// Fires `t`, which the model listed as enabled in `state`, into `succ`; a model that then
/// says otherwise breaks its determinism contract, an error rather than a panic.
pub(crate) fn fire_enabled(
    model: &dyn Model,
    state: &[u8],
    t: TransitionId,
    succ: &mut Vec<u8>,
) -> Result<LabelId, ExploreError> {
    match model.fire(state, t, succ)? {
        Fired::Enabled(l) => Ok(l),
        other => Err(crate::error::ModelError::Other(format!(
            "transition {} reported enabled but firing it gave {other:?}: the model breaks its determinism contract",
            t.0
        ))
        .into()),
    }
}

/// What an engine needs besides the model, the store and the sink: the run's storage, the
/// checkpointer of a checkpointed run, and the checkpoint to continue from.
#[derive(Default)]
pub struct Session<'a> {
    pub storage: Option<&'a Storage>,
    pub checkpoint: Option<&'a mut Checkpointer>,
    /// Continue from this engine mark and these counters instead of the initial state (the
    /// store and the sink must have been resumed from the same checkpoint).
    pub resume: Option<(EngineMark, Counters)>,
    /// The run's clock, budget and metrics file (default: the progress line alone).
    pub observer: Option<Observer>,
}

/// Explores `model` in the given order, numbering states with `store` and streaming edges
/// to `sink` (finished on success), within a session: checkpoints when they are due, and
/// resuming. The driver ([`crate::run::Search`]) is the way in; this is its engine step.
pub(crate) fn explore_session(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    order: Order,
    opts: &EngineOptions,
    session: Session,
) -> Result<ExploreStats, ExploreError> {
    if let Some(snap) = store.as_snapshots() {
        // BFS without a Closed set: its own loop (the store refuses other orders).
        return snapshots::explore(model, snap, sink, opts, session);
    }
    // The cache store is driven by its own DFS (re-exploration, sleep sets); its
    // `StoreSpec::refuse` has already turned BFS runs away.
    if let Some(cache) = store.as_cache() {
        return caching::explore(model, cache, sink, opts, session);
    }
    match order {
        Order::Bfs => bfs::explore(model, store, sink, opts, session),
        Order::Dfs => dfs::explore(model, store, sink, opts, session),
    }
}

/// How often (in expansions or steps) the engines ask whether a checkpoint is due.
const POLL_EVERY: u64 = 256;

impl Session<'_> {
    /// The engines' one checkpoint poll, called once per expansion (BFS) or step (DFS)
    /// with a counter: every [`POLL_EVERY`] calls it asks the checkpointer, if the run has
    /// one, whether a checkpoint is due, and hands it back with the reason.
    #[inline]
    pub(crate) fn poll(&mut self, count: u64) -> Option<(&mut Checkpointer, Due)> {
        if !count.is_multiple_of(POLL_EVERY) {
            return None;
        }
        let ck = self.checkpoint.as_deref_mut()?;
        let due = ck.due()?;
        Some((ck, due))
    }
}

/// Commits a checkpoint: the engine has made its own structures durable (`engine`,
/// `engine_files`); then the store and the output writer do, and the manifest is written.
/// Returns `Err(Stopped)` when the checkpoint was asked for by SIGINT/SIGTERM.
pub(crate) fn commit_checkpoint(
    ck: &mut Checkpointer,
    due: Due,
    run: &mut Run,
    store: &mut dyn StateStore,
    engine: EngineMark,
    engine_files: Vec<FileMark>,
) -> Result<(), ExploreError> {
    if let Due::Stop(_) = due {
        // Before the commit, which records the run's time: the resumed leg's clock starts
        // from that time, so the next line must not be earlier than this one.
        run.last_line(store, Phase::Stopped);
    }
    // The store's and the writer's part count in the checkpoint time with the commit's (a
    // full store in RAM compresses the states found since the last checkpoint here).
    let t0 = std::time::Instant::now();
    let store_mark = store.checkpoint()?;
    let output = match ck.output_partial {
        Some(_) => Some(run.sink.checkpoint()?),
        None => None,
    };
    ck.seconds += t0.elapsed().as_secs_f64();
    ck.commit(engine, store_mark, output, run.counters(), engine_files)?;
    match due {
        Due::Stop(signal) => Err(CheckpointError::Stopped {
            signal,
            generation: ck.generation(),
            dir: ck.dir().display().to_string(),
        }
        .into()),
        Due::Periodic | Due::OnDemand => Ok(()),
    }
}
