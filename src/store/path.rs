//! The path-record core shared by ComBack and Δ-markings.
//!
//! Both stores keep, for most states, only the search-tree edge that reached it (parent,
//! transition) and rebuild a state by walking these edges back to a *start* whose vector is
//! at hand, then firing forward (or, to compare a candidate with a new state, by unfiring the
//! new state along the candidate's edges and comparing with the start). What differs is
//! only where a walk may start and how edges are stored, which each store says by
//! implementing [`PathRecords`]:
//!
//! * ComBack: the state cache, the pinned DFS search path, the initial state
//!   ([`RootPolicy::Initial`]);
//! * Δ: the state cache and the explicit states, one every kδ levels
//!   ([`RootPolicy::EveryK`]).
//!
//! What is the same is written once here: the walk ([`replay`] forward, [`unfire`]
//! backward), the overflow rule (an unfiring whose token counter would overflow has no valid
//! predecessor: the candidate is a mismatch, never an abort, since a false candidate of a
//! state near a counter limit is a normal event), the error of a replay that the model
//! refuses (the determinism contract broken, or corrupt records), the bound on a walk's
//! length (a cycle in corrupt records is an error, not a hang), and the rule that repoints a
//! state to a shorter path ([`repoint_if_shorter`]).
//!
//! Invariants the stores keep: the edges from any state reach a start in at most
//! [`PathRecords::max_edges`] steps; a repoint only ever makes a state's path to its root
//! strictly shorter, and the parent's path is measured first, so repoints never make a cycle.

use super::{StateId, Via};
use crate::error::{ModelError, StoreError};
use crate::model::{Fired, Model, TransitionId};

/// One record read by a walk.
#[derive(Clone, Copy, Debug)]
pub enum Link<S> {
    /// The walk can stop here: the state's vector is at hand (`S` says where).
    Start(S),
    /// The edge that reached the state; `depth` is the state's stored depth where the store
    /// keeps one (ComBack), 0 otherwise.
    Edge {
        parent: StateId,
        transition: TransitionId,
        depth: u32,
    },
}

/// Which states are roots: stored whole, so that every walk ends at one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootPolicy {
    /// Only the initial state (ComBack; caches shorten walks, they are not roots).
    Initial,
    /// The initial state, every state first met at a depth that is a multiple of `k`, and
    /// every state whose parent's path to its root is already `k − 1` edges long (Δ).
    EveryK(u32),
}

impl RootPolicy {
    /// Whether a new state met at `depth`, whose parent is `parent_edges` edges from its
    /// root (`None`: no parent, the initial state), is stored as a root.
    pub fn is_root(self, depth: u64, parent_edges: Option<u32>) -> bool {
        match (self, parent_edges) {
            (_, None) => true,
            (RootPolicy::Initial, Some(_)) => false,
            (RootPolicy::EveryK(k), Some(p)) => depth.is_multiple_of(k as u64) || p + 1 >= k,
        }
    }
}

/// A store's records as a walk sees them.
pub trait PathRecords {
    /// Where a walk stopped (a cache slot, an explicit state, the initial state...).
    type Start: Copy;
    /// The store's name in errors.
    const STORE: &'static str;

    /// Most edges a walk may climb; one more means corrupt records.
    fn max_edges(&self) -> usize;
    /// The record of `id`: a start, or the edge to climb.
    fn link(&mut self, id: StateId) -> Result<Link<Self::Start>, StoreError>;
    /// Writes the vector of `start` into `out` (cleared first).
    fn load(&mut self, start: Self::Start, out: &mut Vec<u8>) -> Result<(), StoreError>;
    /// Whether `state` is the vector of `start`.
    fn equals(&mut self, start: Self::Start, state: &[u8]) -> Result<bool, StoreError>;
    /// A forward replay rebuilt `state`, the vector of `id` (stored depth `depth`),
    /// `edges` firings after `start`; the store may cache it.
    fn replayed(&mut self, start: Self::Start, id: StateId, depth: u32, edges: u32, state: &[u8]);
}

/// The scratch space of walks, reused from one to the next.
#[derive(Default)]
pub struct Walker {
    /// `(state, transition, depth)` of the edges climbed, nearest the target first.
    pub path: Vec<(StateId, TransitionId, u32)>,
    /// The rebuilt state after [`replay`]; the fully unfired state after [`unfire`].
    pub a: Vec<u8>,
    b: Vec<u8>,
    /// After a [`unfire`] with a trail: the states met on the way, `width` bytes each; entry
    /// `k − 1` is the vector of `path[k].0`.
    pub trail: Vec<u8>,
}

