//! Typed errors, one enum per layer, each with its exit code (`main` maps them).
//!
//! Every variant carries what a user needs to act: the file, the position (line and column for
//! text formats, byte offset for binary ones) and what was expected versus found.

use std::path::PathBuf;
use thiserror::Error;

/// A problem at a line and column of a text file (a model, an `.aut` or `.fsm` LTS): a syntax
/// error, or a limit the text passes.
#[derive(Debug, Error)]
#[error("{path}:{line}:{column}: {message}")]
pub struct TextError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Errors from model front ends (parsing, unsupported constructs, runtime limits of a model).
#[derive(Debug, Error)]
pub enum ModelError {
    #[error("{path}: cannot read model: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Syntax(TextError),
    #[error("{path}:{line}:{column}: unsupported: {construct}")]
    Unsupported {
        path: PathBuf,
        line: usize,
        column: usize,
        construct: String,
    },
    #[error("{path}: invalid model: {message}")]
    Invalid { path: PathBuf, message: String },
    /// A well-formed model beyond what spillway can represent (e.g. a number of tokens above
    /// the widest place counter): a resource limit (exit code 6), with its position.
    #[error(transparent)]
    Limit(TextError),
    /// A model file whose extension (`ext`, empty for none) names no front end.
    #[error("{path}: {} (expected .pnml, .aut or .dve)", unknown_format("model", .ext))]
    UnknownFormat { path: PathBuf, ext: String },
    /// A token count exceeded the counter width; the caller may retry with wider counters.
    #[error("place '{place}' would hold more than {limit} tokens (counter overflow)")]
    TokenOverflow { place: String, limit: u64 },
    /// [`ModelError::TokenOverflow`] as the driver reports it: no wider counter to retry
    /// with (or the width was fixed), with the model's path.
    #[error("{path}: place '{place}' would hold more than {limit} tokens, the most {bits}-bit counters hold: {hint}")]
    CounterOverflow {
        path: PathBuf,
        place: String,
        limit: u64,
        bits: u8,
        hint: &'static str,
    },
    #[error("model error: {0}")]
    Other(String),
}

/// A damaged binary file (a native LTS, a segment file): a checksum, magic number or
/// structural field at byte `offset` does not match what the format says.
#[derive(Debug, Error)]
#[error("{path}: corrupted at byte offset {offset}: expected {expected}, found {found}")]
pub struct Corruption {
    pub path: PathBuf,
    pub offset: u64,
    pub expected: String,
    pub found: String,
}

/// Errors from LTS files (native and textual formats).
#[derive(Debug, Error)]
pub enum LtsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is damaged.
    #[error(transparent)]
    Corrupt(Corruption),
    /// The file ends early: typically written by a run that was killed.
    #[error("{path}: truncated: {message}")]
    Truncated { path: PathBuf, message: String },
    #[error("{path}: unsupported native LTS format version {found} (this build reads version {supported})")]
    Version {
        path: PathBuf,
        found: u16,
        supported: u16,
    },
    #[error(transparent)]
    Syntax(TextError),
    #[error("{0}")]
    Invalid(String),
    /// Another process holds the lock on the temporary file the output is written through.
    #[error("another spillway process is writing {output} ({partial} is locked); wait for it to finish, or choose another output path")]
    Busy { output: PathBuf, partial: PathBuf },
}

/// Errors from the offline post-processing tools (`spillway lts ...`).
#[derive(Debug, Error)]
pub enum PostError {
    /// Reading or writing an LTS file failed.
    #[error(transparent)]
    Lts(#[from] LtsError),
    /// The request cannot be carried out as given (bad regex, unsupported format for this
    /// direction, output too large for the format without `--force`).
    #[error("{0}")]
    Usage(String),
    /// The LTS exceeds what the in-memory representation can index (more than 2^32 - 2 states
    /// or transitions) or memory for it could not be allocated.
    #[error("{0}")]
    Limit(String),
}

impl PostError {
    /// The exit code this error maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            PostError::Lts(e) => e.exit_code(),
            PostError::Usage(_) => exit::USAGE,
            PostError::Limit(_) => exit::LIMIT,
        }
    }
}

