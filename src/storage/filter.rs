//! Block filters: reversible transforms of a block's raw bytes applied before zstd, for record
//! layouts that zstd alone compresses poorly.
//!
//! [`Filter::PackedFields`] is for arrays of bit-packed values (Δ records: eight `w`-bit values
//! to a `w`-byte group, see `store::delta::bits::PackedArray`). Each value is split into its
//! low `low_bits` bits (a transition code) and the bits above them (a predecessor record id).
//! Bit-packing puts every field at a different bit offset, so zstd finds neither repeats nor
//! byte patterns (about 1.0–1.1× on Peterson-PT-3 and QuasiCertifProtocol-PT-06). But the
//! predecessor ids of consecutive records are close — in BFS the parents of new states are
//! expanded in id order, in DFS a new state's parent is usually the record just before it — so
//! the filter writes them as zigzag LEB128 differences from the previous value (mostly one
//! byte of a few distinct values), and the low fields as whole bytes in a separate stream,
//! which zstd's entropy coder then packs close to their entropy.
//!
//! Filtered block layout (before zstd; the block header's raw length stays the unfiltered
//! length):
//!
//! ```text
//!   u32 LE   n = byte length of the difference stream
//!   n bytes  for each value v_i: LEB128(zigzag(high(v_i) − high(v_{i−1}))), high(v_{−1}) = 0
//!   rest     for each value: low(v_i) as ceil(low_bits / 8) little-endian bytes
//! ```

use crate::error::{Corruption, StorageError};
use std::path::Path;

/// The transform a segment file applies to its blocks (header byte 15, parameter at byte 32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Filter {
    /// Raw bytes go straight to zstd.
    #[default]
    None,
    /// Fixed-width records of `w` bytes, each eight `w`-bit little-endian bit-packed values,
    /// split at bit `low_bits` (see the module docs). `low_bits < w`.
    PackedFields { low_bits: u8 },
}

impl Filter {
    /// (header byte 15, header byte 32).
    pub fn encode(self) -> (u8, u8) {
        match self {
            Filter::None => (0, 0),
            Filter::PackedFields { low_bits } => (1, low_bits),
        }
    }

    /// The filter of a header, checked against the record width (`0` for streams).
    pub fn decode(id: u8, param: u8, width: u32) -> Result<Filter, String> {
        match (id, param) {
            (0, 0) => Ok(Filter::None),
            (1, low) if (1..=64).contains(&width) && (low as u32) < width => {
                Ok(Filter::PackedFields { low_bits: low })
            }
            (1, low) => Err(format!(
                "filter 1 (packed fields) needs 1..=64-byte records and fewer low bits than \
                 the width, found width {width} and {low} low bits"
            )),
            (id, param) => Err(format!(
                "filter 0 (none) or 1 (packed fields), found {id} (parameter {param})"
            )),
        }
    }

    /// Whether blocks are transformed.
    pub fn is_none(self) -> bool {
        self == Filter::None
    }

    /// An upper bound of the filtered length of `raw_len` raw bytes of `width`-byte records.
    pub fn bound(self, raw_len: usize, width: usize) -> usize {
        match self {
            Filter::None => raw_len,
            Filter::PackedFields { low_bits } => {
                let values = raw_len / width.max(1) * 8;
                4 + values * (10 + (low_bits as usize).div_ceil(8))
            }
        }
    }

    /// Appends the filtered form of `raw` (whole `width`-byte records) to `out`.
    pub fn apply(self, raw: &[u8], width: usize, out: &mut Vec<u8>) {
        match self {
            Filter::None => out.extend_from_slice(raw),
            Filter::PackedFields { low_bits } => {
                let bits = width as u32;
                let low_bytes = (low_bits as usize).div_ceil(8);
                let low_mask = mask(low_bits as u32);
                let start = out.len();
                out.extend_from_slice(&[0; 4]);
                let mut lows = Vec::with_capacity(raw.len() / width * 8 * low_bytes);
                let mut prev = 0u64;
                // Read the block as one little-endian bit stream of `bits`-bit values (see
                // `undo`), refilling a 128-bit accumulator 8 bytes at a time.
                let values = raw.len() / width * 8;
                let (mut acc, mut nacc, mut pos) = (0u128, 0u32, 0usize);
                for _ in 0..values {
                    if nacc < bits {
                        let n = (raw.len() - pos).min(8);
                        let mut b = [0u8; 8];
                        b[..n].copy_from_slice(&raw[pos..pos + n]);
                        pos += n;
                        acc |= (u64::from_le_bytes(b) as u128) << nacc;
                        nacc += 8 * n as u32;
                    }
                    let v = acc as u64 & mask(bits);
                    acc >>= bits;
                    nacc -= bits;
                    let high = v >> low_bits;
                    let d = high.wrapping_sub(prev) as i64;
                    prev = high;
                    leb128(zigzag(d), out);
                    lows.extend_from_slice(&(v & low_mask).to_le_bytes()[..low_bytes]);
                }
                let n = (out.len() - start - 4) as u32;
                out[start..start + 4].copy_from_slice(&n.to_le_bytes());
                out.extend_from_slice(&lows);
            }
        }
    }

