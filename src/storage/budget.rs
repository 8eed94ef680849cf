//! The RAM budget (`--memory`) and per-structure accounting of RAM and disk bytes.
//!
//! Every structure that can grow registers an [`Account`] and keeps its `ram`/`disk` figures
//! current. Structures that must stay in RAM (a store's index) [`Budget::claim`] their bytes
//! before allocating them and fail with `BudgetTooSmall` when they cannot; structures that
//! can spill (the block caches of segment containers) size themselves from
//! [`Budget::headroom`], what is left after everything else.

use crate::error::StorageError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes kept aside for what the budget does not track: the binary's and libc's resident
/// pages (~3 MiB measured), zstd contexts, the heap (model, I/O buffers, small per-run vectors).
/// Measured on SharedMemory-PT-000010 under `--memory 64M`: ~9 MiB of untracked resident memory
/// in all, of which ~3 MiB is the baseline of any run.
pub const UNTRACKED_RESERVE: u64 = 8 << 20;

/// How much RAM spillway may keep resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MemoryLimit {
    /// No limit: structures stay in plain RAM vectors unless spilling is forced.
    Unlimited,
    /// At most this many bytes (including [`UNTRACKED_RESERVE`]).
    Bytes(u64),
}

/// `bytes` rounded up to whole MiB, as `--memory` takes it (`12M`).
pub fn mib_ceil(bytes: u64) -> String {
    format!("{}M", bytes.div_ceil(1 << 20))
}

/// Parses `64M`, `8G`, `512K`, `1T` or a plain byte count (suffixes are powers of 1024; an
/// optional trailing `B`/`iB` is accepted).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let given = || s.to_string();
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| SizeError::NotASize(given()))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(SizeError::NotPositive(given()));
    }
    // The cast below saturates: `1e99` or `99999999999999999999G` would silently become
    // 16 EiB, a figure the user never gave. No machine has anywhere near 2^60 bytes.
    let bytes = n * mult as f64;
    if bytes > MAX_SIZE as f64 {
        return Err(SizeError::TooLarge(given()));
    }
    Ok(bytes as u64)
}

/// Why [`parse_size`] refused its argument (each variant holds the text as given), so that
/// a caller can offer other spellings where the text is not a size at all (`--memory`'s
/// `unlimited`) without reading the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// Not a number with an optional K/M/G/T suffix.
    NotASize(String),
    /// Zero, negative or not finite.
    NotPositive(String),
    /// More than [`MAX_SIZE`].
    TooLarge(String),
}

impl std::fmt::Display for SizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizeError::NotASize(s) => write!(f, "'{s}' is not a size (examples: 64M, 8G, 1048576)"),
            SizeError::NotPositive(s) => write!(f, "'{s}' is not a positive size"),
            SizeError::TooLarge(s) => write!(
                f,
                "'{s}' is more than 2^60 bytes (1 EiB): not a memory size a machine can have"
            ),
        }
    }
}

/// The largest size [`parse_size`] accepts: 2^60 bytes (1 EiB).
pub const MAX_SIZE: u64 = 1 << 60;

#[derive(Debug)]
struct AccountInner {
    name: String,
    ram: AtomicU64,
    disk: AtomicU64,
    /// Logical (uncompressed) bytes of the data the structure holds, for compression ratios.
    raw: AtomicU64,
}

/// One structure's RAM and disk bytes, as the budget and the stats see them.
#[derive(Clone, Debug)]
pub struct Account(Arc<AccountInner>);

impl Account {
    /// An account not attached to any budget (structures built outside a run).
    pub fn detached(name: &str) -> Account {
        Account(Arc::new(AccountInner {
            name: name.to_string(),
            ram: AtomicU64::new(0),
            disk: AtomicU64::new(0),
            raw: AtomicU64::new(0),
        }))
    }
    pub fn set(&self, ram: u64, disk: u64, raw: u64) {
        self.0.ram.store(ram, Ordering::Relaxed);
        self.0.disk.store(disk, Ordering::Relaxed);
        self.0.raw.store(raw, Ordering::Relaxed);
    }
    pub fn ram(&self) -> u64 {
        self.0.ram.load(Ordering::Relaxed)
    }
    pub fn disk(&self) -> u64 {
        self.0.disk.load(Ordering::Relaxed)
    }
    pub fn raw(&self) -> u64 {
        self.0.raw.load(Ordering::Relaxed)
    }
    pub fn name(&self) -> &str {
        &self.0.name
    }
}

