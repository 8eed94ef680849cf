//! Bit-level building blocks: packed fields in `u64` words, and arrays of bit-packed values
//! stored eight to a record of a segment vector ([`Records`]).

use crate::error::StoreError;
use crate::store::records::{Accounting, Disk, Layout, Records, RecordsMark};

/// Reads the `width`-bit field (`width <= 64`) starting at bit `off` of `words`.
#[inline(always)]
pub fn get_bits(words: &[u64], off: u64, width: u32) -> u64 {
    if width == 0 {
        return 0;
    }
    let i = (off / 64) as usize;
    let s = (off % 64) as u32;
    let mut v = words[i] >> s;
    if s + width > 64 {
        v |= words[i + 1] << (64 - s);
    }
    if width == 64 {
        v
    } else {
        v & ((1u64 << width) - 1)
    }
}

/// Writes `v` (which must fit) into the `width`-bit field at bit `off` of `words`.
#[inline(always)]
pub fn set_bits(words: &mut [u64], off: u64, width: u32, v: u64) {
    if width == 0 {
        return;
    }
    debug_assert!(
        width == 64 || v >> width == 0,
        "{v} does not fit {width} bits"
    );
    let i = (off / 64) as usize;
    let s = (off % 64) as u32;
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    words[i] = (words[i] & !(mask << s)) | (v << s);
    if s + width > 64 {
        let hi = 64 - s;
        let rest = width - hi;
        let m2 = (1u64 << rest) - 1;
        words[i + 1] = (words[i + 1] & !m2) | (v >> hi);
    }
}

/// The number of bits needed to write every value in `0..=max`.
#[inline]
pub fn bits_for(max: u64) -> u32 {
    64 - max.leading_zeros()
}

/// An array of `bits`-bit values (`1 <= bits <= 64`), packed eight to one `bits`-byte record
/// of a segment vector, so a value costs exactly `bits` bits. The group being filled is kept
/// in `tail` until it is complete.
pub struct PackedArray {
    bits: u32,
    groups: Records,
    tail: [u64; 9],
    tail_len: usize,
    buf: Vec<u8>,
}

/// How to reopen a [`PackedArray`]: its vector's mark and the incomplete last group.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PackedMark {
    pub bits: u32,
    pub groups: RecordsMark,
    pub tail: [u64; 9],
    pub tail_len: usize,
}

impl PackedArray {
    /// A new array in vector `name` of the run's storage.
    pub fn new(disk: &Disk, name: &str, bits: u32, layout: Layout) -> Result<Self, StoreError> {
        assert!((1..=64).contains(&bits));
        Ok(PackedArray {
            bits,
            groups: Records::create(disk, name, bits as usize, layout, Accounting::Own)?,
            tail: [0; 9],
            tail_len: 0,
            buf: vec![0; bits as usize],
        })
    }

    /// Reopens an array at a checkpoint's mark.
    pub fn open(disk: &Disk, m: &PackedMark, layout: Layout) -> Result<Self, StoreError> {
        let groups = Records::open(disk, &m.groups, layout, Accounting::Own)?;
        if !(1..=64).contains(&m.bits) || groups.width() != m.bits as usize || m.tail_len >= 8 {
            return Err(StoreError::Invalid {
                store: "delta",
                message: format!(
                    "packed array of {}-bit values in a file of {}-byte groups",
                    m.bits,
                    groups.width()
                ),
            });
        }
        Ok(PackedArray {
            bits: m.bits,
            groups,
            tail: m.tail,
            tail_len: m.tail_len,
            buf: vec![0; m.bits as usize],
        })
    }

    /// Makes the complete groups durable; the mark keeps the incomplete one.
    pub fn checkpoint(&mut self) -> Result<PackedMark, StoreError> {
        Ok(PackedMark {
            bits: self.bits,
            groups: self.groups.checkpoint()?,
            tail: self.tail,
            tail_len: self.tail_len,
        })
    }

    /// Drops the array for good (see [`Records::give_up`]).
    pub fn give_up(self) {
        self.groups.give_up()
    }

    /// Lets the block cache shrink to what the budget leaves it now.
    pub fn trim_cache(&mut self) -> Result<(), StoreError> {
        self.groups.trim_cache()
    }

    /// Cached bytes the cache gives back when the budget's headroom is gone.
    pub fn spare_cache_bytes(&self) -> u64 {
        self.groups.spare_cache_bytes()
    }

    pub fn cache_counts(&self) -> (u64, u64) {
        self.groups.cache_counts()
    }

