//! [`SegVec`]: a vector of fixed-width records with random access, backed by a segment file.
//!
//! Records are grouped into blocks of `2^k` records. The newest blocks are *hot*: they live
//! uncompressed in a memory-mapped window of the vector's hot file (a ring of
//! `hot_blocks` block slots), so appends, reads and updates there are plain slice accesses.
//! When the ring is full, the oldest hot block is *sealed*: compressed into the segment file
//! (a [`SegmentFile`]) and copied into the block cache, a small CLOCK cache of decompressed
//! blocks. Reads of sealed records go through the cache; a miss reads and checks one block.
//!
//! `set` on a sealed record updates the cached copy and marks it dirty; a dirty block is
//! written back as a *new version* of the block at the end of the file when it is evicted or
//! the vector is flushed (the block index points at the newest version; the superseded bytes
//! are counted as garbage). So updates cost nothing on disk until eviction and never rewrite
//! the file in place.

use super::budget::{Account, Budget};
use super::mmap::{AnonBlock, Window};
use super::segment::{
    detach, io_err, BlockMeta, BlockReader, Codec, FileLifetime, HashId, Header, Kind, Layout,
    SegmentFile,
};
use crate::error::{Corruption, StorageError};
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Sizes of a segment container.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SegOptions {
    /// Target raw bytes per block (rounded down to a power-of-two number of records).
    pub block_bytes: usize,
    /// Hot window: number of uncompressed blocks kept mapped (a power of two, ≥ 1).
    pub hot_blocks: usize,
    /// Most bytes of decompressed blocks to cache when the budget does not say otherwise.
    pub cache_bytes: u64,
    /// Whether the files keep their names (reopenable) or are unlinked at once.
    pub files: FileLifetime,
    /// zstd level of the blocks this vector writes (see [`SegmentFile::set_level`]).
    pub zstd_level: i32,
    /// Transform of the blocks before compression (recorded in the file header, so a
    /// reopened vector reads and writes with the filter it was created with).
    pub filter: super::filter::Filter,
    /// How new files compress their blocks ([`Codec::Columns`] only for widths that are a
    /// multiple of 4; others use zstd; none but zstd with a filter). A reopened file keeps
    /// the codec of its header.
    pub codec: Codec,
}

impl Default for SegOptions {
    fn default() -> Self {
        SegOptions {
            block_bytes: 32 << 10,
            hot_blocks: 128,
            cache_bytes: 64 << 20,
            files: FileLifetime::Named,
            zstd_level: super::segment::ZSTD_LEVEL,
            filter: super::filter::Filter::None,
            codec: Codec::Zstd,
        }
    }
}

/// Whether a cached block differs from its newest version on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dirty {
    Clean,
    Dirty,
}

struct Slot {
    block: u64,
    dirty: Dirty,
    /// CLOCK reference bit (atomic: threads sharing a [`SegView`] set it on their hits).
    referenced: AtomicBool,
}

/// Decompressed blocks of sealed records.
///
/// Invariants: `slot_of[b] == s` iff `slots[s].block == b`; `slots.len() <= cap.max(1)`; a
/// `Dirty` slot holds data newer than `index[block]` in the file.
struct Cache {
    slots: Vec<Slot>,
    /// The slots' bytes: slot `s` is block-sized at `(s % per_chunk) * block_bytes` of
    /// `chunks[s / per_chunk]`. Chunks are anonymous mappings of about 1 MiB, so that a cache
    /// that shrinks really returns memory to the kernel (freed heap chunks would stay
    /// resident) and blocks of any size waste at most one page per chunk.
    chunks: Vec<AnonBlock>,
    /// Slots per chunk: `1 << chunk_shift` (a power of two: no division on reads).
    per_chunk: usize,
    chunk_shift: u32,
    block_bytes: usize,
    /// `slot_of[b]` is the slot of block `b`, or [`NO_SLOT`] (a direct table: 4 bytes per
    /// sealed block, cheaper than hashing on every read).
    slot_of: Vec<u32>,
    hand: usize,
    cap: usize,
    /// The slot of the last block looked up (fast path for runs of reads in one block).
    last: Option<(u64, usize)>,
    hits: u64,
    misses: u64,
}

const NO_SLOT: u32 = u32::MAX;

impl Cache {
    #[inline(always)]
    fn get(&self, b: u64) -> Option<usize> {
        match self.slot_of.get(b as usize) {
            Some(&s) if s != NO_SLOT => Some(s as usize),
            _ => None,
        }
    }

    #[inline(always)]
    fn data(&self, s: usize) -> &[u8] {
        let at = (s & (self.per_chunk - 1)) * self.block_bytes;
        &self.chunks[s >> self.chunk_shift].bytes()[at..at + self.block_bytes]
    }

    #[inline(always)]
    fn data_mut(&mut self, s: usize) -> &mut [u8] {
        let at = (s & (self.per_chunk - 1)) * self.block_bytes;
        &mut self.chunks[s >> self.chunk_shift].bytes_mut()[at..at + self.block_bytes]
    }

    /// Resident bytes of the cache: the slots in use, plus a page per chunk for rounding.
    fn resident_bytes(&self) -> u64 {
        (self.slots.len() * self.block_bytes + self.chunks.len() * 4096) as u64
    }

    fn put(&mut self, b: u64, s: usize) {
        let b = b as usize;
        if b >= self.slot_of.len() {
            if b >= self.slot_of.capacity() {
                self.slot_of
                    .reserve_exact(b + 1 - self.slot_of.len() + b / 8 + 64);
            }
            self.slot_of.resize(b + 1, NO_SLOT);
        }
        self.slot_of[b] = s as u32;
    }
}

