//! Tree compression (Blom, Lisser, van de Pol, Weber's tree database; Laarman, van de Pol,
//! Weber, "Parallel Recursive State Compression for Free", SPIN 2011): `--store tree`, exact.
//!
//! A state vector is cut into 4-byte leaves (the last one zero-padded, at least two) and
//! folded pairwise into a balanced binary tree of fixed shape. Every inner node is a pair
//! of 32-bit children — leaf values at the bottom, references of nodes above — interned in
//! one shared node table (`tree.nodes`); the root pair is interned in the root table
//! (`tree.roots`), whose references are numbered in insertion order, so **the root's
//! reference is the state number** and the root table doubles as the visited set. Two
//! states that share a subtree share its nodes, so a state costs its root (8 bytes plus a
//! 4-byte index slot) and the few nodes no stored state had.
//!
//! Insertion is incremental: a successor is folded against its parent's tree (the engines
//! say which state it came from), re-interning only the nodes above leaves that changed
//! and reusing the parent's references elsewhere. The parent's tree is the one `get`
//! unfolded last (BFS reads the parent, then inserts its successors), the state inserted
//! last (DFS descends into it), or else unfolded from its root. `get` unfolds from the
//! root: one node read per inner node.
//!
//! The tables live in RAM. Under `--memory` both charge their pairs and index to the budget,
//! and when they would outgrow their share of it (half, as the full store's index) the
//! store **hands its states over** to a spilling full store: every state is unfolded, in id
//! order, into the full store's segment vector of states, the tables are freed, and the
//! full store indexes them (in RAM if its table fits its share, else straight into sorted
//! runs with a fresh window: docs/ARCHITECTURE.md, "The disk-resident visited set"). From
//! then on the store is the full store's bounded path, numbering unchanged, so the run
//! stays exact and its LTS identical; RAM holds the window, not the tree. Without a budget
//! the tables grow up to the machine's memory ceiling (exit 6 there).
//!
//! A checkpointed run logs every new pair in two segment vectors (`tree.roots.log`,
//! `tree.nodes.log`); resuming reloads them and rebuilds the indexes, so a checkpoint costs
//! only what changed. After a hand-over the checkpoint is the full store's, and the logs
//! are deleted once a checkpoint that no longer needs them is on disk.

mod enter;
mod layout;
mod shared;
mod table;

pub use shared::{Reader, Shared};

use super::full::{FullStore, SharedVectors};
use super::window::index_share;
use super::{
    decode_blob, encode_blob, Exactness, Insert, NewState, Resolver, SharedIndex, StateBatch,
    StateId, StateStore, StoreMark, StoreSpec, Via,
};
use crate::error::StoreError;
use crate::model::Model;
use crate::storage::budget::MemoryLimit;
use crate::storage::segment::HashId;
use crate::storage::{FileMark, Storage, VecMark};
use serde_json::json;
use shared::{Narrow, NARROW_NODES};
use std::ops::Range;
use table::{pack, Charge, NodeTable};

const ROOTS_LOG: &str = "tree.roots.log";
const NODES_LOG: &str = "tree.nodes.log";

/// `--store tree`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TreeOptions {
    /// Under `--memory`, hand the states over once the tables would hold more than this many
    /// states, and cap the full store's index table at as many slots (hidden
    /// `--tree-index-slots`: tests of the hand-over on small models; `None`: half the budget
    /// decides both).
    pub index_slots: Option<u64>,
}

impl StoreSpec for TreeOptions {
    fn name(&self) -> &'static str {
        "tree"
    }

    fn build<'m>(
        &self,
        model: &'m dyn Model,
        storage: Option<&Storage>,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        let mut s = TreeStore::build(width(model)?, storage)?;
        let units = model.touched_units();
        s.set_order(layout::order(s.width, units.as_ref()), units.as_ref());
        s.index_slots = self.index_slots;
        Ok(Box::new(s))
    }

    fn resume<'m>(
        &self,
        model: &'m dyn Model,
        storage: &Storage,
        mark: &StoreMark,
    ) -> Result<Box<dyn StateStore + 'm>, StoreError> {
        Ok(Box::new(TreeStore::resume(
            width(model)?,
            storage,
            mark,
            self.index_slots,
            model.touched_units(),
        )?))
    }
}

/// The fixed state width the tree's shape is built for.
fn width(model: &dyn Model) -> Result<usize, StoreError> {
    model.state_len().ok_or_else(|| StoreError::Invalid {
        store: "tree",
        message: "the tree store needs fixed-width states (its tree shape is fixed); this model's states vary in width: use --store full".into(),
    })
}

/// What a checkpoint records.
#[derive(serde::Serialize, serde::Deserialize)]
enum Mark {
    /// The tables, as their logs hold them.
    Tables {
        width: usize,
        /// The leaves' byte order the tables were built with (empty: as given).
        order: Vec<u32>,
        roots: u64,
        nodes: u64,
        roots_log: VecMark,
        nodes_log: VecMark,
    },
    /// The states were handed over to the full store at `handed_at` states: its mark.
    Full {
        width: usize,
        handed_at: u64,
        full: StoreMark,
    },
}

/// The states, once the tables have handed them over to the full store (see the module
/// documentation).
struct Handed {
    full: FullStore,
    /// States stored when the hand-over happened.
    at: u64,
    /// Checkpoints taken since: the second finds the first (which no longer lists the
    /// tables' logs) on disk, and deletes the logs.
    checkpoints: u32,
}

/// A state's tree: `vals[..leaves]` are the leaf values, `vals[leaves + k]` the reference of
/// inner node `k` (the last one, the root, holds the state number).
struct Tree {
    id: StateId,
    vals: Vec<u32>,
}

/// No state.
const NONE: StateId = u64::MAX;

/// How many trees of `nv` values [`RECENT_BYTES`] keeps.
fn recent_slots(nv: usize) -> usize {
    (RECENT_BYTES / (4 * nv)).clamp(16, 256)
}

/// Successors a delayed batch takes ([`StateStore::delayed_batch`]): the lookups of a
/// height overlap their misses across the batch, as the full store's grouped lookups do.
const MANY: usize = 128;

/// Bytes of parent trees kept for a delayed batch: BFS reads a batch's parents just before
/// handing it over, at most [`MANY`] of them unless some have no successors; room for 256
/// trees of up to 128 leaves, fewer (at least 16) of wider ones. A parent whose tree was
/// not kept is unfolded again.
const RECENT_BYTES: usize = 256 << 10;

/// Trees of at most this many leaves fold without a steps memo: the root's children are
/// then pairs of leaves, so a step the memo answers saves one pair lookup, about what the
/// step's own lookup and learning cost. Two threads, two interleaved rounds (29 November):
/// Kanban-PT-00005 (4 leaves) 3.56/3.10 → 4.25/3.87 s with the memo, SwimmingPool-PT-02
/// (3 leaves, every state its own node: no step recurs) 3.66/3.95 → 3.98/4.19 s;
/// FMS-PT-00005 (6) 3.94/3.91 → 3.98/4.20 s, TCPcondis-PT-05 (8) 5.66/5.75 → 5.37/5.31 s.
const STEPS_MIN_LEAVES: usize = 4;

