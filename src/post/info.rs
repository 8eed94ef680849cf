//! `spillway lts info`: what an LTS file holds, read in one streaming pass.
//!
//! Counts come from the file's header or footer and are checked against the edges actually
//! read (the readers reject a mismatch). Deadlocks are counted from the edges with a
//! [`SourceSet`], whose memory follows the edges read, not the declared state count (at most
//! n/8 bytes). The compression ratio compares
//! the file with the same LTS written as plain `.aut` text, `(S, "LABEL", D)` per line (exact byte count, computed
//! while streaming, nothing is written).

use crate::error::PostError;
use crate::post::input::Input;
use crate::post::sources::SourceSet;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Transitions carrying one label.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LabelCount {
    pub label: String,
    pub transitions: u64,
}

/// The report of `lts info`, also its `--json` object.
#[derive(Clone, Debug, Serialize)]
pub struct Info {
    pub file: String,
    /// "native", "aut" or "fsm".
    pub format: String,
    /// Native format version; absent for `.aut`.
    pub version: Option<u16>,
    pub states: u64,
    pub transitions: u64,
    pub initial: u64,
    /// Labels in label-table order with their transition counts.
    pub labels: Vec<LabelCount>,
    /// States without outgoing transitions (counted from the edges).
    pub deadlocks: u64,
    /// The deadlock count the writer recorded (native footer), if any.
    pub recorded_deadlocks: Option<u64>,
    pub self_loops: u64,
    /// The writer flagged that a state may appear more than once (`--store cache` re-numbers
    /// a state it forgot and met again); `lts reduce` merges such copies.
    pub states_may_repeat: bool,
    pub file_bytes: u64,
    /// `file_bytes / transitions`; `None` (JSON `null`) for an LTS without transitions.
    pub bytes_per_transition: Option<f64>,
    /// Size of the same LTS as plain `.aut` text (`(S, "LABEL", D)` lines).
    pub aut_text_bytes: u64,
    /// `aut_text_bytes / file_bytes`.
    pub compression_ratio: f64,
}

fn digits(mut v: u64) -> u64 {
    let mut d = 1;
    while v >= 10 {
        v /= 10;
        d += 1;
    }
    d
}

/// Reads `path` once and reports on it.
pub fn info(path: &Path) -> Result<Info, PostError> {
    let mut input = Input::open(path)?;
    let h = input.header()?;
    let mut has_out = SourceSet::new(h.states)?;
    let mut per_label: Vec<u64> = Vec::new();
    let mut self_loops = 0u64;
    let mut text =
        crate::lts::aut::header_line(h.initial, h.transitions, h.states).len() as u64 + 1;
    input.for_each_edge(|s, l, d, labels| -> Result<(), PostError> {
        has_out.insert(s)?;
        let l = l as usize;
        if l >= per_label.len() {
            per_label.resize(l + 1, 0);
        }
        per_label[l] += 1;
        if s == d {
            self_loops += 1;
        }
        // `(S, "LABEL", D)\n`
        text += digits(s) + digits(d) + labels[l].len() as u64 + 9;
        Ok(())
    })?;
    let labels = input.labels();
    per_label.resize(labels.len(), 0);
    let with_out = has_out.count()?;
    let file_bytes = h.file_len;
    Ok(Info {
        file: path.display().to_string(),
        format: match h.format {
            crate::lts::LtsFormat::Native => "native".into(),
            crate::lts::LtsFormat::Fsm => "fsm".into(),
            _ => "aut".into(),
        },
        version: h.version,
        states: h.states,
        transitions: h.transitions,
        initial: h.initial,
        labels: labels
            .iter()
            .zip(&per_label)
            .map(|(l, &c)| LabelCount {
                label: l.clone(),
                transitions: c,
            })
            .collect(),
        deadlocks: h.states - with_out,
        recorded_deadlocks: h.recorded_deadlocks,
        self_loops,
        states_may_repeat: h.states_may_repeat,
        file_bytes,
        bytes_per_transition: (h.transitions > 0).then(|| file_bytes as f64 / h.transitions as f64),
        aut_text_bytes: text,
        compression_ratio: text as f64 / file_bytes.max(1) as f64,
    })
}

/// Prints the human-readable report.
pub fn print_text(i: &Info, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "file          {}", i.file)?;
    match i.version {
        Some(v) => writeln!(out, "format        {} (version {v})", i.format)?,
        None => writeln!(out, "format        {}", i.format)?,
    }
    writeln!(out, "states        {}", i.states)?;
    writeln!(out, "transitions   {}", i.transitions)?;
    writeln!(out, "initial state {}", i.initial)?;
    writeln!(out, "deadlocks     {}", i.deadlocks)?;
    if let Some(r) = i.recorded_deadlocks {
        if r != i.deadlocks {
            writeln!(
                out,
                "warning       the file's footer records {r} deadlocks, but {} states have no outgoing transition",
                i.deadlocks
            )?;
        }
    }
    writeln!(out, "self-loops    {}", i.self_loops)?;
    if i.states_may_repeat {
        writeln!(
            out,
            "note          states may repeat: the explorer forgot visited states (--store cache) and numbered them again when it met them again; the state and deadlock counts are of visits (a deadlock met again is counted again), and `spillway lts reduce` merges the copies"
        )?;
    }
    match i.bytes_per_transition {
        Some(b) => writeln!(
            out,
            "size          {} bytes ({b:.2} bytes/transition)",
            i.file_bytes
        )?,
        None => writeln!(out, "size          {} bytes (no transitions)", i.file_bytes)?,
    }
    writeln!(
        out,
        "compression   {:.2}x versus .aut text ({} bytes)",
        i.compression_ratio, i.aut_text_bytes
    )?;
    writeln!(out, "labels        {}", i.labels.len())?;
    let width = i
        .labels
        .iter()
        .map(|l| l.transitions.to_string().len())
        .max()
        .unwrap_or(1);
    for l in &i.labels {
        writeln!(out, "  {:>width$}  {}", l.transitions, l.label)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_aut_text_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.aut");
        let text = "des (0, 3, 3)\n(0, \"a\", 1)\n(1, \"b\", 1)\n(1, \"a\", 0)\n";
        std::fs::write(&p, text).unwrap();
        let i = info(&p).unwrap();
        assert_eq!(i.aut_text_bytes, text.len() as u64);
        assert_eq!(
            (i.states, i.transitions, i.deadlocks, i.self_loops),
            (3, 3, 1, 1)
        );
        assert_eq!(i.bytes_per_transition, Some(text.len() as f64 / 3.0));
        assert_eq!(
            i.labels,
            vec![
                LabelCount {
                    label: "a".into(),
                    transitions: 2
                },
                LabelCount {
                    label: "b".into(),
                    transitions: 1
                }
            ]
        );
    }

    #[test]
    fn an_lts_without_transitions_has_no_bytes_per_transition() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.aut");
        std::fs::write(&p, "des (0, 0, 1)\n").unwrap();
        let i = info(&p).unwrap();
        assert_eq!(i.bytes_per_transition, None);
        let mut text = Vec::new();
        print_text(&i, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("size          14 bytes (no transitions)\n"),
            "{text}"
        );
        assert!(!text.contains("bytes/transition"), "{text}");
    }
}
