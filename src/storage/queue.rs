//! [`SegQueue`]: a FIFO of variable-width records (the BFS open set) backed by segment files.
//!
//! Records are `len: u32 LE | len bytes`, back to back in one byte stream that is cut into
//! blocks regardless of record boundaries. New records go to the tail buffer in RAM; when it
//! holds more than the hot size plus a block, its oldest block is sealed (compressed) into the
//! current segment file. Pops read from the head buffer (one decompressed block), then from
//! the sealed blocks in order, then straight from the tail, so a queue that stays small never
//! touches the disk. Segment files rotate every [`FILE_BYTES`]; a file is deleted as soon as
//! its last block has been consumed, so disk use follows the queue's length, not its history.
//! Named files (a checkpointed run) are only *retired* then, and deleted by
//! [`SegQueue::release_retired`] once a newer checkpoint no longer needs them.
//!
//! Access is sequential at both ends, so the queue keeps its two buffers in RAM (counted in
//! its account) rather than mapping them: a mapping would bring nothing but page faults.

use super::budget::Account;
use super::segment::{
    detach, BlockMeta, BlockReader, FileLifetime, HashId, Header, Kind, Layout, SegmentFile,
};
use super::vec::SegOptions;
use crate::error::{Corruption, StorageError};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// A segment file rotates once it is this long.
pub const FILE_BYTES: u64 = 64 << 20;

struct QFile {
    no: u64,
    seg: SegmentFile,
    /// Blocks appended to this file, and blocks of it fully consumed.
    blocks: u64,
    consumed: u64,
}

/// Where a flushed queue stands; a checkpoint records it to reopen the queue.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueueMark {
    pub records: u64,
    /// The block holding the next byte to read, and the offset of that byte in it.
    pub read_block: u64,
    pub read_offset: u64,
    /// The live segment files (by number) and their sealed lengths.
    pub files: Vec<(u64, u64)>,
}

/// A FIFO of byte records (see the module docs).
pub struct SegQueue {
    dir: PathBuf,
    name: String,
    block_bytes: usize,
    hot_bytes: usize,
    files_lifetime: FileLifetime,
    // Invariant: the queued bytes, oldest first, are `head[head_pos..]`, then the blocks of
    // `pending` in order, then `tail[tail_pos..]`; together they hold exactly `records` whole
    // records. `head` is a copy of block `head_block` (when `Some`), whose file is kept until
    // the head is consumed.
    head: Vec<u8>,
    head_pos: usize,
    head_block: Option<(u64, u64)>,
    /// Sealed, unread blocks: (file number, block number, place).
    pending: VecDeque<(u64, u64, BlockMeta)>,
    tail: Vec<u8>,
    tail_pos: usize,
    /// Live files, oldest first; the last one is appended to.
    files: VecDeque<QFile>,
    next_file: u64,
    next_block: u64,
    records: u64,
    reader: BlockReader,
    account: Account,
    /// Bytes ever sealed (uncompressed) and their compressed size, for the ratio.
    sealed_raw: u64,
    sealed_comp: u64,
    /// Consumed named files waiting for the next checkpoint to commit before deletion.
    retired: Vec<PathBuf>,
}

fn file_path(dir: &Path, name: &str, no: u64) -> PathBuf {
    dir.join(format!("{name}.{no:06}.seg"))
}

impl SegQueue {
    /// An empty queue with files `NAME.NNNNNN.seg` in `dir`.
    pub fn create(
        dir: &Path,
        name: &str,
        opts: &SegOptions,
        account: Account,
    ) -> Result<SegQueue, StorageError> {
        let mut q = SegQueue::create_empty(dir, name, opts, account)?;
        q.new_file()?;
        Ok(q)
    }

