//! ComBack's view for parallel BFS ([`SharedIndex::Comback`](crate::store::SharedIndex)):
//! the state table, the state cache and the chunk's parents, read by every thread while the
//! store is borrowed (docs/COMBACK.md, "Parallel BFS").
//!
//! A worker settles what needs nothing but the table and the cache: a successor whose
//! fingerprint matches no slot is new ([`Found::Absent`]); one whose first fingerprint match
//! is a cached vector equal to it is that state ([`Found::Stored`]). Everything else — a
//! match not cached (the one-thread path rebuilds it by replay), a cached vector that
//! differs (a collision: the probe goes on) — is [`Found::Undecided`], and the numbering
//! thread, as it numbers the part during the expansion of the others, asks [`Resolve`]: the
//! one-thread lookup without its writes. It reads the table and the cache as the workers do,
//! the backedges and descriptors alone, rebuilds what is not cached, and keeps what it
//! rebuilt in [`Replayed`] until the workers stop (`CombackStore::shared_done` caches it).
//! So every answer is the one-thread path's, and which states are taken for equal never
//! depends on the scheduling.
//!
//! Nothing here depends on depths: in BFS a state found again was stored at a depth no
//! greater than the new edge's (levels are expanded in order), so variant 1 (path
//! optimisation) never repoints there. BFS pins no search-path states either.

use super::backedge::BackedgeTable;
use super::cache::Cache;
use super::table::StateTable;
use super::{Counters, WaitingBuffer};
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::store::full::eq_bytes;
use crate::store::path::{self, Link, PathRecords, Walker};
use crate::store::{Found, Lookup, Resolver, StateId};

/// See the module documentation.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub(super) table: &'a StateTable,
    pub(super) cache: &'a Cache,
    /// The chunk's parents, rebuilt by [`CombackStore::prepare_shared`].
    pub(super) waiting: &'a WaitingBuffer,
    /// The descriptor's bits of a hash ([`crate::store::top_mask`]).
    pub(super) mask: u64,
}

impl Lookup for Shared<'_> {
    type Reader = ();

    #[inline(always)]
    fn with_parent<R>(
        &self,
        _: &mut (),
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
    fn find(&self, _: &mut (), state: &[u8], h: u64) -> Result<Found, StorageError> {
        let d = h & self.mask;
        let r = self.table.find(d, |_, id| {
            Ok::<_, std::convert::Infallible>(Some(match self.cache.get(id) {
                Some((v, _, _)) if v.matches(state) => Found::Stored(id),
                _ => Found::Undecided,
            }))
        });
        Ok(match r {
            Ok(Ok(found)) => found,
            Ok(Err(_empty)) => Found::Absent,
            Err(never) => match never {},
        })
    }
}

/// States the [`Resolve`]r rebuilt during a chunk: compared again from here, and cached at
/// `shared_done` (the state cache cannot change while the threads read it).
#[derive(Default)]
pub(super) struct Replayed {
    /// Id → (stored depth, range in `data`).
    at: hashbrown::HashMap<StateId, (u32, usize, usize)>,
    data: Vec<u8>,
}

impl Replayed {
    fn get(&self, id: StateId) -> Option<&[u8]> {
        self.at.get(&id).map(|&(_, s, e)| &self.data[s..e])
    }

    fn put(&mut self, id: StateId, depth: u32, state: &[u8]) {
        let s = self.data.len();
        self.data.extend_from_slice(state);
        self.at.insert(id, (depth, s, self.data.len()));
    }

    /// Every state rebuilt, emptying the memo.
    pub(super) fn drain(&mut self, mut f: impl FnMut(StateId, u32, &[u8])) {
        for (&id, &(depth, s, e)) in &self.at {
            f(id, depth, &self.data[s..e]);
        }
        self.at.clear();
        self.data.clear();
    }

    pub(super) fn ram_bytes(&self) -> u64 {
        (self.at.capacity() * 32 + self.data.capacity()) as u64
    }
}

/// The numbering thread's lookup of what the workers left undecided (see the module
/// documentation): the one-thread lookup without its writes. The table and the cache are
/// only read (the workers read them too); a candidate not cached is rebuilt from the
/// backedges (read on this thread alone) and kept in [`Replayed`]; move-to-front, which
/// only reorders a collision list, is left out.
pub(super) struct Resolve<'a> {
    pub(super) table: &'a StateTable,
    pub(super) cache: &'a Cache,
    pub(super) waiting: &'a WaitingBuffer,
    pub(super) back: &'a BackedgeTable,
    pub(super) initial: &'a [u8],
    pub(super) model: &'a dyn Model,
    pub(super) mask: u64,
    /// The fingerprint is the whole descriptor: a mismatch needs no descriptor read.
    pub(super) fp_exact: bool,
    pub(super) walker: &'a mut Walker,
    pub(super) counters: &'a mut Counters,
    pub(super) replayed: &'a mut Replayed,
}

