//! Model front ends and the byte-level [`Model`] interface every engine and store works on.
//!
//! A model is a deterministic labelled transition system given implicitly: an initial state
//! (a byte vector) and, for each state, the enabled transitions with their successors. The
//! front ends are [`pnml`] (Place/Transition Petri nets), [`aut`] (an explicit Aldebaran LTS
//! explored as a model), [`dve`] (DiVinE's DVE language, the BEEM benchmark) and [`typed`]
//! (models written in Rust).

pub mod aut;
pub mod dve;
pub mod petri;
pub mod pnml;
pub mod typed;

use crate::error::ModelError;

/// A transition identifier: dense (`0..transition_count()`) and stable for the life of the model.
///
/// Determinism contract: for a state `s` and an id `t`, firing `t` in `s` either is disabled or
/// yields exactly one successor. `(s, t) -> s'` is a *function*; paths can therefore be stored
/// as `(parent, transition)` pairs and replayed (ComBack, Δ-markings rely on this).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransitionId(pub u32);

/// A label (action name) identifier, dense in `0..label_count()`. Several transitions may share a
/// label; the label table may grow while exploring (typed models intern labels lazily).
/// Defined with the LTS formats (`lts` sits below the front ends, which read `.aut` with its
/// reader) and the same type here.
pub use crate::lts::LabelId;

/// Checks that a state vector handed to a model has the length `len` of the model's states;
/// `model` names the kind of model in the error.
pub(crate) fn check_state_len(s: &[u8], len: usize, model: &str) -> Result<(), ModelError> {
    if s.len() != len {
        return Err(ModelError::Other(format!(
            "state vector of {} bytes given to {model} whose states have {len} bytes",
            s.len()
        )));
    }
    Ok(())
}

/// The outcome of firing (or unfiring) one transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fired {
    /// The transition was enabled; the successor (predecessor for `unfire`) was written.
    Enabled(LabelId),
    /// The transition is not enabled in that state (for `unfire`: no valid predecessor).
    Disabled,
    /// The model cannot do this (e.g. backward firing on an explicit LTS).
    Unsupported,
}

/// The byte-level model interface.
///
/// Contract for implementors:
/// * `initial_state` and all successors are byte vectors; equal states have equal bytes.
/// * `successors` reports every enabled transition exactly once, in ascending `TransitionId`
///   order, and reports the same successors every time it is called on the same state.
/// * `fire(s, t)` produces the same successor and label as `successors(s)` reported for `t`.
/// * `unfire(s', t)`, when supported, yields the unique `s` with `fire(s, t) = s'`, or
///   `Disabled` when there is none (e.g. a token count would go negative).
/// * `dependent(a, b)` must be `true` whenever firing `a` can enable, disable or change the
///   effect of `b` (sleep sets rely on it); `true` is always a safe answer.
/// * Errors (e.g. a token counter overflowing) are reported, never wrapped silently.
pub trait Model {
    /// A short human description, e.g. `pnml: 25 places, 25 transitions`.
    fn describe(&self) -> String;

    /// Writes the initial state into `out` (cleared first).
    fn initial_state(&self, out: &mut Vec<u8>) -> Result<(), ModelError>;

    /// The fixed state vector length in bytes, when every state has the same length.
    fn state_len(&self) -> Option<usize>;

    /// An upper bound (exclusive) on transition ids.
    fn transition_count(&self) -> usize;

    /// Pushes every enabled transition of `src` with its label and successor into `sink`.
    fn successors(
        &self,
        src: &[u8],
        sink: &mut dyn FnMut(TransitionId, LabelId, &[u8]),
    ) -> Result<(), ModelError>;

    /// Writes the ids of the transitions enabled in `src` into `out` (cleared first), ascending.
    fn enabled(&self, src: &[u8], out: &mut Vec<TransitionId>) -> Result<(), ModelError> {
        out.clear();
        self.successors(src, &mut |t, _, _| out.push(t))
    }

    /// Fires one transition: writes the successor into `dst` (cleared first) when enabled.
    fn fire(&self, src: &[u8], t: TransitionId, dst: &mut Vec<u8>) -> Result<Fired, ModelError>;

    /// Fires `t` backwards: writes the predecessor of `dst` by `t` into `src`.
    fn unfire(
        &self,
        _dst: &[u8],
        _t: TransitionId,
        _src: &mut Vec<u8>,
    ) -> Result<Fired, ModelError> {
        Ok(Fired::Unsupported)
    }

