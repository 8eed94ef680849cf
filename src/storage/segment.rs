//! Segment files: an append-only sequence of zstd-compressed blocks behind a fixed header.
//!
//! Byte layout (little-endian; also in docs/FORMATS.md):
//!
//! ```text
//! file header, 64 bytes
//!   0  magic  "SPILLSEG"            8
//!   8  format version (1)         u16
//!  10  layout (1 fixed-width records, 2 byte stream)   u8
//!  11  compression id (1 = zstd, 2 = u32 columns, 3 = zstd or byte columns per block) u8
//!  12  checksum id (1 = CRC-32/ISO-HDLC) u8
//!  13  container kind (1 vec, 2 queue, 3 stack) u8
//!  14  hash id (0 none, 1 xxh3-64 seed 0) u8
//!  15  block filter (0 none, 1 packed fields; see `filter`) u8
//!  16  record width (0 for streams) u32
//!  20  raw block size            u32
//!  24  first block number        u64
//!  32  filter parameter (packed fields: low bits) u8
//!  33  reserved (0)              27 bytes
//!  60  CRC-32 of bytes 0..60     u32
//! blocks, each a 32-byte header then `comp_len` bytes of payload (a zstd frame, u32
//! columns — see [`Codec::Columns`] — or, in a file of compression 3, either a zstd frame or
//! byte columns, told apart by their first four bytes: see [`Codec::Adaptive`])
//!   0  magic "SBLK"                4
//!   4  reserved (0)              u32
//!   8  block number              u64
//!  16  raw (decompressed) length u32
//!  20  compressed length         u32
//!  24  CRC-32 of the compressed payload u32
//!  28  CRC-32 of header bytes 0..28    u32
//! ```
//!
//! A block number may appear more than once: the later copy supersedes the earlier one (a
//! rewritten block of a vector, or a partial tail block sealed again after it grew). Files are
//! only appended to, except a stack, which truncates the blocks it pops. A segment is *sealed*
//! at a length: everything up to that length is complete and checksummed, so a checkpoint can
//! record `(path, length)` and reopen the file there instead of copying it.

use super::filter::Filter;
use crate::error::{Corruption, StorageError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes this process has read from and written to segment files (block headers and
/// compressed payloads), for `--metrics`. Process-wide: one relaxed add per block of
/// about 32 KiB raw, which costs nothing next to compressing the block.
static BYTES_READ: AtomicU64 = AtomicU64::new(0);
static BYTES_WRITTEN: AtomicU64 = AtomicU64::new(0);

/// (read, written) bytes of segment-file I/O by this process so far.
pub fn io_bytes() -> (u64, u64) {
    (
        BYTES_READ.load(Ordering::Relaxed),
        BYTES_WRITTEN.load(Ordering::Relaxed),
    )
}

pub const MAGIC: &[u8; 8] = b"SPILLSEG";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: u64 = 64;
pub const BLOCK_HEADER_LEN: u64 = 32;
const BLOCK_MAGIC: &[u8; 4] = b"SBLK";
const COMPRESSION_ZSTD: u8 = 1;
const COMPRESSION_COLUMNS: u8 = 2;
const COMPRESSION_ADAPTIVE: u8 = 3;
/// First bytes of a byte-columns payload (a zstd frame starts `28 b5 2f fd`).
const BYTE_COLUMNS_MAGIC: &[u8; 4] = b"SBYC";

/// How a segment's blocks are compressed (header byte 11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Codec {
    /// A zstd frame per block.
    #[default]
    Zstd,
    /// Fixed-width records whose width is a multiple of 4, as `width / 4` little-endian u32
    /// columns, each stored frame-of-reference: `min: u32 | bits: u8 | the values − min,
    /// bits each, little-endian bit order`, then 8 zero bytes. Decodes several times faster
    /// than a zstd frame of a few KiB (no tables to build), for records of small, locally
    /// similar numbers (ComBack backedges: parent, transition, depth).
    Columns,
    /// Fixed-width records, each block either a zstd frame or *byte columns*, whichever the
    /// writer found better: byte columns when they take at most 5/4 of the frame's bytes.
    /// Byte columns (see [`byte_columns_encode`]) store each byte position of the records
    /// frame-of-reference, so wide state vectors whose bytes are mostly constant within a
    /// block (Petri net markings: 80% of Anderson-PT-06's 229 columns in a block of 128)
    /// decode several times faster than a zstd frame: the block is the first record's
    /// minimums copied down, then the few varying columns patched. Random reads of sealed
    /// states (a disk-resident index's compares) decompress a block each, so that speed is
    /// what they cost.
    Adaptive,
}

/// How a block of [`Codec::Adaptive`] would be stored as byte columns: each column's
/// `(minimum, bits)`, and the payload's length.
#[derive(Default)]
pub struct ByteColumns {
    cols: Vec<(u8, u8)>,
    len: usize,
}

impl ByteColumns {
    /// Plans `raw` (whole records of `width` bytes, at least one): one pass in record order,
    /// the per-column minimum and maximum updated a record at a time (vectorised).
    pub fn plan(&mut self, raw: &[u8], width: usize) {
        let mut lo = raw[..width].to_vec();
        let mut hi = lo.clone();
        for rec in raw.chunks_exact(width).skip(1) {
            for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(rec) {
                *l = (*l).min(v);
                *h = (*h).max(v);
            }
        }
        let n = raw.len() / width;
        self.cols.clear();
        self.len = BYTE_COLUMNS_MAGIC.len() + 2 * width + 8;
        for (&l, &h) in lo.iter().zip(&hi) {
            let bits = (8 - (h - l).leading_zeros()) as u8;
            self.cols.push((l, bits));
            self.len += (n * bits as usize).div_ceil(8);
        }
    }

    /// Payload bytes of the planned block.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is planned.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty()
    }
}

