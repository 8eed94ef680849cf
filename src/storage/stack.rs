//! [`SegStack`]: a LIFO of variable-width records (a DFS stack) backed by one segment file.
//!
//! Records are `bytes | len: u32 LE` (the length *after* the bytes, so the top record can be
//! found from the end), back to back in one byte stream cut into blocks regardless of record
//! boundaries. The top of the stream lives in a RAM buffer; when the buffer holds more than
//! the hot size plus a block, its bottom block is sealed (compressed) onto the end of the
//! file. Popping below the buffer reads the stack's last block back and truncates the file
//! there — except below the *floor*, the file length at the last [`SegStack::flush`]: a
//! checkpoint may still need those bytes, so popped blocks below the floor stay in the file
//! as garbage and new blocks are appended after them. Block `n` is the stack's `n`-th block
//! wherever it sits: a later block numbered `n` supersedes every earlier block numbered `n`
//! or more, which is how [`SegStack::open`] finds the live blocks again.

use super::budget::Account;
use super::segment::{detach, BlockMeta, BlockReader, HashId, Header, Kind, Layout, SegmentFile};
use super::vec::SegOptions;
use crate::error::{Corruption, StorageError};
use std::path::Path;

/// Where a flushed stack stands; a checkpoint records it to reopen the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StackMark {
    pub records: u64,
    pub segment_len: u64,
    /// Number of live (sealed) blocks.
    pub blocks: u64,
}

/// A LIFO of byte records (see the module docs).
pub struct SegStack {
    // Invariant: the stack's bytes, bottom to top, are the blocks of `blocks` in order (block
    // `i` is `blocks[i]`, numbered `i` in the file), then `buf`. Together they hold exactly
    // `records` whole records, the top one ending `buf` (or the last block). The file ends
    // right after the last block, or at `floor` if that is further (garbage below the floor).
    seg: SegmentFile,
    /// File length at the last flush: never truncated below.
    floor: u64,
    blocks: Vec<BlockMeta>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    records: u64,
    block_bytes: usize,
    hot_bytes: usize,
    reader: BlockReader,
    account: Account,
    sealed_raw: u64,
}

impl SegStack {
    /// An empty stack in file `NAME.seg` of `dir`.
    pub fn create(
        dir: &Path,
        name: &str,
        opts: &SegOptions,
        account: Account,
    ) -> Result<SegStack, StorageError> {
        let path = dir.join(format!("{name}.seg"));
        let block_bytes = opts.block_bytes.max(16);
        let seg = SegmentFile::create(
            &path,
            Header {
                kind: Kind::Stack,
                codec: super::segment::Codec::Zstd,
                hash: HashId::None,
                layout: Layout::Stream,
                block_bytes: block_bytes as u32,
                first_block: 0,
                filter: super::filter::Filter::None,
            },
        )?;
        detach(&path, opts.files)?;
        Ok(SegStack {
            reader: BlockReader::new(&path)?,
            floor: seg.len(),
            seg,
            blocks: Vec::new(),
            buf: Vec::new(),
            scratch: Vec::new(),
            records: 0,
            block_bytes,
            hot_bytes: opts.hot_blocks.max(1) * block_bytes,
            account,
            sealed_raw: 0,
        })
    }

    /// Reopens a stack flushed with [`SegStack::flush`] at `mark`.
    pub fn open(
        dir: &Path,
        name: &str,
        opts: &SegOptions,
        mark: StackMark,
        account: Account,
    ) -> Result<SegStack, StorageError> {
        let path = dir.join(format!("{name}.seg"));
        let (seg, found) = SegmentFile::open(&path, Kind::Stack, Some(mark.segment_len))?;
        let mut blocks: Vec<BlockMeta> = Vec::new();
        for (no, meta) in found {
            if no > blocks.len() as u64 {
                return Err(StorageError::Corrupt(Corruption {
                    path,
                    offset: meta.offset + 8,
                    expected: format!("block number <= {}", blocks.len()),
                    found: no.to_string(),
                }));
            }
            blocks.truncate(no as usize);
            blocks.push(meta);
        }
        if (blocks.len() as u64) < mark.blocks {
            return Err(StorageError::Corrupt(Corruption {
                path,
                offset: mark.segment_len,
                expected: format!("{} stack blocks (the recorded mark)", mark.blocks),
                found: format!("{} blocks", blocks.len()),
            }));
        }
        blocks.truncate(mark.blocks as usize);
        let block_bytes = seg.header().block_bytes as usize;
        let s = SegStack {
            reader: BlockReader::new(&path)?,
            floor: seg.len(),
            seg,
            sealed_raw: blocks.iter().map(|b| b.raw_len as u64).sum(),
            blocks,
            buf: Vec::new(),
            scratch: Vec::new(),
            records: mark.records,
            block_bytes,
            hot_bytes: opts.hot_blocks.max(1) * block_bytes,
            account,
        };
        s.update_account();
        Ok(s)
    }

