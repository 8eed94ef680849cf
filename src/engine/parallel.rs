//! Parallel BFS (`--threads N`) for a store with a shared index (docs/ARCHITECTURE.md,
//! "Parallel BFS").
//!
//! The BFS loop hands a chunk of consecutive parents (in the order a one-thread BFS expands
//! them) to N threads: each takes a contiguous part, generates its parents' successors with
//! its own copy of the model ([`Model::fork`]) and looks every successor up in the store's
//! read-only view ([`StateStore::shared_index`](crate::store::StateStore::shared_index)).
//! A successor found there was stored before the chunk began, so its id is the one a
//! sequential BFS finds; the others are *candidates*, each vector once per part. The store
//! is not changed while the threads run (they hold it borrowed immutably). Then the main
//! thread walks the parts in order, parent by parent, and numbers the candidates that no
//! earlier part had: new ids are handed out by one thread in sequential order, so the
//! numbering, the counts and the LTS file do not depend on N or on the scheduling.

use crate::error::ModelError;
use crate::model::{LabelId, Model};
use crate::store::full::{eq_bytes, SharedIndex};
use crate::store::StateBatch;

/// `known[i]` of a successor that was not found in the shared index, the first of its part
/// with that vector: the next entry of `cand`.
pub(super) const CANDIDATE: u64 = u64::MAX;
/// `known[i] = SAME | m`: the successor equals the part's candidate `m`, met earlier in the
/// part (a diamond inside the chunk); it gets the id that candidate gets.
pub(super) const SAME: u64 = 1 << 63;

/// Parents whose successors are looked up together: enough misses in flight to cover the
/// memory latency, few enough that their slots stay in L1.
const GROUP: usize = 8;

/// Bytes of successor vectors a part aims at: large enough that starting the threads costs
/// little against the work (about a millisecond per part), small enough to stay in cache.
/// The chunked path runs only when the store keeps its vectors in RAM, i.e. without a
/// budget; its buffers (a few MiB per thread) count in the process's RSS like the rest.
const PART_BYTES: usize = 2 << 20;

/// What one thread found for its part of a chunk, in parent order.
#[derive(Default)]
pub(super) struct Part {
    /// Successors per parent.
    pub counts: Vec<u32>,
    /// Per successor: its label, and its id if it was found in the shared index, else
    /// [`CANDIDATE`] or [`SAME`].
    pub labels: Vec<LabelId>,
    pub known: Vec<u64>,
    /// The candidates' transitions and vectors, in order, each vector once.
    pub cand: StateBatch,
    /// The candidates' hashes, and a table of them by vector.
    pub cand_hashes: Vec<u64>,
    table: hashbrown::HashTable<u32>,
    /// A group of parents' successors and their hashes.
    tmp: StateBatch,
    hashes: Vec<u64>,
}

impl Part {
    fn clear(&mut self) {
        self.counts.clear();
        self.labels.clear();
        self.known.clear();
        self.cand.clear();
        self.cand_hashes.clear();
        self.table.clear();
    }

    /// Expands parents `range` of the chunk.
    fn fill(
        &mut self,
        model: &dyn Model,
        view: SharedIndex<'_>,
        parents: &[u64],
        range: std::ops::Range<usize>,
    ) -> Result<(), ModelError> {
        self.clear();
        for group in parents[range].chunks(GROUP) {
            self.tmp.clear();
            for &parent in group {
                let before = self.labels.len();
                let (tmp, labels) = (&mut self.tmp, &mut self.labels);
                model.successors(view.state(parent), &mut |t, label, succ| {
                    tmp.push(t, succ);
                    labels.push(label);
                })?;
                self.counts.push((self.labels.len() - before) as u32);
            }
            // A lookup is two dependent misses (the slot, then the stored vector to compare):
            // ask for every slot of the group, then for every vector, then probe.
            self.hashes.clear();
            for i in 0..self.tmp.len() {
                let h = SharedIndex::hash(self.tmp.get(i));
                view.prefetch_slot(h);
                self.hashes.push(h);
            }
            for &h in &self.hashes {
                view.prefetch_state(h);
            }
            let (cand, hashes, table) = (&mut self.cand, &mut self.cand_hashes, &mut self.table);
            for i in 0..self.tmp.len() {
                let (s, h) = (self.tmp.get(i), self.hashes[i]);
                if let Some(id) = view.find(s, h) {
                    self.known.push(id);
                } else if let Some(&m) = table.find(h, |&m| eq_bytes(cand.get(m as usize), s)) {
                    self.known.push(SAME | m as u64);
                } else {
                    table.insert_unique(h, cand.len() as u32, |&m| hashes[m as usize]);
                    hashes.push(h);
                    cand.push(self.tmp.transition(i), s);
                    self.known.push(CANDIDATE);
                }
            }
        }
        Ok(())
    }
}