/// Appends the planned byte columns of `raw` (see [`ByteColumns::plan`]) to `out`:
///
/// ```text
///   "SBYC"
///   width × (min: u8, bits: u8)          bits in 0..=8
///   for each column with bits > 0: the records' value − min, bits each, LE bit order,
///   padded to a byte
///   8 zero bytes
/// ```
pub fn byte_columns_encode(raw: &[u8], width: usize, plan: &ByteColumns, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(BYTE_COLUMNS_MAGIC);
    for &(l, b) in &plan.cols {
        out.push(l);
        out.push(b);
    }
    for (j, &(l, bits)) in plan.cols.iter().enumerate() {
        if bits == 0 {
            continue;
        }
        let values = raw.chunks_exact(width).map(|rec| (rec[j] - l) as u64);
        pack_bits(values, bits as u32, out);
    }
    out.extend_from_slice(&[0u8; 8]);
    debug_assert_eq!(out.len() - start, plan.len);
}

/// Appends `values` (each below 2^`bits`, `bits` ≤ 32), `bits` each, packed from the least
/// significant bit of the first byte up and padded to a byte.
fn pack_bits(values: impl Iterator<Item = u64>, bits: u32, out: &mut Vec<u8>) {
    let mut acc = 0u64;
    let mut have = 0u32;
    for v in values {
        acc |= v << have;
        have += bits;
        while have >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            have -= 8;
        }
    }
    if have > 0 {
        out.push(acc as u8);
    }
}

/// Decodes a byte-columns payload into `out` (whole records of `width`); false if the
/// payload is malformed.
pub fn byte_columns_decode(comp: &[u8], width: usize, out: &mut [u8]) -> bool {
    let table = BYTE_COLUMNS_MAGIC.len();
    let data = table + 2 * width;
    if width == 0
        || out.is_empty()
        || !out.len().is_multiple_of(width)
        || comp.len() < data + 8
        || &comp[..table] != BYTE_COLUMNS_MAGIC
    {
        return false;
    }
    let n = out.len() / width;
    // Every record starts as the minimums; then the varying columns are patched in.
    for (j, o) in out[..width].iter_mut().enumerate() {
        *o = comp[table + 2 * j];
    }
    let mut done = width;
    while done < out.len() {
        let k = done.min(out.len() - done);
        out.copy_within(..k, done);
        done += k;
    }
    let mut pos = data;
    for j in 0..width {
        let (min, bits) = (comp[table + 2 * j], comp[table + 2 * j + 1] as usize);
        if bits == 0 {
            continue;
        }
        if bits > 8 {
            return false;
        }
        let bytes = (n * bits).div_ceil(8);
        // Every 2-byte read below stays inside the payload: the 8 zero bytes at its end.
        if pos + bytes + 8 > comp.len() {
            return false;
        }
        let col = &comp[pos..pos + bytes + 8];
        // Record i's byte j is at i·width + j (stepped, not divided or chunked: this loop
        // is what a sealed read costs).
        let mut at = j;
        if bits == 1 {
            // The common case (a place holding 0 or 1 token).
            for i in 0..n {
                out[at] = min.wrapping_add((col[i >> 3] >> (i & 7)) & 1);
                at += width;
            }
        } else {
            let mask = (1u16 << bits) - 1;
            for i in 0..n {
                let bit = i * bits;
                let w = u16::from_le_bytes([col[bit / 8], col[bit / 8 + 1]]);
                out[at] = min.wrapping_add(((w >> (bit % 8)) & mask) as u8);
                at += width;
            }
        }
        pos += bytes;
    }
    pos + 8 == comp.len()
}