/// The sealed part: segment file, block index, cache. Behind a `RefCell` so that reads through
/// `&self` can fill the cache.
struct Cold {
    block_bytes: usize,
    seg: SegmentFile,
    /// `index[b]` is the newest version of block `b` in the file. Length ≥ `sealed`; it is
    /// `sealed + 1` after reopening a file whose last block is partial (that block is hot).
    index: Vec<BlockMeta>,
    reader: BlockReader,
    cache: Cache,
    /// File bytes of superseded block versions.
    garbage: u64,
    /// The block last read by [`SegVec::with_sequential`] when it was not cached: a
    /// one-block buffer that lets a sequential pass (the BFS head) avoid evicting the blocks
    /// that random reads keep using.
    stream: (u64, Vec<u8>),
}

/// What a flushed vector's files look like; a checkpoint records it to reopen the vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VecMark {
    pub records: u64,
    pub segment_len: u64,
}

/// Where a record lives (see [`SegVec::locate`]).
enum Place {
    /// Byte offset in the hot window.
    Hot(usize),
    /// A sealed block and the record's byte offset inside it.
    Sealed { block: u64, offset: usize },
}

/// How records map to blocks and to the hot ring (a [`SegVec`]'s, copied into its views).
#[derive(Clone, Copy)]
struct Geometry {
    width: usize,
    /// log2 of records per block.
    shift: u32,
    block_bytes: usize,
    hot_blocks: u64,
}

impl Geometry {
    /// Where record `i` (of a vector whose blocks below `sealed` are sealed) lives.
    #[inline(always)]
    fn place(&self, i: u64, sealed: u64) -> Place {
        let block = i >> self.shift;
        if block >= sealed {
            return Place::Hot(self.hot_offset(i));
        }
        let offset = ((i & ((1u64 << self.shift) - 1)) as usize) * self.width;
        Place::Sealed { block, offset }
    }

    #[inline(always)]
    fn hot_offset(&self, i: u64) -> usize {
        let r = (i & ((1u64 << self.shift) - 1)) as usize;
        self.hot_start(i >> self.shift) + r * self.width
    }

    /// Where hot block `b` starts in the window (its slot in the ring).
    #[inline(always)]
    fn hot_start(&self, b: u64) -> usize {
        ((b & (self.hot_blocks - 1)) as usize) * self.block_bytes
    }
}

/// A vector of fixed-width records backed by a segment file (see the module docs).
pub struct SegVec {
    width: usize,
    /// log2 of records per block.
    shift: u32,
    /// Raw bytes of a full block: `width << shift`.
    block_bytes: usize,
    len: u64,
    /// Blocks `[0, sealed)` are in the segment file (newest version at `cold.index[b]`).
    /// Blocks `[sealed, ceil(len / rpb))` — at most `hot_blocks` of them — are in the hot
    /// window, block `b` at slot `b & (hot_blocks - 1)`; the file may also hold older copies
    /// of them (from a flush), which are superseded when they are sealed.
    sealed: u64,
    hot_blocks: u64,
    window: Window,
    /// Kept open for as long as the window maps it.
    _hot_file: File,
    hot_path: PathBuf,
    cold: RefCell<Cold>,
    account: Account,
    budget: Option<Arc<Budget>>,
    /// Cache size when there is no budget.
    cache_bytes: u64,
    /// Threads that compress blocks when the hot window is full (1: the pushing one; more:
    /// half the window is sealed at once, see [`SegVec::set_seal_threads`]).
    seal_threads: usize,
}

/// The block size of a vector read at random ([`SegVec::create_random`]): a read that misses
/// the cache decompresses a whole block to compare one record, so its cost is the block's
/// size. A disk-resident index's DFS on Kanban-PT-00005 under `--memory 24M` spent 56% of
/// its time in zstd with 32 KiB blocks (100 s); with 8 KiB blocks it took 52–64 s, with
/// 4 KiB 45–48 s, its vectors' file 4.9 MiB instead of 4.6 (docs/ARCHITECTURE.md, "The
/// disk-resident visited set").
pub const RANDOM_BLOCK_BYTES: usize = 4 << 10;
/// ... but at least this many records, so that zstd still finds the repeats between
/// neighbouring states of wide vectors.
const RANDOM_BLOCK_RECORDS: usize = 64;

fn records_shift(width: usize, block_bytes: usize) -> u32 {
    let per = (block_bytes / width.max(1)).max(1);
    usize::BITS - 1 - per.leading_zeros()
}

fn create_hot(path: &Path, bytes: usize) -> Result<(File, Window), StorageError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io_err(path, "create hot file"))?;
    // Write the whole window so every page is allocated now: a full disk fails here, with an
    // error, instead of with SIGBUS when a mapped page is first touched.
    let zeros = vec![0u8; bytes.min(1 << 20)];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(zeros.len());
        file.write_all(&zeros[..n])
            .map_err(io_err(path, "allocate hot file"))?;
        left -= n;
    }
    let window = Window::map(&file, bytes).map_err(io_err(path, "map hot file"))?;
    Ok((file, window))
}

impl SegVec {
    /// Creates an empty vector of `width`-byte records in `dir`, in files `NAME.seg` (sealed
    /// blocks) and `NAME.hot` (the mapped hot window).
    pub fn create(
        dir: &Path,
        name: &str,
        width: usize,
        opts: &SegOptions,
        account: Account,
        budget: Option<Arc<Budget>>,
    ) -> Result<SegVec, StorageError> {
        Self::create_hashes(dir, name, width, opts, account, budget, HashId::None)
    }

    /// [`SegVec::create`] for a vector read at random rather than in order: blocks of
    /// [`RANDOM_BLOCK_BYTES`] (at least [`RANDOM_BLOCK_RECORDS`] records, at most
    /// `opts.block_bytes`), the hot window as many bytes as `opts` gives it.
    pub fn create_random(
        dir: &Path,
        name: &str,
        width: usize,
        opts: &SegOptions,
        account: Account,
        budget: Option<Arc<Budget>>,
    ) -> Result<SegVec, StorageError> {
        let block = (RANDOM_BLOCK_RECORDS * width)
            .max(RANDOM_BLOCK_BYTES)
            .min(opts.block_bytes);
        Self::create_sized(dir, name, width, opts, block, account, budget, HashId::None)
    }

