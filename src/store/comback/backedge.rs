//! The backedge table: state number → (parent number, transition, depth, descriptor), one
//! fixed-size record per state in state-number order.
//!
//! [`RecordVec`] has exactly the API of the segment vector (`push`, `get`, `set`, `len`,
//! `ram_bytes`, `disk_bytes`) so the on-disk segment vector can replace it without touching
//! the ComBack logic; for now the records live in one in-RAM `Vec<u8>`.
//!
//! Record layout (24 bytes, little-endian):
//! `parent: u64 (u64::MAX for the initial state) | transition: u32 | depth: u32 | descriptor: u64`.
//! The descriptor (the state's `b`-bit hash, left-aligned) is kept here, not in RAM, so the
//! state table can be rebuilt at a larger size by a sequential scan of this table.

use crate::error::StoreError;
use crate::model::TransitionId;
use crate::store::StateId;

/// Bytes per backedge record.
pub const RECORD_LEN: usize = 24;

/// The parent recorded for the initial state.
pub const NO_PARENT: u64 = u64::MAX;

/// A vector of fixed-size records (stand-in for the segment vector).
pub struct RecordVec {
    rec_len: usize,
    bytes: Vec<u8>,
}

impl RecordVec {
    pub fn new(rec_len: usize) -> Self {
        RecordVec {
            rec_len,
            bytes: Vec::new(),
        }
    }

    fn check(&self, rec_len: usize) -> Result<(), StoreError> {
        if rec_len != self.rec_len {
            return Err(StoreError::Invalid {
                store: "comback",
                message: format!(
                    "record of {rec_len} bytes in a vector of {}-byte records",
                    self.rec_len
                ),
            });
        }
        Ok(())
    }

    /// Appends a record; returns its index.
    pub fn push(&mut self, rec: &[u8]) -> Result<u64, StoreError> {
        self.check(rec.len())?;
        let i = self.len();
        self.bytes.extend_from_slice(rec);
        Ok(i)
    }

    /// Copies record `i` into `out`.
    #[inline]
    pub fn get(&self, i: u64, out: &mut [u8]) -> Result<(), StoreError> {
        self.check(out.len())?;
        let start = i as usize * self.rec_len;
        match self.bytes.get(start..start + self.rec_len) {
            Some(r) => {
                out.copy_from_slice(r);
                Ok(())
            }
            None => Err(out_of_range(i, self.len())),
        }
    }

    /// Overwrites record `i`.
    pub fn set(&mut self, i: u64, rec: &[u8]) -> Result<(), StoreError> {
        self.check(rec.len())?;
        let len = self.len();
        let start = i as usize * self.rec_len;
        match self.bytes.get_mut(start..start + self.rec_len) {
            Some(r) => {
                r.copy_from_slice(rec);
                Ok(())
            }
            None => Err(out_of_range(i, len)),
        }
    }

    pub fn len(&self) -> u64 {
        (self.bytes.len() / self.rec_len) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn ram_bytes(&self) -> u64 {
        self.bytes.capacity() as u64
    }

    pub fn disk_bytes(&self) -> u64 {
        0
    }
}

fn out_of_range(i: u64, len: u64) -> StoreError {
    StoreError::Invalid {
        store: "comback",
        message: format!("backedge record {i} out of range (table holds {len})"),
    }
}

/// One decoded backedge record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backedge {
    /// The parent's number, or [`NO_PARENT`] for the initial state.
    pub parent: StateId,
    pub transition: TransitionId,
    /// Length of the stored path from the initial state (an upper bound after path
    /// optimisation repointed an ancestor; always greater than the parent's depth).
    pub depth: u32,
    /// The state's descriptor (left-aligned `b`-bit hash).
    pub descriptor: u64,
}

impl Backedge {
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut r = [0u8; RECORD_LEN];
        r[0..8].copy_from_slice(&self.parent.to_le_bytes());
        r[8..12].copy_from_slice(&self.transition.0.to_le_bytes());
        r[12..16].copy_from_slice(&self.depth.to_le_bytes());
        r[16..24].copy_from_slice(&self.descriptor.to_le_bytes());
        r
    }

    pub fn decode(r: &[u8; RECORD_LEN]) -> Self {
        Backedge {
            parent: u64::from_le_bytes(r[0..8].try_into().unwrap()),
            transition: TransitionId(u32::from_le_bytes(r[8..12].try_into().unwrap())),
            depth: u32::from_le_bytes(r[12..16].try_into().unwrap()),
            descriptor: u64::from_le_bytes(r[16..24].try_into().unwrap()),
        }
    }
}

/// The backedge table of a ComBack store.
pub struct BackedgeTable {
    recs: RecordVec,
}

impl Default for BackedgeTable {
    fn default() -> Self {
        BackedgeTable {
            recs: RecordVec::new(RECORD_LEN),
        }
    }
}

impl BackedgeTable {
    pub fn push(&mut self, e: &Backedge) -> Result<StateId, StoreError> {
        self.recs.push(&e.encode())
    }

    #[inline]
    pub fn get(&self, id: StateId) -> Result<Backedge, StoreError> {
        let mut r = [0u8; RECORD_LEN];
        self.recs.get(id, &mut r)?;
        Ok(Backedge::decode(&r))
    }

    pub fn set(&mut self, id: StateId, e: &Backedge) -> Result<(), StoreError> {
        self.recs.set(id, &e.encode())
    }

    pub fn len(&self) -> u64 {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    pub fn ram_bytes(&self) -> u64 {
        self.recs.ram_bytes()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.recs.disk_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bounds_are_checked() {
        let mut t = BackedgeTable::default();
        for i in 0..1000u64 {
            let e = Backedge {
                parent: if i == 0 { NO_PARENT } else { i / 2 },
                transition: TransitionId(i as u32 * 3),
                depth: (64 - i.leading_zeros()),
                descriptor: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            };
            assert_eq!(t.push(&e).unwrap(), i);
        }
        let mut e = t.get(777).unwrap();
        assert_eq!(e.parent, 388);
        assert_eq!(e.transition, TransitionId(2331));
        e.parent = 5;
        t.set(777, &e).unwrap();
        assert_eq!(t.get(777).unwrap(), e);
        assert!(matches!(t.get(1000), Err(StoreError::Invalid { .. })));
        assert!(matches!(t.set(1000, &e), Err(StoreError::Invalid { .. })));
        let mut rv = RecordVec::new(4);
        assert!(rv.push(&[1, 2, 3]).is_err());
    }
}
