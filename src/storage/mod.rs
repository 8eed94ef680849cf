//! Bytes on disk: segment files and the containers built on them, under a RAM budget.
//!
//! * [`segment`]: the file format — header, zstd-compressed blocks with checksums, reopening
//!   at a recorded length;
//! * [`filter`]: reversible block transforms applied before zstd (bit-packed Δ records);
//! * [`mmap`]: mapped windows of files, the storage layer's only `unsafe` (the stores have two
//!   more: a prefetch hint in `store::slots` and `MADV_HUGEPAGE` in `store::comback`);
//! * [`vec`](mod@vec): [`SegVec`], fixed-width records with random access and in-place updates (state
//!   vectors, backedge tables, Δ records);
//! * [`queue`]: [`SegQueue`], a FIFO of variable-width records (BFS open sets);
//! * [`stack`]: [`SegStack`], a LIFO of variable-width records (DFS stacks);
//! * [`image`]: structures a checkpoint writes whole (a queue of records per checkpoint);
//! * [`budget`]: `--memory`, and per-structure RAM/disk accounting for the stats.
//!
//! A [`Storage`] bundles what a run's structures need: the budget, the work directory and the
//! spill policy.

pub mod budget;
pub mod filter;
pub mod frontier;
pub mod image;
pub mod mmap;
pub mod queue;
pub mod runs;
pub mod segment;
pub mod stack;
pub mod vec;

pub use budget::{Account, Budget, MemoryLimit, Usage};
pub use queue::{QueueMark, SegQueue};
pub use stack::{SegStack, StackMark};
pub use vec::{SegOptions, SegVec, VecMark};

use crate::error::StorageError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The length field the queue and the stack store beside each record (`u32` LE), or the error
/// for a record too long for it; `what` names the container in the error.
fn record_len(rec: &[u8], what: &str) -> Result<[u8; 4], StorageError> {
    let n = u32::try_from(rec.len())
        .map_err(|_| StorageError::Invalid(format!("{what} record of {} bytes", rec.len())))?;
    Ok(n.to_le_bytes())
}

/// When structures keep their data in segment files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SpillPolicy {
    /// Plain RAM vectors when the memory is unlimited; segment files under a `--memory` budget.
    Auto,
    /// Always segment files (tests and benchmarks of the spilling path).
    Always,
}

/// Storage settings of a run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct StorageConfig {
    pub memory: MemoryLimit,
    /// Parent of the run's work directory (the system temporary directory when `None`).
    pub workdir: Option<PathBuf>,
    pub spill: SpillPolicy,
    pub segments: SegOptions,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            memory: MemoryLimit::Unlimited,
            workdir: None,
            spill: SpillPolicy::Auto,
            segments: SegOptions::default(),
        }
    }
}

impl StorageConfig {
    /// Whether structures should live in segment files.
    pub fn spills(&self) -> bool {
        self.spill == SpillPolicy::Always || self.memory != MemoryLimit::Unlimited
    }
}

/// Where a run's files live.
enum RunDir {
    /// A fresh temporary directory, removed when the storage is dropped; files are unlinked
    /// at creation.
    Scratch(tempfile::TempDir),
    /// A checkpointed run's directory: files keep their names so that a checkpoint can
    /// reopen them, and the directory outlives the process.
    Kept(PathBuf),
    /// Another handle on a run's directory ([`Storage::handle`]): files are created as the
    /// owner's are (kept or unlinked); the directory belongs to the owner.
    Shared { path: PathBuf, kept: bool },
}

/// The storage of one run: its work directory, the budget and the settings.
pub struct Storage {
    dir: RunDir,
    pub budget: Arc<Budget>,
    pub config: StorageConfig,
    /// Whether the stores' vectors are looked up one record at a time, at random (a DFS),
    /// rather than in batches sorted by id (a BFS once its index spilled): see
    /// [`Storage::vec`]. Not part of the config: the search order decides it.
    random_lookups: bool,
}

/// A file of a checkpointed run's directory (`name` relative to it) of which a checkpoint
/// needs the first `len` bytes. Checkpoints record a CRC-32 of those bytes and refuse to
/// resume when it does not match.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileMark {
    pub name: String,
    pub len: u64,
}

