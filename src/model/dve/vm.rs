//! The expression machine: guards, effects and channel values are compiled once into a flat
//! array of [`Op`]s (one pool per model; a piece of code is a [`Code`] range) and run on a
//! state vector with a small value stack that lives in the model's scratch space, so
//! evaluating allocates nothing.
//!
//! Values are `i32` with wrapping arithmetic, as DiVinE's 32-bit `all_values_t`; shifts take
//! their amount modulo 32 (what the C `<<`/`>>` of DiVinE's interpreter does on x86), `>>` is
//! arithmetic. A variable is read as its type: `byte` unsigned 8-bit, `int` signed 16-bit
//! little-endian. Evaluation errors ([`Fault`]) are DiVinE's: division or remainder by zero,
//! an array index out of bounds, and a value out of the range of the variable it is assigned to
//! (nothing is ever truncated silently, except the typed-channel conversions DiVinE does).

/// A range of the op pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Code {
    pub start: u32,
    pub end: u32,
}

impl Code {
    pub fn is_empty(self) -> bool {
        self.start == self.end
    }
}

/// Why an evaluation failed. The model maps every fault to DiVinE's error state; the kind is
/// kept for messages and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    DivByZero,
    Index,
    Range,
    /// A malformed op sequence (a compiler bug); reported instead of panicking.
    Internal,
}

/// One instruction. Offsets are byte offsets in the state vector; `len` is an array length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Const(i32),
    LdU8(u32),
    LdI16(u32),
    /// Pops an index; pushes element `index` of the array at `off`.
    LdU8Ix {
        off: u32,
        len: u32,
    },
    LdI16Ix {
        off: u32,
        len: u32,
    },
    /// Pops an index; pushes element `index` of the constant array at `base` in the pool.
    LdConstIx {
        base: u32,
        len: u32,
    },
    /// Pushes whether the process whose state is stored at `off` is in state `val`.
    InState {
        off: u32,
        wide: bool,
        val: u16,
    },
    Neg,
    BitNot,
    Not,
    /// Turns the top into 0 or 1.
    Bool,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    BitAnd,
    BitOr,
    BitXor,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// The binary operators with a constant right operand (the common `x + 1`, `i < 3`): one
    /// dispatch instead of two. `DivK`/`ModK` are only made with a non-zero constant.
    AddK(i32),
    SubK(i32),
    MulK(i32),
    DivK(i32),
    ModK(i32),
    EqK(i32),
    NeK(i32),
    LtK(i32),
    LeK(i32),
    GtK(i32),
    GeK(i32),
    /// Short circuit: if the top is 0, replace it by `result` and jump to `to`; else pop it.
    JumpZ {
        to: u32,
        result: i32,
    },
    /// Short circuit: if the top is not 0, replace it by `result` and jump to `to`; else pop.
    JumpNz {
        to: u32,
        result: i32,
    },
    /// Pops a value and stores it (range-checked) into the variable at `off`.
    StU8(u32),
    StI16(u32),
    /// Pops an index, then a value; stores the value into element `index`.
    StU8Ix {
        off: u32,
        len: u32,
    },
    StI16Ix {
        off: u32,
        len: u32,
    },
    /// Typed-channel conversions: the top becomes `(uint8_t)v` / `(int16_t)v`.
    TruncU8,
    TruncI16,
}

impl Op {
    /// Net change of the stack height.
    pub fn stack_effect(self) -> i32 {
        match self {
            Op::Const(_) | Op::LdU8(_) | Op::LdI16(_) | Op::InState { .. } => 1,
            Op::LdU8Ix { .. } | Op::LdI16Ix { .. } | Op::LdConstIx { .. } => 0,
            Op::Neg | Op::BitNot | Op::Not | Op::Bool | Op::TruncU8 | Op::TruncI16 => 0,
            Op::AddK(_)
            | Op::SubK(_)
            | Op::MulK(_)
            | Op::DivK(_)
            | Op::ModK(_)
            | Op::EqK(_)
            | Op::NeK(_)
            | Op::LtK(_)
            | Op::LeK(_)
            | Op::GtK(_)
            | Op::GeK(_) => 0,
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Mod
            | Op::Shl
            | Op::Shr
            | Op::BitAnd
            | Op::BitOr
            | Op::BitXor
            | Op::Eq
            | Op::Ne
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge => -1,
            // The fall-through path pops; the jump keeps the value. Both are followed by code
            // that ends one value higher than here, so the linear height is the fall-through.
            Op::JumpZ { .. } | Op::JumpNz { .. } => -1,
            Op::StU8(_) | Op::StI16(_) => -1,
            Op::StU8Ix { .. } | Op::StI16Ix { .. } => -2,
        }
    }
}

