//! The backedge table: state number → (parent number, transition, depth), one fixed-size
//! record per state in state-number order, and the states' descriptors in a second vector.
//!
//! Both live in segment vectors of the run's storage ([`Records`]): the newest records
//! uncompressed in a hot window, older ones in compressed blocks of which a small cache is
//! kept (sizes: [`layout`], [`descriptor_layout`]).
//!
//! Backedge record layout (12 bytes, little-endian):
//! `parent: u32 (u32::MAX for the initial state) | transition: u32 | depth: u32`.
//! State numbers fit in 32 bits (the state table's [`MAX_STATES`]), so the record is exact for
//! every run the store accepts. Replays and candidate checks read these records at random; the
//! smaller they are, the more of them a cached byte holds.
//!
//! The descriptors (each state's `b`-bit hash, left-aligned, 8 bytes) are in their own vector
//! (`comback.descriptors`): they are read in order to rebuild the state table when it grows
//! or on resume, and at random only to tell a fingerprint match from a descriptor match when
//! the fingerprint is not the whole descriptor (more than 16 hash bits), which is rare.

use super::table::MAX_STATES;
use crate::error::StoreError;
use crate::model::TransitionId;
use crate::storage::vec::{SegReader, SegView};
use crate::store::records::{Accounting, Disk, Layout, Records, RecordsMark};
use crate::store::StateId;

/// Bytes per backedge record.
pub const RECORD_LEN: usize = 12;

/// Bytes per descriptor record.
pub const DESCRIPTOR_LEN: usize = 8;

/// The parent recorded for the initial state.
pub const NO_PARENT: u64 = u64::MAX;

/// How [`NO_PARENT`] is written in a record (never a state number: ids are below
/// [`MAX_STATES`] `< u32::MAX`).
const NO_PARENT_32: u32 = u32::MAX;

const _: () = assert!(MAX_STATES < NO_PARENT_32 as u64);

/// One decoded backedge record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backedge {
    /// The parent's number, or [`NO_PARENT`] for the initial state.
    pub parent: StateId,
    pub transition: TransitionId,
    /// Length of the stored path from the initial state (an upper bound after path
    /// optimisation repointed an ancestor; always greater than the parent's depth).
    pub depth: u32,
}

impl Backedge {
    /// The record, or an error for a parent that does not fit 32 bits (never for a state
    /// number of this store).
    pub fn encode(&self) -> Result<[u8; RECORD_LEN], StoreError> {
        let parent = if self.parent == NO_PARENT {
            NO_PARENT_32
        } else if self.parent < MAX_STATES {
            self.parent as u32
        } else {
            return Err(StoreError::CapacityExceeded {
                store: "comback",
                message: format!("parent {} does not fit a 32-bit backedge", self.parent),
            });
        };
        let mut r = [0u8; RECORD_LEN];
        r[0..4].copy_from_slice(&parent.to_le_bytes());
        r[4..8].copy_from_slice(&self.transition.0.to_le_bytes());
        r[8..12].copy_from_slice(&self.depth.to_le_bytes());
        Ok(r)
    }

    #[inline(always)]
    pub fn decode(r: &[u8; RECORD_LEN]) -> Self {
        let parent = u32::from_le_bytes(r[0..4].try_into().unwrap());
        Backedge {
            parent: if parent == NO_PARENT_32 {
                NO_PARENT
            } else {
                parent as u64
            },
            transition: TransitionId(u32::from_le_bytes(r[4..8].try_into().unwrap())),
            depth: u32::from_le_bytes(r[8..12].try_into().unwrap()),
        }
    }
}

/// The file name of the backedge table (`comback.backedges.GEN.seg` in the run directory).
pub const NAME: &str = "comback.backedges";

/// The file name of the descriptors (`comback.descriptors.GEN.seg`).
pub const DESCRIPTORS: &str = "comback.descriptors";