impl Walker {
    /// Bytes its buffers hold.
    pub fn ram_bytes(&self) -> u64 {
        (self.path.capacity() * std::mem::size_of::<(StateId, TransitionId, u32)>()
            + self.a.capacity()
            + self.b.capacity()
            + self.trail.capacity()) as u64
    }
}

/// States rebuilt by replays that could not be cached at once (parallel BFS: the threads
/// read the store's cache, so what they rebuild is kept here until they stop), with the
/// replays and firings it took and the cache hits of the lookups.
#[derive(Default)]
pub struct Rebuilt {
    /// Id → (stored depth, range in `data`).
    at: hashbrown::HashMap<StateId, (u32, usize, usize)>,
    data: Vec<u8>,
    pub replays: u64,
    pub fires: u64,
    /// Lookups that found their candidate in the store's cache (counted here by threads
    /// that cannot write the store's counters).
    pub cache_hits: u64,
}

impl Rebuilt {
    #[inline]
    pub fn get(&self, id: StateId) -> Option<&[u8]> {
        if self.at.is_empty() {
            return None;
        }
        self.at.get(&id).map(|&(_, s, e)| &self.data[s..e])
    }

    /// Keeps the state `w` rebuilt last (by [`replay`] of `id`), and counts the replay.
    pub fn keep(&mut self, id: StateId, w: &Walker) {
        let depth = w.path.first().map_or(0, |&(_, _, depth)| depth);
        let s = self.data.len();
        self.data.extend_from_slice(&w.a);
        self.at.insert(id, (depth, s, self.data.len()));
        self.replays += 1;
        self.fires += w.path.len() as u64;
    }

    /// Keeps `state`, stored state `id` at stored depth `depth`, met on the way of a replay
    /// (a later replay may start there, as the one-thread path starts from the replay
    /// checkpoints it caches).
    pub fn keep_passed(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let hashbrown::hash_map::Entry::Vacant(e) = self.at.entry(id) {
            let s = self.data.len();
            self.data.extend_from_slice(state);
            e.insert((depth, s, self.data.len()));
        }
    }

    /// Calls `f(id, depth, state)` for every state kept, and empties it.
    pub fn drain(&mut self, mut f: impl FnMut(StateId, u32, &[u8])) {
        for (&id, &(depth, s, e)) in &self.at {
            f(id, depth, &self.data[s..e]);
        }
        self.at.clear();
        self.data.clear();
        (self.replays, self.fires, self.cache_hits) = (0, 0, 0);
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.at.capacity() * 32 + self.data.capacity()) as u64
    }
}

/// A thread's scratch for lookups that rebuild states (see [`crate::store::Lookup`]).
#[derive(Default)]
pub struct Scratch {
    pub walker: Walker,
    pub rebuilt: Rebuilt,
}

impl Scratch {
    pub fn ram_bytes(&self) -> u64 {
        self.walker.ram_bytes() + self.rebuilt.ram_bytes()
    }
}

fn corrupt<R: PathRecords>(r: &R, id: StateId) -> StoreError {
    StoreError::Reconstruction {
        store: R::STORE,
        id,
        message: format!(
            "no stored ancestor within {} edges (corrupt records)",
            r.max_edges()
        ),
    }
}

/// Climbs from `id` to a start, pushing the edges on `w.path`.
fn climb<R: PathRecords>(w: &mut Walker, r: &mut R, id: StateId) -> Result<R::Start, StoreError> {
    w.path.clear();
    let max = r.max_edges();
    let mut cur = id;
    loop {
        match r.link(cur)? {
            Link::Start(s) => return Ok(s),
            Link::Edge {
                parent,
                transition,
                depth,
            } => {
                if w.path.len() >= max {
                    return Err(corrupt(r, id));
                }
                w.path.push((cur, transition, depth));
                cur = parent;
            }
        }
    }
}

/// Rebuilds state `id` into `w.a` by firing forward from the nearest start; returns the
/// start (the firings are `w.path.len()`). Every state rebuilt is offered to
/// [`PathRecords::replayed`].
pub fn replay<R: PathRecords>(
    w: &mut Walker,
    model: &dyn Model,
    r: &mut R,
    id: StateId,
) -> Result<R::Start, StoreError> {
    let start = climb(w, r, id)?;
    r.load(start, &mut w.a)?;
    let n = w.path.len();
    for k in (0..n).rev() {
        let (s, t, depth) = w.path[k];
        fire(R::STORE, model, &w.a, t, &mut w.b, id, s)?;
        std::mem::swap(&mut w.a, &mut w.b);
        r.replayed(start, s, depth, (n - k) as u32, &w.a);
    }
    Ok(start)
}

