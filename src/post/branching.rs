//! Minimisation modulo branching bisimulation (van Glabbeek–Weijland): `lts reduce --branching`.
//!
//! # Algorithm
//!
//! Groote–Vaandrager (1990), O(m·n) time:
//!
//! 1. States on a cycle of internal steps are branching bisimilar, so the strongly connected
//!    components of the internal transitions are collapsed first (Tarjan). Afterwards the
//!    internal steps inside any block form an acyclic graph and every state can reach, by
//!    *inert* steps (internal steps that stay in its block), a *bottom* state without any.
//! 2. Starting from one block: for a block S and a label a, the states with a *non-inert*
//!    a-step into S (not an internal step inside S) split a block B if some but not all of
//!    B's states can reach such a step by inert steps. B is unstable exactly when B contains
//!    such a state but not every bottom state of B has the step itself, which is checked in
//!    O(|incoming a-transitions of S|) by counting bottom states. An unstable B is split into
//!    the states that can (found by a backward search over inert steps from the sources) and
//!    the rest; bottom states are recomputed for both parts.
//!
//! A splitter's incoming steps are grouped by label with a counting sort, and a split found
//! for one label does not end the splitter's check unless the splitter itself was split:
//! the other unstable blocks for that label, and the remaining labels, are split in the
//! same pass. Before, every split gathered and comparison-sorted the splitter's incoming
//! steps again (three quarters of the time): Anderson-PT-05 explored, 689,901 states and
//! 2,784,245 transitions with half its labels hidden, refined in 117 s, now 11 s, to the
//! same 178,560 classes. Splitters are still found by scanning every block again until a
//! scan splits nothing (a worklist of the halves of split blocks, and of the blocks a half
//! with new bottom states has steps into, was tried: it checked the big blocks again after
//! every split, 272 s on the same input).
//!
//! Each check of a splitter costs its incoming steps, each split O(m), and there are fewer
//! than n splits: O(m·n) in the worst case, still the slower of the two reductions (the
//! O(m log n) algorithm of Jansen, Groote, Keiren and Wijs 2019 would be the upgrade).
//!
//! Labels named `tau` or `i` are the internal action ([`crate::post::convert::INTERNAL_NAMES`]);
//! both are treated as one action, written under the first such label's name. The quotient
//! keeps every non-inert transition between classes.

use super::graph::{alloc_vec, bucket_sort, Lts, NONE};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether the refinement shows a progress line on standard error (`spillway lts reduce
/// --branching` and `compare --branching` on a terminal, unless quiet). The algorithm is
/// O(m·n): on a chain of internal steps in which every state differs, each split peels one
/// state off a block of all the others (a chain of 32,768 states takes half a minute).
static PROGRESS: AtomicBool = AtomicBool::new(false);

/// Turns the progress line of [`minimise_branching`] on or off for this process.
pub fn show_progress(on: bool) {
    PROGRESS.store(on, Ordering::Relaxed);
}

/// The progress line: the classes found so far (they only grow) against the bound.
struct Progress {
    start: Instant,
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new() -> Option<Progress> {
        PROGRESS.load(Ordering::Relaxed).then(|| Progress {
            start: Instant::now(),
            last: Instant::now(),
            shown: false,
        })
    }

    fn tick(&mut self, classes: usize, states: usize) {
        if self.last.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        crate::sys::to_stderr(format_args!(
            "\r\x1b[Kbranching bisimulation: {classes} classes of {states} states so far, {:.0} s",
            self.start.elapsed().as_secs_f64()
        ));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            crate::sys::to_stderr(format_args!("\r\x1b[K"));
        }
    }
}
use super::reduce::{build_quotient, minimise, Minimised};
use crate::error::PostError;
use crate::post::convert::INTERNAL_NAMES;

/// Label id of the internal action after merging `tau` and `i`, if the LTS has one.
pub fn internal_label(labels: &[String]) -> Option<u32> {
    labels
        .iter()
        .position(|l| INTERNAL_NAMES.contains(&l.as_str()))
        .map(|i| i as u32)
}