    /// [`SegVec::create`] for a vector whose records are hashes made by `hash` (recorded in
    /// the file header).
    pub fn create_hashes(
        dir: &Path,
        name: &str,
        width: usize,
        opts: &SegOptions,
        account: Account,
        budget: Option<Arc<Budget>>,
        hash: HashId,
    ) -> Result<SegVec, StorageError> {
        let block = opts.block_bytes;
        Self::create_sized(dir, name, width, opts, block, account, budget, hash)
    }

    /// Creates a vector of blocks of about `block_bytes` (rounded down to a power of two
    /// records, at least one).
    #[allow(clippy::too_many_arguments)]
    fn create_sized(
        dir: &Path,
        name: &str,
        width: usize,
        opts: &SegOptions,
        block_bytes: usize,
        account: Account,
        budget: Option<Arc<Budget>>,
        hash: HashId,
    ) -> Result<SegVec, StorageError> {
        if width == 0 {
            return Err(StorageError::Invalid(format!("{name}: zero-width records")));
        }
        let shift = records_shift(width, block_bytes);
        let header = Header {
            kind: Kind::Vec,
            // A filter feeds zstd: filtered vectors always use it.
            codec: match opts.codec {
                _ if !opts.filter.is_none() => Codec::Zstd,
                Codec::Columns if !width.is_multiple_of(4) => Codec::Zstd,
                c => c,
            },
            hash,
            layout: Layout::Fixed {
                width: width as u32,
            },
            block_bytes: (width << shift) as u32,
            first_block: 0,
            filter: opts.filter,
        };
        let path = dir.join(format!("{name}.seg"));
        let mut seg = SegmentFile::create(&path, header)?;
        seg.set_level(opts.zstd_level)?;
        let v = Self::assemble(
            dir,
            name,
            width,
            shift,
            opts,
            seg,
            Vec::new(),
            account,
            budget,
        )?;
        detach(&path, opts.files)?;
        detach(&v.hot_path, opts.files)?;
        Ok(v)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        dir: &Path,
        name: &str,
        width: usize,
        shift: u32,
        opts: &SegOptions,
        seg: SegmentFile,
        index: Vec<BlockMeta>,
        account: Account,
        budget: Option<Arc<Budget>>,
    ) -> Result<SegVec, StorageError> {
        let block_bytes = width << shift;
        // The hot window takes the bytes of `hot_blocks` blocks of the options' size, also
        // when this vector's blocks are smaller ([`SegVec::create_random`]), so that a
        // vector reopened from a checkpoint gets the window it was created with.
        let scale = match opts.block_bytes / block_bytes {
            0 | 1 => 1,
            n => 1 << (usize::BITS - 1 - n.leading_zeros()),
        };
        let hot_blocks = (opts.hot_blocks.max(1).next_power_of_two() * scale) as u64;
        let hot_path = dir.join(format!("{name}.hot"));
        let (hot_file, window) = create_hot(&hot_path, block_bytes * hot_blocks as usize)?;
        let mut reader = BlockReader::new(seg.path())?;
        reader.set_format(seg.header());
        let v = SegVec {
            width,
            shift,
            block_bytes,
            len: 0,
            sealed: 0,
            hot_blocks,
            window,
            _hot_file: hot_file,
            hot_path,
            cold: RefCell::new(Cold {
                block_bytes,
                seg,
                index,
                reader,
                cache: Cache {
                    slots: Vec::new(),
                    chunks: Vec::new(),
                    per_chunk: 1 << records_shift(block_bytes, 1 << 20),
                    chunk_shift: records_shift(block_bytes, 1 << 20),
                    block_bytes,
                    slot_of: Vec::new(),
                    hand: 0,
                    cap: 1,
                    last: None,
                    hits: 0,
                    misses: 0,
                },
                garbage: 0,
                stream: (u64::MAX, Vec::new()),
            }),
            account,
            budget,
            cache_bytes: opts.cache_bytes,
            seal_threads: 1,
        };
        Ok(v)
    }

    /// Reopens a vector written by [`SegVec::flush`]: `NAME.seg` in `dir`, cut back to
    /// `mark.segment_len` when a mark is given (the whole file otherwise).
    pub fn open(
        dir: &Path,
        name: &str,
        opts: &SegOptions,
        mark: Option<VecMark>,
        account: Account,
        budget: Option<Arc<Budget>>,
    ) -> Result<SegVec, StorageError> {
        let path = dir.join(format!("{name}.seg"));
        let (mut seg, blocks) = SegmentFile::open(&path, Kind::Vec, mark.map(|m| m.segment_len))?;
        seg.set_level(opts.zstd_level)?;
        let header = *seg.header();
        let Layout::Fixed { width } = header.layout else {
            return Err(StorageError::Corrupt(Corruption {
                path,
                offset: 10,
                expected: "layout 1 (fixed-width records)".into(),
                found: "layout 2 (stream)".into(),
            }));
        };
        let width = width as usize;
        let block_bytes = header.block_bytes as usize;
        let shift = records_shift(width, block_bytes);
        if width << shift != block_bytes {
            return Err(StorageError::Corrupt(Corruption {
                path,
                offset: 20,
                expected: format!("a block size of a power of two {width}-byte records"),
                found: block_bytes.to_string(),
            }));
        }
        let mut index: Vec<BlockMeta> = Vec::new();
        let mut garbage = 0;
        for (no, meta) in blocks {
            let no = no as usize;
            if no < index.len() {
                garbage += index[no].file_bytes();
                index[no] = meta;
            } else if no == index.len() {
                index.push(meta);
            } else {
                return Err(StorageError::Corrupt(Corruption {
                    path,
                    offset: meta.offset + 8,
                    expected: format!("block number <= {}", index.len()),
                    found: no.to_string(),
                }));
            }
        }
        for (b, meta) in index.iter().enumerate() {
            let last = b + 1 == index.len();
            if !(meta.raw_len as usize).is_multiple_of(width)
                || (!last && meta.raw_len as usize != block_bytes)
                || meta.raw_len as usize > block_bytes
            {
                return Err(StorageError::Corrupt(Corruption {
                    path,
                    offset: meta.offset + 16,
                    expected: format!(
                        "{} raw bytes in block {b}",
                        if last {
                            "a multiple of the width, at most the block size,"
                        } else {
                            "the full block size of"
                        }
                    ),
                    found: meta.raw_len.to_string(),
                }));
            }
        }
        let nblocks = index.len() as u64;
        let last_raw = index.last().map_or(0, |m| m.raw_len as usize);
        let mut v = Self::assemble(dir, name, width, shift, opts, seg, index, account, budget)?;
        v.cold.get_mut().garbage = garbage;
        v.sealed = nblocks;
        v.len = match nblocks {
            0 => 0,
            n => ((n - 1) << shift) + (last_raw / width) as u64,
        };
        if let Some(m) = mark {
            if m.records != v.len {
                return Err(StorageError::Corrupt(Corruption {
                    path: v.path(),
                    offset: m.segment_len,
                    expected: format!("{} records (the recorded mark)", m.records),
                    found: format!("{} records", v.len),
                }));
            }
        }
        if nblocks > 0 && last_raw < block_bytes {
            // The partial last block becomes hot again so that appends continue it.
            let b = nblocks - 1;
            let mut buf = Vec::new();
            {
                let cold = v.cold.get_mut();
                let meta = cold.index[b as usize];
                cold.reader
                    .read(cold.seg.path(), cold.seg.file(), &meta, &mut buf)?;
            }
            let at = v.geometry().hot_start(b);
            v.window.bytes_mut()[at..at + buf.len()].copy_from_slice(&buf);
            v.sealed = b;
        }
        v.update_account();
        Ok(v)
    }

