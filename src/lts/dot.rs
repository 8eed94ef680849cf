//! GraphViz `.dot` output (write only), for looking at small LTSs.
//!
//! States are nodes named by their number; the initial state gets an incoming arrow from an
//! invisible point node and a double circle; deadlock states are not marked specially. Every
//! state is declared at the end so that states without transitions are drawn too. Labels are
//! written as quoted DOT strings (`"` and `\` escaped). Because layout programs choke on large
//! graphs, the writer itself refuses (an error, exit code 2) an LTS with more than
//! [`DOT_MAX_STATES`] states or [`DOT_MAX_TRANSITIONS`] transitions unless it was created with
//! `force`, whoever drives it (`explore -o x.dot` as well as `lts convert`); it notices as
//! soon as an edge passes the limit, so nothing large is written first.

use super::LabelId;
use super::{LtsSink, LtsSummary, TextOut};
use crate::error::LtsError;
use std::path::Path;

/// Largest LTS written as `.dot` without `force`.
pub const DOT_MAX_STATES: u64 = 2_000;
/// Largest LTS written as `.dot` without `force`.
pub const DOT_MAX_TRANSITIONS: u64 = 10_000;

/// Streams a `.dot` file.
pub struct DotWriter {
    /// The file, and the labels as quoted DOT strings.
    file: TextOut,
    /// Write whatever the size.
    force: bool,
    transitions: u64,
    /// One more than the highest state number seen so far.
    states_seen: u64,
}

/// The error for an LTS too large to draw.
fn too_large(path: &Path, what: &str) -> LtsError {
    LtsError::Invalid(format!(
        "{}: {what} are too many for a .dot drawing (limit {DOT_MAX_STATES} states, {DOT_MAX_TRANSITIONS} transitions); use --force to write it anyway",
        path.display()
    ))
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
    /// Creates `path`; without `force`, an LTS above the size limit is refused as soon as it
    /// passes it (see the module documentation).
    pub fn create(path: &Path, force: bool) -> Result<Self, LtsError> {
        let file = std::fs::File::create(path).map_err(super::io_error(path))?;
        Self::create_on(file, path, force)
    }

    /// Writes to `file`, open and empty, as [`DotWriter::create`]; errors name `name`.
    pub fn create_on(file: std::fs::File, name: &Path, force: bool) -> Result<Self, LtsError> {
        let mut w = DotWriter {
            file: TextOut::on(name, file, 1 << 16, Vec::new()),
            force,
            transitions: 0,
            states_seen: 0,
        };
        w.file.write(b"digraph lts {\n  node [shape=circle];\n")?;
        Ok(w)
    }
}

impl LtsSink for DotWriter {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError> {
        super::set_label(&mut self.file.labels, id, quote(name));
        Ok(())
    }

    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError> {
        let line = format!("  {src} -> {dst} [label={}];\n", self.file.label(label)?);
        self.transitions += 1;
        self.states_seen = self.states_seen.max(src.max(dst).saturating_add(1));
        if !self.force {
            if self.transitions > DOT_MAX_TRANSITIONS {
                return Err(too_large(
                    &self.file.path,
                    &format!("more than {DOT_MAX_TRANSITIONS} transitions"),
                ));
            }
            if self.states_seen > DOT_MAX_STATES {
                return Err(too_large(
                    &self.file.path,
                    &format!("{} states or more", self.states_seen),
                ));
            }
        }
        self.file.write(line.as_bytes())
    }

    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError> {
        if !self.force && summary.states > DOT_MAX_STATES {
            return Err(too_large(
                &self.file.path,
                &format!("{} states", summary.states),
            ));
        }
        let mut tail = String::new();
        for s in 0..summary.states {
            if s == summary.initial {
                tail.push_str(&format!("  {s} [shape=doublecircle];\n"));
            } else {
                tail.push_str(&format!("  {s};\n"));
            }
            if tail.len() > 1 << 16 {
                let chunk = std::mem::take(&mut tail);
                self.file.write(chunk.as_bytes())?;
            }
        }
        tail.push_str(&format!(
            "  __init [shape=point, label=\"\"];\n  __init -> {};\n}}\n",
            summary.initial
        ));
        self.file.write(tail.as_bytes())?;
        self.file.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_declares_every_state() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.dot");
        let mut w = DotWriter::create(&p, false).unwrap();
        crate::lts::write_one_edge(&mut w, "a \"b\" \\c", 3, 0).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("0 -> 1 [label=\"a \\\"b\\\" \\\\c\"];"),
            "{text}"
        );
        assert!(text.contains("  2;\n"));
        assert!(text.contains("__init -> 0;"));
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn the_writer_itself_refuses_a_large_lts_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.dot");
        let chain = |force: bool, n: u64| -> Result<(), LtsError> {
            let mut w = DotWriter::create(&p, force)?;
            w.define_label(LabelId(0), "a")?;
            for s in 0..n {
                w.edge(s, LabelId(0), s + 1)?;
            }
            w.finish(&LtsSummary {
                states: n + 1,
                transitions: n,
                initial: 0,
                deadlocks: 1,
            })
        };
        chain(false, DOT_MAX_STATES - 1).unwrap();
        let e = chain(false, DOT_MAX_STATES).unwrap_err();
        assert!(
            e.to_string().contains("x.dot") && e.to_string().contains("--force"),
            "{e}"
        );
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        // Stopped at the edge that passed the limit: the file holds no more than that.
        assert!(std::fs::metadata(&p).unwrap().len() < 64 * 1024);
        chain(true, DOT_MAX_STATES * 2).unwrap();
        // States without transitions count too.
        let mut w = DotWriter::create(&p, false).unwrap();
        let e = w
            .finish(&LtsSummary {
                states: DOT_MAX_STATES + 1,
                transitions: 0,
                initial: 0,
                deadlocks: DOT_MAX_STATES + 1,
            })
            .unwrap_err();
        assert!(e.to_string().contains("2001 states"), "{e}");
    }
}
