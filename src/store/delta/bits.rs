//! Bit-level building blocks: packed fields in `u64` words, the fixed-width record vector the
//! segment vector will replace, and arrays of bit-packed records stored eight to a record.

use crate::error::StoreError;

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

/// Fixed-width byte records, numbered densely from 0.
///
/// This is the exact interface of the segment vector (branch `storage`): `push`, `get`, `set`,
/// `len`, `ram_bytes`, `disk_bytes`. It is backed by a `Vec<u8>` here, so the segment vector
/// (memory-mapped, spilling to disk) can replace it without touching the Δ store.
pub struct RecordVec {
    width: usize,
    bytes: Vec<u8>,
}

impl RecordVec {
    pub fn new(width: usize) -> Self {
        assert!(width > 0, "records have at least one byte");
        RecordVec {
            width,
            bytes: Vec::new(),
        }
    }

    /// Appends a record, returning its index.
    pub fn push(&mut self, rec: &[u8]) -> Result<u64, StoreError> {
        self.check(rec.len())?;
        if self.bytes.len() + self.width > self.bytes.capacity() {
            // Grow by a sixteenth (at least 4 KiB), in whole records: a doubling Vec would
            // waste up to half its bytes, which matters when records are a few bits each.
            let records = (self.bytes.len() / 16 / self.width).max(4096 / self.width + 1);
            self.bytes.reserve_exact(records * self.width);
        }
        self.bytes.extend_from_slice(rec);
        Ok(self.len() - 1)
    }

    /// Copies record `i` into `out` (exactly `width` bytes).
    pub fn get(&self, i: u64, out: &mut [u8]) -> Result<(), StoreError> {
        self.check(out.len())?;
        let s = self.start(i)?;
        out.copy_from_slice(&self.bytes[s..s + self.width]);
        Ok(())
    }

    /// Overwrites record `i`.
    pub fn set(&mut self, i: u64, rec: &[u8]) -> Result<(), StoreError> {
        self.check(rec.len())?;
        let s = self.start(i)?;
        self.bytes[s..s + self.width].copy_from_slice(rec);
        Ok(())
    }

    pub fn len(&self) -> u64 {
        (self.bytes.len() / self.width) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn ram_bytes(&self) -> u64 {
        self.bytes.capacity() as u64
    }

    pub fn disk_bytes(&self) -> u64 {
        0
    }

    pub fn width(&self) -> usize {
        self.width
    }

    fn check(&self, n: usize) -> Result<(), StoreError> {
        if n != self.width {
            return Err(StoreError::Invalid {
                store: "delta",
                message: format!(
                    "record of {n} bytes in a vector of {}-byte records",
                    self.width
                ),
            });
        }
        Ok(())
    }

    fn start(&self, i: u64) -> Result<usize, StoreError> {
        if i >= self.len() {
            return Err(StoreError::Invalid {
                store: "delta",
                message: format!("record {i} out of range (have {})", self.len()),
            });
        }
        Ok(i as usize * self.width)
    }
}

/// An array of `bits`-bit values (`1 <= bits <= 64`), packed eight to one `bits`-byte record
/// of a [`RecordVec`], so a value costs exactly `bits` bits. The group being filled is kept
/// in `tail` until it is complete.
pub struct PackedArray {
    bits: u32,
    groups: RecordVec,
    tail: [u64; 9],
    tail_len: usize,
    buf: Vec<u8>,
}

impl PackedArray {
    pub fn new(bits: u32) -> Self {
        assert!((1..=64).contains(&bits));
        PackedArray {
            bits,
            groups: RecordVec::new(bits as usize),
            tail: [0; 9],
            tail_len: 0,
            buf: vec![0; bits as usize],
        }
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
        // The group is at most 64 bytes; the field starts in byte k/8 and spans at most 9.
        let mut buf = [0u8; 80];
        self.groups.get(g, &mut buf[..self.bits as usize])?;
        let (byte, shift) = ((k / 8) as usize, (k % 8) as u32);
        let lo = u64::from_le_bytes(buf[byte..byte + 8].try_into().expect("8 bytes"));
        let mut v = lo >> shift;
        if shift > 0 {
            v |= (buf[byte + 8] as u64) << (64 - shift);
        }
        Ok(if self.bits == 64 {
            v
        } else {
            v & ((1u64 << self.bits) - 1)
        })
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

    /// Bytes in RAM (the records, the tail group and its buffer).
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

    #[test]
    fn packed_array_push_get_set() {
        for bits in [1u32, 3, 8, 27, 40, 64] {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            let mut a = PackedArray::new(bits);
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

    #[test]
    fn record_vec_grows_by_a_sixteenth() {
        let mut a = PackedArray::new(30);
        let n = 1_000_000u64;
        for i in 0..n {
            a.push(i).unwrap();
        }
        let ideal = n as f64 * 30.0 / 8.0;
        let ratio = a.ram_bytes() as f64 / ideal;
        assert!((1.0..1.08).contains(&ratio), "{ratio}");
    }
}
