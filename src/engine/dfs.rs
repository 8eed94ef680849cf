//! Depth-first exploration with an explicit stack.
//!
//! The top frame is kept decoded: the state's id, its vector, its enabled transitions and a
//! cursor; a transition is fired only when the search reaches it. Going deeper encodes the
//! top frame as one record `id: u64 | cursor: u32 | n: u32 | n × transition: u32 | state` and
//! pushes it onto the frame stack — a RAM byte vector, or a [`SegStack`] whose bottom spills
//! to compressed segment files when the run has a storage budget — so the stack costs one
//! state vector plus 4 bytes per enabled transition per level, wherever it lives.
//! Depth is the largest number of frames (the stack plus the top).

use super::observe::{Phase, Position};
use super::{commit_checkpoint, EngineOptions, ExploreStats, Order, Run, Session};
use crate::checkpoint::EngineMark;
use crate::error::{CheckpointError, ExploreError};
use crate::lts::LtsSink;
use crate::model::{Model, TransitionId};
use crate::storage::frontier::Stack;
use crate::store::{Insert, PathStep, StateStore, Via};

/// The decoded top frame.
#[derive(Default)]
struct Top {
    id: u64,
    cursor: usize,
    enabled: Vec<TransitionId>,
    state: Vec<u8>,
}

fn encode(top: &Top, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&top.id.to_le_bytes());
    out.extend_from_slice(&(top.cursor as u32).to_le_bytes());
    out.extend_from_slice(&(top.enabled.len() as u32).to_le_bytes());
    for t in &top.enabled {
        out.extend_from_slice(&t.0.to_le_bytes());
    }
    out.extend_from_slice(&top.state);
}

