//! LTS output: the native streamed, compressed format ([`native`]) and Aldebaran `.aut`
//! ([`aut`]), both also readable; mCRL2 `.fsm` ([`fsm`]) and GraphViz `.dot` ([`dot`]) are
//! write-only. Engines and the post-processing tools push edges into an [`LtsSink`].

pub mod aut;
pub mod dot;
pub mod fsm;
pub mod native;

use crate::error::LtsError;
use crate::model::LabelId;
use std::path::Path;

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
    /// Completes the file; a file whose writer never finished must not read as a valid LTS.
    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError>;
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

/// Flushes a finished text writer and forces it to disk.
pub(crate) fn sync(
    out: &mut std::io::BufWriter<std::fs::File>,
    path: &Path,
) -> Result<(), LtsError> {
    use std::io::Write;
    let io = |source| LtsError::Io {
        path: path.to_path_buf(),
        source,
    };
    out.flush().map_err(io)?;
    out.get_ref().sync_all().map_err(io)
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
    fn finish(&mut self, _: &LtsSummary) -> Result<(), LtsError> {
        Ok(())
    }
}

/// LTS file formats, chosen from the file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtsFormat {
    /// The native format (`.slts`), see docs/FORMATS.md.
    Native,
    /// Aldebaran `.aut`.
    Aut,
    /// mCRL2 `.fsm` (written only).
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
            other => Err(LtsError::Invalid(format!(
                "{}: unknown LTS format '.{}' (expected .slts for the native format, .aut, .fsm or .dot)",
                path.display(),
                other.unwrap_or("")
            ))),
        }
    }

    /// Creates a sink writing this format.
    pub fn create(self, path: &Path) -> Result<Box<dyn LtsSink>, LtsError> {
        Ok(match self {
            LtsFormat::Native => Box::new(native::NativeWriter::create(path)?),
            LtsFormat::Aut => Box::new(aut::AutWriter::create(path)?),
            LtsFormat::Fsm => Box::new(fsm::FsmWriter::create(path)?),
            LtsFormat::Dot => Box::new(dot::DotWriter::create(path)?),
        })
    }

    /// Whether spillway can read this format back (the post-processing tools' inputs).
    pub fn readable(self) -> bool {
        matches!(self, LtsFormat::Native | LtsFormat::Aut)
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
