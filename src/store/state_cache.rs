//! The state cache of the path-record stores (ComBack and Δ, docs/ARCHITECTURE.md,
//! "store/path.rs"): direct-mapped regions of states keyed by state number, each entry a
//! header (the state number and its path length) and the state, packed. The stores differ
//! only in the header ([`Header`]: ComBack's 6 bytes, 32-bit numbers and 16-bit depths, so
//! that more entries fit; Δ's 12 bytes, 64-bit numbers and 32-bit distances) and in how they
//! use the regions (ComBack: two regions and a packing that widens, `comback/cache.rs`; Δ:
//! one region of unpacked states, `delta/mod.rs`).

use crate::store::StateId;

/// The path length [`Narrow`] gives back for a state cached with 65,535 or more (the caller
/// reads the real one from its record).
pub const UNKNOWN_DEPTH: u32 = u32::MAX;

/// The header of a fixed-width entry: which state it holds (none: all zero) and its path
/// length.
pub trait Header {
    /// Bytes before the state.
    const BYTES: usize;
    /// The state number stored for `id` (`id + 1`; 0 is an empty entry).
    fn raw(id: StateId) -> u64;
    /// The stored state number of an entry.
    fn read_raw(e: &[u8]) -> u64;
    /// Writes `raw` and `len`.
    fn write(e: &mut [u8], raw: u64, len: u32);
    /// The stored path length.
    fn len(e: &[u8]) -> u32;
    /// Overwrites the stored path length.
    fn set_len(e: &mut [u8], len: u32);
}

/// ComBack's header, `id + 1: u32 | depth: u16` (its state numbers stay below 2^32 − 1; a
/// depth of 65,535 or more reads back as [`UNKNOWN_DEPTH`]). Six bytes instead of eight give
/// Kanban-PT-00005, 16-byte states, 9% more entries for the same RAM.
pub struct Narrow;

impl Header for Narrow {
    const BYTES: usize = 6;
    #[inline(always)]
    fn raw(id: StateId) -> u64 {
        (id as u32).wrapping_add(1) as u64
    }
    #[inline(always)]
    fn read_raw(e: &[u8]) -> u64 {
        u32::from_le_bytes(e[0..4].try_into().unwrap()) as u64
    }
    #[inline(always)]
    fn write(e: &mut [u8], raw: u64, len: u32) {
        e[0..4].copy_from_slice(&(raw as u32).to_le_bytes());
        Self::set_len(e, len);
    }
    #[inline(always)]
    fn len(e: &[u8]) -> u32 {
        match u16::from_le_bytes([e[4], e[5]]) {
            u16::MAX => UNKNOWN_DEPTH,
            d => d as u32,
        }
    }
    #[inline(always)]
    fn set_len(e: &mut [u8], len: u32) {
        e[4..6].copy_from_slice(&(len.min(u16::MAX as u32) as u16).to_le_bytes());
    }
}

/// Δ's header, `id + 1: u64 | distance: u32` (state numbers up to 2^64 − 2).
pub struct Wide;

