//! GraphViz `.dot` output (write only), for looking at small LTSs.
//!
//! States are nodes named by their number; the initial state gets an incoming arrow from an
//! invisible point node and a double circle; deadlock states are not marked specially. Every
//! state is declared at the end so that states without transitions are drawn too. Labels are
//! written as quoted DOT strings (`"` and `\` escaped). Because layout programs choke on large
//! graphs, `spillway lts convert` refuses to write big LTSs as `.dot` unless forced; the writer
//! itself has no limit.

use super::LabelId;
use super::{LtsSink, LtsSummary};
use crate::error::LtsError;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Streams a `.dot` file.
pub struct DotWriter {
    path: PathBuf,
    out: BufWriter<File>,
    labels: Vec<String>,
}

/// Quotes a string as a DOT string literal.
pub fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

impl DotWriter {
    pub fn create(path: &Path) -> Result<Self, LtsError> {
        let file = File::create(path).map_err(|source| LtsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut w = DotWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 16, file),
            labels: Vec::new(),
        };
        w.write(b"digraph lts {\n  node [shape=circle];\n")?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), LtsError> {
        self.out.write_all(bytes).map_err(|source| LtsError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

impl LtsSink for DotWriter {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError> {
        super::set_label(&mut self.labels, id, quote(name));
        Ok(())
    }

    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError> {
        let name = self.labels.get(label.0 as usize).ok_or_else(|| {
            LtsError::Invalid(format!("label {} used before it was defined", label.0))
        })?;
        let line = format!("  {src} -> {dst} [label={name}];\n");
        self.write(line.as_bytes())
    }

    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError> {
        let mut tail = String::new();
        for s in 0..summary.states {
            if s == summary.initial {
                tail.push_str(&format!("  {s} [shape=doublecircle];\n"));
            } else {
                tail.push_str(&format!("  {s};\n"));
            }
            if tail.len() > 1 << 16 {
                let chunk = std::mem::take(&mut tail);
                self.write(chunk.as_bytes())?;
            }
        }
        tail.push_str(&format!(
            "  __init [shape=point, label=\"\"];\n  __init -> {};\n}}\n",
            summary.initial
        ));
        self.write(tail.as_bytes())?;
        super::sync(&mut self.out, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_declares_every_state() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.dot");
        let mut w = DotWriter::create(&p).unwrap();
        w.define_label(LabelId(0), "a \"b\" \\c").unwrap();
        w.edge(0, LabelId(0), 1).unwrap();
        w.finish(&LtsSummary {
            states: 3,
            transitions: 1,
            initial: 0,
            deadlocks: 2,
        })
        .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("0 -> 1 [label=\"a \\\"b\\\" \\\\c\"];"),
            "{text}"
        );
        assert!(text.contains("  2;\n"));
        assert!(text.contains("__init -> 0;"));
        assert!(text.ends_with("}\n"));
    }
}
