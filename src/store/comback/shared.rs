//! ComBack's view for parallel BFS ([`SharedIndex::Comback`](crate::store::SharedIndex)):
//! the state table, the state cache, the backedges and the chunk's parents, read by every
//! thread while the store is borrowed (docs/COMBACK.md, "Parallel BFS").
//!
//! A worker settles a successor from its first fingerprint match: no match, it is new
//! ([`Found::Absent`]); a match whose vector — cached, a parent of the chunk, or rebuilt by
//! the worker itself by replaying backedges from one of those or the initial state — equals
//! it, it is that state ([`Found::Stored`]). A match that is another state (a collision: the
//! probe goes on, and a descriptor may have to be read) is [`Found::Undecided`], and the
//! numbering thread, as it numbers the part during the expansion of the others, asks
//! [`Resolve`]: the one-thread lookup without its writes. Nothing is cached while the
//! threads run (they all read the cache): what each rebuilt stays in its
//! [`Rebuilt`] until `CombackStore::shared_done` caches it, as the one-thread path caches
//! what it replays. So every answer is the one-thread path's, and which states are taken
//! for equal never depends on the scheduling.
//!
//! Nothing here depends on depths: in BFS a state found again was stored at a depth no
//! greater than the new edge's (levels are expanded in order), so variant 1 (path
//! optimisation) never repoints there. BFS pins no search-path states either.

use super::backedge::{self, Descriptors};
use super::cache::Cache;
use super::table::StateTable;
use super::{Counters, WaitingBuffer};
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::storage::vec::{SegReader, SegView};
use crate::store::full::eq_bytes;
use crate::store::path::{self, Link, PathRecords, Rebuilt, Scratch};
use crate::store::{Found, Lookup, Probe, Resolver, StateBatch, StateId};

/// See the module documentation.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub(super) table: &'a StateTable,
    pub(super) cache: &'a Cache,
    /// The backedge records (each thread reads them with its own [`SegReader`]).
    pub(super) back: SegView<'a>,
    /// States stored.
    pub(super) len: u64,
    pub(super) initial: &'a [u8],
    /// The chunk's parents, rebuilt by `CombackStore::prepare_shared`.
    pub(super) waiting: &'a WaitingBuffer,
    /// The descriptor's bits of a hash ([`crate::store::top_mask`]).
    pub(super) mask: u64,
}

/// Where a replay starts.
#[derive(Clone, Copy)]
enum From {
    Rebuilt(StateId),
    Cached(StateId),
    Waiting(StateId),
    Initial,
}

/// The records as a thread walks them: backedges, and as starts the states it rebuilt in
/// this chunk, the cache, the chunk's parents and the initial state. Nothing is written.
struct Walk<'v, 'a> {
    view: &'v Shared<'a>,
    r: &'v mut SegReader,
    rebuilt: &'v mut Rebuilt,
}

impl Walk<'_, '_> {
    fn vector(&self, from: From, out: &mut Vec<u8>) -> Result<(), StoreError> {
        let missing = |id| {
            StoreError::Storage(StorageError::Invalid(format!(
                "comback: state {id} left the caches during a parallel chunk"
            )))
        };
        let v = self.view;
        match from {
            From::Rebuilt(id) => out.extend_from_slice(self.rebuilt.get(id).ok_or(missing(id))?),
            From::Cached(id) => v.cache.get(id).ok_or(missing(id))?.0.append_to(out),
            From::Waiting(id) => out.extend_from_slice(v.waiting.get(id).ok_or(missing(id))?),
            From::Initial => out.extend_from_slice(v.initial),
        }
        Ok(())
    }
}

impl PathRecords for Walk<'_, '_> {
    type Start = From;
    const STORE: &'static str = "comback";

    fn max_edges(&self) -> usize {
        self.view.len as usize
    }

    #[inline]
    fn link(&mut self, id: StateId) -> Result<Link<From>, StoreError> {
        let v = self.view;
        if self.rebuilt.get(id).is_some() {
            return Ok(Link::Start(From::Rebuilt(id)));
        }
        if v.cache.contains(id) {
            return Ok(Link::Start(From::Cached(id)));
        }
        if v.waiting.get(id).is_some() {
            return Ok(Link::Start(From::Waiting(id)));
        }
        if id == 0 {
            return Ok(Link::Start(From::Initial));
        }
        let e = backedge::read(&v.back, self.r, id)?;
        Ok(Link::Edge {
            parent: e.parent,
            transition: e.transition,
            depth: e.depth,
        })
    }

    fn load(&mut self, start: From, out: &mut Vec<u8>) -> Result<(), StoreError> {
        out.clear();
        self.vector(start, out)
    }

    /// (Backward comparisons only; replays load.)
    fn equals(&mut self, start: From, state: &[u8]) -> Result<bool, StoreError> {
        let v = self.view;
        Ok(match start {
            From::Rebuilt(id) => self.rebuilt.get(id).is_some_and(|r| eq_bytes(r, state)),
            From::Cached(id) => v.cache.get(id).is_some_and(|(e, _, _)| e.matches(state)),
            From::Waiting(id) => v.waiting.get(id).is_some_and(|w| eq_bytes(w, state)),
            From::Initial => eq_bytes(v.initial, state),
        })
    }

