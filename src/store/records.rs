//! Record arrays of the path-based stores (ComBack backedges, Δ records and explicit states)
//! in segment vectors of the run's [`Storage`].
//!
//! * [`Disk`]: what a store keeps of its run's storage (directory, budget, whether files are
//!   kept) so that it can create vectors after construction (Δ widenings, new epochs,
//!   compactions) without borrowing the [`Storage`]; it also remembers files that a store no
//!   longer uses and deletes them once no checkpoint can need them.
//! * [`Records`]: a [`SegVec`] with sizes chosen by the store ([`Layout`]), compacted into a
//!   fresh file when updates of sealed records (which the segment vector writes back as new
//!   block versions) leave more superseded bytes than live ones.
//!
//! File names are `BASE.GEN.seg`, where `GEN` counts the compactions of that array: names are
//! the same in every run that makes the same inserts, which is how a checkpoint finds them.

use crate::error::{StorageError, StoreError};
use crate::storage::filter::Filter;
use crate::storage::segment::Codec;
use crate::storage::segment::FileLifetime;
use crate::storage::{
    Account, Budget, FileMark, MemoryLimit, SegOptions, SegVec, Storage, VecMark,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Sizes of one record array.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Target raw bytes per block (rounded down to a power-of-two number of records).
    pub block_bytes: usize,
    /// Blocks of the newest records kept uncompressed (a power of two).
    pub hot_blocks: usize,
    /// Bytes of decompressed sealed blocks cached when the run has no `--memory` budget
    /// (under a budget, the budget sizes the cache).
    pub cache_bytes: u64,
    /// zstd level of the blocks (`crate::storage::segment::ZSTD_LEVEL` unless the array's
    /// blocks are read at random often enough for decompression speed to matter).
    pub zstd_level: i32,
    /// Transform of the blocks before compression (Δ records: [`Filter::PackedFields`]).
    pub filter: Filter,
    /// How the blocks are compressed ([`Codec::Zstd`] unless the records are small numbers
    /// read at random, see [`Codec::Columns`]).
    pub codec: Codec,
}

struct DiskInner {
    dir: PathBuf,
    budget: Arc<Budget>,
    kept: bool,
    /// Files given up since the last checkpoint, and those given up before it: a file can be
    /// deleted once a checkpoint that does not list it has been taken after the one that did
    /// (see [`Disk::checkpointed`]).
    retired: Mutex<(Vec<String>, Vec<String>)>,
    /// Budget accounts of given-up arrays, by family, for reuse: the budget keeps every
    /// account it ever registered, so a store that replaces arrays (Δ widenings and epochs,
    /// compactions) would otherwise list hundreds of dead structures in the stats.
    free_accounts: Mutex<HashMap<String, Vec<Account>>>,
    /// Accounts registered per family (to name the next one).
    registered: Mutex<HashMap<String, usize>>,
}

/// Which budget account an array's vector reports to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accounting {
    /// Its own account in the run's budget (reused across generations of the family).
    Own,
    /// A private account that the owner sums into a shared one ([`Disk::shared_account`]),
    /// for families with many arrays alive at once (Δ epochs).
    Private,
}

/// A store's handle on its run's storage.
#[derive(Clone)]
pub struct Disk(Arc<DiskInner>);

impl Disk {
    pub fn new(storage: &Storage) -> Disk {
        Disk(Arc::new(DiskInner {
            dir: storage.dir().to_path_buf(),
            budget: storage.budget.clone(),
            kept: storage.is_kept(),
            retired: Mutex::new((Vec::new(), Vec::new())),
            free_accounts: Mutex::new(HashMap::new()),
            registered: Mutex::new(HashMap::new()),
        }))
    }

    /// An account for an array of `family`: a given-up one if there is one, else a new one
    /// named `family` (`family#2`, `#3`… for arrays of the family alive at the same time).
    fn account(&self, family: &str) -> Account {
        if let Some(a) = self
            .0
            .free_accounts
            .lock()
            .unwrap()
            .get_mut(family)
            .and_then(|v| v.pop())
        {
            return a;
        }
        let mut reg = self.0.registered.lock().unwrap();
        let n = reg.entry(family.to_string()).or_insert(0);
        *n += 1;
        let name = match *n {
            1 => family.to_string(),
            k => format!("{family}#{k}"),
        };
        self.0.budget.account(&name)
    }