/// Fires edge `t` into state `s` from its parent's vector `src`, on the way to rebuilding
/// state `id`: the one error of a replay the model refuses.
pub fn fire(
    store: &'static str,
    model: &dyn Model,
    src: &[u8],
    t: TransitionId,
    dst: &mut Vec<u8>,
    id: StateId,
    s: StateId,
) -> Result<(), StoreError> {
    let what = match model.fire(src, t, dst) {
        Ok(Fired::Enabled(_)) => return Ok(()),
        Ok(f) => format!("gave {f:?}"),
        Err(e) => e.to_string(),
    };
    Err(StoreError::Reconstruction {
        store,
        id,
        message: format!(
            "replaying transition {} into state {s}: {what} (the model breaks its determinism contract, or the records are corrupt)",
            t.0
        ),
    })
}

/// How a backward comparison ended.
#[derive(Clone, Copy, Debug)]
pub enum Unfired<S> {
    /// `state` is the candidate: unfired along its `w.path.len()` edges, it is `start`.
    Equal(S),
    /// `state` is not the candidate: unfired to the start, it differs from it.
    Different,
    /// `state` is not the candidate: an unfiring had no valid predecessor (a negative or
    /// overflowing token count), so the walk stopped early.
    NoPredecessor,
    /// The model cannot fire backwards.
    Unsupported,
}

/// Compares `state` with state `id` by unfiring `state` along `id`'s edges, stopping at the
/// first transition that cannot be unfired. Records are read as the walk goes, so an early
/// mismatch reads no more of them. With `trail`, the states met are kept in `w.trail`.
/// Returns the outcome and the unfirings tried.
pub fn unfire<R: PathRecords>(
    w: &mut Walker,
    model: &dyn Model,
    r: &mut R,
    id: StateId,
    state: &[u8],
    trail: bool,
) -> Result<(Unfired<R::Start>, u64), StoreError> {
    w.path.clear();
    w.trail.clear();
    w.a.clear();
    w.a.extend_from_slice(state);
    let max = r.max_edges();
    let mut cur = id;
    loop {
        let (parent, t, depth) = match r.link(cur)? {
            Link::Start(s) => {
                let n = w.path.len() as u64;
                return Ok(if r.equals(s, &w.a)? {
                    (Unfired::Equal(s), n)
                } else {
                    (Unfired::Different, n)
                });
            }
            Link::Edge {
                parent,
                transition,
                depth,
            } => (parent, transition, depth),
        };
        if w.path.len() >= max {
            return Err(corrupt(r, id));
        }
        if trail && !w.path.is_empty() {
            w.trail.extend_from_slice(&w.a);
        }
        w.path.push((cur, t, depth));
        let tried = w.path.len() as u64;
        match model.unfire(&w.a, t, &mut w.b) {
            Ok(Fired::Enabled(_)) => std::mem::swap(&mut w.a, &mut w.b),
            // No valid predecessor with these counters: `state` is not state `id`.
            Ok(Fired::Disabled) | Err(ModelError::TokenOverflow { .. }) => {
                return Ok((Unfired::NoPredecessor, tried))
            }
            Ok(Fired::Unsupported) => return Ok((Unfired::Unsupported, tried)),
            Err(e) => {
                return Err(StoreError::Reconstruction {
                    store: R::STORE,
                    id,
                    message: format!("unfiring transition {} from state {cur}: {e}", t.0),
                })
            }
        }
        cur = parent;
    }
}

/// What a store offers [`repoint_if_shorter`].
pub trait Repoint {
    /// Edges from `parent` to its root (exact).
    fn parent_len(&mut self, parent: StateId) -> Result<u32, StoreError>;
    /// Whether `id`'s record can be rewritten now (a store may refuse writes that cost more
    /// than a longer path does).
    fn writable(&mut self, id: StateId) -> bool;
    /// Edges from `id` to its root (exact); `bound` is an upper bound already known.
    fn exact_len(&mut self, id: StateId, bound: u32) -> Result<u32, StoreError>;
    /// Points `id` at `via`, now `len` edges from its root.
    fn set_edge(&mut self, id: StateId, via: Via, len: u32) -> Result<(), StoreError>;
}

/// What [`repoint_if_shorter`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repointed {
    Yes,
    /// Not shorter (or a root).
    No,
    /// Shorter, but the store would not write the record now.
    Skipped,
}

