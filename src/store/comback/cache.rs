//! The full-state cache of a ComBack store (variant 2): a bounded set of state vectors keyed
//! by state number, in two direct-mapped regions (7/8 and 1/8 of the entries).
//!
//! * **recent**: slot `id mod n`. Every new state is written here when it is inserted, so in
//!   BFS it holds the newest states (the frontier, where most successors land) and serves the
//!   waiting set; batch reconstruction of the waiting set also fills it.
//! * **replayed**: slot `mix(id) mod n`. States rebuilt by a replay, and the ancestors a
//!   replay passes through, go here, so later replays start from the nearest cached ancestor
//!   and often-matched old states (hubs near the initial state) stay available.
//!
//! Each entry keeps the state's depth too, so path optimisation can decide without reading
//! the backedge table.

use crate::store::StateId;

/// Bytes before the state in a fixed-width entry: `id + 1: u32 | depth: u16`.
const HEADER: usize = 6;

/// The depth [`Cache::get`] returns for a state cached with a depth of 65,535 or more (the
/// caller reads the real one from the backedge record).
pub const UNKNOWN_DEPTH: u32 = u32::MAX;

#[inline(always)]
fn narrow_depth(depth: u32) -> u16 {
    depth.min(u16::MAX as u32) as u16
}

#[inline(always)]
fn wide_depth(lo: u8, hi: u8) -> u32 {
    match u16::from_le_bytes([lo, hi]) {
        u16::MAX => UNKNOWN_DEPTH,
        d => d as u32,
    }
}

/// How a fixed-width state is stored in a cache entry. Most places of the nets explored hold
/// few tokens, so a state's bytes are mostly 0 and 1: packing them gives more entries for the
/// same RAM (SharedMemory-PT-000010, 131 one-byte places: 17 bytes instead of 131).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// One bit per byte (every byte 0 or 1).
    Bits,
    /// One nibble per byte (every byte at most 15).
    Nibbles,
    /// The bytes as they are.
    Bytes,
}

impl Packing {
    fn packed_len(self, w: usize) -> usize {
        match self {
            Packing::Bits => w.div_ceil(8),
            Packing::Nibbles => w.div_ceil(2),
            Packing::Bytes => w,
        }
    }

    fn wider(self) -> Packing {
        match self {
            Packing::Bits => Packing::Nibbles,
            _ => Packing::Bytes,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Packing::Bits => "bits",
            Packing::Nibbles => "nibbles",
            Packing::Bytes => "bytes",
        }
    }
}

/// `BIT_BYTES[p]`: the 8 bytes (little-endian) whose byte `i` is bit `i` of `p`.
static BIT_BYTES: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut p = 0;
    while p < 256 {
        let mut v = 0u64;
        let mut i = 0;
        while i < 8 {
            v |= (((p >> i) & 1) as u64) << (8 * i);
            i += 1;
        }
        t[p] = v;
        p += 1;
    }
    t
};

#[inline(always)]
fn load_word(chunk: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..chunk.len()].copy_from_slice(chunk);
    u64::from_le_bytes(w)
}

/// Packs 8 bytes, each at most 15, into 4 (byte `i` of the result: byte `2i` in the low
/// nibble, byte `2i + 1` in the high one), as a little-endian u32.
#[inline(always)]
fn pack_nibbles(w: u64) -> u32 {
    let y = w & 0x0F0F_0F0F_0F0F_0F0F;
    let z = (y | (y >> 4)) & 0x00FF_00FF_00FF_00FF;
    let z = (z | (z >> 8)) & 0x0000_FFFF_0000_FFFF;
    (z | (z >> 16)) as u32
}

/// The 8 bytes (little-endian) that 4 nibble-packed bytes stand for (inverse of
/// [`pack_nibbles`]).
#[inline(always)]
fn unpack_nibbles(p: u32) -> u64 {
    let x = p as u64;
    let x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    let x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    (x & 0x000F_000F_000F_000F) | ((x & 0x00F0_00F0_00F0_00F0) << 4)
}

