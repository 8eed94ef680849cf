//! The tree store's view for parallel BFS (engine/parallel.rs): worker threads unfold the
//! chunk's parents and look every successor up by folding it against its parent's tree,
//! reading the node and root tables but never writing them. A successor whose tree has a
//! node the node table lacks, or whose root pair the root table lacks, was not stored
//! before the chunk (`Found::Absent`); otherwise the root's reference is its number. The
//! answer is never undecided: a pair is compared whole. The new states go in afterwards,
//! on the numbering thread and in id order ([`super::TreeStore`]'s `add_new`), so the
//! root references stay the state numbers.
//!
//! Most successors of a BFS are states already stored (about nine in ten on the MCC nets),
//! so most of the interning work — a hash and two dependent misses per dirty node — moves
//! to the threads; the numbering thread folds only the new states.

use super::table::{pack, pair_hash, Find, Memo, Steps};
use super::StateId;
use crate::error::{StorageError, StoreError};
use crate::model::Model;
use crate::store::path::Scratch;
use crate::store::{Extra, Found, Lookup, StateBatch};
use std::cell::RefCell;
use std::ops::Range;

/// Trees of at most this many inner nodes, the root included (at most 4 leaves), fold by
/// [`super::TreeStore::fold_narrow`] on one thread and [`Shared::fold_narrow`] on N;
/// [`NARROW_VALUES`] values (leaves and nodes) at most.
pub(super) const NARROW_NODES: usize = 3;
const NARROW_VALUES: usize = 4 + NARROW_NODES;

/// A successor's tree in a narrow fold: its values, the hash of each changed node below
/// the root (bit `k` of `dirty`), and the root's hash — until the roots are hashed, the
/// parent's root pair, and `dirty` then says whether the successor differs from it.
#[derive(Clone, Copy)]
pub(super) struct Narrow {
    pub(super) v: [u32; NARROW_VALUES],
    pub(super) h: [u64; NARROW_NODES],
    pub(super) dirty: u8,
}

impl Narrow {
    /// Starts the fold of successor `state` against its parent's tree `parent` (of a plan of
    /// at most [`NARROW_NODES`]): the leaves its transition can change (`touched`, else
    /// all) gathered, each node below the root whose children changed hashed and its home
    /// slot in `nodes` prefetched. Those nodes are pairs of leaves, so they can be hashed
    /// before any is looked up.
    #[inline(always)]
    pub(super) fn start(
        state: &[u8],
        touched: Option<&Vec<u32>>,
        order: &[u32],
        plan: &[(u32, u32)],
        leaves: usize,
        parent: &[u32],
        nodes: Find<'_>,
    ) -> Narrow {
        let (nv, root) = (parent.len(), plan.len() - 1);
        let mut w = Narrow {
            v: [0; NARROW_VALUES],
            h: [0; NARROW_NODES],
            dirty: 0,
        };
        w.v[..nv].copy_from_slice(parent);
        match touched {
            Some(touched) => {
                for &l in touched {
                    w.v[l as usize] = gather_leaf(state, order, l as usize);
                }
            }
            None => load_leaves(state, order, &mut w.v[..leaves]),
        }
        for (k, &(l, r)) in plan[..root].iter().enumerate() {
            let (l, r) = (l as usize, r as usize);
            if w.v[l] != parent[l] || w.v[r] != parent[r] {
                w.h[k] = pair_hash(pack(w.v[l], w.v[r]));
                nodes.touch_hashed(w.h[k]);
                w.dirty |= 1 << k;
            }
        }
        let (rl, rr) = plan[root];
        w.h[root] = pack(parent[rl as usize], parent[rr as usize]);
        w
    }
}

/// An inner node's value in a thread's fold when no stored state has that node (references
/// stay below `u32::MAX - 1`: [`super::table::MAX_ENTRIES`]).
pub(super) const ABSENT: u32 = u32::MAX;

thread_local! {
    /// Each thread's memo of the node table's lookups ([`Memo`]): a thread expands parts of
    /// every chunk, so its memo stays warm across parts and chunks (one per part would be
    /// spread over eight times the memory and each see a sixteenth of the lookups).
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

/// The tables and the tree's shape, read by every thread during a chunk.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub(super) roots: Find<'a>,
    pub(super) nodes: Find<'a>,
    /// States stored (root references below this are state numbers).
    pub(super) states: u64,
    pub(super) leaves: usize,
    pub(super) width: usize,
    pub(super) plan: &'a [(u32, u32)],
    pub(super) levels: &'a [Range<usize>],
    /// The level of each inner node (plan index).
    pub(super) level_of: &'a [u8],
    pub(super) up: &'a [u32],
    /// The byte order of the leaves ([`super::layout::order`]) and the leaves each
    /// transition can change ([`fold_start_touched`]; empty when the order is, or when
    /// the model does not say).
    pub(super) order: &'a [u32],
    pub(super) touched: &'a [Vec<u32>],
    /// The step plans ([`step_plans`]; empty when the store keeps no [`Steps`] memo): each
    /// thread then keeps its own memo of steps, in its [`Reader`].
    pub(super) step_plans: &'a [(u32, u32)],
    pub(super) step_at: &'a [usize],
}

