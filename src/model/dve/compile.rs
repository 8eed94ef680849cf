//! From the syntax tree to a [`Program`]: names resolved, the state vector laid out, every
//! guard, effect and channel value compiled into the op pool of [`super::vm`], constants
//! folded, and each transition's read and write sets recorded (for `Model::dependent`).
//!
//! State vector layout (fixed width): global variables in declaration order, then the
//! buffered channels (item count — 1 byte, 2 above a capacity of 255, 4 above 65,535 — then
//! `capacity` items), then per process its control state (1 byte, or 2 when it has 255 states
//! or more) followed by its local variables. `byte` takes one byte, `int` two (little-endian).
//! Constants take no space.

use super::ast::*;
use super::vm::{self, Code, Op};
use super::Diag;
use crate::error::ModelError;
use std::collections::HashMap;

/// Largest array or channel capacity accepted.
pub const MAX_ARRAY: i64 = 65_536;
/// Largest state vector accepted, in bytes.
pub const MAX_STATE_BYTES: usize = 1 << 20;

/// Where a variable lives.
#[derive(Clone, Debug)]
pub enum Slot {
    /// A constant: its value(s), folded into the code that reads it.
    Const(Vec<i32>),
    /// A byte offset in the state vector.
    State(u32),
}

#[derive(Clone, Debug)]
pub struct VarInfo {
    pub name: String,
    /// The process owning a local variable; `None` for a global one.
    pub owner: Option<usize>,
    pub ty: Ty,
    /// The length of an array; `None` for a scalar.
    pub len: Option<u32>,
    pub slot: Slot,
}

#[derive(Clone, Debug)]
pub struct ChanInfo {
    pub name: String,
    /// The item types of a typed channel.
    pub types: Option<Vec<Ty>>,
    /// Buffer capacity; 0 for a rendez-vous channel.
    pub cap: u32,
    /// Offset of the item count (buffered channels only); the items follow it.
    pub off: u32,
    /// Bytes of the item count: 1, 2 above a capacity of 255, 4 above 65,535 (a full buffer
    /// of [`MAX_ARRAY`] items counts 65,536, which 2 bytes do not hold).
    pub count_len: u8,
    /// Bytes per item.
    pub item: u32,
    /// Where the channel is declared (its name).
    pub at: usize,
}

impl ChanInfo {
    /// The bytes the item count of a buffer of capacity `cap` takes.
    pub fn count_len_for(cap: u32) -> u8 {
        match cap {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            _ => 4,
        }
    }
    pub fn items_off(&self) -> usize {
        self.off as usize + self.count_len as usize
    }
    /// The item count (little-endian, `count_len` bytes).
    pub fn count(&self, s: &[u8]) -> u32 {
        let o = self.off as usize;
        let mut b = [0u8; 4];
        let n = self.count_len as usize;
        b[..n].copy_from_slice(&s[o..o + n]);
        u32::from_le_bytes(b)
    }
    /// Stores the item count `n` (at most `cap`, which `count_len` bytes hold).
    pub fn set_count(&self, s: &mut [u8], n: u32) {
        debug_assert!(n <= self.cap);
        let o = self.off as usize;
        let len = self.count_len as usize;
        s[o..o + len].copy_from_slice(&n.to_le_bytes()[..len]);
    }
}

#[derive(Clone, Debug)]
pub struct ProcInfo {
    pub name: String,
    pub states: Vec<String>,
    /// Offset of the control state.
    pub off: u32,
    /// Whether the control state takes two bytes.
    pub wide: bool,
    pub init: u16,
    pub committed: Vec<bool>,
    pub accepting: Vec<bool>,
    /// Byte range of the control state and the local variables.
    pub region: (u32, u32),
}

impl ProcInfo {
    #[inline(always)]
    pub fn state_of(&self, s: &[u8]) -> u16 {
        let o = self.off as usize;
        if self.wide {
            u16::from_le_bytes([s[o], s[o + 1]])
        } else {
            s[o] as u16
        }
    }
    #[inline(always)]
    pub fn set_state(&self, s: &mut [u8], v: u16) {
        let o = self.off as usize;
        if self.wide {
            s[o..o + 2].copy_from_slice(&v.to_le_bytes());
        } else {
            s[o] = v as u8;
        }
    }
}

/// What a transition does with a channel.
#[derive(Clone, Debug)]
pub enum LtKind {
    Plain,
    /// Appends one item (one code per field) to a buffered channel.
    BufSend {
        chan: u32,
        values: Vec<Code>,
    },
    /// Removes the first item of a buffered channel and stores its fields (store codes that
    /// consume a pre-pushed value).
    BufRecv {
        chan: u32,
        targets: Vec<Code>,
    },
    /// The sending half of a rendez-vous: paired with every receiving half of another process.
    RvSend {
        chan: u32,
        values: Vec<Code>,
    },
    /// The receiving half of a rendez-vous (has no transition id of its own).
    RvRecv {
        chan: u32,
        targets: Vec<Code>,
    },
}

