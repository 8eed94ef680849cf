//! mCRL2's `.fsm` text format: a writer and a streaming reader.
//!
//! ```text
//! ---            <- parameter section (spillway writes none: no state vectors)
//! ---            <- state section: one line per state (spillway writes empty lines, or none)
//! 1 2 "a"        <- transitions: SOURCE TARGET "LABEL", states numbered from 1
//! ---            <- optional initial-state section, written only when the
//! 3                 initial state is not state 1
//! ```
//! The number of states is the number of state lines, or, when there are none, the highest
//! state number used (by a transition or the initial state); see [`state_lines`] for how the
//! writer keeps states that no transition uses. Labels may not contain a double quote: the
//! format has no escape for it. The reader follows mCRL2's grammar (`fsm_syntax.g`) for the
//! sections, accepts and checks parameters and state lines (spillway keeps no state
//! vectors), and refuses probabilistic transitions and initial distributions.

use super::{LabelId, LtsSink, LtsSummary, TextHeader, TextLines, TextOut, TextReader};
use crate::error::LtsError;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::Path;

/// Streams an `.fsm` file; transitions are written as they arrive.
pub struct FsmWriter {
    file: TextOut,
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
        let file = std::fs::File::create(path).map_err(super::io_error(path))?;
        Self::create_on(file, path, state_lines)
    }

    /// Writes to `file`, open and empty, as [`FsmWriter::create`]; errors name `name`.
    pub fn create_on(
        file: std::fs::File,
        name: &Path,
        state_lines: Option<u64>,
    ) -> Result<Self, LtsError> {
        let mut w = FsmWriter {
            file: TextOut::on(name, file, 1 << 20, Vec::new()),
            line: Vec::with_capacity(128),
        };
        w.file.write(b"---\n")?;
        if let Some(n) = state_lines {
            let chunk = [b'\n'; 4096];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                w.file.write(&chunk[..k])?;
                left -= k as u64;
            }
        }
        w.file.write(b"---\n")?;
        Ok(w)
    }
}

impl LtsSink for FsmWriter {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError> {
        if name.contains('"') || name.contains('\n') {
            return Err(LtsError::Invalid(format!(
                "{}: label {name:?} contains a double quote or a newline, which the .fsm format cannot represent",
                self.file.path.display()
            )));
        }
        super::set_label(&mut self.file.labels, id, name.to_string());
        Ok(())
    }

    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError> {
        let name = self.file.label(label)?;
        self.line.clear();
        // mCRL2 numbers states from 1.
        self.line
            .extend_from_slice(format!("{} {} \"{}\"\n", src + 1, dst + 1, name).as_bytes());
        self.file.write(&self.line)
    }

    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError> {
        if summary.initial != 0 {
            let tail = format!("---\n{}\n", summary.initial + 1);
            self.file.write(tail.as_bytes())?;
        }
        self.file.sync()
    }
}

/// What the first pass over an `.fsm` file found: the counts a header would give.
pub type FsmHeader = TextHeader;

/// One transition line, as parsed: 1-based states, the label's byte range in the line.
struct Line {
    src: u64,
    dst: u64,
    label: std::ops::Range<usize>,
}

/// What only `.fsm` reading needs: whether the transition section has ended.
pub struct Fsm {
    done: bool,
}

/// Streams the transitions of an `.fsm` file, interning labels in order of first appearance.
///
/// Opening reads the file once to check every line and count states and transitions (the
/// format has no header), remembering where the transitions start; the edges are then
/// streamed from there. Memory: one line and the label table.
pub type FsmReader = TextReader<Fsm>;

/// 1-based column of byte `at` of `line` (in characters).
fn column(line: &str, at: usize) -> usize {
    line[..at.min(line.len())].chars().count() + 1
}

/// The digits at the start of `text` as a number (mCRL2: `0|[1-9][0-9]*`), and their length.
fn number(text: &str) -> Option<(u64, usize)> {
    let len = text.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || (len > 1 && text.starts_with('0')) {
        return None;
    }
    text[..len].parse().ok().map(|v| (v, len))
}