/// A thread's working buffers: the trees of the parents of the group it expands (in the
/// order [`Lookup::with_parent`] unfolded them) and one successor's fold.
#[derive(Default)]
pub struct Reader {
    /// `held` trees of `vals` values each, back to back (the group's parents so far).
    parents: Vec<u32>,
    held: usize,
    /// The parent's vector, for the model.
    state: Vec<u8>,
    /// The parent unfolded last (`state` is its vector), as the node and root tables'
    /// identities and its number, so that the next one is unfolded over it
    /// ([`unfold_over`]; the flags it keeps, the leaves it changed).
    last: Vec<u32>,
    last_of: Option<(u64, u64, StateId)>,
    stale: Vec<bool>,
    changed: Vec<u32>,
    /// One successor's leaves; the group's trees (`vals` values each); their dirty nodes
    /// (each successor's ascending), where each successor's list ends, and the successor
    /// (its place in the slice) of each dirty node; which nodes are on the current
    /// successor's list.
    leaves: Vec<u32>,
    vals: Vec<u32>,
    dirty: Vec<u32>,
    /// The [`pair_hash`] of each dirty node (its place in `dirty`), once computed.
    dhash: Vec<u64>,
    ends: Vec<usize>,
    dirty_of: Vec<u32>,
    /// The places in `dirty` by level ([`by_level`]).
    by_level: Vec<u32>,
    level_at: Vec<usize>,
    mark: Vec<u64>,
    /// One absent successor's words for `add_new`.
    words: Vec<u32>,
    /// The thread's memo of steps ([`Steps`]), with the identity of the node table whose
    /// references it holds (renewed when asked about another); the nodes one successor's
    /// fold found missing there; the parent (its index in the group) of each successor of
    /// the slice being looked up.
    steps: Option<(u64, Steps)>,
    missed: Vec<u32>,
    owner: Vec<u32>,
    /// A slice's trees when the tree is narrow ([`Shared::fold_narrow`]).
    narrow: Vec<Narrow>,
}

impl Reader {
    /// RAM the buffers hold.
    pub fn ram_bytes(&self) -> u64 {
        ((self.parents.capacity()
            + self.leaves.capacity()
            + self.vals.capacity()
            + self.dirty.capacity()
            + self.dirty_of.capacity()
            + self.by_level.capacity())
            * 4
            + (self.ends.capacity() + self.level_at.capacity() + self.dhash.capacity()) * 8
            + (self.words.capacity() + self.last.capacity() + self.changed.capacity()) * 4
            + (self.missed.capacity() + self.owner.capacity()) * 4
            + self.stale.capacity()
            + self.state.capacity()
            + self.mark.capacity() * 8
            + self.narrow.capacity() * std::mem::size_of::<Narrow>()) as u64
            + self.steps.as_ref().map_or(0, |(_, s)| s.bytes())
    }
}

/// The parent (its index in the batch's parents) of each successor of a batch in which
/// parent `k` has `counts[k]` successors, in successor order.
#[inline]
pub(super) fn parent_of(counts: &[u32]) -> impl Iterator<Item = usize> + '_ {
    counts
        .iter()
        .enumerate()
        .flat_map(|(k, &c)| std::iter::repeat_n(k, c as usize))
}

/// Refuses a state that is not `width` bytes (the tree's shape is fixed).
pub(super) fn check_width(state: &[u8], width: usize) -> Result<(), StoreError> {
    if state.len() != width {
        return Err(StoreError::Invalid {
            store: "tree",
            message: format!(
                "state of {} bytes in a store of {width}-byte states",
                state.len()
            ),
        });
    }
    Ok(())
}

/// Cuts `state` into `out.len()` leaves (little-endian words, the last zero-padded), its
/// bytes taken in `order` ([`super::layout::order`]; empty: as they are).
#[inline]
pub(super) fn load_leaves(state: &[u8], order: &[u32], out: &mut [u32]) {
    if !order.is_empty() {
        for (l, v) in out.iter_mut().enumerate() {
            *v = gather_leaf(state, order, l);
        }
        return;
    }
    let mut chunks = state.chunks_exact(4);
    for (v, c) in out.iter_mut().zip(&mut chunks) {
        *v = u32::from_le_bytes(c.try_into().expect("4 bytes"));
    }
    let full = state.len() / 4;
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 4];
        w[..rest.len()].copy_from_slice(rest);
        out[full] = u32::from_le_bytes(w);
        out[full + 1..].fill(0);
    } else {
        out[full..].fill(0);
    }
}

