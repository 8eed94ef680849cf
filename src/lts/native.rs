//! The native LTS format (`.slts`): written while exploring, read back by `spillway lts`.
//!
//! Layout (all integers little-endian; full description in docs/FORMATS.md):
//! a 32-byte header, then edge blocks of at most [`EDGES_PER_BLOCK`] edges each (zstd
//! compressed, CRC-32 per block), then one label block, then a 72-byte footer with the counts,
//! a CRC-32 of everything before it and an end magic. A file without a valid footer — e.g. from
//! a killed run — is rejected, never read as a shorter LTS. Block boundaries depend only on the
//! edge count, never on timing, so equal explorations give byte-identical files.

use super::LabelId;
use super::{LtsSink, LtsSummary, SinkMark};
use crate::error::{Corruption, LtsError};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"SPILLLTS";
pub const END_MAGIC: &[u8; 8] = b"SPILLEND";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: u64 = 32;
pub const BLOCK_HEADER_LEN: usize = 24;
pub const FOOTER_LEN: u64 = 72;
pub const EDGES_PER_BLOCK: u32 = 1 << 16;
const TAG_EDGES: &[u8; 4] = b"EDGS";
const TAG_LABELS: &[u8; 4] = b"LABL";
const TAG_FOOTER: &[u8; 4] = b"FOOT";
const ZSTD_LEVEL: i32 = 3;
/// Upper bound on a block's decompressed size; larger claims are treated as corruption.
const MAX_RAW_BLOCK: u32 = 1 << 30;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint (as [`put_varint`]) into `buf` at `at`; returns the end.
#[inline(always)]
fn varint_into(buf: &mut [std::mem::MaybeUninit<u8>], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        buf[at].write((v as u8) | 0x80);
        at += 1;
        v >>= 7;
    }
    buf[at].write(v as u8);
    at + 1
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The file side of a writer: compresses blocks and appends them, keeping the running
/// whole-body checksum. Owned by the writer's background thread while edges stream in, then
/// handed back for the label block and footer.
struct BlockFile {
    path: PathBuf,
    out: BufWriter<File>,
    body_crc: crc32fast::Hasher,
    offset: u64,
    compressor: zstd::bulk::Compressor<'static>,
    /// The compressed block, reused: a fresh buffer per block faulted its pages in again.
    payload: Vec<u8>,
}

impl BlockFile {
    /// The file side of a writer whose file `out` (at `path`) holds `offset` bytes, whose
    /// checksum `body_crc` has covered.
    fn new(
        path: &Path,
        out: File,
        body_crc: crc32fast::Hasher,
        offset: u64,
    ) -> Result<BlockFile, LtsError> {
        let compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(super::io_error(path))?;
        Ok(BlockFile {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, out),
            body_crc,
            offset,
            compressor,
            payload: Vec::new(),
        })
    }

    fn io(&self, source: std::io::Error) -> LtsError {
        LtsError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), LtsError> {
        self.out.write_all(bytes).map_err(|e| self.io(e))?;
        self.body_crc.update(bytes);
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn write_block(&mut self, tag: &[u8; 4], records: u32, raw: &[u8]) -> Result<(), LtsError> {
        let mut payload = std::mem::take(&mut self.payload);
        payload.clear();
        payload.reserve(zstd::zstd_safe::compress_bound(raw.len()));
        self.compressor
            .compress_to_buffer(raw, &mut payload)
            .map_err(|e| self.io(e))?;
        let mut header = Vec::with_capacity(BLOCK_HEADER_LEN);
        header.extend_from_slice(tag);
        header.extend_from_slice(&records.to_le_bytes());
        header.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        header.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.update(&payload);
        header.extend_from_slice(&crc.finalize().to_le_bytes());
        self.write(&header)?;
        let r = self.write(&payload);
        self.payload = payload;
        r
    }
}

/// Edge blocks on their way to the background thread (at most this many queued).
const QUEUED_BLOCKS: usize = 4;