impl FsmReader {
    /// Opens `path`, checks it whole and reads its counts.
    pub fn open(path: &Path) -> Result<Self, LtsError> {
        let io = super::io_error(path);
        let file = super::open_input(path)?;
        let mut r = TextReader::start(
            path,
            Box::new(BufReader::with_capacity(1 << 16, file)),
            Fsm { done: false },
        );
        let (offset, line_no) = r.first_pass()?;
        let mut file = super::open_input(path)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        r.lines = TextLines::new(Box::new(BufReader::with_capacity(1 << 16, file)));
        r.lines.line_no = line_no;
        Ok(r)
    }

    /// The current line without its line break (`\r\n` or `\n`).
    fn text(&self) -> &str {
        self.lines.line.trim_end_matches(['\n', '\r'])
    }

    fn is_separator(&self) -> bool {
        self.text().trim_end() == "---"
    }

    /// Checks every line and computes the header; returns the byte offset and the line
    /// number just before the first transition line.
    fn first_pass(&mut self) -> Result<(u64, usize), LtsError> {
        let mut offset = 0u64;
        // Parameters: `NAME(CARD) SORT "v1" "v2" ...`, one per line.
        let mut cards: Vec<u64> = Vec::new();
        loop {
            if !self.lines.next(&self.path)? {
                return Err(self.syntax(1, "end of file in the parameter section: expected '---'"));
            }
            offset += self.lines.line.len() as u64;
            if self.is_separator() {
                break;
            }
            if self.text().trim().is_empty() {
                continue;
            }
            cards.push(self.parameter()?);
        }
        // States: one line per state, one value per parameter.
        let mut state_lines = 0u64;
        loop {
            if !self.lines.next(&self.path)? {
                return Err(self.syntax(1, "end of file in the state section: expected '---'"));
            }
            offset += self.lines.line.len() as u64;
            if self.is_separator() {
                break;
            }
            self.state_line(&cards)?;
            state_lines += 1;
        }
        let start = (offset, self.lines.line_no);
        // Transitions, up to the end or to the initial-state section.
        let (mut transitions, mut highest) = (0u64, 0u64);
        let mut initial = None;
        while self.lines.next(&self.path)? {
            if self.is_separator() {
                initial = Some(self.initial_section(state_lines)?);
                break;
            }
            if self.text().trim().is_empty() {
                continue;
            }
            let t = self.transition(state_lines)?;
            transitions += 1;
            highest = highest.max(t.src).max(t.dst);
        }
        let initial = initial.unwrap_or(1);
        self.header = FsmHeader {
            states: if state_lines > 0 {
                state_lines
            } else {
                highest.max(initial)
            },
            transitions,
            initial: initial - 1,
        };
        Ok(start)
    }

    /// Parses a parameter line; returns the domain cardinality.
    fn parameter(&self) -> Result<u64, LtsError> {
        let line = self.text();
        let open = line.find('(').ok_or_else(|| {
            self.syntax(
                1,
                "expected a parameter 'NAME(CARDINALITY) SORT \"VALUE\" ...'",
            )
        })?;
        let name = line[..open].trim();
        let valid_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_'@".contains(c));
        if !valid_name {
            return Err(self.syntax(1, format!("'{name}' is not a parameter name")));
        }
        let after = &line[open + 1..];
        let lead = after.len() - after.trim_start().len();
        let (card, len) = number(after.trim_start()).ok_or_else(|| {
            self.syntax(column(line, open + 1), "expected the domain cardinality")
        })?;
        let rest = &after[lead + len..];
        let rest = rest.trim_start().strip_prefix(')').ok_or_else(|| {
            self.syntax(
                column(line, open + 1 + lead + len),
                "expected ')' after the cardinality",
            )
        })?;
        // The sort expression runs up to the first quoted value.
        let mut values = 0u64;
        let mut at = line.len() - rest.len() + rest.find('"').unwrap_or(rest.len());
        while at < line.len() {
            let tail = &line[at..];
            let skip = tail.len() - tail.trim_start().len();
            at += skip;
            if at == line.len() {
                break;
            }
            if !line[at..].starts_with('"') {
                return Err(self.syntax(column(line, at), "expected a quoted domain value"));
            }
            let close = line[at + 1..].find('"').ok_or_else(|| {
                self.syntax(
                    column(line, at),
                    "unterminated domain value (no closing '\"')",
                )
            })?;
            values += 1;
            at += close + 2;
        }
        if values != card {
            return Err(self.syntax(
                column(line, open + 1),
                format!("the domain cardinality is {card} but {values} values follow"),
            ));
        }
        Ok(card)
    }