/// Starts a successor's fold against its parent's tree `parent`: `v` becomes the parent's
/// tree with the successor's `leaves`, and the successor's *dirty* nodes — the ancestors of
/// its changed leaves, up to the root — go onto `dirty` in plan order, which is height
/// order (a node's children before it). `up` gives each value's parent node; `mark` (one
/// bit per inner node, 64 a word) is all zero before and after: the dirty nodes are listed
/// from its set bits, ascending, with no sort.
#[inline]
pub(super) fn fold_start(
    leaves: &[u32],
    parent: &[u32],
    up: &[u32],
    mark: &mut [u64],
    v: &mut [u32],
    dirty: &mut Vec<u32>,
) {
    let n = leaves.len();
    v.copy_from_slice(parent);
    // The changed leaves as bit masks of 64 leaves, built without a branch per leaf (the
    // compare loop vectorises), then visited by their set bits: a branch per leaf
    // mispredicted at each of the few changed ones.
    for base in (0..n).step_by(64) {
        let (l, p) = (
            &leaves[base..n.min(base + 64)],
            &parent[base..n.min(base + 64)],
        );
        let mut changed = 0u64;
        for (k, (a, b)) in l.iter().zip(p).enumerate() {
            changed |= ((a != b) as u64) << k;
        }
        while changed != 0 {
            let i = base + changed.trailing_zeros() as usize;
            changed &= changed - 1;
            v[i] = leaves[i];
            mark_up(i, n, up, mark);
        }
    }
    list_marked(mark, dirty);
}

/// Marks the ancestors of leaf `i` (of `n`) dirty, up to the root or the first one marked.
#[inline(always)]
fn mark_up(i: usize, n: usize, up: &[u32], mark: &mut [u64]) {
    let root = n - 2;
    let mut j = i;
    loop {
        let k = up[j] as usize;
        let (w, bit) = (k / 64, 1u64 << (k % 64));
        if mark[w] & bit != 0 {
            break;
        }
        mark[w] |= bit;
        if k == root {
            break;
        }
        j = n + k;
    }
}

/// Lists the marked nodes on `dirty`, ascending, and clears the marks.
#[inline(always)]
fn list_marked(mark: &mut [u64], dirty: &mut Vec<u32>) {
    for (w, word) in mark.iter_mut().enumerate() {
        let mut x = *word;
        while x != 0 {
            dirty.push((w * 64) as u32 + x.trailing_zeros());
            x &= x - 1;
        }
        *word = 0;
    }
}

/// Leaf `l` of `state` whose bytes are taken in `order` (zero-padded past the state's end).
/// The word is put together in a register: writing the bytes to a 4-byte array and reading
/// it as one `u32` defeats store-to-load forwarding, a stall per leaf that was 9% of
/// `fold_parents`'s samples on QuasiCertifProtocol-PT-06.
#[inline(always)]
pub(super) fn gather_leaf(state: &[u8], order: &[u32], l: usize) -> u32 {
    let byte = |j: u32| u32::from(state[j as usize]);
    match order.get(4 * l..4 * l + 4) {
        Some(&[a, b, c, d]) => byte(a) | byte(b) << 8 | byte(c) << 16 | byte(d) << 24,
        _ => {
            let rest = order.get(4 * l..).unwrap_or(&[]);
            rest.iter()
                .enumerate()
                .fold(0, |x, (i, &j)| x | byte(j) << (8 * i))
        }
    }
}

/// [`fold_start`] for a store whose leaves take the state's bytes in an `order` of its own
/// ([`super::layout`]), given the leaves the successor's transition can change (`touched`:
/// those holding a byte of a unit it touches, [`Model::touched_units`]): only those are
/// gathered from `state` and compared with the parent's. Gathering every leaf of every
/// successor instead made the regrouped store slower than the model's own layout.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn fold_start_touched(
    state: &[u8],
    touched: &[u32],
    order: &[u32],
    parent: &[u32],
    up: &[u32],
    mark: &mut [u64],
    v: &mut [u32],
    dirty: &mut Vec<u32>,
) {
    let n = parent.len().div_ceil(2);
    v.copy_from_slice(parent);
    for &l in touched {
        let l = l as usize;
        let x = gather_leaf(state, order, l);
        if x != parent[l] {
            v[l] = x;
            mark_up(l, n, up, mark);
        }
    }
    list_marked(mark, dirty);
}

/// Each transition's *step plan*: the leaves it touches (`touched`) and their ancestors
/// below the root, in pre-order from the root's children (left subtree first), each as its
/// index in a tree's values (`leaf`, or `leaves + k` for inner node `k`) and the number of
/// entries its subtree takes after it, so that a [`Steps`] hit skips them. Flattened:
/// transition `t`'s plan is `plans[at[t]..at[t + 1]]`.
pub(super) fn step_plans(
    touched: &[Vec<u32>],
    leaves: usize,
    plan: &[(u32, u32)],
    up: &[u32],
) -> (Vec<(u32, u32)>, Vec<usize>) {
    fn visit(c: u32, leaves: usize, plan: &[(u32, u32)], on: &[bool], out: &mut Vec<(u32, u32)>) {
        if !on[c as usize] {
            return;
        }
        let at = out.len();
        out.push((c, 0));
        if c as usize >= leaves {
            let (l, r) = plan[c as usize - leaves];
            visit(l, leaves, plan, on, out);
            visit(r, leaves, plan, on, out);
        }
        out[at].1 = (out.len() - at - 1) as u32;
    }
    let root = plan.len() - 1;
    let mut on = vec![false; leaves + plan.len()];
    let (mut plans, mut at) = (Vec::new(), vec![0]);
    for t in touched {
        for &l in t {
            let mut j = l as usize;
            while !on[j] {
                on[j] = true;
                let k = up[j] as usize;
                if k == root {
                    break;
                }
                j = leaves + k;
            }
        }
        let start = plans.len();
        let (l, r) = plan[root];
        visit(l, leaves, plan, &on, &mut plans);
        visit(r, leaves, plan, &on, &mut plans);
        for &(c, _) in &plans[start..] {
            on[c as usize] = false;
        }
        at.push(plans.len());
    }
    (plans, at)
}

