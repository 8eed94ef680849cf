//! A stream of caches of snapshots, by handle: which snapshots are held, which cache holds
//! them, their hits, and the replacement decisions. It never sees a state, so the DFS cache
//! search can reuse it (its "snapshots" would be single states or groups of them).
//!
//! Rules:
//! * the first cache is offered every complete level; cache `i + 1` is offered what cache
//!   `i` evicts. A cache takes what it is offered when its sampling function says so (by
//!   level number: the level is at least the cache's next sample), else the offer leaves
//!   memory. Copies appended by Pebble growth take everything (their input was sampled by
//!   the identical cache before them).
//! * a cache never evicts the snapshot it took last (its *pinned* snapshot): so a snapshot
//!   taken by an increasing-period cache stays at least until that cache's next sample,
//!   however the stream above it churns — the premise of the paper's Lemma 1;
//! * a full cache evicts one snapshot (by its replacement strategy, among the others) and
//!   offers it to the next cache; the last cache's evictions leave memory, unless the
//!   stream grows (Pebble), where a copy of the last cache is appended to take them.

use super::spec::{CacheSpec, Capacity, Growth, Replacement, Sampler, StreamSpec};
use serde::{Deserialize, Serialize};

/// A snapshot's number, given by [`Stream::offer_level`].
pub type Handle = u32;

/// What the stream knows of a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Meta {
    /// The level it is a snapshot of.
    pub level: u64,
    /// States in it.
    pub size: u64,
    pub hits: u64,
    /// The level being expanded at its last hit, or when it entered its cache.
    pub last_hit: u64,
    /// The cache holding it.
    pub cache: usize,
}

/// One cache of the stream and its counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cache {
    pub spec: CacheSpec,
    /// Whether Pebble growth appended it (then it takes every offer).
    pub appended: bool,
    pub members: Vec<Handle>,
    /// The snapshot taken last, never evicted.
    pinned: Option<Handle>,
    sampler: Sampler,
    pub taken: u64,
    pub evicted: u64,
    pub declined: u64,
    pub hits: u64,
}

impl Cache {
    fn new(spec: CacheSpec, appended: bool) -> Cache {
        Cache {
            spec,
            appended,
            members: Vec::new(),
            pinned: None,
            sampler: Sampler::new(spec.sampling),
            taken: 0,
            evicted: 0,
            declined: 0,
            hits: 0,
        }
    }

    /// Whether the sampling function takes a snapshot of `level` (and then advances it).
    fn samples(&mut self, level: u64) -> bool {
        self.sampler.samples(level, self.appended)
    }

    fn full(&self) -> bool {
        match self.spec.capacity {
            Capacity::Bounded(n) => self.members.len() > n as usize,
            Capacity::Unbounded => false,
        }
    }
}

/// The caches, the snapshots' metadata and the replacement decisions. A checkpoint of the
/// snapshots store records it whole (it is small: a few snapshots' metadata), the random
/// generator and the samplers' positions included, so that a resumed stream takes and
/// evicts exactly the snapshots the uninterrupted one does.
#[derive(Clone, Serialize, Deserialize)]
pub struct Stream {
    spec: StreamSpec,
    pub caches: Vec<Cache>,
    metas: Vec<Option<Meta>>,
    free: Vec<Handle>,
    rng: u64,
    /// Snapshots held now, and states in them (counted with multiplicity per snapshot).
    pub held: u64,
    pub held_states: u64,
}

impl Stream {
    pub fn new(spec: &StreamSpec) -> Stream {
        Stream {
            caches: spec.caches.iter().map(|&c| Cache::new(c, false)).collect(),
            spec: spec.clone(),
            metas: Vec::new(),
            free: Vec::new(),
            rng: 0x9e37_79b9_7f4a_7c15,
            held: 0,
            held_states: 0,
        }
    }

    /// Whether `h` names a snapshot the stream holds.
    pub fn is_live(&self, h: Handle) -> bool {
        self.metas.get(h as usize).is_some_and(|m| m.is_some())
    }

    /// Checks a stream read back from a checkpoint against the invariants the methods
    /// below rely on (they index by handle and expect live snapshots): a stream that breaks
    /// them is refused with the reason, instead of panicking later.
    pub fn check(&self) -> Result<(), String> {
        if self.caches.is_empty() {
            return Err("a stream without caches".into());
        }
        let mut held = 0u64;
        for (i, c) in self.caches.iter().enumerate() {
            for &h in &c.members {
                match self.metas.get(h as usize) {
                    Some(Some(m)) if m.cache == i => held += 1,
                    _ => {
                        return Err(format!(
                            "cache {} holds snapshot {h}, which is not its own",
                            i + 1
                        ))
                    }
                }
            }
            if let Some(p) = c.pinned {
                if !self.is_live(p) {
                    return Err(format!(
                        "cache {} pins snapshot {p}, which is not held",
                        i + 1
                    ));
                }
            }
        }
        let live = self.metas.iter().filter(|m| m.is_some()).count() as u64;
        if held != live || held != self.held {
            return Err(format!(
                "{} snapshots counted, {live} described, {held} in the caches",
                self.held
            ));
        }
        if let Some(&h) = self
            .free
            .iter()
            .find(|&&h| self.is_live(h) || h as usize >= self.metas.len())
        {
            return Err(format!("snapshot {h} is both free and held (or unknown)"));
        }
        Ok(())
    }