/// Streams a native LTS file. Must be `finish`ed; a file left unfinished has no footer.
///
/// Edges are encoded on the caller's thread; full blocks go through a bounded channel to a
/// background thread that compresses and writes them, in order (one thread, FIFO), so the
/// file is the same as a single-threaded writer's. An I/O error on that thread is returned by
/// the next call that hands it a block, or by `finish`.
pub struct NativeWriter {
    path: PathBuf,
    tx: Option<std::sync::mpsc::SyncSender<(u32, Vec<u8>)>>,
    /// Edge buffers the background thread is done with, for the next blocks: a fresh
    /// megabyte per block faulted its pages in on the numbering thread (about half of
    /// `edge`'s time with two threads).
    free: Option<std::sync::mpsc::Receiver<Vec<u8>>>,
    worker: Option<std::thread::JoinHandle<Result<BlockFile, LtsError>>>,
    /// Everything a checkpoint keeps: the partial block and the counters.
    state: Pending,
    /// Footer flags ([`FLAG_STATES_MAY_REPEAT`]).
    flags: u16,
}

/// Footer flag: the LTS may hold a state more than once — a search that forgot visited
/// states numbered them again when it met them (`--store cache`). Minimising the LTS
/// (`spillway lts reduce`) merges the copies. Written in bytes 6..8 of the footer, which
/// readers before this flag ignored (reserved, zero), so older files read as "no flag".
pub const FLAG_STATES_MAY_REPEAT: u16 = 1;

impl NativeWriter {
    pub fn create(path: &Path) -> Result<Self, LtsError> {
        let file = File::create(path).map_err(super::io_error(path))?;
        Self::create_on(file, path)
    }

    /// Writes to `file`, open and empty; errors name `path` (the output a temporary file
    /// becomes).
    pub fn create_on(file: File, path: &Path) -> Result<Self, LtsError> {
        let mut file = BlockFile::new(path, file, crc32fast::Hasher::new(), 0)?;
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u16.to_le_bytes());
        header.extend_from_slice(&EDGES_PER_BLOCK.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes()); // flags
        header.extend_from_slice(&[0u8; 8]); // reserved
        let crc = crc32fast::hash(&header);
        header.extend_from_slice(&crc.to_le_bytes());
        file.write(&header)?;
        let state = Pending {
            raw: Vec::with_capacity(1 << 20),
            records: 0,
            prev_src: 0,
            blocks: 0,
            transitions: 0,
            labels: Vec::new(),
        };
        Self::launch(path, file, state)
    }

    /// Continues `file`, checkpointed at `mark` (see [`LtsSink::checkpoint`]); `crc` is the
    /// CRC-32 of its first `mark.len` bytes, from which the whole-file checksum continues.
    /// Errors name `path`.
    pub fn resume(file: File, path: &Path, mark: &SinkMark, crc: u32) -> Result<Self, LtsError> {
        let raw = zstd::bulk::decompress(&mark.pending, MAX_PENDING).map_err(|_| {
            LtsError::Invalid(format!(
                "{}: the checkpoint's writer state does not decompress",
                path.display()
            ))
        })?;
        let state: Pending = super::decode_pending(path, &raw)?;
        let f = super::cut_at(file, path, mark.len)?;
        let body_crc = crc32fast::Hasher::new_with_initial_len(crc, mark.len);
        let file = BlockFile::new(path, f, body_crc, mark.len)?;
        Self::launch(path, file, state)
    }

    /// A writer at `state` whose background thread writes on to `file`.
    fn launch(path: &Path, file: BlockFile, state: Pending) -> Result<Self, LtsError> {
        let mut w = NativeWriter {
            path: path.to_path_buf(),
            tx: None,
            free: None,
            worker: None,
            state,
            flags: 0,
        };
        w.start(file)?;
        Ok(w)
    }

    /// Starts the background thread that compresses and writes edge blocks to `file`.
    fn start(&mut self, mut file: BlockFile) -> Result<(), LtsError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(u32, Vec<u8>)>(QUEUED_BLOCKS);
        // Two spares are enough (the numbering thread takes one per block, the background
        // thread gives one back per block); more would only stay resident.
        let (free_tx, free) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
        let worker = std::thread::Builder::new()
            .name("lts-writer".into())
            .spawn(move || {
                for (records, mut raw) in rx {
                    file.write_block(TAG_EDGES, records, &raw)?;
                    raw.clear();
                    // Full (the writer holds enough spares) or gone: the buffer is dropped.
                    let _ = free_tx.try_send(raw);
                }
                Ok(file)
            })
            .map_err(|source| LtsError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.tx = Some(tx);
        self.free = Some(free);
        self.worker = Some(worker);
        Ok(())
    }

    /// Stops the background thread and takes the file back (or the thread's error).
    fn join(&mut self) -> Result<BlockFile, LtsError> {
        self.tx = None;
        match self.worker.take() {
            Some(w) => w.join().unwrap_or_else(|_| {
                Err(LtsError::Invalid(format!(
                    "{}: the LTS writer thread panicked",
                    self.path.display()
                )))
            }),
            None => Err(LtsError::Invalid(format!(
                "{}: the LTS writer was already finished or failed",
                self.path.display()
            ))),
        }
    }

    fn flush_edges(&mut self) -> Result<(), LtsError> {
        if self.state.records == 0 {
            return Ok(());
        }
        let spare = self.free.as_ref().and_then(|f| f.try_recv().ok());
        let next = spare.unwrap_or_else(|| Vec::with_capacity(1 << 20));
        let raw = std::mem::replace(&mut self.state.raw, next);
        let sent = match &self.tx {
            Some(tx) => tx.send((self.state.records, raw)).is_ok(),
            None => false,
        };
        if !sent {
            // The thread stopped: it holds the reason.
            self.join()?;
            return Err(LtsError::Invalid(format!(
                "{}: the LTS writer stopped early",
                self.path.display()
            )));
        }
        self.state.blocks += 1;
        self.state.records = 0;
        self.state.prev_src = 0;
        Ok(())
    }
}

