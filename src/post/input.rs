//! One streaming interface over every readable LTS format (`.slts`, `.aut`, `.fsm`), chosen by
//! file extension.

use crate::error::LtsError;
use crate::lts::aut::AutReader;
use crate::lts::fsm::FsmReader;
use crate::lts::native::NativeReader;
use crate::lts::{LtsFormat, TextHeader};
use std::path::{Path, PathBuf};

/// What a file says about itself before its edges are read (header or footer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputHeader {
    pub format: LtsFormat,
    /// The native format version; `None` for formats without one.
    pub version: Option<u16>,
    pub states: u64,
    pub transitions: u64,
    pub initial: u64,
    /// Number of labels if the file declares them up front (native), else `None`.
    pub labels: Option<u32>,
    /// Deadlock count recorded by the writer (native footer), if any.
    pub recorded_deadlocks: Option<u64>,
    /// Size of the file in bytes.
    pub file_len: u64,
    /// The writer recorded that a state may appear more than once (native footer flag,
    /// `--store cache`); `false` for formats that cannot say.
    pub states_may_repeat: bool,
}

/// An open LTS file of any readable format.
pub enum Input {
    Native(Box<NativeReader>),
    Aut(Box<AutReader>),
    Fsm(Box<FsmReader>),
}

impl Input {
    /// Opens `path`; the format comes from the extension.
    pub fn open(path: &Path) -> Result<Self, LtsError> {
        match LtsFormat::from_path(path)? {
            LtsFormat::Native => Ok(Input::Native(Box::new(NativeReader::open(path)?))),
            LtsFormat::Aut => Ok(Input::Aut(Box::new(AutReader::open(path)?))),
            LtsFormat::Fsm => Ok(Input::Fsm(Box::new(FsmReader::open(path)?))),
            other => Err(LtsError::Invalid(format!(
                "{}: spillway cannot read the {} format; inputs must be .slts, .aut or .fsm",
                path.display(),
                other.name()
            ))),
        }
    }

    pub fn path(&self) -> PathBuf {
        match self {
            Input::Native(r) => r.path().to_path_buf(),
            Input::Aut(r) => r.path().to_path_buf(),
            Input::Fsm(r) => r.path().to_path_buf(),
        }
    }

    pub fn header(&self) -> Result<InputHeader, LtsError> {
        Ok(match self {
            Input::Native(r) => {
                let f = r.footer();
                InputHeader {
                    format: LtsFormat::Native,
                    version: Some(f.version),
                    states: f.states,
                    transitions: f.transitions,
                    initial: f.initial,
                    labels: Some(f.labels),
                    recorded_deadlocks: Some(f.deadlocks),
                    file_len: r.file_len(),
                    states_may_repeat: f.flags & crate::lts::native::FLAG_STATES_MAY_REPEAT != 0,
                }
            }
            Input::Aut(r) => text_header(LtsFormat::Aut, r.header(), r.path())?,
            Input::Fsm(r) => text_header(LtsFormat::Fsm, r.header(), r.path())?,
        })
    }

    /// Labels known so far, indexed by label id. For `.aut` the table grows while reading
    /// (labels are numbered by first appearance); after the last edge it is complete.
    pub fn labels(&self) -> &[String] {
        match self {
            Input::Native(r) => r.labels(),
            Input::Aut(r) => r.labels(),
            Input::Fsm(r) => r.labels(),
        }
    }

    /// Calls `f(src, label, dst, labels)` for every edge in file order; `labels` is the label
    /// table as known when the edge is read. Every check of the underlying reader (checksums,
    /// counts, bounds) runs; an error from `f` stops the stream.
    pub fn for_each_edge<E: From<LtsError>>(
        &mut self,
        mut f: impl FnMut(u64, u32, u64, &[String]) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Input::Native(r) => {
                let labels = r.labels().to_vec();
                while let Some(block) = r.next_block()? {
                    for &(s, l, d) in block {
                        f(s, l.0, d, &labels)?;
                    }
                }
                Ok(())
            }
            Input::Aut(r) => {
                while let Some((s, l, d)) = r.next_edge()? {
                    f(s, l.0, d, r.labels())?;
                }
                Ok(())
            }
            Input::Fsm(r) => {
                while let Some((s, l, d)) = r.next_edge()? {
                    f(s, l.0, d, r.labels())?;
                }
                Ok(())
            }
        }
    }
}

/// What a text file (`.aut`, `.fsm`) says about itself: its counts, and none of what only
/// the native footer records.
fn text_header(format: LtsFormat, h: TextHeader, path: &Path) -> Result<InputHeader, LtsError> {
    Ok(InputHeader {
        format,
        version: None,
        states: h.states,
        transitions: h.transitions,
        initial: h.initial,
        labels: None,
        recorded_deadlocks: None,
        file_len: file_len(path)?,
        states_may_repeat: false,
    })
}

fn file_len(path: &Path) -> Result<u64, LtsError> {
    Ok(std::fs::metadata(path)
        .map_err(crate::lts::io_error(path))?
        .len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lts::native::NativeWriter;

    #[test]
    fn initial_state_outside_the_states_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.slts");
        let mut w = NativeWriter::create(&p).unwrap();
        crate::lts::write_one_edge(&mut w, "a", 2, 7).unwrap();
        let e = Input::open(&p).err().unwrap();
        assert!(matches!(e, LtsError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("initial state"), "{e}");
    }

    #[test]
    fn write_only_formats_are_refused_as_input() {
        let e = Input::open(Path::new("x.dot")).err().unwrap();
        assert!(e.to_string().contains("x.dot"), "{e}");
    }
}