    pub fn meta(&self, h: Handle) -> &Meta {
        self.metas[h as usize].as_ref().expect("a live snapshot")
    }

    /// Whether snapshot `h` is in a cache after the first one (an *old* snapshot, for the
    /// Backtrack set's first rule).
    pub fn is_old(&self, h: Handle) -> bool {
        self.meta(h).cache > 0
    }

    /// Records a hit on `h` while level `now` is expanded.
    pub fn hit(&mut self, h: Handle, now: u64) {
        let m = self.metas[h as usize].as_mut().expect("a live snapshot");
        m.hits += 1;
        m.last_hit = now;
        self.caches[m.cache].hits += 1;
    }

    /// Offers the complete level `level` (`size` states, just expanded) to the first cache.
    /// Returns the new snapshot's handle if the level was taken (the caller then stores its
    /// states under it), and pushes onto `dropped` the handles of snapshots that left the
    /// stream, with their levels (the caller frees their states).
    pub fn offer_level(
        &mut self,
        level: u64,
        size: u64,
        dropped: &mut Vec<(Handle, u64)>,
    ) -> Option<Handle> {
        if !self.caches[0].samples(level) {
            self.caches[0].declined += 1;
            return None;
        }
        let h = match self.free.pop() {
            Some(h) => h,
            None => {
                self.metas.push(None);
                (self.metas.len() - 1) as Handle
            }
        };
        self.metas[h as usize] = Some(Meta {
            level,
            size,
            hits: 0,
            last_hit: level,
            cache: 0,
        });
        self.held += 1;
        self.held_states += size;
        self.insert(0, h, level, dropped);
        Some(h)
    }

    /// Puts `h` (already accepted by cache `i`'s sampling function) into cache `i`, and
    /// cascades the eviction that may follow.
    fn insert(&mut self, mut i: usize, mut h: Handle, now: u64, dropped: &mut Vec<(Handle, u64)>) {
        loop {
            let c = &mut self.caches[i];
            c.members.push(h);
            c.pinned = Some(h);
            c.taken += 1;
            let m = self.metas[h as usize].as_mut().expect("live");
            m.cache = i;
            m.last_hit = m.last_hit.max(now);
            if !self.caches[i].full() {
                return;
            }
            let victim = self.victim(i);
            let c = &mut self.caches[i];
            c.members.retain(|&x| x != victim);
            c.evicted += 1;
            if i + 1 == self.caches.len() && self.spec.growth == Growth::Pebble {
                let last = self.caches[i].spec;
                self.caches.push(Cache::new(last, true));
            }
            if i + 1 == self.caches.len() {
                self.drop_handle(victim, dropped);
                return;
            }
            let level = self.meta(victim).level;
            if !self.caches[i + 1].samples(level) {
                self.caches[i + 1].declined += 1;
                self.drop_handle(victim, dropped);
                return;
            }
            i += 1;
            h = victim;
        }
    }

    fn drop_handle(&mut self, h: Handle, dropped: &mut Vec<(Handle, u64)>) {
        let m = self.metas[h as usize].take().expect("live");
        self.held -= 1;
        self.held_states -= m.size;
        self.free.push(h);
        dropped.push((h, m.level));
    }

    /// The snapshot cache `i` gives up: by its replacement strategy, among its members but
    /// the pinned one (a full cache holds at least two, so there is one).
    fn victim(&mut self, i: usize) -> Handle {
        let c = &self.caches[i];
        let candidates = c.members.iter().copied().filter(|&h| Some(h) != c.pinned);
        let m = |h: Handle| self.metas[h as usize].as_ref().expect("live");
        let pick = match c.spec.replacement {
            Replacement::Lru => candidates.min_by_key(|&h| (m(h).last_hit, m(h).level)),
            Replacement::Mru => candidates.max_by_key(|&h| (m(h).last_hit, m(h).level)),
            Replacement::Lfu => {
                candidates.min_by_key(|&h| (m(h).hits, u64::MAX - m(h).size, m(h).level))
            }
            Replacement::Mfu => candidates.max_by_key(|&h| (m(h).hits, m(h).size, m(h).level)),
            Replacement::Llnr => candidates.min_by_key(|&h| m(h).level),
            Replacement::Rnd => {
                let all: Vec<Handle> = candidates.collect();
                // xorshift64*: a fixed seed, so runs repeat.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                all.get((r % all.len().max(1) as u64) as usize).copied()
            }
        };
        pick.expect("a full cache has a member besides its pinned one")
    }

    /// From now on the last cache never evicts (the watchdog's escalation): whatever
    /// reaches it stays, which makes termination certain (see `Termination::UnboundedCache`).
    pub fn make_last_unbounded(&mut self) {
        if let Some(c) = self.caches.last_mut() {
            c.spec.capacity = Capacity::Unbounded;
        }
    }