pub struct TreeStore {
    width: usize,
    leaves: usize,
    /// Inner nodes, children before parents, the root last: indexes into a tree's `vals`.
    plan: Vec<(u32, u32)>,
    /// The ranges of `plan` that make up each level, bottom first (the root alone last).
    levels: Vec<Range<usize>>,
    roots: NodeTable,
    nodes: NodeTable,
    /// The tree being folded, and which of its values differ from the parent's.
    cur: Vec<u32>,
    changed: Vec<bool>,
    /// The tree `get` unfolded last (a BFS parent), and its state vector.
    got: Tree,
    state: Vec<u8>,
    /// Which state `state` holds (`NONE`: none yet); the inner nodes an unfolding over
    /// `got` flagged ([`shared::unfold_over`]: all clear between calls) and the leaves it
    /// changed, which are all `get` rewrites in `state` when it held `got`'s state.
    state_of: StateId,
    stale: Vec<bool>,
    got_changed: Vec<u32>,
    /// The trees of the last states `get` unfolded (up to [`RECENT_BYTES`]), state `id` at
    /// `id % recent_ids.len()` (`recent_ids` says which is there), for
    /// [`StateStore::insert_many`]; its parents' trees back to back and their successor
    /// counts.
    recent: Vec<u32>,
    recent_ids: Vec<StateId>,
    many_trees: Vec<u32>,
    many_counts: Vec<u32>,
    /// The tree inserted last (a DFS parent).
    last: Tree,
    /// A batch's trees (`batch × vals`), their dirty nodes (plan indexes, each successor's
    /// ascending) and where each successor's list ends.
    batch_vals: Vec<u32>,
    batch_dirty: Vec<u32>,
    /// The [`table::pair_hash`] of each of `batch_dirty`'s nodes.
    batch_hashes: Vec<u64>,
    batch_ends: Vec<usize>,
    /// The batch's dirty nodes by level: `batch_by_level[batch_level_at[l]..batch_level_at[l
    /// + 1]]` are the places in `batch_dirty` of level `l`'s, in successor order, and
    /// `batch_owner` names each one's successor.
    batch_by_level: Vec<u32>,
    batch_level_at: Vec<usize>,
    batch_owner: Vec<u32>,
    /// The level of each inner node (plan index).
    level_of: Vec<u8>,
    /// Which inner nodes (plan indexes) are already on the successor's dirty list, a bit
    /// each; all zero between successors.
    batch_mark: Vec<u64>,
    /// A parallel chunk's new nodes and roots, given their references as the numbering
    /// thread numbers the new states, appended after the chunk ([`StateStore::add_new`]).
    entering: enter::Entering,
    /// The plan index of each value's parent node (the root's entry is unused).
    up: Vec<u32>,
    /// The leaves' byte order ([`layout::order`]; empty: the model's own), and the leaves
    /// each transition can change ([`layout::touched_leaves`]; empty when the order is, or
    /// when the model does not say: every leaf is compared then).
    order: Vec<u32>,
    touched: Vec<Vec<u32>>,
    /// Each transition's step plan ([`shared::step_plans`]: transition `t`'s is
    /// `step_plans[step_at[t]..step_at[t + 1]]`), when the node table keeps a
    /// [`table::Steps`] memo; and the nodes a successor's fold found missing there.
    step_plans: Vec<(u32, u32)>,
    step_at: Vec<usize>,
    batch_missed: Vec<u32>,
    /// A narrow batch's trees ([`TreeStore::fold_narrow`]).
    narrow: Vec<Narrow>,
    /// Inserts folded against a known parent tree / from scratch; parents unfolded to do so.
    incremental: u64,
    whole: u64,
    parent_unfolds: u64,
    /// A handle on the run's storage when it has a `--memory` budget: where the states go
    /// when the tables outgrow their share.
    bounded: Option<Storage>,
    handed: Option<Box<Handed>>,
    /// See [`TreeOptions::index_slots`].
    index_slots: Option<u64>,
    /// [`StateStore::set_threads`], for the full store once the states are handed over.
    threads: usize,
}

/// The balanced fold of `leaves` leaves (each node splits its leaves in halves, the larger
/// half left), ordered by height. Returns `(left, right)` per inner node, children before
/// parents and the root last, and the range of inner nodes of each height (a batch interns
/// a whole height of all its successors at once, so that the misses of a height overlap).
///
/// Balanced halves matter: folding adjacent pairs level by level and carrying an odd value
/// up (33 leaves: 32 + 1 at the root) makes the big subtree nearly as varied as the state,
/// one extra node per state (measured on SharedMemory-PT-000010).
fn plan(leaves: usize) -> (Vec<(u32, u32)>, Vec<Range<usize>>) {
    // (left, right, height) in recursion order, children first.
    fn build(a: usize, b: usize, leaves: usize, out: &mut Vec<(u32, u32, u32)>) -> (u32, u32) {
        if b - a == 1 {
            return (a as u32, 0);
        }
        let mid = a + (b - a).div_ceil(2);
        let (l, hl) = build(a, mid, leaves, out);
        let (r, hr) = build(mid, b, leaves, out);
        let h = hl.max(hr) + 1;
        out.push((l, r, h));
        ((leaves + out.len() - 1) as u32, h)
    }
    let mut rec = Vec::with_capacity(leaves - 1);
    build(0, leaves, leaves, &mut rec);
    // Renumber the inner nodes by height (stable, so the root stays last).
    let mut order: Vec<usize> = (0..rec.len()).collect();
    order.sort_by_key(|&k| rec[k].2);
    let mut new_index = vec![0u32; rec.len()];
    for (pos, &k) in order.iter().enumerate() {
        new_index[k] = (leaves + pos) as u32;
    }
    let map = |v: u32| {
        if (v as usize) < leaves {
            v
        } else {
            new_index[v as usize - leaves]
        }
    };
    let plan: Vec<(u32, u32)> = order
        .iter()
        .map(|&k| (map(rec[k].0), map(rec[k].1)))
        .collect();
    let mut levels: Vec<Range<usize>> = Vec::new();
    for (pos, &k) in order.iter().enumerate() {
        match levels.last_mut() {
            Some(r) if rec[order[r.start]].2 == rec[k].2 => r.end = pos + 1,
            _ => levels.push(pos..pos + 1),
        }
    }
    (plan, levels)
}

impl TreeStore {
    /// An empty store for states of `width` bytes, charged to `storage`'s budget when it has
    /// a limit and logging its pairs when it is a checkpointed run's.
    pub fn build(width: usize, storage: Option<&Storage>) -> Result<Self, StoreError> {
        let charge = |name: &str| {
            storage
                .filter(|st| st.config.memory != MemoryLimit::Unlimited)
                .map(|st| Charge {
                    account: st.budget.account(name),
                    budget: st.budget.clone(),
                })
        };
        let log = |name: &str| -> Result<_, StoreError> {
            Ok(match storage {
                Some(st) if st.is_kept() => Some(st.sequential_vec(name, 8, HashId::None)?),
                _ => None,
            })
        };
        let roots = NodeTable::new("tree.roots", charge("tree.roots"), log(ROOTS_LOG)?);
        let mut nodes = NodeTable::new("tree.nodes", charge("tree.nodes"), log(NODES_LOG)?);
        nodes.remember();
        let leaves = width.div_ceil(4).max(2);
        let n = 2 * leaves - 1;
        let (plan, levels) = plan(leaves);
        let level_of = (0..levels.len())
            .flat_map(|l| levels[l].clone().map(move |_| l as u8))
            .collect();
        let mut up = vec![0u32; n];
        for (k, &(l, r)) in plan.iter().enumerate() {
            up[l as usize] = k as u32;
            up[r as usize] = k as u32;
        }
        Ok(TreeStore {
            width,
            leaves,
            plan,
            levels,
            roots,
            nodes,
            cur: vec![0; n],
            changed: vec![false; n],
            got: Tree {
                id: NONE,
                vals: vec![0; n],
            },
            state: Vec::with_capacity(width),
            state_of: NONE,
            stale: vec![false; n - leaves],
            got_changed: Vec::new(),
            recent: vec![0; recent_slots(n) * n],
            recent_ids: vec![NONE; recent_slots(n)],
            many_trees: Vec::new(),
            many_counts: Vec::new(),
            last: Tree {
                id: NONE,
                vals: vec![0; n],
            },
            batch_vals: Vec::new(),
            batch_dirty: Vec::new(),
            batch_hashes: Vec::new(),
            batch_ends: Vec::new(),
            batch_by_level: Vec::new(),
            batch_level_at: Vec::new(),
            batch_owner: Vec::new(),
            level_of,
            batch_mark: vec![0; (leaves - 1).div_ceil(64)],
            entering: enter::Entering::default(),
            up,
            incremental: 0,
            whole: 0,
            parent_unfolds: 0,
            bounded: storage
                .filter(|st| st.config.memory != MemoryLimit::Unlimited)
                .map(Storage::handle),
            handed: None,
            threads: 1,
            index_slots: None,
            order: Vec::new(),
            touched: Vec::new(),
            step_plans: Vec::new(),
            step_at: Vec::new(),
            batch_missed: Vec::new(),
            narrow: Vec::new(),
        })
    }