/// [`fold_start_touched`] through a [`Steps`] memo, for a successor by transition `t` whose
/// step plan ([`step_plans`]) is `steps_of_t`: top-down, a subtree the memo remembers for
/// `t` and the parent's reference takes that reference, and its leaves are not read; a
/// touched leaf outside such subtrees is gathered. A node the memo lacks is folded: dirty
/// if one of its children changed (marked [`ABSENT`] until interned), else the parent's,
/// which the memo then learns. The caller teaches the memo the dirty nodes once interned
/// ([`steps_learn`]).
///
/// `v` is not a copy of the parent's tree: only the values that are read later are written
/// (the root's reference and children, and the children of each node the memo lacks, before
/// the walk reaches them), so `v` holds stale values from earlier successors everywhere
/// else, below remembered nodes and off the plan alike. Nothing reads those: a dirty node's
/// children are leaves, remembered, dirty or unchanged, and every one of them was written.
/// Copying the whole tree had been 7% of a one-thread run on QuasiCertifProtocol-PT-06 (135
/// values a successor, against a handful written here).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn fold_start_steps(
    state: &[u8],
    t: u32,
    steps_of_t: &[(u32, u32)],
    order: &[u32],
    plan: &[(u32, u32)],
    parent: &[u32],
    steps: &mut Steps,
    mark: &mut [u64],
    v: &mut [u32],
    missed: &mut Vec<u32>,
    dirty: &mut Vec<u32>,
) {
    let n = parent.len().div_ceil(2);
    let root = plan.len() - 1;
    let (rl, rr) = plan[root];
    let (rl, rr) = (rl as usize, rr as usize);
    // The plan is in pre-order: a node's children are written here before the walk
    // reaches (and maybe overwrites) them.
    v[rl] = parent[rl];
    v[rr] = parent[rr];
    v[n + root] = parent[n + root];
    missed.clear();
    let mut i = 0;
    while i < steps_of_t.len() {
        let (c, below) = steps_of_t[i];
        let c = c as usize;
        i += 1;
        if c < n {
            v[c] = gather_leaf(state, order, c);
        } else if let Some(r) = steps.recall(t, c - n, parent[c]) {
            v[c] = r;
            i += below as usize;
        } else {
            let (l, r) = plan[c - n];
            v[l as usize] = parent[l as usize];
            v[r as usize] = parent[r as usize];
            missed.push(c as u32);
        }
    }
    let set = |mark: &mut [u64], k: usize| mark[k / 64] |= 1 << (k % 64);
    // Reverse pre-order: a node after its descendants.
    for &c in missed.iter().rev() {
        let (c, k) = (c as usize, c as usize - n);
        let (l, r) = plan[k];
        let (l, r) = (l as usize, r as usize);
        if v[l] != parent[l] || v[r] != parent[r] {
            v[c] = ABSENT;
            set(mark, k);
        } else {
            steps.keep(t, k, parent[c], parent[c]);
        }
    }
    if v[rl] != parent[rl] || v[rr] != parent[rr] {
        set(mark, root);
    }
    list_marked(mark, dirty);
}

/// Teaches `steps` the dirty nodes of a successor by `t` (its tree `v`, its parent's
/// `parent`) once interned or looked up: each but the root ([`fold_start_steps`]), and
/// none that a thread's lookup found [`ABSENT`] (only references the table gave out are
/// remembered, never an absence: the node may be interned later in the run).
#[inline]
pub(super) fn steps_learn(t: u32, dirty: &[u32], parent: &[u32], v: &[u32], steps: &mut Steps) {
    let n = parent.len().div_ceil(2);
    let root = (n - 2) as u32;
    for &k in dirty {
        let c = n + k as usize;
        if k != root && v[c] != ABSENT {
            steps.keep(t, k as usize, parent[c], v[c]);
        }
    }
}

/// Lists the places in `dirty` (a batch's dirty nodes, plan indexes, each successor's
/// ascending) level by level: level `l`'s are `out[at[l]..at[l + 1]]`, in the order they
/// have in `dirty` (a stable counting sort), so that each level's nodes come successor by
/// successor. Interning them in this order gives every node the reference that interning
/// each successor's nodes in turn, height by height, gives; and a level's pass visits only
/// its own nodes, where walking every successor's list per level had visited each
/// successor about eight times for its few dirty nodes.
pub(super) fn by_level(
    dirty: &[u32],
    level_of: &[u8],
    levels: usize,
    at: &mut Vec<usize>,
    out: &mut Vec<u32>,
) {
    at.clear();
    at.resize(levels + 1, 0);
    for &k in dirty {
        at[level_of[k as usize] as usize + 1] += 1;
    }
    for l in 1..at.len() {
        at[l] += at[l - 1];
    }
    out.clear();
    out.resize(dirty.len(), 0);
    // `at[l]` serves as level `l`'s next free place, then is put back.
    for (j, &k) in dirty.iter().enumerate() {
        let l = level_of[k as usize] as usize;
        out[at[l]] = j as u32;
        at[l] += 1;
    }
    for l in (1..at.len()).rev() {
        at[l] = at[l - 1];
    }
    at[0] = 0;
}

