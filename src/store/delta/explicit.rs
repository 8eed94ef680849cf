//! Explicit states of the Δ store, optionally *collapsed*.
//!
//! Collapsing (state collapsing, as in the Δ-markings paper): each component of the state
//! vector gets a dictionary of the values actually met in explicit states, and an explicit
//! state is stored as the concatenation of its components' dictionary indices, each in
//! `bits_for(dictionary size − 1)` bits (0 bits for a component that never changed). The
//! component is one byte of the state vector: for P/T nets with 8-bit counters that is one
//! place; wider counters split into bytes, whose high bytes are usually constant (0 bits).
//!
//! Index widths grow as dictionaries grow: when a dictionary outgrows its width, every stored
//! explicit state is re-encoded with the wider layout (explicit states are a 1/kδ minority,
//! and a byte component can widen at most eight times). Nothing ever wraps. Without
//! collapsing, explicit states are stored as raw vectors.

use super::bits::{bits_for, get_bits, set_bits, RecordVec};
use crate::error::StoreError;

/// Whether explicit states are collapsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collapse {
    /// Per-component dictionaries of the values met; states as packed indices.
    PerComponent,
    /// Raw state vectors.
    Off,
}

/// Per-component dictionaries (one per byte of the state vector).
pub struct Dictionaries {
    /// `code[c][v]` = index + 1 of value `v` in component `c` (0 = not seen).
    code: Vec<[u16; 256]>,
    /// `values[c]` = the values of component `c`, by index.
    values: Vec<Vec<u8>>,
    /// Field width (bits) of each component.
    widths: Vec<u32>,
    total_bits: u64,
    scratch: std::cell::RefCell<Vec<u64>>,
}

impl Dictionaries {
    pub fn new(components: usize) -> Self {
        Dictionaries {
            code: vec![[0; 256]; components],
            values: vec![Vec::new(); components],
            widths: vec![0; components],
            total_bits: 0,
            scratch: Default::default(),
        }
    }

    /// Adds the values of `state`; returns `Widened::Yes` when a field width grew (every
    /// encoded state must then be re-encoded).
    pub fn learn(&mut self, state: &[u8]) -> Widened {
        let mut widened = Widened::No;
        for (c, &v) in state.iter().enumerate() {
            if self.code[c][v as usize] == 0 {
                self.values[c].push(v);
                let n = self.values[c].len();
                self.code[c][v as usize] = n as u16;
                let w = bits_for(n as u64 - 1);
                if w > self.widths[c] {
                    self.total_bits += (w - self.widths[c]) as u64;
                    self.widths[c] = w;
                    widened = Widened::Yes;
                }
            }
        }
        widened
    }

    /// Bytes of an encoded state (at least one).
    pub fn encoded_len(&self) -> usize {
        (self.total_bits.div_ceil(8) as usize).max(1)
    }

    /// Encodes `state` into `out` (`encoded_len` bytes); `Encoded::Unknown` when a value was
    /// never learnt (then no stored state equals it).
    pub fn encode(&self, state: &[u8], out: &mut Vec<u8>) -> Encoded {
        let n = self.encoded_len();
        let mut words = self.scratch.borrow_mut();
        words.clear();
        words.resize(n.div_ceil(8) + 1, 0);
        let mut off = 0u64;
        for (c, &v) in state.iter().enumerate() {
            let code = self.code[c][v as usize];
            if code == 0 {
                return Encoded::Unknown;
            }
            let w = self.widths[c];
            set_bits(&mut words, off, w, code as u64 - 1);
            off += w as u64;
        }
        out.clear();
        out.extend((0..n).map(|i| (words[i / 8] >> (8 * (i % 8))) as u8));
        Encoded::Known
    }