/// The forked models and the per-thread buffers.
pub(super) struct Workers {
    forks: Vec<Box<dyn Model + Send>>,
    pub parts: Vec<Part>,
    /// The chunk's parents, in BFS order.
    pub parents: Vec<u64>,
    /// The chunk's candidates by vector, as (part, candidate), and the ids each part's
    /// candidates got: the main thread's numbering with a shared index.
    pub chunk_table: hashbrown::HashTable<(u32, u32)>,
    pub part_ids: Vec<Vec<u64>>,
    /// Parents expanded and successors found so far, to size the chunks.
    seen: (u64, u64),
    /// Bytes of a state vector (a guess for variable-width models).
    width: usize,
}

impl Workers {
    /// Workers for `threads` threads (the calling one included), fewer if the model cannot
    /// be forked (then the calling thread alone: the chunked path with its grouped lookups
    /// is faster than the one-parent-at-a-time loop even on one thread).
    pub fn new(model: &dyn Model, threads: usize) -> Workers {
        let forks: Vec<_> = (1..threads).map_while(|_| model.fork()).collect();
        let threads = forks.len() + 1;
        let width = model.state_len().unwrap_or(64).max(1);
        Workers {
            parts: (0..threads).map(|_| Part::default()).collect(),
            forks,
            parents: Vec::new(),
            chunk_table: hashbrown::HashTable::new(),
            part_ids: vec![Vec::new(); threads],
            seen: (0, 0),
            width,
        }
    }

    /// How many parents the next chunk takes: about [`PART_BYTES`] of successor vectors per
    /// thread, judged from the chunks so far.
    pub fn chunk_parents(&self) -> usize {
        let (parents, succs) = self.seen;
        let fanout = succs.checked_div(parents).unwrap_or(8).max(1) as usize;
        (PART_BYTES / (fanout * self.width)).clamp(16, 16_384) * self.parts.len()
    }

    /// Expands the chunk's parents on every thread; `model` is the calling thread's.
    pub fn expand(&mut self, model: &dyn Model, view: SharedIndex<'_>) -> Result<(), ModelError> {
        let n = self.parts.len();
        let len = self.parents.len();
        let bound = |i: usize| i * len / n;
        let parents = &self.parents;
        let (first, rest) = self.parts.split_first_mut().expect("at least one part");
        let results: Vec<Result<(), ModelError>> = std::thread::scope(|s| {
            let handles: Vec<_> = rest
                .iter_mut()
                .zip(self.forks.iter_mut())
                .enumerate()
                .map(|(k, (part, m))| {
                    let range = bound(k + 1)..bound(k + 2);
                    s.spawn(move || part.fill(&**m, view, parents, range))
                })
                .collect();
            let mut results = vec![first.fill(model, view, parents, 0..bound(1))];
            results.extend(handles.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }));
            results
        });
        for r in results {
            r?;
        }
        let succs: usize = self.parts.iter().map(|p| p.labels.len()).sum();
        self.seen.0 += len as u64;
        self.seen.1 += succs as u64;
        Ok(())
    }
}