    /// Reopens a checkpointed store: reloads both logs and rebuilds the indexes.
    pub fn resume(
        width: usize,
        storage: &Storage,
        mark: &StoreMark,
        index_slots: Option<u64>,
        units: Option<(usize, Vec<Vec<u32>>)>,
    ) -> Result<Self, StoreError> {
        let m: Mark = decode_blob("tree", &mark.blob)?;
        let (Mark::Tables { width: w, .. } | Mark::Full { width: w, .. }) = m;
        if w != width {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!(
                    "the checkpoint holds {w}-byte states, the model has {width}-byte states"
                ),
            });
        }
        let mut s = TreeStore::build(width, None)?;
        s.index_slots = index_slots;
        s.bounded = (storage.config.memory != MemoryLimit::Unlimited).then(|| storage.handle());
        let (roots, nodes, roots_log, nodes_log) = match m {
            Mark::Tables {
                order,
                roots,
                nodes,
                roots_log,
                nodes_log,
                ..
            } => {
                if !order.is_empty() && !layout::is_permutation(&order, width) {
                    return Err(StoreError::Invalid {
                        store: "tree",
                        message: format!(
                            "the checkpoint's byte order ({} entries) is not an order of the \
                             {width} bytes of a state",
                            order.len()
                        ),
                    });
                }
                // The tables hold leaves in this order, whatever the model suggests now.
                s.set_order(order, units.as_ref());
                (roots, nodes, roots_log, nodes_log)
            }
            Mark::Full {
                handed_at, full, ..
            } => {
                // The checkpoint resumed from no longer names the tables' logs.
                remove_logs(storage.dir());
                s.handed = Some(Box::new(Handed {
                    full: FullStore::resume(storage, &full)?.with_index_slots(index_slots),
                    at: handed_at,
                    checkpoints: 2,
                }));
                return Ok(s);
            }
        };
        let charge = |name: &str| {
            (storage.config.memory != MemoryLimit::Unlimited).then(|| Charge {
                account: storage.budget.account(name),
                budget: storage.budget.clone(),
            })
        };
        s.roots = NodeTable::new(
            "tree.roots",
            charge("tree.roots"),
            Some(storage.open_sequential_vec(ROOTS_LOG, roots_log)?),
        );
        s.nodes = NodeTable::new(
            "tree.nodes",
            charge("tree.nodes"),
            Some(storage.open_sequential_vec(NODES_LOG, nodes_log)?),
        );
        s.nodes.remember();
        s.remember_steps();
        s.roots.reload(roots)?;
        s.nodes.reload(nodes)?;
        Ok(s)
    }

    /// Under a budget, hands the states over to the full store when the tables could not
    /// take `extra` more states within their share or what the budget has left (each state
    /// may add a root and, at worst, a node per inner node of its tree).
    fn make_room(&mut self, extra: u64) -> Result<(), StoreError> {
        let Some(MemoryLimit::Bytes(limit)) = self.bounded.as_ref().map(|st| st.budget.limit())
        else {
            return Ok(());
        };
        let roots = self.roots.bytes_after(extra);
        let nodes = self.nodes.bytes_after(extra * (self.leaves as u64 - 1));
        let states = self.roots.len() + extra;
        // A growth the budget cannot hold now (small budgets: the other structures' minimal
        // buffers) also hands over, rather than stopping the run.
        if roots + nodes <= index_share(limit)
            && self.index_slots.is_none_or(|n| states <= n)
            && self.roots.can_hold(roots)
            && self.nodes.can_hold(nodes)
        {
            return Ok(());
        }
        self.hand_over()
    }

    /// Unfolds every state, in id order, into a spilling full store, frees the tables and
    /// lets the full store index the states (see the module documentation).
    fn hand_over(&mut self) -> Result<(), StoreError> {
        let st = self.bounded.as_ref().expect("only bounded runs hand over");
        let mut full =
            FullStore::spilling(Some(self.width), st)?.with_index_slots(self.index_slots);
        let mut vals = vec![0u32; self.cur.len()];
        let mut state = Vec::with_capacity(self.width);
        let n = self.roots.len();
        for id in 0..n {
            self.unfold(id, &mut vals)?;
            self.write_state(&vals, &mut state);
            full.push_unindexed(&state)?;
        }
        self.roots.release();
        self.nodes.release();
        self.got.id = NONE;
        self.state_of = NONE;
        self.recent_ids.fill(NONE);
        self.last.id = NONE;
        full.index_adopted()?;
        full.set_threads(self.threads);
        self.handed = Some(Box::new(Handed {
            full,
            at: n,
            checkpoints: 0,
        }));
        Ok(())
    }

    /// Takes the leaves' bytes in `order` ([`layout::order`]; a permutation of the state's
    /// bytes, or empty), with the model's `units` for the leaves each transition can change.
    /// With the leaves each transition touches known, batches fold through a
    /// [`table::Steps`] memo.
    fn set_order(&mut self, order: Vec<u32>, units: Option<&(usize, Vec<Vec<u32>>)>) {
        self.touched = layout::touched_leaves(&order, units);
        self.order = order;
        self.remember_steps();
    }

    /// Gives the node table a [`table::Steps`] memo and makes the step plans, if the leaves
    /// each transition touches are known, the tree is more than [`STEPS_MIN_LEAVES`] wide
    /// and the memo's keys fit.
    fn remember_steps(&mut self) {
        (self.step_plans, self.step_at) = (Vec::new(), Vec::new());
        self.nodes.steps = None;
        if !self.touched.is_empty() && self.leaves > STEPS_MIN_LEAVES {
            self.nodes
                .remember_steps(self.plan.len() - 1, self.touched.len());
        }
        if self.nodes.steps.is_some() {
            (self.step_plans, self.step_at) =
                shared::step_plans(&self.touched, self.leaves, &self.plan, &self.up);
        }
    }

    /// The state vector of the unfolded tree `vals`.
    fn write_state(&self, vals: &[u32], out: &mut Vec<u8>) {
        shared::write_state(vals, self.leaves, self.width, &self.order, out);
    }

    fn check(&self, state: &[u8]) -> Result<(), StoreError> {
        shared::check_width(state, self.width)
    }

    /// Cuts `state` into the leaves of `cur` (little-endian words, the last zero-padded).
    #[inline]
    fn load_leaves(&mut self, state: &[u8]) {
        shared::load_leaves(state, &self.order, &mut self.cur[..self.leaves]);
    }

    /// Unfolds state `id` into `vals` (leaves and inner references).
    fn unfold(&self, id: StateId, vals: &mut [u32]) -> Result<(), StoreError> {
        let root = self.roots.checked_pair(id)?;
        let nodes = &self.nodes;
        shared::unfold_from(root, id, self.leaves, &self.plan, |r| nodes.pair(r), vals);
        Ok(())
    }

    /// Folds the leaves of `cur` from scratch.
    fn fold_whole(&mut self) -> Result<Insert, StoreError> {
        self.whole += 1;
        let n = self.leaves;
        let last = self.plan.len() - 1;
        for k in 0..last {
            let (l, r) = self.plan[k];
            let p = pack(self.cur[l as usize], self.cur[r as usize]);
            self.cur[n + k] = self.nodes.intern(p)?.0;
        }
        let (l, r) = self.plan[last];
        self.root(pack(self.cur[l as usize], self.cur[r as usize]))
    }

    /// Folds the leaves of `cur` against the parent tree `parent` up to the root: a node
    /// whose children are the parent's has the parent's reference (interning is
    /// deterministic), so only the paths from changed leaves are interned again. Returns the
    /// root pair, or `None` when the successor is the parent itself (a self-loop).
    fn fold_below_root(&mut self, parent: &[u32]) -> Result<Option<u64>, StoreError> {
        self.incremental += 1;
        let n = self.leaves;
        for ((c, v), p) in self.changed[..n].iter_mut().zip(&self.cur).zip(parent) {
            *c = v != p;
        }
        let last = self.plan.len() - 1;
        for k in 0..last {
            let (l, r) = self.plan[k];
            let (l, r) = (l as usize, r as usize);
            if self.changed[l] || self.changed[r] {
                let p = pack(self.cur[l], self.cur[r]);
                let (rf, _) = self.nodes.intern(p)?;
                self.cur[n + k] = rf;
                // Equal children would have given the parent's reference.
                self.changed[n + k] = rf != parent[n + k];
            } else {
                self.cur[n + k] = parent[n + k];
                self.changed[n + k] = false;
            }
        }
        let (l, r) = self.plan[last];
        let (l, r) = (l as usize, r as usize);
        if !self.changed[l] && !self.changed[r] {
            return Ok(None);
        }
        Ok(Some(pack(self.cur[l], self.cur[r])))
    }

    /// Folds and inserts the leaves of `cur` against the parent tree `parent`.
    fn fold_against(&mut self, parent: &[u32]) -> Result<Insert, StoreError> {
        match self.fold_below_root(parent)? {
            Some(root) => self.root(root),
            None => Ok(Insert::Seen(parent[parent.len() - 1] as StateId)),
        }
    }

    /// Makes `got` hold the tree of state `p` (from `last` or unfolded).
    fn load_parent(&mut self, p: StateId) -> Result<(), StoreError> {
        if self.got.id == p {
            return Ok(());
        }
        if self.last.id == p {
            self.got.id = NONE;
            self.got.vals.copy_from_slice(&self.last.vals);
            self.got.id = p;
            return Ok(());
        }
        self.parent_unfolds += 1;
        self.unfold_got(p).map(|_| ())
    }

    /// Unfolds state `p` into `got`: over the tree it holds, if any (then `got_changed`
    /// lists the leaves that changed, and the answer is the state it held), else whole.
    fn unfold_got(&mut self, p: StateId) -> Result<Option<StateId>, StoreError> {
        let from = self.got.id;
        if from == p {
            self.got_changed.clear();
            return Ok(Some(p));
        }
        self.got.id = NONE;
        let mut vals = std::mem::take(&mut self.got.vals);
        let r = if from == NONE {
            self.unfold(p, &mut vals).map(|_| None)
        } else {
            self.got_changed.clear();
            self.roots.checked_pair(p).map(|root| {
                let nodes = &self.nodes;
                let (stale, changed) = (&mut self.stale, &mut self.got_changed);
                let pair = |r| nodes.pair(r);
                shared::unfold_over(
                    root,
                    p,
                    self.leaves,
                    &self.plan,
                    pair,
                    &mut vals,
                    stale,
                    changed,
                );
                Some(from)
            })
        };
        self.got.vals = vals;
        if r.is_ok() {
            self.got.id = p;
        }
        r
    }

    /// Checks a batch's states and makes room for them (which may hand the states over).
    fn admit(&mut self, batch: &StateBatch) -> Result<(), StoreError> {
        for i in 0..batch.len() {
            self.check(batch.get(i))?;
        }
        if self.handed.is_none() {
            self.make_room(batch.len() as u64)?;
        }
        Ok(())
    }

    /// Folds `batch`, the successors of `parents` (each with its count, in order), against
    /// their parents' trees: the ones `get` kept (`recent`: BFS reads the parents just
    /// before), else unfolded again.
    fn fold_parents(
        &mut self,
        parents: &[(StateId, u32)],
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        let nv = self.cur.len();
        let mut trees = std::mem::take(&mut self.many_trees);
        let mut counts = std::mem::take(&mut self.many_counts);
        trees.clear();
        counts.clear();
        let r = (|| {
            for &(p, c) in parents {
                let at = p as usize % self.recent_ids.len();
                if self.recent_ids[at] == p {
                    trees.extend_from_slice(&self.recent[at * nv..(at + 1) * nv]);
                } else {
                    self.load_parent(p)?;
                    trees.extend_from_slice(&self.got.vals);
                }
                counts.push(c);
            }
            self.incremental += batch.len() as u64;
            if self.plan.len() <= NARROW_NODES {
                return self.fold_narrow(&trees, &counts, batch, out);
            }
            let mut vals = std::mem::take(&mut self.batch_vals);
            let r = self.fold_batch(&trees, &counts, batch, &mut vals, out);
            self.batch_vals = vals;
            r
        })();
        self.many_trees = trees;
        self.many_counts = counts;
        r
    }

    /// Interns the root pair: its reference is the state number.
    fn root(&mut self, pair: u64) -> Result<Insert, StoreError> {
        let (id, new) = self.roots.intern(pair)?;
        let last = self.cur.len() - 1;
        self.cur[last] = id;
        Ok(if new {
            // Keep the new state's tree: DFS expands it next.
            self.last.id = id as StateId;
            self.last.vals.copy_from_slice(&self.cur);
            Insert::New(id as StateId)
        } else {
            Insert::Seen(id as StateId)
        })
    }

    /// [`StateStore::insert_batch`] and [`StateStore::insert_many`]: `trees` holds the
    /// parents' trees back to back, parent `k` having `counts[k]` successors in the batch.
    /// Each successor starts as a copy of its parent's tree; only the ancestors of its
    /// changed leaves (its *dirty* nodes, listed in plan order, which is height order) are
    /// interned again.
    fn fold_batch(
        &mut self,
        trees: &[u32],
        counts: &[u32],
        batch: &StateBatch,
        vals: &mut Vec<u32>,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        let m = batch.len();
        let nv = self.cur.len();
        let n = self.leaves;
        let root = self.plan.len() - 1;
        vals.resize(m * nv, 0);
        let mut dirty = std::mem::take(&mut self.batch_dirty);
        let mut ends = std::mem::take(&mut self.batch_ends);
        let mut owner = std::mem::take(&mut self.batch_owner);
        dirty.clear();
        ends.clear();
        owner.clear();
        let parent_of = shared::parent_of(counts);
        for (s, k) in (0..m).zip(parent_of) {
            let pv = &trees[k * nv..(k + 1) * nv];
            let v = &mut vals[s * nv..(s + 1) * nv];
            let t = batch.transition(s).0 as usize;
            match (self.touched.get(t), self.nodes.steps.as_mut()) {
                (Some(_), Some(steps)) => {
                    let plan_t = &self.step_plans[self.step_at[t]..self.step_at[t + 1]];
                    let (o, plan, mark) = (&self.order, &self.plan, &mut self.batch_mark);
                    let missed = &mut self.batch_missed;
                    shared::fold_start_steps(
                        batch.get(s),
                        t as u32,
                        plan_t,
                        o,
                        plan,
                        pv,
                        steps,
                        mark,
                        v,
                        missed,
                        &mut dirty,
                    );
                }
                (Some(t), None) => {
                    let (o, up, mark) = (&self.order, &self.up, &mut self.batch_mark);
                    shared::fold_start_touched(batch.get(s), t, o, pv, up, mark, v, &mut dirty);
                }
                _ => {
                    self.load_leaves(batch.get(s));
                    let (cur, up, mark) = (&self.cur[..n], &self.up, &mut self.batch_mark);
                    shared::fold_start(cur, pv, up, mark, v, &mut dirty);
                }
            }
            ends.push(dirty.len());
            owner.resize(dirty.len(), s as u32);
        }
        let mut hashes = std::mem::take(&mut self.batch_hashes);
        hashes.resize(dirty.len(), 0);
        // The dirty nodes by level (`shared::by_level`: the interning order is kept).
        let mut at = std::mem::take(&mut self.batch_level_at);
        let mut by_level = std::mem::take(&mut self.batch_by_level);
        let levels = self.levels.len();
        shared::by_level(&dirty, &self.level_of, levels, &mut at, &mut by_level);
        let r = (|| {
            let nodes_of = |l: usize| &by_level[at[l]..at[l + 1]];
            let root_level = self.levels.len() - 1;
            for l in 0..self.levels.len() {
                let table = if l == root_level {
                    &self.roots
                } else {
                    &self.nodes
                };
                let find = table.view();
                for &j in nodes_of(l) {
                    let j = j as usize;
                    let v = &vals[owner[j] as usize * nv..];
                    let (a, b) = self.plan[dirty[j] as usize];
                    let h = table::pair_hash(pack(v[a as usize], v[b as usize]));
                    hashes[j] = h;
                    find.touch_hashed(h);
                }
                if l == root_level {
                    break;
                }
                for &j in nodes_of(l) {
                    let j = j as usize;
                    let k = dirty[j] as usize;
                    let v = &mut vals[owner[j] as usize * nv..];
                    let (a, b) = self.plan[k];
                    let p = pack(v[a as usize], v[b as usize]);
                    v[n + k] = self.nodes.intern_hashed(p, hashes[j])?.0;
                }
            }
            let (l, r) = self.plan[root];
            let (l, r) = (l as usize, r as usize);
            for s in 0..m {
                let v = &vals[s * nv..(s + 1) * nv];
                let start = if s == 0 { 0 } else { ends[s - 1] };
                // A successor with a dirty node has a dirty root, its last.
                out.push(if start < ends[s] {
                    let h = hashes[ends[s] - 1];
                    let (id, new) = self.roots.intern_hashed(pack(v[l], v[r]), h)?;
                    if new {
                        Insert::New(id as StateId)
                    } else {
                        Insert::Seen(id as StateId)
                    }
                } else {
                    // No leaf changed: the successor is its parent (a self-loop), whose
                    // number its copy of the parent's tree holds at the root.
                    Insert::Seen(v[nv - 1] as StateId)
                });
            }
            if let Some(steps) = self.nodes.steps.as_mut() {
                let parent_of = shared::parent_of(counts);
                for (s, k) in (0..m).zip(parent_of) {
                    let t = batch.transition(s).0;
                    if (t as usize) < self.touched.len() {
                        let start = if s == 0 { 0 } else { ends[s - 1] };
                        let (pv, v) = (&trees[k * nv..(k + 1) * nv], &vals[s * nv..(s + 1) * nv]);
                        shared::steps_learn(t, &dirty[start..ends[s]], pv, v, steps);
                    }
                }
            }
            Ok(())
        })();
        self.batch_dirty = dirty;
        self.batch_hashes = hashes;
        self.batch_ends = ends;
        self.batch_owner = owner;
        self.batch_level_at = at;
        self.batch_by_level = by_level;
        r
    }

    /// [`TreeStore::fold_batch`] for trees of at most [`NARROW_NODES`] inner nodes (at most 4
    /// leaves): a successor's whole tree fits a [`Narrow`], and every node below the root is
    /// a pair of leaves. Three passes over the batch, as `fold_batch`'s heights: gather the
    /// leaves and hash the changed nodes (their home slots prefetched), intern those nodes
    /// and hash the roots (prefetched), intern the roots in successor order. Nodes are
    /// interned in `fold_batch`'s order (successor by successor, each one's in plan order),
    /// so every reference, and so every file, is the same. What this leaves out of the
    /// general fold — the dirty list and its marks, the copies of whole trees into the
    /// batch — was most of the fold's instructions on such trees (Kanban-PT-00005, 4 leaves:
    /// about a thousand instructions a successor, callgrind).
    fn fold_narrow(
        &mut self,
        trees: &[u32],
        counts: &[u32],
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        let nv = self.cur.len();
        let n = self.leaves;
        let root = self.plan.len() - 1;
        let (rl, rr) = (self.plan[root].0 as usize, self.plan[root].1 as usize);
        let mut work = std::mem::take(&mut self.narrow);
        work.clear();
        let parent_of = shared::parent_of(counts);
        let nodes = self.nodes.view();
        for (s, k) in (0..batch.len()).zip(parent_of) {
            let pv = &trees[k * nv..(k + 1) * nv];
            let touched = self.touched.get(batch.transition(s).0 as usize);
            let (o, plan) = (&self.order, &self.plan);
            work.push(Narrow::start(batch.get(s), touched, o, plan, n, pv, nodes));
        }
        let r = (|| {
            let roots = self.roots.view();
            for w in work.iter_mut() {
                for (k, &(l, r)) in self.plan[..root].iter().enumerate() {
                    if w.dirty & 1 << k != 0 {
                        let p = pack(w.v[l as usize], w.v[r as usize]);
                        w.v[n + k] = self.nodes.intern_hashed(p, w.h[k])?.0;
                    }
                }
                let pair = pack(w.v[rl], w.v[rr]);
                if pair == w.h[root] {
                    // No leaf changed: the successor is its parent, whose number is at the
                    // root of its copy of the parent's tree.
                    w.dirty = 0;
                } else {
                    w.h[root] = table::pair_hash(pair);
                    roots.touch_hashed(w.h[root]);
                    w.dirty = 1;
                }
            }
            for w in &work {
                out.push(if w.dirty == 0 {
                    Insert::Seen(w.v[nv - 1] as StateId)
                } else {
                    let pair = pack(w.v[rl], w.v[rr]);
                    let (id, new) = self.roots.intern_hashed(pair, w.h[root])?;
                    if new {
                        Insert::New(id as StateId)
                    } else {
                        Insert::Seen(id as StateId)
                    }
                });
            }
            Ok(())
        })();
        self.narrow = work;
        r
    }

    /// Inserts the leaves of `cur`, a successor of `parent` if known.
    fn insert_leaves(&mut self, parent: Option<StateId>) -> Result<Insert, StoreError> {
        let Some(p) = parent else {
            return self.fold_whole();
        };
        self.load_parent(p)?;
        // The vector is taken out of the cache while folding so that folding can borrow
        // `self`; the parent's tree stays there for its next successors.
        let vals = std::mem::take(&mut self.got.vals);
        let r = self.fold_against(&vals);
        self.got.vals = vals;
        r
    }

    /// The threads' view of the tables and the numbering thread's entering of the new
    /// states (borrowed apart: they read the same tables, and only the latter writes, to
    /// its own buffers); `None` where the chunked path does not share the store.
    fn split(&mut self) -> Option<(SharedIndex<'_>, enter::Enter<'_>)> {
        if self.threads < 2 || self.bounded.is_some() || self.handed.is_some() {
            return None;
        }
        // Field by field, so that `entering` is borrowed apart from the tables it reads.
        let view = SharedIndex::Tree(Shared {
            roots: self.roots.view(),
            nodes: self.nodes.view(),
            states: self.roots.len(),
            leaves: self.leaves,
            width: self.width,
            plan: &self.plan,
            levels: &self.levels,
            level_of: &self.level_of,
            up: &self.up,
            order: &self.order,
            touched: &self.touched,
            step_plans: &self.step_plans,
            step_at: &self.step_at,
        });
        let shape = enter::Shape {
            nodes: self.nodes.view(),
            plan: &self.plan,
            levels: &self.levels,
            level_of: &self.level_of,
            leaves: self.leaves,
        };
        let entering = &mut self.entering;
        Some((view, enter::Enter { entering, shape }))
    }

    /// What [`enter::Entering`] reads of the store.
    fn shape(&self) -> enter::Shape<'_> {
        enter::Shape {
            nodes: self.nodes.view(),
            plan: &self.plan,
            levels: &self.levels,
            level_of: &self.level_of,
            leaves: self.leaves,
        }
    }

    fn tables_bytes(&self) -> u64 {
        self.roots.pair_bytes()
            + self.roots.index_bytes()
            + self.nodes.pair_bytes()
            + self.nodes.index_bytes()
    }
}