    /// Decodes an encoded state into `out`.
    pub fn decode(&self, enc: &[u8], out: &mut Vec<u8>) {
        let mut words = self.scratch.borrow_mut();
        words.clear();
        words.resize(enc.len().div_ceil(8) + 1, 0);
        for (i, b) in enc.iter().enumerate() {
            words[i / 8] |= (*b as u64) << (8 * (i % 8));
        }
        out.clear();
        let mut off = 0u64;
        for (c, &w) in self.widths.iter().enumerate() {
            let ix = get_bits(&words, off, w) as usize;
            out.push(self.values[c][ix]);
            off += w as u64;
        }
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.code.len() * 512 + self.values.iter().map(|v| v.capacity()).sum::<usize>()) as u64
            + self.widths.len() as u64 * 4
    }
}

/// Whether learning values widened a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Widened {
    Yes,
    No,
}

/// Whether a state could be encoded with the current dictionaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoded {
    Known,
    Unknown,
}

/// The explicit states, numbered densely in insertion order.
pub struct ExplicitStates {
    dict: Option<Dictionaries>,
    recs: RecordVec,
    buf: Vec<u8>,
    cmp: std::cell::RefCell<Vec<u8>>,
    widenings: u64,
}

impl ExplicitStates {
    pub fn new(width: usize, collapse: Collapse) -> Self {
        let dict = match collapse {
            Collapse::PerComponent => Some(Dictionaries::new(width)),
            Collapse::Off => None,
        };
        let rw = dict.as_ref().map_or(width.max(1), |d| d.encoded_len());
        ExplicitStates {
            dict,
            recs: RecordVec::new(rw),
            buf: Vec::new(),
            cmp: Default::default(),
            widenings: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// How many times the stored states were re-encoded with wider fields.
    pub fn widenings(&self) -> u64 {
        self.widenings
    }

    pub fn collapse(&self) -> Collapse {
        match self.dict {
            Some(_) => Collapse::PerComponent,
            None => Collapse::Off,
        }
    }

    /// Appends a state, returning its explicit index.
    pub fn push(&mut self, state: &[u8]) -> Result<u64, StoreError> {
        let Some(dict) = self.dict.as_mut() else {
            return self.recs.push(state);
        };
        let old_widths = dict.widths.clone();
        if dict.learn(state) == Widened::Yes {
            self.reencode(&old_widths)?;
        }
        let dict = self.dict.as_ref().expect("collapsing");
        let mut enc = std::mem::take(&mut self.buf);
        dict.encode(state, &mut enc);
        let r = self.recs.push(&enc);
        self.buf = enc;
        r
    }

    /// Re-encodes every stored state, written with `old_widths`, under the current layout.
    /// Dictionary indices never change (values are only appended), only field widths.
    fn reencode(&mut self, old_widths: &[u32]) -> Result<(), StoreError> {
        let dict = self.dict.as_ref().expect("collapsing");
        let old = std::mem::replace(&mut self.recs, RecordVec::new(dict.encoded_len()));
        let mut enc = vec![0u8; old.width()];
        let (mut raw, mut out) = (Vec::new(), Vec::new());
        for i in 0..old.len() {
            old.get(i, &mut enc)?;
            decode_fields(old_widths, &dict.values, &enc, &mut raw);
            dict.encode(&raw, &mut out);
            self.recs.push(&out)?;
        }
        self.widenings += 1;
        Ok(())
    }

    /// Writes explicit state `i` into `out`.
    pub fn get(&self, i: u64, out: &mut Vec<u8>) -> Result<(), StoreError> {
        let mut enc = [0u8; 256];
        let w = self.recs.width();
        if w <= enc.len() {
            self.recs.get(i, &mut enc[..w])?;
            self.finish_get(&enc[..w], out);
        } else {
            let mut enc = vec![0u8; w];
            self.recs.get(i, &mut enc)?;
            self.finish_get(&enc, out);
        }
        Ok(())
    }

    fn finish_get(&self, enc: &[u8], out: &mut Vec<u8>) {
        match &self.dict {
            Some(d) => d.decode(enc, out),
            None => {
                out.clear();
                out.extend_from_slice(enc);
            }
        }
    }

    /// Whether explicit state `i` equals `state`, without decoding it: with collapsing the
    /// candidate is encoded (failing fast on a value never met) and the codes compared.
    pub fn equals(&self, i: u64, state: &[u8]) -> Result<Equal, StoreError> {
        let w = self.recs.width();
        let mut stored = [0u8; 256];
        let mut big;
        let stored: &mut [u8] = if w <= stored.len() {
            &mut stored[..w]
        } else {
            big = vec![0u8; w];
            &mut big
        };
        self.recs.get(i, stored)?;
        let same = match &self.dict {
            Some(d) => {
                let mut enc = self.cmp.borrow_mut();
                d.encode(state, &mut enc) == Encoded::Known && enc[..] == stored[..]
            }
            None => stored[..] == *state,
        };
        Ok(if same { Equal::Yes } else { Equal::No })
    }

    pub fn record_bytes(&self) -> u64 {
        self.recs.ram_bytes()
    }

    pub fn dict_bytes(&self) -> u64 {
        self.dict.as_ref().map_or(0, |d| d.ram_bytes())
    }

    pub fn disk_bytes(&self) -> u64 {
        self.recs.disk_bytes()
    }

    /// Bytes of one stored explicit state.
    pub fn record_width(&self) -> usize {
        self.recs.width()
    }
}

/// The result of a state comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Equal {
    Yes,
    No,
}

fn decode_fields(widths: &[u32], values: &[Vec<u8>], enc: &[u8], out: &mut Vec<u8>) {
    let mut words = vec![0u64; enc.len().div_ceil(8) + 1];
    for (i, b) in enc.iter().enumerate() {
        words[i / 8] |= (*b as u64) << (8 * (i % 8));
    }
    out.clear();
    let mut off = 0u64;
    for (c, &w) in widths.iter().enumerate() {
        out.push(values[c][get_bits(&words, off, w) as usize]);
        off += w as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionaries_widen_and_reencode_without_wrapping() {
        // Component 0 takes every byte value (widens 1 → 8 bits), component 1 two values,
        // component 2 is constant (0 bits).
        for collapse in [Collapse::PerComponent, Collapse::Off] {
            let mut ex = ExplicitStates::new(3, collapse);
            let states: Vec<[u8; 3]> = (0..=255u8).map(|v| [v, v % 2, 9]).collect();
            for (i, s) in states.iter().enumerate() {
                assert_eq!(ex.push(s).unwrap(), i as u64);
            }
            let mut out = Vec::new();
            for (i, s) in states.iter().enumerate() {
                ex.get(i as u64, &mut out).unwrap();
                assert_eq!(&out[..], &s[..]);
                assert_eq!(ex.equals(i as u64, s).unwrap(), Equal::Yes);
                assert_eq!(
                    ex.equals(i as u64, &[s[0], 1 - s[1], 9]).unwrap(),
                    Equal::No
                );
                // A value never met: unknown to the dictionary, unequal without decoding.
                assert_eq!(ex.equals(i as u64, &[s[0], s[1], 8]).unwrap(), Equal::No);
            }
            if collapse == Collapse::PerComponent {
                // 8 bits + 1 bit + 0 bits: two bytes per state; widened at 2,3,5,9,...,129
                // values of component 0 and at the second value of component 1.
                assert_eq!(ex.record_width(), 2);
                assert_eq!(ex.widenings(), 8);
            } else {
                assert_eq!(ex.record_width(), 3);
            }
        }
    }

    #[test]
    fn encode_reports_unknown_values() {
        let mut d = Dictionaries::new(2);
        assert_eq!(d.learn(&[1, 2]), Widened::No);
        assert_eq!(d.encoded_len(), 1);
        let mut out = Vec::new();
        assert_eq!(d.encode(&[1, 2], &mut out), Encoded::Known);
        assert_eq!(d.encode(&[1, 3], &mut out), Encoded::Unknown);
        assert_eq!(d.learn(&[1, 3]), Widened::Yes);
        d.encode(&[1, 3], &mut out);
        let mut back = Vec::new();
        d.decode(&out, &mut back);
        assert_eq!(back, vec![1, 3]);
    }
}