    /// Whether transitions `a` and `b` may interfere (see the trait docs); `true` is safe.
    fn dependent(&self, _a: TransitionId, _b: TransitionId) -> bool {
        true
    }

    /// The kind of transition `t`, for the type-oriented replacement strategy of
    /// `--store cache` (the paper's "transition types"): a cached state reached by a
    /// transition of a lower kind is evicted first. Higher kinds mark transitions whose
    /// target states are worth keeping because many paths converge on them. `0` for every
    /// transition (the default) makes that strategy a random one. P/T nets derive kinds from
    /// their arcs (`petri.rs`, [`KIND_LOCAL`] .. [`KIND_SYNC`]).
    fn transition_kind(&self, _t: TransitionId) -> u8 {
        0
    }

    /// Which parts of the state each transition touches, for stores whose compression
    /// depends on where values that change together lie (the tree store regroups the
    /// state's bytes by it): `(unit, touched)`, the state being `state_len / unit` units of
    /// `unit` bytes and `touched[t]` the units transition `t` reads or writes. `None` (the
    /// default): not known, the layout stays as it is.
    ///
    /// Exactness-critical contract: firing `t` leaves every unit outside `touched[t]` as it
    /// was, and sets each unit of `touched[t]` to a value that depends only on `t` and that
    /// unit's old value (a P/T net adds the post-set weight less the pre-set weight). The
    /// tree store looks for changes only in the touched units, and remembers what a
    /// transition made of a part of the state to answer the same step from the same part
    /// later without reading it (store/tree, "Steps").
    fn touched_units(&self) -> Option<(usize, Vec<Vec<u32>>)> {
        None
    }

    /// An independent copy for another thread (parallel BFS, `--threads`): the same states,
    /// transition and label ids, with its own scratch buffers. `None` (the default) when the
    /// model cannot be copied, e.g. because its label table grows while exploring (typed
    /// models); the search then runs on one thread.
    /// The label of a transition this process found to lead to the model's *error state*
    /// (DVE: DiVinE's state for a division by zero, an index out of bounds or a value out
    /// of range in a guard or effect), the first one met; `None` if none did (or the model
    /// has no error state). Reported at the end of a run: otherwise the error state is only
    /// one more deadlock.
    fn error_transition(&self) -> Option<String> {
        None
    }

    fn fork(&self) -> Option<Box<dyn Model + Send>> {
        None
    }

    /// The number of labels known so far.
    fn label_count(&self) -> usize;

    /// The name of a label.
    fn label_name(&self, l: LabelId) -> String;

    /// Renders a state for humans (traces, error messages).
    fn format_state(&self, state: &[u8]) -> String {
        format!("{state:?}")
    }
}

/// Transition kind of a local step: at most one input and one output place (a sequential
/// component moving on).
pub const KIND_LOCAL: u8 = 0;
/// Transition kind of a fork or a choice into several places: one input place, several
/// outputs.
pub const KIND_FORK: u8 = 1;
/// Transition kind of a synchronisation: several input places (a join, a rendez-vous, a
/// resource taken). Interleavings converge on its targets, which are met again most often.
pub const KIND_SYNC: u8 = 2;

/// Which front end reads a model file, chosen from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelFormat {
    Pnml,
    Aut,
    Dve,
}

impl ModelFormat {
    /// Picks the front end from a file extension.
    pub fn from_path(path: &std::path::Path) -> Result<Self, ModelError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("pnml") => Ok(ModelFormat::Pnml),
            Some("aut") => Ok(ModelFormat::Aut),
            Some("dve") => Ok(ModelFormat::Dve),
            _ => Err(ModelError::UnknownFormat {
                path: path.to_path_buf(),
                ext: path
                    .extension()
                    .map(|e| e.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            }),
        }
    }
}

/// A model file as read from disk, before it is compiled into a [`Model`].
pub enum Source {
    /// A Place/Transition net; compiled with a counter width chosen by the driver.
    Pnml(pnml::PetriNet),
    /// An explicit LTS explored as a model.
    Aut(aut::AutModel),
    /// A DVE process system, compiled.
    Dve(Box<dve::DveModel>),
}

impl Source {
    /// Reads a model file with the front end its extension names.
    pub fn read(path: &std::path::Path) -> Result<Source, ModelError> {
        match ModelFormat::from_path(path)? {
            ModelFormat::Pnml => Ok(Source::Pnml(pnml::parse_file(path)?)),
            ModelFormat::Aut => Ok(Source::Aut(aut::AutModel::load(path)?)),
            ModelFormat::Dve => Ok(Source::Dve(Box::new(dve::load(path)?))),
        }
    }
}