/// Where the numbering thread's replay starts.
#[derive(Clone, Copy)]
enum From {
    Replayed(StateId),
    Cached(StateId),
    Waiting(StateId),
    Initial,
}

/// The records as the numbering thread walks them: backedges, and as starts the states
/// rebuilt in this chunk, the cache, the chunk's parents and the initial state.
struct ResolveWalk<'v> {
    back: &'v BackedgeTable,
    cache: &'v Cache,
    waiting: &'v WaitingBuffer,
    replayed: &'v Replayed,
    initial: &'v [u8],
}

impl ResolveWalk<'_> {
    fn vector(&self, from: From, out: &mut Vec<u8>) -> Result<(), StoreError> {
        let missing = |id| {
            StoreError::Storage(StorageError::Invalid(format!(
                "comback: state {id} left the caches during a parallel chunk"
            )))
        };
        match from {
            From::Replayed(id) => out.extend_from_slice(self.replayed.get(id).ok_or(missing(id))?),
            From::Cached(id) => self.cache.get(id).ok_or(missing(id))?.0.append_to(out),
            From::Waiting(id) => out.extend_from_slice(self.waiting.get(id).ok_or(missing(id))?),
            From::Initial => out.extend_from_slice(self.initial),
        }
        Ok(())
    }
}

impl PathRecords for ResolveWalk<'_> {
    type Start = From;
    const STORE: &'static str = "comback";

    fn max_edges(&self) -> usize {
        self.back.len() as usize
    }

    fn link(&mut self, id: StateId) -> Result<Link<From>, StoreError> {
        if self.replayed.get(id).is_some() {
            return Ok(Link::Start(From::Replayed(id)));
        }
        if self.cache.contains(id) {
            return Ok(Link::Start(From::Cached(id)));
        }
        if self.waiting.get(id).is_some() {
            return Ok(Link::Start(From::Waiting(id)));
        }
        if id == 0 {
            return Ok(Link::Start(From::Initial));
        }
        let e = self.back.get(id)?;
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

    fn equals(&mut self, start: From, state: &[u8]) -> Result<bool, StoreError> {
        let mut v = Vec::new();
        self.vector(start, &mut v)?;
        Ok(eq_bytes(&v, state))
    }

    fn replayed(&mut self, _: From, _: StateId, _: u32, _: u32, _: &[u8]) {}
}

impl Resolver for Resolve<'_> {
    fn resolve(&mut self, state: &[u8], h: u64) -> Result<Option<StateId>, StoreError> {
        let d = h & self.mask;
        let table = self.table;
        let found = table.find(d, |_, id| {
            let equal = if let Some(v) = self.replayed.get(id) {
                eq_bytes(v, state)
            } else if let Some((v, _, _)) = self.cache.get(id) {
                self.counters.cache_hits += 1;
                v.matches(state)
            } else {
                self.rebuild(id)?;
                eq_bytes(&self.walker.a, state)
            };
            if equal {
                return Ok(Some(id));
            }
            // Another state: a real collision, or a false candidate; the probe goes on.
            if self.fp_exact || self.back.descriptor(id)? == d {
                self.counters.descriptor_collisions += 1;
            } else {
                self.counters.false_candidates += 1;
            }
            Ok::<_, StoreError>(None)
        })?;
        Ok(found.ok())
    }
}

impl Resolve<'_> {
    /// Rebuilds state `id` into `walker.a` and keeps it in [`Replayed`].
    fn rebuild(&mut self, id: StateId) -> Result<(), StoreError> {
        let mut walk = ResolveWalk {
            back: self.back,
            cache: self.cache,
            waiting: self.waiting,
            replayed: self.replayed,
            initial: self.initial,
        };
        path::replay(self.walker, self.model, &mut walk, id)?;
        self.counters.reconstructions += 1;
        self.counters.reconstruction_fires += self.walker.path.len() as u64;
        let depth = self.walker.path.first().map_or(0, |&(_, _, depth)| depth);
        self.replayed.put(id, depth, &self.walker.a);
        Ok(())
    }
}