    #[inline(always)]
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Appends a record; returns its index.
    pub fn push(&mut self, rec: &[u8]) -> Result<u64, StorageError> {
        self.check_width(rec)?;
        let i = self.len;
        let b = i >> self.shift;
        if b - self.sealed == self.hot_blocks {
            if self.seal_threads > 1 && self.hot_blocks > 1 {
                self.seal_many(self.hot_blocks / 2)?;
            } else {
                self.seal_oldest()?;
            }
        }
        let at = self.hot_offset(i);
        self.window.bytes_mut()[at..at + self.width].copy_from_slice(rec);
        self.len += 1;
        if (i + 1) & ((1u64 << self.shift) - 1) == 0 {
            self.update_account();
        }
        Ok(i)
    }

    /// Copies record `i` into `out` (whose length must be the record width).
    #[inline]
    pub fn get(&self, i: u64, out: &mut [u8]) -> Result<(), StorageError> {
        self.with(i, |r| out.copy_from_slice(r))
    }

    /// Calls `f` with record `i` in place: a slice of the hot window or of a cached block.
    #[inline(always)]
    pub fn with<R>(&self, i: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, StorageError> {
        let (b, off) = match self.locate(i)? {
            Place::Hot(at) => return Ok(f(&self.window.bytes()[at..at + self.width])),
            Place::Sealed { block, offset } => (block, offset),
        };
        let mut cold = self.cold.borrow_mut();
        let s = cold.load(b)?;
        Ok(f(&cold.cache.data(s)[off..off + self.width]))
    }

    /// Like [`SegVec::with`], for reads that walk the vector in order: a sealed block that is
    /// not cached is read into a private one-block buffer instead of the cache.
    #[inline]
    pub fn with_sequential<R>(
        &self,
        i: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        let (b, off) = match self.locate(i)? {
            Place::Hot(at) => return Ok(f(&self.window.bytes()[at..at + self.width])),
            Place::Sealed { block, offset } => (block, offset),
        };
        let mut cold = self.cold.borrow_mut();
        let cold = &mut *cold;
        if let Some(s) = cold.cache.get(b) {
            return Ok(f(&cold.cache.data(s)[off..off + self.width]));
        }
        if cold.stream.0 != b {
            let meta = cold.index[b as usize];
            cold.stream.0 = u64::MAX;
            cold.reader
                .read(cold.seg.path(), cold.seg.file(), &meta, &mut cold.stream.1)?;
            cold.stream.0 = b;
        }
        Ok(f(&cold.stream.1[off..off + self.width]))
    }

    /// Overwrites record `i` (hot or sealed; see the module docs for how sealed records are
    /// updated).
    pub fn set(&mut self, i: u64, rec: &[u8]) -> Result<(), StorageError> {
        self.check_width(rec)?;
        let (b, off) = match self.locate(i)? {
            Place::Hot(at) => {
                self.window.bytes_mut()[at..at + self.width].copy_from_slice(rec);
                return Ok(());
            }
            Place::Sealed { block, offset } => (block, offset),
        };
        let cold = self.cold.get_mut();
        if cold.stream.0 == b {
            cold.stream.0 = u64::MAX;
        }
        let s = cold.load(b)?;
        cold.cache.data_mut(s)[off..off + self.width].copy_from_slice(rec);
        cold.cache.slots[s].dirty = Dirty::Dirty;
        Ok(())
    }

    /// Whether `set(i)` would cost no disk write of its own: record `i` is hot, or its block
    /// is cached and already dirty (so it is written back once whatever more changes in it).
    pub fn set_is_free(&self, i: u64) -> bool {
        match self.locate(i) {
            Ok(Place::Hot(_)) => true,
            Ok(Place::Sealed { block, .. }) => {
                let cold = self.cold.borrow();
                cold.cache
                    .get(block)
                    .is_some_and(|s| cold.cache.slots[s].dirty == Dirty::Dirty)
            }
            Err(_) => false,
        }
    }

    /// Streams records `[0, len)` in order to `f`, reading sealed blocks without disturbing
    /// the cache (used to rebuild an index). Cached dirty blocks are seen with their updates.
    pub fn scan(&self, mut f: impl FnMut(u64, &[u8])) -> Result<(), StorageError> {
        let mut buf = Vec::new();
        let mut i = 0u64;
        let rpb = 1u64 << self.shift;
        for b in 0..self.sealed {
            let mut cold = self.cold.borrow_mut();
            let cold = &mut *cold;
            let data: &[u8] = match cold.cache.get(b) {
                Some(s) => cold.cache.data(s),
                None => {
                    let meta = cold.index[b as usize];
                    cold.reader
                        .read(cold.seg.path(), cold.seg.file(), &meta, &mut buf)?;
                    &buf
                }
            };
            for r in data.chunks_exact(self.width) {
                f(i, r);
                i += 1;
            }
        }
        debug_assert_eq!(i, self.sealed * rpb);
        while i < self.len {
            let at = self.hot_offset(i);
            f(i, &self.window.bytes()[at..at + self.width]);
            i += 1;
        }
        Ok(())
    }

    /// Writes every dirty cached block and every hot record to the segment file and syncs
    /// it. The returned mark reopens the vector as it is now ([`SegVec::open`]).
    pub fn flush(&mut self) -> Result<VecMark, StorageError> {
        let g = self.geometry();
        let cold = self.cold.get_mut();
        cold.write_back_all()?;
        let nblocks = self.len.div_ceil(1u64 << self.shift);
        for b in self.sealed..nblocks {
            let start = g.hot_start(b);
            let records = (self.len - (b << self.shift)).min(1 << self.shift) as usize;
            let raw = &self.window.bytes()[start..start + records * self.width];
            let meta = cold.seg.append(b, raw)?;
            cold.put_index(b, meta);
        }
        cold.seg.sync()?;
        let mark = VecMark {
            records: self.len,
            segment_len: cold.seg.len(),
        };
        self.update_account();
        Ok(mark)
    }

    /// Changes the cache size when running without a budget (the budget decides otherwise).
    pub fn set_cache_bytes(&mut self, bytes: u64) -> Result<(), StorageError> {
        self.cache_bytes = bytes;
        self.trim_cache()
    }

    /// Evicts cached blocks until the cache fits what it may hold now (call before another
    /// structure claims budget).
    pub fn trim_cache(&mut self) -> Result<(), StorageError> {
        let cap = self.cap_slots();
        let cold = self.cold.get_mut();
        cold.cache.cap = cap;
        cold.shrink(cap)?;
        self.update_account();
        Ok(())
    }

    /// Bytes of cached blocks beyond the one a budgeted cache always keeps: what
    /// [`SegVec::trim_cache`] gives back when the budget's headroom is gone.
    pub fn spare_cache_bytes(&self) -> u64 {
        let cold = self.cold.borrow();
        cold.cache
            .resident_bytes()
            .saturating_sub(self.block_bytes as u64)
    }

    /// Lowest RAM this vector needs whatever the budget: the hot window and one cached block.
    pub fn min_ram_bytes(&self) -> u64 {
        (self.hot_blocks + 1) * self.block_bytes as u64
    }

    /// Bytes resident in RAM: the touched part of the hot window, the cache, the block index.
    pub fn ram_bytes(&self) -> u64 {
        let cold = self.cold.borrow();
        let blocks = self.len.div_ceil(1u64 << self.shift).min(self.hot_blocks);
        blocks * self.block_bytes as u64
            + cold.cache.resident_bytes()
            + (cold.index.capacity() * std::mem::size_of::<BlockMeta>()) as u64
            + (cold.cache.slot_of.capacity() * 4) as u64
            + cold.stream.1.capacity() as u64
    }

    /// Raw bytes of a block (a power of two records).
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// Bytes of the hot window (its blocks, written or not).
    pub fn hot_bytes(&self) -> usize {
        self.window.len()
    }

    /// Bytes on disk: the segment file (garbage included) and the hot file.
    pub fn disk_bytes(&self) -> u64 {
        self.cold.borrow().seg.len() + self.window.len() as u64
    }

    /// File bytes of superseded block versions.
    pub fn garbage_bytes(&self) -> u64 {
        self.cold.borrow().garbage
    }

    /// Cache hits and misses on sealed records.
    pub fn cache_counts(&self) -> (u64, u64) {
        let c = self.cold.borrow();
        (c.cache.hits, c.cache.misses)
    }

    /// The segment file's path.
    pub fn path(&self) -> PathBuf {
        self.cold.borrow().seg.path().to_path_buf()
    }

    /// Publishes RAM/disk figures to the account (and so to the budget and the stats).
    pub fn update_account(&self) {
        let cap = self.cap_slots();
        self.cold.borrow_mut().cache.cap = cap;
        let sealed_raw = self.sealed.min(self.len >> self.shift) * self.block_bytes as u64;
        let sealed_disk = self.cold.borrow().seg.len();
        self.account.set(
            self.ram_bytes(),
            sealed_disk,
            sealed_raw.min(self.len * self.width as u64),
        );
    }

    pub fn account(&self) -> &Account {
        &self.account
    }

    /// Where record `i` lives: in the hot window (byte offset) or in a sealed block.
    #[inline(always)]
    fn locate(&self, i: u64) -> Result<Place, StorageError> {
        if i >= self.len {
            return Err(self.out_of_range(i));
        }
        Ok(self.geometry().place(i, self.sealed))
    }

    #[inline(always)]
    fn hot_offset(&self, i: u64) -> usize {
        self.geometry().hot_offset(i)
    }

    #[inline(always)]
    fn geometry(&self) -> Geometry {
        Geometry {
            width: self.width,
            shift: self.shift,
            block_bytes: self.block_bytes,
            hot_blocks: self.hot_blocks,
        }
    }

    /// Cache slots allowed now (recomputed whenever the account is updated, i.e. once per
    /// sealed block, not per read).
    fn cap_slots(&self) -> usize {
        let bytes = match &self.budget {
            Some(b) => match b.headroom(&self.account) {
                Some(room) => {
                    let cold = self.cold.borrow();
                    let own_fixed = self.len.div_ceil(1u64 << self.shift).min(self.hot_blocks)
                        * self.block_bytes as u64
                        + (cold.index.capacity() * std::mem::size_of::<BlockMeta>()) as u64
                        + (cold.cache.slot_of.capacity() * 4) as u64
                        + self.block_bytes as u64
                        + (cold.cache.chunks.len() as u64 + 1) * 4096;
                    room.saturating_sub(own_fixed)
                }
                None => self.cache_bytes,
            },
            None => self.cache_bytes,
        };
        ((bytes / self.block_bytes as u64) as usize).max(1)
    }

    fn seal_oldest(&mut self) -> Result<(), StorageError> {
        let b = self.sealed;
        let start = self.geometry().hot_start(b);
        let cold = self.cold.get_mut();
        let raw = &self.window.bytes()[start..start + self.block_bytes];
        let meta = cold.seg.append(b, raw)?;
        cold.put_index(b, meta);
        // Recently sealed blocks are the likeliest to be read again (BFS duplicates are mostly
        // recent states): keep a copy in the cache, saving a decompression.
        cold.insert_clean(b, raw)?;
        self.sealed += 1;
        self.update_account();
        Ok(())
    }

    /// Seals the `k` oldest hot blocks (all full), compressing them on
    /// [`SegVec::seal_threads`] threads and writing them in order: the same file as `k`
    /// calls of [`SegVec::seal_oldest`].
    fn seal_many(&mut self, k: u64) -> Result<(), StorageError> {
        let (first, g) = (self.sealed, self.geometry());
        let window = self.window.bytes();
        let raw = move |b: u64| &window[g.hot_start(b)..g.hot_start(b) + g.block_bytes];
        let cold = self.cold.get_mut();
        let per = k.div_ceil(self.seal_threads as u64).max(1);
        let format = cold.seg.format();
        let encoders = (0..k.div_ceil(per))
            .map(|_| cold.seg.encoder())
            .collect::<Result<Vec<_>, _>>()?;
        type Encoded = Result<Vec<(Vec<u8>, BlockMeta)>, StorageError>;
        // Each thread's encoder, and what it encoded (on the process's worker threads).
        let mut shares: Vec<_> = encoders.into_iter().map(|enc| (enc, None)).collect();
        crate::par::each(&mut shares, |t, (enc, out): &mut (_, Option<Encoded>)| {
            let blocks = first + t as u64 * per..(first + (t as u64 + 1) * per).min(first + k);
            *out = Some(
                blocks
                    .map(|b| {
                        let mut out = Vec::new();
                        let meta = format.encode(enc, b, raw(b), &mut out)?;
                        Ok((out, meta))
                    })
                    .collect(),
            );
        });
        let encoded = shares.into_iter().filter_map(|(_, out)| out);
        for part in encoded {
            for (out, meta) in part? {
                // Each block is sealed as soon as it is written: an error leaves a
                // consistent vector (the rest stays hot).
                let b = self.sealed;
                let meta = cold.seg.write_encoded(&out, meta)?;
                cold.put_index(b, meta);
                cold.insert_clean(b, raw(b))?;
                self.sealed = b + 1;
            }
        }
        self.update_account();
        Ok(())
    }

    /// Compresses sealed blocks on `threads` threads (a vector written in bursts, e.g. a
    /// mirror brought up to date at a checkpoint while the other threads wait); 1 (the
    /// default) seals one block at a time on the pushing thread.
    pub fn set_seal_threads(&mut self, threads: usize) {
        self.seal_threads = threads.max(1);
    }

    fn check_width(&self, rec: &[u8]) -> Result<(), StorageError> {
        if rec.len() != self.width {
            return Err(StorageError::Invalid(format!(
                "{}: record of {} bytes in a vector of {}-byte records",
                self.hot_path.display(),
                rec.len(),
                self.width
            )));
        }
        Ok(())
    }

    fn out_of_range(&self, i: u64) -> StorageError {
        StorageError::Invalid(format!(
            "{}: record {i} out of range (length {})",
            self.hot_path.display(),
            self.len
        ))
    }
}

/// A read-only view of a [`SegVec`] that several threads read at once (parallel BFS under a
/// budget): the hot window, the sealed blocks' index and file, and the block cache as it is.
/// It holds the vector borrowed mutably (past its `RefCell`), so nothing changes under the
/// readers and a cache hit takes no lock. A sealed block the cache lacks is read by the
/// reading thread into its own [`SegReader`]; [`SegVec::adopt`] puts those blocks into the
/// cache once the threads are done, so the cache follows what they read.
#[derive(Clone, Copy)]
pub struct SegView<'a> {
    geometry: Geometry,
    len: u64,
    sealed: u64,
    window: &'a [u8],
    index: &'a [BlockMeta],
    file: &'a File,
    path: &'a Path,
    header: &'a Header,
    cache: &'a Cache,
    /// Blocks each reader keeps ([`SegView::with_reader_blocks`]).
    reader_blocks: usize,
}