    /// Keeps the replay checkpoints the one-thread path would cache
    /// ([`super::REPLAY_CHECKPOINT`]): without them every replay of a chunk climbed to a
    /// cached state or a parent again (Peterson-PT-3: 2.6 times the one-thread firings).
    fn replayed(&mut self, _: From, id: StateId, depth: u32, _: u32, state: &[u8]) {
        if depth.is_multiple_of(super::REPLAY_CHECKPOINT) {
            self.rebuilt.keep_passed(id, depth, state);
        }
    }
}

impl Shared<'_> {
    /// Whether stored state `id` is `state`: from the states this thread rebuilt, the
    /// cache, the chunk's parents, or rebuilt now (and kept in `s.rebuilt`).
    #[inline(always)]
    fn is(
        &self,
        r: &mut SegReader,
        model: &dyn Model,
        s: &mut Scratch,
        id: StateId,
        state: &[u8],
    ) -> Result<bool, StoreError> {
        if let Some((v, _, _)) = self.cache.get(id) {
            s.rebuilt.cache_hits += 1;
            return Ok(v.matches(state));
        }
        if let Some(v) = s.rebuilt.get(id) {
            return Ok(eq_bytes(v, state));
        }
        if let Some(v) = self.waiting.get(id) {
            return Ok(eq_bytes(v, state));
        }
        self.rebuild(r, model, s, id)?;
        Ok(eq_bytes(&s.walker.a, state))
    }

    /// Rebuilds state `id` into `s.walker.a` and keeps it in `s.rebuilt`.
    #[inline(never)]
    fn rebuild(
        &self,
        r: &mut SegReader,
        model: &dyn Model,
        s: &mut Scratch,
        id: StateId,
    ) -> Result<(), StoreError> {
        let Scratch { walker, rebuilt } = s;
        let mut walk = Walk {
            view: self,
            r,
            rebuilt,
        };
        path::replay(walker, model, &mut walk, id)?;
        rebuilt.keep(id, walker);
        Ok(())
    }
}

impl Lookup for Shared<'_> {
    type Reader = SegReader;

    #[inline(always)]
    fn with_parent<R>(
        &self,
        _: &mut SegReader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        match self.waiting.get(id) {
            Some(v) => Ok(f(v)),
            None => Err(StorageError::Invalid(format!(
                "comback: parent {id} of a parallel chunk was not rebuilt beforehand"
            ))),
        }
    }

    #[inline(always)]
    fn find_group(
        &self,
        r: &mut SegReader,
        model: &dyn Model,
        scratch: &mut Scratch,
        batch: &StateBatch,
        _counts: &[u32],
        hashes: &mut Vec<u64>,
        found: &mut Vec<Found>,
        _extra: &mut crate::store::Extra,
    ) -> Result<(), StoreError> {
        crate::store::probe_group(self, r, model, scratch, batch, hashes, found)
    }
}

impl Probe for Shared<'_> {
    #[inline(always)]
    fn prefetch_slot(&self, h: u64) {
        self.table.touch(h & self.mask);
    }

    /// The cache entry of the first candidate (its home slot is in cache by now).
    #[inline(always)]
    fn prefetch_state(&self, h: u64) {
        if let Some(id) = self.table.first_candidate(h & self.mask) {
            let _ = self.cache.touch(id);
        }
    }

    #[inline(always)]
    fn find(
        &self,
        r: &mut SegReader,
        model: &dyn Model,
        s: &mut Scratch,
        state: &[u8],
        h: u64,
    ) -> Result<Found, StoreError> {
        let first = self.table.find(h & self.mask, |_, id| {
            Ok::<_, StoreError>(Some(if self.is(r, model, s, id, state)? {
                Found::Stored(id)
            } else {
                Found::Undecided
            }))
        })?;
        Ok(first.unwrap_or(Found::Absent))
    }
}

/// The numbering thread's lookup of what the workers left undecided (see the module
/// documentation): the one-thread lookup without its writes, over every fingerprint match.
/// It reads what the workers read, and the descriptors alone; move-to-front, which only
/// reorders a collision list, is left out.
pub(super) struct Resolve<'a> {
    pub(super) view: Shared<'a>,
    pub(super) reader: &'a mut SegReader,
    pub(super) descriptors: Descriptors<'a>,
    pub(super) model: &'a dyn Model,
    /// The fingerprint is the whole descriptor: a mismatch needs no descriptor read.
    pub(super) fp_exact: bool,
    pub(super) scratch: &'a mut Scratch,
    pub(super) counters: &'a mut Counters,
}

impl Resolver for Resolve<'_> {
    fn resolve(&mut self, state: &[u8], h: u64) -> Result<Option<StateId>, StoreError> {
        let d = h & self.view.mask;
        let view = self.view;
        let found = view.table.find(d, |_, id| {
            if view.is(self.reader, self.model, self.scratch, id, state)? {
                return Ok(Some(id));
            }
            // Another state: a real collision, or a false candidate; the probe goes on.
            if self.fp_exact || self.descriptors.get(id)? == d {
                self.counters.descriptor_collisions += 1;
            } else {
                self.counters.false_candidates += 1;
            }
            Ok::<_, StoreError>(None)
        })?;
        Ok(found.ok())
    }
}
