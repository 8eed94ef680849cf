//! A whole LTS in compact arrays: compressed sparse rows (CSR) by source state.
//!
//! `start[s]..start[s + 1]` indexes the outgoing transitions of state `s` in `label` and `dst`,
//! so the LTS costs 8 bytes per transition and 4 per state. State, label and transition
//! numbers are `u32`: an LTS with 2^32 - 1 or more states or transitions would need more than
//! 32 GiB in this form anyway, and is refused with a [`PostError::Limit`].

use crate::error::{LtsError, PostError};
use crate::files::PartialOutput;
use crate::lts::{LtsFormat, LtsSink, LtsSummary, SinkOptions};
use crate::model::LabelId;
use crate::post::input::Input;
use std::ops::Range;
use std::path::Path;

/// "No state / no block / no record" marker in `u32` arrays.
pub const NONE: u32 = u32::MAX;
/// The largest state or transition count the `u32` arrays can index.
pub const MAX_COUNT: u64 = u32::MAX as u64 - 1;

/// An LTS held in CSR arrays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lts {
    pub states: u32,
    pub initial: u32,
    pub labels: Vec<String>,
    /// `states + 1` offsets into `label` / `dst`.
    pub start: Vec<u32>,
    pub label: Vec<u32>,
    pub dst: Vec<u32>,
}

/// Allocates a vector of exactly `len` elements or reports which structure did not fit.
pub fn alloc_vec<T: Clone>(len: usize, fill: T, what: &str) -> Result<Vec<T>, PostError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        PostError::Limit(format!(
            "cannot allocate {len} entries ({} MiB) for {what}",
            (len as u64 * std::mem::size_of::<T>() as u64) >> 20
        ))
    })?;
    v.resize(len, fill);
    Ok(v)
}

fn reserve(v: &mut Vec<u32>, len: u64, what: &str) -> Result<(), PostError> {
    v.try_reserve_exact(len as usize).map_err(|_| {
        PostError::Limit(format!(
            "cannot allocate {} MiB for the {what} of {len} transitions",
            (len * 4) >> 20
        ))
    })
}

/// Sorts parallel arrays by `key` in place, not stably, and returns the bucket offsets
/// (`buckets + 1` entries): the step that turns an edge list into CSR without doubling its
/// memory. Keys must be below `buckets`.
///
/// An in-place most-significant-digit radix sort (American flag sort) with at most
/// [`RADIX`] buckets per pass: with few buckets the write cursors and the cache lines they
/// touch stay in cache, which makes it several times faster than one pass over millions of
/// buckets, whose every swap misses the cache once per array. O(len · passes) time with
/// passes = ⌈log_RADIX(buckets)⌉; extra memory is the offsets array.
pub fn bucket_sort(
    key: &mut [u32],
    others: &mut [&mut [u32]],
    buckets: usize,
) -> Result<Vec<u32>, PostError> {
    let mut start = alloc_vec(buckets + 1, 0u32, "bucket offsets")?;
    for &k in key.iter() {
        start[k as usize + 1] += 1;
    }
    for b in 0..buckets {
        start[b + 1] += start[b];
    }
    if !key.windows(2).all(|w| w[0] <= w[1]) {
        radix_pass(key, others, 0, key.len(), 0, buckets as u64);
    }
    Ok(start)
}

/// Bucket count of one radix pass.
pub const RADIX: usize = 2048;

/// Sorts `key[lo..hi]` (and the same range of `others`), whose keys lie in `[klo, khi)`.
fn radix_pass(
    key: &mut [u32],
    others: &mut [&mut [u32]],
    lo: usize,
    hi: usize,
    klo: u64,
    khi: u64,
) {
    if hi - lo < 2 || khi - klo < 2 {
        return;
    }
    let mut shift = 0u32;
    while ((khi - klo - 1) >> shift) >= RADIX as u64 {
        shift += 1;
    }
    let nb = (((khi - klo - 1) >> shift) + 1) as usize;
    let bucket = |k: u32| ((k as u64 - klo) >> shift) as usize;
    let mut count = vec![0usize; nb + 1];
    for &k in &key[lo..hi] {
        count[bucket(k) + 1] += 1;
    }
    for b in 0..nb {
        count[b + 1] += count[b];
    }
    let mut next: Vec<usize> = count[..nb].iter().map(|c| c + lo).collect();
    for b in 0..nb {
        let end = count[b + 1] + lo;
        while next[b] < end {
            let i = next[b];
            let kb = bucket(key[i]);
            if kb == b {
                next[b] += 1;
                continue;
            }
            // next[kb] is the first unplaced slot of bucket kb: swap the element there; the one
            // swapped into i is examined next.
            let j = next[kb];
            next[kb] += 1;
            key.swap(i, j);
            for o in others.iter_mut() {
                o.swap(i, j);
            }
        }
    }
    if shift > 0 {
        for b in 0..nb {
            let sub_lo = klo + ((b as u64) << shift);
            let sub_hi = (klo + ((b as u64 + 1) << shift)).min(khi);
            radix_pass(
                key,
                others,
                lo + count[b],
                lo + count[b + 1],
                sub_lo,
                sub_hi,
            );
        }
    }
}

