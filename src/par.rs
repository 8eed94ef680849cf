//! Work split over threads: parallel BFS's chunks and indexing, the stores' batch work
//! (resolving a delayed batch), the sealing of segment blocks. Every thread owns one element
//! of a slice (its buffers and readers, kept between calls so that nothing is allocated per
//! step) and claims pieces of the work, or takes a contiguous share of it.
//!
//! Every parallel step of a run goes through [`run`], which hands the step to the
//! process's persistent worker threads: a parallel BFS takes thousands of short steps (a
//! chunk of parents, then its new states' indexing), and starting threads for each cost
//! 50–100 µs of latency per step on the critical path, while the other core sat idle.

use std::any::Any;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// A step's work as the workers see it: the caller's `&dyn Fn(usize) + Sync` with its
/// lifetime erased (see the safety argument in [`run`]).
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`, so calling it from another thread is sound; the pointer
// itself is only dereferenced while `run` keeps the referent alive.
unsafe impl Send for JobRef {}

/// The current step: its number, its work, and how many threads take part.
struct Step {
    epoch: u64,
    job: Option<JobRef>,
    threads: usize,
}

/// The process's worker threads. Worker `w` runs `job(w + 1)` of every step that has more
/// than `w + 1` threads; the caller of [`run`] runs `job(0)`.
struct Pool {
    /// Held for the whole of a step: one step at a time uses the workers (a concurrent or
    /// nested step starts scoped threads instead).
    busy: Mutex<()>,
    /// Workers started so far (they run until the process ends).
    workers: Mutex<usize>,
    step: Mutex<Step>,
    /// The last step's number, read by spinning workers without the lock.
    epoch: AtomicU64,
    wake: Condvar,
    /// Workers of the current step that have not finished it.
    pending: AtomicUsize,
    /// The first panic of a worker in the current step, passed on by `run`.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// How long an idle worker keeps looking for the next step before it sleeps: longer than
/// the serial work between two steps of a parallel BFS (the numbering of a chunk's last
/// part, the level's bookkeeping), short enough that an idle pool costs nothing.
const WORKER_SPIN: Duration = Duration::from_micros(200);

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        busy: Mutex::new(()),
        workers: Mutex::new(0),
        step: Mutex::new(Step {
            epoch: 0,
            job: None,
            threads: 0,
        }),
        epoch: AtomicU64::new(0),
        wake: Condvar::new(),
        pending: AtomicUsize::new(0),
        panic: Mutex::new(None),
    })
}

impl Pool {
    /// Worker `w`'s loop: waits for each step after the last it saw and takes part if the
    /// step has more than `w + 1` threads.
    fn work(&self, w: usize) {
        let mut seen = 0;
        loop {
            let since = Instant::now();
            let mut spins = 0u32;
            while self.epoch.load(Ordering::Acquire) == seen {
                if spins < 64 {
                    std::hint::spin_loop();
                    spins += 1;
                } else if since.elapsed() < WORKER_SPIN {
                    // More threads than cores: let the others run meanwhile.
                    std::thread::yield_now();
                } else {
                    let mut step = self.step.lock().unwrap_or_else(PoisonError::into_inner);
                    while step.epoch == seen {
                        step = self.wake.wait(step).unwrap_or_else(PoisonError::into_inner);
                    }
                    break;
                }
            }
            let (epoch, job, threads) = {
                let step = self.step.lock().unwrap_or_else(PoisonError::into_inner);
                (step.epoch, step.job, step.threads)
            };
            // A worker that slept through steps it had no part in sees only the latest;
            // every step it takes part in waits for it, so it cannot miss one of those.
            seen = epoch;
            let Some(job) = job.filter(|_| w + 1 < threads) else {
                continue;
            };
            // SAFETY: `run` published this job for this step and waits until every worker
            // taking part has decremented `pending` (below) before it returns or unwinds,
            // so the referent outlives this call.
            let f = unsafe { &*job.0 };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(w + 1))) {
                let mut slot = self.panic.lock().unwrap_or_else(PoisonError::into_inner);
                slot.get_or_insert(p);
            }
            self.pending.fetch_sub(1, Ordering::Release);
        }
    }

    /// Waits until every worker of the current step has finished it.
    fn wait_workers(&self) {
        let mut spins = 0u32;
        while self.pending.load(Ordering::Acquire) != 0 {
            if spins < 100 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Waits for the workers of a step even when the caller's own share unwinds: the job they
/// run borrows from the caller's frame.
struct StepGuard<'a>(&'a Pool);

impl Drop for StepGuard<'_> {
    fn drop(&mut self) {
        self.0.wait_workers();
        // No worker may find the job after this step (one started later reads the last step).
        self.0
            .step
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .job = None;
    }
}

/// Calls `job(t)` for every `t` of `0..threads`, each on its own thread (`job(0)` on the
/// calling one), and returns when all have returned; a panic of any of them is passed on.
pub fn run(threads: usize, job: &(dyn Fn(usize) + Sync)) {
    with_workers(threads, job, || job(0))
}

/// Calls `worker(t)` for every `t` of `1..threads` on other threads while the calling
/// thread runs `main` (which need not be `Sync`: it may hold the caller's `&mut` state),
/// and returns `main`'s result when all have returned; a panic of any of them is passed on.
/// The other threads are the process's persistent workers, started the first time they
/// are wanted; while another step holds them (a concurrent run in the same process, or a
/// step started from inside a step) this step starts scoped threads instead.
pub fn with_workers<R>(
    threads: usize,
    worker: &(dyn Fn(usize) + Sync),
    main: impl FnOnce() -> R,
) -> R {
    if threads <= 1 {
        return main();
    }
    let pool = pool();
    let _busy = match pool.busy.try_lock() {
        Ok(b) => b,
        // A step that panicked released it: the workers are idle again.
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            return std::thread::scope(|s| {
                // A share whose thread cannot be started runs here after `main`.
                let late: Vec<usize> = (1..threads)
                    .filter(|&t| {
                        std::thread::Builder::new()
                            .spawn_scoped(s, move || worker(t))
                            .is_err()
                    })
                    .collect();
                let r = main();
                late.into_iter().for_each(worker);
                r
            });
        }
    };
    let workers = {
        let mut started = pool.workers.lock().unwrap_or_else(PoisonError::into_inner);
        while *started < threads - 1 {
            let w = *started;
            let spawned = std::thread::Builder::new()
                .name(format!("spillway-{}", w + 1))
                .spawn(move || pool.work(w));
            if spawned.is_err() {
                // Out of threads (a process limit): the shares without one run here.
                break;
            }
            *started += 1;
        }
        (*started).min(threads - 1)
    };
    // SAFETY (of the lifetime erasure): the workers dereference the job only between
    // seeing this step and decrementing `pending`; the guard below waits for `pending` to
    // reach zero before this function returns or unwinds, so `worker` outlives every use.
    let erased: &(dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(worker) };
    {
        let mut step = pool.step.lock().unwrap_or_else(PoisonError::into_inner);
        pool.pending.store(workers, Ordering::Relaxed);
        step.epoch += 1;
        step.job = Some(JobRef(erased));
        step.threads = workers + 1;
        pool.epoch.store(step.epoch, Ordering::Release);
    }
    pool.wake.notify_all();
    let guard = StepGuard(pool);
    let r = main();
    (workers + 1..threads).for_each(worker);
    drop(guard);
    if let Some(p) = pool
        .panic
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        std::panic::resume_unwind(p);
    }
    r
}

/// Runs `f(t, &mut states[t])` on one thread per element of `states` (as [`run`]).
pub fn each<S: Send>(states: &mut [S], f: impl Fn(usize, &mut S) + Sync) {
    if states.is_empty() {
        return;
    }
    let cells: Vec<Mutex<&mut S>> = states.iter_mut().map(Mutex::new).collect();
    run(cells.len(), &|t| {
        let mut s = cells[t].lock().unwrap_or_else(PoisonError::into_inner);
        f(t, &mut s)
    });
}

/// Calls `f` on every element of `items` on `threads` threads (the calling one included),
/// each thread claiming the next unclaimed element: a thread slowed by page faults or by
/// waking late takes fewer, so the threads finish together (equal static shares left the
/// first to finish waiting for the other at every step).
pub fn claim<T: Send>(threads: usize, items: &mut [T], f: impl Fn(&mut T) + Sync) {
    let cells: Vec<Mutex<&mut T>> = items.iter_mut().map(Mutex::new).collect();
    let next = AtomicUsize::new(0);
    run(threads.min(cells.len()).max(1), &|_| loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(cell) = cells.get(k) else {
            return;
        };
        f(&mut cell.lock().unwrap_or_else(PoisonError::into_inner));
    });
}

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
    let results: Vec<Mutex<Result<(), E>>> = (0..threads).map(|_| Mutex::new(Ok(()))).collect();
    each(&mut states[..threads], |t, s| {
        let r = work(s);
        *results[t].lock().unwrap_or_else(PoisonError::into_inner) = r;
    });
    for r in results {
        r.into_inner().unwrap_or_else(PoisonError::into_inner)?;
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
    let mut parts: Vec<&mut [T]> = out.chunks_mut(share).collect();
    each(&mut parts, |k, part| work(k * share, part));
}

#[cfg(test)]
mod tests {
    use super::{
        claim, fill, pieces, pieces_while, run, threads_within, with_workers, THREAD_BYTES,
    };
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
    fn steps_run_every_share_once_in_a_row_and_nested() {
        // Many short steps (as a parallel BFS takes), with varying thread counts.
        for step in 0..2000usize {
            let threads = 1 + step % 4;
            let hits: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
            run(threads, &|t| {
                hits[t].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "step {step}"
            );
        }
        // A step inside a step gets threads of its own.
        let total = AtomicUsize::new(0);
        run(2, &|_| {
            run(3, &|_| {
                total.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 6);
        // The caller's share may borrow what is not `Sync`.
        let mut log = std::cell::RefCell::new(Vec::new());
        let r = with_workers(2, &|_| (), || {
            log.borrow_mut().push(1);
            7
        });
        assert_eq!((r, log.get_mut().as_slice()), (7, &[1][..]));
    }

    #[test]
    fn claim_calls_every_item_once() {
        for (threads, n) in [(1, 5), (2, 1000), (4, 3), (3, 0)] {
            let mut items: Vec<(usize, usize)> = (0..n).map(|i| (i, 0)).collect();
            claim(threads, &mut items, |(_, hits)| *hits += 1);
            assert!(items.iter().all(|&(_, h)| h == 1), "{threads}/{n}");
        }
    }

    #[test]
    fn a_panicking_share_is_passed_on_and_the_pool_goes_on() {
        let got = std::panic::catch_unwind(|| {
            run(2, &|t| {
                if t == 1 {
                    panic!("share {t}");
                }
            })
        });
        assert!(got.is_err());
        let got = std::panic::catch_unwind(|| run(2, &|t| assert_ne!(t, 0, "caller")));
        assert!(got.is_err());
        let n = AtomicUsize::new(0);
        run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
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
