//! Models written in Rust: typed states and actions, adapted to the byte-level [`Model`].
//!
//! Implement [`TypedModel`] and wrap it in [`Typed`]. States are encoded with bincode 2
//! (standard configuration), so state types must encode deterministically: use `Vec`,
//! `BTreeMap` and plain fields, not `HashMap`/`HashSet` (their iteration order varies).
//!
//! The transition id of an action is its index in the list `actions` returns for that state,
//! so `actions` must list them in a deterministic order and `next` must be a function.
//! Labels are the actions' `label` strings, interned on first use.
//!
//! Encoded states vary in width (`Model::state_len` is `None`), so the stores that need
//! fixed-width states refuse a typed model with a message saying so: Δ, the tree store and
//! the full store once it spills (`--memory`, `SpillPolicy::Always`). ComBack, hash
//! compaction and the full store in RAM take it. The label table grows while exploring, so
//! a typed model does not fork: the search runs on one thread.
//!
//! ```
//! use spillway::model::typed::{Typed, TypedModel};
//! use spillway::run::{ExploreConfig, Search};
//!
//! /// A counter modulo 5 that can step by one or two.
//! struct Counter;
//! impl TypedModel for Counter {
//!     type State = u8;
//!     type Action = u8;
//!     fn initial(&self) -> u8 { 0 }
//!     fn actions(&self, _s: &u8, out: &mut Vec<u8>) { out.extend([1, 2]) }
//!     fn next(&self, s: &u8, a: &u8) -> Option<u8> { Some((s + a) % 5) }
//!     fn label(&self, a: &u8) -> String { format!("add{a}") }
//! }
//! let stats = Search::model(&Typed::new(Counter)).config(ExploreConfig::default()).run().unwrap();
//! assert_eq!((stats.states, stats.transitions), (5, 10));
//! ```

use super::{Fired, LabelId, Model, TransitionId};
use crate::error::ModelError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;

/// A model with typed states and actions.
pub trait TypedModel {
    type State: Serialize + DeserializeOwned;
    type Action;

    /// The initial state.
    fn initial(&self) -> Self::State;
    /// The actions to try in `state`, in a deterministic order (their index is the
    /// transition id). An action may turn out disabled: `next` then returns `None`.
    fn actions(&self, state: &Self::State, out: &mut Vec<Self::Action>);
    /// The successor of `state` by `action`, or `None` when the action is disabled.
    fn next(&self, state: &Self::State, action: &Self::Action) -> Option<Self::State>;
    /// The label of an action in the output LTS.
    fn label(&self, action: &Self::Action) -> String;
    /// Whether two actions (by transition id) may interfere; `true` is always safe.
    fn dependent(&self, _a: TransitionId, _b: TransitionId) -> bool {
        true
    }
    /// A human-readable rendering of a state.
    fn format_state(&self, _state: &Self::State) -> Option<String> {
        None
    }
}

struct Labels {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

/// Adapts a [`TypedModel`] to the byte-level [`Model`] interface.
pub struct Typed<M: TypedModel> {
    model: M,
    labels: RefCell<Labels>,
    actions: RefCell<Vec<M::Action>>,
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

impl<M: TypedModel> Typed<M> {
    pub fn new(model: M) -> Self {
        Typed {
            model,
            labels: RefCell::new(Labels {
                names: Vec::new(),
                ids: HashMap::new(),
            }),
            actions: RefCell::new(Vec::new()),
        }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.model
    }

    fn encode(&self, s: &M::State, out: &mut Vec<u8>) -> Result<(), ModelError> {
        out.clear();
        bincode::serde::encode_into_std_write(s, out, config())
            .map_err(|e| ModelError::Other(format!("cannot encode state: {e}")))?;
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<M::State, ModelError> {
        let (s, used) = bincode::serde::decode_from_slice(bytes, config())
            .map_err(|e| ModelError::Other(format!("cannot decode state: {e}")))?;
        if used != bytes.len() {
            return Err(ModelError::Other("state vector has trailing bytes".into()));
        }
        Ok(s)
    }

    fn intern(&self, a: &M::Action) -> LabelId {
        let name = self.model.label(a);
        let mut l = self.labels.borrow_mut();
        if let Some(&id) = l.ids.get(&name) {
            return LabelId(id);
        }
        let id = l.names.len() as u32;
        l.names.push(name.clone());
        l.ids.insert(name, id);
        LabelId(id)
    }
}

impl<M: TypedModel> Model for Typed<M> {
    fn describe(&self) -> String {
        format!("Rust model {}", std::any::type_name::<M>())
    }

    fn initial_state(&self, out: &mut Vec<u8>) -> Result<(), ModelError> {
        self.encode(&self.model.initial(), out)
    }

    fn state_len(&self) -> Option<usize> {
        None
    }

    fn transition_count(&self) -> usize {
        u32::MAX as usize
    }

    fn successors(
        &self,
        src: &[u8],
        sink: &mut dyn FnMut(TransitionId, LabelId, &[u8]),
    ) -> Result<(), ModelError> {
        let s = self.decode(src)?;
        let mut actions = std::mem::take(&mut *self.actions.borrow_mut());
        actions.clear();
        self.model.actions(&s, &mut actions);
        let mut buf = Vec::new();
        let mut result = Ok(());
        for (i, a) in actions.iter().enumerate() {
            if let Some(next) = self.model.next(&s, a) {
                if let Err(e) = self.encode(&next, &mut buf) {
                    result = Err(e);
                    break;
                }
                let label = self.intern(a);
                sink(TransitionId(i as u32), label, &buf);
            }
        }
        *self.actions.borrow_mut() = actions;
        result
    }

    fn fire(&self, src: &[u8], t: TransitionId, dst: &mut Vec<u8>) -> Result<Fired, ModelError> {
        let s = self.decode(src)?;
        let mut actions = Vec::new();
        self.model.actions(&s, &mut actions);
        let Some(a) = actions.get(t.0 as usize) else {
            return Ok(Fired::Disabled);
        };
        match self.model.next(&s, a) {
            Some(next) => {
                self.encode(&next, dst)?;
                Ok(Fired::Enabled(self.intern(a)))
            }
            None => Ok(Fired::Disabled),
        }
    }

    fn dependent(&self, a: TransitionId, b: TransitionId) -> bool {
        self.model.dependent(a, b)
    }

    fn label_count(&self) -> usize {
        self.labels.borrow().names.len()
    }

    fn label_name(&self, l: LabelId) -> String {
        self.labels.borrow().names[l.0 as usize].clone()
    }

    fn format_state(&self, state: &[u8]) -> String {
        match self.decode(state) {
            Ok(s) => self
                .model
                .format_state(&s)
                .unwrap_or_else(|| format!("{state:?}")),
            Err(_) => format!("{state:?}"),
        }
    }
}
