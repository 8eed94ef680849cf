//! LTS files: the native streamed, compressed format ([`native`]), Aldebaran `.aut` ([`aut`])
//! and mCRL2 `.fsm` ([`fsm`]), written and read; GraphViz `.dot` ([`dot`]), written only.
//! Engines and the post-processing tools push edges into an [`LtsSink`].

pub mod aut;
pub mod dot;
pub mod fsm;
pub mod native;

/// A label (action name) identifier, dense in `0..label_count()` of the model or LTS that
/// numbers it (`crate::model::LabelId` is this type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelId(pub u32);

use crate::error::{LtsError, TextError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Final counts handed to a sink when the exploration is complete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LtsSummary {
    pub states: u64,
    pub transitions: u64,
    pub initial: u64,
    pub deadlocks: u64,
}

/// Receives the LTS while it is explored. States are numbered in discovery order, the initial
/// state is 0. Every label is defined (`define_label`) before an edge uses it.
pub trait LtsSink {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError>;
    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError>;
    /// Tells the writer, before [`LtsSink::finish`], that the LTS may hold a state more than
    /// once (a search that forgot states and numbered them again, `--store cache`); formats
    /// that can say so record it (the native footer's flags), the others ignore it.
    fn states_may_repeat(&mut self) {}
    /// Whether the sink does anything with edges: `false` lets an engine that only counts
    /// them skip resolving the destination of each (parallel BFS then numbers only the
    /// candidates for new states, not every edge).
    fn wants_edges(&self) -> bool {
        true
    }
    /// Completes the file; a file whose writer never finished must not read as a valid LTS.
    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError>;
    /// Writes and syncs everything that can be written without changing the file a finished
    /// run would produce, and returns what [`LtsFormat::resume`] needs to continue: the
    /// file length to keep and the writer's pending state (e.g. a partial edge block, which
    /// is *not* written, so that block boundaries do not depend on when checkpoints happen).
    fn checkpoint(&mut self) -> Result<SinkMark, LtsError> {
        Err(LtsError::Invalid(
            "this output format cannot be checkpointed (use .slts or .aut)".into(),
        ))
    }
}

/// Where a checkpointed writer stands: `len` bytes of its file are final, `pending` is its
/// own serialised state (see [`LtsSink::checkpoint`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SinkMark {
    pub len: u64,
    pub pending: Vec<u8>,
}

/// Reads a writer's pending state back from a checkpoint ([`crate::codec::decode`]).
pub(crate) fn decode_pending<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<T, LtsError> {
    crate::codec::decode(bytes).map_err(|e| {
        LtsError::Invalid(format!(
            "{}: the checkpoint's writer state {e}",
            path.display()
        ))
    })
}

/// Cuts `file` (the output `name` is written through) after its first `len` bytes, checking
/// that it is at least that long, to continue writing there; the position is at `len`.
pub(crate) fn cut_at(
    mut f: std::fs::File,
    name: &Path,
    len: u64,
) -> Result<std::fs::File, LtsError> {
    use std::io::{Seek, SeekFrom};
    let io = io_error(name);
    let have = f.metadata().map_err(io)?.len();
    if have < len {
        return Err(LtsError::Invalid(format!(
            "{}: the checkpoint needs the first {len} bytes of the unfinished output but it has only {have}",
            name.display()
        )));
    }
    f.set_len(len).map_err(io)?;
    f.seek(SeekFrom::Start(len)).map_err(io)?;
    Ok(f)
}

/// Stores `name` as label `id` in a writer's label table, growing it as needed (labels are
/// defined in id order, but a table must not rely on that).
pub(crate) fn set_label(labels: &mut Vec<String>, id: LabelId, name: String) {
    let i = id.0 as usize;
    if labels.len() <= i {
        labels.resize(i + 1, String::new());
    }
    labels[i] = name;
}

/// What the text writers (`.aut`, `.fsm`, `.dot`) share: the buffered file, named in its
/// I/O errors, and the label table, each name as the format writes it.
pub(crate) struct TextOut {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    labels: Vec<String>,
}