impl Lts {
    pub fn transitions(&self) -> usize {
        self.dst.len()
    }

    /// Indices of the outgoing transitions of `s`.
    pub fn out_range(&self, s: u32) -> Range<usize> {
        self.start[s as usize] as usize..self.start[s as usize + 1] as usize
    }

    /// Outgoing transitions of `s` as `(label, dst)`.
    pub fn out(&self, s: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.out_range(s).map(move |i| (self.label[i], self.dst[i]))
    }

    /// Builds an LTS from an edge list (any order).
    pub fn from_edges(
        states: u32,
        initial: u32,
        labels: Vec<String>,
        edges: &[(u32, u32, u32)],
    ) -> Result<Lts, PostError> {
        let mut src: Vec<u32> = edges.iter().map(|e| e.0).collect();
        let mut label: Vec<u32> = edges.iter().map(|e| e.1).collect();
        let mut dst: Vec<u32> = edges.iter().map(|e| e.2).collect();
        if let Some(bad) = edges
            .iter()
            .find(|e| e.0 >= states || e.2 >= states || e.1 as usize >= labels.len())
        {
            return Err(PostError::Usage(format!(
                "edge {bad:?} is out of range for {states} states and {} labels",
                labels.len()
            )));
        }
        if initial >= states {
            return Err(PostError::Usage(format!(
                "initial state {initial} is not below the state count {states}"
            )));
        }
        let start = bucket_sort(&mut src, &mut [&mut label, &mut dst], states as usize)?;
        Ok(Lts {
            states,
            initial,
            labels,
            start,
            label,
            dst,
        })
    }

    /// Reads a whole `.slts`, `.aut` or `.fsm` file into CSR form (every check of the reader runs).
    pub fn load(path: &Path) -> Result<Lts, PostError> {
        let mut input = Input::open(path)?;
        let h = input.header()?;
        // The transitions the file can hold: a text file that announces more than the
        // arrays index but cannot hold them is cut short (found when read, exit 5), and
        // the reader refuses more edges than announced, so no more than these are pushed.
        let expected = backed_transitions(&h);
        for (what, count) in [("states", h.states), ("transitions", expected)] {
            if count > MAX_COUNT {
                return Err(PostError::Limit(format!(
                    "{}: {count} {what} exceed the {MAX_COUNT} that spillway's in-memory LTS can index",
                    path.display()
                )));
            }
        }
        let (mut src, mut label, mut dst) = (Vec::new(), Vec::new(), Vec::new());
        reserve(&mut src, expected, "source states")?;
        reserve(&mut label, expected, "labels")?;
        reserve(&mut dst, expected, "target states")?;
        input.for_each_edge(|s, l, d, _| -> Result<(), LtsError> {
            // Bounds were checked by the reader against the header's state count.
            src.push(s as u32);
            label.push(l);
            dst.push(d as u32);
            Ok(())
        })?;
        let labels = input.labels().to_vec();
        let states = h.states as u32;
        let start = bucket_sort(&mut src, &mut [&mut label, &mut dst], states as usize)?;
        drop(src);
        Ok(Lts {
            states,
            initial: h.initial as u32,
            labels,
            start,
            label,
            dst,
        })
    }

    /// Number of states without outgoing transitions.
    pub fn deadlocks(&self) -> u64 {
        (0..self.states)
            .filter(|&s| self.start[s as usize] == self.start[s as usize + 1])
            .count() as u64
    }

    /// Whether the sequence of labels `trace` can be performed from the initial state.
    /// Names not in the label table are never possible.
    pub fn accepts(&self, trace: &[String]) -> bool {
        let mut current = vec![self.initial];
        let mut seen = vec![false; self.states as usize];
        for name in trace {
            let Some(l) = self.labels.iter().position(|x| x == name) else {
                return false;
            };
            let mut next = Vec::new();
            for &s in &current {
                for (lab, d) in self.out(s) {
                    if lab as usize == l && !seen[d as usize] {
                        seen[d as usize] = true;
                        next.push(d);
                    }
                }
            }
            for &d in &next {
                seen[d as usize] = false;
            }
            if next.is_empty() {
                return false;
            }
            current = next;
        }
        true
    }

