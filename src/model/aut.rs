//! An explicit LTS (Aldebaran `.aut`) explored as a model — how the VLTS benchmark is used.
//!
//! A state is its 4-byte little-endian number in the file. The transition id of an edge is its
//! index among its source state's out-edges in file order, so `(state, id)` determines the
//! successor even when one label leads to several states (replay stays deterministic).

use super::{Fired, LabelId, Model, TransitionId};
use crate::error::{LtsError, ModelError};
use crate::lts::aut::AutReader;
use std::path::Path;

/// An explicit LTS in compressed-sparse-row form.
pub struct AutModel {
    initial: u32,
    states: u32,
    rows: Rows,
    out: Vec<(u32, u32)>,
    labels: Vec<String>,
    max_out_degree: usize,
}

/// Where each state's out-edges are in `out`.
enum Rows {
    /// `out[start[s]..start[s+1]]` are the out-edges of `s`, in file order.
    Dense(Vec<u64>),
    /// For a header that declares far more states than the file has transitions: only the
    /// states with out-edges (ascending) have a row, `out[start[i]..start[i+1]]` for
    /// `sources[i]`, so memory follows the file, not the header.
    Sparse { sources: Vec<u32>, start: Vec<u64> },
}

/// Below this many declared states per transition read (plus a constant), rows are indexed
/// directly by state; above it by binary search over the sources.
const DENSE_STATES_PER_TRANSITION: u64 = 4;

impl AutModel {
    /// Reads an `.aut` file.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        // `ModelError::Invalid` names the file itself: the message must not name it again.
        // A cut-short file is a malformed model here (exit code 3), as the README's exit
        // code table has it for a model; the `lts` tools call the same file truncated (5).
        let to_model = |e: LtsError| match e {
            LtsError::Io { path, source } => ModelError::Io { path, source },
            LtsError::Syntax(e) => ModelError::Syntax(e),
            LtsError::Truncated { path, message } => ModelError::Invalid {
                path,
                message: format!("truncated: {message}"),
            },
            LtsError::Invalid(message) => ModelError::Invalid {
                path: path.to_path_buf(),
                message,
            },
            // Native-file and writer errors, which the .aut reader does not make; they
            // name the file.
            e @ (LtsError::Corrupt(_) | LtsError::Version { .. } | LtsError::Busy { .. }) => {
                ModelError::Other(e.to_string())
            }
        };
        let mut r = AutReader::open(path).map_err(to_model)?;
        let h = r.header();
        let states = u32::try_from(h.states).map_err(|_| ModelError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "{} states: the .aut front end holds at most 2^32-1",
                h.states
            ),
        })?;
        // The header's count is only a claim: reserve no more than the file can hold (a
        // transition line takes at least 7 bytes, `(0,,0)` and a newline).
        let file_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut edges: Vec<(u32, u32, u32)> =
            Vec::with_capacity(h.transitions.min(file_len / 7 + 1).min(1 << 28) as usize);
        while let Some((s, l, d)) = r.next_edge().map_err(to_model)? {
            edges.push((s as u32, l.0, d as u32));
        }
        // Stable sort keeps file order among a state's out-edges.
        edges.sort_by_key(|e| e.0);
        let dense = states as u64
            <= (edges.len() as u64).saturating_mul(DENSE_STATES_PER_TRANSITION) + (1 << 16);
        let rows = if dense {
            let mut start = vec![0u64; states as usize + 1];
            for &(s, _, _) in &edges {
                start[s as usize + 1] += 1;
            }
            for i in 0..states as usize {
                start[i + 1] += start[i];
            }
            Rows::Dense(start)
        } else {
            let (mut sources, mut start) = (Vec::new(), Vec::new());
            for (i, &(s, _, _)) in edges.iter().enumerate() {
                if sources.last() != Some(&s) {
                    sources.push(s);
                    start.push(i as u64);
                }
            }
            start.push(edges.len() as u64);
            Rows::Sparse { sources, start }
        };
        let max_out_degree = match &rows {
            Rows::Dense(start) | Rows::Sparse { start, .. } => start
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize)
                .max()
                .unwrap_or(0),
        };
        Ok(AutModel {
            initial: h.initial as u32,
            states,
            rows,
            out: edges.into_iter().map(|(_, l, d)| (l, d)).collect(),
            labels: r.labels().to_vec(),
            max_out_degree,
        })
    }

    fn state(&self, s: &[u8]) -> Result<u32, ModelError> {
        let bytes: [u8; 4] = s.try_into().map_err(|_| {
            ModelError::Other(format!(
                "explicit LTS state must be 4 bytes, got {}",
                s.len()
            ))
        })?;
        let v = u32::from_le_bytes(bytes);
        if v >= self.states {
            return Err(ModelError::Other(format!("state {v} out of range")));
        }
        Ok(v)
    }

    fn row(&self, s: u32) -> &[(u32, u32)] {
        let (lo, hi) = match &self.rows {
            Rows::Dense(start) => (start[s as usize], start[s as usize + 1]),
            Rows::Sparse { sources, start } => match sources.binary_search(&s) {
                Ok(i) => (start[i], start[i + 1]),
                Err(_) => return &[],
            },
        };
        &self.out[lo as usize..hi as usize]
    }
}