/// Up to 4 packed bytes as a little-endian u32 (missing bytes 0).
#[inline(always)]
fn load_u32(chunk: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w[..chunk.len()].copy_from_slice(chunk);
    u32::from_le_bytes(w)
}

/// Packs 8 bytes, each 0 or 1, into one byte (bit `i` = byte `i`).
#[inline(always)]
fn pack_bits(w: u64) -> u8 {
    (w.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// Packs `state` into `out` (`packing.packed_len(state.len())` bytes); false (and `out`
/// unspecified) when a byte does not fit.
#[inline]
fn pack(packing: Packing, state: &[u8], out: &mut [u8]) -> bool {
    match packing {
        Packing::Bits => {
            let words = state.chunks_exact(8);
            let tail = words.remainder();
            let mut any = 0u64;
            for (chunk, o) in words.zip(out.iter_mut()) {
                let w = u64::from_le_bytes(chunk.try_into().unwrap());
                any |= w;
                *o = pack_bits(w & 0x0101_0101_0101_0101);
            }
            if !tail.is_empty() {
                let w = load_word(tail);
                any |= w;
                out[out.len() - 1] = pack_bits(w & 0x0101_0101_0101_0101);
            }
            any & 0xFEFE_FEFE_FEFE_FEFE == 0
        }
        Packing::Nibbles => {
            // Word at a time: 8 state bytes into 4 packed ones.
            let words = state.chunks_exact(8);
            let tail = words.remainder();
            let mut any = 0u64;
            for (chunk, o) in words.zip(out.chunks_exact_mut(4)) {
                let w = u64::from_le_bytes(chunk.try_into().unwrap());
                any |= w;
                o.copy_from_slice(&pack_nibbles(w).to_le_bytes());
            }
            if !tail.is_empty() {
                let w = load_word(tail);
                any |= w;
                let n = tail.len().div_ceil(2);
                let o = out.len() - n;
                out[o..].copy_from_slice(&pack_nibbles(w).to_le_bytes()[..n]);
            }
            any & 0xF0F0_F0F0_F0F0_F0F0 == 0
        }
        Packing::Bytes => {
            out.copy_from_slice(state);
            true
        }
    }
}

/// A cached state, packed; compare it with [`Entry::matches`] or unpack it with
/// [`Entry::append_to`].
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    packed: &'a [u8],
    packing: Packing,
    width: usize,
}

impl Entry<'_> {
    /// Whether the cached state is `state` (compared without unpacking into a buffer).
    #[inline]
    pub fn matches(&self, state: &[u8]) -> bool {
        if state.len() != self.width {
            return false;
        }
        match self.packing {
            Packing::Bytes => super::eq_bytes(self.packed, state),
            Packing::Bits => {
                let words = state.chunks_exact(8);
                let tail = words.remainder();
                let mut diff = 0u64;
                for (chunk, &p) in words.zip(self.packed) {
                    diff |= u64::from_le_bytes(chunk.try_into().unwrap()) ^ BIT_BYTES[p as usize];
                }
                if !tail.is_empty() {
                    diff |= load_word(tail) ^ BIT_BYTES[*self.packed.last().unwrap() as usize];
                }
                diff == 0
            }
            Packing::Nibbles => {
                let words = state.chunks_exact(8);
                let tail = words.remainder();
                let mut diff = 0u64;
                for (chunk, p) in words.zip(self.packed.chunks_exact(4)) {
                    diff |= u64::from_le_bytes(chunk.try_into().unwrap())
                        ^ unpack_nibbles(u32::from_le_bytes(p.try_into().unwrap()));
                }
                if !tail.is_empty() {
                    let p = &self.packed[self.packed.len() - tail.len().div_ceil(2)..];
                    diff |= load_word(tail) ^ unpack_nibbles(load_u32(p));
                }
                diff == 0
            }
        }
    }

    /// Appends the cached state to `out`.
    #[inline]
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self.packing {
            Packing::Bytes => out.extend_from_slice(self.packed),
            Packing::Bits => {
                let start = out.len();
                out.resize(start + self.packed.len() * 8, 0);
                for (dst, &p) in out[start..].chunks_exact_mut(8).zip(self.packed) {
                    dst.copy_from_slice(&BIT_BYTES[p as usize].to_le_bytes());
                }
                out.truncate(start + self.width);
            }
            Packing::Nibbles => {
                let start = out.len();
                out.resize(start + self.packed.len().div_ceil(4) * 8, 0);
                for (dst, p) in out[start..].chunks_exact_mut(8).zip(self.packed.chunks(4)) {
                    dst.copy_from_slice(&unpack_nibbles(load_u32(p)).to_le_bytes());
                }
                out.truncate(start + self.width);
            }
        }
    }

    /// The cached state as a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.width);
        self.append_to(&mut v);
        v
    }
}