impl Header for Wide {
    const BYTES: usize = 12;
    #[inline(always)]
    fn raw(id: StateId) -> u64 {
        id.wrapping_add(1)
    }
    #[inline(always)]
    fn read_raw(e: &[u8]) -> u64 {
        u64::from_le_bytes(e[0..8].try_into().unwrap())
    }
    #[inline(always)]
    fn write(e: &mut [u8], raw: u64, len: u32) {
        e[0..8].copy_from_slice(&raw.to_le_bytes());
        Self::set_len(e, len);
    }
    #[inline(always)]
    fn len(e: &[u8]) -> u32 {
        u32::from_le_bytes(e[8..12].try_into().unwrap())
    }
    #[inline(always)]
    fn set_len(e: &mut [u8], len: u32) {
        e[8..12].copy_from_slice(&len.to_le_bytes());
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

    pub fn wider(self) -> Packing {
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
    #[inline(always)]
    pub fn matches(&self, state: &[u8]) -> bool {
        if state.len() != self.width {
            return false;
        }
        match self.packing {
            Packing::Bytes => crate::store::full::eq_bytes(self.packed, state),
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

/// One direct-mapped region. Fixed-width states: one contiguous entry per slot, the header
/// `H` and the packed state, so a lookup costs one cache miss. Variable width: parallel
/// vectors, unpacked.
pub enum Region<H> {
    Flat {
        stride: usize,
        slots: usize,
        bytes: Vec<u8>,
        header: std::marker::PhantomData<H>,
    },
    Boxed {
        ids: Vec<u64>,
        depths: Vec<u32>,
        data: Vec<Vec<u8>>,
    },
}

impl<H: Header> Region<H> {
    /// Bytes a region of `n` slots of `width`-byte states takes packed as `packing` (`None`:
    /// past `u64`): what an option sizing a cache asks for, checked before it is allocated.
    pub fn bytes_for(n: usize, width: Option<usize>, packing: Packing) -> Option<u64> {
        let stride = match width {
            Some(w) => H::BYTES + packing.packed_len(w),
            None => 8 + 4 + std::mem::size_of::<Vec<u8>>(),
        };
        (n as u64).checked_mul(stride as u64)
    }

    pub fn new(n: usize, width: Option<usize>, packing: Packing) -> Self {
        match width {
            Some(w) => {
                let stride = H::BYTES + packing.packed_len(w);
                let len = n * stride;
                // Zeroed by the allocator (fresh pages for a large region), not written here:
                // the pages become resident as slots are used, so that a cache the budget
                // check refuses right after the store is built never took its RAM.
                let bytes: Vec<u8> = vec![0; len];
                crate::sys::huge_pages(bytes.as_ptr(), len);
                Region::Flat {
                    stride,
                    slots: n,
                    bytes,
                    header: std::marker::PhantomData,
                }
            }
            None => Region::Boxed {
                ids: vec![0; n],
                depths: vec![0; n],
                data: vec![Vec::new(); n],
            },
        }
    }

    /// Its slots.
    #[inline(always)]
    pub fn slots(&self) -> usize {
        match self {
            Region::Flat { slots, .. } => *slots,
            Region::Boxed { ids, .. } => ids.len(),
        }
    }

    /// Bytes of one fixed-width entry, `None` for variable-width states.
    pub fn stride(&self) -> Option<usize> {
        match self {
            Region::Flat { stride, .. } => Some(*stride),
            Region::Boxed { .. } => None,
        }
    }

    /// The entry in slot `i` if it holds state `id` (never for a number whose stored form
    /// is 0, an empty entry's: `Wide` of 2^64 − 1, `Narrow` of 2^32 − 1).
    #[inline(always)]
    pub fn lookup(
        &self,
        i: usize,
        id: StateId,
        packing: Packing,
        width: usize,
    ) -> Option<(Entry<'_>, u32)> {
        let raw = H::raw(id);
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &bytes[i * stride..(i + 1) * stride];
                (raw != 0 && H::read_raw(e) == raw).then(|| {
                    (
                        Entry {
                            packed: &e[H::BYTES..],
                            packing,
                            width,
                        },
                        H::len(e),
                    )
                })
            }
            Region::Boxed { ids, depths, data } => (raw != 0 && ids[i] == raw).then(|| {
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

    /// The packed state in slot `i` (occupied: after a [`Region::lookup`] that found it).
    #[inline(always)]
    pub fn packed(&self, i: usize) -> &[u8] {
        match self {
            Region::Flat { stride, bytes, .. } => &bytes[i * stride + H::BYTES..(i + 1) * stride],
            Region::Boxed { data, .. } => &data[i],
        }
    }

    /// The path length stored in slot `i`.
    #[inline(always)]
    pub fn depth(&self, i: usize) -> u32 {
        match self {
            Region::Flat { stride, bytes, .. } => H::len(&bytes[i * stride..(i + 1) * stride]),
            Region::Boxed { depths, .. } => depths[i],
        }
    }

    /// Touches slot `i` (prefetch).
    #[inline(always)]
    pub fn touch(&self, i: usize) -> u32 {
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &bytes[i * stride..(i + 1) * stride];
                super::slots::prefetch(e.as_ptr());
                // An entry may straddle two CPU cache lines.
                super::slots::prefetch(e[e.len() - 1..].as_ptr());
                0
            }
            Region::Boxed { ids, .. } => ids[i] as u32,
        }
    }

    /// Stores `state` in slot `i`; false (and the slot emptied) when it does not fit
    /// `packing`.
    #[inline(always)]
    pub fn put(
        &mut self,
        i: usize,
        id: StateId,
        depth: u32,
        state: &[u8],
        packing: Packing,
    ) -> bool {
        let raw = H::raw(id);
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &mut bytes[i * *stride..(i + 1) * *stride];
                if !pack(packing, state, &mut e[H::BYTES..]) {
                    H::write(e, 0, 0);
                    return false;
                }
                H::write(e, raw, depth);
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

    /// Sets the path length of state `id` if slot `i` holds it.
    pub fn set_depth(&mut self, i: usize, id: StateId, depth: u32) {
        let raw = H::raw(id);
        match self {
            Region::Flat { stride, bytes, .. } => {
                let e = &mut bytes[i * *stride..(i + 1) * *stride];
                if raw != 0 && H::read_raw(e) == raw {
                    H::set_len(e, depth);
                }
            }
            Region::Boxed { ids, depths, .. } => {
                if raw != 0 && ids[i] == raw {
                    depths[i] = depth;
                }
            }
        }
    }

    /// Calls `f(id, stored depth, entry)` for every occupied slot.
    pub fn for_each(
        &self,
        packing: Packing,
        width: usize,
        mut f: impl FnMut(StateId, u32, Entry<'_>),
    ) {
        match self {
            Region::Flat { stride, bytes, .. } => {
                for e in bytes.chunks_exact(*stride) {
                    let raw = H::read_raw(e);
                    if raw != 0 {
                        let entry = Entry {
                            packed: &e[H::BYTES..],
                            packing,
                            width,
                        };
                        f(raw - 1, H::len(e), entry);
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
                        f(ids[i] - 1, depths[i], entry);
                    }
                }
            }
        }
    }

    pub fn ram_bytes(&self) -> u64 {
        (match self {
            Region::Flat { bytes, .. } => bytes.capacity(),
            Region::Boxed { ids, depths, data } => {
                ids.capacity() * 8
                    + depths.capacity() * 4
                    + data.iter().map(|x| x.capacity() + 24).sum::<usize>()
            }
        }) as u64
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
    fn a_number_stored_as_zero_never_matches_an_empty_entry() {
        let mut r: Region<Wide> = Region::new(4, Some(3), Packing::Bytes);
        assert!(r.lookup(0, u64::MAX, Packing::Bytes, 3).is_none());
        r.put(1, 5, 2, &[1, 2, 3], Packing::Bytes);
        let (e, d) = r.lookup(1, 5, Packing::Bytes, 3).unwrap();
        assert_eq!((e.to_vec(), d), (vec![1, 2, 3], 2));
        r.set_depth(0, u64::MAX, 9);
        assert_eq!(r.depth(0), 0);
        let n: Region<Narrow> = Region::new(4, Some(3), Packing::Bits);
        assert!(n.lookup(0, u32::MAX as u64, Packing::Bits, 3).is_none());
    }
}
