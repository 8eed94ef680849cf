//! Breadth-first exploration.
//!
//! With a store that keeps state vectors, BFS order *is* id order: the open set is the id range
//! `[head, store.len())` and needs no separate queue. Other stores get an [`OpenQueue`] of
//! `(id, state)` records. Level boundaries are tracked by counting: level `d + 1` is complete
//! when every state of level `d` has been expanded.

use super::open::OpenQueue;
use super::{EngineOptions, ExploreStats, Order, Run};
use crate::error::ExploreError;
use crate::lts::LtsSink;
use crate::model::{LabelId, Model};
use crate::store::{Insert, StateBatch, StateStore};

enum Open {
    /// The store keeps states: the open set is the id range `[next, store.len())`.
    ById {
        next: u64,
    },
    Queue(OpenQueue),
}

pub fn explore(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
) -> Result<ExploreStats, ExploreError> {
    let mut run = Run::new(model, sink, opts)?;
    let mut state = Vec::new();
    let mut batch = StateBatch::default();
    let mut labels: Vec<LabelId> = Vec::new();
    let mut results: Vec<Insert> = Vec::new();
    model.initial_state(&mut state)?;
    let mut open = match store.insert(&state, None)? {
        Insert::New(0) | Insert::Seen(0) => {
            let mut probe = Vec::new();
            if store.get(0, &mut probe)? {
                Open::ById { next: 0 }
            } else {
                let mut q = OpenQueue::default();
                q.push(0, &state);
                Open::Queue(q)
            }
        }
        other => unreachable!("the initial state is numbered 0, got {other:?}"),
    };
    // States left to expand in the current level, and states found for the next one.
    let mut level_left: u64 = 1;
    let mut next_level: u64 = 0;
    let mut depth: u64 = 0;
    run.max_depth = 1;
    loop {
        let head = match &mut open {
            Open::ById { next } => {
                if *next == store.len() || !store.get(*next, &mut state)? {
                    break;
                }
                *next += 1;
                *next - 1
            }
            Open::Queue(q) => match q.pop(&mut state) {
                Some(id) => id,
                None => break,
            },
        };
        if level_left == 0 {
            level_left = next_level;
            next_level = 0;
            depth += 1;
            run.max_depth = depth + 1;
        }
        level_left -= 1;
        batch.clear();
        labels.clear();
        model.successors(&state, &mut |t, label, succ| {
            batch.push(t, succ);
            labels.push(label);
        })?;
        store.insert_batch(head, depth, &batch, &mut results)?;
        for (i, (&label, ins)) in labels.iter().zip(&results).enumerate() {
            let id = match *ins {
                Insert::New(id) => {
                    next_level += 1;
                    if let Open::Queue(q) = &mut open {
                        q.push(id, batch.get(i));
                    }
                    id
                }
                Insert::Seen(id) => id,
            };
            run.edge(head, label, id)?;
        }
        if labels.is_empty() {
            run.deadlocks += 1;
        }
        if head & 0x3fff == 0 {
            run.tick(store.len(), run.max_depth);
        }
    }
    run.finish(store)?;
    Ok(run.stats(store, Order::Bfs))
}
