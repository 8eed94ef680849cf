//! Depth-first exploration with an explicit stack.
//!
//! A frame holds the state's id, its vector (in `states`, concatenated) and its enabled
//! transitions (in `enabled`, concatenated) with a cursor; a transition is fired only when the
//! search reaches it, so the stack costs one state vector plus 4 bytes per enabled transition
//! per level. Depth is the largest number of frames on the stack.

use super::{EngineOptions, ExploreStats, Order, Run};
use crate::error::{ExploreError, ModelError};
use crate::lts::LtsSink;
use crate::model::{Fired, Model, TransitionId};
use crate::store::{Insert, StateStore, Via};

struct Frame {
    id: u64,
    state_start: usize,
    enabled_start: usize,
    cursor: usize,
}

/// The DFS stack. Invariant: frame `i`'s state is `states[frames[i].state_start..]` up to the
/// next frame's start (the top frame's runs to the end), likewise for `enabled`.
#[derive(Default)]
struct Stack {
    frames: Vec<Frame>,
    states: Vec<u8>,
    enabled: Vec<TransitionId>,
    scratch: Vec<TransitionId>,
}

impl Stack {
    /// Pushes a newly found state; counts it as a deadlock if nothing is enabled.
    fn push(&mut self, run: &mut Run, id: u64, state: &[u8]) -> Result<(), ExploreError> {
        run.model.enabled(state, &mut self.scratch)?;
        if self.scratch.is_empty() {
            run.deadlocks += 1;
        }
        self.frames.push(Frame {
            id,
            state_start: self.states.len(),
            enabled_start: self.enabled.len(),
            cursor: 0,
        });
        self.states.extend_from_slice(state);
        self.enabled.extend_from_slice(&self.scratch);
        run.max_depth = run.max_depth.max(self.frames.len() as u64);
        Ok(())
    }

    fn pop(&mut self) {
        if let Some(f) = self.frames.pop() {
            self.states.truncate(f.state_start);
            self.enabled.truncate(f.enabled_start);
        }
    }
}

pub fn explore(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
) -> Result<ExploreStats, ExploreError> {
    let mut run = Run::new(model, sink, opts)?;
    let mut stack = Stack::default();
    let mut succ: Vec<u8> = Vec::new();

    let mut init = Vec::new();
    model.initial_state(&mut init)?;
    let Insert::New(id) = store.insert(&init, None)? else {
        unreachable!("the first insert into an empty store is new")
    };
    stack.push(&mut run, id, &init)?;
    let mut steps: u64 = 0;
    while let Some(top) = stack.frames.last_mut() {
        let next = top.enabled_start + top.cursor;
        if next == stack.enabled.len() {
            stack.pop();
            continue;
        }
        top.cursor += 1;
        let (src_id, t) = (top.id, stack.enabled[next]);
        let src = &stack.states[top.state_start..];
        let label = match model.fire(src, t, &mut succ)? {
            Fired::Enabled(l) => l,
            other => {
                return Err(ModelError::Other(format!(
                    "transition {} reported enabled but firing it gave {other:?}: the model breaks its determinism contract",
                    t.0
                ))
                .into())
            }
        };
        let via = Via {
            parent: src_id,
            transition: t,
            depth: stack.frames.len() as u64,
        };
        let ins = store.insert(&succ, Some(via))?;
        let (Insert::New(id) | Insert::Seen(id)) = ins;
        run.edge(src_id, label, id)?;
        if let Insert::New(id) = ins {
            stack.push(&mut run, id, &succ)?;
        }
        steps += 1;
        if steps & 0x3fff == 0 {
            run.tick(store.len(), stack.frames.len() as u64);
        }
    }
    run.finish(store)?;
    Ok(run.stats(store, Order::Dfs))
}
