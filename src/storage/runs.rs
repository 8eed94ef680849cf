//! [`HashRuns`]: the disk-resident part of a visited set — sorted runs of `(hash, id)` pairs
//! in immutable files, each with a RAM filter and a sparse index, merged LSM-style.
//!
//! A store whose RAM index outgrows its share of `--memory` writes the pairs of its oldest
//! states here (see docs/ARCHITECTURE.md, "The disk-resident visited set"). A lookup asks
//! every run, newest first; a run answers in RAM when its filter rules the hash out (the
//! common case: genuinely new states), otherwise it reads the one 4 KiB block its sparse index
//! points at (through a small block cache) and hands every id stored with that exact 64-bit
//! hash to the caller, who compares the states themselves. So the set stays exact: a hash match
//! is never taken for equality.
//!
//! **Run file** (`NAME.run.G`, `G` the run's generation): blocks of [`BLOCK`] bytes; a block
//! is `count: u32 LE | crc32: u32 LE | count × (hash: u64 LE, id: u32 LE)`, the CRC over the
//! pairs, zero-padded. Pairs are sorted by `(hash, id)`. A file is written once, synced before
//! a checkpoint names it, and never changed; a merge writes a new run and retires its inputs
//! (deleted at once in a scratch directory, after the next checkpoint in a kept one, since the
//! previous checkpoint still needs them).
//!
//! **Filter**: a blocked Bloom filter per run (one 64-byte line per key, `k` bits in it), sized
//! when the run is written from what the budget leaves: 10 bits a key (≈ 1% false positives)
//! down to none (every lookup then reads a block).

use super::budget::{Account, Budget, MemoryLimit};
use super::segment::io_err;
use crate::error::{Corruption, StorageError};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes per block of a run file.
pub const BLOCK: usize = 4096;
const HEAD: usize = 8;
const PAIR: usize = 12;
/// Pairs per block.
pub const PER_BLOCK: usize = (BLOCK - HEAD) / PAIR;
/// Filter bits per key when the budget allows.
const FILTER_BITS: u64 = 10;
/// The filters of all runs together take at most 1/N of `--memory`.
const FILTER_SHARE: u64 = 8;
/// Blocks the block cache holds (direct-mapped).
const CACHE_BLOCKS: usize = 128;
/// More runs than this are merged whatever their sizes (bounds the filters a lookup probes).
const MAX_RUNS: usize = 12;

/// What a checkpoint records of the runs.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunsMark {
    pub runs: Vec<RunMark>,
    pub next_gen: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunMark {
    pub gen: u64,
    pub pairs: u64,
}

/// Counters for the stats.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunStats {
    /// Run lookups past a filter (a hash looked up in a run whose filter let it through).
    pub probes: u64,
    /// Blocks read from disk (cache misses).
    pub block_reads: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub merges: u64,
    /// Ids handed to the caller whose state turned out different (equal 64-bit hashes).
    pub false_matches: u64,
    pub found: u64,
}

/// A blocked Bloom filter: one 512-bit line per key.
struct Filter {
    lines: Vec<[u64; 8]>,
    k: u32,
}

impl Filter {
    fn new(keys: u64, bits_per_key: u64) -> Filter {
        if bits_per_key == 0 || keys == 0 {
            return Filter {
                lines: Vec::new(),
                k: 0,
            };
        }
        let lines = (keys * bits_per_key).div_ceil(512).max(1) as usize;
        // k ≈ ln 2 · bits per key, a little fewer for blocked filters.
        let k = ((bits_per_key as f64 * 0.6).round() as u32).clamp(1, 7);
        Filter {
            lines: vec![[0u64; 8]; lines],
            k,
        }
    }

    fn bytes_for(keys: u64, bits_per_key: u64) -> u64 {
        if bits_per_key == 0 || keys == 0 {
            0
        } else {
            (keys * bits_per_key).div_ceil(512).max(1) * 64
        }
    }

    fn bytes(&self) -> u64 {
        self.lines.len() as u64 * 64
    }

    /// The line and the bit positions of `h`: state hashes are already uniform, but the
    /// stores' tables use their low and high bits, so the filter mixes them again.
    #[inline]
    fn spot(&self, h: u64) -> (usize, u64) {
        let mut x = h ^ (h >> 33);
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        let line = ((x >> 32) * self.lines.len() as u64) >> 32;
        (line as usize, x)
    }

