//! Breadth-first exploration.
//!
//! With a store that keeps state vectors, BFS order *is* id order: the open set is the id range
//! `[head, store.len())` and needs no separate queue. Level boundaries are tracked as ids:
//! level `d` ends where level `d+1`'s first state was numbered.

use super::{EngineOptions, ExploreStats, Order, Run};
use crate::error::{ExploreError, StoreError};
use crate::lts::LtsSink;
use crate::model::Model;
use crate::store::{Insert, StateStore};

pub fn explore(
    model: &dyn Model,
    store: &mut dyn StateStore,
    sink: &mut dyn LtsSink,
    opts: &EngineOptions,
) -> Result<ExploreStats, ExploreError> {
    let mut run = Run::new(model, sink, opts)?;
    let mut state = Vec::new();
    model.initial_state(&mut state)?;
    store.insert(&state)?;
    let mut head: u64 = 0;
    let mut level_end: u64 = 1;
    run.max_depth = 1;
    while head < store.len() {
        if head == level_end {
            level_end = store.len();
            run.max_depth += 1;
        }
        if !store.get(head, &mut state) {
            return Err(StoreError::Invalid {
                store: store.name(),
                message: "BFS needs a store that keeps state vectors".into(),
            }
            .into());
        }
        let mut failure: Option<ExploreError> = None;
        let mut successors = 0u64;
        let r = &mut run;
        model.successors(&state, &mut |_t, label, succ| {
            if failure.is_some() {
                return;
            }
            successors += 1;
            let result = store
                .insert(succ)
                .map_err(ExploreError::from)
                .and_then(|ins| {
                    let (Insert::New(id) | Insert::Seen(id)) = ins;
                    r.edge(head, label, id)
                });
            if let Err(e) = result {
                failure = Some(e);
            }
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        if successors == 0 {
            run.deadlocks += 1;
        }
        head += 1;
        if head & 0x3fff == 0 {
            run.tick(store.len(), run.max_depth);
        }
    }
    run.finish(store)?;
    Ok(run.stats(store, Order::Bfs))
}
