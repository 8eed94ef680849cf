//! Conformance suite of the segment containers: random operation sequences run against an
//! in-memory reference (proptest), with tiny blocks so that sealing, compression, cache
//! eviction, dirty write-back, file rotation and reopening all happen; and corruption
//! detection with the file, offset and expected vs found checksum in the message.

use proptest::prelude::*;
use spillway::error::{Corruption, StorageError};
use spillway::storage::queue::{QueueMark, SegQueue};
use spillway::storage::stack::{SegStack, StackMark};
use spillway::storage::vec::{SegOptions, SegReader, SegVec, VecMark};
use spillway::storage::{Account, Budget, MemoryLimit};
use std::collections::VecDeque;

fn tiny(block_bytes: usize, hot_blocks: usize, cache_blocks: u64) -> SegOptions {
    SegOptions {
        block_bytes,
        hot_blocks,
        cache_bytes: cache_blocks * block_bytes as u64,
        ..SegOptions::default()
    }
}

#[derive(Clone, Debug)]
enum VecOp {
    Push(u8),
    Get(u64),
    Set(u64, u8),
    Reopen,
    /// A checkpoint: flush and remember the mark and the contents.
    Checkpoint,
    /// A kill and a resume: reopen at the last checkpoint's mark, losing what came after.
    Crash,
}

/// The proptest op of the queue and stack suites that stands for `kill -9` and a resume.
const CRASH: usize = usize::MAX - 1;

fn vec_ops() -> impl Strategy<Value = Vec<VecOp>> {
    prop::collection::vec(
        prop_oneof![
            6 => any::<u8>().prop_map(VecOp::Push),
            4 => any::<u64>().prop_map(VecOp::Get),
            3 => (any::<u64>(), any::<u8>()).prop_map(|(i, v)| VecOp::Set(i, v)),
            1 => Just(VecOp::Reopen),
            1 => Just(VecOp::Checkpoint),
            1 => Just(VecOp::Crash),
        ],
        0..400,
    )
}

