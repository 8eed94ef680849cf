//! Minimisation modulo strong bisimulation: `spillway lts reduce`.
//!
//! # Algorithm
//!
//! Paige–Tarjan partition refinement with the "process the smaller half" rule, adapted to
//! labelled transitions as in Valmari's and Fernandez's formulations; O(m log n) time.
//!
//! Two partitions of the states are kept: the *blocks* (the current candidate classes) and a
//! coarser partition into *compound blocks*, each a union of blocks. Invariant: every block is
//! stable with respect to every compound block X and label a — either all or none of its
//! states have an a-transition into X. While some compound block X holds two or more blocks,
//! take out the smaller B of its first two blocks (so |B| ≤ |X|/2), make B a compound block of
//! its own and restore the invariant for B and X \ B, label by label: split every block into
//! states with an a-transition into B and the rest, then split the former into states that
//! also have an a-transition into X \ B and those that do not. The second split needs
//! "does s still have an a-transition into X \ B" in O(1): each transition points to a counter
//! of the transitions from its source with its label into its target's compound block; moving
//! the transitions into B to fresh counters leaves exactly count(s, a, X \ B) in the old one.
//! Only transitions into the smaller half B are touched, and a state lies in a chosen B at most
//! log2 n times, hence O(m log n). Splitting a block relabels only its smaller part, so the
//! bookkeeping stays within the same bound. The initial partition splits the single block by
//! "has an outgoing a-transition" for every label, which makes it stable w.r.t. the one
//! compound block of all states.
//!
//! # Memory
//!
//! Transitions are numbered in order of target state, so the incoming transitions of a state
//! are a contiguous range and the target needs no array. Per transition the refinement holds
//! its source, its label and its counter index (12 bytes) plus at most one counter (4 bytes):
//! at most 16 bytes per transition, plus about 64 bytes per state for the two partitions and
//! scratch arrays. The input is first deduplicated (parallel edges with the same label and
//! target are irrelevant to bisimulation). See [`crate::post::memory`] for the estimate printed
//! before a run.
//!
//! # Result
//!
//! The quotient has one state per block reachable from the given roots (the initial state for
//! `reduce`), numbered in BFS order from the roots (so the initial state is 0; successors are
//! visited by label, then by the smallest input state of their block), and one edge per
//! distinct (block, label, block). Edges of a block are read off any one of its states:
//! stability makes every member's (label, target block) set the same.

use super::graph::{alloc_vec, bucket_sort, Lts, NONE};
use crate::error::PostError;
use std::collections::VecDeque;

/// A minimised LTS and where the requested roots ended up.
#[derive(Clone, Debug)]
pub struct Minimised {
    /// The quotient restricted to the blocks reachable from the roots; its initial state is the
    /// class of the first root, numbered 0.
    pub lts: Lts,
    /// For each root given to [`minimise`], its state in `lts`.
    pub roots: Vec<u32>,
    /// Number of bisimulation classes of the whole input, reachable or not.
    pub classes: u64,
    /// Transitions after removing duplicate (source, label, target) edges from the input.
    pub distinct_transitions: u64,
    /// How many compound-block splits (refinement steps) were processed.
    pub splitters: u64,
}

/// The block partition (refinable partition with marking) and the compound blocks over it.
struct Partition {
    /// States, each block contiguous: block b is `elems[bfirst[b]..bend[b]]`, with its marked
    /// states first.
    elems: Vec<u32>,
    /// Position of each state in `elems`.
    loc: Vec<u32>,
    block_of: Vec<u32>,
    bfirst: Vec<u32>,
    bend: Vec<u32>,
    bmarked: Vec<u32>,
    /// Compound block of each block, and a doubly linked list of the blocks in a compound.
    bcomp: Vec<u32>,
    bnext: Vec<u32>,
    bprev: Vec<u32>,
    chead: Vec<u32>,
    cblocks: Vec<u32>,
    /// Blocks with marked states since the last split.
    touched: Vec<u32>,
    /// Compound blocks with two or more blocks.
    worklist: Vec<u32>,
}

