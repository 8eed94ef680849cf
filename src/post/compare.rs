//! `spillway lts compare`: are two LTSs strongly bisimilar, and if not, why not.
//!
//! The two LTSs are put side by side in one LTS (labels matched by name) and minimised with
//! [`reduce::minimise`](crate::post::reduce::minimise); they are bisimilar exactly when their
//! initial states land in the same class.
//!
//! When they are not, the witness is searched on the minimised union, where every state is its
//! own class and both initial states are present:
//!
//! 1. **A distinguishing trace** — a sequence of labels one LTS can perform from its initial
//!    state and the other cannot. A breadth-first search over pairs of state *sets* (the subset
//!    construction run on both sides at once) finds a shortest one. Pairs with equal sets are
//!    pruned: equal sets have equal traces. The search is bounded ([`TRACE_SEARCH_BUDGET`]
//!    stored set elements) because subset construction can blow up.
//! 2. Strong bisimilarity is finer than trace equivalence: the LTSs may have exactly the same
//!    traces (`a.b + a.c` versus `a.(b + c)`). Then no trace exists, and a **distinguishing
//!    Hennessy–Milner formula** is printed instead (mCRL2 modal syntax: `<a>φ`, `[a]φ`, `&&`,
//!    `||`, `true`, `false`), true in one initial state and false in the other. It is built
//!    from the rounds of a naive signature refinement of the union's quotient, stopped at the
//!    first round that separates the two initial states (the formula's modal depth), so every
//!    recursive step separates a pair at a strictly earlier round.

use crate::error::PostError;
use crate::post::branching::{internal_label, minimise_branching};
use crate::post::graph::{Lts, NONE};
use crate::post::reduce::{minimise, Minimised};
use crate::post::Bisimulation;
use std::collections::{HashMap, VecDeque};
use std::fmt;

/// Which of the two compared LTSs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    First,
    Second,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::First => Side::Second,
            Side::Second => Side::First,
        }
    }
    pub fn index(self) -> usize {
        match self {
            Side::First => 0,
            Side::Second => 1,
        }
    }
}

/// What the trace search concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceSearch {
    /// A trace possible from one initial state and not from the other.
    Found {
        trace: Vec<String>,
        possible_in: Side,
    },
    /// Complete search: both LTSs have exactly the same traces.
    TraceEquivalent,
    /// The search stopped at its budget without an answer.
    GaveUp { pairs_explored: u64 },
}

/// Why two non-bisimilar LTSs differ when no distinguishing trace was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Explanation {
    /// A formula true in the initial state of `holds_in` and false in the other's.
    Formula { formula: Formula, holds_in: Side },
    /// The formula exceeded the size limit; only its first step is described.
    FirstStep { text: String },
}

/// The verdict of `lts compare`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Equivalence {
    Equivalent,
    Different {
        search: TraceSearch,
        /// Present when no trace was found.
        explanation: Option<Explanation>,
    },
}

/// The full result with sizes for the report.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub verdict: Equivalence,
    /// Classes reachable from the two initial states in the minimised union.
    pub union_classes: u32,
}

/// Budget of the trace search: stored set elements (each 4 bytes).
pub const TRACE_SEARCH_BUDGET: usize = 1 << 25;
/// Largest formula printed, in operators.
pub const FORMULA_BUDGET: usize = 10_000;
/// Largest number of (round × state) class numbers kept for building the formula.
pub const LEVEL_BUDGET: usize = 1 << 26;

/// A Hennessy–Milner formula.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Formula {
    True,
    False,
    Diamond(String, Box<Formula>),
    Box(String, Box<Formula>),
    And(Vec<Formula>),
    Or(Vec<Formula>),
}

impl Formula {
    /// The negation, pushed down to the atoms.
    pub fn negate(self) -> Formula {
        match self {
            Formula::True => Formula::False,
            Formula::False => Formula::True,
            Formula::Diamond(a, f) => Formula::Box(a, Box::new(f.negate())),
            Formula::Box(a, f) => Formula::Diamond(a, Box::new(f.negate())),
            Formula::And(v) => Formula::Or(v.into_iter().map(Formula::negate).collect()),
            Formula::Or(v) => Formula::And(v.into_iter().map(Formula::negate).collect()),
        }
    }

