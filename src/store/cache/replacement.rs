//! Cache replacement strategies over *slots* (small dense integers naming cache entries),
//! independent of what an entry holds: the state cache of `--store cache` uses it, and any
//! other bounded cache (e.g. one of snapshots) can, since a strategy only sees slot
//! numbers, hits and per-entry kinds.
//!
//! Strategies (Godefroid, Holzmann, Pirottin, "State space caching revisited"):
//! * `random` — the paper's default: a uniformly random entry (xorshift, fixed seed, so runs
//!   are reproducible);
//! * `lru` / `mru` — least / most recently used (an insertion or a hit is a use);
//! * `lfu` / `mfu` — least / most frequently hit; ties go to the entry used longest ago
//!   (LFU) or most recently (MFU);
//! * `llnr` — lowest level number: the entry entered at the smallest DFS depth (the BFS
//!   snapshots paper's LLNR, for a stream of caches over states: `--caches`);
//! * `type` — the paper's "type-oriented" strategy: look at [`TYPE_SCAN`] entries from a
//!   random position and evict the one with the lowest kind (the kind of the transition that
//!   reached it; higher kinds are worth more), the first of them on ties.
//!
//! Every operation is O(1) but LFU/MFU/LLNR (O(log n), an ordered set of `(hits, last use)`
//! or `(0, depth)`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Entries the type-oriented strategy looks at per eviction: bounded, as in the paper, so
/// an eviction costs a constant however large the cache.
pub const TYPE_SCAN: usize = 16;

/// A replacement strategy (`--replacement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    Random,
    Lru,
    Mru,
    Lfu,
    Mfu,
    Type,
    Llnr,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::Random,
        Strategy::Lru,
        Strategy::Mru,
        Strategy::Lfu,
        Strategy::Mfu,
        Strategy::Type,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Random => "random",
            Strategy::Lru => "lru",
            Strategy::Mru => "mru",
            Strategy::Lfu => "lfu",
            Strategy::Mfu => "mfu",
            Strategy::Type => "type",
            Strategy::Llnr => "llnr",
        }
    }

    pub fn parse(s: &str) -> Result<Strategy, String> {
        Strategy::ALL
            .into_iter()
            .chain([Strategy::Llnr])
            .find(|x| x.as_str() == s)
            .ok_or_else(|| {
                format!("unknown replacement strategy '{s}' (expected random, lru, mru, lfu, mfu, type or llnr)")
            })
    }
}

const NIL: u32 = u32::MAX;

/// The per-slot bookkeeping of every cache of a stream, shared: a slot is in one cache at
/// a time, so one array serves them all. Each cache had kept its own arrays indexed by the
/// global slot number, so a Pebble stream (`--caches '(c1,LRU,10)+'`, up to 255 caches)
/// took 255 arrays as long as the whole table: 2.4 GiB on HouseConstruction-PT-00005,
/// against 91 MiB for the same states in one cache. An array grows only when a strategy
/// that needs it takes a slot past its end.
#[derive(Default)]
pub struct Slots {
    /// Random and type: each slot's index in its cache's dense list.
    pos: Vec<u32>,
    /// Type: each slot's kind.
    kinds: Vec<u8>,
    /// LRU/MRU: the doubly linked list of the slot's cache.
    prev: Vec<u32>,
    next: Vec<u32>,
    /// LFU/MFU: hits and last use; LLNR: 0 and the depth.
    hits: Vec<u32>,
    stamp: Vec<u64>,
}

impl Slots {
    fn grow(&mut self, strategy: Strategy, slot: u32) {
        let need = slot as usize + 1;
        match strategy {
            Strategy::Random | Strategy::Type => {
                if self.pos.len() < need {
                    self.pos.resize(need, NIL);
                    self.kinds.resize(need, 0);
                }
            }
            Strategy::Lru | Strategy::Mru => {
                if self.prev.len() < need {
                    self.prev.resize(need, NIL);
                    self.next.resize(need, NIL);
                }
            }
            Strategy::Lfu | Strategy::Mfu | Strategy::Llnr => {
                if self.hits.len() < need {
                    self.hits.resize(need, 0);
                    self.stamp.resize(need, 0);
                }
            }
        }
    }

    /// Bytes a slot takes in the arrays of the strategies in use (what a doubling of the
    /// slots adds per slot).
    pub fn bytes_per_slot(&self) -> u64 {
        let used = |len: usize, bytes: u64| if len > 0 { bytes } else { 0 };
        used(self.pos.len(), 5) + used(self.prev.len(), 8) + used(self.hits.len(), 12)
    }