/// One transition as written in a process ("local transition").
#[derive(Clone, Debug)]
pub struct Lt {
    pub proc: u32,
    pub from: u16,
    pub to: u16,
    /// The guards' conjunction; empty code means `true`.
    pub guard: Code,
    /// The effects, in order, each a value followed by its store.
    pub effects: Code,
    pub kind: LtKind,
    /// `P.from->to`, with `#k` when the process has several transitions between those states.
    pub name: String,
    /// Resources read and written (sorted): variables, channel buffers, process states.
    pub reads: Vec<u32>,
    pub writes: Vec<u32>,
    /// Global variables the effects assign (DiVinE's "glob_mask": a rendez-vous whose two
    /// halves assign a common global variable leads to the error state).
    pub glob_writes: Vec<u32>,
    /// Where the transition is written.
    pub at: usize,
}

/// A compiled DVE specification.
#[derive(Clone, Debug)]
pub struct Program {
    pub vars: Vec<VarInfo>,
    pub chans: Vec<ChanInfo>,
    pub procs: Vec<ProcInfo>,
    pub ops: Vec<Op>,
    pub pool: Vec<i32>,
    pub lts: Vec<Lt>,
    pub system: SystemKind,
    /// Where the `system` declaration is.
    pub system_at: usize,
    pub state_len: usize,
    pub initial: Vec<u8>,
    /// The largest value-stack height any code needs.
    pub max_stack: usize,
    /// The largest number of values a channel operation carries.
    pub max_arity: usize,
}

impl Program {
    /// Resource id of process `p`'s control state.
    pub fn proc_resource(&self, p: usize) -> u32 {
        (self.vars.len() + p) as u32
    }
    /// Resource id of buffered channel `c`.
    pub fn chan_resource(&self, c: usize) -> u32 {
        (self.vars.len() + self.procs.len() + c) as u32
    }
}

type R<T> = Result<T, ModelError>;

struct Cx<'a> {
    diag: &'a Diag<'a>,
    vars: Vec<VarInfo>,
    globals: HashMap<String, usize>,
    locals: Vec<HashMap<String, usize>>,
    chans: Vec<ChanInfo>,
    chan_ix: HashMap<String, usize>,
    procs: Vec<ProcInfo>,
    proc_ix: HashMap<String, usize>,
    state_ix: Vec<HashMap<String, u16>>,
    ops: Vec<Op>,
    pool: Vec<i32>,
    off: usize,
    /// Byte writes that build the initial state, applied in order (see `declare_var`).
    initial: Vec<(usize, Vec<u8>)>,
    /// Oversized list initialisers of the scope being declared, checked by `check_spills`
    /// once its last variable is known.
    spills: Vec<Spill>,
    max_stack: i32,
    /// Resources read by the code being compiled.
    reads: Vec<u32>,
}