    /// One line per cache for the stats.
    pub fn report(&self) -> Vec<serde_json::Value> {
        self.caches
            .iter()
            .map(|c| {
                serde_json::json!({
                    "cache": c.spec.to_string(),
                    "appended_by_pebble": c.appended,
                    "snapshots_taken": c.taken,
                    "snapshots_declined": c.declined,
                    "snapshots_evicted": c.evicted,
                    "snapshots_held": c.members.len(),
                    "states_held": c.members.iter().map(|&h| self.meta(h).size).sum::<u64>(),
                    "hits": c.hits,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(stream: &mut Stream, n: u64) -> Vec<(Handle, u64)> {
        let mut dropped = Vec::new();
        for l in 0..n {
            stream.offer_level(l, 1, &mut dropped);
        }
        dropped
    }

    fn held_levels(s: &Stream, i: usize) -> Vec<u64> {
        let mut v: Vec<u64> = s.caches[i]
            .members
            .iter()
            .map(|&h| s.meta(h).level)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn constant_and_increasing_periods_sample_the_right_levels() {
        let mut s = Stream::new(&StreamSpec::parse("(c3,LLNR,inf)").unwrap());
        levels(&mut s, 10);
        assert_eq!(held_levels(&s, 0), vec![0, 3, 6, 9]);
        let mut s = Stream::new(&StreamSpec::parse("(2,LLNR,inf)").unwrap());
        levels(&mut s, 21);
        assert_eq!(held_levels(&s, 0), vec![0, 2, 6, 12, 20]);
    }

    #[test]
    fn evictions_flow_down_the_stream_and_leave_it_at_the_end() {
        // Cache 0 keeps the last 2 levels; cache 1 takes every 2nd evicted level, keeps 2.
        let mut s = Stream::new(&StreamSpec::parse("(c1,LLNR,2)(c2,LLNR,2)").unwrap());
        let dropped = levels(&mut s, 10);
        assert_eq!(held_levels(&s, 0), vec![8, 9]);
        // Evicted from cache 0: 0..=7; cache 1 takes 0, 2, 4, 6 and keeps the last two.
        assert_eq!(held_levels(&s, 1), vec![4, 6]);
        assert_eq!(dropped.len(), 10 - 4);
        assert_eq!(s.held, 4);
        assert_eq!(s.caches[1].declined, 4);
    }

    #[test]
    fn the_pinned_snapshot_of_an_increasing_cache_stays_for_its_period() {
        // Capacity 1: the snapshot stays until the next sample, `period` levels later.
        let mut s = Stream::new(&StreamSpec::parse("(c1,MRU,1)(3,MRU,1)").unwrap());
        let mut dropped = Vec::new();
        let mut seen = Vec::new();
        for l in 0..40 {
            s.offer_level(l, 1, &mut dropped);
            seen.push(held_levels(&s, 1));
        }
        // Cache 1 takes levels evicted from cache 0 (one behind) with gaps 3, 6, 9, 12 …
        assert_eq!(seen[39], vec![30]);
        assert_eq!(seen[30], vec![18]);
        assert!(seen[31..39].iter().all(|h| h == &vec![30]));
    }

    #[test]
    fn replacement_strategies_pick_their_victims() {
        let pick = |r: &str, hits: &[(u64, u64)]| {
            let mut s = Stream::new(&StreamSpec::parse(&format!("(c1,{r},3)")).unwrap());
            let mut dropped = Vec::new();
            let hs: Vec<Handle> = (0..3)
                .map(|l| s.offer_level(l, 10 + l, &mut dropped).unwrap())
                .collect();
            for &(h, now) in hits {
                s.hit(hs[h as usize], now);
            }
            s.offer_level(3, 1, &mut dropped);
            assert_eq!(dropped.len(), 1);
            (0..3).find(|&i| hs[i] == dropped[0].0).unwrap()
        };
        // Level 0 hit twice late, level 1 once early, level 2 never (entered at level 2).
        let hits = [(0, 4), (0, 4), (1, 1)];
        assert_eq!(pick("LLNR", &hits), 0);
        assert_eq!(pick("LRU", &hits), 1);
        assert_eq!(pick("MRU", &hits), 0);
        assert_eq!(pick("LFU", &hits), 2);
        assert_eq!(pick("MFU", &hits), 0);
        assert!(pick("RND", &hits) < 3);
    }

    #[test]
    fn pebble_growth_keeps_every_snapshot_that_reaches_the_last_cache() {
        let mut s = Stream::new(&StreamSpec::parse("(c1,LRU,2)(c2,LLNR,2)+").unwrap());
        let dropped = levels(&mut s, 40);
        // Cache 0 keeps 2; every 2nd evicted level stays forever in a growing stream.
        assert_eq!(s.held, 2 + 19);
        assert_eq!(dropped.len(), 19);
        assert!(s.caches.len() > 5 && s.caches[2..].iter().all(|c| c.appended));
    }
}
