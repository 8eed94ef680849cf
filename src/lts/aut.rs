//! Aldebaran `.aut` files (CADP, VLTS): a streaming reader and a writer.
//!
//! ```text
//! des (INITIAL, TRANSITIONS, STATES)
//! (SRC, LABEL, DST)
//! ```
//! A label is either quoted (`"a !1"`) or bare (`i`, `MIRQ2`); quoted labels may contain commas
//! and parentheses, so a line is split at its *first* and *last* comma. Labels are stored without
//! their quotes; the writer quotes every label and refuses labels holding a double quote or a
//! line break, which the format cannot represent (see [`unwritable`]).

use super::LabelId;
use super::{LtsSink, LtsSummary, SinkMark, TextHeader, TextOut, TextReader};
use crate::error::LtsError;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::Path;

/// The `des` line of an `.aut` file.
pub type AutHeader = TextHeader;

/// What only `.aut` reading needs: nothing beyond what [`TextReader`] holds.
pub struct Aut;

/// Streams the transitions of an `.aut` file, interning labels in order of first appearance.
pub type AutReader = TextReader<Aut>;

impl AutReader {
    /// Opens a file and reads its header.
    pub fn open(path: &Path) -> Result<Self, LtsError> {
        let file = super::open_input(path)?;
        Self::new(Box::new(BufReader::with_capacity(1 << 16, file)), path)
    }

    /// Reads a header from any buffered reader; `path` names it in errors.
    pub fn new(reader: Box<dyn BufRead>, path: &Path) -> Result<Self, LtsError> {
        let mut r = TextReader::start(path, reader, Aut);
        if !r.read_line()? {
            return Err(r.syntax(
                1,
                "empty file: expected 'des (INITIAL, TRANSITIONS, STATES)'",
            ));
        }
        let line = r.lines.line.trim().to_string();
        let inner = line
            .strip_prefix("des")
            .map(str::trim_start)
            .and_then(|s| s.strip_prefix('('))
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| r.syntax(1, "expected 'des (INITIAL, TRANSITIONS, STATES)'"))?;
        let nums: Vec<&str> = inner.split(',').map(str::trim).collect();
        if nums.len() != 3 {
            return Err(r.syntax(1, "expected three numbers in the 'des' header"));
        }
        let mut vals = [0u64; 3];
        for (i, n) in nums.iter().enumerate() {
            vals[i] = n
                .parse()
                .map_err(|_| r.syntax(1, format!("'{n}' is not a non-negative integer")))?;
        }
        r.header = TextHeader {
            initial: vals[0],
            transitions: vals[1],
            states: vals[2],
        };
        // Every LTS has its initial state: a header of 0 states is as malformed as one whose
        // initial state is out of range (the native reader refuses a 0-state footer too).
        if r.header.states == 0 {
            return Err(r.syntax(
                1,
                "the state count is 0, but an LTS has at least its initial state",
            ));
        }
        if r.header.initial >= r.header.states {
            return Err(r.syntax(
                1,
                format!(
                    "initial state {} is not below the state count {}",
                    r.header.initial, r.header.states
                ),
            ));
        }
        Ok(r)
    }

    fn read_line(&mut self) -> Result<bool, LtsError> {
        self.lines.next(&self.path)
    }

    /// The next transition `(src, label, dst)`, or `None` at the end of the file (after checking
    /// that the count matches the header).
    pub fn next_edge(&mut self) -> Result<Option<(u64, LabelId, u64)>, LtsError> {
        loop {
            if !self.read_line()? {
                return self.end_of_edges(|announced, held| {
                    format!(
                        "the header announces {announced} transitions but the file holds {held}"
                    )
                });
            }
            let line = self.lines.line.trim();
            if line.is_empty() {
                continue;
            }
            // Columns count characters of the line as it is (blanks before the '(' included).
            let inner = line
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| self.syntax(self.column_of(line), "expected '(SRC, LABEL, DST)'"))?;
            let (first, last) = match (inner.find(','), inner.rfind(',')) {
                (Some(a), Some(b)) if a < b => (a, b),
                _ => {
                    return Err(self.syntax(
                        self.column_of(inner),
                        "expected '(SRC, LABEL, DST)' with two commas",
                    ))
                }
            };
            let src_text = inner[..first].trim();
            let dst_text = inner[last + 1..].trim();
            let (src_col, dst_col) = (self.column_of(src_text), self.column_of(dst_text));
            let src: u64 = src_text.parse().map_err(|_| {
                self.syntax(
                    src_col,
                    format!("source '{src_text}' is not a state number"),
                )
            })?;
            let dst: u64 = dst_text.parse().map_err(|_| {
                self.syntax(
                    dst_col,
                    format!("target '{dst_text}' is not a state number"),
                )
            })?;
            for (what, s, col) in [("source", src, src_col), ("target", dst, dst_col)] {
                if s >= self.header.states {
                    return Err(self.syntax(
                        col,
                        format!(
                            "{what} state {s} is not below the header's state count {}",
                            self.header.states
                        ),
                    ));
                }
            }
            let raw = inner[first + 1..last].trim();
            let label = if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
                &raw[1..raw.len() - 1]
            } else {
                raw
            };
            let id = self.labels.intern(label);
            self.seen += 1;
            if self.seen > self.header.transitions {
                return Err(self.syntax(
                    1,
                    format!(
                        "more transitions than the {} the header announces",
                        self.header.transitions
                    ),
                ));
            }
            return Ok(Some((src, id, dst)));
        }
    }
}