    /// Bytes of RAM the arrays hold.
    pub fn ram_bytes(&self) -> u64 {
        (self.pos.capacity() * 4
            + self.kinds.capacity()
            + self.prev.capacity() * 4
            + self.next.capacity() * 4
            + self.hits.capacity() * 4
            + self.stamp.capacity() * 8) as u64
    }
}

/// The bookkeeping of one strategy over the slots currently in its cache; the per-slot
/// arrays are the stream's [`Slots`], passed in.
pub struct Policy {
    strategy: Strategy,
    rng: u64,
    /// Random and type: the slots in the cache, densely.
    dense: Vec<u32>,
    /// LRU/MRU: the list's ends, most recent at `head`.
    head: u32,
    tail: u32,
    /// LFU/MFU/LLNR: the slots ordered by `(hits, stamp)`.
    order: BTreeSet<(u32, u64, u32)>,
    clock: u64,
    len: usize,
}

impl Policy {
    pub fn new(strategy: Strategy, seed: u64) -> Policy {
        Policy {
            strategy,
            // xorshift must not start at 0.
            rng: (seed ^ 0x9E37_79B9_7F4A_7C15) | 1,
            dense: Vec::new(),
            head: NIL,
            tail: NIL,
            order: BTreeSet::new(),
            clock: 0,
            len: 0,
        }
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Entries in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn random(&mut self, below: usize) -> usize {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        // Multiply-shift: unbiased enough for choosing a victim, and no division.
        ((x as u128 * below as u128) >> 64) as usize
    }

    fn unlink(&mut self, sl: &mut Slots, s: u32) {
        let (p, n) = (sl.prev[s as usize], sl.next[s as usize]);
        if p == NIL {
            self.head = n;
        } else {
            sl.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            sl.prev[n as usize] = p;
        }
    }

    fn link_front(&mut self, sl: &mut Slots, s: u32) {
        sl.prev[s as usize] = NIL;
        sl.next[s as usize] = self.head;
        if self.head == NIL {
            self.tail = s;
        } else {
            sl.prev[self.head as usize] = s;
        }
        self.head = s;
    }

    /// `slot` enters the cache; `kind` is what the type-oriented strategy ranks it by.
    pub fn insert(&mut self, sl: &mut Slots, slot: u32, kind: u8) {
        self.insert_at(sl, slot, kind, 0);
    }

    /// [`Policy::insert`] of a state entered at DFS `depth` (what LLNR ranks by).
    pub fn insert_at(&mut self, sl: &mut Slots, slot: u32, kind: u8, depth: u64) {
        sl.grow(self.strategy, slot);
        self.len += 1;
        match self.strategy {
            Strategy::Random | Strategy::Type => {
                sl.pos[slot as usize] = self.dense.len() as u32;
                self.dense.push(slot);
                sl.kinds[slot as usize] = kind;
            }
            Strategy::Lru | Strategy::Mru => self.link_front(sl, slot),
            Strategy::Lfu | Strategy::Mfu => {
                self.clock += 1;
                sl.hits[slot as usize] = 0;
                sl.stamp[slot as usize] = self.clock;
                self.order.insert((0, self.clock, slot));
            }
            Strategy::Llnr => {
                sl.hits[slot as usize] = 0;
                sl.stamp[slot as usize] = depth;
                self.order.insert((0, depth, slot));
            }
        }
    }

    /// `slot` (in the cache) was matched.
    pub fn hit(&mut self, sl: &mut Slots, slot: u32) {
        match self.strategy {
            Strategy::Random | Strategy::Type | Strategy::Llnr => {}
            Strategy::Lru | Strategy::Mru => {
                self.unlink(sl, slot);
                self.link_front(sl, slot);
            }
            Strategy::Lfu | Strategy::Mfu => {
                let s = slot as usize;
                self.order.remove(&(sl.hits[s], sl.stamp[s], slot));
                self.clock += 1;
                sl.hits[s] = sl.hits[s].saturating_add(1);
                sl.stamp[s] = self.clock;
                self.order.insert((sl.hits[s], self.clock, slot));
            }
        }
    }

    /// Takes `slot` out of the cache.
    pub fn remove(&mut self, sl: &mut Slots, slot: u32) {
        self.len -= 1;
        match self.strategy {
            Strategy::Random | Strategy::Type => {
                let i = sl.pos[slot as usize] as usize;
                let last = self.dense.pop().expect("the slot is in the cache");
                if last != slot {
                    self.dense[i] = last;
                    sl.pos[last as usize] = i as u32;
                }
                sl.pos[slot as usize] = NIL;
            }
            Strategy::Lru | Strategy::Mru => self.unlink(sl, slot),
            Strategy::Lfu | Strategy::Mfu | Strategy::Llnr => {
                let s = slot as usize;
                self.order.remove(&(sl.hits[s], sl.stamp[s], slot));
            }
        }
    }

    /// Chooses the entry to evict and takes it out of the cache; `None` when empty.
    pub fn evict(&mut self, sl: &mut Slots) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let victim = match self.strategy {
            Strategy::Random => {
                let i = self.random(self.dense.len());
                self.dense[i]
            }
            Strategy::Type => {
                let n = self.dense.len();
                let start = self.random(n);
                let mut best = self.dense[start];
                for k in 1..TYPE_SCAN.min(n) {
                    if sl.kinds[best as usize] == 0 {
                        break;
                    }
                    let s = self.dense[(start + k) % n];
                    if sl.kinds[s as usize] < sl.kinds[best as usize] {
                        best = s;
                    }
                }
                best
            }
            Strategy::Lru => self.tail,
            Strategy::Mru => self.head,
            Strategy::Lfu | Strategy::Llnr => self.order.first().expect("non-empty").2,
            Strategy::Mfu => self.order.last().expect("non-empty").2,
        };
        self.remove(sl, victim);
        Some(victim)
    }

