//! The textual notation of a stream of caches, as the BFS-with-snapshots paper writes it:
//! `(c2,LLNR,5)(2,LFU,10)` is a cache that samples every 2nd level (constant period `c2`),
//! replaces its lowest level number first and holds 5 snapshots, followed by a cache whose
//! period grows by 2 after each sample (`2`), least-frequently-used replacement, 10
//! snapshots. A capacity may be `inf` (never evicts); a trailing `+` makes the stream grow
//! (Pebble Search: a copy of the last cache is appended whenever the last one is full).
//!
//! This module knows nothing of states or levels, so the DFS cache search can reuse it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// When a cache takes a snapshot of what it is offered (levels for the first cache, the
/// previous cache's evictions for the others), by level number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sampling {
    /// `cN`: levels at least `N` apart (every `N`th level for the first cache).
    Constant(u32),
    /// `N`: the gap starts at `N` and grows by `N` after each sample (levels 0, N, 3N, 6N …
    /// for the first cache): the period keeps increasing, which is what guarantees
    /// termination (the paper's Lemma 1).
    Increasing(u32),
}

/// A sampling function running: it takes an offer at position `at` (a level number in BFS,
/// an offer count in DFS) when `at` is at least its next sample, then moves the next sample
/// on by the period (which an increasing-period function then lengthens).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Sampler {
    sampling: Sampling,
    next: u64,
    period: u64,
}

impl Sampler {
    pub fn new(sampling: Sampling) -> Sampler {
        let period = match sampling {
            Sampling::Constant(n) | Sampling::Increasing(n) => n as u64,
        };
        Sampler {
            sampling,
            next: 0,
            period,
        }
    }

    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    /// Whether the offer at `at` is taken (and then advances); `all` takes it whatever the
    /// function says (a cache appended by Pebble growth).
    pub fn samples(&mut self, at: u64, all: bool) -> bool {
        if !all && at < self.next {
            return false;
        }
        self.next = at.saturating_add(self.period);
        if let Sampling::Increasing(n) = self.sampling {
            self.period = self.period.saturating_add(n as u64);
        }
        true
    }
}

/// Which snapshot a full cache gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Replacement {
    /// Least recently used: the oldest last hit (a snapshot never hit counts from when it
    /// entered the cache); ties: the lower level.
    Lru,
    /// Most recently used: the newest last hit; ties: the higher level.
    Mru,
    /// Least frequently used: the fewest hits; ties: the larger snapshot (frees more).
    Lfu,
    /// Most frequently used: the most hits; ties: the larger snapshot.
    Mfu,
    /// A uniformly random snapshot (fixed seed: runs repeat).
    Rnd,
    /// Lowest level number: the oldest level.
    Llnr,
}

impl Replacement {
    pub fn as_str(self) -> &'static str {
        match self {
            Replacement::Lru => "LRU",
            Replacement::Mru => "MRU",
            Replacement::Lfu => "LFU",
            Replacement::Mfu => "MFU",
            Replacement::Rnd => "RND",
            Replacement::Llnr => "LLNR",
        }
    }
}

/// How many snapshots a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Capacity {
    Bounded(u32),
    /// `inf`: nothing is ever evicted from this cache.
    Unbounded,
}

impl Capacity {
    /// The bound, `None` for `inf`.
    pub fn bound(self) -> Option<u64> {
        match self {
            Capacity::Bounded(n) => Some(n as u64),
            Capacity::Unbounded => None,
        }
    }
}

/// One cache: (sampling function, replacement strategy, capacity in snapshots).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSpec {
    pub sampling: Sampling,
    pub replacement: Replacement,
    pub capacity: Capacity,
}

/// Whether the stream of caches has a fixed length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Growth {
    /// The caches written, no more.
    Fixed,
    /// Pebble Search (`+`): when the last cache is full, a copy of it is appended and takes
    /// what the last one evicts, so no snapshot that reached the last cache is ever dropped.
    Pebble,
}