/// Sizes of the backedge vector. Blocks of 256 records (3 KiB) keep a miss cheap: replays and
/// candidate checks read single records of old states, and a miss reads and decompresses one
/// block. The hot window (16 blocks, the 4,096 newest states) is small because the full-state
/// cache already holds the newest states. The block cache is sized by [`cache_bytes_for`].
///
/// Blocks are stored as u32 columns ([`Codec::Columns`](crate::storage::segment::Codec)),
/// not zstd: in BFS a block's parents span a few hundred consecutive numbers, its transitions
/// fit a few bits and its depths one or two values, so frame-of-reference packing takes
/// about as little room (Peterson-PT-3: 2.4 bytes a record), and a miss decodes the block
/// with no entropy tables to build. Measured (BFS, same batch): Kanban-PT-00005, 360,000
/// entries, 84,000 misses: 2.74 → 2.40 s CPU; Peterson-PT-3, 2^17 entries, 374,000 misses:
/// 5.07 → 4.14 s. Files written with zstd (older checkpoints) are still read as such.
/// Bytes of a block of backedge records.
pub const BLOCK_BYTES: usize = 256 * RECORD_LEN;

pub fn layout() -> Layout {
    Layout {
        block_bytes: BLOCK_BYTES,
        hot_blocks: 16,
        cache_bytes: MIN_CACHE,
        zstd_level: ZSTD_LEVEL,
        filter: crate::storage::filter::Filter::None,
        codec: crate::storage::segment::Codec::Columns,
    }
}

/// Sizes of the descriptor vector: read in order (table rebuilds) and rarely at random, so a
/// small hot window and a small cache.
pub fn descriptor_layout() -> Layout {
    Layout {
        block_bytes: 2048 * DESCRIPTOR_LEN,
        hot_blocks: 2,
        cache_bytes: 32 << 10,
        zstd_level: ZSTD_LEVEL,
        filter: crate::storage::filter::Filter::None,
        codec: crate::storage::segment::Codec::Zstd,
    }
}

/// zstd level of the descriptor vector (and of backedge files written before the u32
/// columns): −1 stores literals uncompressed, so a block decompresses
/// about twice as fast as at level 1, for the same size (12-byte records compress by
/// matches). Measured on Peterson-PT-3 (BFS, 2^13-entry state cache, 580,000 block misses):
/// 9.6 s CPU at level 1, 8.5 s at −1, disk 11.01 → 11.07 B/state.
const ZSTD_LEVEL: i32 = -1;

pub const MIN_CACHE: u64 = 512 << 10;

/// What the block caches keep, under a budget, before an automatic state cache may take
/// more (and what it gives back to once the index spills): at [`MIN_CACHE`] they thrashed
/// once the spill's structures and the LTS writer came in beside a state cache sized
/// before them (Peterson-PT-3, `--memory 32M -o`: 5.8 M block misses against 0.28 M
/// without `-o`; Kanban-PT-00005 under 24M with `-o`: 13.6 M).
pub const WORKING_CACHE: u64 = 2 * MIN_CACHE;
const MAX_CACHE: u64 = 2 << 20;

/// The block cache for a table of `states` records: the whole table up to 2 MiB, at least
/// 512 KiB. On large runs the blocks missed are old ones read once or twice each, so a larger
/// cache barely helps; on small runs with weak hashes and no state cache, where every lookup
/// replays many candidates from the initial state, a table that does not fit thrashes
/// (TokenRing-PT-010, 58,905 states, 8-bit hashes, no cache: 40 million misses, 50× slower,
/// with 512 KiB of 24-byte records).
pub fn cache_bytes_for(states: u64) -> u64 {
    (states * RECORD_LEN as u64).clamp(MIN_CACHE, MAX_CACHE)
}

/// Where a checkpoint finds the two vectors.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BackedgeMark {
    pub backedges: RecordsMark,
    pub descriptors: RecordsMark,
}

