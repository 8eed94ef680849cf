//! Breadth-first exploration.
//!
//! With a store that keeps state vectors, BFS order *is* id order: the open set is the id range
//! `[head, store.len())` and needs no separate queue. Level boundaries are tracked as ids:
//! level `d` ends where level `d+1`'s first state was numbered.

use super::{EngineOptions, ExploreStats, Order, Run};
use crate::error::{ExploreError, StoreError};
use crate::lts::LtsSink;
use crate::model::{LabelId, Model};
use crate::store::{Insert, StateBatch, StateStore};

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
        batch.clear();
        labels.clear();
        model.successors(&state, &mut |_t, label, succ| {
            batch.push(succ);
            labels.push(label);
        })?;
        store.insert_batch(&batch, &mut results)?;
        for (&label, ins) in labels.iter().zip(&results) {
            let (Insert::New(id) | Insert::Seen(id)) = *ins;
            run.edge(head, label, id)?;
        }
        let successors = labels.len();
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
