//! Offline post-processing of finished LTS files: `spillway lts <tool>`.
//!
//! * [`info`] — counts, labels, deadlocks, format and compression (streams the file once);
//! * [`convert`] — between `.slts`, `.aut` and `.fsm`, and to `.dot`, with hiding and renaming of the
//!   internal action (streams the file once);
//! * [`reduce`] — minimisation modulo strong bisimulation by partition refinement in
//!   O(m log n) (Paige–Tarjan with per-(state, label, compound block) counters);
//! * [`branching`] — minimisation modulo branching bisimulation (Groote–Vaandrager, O(m·n));
//! * [`compare`] — strong (or branching) bisimilarity of two LTSs, with a distinguishing trace
//!   or formula;
//! * [`deadlocks`] — deadlock count and shortest traces to deadlocks.
//!
//! [`input`] opens any readable format (`.slts`, `.aut`, `.fsm`) behind one streaming interface;
//! [`graph`] holds an LTS in compact CSR arrays (8 bytes per transition + 4 per state) for the
//! tools that need random access. Tools that load a whole LTS first print an estimate of the
//! memory they need, computed from the counts in the file's header or footer ([`memory`]).

pub mod branching;
pub mod compare;
pub mod convert;
pub mod deadlocks;
pub mod graph;
pub mod info;
pub mod input;
pub mod memory;
pub mod reduce;
pub mod sources;

/// The equivalence `reduce` and `compare` work modulo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bisimulation {
    /// Strong bisimulation: every label is observable.
    Strong,
    /// Branching bisimulation: `tau` / `i` is the internal action.
    Branching,
}