/// A record of `width` bytes derived from a seed (compressible but distinct).
fn record(width: usize, seed: u8, i: u64) -> Vec<u8> {
    (0..width)
        .map(|k| seed.wrapping_add((i as u8).wrapping_mul(k as u8 + 1)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn vec_matches_reference(
        width in 1usize..24,
        block in 8usize..96,
        hot in 1usize..4,
        cache in 0u64..4,
        seal in 1usize..4,
        adaptive in any::<bool>(),
        ops in vec_ops(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = tiny(block, hot, cache);
        // The state vectors' codec: each block a zstd frame or byte columns.
        if adaptive {
            opts.codec = spillway::storage::segment::Codec::Adaptive;
        }
        // `seal` > 1: half the hot window is compressed at once on that many threads.
        let mut v = SegVec::create(dir.path(), "v", width, &opts, Account::detached("v"), None).unwrap();
        v.set_seal_threads(seal);
        let mut reference: Vec<Vec<u8>> = Vec::new();
        let mut saved: Option<(VecMark, Vec<Vec<u8>>)> = None;
        let mut out = vec![0u8; width];
        for op in ops {
            match op {
                VecOp::Push(seed) => {
                    let r = record(width, seed, reference.len() as u64);
                    prop_assert_eq!(v.push(&r).unwrap(), reference.len() as u64);
                    reference.push(r);
                }
                VecOp::Get(i) if !reference.is_empty() => {
                    let i = i % reference.len() as u64;
                    v.get(i, &mut out).unwrap();
                    prop_assert_eq!(&out, &reference[i as usize]);
                    v.with_sequential(i, |r| out.copy_from_slice(r)).unwrap();
                    prop_assert_eq!(&out, &reference[i as usize]);
                }
                VecOp::Set(i, seed) if !reference.is_empty() => {
                    let i = i % reference.len() as u64;
                    let r = record(width, seed.wrapping_add(1), i * 7);
                    v.set(i, &r).unwrap();
                    reference[i as usize] = r;
                }
                VecOp::Get(i) => prop_assert!(v.get(i, &mut out).is_err()),
                VecOp::Set(..) => {}
                VecOp::Reopen => {
                    let mark = v.flush().unwrap();
                    prop_assert_eq!(mark.records, reference.len() as u64);
                    drop(v);
                    v = SegVec::open(dir.path(), "v", &opts, Some(mark), Account::detached("v"), None).unwrap();
                    v.set_seal_threads(seal);
                }
                VecOp::Checkpoint => saved = Some((v.flush().unwrap(), reference.clone())),
                VecOp::Crash => {
                    drop(v);
                    v = match &saved {
                        Some((mark, r)) => {
                            reference = r.clone();
                            SegVec::open(dir.path(), "v", &opts, Some(*mark), Account::detached("v"), None).unwrap()
                        }
                        None => {
                            reference.clear();
                            SegVec::create(dir.path(), "v", width, &opts, Account::detached("v"), None).unwrap()
                        }
                    };
                    v.set_seal_threads(seal);
                }
            }
            prop_assert_eq!(v.len(), reference.len() as u64);
        }
        let mut seen = 0u64;
        v.scan(|i, r| {
            assert_eq!(r, &reference[i as usize][..], "record {i}");
            seen += 1;
        }).unwrap();
        prop_assert_eq!(seen, reference.len() as u64);
    }

    #[test]
    fn queue_matches_reference(
        block in 16usize..128,
        hot in 1usize..3,
        ops in prop::collection::vec(prop_oneof![5 => (0usize..70).prop_map(Some), 4 => Just(None), 1 => Just(Some(usize::MAX)), 1 => Just(Some(CRASH))], 0..600),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiny(block, hot, 1);
        let mut q = SegQueue::create(dir.path(), "q", &opts, Account::detached("q")).unwrap();
        let mut reference: VecDeque<Vec<u8>> = VecDeque::new();
        let mut saved: Option<(QueueMark, VecDeque<Vec<u8>>)> = None;
        let mut out = Vec::new();
        let mut n = 0u64;
        for op in ops {
            match op {
                Some(usize::MAX) => {
                    // A checkpoint: flush, then (the manifest committed) release old files.
                    let mark = q.flush().unwrap();
                    q.release_retired().unwrap();
                    saved = Some((mark, reference.clone()));
                }
                Some(CRASH) => {
                    // A kill -9 and a resume from the last checkpoint: everything done since
                    // is lost, everything before it must come back.
                    drop(q);
                    q = match &saved {
                        Some((mark, r)) => {
                            reference = r.clone();
                            SegQueue::open(dir.path(), "q", &opts, mark, Account::detached("q")).unwrap()
                        }
                        None => {
                            reference.clear();
                            SegQueue::create(dir.path(), "q", &opts, Account::detached("q")).unwrap()
                        }
                    };
                }
                Some(len) => {
                    let r = record(len, n as u8, n);
                    n += 1;
                    q.push(&r).unwrap();
                    reference.push_back(r);
                }
                None => {
                    let got = q.pop(&mut out).unwrap();
                    match reference.pop_front() {
                        Some(r) => { prop_assert!(got); prop_assert_eq!(&out, &r); }
                        None => prop_assert!(!got),
                    }
                }
            }
            prop_assert_eq!(q.len(), reference.len() as u64);
        }
        while let Some(r) = reference.pop_front() {
            prop_assert!(q.pop(&mut out).unwrap());
            prop_assert_eq!(&out, &r);
        }
        prop_assert!(!q.pop(&mut out).unwrap());
    }

    #[test]
    fn stack_matches_reference(
        block in 16usize..128,
        hot in 1usize..3,
        ops in prop::collection::vec(prop_oneof![5 => (0usize..70).prop_map(Some), 4 => Just(None), 1 => Just(Some(usize::MAX)), 1 => Just(Some(CRASH))], 0..600),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiny(block, hot, 1);
        let mut s = SegStack::create(dir.path(), "s", &opts, Account::detached("s")).unwrap();
        let mut reference: Vec<Vec<u8>> = Vec::new();
        let mut saved: Option<(StackMark, Vec<Vec<u8>>)> = None;
        let mut out = Vec::new();
        let mut n = 0u64;
        for op in ops {
            match op {
                Some(usize::MAX) => {
                    let mark = s.flush().unwrap();
                    saved = Some((mark, reference.clone()));
                }
                Some(CRASH) => {
                    drop(s);
                    s = match &saved {
                        Some((mark, r)) => {
                            reference = r.clone();
                            SegStack::open(dir.path(), "s", &opts, *mark, Account::detached("s")).unwrap()
                        }
                        None => {
                            reference.clear();
                            SegStack::create(dir.path(), "s", &opts, Account::detached("s")).unwrap()
                        }
                    };
                }
                Some(len) => {
                    let r = record(len, n as u8, n);
                    n += 1;
                    s.push(&r).unwrap();
                    reference.push(r);
                }
                None => {
                    let got = s.pop(&mut out).unwrap();
                    match reference.pop() {
                        Some(r) => { prop_assert!(got); prop_assert_eq!(&out, &r); }
                        None => prop_assert!(!got),
                    }
                }
            }
            prop_assert_eq!(s.len(), reference.len() as u64);
        }
        while let Some(r) = reference.pop() {
            prop_assert!(s.pop(&mut out).unwrap());
            prop_assert_eq!(&out, &r);
        }
        prop_assert!(!s.pop(&mut out).unwrap());
    }
}

/// A vector large enough to seal many blocks, flushed; returns (dir, records).
fn sealed_vec() -> (tempfile::TempDir, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny(256, 1, 1);
    let mut v = SegVec::create(dir.path(), "v", 16, &opts, Account::detached("v"), None).unwrap();
    let recs: Vec<Vec<u8>> = (0..1000u64).map(|i| record(16, i as u8, i)).collect();
    for r in &recs {
        v.push(r).unwrap();
    }
    v.flush().unwrap();
    (dir, recs)
}

#[test]
fn vec_reopen_without_mark_reads_whole_file() {
    let (dir, recs) = sealed_vec();
    let opts = tiny(256, 1, 1);
    let v = SegVec::open(dir.path(), "v", &opts, None, Account::detached("v"), None).unwrap();
    assert_eq!(v.len(), 1000);
    let mut out = [0u8; 16];
    for (i, r) in recs.iter().enumerate().rev() {
        v.get(i as u64, &mut out).unwrap();
        assert_eq!(&out[..], &r[..]);
    }
    assert!(v.disk_bytes() > 0);
}

#[test]
fn corrupted_block_names_file_offset_and_checksums() {
    let (dir, _) = sealed_vec();
    let path = dir.path().join("v.seg");
    // Flip a byte inside the payload of the third block: header 64 bytes, then blocks.
    let bytes = std::fs::read(&path).unwrap();
    let mut pos = 64usize;
    for _ in 0..2 {
        let comp = u32::from_le_bytes(bytes[pos + 20..pos + 24].try_into().unwrap()) as usize;
        pos += 32 + comp;
    }
    let payload = pos + 32;
    let mut damaged = bytes.clone();
    damaged[payload + 3] ^= 0x40;
    std::fs::write(&path, &damaged).unwrap();
    let opts = tiny(256, 1, 1);
    let v = SegVec::open(dir.path(), "v", &opts, None, Account::detached("v"), None).unwrap();
    let mut out = [0u8; 16];
    // Block 2 holds records 32..48 (16 records of 16 bytes per 256-byte block).
    let err = v.get(40, &mut out).unwrap_err();
    match &err {
        StorageError::Corrupt(Corruption {
            path: p,
            offset,
            expected,
            found,
        }) => {
            assert_eq!(p, &path);
            assert_eq!(*offset, payload as u64);
            assert!(expected.contains("checksum"), "{expected}");
            assert_ne!(expected, found);
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("v.seg") && msg.contains(&payload.to_string()),
        "{msg}"
    );
    assert_eq!(err.exit_code(), spillway::error::exit::CORRUPT);
    // Undamaged blocks still read.
    v.get(0, &mut out).unwrap();
}

#[test]
fn damaged_header_and_truncated_file_are_reported() {
    let (dir, _) = sealed_vec();
    let path = dir.path().join("v.seg");
    let bytes = std::fs::read(&path).unwrap();
    let opts = tiny(256, 1, 1);
    let mut bad = bytes.clone();
    bad[20] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let e = SegVec::open(dir.path(), "v", &opts, None, Account::detached("v"), None)
        .err()
        .unwrap();
    assert!(
        matches!(e, StorageError::Corrupt(Corruption { offset: 60, .. })),
        "{e}"
    );
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let e = SegVec::open(dir.path(), "v", &opts, None, Account::detached("v"), None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("end of file"), "{e}");
    let mut v2 = bytes.clone();
    v2[8] = 9;
    std::fs::write(&path, &v2).unwrap();
    let e = SegVec::open(dir.path(), "v", &opts, None, Account::detached("v"), None)
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            StorageError::Version {
                found: 9,
                supported: 1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn cache_respects_budget_headroom() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(MemoryLimit::Bytes(
        spillway::storage::budget::UNTRACKED_RESERVE + (1 << 20),
    ));
    let opts = SegOptions {
        block_bytes: 4096,
        hot_blocks: 2,
        cache_bytes: 1 << 30,
        ..SegOptions::default()
    };
    let mut v = SegVec::create(
        dir.path(),
        "v",
        64,
        &opts,
        budget.account("v"),
        Some(budget.clone()),
    )
    .unwrap();
    let mut out = [0u8; 64];
    for i in 0..100_000u64 {
        v.push(&record(64, i as u8, i)).unwrap();
    }
    for i in (0..100_000u64).step_by(97) {
        v.get(i, &mut out).unwrap();
        assert_eq!(&out[..], &record(64, i as u8, i)[..]);
    }
    v.update_account();
    assert!(
        v.ram_bytes() <= 1 << 20,
        "ram {} over the 1 MiB budget",
        v.ram_bytes()
    );
    let (_hits, misses) = v.cache_counts();
    assert!(misses > 0);
}

#[test]
fn unwritable_workdir_is_an_io_error() {
    let cfg = spillway::storage::StorageConfig {
        workdir: Some("/proc/definitely-not-writable".into()),
        ..Default::default()
    };
    let e = spillway::storage::Storage::new(&cfg)
        .err()
        .expect("cannot create there");
    assert_eq!(e.exit_code(), spillway::error::exit::IO);
    assert!(
        e.to_string().contains("/proc/definitely-not-writable"),
        "{e}"
    );
}

/// Sealing half the hot window at once on several threads writes the same segment file,
/// byte for byte, as sealing one block at a time.
#[test]
fn parallel_sealing_writes_the_same_file() {
    let mut files = Vec::new();
    for threads in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiny(256, 8, 2);
        let mut v =
            SegVec::create(dir.path(), "v", 12, &opts, Account::detached("v"), None).unwrap();
        v.set_seal_threads(threads);
        for i in 0..5_000u64 {
            v.push(&record(12, (i % 7) as u8, i)).unwrap();
        }
        v.flush().unwrap();
        let mut got = vec![0u8; 12];
        for i in (0..5_000u64).step_by(37) {
            v.get(i, &mut got).unwrap();
            assert_eq!(
                got,
                record(12, (i % 7) as u8, i),
                "record {i}, {threads} threads"
            );
        }
        files.push(std::fs::read(v.path()).unwrap());
    }
    assert!(files[0].len() > 10_000, "{} bytes", files[0].len());
    assert!(files[1] == files[0] && files[2] == files[0]);
}

/// Threads reading one vector at once through a view (parallel BFS under a budget) get
/// every record right — hot, cached, and sealed but uncached ones, which each thread reads
/// into its own reader — through a cache of two blocks; the cache then adopts the blocks the
/// threads read, and a record changed after that is read back changed.
#[test]
fn threads_share_a_vector_through_a_view() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = SegVec::create(
        dir.path(),
        "v",
        12,
        &tiny(256, 2, 2),
        Account::detached("v"),
        None,
    )
    .unwrap();
    let n = 6_000u64;
    for i in 0..n {
        v.push(&record(12, (i % 7) as u8, i)).unwrap();
    }
    let mut readers: Vec<SegReader> = (0..3).map(|_| SegReader::default()).collect();
    for round in 0..2u64 {
        let view = v.view();
        std::thread::scope(|s| {
            for (k, r) in readers.iter_mut().enumerate() {
                s.spawn(move || {
                    // Each thread strides through the vector in its own order.
                    let mut i = k as u64 * 101;
                    for _ in 0..20_000 {
                        i = (i + 997 + k as u64 * 13) % n;
                        let mut want = record(12, (i % 7) as u8, i);
                        if round == 1 && i == 5 {
                            want = record(12, 99, 5);
                        }
                        let same = view.with(r, i, |got| got == want).unwrap();
                        assert!(same, "record {i}, thread {k}, round {round}");
                    }
                });
            }
        });
        for r in &mut readers {
            v.adopt(r).unwrap();
        }
        // A sealed record changes between the rounds: the readers hold no old copy.
        v.set(5, &record(12, 99, 5)).unwrap();
    }
    let (hits, misses) = v.cache_counts();
    assert!(
        misses > 1_000,
        "the threads missed the cache ({hits} hits, {misses} misses)"
    );
}

/// A vector read at random (a DFS's state vectors) takes small blocks, so that a cache miss
/// decompresses little; at least 64 records a block for wide records, never more than the
/// options' size. Its hot window keeps the bytes the options give it, also when reopened.
#[test]
fn random_vectors_take_small_blocks_and_keep_their_hot_window() {
    let opts = SegOptions {
        hot_blocks: 4,
        ..SegOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let acc = |n: &str| Account::detached(n);
    let plain = SegVec::create(dir.path(), "plain", 16, &opts, acc("plain"), None).unwrap();
    let mut narrow = SegVec::create_random(dir.path(), "n", 16, &opts, acc("n"), None).unwrap();
    let wide = SegVec::create_random(dir.path(), "w", 200, &opts, acc("w"), None).unwrap();
    let widest = SegVec::create_random(dir.path(), "x", 4096, &opts, acc("x"), None).unwrap();
    assert_eq!(plain.block_bytes(), 32 << 10);
    assert_eq!(
        narrow.block_bytes(),
        spillway::storage::vec::RANDOM_BLOCK_BYTES
    );
    assert_eq!(wide.block_bytes(), 64 * 200);
    assert_eq!(
        widest.block_bytes(),
        8 * 4096,
        "capped at the options' block size"
    );
    assert_eq!(narrow.hot_bytes(), plain.hot_bytes());
    let recs: Vec<Vec<u8>> = (0..20_000u64).map(|i| record(16, i as u8, i)).collect();
    for r in &recs {
        narrow.push(r).unwrap();
    }
    let mark = narrow.flush().unwrap();
    drop(narrow);
    let v = SegVec::open(dir.path(), "n", &opts, Some(mark), acc("n"), None).unwrap();
    assert_eq!(v.block_bytes(), spillway::storage::vec::RANDOM_BLOCK_BYTES);
    assert_eq!(v.hot_bytes(), plain.hot_bytes());
    let mut out = [0u8; 16];
    for i in (0..recs.len()).step_by(97) {
        v.get(i as u64, &mut out).unwrap();
        assert_eq!(&out[..], &recs[i][..]);
    }
}

/// The run's storage gives its stores small vector blocks in a DFS only: a BFS reads the
/// blocks its sorted batches need once each, and larger blocks compress better.
#[test]
fn storage_makes_random_vectors_for_random_lookups_only() {
    use spillway::storage::{Storage, StorageConfig};
    let cfg = StorageConfig {
        memory: MemoryLimit::Bytes(64 << 20),
        ..StorageConfig::default()
    };
    let bfs = Storage::new(&cfg).unwrap();
    let dfs = Storage::new(&cfg).unwrap().with_random_lookups(true);
    assert_eq!(bfs.vec("v", 16).unwrap().block_bytes(), 32 << 10);
    assert_eq!(
        dfs.vec("v", 16).unwrap().block_bytes(),
        spillway::storage::vec::RANDOM_BLOCK_BYTES
    );
}
