//! ComBack's view for parallel BFS ([`SharedIndex::Comback`](crate::store::SharedIndex)):
//! the state table, the state cache and the chunk's parents, read by every thread while the
//! store is borrowed (docs/COMBACK.md, "Parallel BFS").
//!
//! A lookup needs no write where the one-thread path needs none either: a successor whose
//! fingerprint matches no slot is new ([`Found::Absent`]), one whose first fingerprint match
//! is a cached vector equal to it is that state ([`Found::Stored`]). Everything else — a
//! match that is not cached (it would be rebuilt by replay, which caches what it rebuilds),
//! a cached vector that differs (a collision, whose descriptor may have to be read from the
//! backedge file) — is [`Found::Undecided`] and goes through the store's own lookup on the
//! calling thread once the threads are done ([`CombackStore::resolve_shared`]). So the
//! threads' answers are the one-thread path's, and which states they take for equal never
//! depends on the scheduling.
//!
//! Nothing the threads do depends on depths: in BFS a state found again was stored at a
//! depth no greater than the new edge's (levels are expanded in order), so variant 1 (path
//! optimisation) never repoints there, and the view does not ask.

use super::cache::Cache;
use super::table::StateTable;
use super::WaitingBuffer;
use crate::error::StorageError;
use crate::store::{Found, Lookup, StateId};

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

// `CombackStore` for the intra-doc links above.
#[allow(unused_imports)]
use super::CombackStore;