/// A backedge record read through a view ([`BackedgeTable::split`]).
#[inline]
pub fn read(view: &SegView<'_>, r: &mut SegReader, id: StateId) -> Result<Backedge, StoreError> {
    Ok(view.with(r, id, |rec| {
        Backedge::decode(rec.try_into().expect("12-byte record"))
    })?)
}

/// The descriptors of a [`BackedgeTable::split`], for one thread.
pub struct Descriptors<'a>(&'a Records);

impl Descriptors<'_> {
    /// State `id`'s descriptor.
    pub fn get(&self, id: StateId) -> Result<u64, StoreError> {
        self.0.with(id, |r| {
            u64::from_le_bytes(r.try_into().expect("8-byte record"))
        })
    }
}

/// The backedge table of a ComBack store.
pub struct BackedgeTable {
    recs: Records,
    descs: Records,
}

fn check_width(recs: &Records, width: usize) -> Result<(), StoreError> {
    if recs.width() != width {
        return Err(StoreError::Invalid {
            store: "comback",
            message: format!(
                "{}-byte records in a file of {width}-byte records (written by another version?)",
                recs.width()
            ),
        });
    }
    Ok(())
}

impl BackedgeTable {
    pub fn new(disk: &Disk) -> Result<Self, StoreError> {
        Ok(BackedgeTable {
            recs: Records::create(disk, NAME, RECORD_LEN, layout(), Accounting::Own)?,
            descs: Records::create(
                disk,
                DESCRIPTORS,
                DESCRIPTOR_LEN,
                descriptor_layout(),
                Accounting::Own,
            )?,
        })
    }

    /// Reopens the table at a checkpoint.
    pub fn open(disk: &Disk, mark: &BackedgeMark) -> Result<Self, StoreError> {
        let recs = Records::open(disk, &mark.backedges, layout(), Accounting::Own)?;
        check_width(&recs, RECORD_LEN)?;
        let descs = Records::open(
            disk,
            &mark.descriptors,
            descriptor_layout(),
            Accounting::Own,
        )?;
        check_width(&descs, DESCRIPTOR_LEN)?;
        if recs.len() != descs.len() {
            return Err(StoreError::Invalid {
                store: "comback",
                message: format!(
                    "{} backedges but {} descriptors at the checkpoint",
                    recs.len(),
                    descs.len()
                ),
            });
        }
        Ok(BackedgeTable { recs, descs })
    }

    /// Appends state `len()`'s backedge and descriptor.
    pub fn push(&mut self, e: &Backedge, descriptor: u64) -> Result<StateId, StoreError> {
        let rec = e.encode()?;
        self.descs.push(&descriptor.to_le_bytes())?;
        self.recs.push(&rec)
    }

    /// For parallel BFS: the backedge records as a view that threads read while the table
    /// is borrowed (each with its own reader; their blocks are adopted back with
    /// [`BackedgeTable::adopt`]), and the descriptors for the one thread that reads them.
    /// Each thread's reader keeps `reader_blocks` blocks of [`BLOCK_BYTES`].
    pub fn split(&mut self, reader_blocks: usize) -> (SegView<'_>, Descriptors<'_>) {
        let view = self.recs.view().with_reader_blocks(reader_blocks);
        (view, Descriptors(&self.descs))
    }

    /// Takes back the backedge blocks a thread read through [`BackedgeTable::split`].
    pub fn adopt(&mut self, r: &mut SegReader) -> Result<(), StoreError> {
        self.recs.adopt(r)
    }

    #[inline]
    pub fn get(&self, id: StateId) -> Result<Backedge, StoreError> {
        self.recs.with(id, |r| {
            Backedge::decode(r.try_into().expect("12-byte record"))
        })
    }

    /// State `id`'s descriptor (a random read of the descriptor vector).
    pub fn descriptor(&self, id: StateId) -> Result<u64, StoreError> {
        self.descs.with(id, |r| {
            u64::from_le_bytes(r.try_into().expect("8-byte record"))
        })
    }