    /// Rebuilds the raw bytes of a block from its filtered form `enc` into `out` (whose
    /// length is the block's raw length, a multiple of `width`). A malformed form is a
    /// [`StorageError::Corrupt`] naming `path` and the block at `offset`.
    pub fn undo(
        self,
        enc: &[u8],
        width: usize,
        out: &mut [u8],
        path: &Path,
        offset: u64,
    ) -> Result<(), StorageError> {
        let corrupt = |expected: String, found: String| {
            StorageError::Corrupt(Corruption {
                path: path.to_path_buf(),
                offset,
                expected,
                found,
            })
        };
        match self {
            Filter::None => {
                if enc.len() != out.len() {
                    return Err(corrupt(
                        format!("{} bytes", out.len()),
                        enc.len().to_string(),
                    ));
                }
                out.copy_from_slice(enc);
                Ok(())
            }
            Filter::PackedFields { low_bits } => {
                let bits = width as u32;
                let low_bytes = (low_bits as usize).div_ceil(8);
                let values = out.len() / width * 8;
                let n = enc
                    .get(..4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
                    .ok_or_else(|| {
                        corrupt(
                            "a 4-byte stream length".into(),
                            format!("{} bytes", enc.len()),
                        )
                    })?;
                if enc.len() != 4 + n + values * low_bytes {
                    return Err(corrupt(
                        format!(
                            "{} filtered bytes for {values} values",
                            4 + n + values * low_bytes
                        ),
                        enc.len().to_string(),
                    ));
                }
                let (diffs, lows) = (&enc[4..4 + n], &enc[4 + n..]);
                let high_mask = mask(bits - low_bits as u32);
                // The groups of a block are one continuous little-endian bit stream of
                // `bits`-bit values (group g is bits [64·g·w/8 …)), so the values are
                // written through a 128-bit accumulator, 8 bytes at a time.
                let (mut acc, mut nacc, mut w) = (0u128, 0u32, 0usize);
                let (mut prev, mut pos) = (0u64, 0usize);
                for i in 0..values {
                    // One-byte differences are the common case.
                    let d = match diffs.get(pos) {
                        Some(&b) if b < 0x80 => {
                            pos += 1;
                            b as u64
                        }
                        _ => {
                            let mut rest = &diffs[pos.min(diffs.len())..];
                            let before = rest.len();
                            let d = read_leb128(&mut rest).ok_or_else(|| {
                                corrupt(
                                    "a LEB128 difference".into(),
                                    format!("a malformed one at value {i}"),
                                )
                            })?;
                            pos += before - rest.len();
                            d
                        }
                    };
                    let high = prev.wrapping_add(unzigzag(d) as u64);
                    if high & !high_mask != 0 {
                        return Err(corrupt(
                            format!("a value of {} high bits", bits - low_bits as u32),
                            format!("{high:#x} at value {i}"),
                        ));
                    }
                    prev = high;
                    let low = match low_bytes {
                        0 => 0,
                        1 => lows[i] as u64,
                        2 => u16::from_le_bytes([lows[2 * i], lows[2 * i + 1]]) as u64,
                        _ => {
                            let mut lb = [0u8; 8];
                            lb[..low_bytes]
                                .copy_from_slice(&lows[i * low_bytes..(i + 1) * low_bytes]);
                            u64::from_le_bytes(lb)
                        }
                    };
                    if low >> low_bits != 0 {
                        return Err(corrupt(
                            format!("a low field of {low_bits} bits"),
                            format!("{low:#x} at value {i}"),
                        ));
                    }
                    acc |= (((high << low_bits) | low) as u128) << nacc;
                    nacc += bits;
                    if nacc >= 64 {
                        out[w..w + 8].copy_from_slice(&(acc as u64).to_le_bytes());
                        w += 8;
                        acc >>= 64;
                        nacc -= 64;
                    }
                }
                let tail = (nacc / 8) as usize;
                out[w..w + tail].copy_from_slice(&(acc as u64).to_le_bytes()[..tail]);
                let diffs = &diffs[pos..];
                if !diffs.is_empty() {
                    return Err(corrupt(
                        "the end of the difference stream".into(),
                        format!("{} more bytes", diffs.len()),
                    ));
                }
                Ok(())
            }
        }
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
fn set_bits(words: &mut [u64], off: u64, width: u32, v: u64) {
    let i = (off / 64) as usize;
    let s = (off % 64) as u32;
    words[i] |= v << s;
    if s + width > 64 {
        words[i + 1] |= v >> (64 - s);
    }
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

fn leb128(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_leb128(input: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (k, &b) in input.iter().enumerate().take(10) {
        let part = (b & 0x7f) as u64;
        if k == 9 && part > 1 {
            return None;
        }
        v |= part << (7 * k);
        if b & 0x80 == 0 {
            *input = &input[k + 1..];
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(vals: &[u64], bits: u32) -> Vec<u8> {
        let width = bits as usize;
        let mut out = vec![0u8; vals.len() / 8 * width];
        for (g, chunk) in vals.chunks(8).enumerate() {
            let mut w = [0u64; 9];
            for (j, &v) in chunk.iter().enumerate() {
                set_bits(&mut w, j as u64 * bits as u64, bits, v);
            }
            for k in 0..width {
                out[g * width + k] = (w[k / 8] >> (8 * (k % 8))) as u8;
            }
        }
        out
    }

    #[test]
    fn packed_fields_round_trip() {
        for (bits, low) in [
            (1u32, 0u8),
            (9, 8),
            (29, 7),
            (33, 16),
            (40, 0),
            (64, 63),
            (64, 1),
        ] {
            let vals: Vec<u64> = (0..64u64)
                .map(|i| {
                    let r = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 20);
                    // Alternate near-monotone and arbitrary high parts.
                    let v = if i % 3 == 0 {
                        r
                    } else {
                        (i / 2) << low | (r & mask(low as u32))
                    };
                    v & mask(bits)
                })
                .collect();
            let raw = pack(&vals, bits);
            let f = Filter::PackedFields { low_bits: low };
            let mut enc = Vec::new();
            f.apply(&raw, bits as usize, &mut enc);
            assert!(enc.len() <= f.bound(raw.len(), bits as usize));
            let mut back = vec![0u8; raw.len()];
            f.undo(&enc, bits as usize, &mut back, Path::new("x"), 0)
                .unwrap();
            assert_eq!(back, raw, "bits {bits} low {low}");
            let (id, p) = f.encode();
            assert_eq!(Filter::decode(id, p, bits).unwrap(), f);
        }
    }

    #[test]
    fn malformed_filtered_blocks_are_errors() {
        let f = Filter::PackedFields { low_bits: 7 };
        let raw = pack(&(0..16).map(|i| i * 200 + 3).collect::<Vec<_>>(), 29);
        let mut enc = Vec::new();
        f.apply(&raw, 29, &mut enc);
        let mut out = vec![0u8; raw.len()];
        assert!(f
            .undo(&enc[..enc.len() - 1], 29, &mut out, Path::new("x"), 0)
            .is_err());
        assert!(f.undo(&enc[..3], 29, &mut out, Path::new("x"), 0).is_err());
        let mut bad = enc.clone();
        bad[4] = 0xff; // an unterminated difference swallows the next ones
        assert!(f.undo(&bad, 29, &mut out, Path::new("x"), 0).is_err());
        // A difference that overflows the high field.
        let mut big = vec![0u8; 4];
        let mut diffs = Vec::new();
        leb128(zigzag(1 << 30), &mut diffs);
        diffs.extend_from_slice(&[0; 15]);
        big[..4].copy_from_slice(&(diffs.len() as u32).to_le_bytes());
        big.extend_from_slice(&diffs);
        big.extend_from_slice(&[0u8; 16]);
        assert!(f.undo(&big, 29, &mut out, Path::new("x"), 0).is_err());
        assert!(Filter::decode(1, 29, 29).is_err());
        assert!(Filter::decode(2, 0, 29).is_err());
    }
}