/// Encodes `raw` (whole records of `width` bytes, `width % 4 == 0`) as [`Codec::Columns`].
pub fn columns_encode(raw: &[u8], width: usize, out: &mut Vec<u8>) {
    let n = raw.len() / width;
    let col = |i: usize, j: usize| {
        u32::from_le_bytes(
            raw[i * width + 4 * j..i * width + 4 * j + 4]
                .try_into()
                .unwrap(),
        )
    };
    for j in 0..width / 4 {
        let (mut lo, mut hi) = (u32::MAX, 0u32);
        for i in 0..n {
            let v = col(i, j);
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if n == 0 {
            lo = 0;
            hi = 0;
        }
        let bits = 32 - (hi - lo).leading_zeros();
        out.extend_from_slice(&lo.to_le_bytes());
        out.push(bits as u8);
        pack_bits((0..n).map(|i| (col(i, j) - lo) as u64), bits, out);
    }
    out.extend_from_slice(&[0u8; 8]);
}

/// Decodes a [`Codec::Columns`] payload into `out` (`out.len()` bytes: whole records of
/// `width`); false if the payload is malformed.
pub fn columns_decode(comp: &[u8], width: usize, out: &mut [u8]) -> bool {
    if width == 0 || !width.is_multiple_of(4) || !out.len().is_multiple_of(width) {
        return false;
    }
    let n = out.len() / width;
    let mut pos = 0usize;
    for j in 0..width / 4 {
        if pos + 5 > comp.len() {
            return false;
        }
        let lo = u32::from_le_bytes(comp[pos..pos + 4].try_into().unwrap());
        let bits = comp[pos + 4] as usize;
        pos += 5;
        if bits > 32 {
            return false;
        }
        let bytes = (n * bits).div_ceil(8);
        // Every 8-byte read below stays inside the payload: the 8 zero bytes at its end.
        if pos + bytes + 8 > comp.len() {
            return false;
        }
        let data = &comp[pos..];
        let mask = if bits == 32 {
            u32::MAX as u64
        } else {
            (1u64 << bits) - 1
        };
        for i in 0..n {
            let bit = i * bits;
            let w = u64::from_le_bytes(data[bit / 8..bit / 8 + 8].try_into().unwrap());
            let v = lo.wrapping_add(((w >> (bit % 8)) & mask) as u32);
            out[i * width + 4 * j..i * width + 4 * j + 4].copy_from_slice(&v.to_le_bytes());
        }
        pos += bytes;
    }
    pos + 8 == comp.len()
}
const CHECKSUM_CRC32: u8 = 1;
/// zstd level for blocks: the fastest levels compress state vectors well and keep sealing cheap.
pub const ZSTD_LEVEL: i32 = 1;
/// Largest raw block accepted when reading (larger claims are corruption).
pub const MAX_BLOCK: u32 = 1 << 26;

/// How a segment's bytes are divided into records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Records of one width; a block holds a whole number of records.
    Fixed { width: u32 },
    /// A byte stream of length-prefixed records that may straddle blocks.
    Stream,
}

/// Which container owns the segment (checked on open, so a queue is never read as a vector).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Vec = 1,
    Queue = 2,
    Stack = 3,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Vec),
            2 => Some(Kind::Queue),
            3 => Some(Kind::Stack),
            _ => None,
        }
    }
}

/// Which hash function produced the records, for files that store hashes (so a file is
/// never read back with a different hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashId {
    /// The records are not hashes.
    None = 0,
    /// xxh3-64 with seed 0 (`store::full::state_hash`).
    Xxh3Seed0 = 1,
}

/// What the file header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub codec: Codec,
    pub hash: HashId,
    pub layout: Layout,
    pub block_bytes: u32,
    pub first_block: u64,
    /// Transform of each block's raw bytes before compression.
    pub filter: Filter,
}

impl Header {
    /// The record width (0 for streams).
    pub fn width(&self) -> usize {
        match self.layout {
            Layout::Fixed { width } => width as usize,
            Layout::Stream => 0,
        }
    }

    fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut h = [0u8; HEADER_LEN as usize];
        h[0..8].copy_from_slice(MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        let (layout, width) = match self.layout {
            Layout::Fixed { width } => (1u8, width),
            Layout::Stream => (2u8, 0),
        };
        h[10] = layout;
        h[11] = match self.codec {
            Codec::Zstd => COMPRESSION_ZSTD,
            Codec::Columns => COMPRESSION_COLUMNS,
            Codec::Adaptive => COMPRESSION_ADAPTIVE,
        };
        h[12] = CHECKSUM_CRC32;
        h[13] = self.kind as u8;
        h[14] = self.hash as u8;
        (h[15], h[32]) = self.filter.encode();
        h[16..20].copy_from_slice(&width.to_le_bytes());
        h[20..24].copy_from_slice(&self.block_bytes.to_le_bytes());
        h[24..32].copy_from_slice(&self.first_block.to_le_bytes());
        let crc = crc32fast::hash(&h[0..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        h
    }

    fn decode(path: &Path, h: &[u8; HEADER_LEN as usize]) -> Result<Header, StorageError> {
        let corrupt = corrupt_at(path);
        if &h[0..8] != MAGIC {
            return Err(corrupt(
                0,
                format!("magic {:?}", String::from_utf8_lossy(MAGIC)),
                format!("{:02x?}", &h[0..8]),
            ));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != VERSION {
            return Err(StorageError::Version {
                path: path.to_path_buf(),
                found: version,
                supported: VERSION,
            });
        }
        let stored = u32::from_le_bytes(h[60..64].try_into().unwrap());
        let computed = crc32fast::hash(&h[0..60]);
        if stored != computed {
            return Err(corrupt(
                60,
                format!("header checksum {computed:#010x}"),
                format!("{stored:#010x}"),
            ));
        }
        let width = u32::from_le_bytes(h[16..20].try_into().unwrap());
        let layout = match h[10] {
            1 if width > 0 => Layout::Fixed { width },
            2 => Layout::Stream,
            other => {
                return Err(corrupt(
                    10,
                    "layout 1 (fixed, width > 0) or 2 (stream)".into(),
                    format!("layout {other}, width {width}"),
                ))
            }
        };
        let codec = match (h[11], layout) {
            (COMPRESSION_ZSTD, _) => Codec::Zstd,
            (COMPRESSION_COLUMNS, Layout::Fixed { width }) if width.is_multiple_of(4) => {
                Codec::Columns
            }
            (COMPRESSION_ADAPTIVE, Layout::Fixed { .. }) => Codec::Adaptive,
            _ => {
                return Err(corrupt(
                    11,
                    "compression id 1 (zstd), 2 (u32 columns, fixed width 4k) or 3 (zstd or \
                     byte columns, fixed width)"
                        .into(),
                    h[11].to_string(),
                ))
            }
        };
        if h[12] != CHECKSUM_CRC32 {
            return Err(corrupt(
                12,
                "checksum id 1 (CRC-32)".into(),
                h[12].to_string(),
            ));
        }
        let kind = Kind::from_u8(h[13])
            .ok_or_else(|| corrupt(13, "kind 1, 2 or 3".into(), h[13].to_string()))?;
        let hash = match h[14] {
            0 => HashId::None,
            1 => HashId::Xxh3Seed0,
            other => {
                return Err(corrupt(
                    14,
                    "hash id 0 (none) or 1 (xxh3-64, seed 0)".into(),
                    other.to_string(),
                ))
            }
        };
        let block_bytes = u32::from_le_bytes(h[20..24].try_into().unwrap());
        if block_bytes == 0 || block_bytes > MAX_BLOCK {
            return Err(corrupt(
                20,
                format!("block size in 1..={MAX_BLOCK}"),
                block_bytes.to_string(),
            ));
        }
        let filter = Filter::decode(h[15], h[32], width)
            .map_err(|e| corrupt(15, "a known block filter".into(), e))?;
        if codec != Codec::Zstd && !filter.is_none() {
            return Err(corrupt(
                15,
                "no block filter with compression 2 or 3 (columns)".into(),
                format!("filter {}", h[15]),
            ));
        }
        Ok(Header {
            kind,
            codec,
            hash,
            layout,
            block_bytes,
            first_block: u64::from_le_bytes(h[24..32].try_into().unwrap()),
            filter,
        })
    }
}

/// Where one block lives in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockMeta {
    /// Offset of the block header in the file.
    pub offset: u64,
    pub raw_len: u32,
    pub comp_len: u32,
    pub crc: u32,
}

impl BlockMeta {
    /// Bytes the block takes in the file, header included.
    pub fn file_bytes(&self) -> u64 {
        BLOCK_HEADER_LEN + self.comp_len as u64
    }
}

/// What happens to a segment container's files in its directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FileLifetime {
    /// The files keep their names until the container is dropped (a flushed vector's
    /// segment file stays): they can be reopened, e.g. by a checkpoint.
    Named,
    /// The files are unlinked right after they are created: the open descriptors and
    /// mappings keep the data, and the kernel frees the space when the process ends, however
    /// it ends (also on SIGINT or SIGKILL). Not reopenable.
    Unlinked,
}

/// Unlinks `path` when `lifetime` says so.
pub fn detach(path: &Path, lifetime: FileLifetime) -> Result<(), StorageError> {
    match lifetime {
        FileLifetime::Named => Ok(()),
        FileLifetime::Unlinked => {
            std::fs::remove_file(path).map_err(io_err(path, "unlink scratch segment file"))
        }
    }
}

pub(crate) fn io_err(
    path: &Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> StorageError {
    let path = path.to_path_buf();
    move |source| StorageError::Io { path, what, source }
}

/// Makes a mismatch at byte `offset` of `path` a [`StorageError::Corrupt`]:
/// `corrupt(offset, expected, found)`.
fn corrupt_at(path: &Path) -> impl Fn(u64, String, String) -> StorageError + '_ {
    move |offset, expected, found| {
        StorageError::Corrupt(Corruption {
            path: path.to_path_buf(),
            offset,
            expected,
            found,
        })
    }
}

/// An open segment file: appends compressed blocks, reads them back by [`BlockMeta`].
pub struct SegmentFile {
    path: PathBuf,
    file: File,
    header: Header,
    /// Append position = the file's length.
    end: u64,
    /// The zstd level of new blocks, and the appending thread's encoder.
    level: i32,
    enc: Encoder,
    out: Vec<u8>,
}

/// A segment file's block format (path for messages, header): blocks can be encoded on
/// several threads with it and written in order with [`SegmentFile::write_encoded`].
#[derive(Clone, Copy)]
pub struct BlockFormat<'a> {
    path: &'a Path,
    header: &'a Header,
}

impl BlockFormat<'_> {
    /// Filters and compresses `raw` as block `no` into `out` (block header included) with
    /// `enc`; the meta's offset is set when the block is written.
    pub fn encode(
        &self,
        enc: &mut Encoder,
        no: u64,
        raw: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<BlockMeta, StorageError> {
        encode_block(self.path, self.header, enc, no, raw, out)
    }
}

/// What encoding a block needs besides the file's header: a zstd context and a buffer for
/// the filtered form of the block. One per thread that encodes ([`SegmentFile::encoder`]).
pub struct Encoder {
    compressor: zstd::bulk::Compressor<'static>,
    filtered: Vec<u8>,
    /// A block's byte-columns plan ([`Codec::Adaptive`]).
    plan: ByteColumns,
}