    pub fn set(&mut self, id: StateId, e: &Backedge) -> Result<(), StoreError> {
        let rec = e.encode()?;
        self.recs.set(id, &rec)
    }

    /// Calls `f(id, descriptor)` for every state in order (a sequential read of the
    /// descriptor file).
    pub fn scan_descriptors(&self, mut f: impl FnMut(StateId, u64)) -> Result<(), StoreError> {
        self.descs
            .scan(|i, r| f(i, u64::from_le_bytes(r.try_into().expect("8-byte record"))))
    }

    /// Calls `f(id, descriptor)` for the states `[from, to)` in order (a sequential read
    /// that leaves the block cache alone).
    pub fn descriptors_in(
        &self,
        from: StateId,
        to: StateId,
        mut f: impl FnMut(StateId, u64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for id in from..to {
            let d = self.descs.with_sequential(id, |r| {
                u64::from_le_bytes(r.try_into().expect("8-byte record"))
            })?;
            f(id, d)?;
        }
        Ok(())
    }

    pub fn checkpoint(&mut self) -> Result<BackedgeMark, StoreError> {
        Ok(BackedgeMark {
            backedges: self.recs.checkpoint()?,
            descriptors: self.descs.checkpoint()?,
        })
    }

    /// Resizes the block cache for up to `states` states: `bytes`, or [`cache_bytes_for`]
    /// when `bytes` is 0.
    pub fn fit_cache(&mut self, states: u64, bytes: u64) -> Result<(), StoreError> {
        let bytes = match bytes {
            0 => cache_bytes_for(states),
            b => b,
        };
        self.recs.set_cache_bytes(bytes)
    }

    /// Lets the block caches shrink to what the budget leaves them now.
    pub fn trim_cache(&mut self) -> Result<(), StoreError> {
        self.recs.trim_cache()?;
        self.descs.trim_cache()?;
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    pub fn ram_bytes(&self) -> u64 {
        self.recs.ram_bytes() + self.descs.ram_bytes()
    }

    /// Bytes of the two vectors' block caches that `trim_cache` can give back.
    pub fn spare_cache_bytes(&self) -> u64 {
        self.recs.spare_cache_bytes() + self.descs.spare_cache_bytes()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.recs.disk_bytes() + self.descs.disk_bytes()
    }

    /// RAM and disk bytes of the descriptor vector alone.
    pub fn descriptor_bytes(&self) -> (u64, u64) {
        (self.descs.ram_bytes(), self.descs.disk_bytes())
    }

    /// Block cache hits and misses of the backedge records.
    pub fn cache_counts(&self) -> (u64, u64) {
        self.recs.cache_counts()
    }

    /// Block cache hits and misses of the descriptors.
    pub fn descriptor_cache_counts(&self) -> (u64, u64) {
        self.descs.cache_counts()
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
            };
            assert_eq!(
                t.push(&e, i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).unwrap(),
                i
            );
        }
        assert_eq!(t.get(0).unwrap().parent, NO_PARENT);
        let mut e = t.get(777).unwrap();
        assert_eq!(e.parent, 388);
        assert_eq!(e.transition, TransitionId(2331));
        assert_eq!(
            t.descriptor(777).unwrap(),
            777u64.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        );
        e.parent = 5;
        t.set(777, &e).unwrap();
        assert_eq!(t.get(777).unwrap(), e);
        assert!(t.get(1000).is_err());
        assert!(t.descriptor(1000).is_err());
        assert!(t.set(1000, &e).is_err());
        let mut n = 0;
        t.scan_descriptors(|i, d| {
            assert_eq!(d, i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 1000);
        let wide = Backedge {
            parent: MAX_STATES,
            transition: TransitionId(0),
            depth: 1,
        };
        assert!(wide.encode().is_err());
    }
}