impl FileMark {
    /// The segment file `NAME.seg` of container `name`, needed up to `len` bytes.
    pub fn segment(name: &str, len: u64) -> FileMark {
        FileMark {
            name: format!("{name}.seg"),
            len,
        }
    }
}

impl Storage {
    /// Creates a fresh directory `spillway-XXXXXX` under the configured work directory.
    pub fn new(config: &StorageConfig) -> Result<Storage, StorageError> {
        let parent = config.workdir.clone().unwrap_or_else(std::env::temp_dir);
        // A --workdir that does not exist yet is created (and left, as the user named it).
        std::fs::create_dir_all(&parent)
            .map_err(segment::io_err(&parent, "create the work directory"))?;
        let dir = tempfile::Builder::new()
            .prefix("spillway-")
            .tempdir_in(&parent)
            .map_err(segment::io_err(&parent, "create a work directory in"))?;
        Ok(Storage {
            dir: RunDir::Scratch(dir),
            budget: Budget::new(config.memory),
            config: config.clone(),
            random_lookups: false,
        })
    }

    /// The storage of a checkpointed run: files are created in `dir` itself (which must
    /// exist) under their own names and are not removed when the storage is dropped.
    pub fn kept(dir: &Path, config: &StorageConfig) -> Storage {
        Storage {
            dir: RunDir::Kept(dir.to_path_buf()),
            budget: Budget::new(config.memory),
            config: config.clone(),
            random_lookups: false,
        }
    }

    /// Whether [`Storage::with_random_lookups`] said so.
    pub fn random_lookups(&self) -> bool {
        self.random_lookups
    }

    /// The storage of a search whose store looks its vectors up one record at a time, at
    /// random (a DFS): [`Storage::vec`] then makes small blocks.
    pub fn with_random_lookups(mut self, random: bool) -> Storage {
        self.random_lookups = random;
        self
    }

    pub fn dir(&self) -> &Path {
        match &self.dir {
            RunDir::Scratch(d) => d.path(),
            RunDir::Kept(p) => p,
            RunDir::Shared { path, .. } => path,
        }
    }

    /// Whether files keep their names (a checkpointed run).
    pub fn is_kept(&self) -> bool {
        match &self.dir {
            RunDir::Scratch(_) => false,
            RunDir::Kept(_) => true,
            RunDir::Shared { kept, .. } => *kept,
        }
    }

    /// Another handle on this run's directory, budget and settings, for a store that creates
    /// structures long after it was built (the tree store hands its states to the full
    /// store's disk-resident path when its tables outgrow their share of the budget). The
    /// owner must outlive the files made through it, as it outlives the store.
    pub fn handle(&self) -> Storage {
        Storage {
            dir: RunDir::Shared {
                path: self.dir().to_path_buf(),
                kept: self.is_kept(),
            },
            budget: self.budget.clone(),
            config: self.config.clone(),
            random_lookups: self.random_lookups,
        }
    }

    fn lifetime(&self) -> segment::FileLifetime {
        if self.is_kept() {
            segment::FileLifetime::Named
        } else {
            // Scratch files are unlinked at once so that even a killed run leaves no data.
            segment::FileLifetime::Unlinked
        }
    }

    /// Reopens vector `name` at `mark` (see [`SegVec::open`]), with the options
    /// [`Storage::vec`] would give it.
    pub fn open_vec(&self, name: &str, mark: VecMark) -> Result<SegVec, StorageError> {
        SegVec::open(
            self.dir(),
            name,
            &self.options(),
            Some(mark),
            self.budget.account(name),
            Some(self.budget.clone()),
        )
    }

    /// Reopens a vector made by [`Storage::sequential_vec`] at `mark`.
    pub fn open_sequential_vec(&self, name: &str, mark: VecMark) -> Result<SegVec, StorageError> {
        SegVec::open(
            self.dir(),
            name,
            &self.sequential_options(),
            Some(mark),
            self.budget.account(name),
            None,
        )
    }

    /// Reopens queue `name` at `mark`.
    pub fn open_queue(&self, name: &str, mark: &QueueMark) -> Result<SegQueue, StorageError> {
        SegQueue::open(
            self.dir(),
            name,
            &self.options(),
            mark,
            self.budget.account(name),
        )
    }

