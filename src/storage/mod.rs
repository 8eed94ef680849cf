//! Bytes on disk: segment files and the containers built on them, under a RAM budget.
//!
//! * [`segment`]: the file format — header, zstd-compressed blocks with checksums, reopening
//!   at a recorded length;
//! * [`mmap`]: mapped windows of files, the only module with `unsafe`;
//! * [`vec`](mod@vec): [`SegVec`], fixed-width records with random access and in-place updates (state
//!   vectors, backedge tables, Δ records);
//! * [`queue`]: [`SegQueue`], a FIFO of variable-width records (BFS open sets);
//! * [`stack`]: [`SegStack`], a LIFO of variable-width records (DFS stacks);
//! * [`budget`]: `--memory`, and per-structure RAM/disk accounting for the stats.
//!
//! A [`Storage`] bundles what a run's structures need: the budget, the work directory and the
//! spill policy.

pub mod budget;
pub mod mmap;
pub mod queue;
pub mod segment;
pub mod stack;
pub mod vec;

pub use budget::{Account, Budget, MemoryLimit, Usage};
pub use queue::SegQueue;
pub use stack::SegStack;
pub use vec::{SegOptions, SegVec};

use crate::error::StorageError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// When structures keep their data in segment files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpillPolicy {
    /// Plain RAM vectors when the memory is unlimited; segment files under a `--memory` budget.
    Auto,
    /// Always segment files (tests and benchmarks of the spilling path).
    Always,
}

/// Storage settings of a run.
#[derive(Clone, Debug)]
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

/// The storage of one run: a fresh work directory (removed when dropped) and the budget.
pub struct Storage {
    dir: tempfile::TempDir,
    pub budget: Arc<Budget>,
    pub config: StorageConfig,
}

impl Storage {
    /// Creates a fresh directory `spillway-XXXXXX` under the configured work directory.
    pub fn new(config: &StorageConfig) -> Result<Storage, StorageError> {
        let parent = config.workdir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("spillway-")
            .tempdir_in(&parent)
            .map_err(segment::io_err(&parent, "create a work directory in"))?;
        Ok(Storage {
            dir,
            budget: Budget::new(config.memory),
            config: config.clone(),
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Segment options with the hot window scaled to the budget: at most 1/16 of it per
    /// structure (at least one block), so that small budgets are not eaten by windows.
    fn options(&self) -> SegOptions {
        let mut o = self.config.segments.clone();
        // No checkpoints yet: a run's files are scratch, unlinked at once so that even a
        // killed run leaves no data behind.
        o.files = segment::FileLifetime::Unlinked;
        if let MemoryLimit::Bytes(limit) = self.config.memory {
            let blocks = (limit / 16 / o.block_bytes.max(1) as u64).max(1) as usize;
            let floor_pow2 = 1usize << (usize::BITS - 1 - blocks.leading_zeros());
            o.hot_blocks = o.hot_blocks.min(floor_pow2).max(1);
        }
        o
    }

    /// A new vector of `width`-byte records named `name`, accounted to the budget.
    pub fn vec(&self, name: &str, width: usize) -> Result<SegVec, StorageError> {
        SegVec::create(
            self.dir(),
            name,
            width,
            &self.options(),
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
        let opts = SegOptions {
            block_bytes: self.config.segments.block_bytes,
            hot_blocks: 4,
            cache_bytes: 0,
            files: segment::FileLifetime::Unlinked,
        };
        SegVec::create_hashes(
            self.dir(),
            name,
            width,
            &opts,
            self.budget.account(name),
            None,
            hash,
        )
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