impl LtsSink for NativeWriter {
    fn define_label(&mut self, id: LabelId, name: &str) -> Result<(), LtsError> {
        super::set_label(&mut self.state.labels, id, name.to_string());
        Ok(())
    }

    fn edge(&mut self, src: u64, label: LabelId, dst: u64) -> Result<(), LtsError> {
        // Written straight into the spare capacity: one capacity check per edge, not one
        // per byte (three varints of at most 10 bytes each).
        let raw = &mut self.state.raw;
        raw.reserve(30);
        let len = raw.len();
        let spare = &mut raw.spare_capacity_mut()[..30];
        let mut n = varint_into(
            spare,
            0,
            zigzag(src.wrapping_sub(self.state.prev_src) as i64),
        );
        n = varint_into(spare, n, label.0 as u64);
        n = varint_into(spare, n, zigzag(dst.wrapping_sub(src) as i64));
        // SAFETY: `varint_into` initialised the first `n` bytes of the spare capacity.
        unsafe { raw.set_len(len + n) };
        self.state.prev_src = src;
        self.state.records += 1;
        self.state.transitions += 1;
        if self.state.records == EDGES_PER_BLOCK {
            self.flush_edges()?;
        }
        Ok(())
    }

    fn states_may_repeat(&mut self) {
        self.flags |= FLAG_STATES_MAY_REPEAT;
    }