/// The largest stack height `code` reaches when it starts with `base` values on the stack.
pub fn max_height(code: &[Op], base: i32) -> i32 {
    let mut h = base;
    let mut max = h;
    for op in code {
        // A jump's target keeps the value the fall-through pops: account for it before.
        h += op.stack_effect();
        max = max.max(h);
    }
    max
}

/// A state vector the machine reads, and writes when it runs effects.
pub trait Memory {
    fn bytes(&self) -> &[u8];
    /// The writable bytes, or `None` for a read-only state (guards).
    fn bytes_mut(&mut self) -> Option<&mut [u8]>;
}

impl Memory for &[u8] {
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self
    }
    #[inline(always)]
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        None
    }
}

impl Memory for &mut [u8] {
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self
    }
    #[inline(always)]
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(self)
    }
}

#[inline(always)]
fn rd_u8(m: &[u8], off: usize) -> Result<i32, Fault> {
    m.get(off).map(|&b| b as i32).ok_or(Fault::Internal)
}

#[inline(always)]
fn rd_i16(m: &[u8], off: usize) -> Result<i32, Fault> {
    match m.get(off..off + 2) {
        Some(b) => Ok(i16::from_le_bytes([b[0], b[1]]) as i32),
        None => Err(Fault::Internal),
    }
}

#[inline(always)]
fn wr_u8(m: &mut [u8], off: usize, v: i32) -> Result<(), Fault> {
    if !(0..=255).contains(&v) {
        return Err(Fault::Range);
    }
    *m.get_mut(off).ok_or(Fault::Internal)? = v as u8;
    Ok(())
}

#[inline(always)]
fn wr_i16(m: &mut [u8], off: usize, v: i32) -> Result<(), Fault> {
    if !(i16::MIN as i32..=i16::MAX as i32).contains(&v) {
        return Err(Fault::Range);
    }
    m.get_mut(off..off + 2)
        .ok_or(Fault::Internal)?
        .copy_from_slice(&(v as i16).to_le_bytes());
    Ok(())
}

#[inline(always)]
fn index(i: i32, len: u32) -> Result<usize, Fault> {
    if i < 0 || i as u32 >= len {
        Err(Fault::Index)
    } else {
        Ok(i as usize)
    }
}