    fn insert(&mut self, h: u64) {
        if self.k == 0 {
            return;
        }
        let (line, bits) = self.spot(h);
        let l = &mut self.lines[line];
        for i in 0..self.k {
            let b = (bits >> (9 * i)) & 511;
            l[(b >> 6) as usize] |= 1 << (b & 63);
        }
    }

    #[inline]
    fn prefetch(&self, h: u64) {
        if self.k != 0 {
            let (line, _) = self.spot(h);
            crate::sys::prefetch(self.lines[line].as_ptr() as *const u8);
        }
    }

    fn may_contain(&self, h: u64) -> bool {
        if self.k == 0 {
            return true;
        }
        let (line, bits) = self.spot(h);
        let l = &self.lines[line];
        (0..self.k).all(|i| {
            let b = (bits >> (9 * i)) & 511;
            l[(b >> 6) as usize] & (1 << (b & 63)) != 0
        })
    }
}

struct Run {
    gen: u64,
    path: PathBuf,
    file: File,
    pairs: u64,
    /// First hash of every block.
    firsts: Vec<u64>,
    filter: Filter,
    synced: bool,
}

impl Run {
    fn blocks(&self) -> u64 {
        self.firsts.len() as u64
    }
}

/// Writes sorted pairs into a new run file, building its sparse index and filter.
struct RunWriter {
    path: PathBuf,
    out: BufWriter<File>,
    block: Vec<u8>,
    count: usize,
    pairs: u64,
    firsts: Vec<u64>,
    hashes_for_filter: Filter,
    /// The last [`FILTER_AHEAD`] hashes pushed, inserted into the filter that many pushes
    /// later, their lines prefetched meanwhile: the pairs come sorted by hash, so their filter
    /// lines are scattered over the whole filter and each insert would wait for memory.
    ahead: [u64; FILTER_AHEAD],
    last: Option<(u64, u32)>,
}

/// Filter inserts a [`RunWriter`] keeps in flight.
const FILTER_AHEAD: usize = 16;

impl RunWriter {
    /// A new run file; `unlink`ed at once in a scratch directory (the handle keeps the data,
    /// and the space comes back however the process ends, as for segment files).
    fn create(path: PathBuf, filter: Filter, unlink: bool) -> Result<RunWriter, StorageError> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io_err(&path, "create an index run file"))?;
        if unlink {
            std::fs::remove_file(&path)
                .map_err(io_err(&path, "unlink a scratch index run file"))?;
        }
        Ok(RunWriter {
            path,
            out: BufWriter::with_capacity(128 << 10, f),
            block: vec![0u8; BLOCK],
            count: 0,
            pairs: 0,
            firsts: Vec::new(),
            hashes_for_filter: filter,
            ahead: [0; FILTER_AHEAD],
            last: None,
        })
    }

    fn push(&mut self, h: u64, id: u32) -> Result<(), StorageError> {
        debug_assert!(self.last.is_none_or(|l| l <= (h, id)), "pairs out of order");
        self.last = Some((h, id));
        if self.count == 0 {
            self.firsts.push(h);
        }
        let at = HEAD + self.count * PAIR;
        self.block[at..at + 8].copy_from_slice(&h.to_le_bytes());
        self.block[at + 8..at + 12].copy_from_slice(&id.to_le_bytes());
        self.count += 1;
        let slot = self.pairs as usize % FILTER_AHEAD;
        if self.pairs >= FILTER_AHEAD as u64 {
            self.hashes_for_filter.insert(self.ahead[slot]);
        }
        self.hashes_for_filter.prefetch(h);
        self.ahead[slot] = h;
        self.pairs += 1;
        if self.count == PER_BLOCK {
            self.seal()?;
        }
        Ok(())
    }

    fn seal(&mut self) -> Result<(), StorageError> {
        if self.count == 0 {
            return Ok(());
        }
        let end = HEAD + self.count * PAIR;
        let crc = crc32fast::hash(&self.block[HEAD..end]);
        self.block[0..4].copy_from_slice(&(self.count as u32).to_le_bytes());
        self.block[4..8].copy_from_slice(&crc.to_le_bytes());
        self.block[end..].fill(0);
        self.out
            .write_all(&self.block)
            .map_err(io_err(&self.path, "write an index run file"))?;
        self.count = 0;
        Ok(())
    }

    fn finish(mut self, gen: u64) -> Result<Run, StorageError> {
        self.seal()?;
        for p in self.pairs.saturating_sub(FILTER_AHEAD as u64)..self.pairs {
            self.hashes_for_filter
                .insert(self.ahead[p as usize % FILTER_AHEAD]);
        }
        let file = self
            .out
            .into_inner()
            .map_err(|e| io_err(&self.path, "write an index run file")(e.into_error()))?;
        Ok(Run {
            gen,
            path: self.path,
            file,
            pairs: self.pairs,
            firsts: self.firsts,
            filter: self.hashes_for_filter,
            synced: false,
        })
    }
}