    pub fn compactions(&self) -> u64 {
        self.groups.compactions()
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    pub fn len(&self) -> u64 {
        self.groups.len() * 8 + self.tail_len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn words_of(buf: &[u8], out: &mut [u64; 9]) {
        *out = [0; 9];
        for (i, b) in buf.iter().enumerate() {
            out[i / 8] |= (*b as u64) << (8 * (i % 8));
        }
    }

    fn bytes_of(words: &[u64; 9], out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = (words[i / 8] >> (8 * (i % 8))) as u8;
        }
    }

    pub fn push(&mut self, v: u64) -> Result<(), StoreError> {
        set_bits(
            &mut self.tail,
            self.tail_len as u64 * self.bits as u64,
            self.bits,
            v,
        );
        self.tail_len += 1;
        if self.tail_len == 8 {
            Self::bytes_of(&self.tail, &mut self.buf);
            self.groups.push(&self.buf)?;
            self.tail = [0; 9];
            self.tail_len = 0;
        }
        Ok(())
    }

    pub fn get(&self, i: u64) -> Result<u64, StoreError> {
        let (g, k) = (i / 8, (i % 8) * self.bits as u64);
        if g == self.groups.len() && ((i % 8) as usize) < self.tail_len {
            return Ok(get_bits(&self.tail, k, self.bits));
        }
        // The field starts in byte k/8 of the group and spans at most 9 bytes; read them in
        // place (fixed 8-byte loads, no copy of the group).
        let (byte, shift) = ((k / 8) as usize, (k % 8) as u32);
        let bits = self.bits;
        self.groups.with(g, |r| {
            let lo = match r.get(byte..byte + 8) {
                Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
                None => {
                    let mut w = [0u8; 8];
                    w[..r.len() - byte].copy_from_slice(&r[byte..]);
                    u64::from_le_bytes(w)
                }
            };
            let mut v = lo >> shift;
            if shift > 0 {
                v |= (r.get(byte + 8).copied().unwrap_or(0) as u64) << (64 - shift);
            }
            if bits == 64 {
                v
            } else {
                v & ((1u64 << bits) - 1)
            }
        })
    }

    /// Whether `set(i)` costs no disk write of its own (value in the incomplete group, a
    /// hot group, or a cached block that is dirty already).
    pub fn set_is_free(&self, i: u64) -> bool {
        let g = i / 8;
        (g == self.groups.len() && ((i % 8) as usize) < self.tail_len)
            || (g < self.groups.len() && self.groups.set_is_free(g))
    }

    pub fn set(&mut self, i: u64, v: u64) -> Result<(), StoreError> {
        let (g, k) = (i / 8, (i % 8) * self.bits as u64);
        if g == self.groups.len() && ((i % 8) as usize) < self.tail_len {
            set_bits(&mut self.tail, k, self.bits, v);
            return Ok(());
        }
        let mut buf = [0u8; 64];
        let buf = &mut buf[..self.bits as usize];
        self.groups.get(g, buf)?;
        let mut w = [0u64; 9];
        Self::words_of(buf, &mut w);
        set_bits(&mut w, k, self.bits, v);
        Self::bytes_of(&w, buf);
        self.groups.set(g, buf)
    }

    /// Bytes in RAM (the vector's hot window, cache and block index, the tail group and its
    /// buffer).
    pub fn ram_bytes(&self) -> u64 {
        self.groups.ram_bytes() + 72 + self.buf.capacity() as u64
    }

    pub fn disk_bytes(&self) -> u64 {
        self.groups.disk_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_across_word_boundaries() {
        let mut w = vec![0u64; 8];
        let widths = [1u32, 7, 13, 33, 64, 5, 57, 2];
        let mut off = 0u64;
        let mut vals = Vec::new();
        for (i, &wd) in widths.iter().enumerate() {
            let v = (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1))
                & if wd == 64 { u64::MAX } else { (1 << wd) - 1 };
            set_bits(&mut w, off, wd, v);
            vals.push((off, wd, v));
            off += wd as u64;
        }
        for (off, wd, v) in vals {
            assert_eq!(get_bits(&w, off, wd), v, "width {wd} at {off}");
        }
        assert_eq!(bits_for(0), 0);
        assert_eq!(bits_for(1), 1);
        assert_eq!(bits_for(255), 8);
        assert_eq!(bits_for(256), 9);
    }

    fn disk() -> (crate::storage::Storage, Disk) {
        let st = crate::storage::Storage::new(&crate::storage::StorageConfig::default()).unwrap();
        let d = Disk::new(&st);
        (st, d)
    }

    const SMALL: Layout = Layout {
        block_bytes: 512,
        hot_blocks: 2,
        cache_bytes: 2048,
        zstd_level: crate::storage::segment::ZSTD_LEVEL,
        filter: crate::storage::filter::Filter::None,
        codec: crate::storage::segment::Codec::Zstd,
    };

    #[test]
    fn packed_array_push_get_set() {
        let (_st, disk) = disk();
        for bits in [1u32, 3, 8, 27, 40, 64] {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            // Unfiltered, and filtered as Δ records are (split below the top bits).
            for filter in [
                crate::storage::filter::Filter::None,
                crate::storage::filter::Filter::PackedFields {
                    low_bits: (bits / 2) as u8,
                },
            ] {
                let layout = Layout { filter, ..SMALL };
                let mut a = PackedArray::new(
                    &disk,
                    &format!("p{bits}.{}", filter.encode().0),
                    bits,
                    layout,
                )
                .unwrap();
                let val = |i: u64| i.wrapping_mul(0x2545_f491_4f6c_dd1d) & mask;
                for i in 0..1003 {
                    a.push(val(i)).unwrap();
                }
                assert_eq!(a.len(), 1003);
                for i in 0..1003 {
                    assert_eq!(a.get(i).unwrap(), val(i));
                }
                for i in (0..1003).step_by(7) {
                    a.set(i, !val(i) & mask).unwrap();
                }
                for i in 0..1003 {
                    let want = if i % 7 == 0 { !val(i) & mask } else { val(i) };
                    assert_eq!(a.get(i).unwrap(), want, "bits {bits} index {i}");
                }
                assert!(a.get(1003).is_err());
            }
        }
    }
}