/// One direct-mapped region. Fixed-width states: one contiguous entry per slot,
/// `id + 1: u32 | depth: u16 | packed state`, so a lookup costs one cache miss (a depth of
/// 65,535 or more is stored as [`UNKNOWN_DEPTH`]: the caller reads it from the backedge
/// record; six bytes of header instead of eight give Kanban-PT-00005, 16-byte states, 9% more
/// entries for the same RAM). Variable width: parallel vectors, unpacked.
enum Region {
    Flat {
        stride: usize,
        slots: usize,
        bytes: Vec<u8>,
    },
    Boxed {
        ids: Vec<u32>,
        depths: Vec<u32>,
        data: Vec<Vec<u8>>,
    },
}

impl Region {
    fn new(n: usize, width: Option<usize>, packing: Packing) -> Self {
        match width {
            Some(w) => {
                let stride = HEADER + packing.packed_len(w);
                let len = n * stride;
                let mut bytes: Vec<u8> = Vec::with_capacity(len);
                super::huge_pages(bytes.as_ptr(), len);
                bytes.resize(len, 0);
                Region::Flat {
                    stride,
                    slots: n,
                    bytes,
                }
            }
            None => Region::Boxed {
                ids: vec![0; n],
                depths: vec![0; n],
                data: vec![Vec::new(); n],
            },
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        match self {
            Region::Flat { slots, .. } => *slots,
            Region::Boxed { ids, .. } => ids.len(),
        }
    }

    /// The entry in slot `i` if it holds state `id`.
    #[inline(always)]
    fn lookup(
        &self,
        i: usize,
        id: StateId,
        packing: Packing,
        width: usize,
    ) -> Option<(Entry<'_>, u32)> {
        let raw = id as u32 + 1;
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &bytes[i * stride..(i + 1) * stride];
                (u32::from_le_bytes(e[0..4].try_into().unwrap()) == raw).then(|| {
                    (
                        Entry {
                            packed: &e[HEADER..],
                            packing,
                            width,
                        },
                        wide_depth(e[4], e[5]),
                    )
                })
            }
            Region::Boxed { ids, depths, data } => (ids[i] == raw).then(|| {
                (
                    Entry {
                        packed: &data[i][..],
                        packing: Packing::Bytes,
                        width: data[i].len(),
                    },
                    depths[i],
                )
            }),
        }
    }

    /// Touches slot `i` (prefetch).
    #[inline(always)]
    fn touch(&self, i: usize) -> u32 {
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &bytes[i * stride..(i + 1) * stride];
                super::prefetch(e.as_ptr());
                // An entry may straddle two CPU cache lines.
                super::prefetch(e[e.len() - 1..].as_ptr());
                0
            }
            Region::Boxed { ids, .. } => ids[i],
        }
    }

    /// Stores `state` in slot `i`; false (and the slot emptied) when it does not fit
    /// `packing`.
    #[inline(always)]
    fn put(&mut self, i: usize, id: StateId, depth: u32, state: &[u8], packing: Packing) -> bool {
        let raw = id as u32 + 1;
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &mut bytes[i * *stride..(i + 1) * *stride];
                if !pack(packing, state, &mut e[HEADER..]) {
                    e[0..4].copy_from_slice(&0u32.to_le_bytes());
                    return false;
                }
                e[0..4].copy_from_slice(&raw.to_le_bytes());
                e[4..6].copy_from_slice(&narrow_depth(depth).to_le_bytes());
                true
            }
            Region::Boxed { ids, depths, data } => {
                ids[i] = raw;
                depths[i] = depth;
                data[i].clear();
                data[i].extend_from_slice(state);
                true
            }
        }
    }

    fn set_depth(&mut self, i: usize, id: StateId, depth: u32) {
        let raw = id as u32 + 1;
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &mut bytes[i * *stride..(i + 1) * *stride];
                if u32::from_le_bytes(e[0..4].try_into().unwrap()) == raw {
                    e[4..6].copy_from_slice(&narrow_depth(depth).to_le_bytes());
                }
            }
            Region::Boxed { ids, depths, .. } => {
                if ids[i] == raw {
                    depths[i] = depth;
                }
            }
        }
    }

    /// Calls `f(id, stored depth, entry)` for every occupied slot.
    fn for_each(&self, packing: Packing, width: usize, mut f: impl FnMut(StateId, u32, Entry<'_>)) {
        match self {
            Region::Flat { stride, bytes, .. } => {
                for e in bytes.chunks_exact(*stride) {
                    let raw = u32::from_le_bytes(e[0..4].try_into().unwrap());
                    if raw != 0 {
                        let entry = Entry {
                            packed: &e[HEADER..],
                            packing,
                            width,
                        };
                        f(raw as StateId - 1, wide_depth(e[4], e[5]), entry);
                    }
                }
            }
            Region::Boxed { ids, depths, data } => {
                for i in 0..ids.len() {
                    if ids[i] != 0 {
                        let entry = Entry {
                            packed: &data[i][..],
                            packing: Packing::Bytes,
                            width: data[i].len(),
                        };
                        f(ids[i] as StateId - 1, depths[i], entry);
                    }
                }
            }
        }
    }

    fn ram_bytes(&self) -> u64 {
        (match self {
            Region::Flat { bytes, .. } => bytes.capacity(),
            Region::Boxed { ids, depths, data } => {
                ids.capacity() * 4
                    + depths.capacity() * 4
                    + data.iter().map(|x| x.capacity() + 24).sum::<usize>()
            }
        }) as u64
    }
}