/// A stream of caches: a snapshot evicted from cache `i` is offered to cache `i + 1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSpec {
    pub caches: Vec<CacheSpec>,
    pub growth: Growth,
}

/// The named setups of the paper (`--preset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// A frequent constant-period cache holding the last levels (it catches the short
    /// back edges, the most common duplicates), then an increasing-period cache: the safety
    /// net that eventually catches long cycles and guarantees termination.
    FrontierSafetyNet,
    /// The last levels, then a stream of identical sparse caches that grows whenever its
    /// last cache is full: every sampled level stays, memory grows by a fraction of the
    /// states, termination is guaranteed by the unbounded stream.
    Pebble,
}

impl Preset {
    pub const ALL: [Preset; 2] = [Preset::FrontierSafetyNet, Preset::Pebble];

    pub fn name(self) -> &'static str {
        match self {
            Preset::FrontierSafetyNet => "frontier-safety-net",
            Preset::Pebble => "pebble",
        }
    }

    pub fn parse(s: &str) -> Result<Preset, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("'{s}' is not one of frontier-safety-net, pebble"))
    }

    /// The stream the preset stands for, in the textual notation.
    pub fn notation(self) -> &'static str {
        match self {
            Preset::FrontierSafetyNet => "(c1,LRU,2)(c4,LLNR,32)(8,LLNR,4)",
            Preset::Pebble => "(c1,LRU,2)(c4,LLNR,8)+",
        }
    }

    pub fn stream(self) -> StreamSpec {
        StreamSpec::parse(self.notation()).expect("presets are valid notation")
    }
}

/// Why a stream is sure to terminate (or not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Termination {
    /// Cache `index` samples with an increasing period (Lemma 1).
    IncreasingPeriod { index: usize },
    /// Cache `index` never evicts, so the snapshots it takes (pairwise disjoint, never empty)
    /// are finitely many.
    UnboundedCache { index: usize },
    /// The stream grows (Pebble): what reaches its last cache is never dropped.
    GrowingStream,
    /// None of the above: a cycle longer than what the caches span is never detected.
    NotGuaranteed(String),
}

impl StreamSpec {
    /// Parses the notation: one or more `(SAMPLING,REPLACEMENT,CAPACITY)` groups, then an
    /// optional `+`. Blanks are allowed between tokens; names are case-insensitive. Errors
    /// give the 1-based column.
    pub fn parse(text: &str) -> Result<StreamSpec, String> {
        let mut p = Parser {
            text,
            chars: text.char_indices().collect(),
            pos: 0,
        };
        let mut caches = Vec::new();
        let mut growth = Growth::Fixed;
        p.blanks();
        while p.peek().is_some() {
            match p.peek() {
                Some('(') => {
                    if growth == Growth::Pebble {
                        return Err(p.error("'+' (Pebble growth) must end the stream"));
                    }
                    caches.push(p.cache()?);
                }
                Some('+') if !caches.is_empty() && growth == Growth::Fixed => {
                    p.pos += 1;
                    growth = Growth::Pebble;
                }
                Some(c) => {
                    return Err(p.error(&format!(
                        "expected '(' to start a cache{}, found '{c}'",
                        if caches.is_empty() {
                            ""
                        } else {
                            " or '+' to end the stream"
                        }
                    )))
                }
                None => unreachable!("peeked"),
            }
            p.blanks();
        }
        if caches.is_empty() {
            return Err(format!(
                "'{text}': no cache; write one or more (SAMPLING,REPLACEMENT,CAPACITY) groups, e.g. (c1,LRU,3)(8,LLNR,4)"
            ));
        }
        Ok(StreamSpec { caches, growth })
    }

