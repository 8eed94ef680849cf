//! The engines' frontiers: a FIFO (BFS open set) or a LIFO (DFS frames) of byte records,
//! in RAM or in segment files ([`SegQueue`], [`SegStack`]) when the run has a storage. One
//! type each, whatever the backing, so that the engines are written once.
//!
//! In RAM, records sit back to back in one buffer: the queue's as `len: u32 LE | bytes`
//! from `head` on (the consumed prefix is dropped once it outweighs the rest, amortised O(1)
//! a byte), the stack's as `bytes | len: u32 LE` (popped from the end).

use super::{FileMark, QueueMark, SegQueue, SegStack, StackMark};
use crate::error::StorageError;

/// A FIFO of byte records.
pub enum Queue {
    Ram { buf: Vec<u8>, head: usize },
    Spilled(Box<SegQueue>),
}

impl Queue {
    /// An empty queue in RAM.
    pub fn in_ram() -> Queue {
        Queue::Ram {
            buf: Vec::new(),
            head: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, rec: &[u8]) -> Result<(), StorageError> {
        match self {
            Queue::Ram { buf, .. } => {
                buf.extend_from_slice(&(rec.len() as u32).to_le_bytes());
                buf.extend_from_slice(rec);
                Ok(())
            }
            Queue::Spilled(q) => q.push(rec),
        }
    }

    /// Pops the oldest record into `out`; `false` when the queue is empty.
    pub fn pop(&mut self, out: &mut Vec<u8>) -> Result<bool, StorageError> {
        if let Queue::Spilled(q) = self {
            return q.pop(out);
        }
        let copied = self.pop_with(&mut Vec::new(), |r| {
            out.clear();
            out.extend_from_slice(r);
        })?;
        Ok(copied.is_some())
    }

    /// Pops the oldest record and hands it to `f` (`None` when the queue is empty): in RAM
    /// the record is borrowed where it lies, spilled it is read into `scratch` first, so the
    /// caller copies what it keeps once.
    #[inline]
    pub fn pop_with<R>(
        &mut self,
        scratch: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, StorageError> {
        match self {
            Queue::Ram { buf, head } => {
                let h = *head;
                if h == buf.len() {
                    return Ok(None);
                }
                let n = u32::from_le_bytes(buf[h..h + 4].try_into().unwrap()) as usize;
                let r = f(&buf[h + 4..h + 4 + n]);
                *head = h + 4 + n;
                if *head > buf.len() / 2 && *head > 1 << 16 {
                    buf.drain(..*head);
                    *head = 0;
                }
                Ok(Some(r))
            }
            Queue::Spilled(q) => Ok(if q.pop(scratch)? {
                Some(f(scratch))
            } else {
                None
            }),
        }
    }

    /// Makes the queue durable for a checkpoint: its mark and the files it needs. A queue in
    /// RAM cannot be checkpointed (a checkpointed run keeps its frontier in segment files).
    pub fn checkpoint(&mut self) -> Result<(QueueMark, Vec<FileMark>), StorageError> {
        match self {
            Queue::Ram { .. } => Err(StorageError::Invalid(
                "a checkpointed run keeps its BFS queue in segment files".into(),
            )),
            Queue::Spilled(q) => {
                let m = q.flush()?;
                let files = q.files(&m);
                Ok((m, files))
            }
        }
    }

    /// After a checkpoint committed: deletes the segment files it no longer needs.
    pub fn checkpointed(&mut self) -> Result<(), StorageError> {
        match self {
            Queue::Ram { .. } => Ok(()),
            Queue::Spilled(q) => q.release_retired(),
        }
    }
}

/// A LIFO of byte records.
pub enum Stack {
    Ram(Vec<u8>),
    Spilled(Box<SegStack>),
}

impl Stack {
    #[inline]
    pub fn push(&mut self, rec: &[u8]) -> Result<(), StorageError> {
        match self {
            Stack::Ram(buf) => {
                buf.extend_from_slice(rec);
                buf.extend_from_slice(&(rec.len() as u32).to_le_bytes());
                Ok(())
            }
            Stack::Spilled(s) => s.push(rec),
        }
    }

    /// Pops the newest record into `out`; `false` when the stack is empty.
    #[inline]
    pub fn pop(&mut self, out: &mut Vec<u8>) -> Result<bool, StorageError> {
        match self {
            Stack::Ram(buf) => {
                let Some(end) = buf.len().checked_sub(4) else {
                    return Ok(false);
                };
                let n = u32::from_le_bytes(buf[end..].try_into().unwrap()) as usize;
                out.clear();
                out.extend_from_slice(&buf[end - n..end]);
                buf.truncate(end - n);
                Ok(true)
            }
            Stack::Spilled(s) => s.pop(out),
        }
    }

    /// Makes the stack durable for a checkpoint (see [`Queue::checkpoint`]); `name` is the
    /// stack's file name.
    pub fn checkpoint(&mut self, name: &str) -> Result<(StackMark, Vec<FileMark>), StorageError> {
        match self {
            Stack::Ram(_) => Err(StorageError::Invalid(
                "a checkpointed run keeps its DFS stack in segment files".into(),
            )),
            Stack::Spilled(s) => {
                let m = s.flush()?;
                Ok((m, vec![FileMark::segment(name, m.segment_len)]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_queue_is_fifo_across_compaction_and_ram_stack_is_lifo() {
        let mut q = Queue::in_ram();
        let mut s = Stack::Ram(Vec::new());
        let mut out = Vec::new();
        let rec = |i: u64| i.to_le_bytes()[..(i % 9) as usize].to_vec();
        let mut next_pop = 0u64;
        for i in 0..200_000u64 {
            q.push(&rec(i)).unwrap();
            s.push(&rec(i)).unwrap();
            if i % 3 == 0 {
                assert!(q.pop(&mut out).unwrap());
                assert_eq!(out, rec(next_pop));
                next_pop += 1;
            }
        }
        while q.pop(&mut out).unwrap() {
            assert_eq!(out, rec(next_pop));
            next_pop += 1;
        }
        assert_eq!(next_pop, 200_000);
        for i in (0..200_000u64).rev() {
            assert!(s.pop(&mut out).unwrap());
            assert_eq!(out, rec(i));
        }
        assert!(!s.pop(&mut out).unwrap());
        assert!(q.checkpoint().is_err() && s.checkpoint("x").is_err());
    }
}