    fn finish(&mut self, summary: &LtsSummary) -> Result<(), LtsError> {
        self.flush_edges()?;
        let mut file = self.join()?;
        let label_offset = file.offset;
        let mut raw = Vec::new();
        let labels = std::mem::take(&mut self.state.labels);
        for l in &labels {
            put_varint(&mut raw, l.len() as u64);
            raw.extend_from_slice(l.as_bytes());
        }
        file.write_block(TAG_LABELS, labels.len() as u32, &raw)?;
        let body_crc = std::mem::take(&mut file.body_crc).finalize();
        let mut f = Vec::with_capacity(FOOTER_LEN as usize);
        f.extend_from_slice(TAG_FOOTER);
        f.extend_from_slice(&VERSION.to_le_bytes());
        f.extend_from_slice(&self.flags.to_le_bytes());
        f.extend_from_slice(&summary.states.to_le_bytes());
        f.extend_from_slice(&self.state.transitions.to_le_bytes());
        f.extend_from_slice(&summary.initial.to_le_bytes());
        f.extend_from_slice(&summary.deadlocks.to_le_bytes());
        f.extend_from_slice(&(labels.len() as u32).to_le_bytes());
        f.extend_from_slice(&self.state.blocks.to_le_bytes());
        f.extend_from_slice(&label_offset.to_le_bytes());
        f.extend_from_slice(&body_crc.to_le_bytes());
        let crc = crc32fast::hash(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        f.extend_from_slice(END_MAGIC);
        debug_assert_eq!(f.len() as u64, FOOTER_LEN);
        file.write(&f)?;
        file.out.flush().map_err(|e| file.io(e))?;
        file.out.get_ref().sync_all().map_err(|e| file.io(e))?;
        Ok(())
    }

    fn checkpoint(&mut self) -> Result<SinkMark, LtsError> {
        // Let the thread write every full block handed to it, sync, and start it again; the
        // partial block stays pending (in the mark), so block boundaries stay where an
        // uninterrupted run puts them.
        let mut file = self.join()?;
        file.out.flush().map_err(|e| file.io(e))?;
        file.out.get_ref().sync_all().map_err(|e| file.io(e))?;
        let len = file.offset;
        self.start(file)?;
        // Compressed: the partial block is up to 65,536 edges and goes into the manifest.
        let raw = crate::codec::encode(&self.state);
        let pending = zstd::bulk::compress(&raw, ZSTD_LEVEL).map_err(|e| LtsError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        Ok(SinkMark { len, pending })
    }
}

/// Largest decompressed writer state accepted on resume (a block of edges is at most
/// 65,536 × 3 varints of 10 bytes, plus the labels).
const MAX_PENDING: usize = 1 << 28;

/// The writer state a checkpoint keeps: the partial edge block and the counters.
#[derive(serde::Serialize, serde::Deserialize)]
struct Pending {
    raw: Vec<u8>,
    records: u32,
    prev_src: u64,
    blocks: u32,
    transitions: u64,
    labels: Vec<String>,
}

/// The footer of a native file: what the writer recorded when it finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footer {
    pub version: u16,
    pub states: u64,
    pub transitions: u64,
    pub initial: u64,
    pub deadlocks: u64,
    pub labels: u32,
    pub edge_blocks: u32,
    pub label_offset: u64,
    pub body_crc: u32,
    /// Flags ([`FLAG_STATES_MAY_REPEAT`]); 0 in files written before flags existed.
    pub flags: u16,
}

/// One edge of an LTS: (source state, label, target state).
pub type Edge = (u64, LabelId, u64);

/// Reads a native LTS file: validates header and footer on open, then streams edge blocks,
/// checking each block's checksum and, at the end, the whole-file checksum and the counts.
pub struct NativeReader {
    path: PathBuf,
    file: BufReader<File>,
    file_len: u64,
    footer: Footer,
    labels: Vec<String>,
    pos: u64,
    blocks_read: u32,
    edges_read: u64,
    body_crc: crc32fast::Hasher,
    decompressor: zstd::bulk::Decompressor<'static>,
    block: Vec<Edge>,
    done: bool,
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Decodes LEB128 varints from a block payload.
struct Varints<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Varints<'_> {
    fn next(&mut self) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            if shift >= 64 {
                return None;
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
            shift += 7;
        }
    }
}