impl SegmentFile {
    /// Creates (or replaces) `path` with a fresh header.
    pub fn create(path: &Path, header: Header) -> Result<SegmentFile, StorageError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io_err(path, "create segment file"))?;
        file.write_all_at(&header.encode(), 0)
            .map_err(io_err(path, "write segment header"))?;
        Ok(SegmentFile {
            path: path.to_path_buf(),
            file,
            header,
            end: HEADER_LEN,
            level: ZSTD_LEVEL,
            enc: Encoder::new(path, ZSTD_LEVEL)?,
            out: Vec::new(),
        })
    }

    /// Opens `path`, checks its header against `kind`, and scans its blocks up to `len` bytes
    /// (the whole file when `None`; a longer file is truncated to `len`, which is how a sealed
    /// length recorded by a checkpoint is restored). Returns each block's number and place, in
    /// file order. Block headers are checked here; payload checksums on every read.
    pub fn open(
        path: &Path,
        kind: Kind,
        len: Option<u64>,
    ) -> Result<(SegmentFile, Vec<(u64, BlockMeta)>), StorageError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_err(path, "open segment file"))?;
        let file_len = file
            .metadata()
            .map_err(io_err(path, "stat segment file"))?
            .len();
        let end = len.unwrap_or(file_len);
        let truncated = |offset: u64, what: String| {
            StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset,
                expected: what,
                found: format!("end of file at {file_len}"),
            })
        };
        if end > file_len || end < HEADER_LEN {
            return Err(truncated(
                end.min(HEADER_LEN),
                format!("{} bytes", end.max(HEADER_LEN)),
            ));
        }
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut h, 0)
            .map_err(io_err(path, "read segment header"))?;
        let header = Header::decode(path, &h)?;
        if header.kind != kind {
            return Err(StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset: 13,
                expected: format!("a {kind:?} segment"),
                found: format!("a {:?} segment", header.kind),
            }));
        }
        let mut blocks = Vec::new();
        let mut pos = HEADER_LEN;
        while pos < end {
            if end - pos < BLOCK_HEADER_LEN {
                return Err(truncated(pos, "a 32-byte block header".into()));
            }
            let mut bh = [0u8; BLOCK_HEADER_LEN as usize];
            file.read_exact_at(&mut bh, pos)
                .map_err(io_err(path, "read block header"))?;
            let (no, meta) = decode_block_header(path, pos, &bh)?;
            if pos + meta.file_bytes() > end {
                return Err(truncated(
                    pos,
                    format!("a block of {} bytes", meta.file_bytes()),
                ));
            }
            blocks.push((no, meta));
            pos += meta.file_bytes();
        }
        if end < file_len {
            file.set_len(end)
                .map_err(io_err(path, "truncate segment file"))?;
        }
        Ok((
            SegmentFile {
                path: path.to_path_buf(),
                file,
                header,
                end,
                level: ZSTD_LEVEL,
                enc: Encoder::new(path, ZSTD_LEVEL)?,
                out: Vec::new(),
            },
            blocks,
        ))
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length: everything before it is complete blocks.
    pub fn len(&self) -> u64 {
        self.end
    }

    pub fn is_empty(&self) -> bool {
        self.end == HEADER_LEN
    }

    /// Sets the zstd level of the blocks appended from now on (any level gives standard
    /// zstd frames, so the file format does not change). Level −1 and below store literals
    /// uncompressed: a block then decompresses about twice as fast, for records that compress
    /// mostly by matches.
    pub fn set_level(&mut self, level: i32) -> Result<(), StorageError> {
        self.enc = Encoder::new(&self.path, level)?;
        self.level = level;
        Ok(())
    }

    /// An encoder for another thread, at this file's level (see [`BlockFormat::encode`]).
    pub fn encoder(&self) -> Result<Encoder, StorageError> {
        Encoder::new(&self.path, self.level)
    }

    /// Filters and compresses `raw` and appends it as block `no`.
    pub fn append(&mut self, no: u64, raw: &[u8]) -> Result<BlockMeta, StorageError> {
        let (path, header) = (&self.path, &self.header);
        let meta = encode_block(path, header, &mut self.enc, no, raw, &mut self.out)?;
        let out = std::mem::take(&mut self.out);
        let r = self.write_encoded(&out, meta);
        self.out = out;
        r
    }

    /// What encoding a block needs to know of this file, for other threads.
    pub fn format(&self) -> BlockFormat<'_> {
        BlockFormat {
            path: &self.path,
            header: &self.header,
        }
    }

    /// Appends a block encoded by [`BlockFormat::encode`]; returns its meta with its offset.
    pub fn write_encoded(
        &mut self,
        out: &[u8],
        meta: BlockMeta,
    ) -> Result<BlockMeta, StorageError> {
        self.file
            .write_all_at(out, self.end)
            .map_err(io_err(&self.path, "append block"))?;
        BYTES_WRITTEN.fetch_add(out.len() as u64, Ordering::Relaxed);
        let meta = BlockMeta {
            offset: self.end,
            ..meta
        };
        self.end += out.len() as u64;
        Ok(meta)
    }

    /// Drops every byte from `len` on (a stack popping its last blocks).
    pub fn truncate(&mut self, len: u64) -> Result<(), StorageError> {
        self.file
            .set_len(len)
            .map_err(io_err(&self.path, "truncate segment file"))?;
        self.end = len;
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> Result<(), StorageError> {
        self.file
            .sync_data()
            .map_err(io_err(&self.path, "sync segment file"))
    }

    /// A handle for reading blocks through `&self`.
    pub fn file(&self) -> &File {
        &self.file
    }
}