/// A structure's figures at one moment (for the stats).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub name: String,
    pub ram_bytes: u64,
    pub disk_bytes: u64,
    /// Uncompressed bytes of the data that went to disk; `raw / disk` is the compression ratio.
    pub raw_bytes: u64,
    pub compression_ratio: Option<f64>,
}

/// The memory budget shared by the structures of one run.
#[derive(Debug)]
pub struct Budget {
    limit: MemoryLimit,
    accounts: Mutex<Vec<Account>>,
}

impl Budget {
    pub fn new(limit: MemoryLimit) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            accounts: Mutex::new(Vec::new()),
        })
    }

    pub fn limit(&self) -> MemoryLimit {
        self.limit
    }

    /// Registers a structure.
    pub fn account(&self, name: &str) -> Account {
        let a = Account::detached(name);
        self.accounts.lock().unwrap().push(a.clone());
        a
    }

    /// Bytes held by every account except `except`.
    fn used_except(&self, except: Option<&Account>) -> u64 {
        self.accounts
            .lock()
            .unwrap()
            .iter()
            .filter(|a| except.is_none_or(|e| !Arc::ptr_eq(&a.0, &e.0)))
            .map(|a| a.ram())
            .sum()
    }

    /// What `me` may hold in RAM given what everyone else holds now (`None`: unlimited).
    pub fn headroom(&self, me: &Account) -> Option<u64> {
        match self.limit {
            MemoryLimit::Unlimited => None,
            MemoryLimit::Bytes(limit) => Some(
                limit
                    .saturating_sub(UNTRACKED_RESERVE)
                    .saturating_sub(self.used_except(Some(me))),
            ),
        }
    }

    /// Checks that `structure` can hold `need` bytes in RAM next to the `floor` bytes that the
    /// other structures cannot give back; `BudgetTooSmall` otherwise.
    pub fn claim(
        &self,
        structure: &str,
        need: u64,
        floor: u64,
        what: &str,
    ) -> Result<(), StorageError> {
        if let MemoryLimit::Bytes(limit) = self.limit {
            if need + floor + UNTRACKED_RESERVE > limit {
                return Err(StorageError::BudgetTooSmall {
                    structure: structure.to_string(),
                    need,
                    budget: limit,
                    message: format!(
                        "{what}; plus {floor} bytes of minimal spill buffers and {UNTRACKED_RESERVE} bytes reserved for the rest of the process"
                    ),
                    // Segment containers size their hot windows from the budget (up to
                    // 1/16 of it each, about three of them in a run), so a larger budget
                    // needs more: name one with room for that, so that the figure is enough.
                    minimum: mib_ceil(
                        (need.saturating_add(floor) + UNTRACKED_RESERVE).saturating_mul(16) / 13,
                    ),
                });
            }
        }
        Ok(())
    }

    /// RAM and disk bytes of every structure together (no allocation: the progress line
    /// asks once a second).
    pub fn totals(&self) -> (u64, u64) {
        self.accounts
            .lock()
            .unwrap()
            .iter()
            .fold((0, 0), |(r, d), a| (r + a.ram(), d + a.disk()))
    }

    /// Every structure's figures.
    pub fn usage(&self) -> Vec<Usage> {
        self.accounts
            .lock()
            .unwrap()
            .iter()
            .map(|a| Usage {
                name: a.name().to_string(),
                ram_bytes: a.ram(),
                disk_bytes: a.disk(),
                raw_bytes: a.raw(),
                compression_ratio: (a.disk() > 0 && a.raw() > 0)
                    .then(|| a.raw() as f64 / a.disk() as f64),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1M").is_err());
        assert_eq!(parse_size("1073741824G"), Ok(MAX_SIZE));
        for huge in [
            "1e99",
            "99999999999999999999G",
            "18446744073709551615",
            "1073741825G",
        ] {
            assert!(
                parse_size(huge)
                    .unwrap_err()
                    .to_string()
                    .contains("more than 2^60"),
                "{huge}"
            );
        }
    }

    #[test]
    fn headroom_excludes_own_bytes_and_claim_fails_loudly() {
        let b = Budget::new(MemoryLimit::Bytes(100 << 20));
        let index = b.account("index");
        let cache = b.account("cache");
        index.set(40 << 20, 0, 0);
        cache.set(10 << 20, 0, 0);
        assert_eq!(
            b.headroom(&cache),
            Some((100 << 20) - UNTRACKED_RESERVE - (40 << 20))
        );
        let e = b.claim("full-store index", 200 << 20, 0, "x").unwrap_err();
        assert!(e.to_string().contains("full-store index"), "{e}");
        assert!(b.claim("full-store index", 50 << 20, 1 << 20, "x").is_ok());
    }
}