    /// A budget account for a group of [`Accounting::Private`] arrays, which their owner
    /// keeps up to date with [`Records::figures`].
    /// The run's budget.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.0.budget
    }

    pub fn shared_account(&self, family: &str) -> Account {
        self.account(family)
    }

    fn free_account(&self, family: &str, a: Account) {
        a.set(0, 0, 0);
        self.0
            .free_accounts
            .lock()
            .unwrap()
            .entry(family.to_string())
            .or_default()
            .push(a);
    }

    /// The run directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.0.dir
    }

    /// Whether files keep their names (a checkpointed run).
    pub fn is_kept(&self) -> bool {
        self.0.kept
    }

    /// Where a spilled index's runs go (see [`crate::store::window::WindowHost::runs_place`]).
    pub fn runs_place(&self) -> (PathBuf, bool, Arc<Budget>) {
        (self.0.dir.clone(), self.0.kept, self.0.budget.clone())
    }

    fn options(&self, l: &Layout) -> SegOptions {
        let mut hot = l.hot_blocks.max(1).next_power_of_two();
        if let MemoryLimit::Bytes(limit) = self.0.budget.limit() {
            // As the storage does for its own structures: at most 1/16 of the budget in hot
            // windows per structure.
            let blocks = (limit / 16 / l.block_bytes.max(1) as u64).max(1) as usize;
            let floor_pow2 = 1usize << (usize::BITS - 1 - blocks.leading_zeros());
            hot = hot.min(floor_pow2).max(1);
        }
        SegOptions {
            block_bytes: l.block_bytes,
            hot_blocks: hot,
            cache_bytes: l.cache_bytes,
            zstd_level: l.zstd_level,
            filter: l.filter,
            codec: l.codec,
            files: if self.0.kept {
                FileLifetime::Named
            } else {
                FileLifetime::Unlinked
            },
        }
    }

    fn retire(&self, name: &str) {
        if self.0.kept {
            self.0.retired.lock().unwrap().0.push(format!("{name}.seg"));
        }
    }

    /// Called by a store's `checkpoint` once its new mark is made: deletes the files given up
    /// before the previous checkpoint (neither that checkpoint nor this one lists them).
    pub fn checkpointed(&self) {
        let mut r = self.0.retired.lock().unwrap();
        for f in r.1.drain(..) {
            let _ = std::fs::remove_file(self.0.dir.join(f));
        }
        r.1 = std::mem::take(&mut r.0);
    }
}

/// How to reopen a [`Records`] array.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordsMark {
    pub base: String,
    pub generation: u32,
    pub vec: VecMark,
}

impl RecordsMark {
    pub fn file(&self) -> FileMark {
        FileMark::segment(
            &format!("{}.{}", self.base, self.generation),
            self.vec.segment_len,
        )
    }
}

/// Compaction starts when superseded bytes exceed an eighth of the live bytes and this much:
/// the file stays within 1.125× its live size (plus this), and each byte of garbage costs at
/// most eight bytes of rewriting.
const COMPACT_MIN_GARBAGE: u64 = 1 << 20;

/// A fixed-width record array in a segment vector (see the module docs).
pub struct Records {
    disk: Disk,
    /// Budget account family: the base name without its numbers (`delta.explicit`).
    family: String,
    base: String,
    generation: u32,
    layout: Layout,
    accounting: Accounting,
    vec: SegVec,
    compactions: u64,
    /// Cache hits and misses of the vectors replaced by compactions.
    past_counts: (u64, u64),
}

fn vec_name(base: &str, generation: u32) -> String {
    format!("{base}.{generation}")
}