fn encode_block(
    path: &Path,
    header: &Header,
    enc: &mut Encoder,
    no: u64,
    raw: &[u8],
    out: &mut Vec<u8>,
) -> Result<BlockMeta, StorageError> {
    out.clear();
    let comp_len = match (header.codec, header.layout) {
        (Codec::Columns, Layout::Fixed { width }) => {
            out.resize(BLOCK_HEADER_LEN as usize, 0);
            columns_encode(raw, width as usize, out);
            out.len() - BLOCK_HEADER_LEN as usize
        }
        _ => {
            let input = if header.filter.is_none() {
                raw
            } else {
                enc.filtered.clear();
                header.filter.apply(raw, header.width(), &mut enc.filtered);
                &enc.filtered[..]
            };
            let bound = zstd::zstd_safe::compress_bound(input.len());
            out.resize(BLOCK_HEADER_LEN as usize + bound, 0);
            let comp_len = enc
                .compressor
                .compress_to_buffer(input, &mut out[BLOCK_HEADER_LEN as usize..])
                .map_err(io_err(path, "compress block"))?;
            out.truncate(BLOCK_HEADER_LEN as usize + comp_len);
            match (header.codec, header.layout) {
                (Codec::Adaptive, Layout::Fixed { width }) if !raw.is_empty() => {
                    // The frame is made anyway: which is smaller depends on the block.
                    enc.plan.plan(raw, width as usize);
                    if enc.plan.len() * 4 <= comp_len * 5 {
                        out.truncate(BLOCK_HEADER_LEN as usize);
                        byte_columns_encode(raw, width as usize, &enc.plan, out);
                        out.len() - BLOCK_HEADER_LEN as usize
                    } else {
                        comp_len
                    }
                }
                _ => comp_len,
            }
        }
    };
    let crc = crc32fast::hash(&out[BLOCK_HEADER_LEN as usize..]);
    let meta = BlockMeta {
        offset: 0,
        raw_len: raw.len() as u32,
        comp_len: comp_len as u32,
        crc,
    };
    let h = &mut out[..BLOCK_HEADER_LEN as usize];
    h[0..4].copy_from_slice(BLOCK_MAGIC);
    h[4..8].copy_from_slice(&0u32.to_le_bytes());
    h[8..16].copy_from_slice(&no.to_le_bytes());
    h[16..20].copy_from_slice(&meta.raw_len.to_le_bytes());
    h[20..24].copy_from_slice(&meta.comp_len.to_le_bytes());
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    let hcrc = crc32fast::hash(&h[0..28]);
    h[28..32].copy_from_slice(&hcrc.to_le_bytes());
    Ok(meta)
}

impl Encoder {
    /// An encoder compressing at `level` (`path` names the file in an error).
    fn new(path: &Path, level: i32) -> Result<Encoder, StorageError> {
        Ok(Encoder {
            compressor: zstd::bulk::Compressor::new(level)
                .map_err(io_err(path, "start zstd compressor"))?,
            filtered: Vec::new(),
            plan: ByteColumns::default(),
        })
    }
}

fn decode_block_header(
    path: &Path,
    pos: u64,
    bh: &[u8; BLOCK_HEADER_LEN as usize],
) -> Result<(u64, BlockMeta), StorageError> {
    let corrupt = corrupt_at(path);
    if &bh[0..4] != BLOCK_MAGIC {
        return Err(corrupt(
            pos,
            "block magic \"SBLK\"".into(),
            format!("{:02x?}", &bh[0..4]),
        ));
    }
    let stored = u32::from_le_bytes(bh[28..32].try_into().unwrap());
    let computed = crc32fast::hash(&bh[0..28]);
    if stored != computed {
        return Err(corrupt(
            pos + 28,
            format!("block header checksum {computed:#010x}"),
            format!("{stored:#010x}"),
        ));
    }
    let raw_len = u32::from_le_bytes(bh[16..20].try_into().unwrap());
    if raw_len > MAX_BLOCK {
        return Err(corrupt(
            pos + 16,
            format!("raw length <= {MAX_BLOCK}"),
            raw_len.to_string(),
        ));
    }
    Ok((
        u64::from_le_bytes(bh[8..16].try_into().unwrap()),
        BlockMeta {
            offset: pos,
            raw_len,
            comp_len: u32::from_le_bytes(bh[20..24].try_into().unwrap()),
            crc: u32::from_le_bytes(bh[24..28].try_into().unwrap()),
        },
    ))
}

/// Reads and decompresses blocks, checking their checksums. Holds the scratch buffers.
pub struct BlockReader {
    decompressor: zstd::bulk::Decompressor<'static>,
    comp: Vec<u8>,
    /// The codec, filter and record width of the file read (from its header).
    codec: Codec,
    filter: Filter,
    width: usize,
    /// The decompressed, still filtered block.
    filtered: Vec<u8>,
}

impl BlockReader {
    /// A reader of unfiltered blocks.
    pub fn new(path: &Path) -> Result<BlockReader, StorageError> {
        Ok(BlockReader {
            decompressor: zstd::bulk::Decompressor::new()
                .map_err(io_err(path, "start zstd decompressor"))?,
            comp: Vec::new(),
            codec: Codec::Zstd,
            filter: Filter::None,
            width: 0,
            filtered: Vec::new(),
        })
    }