    /// Reopens a queue flushed with [`SegQueue::flush`] at `mark`.
    pub fn open(
        dir: &Path,
        name: &str,
        opts: &SegOptions,
        mark: &QueueMark,
        account: Account,
    ) -> Result<SegQueue, StorageError> {
        let mut q = SegQueue::create_empty(dir, name, opts, account)?;
        for &(no, len) in &mark.files {
            let path = file_path(dir, name, no);
            let (seg, blocks) = SegmentFile::open(&path, Kind::Queue, Some(len))?;
            let mut f = QFile {
                no,
                seg,
                blocks: blocks.len() as u64,
                consumed: 0,
            };
            for (b, meta) in blocks {
                if b < mark.read_block {
                    f.consumed += 1;
                } else {
                    q.pending.push_back((no, b, meta));
                }
                q.next_block = q.next_block.max(b + 1);
            }
            q.files.push_back(f);
            q.next_file = no + 1;
        }
        if q.files.is_empty() {
            q.new_file()?;
        }
        q.records = mark.records;
        if mark.read_offset > 0 {
            // The head is the first block not consumed: a mark past every block was recorded
            // wrong (it had panicked looking for the block).
            if q.pending.is_empty() {
                return Err(StorageError::Corrupt(Corruption {
                    path: file_path(dir, name, q.files.back().map_or(0, |f| f.no)),
                    offset: 0,
                    expected: format!(
                        "block {} to hold {} bytes (the recorded read position)",
                        mark.read_block, mark.read_offset
                    ),
                    found: format!("{} blocks", q.next_block),
                }));
            }
            q.next_head()?;
            q.head_pos = mark.read_offset as usize;
            if q.head_pos > q.head.len() {
                let path = file_path(dir, name, q.head_block.map_or(0, |h| h.0));
                return Err(StorageError::Corrupt(Corruption {
                    path,
                    offset: 0,
                    expected: format!(
                        "block {} to hold {} bytes",
                        mark.read_block, mark.read_offset
                    ),
                    found: format!("{} bytes", q.head.len()),
                }));
            }
        }
        q.update_account();
        Ok(q)
    }

    fn create_empty(
        dir: &Path,
        name: &str,
        opts: &SegOptions,
        account: Account,
    ) -> Result<SegQueue, StorageError> {
        let path = file_path(dir, name, 0);
        Ok(SegQueue {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            block_bytes: opts.block_bytes.max(16),
            hot_bytes: opts.hot_blocks.max(1) * opts.block_bytes.max(16),
            files_lifetime: opts.files,
            head: Vec::new(),
            head_pos: 0,
            head_block: None,
            pending: VecDeque::new(),
            tail: Vec::new(),
            tail_pos: 0,
            files: VecDeque::new(),
            next_file: 0,
            next_block: 0,
            records: 0,
            reader: BlockReader::new(&path)?,
            account,
            sealed_raw: 0,
            sealed_comp: 0,
            retired: Vec::new(),
        })
    }