/// Width of the `des` line the writer reserves, patched with the real counts at the end.
const HEADER_WIDTH: usize = 64;

/// Writes an `.aut` file while exploring. The `des` line needs the final counts, so a
/// fixed-width line is reserved and overwritten by `finish`; until then the file starts with
/// `des (?` and no reader accepts it.
pub struct AutWriter {
    file: TextOut,
    transitions: u64,
    line: Vec<u8>,
}

impl AutWriter {
    pub fn create(path: &Path) -> Result<Self, LtsError> {
        let file = std::fs::File::create(path).map_err(super::io_error(path))?;
        Self::create_on(file, path)
    }

    /// Writes to `file`, open and empty; errors name `name`.
    pub fn create_on(file: std::fs::File, name: &Path) -> Result<Self, LtsError> {
        let mut file = TextOut::on(name, file, 1 << 20, Vec::new());
        let mut placeholder = b"des (?".to_vec();
        placeholder.resize(HEADER_WIDTH - 1, b' ');
        placeholder.push(b'\n');
        file.write(&placeholder)?;
        Ok(AutWriter {
            file,
            transitions: 0,
            line: Vec::with_capacity(128),
        })
    }
}

/// Formats one `.aut` transition line (with a trailing newline) into `out`.
pub fn format_edge(out: &mut Vec<u8>, src: u64, label: &str, dst: u64) {
    out.push(b'(');
    out.extend_from_slice(src.to_string().as_bytes());
    out.extend_from_slice(b", \"");
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(b"\", ");
    out.extend_from_slice(dst.to_string().as_bytes());
    out.extend_from_slice(b")\n");
}

/// The `des` line for the given counts, without a newline.
pub fn header_line(initial: u64, transitions: u64, states: u64) -> String {
    format!("des ({initial}, {transitions}, {states})")
}

/// Why `label` cannot be written in an `.aut` file, if it cannot. The format has no escape:
/// mCRL2 reads a quoted label up to the next double quote and CADP a transition per line, so
/// a label holding `"` or a line break would be read back as something else (or not at all).
pub fn unwritable(label: &str) -> Option<&'static str> {
    if label.contains('"') {
        Some("a double quote")
    } else if label.contains('\n') || label.contains('\r') {
        Some("a line break")
    } else {
        None
    }
}

impl LtsSink for AutWriter {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError> {
        if let Some(what) = unwritable(name) {
            return Err(LtsError::Invalid(format!(
                "{}: label {name:?} contains {what}, which the .aut format cannot represent (it has no escape; CADP and mCRL2 would read another label); write .slts instead",
                self.file.path.display()
            )));
        }
        super::set_label(&mut self.file.labels, id, name.to_string());
        Ok(())
    }

    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError> {
        self.line.clear();
        format_edge(&mut self.line, src, self.file.label(label)?, dst);
        self.file.write(&self.line)?;
        self.transitions += 1;
        Ok(())
    }

    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError> {
        let mut header =
            header_line(summary.initial, self.transitions, summary.states).into_bytes();
        debug_assert!(header.len() < HEADER_WIDTH);
        header.resize(HEADER_WIDTH - 1, b' ');
        header.push(b'\n');
        let io = super::io_error(&self.file.path);
        self.file.out.flush().map_err(io)?;
        let file = self.file.out.get_mut();
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(())
    }

    fn checkpoint(&mut self) -> Result<SinkMark, LtsError> {
        self.file.sync()?;
        let len = (self.file.out)
            .stream_position()
            .map_err(super::io_error(&self.file.path))?;
        let pending = (self.transitions, self.file.labels.clone());
        Ok(SinkMark {
            len,
            pending: crate::codec::encode(&pending),
        })
    }
}