impl StateStore for TreeStore {
    fn index_spills(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "tree"
    }

    fn insert(&mut self, state: &[u8], via: Option<Via>) -> Result<Insert, StoreError> {
        self.check(state)?;
        if self.handed.is_none() {
            self.make_room(1)?;
        }
        if let Some(h) = &mut self.handed {
            return h.full.insert(state, via);
        }
        self.load_leaves(state);
        self.insert_leaves(via.map(|v| v.parent))
    }

    /// Height by height over the whole batch: every changed node of a height is first hashed
    /// and its home slot prefetched for all successors, then the height is interned; so the
    /// misses of a height overlap, as the full store's do. A further pass that reads the
    /// slots to prefetch the pair behind a matching one was measured slower, for the inner
    /// nodes (SharedMemory-PT-000010: 9.0 s against 7.2 s of CPU) and for the roots
    /// (Kanban-PT-00005: 3.5 s against 3.0 s). The roots (the last level) are interned in successor order, which
    /// alone numbers states: nodes below the root may be interned in any order.
    fn insert_batch(
        &mut self,
        parent: StateId,
        parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        out.clear();
        self.admit(batch)?;
        if let Some(h) = &mut self.handed {
            return h.full.insert_batch(parent, parent_depth, batch, out);
        }
        self.fold_parents(&[(parent, batch.len() as u32)], batch, out)
    }