    /// Whether the search is sure to end with this stream, and why.
    pub fn termination(&self) -> Termination {
        if let Some(index) = self
            .caches
            .iter()
            .position(|c| matches!(c.sampling, Sampling::Increasing(_)))
        {
            return Termination::IncreasingPeriod { index };
        }
        if let Some(index) = self
            .caches
            .iter()
            .position(|c| c.capacity == Capacity::Unbounded)
        {
            return Termination::UnboundedCache { index };
        }
        if self.growth == Growth::Pebble {
            return Termination::GrowingStream;
        }
        let held: u64 = self
            .caches
            .iter()
            .map(|c| c.capacity.bound().unwrap_or(0))
            .sum();
        Termination::NotGuaranteed(format!(
            "every cache of {self} samples with a constant period and the stream is bounded (at most {held} snapshot{}), so a cycle of the state space longer than the levels these snapshots span is never recognised and BFS goes round it forever; add a cache whose period increases, e.g. (8,LLNR,4), or end the stream with '+' (Pebble), or pass --allow-nontermination",
            if held == 1 { "" } else { "s" }
        ))
    }
}

impl fmt::Display for StreamSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.caches {
            write!(f, "{c}")?;
        }
        if self.growth == Growth::Pebble {
            write!(f, "+")?;
        }
        Ok(())
    }
}

