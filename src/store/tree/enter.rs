//! The numbering thread's entry of a parallel chunk's new states into the tree store's
//! tables (docs/ARCHITECTURE.md, "The tree store on N threads").
//!
//! The threads' lookups hand on each new state's absent nodes as `(node, left, right)`
//! word triples in plan order, the root last ([`super::shared::Shared`]). [`Entering`]
//! takes them in id order, by windows of [`NEW_WINDOW`] states, and gives every absent node
//! the reference appending it to its table would give, height by height over the window (a
//! child that was absent takes the reference its own triple got just before). It writes
//! nothing the threads read: the new pairs wait in its own buffers, with the references
//! they will have, and [`super::TreeStore`]'s `add_new` appends and indexes them once the
//! threads have stopped. So the numbering thread can feed it each new state as it numbers
//! it ([`Enter`], the chunk's [`Resolver`]), while the other threads still expand; what it
//! was not fed (a caller that numbers without it) `add_new` feeds. The windows are the same
//! either way, so are the references.

use super::shared;
use super::table::{pack, pair_hash, Find, Fresh};
use crate::error::StoreError;
use crate::store::{Resolver, StateId};
use std::ops::Range;

/// New states entered together: enough that a height's misses overlap, few enough that the
/// window's words stay in cache.
pub(super) const NEW_WINDOW: usize = 256;

/// What entering reads of the store, none of which changes during a chunk: the node table
/// (for nodes with a new child, which the threads did not look up) and the tree's shape.
#[derive(Clone, Copy)]
pub(super) struct Shape<'a> {
    pub nodes: Find<'a>,
    pub plan: &'a [(u32, u32)],
    pub levels: &'a [Range<usize>],
    pub level_of: &'a [u8],
    pub leaves: usize,
}

/// A chunk's new pairs, until they go into the tables, and the window being filled.
#[derive(Default)]
pub(super) struct Entering {
    /// The node and root tables' lengths when the chunk began: the new pairs' references
    /// follow them.
    nodes_base: u64,
    roots_base: u64,
    /// New states fed in this chunk.
    fed: u64,
    /// The new inner nodes' pairs and the new roots' pairs, in reference order.
    pub nodes: Vec<u64>,
    pub roots: Vec<u64>,
    /// The chunk's new inner nodes, pair to reference: two new states may share one.
    fresh: Fresh,
    /// The window: its states' triples back to back, where each state's end, the reference
    /// each triple got, each triple's node (plan index) and state, and the triples by level
    /// ([`shared::by_level`]: `by_level[level_at[l]..level_at[l + 1]]`).
    words: Vec<u32>,
    ends: Vec<usize>,
    refs: Vec<u32>,
    keys: Vec<u32>,
    owner: Vec<u32>,
    by_level: Vec<u32>,
    level_at: Vec<usize>,
}

impl Entering {
    /// Empties it for a chunk that begins with tables of these lengths.
    pub fn start(&mut self, nodes_base: u64, roots_base: u64) {
        self.nodes_base = nodes_base;
        self.roots_base = roots_base;
        self.fed = 0;
        self.nodes.clear();
        self.roots.clear();
        self.fresh.clear(1024);
        self.words.clear();
        self.ends.clear();
    }

    /// Whether it was started for tables of these lengths.
    pub fn based_at(&self, nodes: u64, roots: u64) -> bool {
        (self.nodes_base, self.roots_base) == (nodes, roots)
    }

    /// New states fed in this chunk.
    pub fn fed(&self) -> u64 {
        self.fed
    }

    /// RAM its buffers hold.
    pub fn bytes(&self) -> u64 {
        let words = self.words.capacity()
            + self.refs.capacity()
            + self.keys.capacity()
            + self.owner.capacity()
            + self.by_level.capacity();
        ((self.nodes.capacity() + self.roots.capacity()) * 8
            + words * 4
            + (self.ends.capacity() + self.level_at.capacity()) * std::mem::size_of::<usize>())
            as u64
            + self.fresh.bytes()
    }

    fn invalid(id: u64, what: &str) -> StoreError {
        StoreError::Invalid {
            store: "tree",
            message: format!("new state {id} of a parallel chunk: {what}"),
        }
    }