    /// Whether the formula holds in state `s` of `lts`.
    pub fn holds(&self, lts: &Lts, s: u32) -> bool {
        match self {
            Formula::True => true,
            Formula::False => false,
            Formula::Diamond(a, f) => lts
                .out(s)
                .any(|(l, d)| lts.labels[l as usize] == *a && f.holds(lts, d)),
            Formula::Box(a, f) => lts
                .out(s)
                .all(|(l, d)| lts.labels[l as usize] != *a || f.holds(lts, d)),
            Formula::And(v) => v.iter().all(|f| f.holds(lts, s)),
            Formula::Or(v) => v.iter().any(|f| f.holds(lts, s)),
        }
    }
}

impl fmt::Display for Formula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Formula::True => write!(f, "true"),
            Formula::False => write!(f, "false"),
            Formula::Diamond(a, g) => write!(f, "<{}>{g}", Action(a)),
            Formula::Box(a, g) => write!(f, "[{}]{g}", Action(a)),
            Formula::And(v) | Formula::Or(v) => {
                let op = if matches!(self, Formula::And(_)) {
                    " && "
                } else {
                    " || "
                };
                write!(f, "(")?;
                for (i, g) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, "{op}")?;
                    }
                    write!(f, "{g}")?;
                }
                write!(f, ")")
            }
        }
    }
}

/// A label inside a modality: bare when it reads as an mCRL2 action (a name, maybe with
/// arguments in balanced parentheses), else quoted as in `.aut` files (`"`, `\\` escaped).
/// Printed bare, a DVE label such as `P.s->t` had closed the diamond at its `>`, and a label
/// with a space or a `&&` could not be told from the formula around it.
struct Action<'a>(&'a str);

impl Action<'_> {
    fn is_plain(a: &str) -> bool {
        let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '\'';
        let (name, args) = match a.find('(') {
            Some(i) => (&a[..i], Some(&a[i..])),
            None => (a, None),
        };
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            || !name.chars().all(name_char)
        {
            return false;
        }
        let Some(args) = args else { return true };
        // `(`…`)` with balanced parentheses and data-like characters inside.
        let mut depth = 0i32;
        for (i, c) in args.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 && i + 1 != args.len() {
                        return false;
                    }
                }
                c if name_char(c) || matches!(c, ',' | ' ' | '-' | '.') => {}
                _ => return false,
            }
            if depth < 0 {
                return false;
            }
        }
        depth == 0
    }
}

impl fmt::Display for Action<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if Self::is_plain(self.0) {
            return f.write_str(self.0);
        }
        f.write_str("\"")?;
        for c in self.0.chars() {
            if matches!(c, '"' | '\\') {
                f.write_str("\\")?;
            }
            write!(f, "{c}")?;
        }
        f.write_str("\"")
    }
}

/// Places `b` beside `a` in one LTS: `b`'s states are shifted by `a.states`, its labels are
/// matched to `a`'s by name. The initial state is `a`'s.
pub fn disjoint_union(a: Lts, b: Lts) -> Result<(Lts, u32), PostError> {
    let total = a.states as u64 + b.states as u64;
    let edges = a.transitions() as u64 + b.transitions() as u64;
    if total > crate::post::graph::MAX_COUNT || edges > crate::post::graph::MAX_COUNT {
        return Err(PostError::Limit(format!(
            "the two LTSs together have {total} states and {edges} transitions, more than the {} the in-memory LTS can index",
            crate::post::graph::MAX_COUNT
        )));
    }
    let Lts {
        states: na,
        initial,
        mut labels,
        mut start,
        mut label,
        mut dst,
    } = a;
    let mut ids: HashMap<String, u32> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.clone(), i as u32))
        .collect();
    let map: Vec<u32> = b
        .labels
        .iter()
        .map(|l| {
            *ids.entry(l.clone()).or_insert_with(|| {
                labels.push(l.clone());
                (labels.len() - 1) as u32
            })
        })
        .collect();
    let ma = label.len() as u32;
    start.pop();
    start.extend(b.start.iter().map(|&o| o + ma));
    label.extend(b.label.iter().map(|&l| map[l as usize]));
    dst.extend(b.dst.iter().map(|&d| d + na));
    let init_b = b.initial + na;
    Ok((
        Lts {
            states: total as u32,
            initial,
            labels,
            start,
            label,
            dst,
        },
        init_b,
    ))
}

/// Compares `a` and `b` modulo strong bisimulation.
pub fn compare(a: Lts, b: Lts) -> Result<Comparison, PostError> {
    compare_with(a, b, Bisimulation::Strong)
}

