//! Explicit states of the Δ store, optionally *collapsed*.
//!
//! Collapsing (state collapsing, as in the Δ-markings paper): each component of the state
//! vector gets a dictionary of the values actually met in explicit states, and an explicit
//! state is stored as the concatenation of its components' dictionary indices, each in
//! a field of 0 bits while the component has a single value, then 1, 2, 4 or 8 bits (the
//! next power of two of `bits_for(dictionary size − 1)`, so a field widens at most four
//! times). The component is one byte of the state vector: for P/T nets with 8-bit counters that is one
//! place; wider counters split into bytes, whose high bytes are usually constant (0 bits).
//!
//! Field widths grow as dictionaries grow: when a dictionary outgrows its width, a new
//! *epoch* starts with the wider layout; older states keep their layout (indices never
//! change) and are re-encoded into one epoch only when more than [`MAX_EPOCHS`] pile up.
//! Nothing ever wraps. Without collapsing, explicit states are stored as raw vectors.

use super::bits::bits_for;
use crate::error::StoreError;
use crate::storage::Account;
use crate::store::records::{Accounting, Disk, Layout, Records, RecordsMark};

/// Whether explicit states are collapsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
}

impl Dictionaries {
    pub fn new(components: usize) -> Self {
        Dictionaries {
            code: vec![[0; 256]; components],
            values: vec![Vec::new(); components],
            widths: vec![0; components],
            total_bits: 0,
        }
    }

    /// Whether every value of `state` is already in its dictionary (no learning needed).
    #[inline]
    pub fn knows(&self, state: &[u8]) -> bool {
        state
            .iter()
            .zip(&self.code)
            .all(|(&v, code)| code[v as usize] != 0)
    }

