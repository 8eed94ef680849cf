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

pub fn explore(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
) -> Result<ExploreStats, ExploreError> {
    let mut run = Run::new(model, sink, opts)?;
    let mut frames: Vec<Frame> = Vec::new();
    let mut states: Vec<u8> = Vec::new();
    let mut enabled: Vec<TransitionId> = Vec::new();
    let mut scratch: Vec<TransitionId> = Vec::new();
    let mut succ: Vec<u8> = Vec::new();

    let mut init = Vec::new();
    model.initial_state(&mut init)?;
    let Insert::New(id) = store.insert(&init, None)? else {
        unreachable!("the first insert into an empty store is new")
    };
    push(
        model,
        &mut run,
        &mut frames,
        &mut states,
        &mut enabled,
        &mut scratch,
        id,
        &init,
    )?;
    let mut steps: u64 = 0;
    while let Some(top) = frames.last_mut() {
        let next = top.enabled_start + top.cursor;
        if next < enabled.len() {
            top.cursor += 1;
            let (src_id, t) = (top.id, enabled[next]);
            let src = &states[top.state_start..];
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
                depth: frames.len() as u64,
            };
            match store.insert(&succ, Some(via))? {
                Insert::New(id) => {
                    run.edge(src_id, label, id)?;
                    let s = std::mem::take(&mut succ);
                    push(
                        model,
                        &mut run,
                        &mut frames,
                        &mut states,
                        &mut enabled,
                        &mut scratch,
                        id,
                        &s,
                    )?;
                    succ = s;
                }
                Insert::Seen(id) => run.edge(src_id, label, id)?,
            }
        } else {
            let f = frames.pop().expect("non-empty");
            states.truncate(f.state_start);
            enabled.truncate(f.enabled_start);
        }
        steps += 1;
        if steps & 0x3fff == 0 {
            run.tick(store.len(), frames.len() as u64);
        }
    }
    run.finish(store)?;
    Ok(run.stats(store, Order::Dfs))
}

#[allow(clippy::too_many_arguments)]
fn push(
    model: &dyn Model,
    run: &mut Run,
    frames: &mut Vec<Frame>,
    states: &mut Vec<u8>,
    enabled: &mut Vec<TransitionId>,
    scratch: &mut Vec<TransitionId>,
    id: u64,
    state: &[u8],
) -> Result<(), ExploreError> {
    model.enabled(state, scratch)?;
    if scratch.is_empty() {
        run.deadlocks += 1;
    }
    frames.push(Frame {
        id,
        state_start: states.len(),
        enabled_start: enabled.len(),
        cursor: 0,
    });
    states.extend_from_slice(state);
    enabled.extend_from_slice(scratch);
    run.max_depth = run.max_depth.max(frames.len() as u64);
    Ok(())
}