/// Whether `rec` is a whole frame of a model whose states are `state_len` bytes (if fixed)
/// and which has `transitions` transitions ([`decode`] indexes it unchecked): a
/// checkpoint's top frame is checked before it is decoded.
fn frame_fits(rec: &[u8], state_len: Option<usize>, transitions: usize) -> bool {
    let u32_at = |at: usize| {
        rec.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let (Some(cursor), Some(n)) = (u32_at(8), u32_at(12)) else {
        return false;
    };
    let Some(state) = (16 + 4 * n as u64)
        .try_into()
        .ok()
        .and_then(|at: usize| rec.len().checked_sub(at))
    else {
        return false;
    };
    cursor <= n
        && state_len.is_none_or(|l| l == state)
        && (0..n).all(|i| u32_at(16 + 4 * i).is_some_and(|t| t < transitions))
}

fn decode(rec: &[u8], top: &mut Top) {
    let u32_at = |at: usize| u32::from_le_bytes(rec[at..at + 4].try_into().unwrap());
    top.id = u64::from_le_bytes(rec[0..8].try_into().unwrap());
    top.cursor = u32_at(8) as usize;
    let n = u32_at(12) as usize;
    top.enabled.clear();
    top.enabled
        .extend((0..n).map(|i| TransitionId(u32_at(16 + 4 * i))));
    top.state.clear();
    top.state.extend_from_slice(&rec[16 + 4 * n..]);
}

pub fn explore(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
    mut session: Session,
) -> Result<ExploreStats, ExploreError> {
    let storage = session.storage;
    let mut run = Run::new(model, sink, opts, session.observer.take())?;
    let mut depth: u64 = 1;
    let mut rec: Vec<u8> = Vec::new();
    let mut succ: Vec<u8> = Vec::new();
    let mut top = Top::default();
    let mut frames = match session.resume.take() {
        Some((mark, counters)) => {
            let (
                EngineMark::Dfs {
                    depth: d,
                    top: t,
                    stack,
                },
                Some(st),
            ) = (mark, storage)
            else {
                return Err(super::corrupt_mark(
                    storage,
                    "the engine's mark is not of a DFS run with segment storage".into(),
                ));
            };
            if d == 0 || !frame_fits(&t, model.state_len(), model.transition_count()) {
                return Err(ExploreError::Checkpoint(CheckpointError::Corrupt {
                    path: st.dir().join(crate::checkpoint::MANIFEST),
                    problem: format!(
                        "the DFS's top frame ({} bytes, depth {d}) does not fit the model",
                        t.len()
                    ),
                }));
            }
            run.restore(&counters);
            depth = d;
            decode(&t, &mut top);
            if top.id >= store.len() {
                return Err(ExploreError::Checkpoint(CheckpointError::Corrupt {
                    path: st.dir().join(crate::checkpoint::MANIFEST),
                    problem: format!(
                        "the DFS's top frame names state {}, of {} stored",
                        top.id,
                        store.len()
                    ),
                }));
            }
            // The frame's transitions are the ones its state enables: a state changed in
            // the frame (its transitions then fired where they are disabled) had been a
            // model error, exit 3.
            let mut enabled = Vec::new();
            model.enabled(&top.state, &mut enabled)?;
            if enabled != top.enabled {
                return Err(ExploreError::Checkpoint(CheckpointError::Corrupt {
                    path: st.dir().join(crate::checkpoint::MANIFEST),
                    problem: format!(
                        "the DFS's top frame lists {} transitions its state does not enable (it enables {})",
                        top.enabled.len(),
                        enabled.len()
                    ),
                }));
            }
            store.on_search_path(PathStep::Expand {
                id: top.id,
                depth: depth - 1,
                state: &top.state,
            });
            Stack::Spilled(Box::new(st.open_stack(STACK, stack)?))
        }
        None => {
            let frames = match storage {
                Some(st) => Stack::Spilled(Box::new(st.stack(STACK)?)),
                None => Stack::Ram(Vec::new()),
            };
            model.initial_state(&mut top.state)?;
            let Insert::New(id) = store.insert(&top.state, None)? else {
                unreachable!("the first insert into an empty store is new")
            };
            top.id = id;
            store.on_search_path(PathStep::Expand {
                id,
                depth: 0,
                state: &top.state,
            });
            model.enabled(&top.state, &mut top.enabled)?;
            if top.enabled.is_empty() {
                run.deadlocks += 1;
            }
            run.max_depth = 1;
            frames
        }
    };
    let mut steps: u64 = 0;
    run.phase = Phase::Expanding;
    loop {
        if let Some((ck, due)) = session.poll(steps) {
            let (m, files) = frames.checkpoint(STACK)?;
            encode(&top, &mut rec);
            let mark = EngineMark::Dfs {
                depth,
                top: rec.clone(),
                stack: m,
            };
            commit_checkpoint(ck, due, &mut run, store, mark, files)?;
        }
        if top.cursor < top.enabled.len() {
            let t = top.enabled[top.cursor];
            top.cursor += 1;
            let label = super::fire_enabled(model, &top.state, t, &mut succ)?;
            let via = Via {
                parent: top.id,
                transition: t,
                depth,
            };
            match store.insert(&succ, Some(via))? {
                Insert::New(id) => {
                    run.edge(top.id, label, id)?;
                    encode(&top, &mut rec);
                    frames.push(&rec)?;
                    std::mem::swap(&mut top.state, &mut succ);
                    top.id = id;
                    top.cursor = 0;
                    // `top` is at depth `depth` (the initial state at 0).
                    store.on_search_path(PathStep::Expand {
                        id,
                        depth,
                        state: &top.state,
                    });
                    model.enabled(&top.state, &mut top.enabled)?;
                    if top.enabled.is_empty() {
                        run.deadlocks += 1;
                    }
                    depth += 1;
                    run.max_depth = run.max_depth.max(depth);
                }
                Insert::Seen(id) => run.edge(top.id, label, id)?,
            }
        } else if frames.pop(&mut rec)? {
            decode(&rec, &mut top);
            depth -= 1;
            store.on_search_path(PathStep::Backtrack {
                id: top.id,
                depth: depth - 1,
            });
        } else {
            break;
        }
        steps += 1;
        if steps & 0x3fff == 0 {
            run.tick(store, Position::Dfs { depth })?;
        }
    }
    run.position = Position::Dfs { depth };
    run.finish(store)?;
    Ok(run.stats(store, Order::Dfs))
}

/// Name of the DFS stack's file.
const STACK: &str = "dfs.stack";