    pub fn len(&self) -> u64 {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Pushes a record.
    pub fn push(&mut self, rec: &[u8]) -> Result<(), StorageError> {
        let n = super::record_len(rec, "stack")?;
        self.buf.extend_from_slice(rec);
        self.buf.extend_from_slice(&n);
        self.records += 1;
        if self.buf.len() >= self.hot_bytes + self.block_bytes {
            let mut sealed = 0;
            while self.buf.len() - sealed >= self.hot_bytes + self.block_bytes {
                let no = self.blocks.len() as u64;
                let meta = self
                    .seg
                    .append(no, &self.buf[sealed..sealed + self.block_bytes])?;
                self.blocks.push(meta);
                self.sealed_raw += self.block_bytes as u64;
                sealed += self.block_bytes;
            }
            self.buf.drain(..sealed);
            self.update_account();
        }
        Ok(())
    }

    /// Pops the top record into `out`; `false` when the stack is empty.
    pub fn pop(&mut self, out: &mut Vec<u8>) -> Result<bool, StorageError> {
        if self.records == 0 {
            return Ok(false);
        }
        self.ensure(4)?;
        let end = self.buf.len();
        let n = u32::from_le_bytes(self.buf[end - 4..].try_into().unwrap()) as usize;
        self.ensure(4 + n)?;
        let end = self.buf.len();
        out.clear();
        out.extend_from_slice(&self.buf[end - 4 - n..end - 4]);
        self.buf.truncate(end - 4 - n);
        self.records -= 1;
        Ok(true)
    }

    /// Brings sealed blocks back until `buf` holds at least `k` bytes.
    fn ensure(&mut self, k: usize) -> Result<(), StorageError> {
        while self.buf.len() < k {
            let Some(meta) = self.blocks.pop() else {
                return Err(StorageError::Corrupt(Corruption {
                    path: self.seg.path().to_path_buf(),
                    offset: self.seg.len(),
                    expected: format!("{k} more bytes of stack records"),
                    found: format!("{} bytes", self.buf.len()),
                }));
            };
            self.reader
                .read(self.seg.path(), self.seg.file(), &meta, &mut self.scratch)?;
            self.scratch.extend_from_slice(&self.buf);
            std::mem::swap(&mut self.buf, &mut self.scratch);
            if meta.offset >= self.floor {
                self.seg.truncate(meta.offset)?;
            }
            self.sealed_raw -= meta.raw_len as u64;
            self.update_account();
        }
        Ok(())
    }

    /// Seals the whole buffer and syncs the file; the mark reopens the stack as it is now.
    pub fn flush(&mut self) -> Result<StackMark, StorageError> {
        if !self.buf.is_empty() {
            let no = self.blocks.len() as u64;
            let meta = self.seg.append(no, &self.buf)?;
            self.blocks.push(meta);
            self.sealed_raw += self.buf.len() as u64;
            self.buf.clear();
        }
        self.seg.sync()?;
        self.floor = self.seg.len();
        self.update_account();
        Ok(StackMark {
            records: self.records,
            segment_len: self.seg.len(),
            blocks: self.blocks.len() as u64,
        })
    }

    /// RAM held: the top buffer and the scratch buffer.
    pub fn ram_bytes(&self) -> u64 {
        (self.buf.capacity() + self.scratch.capacity()) as u64
    }

    /// Bytes in the segment file.
    pub fn disk_bytes(&self) -> u64 {
        self.seg.len()
    }

    fn update_account(&self) {
        self.account
            .set(self.ram_bytes(), self.disk_bytes(), self.sealed_raw);
    }
}