impl Partition {
    fn new(n: usize) -> Result<Self, PostError> {
        let mut elems = alloc_vec(n, 0u32, "the block partition")?;
        let mut loc = alloc_vec(n, 0u32, "the block partition")?;
        for i in 0..n {
            elems[i] = i as u32;
            loc[i] = i as u32;
        }
        // Block and compound arrays grow one entry per split; reserving n up front costs only
        // address space until used.
        let cap = |what| -> Result<Vec<u32>, PostError> {
            let mut v = Vec::new();
            v.try_reserve_exact(n.max(1)).map_err(|_| {
                PostError::Limit(format!("cannot allocate the {what} for {n} states"))
            })?;
            Ok(v)
        };
        let mut p = Partition {
            elems,
            loc,
            block_of: alloc_vec(n, 0u32, "the block partition")?,
            bfirst: cap("block table")?,
            bend: cap("block table")?,
            bmarked: cap("block table")?,
            bcomp: cap("block table")?,
            bnext: cap("block table")?,
            bprev: cap("block table")?,
            chead: cap("compound block table")?,
            cblocks: cap("compound block table")?,
            touched: Vec::new(),
            worklist: Vec::new(),
        };
        p.bfirst.push(0);
        p.bend.push(n as u32);
        p.bmarked.push(0);
        p.bcomp.push(0);
        p.bnext.push(NONE);
        p.bprev.push(NONE);
        p.chead.push(0);
        p.cblocks.push(1);
        Ok(p)
    }

    fn blocks(&self) -> usize {
        self.bfirst.len()
    }

    fn size(&self, b: u32) -> u32 {
        self.bend[b as usize] - self.bfirst[b as usize]
    }

    /// Moves `s` into the marked front part of its block (idempotent).
    #[inline]
    fn mark(&mut self, s: u32) {
        let b = self.block_of[s as usize] as usize;
        let p = self.loc[s as usize];
        let f = self.bfirst[b] + self.bmarked[b];
        if p < f {
            return;
        }
        if self.bmarked[b] == 0 {
            self.touched.push(b as u32);
        }
        let other = self.elems[f as usize];
        self.elems[p as usize] = other;
        self.loc[other as usize] = p;
        self.elems[f as usize] = s;
        self.loc[s as usize] = f;
        self.bmarked[b] += 1;
    }

    /// Splits every touched block into its marked and unmarked states. The smaller part becomes
    /// the new block, so relabelling costs no more than the marking did; the new block joins
    /// the compound block of the old one.
    fn split(&mut self) {
        while let Some(b) = self.touched.pop() {
            let b = b as usize;
            let marked = self.bmarked[b];
            self.bmarked[b] = 0;
            let (first, end) = (self.bfirst[b], self.bend[b]);
            if marked == end - first {
                continue;
            }
            let mid = first + marked;
            let nb = self.bfirst.len() as u32;
            if marked <= end - mid {
                self.bfirst.push(first);
                self.bend.push(mid);
                self.bfirst[b] = mid;
            } else {
                self.bfirst.push(mid);
                self.bend.push(end);
                self.bend[b] = mid;
            }
            self.bmarked.push(0);
            for p in self.bfirst[nb as usize]..self.bend[nb as usize] {
                self.block_of[self.elems[p as usize] as usize] = nb;
            }
            let c = self.bcomp[b];
            self.bcomp.push(c);
            let next = self.bnext[b];
            self.bnext.push(next);
            self.bprev.push(b as u32);
            if next != NONE {
                self.bprev[next as usize] = nb;
            }
            self.bnext[b] = nb;
            self.cblocks[c as usize] += 1;
            if self.cblocks[c as usize] == 2 {
                self.worklist.push(c);
            }
        }
    }