impl NativeReader {
    pub fn open(path: &Path) -> Result<Self, LtsError> {
        let io = |source| LtsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = super::open_input(path)?;
        let file_len = file.metadata().map_err(io)?.len();
        let corrupt = |offset: u64, expected: &str, found: String| {
            LtsError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset,
                expected: expected.to_string(),
                found,
            })
        };
        if file_len < HEADER_LEN {
            return Err(LtsError::Truncated {
                path: path.to_path_buf(),
                message: format!("{file_len} bytes is shorter than the {HEADER_LEN}-byte header"),
            });
        }
        let mut header = [0u8; HEADER_LEN as usize];
        file.read_exact(&mut header).map_err(io)?;
        if &header[0..8] != MAGIC {
            return Err(corrupt(
                0,
                "the native LTS magic \"SPILLLTS\"",
                format!("{:?}", String::from_utf8_lossy(&header[0..8])),
            ));
        }
        // The checksum first: it covers the version, so a damaged version field is
        // corruption, and only a version the checksum vouches for is a real, other version
        // (every version keeps the magic, the version at byte 8 and this checksum at 28).
        let crc = crc32fast::hash(&header[..28]);
        if crc != le_u32(&header, 28) {
            return Err(corrupt(
                28,
                &format!("header checksum {crc:#010x}"),
                format!("{:#010x}", le_u32(&header, 28)),
            ));
        }
        let version = le_u16(&header, 8);
        if version != VERSION {
            return Err(LtsError::Version {
                path: path.to_path_buf(),
                found: version,
                supported: VERSION,
            });
        }
        if file_len < HEADER_LEN + FOOTER_LEN {
            return Err(LtsError::Truncated {
                path: path.to_path_buf(),
                message: "no footer: the file ends after the header (was the run interrupted?)"
                    .into(),
            });
        }
        let foot_at = file_len - FOOTER_LEN;
        let mut f = [0u8; FOOTER_LEN as usize];
        file.seek(SeekFrom::Start(foot_at)).map_err(io)?;
        file.read_exact(&mut f).map_err(io)?;
        if &f[64..72] != END_MAGIC || &f[0..4] != TAG_FOOTER {
            return Err(LtsError::Truncated {
                path: path.to_path_buf(),
                message: "no valid footer at the end of the file: it was not finished (interrupted run) or was cut short".into(),
            });
        }
        let crc = crc32fast::hash(&f[..60]);
        if crc != le_u32(&f, 60) {
            return Err(corrupt(
                foot_at + 60,
                &format!("footer checksum {crc:#010x}"),
                format!("{:#010x}", le_u32(&f, 60)),
            ));
        }
        let footer = Footer {
            version: le_u16(&f, 4),
            states: le_u64(&f, 8),
            transitions: le_u64(&f, 16),
            initial: le_u64(&f, 24),
            deadlocks: le_u64(&f, 32),
            labels: le_u32(&f, 40),
            edge_blocks: le_u32(&f, 44),
            label_offset: le_u64(&f, 48),
            body_crc: le_u32(&f, 56),
            flags: le_u16(&f, 6),
        };
        if footer.label_offset < HEADER_LEN || footer.label_offset >= foot_at {
            return Err(corrupt(
                foot_at + 48,
                &format!("a label block offset between {HEADER_LEN} and {foot_at}"),
                footer.label_offset.to_string(),
            ));
        }
        // Every LTS has its initial state, and no writer makes a file without one (explore
        // starts from the initial state; reduce and convert copy at least it): a state count
        // of 0 is a damaged or crafted footer, refused here so that every tool says so
        // alike instead of failing later on an initial state that does not exist.
        if footer.states == 0 {
            return Err(corrupt(
                foot_at + 8,
                "a footer state count of at least 1 (the initial state)",
                "0".into(),
            ));
        }
        if footer.initial >= footer.states {
            return Err(corrupt(
                foot_at + 24,
                &format!("an initial state below the state count {}", footer.states),
                footer.initial.to_string(),
            ));
        }
        let mut r = NativeReader {
            path: path.to_path_buf(),
            file: BufReader::with_capacity(1 << 20, file),
            file_len,
            footer,
            labels: Vec::new(),
            pos: 0,
            blocks_read: 0,
            edges_read: 0,
            body_crc: crc32fast::Hasher::new(),
            decompressor: zstd::bulk::Decompressor::new().map_err(io)?,
            block: Vec::new(),
            done: false,
        };
        // Read the label table first (it is at the end), then rewind to the first edge block.
        r.file
            .seek(SeekFrom::Start(r.footer.label_offset))
            .map_err(|e| r.io(e))?;
        r.pos = r.footer.label_offset;
        let (tag, count, raw) = r.read_block(false)?;
        if &tag != TAG_LABELS || count != r.footer.labels {
            return Err(r.corrupt(
                r.footer.label_offset,
                &format!("a label block of {} labels", r.footer.labels),
                format!(
                    "tag {:?} with {count} records",
                    String::from_utf8_lossy(&tag)
                ),
            ));
        }
        let mut v = Varints { bytes: &raw, at: 0 };
        // The count is a claim (checksummed, but a crafted file can claim 2^32 - 1): every
        // label takes at least its one-byte length, so the payload bounds the reservation.
        let mut labels = Vec::with_capacity((count as usize).min(raw.len()));
        for _ in 0..count {
            let len = v.next().ok_or_else(|| r.label_err())? as usize;
            let bytes = raw.get(v.at..v.at + len).ok_or_else(|| r.label_err())?;
            labels.push(String::from_utf8(bytes.to_vec()).map_err(|_| r.label_err())?);
            v.at += len;
        }
        r.labels = labels;
        r.file
            .seek(SeekFrom::Start(HEADER_LEN))
            .map_err(|e| r.io(e))?;
        r.pos = HEADER_LEN;
        r.body_crc.update(&header);
        Ok(r)
    }

    fn io(&self, source: std::io::Error) -> LtsError {
        LtsError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn corrupt(&self, offset: u64, expected: &str, found: String) -> LtsError {
        LtsError::Corrupt(Corruption {
            path: self.path.clone(),
            offset,
            expected: expected.to_string(),
            found,
        })
    }

    fn label_err(&self) -> LtsError {
        self.corrupt(
            self.footer.label_offset,
            "a well-formed label table",
            "undecodable label data".into(),
        )
    }

    /// Reads one block at the current position; returns (tag, records, raw payload).
    fn read_block(&mut self, hash_body: bool) -> Result<([u8; 4], u32, Vec<u8>), LtsError> {
        let at = self.pos;
        let mut h = [0u8; BLOCK_HEADER_LEN];
        self.file.read_exact(&mut h).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.corrupt(at, "a block header", "end of file".into())
            } else {
                self.io(e)
            }
        })?;
        let tag: [u8; 4] = h[0..4].try_into().unwrap();
        let records = le_u32(&h, 4);
        let raw_len = le_u32(&h, 8);
        let comp_len = le_u32(&h, 12);
        let end = at + BLOCK_HEADER_LEN as u64 + comp_len as u64;
        if end > self.file_len - FOOTER_LEN || raw_len > MAX_RAW_BLOCK {
            return Err(self.corrupt(
                at + 8,
                "block lengths that fit in the file",
                format!("raw {raw_len} / compressed {comp_len} bytes"),
            ));
        }
        let mut payload = vec![0u8; comp_len as usize];
        self.file.read_exact(&mut payload).map_err(|e| self.io(e))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&h[..20]);
        crc.update(&payload);
        let crc = crc.finalize();
        if crc != le_u32(&h, 20) {
            return Err(self.corrupt(
                at + 20,
                &format!("block checksum {:#010x}", le_u32(&h, 20)),
                format!("{crc:#010x} (computed over the block)"),
            ));
        }
        if hash_body {
            self.body_crc.update(&h);
            self.body_crc.update(&payload);
        }
        self.pos = end;
        let raw = self
            .decompressor
            .decompress(&payload, raw_len as usize)
            .map_err(|e| self.corrupt(at + 24, "a valid zstd frame", e.to_string()))?;
        if raw.len() != raw_len as usize {
            return Err(self.corrupt(
                at + 8,
                &format!("{raw_len} decompressed bytes"),
                raw.len().to_string(),
            ));
        }
        Ok((tag, records, raw))
    }

    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The next decoded block of edges, or `None` after the last one (once every count and the
    /// whole-file checksum have been verified).
    pub fn next_block(&mut self) -> Result<Option<&[Edge]>, LtsError> {
        if self.done {
            return Ok(None);
        }
        if self.pos >= self.footer.label_offset {
            return self.finish_checks().map(|_| None);
        }
        let at = self.pos;
        let (tag, records, raw) = self.read_block(true)?;
        if &tag != TAG_EDGES {
            return Err(self.corrupt(
                at,
                "an edge block tag \"EDGS\"",
                format!("{:?}", String::from_utf8_lossy(&tag)),
            ));
        }
        self.block.clear();
        let mut v = Varints { bytes: &raw, at: 0 };
        let mut prev_src = 0u64;
        let bad = |me: &Self| {
            me.corrupt(
                at,
                &format!("{records} well-formed edge records"),
                "undecodable edge data".into(),
            )
        };
        for _ in 0..records {
            let (Some(ds), Some(l), Some(dd)) = (v.next(), v.next(), v.next()) else {
                return Err(bad(self));
            };
            let src = prev_src.wrapping_add(unzigzag(ds) as u64);
            let dst = src.wrapping_add(unzigzag(dd) as u64);
            if src >= self.footer.states
                || dst >= self.footer.states
                || l >= self.footer.labels as u64
            {
                return Err(self.corrupt(
                    at,
                    &format!(
                        "states below {} and labels below {}",
                        self.footer.states, self.footer.labels
                    ),
                    format!("edge ({src}, {l}, {dst})"),
                ));
            }
            prev_src = src;
            self.block.push((src, LabelId(l as u32), dst));
        }
        if v.at != raw.len() {
            return Err(bad(self));
        }
        self.blocks_read += 1;
        self.edges_read += records as u64;
        Ok(Some(&self.block))
    }

    fn finish_checks(&mut self) -> Result<(), LtsError> {
        self.done = true;
        if self.blocks_read != self.footer.edge_blocks || self.edges_read != self.footer.transitions
        {
            return Err(self.corrupt(
                self.pos,
                &format!(
                    "{} edge blocks with {} transitions (footer)",
                    self.footer.edge_blocks, self.footer.transitions
                ),
                format!(
                    "{} blocks with {} transitions",
                    self.blocks_read, self.edges_read
                ),
            ));
        }
        // Hash the label block too, then compare with the footer's whole-body checksum.
        let label_len = self.file_len - FOOTER_LEN - self.footer.label_offset;
        let mut rest = vec![0u8; label_len as usize];
        self.file
            .seek(SeekFrom::Start(self.footer.label_offset))
            .map_err(|e| self.io(e))?;
        self.file.read_exact(&mut rest).map_err(|e| self.io(e))?;
        self.body_crc.update(&rest);
        let crc = std::mem::take(&mut self.body_crc).finalize();
        if crc != self.footer.body_crc {
            return Err(self.corrupt(
                0,
                &format!("file checksum {:#010x} (footer)", self.footer.body_crc),
                format!("{crc:#010x}"),
            ));
        }
        Ok(())
    }

    /// Calls `f` on every edge in file order, verifying everything.
    pub fn for_each_edge(&mut self, mut f: impl FnMut(u64, LabelId, u64)) -> Result<(), LtsError> {
        while let Some(block) = self.next_block()? {
            for &(s, l, d) in block {
                f(s, l, d);
            }
        }
        Ok(())
    }
}