    /// Reads blocks as the file with `header` stores them.
    pub fn set_format(&mut self, header: &Header) {
        self.codec = header.codec;
        self.filter = header.filter;
        self.width = header.width();
    }

    /// Reads block `meta` of `file` (at `path`, for messages) into `out`, which is resized to the
    /// block's raw length. A checksum or length mismatch is a [`StorageError::Corrupt`] naming
    /// the file, the offset and the expected and found values.
    pub fn read(
        &mut self,
        path: &Path,
        file: &File,
        meta: &BlockMeta,
        out: &mut Vec<u8>,
    ) -> Result<(), StorageError> {
        out.resize(meta.raw_len as usize, 0);
        self.read_into(path, file, meta, out)
    }

    /// Like [`BlockReader::read`] into a buffer of at least the block's raw length.
    pub fn read_into(
        &mut self,
        path: &Path,
        file: &File,
        meta: &BlockMeta,
        out: &mut [u8],
    ) -> Result<(), StorageError> {
        if out.len() < meta.raw_len as usize {
            return Err(StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset: meta.offset + 16,
                expected: format!("a raw length of at most {} bytes", out.len()),
                found: meta.raw_len.to_string(),
            }));
        }
        let out = &mut out[..meta.raw_len as usize];
        self.comp.resize(meta.comp_len as usize, 0);
        file.read_exact_at(&mut self.comp, meta.offset + BLOCK_HEADER_LEN)
            .map_err(io_err(path, "read block"))?;
        BYTES_READ.fetch_add(meta.comp_len as u64, Ordering::Relaxed);
        let found = crc32fast::hash(&self.comp);
        if found != meta.crc {
            return Err(StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset: meta.offset + BLOCK_HEADER_LEN,
                expected: format!("block checksum {:#010x}", meta.crc),
                found: format!("{found:#010x}"),
            }));
        }
        // The column codecs decode without zstd; a payload they refuse is corrupt.
        let columns = match self.codec {
            Codec::Columns => Some(("u32", columns_decode as fn(&[u8], usize, &mut [u8]) -> bool)),
            Codec::Adaptive if self.comp.starts_with(BYTE_COLUMNS_MAGIC) => Some((
                "byte",
                byte_columns_decode as fn(&[u8], usize, &mut [u8]) -> bool,
            )),
            _ => None,
        };
        if let Some((kind, decode)) = columns {
            if !decode(&self.comp, self.width, out) {
                return Err(StorageError::Corrupt(Corruption {
                    path: path.to_path_buf(),
                    offset: meta.offset + BLOCK_HEADER_LEN,
                    expected: format!("{kind} columns of {}-byte records", self.width),
                    found: "undecodable data".into(),
                }));
            }
            return Ok(());
        }
        let undecodable = |e: std::io::Error| {
            StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset: meta.offset + BLOCK_HEADER_LEN,
                expected: "a zstd frame".into(),
                found: format!("undecodable data ({e})"),
            })
        };
        if !self.filter.is_none() {
            self.filtered
                .resize(self.filter.bound(out.len(), self.width), 0);
            let n = self
                .decompressor
                .decompress_to_buffer(&self.comp, &mut self.filtered)
                .map_err(undecodable)?;
            return self.filter.undo(
                &self.filtered[..n],
                self.width,
                out,
                path,
                meta.offset + BLOCK_HEADER_LEN,
            );
        }
        let n = self
            .decompressor
            .decompress_to_buffer(&self.comp, out)
            .map_err(undecodable)?;
        if n != meta.raw_len as usize {
            return Err(StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset: meta.offset + 16,
                expected: format!("{} decompressed bytes", meta.raw_len),
                found: n.to_string(),
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod column_tests {
    use super::*;

    /// A xorshift64 generator: test data that is the same on every run.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    fn round_trip(raw: &[u8], width: usize) -> Vec<u8> {
        let mut comp = Vec::new();
        columns_encode(raw, width, &mut comp);
        let mut out = vec![0xAAu8; raw.len()];
        assert!(columns_decode(&comp, width, &mut out));
        assert_eq!(out, raw, "width {width}");
        comp
    }

    #[test]
    fn columns_round_trip() {
        let mut next = xorshift(0x1234_5678_9abc_def0u64);
        for width in [4usize, 8, 12, 24] {
            for n in [0usize, 1, 2, 7, 255, 256] {
                for spread in [0u64, 1, 15, 1000, 1 << 20, 1 << 32] {
                    let base = (next() as u32) >> 1;
                    let mut raw = Vec::new();
                    for _ in 0..n * width / 4 {
                        let v = if spread == 0 {
                            base
                        } else if spread == 1 << 32 {
                            next() as u32
                        } else {
                            base.wrapping_add((next() % spread) as u32)
                        };
                        raw.extend_from_slice(&v.to_le_bytes());
                    }
                    let comp = round_trip(&raw, width);
                    if spread <= 15 && n == 256 {
                        assert!(
                            comp.len() < raw.len() / 4,
                            "{} of {}",
                            comp.len(),
                            raw.len()
                        );
                    }
                }
            }
        }
        // The extremes of a column: 0 and u32::MAX in one block (32-bit values).
        let mut raw = Vec::new();
        for v in [u32::MAX, 0, 7, u32::MAX - 1] {
            raw.extend_from_slice(&v.to_le_bytes());
        }
        round_trip(&raw, 4);
    }

    fn byte_round_trip(raw: &[u8], width: usize) -> Vec<u8> {
        let mut plan = ByteColumns::default();
        plan.plan(raw, width);
        let mut comp = vec![7u8; 3];
        byte_columns_encode(raw, width, &plan, &mut comp);
        assert_eq!(comp.len() - 3, plan.len());
        let mut out = vec![0xAAu8; raw.len()];
        assert!(byte_columns_decode(&comp[3..], width, &mut out));
        assert_eq!(out, raw, "width {width}");
        comp.split_off(3)
    }

    #[test]
    fn byte_columns_round_trip() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for width in [1usize, 3, 9, 16, 229] {
            for n in [1usize, 2, 7, 128, 255] {
                for spread in [1u64, 2, 3, 16, 200, 256] {
                    let base: Vec<u8> = (0..width).map(|_| next() as u8).collect();
                    let mut raw = Vec::new();
                    for _ in 0..n {
                        for &b in &base {
                            // Most columns constant, some varying by up to `spread`.
                            let v = if next().is_multiple_of(4) {
                                next() % spread
                            } else {
                                0
                            };
                            raw.push(b.wrapping_add(v as u8));
                        }
                    }
                    let comp = byte_round_trip(&raw, width);
                    if spread == 1 && n >= 128 {
                        assert_eq!(comp.len(), 4 + 2 * width + 8);
                    }
                }
            }
        }
        // Full-range columns: 0 and 255 in one block (8 bits a value).
        byte_round_trip(&[0, 255, 255, 0, 128, 1], 2);
    }

    #[test]
    fn malformed_byte_columns_are_refused() {
        let raw: Vec<u8> = (0..96u8).map(|i| i % 5).collect();
        let comp = byte_round_trip(&raw, 12);
        let mut out = vec![0u8; raw.len()];
        assert!(!byte_columns_decode(&comp[..comp.len() - 1], 12, &mut out));
        assert!(!byte_columns_decode(&comp[..10], 12, &mut out));
        let mut bad = comp.clone();
        bad[5] = 9;
        assert!(!byte_columns_decode(&bad, 12, &mut out));
        let mut bad = comp.clone();
        bad[0] = b'X';
        assert!(!byte_columns_decode(&bad, 12, &mut out));
        assert!(!byte_columns_decode(&comp, 10, &mut out));
        assert!(!byte_columns_decode(&comp, 12, &mut out[..95]));
        assert!(!byte_columns_decode(&comp, 12, &mut []));
    }

    /// An adaptive file keeps each block in the smaller form: byte columns for records whose
    /// bytes barely vary, zstd frames for a block that repeats one long varying pattern.
    #[test]
    fn adaptive_blocks_take_the_better_form() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.seg");
        let width = 64u32;
        let header = Header {
            kind: Kind::Vec,
            codec: Codec::Adaptive,
            hash: HashId::None,
            layout: Layout::Fixed { width },
            block_bytes: 64 * 64,
            first_block: 0,
            filter: Filter::None,
        };
        let mut seg = SegmentFile::create(&path, header).unwrap();
        // Block 0: each record a counter in one column. Block 1: every record the same
        // 64 distinct bytes but rotated, so every column takes all 64 values.
        let a: Vec<u8> = (0..64 * 64)
            .map(|i| if i % 64 == 5 { (i / 64) as u8 } else { 1 })
            .collect();
        let b: Vec<u8> = (0..64 * 64)
            .map(|i| ((i % 64 + i / 64) % 64) as u8 * 3)
            .collect();
        let ma = seg.append(0, &a).unwrap();
        let mb = seg.append(1, &b).unwrap();
        let mut r = BlockReader::new(&path).unwrap();
        r.set_format(seg.header());
        let mut out = Vec::new();
        r.read(&path, seg.file(), &ma, &mut out).unwrap();
        assert_eq!(out, a);
        r.read(&path, seg.file(), &mb, &mut out).unwrap();
        assert_eq!(out, b);
        let bytes = std::fs::read(&path).unwrap();
        let payload = |m: &BlockMeta| &bytes[(m.offset + BLOCK_HEADER_LEN) as usize..][..4];
        assert_eq!(payload(&ma), BYTE_COLUMNS_MAGIC);
        assert_eq!(payload(&mb), &[0x28, 0xb5, 0x2f, 0xfd]);
    }

    #[test]
    fn malformed_columns_are_refused() {
        let raw: Vec<u8> = (0..96u8).collect();
        let mut comp = Vec::new();
        columns_encode(&raw, 12, &mut comp);
        let mut out = vec![0u8; raw.len()];
        assert!(!columns_decode(&comp[..comp.len() - 1], 12, &mut out));
        assert!(!columns_decode(&comp[..3], 12, &mut out));
        let mut bad = comp.clone();
        bad[4] = 33;
        assert!(!columns_decode(&bad, 12, &mut out));
        assert!(!columns_decode(&comp, 10, &mut out));
        assert!(!columns_decode(&comp, 12, &mut out[..95]));
    }
}
