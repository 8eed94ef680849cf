//! Where the tree store puts each byte of a state. The tree folds neighbouring leaves
//! together, so a successor's dirty nodes — and the nodes a new state adds — are few when
//! the values a transition changes lie close together, and many when they are spread over
//! the vector. A model's own layout need not care (a P/T net lists its places in file
//! order), so the store regroups the state's units (a P/T net's counters) greedily by the
//! transitions that touch them, as LTSmin's regrouping does for its tree: repeatedly take
//! the transition with the most units among the last few placed (ties: the fewest units
//! not yet placed, then the lowest number) and place its units not yet placed, those
//! touched together with the most others first. Measured on the MCC nets, one thread
//! (docs/ARCHITECTURE.md, store/tree "Layout"): SharedMemory-PT-000010 from 1.25 inner
//! nodes a state to 0.03.

use std::collections::VecDeque;

/// Transitions above which the layout stays as given: picking a transition scans them all,
/// so the order costs O(T²) (20,000: a fraction of a second).
const MAX_TRANSITIONS: usize = 20_000;

/// Units placed last that a transition's overlap is counted against.
const WINDOW: usize = 8;

/// The tree's byte order for states of `width` bytes: leaf byte `j` holds state byte
/// `order[j]`. Empty when the layout stays as given: no units known, units that do not
/// tile the state, too many transitions, or a greedy order that is the identity.
pub fn order(width: usize, units: Option<&(usize, Vec<Vec<u32>>)>) -> Vec<u32> {
    let Some(&(unit, ref touched)) = units else {
        return Vec::new();
    };
    if unit == 0 || !width.is_multiple_of(unit) || touched.len() > MAX_TRANSITIONS {
        return Vec::new();
    }
    let n = width / unit;
    if touched.iter().flatten().any(|&u| u as usize >= n) {
        return Vec::new();
    }
    // The transitions of each unit, and each unit's weight: how many others it is
    // touched together with, counted per transition.
    let mut of_unit: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut weight = vec![0u64; n];
    for (t, us) in touched.iter().enumerate() {
        for &u in us {
            of_unit[u as usize].push(t as u32);
            weight[u as usize] += us.len() as u64 - 1;
        }
    }
    let mut placed = vec![false; n];
    let mut units: Vec<u32> = Vec::with_capacity(n);
    // Per transition: its units among the last `WINDOW` placed, and its units not placed.
    let mut overlap = vec![0u32; touched.len()];
    let mut fresh: Vec<u32> = touched.iter().map(|us| us.len() as u32).collect();
    let mut done: Vec<bool> = touched.iter().map(|us| us.is_empty()).collect();
    let mut window: VecDeque<u32> = VecDeque::with_capacity(WINDOW + 1);
    let mut new: Vec<u32> = Vec::new();
    loop {
        let mut best: Option<(u32, u32, usize)> = None;
        for t in (0..touched.len()).filter(|&t| !done[t]) {
            let key = (overlap[t], u32::MAX - fresh[t]);
            if best.is_none_or(|(o, f, _)| key > (o, f)) {
                best = Some((key.0, key.1, t));
            }
        }
        let Some((_, _, t)) = best else {
            break;
        };
        done[t] = true;
        new.clear();
        new.extend(touched[t].iter().filter(|&&u| !placed[u as usize]));
        new.sort_by_key(|&u| (std::cmp::Reverse(weight[u as usize]), u));
        new.dedup();
        for &u in &new {
            placed[u as usize] = true;
            units.push(u);
            for &t2 in &of_unit[u as usize] {
                fresh[t2 as usize] -= 1;
                overlap[t2 as usize] += 1;
            }
            window.push_back(u);
            if window.len() > WINDOW {
                let old = window.pop_front().expect("a full window");
                for &t2 in &of_unit[old as usize] {
                    overlap[t2 as usize] -= 1;
                }
            }
        }
    }
    units.extend((0..n as u32).filter(|&u| !placed[u as usize]));
    if units.iter().enumerate().all(|(i, &u)| i == u as usize) {
        return Vec::new();
    }
    let unit = unit as u32;
    units
        .iter()
        .flat_map(|&u| u * unit..(u + 1) * unit)
        .collect()
}

/// For each transition, the leaves (of 4 bytes, in `order`) that hold a byte of a unit it
/// touches, ascending: the only leaves its firing can change. Empty when `order` is (the
/// store then compares every leaf).
pub fn touched_leaves(order: &[u32], units: Option<&(usize, Vec<Vec<u32>>)>) -> Vec<Vec<u32>> {
    let Some(&(unit, ref touched)) = units else {
        return Vec::new();
    };
    if order.is_empty() || unit == 0 {
        return Vec::new();
    }
    // Where each state byte lies among the leaves' bytes.
    let mut at = vec![0u32; order.len()];
    for (j, &i) in order.iter().enumerate() {
        at[i as usize] = j as u32;
    }
    touched
        .iter()
        .map(|us| {
            let mut leaves: Vec<u32> = us
                .iter()
                .flat_map(|&u| u as usize * unit..(u as usize + 1) * unit)
                .filter_map(|i| at.get(i).map(|&j| j / 4))
                .collect();
            leaves.sort_unstable();
            leaves.dedup();
            leaves
        })
        .collect()
}

/// Whether `order` holds each of `0..width` once (a checkpoint's order is checked before
/// the leaves are gathered through it).
pub fn is_permutation(order: &[u32], width: usize) -> bool {
    let mut seen = vec![false; width];
    order.len() == width
        && order
            .iter()
            .all(|&i| (i as usize) < width && !std::mem::replace(&mut seen[i as usize], true))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes of three places each, interleaved in the vector (a, b, a, b, …): the
    /// order puts each process's places together, and every byte of a two-byte unit
    /// stays with its unit.
    #[test]
    fn groups_the_units_each_transition_touches() {
        // Units 0, 2, 4 belong to process a (transitions 0 and 1), 1, 3, 5 to b (2 and 3).
        let touched = vec![vec![0, 2], vec![2, 4], vec![1, 3], vec![3, 5]];
        let o = order(12, Some(&(2, touched.clone())));
        assert_eq!(o.len(), 12);
        let units: Vec<u32> = o.chunks(2).map(|c| c[0] / 2).collect();
        for c in o.chunks(2) {
            assert_eq!(c[1], c[0] + 1);
        }
        let pos = |u: u32| units.iter().position(|&x| x == u).unwrap();
        let span =
            |us: [u32; 3]| us.map(pos).iter().max().unwrap() - us.map(pos).iter().min().unwrap();
        assert_eq!(span([0, 2, 4]), 2, "{units:?}");
        assert_eq!(span([1, 3, 5]), 2, "{units:?}");
        assert!(is_permutation(&o, 12));
        assert!(!is_permutation(&o[..11], 12));
        assert!(!is_permutation(&[0, 1, 1], 3));
        assert!(!is_permutation(&[0, 1, 3], 3));
        // Nothing known, units that do not tile the state, or an order that changes
        // nothing: the layout stays.
        assert!(order(12, None).is_empty());
        assert!(order(12, Some(&(5, touched))).is_empty());
        assert!(order(4, Some(&(1, vec![vec![0, 1], vec![2, 3]]))).is_empty());
    }
}