/// Checks a block read from `path` at block `b` and returns its pair count.
fn check_block(path: &Path, b: u64, block: &[u8]) -> Result<usize, StorageError> {
    let count = u32::from_le_bytes(block[0..4].try_into().unwrap()) as usize;
    let corrupt = |expected: String, found: String| {
        StorageError::Corrupt(Corruption {
            path: path.to_path_buf(),
            offset: b * BLOCK as u64,
            expected,
            found,
        })
    };
    if count == 0 || count > PER_BLOCK {
        return Err(corrupt(
            format!("an index block of 1..={PER_BLOCK} pairs"),
            format!("{count} pairs"),
        ));
    }
    let stored = u32::from_le_bytes(block[4..8].try_into().unwrap());
    let crc = crc32fast::hash(&block[HEAD..HEAD + count * PAIR]);
    if crc != stored {
        return Err(corrupt(
            format!("block CRC-32 {stored:#010x}"),
            format!("{crc:#010x}"),
        ));
    }
    Ok(count)
}

/// The first of a block's `count` pairs whose hash is not below `h`.
fn lower_bound(block: &[u8], count: usize, h: u64) -> usize {
    let (mut lo, mut hi) = (0, count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pair(block, mid).0 < h {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[inline]
fn pair(block: &[u8], i: usize) -> (u64, u32) {
    let at = HEAD + i * PAIR;
    (
        u64::from_le_bytes(block[at..at + 8].try_into().unwrap()),
        u32::from_le_bytes(block[at + 8..at + 12].try_into().unwrap()),
    )
}

/// Reads a run's blocks in order through one buffer of a few hundred KiB.
struct RunReader<'a> {
    run: &'a Run,
    buf: Vec<u8>,
    /// First block in `buf`, and how many it holds.
    at: u64,
    held: u64,
    block: u64,
    i: usize,
    count: usize,
}

impl<'a> RunReader<'a> {
    const BLOCKS: u64 = 32;

    fn new(run: &'a Run) -> RunReader<'a> {
        RunReader {
            run,
            buf: vec![0u8; Self::BLOCKS as usize * BLOCK],
            at: 0,
            held: 0,
            block: 0,
            i: 0,
            count: 0,
        }
    }

    /// The next pair, or `None` at the end; counts the bytes read into `stats`.
    fn next(&mut self, stats: &mut RunStats) -> Result<Option<(u64, u32)>, StorageError> {
        while self.i == self.count {
            if self.block == self.run.blocks() {
                return Ok(None);
            }
            if self.block >= self.at + self.held || self.held == 0 {
                let n = (self.run.blocks() - self.block).min(Self::BLOCKS);
                let bytes = &mut self.buf[..n as usize * BLOCK];
                self.run
                    .file
                    .read_exact_at(bytes, self.block * BLOCK as u64)
                    .map_err(io_err(&self.run.path, "read an index run file"))?;
                stats.bytes_read += bytes.len() as u64;
                self.at = self.block;
                self.held = n;
            }
            let off = (self.block - self.at) as usize * BLOCK;
            let blk = &self.buf[off..off + BLOCK];
            self.count = check_block(&self.run.path, self.block, blk)?;
            self.i = 0;
            self.block += 1;
        }
        let off = (self.block - 1 - self.at) as usize * BLOCK;
        let p = pair(&self.buf[off..off + BLOCK], self.i);
        self.i += 1;
        Ok(Some(p))
    }
}

/// A direct-mapped cache of run blocks (allocated at the first read).
struct BlockCache {
    blocks: usize,
    keys: Vec<(u64, u64)>,
    data: Vec<u8>,
}

impl BlockCache {
    fn new(blocks: usize) -> BlockCache {
        BlockCache {
            blocks,
            keys: Vec::new(),
            data: Vec::new(),
        }
    }

    fn bytes(&self) -> u64 {
        self.data.capacity() as u64
    }

    fn slot(&self, gen: u64, b: u64) -> usize {
        let x = (gen.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b).wrapping_mul(0xff51_afd7_ed55_8ccd);
        (x >> 40) as usize % self.blocks
    }
}

/// Blocks the cache of a [`RunLookup`] holds: its lookups come sorted by hash, so a block is
/// wanted again only by the next few.
const LOOKUP_BLOCKS: usize = 16;

/// One thread's share of a batched lookup ([`HashRuns::find_sorted_in`]): its own small
/// block cache and counters, which [`HashRuns::absorb`] adds to the index's.
pub struct RunLookup {
    cache: BlockCache,
    stats: RunStats,
}

impl Default for RunLookup {
    fn default() -> Self {
        RunLookup {
            cache: BlockCache::new(LOOKUP_BLOCKS),
            stats: RunStats::default(),
        }
    }
}

impl RunLookup {
    /// RAM it holds once it has read a block (counted by its owner).
    pub const RAM_BYTES: u64 = (LOOKUP_BLOCKS * (BLOCK + 16)) as u64;

    pub fn ram_bytes(&self) -> u64 {
        self.cache.bytes() + (self.cache.keys.capacity() * 16) as u64
    }
}

/// The runs of one index.
/// See [`HashRuns::feed`].
pub struct RunFeed<'a> {
    runs: &'a mut HashRuns,
    buf: Vec<(u64, u32)>,
    chunk: usize,
    pushed: u64,
    total: u64,
}

impl RunFeed<'_> {
    pub fn push(&mut self, hash: u64, id: u32) -> Result<(), StorageError> {
        self.pushed += 1;
        if self.pushed & 0xf_ffff == 0 {
            crate::sys::activity("spilling", "index pairs to runs", self.pushed, self.total);
        }
        self.buf.push((hash, id));
        if self.buf.len() >= self.chunk {
            self.runs.add(&mut self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes the last pairs, frees the buffer and brings the runs' account up to date.
    pub fn finish(mut self) -> Result<(), StorageError> {
        let r = self.runs.add(&mut self.buf);
        self.buf = Vec::new();
        self.runs.update_account();
        r
    }
}

pub struct HashRuns {
    dir: PathBuf,
    /// File name prefix (`NAME.run.G`).
    name: String,
    kept: bool,
    runs: Vec<Run>,
    next_gen: u64,
    cache: BlockCache,
    account: Account,
    budget: Arc<Budget>,
    /// Retired since the last checkpoint (still named by the previous one), and retired
    /// before it (deleted at the next checkpoint).
    retired: Vec<PathBuf>,
    retired_before: Vec<PathBuf>,
    stats: RunStats,
}

impl HashRuns {
    /// An empty index whose files go to `dir`; `kept` when a checkpoint may reopen them.
    pub fn new(dir: &Path, name: &str, kept: bool, budget: Arc<Budget>) -> HashRuns {
        let account = budget.account(&format!("{name}.runs"));
        HashRuns {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            kept,
            runs: Vec::new(),
            next_gen: 0,
            cache: BlockCache::new(CACHE_BLOCKS),
            account,
            budget,
            retired: Vec::new(),
            retired_before: Vec::new(),
            stats: RunStats::default(),
        }
    }

    /// Reopens the runs a checkpoint recorded, rebuilding sparse indexes and filters by
    /// reading them once (every block's CRC is checked on the way).
    pub fn open(
        dir: &Path,
        name: &str,
        budget: Arc<Budget>,
        mark: &RunsMark,
    ) -> Result<HashRuns, StorageError> {
        let mut s = HashRuns::new(dir, name, true, budget);
        s.next_gen = mark.next_gen;
        for rm in &mark.runs {
            let path = s.run_path(rm.gen);
            let file = File::open(&path).map_err(io_err(&path, "open an index run file"))?;
            let blocks = rm.pairs.div_ceil(PER_BLOCK as u64);
            let mut run = Run {
                gen: rm.gen,
                path,
                file,
                pairs: rm.pairs,
                firsts: vec![0; blocks as usize],
                filter: Filter::new(rm.pairs, s.filter_bits(rm.pairs)),
                synced: true,
            };
            let mut firsts = Vec::with_capacity(blocks as usize);
            let mut filter = std::mem::replace(&mut run.filter, Filter::new(0, 0));
            let mut n = 0u64;
            {
                let mut rd = RunReader::new(&run);
                let mut stats = RunStats::default();
                while let Some((h, _)) = rd.next(&mut stats)? {
                    if n.is_multiple_of(PER_BLOCK as u64) {
                        firsts.push(h);
                    }
                    filter.insert(h);
                    n += 1;
                }
            }
            if n != rm.pairs {
                return Err(StorageError::Corrupt(Corruption {
                    path: run.path.clone(),
                    offset: 0,
                    expected: format!("{} index pairs", rm.pairs),
                    found: format!("{n}"),
                }));
            }
            run.firsts = firsts;
            run.filter = filter;
            s.runs.push(run);
            s.update_account();
        }
        Ok(s)
    }

    fn run_path(&self, gen: u64) -> PathBuf {
        self.dir.join(format!("{}.run.{gen}", self.name))
    }

    /// Filter bits per key for a new run of `pairs` pairs: the filters together may take
    /// [`FILTER_SHARE`] of the budget (the other structures size their caches around what
    /// they hold), up to [`FILTER_BITS`] a key.
    fn filter_bits(&self, pairs: u64) -> u64 {
        let MemoryLimit::Bytes(limit) = self.budget.limit() else {
            return FILTER_BITS;
        };
        let room = (limit / FILTER_SHARE).saturating_sub(self.filter_bytes());
        (1..=FILTER_BITS)
            .rev()
            .find(|&b| Filter::bytes_for(pairs, b) <= room)
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Pairs stored in every run.
    pub fn pairs(&self) -> u64 {
        self.runs.iter().map(|r| r.pairs).sum()
    }

    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    pub fn stats(&self) -> RunStats {
        self.stats
    }

    pub fn ram_bytes(&self) -> u64 {
        self.runs
            .iter()
            .map(|r| r.filter.bytes() + r.firsts.capacity() as u64 * 8)
            .sum::<u64>()
            + self.cache.bytes()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.blocks() * BLOCK as u64).sum()
    }

    pub fn filter_bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.filter.bytes()).sum()
    }

    /// RAM the index cannot work without: the block cache and a merge's two read buffers
    /// and write buffer.
    pub fn min_ram_bytes() -> u64 {
        (CACHE_BLOCKS * BLOCK) as u64 + 2 * RunReader::BLOCKS * BLOCK as u64 + (128 << 10)
    }

    /// Charges, ahead of time, the filter that `pairs` more pairs will get, so that the
    /// caches that size themselves from the budget can give way before it is allocated
    /// (the next [`HashRuns::update_account`] replaces the estimate with what is held).
    pub fn reserve_filter(&self, pairs: u64) {
        let ahead = Filter::bytes_for(pairs, self.filter_bits(pairs));
        self.account.set(
            self.ram_bytes() + ahead + Self::min_ram_bytes(),
            self.disk_bytes(),
            self.pairs() * PAIR as u64,
        );
    }

    pub fn update_account(&self) {
        self.account.set(
            self.ram_bytes(),
            self.disk_bytes(),
            self.pairs() * PAIR as u64,
        );
    }

    /// A writer that adds pairs pushed in any order as runs of at most `chunk` pairs each
    /// (its buffer takes `chunk` × 16 bytes: the caller has freed as much).
    /// `total` is the number of pairs that will be pushed (for the progress line).
    pub fn feed(&mut self, chunk: usize, total: u64) -> RunFeed<'_> {
        RunFeed {
            buf: Vec::with_capacity(chunk),
            chunk,
            runs: self,
            pushed: 0,
            total,
        }
    }

    /// Adds the pairs of `pairs` (any order; sorted here) as a new run, then merges runs of
    /// similar size.
    pub fn add(&mut self, pairs: &mut [(u64, u32)]) -> Result<(), StorageError> {
        if pairs.is_empty() {
            return Ok(());
        }
        pairs.sort_unstable();
        let gen = self.next_gen;
        self.next_gen += 1;
        let filter = Filter::new(pairs.len() as u64, self.filter_bits(pairs.len() as u64));
        let mut w = RunWriter::create(self.run_path(gen), filter, !self.kept)?;
        for &(h, id) in pairs.iter() {
            w.push(h, id)?;
        }
        let run = w.finish(gen)?;
        self.stats.bytes_written += run.blocks() * BLOCK as u64;
        self.runs.push(run);
        self.update_account();
        self.compact()
    }

    /// Merges the two newest runs while the newer is at least half the older (sizes then
    /// grow geometrically: `O(log n)` runs, each pair rewritten `O(log n)` times), or while
    /// there are more than [`MAX_RUNS`].
    fn compact(&mut self) -> Result<(), StorageError> {
        while self.runs.len() >= 2 {
            let n = self.runs.len();
            if self.runs[n - 1].pairs * 2 < self.runs[n - 2].pairs && n <= MAX_RUNS {
                break;
            }
            let mut b = self.runs.pop().unwrap();
            let mut a = self.runs.pop().unwrap();
            // Nothing is looked up during a merge: the inputs' filters go first, so that they
            // and the merged run's never take RAM together. (Should the merge fail, the
            // inputs stay, filterless: lookups still exact, only slower.)
            a.filter = Filter::new(0, 0);
            b.filter = Filter::new(0, 0);
            self.update_account();
            let merged = self.merge(&a, &b);
            let merged = match merged {
                Ok(m) => m,
                Err(e) => {
                    self.runs.push(a);
                    self.runs.push(b);
                    return Err(e);
                }
            };
            self.runs.push(merged);
            self.retire(a);
            self.retire(b);
            self.stats.merges += 1;
            self.update_account();
        }
        Ok(())
    }

    fn merge(&mut self, a: &Run, b: &Run) -> Result<Run, StorageError> {
        let gen = self.next_gen;
        self.next_gen += 1;
        let pairs = a.pairs + b.pairs;
        let bits = self.filter_bits(pairs);
        let mut w = RunWriter::create(self.run_path(gen), Filter::new(pairs, bits), !self.kept)?;
        let mut stats = RunStats::default();
        let (mut ra, mut rb) = (RunReader::new(a), RunReader::new(b));
        let (mut x, mut y) = (ra.next(&mut stats)?, rb.next(&mut stats)?);
        let mut done = 0u64;
        loop {
            done += 1;
            if done & 0xf_ffff == 0 {
                crate::sys::activity("merging", "index runs", done, pairs);
            }
            match (x, y) {
                (Some(p), Some(q)) if p <= q => {
                    w.push(p.0, p.1)?;
                    x = ra.next(&mut stats)?;
                }
                (_, Some(q)) => {
                    w.push(q.0, q.1)?;
                    y = rb.next(&mut stats)?;
                }
                (Some(p), None) => {
                    w.push(p.0, p.1)?;
                    x = ra.next(&mut stats)?;
                }
                (None, None) => break,
            }
        }
        let run = w.finish(gen)?;
        self.stats.bytes_read += stats.bytes_read;
        self.stats.bytes_written += run.blocks() * BLOCK as u64;
        Ok(run)
    }

    fn retire(&mut self, run: Run) {
        // A scratch run was unlinked when created: dropping its handle frees the space.
        let Run { path, .. } = run;
        if self.kept {
            self.retired.push(path);
        }
    }

    /// Calls `same(id)` for every id stored with hash `h` (newest run first) until it says
    /// the state is the one looked for; returns that id. One lookup of
    /// [`HashRuns::find_sorted`].
    pub fn find(
        &mut self,
        h: u64,
        mut same: impl FnMut(u64) -> Result<bool, StorageError>,
    ) -> Result<Option<u64>, StorageError> {
        let mut ids = Vec::new();
        self.find_sorted(&[(h, 0)], |_, id| ids.push(id))?;
        for id in ids {
            let equal = same(id)?;
            self.count_outcome(equal);
            if equal {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Whether some run's filter lets `h` through (a lookup would read a block).
    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        self.runs.iter().any(|r| r.filter.may_contain(h))
    }

    /// Asks for the filter lines [`HashRuns::may_contain`] will read for `h` (a cache miss
    /// each, in filters of up to gigabytes), so that a batch's misses overlap.
    #[inline]
    pub fn prefetch_filters(&self, h: u64) {
        for r in &self.runs {
            r.filter.prefetch(h);
        }
    }

    /// The batched lookup: for `wanted`, `(hash, tag)` pairs sorted by hash, calls
    /// `emit(tag, id)` for every stored id with that hash (in any run). Each run is read in
    /// hash order, so a block is read at most once per batch, and a run with many wanted
    /// hashes per block is simply read through.
    pub fn find_sorted(
        &mut self,
        wanted: &[(u64, u32)],
        emit: impl FnMut(u32, u64),
    ) -> Result<(), StorageError> {
        let mut own = RunLookup {
            cache: std::mem::replace(&mut self.cache, BlockCache::new(CACHE_BLOCKS)),
            stats: RunStats::default(),
        };
        let r = self.find_sorted_in(&mut own, wanted, emit);
        self.cache = std::mem::replace(&mut own.cache, BlockCache::new(0));
        self.absorb(&mut own);
        r
    }

    /// [`HashRuns::find_sorted`] for one of several threads that share a batch's lookups
    /// (each a contiguous part of the sorted pairs): the runs are only read, through the
    /// thread's own cache `look`.
    pub fn find_sorted_in(
        &self,
        look: &mut RunLookup,
        wanted: &[(u64, u32)],
        mut emit: impl FnMut(u32, u64),
    ) -> Result<(), StorageError> {
        for run in self.runs.iter().rev() {
            let mut probed = 0u64;
            let mut w = 0;
            while w < wanted.len() {
                let h = wanted[w].0;
                if !run.filter.may_contain(h) {
                    w += 1;
                    continue;
                }
                probed += 1;
                let mut b = run.firsts.partition_point(|&f| f < h).saturating_sub(1) as u64;
                // Every wanted pair with this hash (they are adjacent), matched against the
                // run's pairs with this hash, which may cross block boundaries.
                let tags_end = w + wanted[w..].iter().take_while(|x| x.0 == h).count();
                'blocks: while b < run.blocks() && run.firsts[b as usize] <= h {
                    let blk = Self::load(&mut look.cache, &mut look.stats, run, b)?;
                    let count = u32::from_le_bytes(blk[0..4].try_into().unwrap()) as usize;
                    let start = lower_bound(blk, count, h);
                    for i in start..count {
                        let (ph, id) = pair(blk, i);
                        if ph != h {
                            break 'blocks;
                        }
                        for x in &wanted[w..tags_end] {
                            emit(x.1, id as u64);
                        }
                    }
                    b += 1;
                }
                w = tags_end;
            }
            look.stats.probes += probed;
        }
        Ok(())
    }

    /// Adds the counters of a [`RunLookup`] to the index's, and clears them.
    pub fn absorb(&mut self, look: &mut RunLookup) {
        let st = std::mem::take(&mut look.stats);
        self.stats.probes += st.probes;
        self.stats.block_reads += st.block_reads;
        self.stats.bytes_read += st.bytes_read;
    }

    /// Counts ids handed out by [`HashRuns::find_sorted`] that were (`true`) or were not the
    /// state looked for.
    pub fn count_outcome(&mut self, found: bool) {
        self.count_outcomes(found as u64, !found as u64);
    }

    /// Counts `found` ids that were the state looked for and `unequal` ones that were not.
    pub fn count_outcomes(&mut self, found: u64, unequal: u64) {
        self.stats.found += found;
        self.stats.false_matches += unequal;
    }

    /// Block `b` of `run`, from the cache or the file (checked).
    fn load<'c>(
        cache: &'c mut BlockCache,
        stats: &mut RunStats,
        run: &Run,
        b: u64,
    ) -> Result<&'c [u8], StorageError> {
        if cache.data.is_empty() {
            cache.data = vec![0u8; cache.blocks * BLOCK];
            cache.keys = vec![(u64::MAX, u64::MAX); cache.blocks];
        }
        let s = cache.slot(run.gen, b);
        let data = &mut cache.data[s * BLOCK..(s + 1) * BLOCK];
        if cache.keys[s] != (run.gen, b) {
            cache.keys[s] = (u64::MAX, u64::MAX);
            run.file
                .read_exact_at(data, b * BLOCK as u64)
                .map_err(io_err(&run.path, "read an index run file"))?;
            check_block(&run.path, b, data)?;
            stats.block_reads += 1;
            stats.bytes_read += BLOCK as u64;
            cache.keys[s] = (run.gen, b);
        }
        Ok(data)
    }

    /// Makes every run durable, deletes the runs retired before the previous checkpoint and
    /// returns what this checkpoint must record, with each file and its length.
    pub fn checkpoint(&mut self) -> Result<(RunsMark, Vec<(String, u64)>), StorageError> {
        for r in &mut self.runs {
            if !r.synced {
                r.file
                    .sync_all()
                    .map_err(io_err(&r.path, "sync an index run file"))?;
                r.synced = true;
            }
        }
        // Runs retired before the previous checkpoint are named by no checkpoint any more
        // (that one is committed before this one is taken); the ones retired since are
        // named by it until this one is committed, so they go at the next checkpoint.
        for p in std::mem::take(&mut self.retired_before) {
            let _ = std::fs::remove_file(p);
        }
        self.retired_before = std::mem::take(&mut self.retired);
        let files = self
            .runs
            .iter()
            .map(|r| {
                (
                    r.path.file_name().unwrap().to_string_lossy().into_owned(),
                    r.blocks() * BLOCK as u64,
                )
            })
            .collect();
        Ok((
            RunsMark {
                runs: self
                    .runs
                    .iter()
                    .map(|r| RunMark {
                        gen: r.gen,
                        pairs: r.pairs,
                    })
                    .collect(),
                next_gen: self.next_gen,
            },
            files,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryLimit;

    fn pairs(n: u64, salt: u64) -> Vec<(u64, u32)> {
        // Hashes with deliberate duplicates (every 7th repeats its predecessor's hash).
        (0..n)
            .map(|i| {
                let h = (i / 7 * 7 + salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                (if i % 7 == 1 { h } else { h ^ i }, (i + salt) as u32)
            })
            .collect()
    }

    #[test]
    fn finds_every_pair_across_merges_one_by_one_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = HashRuns::new(dir.path(), "t", true, Budget::new(MemoryLimit::Unlimited));
        let mut all = Vec::new();
        for (k, n) in [
            (0u64, 5000u64),
            (100_000, 3000),
            (200_000, 4000),
            (300_000, 700),
        ] {
            let mut p = pairs(n, k);
            all.extend_from_slice(&p);
            r.add(&mut p).unwrap();
        }
        assert!(r.stats().merges >= 2, "{:?}", r.stats());
        assert_eq!(r.pairs(), all.len() as u64);
        for &(h, id) in &all {
            let got = r.find(h, |x| Ok(x == id as u64)).unwrap();
            assert_eq!(got, Some(id as u64));
        }
        assert_eq!(r.find(12345, |_| Ok(true)).unwrap(), None);
        let mut wanted: Vec<(u64, u32)> = all
            .iter()
            .enumerate()
            .map(|(i, p)| (p.0, i as u32))
            .collect();
        wanted.sort_unstable();
        let mut hits = vec![false; all.len()];
        r.find_sorted(&wanted, |tag, id| {
            if all[tag as usize].1 as u64 == id {
                hits[tag as usize] = true;
            }
        })
        .unwrap();
        assert!(hits.iter().all(|&h| h));
    }

    #[test]
    fn reopens_from_a_mark_and_refuses_a_flipped_bit() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::new(MemoryLimit::Unlimited);
        let mut r = HashRuns::new(dir.path(), "t", true, budget.clone());
        let mut p = pairs(4000, 1);
        r.add(&mut p.clone()).unwrap();
        let (mark, files) = r.checkpoint().unwrap();
        assert_eq!(files.len(), 1);
        let mut again = HashRuns::open(dir.path(), "t", budget.clone(), &mark).unwrap();
        p.sort_unstable();
        for &(h, id) in &p {
            assert_eq!(
                again.find(h, |x| Ok(x == id as u64)).unwrap(),
                Some(id as u64)
            );
        }
        let path = dir.path().join(&files[0].0);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[BLOCK + 100] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();
        match HashRuns::open(dir.path(), "t", budget, &mark) {
            Err(StorageError::Corrupt(Corruption {
                path: p, offset, ..
            })) => {
                assert_eq!(p, path);
                assert_eq!(offset, BLOCK as u64);
            }
            other => panic!("{:?}", other.err()),
        }
    }
}