impl fmt::Display for CacheSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sampling {
            Sampling::Constant(n) => write!(f, "(c{n},")?,
            Sampling::Increasing(n) => write!(f, "({n},")?,
        }
        write!(f, "{},", self.replacement.as_str())?;
        match self.capacity {
            Capacity::Bounded(n) => write!(f, "{n})"),
            Capacity::Unbounded => write!(f, "inf)"),
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|&(_, c)| c)
    }

    fn blanks(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, what: &str) -> String {
        format!("'{}': column {}: {what}", self.text, self.pos + 1)
    }

    fn expect(&mut self, c: char, context: &str) -> Result<(), String> {
        self.blanks();
        match self.peek() {
            Some(x) if x == c => {
                self.pos += 1;
                Ok(())
            }
            Some(x) => Err(self.error(&format!("expected '{c}' {context}, found '{x}'"))),
            None => Err(self.error(&format!("expected '{c}' {context}, found the end"))),
        }
    }

    /// The next run of letters, digits and `∞`.
    fn word(&mut self) -> (usize, String) {
        self.blanks();
        let start = self.pos;
        let mut w = String::new();
        while let Some(c) = self.peek().filter(|c| c.is_alphanumeric() || *c == '∞') {
            w.push(c);
            self.pos += 1;
        }
        (start, w)
    }

    fn error_at(&self, at: usize, what: &str) -> String {
        format!("'{}': column {}: {what}", self.text, at + 1)
    }

    fn number(&self, at: usize, digits: &str, what: &str) -> Result<u32, String> {
        match digits.parse::<u32>() {
            Ok(0) => Err(self.error_at(at, &format!("{what} must be at least 1"))),
            Ok(n) => Ok(n),
            Err(_) => Err(self.error_at(
                at,
                &format!(
                    "{what}: expected a number from 1 to {}, found '{digits}'",
                    u32::MAX
                ),
            )),
        }
    }

    fn cache(&mut self) -> Result<CacheSpec, String> {
        self.expect('(', "to start a cache")?;
        let (at, w) = self.word();
        let sampling = match w.strip_prefix(['c', 'C']) {
            Some(n) => Sampling::Constant(self.number(at, n, "a constant sampling period cN")?),
            None if w.is_empty() => return Err(self.error_at(
                at,
                "expected a sampling function: cN (constant period N) or N (period growing by N)",
            )),
            None => Sampling::Increasing(self.number(at, &w, "an increasing sampling period N")?),
        };
        self.expect(',', "after the sampling function")?;
        let (at, w) = self.word();
        let replacement = match w.to_ascii_uppercase().as_str() {
            "LRU" => Replacement::Lru,
            "MRU" => Replacement::Mru,
            "LFU" => Replacement::Lfu,
            "MFU" => Replacement::Mfu,
            "RND" => Replacement::Rnd,
            "LLNR" => Replacement::Llnr,
            _ => {
                return Err(self.error_at(
                    at,
                    &format!("'{w}' is not a replacement strategy (LRU, MRU, LFU, MFU, RND, LLNR)"),
                ))
            }
        };
        self.expect(',', "after the replacement strategy")?;
        let (at, w) = self.word();
        let capacity = match w.to_ascii_lowercase().as_str() {
            "inf" | "∞" => Capacity::Unbounded,
            "" => return Err(self.error_at(
                at,
                "expected a capacity: a number of snapshots (of states with --store cache) or inf",
            )),
            n => Capacity::Bounded(self.number(
                at,
                n,
                "a capacity (a number of snapshots; of states with --store cache)",
            )?),
        };
        self.expect(')', "to end the cache")?;
        Ok(CacheSpec {
            sampling,
            replacement,
            capacity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_papers_example_and_prints_it_back() {
        let s = StreamSpec::parse("(c2,LLNR,5)(2,LFU,10)").unwrap();
        assert_eq!(
            s.caches,
            vec![
                CacheSpec {
                    sampling: Sampling::Constant(2),
                    replacement: Replacement::Llnr,
                    capacity: Capacity::Bounded(5)
                },
                CacheSpec {
                    sampling: Sampling::Increasing(2),
                    replacement: Replacement::Lfu,
                    capacity: Capacity::Bounded(10)
                }
            ]
        );
        assert_eq!(s.growth, Growth::Fixed);
        assert_eq!(s.to_string(), "(c2,LLNR,5)(2,LFU,10)");
        let t = StreamSpec::parse(" ( C3 , lru , inf ) (1,mfu,2) + ").unwrap();
        assert_eq!(t.to_string(), "(c3,LRU,inf)(1,MFU,2)+");
        assert_eq!(
            StreamSpec::parse("(c1,RND,∞)").unwrap().to_string(),
            "(c1,RND,inf)"
        );
        for p in Preset::ALL {
            assert_eq!(p.stream().to_string(), p.notation());
        }
    }

    #[test]
    fn errors_name_the_column() {
        for (text, col, what) in [
            ("", 0, "no cache"),
            ("(c2,LLNR,5", 11, "expected ')'"),
            ("(c0,LRU,1)", 2, "at least 1"),
            ("(c2,XYZ,1)", 5, "not a replacement strategy"),
            ("(2,LRU,x)", 8, "a capacity"),
            ("(,LRU,1)", 2, "sampling function"),
            ("(1,LRU,1)x", 10, "expected '('"),
            ("+(1,LRU,1)", 1, "expected '('"),
            ("(1,LRU,1)+(1,LRU,1)", 11, "must end the stream"),
            ("(1,LRU,99999999999)", 8, "a number from 1"),
        ] {
            let e = StreamSpec::parse(text).unwrap_err();
            assert!(e.contains(what), "{text}: {e}");
            if col > 0 {
                assert!(e.contains(&format!("column {col}:")), "{text}: {e}");
            }
        }
    }

    #[test]
    fn termination_needs_an_increasing_period_or_an_unbounded_stream() {
        let t = |s: &str| StreamSpec::parse(s).unwrap().termination();
        assert!(matches!(
            t("(c1,LRU,3)(c5,LLNR,4)"),
            Termination::NotGuaranteed(why) if why.contains("constant period") && why.contains("at most 7 snapshots")
        ));
        assert_eq!(
            t("(c1,LRU,3)(8,LLNR,4)"),
            Termination::IncreasingPeriod { index: 1 }
        );
        assert_eq!(
            t("(c1,LRU,3)(c2,LLNR,inf)"),
            Termination::UnboundedCache { index: 1 }
        );
        assert_eq!(t("(c1,LRU,3)+"), Termination::GrowingStream);
        for p in Preset::ALL {
            assert!(!matches!(
                p.stream().termination(),
                Termination::NotGuaranteed(_)
            ));
        }
    }
}
