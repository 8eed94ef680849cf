//! A zero-initialised array of `u64` slots in an anonymous mapping, advised to use transparent
//! huge pages: hash tables are probed at random, and with 4 KiB pages nearly every probe of a
//! large table also misses the TLB (measured: see docs/ARCHITECTURE.md, store/).

use memmap2::{Advice, MmapMut};

pub struct Slots {
    map: MmapMut,
    len: usize,
}

impl Slots {
    /// `len` zeroed slots. Huge pages are a hint: if the kernel refuses, the table still works.
    pub fn zeroed(len: usize) -> std::io::Result<Self> {
        let map = MmapMut::map_anon(len.max(1) * 8)?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(Advice::HugePage);
        #[cfg(not(target_os = "linux"))]
        let _ = Advice::Normal;
        Ok(Slots { map, len })
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn get(&self, i: usize) -> u64 {
        u64::from_ne_bytes(self.map[i * 8..i * 8 + 8].try_into().unwrap())
    }

    #[inline(always)]
    pub fn set(&mut self, i: usize, v: u64) {
        self.map[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    }

    pub fn bytes(&self) -> u64 {
        self.len as u64 * 8
    }
}