/// Strongly connected components of the internal transitions (iterative Tarjan). Returns the
/// component of every state and the number of components.
fn tau_sccs(lts: &Lts, is_tau: &[bool]) -> Result<(Vec<u32>, u32), PostError> {
    let n = lts.states as usize;
    let mut index = alloc_vec(n, NONE, "SCC indices")?;
    let mut low = alloc_vec(n, 0u32, "SCC indices")?;
    let mut comp = alloc_vec(n, NONE, "SCC components")?;
    let mut on_stack = alloc_vec(n, false, "SCC stack flags")?;
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, u32)> = Vec::new();
    let (mut next, mut ncomp) = (0u32, 0u32);
    for root in 0..n as u32 {
        if index[root as usize] != NONE {
            continue;
        }
        // The state to visit next: the root, then each unvisited child met along a tau edge.
        let mut child = Some(root);
        loop {
            if let Some(w) = child.take() {
                index[w as usize] = next;
                low[w as usize] = next;
                next += 1;
                stack.push(w);
                on_stack[w as usize] = true;
                call.push((w, lts.start[w as usize]));
            }
            let Some(&(v, mut pos)) = call.last() else {
                break;
            };
            let end = lts.start[v as usize + 1];
            while pos < end {
                let i = pos as usize;
                pos += 1;
                if !is_tau[lts.label[i] as usize] {
                    continue;
                }
                let w = lts.dst[i];
                if index[w as usize] == NONE {
                    child = Some(w);
                    break;
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
            }
            if let Some(top) = call.last_mut() {
                top.1 = pos;
            }
            if child.is_some() {
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u as usize] = low[u as usize].min(low[v as usize]);
            }
            if low[v as usize] == index[v as usize] {
                while let Some(w) = stack.pop() {
                    on_stack[w as usize] = false;
                    comp[w as usize] = ncomp;
                    if w == v {
                        break;
                    }
                }
                ncomp += 1;
            }
        }
    }
    Ok((comp, ncomp))
}