    /// Reopens queue `name` at `mark` under `account` (a checkpoint image read once, which
    /// must not register an account per generation).
    pub fn open_queue_accounted(
        &self,
        name: &str,
        mark: &QueueMark,
        account: Account,
    ) -> Result<SegQueue, StorageError> {
        SegQueue::open(self.dir(), name, &self.options(), mark, account)
    }

    /// Reopens stack `name` at `mark`.
    pub fn open_stack(&self, name: &str, mark: StackMark) -> Result<SegStack, StorageError> {
        SegStack::open(
            self.dir(),
            name,
            &self.options(),
            mark,
            self.budget.account(name),
        )
    }

    /// Segment options with the hot window scaled to the budget: at most 1/16 of it per
    /// structure (at least one block), so that small budgets are not eaten by windows.
    fn options(&self) -> SegOptions {
        let mut o = self.config.segments.clone();
        o.files = self.lifetime();
        if let MemoryLimit::Bytes(limit) = self.config.memory {
            let blocks = (limit / 16 / o.block_bytes.max(1) as u64).max(1) as usize;
            let floor_pow2 = 1usize << (usize::BITS - 1 - blocks.leading_zeros());
            o.hot_blocks = o.hot_blocks.min(floor_pow2).max(1);
        }
        o
    }

    /// The least RAM one queue or stack of this storage needs: its hot window and one
    /// block being read or written.
    pub fn min_container_bytes(&self) -> u64 {
        let o = self.options();
        (o.hot_blocks as u64 + 1) * o.block_bytes as u64
    }

    /// A new vector of `width`-byte records named `name`, accounted to the budget. Its
    /// blocks are zstd frames or byte columns, whichever is better for each
    /// ([`segment::Codec::Adaptive`]): a store's state vectors, read at random. Under
    /// [`Storage::with_random_lookups`] its blocks are small ([`SegVec::create_random`]):
    /// a DFS decompresses a block for each lookup the cache misses, where a BFS reads the
    /// blocks its sorted batch needs once each and gains from larger ones on disk
    /// (SharedMemory-PT-000010 in BFS under 32M: 10.9 MiB of vectors with 32 KiB blocks,
    /// 14.4 MiB with 8 KiB ones, in the same time).
    pub fn vec(&self, name: &str, width: usize) -> Result<SegVec, StorageError> {
        let mut o = self.options();
        if o.codec == segment::Codec::Zstd {
            o.codec = segment::Codec::Adaptive;
        }
        let create = if self.random_lookups {
            SegVec::create_random
        } else {
            SegVec::create
        };
        create(
            self.dir(),
            name,
            width,
            &o,
            self.budget.account(name),
            Some(self.budget.clone()),
        )
    }

    /// A new vector that is only appended to and scanned (e.g. a store's hashes, read back
    /// when its index grows): a small hot window and a one-block cache, accounted to the
    /// budget but not sized by it.
    pub fn sequential_vec(
        &self,
        name: &str,
        width: usize,
        hash: segment::HashId,
    ) -> Result<SegVec, StorageError> {
        SegVec::create_hashes(
            self.dir(),
            name,
            width,
            &self.sequential_options(),
            self.budget.account(name),
            None,
            hash,
        )
    }

    fn sequential_options(&self) -> SegOptions {
        SegOptions {
            block_bytes: self.config.segments.block_bytes,
            hot_blocks: 4,
            cache_bytes: 0,
            files: self.lifetime(),
            zstd_level: self.config.segments.zstd_level,
            filter: filter::Filter::None,
            codec: self.config.segments.codec,
        }
    }

    /// A new queue named `name`, accounted to the budget.
    pub fn queue(&self, name: &str) -> Result<SegQueue, StorageError> {
        SegQueue::create(self.dir(), name, &self.options(), self.budget.account(name))
    }

    /// A new stack named `name`, accounted to the budget.
    pub fn stack(&self, name: &str) -> Result<SegStack, StorageError> {
        SegStack::create(self.dir(), name, &self.options(), self.budget.account(name))
    }
}