    /// Adds the values of `state`; returns `Widened::Yes` when a field width grew (every
    /// encoded state must then be re-encoded). Widths start at 1 bit for a component whose
    /// dictionary has two values and then double (1, 2, 4, 8), so a component widens at
    /// most four times and most nets never re-encode after their first levels.
    pub fn learn(&mut self, state: &[u8]) -> Widened {
        let mut widened = Widened::No;
        for (c, &v) in state.iter().enumerate() {
            if self.code[c][v as usize] == 0 {
                self.values[c].push(v);
                let n = self.values[c].len();
                self.code[c][v as usize] = n as u16;
                let need = bits_for(n as u64 - 1);
                if need > self.widths[c] {
                    let w = need.next_power_of_two();
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
        encoded_len_of(&self.widths)
    }

    /// Encodes `state` into `out` (`encoded_len` bytes); `Encoded::Unknown` when a value was
    /// never learnt (then no stored state equals it).
    pub fn encode(&self, state: &[u8], out: &mut Vec<u8>) -> Encoded {
        self.encode_with(&self.widths, state, out)
    }

    /// Encodes `state` with the field widths of an older layout.
    pub fn encode_with(&self, widths: &[u32], state: &[u8], out: &mut Vec<u8>) -> Encoded {
        out.clear();
        let len = encoded_len_of(widths);
        let mut acc = 0u64;
        let mut n = 0u32;
        for ((&v, code), &w) in state.iter().zip(&self.code).zip(widths) {
            let x = code[v as usize];
            if x == 0 || (x - 1) as u64 >> w != 0 {
                // Never met, or met after this layout was current: no state stored with
                // this layout has that value.
                return Encoded::Unknown;
            }
            acc |= ((x - 1) as u64) << n;
            n += w;
            if n >= 32 {
                out.extend_from_slice(&(acc as u32).to_le_bytes());
                acc >>= 32;
                n -= 32;
            }
        }
        while out.len() < len {
            out.push(acc as u8);
            acc >>= 8;
        }
        Encoded::Known
    }

    /// Decodes an encoded state into `out`.
    pub fn decode(&self, enc: &[u8], out: &mut Vec<u8>) {
        decode_fields(&self.widths, &self.values, enc, out)
    }

    /// Rebuilds dictionaries from their values and widths (a checkpoint's).
    fn from_parts(values: Vec<Vec<u8>>, widths: Vec<u32>) -> Result<Self, StoreError> {
        let mut code = vec![[0u16; 256]; values.len()];
        for (c, vals) in values.iter().enumerate() {
            for (i, &v) in vals.iter().enumerate() {
                if code[c][v as usize] != 0 {
                    return Err(StoreError::Invalid {
                        store: "delta",
                        message: format!("dictionary {c} lists value {v} twice"),
                    });
                }
                code[c][v as usize] = i as u16 + 1;
            }
        }
        if widths.len() != values.len() {
            return Err(StoreError::Invalid {
                store: "delta",
                message: "dictionary widths and values differ in number".into(),
            });
        }
        let total_bits = widths.iter().map(|&w| w as u64).sum();
        Ok(Dictionaries {
            code,
            values,
            widths,
            total_bits,
        })
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.code.len() * 512 + self.values.iter().map(|v| v.capacity()).sum::<usize>()) as u64
            + self.widths.len() as u64 * 4
    }
}

fn encoded_len_of(widths: &[u32]) -> usize {
    (widths.iter().map(|&w| w as u64).sum::<u64>().div_ceil(8) as usize).max(1)
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

/// States stored under one layout (field widths), from explicit index `first` on.
struct Epoch {
    first: u64,
    widths: Vec<u32>,
    recs: Records,
}

/// Sizes of an epoch's vector: 4 KiB blocks, an 8 KiB hot window and a 64 KiB cache per
/// epoch (up to 17 epochs are alive, so at most about 1.2 MiB in all): explicit states are
/// 1/kδ of the states or fewer, and a reconstitution reads one of them, mostly a recent one
/// (in BFS its explicit ancestor is less than kδ levels up).
const LAYOUT: Layout = Layout {
    block_bytes: 4 << 10,
    hot_blocks: 2,
    cache_bytes: 64 << 10,
    zstd_level: crate::storage::segment::ZSTD_LEVEL,
    filter: crate::storage::filter::Filter::None,
    codec: crate::storage::segment::Codec::Zstd,
};

/// A checkpoint of the explicit states.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ExplicitMark {
    collapse: Collapse,
    /// Dictionary values per component (collapsing only).
    values: Vec<Vec<u8>>,
    widths: Vec<u32>,
    epochs: Vec<(u64, Vec<u32>, RecordsMark)>,
    next_epoch: u64,
    widenings: u64,
    reencodings: u64,
}

/// Epochs kept before all states are re-encoded under the current layout.
const MAX_EPOCHS: usize = 16;

/// The explicit states, numbered densely in insertion order.
///
/// With collapsing, states are kept in *epochs*: a widening starts a new epoch (new states
/// use the wider layout; older ones keep theirs and stay decodable, as dictionary indices
/// never change). When there are more than [`MAX_EPOCHS`], every state is re-encoded under
/// the current layout into one epoch. Without collapsing there is one epoch of raw vectors.
pub struct ExplicitStates {
    disk: Disk,
    /// The budget account of all epochs together (each epoch's vector has a private one).
    account: Account,
    dict: Option<Dictionaries>,
    epochs: Vec<Epoch>,
    /// Number of the next epoch's vector (`delta.explicit.N`).
    next_epoch: u64,
    width: usize,
    buf: Vec<u8>,
    /// Scratch of [`ExplicitStates::equals`]: the candidate, encoded.
    cmp: Vec<u8>,
    widenings: u64,
    reencodings: u64,
}

impl ExplicitStates {
    pub fn new(disk: &Disk, width: usize, collapse: Collapse) -> Result<Self, StoreError> {
        let dict = match collapse {
            Collapse::PerComponent => Some(Dictionaries::new(width)),
            Collapse::Off => None,
        };
        let (rw, widths) = match &dict {
            Some(d) => (d.encoded_len(), d.widths.clone()),
            None => (width.max(1), Vec::new()),
        };
        let mut ex = ExplicitStates {
            disk: disk.clone(),
            account: disk.shared_account("delta.explicit"),
            dict,
            epochs: Vec::new(),
            next_epoch: 0,
            width,
            buf: Vec::new(),
            cmp: Default::default(),
            widenings: 0,
            reencodings: 0,
        };
        let recs = ex.new_records(rw)?;
        ex.epochs.push(Epoch {
            first: 0,
            widths,
            recs,
        });
        Ok(ex)
    }

    fn new_records(&mut self, width: usize) -> Result<Records, StoreError> {
        let name = format!("delta.explicit.{}", self.next_epoch);
        self.next_epoch += 1;
        Records::create(&self.disk, &name, width, LAYOUT, Accounting::Private)
    }

    /// Sums the epochs' figures into the shared account.
    fn publish(&self) {
        let (mut ram, mut disk, mut raw) = (0, 0, 0);
        for e in &self.epochs {
            let (a, b, c) = e.recs.figures();
            ram += a;
            disk += b;
            raw += c;
        }
        self.account.set(ram, disk, raw);
    }

    /// Makes the explicit states durable and says how to reopen them.
    pub fn checkpoint(&mut self) -> Result<ExplicitMark, StoreError> {
        let mut epochs = Vec::with_capacity(self.epochs.len());
        for e in &mut self.epochs {
            epochs.push((e.first, e.widths.clone(), e.recs.checkpoint()?));
        }
        self.publish();
        let (values, widths) = match &self.dict {
            Some(d) => (d.values.clone(), d.widths.clone()),
            None => (Vec::new(), Vec::new()),
        };
        Ok(ExplicitMark {
            collapse: self.collapse(),
            values,
            widths,
            epochs,
            next_epoch: self.next_epoch,
            widenings: self.widenings,
            reencodings: self.reencodings,
        })
    }

    /// Reopens the explicit states of a checkpoint.
    pub fn open(disk: &Disk, width: usize, m: &ExplicitMark) -> Result<Self, StoreError> {
        let dict = match m.collapse {
            Collapse::PerComponent => {
                if m.values.len() != width {
                    return Err(StoreError::Invalid {
                        store: "delta",
                        message: format!("{} dictionaries for {width}-byte states", m.values.len()),
                    });
                }
                Some(Dictionaries::from_parts(
                    m.values.clone(),
                    m.widths.clone(),
                )?)
            }
            Collapse::Off => None,
        };
        let mut epochs = Vec::with_capacity(m.epochs.len());
        for (first, widths, mark) in &m.epochs {
            epochs.push(Epoch {
                first: *first,
                widths: widths.clone(),
                recs: Records::open(disk, mark, LAYOUT, Accounting::Private)?,
            });
        }
        if epochs.is_empty() {
            return Err(StoreError::Invalid {
                store: "delta",
                message: "a checkpoint of explicit states without epochs".into(),
            });
        }
        let ex = ExplicitStates {
            disk: disk.clone(),
            account: disk.shared_account("delta.explicit"),
            dict,
            epochs,
            next_epoch: m.next_epoch,
            width,
            buf: Vec::new(),
            cmp: Default::default(),
            widenings: m.widenings,
            reencodings: m.reencodings,
        };
        ex.publish();
        Ok(ex)
    }

    /// Files of the epochs at their marks.
    pub fn files(m: &ExplicitMark) -> impl Iterator<Item = crate::storage::FileMark> + '_ {
        m.epochs.iter().map(|(_, _, r)| r.file())
    }

    pub fn len(&self) -> u64 {
        let e = self.epochs.last().expect("one epoch");
        e.first + e.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many times a dictionary outgrew its field width.
    pub fn widenings(&self) -> u64 {
        self.widenings
    }

    /// How many times all states were re-encoded into one epoch.
    pub fn reencodings(&self) -> u64 {
        self.reencodings
    }

    pub fn collapse(&self) -> Collapse {
        match self.dict {
            Some(_) => Collapse::PerComponent,
            None => Collapse::Off,
        }
    }

    /// Appends a state, returning its explicit index.
    pub fn push(&mut self, state: &[u8]) -> Result<u64, StoreError> {
        let id = self.len();
        let Some(dict) = self.dict.as_mut() else {
            self.epochs[0].recs.push(state)?;
            return Ok(id);
        };
        if !dict.knows(state) && dict.learn(state) == Widened::Yes {
            let (widths, len) = (dict.widths.clone(), dict.encoded_len());
            self.widenings += 1;
            let recs = self.new_records(len)?;
            self.epochs.push(Epoch {
                first: id,
                widths,
                recs,
            });
            if self.epochs.len() > MAX_EPOCHS {
                self.reencode()?;
            }
        }
        let dict = self.dict.as_ref().expect("collapsing");
        let mut enc = std::mem::take(&mut self.buf);
        dict.encode(state, &mut enc);
        let r = self.epochs.last_mut().expect("one epoch").recs.push(&enc);
        self.buf = enc;
        if id.is_multiple_of(1024) {
            self.publish();
        }
        r.map(|_| id)
    }

    /// Re-encodes every state under the current layout into a single epoch.
    fn reencode(&mut self) -> Result<(), StoreError> {
        let len = self.dict.as_ref().expect("collapsing").encoded_len();
        let mut one = self.new_records(len)?;
        let dict = self.dict.as_ref().expect("collapsing");
        let (mut raw, mut out) = (Vec::new(), Vec::new());
        for e in &self.epochs {
            let mut enc = vec![0u8; e.recs.width()];
            for i in 0..e.recs.len() {
                e.recs.get(i, &mut enc)?;
                decode_fields(&e.widths, &dict.values, &enc, &mut raw);
                dict.encode(&raw, &mut out);
                one.push(&out)?;
            }
        }
        let old = std::mem::replace(
            &mut self.epochs,
            vec![Epoch {
                first: 0,
                widths: dict.widths.clone(),
                recs: one,
            }],
        );
        for e in old {
            e.recs.give_up();
        }
        self.publish();
        self.reencodings += 1;
        Ok(())
    }

    /// The epoch holding explicit index `i` and the index within it.
    #[inline]
    fn locate(&self, i: u64) -> (&Epoch, u64) {
        let k = match self.epochs.len() {
            1 => 0,
            _ => self.epochs.partition_point(|e| e.first <= i) - 1,
        };
        let e = &self.epochs[k];
        (e, i - e.first)
    }

    /// Copies the stored record of `i` into a stack buffer and runs `f` on it.
    #[inline]
    fn with_record<R>(&self, i: u64, f: impl FnOnce(&Epoch, &[u8]) -> R) -> Result<R, StoreError> {
        let (e, j) = self.locate(i);
        let w = e.recs.width();
        let mut small = [0u8; 256];
        if w <= small.len() {
            e.recs.get(j, &mut small[..w])?;
            Ok(f(e, &small[..w]))
        } else {
            let mut big = vec![0u8; w];
            e.recs.get(j, &mut big)?;
            Ok(f(e, &big))
        }
    }

    /// Writes explicit state `i` into `out`.
    pub fn get(&self, i: u64, out: &mut Vec<u8>) -> Result<(), StoreError> {
        self.with_record(i, |e, enc| match &self.dict {
            Some(d) => decode_fields(&e.widths, &d.values, enc, out),
            None => {
                out.clear();
                out.extend_from_slice(enc);
            }
        })
    }

    /// Whether explicit state `i` equals `state`, without decoding it: with collapsing the
    /// candidate is encoded in the record's layout (failing fast on a value never met) and
    /// the codes compared.
    pub fn equals(&mut self, i: u64, state: &[u8]) -> Result<Equal, StoreError> {
        if state.len() != self.width {
            return Ok(Equal::No);
        }
        let mut enc = std::mem::take(&mut self.cmp);
        let same = self.with_record(i, |e, stored| match &self.dict {
            Some(d) => {
                d.encode_with(&e.widths, state, &mut enc) == Encoded::Known && enc[..] == *stored
            }
            None => stored == state,
        });
        self.cmp = enc;
        Ok(if same? { Equal::Yes } else { Equal::No })
    }

    /// RAM of the epochs' vectors (hot windows, caches, block indexes).
    pub fn record_bytes(&self) -> u64 {
        self.epochs.iter().map(|e| e.recs.ram_bytes()).sum()
    }

    pub fn dict_bytes(&self) -> u64 {
        self.dict.as_ref().map_or(0, |d| d.ram_bytes())
            + self
                .epochs
                .iter()
                .map(|e| e.widths.capacity() as u64 * 4)
                .sum::<u64>()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.epochs.iter().map(|e| e.recs.disk_bytes()).sum()
    }

    /// Bytes of one explicit state stored under the current layout.
    pub fn record_width(&self) -> usize {
        self.epochs.last().expect("one epoch").recs.width()
    }
}

/// The result of a state comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Equal {
    Yes,
    No,
}

fn decode_fields(widths: &[u32], values: &[Vec<u8>], enc: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (mut acc, mut n, mut next) = (0u64, 0u32, 0usize);
    for (vals, &w) in values.iter().zip(widths) {
        while n < w {
            let b = enc.get(next).copied().unwrap_or(0);
            acc |= (b as u64) << n;
            n += 8;
            next += 1;
        }
        out.push(vals[(acc & ((1u64 << w) - 1)) as usize]);
        acc >>= w;
        n -= w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk() -> (crate::storage::Storage, Disk) {
        let st = crate::storage::Storage::new(&crate::storage::StorageConfig::default()).unwrap();
        let d = Disk::new(&st);
        (st, d)
    }

    #[test]
    fn dictionaries_widen_and_reencode_without_wrapping() {
        let (_st, disk) = disk();
        // Component 0 takes every byte value (widens 1 → 8 bits), component 1 two values,
        // component 2 is constant (0 bits).
        for collapse in [Collapse::PerComponent, Collapse::Off] {
            let mut ex = ExplicitStates::new(&disk, 3, collapse).unwrap();
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
                // 8 bits + 1 bit + 0 bits: two bytes per state; component 0 widened to
                // 1, 2, 4, 8 bits at its 2nd, 3rd, 5th and 17th values (component 1 with
                // the first of them); four epochs, no re-encoding.
                assert_eq!(ex.record_width(), 2);
                assert_eq!(ex.widenings(), 4);
                assert_eq!(ex.reencodings(), 0);
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

    #[test]
    fn many_widenings_merge_epochs_and_stay_decodable() {
        // 40 components each gaining a second value at a different time: 40 widenings,
        // more than MAX_EPOCHS, so states are re-encoded into one epoch at least twice.
        let n = 40;
        let (_st, disk) = disk();
        let mut ex = ExplicitStates::new(&disk, n, Collapse::PerComponent).unwrap();
        let mut states = Vec::new();
        for i in 0..=n {
            let s: Vec<u8> = (0..n).map(|c| u8::from(c < i)).collect();
            states.push(s.clone());
            ex.push(&s).unwrap();
            ex.push(&s).unwrap();
        }
        assert_eq!(ex.widenings(), n as u64);
        assert!(ex.reencodings() >= 2, "{}", ex.reencodings());
        let mut out = Vec::new();
        for (i, s) in states.iter().enumerate() {
            for j in [2 * i as u64, 2 * i as u64 + 1] {
                ex.get(j, &mut out).unwrap();
                assert_eq!(&out, s);
                assert_eq!(ex.equals(j, s).unwrap(), Equal::Yes);
            }
        }
        // A state with a value met only after an old layout: unequal, not mis-encoded.
        assert_eq!(ex.equals(0, &states[n]).unwrap(), Equal::No);
    }
}
