//! mCRL2's `.fsm` text format (write only).
//!
//! ```text
//! ---            <- empty parameter section (no state vectors are written)
//! ---            <- empty state section
//! 1 2 "a"        <- transitions: SOURCE TARGET "LABEL", states numbered from 1
//! ---            <- optional initial-state section, written only when the
//! 3                 initial state is not state 1
//! ```
//! With no state section, mCRL2 takes the number of states to be the highest state number used
//! by a transition, so trailing states without any transition are not represented (see
//! docs/FORMATS.md). Labels may not contain a double quote: the format has no escape for it.

use super::{LtsSink, LtsSummary};
use crate::error::LtsError;
use crate::model::LabelId;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Streams an `.fsm` file; transitions are written as they arrive.
pub struct FsmWriter {
    path: PathBuf,
    out: BufWriter<File>,
    labels: Vec<String>,
    line: Vec<u8>,
}

/// How many (empty) state lines to write for an LTS of `states` states and `transitions`
/// transitions, if any. With no state section, mCRL2 (and [`FsmReader`]) take the number of
/// states to be the highest state used by a transition, which loses states numbered above it
/// that have no transition; one empty line per state (there are no state parameters) keeps the
/// count. Written only while it costs at most two bytes per transition (plus 64 KiB): a
/// header that declares billions of states for a few transitions does not turn into
/// gigabytes of empty lines (then the count is the implicit one).
pub fn state_lines(states: u64, transitions: u64) -> Option<u64> {
    (states <= transitions.saturating_mul(2).saturating_add(1 << 16)).then_some(states)
}

impl FsmWriter {
    /// Creates `path`, with `state_lines` empty lines as its state section (see
    /// [`state_lines`]) or an empty one.
    pub fn create(path: &Path, state_lines: Option<u64>) -> Result<Self, LtsError> {
        let file = File::create(path).map_err(|source| LtsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut w = FsmWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            labels: Vec::new(),
            line: Vec::with_capacity(128),
        };
        w.write(b"---\n")?;
        if let Some(n) = state_lines {
            let chunk = [b'\n'; 4096];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                w.write(&chunk[..k])?;
                left -= k as u64;
            }
        }
        w.write(b"---\n")?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), LtsError> {
        self.out.write_all(bytes).map_err(|source| LtsError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

impl LtsSink for FsmWriter {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError> {
        if name.contains('"') || name.contains('\n') {
            return Err(LtsError::Invalid(format!(
                "{}: label {name:?} contains a double quote or a newline, which the .fsm format cannot represent",
                self.path.display()
            )));
        }
        super::set_label(&mut self.labels, id, name.to_string());
        Ok(())
    }

    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError> {
        let name = self.labels.get(label.0 as usize).ok_or_else(|| {
            LtsError::Invalid(format!("label {} used before it was defined", label.0))
        })?;
        self.line.clear();
        // mCRL2 numbers states from 1.
        self.line
            .extend_from_slice(format!("{} {} \"{}\"\n", src + 1, dst + 1, name).as_bytes());
        let line = std::mem::take(&mut self.line);
        let r = self.write(&line);
        self.line = line;
        r
    }

    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError> {
        if summary.initial != 0 {
            let tail = format!("---\n{}\n", summary.initial + 1);
            self.write(tail.as_bytes())?;
        }
        super::sync(&mut self.out, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_based_with_initial_section() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.fsm");
        let mut w = FsmWriter::create(&p, None).unwrap();
        w.define_label(LabelId(0), "a(1, 2)").unwrap();
        w.edge(0, LabelId(0), 1).unwrap();
        w.finish(&LtsSummary {
            states: 2,
            transitions: 1,
            initial: 1,
            deadlocks: 1,
        })
        .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "---\n---\n1 2 \"a(1, 2)\"\n---\n2\n");
        let mut w = FsmWriter::create(&p, None).unwrap();
        assert!(w.define_label(LabelId(0), "say \"hi\"").is_err());
    }
}