    /// Takes the smaller of the first two blocks out of compound block `x` into a compound
    /// block of its own, and returns it.
    fn take_splitter(&mut self, x: u32) -> u32 {
        let xi = x as usize;
        let b1 = self.chead[xi];
        let b2 = self.bnext[b1 as usize];
        let b = if self.size(b2) < self.size(b1) {
            b2
        } else {
            b1
        };
        let (prev, next) = (self.bprev[b as usize], self.bnext[b as usize]);
        if prev != NONE {
            self.bnext[prev as usize] = next;
        } else {
            self.chead[xi] = next;
        }
        if next != NONE {
            self.bprev[next as usize] = prev;
        }
        self.cblocks[xi] -= 1;
        if self.cblocks[xi] >= 2 {
            self.worklist.push(x);
        }
        let y = self.chead.len() as u32;
        self.chead.push(b);
        self.cblocks.push(1);
        self.bcomp[b as usize] = y;
        self.bnext[b as usize] = NONE;
        self.bprev[b as usize] = NONE;
        b
    }
}

/// Counters of transitions per (source, label, compound block of target), with a free list
/// threaded through the unused slots so that their number never exceeds the transitions'.
struct Counters {
    count: Vec<u32>,
    free: u32,
}

impl Counters {
    #[inline]
    fn alloc(&mut self) -> u32 {
        if self.free != NONE {
            let r = self.free;
            self.free = self.count[r as usize];
            self.count[r as usize] = 0;
            r
        } else {
            self.count.push(0);
            (self.count.len() - 1) as u32
        }
    }

    #[inline]
    fn release(&mut self, r: u32) {
        self.count[r as usize] = self.free;
        self.free = r;
    }
}

