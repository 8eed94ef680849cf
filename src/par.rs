//! Work split over threads, for the stores' batch work (resolving a delayed batch): every
//! thread owns one element of a slice (its buffers and readers, kept between calls so that
//! nothing is allocated per batch) and a contiguous share of `0..n`.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// RAM a thread holds beside its buffers: its stack as used, its allocator arena's slack, its
/// copy of the model's scratch. An estimate, on the high side (measured: +1.3 MiB peak RSS
/// for a second thread on toggles-2^21 under 20M).
pub const THREAD_BYTES: u64 = 1 << 20;

/// How many of `threads` threads fit when each holds `per_thread` bytes of buffers (beside
/// [`THREAD_BYTES`] for each thread but the calling one) and all may take `room` together;
/// at least one.
pub fn threads_within(threads: usize, per_thread: u64, room: Option<u64>) -> usize {
    let need = |t: usize| t as u64 * per_thread + (t as u64 - 1) * THREAD_BYTES;
    let mut t = threads.max(1);
    if let Some(room) = room {
        while t > 1 && need(t) > room {
            t -= 1;
        }
    }
    t
}

/// Calls `f(&mut states[t], piece)` for pieces of `piece` consecutive items of `0..n`
/// (the last one shorter) until every piece is done or a call fails, on one thread per
/// element of `states` (the calling thread included; fewer when there are fewer pieces).
/// Threads claim the next piece from a shared counter, so a thread whose pieces are slow
/// (blocks to read and decompress) does fewer of them: work is balanced by time, not by
/// count. Which thread does which piece depends on the timing; a caller that needs an
/// order sorts what the threads found. Returns the first error.
pub fn pieces<S: Send, E: Send>(
    states: &mut [S],
    n: usize,
    piece: usize,
    f: impl Fn(&mut S, Range<usize>) -> Result<(), E> + Sync,
) -> Result<(), E> {
    pieces_while(states, n, piece, || true, f).map(|_| ())
}

/// [`pieces`] that claims no further piece once `more()` is false: the pieces done are
/// then `0..end` (returned; `n` when every piece was done), since a piece is claimed only
/// after every piece before it and each claimed piece is finished. Up to one piece per
/// thread may start after `more()` turns false.
pub fn pieces_while<S: Send, E: Send>(
    states: &mut [S],
    n: usize,
    piece: usize,
    more: impl Fn() -> bool + Sync,
    f: impl Fn(&mut S, Range<usize>) -> Result<(), E> + Sync,
) -> Result<usize, E> {
    let piece = piece.max(1);
    let threads = states.len().min(n.div_ceil(piece)).max(1);
    let next = AtomicUsize::new(0);
    let work = |s: &mut S| -> Result<(), E> {
        while more() {
            let start = next.fetch_add(piece, Ordering::Relaxed);
            if start >= n {
                return Ok(());
            }
            f(s, start..(start + piece).min(n))?;
        }
        Ok(())
    };
    let (first, rest) = states.split_at_mut(1);
    if threads == 1 {
        work(&mut first[0])?;
    } else {
        let work = &work;
        std::thread::scope(|scope| {
            let handles: Vec<_> = rest[..threads - 1]
                .iter_mut()
                .map(|s| scope.spawn(move || work(s)))
                .collect();
            let mut r = work(&mut first[0]);
            for h in handles {
                let got = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                r = r.and(got);
            }
            r
        })?;
    }
    Ok(next.load(Ordering::Relaxed).min(n))
}

/// Sets `out[i] = f(i)` for every `i`, on `threads` threads (the calling one included), each
/// taking one contiguous share: for work that costs the same for every item, such as hashing
/// a batch of equal-width states.
pub fn fill<T: Send>(out: &mut [T], threads: usize, f: impl Fn(usize) -> T + Sync) {
    let share = out.len().div_ceil(threads.max(1)).max(1);
    let work = |start: usize, part: &mut [T]| {
        for (k, x) in part.iter_mut().enumerate() {
            *x = f(start + k);
        }
    };
    let mut parts = out.chunks_mut(share).enumerate();
    let Some((_, first)) = parts.next() else {
        return;
    };
    let work = &work;
    std::thread::scope(|scope| {
        for (k, part) in parts {
            scope.spawn(move || work(k * share, part));
        }
        work(0, first);
    });
}

#[cfg(test)]
mod tests {
    use super::{fill, pieces, pieces_while, threads_within, THREAD_BYTES};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn pieces_cover_the_range_once() {
        for (threads, n, piece) in [(1, 10, 3), (3, 10, 1), (4, 3, 8), (4, 1000, 7), (2, 0, 1)] {
            let mut states = vec![Vec::new(); threads];
            pieces(&mut states, n, piece, |s: &mut Vec<usize>, r| {
                assert!(r.len() <= piece && !r.is_empty());
                s.extend(r);
                Ok::<_, ()>(())
            })
            .unwrap();
            let mut all: Vec<usize> = states.concat();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..n).collect::<Vec<_>>(),
                "{threads} threads, {n} items"
            );
        }
    }

    #[test]
    fn fill_sets_every_item() {
        for (threads, n) in [(1, 10), (2, 11), (4, 3), (3, 0), (8, 1000)] {
            let mut out = vec![usize::MAX; n];
            fill(&mut out, threads, |i| i * 3);
            assert_eq!(
                out,
                (0..n).map(|i| i * 3).collect::<Vec<_>>(),
                "{threads}/{n}"
            );
        }
    }

    #[test]
    fn pieces_while_do_a_prefix() {
        for threads in [1, 2, 4] {
            let total = AtomicUsize::new(0);
            let mut states = vec![Vec::new(); threads];
            let end = pieces_while(
                &mut states,
                1000,
                7,
                || total.load(Ordering::Relaxed) < 100,
                |s: &mut Vec<usize>, r| {
                    total.fetch_add(r.len(), Ordering::Relaxed);
                    s.extend(r);
                    Ok::<_, ()>(())
                },
            )
            .unwrap();
            let mut all: Vec<usize> = states.concat();
            all.sort_unstable();
            assert_eq!(all, (0..end).collect::<Vec<_>>(), "{threads} threads");
            // At most one piece per thread past the limit.
            assert!((100..100 + 7 * (threads + 1)).contains(&end), "{end}");
        }
    }

    #[test]
    fn pieces_stop_at_an_error() {
        let mut states = vec![0usize; 3];
        let r = pieces(&mut states, 1000, 10, |done, r| {
            if r.contains(&500) {
                return Err(500);
            }
            *done += r.len();
            Ok(())
        });
        assert_eq!(r, Err(500));
        assert!(states.iter().sum::<usize>() < 1000);
    }

    #[test]
    fn threads_fit_their_room() {
        assert_eq!(threads_within(4, 1 << 20, None), 4);
        assert_eq!(threads_within(4, 1 << 20, Some(0)), 1);
        // Two threads: 2 MiB of buffers and one thread's 1 MiB.
        assert_eq!(
            threads_within(4, 1 << 20, Some(2 * (1 << 20) + THREAD_BYTES)),
            2
        );
    }
}