/// The state vector (`width` bytes) of the unfolded tree `vals` of `leaves` leaves, whose
/// bytes were taken in `order` ([`load_leaves`]).
pub(super) fn write_state(
    vals: &[u32],
    leaves: usize,
    width: usize,
    order: &[u32],
    out: &mut Vec<u8>,
) {
    out.clear();
    if order.is_empty() {
        for v in &vals[..leaves] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.truncate(width);
        return;
    }
    out.resize(width, 0);
    for (j, &to) in order.iter().enumerate() {
        out[to as usize] = (vals[j / 4] >> (8 * (j % 4))) as u8;
    }
}

/// Unfolds the tree whose root pair is `root` (state `id`) into `vals`, reading the inner
/// nodes' pairs with `pair`.
#[inline]
pub(super) fn unfold_from(
    root: u64,
    id: StateId,
    leaves: usize,
    plan: &[(u32, u32)],
    pair: impl Fn(u32) -> u64,
    vals: &mut [u32],
) {
    let (l, r) = *plan.last().expect("at least two leaves");
    vals[leaves + plan.len() - 1] = id as u32;
    vals[l as usize] = root as u32;
    vals[r as usize] = (root >> 32) as u32;
    for k in (0..plan.len() - 1).rev() {
        let p = pair(vals[leaves + k]);
        let (l, r) = plan[k];
        vals[l as usize] = p as u32;
        vals[r as usize] = (p >> 32) as u32;
    }
}

/// [`unfold_from`] over `vals`, which holds the unfolding of another state: a node whose
/// reference did not change keeps its subtree, so only the paths to the leaves that
/// differ are read (consecutive states of a BFS level share most of their nodes). Pushes
/// the leaves whose value changed onto `changed`. `stale` (a flag per inner node) must be
/// all clear, and is left so: a node is flagged when its parent gives it a new reference
/// and cleared when it is read, children after their parents.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(super) fn unfold_over(
    root: u64,
    id: StateId,
    leaves: usize,
    plan: &[(u32, u32)],
    pair: impl Fn(u32) -> u64,
    vals: &mut [u32],
    stale: &mut [bool],
    changed: &mut Vec<u32>,
) {
    let top = plan.len() - 1;
    let mut set = |vals: &mut [u32], stale: &mut [bool], c: u32, x: u32| {
        let c = c as usize;
        if vals[c] != x {
            vals[c] = x;
            if c < leaves {
                changed.push(c as u32);
            } else {
                stale[c - leaves] = true;
            }
        }
    };
    vals[leaves + top] = id as u32;
    let (l, r) = plan[top];
    set(vals, stale, l, root as u32);
    set(vals, stale, r, (root >> 32) as u32);
    for k in (0..top).rev() {
        if !stale[k] {
            continue;
        }
        stale[k] = false;
        let p = pair(vals[leaves + k]);
        let (l, r) = plan[k];
        set(vals, stale, l, p as u32);
        set(vals, stale, r, (p >> 32) as u32);
    }
}

/// Rewrites in `out`, the state vector of an earlier unfolding, the bytes of the leaves
/// `changed` of `vals` (as [`write_state`] writes them).
pub(super) fn write_leaves(
    vals: &[u32],
    changed: &[u32],
    width: usize,
    order: &[u32],
    out: &mut [u8],
) {
    for &j in changed {
        let bytes = vals[j as usize].to_le_bytes();
        let at = 4 * j as usize;
        for (b, &x) in bytes.iter().enumerate() {
            let i = at + b;
            if i >= width {
                break;
            }
            let to = if order.is_empty() {
                i
            } else {
                order[i] as usize
            };
            out[to] = x;
        }
    }
}

impl Shared<'_> {
    fn values(&self) -> usize {
        self.leaves + self.plan.len()
    }
}