/// One thread's reader of [`SegView`]s: the blocks it read itself (replaced round-robin)
/// and a decompressor. Its blocks belong to the view's vector as it was: hand them to
/// [`SegVec::adopt`] (which empties it) before the vector changes.
#[derive(Default)]
pub struct SegReader {
    reader: Option<BlockReader>,
    blocks: Vec<(u64, Vec<u8>)>,
    next: usize,
    /// Sealed reads that found their block in the cache, and those that found it neither
    /// there nor in `blocks` (the cache's statistics, added at [`SegVec::adopt`]).
    hits: u64,
    misses: u64,
}

/// Blocks a [`SegReader`] keeps: misses are rare (a few thousand in a run of millions of
/// reads, on the benchmark nets), so a few blocks catch a part's repeated reads of one.
const READER_BLOCKS: usize = 8;

/// RAM a [`SegReader`]'s decompressor holds (its context is about 100 KiB).
const READER_CONTEXT_BYTES: u64 = 128 << 10;

impl SegReader {
    /// RAM the reader holds (counted by whoever owns it).
    pub fn ram_bytes(&self) -> u64 {
        let blocks: usize = self.blocks.iter().map(|(_, b)| b.capacity()).sum();
        blocks as u64
            + if self.reader.is_some() {
                READER_CONTEXT_BYTES
            } else {
                0
            }
    }