/// Computes the strong bisimulation classes of `lts` and returns the quotient restricted to the
/// classes reachable from `roots` (at least one; all must be states of `lts`). Consumes `lts` to reuse its
/// arrays.
pub fn minimise(lts: Lts, roots: &[u32]) -> Result<Minimised, PostError> {
    if roots.is_empty() {
        return Err(PostError::Usage(
            "minimise needs at least one root state".into(),
        ));
    }
    if let Some(&r) = roots.iter().find(|&&r| r >= lts.states) {
        return Err(PostError::Usage(format!(
            "root state {r} is not below the state count {}",
            lts.states
        )));
    }
    let n = lts.states as usize;
    let Lts {
        labels,
        mut start,
        mut label,
        mut dst,
        ..
    } = lts;

    // 1. Sort each state's transitions by (label, target) and drop duplicates.
    let mut w = 0usize;
    let mut tmp: Vec<u64> = Vec::new();
    let mut lo = 0usize;
    for s in 0..n {
        let hi = start[s + 1] as usize;
        tmp.clear();
        tmp.extend((lo..hi).map(|i| ((label[i] as u64) << 32) | dst[i] as u64));
        tmp.sort_unstable();
        tmp.dedup();
        start[s] = w as u32;
        for &x in &tmp {
            label[w] = (x >> 32) as u32;
            dst[w] = x as u32;
            w += 1;
        }
        lo = hi;
    }
    start[n] = w as u32;
    label.truncate(w);
    dst.truncate(w);
    drop(tmp);
    let m = w;

    // 2. One counter per (source, label) group, counting its transitions; the group's states
    //    per label give the initial split.
    let mut groups = 0usize;
    let mut per_label = alloc_vec(labels.len() + 1, 0u32, "label counts")?;
    for s in 0..n {
        let (a, b) = (start[s] as usize, start[s + 1] as usize);
        for i in a..b {
            if i == a || label[i] != label[i - 1] {
                groups += 1;
                per_label[label[i] as usize + 1] += 1;
            }
        }
    }
    let mut counters = Counters {
        count: alloc_vec(groups, 0u32, "transition counters")?,
        free: NONE,
    };
    let mut tcnt = alloc_vec(m, 0u32, "transition counter links")?;
    for l in 0..labels.len() {
        per_label[l + 1] += per_label[l];
    }
    let mut by_label = alloc_vec(groups, 0u32, "the initial split")?;
    let mut cursor = per_label.clone();
    let mut g = 0u32;
    for s in 0..n {
        let (a, b) = (start[s] as usize, start[s + 1] as usize);
        for i in a..b {
            if i > a && label[i] != label[i - 1] {
                g += 1;
            }
            if i == a || label[i] != label[i - 1] {
                let l = label[i] as usize;
                by_label[cursor[l] as usize] = s as u32;
                cursor[l] += 1;
            }
            tcnt[i] = g;
            counters.count[g as usize] += 1;
        }
        if b > a {
            g += 1;
        }
    }
    drop(cursor);

    // 3. Initial partition: for each label, split by "has an outgoing transition with it".
    let mut p = Partition::new(n)?;
    for l in 0..labels.len() {
        for &s in &by_label[per_label[l] as usize..per_label[l + 1] as usize] {
            p.mark(s);
        }
        p.split();
    }
    drop(by_label);
    drop(per_label);

    // 4. Renumber transitions by target: incoming transitions become contiguous ranges.
    let mut tsrc = alloc_vec(m, 0u32, "transition sources")?;
    for s in 0..n {
        tsrc[start[s] as usize..start[s + 1] as usize].fill(s as u32);
    }
    drop(start);
    let in_start = bucket_sort(&mut dst, &mut [&mut tsrc, &mut label, &mut tcnt], n)?;
    drop(dst);

    // 5. Refine.
    let mut stamp_of = alloc_vec(n, 0u32, "scratch state marks")?;
    let mut newrec = alloc_vec(n, 0u32, "scratch counters")?;
    let mut oldrec = alloc_vec(n, NONE, "scratch counters")?;
    let mut stamp = 0u32;
    let mut lab_count = alloc_vec(labels.len(), 0u32, "label counts")?;
    let mut lab_seen: Vec<u32> = Vec::new();
    let mut group_ends: Vec<u32> = Vec::new();
    let mut states_buf: Vec<u32> = Vec::new();
    let mut buf: Vec<u32> = Vec::new();
    let mut splitters = 0u64;
    while let Some(x) = p.worklist.pop() {
        if p.cblocks[x as usize] < 2 {
            continue;
        }
        let b = p.take_splitter(x);
        splitters += 1;
        // The splitter's states are copied: splitting B itself reorders its part of `elems`.
        states_buf.clear();
        states_buf.extend_from_slice(
            &p.elems[p.bfirst[b as usize] as usize..p.bend[b as usize] as usize],
        );
        // Group the transitions into B by label (counting sort over the labels present).
        let mut total = 0u32;
        for &v in &states_buf {
            for t in in_start[v as usize]..in_start[v as usize + 1] {
                let l = label[t as usize] as usize;
                if lab_count[l] == 0 {
                    lab_seen.push(l as u32);
                }
                lab_count[l] += 1;
                total += 1;
            }
        }
        group_ends.clear();
        let mut acc = 0u32;
        for &l in &lab_seen {
            let c = lab_count[l as usize];
            lab_count[l as usize] = acc;
            acc += c;
            group_ends.push(acc);
        }
        buf.clear();
        buf.resize(total as usize, 0);
        for &v in &states_buf {
            for t in in_start[v as usize]..in_start[v as usize + 1] {
                let l = label[t as usize] as usize;
                buf[lab_count[l] as usize] = t;
                lab_count[l] += 1;
            }
        }
        for &l in &lab_seen {
            lab_count[l as usize] = 0;
        }
        lab_seen.clear();

        let mut gstart = 0usize;
        for &gend in &group_ends {
            let group = &buf[gstart..gend as usize];
            gstart = gend as usize;
            if stamp == u32::MAX {
                stamp_of.fill(0);
                stamp = 0;
            }
            stamp += 1;
            // Move the transitions into B to fresh counters; mark their sources.
            for &t in group {
                let s = tsrc[t as usize];
                let old = tcnt[t as usize];
                if stamp_of[s as usize] != stamp {
                    stamp_of[s as usize] = stamp;
                    newrec[s as usize] = counters.alloc();
                    oldrec[s as usize] = old;
                }
                let r = newrec[s as usize];
                counters.count[r as usize] += 1;
                counters.count[old as usize] -= 1;
                tcnt[t as usize] = r;
                p.mark(s);
            }
            p.split();
            // Sources whose old counter dropped to 0 have no transition into X \ B left.
            for &t in group {
                let s = tsrc[t as usize];
                if counters.count[oldrec[s as usize] as usize] == 0 {
                    p.mark(s);
                }
            }
            p.split();
            for &t in group {
                let s = tsrc[t as usize] as usize;
                let o = oldrec[s];
                if o != NONE {
                    if counters.count[o as usize] == 0 {
                        counters.release(o);
                    }
                    oldrec[s] = NONE;
                }
            }
        }
    }
    drop(counters);
    drop(tcnt);
    drop(stamp_of);
    drop(newrec);
    drop(oldrec);
    drop(buf);

    // 6. Quotient: edges of each block read off one representative state.
    let nblocks = p.blocks();
    // The representative is the block's smallest state: ordering successors by it in the BFS
    // below makes the numbering a function of the input numbering, so that reducing a reduced
    // LTS gives back the very same file.
    let block_of = std::mem::take(&mut p.block_of);
    drop(p);
    let mut rep = alloc_vec(nblocks, NONE, "block representatives")?;
    for (s, &b) in block_of.iter().enumerate() {
        if rep[b as usize] == NONE {
            rep[b as usize] = s as u32;
        }
    }
    // Sized exactly: growing by doubling would briefly need twice the memory.
    let count = tsrc
        .iter()
        .filter(|&&s| rep[block_of[s as usize] as usize] == s)
        .count();
    let mut qedges: Vec<(u32, u32, u32)> = Vec::new();
    qedges
        .try_reserve_exact(count)
        .map_err(|_| PostError::Limit(format!("cannot allocate the quotient's {count} edges")))?;
    for v in 0..n {
        let bv = block_of[v];
        for t in in_start[v] as usize..in_start[v + 1] as usize {
            let s = tsrc[t];
            let bs = block_of[s as usize];
            if rep[bs as usize] == s {
                qedges.push((bs, label[t], rep[bv as usize]));
            }
        }
    }
    drop(tsrc);
    drop(label);
    drop(in_start);
    drop(rep);
    let (quotient, root_ids) = build_quotient(labels, &block_of, nblocks, qedges, roots)?;
    Ok(Minimised {
        lts: quotient,
        roots: root_ids,
        classes: nblocks as u64,
        distinct_transitions: m as u64,
        splitters,
    })
}