/// Compares `a` and `b` modulo the given equivalence. For branching bisimulation the witness
/// is a distinguishing *weak* trace (internal steps skipped); when the LTSs have the same weak
/// traces only that is reported, no formula.
pub fn compare_with(a: Lts, b: Lts, relation: Bisimulation) -> Result<Comparison, PostError> {
    let (union, init_b) = disjoint_union(a, b)?;
    let init_a = union.initial;
    let Minimised { lts: q, roots, .. } = match relation {
        Bisimulation::Strong => minimise(union, &[init_a, init_b])?,
        Bisimulation::Branching => minimise_branching(union, &[init_a, init_b])?,
    };
    let union_classes = q.states;
    if roots[0] == roots[1] {
        return Ok(Comparison {
            verdict: Equivalence::Equivalent,
            union_classes,
        });
    }
    let tau = match relation {
        Bisimulation::Strong => None,
        Bisimulation::Branching => internal_label(&q.labels),
    };
    let search = find_trace(&q, roots[0], roots[1], TRACE_SEARCH_BUDGET, tau);
    let explanation = match (&search, relation) {
        (TraceSearch::Found { .. }, _) => None,
        (_, Bisimulation::Strong) => Some(explain(&q, roots[0], roots[1])),
        (_, Bisimulation::Branching) => Some(Explanation::FirstStep {
            text: "no distinguishing formula is printed for branching bisimulation".into(),
        }),
    };
    Ok(Comparison {
        verdict: Equivalence::Different {
            search,
            explanation,
        },
        union_classes,
    })
}

/// Breadth-first search over pairs of state sets for a shortest trace possible from one root
/// and not the other. States of `q` are pairwise non-bisimilar, which keeps the sets small.
///
/// With `tau = Some(label)` the traces are *weak*: that label is invisible, sets are closed
/// under it and it never appears in a trace.
pub fn find_trace(q: &Lts, r0: u32, r1: u32, budget: usize, tau: Option<u32>) -> TraceSearch {
    type Pair = (Vec<u32>, Vec<u32>);
    let close = |mut set: Vec<u32>| -> Vec<u32> {
        if let Some(tau) = tau {
            let mut members: std::collections::HashSet<u32> = set.iter().copied().collect();
            let mut i = 0;
            while i < set.len() {
                let s = set[i];
                i += 1;
                for (l, d) in q.out(s) {
                    if l == tau && members.insert(d) {
                        set.push(d);
                    }
                }
            }
        }
        set.sort_unstable();
        set.dedup();
        set
    };
    let first = (close(vec![r0]), close(vec![r1]));
    let mut nodes: Vec<(Pair, usize, u32)> = vec![(first.clone(), usize::MAX, NONE)];
    let mut seen: HashMap<Pair, ()> = HashMap::new();
    seen.insert(first, ());
    let mut stored = 2usize;
    let mut queue = VecDeque::from([0usize]);
    let mut succ: Vec<(u32, u8, u32)> = Vec::new();
    let trace_of = |nodes: &Vec<(Pair, usize, u32)>, mut i: usize, last: u32| {
        let mut t = vec![q.labels[last as usize].clone()];
        while nodes[i].1 != usize::MAX {
            t.push(q.labels[nodes[i].2 as usize].clone());
            i = nodes[i].1;
        }
        t.reverse();
        t
    };
    while let Some(i) = queue.pop_front() {
        succ.clear();
        for (side, set) in [(0u8, &nodes[i].0 .0), (1u8, &nodes[i].0 .1)] {
            for &s in set {
                for (l, d) in q.out(s) {
                    if Some(l) != tau {
                        succ.push((l, side, d));
                    }
                }
            }
        }
        succ.sort_unstable();
        succ.dedup();
        let mut k = 0;
        while k < succ.len() {
            let l = succ[k].0;
            let mut p = Vec::new();
            let mut r = Vec::new();
            while k < succ.len() && succ[k].0 == l {
                if succ[k].1 == 0 {
                    p.push(succ[k].2);
                } else {
                    r.push(succ[k].2);
                }
                k += 1;
            }
            if p.is_empty() || r.is_empty() {
                return TraceSearch::Found {
                    trace: trace_of(&nodes, i, l),
                    possible_in: if r.is_empty() {
                        Side::First
                    } else {
                        Side::Second
                    },
                };
            }
            let (p, r) = (close(p), close(r));
            if p == r {
                continue;
            }
            let pair = (p, r);
            if !seen.contains_key(&pair) {
                stored += 2 * (pair.0.len() + pair.1.len());
                if stored > budget {
                    return TraceSearch::GaveUp {
                        pairs_explored: nodes.len() as u64,
                    };
                }
                seen.insert(pair.clone(), ());
                nodes.push((pair, i, l));
                queue.push_back(nodes.len() - 1);
            }
        }
    }
    TraceSearch::TraceEquivalent
}