    /// Takes the chunk's next new state: its triples in ascending plan order (children
    /// first), the root last. Enters the window once it holds [`NEW_WINDOW`] states.
    pub fn feed(&mut self, ex: &[u32], shape: &Shape<'_>) -> Result<(), StoreError> {
        let root = shape.plan.len() - 1;
        let ok = ex.len().is_multiple_of(3)
            && ex.len() >= 3
            && ex[ex.len() - 3] as usize == root
            && ex
                .chunks_exact(3)
                .zip(ex.chunks_exact(3).skip(1))
                .all(|(a, b)| a[0] < b[0]);
        if !ok {
            return Err(Self::invalid(
                self.roots_base + self.fed,
                "its lookup handed on no nodes ending at the root",
            ));
        }
        self.words.extend_from_slice(ex);
        self.ends.push(self.words.len() / 3);
        self.fed += 1;
        if self.ends.len() == NEW_WINDOW {
            self.enter_window(shape)?;
        }
        Ok(())
    }

    /// Gives the nodes of the states fed since the last window their references, level by
    /// level, each level's triples state by state (each state's in plan order): the order
    /// interning each state's nodes height by height gives.
    pub fn enter_window(&mut self, shape: &Shape<'_>) -> Result<(), StoreError> {
        if self.ends.is_empty() {
            return Ok(());
        }
        let (n, root) = (shape.leaves, shape.plan.len() - 1);
        let first = self.roots_base + self.roots.len() as u64;
        let Entering {
            nodes_base,
            nodes,
            roots,
            fresh,
            words,
            ends,
            refs,
            keys,
            owner,
            by_level,
            level_at,
            ..
        } = self;
        owner.clear();
        let mut from = 0;
        for (s, &end) in ends.iter().enumerate() {
            owner.extend(std::iter::repeat_n(s as u32, end - from));
            from = end;
        }
        refs.clear();
        refs.resize(words.len() / 3, 0);
        keys.clear();
        keys.extend(words.iter().step_by(3));
        let levels = shape.levels.len();
        shared::by_level(keys, shape.level_of, levels, level_at, by_level);
        // The pair of triple `t` of the state whose triples start at `from`, and whether a
        // child was absent too (entered at a lower height, by an earlier triple).
        let pair = |words: &[u32], refs: &[u32], from: usize, t: usize| {
            let (k, l, r) = (words[3 * t], words[3 * t + 1], words[3 * t + 2]);
            let (cl, cr) = shape.plan[k as usize];
            let child = |c: u32, v: u32| {
                if (c as usize) < n {
                    return (v, false);
                }
                (from..t)
                    .find(|&u| words[3 * u] as usize + n == c as usize)
                    .map_or((v, false), |u| (refs[u], true))
            };
            let ((l, new_l), (r, new_r)) = (child(cl, l), child(cr, r));
            (pack(l, r), new_l || new_r)
        };
        let reference = |at: u64, id: u64| {
            u32::try_from(at).map_err(|_| Self::invalid(id, "a table would pass 2^32 entries"))
        };
        for (l, lv) in shape.levels.iter().enumerate() {
            let is_root = lv.end > root;
            for &t in &by_level[level_at[l]..level_at[l + 1]] {
                let (t, s) = (t as usize, owner[t as usize] as usize);
                let from = if s == 0 { 0 } else { ends[s - 1] };
                let (p, below_new) = pair(words, refs, from, t);
                let id = first + s as u64;
                refs[t] = if is_root {
                    // One root a state, the states in id order: root `s` is state `s`.
                    roots.push(p);
                    reference(id, id)?
                } else {
                    // A node with a new child was not looked up: the node table serves
                    // every height, so its pair, now that the child has its reference, may
                    // be another height's (a pair of leaf values equal to a pair of
                    // references). It is looked up here; any other node was looked up and
                    // found absent.
                    let h = pair_hash(p);
                    fresh.get_or(p, h, || {
                        match below_new.then(|| shape.nodes.find_hashed(p, h)) {
                            Some(Some(r)) => Ok(r),
                            _ => {
                                nodes.push(p);
                                reference(*nodes_base + nodes.len() as u64 - 1, id)
                            }
                        }
                    })?
                };
            }
        }
        words.clear();
        ends.clear();
        Ok(())
    }
}

/// The numbering thread's side of a tree store's parallel chunk ([`Resolver`]): feeds each
/// new state, as it is numbered, to the store's [`Entering`].
pub(super) struct Enter<'a> {
    pub entering: &'a mut Entering,
    pub shape: Shape<'a>,
}

impl Resolver for Enter<'_> {
    fn resolve(&mut self, _state: &[u8], _h: u64) -> Result<Option<StateId>, StoreError> {
        Err(StoreError::Invalid {
            store: "tree",
            message: "a lookup came back undecided, which the tree store's never do".into(),
        })
    }

    fn numbered(&mut self, extra: &[u32]) -> Result<(), StoreError> {
        self.entering.feed(extra, &self.shape)
    }
}