impl TextOut {
    /// Writes on to `file`, the output `name` (named in errors), through a buffer of
    /// `buffer` bytes, with the labels already defined.
    fn on(name: &Path, file: std::fs::File, buffer: usize, labels: Vec<String>) -> Self {
        TextOut {
            path: name.to_path_buf(),
            out: std::io::BufWriter::with_capacity(buffer, file),
            labels,
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), LtsError> {
        use std::io::Write;
        self.out.write_all(bytes).map_err(io_error(&self.path))
    }

    /// The name of label `id`, which must have been defined.
    fn label(&self, id: LabelId) -> Result<&str, LtsError> {
        match self.labels.get(id.0 as usize) {
            Some(name) => Ok(name),
            None => Err(LtsError::Invalid(format!(
                "label {} used before it was defined",
                id.0
            ))),
        }
    }

    /// Flushes the buffer and forces the file to disk.
    fn sync(&mut self) -> Result<(), LtsError> {
        use std::io::Write;
        let io = io_error(&self.path);
        self.out.flush().map_err(io)?;
        self.out.get_ref().sync_all().map_err(io)
    }
}

/// Makes an I/O failure on `path` an [`LtsError`] (for `map_err`).
pub(crate) fn io_error(path: &Path) -> impl Fn(std::io::Error) -> LtsError + Copy + '_ {
    move |source| LtsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens an LTS file for reading. The readers need a regular file (the native reader seeks
/// to its footer, `.fsm` is read twice, the tools read their inputs more than once), so
/// anything else is refused before it is opened: opening a FIFO that no process writes to
/// had blocked `spillway lts info` forever.
pub(crate) fn open_input(path: &Path) -> Result<std::fs::File, LtsError> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).map_err(io_error(path))?.file_type();
    let kind = if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("a special file")
    };
    if let Some(kind) = kind {
        return Err(LtsError::Invalid(format!(
            "{}: {kind}, not a regular file: LTS files are read more than once (and the native format from its end), so write it to a file first",
            path.display()
        )));
    }
    std::fs::File::open(path).map_err(io_error(path))
}

/// Lines of a text LTS file (`.aut`, `.fsm`), read as UTF-8: bytes that are not UTF-8 make
/// the file malformed text (a syntax error with line and column, exit code 3), not an I/O
/// failure.
pub(crate) struct TextLines {
    reader: Box<dyn std::io::BufRead>,
    /// The current line, with its line break.
    pub line: String,
    /// The bytes of the next line before validation (its buffer swaps with `line`'s).
    raw: Vec<u8>,
    /// 1-based number of the current line.
    pub line_no: usize,
}

impl TextLines {
    pub fn new(reader: Box<dyn std::io::BufRead>) -> Self {
        TextLines {
            reader,
            line: String::new(),
            raw: Vec::new(),
            line_no: 0,
        }
    }

    /// Reads the next line into `line`; `false` at the end of the file.
    pub fn next(&mut self, path: &Path) -> Result<bool, LtsError> {
        self.raw.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.raw)
            .map_err(io_error(path))?;
        self.line_no += 1;
        match String::from_utf8(std::mem::take(&mut self.raw)) {
            Ok(text) => {
                // Swap buffers instead of copying: the old line's allocation is reused.
                let mut old = std::mem::replace(&mut self.line, text).into_bytes();
                old.clear();
                self.raw = old;
                Ok(n > 0)
            }
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.into_bytes();
                let column = String::from_utf8_lossy(&bytes[..at]).chars().count() + 1;
                Err(LtsError::Syntax(TextError {
                    path: path.to_path_buf(),
                    line: self.line_no,
                    column,
                    message: format!(
                        "byte 0x{:02x} is not valid UTF-8 (the file must be text)",
                        bytes[at]
                    ),
                }))
            }
        }
    }
}

/// The counts of a text LTS file: the `des` line of an `.aut` file, or what the first pass
/// over an `.fsm` file found (the format has no header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextHeader {
    /// The initial state, 0-based.
    pub initial: u64,
    pub transitions: u64,
    /// `.fsm`: the number of state lines, or the highest state number used.
    pub states: u64,
}

/// Labels numbered in order of first appearance, as the text readers meet them.
#[derive(Default)]
struct LabelTable {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl LabelTable {
    /// The id of `label`, numbering it if it is new.
    fn intern(&mut self, label: &str) -> LabelId {
        let id = match self.ids.get(label) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.names.push(label.to_string());
                self.ids.insert(label.to_string(), id);
                id
            }
        };
        LabelId(id)
    }
}