impl Model for AutModel {
    fn describe(&self) -> String {
        format!(
            "explicit LTS: {} states, {} transitions, {} labels",
            self.states,
            self.out.len(),
            self.labels.len()
        )
    }

    fn initial_state(&self, out: &mut Vec<u8>) -> Result<(), ModelError> {
        out.clear();
        out.extend_from_slice(&self.initial.to_le_bytes());
        Ok(())
    }

    fn state_len(&self) -> Option<usize> {
        Some(4)
    }

    fn transition_count(&self) -> usize {
        self.max_out_degree
    }

    fn successors(
        &self,
        src: &[u8],
        sink: &mut dyn FnMut(TransitionId, LabelId, &[u8]),
    ) -> Result<(), ModelError> {
        let s = self.state(src)?;
        for (i, &(l, d)) in self.row(s).iter().enumerate() {
            sink(TransitionId(i as u32), LabelId(l), &d.to_le_bytes());
        }
        Ok(())
    }

    fn enabled(&self, src: &[u8], out: &mut Vec<TransitionId>) -> Result<(), ModelError> {
        let s = self.state(src)?;
        out.clear();
        out.extend((0..self.row(s).len() as u32).map(TransitionId));
        Ok(())
    }

    fn fire(&self, src: &[u8], t: TransitionId, dst: &mut Vec<u8>) -> Result<Fired, ModelError> {
        let s = self.state(src)?;
        match self.row(s).get(t.0 as usize) {
            Some(&(l, d)) => {
                dst.clear();
                dst.extend_from_slice(&d.to_le_bytes());
                Ok(Fired::Enabled(LabelId(l)))
            }
            None => Ok(Fired::Disabled),
        }
    }

    fn label_count(&self) -> usize {
        self.labels.len()
    }

    fn label_name(&self, l: LabelId) -> String {
        self.labels[l.0 as usize].clone()
    }

    fn format_state(&self, state: &[u8]) -> String {
        match self.state(state) {
            Ok(s) => format!("state {s}"),
            Err(_) => format!("{state:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_claiming_billions_of_states_costs_only_what_the_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.aut");
        std::fs::write(
            &p,
            "des (0, 3, 4000000000)\n(0, \"a\", 3999999999)\n(3999999999, \"b\", 7)\n(3999999999, \"c\", 0)\n",
        )
        .unwrap();
        let m = AutModel::load(&p).unwrap();
        assert!(matches!(m.rows, Rows::Sparse { .. }));
        assert_eq!(m.transition_count(), 2);
        let mut succ = Vec::new();
        m.successors(&3_999_999_999u32.to_le_bytes(), &mut |t, l, d| {
            succ.push((t.0, l.0, u32::from_le_bytes(d.try_into().unwrap())))
        })
        .unwrap();
        assert_eq!(succ, vec![(0, 1, 7), (1, 2, 0)]);
        let mut none = Vec::new();
        m.enabled(&7u32.to_le_bytes(), &mut none).unwrap();
        assert!(none.is_empty());
    }
}