/// A whole LTS in memory (tests and small files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lts {
    pub footer: Footer,
    pub labels: Vec<String>,
    pub edges: Vec<Edge>,
}

/// Reads and verifies a whole native file.
pub fn read_all(path: &Path) -> Result<Lts, LtsError> {
    let mut r = NativeReader::open(path)?;
    let mut edges = Vec::with_capacity(r.footer().transitions.min(1 << 24) as usize);
    r.for_each_edge(|s, l, d| edges.push((s, l, d)))?;
    Ok(Lts {
        footer: r.footer().clone(),
        labels: r.labels().to_vec(),
        edges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_sample(path: &Path, n: u64) {
        let mut w = NativeWriter::create(path).unwrap();
        w.define_label(LabelId(0), "a").unwrap();
        w.define_label(LabelId(1), "b c").unwrap();
        for i in 0..n {
            w.edge(i, LabelId((i % 2) as u32), (i * 7 + 3) % n).unwrap();
        }
        w.finish(&LtsSummary {
            states: n,
            transitions: n,
            initial: 0,
            deadlocks: 0,
        })
        .unwrap();
    }

    #[test]
    fn a_footer_without_states_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.slts");
        // The writer does what it is told; the reader refuses what no run can produce.
        write_sample(&p, 0);
        let len = std::fs::metadata(&p).unwrap().len();
        match NativeReader::open(&p) {
            Err(LtsError::Corrupt(c)) => {
                assert_eq!(c.offset, len - FOOTER_LEN + 8);
                assert!(c.expected.contains("state count"), "{}", c.expected);
                assert_eq!(c.found, "0");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a 0-state file was accepted"),
        }
    }

    #[test]
    fn a_damaged_version_is_corruption_and_a_checksummed_one_a_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.slts");
        write_sample(&p, 3);
        let good = std::fs::read(&p).unwrap();
        // A bit flip in the version: the header checksum does not hold.
        let mut b = good.clone();
        b[8] ^= 0x10;
        std::fs::write(&p, &b).unwrap();
        match NativeReader::open(&p) {
            Err(LtsError::Corrupt(c)) => assert_eq!(c.offset, 28),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted"),
        }
        // Version 2 with its checksum: a file of another format version.
        let mut b = good;
        b[8..10].copy_from_slice(&2u16.to_le_bytes());
        let crc = crc32fast::hash(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        match NativeReader::open(&p) {
            Err(LtsError::Version { found: 2, .. }) => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn roundtrip_multiple_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.slts");
        let n = EDGES_PER_BLOCK as u64 * 2 + 17;
        write_sample(&p, n);
        let lts = read_all(&p).unwrap();
        assert_eq!(lts.footer.edge_blocks, 3);
        assert_eq!(lts.labels, vec!["a", "b c"]);
        assert_eq!(lts.edges.len() as u64, n);
        assert_eq!(lts.edges[5], (5, LabelId(1), 38));
    }

    #[test]
    fn full_disk_is_an_error_not_a_short_file() {
        let dev_full = Path::new("/dev/full");
        if !dev_full.exists() {
            return;
        }
        let mut w = NativeWriter::create(dev_full).unwrap();
        w.define_label(LabelId(0), "a").unwrap();
        let mut result = Ok(());
        for i in 0..(EDGES_PER_BLOCK as u64 * 40) {
            result = w.edge(i, LabelId(0), i);
            if result.is_err() {
                break;
            }
        }
        let result = result.and_then(|_| {
            w.finish(&LtsSummary {
                states: 1,
                transitions: 0,
                initial: 0,
                deadlocks: 0,
            })
        });
        let e = result.unwrap_err().to_string();
        assert!(e.contains("/dev/full"), "{e}");
    }

    #[test]
    fn a_crafted_label_count_is_corruption_not_an_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.slts");
        write_sample(&p, 3);
        let mut b = std::fs::read(&p).unwrap();
        let foot = b.len() - FOOTER_LEN as usize;
        let label_at = le_u64(&b, foot + 48) as usize;
        // Claim u32::MAX labels in the label block and the footer, with valid checksums.
        b[label_at + 4..label_at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        let comp = le_u32(&b, label_at + 12) as usize;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&b[label_at..label_at + 20]);
        crc.update(&b[label_at + 24..label_at + 24 + comp]);
        let crc = crc.finalize();
        b[label_at + 20..label_at + 24].copy_from_slice(&crc.to_le_bytes());
        b[foot + 40..foot + 44].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32fast::hash(&b[foot..foot + 60]);
        b[foot + 60..foot + 64].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        let e = NativeReader::open(&p).err().unwrap();
        assert!(matches!(e, LtsError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("label"), "{e}");
    }

    #[test]
    fn varint_zigzag_extremes() {
        for v in [0i64, 1, -1, i64::MAX, i64::MIN, 123456789] {
            assert_eq!(unzigzag(zigzag(v)), v);
            let mut b = Vec::new();
            put_varint(&mut b, zigzag(v));
            assert_eq!(Varints { bytes: &b, at: 0 }.next(), Some(zigzag(v)));
        }
    }
}