/// Class numbers of every state after each round of naive signature refinement, up to the
/// first round that separates `r0` from `r1`; `None` if that needs more than the budget.
fn rounds(q: &Lts, r0: u32, r1: u32) -> Option<Vec<Vec<u32>>> {
    let n = q.states as usize;
    let mut levels = vec![vec![0u32; n]];
    loop {
        let cur = levels.last()?;
        if cur[r0 as usize] != cur[r1 as usize] {
            return Some(levels);
        }
        if (levels.len() + 1) * n > LEVEL_BUDGET {
            return None;
        }
        let mut ids: HashMap<(u32, Vec<(u32, u32)>), u32> = HashMap::new();
        let mut next = vec![0u32; n];
        for s in 0..n {
            let mut sig: Vec<(u32, u32)> =
                q.out(s as u32).map(|(l, d)| (l, cur[d as usize])).collect();
            sig.sort_unstable();
            sig.dedup();
            let fresh = ids.len() as u32;
            next[s] = *ids.entry((cur[s], sig)).or_insert(fresh);
        }
        let stable = ids.len() == 1 + *cur.iter().max().unwrap_or(&0) as usize;
        levels.push(next);
        if stable && levels.last()?[r0 as usize] == levels.last()?[r1 as usize] {
            // Cannot happen for non-bisimilar roots; guards against looping forever.
            return None;
        }
    }
}

struct FormulaBuilder<'a> {
    q: &'a Lts,
    levels: &'a [Vec<u32>],
    size: usize,
}

impl FormulaBuilder<'_> {
    /// The first round whose classes separate `s` and `t`.
    fn level(&self, s: u32, t: u32) -> usize {
        (0..self.levels.len())
            .find(|&j| self.levels[j][s as usize] != self.levels[j][t as usize])
            .unwrap_or(self.levels.len())
    }

    /// A formula true in `s` and false in `t`, which some round separates.
    fn dist(&mut self, s: u32, t: u32) -> Option<Formula> {
        self.size += 1;
        if self.size > FORMULA_BUDGET {
            return None;
        }
        let j = self.level(s, t);
        let prev = &self.levels[j.checked_sub(1)?];
        let sig = |x: u32| -> Vec<(u32, u32)> {
            let mut v: Vec<(u32, u32)> =
                self.q.out(x).map(|(l, d)| (l, prev[d as usize])).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (ss, st) = (sig(s), sig(t));
        if let Some(&(a, c)) = ss.iter().find(|x| st.binary_search(x).is_err()) {
            return self.diamond(s, t, a, c);
        }
        let &(a, c) = st.iter().find(|x| ss.binary_search(x).is_err())?;
        Some(self.diamond(t, s, a, c)?.negate())
    }

    /// `<a>(...)`: `s` has an a-step into round-(j-1) class `c`, no a-step of `t` does.
    fn diamond(&mut self, s: u32, t: u32, a: u32, c: u32) -> Option<Formula> {
        let j = self.level(s, t);
        let prev = &self.levels[j - 1];
        let s2 = self
            .q
            .out(s)
            .find(|&(l, d)| l == a && prev[d as usize] == c)?
            .1;
        let mut targets: Vec<u32> = self
            .q
            .out(t)
            .filter(|&(l, _)| l == a)
            .map(|x| x.1)
            .collect();
        targets.sort_unstable();
        targets.dedup();
        let mut parts = Vec::new();
        for t2 in targets {
            parts.push(self.dist(s2, t2)?);
        }
        let inner = match parts.len() {
            0 => Formula::True,
            1 => parts.pop()?,
            _ => Formula::And(parts),
        };
        Some(Formula::Diamond(
            self.q.labels[a as usize].clone(),
            Box::new(inner),
        ))
    }
}

