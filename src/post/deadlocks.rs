//! `spillway lts deadlocks`: how many deadlock states there are and shortest traces to them.
//!
//! A deadlock is a state without outgoing transitions. A breadth-first search from the initial
//! state records for each state its BFS parent and the label it was reached by, so the trace to
//! every deadlock found is a shortest one, and deadlocks are reported nearest first.

use crate::error::PostError;
use crate::post::graph::{alloc_vec, Lts, NONE};
use serde::Serialize;
use std::io::Write;

/// A shortest trace from the initial state to one deadlock state.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DeadlockTrace {
    pub state: u32,
    pub trace: Vec<String>,
}

/// The result of `lts deadlocks`, also its `--json` object.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DeadlockReport {
    pub states: u32,
    pub initial: u32,
    /// All states without outgoing transitions.
    pub deadlocks: u64,
    /// Those reachable from the initial state.
    pub reachable_deadlocks: u64,
    /// Up to the requested number of traces, nearest deadlock first.
    pub traces: Vec<DeadlockTrace>,
}

/// Finds the deadlocks of `lts` and shortest traces to at most `limit` of them.
pub fn deadlocks(lts: &Lts, limit: usize) -> Result<DeadlockReport, PostError> {
    let n = lts.states as usize;
    let mut parent = alloc_vec(n, NONE, "BFS parents")?;
    let mut via = alloc_vec(n, 0u32, "BFS labels")?;
    let mut order: Vec<u32> = Vec::new();
    let mut found: Vec<u32> = Vec::new();
    let mut reachable = 0u64;
    if n > 0 {
        parent[lts.initial as usize] = lts.initial;
        order.push(lts.initial);
    }
    let mut head = 0;
    while head < order.len() {
        let s = order[head];
        head += 1;
        let range = lts.out_range(s);
        if range.is_empty() {
            reachable += 1;
            if found.len() < limit {
                found.push(s);
            }
        }
        for i in range {
            let d = lts.dst[i];
            if parent[d as usize] == NONE {
                parent[d as usize] = s;
                via[d as usize] = lts.label[i];
                order.push(d);
            }
        }
    }
    let traces = found
        .iter()
        .map(|&d| {
            let mut labels = Vec::new();
            let mut s = d;
            while s != lts.initial {
                labels.push(lts.labels[via[s as usize] as usize].clone());
                s = parent[s as usize];
            }
            labels.reverse();
            DeadlockTrace {
                state: d,
                trace: labels,
            }
        })
        .collect();
    Ok(DeadlockReport {
        states: lts.states,
        initial: lts.initial,
        deadlocks: lts.deadlocks(),
        reachable_deadlocks: reachable,
        traces,
    })
}

/// Prints the human-readable report: counts, then each trace with one label per line.
pub fn print_text(r: &DeadlockReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "deadlocks     {} ({} reachable from the initial state {})",
        r.deadlocks, r.reachable_deadlocks, r.initial
    )?;
    for t in &r.traces {
        writeln!(
            out,
            "trace to deadlock state {} ({} steps):",
            t.state,
            t.trace.len()
        )?;
        for l in &t.trace {
            writeln!(out, "  {l}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_traces_nearest_first() {
        // 0 -a-> 1 -b-> 2 (deadlock); 0 -c-> 3 -c-> 4 -c-> 2; 0 -d-> 5 (deadlock); 6 unreachable.
        let lts = crate::post::graph::test_lts(
            7,
            &["a", "b", "c", "d"],
            &[
                (0, 0, 1),
                (1, 1, 2),
                (0, 2, 3),
                (3, 2, 4),
                (4, 2, 2),
                (0, 3, 5),
            ],
        );
        let r = deadlocks(&lts, 10).unwrap();
        assert_eq!((r.deadlocks, r.reachable_deadlocks), (3, 2));
        assert_eq!(r.traces[0].trace, vec!["d"]);
        assert_eq!(r.traces[1].trace, vec!["a", "b"]);
        let r = deadlocks(&lts, 1).unwrap();
        assert_eq!(r.traces.len(), 1);
    }
}