    fn new_file(&mut self) -> Result<(), StorageError> {
        let no = self.next_file;
        let path = file_path(&self.dir, &self.name, no);
        let seg = SegmentFile::create(
            &path,
            Header {
                kind: Kind::Queue,
                codec: super::segment::Codec::Zstd,
                hash: HashId::None,
                layout: Layout::Stream,
                block_bytes: self.block_bytes as u32,
                first_block: self.next_block,
                filter: super::filter::Filter::None,
            },
        )?;
        detach(&path, self.files_lifetime)?;
        self.files.push_back(QFile {
            no,
            seg,
            blocks: 0,
            consumed: 0,
        });
        self.next_file += 1;
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Appends a record.
    pub fn push(&mut self, rec: &[u8]) -> Result<(), StorageError> {
        let n = super::record_len(rec, "queue")?;
        self.tail.extend_from_slice(&n);
        self.tail.extend_from_slice(rec);
        self.records += 1;
        while self.tail.len() - self.tail_pos >= self.hot_bytes + self.block_bytes {
            let end = self.tail_pos + self.block_bytes;
            self.seal(self.tail_pos, end)?;
            self.tail_pos = end;
        }
        self.compact_tail();
        Ok(())
    }

    /// Pops the oldest record into `out`; `false` when the queue is empty.
    pub fn pop(&mut self, out: &mut Vec<u8>) -> Result<bool, StorageError> {
        if self.records == 0 {
            return Ok(false);
        }
        let mut len = [0u8; 4];
        self.take(4, &mut |b, at| len[at..at + b.len()].copy_from_slice(b))?;
        let n = u32::from_le_bytes(len) as usize;
        out.clear();
        self.take(n, &mut |b, _| out.extend_from_slice(b))?;
        self.records -= 1;
        Ok(true)
    }

    /// Seals `tail[start..end]` as the next block.
    fn seal(&mut self, start: usize, end: usize) -> Result<(), StorageError> {
        if self.files.back().is_none_or(|f| f.seg.len() >= FILE_BYTES) {
            self.new_file()?;
        }
        let b = self.next_block;
        let f = self.files.back_mut().expect("a file to append to");
        let meta = f.seg.append(b, &self.tail[start..end])?;
        f.blocks += 1;
        self.pending.push_back((f.no, b, meta));
        self.next_block += 1;
        self.sealed_raw += (end - start) as u64;
        self.sealed_comp += meta.file_bytes();
        self.update_account();
        Ok(())
    }

    fn compact_tail(&mut self) {
        if self.tail_pos > 0 && self.tail_pos >= self.tail.len() / 2 {
            self.tail.drain(..self.tail_pos);
            self.tail_pos = 0;
        }
    }

    /// Consumes `n` bytes, handing them to `f` piece by piece with their offset.
    fn take(&mut self, n: usize, f: &mut dyn FnMut(&[u8], usize)) -> Result<(), StorageError> {
        let mut done = 0;
        while done < n {
            if self.head_pos < self.head.len() {
                let k = (n - done).min(self.head.len() - self.head_pos);
                f(&self.head[self.head_pos..self.head_pos + k], done);
                self.head_pos += k;
                done += k;
            } else if !self.pending.is_empty() {
                self.next_head()?;
            } else {
                self.finish_head()?;
                let avail = self.tail.len() - self.tail_pos;
                if avail < n - done {
                    // Only a read mark or a record length recorded wrong gets here (the
                    // blocks' checksums held): corrupted data, naming the queue's last file.
                    let no = self.files.back().map_or(0, |f| f.no);
                    return Err(StorageError::Corrupt(Corruption {
                        path: file_path(&self.dir, &self.name, no),
                        offset: 0,
                        expected: format!(
                            "{} more bytes of a record ({} records left to read)",
                            n - done,
                            self.records
                        ),
                        found: format!("{avail} bytes left in the queue"),
                    }));
                }
                let k = n - done;
                f(&self.tail[self.tail_pos..self.tail_pos + k], done);
                self.tail_pos += k;
                done += k;
                self.compact_tail();
            }
        }
        Ok(())
    }

    /// The head is consumed: count its block and delete its file if that was the file's last.
    fn finish_head(&mut self) -> Result<(), StorageError> {
        let Some((file_no, _)) = self.head_block.take() else {
            return Ok(());
        };
        self.head.clear();
        self.head_pos = 0;
        let last = self.files.len() - 1;
        if let Some(i) = self.files.iter().position(|f| f.no == file_no) {
            self.files[i].consumed += 1;
            let f = &self.files[i];
            if f.consumed == f.blocks && i != last {
                let f = self.files.remove(i).expect("index in range");
                if self.files_lifetime == FileLifetime::Named {
                    self.retired.push(f.seg.path().to_path_buf());
                }
            }
        }
        self.update_account();
        Ok(())
    }

    /// Loads the next sealed block into the head.
    fn next_head(&mut self) -> Result<(), StorageError> {
        self.finish_head()?;
        let (file_no, b, meta) = self.pending.pop_front().expect("a pending block");
        let f = self
            .files
            .iter()
            .find(|f| f.no == file_no)
            .expect("the file of a pending block is live");
        self.reader
            .read(f.seg.path(), f.seg.file(), &meta, &mut self.head)?;
        self.head_pos = 0;
        self.head_block = Some((file_no, b));
        Ok(())
    }

    /// Seals the tail and syncs every live file; the mark reopens the queue as it is now.
    pub fn flush(&mut self) -> Result<QueueMark, StorageError> {
        if self.tail.len() > self.tail_pos {
            let end = self.tail.len();
            self.seal(self.tail_pos, end)?;
            self.tail.clear();
            self.tail_pos = 0;
        }
        for f in &self.files {
            f.seg.sync()?;
        }
        let (read_block, read_offset) = match self.head_block {
            Some((_, b)) if self.head_pos < self.head.len() => (b, self.head_pos as u64),
            _ => (self.pending.front().map_or(self.next_block, |p| p.1), 0),
        };
        Ok(QueueMark {
            records: self.records,
            read_block,
            read_offset,
            files: self.files.iter().map(|f| (f.no, f.seg.len())).collect(),
        })
    }

    /// Deletes the named files consumed so far. A checkpoint calls it once its manifest is
    /// committed: until then the previous checkpoint may still need them.
    pub fn release_retired(&mut self) -> Result<(), StorageError> {
        for path in self.retired.drain(..) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(super::segment::io_err(
                        &path,
                        "remove consumed segment file",
                    )(e))
                }
            }
        }
        Ok(())
    }

    /// The files a flush at `mark` needs, as file marks relative to the queue's directory.
    pub fn files(&self, mark: &QueueMark) -> Vec<super::FileMark> {
        mark.files
            .iter()
            .map(|&(no, len)| super::FileMark::segment(&format!("{}.{no:06}", self.name), len))
            .collect()
    }

    /// RAM held: the head and tail buffers.
    pub fn ram_bytes(&self) -> u64 {
        (self.head.capacity() + self.tail.capacity()) as u64
    }

    /// Bytes in live segment files.
    pub fn disk_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.seg.len()).sum()
    }

    /// (uncompressed, compressed) bytes of every block ever sealed.
    pub fn sealed_bytes(&self) -> (u64, u64) {
        (self.sealed_raw, self.sealed_comp)
    }

    fn update_account(&self) {
        self.account
            .set(self.ram_bytes(), self.disk_bytes(), self.sealed_raw);
    }
}

impl Drop for SegQueue {
    fn drop(&mut self) {
        self.update_account();
    }
}