    /// Forgets the blocks read (keeping their buffers) and the counts, instead of handing
    /// them to [`SegVec::adopt`]: for reads in id order, whose blocks are not worth caching
    /// (as [`SegVec::with_sequential`] does).
    pub fn forget(&mut self) {
        for (b, _) in &mut self.blocks {
            *b = u64::MAX;
        }
        self.next = 0;
        (self.hits, self.misses) = (0, 0);
    }
}

impl SegVec {
    /// The most RAM a [`SegReader`] of this vector holds.
    pub fn reader_bytes(&self) -> u64 {
        (READER_BLOCKS * self.geometry().block_bytes) as u64 + READER_CONTEXT_BYTES
    }

    /// A view that threads may read at once (see [`SegView`]).
    pub fn view(&mut self) -> SegView<'_> {
        let geometry = self.geometry();
        let cold = self.cold.get_mut();
        SegView {
            geometry,
            len: self.len,
            sealed: self.sealed,
            window: self.window.bytes(),
            index: &cold.index,
            file: cold.seg.file(),
            path: cold.seg.path(),
            header: cold.seg.header(),
            cache: &cold.cache,
            reader_blocks: READER_BLOCKS,
        }
    }

    /// Puts the blocks `r` read through a view of this vector into the block cache (the
    /// threads' misses, so that the next view finds them) and empties `r`'s blocks. Call
    /// it for every reader before the vector changes.
    pub fn adopt(&mut self, r: &mut SegReader) -> Result<(), StorageError> {
        let cold = self.cold.get_mut();
        cold.cache.hits += std::mem::take(&mut r.hits);
        cold.cache.misses += std::mem::take(&mut r.misses);
        for (b, bytes) in &mut r.blocks {
            let b = std::mem::replace(b, u64::MAX);
            if b != u64::MAX && cold.cache.get(b).is_none() && (b as usize) < cold.index.len() {
                cold.insert_clean(b, bytes)?;
                if let Some(s) = cold.cache.get(b) {
                    *cold.cache.slots[s].referenced.get_mut() = true;
                }
            }
        }
        r.next = 0;
        Ok(())
    }
}