/// Which region an entry was found in (for the stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRegion {
    Recent,
    Replayed,
}

/// Puts per window when choosing the packing; the cache switches to a wider packing when
/// more than 1/[`MISFIT_SHARE`] of a window's states did not fit.
const WINDOW: u32 = 4096;
const MISFIT_SHARE: u32 = 16;

pub struct Cache {
    recent: Region,
    /// `⌊2^64 / n⌋ + 1` for the recent region's `n` slots ([`Cache::recent_slot`]).
    recent_m: u64,
    replayed: Region,
    /// Packing of fixed-width entries: starts at [`Packing::Bits`] and widens (the cache is
    /// emptied) while too many states do not fit. A state that does not fit is not cached.
    packing: Packing,
    width: usize,
    entries: usize,
    recent_eighths: usize,
    puts: u32,
    misfits: u32,
    /// Set when the packing widened (the cache's RAM changed).
    resized: bool,
}

#[inline(always)]
fn mix(id: StateId) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

impl Cache {
    /// A cache of `n` entries in total, `recent_eighths`/8 of them recent, the rest
    /// replayed; `n = 0` caches nothing. Fixed-width entries take `6 + packed width` bytes
    /// each.
    pub fn new(n: usize, width: Option<usize>, recent_eighths: usize) -> Self {
        let packing = match width {
            Some(_) => Packing::Bits,
            None => Packing::Bytes,
        };
        Self::with_packing(n, width, packing, recent_eighths)
    }