    /// Bytes of RAM the bookkeeping holds (the shared [`Slots`] apart).
    pub fn ram_bytes(&self) -> u64 {
        (self.dense.capacity() * 4
            // A B-tree entry is 16 bytes of key plus about as much of node overhead.
            + self.order.len() * 32) as u64
    }
}

/// What a checkpoint records of a [`Policy`] besides its dense list (written with the
/// table's image) and its ordered set (rebuilt from the shared [`Slots`]): the strategy,
/// the random generator (so that a resumed random or type-oriented cache picks the victims
/// the uninterrupted one picks), the list's ends, the clock and the size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyMark {
    pub strategy: Strategy,
    pub rng: u64,
    pub head: u32,
    pub tail: u32,
    pub clock: u64,
    pub len: u64,
}

/// The lengths of the [`Slots`] arrays (`kinds` follows `pos`, `next` follows `prev`,
/// `stamp` follows `hits`: they grow together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotsMark {
    pub pos: u64,
    pub prev: u64,
    pub hits: u64,
}

impl Slots {
    pub fn mark(&self) -> SlotsMark {
        SlotsMark {
            pos: self.pos.len() as u64,
            prev: self.prev.len() as u64,
            hits: self.hits.len() as u64,
        }
    }

    /// The arrays, for a checkpoint's image: `(pos, kinds, prev, next, hits, stamp)`.
    #[allow(clippy::type_complexity)]
    pub fn arrays(&self) -> (&[u32], &[u8], &[u32], &[u32], &[u32], &[u64]) {
        (
            &self.pos,
            &self.kinds,
            &self.prev,
            &self.next,
            &self.hits,
            &self.stamp,
        )
    }

    /// Slots rebuilt from a checkpoint's arrays; `None` when their lengths break the
    /// pairing the methods rely on (`kinds` as long as `pos`, and so on).
    pub fn from_arrays(
        pos: Vec<u32>,
        kinds: Vec<u8>,
        prev: Vec<u32>,
        next: Vec<u32>,
        hits: Vec<u32>,
        stamp: Vec<u64>,
    ) -> Option<Slots> {
        let paired =
            pos.len() == kinds.len() && prev.len() == next.len() && hits.len() == stamp.len();
        paired.then_some(Slots {
            pos,
            kinds,
            prev,
            next,
            hits,
            stamp,
        })
    }
}

impl Policy {
    pub fn mark(&self) -> PolicyMark {
        PolicyMark {
            strategy: self.strategy,
            rng: self.rng,
            head: self.head,
            tail: self.tail,
            clock: self.clock,
            len: self.len as u64,
        }
    }

    /// Random and type: the slots in the cache in their dense order (which the random
    /// choice of a victim indexes, so a checkpoint keeps it); empty for the others.
    pub fn dense(&self) -> &[u32] {
        &self.dense
    }

    /// Whether the strategy keeps a dense list ([`Policy::dense`]).
    pub fn keeps_dense(strategy: Strategy) -> bool {
        matches!(strategy, Strategy::Random | Strategy::Type)
    }