/// Errors from the storage layer (segment files, memory budget).
#[derive(Debug, Error)]
pub enum StorageError {
    /// A file could not be created, written, read or removed (`what` names the operation).
    #[error("{path}: cannot {what}: {source}{hint}", hint = io_hint(source))]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A segment file is damaged.
    #[error(transparent)]
    Corrupt(Corruption),
    /// A checkpoint's image of a structure (`storage::image`) whose records, intact by their
    /// checksums, do not hold what its reader expects.
    #[error("{path}: damaged checkpoint image: {problem}")]
    Image { path: PathBuf, problem: String },
    #[error(
        "{path}: unsupported segment format version {found} (this build reads version {supported})"
    )]
    Version {
        path: PathBuf,
        found: u16,
        supported: u16,
    },
    /// The memory budget cannot hold a structure that must stay in RAM.
    #[error("memory budget of {budget} bytes is too small: {structure} needs {need} bytes in RAM ({message}); raise --memory to {minimum} at least")]
    BudgetTooSmall {
        structure: String,
        need: u64,
        budget: u64,
        message: String,
        /// The smallest `--memory` that passes this check, e.g. `12M`.
        minimum: String,
    },
    /// A run without `--memory` reached its default ceiling (see `sys::default_ceiling`).
    #[error("stopped at the default memory ceiling of {} MiB: {structure} needs {} MiB more with {} MiB resident; give --memory SIZE to run within SIZE, spilling to disk (the full store's index spills in BFS), or --memory unlimited to lift the ceiling", limit >> 20, more.div_ceil(1 << 20), rss >> 20)]
    Ceiling {
        structure: String,
        rss: u64,
        more: u64,
        limit: u64,
    },
    /// A run under `--memory` whose resident memory passed the budget plus the binary's
    /// baseline (see `sys::check_budget`): a structure outside the budget grew.
    #[error("stopped: resident memory {reached} {} MiB, over --memory {} MiB plus the {} MiB the process held before exploring ({holder}); raise --memory: the run needs more than {} MiB (what it held when stopped, unfinished; how much more depends on the states still to come){hint}", rss >> 20, limit >> 20, baseline >> 20, (rss - baseline).div_ceil(1 << 20) + 1)]
    OverBudget {
        /// "reached", or "would reach" when the step was refused before it was taken.
        reached: &'static str,
        holder: String,
        /// What else to try (another store), or nothing.
        hint: &'static str,
        rss: u64,
        limit: u64,
        baseline: u64,
    },
    /// A structure an option sized is larger than the RAM or the address space the process
    /// may use at all (`--memory unlimited`: no budget, no ceiling).
    #[error("{structure} would need {} MiB, more than the {} MiB of RAM or address space (ulimit -v) this process may use; {hint}", bytes.div_ceil(1 << 20), room >> 20)]
    TooLarge {
        structure: String,
        bytes: u64,
        room: u64,
        /// What to do: [`crate::sys::LOWER_THE_OPTION`], or on resume, where the option
        /// cannot change, how to go on.
        hint: String,
    },
    #[error("storage: {0}")]
    Invalid(String),
}

fn io_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(28) => " (disk full: free space in --workdir or point it elsewhere)",
        Some(13) | Some(30) => " (is --workdir writable?)",
        _ => "",
    }
}

impl StorageError {
    /// The exit code this error maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            StorageError::Io { .. } => exit::IO,
            StorageError::Corrupt { .. }
            | StorageError::Image { .. }
            | StorageError::Version { .. } => exit::CORRUPT,
            StorageError::BudgetTooSmall { .. }
            | StorageError::Ceiling { .. }
            | StorageError::OverBudget { .. }
            | StorageError::TooLarge { .. } => exit::LIMIT,
            StorageError::Invalid(_) => exit::INTERNAL,
        }
    }
}

/// Errors from visited-state stores.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("state store '{store}' is full: {message}")]
    CapacityExceeded {
        store: &'static str,
        message: String,
    },
    #[error("state store '{store}': {message}")]
    Invalid {
        store: &'static str,
        message: String,
    },
    /// Replaying a stored path failed: the model broke its determinism contract (a transition
    /// recorded as fired is not enabled on replay) or reported an error.
    #[error("state store '{store}': cannot reconstruct state {id}: {message}")]
    Reconstruction {
        store: &'static str,
        id: u64,
        message: String,
    },
}

/// Errors of checkpoints and resuming.
#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A manifest or a file it names is damaged; nothing was changed.
    #[error("{path}: {problem}; the checkpoint was left unchanged")]
    Corrupt { path: PathBuf, problem: String },
    /// The checkpoint cannot be used as asked (changed model, forbidden option, …).
    #[error("{0}")]
    Refused(String),
    /// Not an error: SIGINT/SIGTERM stopped the run after a checkpoint was committed.
    #[error("stopped by {signal} after writing checkpoint {generation} to {dir}; continue with: spillway resume {dir}")]
    Stopped {
        signal: &'static str,
        generation: u64,
        dir: String,
    },
}

impl CheckpointError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> CheckpointError {
        CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CheckpointError::Io { .. } => exit::IO,
            CheckpointError::Corrupt { .. } => exit::CORRUPT,
            CheckpointError::Refused(_) => exit::USAGE,
            CheckpointError::Stopped { .. } => exit::CHECKPOINTED,
        }
    }
}