/// Builds the quotient LTS from the class of every input state and the class edges
/// `(source class, label, smallest input state of the target class)`: keeps the classes
/// reachable from `roots`, numbered in BFS order (successors by label, then by that smallest
/// state), edges deduplicated and ordered by (label, target). Returns it with the roots' states.
pub(crate) fn build_quotient(
    labels: Vec<String>,
    block_of: &[u32],
    nblocks: usize,
    mut qedges: Vec<(u32, u32, u32)>,
    roots: &[u32],
) -> Result<(Lts, Vec<u32>), PostError> {
    qedges.sort_unstable();
    qedges.dedup();
    let mut qstart = alloc_vec(nblocks + 1, 0u32, "the quotient")?;
    for e in &qedges {
        qstart[e.0 as usize + 1] += 1;
    }
    for b in 0..nblocks {
        qstart[b + 1] += qstart[b];
    }

    // 7. Keep the blocks reachable from the roots, numbered in BFS order.
    let mut new_id = alloc_vec(nblocks, NONE, "the quotient numbering")?;
    let mut order: Vec<u32> = Vec::new();
    let mut queue = VecDeque::new();
    for &r in roots {
        let b = block_of[r as usize];
        if new_id[b as usize] == NONE {
            new_id[b as usize] = order.len() as u32;
            order.push(b);
            queue.push_back(b);
        }
    }
    while let Some(b) = queue.pop_front() {
        for e in &qedges[qstart[b as usize] as usize..qstart[b as usize + 1] as usize] {
            let d = block_of[e.2 as usize];
            if new_id[d as usize] == NONE {
                new_id[d as usize] = order.len() as u32;
                order.push(d);
                queue.push_back(d);
            }
        }
    }
    let k = order.len();
    let kept: usize = order
        .iter()
        .map(|&b| (qstart[b as usize + 1] - qstart[b as usize]) as usize)
        .sum();
    let mut qlabel = alloc_vec(kept, 0u32, "the quotient")?;
    let mut qdst = alloc_vec(kept, 0u32, "the quotient")?;
    let mut start = alloc_vec(k + 1, 0u32, "the quotient")?;
    let mut w = 0usize;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for (i, &b) in order.iter().enumerate() {
        start[i] = w as u32;
        pairs.clear();
        pairs.extend(
            qedges[qstart[b as usize] as usize..qstart[b as usize + 1] as usize]
                .iter()
                .map(|e| (e.1, new_id[block_of[e.2 as usize] as usize])),
        );
        // Within a state, edges are ordered by (label, target) for stable output.
        pairs.sort_unstable();
        for &(l, d) in &pairs {
            qlabel[w] = l;
            qdst[w] = d;
            w += 1;
        }
    }
    start[k] = w as u32;
    drop(qedges);
    let root_ids: Vec<u32> = roots
        .iter()
        .map(|&r| new_id[block_of[r as usize] as usize])
        .collect();
    let quotient = Lts {
        states: k as u32,
        initial: root_ids.first().copied().unwrap_or(0),
        labels,
        start,
        label: qlabel,
        dst: qdst,
    };
    Ok((quotient, root_ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::post::graph::test_lts as lts;

    #[test]
    fn merges_bisimilar_branches() {
        // 0 -a-> 1 -b-> 3, 0 -a-> 2 -b-> 4: the two branches collapse.
        let m = minimise(
            lts(
                5,
                &["a", "b"],
                &[(0, 0, 1), (0, 0, 2), (1, 1, 3), (2, 1, 4)],
            ),
            &[0],
        )
        .unwrap();
        assert_eq!((m.lts.states, m.lts.transitions()), (3, 2));
        assert_eq!(m.lts.initial, 0);
    }

    #[test]
    fn keeps_nondeterminism_that_matters() {
        // a.b + a.c versus a.(b + c): the classic non-bisimilar pair stays apart.
        let m = minimise(
            lts(
                8,
                &["a", "b", "c"],
                &[
                    (0, 0, 1),
                    (0, 0, 2),
                    (1, 1, 3),
                    (2, 2, 3),
                    (4, 0, 5),
                    (5, 1, 6),
                    (5, 2, 7),
                ],
            ),
            &[0, 4],
        )
        .unwrap();
        assert_ne!(m.roots[0], m.roots[1]);
    }

    #[test]
    fn three_way_split_is_needed() {
        // s: a→X1, a→X2; t: a→X1 only, where X1 and X2 differ only deeper down.
        let m = minimise(
            lts(
                7,
                &["a", "b", "c"],
                &[
                    (0, 0, 2),
                    (0, 0, 3),
                    (1, 0, 2),
                    (2, 1, 4),
                    (3, 1, 5),
                    (5, 2, 6),
                ],
            ),
            &[0, 1],
        )
        .unwrap();
        assert_ne!(m.roots[0], m.roots[1]);
    }

    #[test]
    fn cycles_collapse() {
        // A 3-cycle and a 6-cycle of the same label are bisimilar; one state remains.
        let mut edges = vec![(0, 0, 1), (1, 0, 2), (2, 0, 0)];
        for i in 0..6 {
            edges.push((3 + i, 0, 3 + (i + 1) % 6));
        }
        edges.push((0, 0, 3));
        let m = minimise(lts(9, &["a"], &edges), &[0]).unwrap();
        assert_eq!((m.lts.states, m.lts.transitions()), (1, 1));
    }

    #[test]
    fn unreachable_states_are_dropped() {
        let m = minimise(lts(3, &["a", "b"], &[(0, 0, 0), (1, 1, 2)]), &[0]).unwrap();
        assert_eq!((m.lts.states, m.lts.transitions()), (1, 1));
        assert_eq!(m.classes, 3);
    }
}