impl SegView<'_> {
    /// A view whose readers keep `n` blocks (at least [`READER_BLOCKS`]), placed by block
    /// number: for reads that wander over many blocks while the shared cache cannot take
    /// them (ComBack's replays on the threads of parallel BFS).
    pub fn with_reader_blocks(mut self, n: usize) -> Self {
        self.reader_blocks = n.max(READER_BLOCKS);
        self
    }

    /// The block that holds record `i` (sealed or not): threads that read records by
    /// blocks split their work at these boundaries, so that no two decompress one block.
    #[inline]
    pub fn block_of(&self, i: u64) -> u64 {
        i >> self.geometry.shift
    }

    /// Where record `i` is in RAM now (the hot window or a cached block), if it is: for a
    /// prefetch ahead of the read.
    #[inline]
    pub fn address(&self, i: u64) -> Option<*const u8> {
        if i >= self.len {
            return None;
        }
        match self.geometry.place(i, self.sealed) {
            Place::Hot(at) => Some(self.window[at..].as_ptr()),
            Place::Sealed { block, offset } => {
                let s = self.cache.get(block)?;
                Some(self.cache.data(s)[offset..].as_ptr())
            }
        }
    }

    /// Calls `f` with record `i`: from the hot window, the shared cache (marking the block
    /// used), or a block `r` keeps or reads itself.
    #[inline]
    pub fn with<R>(
        &self,
        r: &mut SegReader,
        i: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StorageError> {
        if i >= self.len {
            return Err(StorageError::Invalid(format!(
                "{}: record {i} out of range (length {})",
                self.path.display(),
                self.len
            )));
        }
        let w = self.geometry.width;
        let (block, rec) = match self.geometry.place(i, self.sealed) {
            Place::Hot(at) => return Ok(f(&self.window[at..at + w])),
            Place::Sealed { block, offset } => (block, offset),
        };
        if let Some(s) = self.cache.get(block) {
            let used = &self.cache.slots[s].referenced;
            // Read before written: a store to a line the other threads read costs more.
            if !used.load(Ordering::Relaxed) {
                used.store(true, Ordering::Relaxed);
            }
            r.hits += 1;
            return Ok(f(&self.cache.data(s)[rec..rec + w]));
        }
        let many = self.reader_blocks > READER_BLOCKS;
        let found = if many {
            // Placed by block number: one compare, whatever the number of blocks.
            let k = block as usize % self.reader_blocks;
            r.blocks
                .get(k)
                .is_some_and(|(b, _)| *b == block)
                .then_some(k)
        } else {
            r.blocks.iter().position(|(b, _)| *b == block)
        };
        let k = match found {
            Some(k) => k,
            None => {
                r.misses += 1;
                let reader = match &mut r.reader {
                    Some(x) => x,
                    None => {
                        let mut x = BlockReader::new(self.path)?;
                        x.set_format(self.header);
                        r.reader.insert(x)
                    }
                };
                let k = if many {
                    if r.blocks.len() < self.reader_blocks {
                        r.blocks
                            .resize_with(self.reader_blocks, || (u64::MAX, Vec::new()));
                    }
                    block as usize % self.reader_blocks
                } else if r.blocks.len() < READER_BLOCKS {
                    r.blocks.push((u64::MAX, Vec::new()));
                    r.blocks.len() - 1
                } else {
                    r.next = (r.next + 1) % READER_BLOCKS;
                    r.next
                };
                let slot = &mut r.blocks[k];
                slot.0 = u64::MAX;
                reader.read(
                    self.path,
                    self.file,
                    &self.index[block as usize],
                    &mut slot.1,
                )?;
                slot.0 = block;
                k
            }
        };
        Ok(f(&r.blocks[k].1[rec..rec + w]))
    }
}