impl Lookup for Shared<'_> {
    type Reader = Reader;
    /// The nodes the tables lack name the state: a node's value is [`ABSENT`] if a child's
    /// is, else its reference if the table (unchanged during the chunk) holds its pair,
    /// else `ABSENT`, whatever path the fold took (the memos give out only references the
    /// table holds, and every absent node is dirty), so the absent nodes in ascending plan
    /// order, each with its children's values, are one list for each state and tell its
    /// tree apart from any other.
    const EXTRA_NAMES_STATE: bool = true;

    /// Unfolds parent `id` (kept for its successors' lookups) and hands the model its vector.
    fn with_parent<R>(
        &self,
        r: &mut Reader,
        id: StateId,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        if id >= self.states {
            return Err(StorageError::Invalid(format!(
                "tree: parent {id} of a parallel chunk of {} states",
                self.states
            )));
        }
        let nv = self.values();
        let at = r.held * nv;
        if r.parents.len() < at + nv {
            r.parents.resize(at + nv, 0);
        }
        let root = self.roots.pair(id as u32);
        let key = (self.nodes.id(), self.roots.id(), id);
        let pair = |x| self.nodes.pair(x);
        match r.last_of.take() {
            Some(was) if (was.0, was.1) == (key.0, key.1) => {
                r.changed.clear();
                let (last, stale, changed) = (&mut r.last, &mut r.stale, &mut r.changed);
                unfold_over(root, id, self.leaves, self.plan, pair, last, stale, changed);
                write_leaves(last, changed, self.width, self.order, &mut r.state);
            }
            _ => {
                r.last.resize(nv, 0);
                r.stale.clear();
                r.stale.resize(self.plan.len(), false);
                unfold_from(root, id, self.leaves, self.plan, pair, &mut r.last);
                write_state(&r.last, self.leaves, self.width, self.order, &mut r.state);
            }
        }
        r.last_of = Some(key);
        r.parents[at..at + nv].copy_from_slice(&r.last);
        r.held += 1;
        Ok(f(&r.state))
    }

    /// [`super::TreeStore::fold_batch`] without writes, over the whole group: every
    /// successor starts as a copy of its parent's tree, and its dirty nodes are looked up
    /// height by height for all successors at once (each height's home slots prefetched
    /// first). A node the node table lacks, or whose child it lacks, is [`ABSENT`]: no
    /// stored state has it. The root settles the successor: stored (its reference is the
    /// state number) or absent. An absent successor hands on its absent nodes in height
    /// order, as `(node, left child, right child)` words (a child that is itself absent
    /// has a placeholder): all `add_new` must intern for it.
    fn find_group(
        &self,
        r: &mut Reader,
        _model: &dyn Model,
        _scratch: &mut Scratch,
        batch: &StateBatch,
        counts: &[u32],
        hashes: &mut Vec<u64>,
        found: &mut Vec<Found>,
        extra: &mut Extra,
    ) -> Result<(), StoreError> {
        let m = batch.len();
        let held = std::mem::take(&mut r.held);
        if counts.len() != held || counts.iter().map(|&c| c as usize).sum::<usize>() != m {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!(
                    "a parallel group of {m} successors of {} parents, {held} unfolded",
                    counts.len()
                ),
            });
        }
        // The parents' trees are read while a slice is settled: out of the reader meanwhile.
        let parents = std::mem::take(&mut r.parents);
        let res = if self.plan.len() <= NARROW_NODES {
            self.fold_narrow(r, &parents, batch, counts, hashes, found, extra)
        } else {
            self.fold_slices(r, &parents, batch, counts, hashes, found, extra)
        };
        r.parents = parents;
        res
    }
}

/// Successors a thread folds and looks up together ([`Shared::fold_slices`]): enough that
/// a height's misses overlap (a group of 8 parents has 32–85 successors on the reference
/// nets), few enough that a parent with hundreds of successors does not leave every part's
/// buffers that large for the rest of the run (SharedMemory-PT-000010, two threads: 4 MiB
/// of its 32 MiB peak).
const SLICE: usize = 128;