    /// The policy of a checkpoint: `mark`, and `dense` (random, type) or the cache's
    /// `members` (the others: their list or ordered set lives in `sl`). Checks what the
    /// methods rely on, so that a policy read back wrong is refused here instead of
    /// panicking or looping later: every slot it holds is a member with its bookkeeping in
    /// `sl`, the dense positions and the list's links agree, the size is the members'.
    /// `member(s)`: whether slot `s` is in this cache.
    pub fn restore(
        mark: &PolicyMark,
        dense: Vec<u32>,
        members: &[u32],
        sl: &Slots,
        member: impl Fn(u32) -> bool,
    ) -> Result<Policy, String> {
        let mut p = Policy::new(mark.strategy, 0);
        p.rng = mark.rng;
        p.clock = mark.clock;
        if p.rng == 0 {
            return Err("a random generator at 0 (xorshift never leaves it)".into());
        }
        if mark.len != members.len() as u64 {
            return Err(format!(
                "{} entries counted, {} held",
                mark.len,
                members.len()
            ));
        }
        p.len = members.len();
        if !Policy::keeps_dense(mark.strategy) && !dense.is_empty() {
            return Err("a dense list for a strategy that keeps none".into());
        }
        match mark.strategy {
            Strategy::Random | Strategy::Type => {
                if dense.len() != p.len {
                    return Err(format!("a list of {} entries for {}", dense.len(), p.len));
                }
                for (i, &s) in dense.iter().enumerate() {
                    // Each slot at the position it names: no slot twice, and with the
                    // count equal to the members', every member once.
                    if !member(s) || sl.pos.get(s as usize) != Some(&(i as u32)) {
                        return Err(format!("slot {s} at position {i} of the list"));
                    }
                }
                p.dense = dense;
            }
            Strategy::Lru | Strategy::Mru => {
                // Walks the list from the head: `len` members, each linked back to the one
                // before it (which rules out a repeat), then the end.
                let (mut at, mut before, mut n) = (mark.head, NIL, 0usize);
                while at != NIL {
                    if n == p.len || !member(at) || sl.prev.get(at as usize) != Some(&before) {
                        return Err(format!("slot {at} at place {n} of the recency list"));
                    }
                    (before, at, n) = (at, sl.next[at as usize], n + 1);
                }
                if n != p.len || mark.tail != before {
                    return Err(format!(
                        "a recency list of {n} entries ending at {} for {} ending at {}",
                        before, p.len, mark.tail
                    ));
                }
                (p.head, p.tail) = (mark.head, mark.tail);
            }
            Strategy::Lfu | Strategy::Mfu | Strategy::Llnr => {
                for &s in members {
                    let (Some(&h), Some(&t)) = (sl.hits.get(s as usize), sl.stamp.get(s as usize))
                    else {
                        return Err(format!("slot {s} without its hits and stamp"));
                    };
                    p.order.insert((h, t, s));
                }
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(p: &mut Policy, sl: &mut Slots, n: u32) {
        for s in 0..n {
            p.insert(sl, s, (s % 3) as u8);
        }
    }

    #[test]
    fn lru_and_mru_follow_use() {
        let (mut p, mut sl) = (Policy::new(Strategy::Lru, 1), Slots::default());
        fill(&mut p, &mut sl, 4);
        p.hit(&mut sl, 0);
        assert_eq!(p.evict(&mut sl), Some(1));
        assert_eq!(p.evict(&mut sl), Some(2));
        let (mut p, mut sl) = (Policy::new(Strategy::Mru, 1), Slots::default());
        fill(&mut p, &mut sl, 4);
        p.hit(&mut sl, 1);
        assert_eq!(p.evict(&mut sl), Some(1));
        assert_eq!(p.evict(&mut sl), Some(3));
    }

    #[test]
    fn lfu_and_mfu_follow_hits() {
        let (mut p, mut sl) = (Policy::new(Strategy::Lfu, 1), Slots::default());
        fill(&mut p, &mut sl, 4);
        for s in [0, 0, 1, 2, 3, 3, 3] {
            p.hit(&mut sl, s);
        }
        assert_eq!(p.evict(&mut sl), Some(1));
        assert_eq!(p.evict(&mut sl), Some(2));
        let (mut p, mut sl) = (Policy::new(Strategy::Mfu, 1), Slots::default());
        fill(&mut p, &mut sl, 4);
        for s in [0, 0, 1, 2, 3, 3, 3] {
            p.hit(&mut sl, s);
        }
        assert_eq!(p.evict(&mut sl), Some(3));
        assert_eq!(p.evict(&mut sl), Some(0));
    }

    #[test]
    fn type_evicts_the_lowest_kind_in_reach() {
        // Fewer entries than the scan: the lowest kind always goes first.
        let (mut p, mut sl) = (Policy::new(Strategy::Type, 7), Slots::default());
        fill(&mut p, &mut sl, 9);
        for _ in 0..3 {
            let v = p.evict(&mut sl).unwrap();
            assert_eq!(v % 3, 0, "evicted {v} of kind {}", v % 3);
        }
        let v = p.evict(&mut sl).unwrap();
        assert_eq!(v % 3, 1);
    }

    #[test]
    fn llnr_evicts_the_shallowest_entry_whatever_its_hits() {
        let (mut p, mut sl) = (Policy::new(Strategy::Llnr, 1), Slots::default());
        for (slot, depth) in [(0, 7), (1, 3), (2, 9), (3, 3), (4, 5)] {
            p.insert_at(&mut sl, slot, 0, depth);
        }
        p.hit(&mut sl, 1);
        p.remove(&mut sl, 4);
        let order: Vec<u32> = std::iter::from_fn(|| p.evict(&mut sl)).collect();
        assert_eq!(order, [1, 3, 0, 2]);
        assert_eq!(Strategy::parse("llnr"), Ok(Strategy::Llnr));
    }

    #[test]
    fn every_strategy_evicts_each_entry_once() {
        for s in Strategy::ALL.into_iter().chain([Strategy::Llnr]) {
            let (mut p, mut sl) = (Policy::new(s, 3), Slots::default());
            fill(&mut p, &mut sl, 100);
            p.remove(&mut sl, 42);
            for h in 0..50 {
                if h != 42 {
                    p.hit(&mut sl, h);
                }
            }
            let mut seen = std::collections::HashSet::new();
            while let Some(v) = p.evict(&mut sl) {
                assert!(
                    v != 42 && seen.insert(v),
                    "{s:?} evicted {v} twice or after removal"
                );
            }
            assert_eq!(seen.len(), 99, "{s:?}");
            assert!(p.is_empty());
        }
    }

    /// A policy restored from its mark and the shared arrays evicts as the original does;
    /// lists, positions or sizes that disagree with the cache's members are refused.
    #[test]
    fn restore_gives_the_same_victims_and_refuses_what_does_not_fit() {
        for s in Strategy::ALL.into_iter().chain([Strategy::Llnr]) {
            let (mut p, mut sl) = (Policy::new(s, 5), Slots::default());
            fill(&mut p, &mut sl, 20);
            for h in [3, 3, 7, 11, 0] {
                p.hit(&mut sl, h);
            }
            p.remove(&mut sl, 9);
            let members: Vec<u32> = (0..20).filter(|&m| m != 9).collect();
            let member = |m: u32| m < 20 && m != 9;
            let (pos, kinds, prev, next, hits, stamp) = sl.arrays();
            let mut sl2 = Slots::from_arrays(
                pos.to_vec(),
                kinds.to_vec(),
                prev.to_vec(),
                next.to_vec(),
                hits.to_vec(),
                stamp.to_vec(),
            )
            .unwrap();
            let mut q =
                Policy::restore(&p.mark(), p.dense().to_vec(), &members, &sl2, member).unwrap();
            let a: Vec<u32> = std::iter::from_fn(|| p.evict(&mut sl)).collect();
            let b: Vec<u32> = std::iter::from_fn(|| q.evict(&mut sl2)).collect();
            assert_eq!(a, b, "{s:?}");
        }
        let (mut p, mut sl) = (Policy::new(Strategy::Lru, 1), Slots::default());
        fill(&mut p, &mut sl, 4);
        let all = [0, 1, 2, 3];
        let ok = |m: u32| m < 4;
        assert!(Policy::restore(&p.mark(), vec![], &all[..3], &sl, ok).is_err());
        sl.prev[2] = 0;
        assert!(Policy::restore(&p.mark(), vec![], &all, &sl, ok).is_err());
        let (mut p, mut sl) = (Policy::new(Strategy::Random, 1), Slots::default());
        fill(&mut p, &mut sl, 4);
        assert!(Policy::restore(&p.mark(), vec![0, 1, 3, 2], &all, &sl, ok).is_err());
        assert!(Policy::restore(&p.mark(), vec![0, 1, 2, 2], &all, &sl, ok).is_err());
        assert!(Policy::restore(&p.mark(), vec![0, 1, 2, 3], &all, &sl, ok).is_ok());
        let mut zero = p.mark();
        zero.rng = 0;
        assert!(Policy::restore(&zero, vec![0, 1, 2, 3], &all, &sl, ok).is_err());
    }
}