    fn shared_vectors(&mut self) -> Option<SharedVectors<'_>> {
        self.handed.as_mut()?.full.shared_vectors()
    }

    fn set_threads(&mut self, threads: usize) {
        self.threads = threads;
        self.roots.set_threads(threads);
        self.nodes.set_threads(threads);
        if let Some(h) = &mut self.handed {
            h.full.set_threads(threads);
        }
    }

    /// With more than one thread and no budget (a budget may hand the states over in the
    /// middle of a chunk's inserts): the node and root tables, which the threads fold every
    /// successor against (see [`Shared`]); the numbering thread then interns only the nodes
    /// the new states lack ([`StateStore::add_new`]).
    fn shared_index(&mut self) -> Option<SharedIndex<'_>> {
        self.split().map(|(view, _)| view)
    }

    /// [`TreeStore::shared_index`], and the numbering thread's [`enter::Enter`], which
    /// gives the new states' nodes their references as they are numbered.
    fn shared_split(&mut self) -> Option<(SharedIndex<'_>, Option<Box<dyn Resolver + '_>>)> {
        let (nodes, roots) = (self.nodes.len(), self.roots.len());
        self.entering.start(nodes, roots);
        self.split()
            .map(|(view, enter)| (view, Some(Box::new(enter) as Box<dyn Resolver + '_>)))
    }

    /// Its tables take a few bytes a state: chunks of the default size would add a large
    /// share to its peak RSS (as for ComBack).
    fn small_chunks(&self) -> bool {
        true
    }

    /// On one thread the chunked path is no faster than the delayed batches
    /// ([`StateStore::insert_many`]): within 3% on Kanban-PT-00005, Peterson-PT-3,
    /// SharedMemory-PT-000010 and QuasiCertifProtocol-PT-06 (29 November, two interleaved
    /// rounds; docs/ARCHITECTURE.md "store/tree"), and `--memory` and DFS need
    /// the one-thread fold anyway.
    fn chunks_on_one_thread(&self) -> bool {
        false
    }

    /// Enters the new states' absent nodes (what the threads' lookups handed on: see
    /// [`Shared`]) in id order; each root, in id order, gets the state's number. The
    /// references were given as the numbering thread numbered the states
    /// ([`enter::Entering`], fed by the chunk's resolver while the other threads expanded),
    /// or are given here to the states it was not fed. The threads looked up every node
    /// whose children the tables held, in the tables as they were before the chunk
    /// (nothing has changed them since): those are new to the tables. New nodes may be
    /// shared by several new states: their pairs are deduplicated in the chunk's own small
    /// table ([`table::Fresh`]), only appended to the pair arrays here, and the tables'
    /// indexes, whose slots are this step's cache misses, take the appended entries on
    /// every thread afterwards ([`NodeTable::index_appended`], which also refuses a pair
    /// the index already held). References are those interning one by one would give.
    fn add_new<'a>(
        &mut self,
        count: usize,
        new: &(dyn Fn(usize) -> NewState<'a> + Sync + 'a),
        threads: usize,
        looked_up: u64,
    ) -> Result<(), StoreError> {
        // The threads folded every successor against its parent.
        self.incremental += looked_up;
        let (nodes_from, roots_from) = (self.nodes.len(), self.roots.len());
        let mut entering = std::mem::take(&mut self.entering);
        let r = (|| {
            if !entering.based_at(nodes_from, roots_from) {
                entering.start(nodes_from, roots_from);
            }
            let fed = entering.fed() as usize;
            if fed > count {
                return Err(StoreError::Invalid {
                    store: "tree",
                    message: format!("{fed} new states numbered in a chunk of {count}"),
                });
            }
            let shape = self.shape();
            for i in fed..count {
                entering.feed(new(i).extra, &shape)?;
            }
            entering.enter_window(&shape)?;
            self.nodes.reserve(entering.nodes.len() as u64)?;
            self.roots.reserve(count as u64)?;
            for &p in &entering.nodes {
                self.nodes.append(p)?;
            }
            for (s, &p) in entering.roots.iter().enumerate() {
                let id = roots_from + s as u64;
                if self.roots.append(p)? as u64 != id {
                    return Err(StoreError::Invalid {
                        store: "tree",
                        message: format!(
                            "new state {id} of a parallel chunk: its root is not its number"
                        ),
                    });
                }
            }
            self.nodes.index_appended(nodes_from, threads)?;
            self.roots.index_appended(roots_from, threads)
        })();
        entering.start(self.nodes.len(), self.roots.len());
        self.entering = entering;
        r
    }

    /// The successors of several parents at once ([`MANY`]), so that more lookups overlap
    /// their misses than one parent's successors give; once handed over, the full store's
    /// delayed batches.
    fn delayed_batch(&self) -> Option<usize> {
        match &self.handed {
            Some(h) => h.full.delayed_batch(),
            None => Some(MANY),
        }
    }

    /// [`StateStore::insert_batch`] over the successors of several parents
    /// ([`TreeStore::fold_parents`]).
    fn insert_many(
        &mut self,
        parents: &[(StateId, u32)],
        parent_depth: u64,
        batch: &StateBatch,
        out: &mut Vec<Insert>,
    ) -> Result<(), StoreError> {
        out.clear();
        let m = batch.len();
        let counted: usize = parents.iter().map(|&(_, c)| c as usize).sum();
        if counted != m {
            return Err(StoreError::Invalid {
                store: "tree",
                message: format!(
                    "a delayed batch of {m} successors, its parents' counts {counted}"
                ),
            });
        }
        self.admit(batch)?;
        if let Some(h) = &mut self.handed {
            return h.full.insert_many(parents, parent_depth, batch, out);
        }
        self.fold_parents(parents, batch, out)
    }

    fn len(&self) -> u64 {
        match &self.handed {
            Some(h) => h.full.len(),
            None => self.roots.len(),
        }
    }

    /// Unfolded from its root: the tables keep every state.
    fn states_back(&self) -> super::StatesBack {
        super::StatesBack::Kept
    }

    fn get(&mut self, id: StateId) -> Result<Option<&[u8]>, StoreError> {
        // Tested apart from the borrow it returns, which the borrow checker would otherwise
        // extend over the rest of the function.
        if self.handed.is_some() {
            let Some(h) = self.handed.as_deref_mut() else {
                unreachable!("tested just above")
            };
            return h.full.get(id);
        }
        if id >= self.roots.len() {
            return Ok(None);
        }
        let from = self.unfold_got(id)?;
        // Kept for a delayed batch of its successors.
        let (nv, at) = (self.cur.len(), id as usize % self.recent_ids.len());
        self.recent_ids[at] = NONE;
        self.recent[at * nv..(at + 1) * nv].copy_from_slice(&self.got.vals);
        self.recent_ids[at] = id;
        if from.is_none() || from != Some(self.state_of) {
            let mut state = std::mem::take(&mut self.state);
            self.write_state(&self.got.vals, &mut state);
            self.state = state;
        } else {
            let (vals, changed) = (&self.got.vals, &self.got_changed);
            shared::write_leaves(vals, changed, self.width, &self.order, &mut self.state);
        }
        self.state_of = id;
        Ok(Some(&self.state))
    }

    fn exactness(&self) -> Exactness {
        Exactness::Exact
    }

    fn ram_bytes(&self) -> u64 {
        self.roots.ram_bytes()
            + self.nodes.ram_bytes()
            + self.entering.bytes()
            + self.handed.as_ref().map_or(0, |h| h.full.ram_bytes())
    }

    fn min_ram_bytes(&self) -> u64 {
        match &self.handed {
            Some(h) => h.full.min_ram_bytes(),
            None => self.roots.min_ram_bytes() + self.nodes.min_ram_bytes(),
        }
    }

    fn disk_bytes(&self) -> u64 {
        self.roots.log.as_ref().map_or(0, |l| l.disk_bytes())
            + self.nodes.log.as_ref().map_or(0, |l| l.disk_bytes())
            + self.handed.as_ref().map_or(0, |h| h.full.disk_bytes())
    }

    fn sync_accounts(&self) {
        match &self.handed {
            Some(h) => h.full.sync_accounts(),
            None => {
                self.roots.update_account();
                self.nodes.update_account();
            }
        }
    }

    fn checkpoint(&mut self) -> Result<StoreMark, StoreError> {
        if let Some(h) = &mut self.handed {
            let full = h.full.checkpoint()?;
            h.checkpoints += 1;
            if h.checkpoints == 2 {
                // The first checkpoint since the hand-over is on disk and does not name the
                // logs; no later one will.
                if let Some(st) = &self.bounded {
                    remove_logs(st.dir());
                }
            }
            return Ok(StoreMark {
                files: full.files.clone(),
                blob: encode_blob(&Mark::Full {
                    width: self.width,
                    handed_at: h.at,
                    full,
                }),
            });
        }
        let (Some(rl), Some(nl)) = (&mut self.roots.log, &mut self.nodes.log) else {
            return Err(StoreError::Invalid {
                store: "tree",
                message: "built without pair logs (not a checkpointed run's store)".into(),
            });
        };
        let roots_log = rl.flush()?;
        let nodes_log = nl.flush()?;
        Ok(StoreMark {
            blob: encode_blob(&Mark::Tables {
                width: self.width,
                order: self.order.clone(),
                roots: self.roots.len(),
                nodes: self.nodes.len(),
                roots_log,
                nodes_log,
            }),
            files: vec![
                FileMark::segment(ROOTS_LOG, roots_log.segment_len),
                FileMark::segment(NODES_LOG, nodes_log.segment_len),
            ],
        })
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        if let Some(h) = &self.handed {
            let mut m = h.full.report();
            m.insert("tree_handed_over_at".into(), json!(h.at));
            return m;
        }
        let states = self.roots.len();
        let per = |x: u64| {
            if states == 0 {
                0.0
            } else {
                x as f64 / states as f64
            }
        };
        let mut m = serde_json::Map::new();
        m.insert("tree_leaves".into(), json!(self.leaves));
        m.insert("tree_nodes".into(), json!(self.nodes.len()));
        m.insert("tree_nodes_per_state".into(), json!(per(self.nodes.len())));
        m.insert(
            "tree_root_table_bytes".into(),
            json!(self.roots.pair_bytes() + self.roots.index_bytes()),
        );
        m.insert(
            "tree_node_table_bytes".into(),
            json!(self.nodes.pair_bytes() + self.nodes.index_bytes()),
        );
        m.insert(
            "tree_bytes_per_state".into(),
            json!(per(self.tables_bytes())),
        );
        m.insert("tree_incremental_inserts".into(), json!(self.incremental));
        m.insert("tree_regrouped".into(), json!(!self.order.is_empty()));
        m.insert("tree_whole_folds".into(), json!(self.whole));
        m.insert(
            "tree_memo_hits".into(),
            json!(self.nodes.memo.as_ref().map_or(0, |m| m.hits)),
        );
        m.insert(
            "tree_step_lookups".into(),
            json!(self.nodes.steps.as_ref().map_or(0, |m| m.lookups)),
        );
        m.insert(
            "tree_step_hits".into(),
            json!(self.nodes.steps.as_ref().map_or(0, |m| m.hits)),
        );
        m.insert("tree_parent_unfolds".into(), json!(self.parent_unfolds));
        m.insert(
            "tree_false_compares".into(),
            json!(self.roots.false_compares + self.nodes.false_compares),
        );
        m
    }

    fn summary(&self) -> Option<String> {
        if let Some(h) = &self.handed {
            return Some(format!(
                "tree: the tables reached their share of --memory at {} states, which went to the full store's disk-resident path{}",
                h.at,
                h.full.summary().map_or(String::new(), |s| format!("; {s}"))
            ));
        }
        let states = self.roots.len().max(1) as f64;
        Some(format!(
            "tree: {} leaves per state, {} nodes ({:.2} per state), tables {:.1} bytes per state",
            self.leaves,
            self.nodes.len(),
            self.nodes.len() as f64 / states,
            self.tables_bytes() as f64 / states
        ))
    }
}

/// Deletes the tables' logs from a checkpointed run's directory (a missing file is fine:
/// an unbounded or unkept run has none).
fn remove_logs(dir: &std::path::Path) {
    for name in [ROOTS_LOG, NODES_LOG] {
        let _ = std::fs::remove_file(dir.join(format!("{name}.seg")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_a_tree_over_every_leaf_level_by_level() {
        for leaves in 2..40usize {
            let (p, levels) = plan(leaves);
            assert_eq!(levels.last(), Some(&(leaves - 2..leaves - 1)));
            assert_eq!(levels.iter().map(|l| l.len()).sum::<usize>(), leaves - 1);
            assert_eq!(p.len(), leaves - 1);
            // Every value but the root is a child exactly once; children precede parents.
            let mut seen = vec![0; 2 * leaves - 1];
            for (k, &(l, r)) in p.iter().enumerate() {
                assert!((l as usize) < leaves + k && (r as usize) < leaves + k);
                seen[l as usize] += 1;
                seen[r as usize] += 1;
            }
            assert!(seen[..2 * leaves - 2].iter().all(|&c| c == 1), "{leaves}");
            assert_eq!(seen[2 * leaves - 2], 0);
        }
    }

    /// A delayed batch over many parents answers as their batches one parent at a time:
    /// parents read just before (their trees kept), parents read long before (unfolded
    /// again), parents with no successors, self-loops, and successors shared between
    /// parents and new in the batch; and both, regrouped and through the steps memo, as a
    /// store in the model's layout that folds every changed leaf (no memo).
    #[test]
    fn delayed_batches_answer_as_one_parent_at_a_time() {
        let width = 40;
        let state = |i: u32| -> Vec<u8> {
            (0..width)
                .map(|b| {
                    if b % 7 == (i % 7) as usize {
                        (i / 7) as u8
                    } else {
                        b as u8
                    }
                })
                .collect()
        };
        let (mut many, mut one, mut plain) = (
            TreeStore::build(width, None).unwrap(),
            TreeStore::build(width, None).unwrap(),
            TreeStore::build(width, None).unwrap(),
        );
        // Transition `j + 7 d` adds `d` to the bytes `b` with `b % 7 == j`, modulo 5
        // (one-byte units; each new value a function of the transition and the old value,
        // as `Model::touched_units` requires): a successor's other leaves are taken from its
        // parent's tree unread, and the steps memo answers repeated steps. The last
        // transition touches nothing (self-loops).
        let self_loop = 7 * 256u32;
        let units = (
            1,
            (0..self_loop)
                .map(|t| (t % 7..width as u32).step_by(7).collect())
                .chain([Vec::new()])
                .collect(),
        );
        for s in [&mut many, &mut one] {
            let order = (0..width as u32).map(|b| b * 3 % width as u32).collect();
            s.set_order(order, Some(&units));
            assert!(s.nodes.steps.is_some());
        }
        for s in [&mut many, &mut one, &mut plain] {
            for i in 0..40 {
                s.insert(&state(i), None).unwrap();
            }
        }
        let mut next = 40;
        for round in 0..30u64 {
            // Parents: a run of consecutive ones, each read by `get` as BFS does, and one
            // read before the run (its kept tree may have been overwritten).
            let first = round * 3 % (many.len() - 12);
            let mut parents: Vec<(StateId, u32)> = Vec::new();
            let mut batch = StateBatch::default();
            let mut single = Vec::new();
            for (k, p) in (first..first + 10).chain([round % 5]).enumerate() {
                let ps = many.get(p).unwrap().unwrap().to_vec();
                let mut b = StateBatch::default();
                let count = (p as usize + k) % 4;
                for c in 0..count {
                    let j = (p as usize + c) % 7;
                    let d = c as u8 + (next % 4) as u8;
                    let mut succ = ps.clone();
                    // The first successor is the parent itself (a self-loop).
                    let t = if c > 0 {
                        for x in succ.iter_mut().skip(j).step_by(7) {
                            *x = x.wrapping_add(d) % 5;
                        }
                        j as u32 + 7 * u32::from(d)
                    } else {
                        self_loop
                    };
                    let t = crate::model::TransitionId(t);
                    b.push(t, &succ);
                    batch.push(t, &succ);
                }
                parents.push((p, count as u32));
                single.push((p, b));
            }
            next += 3;
            // The last parent's tree was not kept (as if more parents had come between).
            let gone = round % 5;
            let at = gone as usize % many.recent_ids.len();
            many.recent_ids[at] = NONE;
            let mut got = Vec::new();
            many.insert_many(&parents, 1, &batch, &mut got).unwrap();
            let (mut want, mut folded) = (Vec::new(), Vec::new());
            for (p, b) in &single {
                for (s, all) in [(&mut one, &mut want), (&mut plain, &mut folded)] {
                    let mut out = Vec::new();
                    s.get(*p).unwrap();
                    s.insert_batch(*p, 1, b, &mut out).unwrap();
                    all.extend(out);
                }
            }
            assert_eq!(got, want, "round {round}");
            assert_eq!(got, folded, "round {round}");
        }
        for id in 0..one.len() {
            let a = plain.get(id).unwrap().map(<[u8]>::to_vec);
            assert_eq!(many.get(id).unwrap().map(<[u8]>::to_vec), a);
            assert_eq!(one.get(id).unwrap().map(<[u8]>::to_vec), a);
        }
        for s in [&many, &one] {
            let steps = s.nodes.steps.as_ref().unwrap();
            assert!(
                steps.hits > 20 && steps.hits < steps.lookups,
                "{}",
                steps.hits
            );
        }
    }

    /// Parallel chunks by hand (the threads' lookups through [`Shared`], then
    /// [`StateStore::add_new`]) number and store every state as one-thread inserts do. The
    /// leaves are small numbers (one byte of four), as are the first references, so a node
    /// whose child is new often has, once that child has its reference, the pair of a node
    /// of another height (a pair of leaf values): it must take that node's reference, as
    /// interning it would, or one state gets two trees.
    #[test]
    fn parallel_chunks_number_as_one_thread_inserts_do() {
        use crate::store::{Extra, Found, Lookup};
        let dir = tempfile::tempdir().unwrap();
        let aut = dir.path().join("m.aut");
        std::fs::write(&aut, "des (0, 1, 2)\n(0, \"a\", 1)\n").unwrap();
        let model = crate::model::aut::AutModel::load(&aut).unwrap();
        // 5 leaves: (l0 l1) under (. l2) under the root, beside (l3 l4).
        let width = 20;
        let state = |x: [u8; 5]| -> Vec<u8> { x.iter().flat_map(|&b| [b, 0, 0, 0]).collect() };
        // The initial state's nodes are 0 = (3, 7), 1 = (1, 1), 2 = (0, 9) (heights in
        // turn); its one successor's new node (5, 5) is 3, so the node above it is (3, 7),
        // node 0's pair. The other states reach more such pairs by chance.
        let succs = |v: &[u8], k: u64| -> Vec<[u8; 5]> {
            if k == 0 {
                return vec![[5, 5, 7, 1, 1]];
            }
            (0..5)
                .map(|j| {
                    let mut x: [u8; 5] = std::array::from_fn(|i| v[4 * i]);
                    x[j] = ((x[j] as u64 + 1 + (k + j as u64) % 3) % 9) as u8;
                    x
                })
                .collect()
        };
        for threads in [1, 2] {
            let mut par = TreeStore::build(width, None).unwrap();
            // A shared view needs threads; `threads` is what indexes the new entries.
            par.set_threads(2);
            let mut one = TreeStore::build(width, None).unwrap();
            let s0 = state([3, 7, 9, 1, 1]);
            assert_eq!(par.insert(&s0, None).unwrap(), Insert::New(0));
            assert_eq!(one.insert(&s0, None).unwrap(), Insert::New(0));
            let mut next = 0;
            let mut repeats = 0;
            while next < par.len() && par.len() < 20_000 {
                // Chunks of up to 128 parents: some hold more than a window of new states.
                let parents = next..(next + 128).min(par.len());
                next = parents.end;
                let mut batch = StateBatch::default();
                let mut counts = Vec::new();
                for p in parents.clone() {
                    let v = par.get(p).unwrap().unwrap().to_vec();
                    let ss = succs(&v, p);
                    counts.push(ss.len() as u32);
                    for (t, x) in ss.into_iter().enumerate() {
                        batch.push(crate::model::TransitionId(t as u32), &state(x));
                    }
                }
                let (mut hashes, mut found, mut extra) = (Vec::new(), Vec::new(), Extra::default());
                let base = par.len();
                let mut new: Vec<usize> = Vec::new();
                let mut ids = Vec::new();
                {
                    par.prepare_shared(parents.clone()).unwrap();
                    let Some((SharedIndex::Tree(view), resolver)) = par.shared_split() else {
                        panic!("no shared view");
                    };
                    let mut resolver = resolver.expect("the numbering thread's entering");
                    let mut r = shared::Reader::default();
                    for p in parents.clone() {
                        view.with_parent(&mut r, p, |_| ()).unwrap();
                    }
                    let mut scratch = Default::default();
                    view.find_group(
                        &mut r,
                        &model,
                        &mut scratch,
                        &batch,
                        &counts,
                        &mut hashes,
                        &mut found,
                        &mut extra,
                    )
                    .unwrap();
                    // Numbering: the first of equal absent successors is new (named by its
                    // words, as the chunk's tables do). The first `fed` new states are fed
                    // as the engine's numbering feeds them, `add_new` feeds the rest: all,
                    // none or some of a chunk's, so that windows end at either side.
                    let fed = [usize::MAX, 0, 300, 7][(next / 128 % 4) as usize];
                    let mut named = std::collections::HashMap::new();
                    for (i, f) in found.iter().enumerate() {
                        ids.push(match *f {
                            Found::Stored(id) => id,
                            Found::Absent => {
                                *named.entry(extra.get(i).to_vec()).or_insert_with(|| {
                                    new.push(i);
                                    if new.len() <= fed {
                                        resolver.numbered(extra.get(i)).unwrap();
                                    }
                                    base + new.len() as u64 - 1
                                })
                            }
                            Found::Undecided => panic!("undecided"),
                        });
                    }
                }
                repeats += found.len() - new.len();
                let via = Via {
                    parent: 0,
                    transition: crate::model::TransitionId(0),
                    depth: 1,
                };
                let new_state = |k: usize| NewState {
                    state: &[],
                    hash: hashes[new[k]],
                    via,
                    extra: extra.get(new[k]),
                };
                par.add_new(new.len(), &new_state, threads, found.len() as u64)
                    .unwrap();
                for (i, &id) in ids.iter().enumerate() {
                    let got = one.insert(batch.get(i), None).unwrap();
                    assert!(
                        got == Insert::New(id) || got == Insert::Seen(id),
                        "{threads} threads, successor {i}: {got:?}, the chunk said {id}"
                    );
                }
                assert_eq!(par.len(), one.len());
            }
            assert!(par.len() > 5_000, "{}", par.len());
            assert!(repeats > 1_000);
            for id in (0..par.len()).step_by(7) {
                let p = par.get(id).unwrap().unwrap().to_vec();
                assert_eq!(
                    Some(&p[..]),
                    one.get(id).unwrap(),
                    "{threads} threads, state {id}"
                );
            }
        }
    }

    #[test]
    fn narrow_trees_fold_as_the_general_fold_does() {
        // Widths of 2, 3 and 4 leaves, in the model's byte order (every leaf compared) and
        // regrouped with the units each transition touches (only those gathered).
        for (width, regrouped) in [(5, false), (8, true), (11, false), (11, true), (16, true)] {
            let w = width as u32;
            // Transition `t < 4 w` adds `t / w + 1` to bytes `t % w` and `t % w + 1`, modulo
            // 7 (a function of the transition and the old value, as `touched_units` asks);
            // transition `4 w` touches nothing (self-loops).
            let self_loop = 4 * w;
            let units = (
                1,
                (0..self_loop)
                    .map(|t| vec![t % w, (t % w + 1) % w])
                    .chain([Vec::new()])
                    .collect(),
            );
            let (mut narrow, mut general) = (
                TreeStore::build(width, None).unwrap(),
                TreeStore::build(width, None).unwrap(),
            );
            assert!(narrow.plan.len() <= NARROW_NODES, "width {width}");
            if regrouped {
                for s in [&mut narrow, &mut general] {
                    s.set_order((0..w).map(|b| b * 3 % w).collect(), Some(&units));
                    assert!(!s.touched.is_empty());
                }
            }
            for s in [&mut narrow, &mut general] {
                s.insert(&vec![1; width], None).unwrap();
            }
            let mut next = 0u32;
            for round in 0..200u64 {
                let len = narrow.len();
                let first = round * 7 % len;
                let mut parents: Vec<(StateId, u32)> = Vec::new();
                let mut batch = StateBatch::default();
                for p in first..(first + 9).min(len) {
                    let ps = narrow.get(p).unwrap().unwrap().to_vec();
                    assert_eq!(general.get(p).unwrap().unwrap(), &ps[..]);
                    let count = (p + round) as u32 % 4;
                    for c in 0..count {
                        next = next.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        let t = if c == 0 && p % 3 == 0 {
                            self_loop
                        } else {
                            (next >> 8) % self_loop
                        };
                        let mut succ = ps.clone();
                        for &u in &units.1[t as usize] {
                            let x = &mut succ[u as usize];
                            *x = (*x + (t / w) as u8 + 1) % 7;
                        }
                        batch.push(crate::model::TransitionId(t), &succ);
                    }
                    parents.push((p, count));
                }
                let mut got = Vec::new();
                narrow.insert_many(&parents, 1, &batch, &mut got).unwrap();
                // The general fold, as `fold_parents` calls it, over the same parents.
                let (mut trees, mut counts) = (Vec::new(), Vec::new());
                for &(p, c) in &parents {
                    general.get(p).unwrap();
                    trees.extend_from_slice(&general.got.vals);
                    counts.push(c);
                }
                general.admit(&batch).unwrap();
                let (mut vals, mut want) = (Vec::new(), Vec::new());
                general
                    .fold_batch(&trees, &counts, &batch, &mut vals, &mut want)
                    .unwrap();
                assert_eq!(got, want, "width {width}, round {round}");
            }
            assert!(narrow.len() > 300, "width {width}: {} states", narrow.len());
            // The same nodes, in the same order: the same references, so the same files.
            assert_eq!(narrow.nodes.len(), general.nodes.len(), "width {width}");
            for r in 0..narrow.nodes.len() as u32 {
                assert_eq!(narrow.nodes.pair(r), general.nodes.pair(r), "width {width}");
            }
            for id in 0..narrow.len() {
                let a = narrow.get(id).unwrap().map(<[u8]>::to_vec);
                assert_eq!(general.get(id).unwrap().map(<[u8]>::to_vec), a);
            }
        }
    }

    #[test]
    fn numbers_states_in_order_and_gives_them_back() {
        // Each width in the model's byte order and in a shuffled one (a regrouped layout:
        // `get` then scatters the bytes of the leaves it unfolds).
        for (width, shuffled) in [0usize, 1, 3, 4, 5, 8, 13, 40]
            .into_iter()
            .flat_map(|w| [(w, false), (w, true)])
        {
            let mut s = TreeStore::build(width, None).unwrap();
            if shuffled {
                let order = (0..width as u32).map(|b| b * 7 % width as u32);
                s.set_order(order.collect(), None);
            }
            let state = |i: u32| -> Vec<u8> {
                (0..width)
                    .map(|b| (i.wrapping_mul(2654435761) >> (b % 4 * 8)) as u8 ^ b as u8)
                    .collect()
            };
            let distinct = if width == 0 { 1 } else { 3000 };
            let mut ids = std::collections::HashMap::new();
            let mut parent: Option<StateId> = None;
            for i in 0..distinct * 2 {
                let st = state(i % distinct);
                let via = parent.map(|p| Via {
                    parent: p,
                    transition: crate::model::TransitionId(0),
                    depth: 1,
                });
                let r = s.insert(&st, via).unwrap();
                let next = ids.len() as u64;
                let id = *ids.entry(st.clone()).or_insert(next);
                match r {
                    Insert::New(x) => assert_eq!((x, x), (id, next)),
                    Insert::Seen(x) => assert_eq!(x, id),
                }
                // Parents alternate between the last state, an old one and none.
                parent = match i % 3 {
                    0 => Some(id),
                    1 => Some(id / 2),
                    _ => None,
                };
            }
            assert_eq!(s.len(), ids.len() as u64);
            // In no particular order: each state is unfolded over the one before.
            for (st, &id) in &ids {
                assert_eq!(s.get(id).unwrap(), Some(&st[..]), "width {width} id {id}");
            }
            assert!(s.get(s.len()).unwrap().is_none());
        }
    }
}