    /// Checks a state line: one value per parameter, each below its domain's cardinality
    /// (when that is not 0).
    fn state_line(&self, cards: &[u64]) -> Result<(), LtsError> {
        let line = self.text();
        let mut count = 0usize;
        let mut at = 0;
        while at < line.len() {
            let tail = &line[at..];
            at += tail.len() - tail.trim_start().len();
            if at == line.len() {
                break;
            }
            let (v, len) = number(&line[at..]).ok_or_else(|| {
                self.syntax(
                    column(line, at),
                    if line[at..].starts_with('"') {
                        "expected a parameter value (a natural number), not a label: is the '---' before the transitions missing?"
                    } else {
                        "expected a parameter value (a natural number)"
                    },
                )
            })?;
            if let Some(&card) = cards.get(count) {
                if card > 0 && v >= card {
                    return Err(self.syntax(
                        column(line, at),
                        format!(
                            "value {v} is not below the domain cardinality {card} of parameter {}",
                            count + 1
                        ),
                    ));
                }
            }
            count += 1;
            at += len;
        }
        if count != cards.len() {
            return Err(self.syntax(
                1,
                format!(
                    "a state line needs {} values (one per parameter), found {count}",
                    cards.len()
                ),
            ));
        }
        Ok(())
    }

    /// Parses a transition line `SOURCE TARGET "LABEL"`; `state_lines` bounds the states
    /// when the state section is not empty.
    fn transition(&self, state_lines: u64) -> Result<Line, LtsError> {
        let line = self.text();
        let mut at = line.len() - line.trim_start().len();
        let state = |what: &str, at: &mut usize| -> Result<u64, LtsError> {
            let tail = &line[*at..];
            *at += tail.len() - tail.trim_start().len();
            if line[*at..].starts_with('[') {
                return Err(self.syntax(
                    column(line, *at),
                    "probabilistic transitions are not supported",
                ));
            }
            let (v, len) = number(&line[*at..]).ok_or_else(|| {
                self.syntax(
                    column(line, *at),
                    format!("expected the {what} state number"),
                )
            })?;
            if v == 0 {
                return Err(self.syntax(
                    column(line, *at),
                    format!("{what} state 0: .fsm states are numbered from 1"),
                ));
            }
            if state_lines > 0 && v > state_lines {
                return Err(self.syntax(
                    column(line, *at),
                    format!(
                        "{what} state {v} is above the {state_lines} states of the state section"
                    ),
                ));
            }
            *at += len;
            Ok(v)
        };
        let src = state("source", &mut at)?;
        let dst = state("target", &mut at)?;
        let tail = &line[at..];
        at += tail.len() - tail.trim_start().len();
        if number(&line[at..]).is_some() || line[at..].starts_with('[') {
            return Err(self.syntax(
                column(line, at),
                "probabilistic transitions are not supported",
            ));
        }
        if !line[at..].starts_with('"') {
            return Err(self.syntax(column(line, at), "expected a quoted label"));
        }
        let close = line[at + 1..]
            .find('"')
            .ok_or_else(|| self.syntax(column(line, at), "unterminated label (no closing '\"')"))?;
        let label = at + 1..at + 1 + close;
        let rest = &line[label.end + 1..];
        if !rest.trim().is_empty() {
            return Err(self.syntax(
                column(line, label.end + 1),
                "unexpected text after the label (a label cannot contain '\"')",
            ));
        }
        Ok(Line { src, dst, label })
    }

