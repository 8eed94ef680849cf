//! What a run asks of its store: [`StoreConfig`], one variant per store carrying that store's
//! options; each options type implements [`StoreSpec`] (in `store/mod.rs`), how the store
//! checks, builds and reopens itself. The driver
//! knows stores only through these two: adding a store is its folder (the store and its
//! `StoreSpec`) plus one variant here and its arm in [`StoreConfig::spec`] (and its options
//! in `cli/`). docs/ARCHITECTURE.md, "How to add a store", walks through it.

use super::bitstate::BitstateOptions;
use super::cache::CacheOptions;
use super::comback::CombackOptions;
use super::delta::DeltaOptions;
use super::full::FullOptions;
use super::hashcompact::HashCompactOptions;
use super::snapshots::SnapshotsOptions;
use super::tree::TreeOptions;
use super::StoreSpec;
use serde::{Deserialize, Serialize};

/// The store of a run and its options (`--store NAME` and that store's flags). Serialised into
/// a checkpoint's manifest, so that `resume` continues with exactly these options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum StoreConfig {
    /// Full state table (exact baseline).
    Full(FullOptions),
    /// ComBack: hash → state numbers + backedge table, exact by reconstruction.
    Comback(CombackOptions),
    /// Δ-markings: every kδ-th depth explicit, other states as (predecessor, transition).
    Delta(DeltaOptions),
    /// Hash compaction: a b-bit hash per state (inexact baseline).
    Hashcompact(HashCompactOptions),
    /// Bit-state hashing: k bits per state in a bit array (inexact baseline, no LTS output).
    Bitstate(BitstateOptions),
    /// Tree compression: states folded into a binary tree of interned pairs (exact).
    Tree(TreeOptions),
    /// BFS with snapshots and a stream of caches (no Closed set; the LTS may hold redundant,
    /// strongly bisimilar states).
    Snapshots(SnapshotsOptions),
    /// State space caching: the DFS stack plus a bounded cache of visited states (DFS only).
    Cache(CacheOptions),
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig::Full(FullOptions::default())
    }
}

impl StoreConfig {
    /// The store's own description of itself.
    pub fn spec(&self) -> &dyn StoreSpec {
        match self {
            StoreConfig::Full(o) => o,
            StoreConfig::Comback(o) => o,
            StoreConfig::Delta(o) => o,
            StoreConfig::Hashcompact(o) => o,
            StoreConfig::Bitstate(o) => o,
            StoreConfig::Tree(o) => o,
            StoreConfig::Snapshots(o) => o,
            StoreConfig::Cache(o) => o,
        }
    }

    /// The `--store` value.
    pub fn name(&self) -> &'static str {
        self.spec().name()
    }
}