impl Shared<'_> {
    /// [`Lookup::find_group`]'s work, [`SLICE`] successors at a time (each slice's trees,
    /// dirty nodes and hashes in the reader's buffers); `parents` holds the group's trees.
    #[allow(clippy::too_many_arguments)]
    fn fold_slices(
        &self,
        r: &mut Reader,
        parents: &[u32],
        batch: &StateBatch,
        counts: &[u32],
        hashes: &mut Vec<u64>,
        found: &mut Vec<Found>,
        extra: &mut Extra,
    ) -> Result<(), StoreError> {
        let (n, nv) = (self.leaves, self.values());
        r.leaves.resize(n, 0);
        r.mark.resize(self.plan.len().div_ceil(64), 0);
        r.dirty.clear();
        r.ends.clear();
        r.dirty_of.clear();
        r.owner.clear();
        if self.step_at.is_empty() {
            r.steps = None;
        } else if r
            .steps
            .as_ref()
            .is_none_or(|(id, _)| *id != self.nodes.id())
        {
            r.steps = Steps::new(self.plan.len() - 1, self.touched.len())
                .map(|steps| (self.nodes.id(), steps));
        }
        let at = found.len();
        let (mut s, mut first) = (0, 0);
        for (k, &count) in counts.iter().enumerate() {
            let parent = &parents[k * nv..(k + 1) * nv];
            for _ in 0..count {
                if s - first == SLICE {
                    self.settle(r, first..s, &mut found[at + first..], hashes, extra)?;
                    self.learn_steps(r, parents, batch, first);
                    r.dirty.clear();
                    r.ends.clear();
                    r.dirty_of.clear();
                    r.owner.clear();
                    first = s;
                }
                let state = batch.get(s);
                check_width(state, self.width)?;
                let i = s - first;
                if r.vals.len() < (i + 1) * nv {
                    r.vals.resize((i + 1) * nv, 0);
                }
                let start = r.dirty.len();
                let Reader {
                    leaves,
                    vals,
                    dirty,
                    mark,
                    steps,
                    missed,
                    ..
                } = &mut *r;
                let v = &mut vals[i * nv..(i + 1) * nv];
                let t = batch.transition(s).0 as usize;
                match (self.touched.get(t), steps) {
                    (Some(_), Some((_, steps))) => {
                        let plan_t = &self.step_plans[self.step_at[t]..self.step_at[t + 1]];
                        let (o, plan) = (self.order, self.plan);
                        let tid = t as u32;
                        fold_start_steps(
                            state, tid, plan_t, o, plan, parent, steps, mark, v, missed, dirty,
                        );
                    }
                    (Some(t), None) => {
                        let o = self.order;
                        fold_start_touched(state, t, o, parent, self.up, mark, v, dirty);
                    }
                    _ => {
                        load_leaves(state, self.order, leaves);
                        fold_start(leaves, parent, self.up, mark, v, dirty);
                    }
                }
                r.ends.push(r.dirty.len());
                r.dirty_of.resize(r.dirty.len(), i as u32);
                r.owner.push(k as u32);
                // No leaf changed: the parent itself (a self-loop). The others are settled
                // at their root below.
                found.push(if start == r.dirty.len() {
                    Found::Stored(parent[nv - 1] as StateId)
                } else {
                    Found::Undecided
                });
                s += 1;
            }
        }
        if s > first {
            self.settle(r, first..s, &mut found[at + first..], hashes, extra)?;
            self.learn_steps(r, parents, batch, first);
        }
        Ok(())
    }

    /// [`Shared::fold_slices`] for narrow trees: [`super::TreeStore::fold_narrow`]'s three
    /// passes without writes, [`SLICE`] successors at a time — gather and hash (the nodes'
    /// home slots prefetched), look the nodes up through the thread's memo and hash the
    /// roots (prefetched), look the roots up. Answers and words are `fold_slices`'s: a
    /// node the table lacks is [`ABSENT`], and so is a root with such a child, unlooked.
    #[allow(clippy::too_many_arguments)]
    fn fold_narrow(
        &self,
        r: &mut Reader,
        parents: &[u32],
        batch: &StateBatch,
        counts: &[u32],
        hashes: &mut Vec<u64>,
        found: &mut Vec<Found>,
        extra: &mut Extra,
    ) -> Result<(), StoreError> {
        // Flags of `Narrow::dirty` beside the nodes' bits: the successor is not its parent;
        // its root has an absent child.
        const DIFFERS: u8 = 1 << 7;
        const ORPHAN: u8 = 1 << 6;
        let (n, nv, m) = (self.leaves, self.values(), batch.len());
        let root = self.plan.len() - 1;
        let (rl, rr) = (self.plan[root].0 as usize, self.plan[root].1 as usize);
        let mut parent_of = parent_of(counts);
        let mut memo = MEMO.take();
        let mut first = 0;
        let res = (|| {
            while first < m {
                let slice = first..(first + SLICE).min(m);
                r.narrow.clear();
                for (s, k) in slice.clone().zip(&mut parent_of) {
                    let state = batch.get(s);
                    check_width(state, self.width)?;
                    let pv = &parents[k * nv..(k + 1) * nv];
                    let touched = self.touched.get(batch.transition(s).0 as usize);
                    let (o, plan, nodes) = (self.order, self.plan, self.nodes);
                    r.narrow
                        .push(Narrow::start(state, touched, o, plan, n, pv, nodes));
                }
                let absent = |w: &Narrow, c: usize| c >= n && w.v[c] == ABSENT;
                for w in r.narrow.iter_mut() {
                    for (k, &(l, rt)) in self.plan[..root].iter().enumerate() {
                        if w.dirty & 1 << k != 0 {
                            let p = pack(w.v[l as usize], w.v[rt as usize]);
                            w.v[n + k] = memo.find(&self.nodes, p, w.h[k]).unwrap_or(ABSENT);
                        }
                    }
                    let pair = pack(w.v[rl], w.v[rr]);
                    if pair != w.h[root] {
                        w.dirty |= DIFFERS;
                        if absent(w, rl) || absent(w, rr) {
                            w.dirty |= ORPHAN;
                        } else {
                            w.h[root] = pair_hash(pair);
                            self.roots.touch_hashed(w.h[root]);
                        }
                    }
                }
                for w in r.narrow.iter_mut() {
                    r.words.clear();
                    let f = if w.dirty & DIFFERS == 0 {
                        // No leaf changed: the parent itself (a self-loop).
                        Found::Stored(w.v[nv - 1] as StateId)
                    } else {
                        let got = if w.dirty & ORPHAN != 0 {
                            None
                        } else {
                            self.roots.find_hashed(pack(w.v[rl], w.v[rr]), w.h[root])
                        };
                        match got {
                            Some(id) => Found::Stored(id as StateId),
                            None => {
                                w.v[n + root] = ABSENT;
                                for (k, &(l, rt)) in self.plan.iter().enumerate() {
                                    let dirty = k == root || w.dirty & 1 << k != 0;
                                    if dirty && w.v[n + k] == ABSENT {
                                        let (l, rt) = (w.v[l as usize], w.v[rt as usize]);
                                        r.words.extend_from_slice(&[k as u32, l, rt]);
                                    }
                                }
                                Found::Absent
                            }
                        }
                    };
                    // Only a successor not stored needs its hash (the chunk's table of
                    // candidates is keyed by it).
                    hashes.push(match f {
                        Found::Absent => Extra::hash(&r.words),
                        _ => 0,
                    });
                    found.push(f);
                    extra.push(&r.words);
                }
                first = slice.end;
            }
            Ok(())
        })();
        MEMO.set(memo);
        res
    }

    /// Teaches the reader's [`Steps`] memo what [`Shared::settle`] found for the slice of
    /// successors starting at `first` ([`steps_learn`]).
    fn learn_steps(&self, r: &mut Reader, parents: &[u32], batch: &StateBatch, first: usize) {
        let Some((_, steps)) = &mut r.steps else {
            return;
        };
        let nv = self.values();
        for (i, &k) in r.owner.iter().enumerate() {
            let t = batch.transition(first + i).0;
            if (t as usize) < self.touched.len() {
                let start = if i == 0 { 0 } else { r.ends[i - 1] };
                let parent = &parents[k as usize * nv..(k as usize + 1) * nv];
                let v = &r.vals[i * nv..(i + 1) * nv];
                steps_learn(t, &r.dirty[start..r.ends[i]], parent, v, steps);
            }
        }
    }

    /// Looks up the dirty nodes of successors `slice` of the batch (the reader's trees
    /// `0..slice.len()`, whose answers start `found`) height by height, and hands on what
    /// an absent one lacks and its hash.
    fn settle(
        &self,
        r: &mut Reader,
        slice: Range<usize>,
        found: &mut [Found],
        hashes: &mut Vec<u64>,
        extra: &mut Extra,
    ) -> Result<(), StoreError> {
        let (n, nv, m) = (self.leaves, self.values(), slice.len());
        let root = self.plan.len() - 1;
        let Reader {
            vals,
            dirty,
            dhash,
            ends,
            dirty_of,
            by_level: places,
            level_at: at,
            words,
            ..
        } = r;
        dhash.resize(dirty.len(), 0);
        by_level(dirty, self.level_of, self.levels.len(), at, places);
        // Whether value `c` of a tree is an inner node no stored state has.
        let absent = |v: &[u32], c: u32| c as usize >= n && v[c as usize] == ABSENT;
        // The thread's memo of the node table, taken for the slice and put back after.
        let mut memo = MEMO.take();
        for l in 0..self.levels.len() {
            let table = if l == self.levels.len() - 1 {
                &self.roots
            } else {
                &self.nodes
            };
            let level = &places[at[l]..at[l + 1]];
            // Hash the level's nodes and ask for their home slots, then look them up: the
            // misses of a level overlap. A node with an absent child is not looked up.
            for &j in level {
                let j = j as usize;
                let v = &vals[dirty_of[j] as usize * nv..];
                let (a, b) = self.plan[dirty[j] as usize];
                if !absent(v, a) && !absent(v, b) {
                    dhash[j] = pair_hash(pack(v[a as usize], v[b as usize]));
                    table.touch_hashed(dhash[j]);
                }
            }
            for &j in level {
                let j = j as usize;
                let s = dirty_of[j] as usize;
                let v = &mut vals[s * nv..(s + 1) * nv];
                let k = dirty[j] as usize;
                let (a, b) = self.plan[k];
                let got = if absent(v, a) || absent(v, b) {
                    None
                } else {
                    let (p, h) = (pack(v[a as usize], v[b as usize]), dhash[j]);
                    if k == root {
                        table.find_hashed(p, h)
                    } else {
                        memo.find(table, p, h)
                    }
                };
                v[n + k] = got.unwrap_or(ABSENT);
                if k == root {
                    found[s] = got.map_or(Found::Absent, |id| Found::Stored(id as StateId));
                }
            }
        }
        MEMO.set(memo);
        for s in 0..m {
            let v = &vals[s * nv..(s + 1) * nv];
            words.clear();
            if found[s] == Found::Absent {
                let start = if s == 0 { 0 } else { ends[s - 1] };
                for &k in &dirty[start..ends[s]] {
                    if v[n + k as usize] == ABSENT {
                        let (l, r) = self.plan[k as usize];
                        words.extend_from_slice(&[k, v[l as usize], v[r as usize]]);
                    }
                }
            }
            extra.push(words);
            // Only a successor not stored needs its hash (the chunk's table of candidates
            // is keyed by it, [`Lookup::EXTRA_NAMES_STATE`]); most are stored.
            hashes.push(match found[s] {
                Found::Stored(_) => 0,
                Found::Absent => Extra::hash(words),
                Found::Undecided => {
                    return Err(StoreError::Invalid {
                        store: "tree",
                        message: format!(
                            "successor {} of a parallel group reached no root",
                            slice.start + s
                        ),
                    })
                }
            });
        }
        Ok(())
    }
}