    /// Writes the LTS to `path` in the format given by its extension (see [`write_file`]);
    /// `force` writes `.dot` above its size limit.
    pub fn write(&self, path: &Path, force: bool) -> Result<LtsSummary, PostError> {
        let options = SinkOptions {
            force,
            states: crate::lts::fsm::state_lines(self.states as u64, self.transitions() as u64),
        };
        write_file(path, &options, |sink| {
            for (i, l) in self.labels.iter().enumerate() {
                sink.define_label(LabelId(i as u32), l)?;
            }
            for s in 0..self.states {
                for (l, d) in self.out(s) {
                    sink.edge(s as u64, LabelId(l), d as u64)?;
                }
            }
            Ok(LtsSummary {
                states: self.states as u64,
                transitions: self.transitions() as u64,
                initial: self.initial as u64,
                deadlocks: self.deadlocks(),
            })
        })
    }
}

/// The transitions `h`'s file can hold, for a reservation or a memory estimate: a text
/// format's count is a claim the file must back, and a transition line takes at least 6
/// bytes, so no more than the file can hold (a cut-short `.aut` whose header announces
/// 4·10^12 transitions is then found truncated when read, not refused as too large). The
/// native count is checked against the footer's checksum: taken as it is.
pub fn backed_transitions(h: &crate::post::input::InputHeader) -> u64 {
    match h.format {
        LtsFormat::Native => h.transitions,
        _ => h.transitions.min(h.file_len / 6 + 1),
    }
}

/// Refuses an `output` that is the `input` file itself, or whose temporary `OUT.partial` is
/// (see [`crate::files::check_output`]); tools that write call it before reading anything.
pub fn check_output(input: &Path, output: &Path) -> Result<(), PostError> {
    let partial = crate::run::partial_path(output);
    crate::files::check_output(input, output, &partial)?;
    crate::files::check_lts_output(output).map_err(|source| LtsError::Io {
        path: output.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// Writes an LTS file atomically: `fill` pushes labels and edges into a sink for `path`'s
/// format and returns the summary; the data goes to `path.partial`, locked against another
/// process writing the same output ([`PartialOutput`]), which is renamed to `path` only after
/// the writer finished, and removed on failure.
pub fn write_file(
    path: &Path,
    options: &SinkOptions,
    fill: impl FnOnce(&mut dyn LtsSink) -> Result<LtsSummary, PostError>,
) -> Result<LtsSummary, PostError> {
    let format = LtsFormat::from_path(path)?;
    // Refused here, when another process holds it, with nothing touched.
    let partial = PartialOutput::lock(path, true)?;
    let result = (|| {
        partial.truncate()?;
        let mut sink = format.create_on(partial.writer()?, path, options)?;
        let summary = fill(sink.as_mut())?;
        sink.finish(&summary)?;
        drop(sink);
        partial.rename()?;
        Ok(summary)
    })();
    if result.is_err() {
        partial.discard();
    }
    result
}

/// Test helper: the LTS of `n` states, initial state 0, with `labels` and the
/// `(src, label, dst)` edges.
#[cfg(test)]
pub(crate) fn test_lts(n: u32, labels: &[&str], edges: &[(u32, u32, u32)]) -> Lts {
    Lts::from_edges(n, 0, labels.iter().map(|s| s.to_string()).collect(), edges).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_sort_with_several_radix_passes() {
        let n = 100_000u32;
        let mut k: Vec<u32> = (0..300_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) % n)
            .collect();
        let mut a: Vec<u32> = k.iter().map(|x| x ^ 0xabcd).collect();
        let start = bucket_sort(&mut k, &mut [&mut a], n as usize).unwrap();
        assert!(k.windows(2).all(|w| w[0] <= w[1]));
        assert!(k.iter().zip(&a).all(|(x, y)| *y == x ^ 0xabcd));
        for b in 0..n as usize {
            assert!(k[start[b] as usize..start[b + 1] as usize]
                .iter()
                .all(|&x| x as usize == b));
        }
    }

    #[test]
    fn bucket_sort_permutes_all_arrays() {
        let mut k = vec![3, 1, 2, 1, 0, 3, 3];
        let mut a = vec![30, 10, 20, 11, 0, 31, 32];
        let start = bucket_sort(&mut k, &mut [&mut a], 4).unwrap();
        assert_eq!(k, vec![0, 1, 1, 2, 3, 3, 3]);
        assert_eq!(start, vec![0, 1, 3, 4, 7]);
        for (x, y) in k.iter().zip(&a) {
            assert_eq!(*y / 10, *x);
        }
    }

    #[test]
    fn csr_and_trace_acceptance() {
        let lts = Lts::from_edges(
            3,
            0,
            vec!["a".into(), "b".into()],
            &[(1, 1, 2), (0, 0, 1), (0, 0, 2)],
        )
        .unwrap();
        let mut out: Vec<_> = lts.out(0).collect();
        out.sort_unstable();
        assert_eq!(out, vec![(0, 1), (0, 2)]);
        assert_eq!(lts.deadlocks(), 1);
        assert!(lts.accepts(&["a".into(), "b".into()]));
        assert!(!lts.accepts(&["b".into()]));
        assert!(!lts.accepts(&["a".into(), "b".into(), "a".into()]));
        assert!(lts.accepts(&[]));
    }
}