/// A formula separating roots `r0` and `r1` of `q`, or a description of the first step when
/// the formula would be too large.
pub fn explain(q: &Lts, r0: u32, r1: u32) -> Explanation {
    if let Some(levels) = rounds(q, r0, r1) {
        let mut b = FormulaBuilder {
            q,
            levels: &levels,
            size: 0,
        };
        if let Some(formula) = b.dist(r0, r1) {
            return Explanation::Formula {
                formula,
                holds_in: Side::First,
            };
        }
    }
    // Fallback: name a label step one side can take into a class the other cannot reach.
    let sig = |x: u32| -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = q.out(x).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (s0, s1) = (sig(r0), sig(r1));
    let text = match s0.iter().find(|x| s1.binary_search(x).is_err()) {
        Some(&(a, _)) => format!(
            "the first LTS can do \"{}\" to a state that no \"{}\"-step of the second LTS matches (the full distinguishing formula is too large to print)",
            q.labels[a as usize], q.labels[a as usize]
        ),
        None => match s1.iter().find(|x| s0.binary_search(x).is_err()) {
            Some(&(a, _)) => format!(
                "the second LTS can do \"{}\" to a state that no \"{}\"-step of the first LTS matches (the full distinguishing formula is too large to print)",
                q.labels[a as usize], q.labels[a as usize]
            ),
            None => "the initial states are not bisimilar (no explanation available)".into(),
        },
    };
    Explanation::FirstStep { text }
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_that_are_not_action_names_are_quoted_in_formulas() {
        use super::Formula::{self, And, Diamond, False, True};
        let d = |a: &str, g: Formula| Diamond(a.into(), Box::new(g));
        let cases = [
            ("a", "<a>true"),
            ("tau", "<tau>true"),
            ("send_1'", "<send_1'>true"),
            ("a(1, -2)", "<a(1, -2)>true"),
            ("f(g(x))", "<f(g(x))>true"),
            ("P.s->t", "<\"P.s->t\">true"),
            ("x y", "<\"x y\">true"),
            ("a && b", "<\"a && b\">true"),
            ("q\"u\\", "<\"q\\\"u\\\\\">true"),
            ("1a", "<\"1a\">true"),
            ("a(1))", "<\"a(1))\">true"),
            ("a(1)b", "<\"a(1)b\">true"),
            ("", "<\"\">true"),
        ];
        for (label, want) in cases {
            assert_eq!(d(label, True).to_string(), want, "{label:?}");
        }
        let f = Formula::Box(
            "x>y".into(),
            Box::new(And(vec![d("a", False), d("b c", True)])),
        );
        assert_eq!(f.to_string(), "[\"x>y\"](<a>false && <\"b c\">true)");
    }

    use super::*;

    use crate::post::graph::test_lts as lts;

    #[test]
    fn equal_up_to_bisimulation() {
        let a = lts(2, &["a"], &[(0, 0, 1), (1, 0, 0)]);
        let b = lts(1, &["a"], &[(0, 0, 0)]);
        assert_eq!(compare(a, b).unwrap().verdict, Equivalence::Equivalent);
    }

    #[test]
    fn trace_difference() {
        let a = lts(3, &["a", "b"], &[(0, 0, 1), (1, 1, 2)]);
        let b = lts(3, &["a", "c"], &[(0, 0, 1), (1, 1, 2)]);
        match compare(a.clone(), b.clone()).unwrap().verdict {
            Equivalence::Different {
                search: TraceSearch::Found { trace, possible_in },
                ..
            } => {
                assert_eq!(trace.len(), 2);
                let (yes, no) = if possible_in == Side::First {
                    (&a, &b)
                } else {
                    (&b, &a)
                };
                assert!(yes.accepts(&trace) && !no.accepts(&trace));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn trace_equivalent_gets_a_formula() {
        // a.b + a.c versus a.(b + c).
        let a = lts(
            4,
            &["a", "b", "c"],
            &[(0, 0, 1), (0, 0, 2), (1, 1, 3), (2, 2, 3)],
        );
        let b = lts(3, &["a", "b", "c"], &[(0, 0, 1), (1, 1, 2), (1, 2, 2)]);
        match compare(a.clone(), b.clone()).unwrap().verdict {
            Equivalence::Different {
                search: TraceSearch::TraceEquivalent,
                explanation: Some(Explanation::Formula { formula, holds_in }),
            } => {
                assert_eq!(holds_in, Side::First);
                assert!(formula.holds(&a, 0), "{formula}");
                assert!(!formula.holds(&b, 0), "{formula}");
            }
            other => panic!("{other:?}"),
        }
    }
}
