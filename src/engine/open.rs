//! The BFS open set for stores that do not keep state vectors (hash compaction, ComBack, …):
//! a FIFO of `(state id, state vector)` records.
//!
//! Invariant: `buf[head..]` holds the queued records back to back, each
//! `id: u64 LE | len: u32 LE | len bytes`; `head` only grows until the dead prefix is larger
//! than the live part, then the live part is moved to the front (amortised O(1) per byte).

#[derive(Default)]
pub struct OpenQueue {
    buf: Vec<u8>,
    head: usize,
    len: u64,
}

impl OpenQueue {
    pub fn push(&mut self, id: u64, state: &[u8]) {
        self.buf.extend_from_slice(&id.to_le_bytes());
        self.buf
            .extend_from_slice(&(state.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(state);
        self.len += 1;
    }

    /// Pops the oldest record into `state`, returning its id.
    pub fn pop(&mut self, state: &mut Vec<u8>) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let h = self.head;
        let id = u64::from_le_bytes(self.buf[h..h + 8].try_into().unwrap());
        let n = u32::from_le_bytes(self.buf[h + 8..h + 12].try_into().unwrap()) as usize;
        state.clear();
        state.extend_from_slice(&self.buf[h + 12..h + 12 + n]);
        self.head = h + 12 + n;
        self.len -= 1;
        if self.head > self.buf.len() / 2 && self.head > 1 << 16 {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        Some(id)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn ram_bytes(&self) -> u64 {
        self.buf.capacity() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_across_compaction() {
        let mut q = OpenQueue::default();
        let mut out = Vec::new();
        let mut next_pop = 0u64;
        for i in 0..200_000u64 {
            q.push(i, &i.to_le_bytes()[..(i % 8) as usize]);
            if i % 3 == 0 {
                let id = q.pop(&mut out).unwrap();
                assert_eq!(id, next_pop);
                assert_eq!(out, &id.to_le_bytes()[..(id % 8) as usize]);
                next_pop += 1;
            }
        }
        while let Some(id) = q.pop(&mut out) {
            assert_eq!(id, next_pop);
            next_pop += 1;
        }
        assert_eq!(next_pop, 200_000);
    }
}