/// Runs `code` (a range of `ops`) on `mem`. `stack` must hold the largest height the compiler
/// computed; `pre` values are pushed first (the value a store consumes when a channel delivers
/// it). Returns the top of the stack at the end (0 when it is empty).
#[inline]
pub fn run<M: Memory>(
    ops: &[Op],
    code: Code,
    pool: &[i32],
    mut mem: M,
    stack: &mut [i32],
    pre: Option<i32>,
) -> Result<i32, Fault> {
    let mut sp = 0usize;
    if let Some(v) = pre {
        *stack.get_mut(0).ok_or(Fault::Internal)? = v;
        sp = 1;
    }
    let (start, end) = (code.start as usize, code.end as usize);
    let mut pc = start;
    macro_rules! push {
        ($v:expr) => {{
            let v = $v;
            *stack.get_mut(sp).ok_or(Fault::Internal)? = v;
            sp += 1;
        }};
    }
    macro_rules! pop {
        () => {{
            if sp == 0 {
                return Err(Fault::Internal);
            }
            sp -= 1;
            stack[sp]
        }};
    }
    macro_rules! top {
        () => {{
            if sp == 0 {
                return Err(Fault::Internal);
            }
            &mut stack[sp - 1]
        }};
    }
    macro_rules! un {
        ($f:expr) => {{
            let t = top!();
            *t = $f(*t);
        }};
    }
    macro_rules! bin {
        ($f:expr) => {{
            let b = pop!();
            let a = top!();
            *a = $f(*a, b);
        }};
    }
    while pc < end {
        let op = *ops.get(pc).ok_or(Fault::Internal)?;
        pc += 1;
        match op {
            Op::Const(v) => push!(v),
            Op::LdU8(off) => push!(rd_u8(mem.bytes(), off as usize)?),
            Op::LdI16(off) => push!(rd_i16(mem.bytes(), off as usize)?),
            Op::LdU8Ix { off, len } => {
                let t = top!();
                let i = index(*t, len)?;
                *t = rd_u8(mem.bytes(), off as usize + i)?;
            }
            Op::LdI16Ix { off, len } => {
                let t = top!();
                let i = index(*t, len)?;
                *t = rd_i16(mem.bytes(), off as usize + 2 * i)?;
            }
            Op::LdConstIx { base, len } => {
                let t = top!();
                let i = index(*t, len)?;
                *t = *pool.get(base as usize + i).ok_or(Fault::Internal)?;
            }
            Op::InState { off, wide, val } => {
                let s = if wide {
                    rd_i16(mem.bytes(), off as usize)? as u16
                } else {
                    rd_u8(mem.bytes(), off as usize)? as u16
                };
                push!((s == val) as i32)
            }
            Op::Neg => {
                let t = top!();
                *t = t.wrapping_neg();
            }
            Op::BitNot => {
                let t = top!();
                *t = !*t;
            }
            Op::Not => {
                let t = top!();
                *t = (*t == 0) as i32;
            }
            Op::Bool => {
                let t = top!();
                *t = (*t != 0) as i32;
            }
            Op::Add => bin!(|a: i32, b: i32| a.wrapping_add(b)),
            Op::Sub => bin!(|a: i32, b: i32| a.wrapping_sub(b)),
            Op::Mul => bin!(|a: i32, b: i32| a.wrapping_mul(b)),
            Op::Div => {
                let b = pop!();
                if b == 0 {
                    return Err(Fault::DivByZero);
                }
                let a = top!();
                *a = a.wrapping_div(b);
            }
            Op::Mod => {
                let b = pop!();
                if b == 0 {
                    return Err(Fault::DivByZero);
                }
                let a = top!();
                *a = a.wrapping_rem(b);
            }
            Op::Shl => bin!(|a: i32, b: i32| a.wrapping_shl(b as u32)),
            Op::Shr => bin!(|a: i32, b: i32| a.wrapping_shr(b as u32)),
            Op::BitAnd => bin!(|a: i32, b: i32| a & b),
            Op::BitOr => bin!(|a: i32, b: i32| a | b),
            Op::BitXor => bin!(|a: i32, b: i32| a ^ b),
            Op::Eq => bin!(|a: i32, b: i32| (a == b) as i32),
            Op::Ne => bin!(|a: i32, b: i32| (a != b) as i32),
            Op::Lt => bin!(|a: i32, b: i32| (a < b) as i32),
            Op::Le => bin!(|a: i32, b: i32| (a <= b) as i32),
            Op::Gt => bin!(|a: i32, b: i32| (a > b) as i32),
            Op::Ge => bin!(|a: i32, b: i32| (a >= b) as i32),
            Op::AddK(k) => un!(|a: i32| a.wrapping_add(k)),
            Op::SubK(k) => un!(|a: i32| a.wrapping_sub(k)),
            Op::MulK(k) => un!(|a: i32| a.wrapping_mul(k)),
            Op::DivK(k) | Op::ModK(k) if k == 0 => return Err(Fault::DivByZero),
            Op::DivK(k) => un!(|a: i32| a.wrapping_div(k)),
            Op::ModK(k) => un!(|a: i32| a.wrapping_rem(k)),
            Op::EqK(k) => un!(|a: i32| (a == k) as i32),
            Op::NeK(k) => un!(|a: i32| (a != k) as i32),
            Op::LtK(k) => un!(|a: i32| (a < k) as i32),
            Op::LeK(k) => un!(|a: i32| (a <= k) as i32),
            Op::GtK(k) => un!(|a: i32| (a > k) as i32),
            Op::GeK(k) => un!(|a: i32| (a >= k) as i32),
            Op::JumpZ { to, result } => {
                let t = top!();
                if *t == 0 {
                    *t = result;
                    pc = to as usize;
                } else {
                    sp -= 1;
                }
            }
            Op::JumpNz { to, result } => {
                let t = top!();
                if *t != 0 {
                    *t = result;
                    pc = to as usize;
                } else {
                    sp -= 1;
                }
            }
            Op::StU8(off) => {
                let v = pop!();
                wr_u8(mem.bytes_mut().ok_or(Fault::Internal)?, off as usize, v)?;
            }
            Op::StI16(off) => {
                let v = pop!();
                wr_i16(mem.bytes_mut().ok_or(Fault::Internal)?, off as usize, v)?;
            }
            Op::StU8Ix { off, len } => {
                let i = pop!();
                let v = pop!();
                let i = index(i, len)?;
                wr_u8(mem.bytes_mut().ok_or(Fault::Internal)?, off as usize + i, v)?;
            }
            Op::StI16Ix { off, len } => {
                let i = pop!();
                let v = pop!();
                let i = index(i, len)?;
                wr_i16(
                    mem.bytes_mut().ok_or(Fault::Internal)?,
                    off as usize + 2 * i,
                    v,
                )?;
            }
            Op::TruncU8 => {
                let t = top!();
                *t = *t as u8 as i32;
            }
            Op::TruncI16 => {
                let t = top!();
                *t = *t as i16 as i32;
            }
        }
    }
    Ok(if sp == 0 { 0 } else { stack[sp - 1] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(ops: &[Op], mem: &[u8]) -> Result<i32, Fault> {
        let mut stack = [0i32; 16];
        let code = Code {
            start: 0,
            end: ops.len() as u32,
        };
        run(ops, code, &[7, 8], mem, &mut stack, None)
    }

    #[test]
    fn arithmetic_wraps_and_faults_are_reported() {
        assert_eq!(
            eval(&[Op::Const(i32::MAX), Op::Const(1), Op::Add], &[]),
            Ok(i32::MIN)
        );
        assert_eq!(eval(&[Op::Const(-7), Op::Const(2), Op::Div], &[]), Ok(-3));
        assert_eq!(eval(&[Op::Const(-7), Op::Const(2), Op::Mod], &[]), Ok(-1));
        assert_eq!(
            eval(&[Op::Const(1), Op::Const(0), Op::Mod], &[]),
            Err(Fault::DivByZero)
        );
        assert_eq!(
            eval(&[Op::Const(2), Op::LdConstIx { base: 0, len: 2 }], &[]),
            Err(Fault::Index)
        );
        assert_eq!(
            eval(&[Op::Const(1), Op::LdConstIx { base: 0, len: 2 }], &[]),
            Ok(8)
        );
        assert_eq!(eval(&[Op::LdI16(1)], &[0, 0xfe, 0xff]), Ok(-2));
        assert_eq!(eval(&[Op::Const(300), Op::TruncU8], &[]), Ok(44));
        assert_eq!(
            eval(&[Op::Const(7), Op::DivK(0)], &[]),
            Err(Fault::DivByZero)
        );
        assert_eq!(
            eval(&[Op::Const(i32::MIN), Op::DivK(-1)], &[]),
            Ok(i32::MIN)
        );
        assert_eq!(eval(&[Op::Const(-7), Op::ModK(3)], &[]), Ok(-1));
        assert_eq!(eval(&[Op::LdU8(0), Op::LtK(3)], &[2]), Ok(1));
    }

    #[test]
    fn short_circuit_skips_the_faulting_operand() {
        // 0 && (1 / 0)
        let ops = [
            Op::Const(0),
            Op::JumpZ { to: 6, result: 0 },
            Op::Const(1),
            Op::Const(0),
            Op::Div,
            Op::Bool,
        ];
        assert_eq!(eval(&ops, &[]), Ok(0));
        let ops = [
            Op::Const(5),
            Op::JumpZ { to: 6, result: 0 },
            Op::Const(1),
            Op::Const(0),
            Op::Div,
            Op::Bool,
        ];
        assert_eq!(eval(&ops, &[]), Err(Fault::DivByZero));
    }

    #[test]
    fn stores_check_ranges_and_read_only_memory_refuses() {
        let mut m = [0u8; 4];
        let ops = [Op::Const(256), Op::StU8(0)];
        let code = Code { start: 0, end: 2 };
        let mut st = [0; 4];
        assert_eq!(
            run(&ops, code, &[], &mut m[..], &mut st, None),
            Err(Fault::Range)
        );
        let ops = [
            Op::Const(-300),
            Op::Const(1),
            Op::StI16Ix { off: 0, len: 2 },
        ];
        let code = Code { start: 0, end: 3 };
        assert_eq!(run(&ops, code, &[], &mut m[..], &mut st, None), Ok(0));
        assert_eq!(i16::from_le_bytes([m[2], m[3]]), -300);
        assert_eq!(
            run(&ops, code, &[], &m[..], &mut st, None),
            Err(Fault::Internal)
        );
        assert_eq!(max_height(&ops, 0), 2);
    }
}