/// Errors of an exploration run: any layer's error, tagged with the layer.
#[derive(Debug, Error)]
pub enum ExploreError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Lts(#[from] LtsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A file the run writes besides its output (the `--metrics` file).
    #[error("{path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Process exit codes, documented in `--help` and the README.
pub mod exit {
    /// The command succeeded.
    pub const OK: i32 = 0;
    /// An unexpected internal error.
    pub const INTERNAL: i32 = 1;
    /// `lts compare`: the LTSs are not equivalent (as `cmp` and `diff` exit 1 on a
    /// difference). No error of the `lts` tools maps to 1, so the verdict is unambiguous.
    pub const NOT_EQUIVALENT: i32 = 1;
    /// Bad command line (unknown flag, bad value).
    pub const USAGE: i32 = 2;
    /// The model is malformed or uses an unsupported construct.
    pub const MODEL: i32 = 3;
    /// An I/O error: file missing, unwritable, disk full.
    pub const IO: i32 = 4;
    /// A data file (LTS, segment, checkpoint) is truncated or corrupted.
    pub const CORRUPT: i32 = 5;
    /// A resource limit was hit (memory budget, state-id space, counter width).
    pub const LIMIT: i32 = 6;
    /// SIGINT or SIGTERM stopped a checkpointed run after a checkpoint was written
    /// (`spillway resume DIR` continues it).
    pub const CHECKPOINTED: i32 = 7;
    /// The run was interrupted (SIGINT/SIGTERM) without a checkpoint (shell convention).
    pub const INTERRUPTED: i32 = 130;
}

impl ExploreError {
    /// The exit code this error maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            ExploreError::Model(ModelError::Io { .. }) => exit::IO,
            ExploreError::Model(
                ModelError::TokenOverflow { .. }
                | ModelError::CounterOverflow { .. }
                | ModelError::Limit { .. },
            ) => exit::LIMIT,
            ExploreError::Model(_) => exit::MODEL,
            ExploreError::Lts(e) => e.exit_code(),
            ExploreError::Store(StoreError::CapacityExceeded { .. }) => exit::LIMIT,
            ExploreError::Store(StoreError::Storage(e)) | ExploreError::Storage(e) => e.exit_code(),
            ExploreError::Store(_) => exit::INTERNAL,
            ExploreError::Config(_) => exit::USAGE,
            ExploreError::Checkpoint(e) => e.exit_code(),
            ExploreError::Io { .. } => exit::IO,
        }
    }
}

impl LtsError {
    /// The exit code this error maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            LtsError::Io { .. } => exit::IO,
            LtsError::Corrupt { .. } | LtsError::Truncated { .. } | LtsError::Version { .. } => {
                exit::CORRUPT
            }
            LtsError::Syntax { .. } => exit::MODEL,
            LtsError::Invalid(_) | LtsError::Busy { .. } => exit::USAGE,
        }
    }
}

/// Why a file's format, chosen by its extension `ext` (empty for none), is not known: "unknown
/// model format '.xyz'", or "no file extension to tell the model format by" (`kind`: "model",
/// "LTS").
pub fn unknown_format(kind: &str, ext: &str) -> String {
    if ext.is_empty() {
        format!("no file extension to tell the {kind} format by")
    } else {
        format!("unknown {kind} format '.{ext}'")
    }
}

/// Converts a byte offset in `text` into a 1-based (line, column) pair. The column counts
/// characters, as editors do (UTF-8; a byte sequence that is not UTF-8 counts as one
/// character per invalid sequence, as the text LTS readers count it).
pub fn line_col(text: &[u8], offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |nl| nl + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

/// Errors of `spillway plot`.
#[derive(Debug, Error)]
pub enum PlotError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of the metrics file is not a metrics line (1-based line number).
    #[error("{path}:{line}: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// The plotting library refused to draw (a bug, not the input's fault).
    #[error("{path}: cannot draw the plot: {message}")]
    Draw { path: PathBuf, message: String },
    /// The command line cannot be carried out (the output is the input).
    #[error("{0}")]
    Usage(String),
}

impl PlotError {
    pub fn exit_code(&self) -> i32 {
        match self {
            PlotError::Io { .. } => exit::IO,
            PlotError::Malformed { .. } => exit::MODEL,
            PlotError::Draw { .. } => exit::INTERNAL,
            PlotError::Usage(_) => exit::USAGE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn columns_count_characters() {
        let text = "ab\né€x\ny".as_bytes();
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        // 'x' is byte 5 of its line ('é' 2 bytes, '€' 3), character 3.
        assert_eq!(line_col(text, 3 + 5), (2, 3));
        assert_eq!(line_col(text, text.len()), (3, 2));
        // Invalid UTF-8 counts one character per bad sequence.
        assert_eq!(line_col(b"\xff\xfex", 2), (1, 3));
    }
}