    fn with_packing(
        n: usize,
        width: Option<usize>,
        packing: Packing,
        recent_eighths: usize,
    ) -> Self {
        let recent = if n < 8 {
            n.div_ceil(2)
        } else {
            n / 8 * recent_eighths.clamp(1, 7) + n % 8
        };
        Cache {
            recent_m: (u64::MAX / recent.max(1) as u64).wrapping_add(1),
            recent: Region::new(recent, width, packing),
            replayed: Region::new(n - recent, width, packing),
            packing,
            width: width.unwrap_or(0),
            entries: n,
            recent_eighths,
            puts: 0,
            misfits: 0,
            resized: false,
        }
    }

    pub fn recent_len(&self) -> usize {
        self.recent.len()
    }

    /// Entries in all (both regions).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// RAM bytes of one entry with the current packing (fixed-width states; for variable
    /// widths an estimate from `width_hint`).
    pub fn entry_bytes(&self, width_hint: usize) -> usize {
        match self.recent {
            Region::Flat { stride, .. } => stride,
            Region::Boxed { .. } => 8 + 24 + width_hint,
        }
    }

    /// The RAM bytes `n` entries would take with the current packing.
    pub fn bytes_for(&self, n: usize, width_hint: usize) -> u64 {
        (n * self.entry_bytes(width_hint)) as u64
    }

    /// Resizes the cache to `n` entries (same packing, same share of recent entries), keeping
    /// what the new regions can hold: the old cache is walked once and every entry put
    /// again in its slot of the new size. Both exist during the copy.
    pub fn resize(&mut self, n: usize) {
        if n == self.entries {
            return;
        }
        let width = match self.recent {
            Region::Flat { .. } => Some(self.width),
            Region::Boxed { .. } => None,
        };
        let mut new = Self::with_packing(n, width, self.packing, self.recent_eighths);
        new.puts = self.puts;
        new.misfits = self.misfits;
        let mut buf = Vec::new();
        // Replayed entries first, recent ones last: where both want a slot of the same
        // region, the newest states win.
        for (region, recent) in [(&self.replayed, false), (&self.recent, true)] {
            region.for_each(self.packing, self.width, |id, depth, e| {
                buf.clear();
                e.append_to(&mut buf);
                let slot = if recent {
                    new.recent_slot(id).map(|i| (i, true))
                } else {
                    new.replayed_slot(id).map(|i| (i, false))
                };
                if let Some((i, r)) = slot {
                    let dst = if r {
                        &mut new.recent
                    } else {
                        &mut new.replayed
                    };
                    dst.put(i, id, depth, &buf, new.packing);
                }
            });
        }
        *self = new;
        self.resized = true;
    }

    pub fn packing(&self) -> Packing {
        self.packing
    }

    /// Whether the packing widened since the last call (the cache's RAM changed).
    pub fn take_resized(&mut self) -> bool {
        std::mem::take(&mut self.resized)
    }

    /// `id mod n` for the recent region, by Lemire's multiply-based remainder (two
    /// multiplications instead of a 64-bit division, which cost about a tenth of the run on
    /// Kanban-PT-00005: every lookup computes up to two slots); a division only when `id` or
    /// `n` does not fit 32 bits.
    #[inline(always)]
    fn recent_slot(&self, id: StateId) -> Option<usize> {
        let n = self.recent.len() as u64;
        if n == 0 {
            return None;
        }
        Some(if id <= u32::MAX as u64 && n <= u32::MAX as u64 {
            let low = self.recent_m.wrapping_mul(id);
            ((low as u128 * n as u128) >> 64) as usize
        } else {
            (id % n) as usize
        })
    }

    /// A hashed slot of the replayed region (multiply-shift range reduction).
    #[inline(always)]
    fn replayed_slot(&self, id: StateId) -> Option<usize> {
        let n = self.replayed.len() as u64;
        (n > 0).then(|| ((mix(id) as u128 * n as u128) >> 64) as usize)
    }