/// The one repoint rule: state `id`, met again through `via`, is pointed at `via` when the
/// path through `via.parent` to its root is strictly shorter than `id`'s own. `bound` is an
/// upper bound of `id`'s length (a cheap filter: a state at most one edge from its root
/// cannot get shorter). Both lengths are exact when compared, so a path never grows and
/// the records stay acyclic.
pub fn repoint_if_shorter<R: Repoint>(
    r: &mut R,
    id: StateId,
    bound: u32,
    via: Via,
) -> Result<Repointed, StoreError> {
    if bound <= 1 || id == via.parent {
        return Ok(Repointed::No);
    }
    let len = r.parent_len(via.parent)?.saturating_add(1);
    if len >= bound {
        return Ok(Repointed::No);
    }
    if !r.writable(id) {
        return Ok(Repointed::Skipped);
    }
    if len >= r.exact_len(id, bound)? {
        return Ok(Repointed::No);
    }
    r.set_edge(id, via, len)?;
    Ok(Repointed::Yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// States 0..n on a line, each the parent of the next; state 0 is the only start.
    struct Line {
        parents: Vec<StateId>,
        max: usize,
    }

    impl PathRecords for Line {
        type Start = ();
        const STORE: &'static str = "test";
        fn max_edges(&self) -> usize {
            self.max
        }
        fn link(&mut self, id: StateId) -> Result<Link<()>, StoreError> {
            Ok(match id {
                0 => Link::Start(()),
                _ => Link::Edge {
                    parent: self.parents[id as usize],
                    transition: TransitionId(0),
                    depth: 0,
                },
            })
        }
        fn load(&mut self, _: (), out: &mut Vec<u8>) -> Result<(), StoreError> {
            out.clear();
            out.push(0);
            Ok(())
        }
        fn equals(&mut self, _: (), state: &[u8]) -> Result<bool, StoreError> {
            Ok(state == [0])
        }
        fn replayed(&mut self, _: (), _: StateId, _: u32, _: u32, _: &[u8]) {}
    }

    #[test]
    fn a_cycle_in_the_records_is_an_error_not_a_hang() {
        // 1 → 2 → 1: corrupt.
        let mut r = Line {
            parents: vec![0, 2, 1],
            max: 10,
        };
        let mut w = Walker::default();
        let e = climb(&mut w, &mut r, 1).unwrap_err();
        assert!(e.to_string().contains("corrupt records"), "{e}");
        let ok = climb(
            &mut w,
            &mut Line {
                parents: vec![0, 0, 1],
                max: 2,
            },
            2,
        );
        assert!(ok.is_ok());
        assert_eq!(w.path.len(), 2);
    }

    #[test]
    fn root_policies() {
        assert!(RootPolicy::Initial.is_root(0, None));
        assert!(!RootPolicy::Initial.is_root(5, Some(4)));
        let k = RootPolicy::EveryK(3);
        assert!(k.is_root(6, Some(0)));
        assert!(!k.is_root(7, Some(0)));
        assert!(k.is_root(7, Some(2)), "a chain of kδ − 1 edges is full");
    }

    struct Lens {
        lens: Vec<u32>,
        writable: bool,
        set: Vec<(StateId, StateId, u32)>,
    }

    impl Repoint for Lens {
        fn parent_len(&mut self, parent: StateId) -> Result<u32, StoreError> {
            Ok(self.lens[parent as usize])
        }
        fn writable(&mut self, _: StateId) -> bool {
            self.writable
        }
        fn exact_len(&mut self, id: StateId, _: u32) -> Result<u32, StoreError> {
            Ok(self.lens[id as usize])
        }
        fn set_edge(&mut self, id: StateId, via: Via, len: u32) -> Result<(), StoreError> {
            self.set.push((id, via.parent, len));
            self.lens[id as usize] = len;
            Ok(())
        }
    }

    #[test]
    fn repoints_only_to_strictly_shorter_paths() {
        let via = |parent| Via {
            parent,
            transition: TransitionId(1),
            depth: 0,
        };
        let mut r = Lens {
            lens: vec![0, 1, 5, 4],
            writable: true,
            set: Vec::new(),
        };
        // Through state 1 (length 1), state 2 gets length 2 < 5.
        assert_eq!(
            repoint_if_shorter(&mut r, 2, 5, via(1)).unwrap(),
            Repointed::Yes
        );
        assert_eq!(r.set, vec![(2, 1, 2)]);
        // Through state 3 (length 4): 5 is not shorter than 2.
        assert_eq!(
            repoint_if_shorter(&mut r, 2, 2, via(3)).unwrap(),
            Repointed::No
        );
        // A loose bound is checked against the exact length.
        assert_eq!(
            repoint_if_shorter(&mut r, 2, 9, via(3)).unwrap(),
            Repointed::No
        );
        r.writable = false;
        assert_eq!(
            repoint_if_shorter(&mut r, 3, 4, via(0)).unwrap(),
            Repointed::Skipped
        );
        assert_eq!(
            repoint_if_shorter(&mut r, 3, 4, via(3)).unwrap(),
            Repointed::No
        );
    }
}