/// `delta.explicit.12` → `delta.explicit`, `delta.records.w31` → `delta.records`.
fn family(base: &str) -> String {
    base.split('.')
        .filter(|p| !p.chars().any(|c| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(".")
}

impl Records {
    /// A new empty array of `width`-byte records named `base`.
    pub fn create(
        disk: &Disk,
        base: &str,
        width: usize,
        layout: Layout,
        accounting: Accounting,
    ) -> Result<Records, StoreError> {
        Self::create_gen(disk, base, 0, width, layout, accounting)
    }

    fn account_for(disk: &Disk, family: &str, name: &str, accounting: Accounting) -> Account {
        match accounting {
            Accounting::Own => disk.account(family),
            Accounting::Private => Account::detached(name),
        }
    }

    fn create_gen(
        disk: &Disk,
        base: &str,
        generation: u32,
        width: usize,
        layout: Layout,
        accounting: Accounting,
    ) -> Result<Records, StoreError> {
        Self::with_vec(
            disk,
            base,
            generation,
            layout,
            accounting,
            |dir, name, opts, acc, b| SegVec::create(dir, name, width, opts, acc, b),
        )
    }

    /// Reopens an array at a checkpoint's mark (records written after it are cut off).
    pub fn open(
        disk: &Disk,
        mark: &RecordsMark,
        layout: Layout,
        accounting: Accounting,
    ) -> Result<Records, StoreError> {
        let (base, generation) = (&mark.base, mark.generation);
        Self::with_vec(
            disk,
            base,
            generation,
            layout,
            accounting,
            |dir, name, opts, acc, b| SegVec::open(dir, name, opts, Some(mark.vec), acc, b),
        )
    }

    /// The array of generation `generation` of `base` around the vector `vec` makes (created
    /// or reopened) with that generation's file name, options and account.
    fn with_vec(
        disk: &Disk,
        base: &str,
        generation: u32,
        layout: Layout,
        accounting: Accounting,
        vec: impl FnOnce(
            &Path,
            &str,
            &SegOptions,
            Account,
            Option<Arc<Budget>>,
        ) -> Result<SegVec, StorageError>,
    ) -> Result<Records, StoreError> {
        let name = vec_name(base, generation);
        let d = &disk.0;
        let family = family(base);
        let account = Self::account_for(disk, &family, &name, accounting);
        let vec = vec(
            &d.dir,
            &name,
            &disk.options(&layout),
            account,
            Some(d.budget.clone()),
        )?;
        Ok(Records {
            disk: disk.clone(),
            family,
            base: base.to_string(),
            generation,
            layout,
            accounting,
            vec,
            compactions: 0,
            past_counts: (0, 0),
        })
    }

    #[inline]
    pub fn len(&self) -> u64 {
        self.vec.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vec.is_empty()
    }

    pub fn width(&self) -> usize {
        self.vec.width()
    }

    pub fn push(&mut self, rec: &[u8]) -> Result<u64, StoreError> {
        Ok(self.vec.push(rec)?)
    }

    #[inline]
    pub fn get(&self, i: u64, out: &mut [u8]) -> Result<(), StoreError> {
        Ok(self.vec.get(i, out)?)
    }

    #[inline]
    pub fn with<R>(&self, i: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, StoreError> {
        Ok(self.vec.with(i, f)?)
    }

    /// A read-only view for threads that read records while the store is borrowed (see
    /// [`crate::storage::vec::SegVec::view`]).
    pub fn view(&mut self) -> crate::storage::vec::SegView<'_> {
        self.vec.view()
    }

    /// Takes back the blocks a thread read through [`Records::view`].
    pub fn adopt(&mut self, r: &mut crate::storage::vec::SegReader) -> Result<(), StoreError> {
        Ok(self.vec.adopt(r)?)
    }

    /// See [`crate::storage::vec::SegVec::with_sequential`]: for reads in record order.
    #[inline]
    pub fn with_sequential<R>(&self, i: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, StoreError> {
        Ok(self.vec.with_sequential(i, f)?)
    }

    /// See [`crate::storage::vec::SegVec::set_is_free`].
    pub fn set_is_free(&self, i: u64) -> bool {
        self.vec.set_is_free(i)
    }

    /// Overwrites record `i`; compacts the file when superseded block versions pile up.
    pub fn set(&mut self, i: u64, rec: &[u8]) -> Result<(), StoreError> {
        self.vec.set(i, rec)?;
        let garbage = self.vec.garbage_bytes();
        if garbage > COMPACT_MIN_GARBAGE && garbage * 9 > self.vec.disk_bytes() {
            self.compact()?;
        }
        Ok(())
    }

    /// Streams every record in order (without disturbing the cache).
    pub fn scan(&self, f: impl FnMut(u64, &[u8])) -> Result<(), StoreError> {
        Ok(self.vec.scan(f)?)
    }

    /// Copies the records into a fresh file (next generation) and gives up the old one.
    fn compact(&mut self) -> Result<(), StoreError> {
        let mut next = Self::create_gen(
            &self.disk,
            &self.base,
            self.generation + 1,
            self.vec.width(),
            self.layout,
            self.accounting,
        )?;
        let mut err = None;
        self.vec.scan(|_, r| {
            if err.is_none() {
                if let Err(e) = next.vec.push(r) {
                    err = Some(e);
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e.into());
        }
        next.compactions = self.compactions + 1;
        let (h, m) = self.cache_counts();
        next.past_counts = (h, m);
        let old = std::mem::replace(self, next);
        old.give_up();
        Ok(())
    }

    /// Drops the array for good: its figures leave the budget and its file is deleted once
    /// no checkpoint can need it.
    pub fn give_up(self) {
        self.disk.retire(&vec_name(&self.base, self.generation));
        let account = self.vec.account().clone();
        let (disk, family, accounting) = (self.disk.clone(), self.family.clone(), self.accounting);
        drop(self);
        match accounting {
            Accounting::Own => disk.free_account(&family, account),
            Accounting::Private => account.set(0, 0, 0),
        }
    }

    /// The vector's last published (RAM, disk, raw) figures.
    pub fn figures(&self) -> (u64, u64, u64) {
        let a = self.vec.account();
        (a.ram(), a.disk(), a.raw())
    }

    /// Makes the records durable and says how to reopen them.
    pub fn checkpoint(&mut self) -> Result<RecordsMark, StoreError> {
        let vec = self.vec.flush()?;
        Ok(RecordsMark {
            base: self.base.clone(),
            generation: self.generation,
            vec,
        })
    }

    /// Changes the block cache size (when the run has no budget; the budget decides
    /// otherwise).
    pub fn set_cache_bytes(&mut self, bytes: u64) -> Result<(), StoreError> {
        self.layout.cache_bytes = bytes;
        Ok(self.vec.set_cache_bytes(bytes)?)
    }

    /// Lets the block cache shrink to what the budget leaves it now.
    pub fn trim_cache(&mut self) -> Result<(), StoreError> {
        Ok(self.vec.trim_cache()?)
    }

    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    pub fn ram_bytes(&self) -> u64 {
        self.vec.ram_bytes()
    }

    /// See [`SegVec::spare_cache_bytes`].
    pub fn spare_cache_bytes(&self) -> u64 {
        self.vec.spare_cache_bytes()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.vec.disk_bytes()
    }

    /// Cache hits and misses on sealed records.
    pub fn cache_counts(&self) -> (u64, u64) {
        let (h, m) = self.vec.cache_counts();
        (h + self.past_counts.0, m + self.past_counts.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StorageConfig;

    const SMALL: Layout = Layout {
        block_bytes: 256,
        hot_blocks: 2,
        cache_bytes: 1024,
        zstd_level: crate::storage::segment::ZSTD_LEVEL,
        filter: crate::storage::filter::Filter::None,
        codec: crate::storage::segment::Codec::Zstd,
    };

    #[test]
    fn compaction_keeps_records_and_reopens_at_a_mark() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::kept(dir.path(), &StorageConfig::default());
        let disk = Disk::new(&storage);
        let mut r = Records::create(&disk, "t", 8, SMALL, Accounting::Own).unwrap();
        let n = 200_000u64;
        for i in 0..n {
            r.push(&i.to_le_bytes()).unwrap();
        }
        // Scattered updates of sealed records: dirty write-backs until compaction.
        let mut x = 1u64;
        for _ in 0..400_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) % n;
            r.set(i, &(i * 3).to_le_bytes()).unwrap();
        }
        assert!(r.compactions() > 0);
        let mark = r.checkpoint().unwrap();
        disk.checkpointed();
        disk.checkpointed();
        // Only the current generation's file is left (and its hot file).
        let segs: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".seg"))
            .collect();
        assert_eq!(segs, vec![mark.file().name.clone()]);
        let want: Vec<u64> = (0..n)
            .map(|i| {
                let mut b = [0u8; 8];
                r.get(i, &mut b).unwrap();
                u64::from_le_bytes(b)
            })
            .collect();
        // Written after the mark: cut back on reopen.
        for i in 0..5000u64 {
            r.push(&(i + 7).to_le_bytes()).unwrap();
        }
        r.set(3, &[9; 8]).unwrap();
        r.checkpoint().unwrap();
        drop(r);
        let r = Records::open(&disk, &mark, SMALL, Accounting::Own).unwrap();
        assert_eq!(r.len(), n);
        for (i, &w) in want.iter().enumerate() {
            let mut b = [0u8; 8];
            r.get(i as u64, &mut b).unwrap();
            assert_eq!(u64::from_le_bytes(b), w, "record {i}");
        }
    }
}
