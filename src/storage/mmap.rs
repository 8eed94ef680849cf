//! Memory-mapped windows of segment files. The storage layer's only module with `unsafe`
//! (the crate's other blocks are listed in docs/ARCHITECTURE.md, "mmap.rs").
//!
//! A [`Window`] maps a byte range of a file that spillway created, sized and owns (a segment's
//! hot file in the work directory). The file is fully written (zero-filled) before it is mapped,
//! so a full disk shows up as an `io::Error` from `write`, never as a `SIGBUS` on first touch of
//! a sparse page. Resident pages of a window count against the memory budget; [`Window::release`]
//! tells the kernel to drop them.

use memmap2::{MmapMut, MmapOptions, UncheckedAdvice};
use std::fs::File;
use std::marker::PhantomData;

/// A writable mapping; `K` says of what ([`FileBacked`] or [`Anonymous`]), and so what may
/// be done with it beyond reading and writing its bytes.
pub struct Mapping<K> {
    map: MmapMut,
    kind: PhantomData<K>,
}

impl<K> Mapping<K> {
    fn wrap(map: MmapMut) -> Self {
        Mapping {
            map,
            kind: PhantomData,
        }
    }

    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    #[inline(always)]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// A shared mapping of a file: the only kind that may release its pages ([`Window::release`])
/// without losing their contents.
pub struct FileBacked;

/// A writable shared mapping of `len` bytes of a file, starting at byte 0.
pub type Window = Mapping<FileBacked>;

impl Window {
    /// Maps the first `len` bytes of `file`, which must be at least `len` bytes long, allocated
    /// (not sparse), opened read-write, and not mapped or resized by anyone else.
    pub fn map(file: &File, len: usize) -> std::io::Result<Window> {
        // SAFETY: the file is private to this process (created by spillway in its work
        // directory, never shared), it has been written to at least `len` bytes before this call
        // (so every mapped page is backed by allocated disk blocks and no access can fault with
        // SIGBUS), and it is never truncated while the mapping lives: the owning segment keeps
        // both the `File` and the `Window` and drops the window first.
        let map = unsafe { MmapOptions::new().len(len).map_mut(file)? };
        Ok(Mapping::wrap(map))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Writes dirty pages back to the file (used before a checkpoint or a reopen).
    pub fn flush(&self) -> std::io::Result<()> {
        self.map.flush()
    }

    /// Drops the resident pages of `[offset, offset + len)` from this process's RSS. The data
    /// stays in the file (a shared mapping writes dirty pages back), so later reads see it.
    pub fn release(&mut self, offset: usize, len: usize) -> std::io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: MADV_DONTNEED on a MAP_SHARED file mapping discards only this process's page
        // table entries; the page contents stay in the page cache / file, so the memory remains
        // valid and later accesses re-read the same bytes. No Rust reference into the range can
        // be outstanding: `&self` methods hand out slices whose lifetime ends before the owning
        // segment calls `release` (it takes `&mut self` on every path that releases).
        unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, offset, len)
        }
    }
}

/// An anonymous private mapping used as one block buffer of a cache. Unlike a heap
/// allocation, its pages go back to the kernel the moment it is dropped, so a cache that shrinks
/// to make room for another structure really lowers the resident set (the C allocator keeps
/// freed medium-sized chunks in its heap, where they still count towards VmRSS).
pub type AnonBlock = Mapping<Anonymous>;

/// A private anonymous mapping: releasing its pages would lose them, so it cannot.
pub struct Anonymous;

impl AnonBlock {
    pub fn new(len: usize) -> std::io::Result<AnonBlock> {
        Ok(Mapping::wrap(MmapMut::map_anon(len.max(1))?))
    }
}