    /// The cached state and depth of `id`, if any.
    #[inline(always)]
    pub fn get(&self, id: StateId) -> Option<(Entry<'_>, u32, CacheRegion)> {
        if let Some(i) = self.recent_slot(id) {
            if let Some((v, d)) = self.recent.lookup(i, id, self.packing, self.width) {
                return Some((v, d, CacheRegion::Recent));
            }
        }
        if let Some(i) = self.replayed_slot(id) {
            if let Some((v, d)) = self.replayed.lookup(i, id, self.packing, self.width) {
                return Some((v, d, CacheRegion::Replayed));
            }
        }
        None
    }

    /// Whether `id` is cached.
    #[inline(always)]
    pub fn contains(&self, id: StateId) -> bool {
        self.get(id).is_some()
    }

    /// Touches the slots `id` would occupy, so a later `get` finds them in the CPU cache.
    #[inline(always)]
    pub fn touch(&self, id: StateId) -> u32 {
        let mut t = 0;
        if let Some(i) = self.recent_slot(id) {
            t ^= self.recent.touch(i);
        }
        if let Some(i) = self.replayed_slot(id) {
            t ^= self.replayed.touch(i);
        }
        t
    }

    /// Counts a put; widens the packing (emptying the cache) when too many did not fit.
    #[inline(always)]
    fn count(&mut self, fitted: bool) {
        self.puts += 1;
        self.misfits += !fitted as u32;
        if self.puts == WINDOW {
            if self.misfits * MISFIT_SHARE > WINDOW && self.packing != Packing::Bytes {
                let width = Some(self.width);
                *self = Self::with_packing(
                    self.entries,
                    width,
                    self.packing.wider(),
                    self.recent_eighths,
                );
                self.resized = true;
            }
            self.puts = 0;
            self.misfits = 0;
        }
    }

    /// Caches a new (or waiting-set) state in the recent region.
    #[inline(always)]
    pub fn put_recent(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let Some(i) = self.recent_slot(id) {
            let fitted = self.recent.put(i, id, depth, state, self.packing);
            self.count(fitted);
        }
    }

    /// Caches a state rebuilt by a replay in the replayed region.
    #[inline(always)]
    pub fn put_replayed(&mut self, id: StateId, depth: u32, state: &[u8]) {
        if let Some(i) = self.replayed_slot(id) {
            let fitted = self.replayed.put(i, id, depth, state, self.packing);
            self.count(fitted);
        }
    }

    /// Updates the depth of a cached state (path optimisation repointed it).
    pub fn set_depth(&mut self, id: StateId, depth: u32) {
        if let Some(i) = self.recent_slot(id) {
            self.recent.set_depth(i, id, depth);
        }
        if let Some(i) = self.replayed_slot(id) {
            self.replayed.set_depth(i, id, depth);
        }
    }