/// Streams the transitions of a text LTS file, interning labels in order of first appearance.
/// What `.aut` and `.fsm` reading share lives here; `F` is the format's own state, and the
/// format's module opens the file and parses its lines ([`aut::AutReader`],
/// [`fsm::FsmReader`]).
pub struct TextReader<F> {
    path: PathBuf,
    lines: TextLines,
    header: TextHeader,
    labels: LabelTable,
    /// Transitions returned so far.
    seen: u64,
    format: F,
}

impl<F> TextReader<F> {
    /// A reader at the start of `reader`, with zero counts until the format has read them.
    fn start(path: &Path, reader: Box<dyn std::io::BufRead>, format: F) -> Self {
        TextReader {
            path: path.to_path_buf(),
            lines: TextLines::new(reader),
            header: TextHeader {
                initial: 0,
                transitions: 0,
                states: 0,
            },
            labels: LabelTable::default(),
            seen: 0,
            format,
        }
    }

    pub fn header(&self) -> TextHeader {
        self.header
    }

    /// The file name used in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Labels seen so far, indexed by label id.
    pub fn labels(&self) -> &[String] {
        &self.labels.names
    }

    /// The end of the transitions: `None` if as many were read as the header counts, else the
    /// file is truncated; `message(counted, read)` says what the mismatch means in the format.
    fn end_of_edges(
        &self,
        message: fn(u64, u64) -> String,
    ) -> Result<Option<(u64, LabelId, u64)>, LtsError> {
        if self.seen != self.header.transitions {
            return Err(LtsError::Truncated {
                path: self.path.clone(),
                message: message(self.header.transitions, self.seen),
            });
        }
        Ok(None)
    }

    /// The 1-based column, in characters, where `part` (a slice of the current line) starts.
    fn column_of(&self, part: &str) -> usize {
        let line = &self.lines.line;
        let at = (part.as_ptr() as usize)
            .wrapping_sub(line.as_ptr() as usize)
            .min(line.len());
        line.get(..at).map_or(at, |s| s.chars().count()) + 1
    }

    /// A syntax error at `column` of the current line.
    fn syntax(&self, column: usize, message: impl Into<String>) -> LtsError {
        LtsError::Syntax(TextError {
            path: self.path.clone(),
            line: self.lines.line_no,
            column,
            message: message.into(),
        })
    }
}

/// Test helper: writes the one-transition LTS `0 -label-> 1` through `w` and finishes it as
/// an LTS of `states` states (all but state 0 deadlocks) whose initial state is `initial`.
#[cfg(test)]
pub(crate) fn write_one_edge(
    w: &mut impl LtsSink,
    label: &str,
    states: u64,
    initial: u64,
) -> Result<(), LtsError> {
    w.define_label(LabelId(0), label)?;
    w.edge(0, LabelId(0), 1)?;
    w.finish(&LtsSummary {
        states,
        transitions: 1,
        initial,
        deadlocks: states - 1,
    })
}

/// A sink that discards everything (exploration without output).
pub struct NullSink;

impl LtsSink for NullSink {
    fn define_label(&mut self, _: LabelId, _: &str) -> Result<(), LtsError> {
        Ok(())
    }
    fn edge(&mut self, _: u64, _: LabelId, _: u64) -> Result<(), LtsError> {
        Ok(())
    }
    fn wants_edges(&self) -> bool {
        false
    }
    fn finish(&mut self, _: &LtsSummary) -> Result<(), LtsError> {
        Ok(())
    }
    fn checkpoint(&mut self) -> Result<SinkMark, LtsError> {
        Ok(SinkMark::default())
    }
}

/// What a writer may be told before the first edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkOptions {
    /// `.dot`: write an LTS above [`dot::DOT_MAX_STATES`] / [`dot::DOT_MAX_TRANSITIONS`]
    /// (`--force`). Off by default, so that every writer of `.dot` is guarded.
    pub force: bool,
    /// `.fsm`: the state count, when known up front, so that states numbered above every
    /// state used by a transition are not lost (see [`fsm::FsmWriter::create`]).
    pub states: Option<u64>,
}

/// LTS file formats, chosen from the file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtsFormat {
    /// The native format (`.slts`), see docs/FORMATS.md.
    Native,
    /// Aldebaran `.aut`.
    Aut,
    /// mCRL2 `.fsm`.
    Fsm,
    /// GraphViz `.dot` (written only).
    Dot,
}