impl AutWriter {
    /// Continues `file`, checkpointed at `mark` (see [`LtsSink::checkpoint`]); errors name
    /// `name`.
    pub fn resume(file: std::fs::File, name: &Path, mark: &SinkMark) -> Result<Self, LtsError> {
        let (transitions, labels): (u64, Vec<String>) = super::decode_pending(name, &mark.pending)?;
        let f = super::cut_at(file, name, mark.len)?;
        Ok(AutWriter {
            file: TextOut::on(name, f, 1 << 20, labels),
            transitions,
            line: Vec::with_capacity(128),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TextError;

    fn reader(text: &str) -> Result<AutReader, LtsError> {
        AutReader::new(
            Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
            Path::new("x.aut"),
        )
    }

    #[test]
    fn reads_quoted_and_bare_labels() {
        let mut r =
            reader("des (0, 3, 2)\n(0, \"a, (b)\", 1)\n(1, i, 0)\n\n(1,\"a, (b)\",1)\n").unwrap();
        let mut edges = Vec::new();
        while let Some(e) = r.next_edge().unwrap() {
            edges.push(e);
        }
        assert_eq!(
            edges,
            vec![(0, LabelId(0), 1), (1, LabelId(1), 0), (1, LabelId(0), 1)]
        );
        assert_eq!(r.labels(), &["a, (b)".to_string(), "i".to_string()]);
    }

    #[test]
    fn errors_name_line() {
        let mut r = reader("des (0, 2, 2)\n(0, a, 1)\n(0, a 1)\n").unwrap();
        r.next_edge().unwrap();
        let e = r.next_edge().unwrap_err().to_string();
        assert!(e.starts_with("x.aut:3:"), "{e}");
        let mut r = reader("des (0, 2, 2)\n(0, a, 1)\n").unwrap();
        r.next_edge().unwrap();
        let e = r.next_edge().unwrap_err().to_string();
        assert!(
            e.contains("announces 2 transitions but the file holds 1"),
            "{e}"
        );
        let mut r = reader("des (0, 1, 2)\n(0, a, 7)\n").unwrap();
        assert!(r
            .next_edge()
            .unwrap_err()
            .to_string()
            .contains("target state 7"));
        assert!(reader("des (0, 1)\n").is_err());
    }

    #[test]
    fn labels_read_back_as_written_and_unwritable_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.aut");
        let labels = [
            "a",
            "i",
            "",
            "  spaced  ",
            "lock(p1, f1)",
            "a,b,,c",
            "(x)",
            "G !TRUE !3",
            "\\ back\\slash",
            "tab\there",
            "ünïcödé ✓",
        ];
        let mut w = AutWriter::create(&p).unwrap();
        for (i, l) in labels.iter().enumerate() {
            w.define_label(LabelId(i as u32), l).unwrap();
            w.edge(i as u64, LabelId(i as u32), 0).unwrap();
        }
        w.finish(&LtsSummary {
            states: labels.len() as u64,
            transitions: labels.len() as u64,
            initial: 0,
            deadlocks: 0,
        })
        .unwrap();
        let mut r = AutReader::open(&p).unwrap();
        let mut read = Vec::new();
        while let Some((s, l, _)) = r.next_edge().unwrap() {
            read.push((s, r.labels()[l.0 as usize].clone()));
        }
        let expected: Vec<(u64, String)> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u64, l.to_string()))
            .collect();
        assert_eq!(read, expected);
        for bad in ["say \"hi\"", "two\nlines", "cr\r"] {
            let mut w = AutWriter::create(&p).unwrap();
            let e = w.define_label(LabelId(0), bad).unwrap_err().to_string();
            assert!(e.contains("x.aut") && e.contains("cannot represent"), "{e}");
        }
    }

    #[test]
    fn columns_count_characters_of_the_line_as_written() {
        let col = |text: &str| {
            let mut r = reader(text).unwrap();
            match r.next_edge().unwrap_err() {
                LtsError::Syntax(TextError { line, column, .. }) => (line, column),
                e => panic!("{e}"),
            }
        };
        // Blanks before the '(' count; 'é' and '€' are one column each.
        assert_eq!(col("des (0, 1, 2)\n  (0, \"é€\", x)\n"), (2, 13));
        assert_eq!(col("des (0, 1, 2)\n  (é, \"a\", 1)\n"), (2, 4));
        assert_eq!(col("des (0, 1, 2)\n(0, \"é\", 7)\n"), (2, 10));
        assert_eq!(col("des (0, 1, 2)\n \t0, a, 1\n"), (2, 3));
    }

    #[test]
    fn invalid_utf8_is_a_positioned_syntax_error() {
        let mut text = b"des (0, 2, 2)\n(0, \"a\", 1)\n(1, \"\xc3\xa9t".to_vec();
        text.extend_from_slice(b"\xff\", 0)\n");
        let mut r =
            AutReader::new(Box::new(std::io::Cursor::new(text)), Path::new("x.aut")).unwrap();
        r.next_edge().unwrap();
        let e = r.next_edge().unwrap_err();
        assert!(
            matches!(
                e,
                LtsError::Syntax(TextError {
                    line: 3,
                    column: 8,
                    ..
                })
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("0xff") && e.to_string().contains("UTF-8"),
            "{e}"
        );
    }
}