    pub fn ram_bytes(&self) -> u64 {
        self.recent.ram_bytes() + self.replayed.ram_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packings_round_trip_and_compare() {
        let states: Vec<Vec<u8>> = vec![
            vec![0, 1, 1, 0, 1, 0, 0, 1, 1],
            vec![1; 17],
            vec![0; 3],
            vec![15, 0, 7, 1, 2],
            vec![3, 200, 0],
            (0..=255).collect(),
        ];
        for packing in [Packing::Bits, Packing::Nibbles, Packing::Bytes] {
            for s in &states {
                let mut buf = vec![0u8; packing.packed_len(s.len())];
                let fits = pack(packing, s, &mut buf);
                let want = match packing {
                    Packing::Bits => s.iter().all(|&b| b <= 1),
                    Packing::Nibbles => s.iter().all(|&b| b <= 15),
                    Packing::Bytes => true,
                };
                assert_eq!(fits, want, "{packing:?} {s:?}");
                if !fits {
                    continue;
                }
                let e = Entry {
                    packed: &buf,
                    packing,
                    width: s.len(),
                };
                assert_eq!(&e.to_vec(), s, "{packing:?}");
                assert!(e.matches(s));
                for i in 0..s.len() {
                    let mut t = s.clone();
                    t[i] ^= 1;
                    assert!(!e.matches(&t), "{packing:?} {s:?} byte {i}");
                    t[i] = s[i].wrapping_add(16);
                    assert!(!e.matches(&t), "{packing:?} {s:?} byte {i}");
                }
                assert!(!e.matches(&s[..s.len() - 1]));
            }
        }
        for p in 0..256u64 {
            let w = BIT_BYTES[p as usize];
            assert_eq!(pack_bits(w) as u64, p);
        }
        for p in [0u32, 1, 0xF0, 0x1234_5678, 0xFFFF_FFFF, 0x0F0F_F0F0] {
            let w = unpack_nibbles(p);
            assert_eq!(w & 0xF0F0_F0F0_F0F0_F0F0, 0);
            assert_eq!(pack_nibbles(w), p);
        }
    }

    #[test]
    fn recent_slots_are_id_mod_n() {
        for n in [1usize, 2, 3, 7, 8, 100, 315_000, 1 << 20, 3_000_017] {
            let c = Cache::with_packing(n + n.div_ceil(7), None, Packing::Bytes, 7);
            let n = c.recent_len() as u64;
            for id in (0..5000u64)
                .chain([u32::MAX as u64 - 1, u32::MAX as u64, 1 << 40])
                .chain((0..1000).map(|i| i * 4_294_967 + 12_345))
            {
                assert_eq!(c.recent_slot(id), Some((id % n) as usize), "n {n} id {id}");
            }
            if c.replayed.len() > 0 {
                assert!(c.replayed_slot(1 << 31).unwrap() < c.replayed.len());
            }
        }
    }

    #[test]
    fn packing_widens_when_states_do_not_fit() {
        let mut c = Cache::new(64, Some(3), 7);
        assert_eq!(c.packing(), Packing::Bits);
        c.put_recent(1, 1, &[0, 1, 1]);
        assert_eq!(c.get(1).unwrap().0.to_vec(), vec![0, 1, 1]);
        // A state that does not fit is not cached (and evicts the slot's entry).
        c.put_recent(1, 1, &[0, 2, 1]);
        assert!(c.get(1).is_none());
        for id in 0..WINDOW as u64 {
            c.put_recent(id, 1, &[0, 9, 1]);
        }
        assert_eq!(c.packing(), Packing::Nibbles);
        assert!(c.take_resized());
        c.put_recent(5, 2, &[0, 9, 1]);
        assert_eq!(c.get(5).unwrap().0.to_vec(), vec![0, 9, 1]);
        for id in 0..WINDOW as u64 {
            c.put_recent(id, 1, &[0, 90, 1]);
        }
        assert_eq!(c.packing(), Packing::Bytes);
        assert_eq!(c.get(WINDOW as u64 - 1).unwrap().0.to_vec(), vec![0, 90, 1]);
        assert_eq!(c.ram_bytes(), 64 * (HEADER as u64 + 3));
    }

    #[test]
    fn resize_keeps_entries_packing_and_depths() {
        for width in [Some(3), None] {
            let mut c = Cache::new(64, width, 6);
            for id in 0..40u64 {
                c.put_recent(id, id as u32, &[0, (id & 1) as u8, 1]);
            }
            c.put_replayed(3, 70_000, &[1, 1, 0]);
            let before: Vec<_> = (0..40u64)
                .map(|id| c.get(id).map(|(v, d, _)| (v.to_vec(), d)))
                .collect();
            c.resize(1000);
            assert_eq!(c.entries(), 1000);
            assert!(c.take_resized());
            assert_eq!(c.packing(), before_packing(width));
            for (id, b) in before.iter().enumerate() {
                if let Some(b) = b {
                    let (v, d, _) = c.get(id as u64).expect("kept");
                    assert_eq!(&(v.to_vec(), d), b, "id {id}");
                }
            }
            // Every recent entry of the small cache is still there (the new region is larger).
            for id in 1..40u64 {
                assert!(c.contains(id), "{id}");
            }
            c.resize(8);
            assert_eq!(c.entries(), 8);
            assert!(c.get(39).is_some(), "the newest state wins its slot");
        }
    }

    fn before_packing(width: Option<usize>) -> Packing {
        match width {
            Some(_) => Packing::Bits,
            None => Packing::Bytes,
        }
    }

    #[test]
    fn direct_mapped_regions_evict_and_answer() {
        for width in [Some(2), None] {
            let mut c = Cache::with_packing(8, width, Packing::Bytes, 7);
            for id in 0..10u64 {
                c.put_recent(id, id as u32, &[id as u8, 1]);
            }
            assert!(c.get(0).is_none(), "0 evicted by 7 (7 recent slots)");
            let (v, d, r) = c.get(9).unwrap();
            assert_eq!((v.to_vec(), d, r), (vec![9u8, 1], 9, CacheRegion::Recent));
            c.put_replayed(0, 0, &[0, 1]);
            assert_eq!(c.get(0).unwrap().2, CacheRegion::Replayed);
            c.set_depth(0, 7);
            assert_eq!(c.get(0).unwrap().1, 7);
            // Depths that do not fit the fixed-width entry's 16 bits read as unknown.
            c.put_recent(1, 70_000, &[1, 1]);
            let want = if width.is_some() {
                UNKNOWN_DEPTH
            } else {
                70_000
            };
            assert_eq!(c.get(1).unwrap().1, want);
            c.put_recent(1, 65_534, &[1, 1]);
            assert_eq!(c.get(1).unwrap().1, 65_534);
            assert!(Cache::new(0, width, 7).get(3).is_none());
        }
    }
}

/// The current search path, pinned every [`PIN_EVERY`] levels: the state last inserted as new
/// at each depth that is a multiple of `PIN_EVERY`. In DFS this samples the engine's stack (a
/// new state at depth `k` is pushed on a stack of `k` frames), and every state seen so far
/// descends from a stack state, so a replay climbs only to the nearest pinned stack state,
/// never to the initial state. Sampling keeps the copy at 1/`PIN_EVERY` of the engine's stack
/// (DFS stacks can be as deep as the state space). In BFS it holds a few states and costs
/// nothing. A state is found by its stored depth, checked by number.
#[derive(Default)]
pub struct SearchPath {
    /// Entry `i` is the state at depth `i * PIN_EVERY`.
    ids: Vec<StateId>,
    ends: Vec<usize>,
    data: Vec<u8>,
}

/// Depth sampling of the pinned search path (measured on Kanban-PT-00005 in DFS: pinning
/// every level cost 52 B/state for a stack as deep as the state space).
pub const PIN_EVERY: usize = 8;

impl SearchPath {
    /// Records state `id` inserted as new at `depth`, dropping entries that are no longer on
    /// the path.
    #[inline]
    pub fn push(&mut self, depth: u32, id: StateId, state: &[u8]) {
        let k = depth as usize;
        let slot = k / PIN_EVERY;
        if !k.is_multiple_of(PIN_EVERY) {
            // Entries at depths < k stay ancestors; deeper ones are off the path.
            self.truncate(slot + 1);
            return;
        }
        if slot > self.ids.len() {
            return;
        }
        self.truncate(slot);
        self.ids.push(id);
        self.data.extend_from_slice(state);
        self.ends.push(self.data.len());
    }

    fn truncate(&mut self, n: usize) {
        if n < self.ids.len() {
            self.ids.truncate(n);
            self.ends.truncate(n);
            self.data.truncate(self.ends.last().copied().unwrap_or(0));
        }
    }

    /// The vector of `id` if it is pinned at `depth`.
    #[inline(always)]
    pub fn get(&self, id: StateId, depth: u32) -> Option<&[u8]> {
        let k = depth as usize;
        if !k.is_multiple_of(PIN_EVERY) {
            return None;
        }
        let k = k / PIN_EVERY;
        if self.ids.get(k) != Some(&id) {
            return None;
        }
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        Some(&self.data[start..self.ends[k]])
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.ids.capacity() * 8 + self.ends.capacity() * 8 + self.data.capacity()) as u64
    }
}