    /// Parses the optional initial-state section; nothing may follow it.
    fn initial_section(&mut self, state_lines: u64) -> Result<u64, LtsError> {
        let mut initial = None;
        while self.lines.next(&self.path)? {
            let line = self.text();
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            let at = line.len() - line.trim_start().len();
            if initial.is_some() {
                return Err(
                    self.syntax(column(line, at), "unexpected text after the initial state")
                );
            }
            match number(trimmed) {
                Some((v, len)) if len == trimmed.len() && state_lines > 0 && v > state_lines => {
                    return Err(self.syntax(
                        column(line, at),
                        format!("initial state {v} is above the {state_lines} states of the state section"),
                    ))
                }
                Some((v, len)) if len == trimmed.len() && v > 0 => initial = Some(v),
                Some((_, len)) if len == trimmed.len() => {
                    return Err(self.syntax(column(line, at), "initial state 0: .fsm states are numbered from 1"))
                }
                _ => {
                    return Err(self.syntax(
                        column(line, at),
                        "expected the initial state number (probabilistic initial states are not supported)",
                    ))
                }
            }
        }
        initial.ok_or_else(|| self.syntax(1, "the initial-state section is empty"))
    }

    /// The next transition `(src, label, dst)` with 0-based states, or `None` after the last.
    pub fn next_edge(&mut self) -> Result<Option<(u64, LabelId, u64)>, LtsError> {
        loop {
            if self.format.done {
                return Ok(None);
            }
            if !self.lines.next(&self.path)? || self.is_separator() {
                self.format.done = true;
                return self.end_of_edges(|first, second| {
                    format!("{first} transitions on the first reading, {second} on the second: the file changed while it was read")
                });
            }
            if self.text().trim().is_empty() {
                continue;
            }
            let states = self.header.states;
            let t = self.transition(states)?;
            if self.seen == self.header.transitions || t.src > states || t.dst > states {
                return Err(self.syntax(1, "the file changed while it was read"));
            }
            let id = self.labels.intern(&self.lines.line[t.label]);
            self.seen += 1;
            return Ok(Some((t.src - 1, id, t.dst - 1)));
        }
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
        crate::lts::write_one_edge(&mut w, "a(1, 2)", 2, 1).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "---\n---\n1 2 \"a(1, 2)\"\n---\n2\n");
        let mut w = FsmWriter::create(&p, None).unwrap();
        assert!(w.define_label(LabelId(0), "say \"hi\"").is_err());
    }

    type Edges = Vec<(u64, String, u64)>;

    fn read(text: &str) -> Result<(FsmHeader, Edges), LtsError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.fsm");
        std::fs::write(&p, text).unwrap();
        let mut r = FsmReader::open(&p)?;
        let mut edges = Vec::new();
        while let Some((s, l, d)) = r.next_edge()? {
            edges.push((s, r.labels()[l.0 as usize].clone(), d));
        }
        Ok((r.header(), edges))
    }

    #[test]
    fn reads_the_mcrl2_manual_example_and_its_own_output() {
        let text = "b(2) Bool \"F\" \"T\"\nn(2) Nat \"1\" \"2\"\n---\n0 0\n0 1\n1 0\n1 1\n---\n1 2 \"increase\"\n1 3 \"on\"\n2 4 \"on\"\n2 1 \"decrease\"\n3 1 \"off\"\n3 4 \"increase\"\n4 2 \"off\"\n4 3 \"decrease\"\n";
        let (h, e) = read(text).unwrap();
        assert_eq!((h.states, h.transitions, h.initial), (4, 8, 0));
        assert_eq!(e[0], (0, "increase".to_string(), 1));
        assert_eq!(e[7], (3, "decrease".to_string(), 2));
        // Windows line ends, no final line break, an initial-state section.
        let (h, e) = read("---\r\n---\r\n1 2 \"a b(1, 2)\"\r\n2 3 \"tau\"\r\n---\r\n2").unwrap();
        assert_eq!((h.states, h.transitions, h.initial), (3, 2, 1));
        assert_eq!(e[0], (0, "a b(1, 2)".to_string(), 1));
        // Empty state lines (no parameters) count the states, even unused ones.
        let (h, _) = read("---\n\n\n\n\n\n---\n1 2 \"a\"\n").unwrap();
        assert_eq!(h.states, 5);
        let (h, e) = read("---\n---\n").unwrap();
        assert_eq!((h.states, h.transitions, e.len()), (1, 0, 0));
    }

    #[test]
    fn malformed_files_are_refused_with_a_position() {
        for (text, at, needle) in [
            ("", "x.fsm:1:1:", "parameter section"),
            (
                "---\n1 2 \"a\"\n",
                "x.fsm:2:5:",
                "'---' before the transitions missing",
            ),
            ("---\n\n", "x.fsm:3:1:", "state section"),
            ("---\n---\n0 1 \"a\"\n", "x.fsm:3:1:", "numbered from 1"),
            (
                "---\n\n\n---\n1 3 \"a\"\n",
                "x.fsm:5:3:",
                "above the 2 states",
            ),
            ("---\n---\n1 2 \"a\n", "x.fsm:3:5:", "unterminated label"),
            ("---\n---\n1 2 \"a\"b\"\n", "x.fsm:3:8:", "after the label"),
            ("---\n---\n1 2 a\n", "x.fsm:3:5:", "quoted label"),
            (
                "---\n---\n1 [2 1/2 3 1/2] \"a\"\n",
                "x.fsm:3:3:",
                "probabilistic",
            ),
            ("---\n---\n1 2 1/2 3 \"a\"\n", "x.fsm:3:5:", "probabilistic"),
            ("---\n---\n1 x \"a\"\n", "x.fsm:3:3:", "target state"),
            (
                "b(3) Bool \"F\" \"T\"\n---\n---\n",
                "x.fsm:1:3:",
                "cardinality is 3 but 2",
            ),
            (
                "b(2) Bool \"F\" \"T\"\n---\n2\n---\n",
                "x.fsm:3:1:",
                "not below the domain cardinality",
            ),
            (
                "b(2) Bool \"F\" \"T\"\n---\n0 1\n---\n",
                "x.fsm:3:1:",
                "needs 1 values",
            ),
            (
                "---\n---\n1 2 \"a\"\n---\n0\n",
                "x.fsm:5:1:",
                "numbered from 1",
            ),
            (
                "---\n---\n1 2 \"a\"\n---\n1\n2\n",
                "x.fsm:6:1:",
                "after the initial state",
            ),
            (
                "---\n---\n1 2 \"\u{e9}\u{e9}\"\n---\n[1 1/2 2 1/2]\n",
                "x.fsm:5:1:",
                "probabilistic initial",
            ),
            (
                "---\n\n---\n1 1 \"a\"\n---\n2\n",
                "x.fsm:6:1:",
                "initial state 2 is above",
            ),
        ] {
            let e = read(text).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(at) && msg.contains(needle), "{text:?}: {msg}");
            assert_eq!(e.exit_code(), crate::error::exit::MODEL, "{msg}");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.fsm");
        std::fs::write(&p, b"---\n---\n1 2 \"a\xff\"\n").unwrap();
        let msg = FsmReader::open(&p).err().unwrap().to_string();
        assert!(msg.contains("x.fsm:3:7:") && msg.contains("UTF-8"), "{msg}");
    }

    #[test]
    fn state_lines_keep_states_without_transitions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.fsm");
        let mut w = FsmWriter::create(&p, state_lines(5, 1)).unwrap();
        crate::lts::write_one_edge(&mut w, "a", 5, 0).unwrap();
        let r = FsmReader::open(&p).unwrap();
        assert_eq!(r.header().states, 5);
        // A header's claim of billions of states does not become gigabytes of empty lines.
        assert_eq!(state_lines(1 << 40, 3), None);
        assert_eq!(state_lines(70_000, 10_000), Some(70_000));
    }
}