impl LtsFormat {
    pub fn from_path(path: &Path) -> Result<Self, LtsError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .as_deref()
        {
            Some("slts") => Ok(LtsFormat::Native),
            Some("aut") => Ok(LtsFormat::Aut),
            Some("fsm") => Ok(LtsFormat::Fsm),
            Some("dot") => Ok(LtsFormat::Dot),
            _ => Err(LtsError::Invalid(format!(
                "{}: {} (expected .slts for the native format, .aut, .fsm or .dot)",
                path.display(),
                crate::error::unknown_format(
                    "LTS",
                    &path.extension().map_or("".into(), |e| e.to_string_lossy())
                )
            ))),
        }
    }

    /// Creates a sink writing this format, with the default [`SinkOptions`] (in particular
    /// the `.dot` size limit enforced).
    pub fn create(self, path: &Path) -> Result<Box<dyn LtsSink>, LtsError> {
        self.create_with(path, &SinkOptions::default())
    }

    /// Creates a sink writing this format to `path` with `options`.
    pub fn create_with(
        self,
        path: &Path,
        options: &SinkOptions,
    ) -> Result<Box<dyn LtsSink>, LtsError> {
        let file = std::fs::File::create(path).map_err(io_error(path))?;
        self.create_on(file, path, options)
    }

    /// Creates a sink writing this format to `file`, open and empty, with `options`; its
    /// errors name `name` (the output a temporary file becomes, see
    /// [`crate::files::PartialOutput`]).
    pub fn create_on(
        self,
        file: std::fs::File,
        name: &Path,
        options: &SinkOptions,
    ) -> Result<Box<dyn LtsSink>, LtsError> {
        Ok(match self {
            LtsFormat::Native => Box::new(native::NativeWriter::create_on(file, name)?),
            LtsFormat::Aut => Box::new(aut::AutWriter::create_on(file, name)?),
            LtsFormat::Fsm => Box::new(fsm::FsmWriter::create_on(file, name, options.states)?),
            LtsFormat::Dot => Box::new(dot::DotWriter::create_on(file, name, options.force)?),
        })
    }

    /// Continues a file written up to a checkpoint: `mark.len` bytes of `file` are kept
    /// (their CRC-32 is `crc`, already checked by the caller) and the writer's pending state
    /// is restored; errors name `name`, as for [`LtsFormat::create_on`].
    pub fn resume(
        self,
        file: std::fs::File,
        name: &Path,
        mark: &SinkMark,
        crc: u32,
    ) -> Result<Box<dyn LtsSink>, LtsError> {
        Ok(match self {
            LtsFormat::Native => Box::new(native::NativeWriter::resume(file, name, mark, crc)?),
            LtsFormat::Aut => Box::new(aut::AutWriter::resume(file, name, mark)?),
            LtsFormat::Fsm | LtsFormat::Dot => {
                return Err(LtsError::Invalid(format!(
                    "{}: {} output cannot be checkpointed (use .slts or .aut)",
                    name.display(),
                    self.name()
                )))
            }
        })
    }

    /// About how many bytes a writer of this format keeps resident: the native writer's
    /// current edge block, the blocks queued for its compression thread (raw and compressed),
    /// two spare block buffers and its 1 MiB file buffer; a text writer's file buffer. Runs
    /// under `--memory` charge it to the budget.
    pub fn writer_ram_bytes(self) -> u64 {
        match self {
            LtsFormat::Native => 4 << 20,
            LtsFormat::Aut | LtsFormat::Fsm | LtsFormat::Dot => 1 << 20,
        }
    }

    /// Whether a run writing this format can be checkpointed.
    pub fn checkpointable(self) -> bool {
        matches!(self, LtsFormat::Native | LtsFormat::Aut)
    }

    /// Whether spillway can read this format back (the post-processing tools' inputs).
    pub fn readable(self) -> bool {
        matches!(self, LtsFormat::Native | LtsFormat::Aut | LtsFormat::Fsm)
    }

    /// A short human-readable name.
    pub fn name(self) -> &'static str {
        match self {
            LtsFormat::Native => "native (.slts)",
            LtsFormat::Aut => "Aldebaran (.aut)",
            LtsFormat::Fsm => "mCRL2 FSM (.fsm)",
            LtsFormat::Dot => "GraphViz (.dot)",
        }
    }
}
