//! A zero-initialised `[u64]` table in an anonymous mapping advised to use transparent huge
//! pages. Hash tables are probed at random; with 4 KiB pages nearly every probe of a large
//! table also misses the TLB (measured: docs/ARCHITECTURE.md, store/). Huge pages are a hint:
//! if the kernel declines, the table works the same.

use memmap2::MmapMut;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicU64;

#[derive(Default)]
pub struct Slots {
    /// `None` for the empty table (no mapping); otherwise at least `len * 8` bytes.
    map: Option<MmapMut>,
    len: usize,
}

impl Slots {
    /// `len` zeroed slots.
    pub fn zeroed(len: usize) -> std::io::Result<Self> {
        if len == 0 {
            return Ok(Slots::default());
        }
        let map = MmapMut::map_anon(len * 8)?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(Slots {
            map: Some(map),
            len,
        })
    }
}

impl Slots {
    /// The table as atomics, for threads that insert into it at once (compare-and-swap on
    /// empty slots: the full store's parallel indexing). While this borrow lives no `&mut`
    /// to the table can exist, so every access is through the atomics.
    pub fn atomic(&self) -> &[AtomicU64] {
        match &self.map {
            // SAFETY: `AtomicU64` has the size and bit validity of `u64`, and the mapping is
            // page-aligned, so each slot is 8-byte aligned as `AtomicU64` requires; the
            // mapping is at least `len * 8` bytes and lives as long as `self`, whose shared
            // borrow the slice keeps (no plain write can happen meanwhile).
            Some(m) => unsafe {
                std::slice::from_raw_parts(m.as_ptr() as *const AtomicU64, self.len)
            },
            None => &[],
        }
    }
}

impl Deref for Slots {
    type Target = [u64];
    #[inline(always)]
    fn deref(&self) -> &[u64] {
        match &self.map {
            // Page-aligned and a multiple of 8 bytes long: the cast cannot fail.
            Some(m) => bytemuck::cast_slice(&m[..self.len * 8]),
            None => &[],
        }
    }
}

impl DerefMut for Slots {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u64] {
        match &mut self.map {
            Some(m) => bytemuck::cast_slice_mut(&mut m[..self.len * 8]),
            None => &mut [],
        }
    }
}

/// The prefetch hint the tables' batched probes use (it lives in `sys`, below `storage`,
/// whose run filters use it too).
pub use crate::sys::prefetch;
