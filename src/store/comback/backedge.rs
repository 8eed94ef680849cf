//! The backedge table: state number → (parent number, transition, depth, descriptor), one
//! fixed-size record per state in state-number order.
//!
//! The records live in a segment vector of the run's storage ([`Records`]): the newest ones
//! uncompressed in its hot window, older ones in compressed blocks of which a small cache is
//! kept (sizes: [`layout`]).
//!
//! Record layout (24 bytes, little-endian):
//! `parent: u64 (u64::MAX for the initial state) | transition: u32 | depth: u32 | descriptor: u64`.
//! The descriptor (the state's `b`-bit hash, left-aligned) is kept here, not in RAM, so the
//! state table can be rebuilt at a larger size by a sequential scan of this table.

use crate::error::StoreError;
use crate::model::TransitionId;
use crate::store::records::{Accounting, Disk, Layout, Records, RecordsMark};
use crate::store::StateId;

/// Bytes per backedge record.
pub const RECORD_LEN: usize = 24;

/// The parent recorded for the initial state.
pub const NO_PARENT: u64 = u64::MAX;

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

/// The file name of the backedge table (`comback.backedges.GEN.seg` in the run directory).
pub const NAME: &str = "comback.backedges";

/// Sizes of the backedge vector. Blocks of 256 records (6 KiB) keep a miss cheap: replays and
/// candidate checks read single records of old states, and a miss reads and decompresses one
/// block. The hot window (16 blocks, the 4,096 newest states) is small because the full-state
/// cache already holds the newest states. The block cache is sized by [`cache_bytes_for`].
pub fn layout() -> Layout {
    Layout {
        block_bytes: 256 * RECORD_LEN,
        hot_blocks: 16,
        cache_bytes: MIN_CACHE,
    }
}

const MIN_CACHE: u64 = 512 << 10;
const MAX_CACHE: u64 = 2 << 20;

/// The block cache for a table of `states` records: the whole table up to 2 MiB, at least
/// 512 KiB. On large runs the blocks missed are old ones read once or twice each, so a larger
/// cache barely helps (Kanban-PT-00005, BFS, 240,000-entry state cache: 107,000 misses with
/// 512 KiB, 100,000 with 2 MiB, 93,000 with 8 MiB, for 8.4 million reads); on small runs
/// with weak hashes and no state cache, where every lookup replays many candidates from the
/// initial state, a table that does not fit thrashes (TokenRing-PT-010, 58,905 states, 8-bit
/// hashes, no cache: 40 million misses, 50× slower, with 512 KiB).
pub fn cache_bytes_for(states: u64) -> u64 {
    (states * RECORD_LEN as u64).clamp(MIN_CACHE, MAX_CACHE)
}

/// The backedge table of a ComBack store.
pub struct BackedgeTable {
    recs: Records,
}

impl BackedgeTable {
    pub fn new(disk: &Disk) -> Result<Self, StoreError> {
        Ok(BackedgeTable {
            recs: Records::create(disk, NAME, RECORD_LEN, layout(), Accounting::Own)?,
        })
    }

    /// Reopens the table at a checkpoint.
    pub fn open(disk: &Disk, mark: &RecordsMark) -> Result<Self, StoreError> {
        let recs = Records::open(disk, mark, layout(), Accounting::Own)?;
        if recs.width() != RECORD_LEN {
            return Err(StoreError::Invalid {
                store: "comback",
                message: format!(
                    "backedge file has {}-byte records, not {RECORD_LEN}",
                    recs.width()
                ),
            });
        }
        Ok(BackedgeTable { recs })
    }

    pub fn push(&mut self, e: &Backedge) -> Result<StateId, StoreError> {
        self.recs.push(&e.encode())
    }

    #[inline]
    pub fn get(&self, id: StateId) -> Result<Backedge, StoreError> {
        self.recs.with(id, |r| {
            Backedge::decode(r.try_into().expect("24-byte record"))
        })
    }

    pub fn set(&mut self, id: StateId, e: &Backedge) -> Result<(), StoreError> {
        self.recs.set(id, &e.encode())
    }

    /// Calls `f(id, record)` for every state in order (a sequential read of the file).
    pub fn scan(&self, mut f: impl FnMut(StateId, Backedge)) -> Result<(), StoreError> {
        self.recs
            .scan(|i, r| f(i, Backedge::decode(r.try_into().expect("24-byte record"))))
    }

    pub fn checkpoint(&mut self) -> Result<RecordsMark, StoreError> {
        self.recs.checkpoint()
    }

    /// Resizes the block cache for up to `states` states ([`cache_bytes_for`]).
    pub fn fit_cache(&mut self, states: u64) -> Result<(), StoreError> {
        self.recs.set_cache_bytes(cache_bytes_for(states))
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

    pub fn cache_counts(&self) -> (u64, u64) {
        self.recs.cache_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bounds_are_checked() {
        let storage =
            crate::storage::Storage::new(&crate::storage::StorageConfig::default()).unwrap();
        let mut t = BackedgeTable::new(&Disk::new(&storage)).unwrap();
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
        assert!(t.get(1000).is_err());
        assert!(t.set(1000, &e).is_err());
    }
}