/// "1 element", "3 elements".
fn counted(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A list initialiser with more values than its array has elements: where it is, whose it is,
/// and the byte just past the last value it writes.
struct Spill {
    at: usize,
    name: String,
    len: usize,
    given: usize,
    end: usize,
}

/// Where names are looked up: the process whose locals are visible (if any), and whether
/// state variables may be read (not in initialisers and sizes).
#[derive(Clone, Copy)]
struct Scope {
    proc: Option<usize>,
    consts_only: bool,
}

pub fn compile(spec: &Spec, diag: &Diag) -> R<Program> {
    let mut cx = Cx {
        diag,
        vars: Vec::new(),
        globals: HashMap::new(),
        locals: Vec::new(),
        chans: Vec::new(),
        chan_ix: HashMap::new(),
        procs: Vec::new(),
        proc_ix: HashMap::new(),
        state_ix: Vec::new(),
        ops: Vec::new(),
        pool: Vec::new(),
        off: 0,
        initial: Vec::new(),
        spills: Vec::new(),
        max_stack: 1,
        reads: Vec::new(),
    };
    let global = Scope {
        proc: None,
        consts_only: false,
    };
    for d in &spec.vars {
        cx.declare_var(d, global)?;
    }
    cx.check_spills("the last global variable")?;
    for c in &spec.chans {
        cx.declare_chan(c)?;
    }
    // Processes first (names, states, locals), transitions after: a guard may test the state
    // of, or read a variable of, a process declared later.
    for (pi, p) in spec.procs.iter().enumerate() {
        if cx.proc_ix.contains_key(&p.name.text) {
            return Err(diag.syntax(
                p.name.at,
                &format!("a second process named '{}'", p.name.text),
            ));
        }
        cx.proc_ix.insert(p.name.text.clone(), pi);
        let mut states = HashMap::new();
        for (i, s) in p.states.iter().enumerate() {
            if states.insert(s.text.clone(), i as u16).is_some() {
                return Err(diag.syntax(
                    s.at,
                    &format!(
                        "state '{}' declared twice in process '{}'",
                        s.text, p.name.text
                    ),
                ));
            }
        }
        if p.states.len() >= u16::MAX as usize {
            return Err(diag.unsupported(p.name.at, "a process with 65535 states or more"));
        }
        let init = match &p.init {
            Some(n) => match states.get(&n.text) {
                Some(&i) => i,
                None => {
                    return Err(diag.syntax(
                        n.at,
                        &format!(
                            "initial state '{}' is not a state of '{}'",
                            n.text, p.name.text
                        ),
                    ))
                }
            },
            None => {
                return Err(diag.syntax(
                    p.name.at,
                    &format!("process '{}' has no 'init' state", p.name.text),
                ))
            }
        };
        let flags = |names: &[Name], what: &str| -> R<Vec<bool>> {
            let mut v = vec![false; p.states.len()];
            for n in names {
                match states.get(&n.text) {
                    Some(&i) => v[i as usize] = true,
                    None => {
                        return Err(diag.syntax(
                            n.at,
                            &format!(
                                "{what} state '{}' is not a state of '{}'",
                                n.text, p.name.text
                            ),
                        ))
                    }
                }
            }
            Ok(v)
        };
        let committed = flags(&p.commit, "committed")?;
        let accepting = flags(&p.accept, "accepting")?;
        // The error state stores the state count in process 0's slot: it must fit.
        let wide = p.states.len() >= 255;
        let start = cx.off;
        cx.off += if wide { 2 } else { 1 };
        cx.check_state_len(
            p.name.at,
            &format!("the control state of process '{}'", p.name.text),
        )?;
        cx.initial.push((
            start,
            if wide {
                init.to_le_bytes().to_vec()
            } else {
                vec![init as u8]
            },
        ));
        cx.procs.push(ProcInfo {
            name: p.name.text.clone(),
            states: p.states.iter().map(|s| s.text.clone()).collect(),
            off: start as u32,
            wide,
            init,
            committed,
            accepting,
            region: (0, 0),
        });
        cx.state_ix.push(states);
        cx.locals.push(HashMap::new());
        let scope = Scope {
            proc: Some(pi),
            consts_only: false,
        };
        for d in &p.vars {
            cx.declare_var(d, scope)?;
        }
        cx.check_spills(&format!("the last local variable of '{}'", p.name.text))?;
        cx.procs[pi].region = (start as u32, cx.off as u32);
    }
    let mut lts = Vec::new();
    for (pi, p) in spec.procs.iter().enumerate() {
        let mut pair_count: HashMap<(u16, u16), usize> = HashMap::new();
        let mut resolved = Vec::new();
        for t in &p.trans {
            let from = cx.state(pi, &t.from)?;
            let to = cx.state(pi, &t.to)?;
            *pair_count.entry((from, to)).or_default() += 1;
            resolved.push((from, to));
        }
        let mut seen: HashMap<(u16, u16), usize> = HashMap::new();
        for (t, &(from, to)) in p.trans.iter().zip(&resolved) {
            let k = seen.entry((from, to)).or_default();
            *k += 1;
            let mut name = format!("{}.{}->{}", p.name.text, t.from.text, t.to.text);
            if pair_count[&(from, to)] > 1 {
                name.push_str(&format!("#{k}"));
            }
            lts.push(cx.transition(pi, t, from, to, name)?);
        }
        for (s, e) in &p.asserts {
            // Assertions do not change the state space; they are checked for well-formedness.
            cx.state(pi, s)?;
            cx.code(
                e,
                Scope {
                    proc: Some(pi),
                    consts_only: false,
                },
            )?;
        }
    }
    let mut initial = vec![0u8; cx.off];
    for (off, bytes) in &cx.initial {
        // `check_spills` kept every oversized initialiser inside its scope's variables; the
        // clip only guards the copy.
        let end = (off + bytes.len()).min(initial.len());
        if *off < end {
            initial[*off..end].copy_from_slice(&bytes[..end - off]);
        }
    }
    let max_arity = lts
        .iter()
        .map(|l: &Lt| match &l.kind {
            LtKind::Plain => 0,
            LtKind::BufSend { values, .. } | LtKind::RvSend { values, .. } => values.len(),
            LtKind::BufRecv { targets, .. } | LtKind::RvRecv { targets, .. } => targets.len(),
        })
        .max()
        .unwrap_or(0);
    Ok(Program {
        vars: cx.vars,
        chans: cx.chans,
        procs: cx.procs,
        ops: cx.ops,
        pool: cx.pool,
        lts,
        system: spec.system,
        system_at: spec.system_at,
        state_len: cx.off,
        initial,
        max_stack: cx.max_stack.max(1) as usize + 1,
        max_arity,
    })
}

impl<'a> Cx<'a> {
    /// Refuses a state vector that `what`, declared at `at`, has just taken over
    /// [`MAX_STATE_BYTES`].
    fn check_state_len(&self, at: usize, what: &str) -> R<()> {
        if self.off > MAX_STATE_BYTES {
            return Err(self.diag.unsupported(
                at,
                &format!(
                    "a state vector over {MAX_STATE_BYTES} bytes ({what} takes it to {} bytes)",
                    self.off
                ),
            ));
        }
        Ok(())
    }

    fn state(&self, p: usize, n: &Name) -> R<u16> {
        self.state_ix[p].get(&n.text).copied().ok_or_else(|| {
            self.diag.syntax(
                n.at,
                &format!(
                    "'{}' is not a state of process '{}'",
                    n.text, self.procs[p].name
                ),
            )
        })
    }

    fn lookup(&self, scope: Scope, n: &Name) -> R<usize> {
        if let Some(p) = scope.proc {
            if let Some(&v) = self.locals[p].get(&n.text) {
                return Ok(v);
            }
        }
        self.globals.get(&n.text).copied().ok_or_else(|| {
            self.diag
                .syntax(n.at, &format!("undeclared variable '{}'", n.text))
        })
    }

    /// Evaluates a constant expression (sizes, initialisers).
    fn constant(&mut self, e: &Expr, scope: Scope) -> R<i64> {
        let start = self.ops.len();
        let saved = std::mem::take(&mut self.reads);
        let r = self.expr(
            e,
            Scope {
                consts_only: true,
                ..scope
            },
        );
        self.reads = saved;
        r?;
        let v = match &self.ops[start..] {
            [Op::Const(v)] => Ok(*v as i64),
            _ => Err(self.diag.syntax(
                e.at,
                "this constant expression cannot be evaluated (division by zero or an index out of bounds)",
            )),
        };
        self.ops.truncate(start);
        v
    }

    /// The constant `e`, an array size or a channel capacity (`what`), which must lie in
    /// `least..=MAX_ARRAY`.
    fn size(&mut self, e: &Expr, scope: Scope, least: i64, what: &str) -> R<u32> {
        let n = self.constant(e, scope)?;
        if !(least..=MAX_ARRAY).contains(&n) {
            return Err(self.diag.syntax(
                e.at,
                &format!("{what} {n} out of range ({least}..{MAX_ARRAY})"),
            ));
        }
        Ok(n as u32)
    }

    /// Refuses an oversized initialiser of the scope just declared whose extra values run
    /// past its variables (`last` names where they end): DiVinE writes extra values into the
    /// variables that follow (BEEM's anderson.* relies on it), but past the scope's last
    /// variable they would land in a channel, a control state or nowhere — dropped without a
    /// word, or worse.
    fn check_spills(&mut self, last: &str) -> R<()> {
        for s in std::mem::take(&mut self.spills) {
            if s.end > self.off {
                return Err(self.diag.syntax(
                    s.at,
                    &format!(
                        "array '{}' has {} and {}; the extra values would go past {last} (DiVinE writes them into the variables declared after the array, and there are not enough)",
                        s.name,
                        counted(s.len, "element"),
                        counted(s.given, "initialiser")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn declare_var(&mut self, d: &VarDecl, scope: Scope) -> R<()> {
        let taken = match scope.proc {
            Some(p) => self.locals[p].contains_key(&d.name.text),
            None => self.globals.contains_key(&d.name.text),
        };
        if taken {
            return Err(self.diag.syntax(
                d.name.at,
                &format!("variable '{}' declared twice", d.name.text),
            ));
        }
        let len = match &d.array {
            Some(e) => Some(self.size(e, scope, 1, "array size")?),
            None => None,
        };
        let count = len.unwrap_or(1) as usize;
        // The values given, in order; DiVinE writes all of them, even more than the array
        // holds (they land in the variables that follow, as its interpreter does; anderson.*
        // has one such initialiser) — as long as there are variables of the same scope to
        // hold them (`check_spills`). A constant's extra values are refused. Fewer values than
        // elements leave the rest 0.
        let mut given: Vec<i32> = Vec::new();
        match (&d.init, len) {
            (None, _) => {
                if d.is_const {
                    return Err(self.diag.syntax(
                        d.name.at,
                        &format!("constant '{}' needs a value", d.name.text),
                    ));
                }
            }
            (Some(Init::Scalar(e)), None) => given.push(self.init_value(e, d, scope)?),
            (Some(Init::Scalar(e)), Some(_)) => {
                return Err(self.diag.syntax(
                    e.at,
                    &format!("array '{}' needs a list initialiser '{{…}}'", d.name.text),
                ))
            }
            (Some(Init::List(_, at)), None) => {
                return Err(self.diag.syntax(
                    *at,
                    &format!("scalar '{}' cannot take a list initialiser", d.name.text),
                ))
            }
            (Some(Init::List(items, _)), Some(_)) => {
                for e in items {
                    given.push(self.init_value(e, d, scope)?);
                }
            }
        }
        // Only a list gives more than one value.
        if let (true, Some(Init::List(_, at))) = (given.len() > count, &d.init) {
            if d.is_const {
                // A constant takes no space in the state: its extra values would be lost.
                return Err(self.diag.syntax(
                    *at,
                    &format!(
                        "constant array '{}' has {} and {}",
                        d.name.text,
                        counted(count, "element"),
                        counted(given.len(), "initialiser")
                    ),
                ));
            }
            self.spills.push(Spill {
                at: *at,
                name: d.name.text.clone(),
                len: count,
                given: given.len(),
                end: self.off + given.len() * d.ty.width(),
            });
        }
        let slot = if d.is_const {
            let mut values = vec![0i32; count];
            for (v, &g) in values.iter_mut().zip(&given) {
                *v = g;
            }
            Slot::Const(values)
        } else {
            let off = self.off;
            self.off += count * d.ty.width();
            self.check_state_len(d.name.at, &format!("variable '{}'", d.name.text))?;
            if !given.is_empty() {
                let mut bytes = Vec::with_capacity(given.len() * d.ty.width());
                for &v in &given {
                    match d.ty {
                        Ty::Byte => bytes.push(v as u8),
                        Ty::Int => bytes.extend_from_slice(&(v as i16).to_le_bytes()),
                    }
                }
                self.initial.push((off, bytes));
            }
            Slot::State(off as u32)
        };
        let id = self.vars.len();
        self.vars.push(VarInfo {
            name: d.name.text.clone(),
            owner: scope.proc,
            ty: d.ty,
            len,
            slot,
        });
        match scope.proc {
            Some(p) => self.locals[p].insert(d.name.text.clone(), id),
            None => self.globals.insert(d.name.text.clone(), id),
        };
        Ok(())
    }

    fn init_value(&mut self, e: &Expr, d: &VarDecl, scope: Scope) -> R<i32> {
        let v = self.constant(e, scope)?;
        if !d.ty.holds(v) {
            return Err(self.diag.syntax(
                e.at,
                &format!(
                    "initial value {v} of '{}' is out of the range of {}",
                    d.name.text,
                    d.ty.name()
                ),
            ));
        }
        Ok(v as i32)
    }

    fn declare_chan(&mut self, c: &ChanDecl) -> R<()> {
        if self.chan_ix.contains_key(&c.name.text) {
            return Err(self.diag.syntax(
                c.name.at,
                &format!("channel '{}' declared twice", c.name.text),
            ));
        }
        let scope = Scope {
            proc: None,
            consts_only: true,
        };
        let cap = match &c.size {
            Some(e) => self.size(e, scope, 0, "channel capacity")?,
            None => 0,
        };
        if cap > 0 && c.types.is_none() {
            return Err(self.diag.unsupported(
                c.name.at,
                "a buffered channel without item types (write e.g. 'channel {byte} c[2];')",
            ));
        }
        let item: usize = c
            .types
            .as_ref()
            .map(|t| t.iter().map(|t| t.width()).sum())
            .unwrap_or(0);
        let count_len = ChanInfo::count_len_for(cap);
        let off = self.off;
        if cap > 0 {
            // The count starts at 0 even if an oversized initialiser ran over it.
            self.initial.push((off, vec![0; count_len as usize]));
            self.off += count_len as usize + cap as usize * item;
            self.check_state_len(c.name.at, &format!("channel '{}'", c.name.text))?;
        }
        self.chan_ix.insert(c.name.text.clone(), self.chans.len());
        self.chans.push(ChanInfo {
            name: c.name.text.clone(),
            types: c.types.clone(),
            cap,
            off: off as u32,
            count_len,
            item: item as u32,
            at: c.name.at,
        });
        Ok(())
    }

    fn emit(&mut self, op: Op) {
        self.ops.push(op);
    }

    /// The single constant `ops[start..]` holds, if that is all it holds.
    fn folded(&self, start: usize) -> Option<i32> {
        match &self.ops[start..] {
            [Op::Const(v)] => Some(*v),
            _ => None,
        }
    }

    /// Replaces `ops[start..]` by the value of running it, if it runs without a fault.
    fn fold(&mut self, start: usize) {
        let code = Code {
            start: start as u32,
            end: self.ops.len() as u32,
        };
        let mut stack = [0i32; 4];
        if let Ok(v) = vm::run(&self.ops, code, &self.pool, &[][..], &mut stack, None) {
            self.ops.truncate(start);
            self.emit(Op::Const(v));
        }
    }

    /// Compiles `e` (pushes its value), recording the state it reads in `self.reads`.
    fn expr(&mut self, e: &Expr, scope: Scope) -> R<()> {
        match &e.kind {
            ExprKind::Num(v) => {
                let v =
                    i32::try_from(*v).map_err(|_| self.diag.syntax(e.at, "number too large"))?;
                self.emit(Op::Const(v));
            }
            ExprKind::Var(n) => {
                let v = self.lookup(scope, n)?;
                self.load(v, None, scope, n)?;
            }
            ExprKind::Index(n, idx) => {
                let v = self.lookup(scope, n)?;
                self.load(v, Some(idx), scope, n)?;
            }
            ExprKind::Foreign(p, n, idx) => {
                let pi = *self.proc_ix.get(&p.text).ok_or_else(|| {
                    self.diag
                        .syntax(p.at, &format!("undeclared process '{}'", p.text))
                })?;
                let v = *self
                    .locals
                    .get(pi)
                    .and_then(|l| l.get(&n.text))
                    .ok_or_else(|| {
                        self.diag.syntax(
                            n.at,
                            &format!("process '{}' has no local variable '{}'", p.text, n.text),
                        )
                    })?;
                self.load(v, idx.as_deref(), scope, n)?;
            }
            ExprKind::InState(p, s) => {
                if scope.consts_only {
                    return Err(self
                        .diag
                        .syntax(e.at, "a constant expression cannot test a process state"));
                }
                let pi = *self.proc_ix.get(&p.text).ok_or_else(|| {
                    self.diag
                        .syntax(p.at, &format!("undeclared process '{}'", p.text))
                })?;
                let val = self.state(pi, s)?;
                let pr = &self.procs[pi];
                let op = Op::InState {
                    off: pr.off,
                    wide: pr.wide,
                    val,
                };
                self.reads.push((self.vars.len() + pi) as u32);
                self.emit(op);
            }
            ExprKind::Unary(op, a) => {
                let start = self.ops.len();
                self.expr(a, scope)?;
                self.emit(match op {
                    UnOp::Neg => Op::Neg,
                    UnOp::BitNot => Op::BitNot,
                    UnOp::Not => Op::Not,
                });
                if self.folded_operands(start, 1) {
                    self.fold(start);
                }
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or | BinOp::Imply), a, b) => {
                let start = self.ops.len();
                self.expr(a, scope)?;
                // `decides`: the value of `a` that settles the result without `b`, and that
                // result.
                let (decides_on_zero, result) = match op {
                    BinOp::And => (true, 0),
                    BinOp::Or => (false, 1),
                    _ => (true, 1),
                };
                if let Some(va) = self.folded(start) {
                    self.ops.truncate(start);
                    let settled = (va == 0) == decides_on_zero;
                    let bstart = self.ops.len();
                    self.expr(b, scope)?;
                    if settled {
                        // `b` is never evaluated; it was compiled only to check it.
                        self.ops.truncate(bstart);
                        self.emit(Op::Const(result));
                    } else {
                        self.emit(Op::Bool);
                        if self.folded_operands(bstart, 1) {
                            self.fold(bstart);
                        }
                    }
                    return Ok(());
                }
                let jump = self.ops.len();
                self.emit(if decides_on_zero {
                    Op::JumpZ { to: 0, result }
                } else {
                    Op::JumpNz { to: 0, result }
                });
                self.expr(b, scope)?;
                self.emit(Op::Bool);
                let to = self.ops.len() as u32;
                self.ops[jump] = if decides_on_zero {
                    Op::JumpZ { to, result }
                } else {
                    Op::JumpNz { to, result }
                };
            }
            ExprKind::Binary(op, a, b) => {
                let start = self.ops.len();
                self.expr(a, scope)?;
                let bstart = self.ops.len();
                self.expr(b, scope)?;
                let a_const = matches!(&self.ops[start..bstart], [Op::Const(_)]);
                if let (Some(k), false) = (self.folded(bstart), a_const) {
                    let fused = match op {
                        BinOp::Add => Some(Op::AddK(k)),
                        BinOp::Sub => Some(Op::SubK(k)),
                        BinOp::Mul => Some(Op::MulK(k)),
                        // A zero divisor keeps the generic op, which faults at run time.
                        BinOp::Div if k != 0 => Some(Op::DivK(k)),
                        BinOp::Mod if k != 0 => Some(Op::ModK(k)),
                        BinOp::Eq => Some(Op::EqK(k)),
                        BinOp::Ne => Some(Op::NeK(k)),
                        BinOp::Lt => Some(Op::LtK(k)),
                        BinOp::Le => Some(Op::LeK(k)),
                        BinOp::Gt => Some(Op::GtK(k)),
                        BinOp::Ge => Some(Op::GeK(k)),
                        _ => None,
                    };
                    if let Some(f) = fused {
                        self.ops.truncate(bstart);
                        self.emit(f);
                        return Ok(());
                    }
                }
                self.emit(match op {
                    BinOp::Add => Op::Add,
                    BinOp::Sub => Op::Sub,
                    BinOp::Mul => Op::Mul,
                    BinOp::Div => Op::Div,
                    BinOp::Mod => Op::Mod,
                    BinOp::Shl => Op::Shl,
                    BinOp::Shr => Op::Shr,
                    BinOp::BitAnd => Op::BitAnd,
                    BinOp::BitOr => Op::BitOr,
                    BinOp::BitXor => Op::BitXor,
                    BinOp::Eq => Op::Eq,
                    BinOp::Ne => Op::Ne,
                    BinOp::Lt => Op::Lt,
                    BinOp::Le => Op::Le,
                    BinOp::Gt => Op::Gt,
                    BinOp::Ge => Op::Ge,
                    BinOp::And | BinOp::Or | BinOp::Imply => Op::Bool,
                });
                if self.folded_operands(start, 2) {
                    self.fold(start);
                }
            }
        }
        Ok(())
    }

    /// Whether `ops[start..]` is `n` constants followed by one operator.
    fn folded_operands(&self, start: usize, n: usize) -> bool {
        let s = &self.ops[start..];
        s.len() == n + 1 && s[..n].iter().all(|o| matches!(o, Op::Const(_)))
    }

    /// Pushes variable `v` (element `idx` of an array).
    fn load(&mut self, v: usize, idx: Option<&Expr>, scope: Scope, n: &Name) -> R<()> {
        let var = self.vars[v].clone();
        if var.len.is_none() && idx.is_some() {
            return Err(self
                .diag
                .syntax(n.at, &format!("'{}' is not an array", var.name)));
        }
        match (&var.slot, idx) {
            // An array named without an index is its element 0, as in DiVinE's interpreter
            // (train-gate.* relies on it).
            (Slot::Const(vals), None) => self.emit(Op::Const(vals[0])),
            (Slot::Const(vals), Some(i)) => {
                let start = self.ops.len();
                self.expr(i, scope)?;
                let base = self.pool.len() as u32;
                let len = vals.len() as u32;
                match self.folded(start) {
                    Some(k) if k >= 0 && (k as usize) < vals.len() => {
                        self.ops.truncate(start);
                        self.emit(Op::Const(vals[k as usize]));
                    }
                    _ => {
                        self.pool.extend_from_slice(vals);
                        self.emit(Op::LdConstIx { base, len });
                    }
                }
            }
            (Slot::State(off), idx) => {
                if scope.consts_only {
                    return Err(self.diag.syntax(
                        n.at,
                        &format!("'{}' is a variable, not a constant", var.name),
                    ));
                }
                self.reads.push(v as u32);
                match idx {
                    None => self.emit(match var.ty {
                        Ty::Byte => Op::LdU8(*off),
                        Ty::Int => Op::LdI16(*off),
                    }),
                    Some(i) => {
                        self.expr(i, scope)?;
                        let len = var.len.unwrap_or(1);
                        self.emit(match var.ty {
                            Ty::Byte => Op::LdU8Ix { off: *off, len },
                            Ty::Int => Op::LdI16Ix { off: *off, len },
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Compiles the store of a value (already on the stack) into the lvalue `e`. Returns the
    /// variable assigned.
    fn store(&mut self, e: &Expr, scope: Scope) -> R<usize> {
        let (n, idx) = match &e.kind {
            ExprKind::Var(n) => (n, None),
            ExprKind::Index(n, i) => (n, Some(i.as_ref())),
            _ => {
                return Err(self
                    .diag
                    .syntax(e.at, "only a variable or an array element can be assigned"))
            }
        };
        let v = self.lookup(scope, n)?;
        let var = self.vars[v].clone();
        let Slot::State(off) = var.slot else {
            return Err(self
                .diag
                .syntax(n.at, &format!("cannot assign to constant '{}'", var.name)));
        };
        match (var.len, idx) {
            (None, None) => self.emit(match var.ty {
                Ty::Byte => Op::StU8(off),
                Ty::Int => Op::StI16(off),
            }),
            (Some(len), Some(i)) => {
                self.expr(i, scope)?;
                self.emit(match var.ty {
                    Ty::Byte => Op::StU8Ix { off, len },
                    Ty::Int => Op::StI16Ix { off, len },
                });
            }
            // Element 0, as when reading (see `load`).
            (Some(_), None) => self.emit(match var.ty {
                Ty::Byte => Op::StU8(off),
                Ty::Int => Op::StI16(off),
            }),
            (None, Some(_)) => {
                return Err(self
                    .diag
                    .syntax(n.at, &format!("'{}' is not an array", var.name)))
            }
        }
        Ok(v)
    }

    /// Compiles `e` as a separate code range (stack starting at `base` values).
    fn code(&mut self, e: &Expr, scope: Scope) -> R<Code> {
        let start = self.ops.len();
        self.expr(e, scope)?;
        Ok(self.finish(start, 0))
    }

    fn finish(&mut self, start: usize, base: i32) -> Code {
        let h = vm::max_height(&self.ops[start..], base);
        self.max_stack = self.max_stack.max(h);
        Code {
            start: start as u32,
            end: self.ops.len() as u32,
        }
    }

    fn transition(&mut self, pi: usize, t: &TransDecl, from: u16, to: u16, name: String) -> R<Lt> {
        let scope = Scope {
            proc: Some(pi),
            consts_only: false,
        };
        self.reads.clear();
        let mut writes: Vec<u32> = vec![(self.vars.len() + pi) as u32];
        self.reads.push((self.vars.len() + pi) as u32);
        // Guards: their conjunction, compiled as `g1 && g2 && …`.
        let gstart = self.ops.len();
        let mut jumps = Vec::new();
        for (i, g) in t.guards.iter().enumerate() {
            self.expr(g, scope)?;
            if i + 1 < t.guards.len() {
                jumps.push(self.ops.len());
                self.emit(Op::JumpZ { to: 0, result: 0 });
            }
        }
        if t.guards.len() > 1 {
            self.emit(Op::Bool);
        }
        let end = self.ops.len() as u32;
        for j in jumps {
            self.ops[j] = Op::JumpZ { to: end, result: 0 };
        }
        let mut guard = self.finish(gstart, 0);
        if let Some(v) = self.folded(gstart) {
            if v != 0 {
                // Always true: no code to run.
                self.ops.truncate(gstart);
                guard = Code {
                    start: gstart as u32,
                    end: gstart as u32,
                };
            }
        }
        let kind = match &t.sync {
            None => LtKind::Plain,
            Some(s) => self.sync(pi, s, scope, &mut writes)?,
        };
        let estart = self.ops.len();
        let mut glob_writes = Vec::new();
        for a in &t.effects {
            self.expr(&a.value, scope)?;
            let v = self.store(&a.target, scope)?;
            writes.push(v as u32);
            if self.vars[v].owner.is_none() {
                glob_writes.push(v as u32);
            }
        }
        let effects = self.finish(estart, 0);
        let mut reads = std::mem::take(&mut self.reads);
        reads.sort_unstable();
        reads.dedup();
        writes.sort_unstable();
        writes.dedup();
        glob_writes.sort_unstable();
        glob_writes.dedup();
        Ok(Lt {
            proc: pi as u32,
            from,
            to,
            guard,
            effects,
            kind,
            name,
            reads,
            writes,
            glob_writes,
            at: t.at,
        })
    }

    fn sync(&mut self, pi: usize, s: &SyncSpec, scope: Scope, writes: &mut Vec<u32>) -> R<LtKind> {
        let ci = *self.chan_ix.get(&s.chan.text).ok_or_else(|| {
            self.diag
                .syntax(s.chan.at, &format!("undeclared channel '{}'", s.chan.text))
        })?;
        let ch = self.chans[ci].clone();
        if let Some(types) = &ch.types {
            if s.values.len() != types.len() {
                return Err(self.diag.syntax(
                    s.at,
                    &format!(
                        "channel '{}' carries {} value(s), this {} has {}",
                        ch.name,
                        types.len(),
                        if s.send { "send" } else { "receive" },
                        s.values.len()
                    ),
                ));
            }
        }
        let _ = pi;
        let mut codes = Vec::new();
        for (i, e) in s.values.iter().enumerate() {
            let start = self.ops.len();
            if s.send {
                self.expr(e, scope)?;
                // Typed rendez-vous values are converted to the item type, as DiVinE does;
                // buffered items are converted when written into the buffer.
                if ch.cap == 0 {
                    match ch.types.as_ref().map(|t| t[i]) {
                        Some(Ty::Byte) => self.emit(Op::TruncU8),
                        Some(Ty::Int) => self.emit(Op::TruncI16),
                        None => {}
                    }
                }
                codes.push(self.finish(start, 0));
            } else {
                let v = self.store(e, scope)?;
                writes.push(v as u32);
                codes.push(self.finish(start, 1));
            }
        }
        if ch.cap > 0 {
            let r = (self.vars.len() + self.procs.len() + ci) as u32;
            self.reads.push(r);
            writes.push(r);
        }
        let chan = ci as u32;
        Ok(match (ch.cap > 0, s.send) {
            (true, true) => LtKind::BufSend {
                chan,
                values: codes,
            },
            (true, false) => LtKind::BufRecv {
                chan,
                targets: codes,
            },
            (false, true) => LtKind::RvSend {
                chan,
                values: codes,
            },
            (false, false) => LtKind::RvRecv {
                chan,
                targets: codes,
            },
        })
    }
}