impl Drop for SegVec {
    fn drop(&mut self) {
        // The hot file is scratch: only the segment file (after a flush) is reopened.
        let _ = std::fs::remove_file(&self.hot_path);
    }
}

impl Cold {
    /// Raw length of sealed block `b` (all sealed blocks are full except, after a reopen,
    /// a partial last one, which is hot and never cached).
    fn raw_len(&self, b: u64) -> usize {
        self.index[b as usize].raw_len as usize
    }

    fn put_index(&mut self, b: u64, meta: BlockMeta) {
        let b = b as usize;
        if b < self.index.len() {
            self.garbage += self.index[b].file_bytes();
            self.index[b] = meta;
        } else {
            debug_assert_eq!(b, self.index.len());
            // Grow by an eighth, not by doubling: the index is resident and counted, and a
            // doubled capacity would leave up to half of it unused.
            if self.index.len() == self.index.capacity() {
                self.index.reserve_exact(self.index.len() / 8 + 64);
            }
            self.index.push(meta);
        }
    }

    /// The cache slot holding block `b`, reading it on a miss.
    #[inline]
    fn load(&mut self, b: u64) -> Result<usize, StorageError> {
        if let Some((lb, s)) = self.cache.last {
            if lb == b {
                self.cache.hits += 1;
                return Ok(s);
            }
        }
        if let Some(s) = self.cache.get(b) {
            self.cache.slots[s]
                .referenced
                .store(true, Ordering::Relaxed);
            self.cache.last = Some((b, s));
            self.cache.hits += 1;
            return Ok(s);
        }
        self.cache.misses += 1;
        let s = self.victim()?;
        let meta = self.index[b as usize];
        let read = self.reader.read_into(
            self.seg.path(),
            self.seg.file(),
            &meta,
            self.cache.data_mut(s),
        );
        if let Err(e) = read {
            self.cache.slots[s].block = u64::MAX;
            return Err(e);
        }
        let slot = &mut self.cache.slots[s];
        slot.block = b;
        slot.dirty = Dirty::Clean;
        *slot.referenced.get_mut() = true;
        self.cache.put(b, s);
        self.cache.last = Some((b, s));
        Ok(s)
    }

    /// Puts a copy of block `b`'s raw bytes in the cache.
    fn insert_clean(&mut self, b: u64, raw: &[u8]) -> Result<(), StorageError> {
        let s = self.victim()?;
        self.cache.data_mut(s)[..raw.len()].copy_from_slice(raw);
        let slot = &mut self.cache.slots[s];
        slot.block = b;
        slot.dirty = Dirty::Clean;
        *slot.referenced.get_mut() = false;
        self.cache.put(b, s);
        Ok(())
    }

    /// A free slot (its old block written back if dirty and unmapped); grows the cache up to
    /// `cap` slots and shrinks it to `cap` when the budget fell.
    fn victim(&mut self) -> Result<usize, StorageError> {
        let cap = self.cache.cap.max(1);
        if self.cache.slots.len() > cap {
            self.shrink(cap)?;
        }
        self.cache.last = None;
        if self.cache.slots.len() < cap {
            if self.cache.slots.len() == self.cache.chunks.len() * self.cache.per_chunk {
                let chunk = AnonBlock::new(self.cache.per_chunk * self.block_bytes).map_err(
                    super::segment::io_err(self.seg.path(), "map cache memory for"),
                )?;
                self.cache.chunks.push(chunk);
            }
            self.cache.slots.push(Slot {
                block: u64::MAX,
                dirty: Dirty::Clean,
                referenced: AtomicBool::new(false),
            });
            return Ok(self.cache.slots.len() - 1);
        }
        let n = self.cache.slots.len();
        loop {
            let h = self.cache.hand % n;
            self.cache.hand = (h + 1) % n;
            let slot = &mut self.cache.slots[h];
            if *slot.referenced.get_mut() {
                *slot.referenced.get_mut() = false;
                continue;
            }
            self.evict(h)?;
            return Ok(h);
        }
    }

    /// Writes slot `s` back if dirty and forgets which block it held.
    fn evict(&mut self, s: usize) -> Result<(), StorageError> {
        let b = self.cache.slots[s].block;
        if b == u64::MAX {
            return Ok(());
        }
        if self.cache.slots[s].dirty == Dirty::Dirty {
            let len = self.raw_len(b);
            let meta = self.seg.append(b, &self.cache.data(s)[..len])?;
            self.put_index(b, meta);
            self.cache.slots[s].dirty = Dirty::Clean;
        }
        self.cache.slot_of[b as usize] = NO_SLOT;
        self.cache.slots[s].block = u64::MAX;
        Ok(())
    }

    fn shrink(&mut self, cap: usize) -> Result<(), StorageError> {
        let cap = cap.max(1);
        while self.cache.slots.len() > cap {
            let s = self.cache.slots.len() - 1;
            self.evict(s)?;
            self.cache.slots.pop();
        }
        let chunks = self.cache.slots.len().div_ceil(self.cache.per_chunk);
        self.cache.chunks.truncate(chunks);
        self.cache.hand = 0;
        self.cache.last = None;
        Ok(())
    }

    fn write_back_all(&mut self) -> Result<(), StorageError> {
        for s in 0..self.cache.slots.len() {
            let slot = &self.cache.slots[s];
            if slot.dirty == Dirty::Dirty && slot.block != u64::MAX {
                let b = slot.block;
                let len = self.raw_len(b);
                let meta = self.seg.append(b, &self.cache.data(s)[..len])?;
                self.put_index(b, meta);
                self.cache.slots[s].dirty = Dirty::Clean;
            }
        }
        Ok(())
    }
}