/// Computes the branching bisimulation classes of `lts` and returns the quotient restricted to
/// the classes reachable from `roots` (at least one). Without an internal action this is
/// strong bisimulation, and [`minimise`] is used.
pub fn minimise_branching(lts: Lts, roots: &[u32]) -> Result<Minimised, PostError> {
    let Some(tau) = internal_label(&lts.labels) else {
        return minimise(lts, roots);
    };
    if roots.is_empty() || roots.iter().any(|&r| r >= lts.states) {
        return Err(PostError::Usage(format!(
            "roots {roots:?} must be non-empty and below the state count {}",
            lts.states
        )));
    }
    let n0 = lts.states as usize;
    let is_tau: Vec<bool> = lts
        .labels
        .iter()
        .map(|l| INTERNAL_NAMES.contains(&l.as_str()))
        .collect();

    // 1. Collapse internal cycles; merge all internal labels into `tau`.
    let (comp, ncomp) = tau_sccs(&lts, &is_tau)?;
    let mut edges: Vec<(u32, u32, u32)> = Vec::new();
    edges
        .try_reserve_exact(lts.transitions())
        .map_err(|_| PostError::Limit("cannot allocate the collapsed transitions".into()))?;
    for s in 0..lts.states {
        for (l, d) in lts.out(s) {
            let (cs, cd) = (comp[s as usize], comp[d as usize]);
            let l = if is_tau[l as usize] { tau } else { l };
            if !(l == tau && cs == cd) {
                edges.push((cs, l, cd));
            }
        }
    }
    let labels = lts.labels.clone();
    drop(lts);
    edges.sort_unstable();
    edges.dedup();
    let n = ncomp as usize;
    let m = edges.len();
    // CSR by source straight from the sorted edge list, then the list is dropped before the
    // CSR by target is built from it: at most 20 bytes per transition at a time.
    let mut start = alloc_vec(n + 1, 0u32, "the collapsed LTS")?;
    let mut olabel = alloc_vec(m, 0u32, "the collapsed LTS")?;
    let mut odst = alloc_vec(m, 0u32, "the collapsed LTS")?;
    for (i, e) in edges.iter().enumerate() {
        start[e.0 as usize + 1] += 1;
        olabel[i] = e.1;
        odst[i] = e.2;
    }
    drop(edges);
    for s in 0..n {
        start[s + 1] += start[s];
    }
    let out = Lts {
        states: ncomp,
        initial: 0,
        labels: Vec::new(),
        start,
        label: olabel,
        dst: odst,
    };
    let mut isrc = alloc_vec(m, 0u32, "the collapsed LTS by target")?;
    for s in 0..ncomp {
        isrc[out.out_range(s)].fill(s);
    }
    let mut ilabel = out.label.clone();
    let mut idst = out.dst.clone();
    let in_start = bucket_sort(&mut idst, &mut [&mut isrc, &mut ilabel], n)?;
    drop(idst);

    // 2. Groote–Vaandrager refinement, driven by a worklist of splitters.
    let mut block_of = alloc_vec(n, 0u32, "the block partition")?;
    let mut members: Vec<Vec<u32>> = vec![(0..ncomp).collect()];
    let mut bottom = alloc_vec(n, true, "bottom flags")?;
    for s in 0..ncomp {
        bottom[s as usize] = !out.out(s).any(|(l, _)| l == tau);
    }
    let mut nbottom: Vec<u32> = vec![bottom.iter().filter(|&&b| b).count() as u32];
    let mut seen = alloc_vec(n, 0u32, "scratch marks")?;
    let mut pos_mark = alloc_vec(n, 0u32, "scratch marks")?;
    let mut stamp = 0u32;
    let mut pstamp = 0u32;
    let mut bcount: Vec<u32> = vec![0];
    let mut btouch: Vec<u32> = vec![0];
    let mut touched: Vec<u32> = Vec::new();
    let mut unstable: Vec<u32> = Vec::new();
    // Incoming transition numbers of the splitter block (4 bytes each: the first splitter is
    // the whole state space).
    let mut group: Vec<u32> = Vec::new();
    let mut sources: Vec<u32> = Vec::new();
    let mut queue: Vec<u32> = Vec::new();
    let mut lcount = alloc_vec(labels.len(), 0u32, "label counts")?;
    let mut llist: Vec<u32> = Vec::new();
    let mut splitter = 0u32;
    let mut changed = false;
    let mut progress = Progress::new();
    let mut rounds = 0u32;
    'splitters: loop {
        rounds = rounds.wrapping_add(1);
        if let Some(p) = progress.as_mut().filter(|_| rounds.is_multiple_of(256)) {
            p.tick(members.len(), n);
        }
        if splitter as usize >= members.len() {
            if !changed {
                break;
            }
            changed = false;
            splitter = 0;
            continue;
        }
        // Incoming transitions of the splitter block, grouped by label.
        group.clear();
        let incoming: usize = members[splitter as usize]
            .iter()
            .map(|&v| (in_start[v as usize + 1] - in_start[v as usize]) as usize)
            .sum();
        group.try_reserve_exact(incoming).map_err(|_| {
            PostError::Limit(format!("cannot allocate {incoming} incoming transitions"))
        })?;
        // A counting sort by label (labels in increasing order, each label's steps in the
        // order of their targets): a comparison sort of every splitter's incoming steps had
        // been three quarters of the time.
        let targets = &members[splitter as usize];
        let ins = || {
            targets
                .iter()
                .flat_map(|&v| in_start[v as usize] as usize..in_start[v as usize + 1] as usize)
        };
        for t in ins() {
            let a = ilabel[t] as usize;
            if lcount[a] == 0 {
                llist.push(a as u32);
            }
            lcount[a] += 1;
        }
        llist.sort_unstable();
        let mut at = 0;
        for &a in &llist {
            let c = lcount[a as usize];
            lcount[a as usize] = at;
            at += c;
        }
        group.resize(incoming, 0);
        for t in ins() {
            let a = ilabel[t] as usize;
            group[lcount[a] as usize] = t as u32;
            lcount[a] += 1;
        }
        for &a in &llist {
            lcount[a as usize] = 0;
        }
        llist.clear();
        let mut g = 0;
        while g < group.len() {
            let a = ilabel[group[g] as usize];
            let mut h = g;
            if stamp >= u32::MAX - 2 {
                seen.fill(0);
                btouch.fill(0);
                stamp = 0;
            }
            stamp += 1;
            touched.clear();
            sources.clear();
            while h < group.len() && ilabel[group[h] as usize] == a {
                let s = isrc[group[h] as usize];
                h += 1;
                let b = block_of[s as usize];
                if a == tau && b == splitter {
                    continue; // inert
                }
                if seen[s as usize] == stamp {
                    continue;
                }
                seen[s as usize] = stamp;
                sources.push(s);
                if btouch[b as usize] != stamp {
                    btouch[b as usize] = stamp;
                    bcount[b as usize] = 0;
                    touched.push(b);
                }
                if bottom[s as usize] {
                    bcount[b as usize] += 1;
                }
            }
            g = h;
            // Every block some of whose states reach an a-step into the splitter but one of
            // whose bottom states has none is split; the others are stable for (splitter,
            // a). Splitting one block changes neither the others nor the sources' steps.
            unstable.clear();
            unstable.extend(
                touched
                    .iter()
                    .copied()
                    .filter(|&b| bcount[b as usize] < nbottom[b as usize]),
            );
            for &b in &unstable {
                // Split b: states that reach a source by inert steps versus the rest (a
                // bottom state without the step is among the rest, so neither is empty).
                if pstamp == u32::MAX {
                    pos_mark.fill(0);
                    pstamp = 0;
                }
                pstamp += 1;
                queue.clear();
                for &s in &sources {
                    if block_of[s as usize] == b {
                        pos_mark[s as usize] = pstamp;
                        queue.push(s);
                    }
                }
                let mut qi = 0;
                while qi < queue.len() {
                    let p = queue[qi];
                    qi += 1;
                    for t in in_start[p as usize] as usize..in_start[p as usize + 1] as usize {
                        let u = isrc[t];
                        if ilabel[t] == tau
                            && block_of[u as usize] == b
                            && pos_mark[u as usize] != pstamp
                        {
                            pos_mark[u as usize] = pstamp;
                            queue.push(u);
                        }
                    }
                }
                let nb = members.len() as u32;
                let (pos, rest): (Vec<u32>, Vec<u32>) = members[b as usize]
                    .iter()
                    .partition(|&&s| pos_mark[s as usize] == pstamp);
                for &s in &pos {
                    block_of[s as usize] = nb;
                }
                members[b as usize] = rest;
                members.push(pos);
                bcount.push(0);
                btouch.push(0);
                nbottom.push(0);
                for blk in [b, nb] {
                    let mut count = 0;
                    for &s in &members[blk as usize] {
                        let bot = !out
                            .out(s)
                            .any(|(l, d)| l == tau && block_of[d as usize] == blk);
                        bottom[s as usize] = bot;
                        count += bot as u32;
                    }
                    nbottom[blk as usize] = count;
                }
                changed = true;
                if b == splitter {
                    // The splitter itself was split: its incoming steps gathered here are
                    // out of date; check it again.
                    continue 'splitters;
                }
            }
        }
        splitter += 1;
    }

    // 3. Quotient: every non-inert transition between classes.
    drop(isrc);
    drop(ilabel);
    drop(in_start);
    drop(group);
    let nblocks = members.len();
    drop(members);
    let mut class_of = alloc_vec(n0, 0u32, "the classes")?;
    for (s, c) in class_of.iter_mut().enumerate() {
        *c = block_of[comp[s] as usize];
    }
    let mut rep = alloc_vec(nblocks, NONE, "class representatives")?;
    for (s, &c) in class_of.iter().enumerate() {
        if rep[c as usize] == NONE {
            rep[c as usize] = s as u32;
        }
    }
    let count = (0..ncomp)
        .map(|s| {
            let bs = block_of[s as usize];
            out.out(s)
                .filter(|&(l, d)| !(l == tau && block_of[d as usize] == bs))
                .count()
        })
        .sum();
    let mut qedges = Vec::new();
    qedges
        .try_reserve_exact(count)
        .map_err(|_| PostError::Limit(format!("cannot allocate the quotient's {count} edges")))?;
    for s in 0..ncomp {
        let bs = block_of[s as usize];
        for (l, d) in out.out(s) {
            let bd = block_of[d as usize];
            if !(l == tau && bs == bd) {
                qedges.push((bs, l, rep[bd as usize]));
            }
        }
    }
    drop(out);
    let (quotient, root_ids) = build_quotient(labels, &class_of, nblocks, qedges, roots)?;
    Ok(Minimised {
        lts: quotient,
        roots: root_ids,
        classes: nblocks as u64,
        distinct_transitions: m as u64,
        splitters: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::post::graph::test_lts as lts;

    #[test]
    fn inert_tau_disappears() {
        // 0 -tau-> 1 -a-> 2: branching bisimilar to a single a-step.
        let m = minimise_branching(lts(3, &["tau", "a"], &[(0, 0, 1), (1, 1, 2)]), &[0]).unwrap();
        assert_eq!((m.lts.states, m.lts.transitions()), (2, 1));
        assert_eq!(m.lts.labels[m.lts.label[0] as usize], "a");
    }

    #[test]
    fn choice_resolving_tau_is_kept() {
        // 0 -a-> 1, 0 -tau-> 2 -b-> 3: the tau discards the a-option, so it is not inert.
        let m = minimise_branching(
            lts(4, &["a", "i", "b"], &[(0, 0, 1), (0, 1, 2), (2, 2, 3)]),
            &[0],
        )
        .unwrap();
        assert_eq!((m.lts.states, m.lts.transitions()), (3, 3));
    }

    #[test]
    fn tau_cycles_collapse() {
        // 0 -tau-> 1 -tau-> 0, 1 -a-> 2.
        let m = minimise_branching(
            lts(3, &["tau", "a"], &[(0, 0, 1), (1, 0, 0), (1, 1, 2)]),
            &[0],
        )
        .unwrap();
        assert_eq!((m.lts.states, m.lts.transitions()), (2, 1));
    }
}
