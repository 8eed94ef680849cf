//! DVE, the modelling language of DiVinE and of the BEEM benchmark, as a [`Model`].
//!
//! `lexer` → `parser` (syntax tree, [`ast`]) → `compile` (names resolved, state vector laid
//! out, expressions compiled to the op pool of [`vm`]) → [`DveModel`], which enumerates
//! transitions. The semantics follow DiVinE's interpreter (the one behind the BEEM counts); the
//! choices and their sources are written down in docs/DVE.md.
//!
//! **Transition ids.** Every transition written in a process gets one id, except the two halves
//! of a rendez-vous: a sending transition gets one id per receiving transition of *another*
//! process on the same channel (the pair fires as one step), a receiving one gets none. Ids are
//! numbered by (process, source state, order in the file, receiver), so the transitions enabled
//! in a state are found in ascending id order by walking each process's current state. Pairs
//! grow as senders × receivers: a model with more than [`MAX_TRANSITION_IDS`] ids is refused
//! (at the channel with the most pairs). An id is stored as three numbers ([`IdInfo`]); its
//! label, read and write sets are those of its one or two transitions, looked up when asked.
//!
//! **Labels.** The label of id `i` is label `i`: `P.from->to`, `S.a->b|R.c->d` for a pair, the
//! `|`-join of every process's transition for a `system sync` step (every id's name is
//! distinct, as processes, and transitions within a process, are). Names are built when asked,
//! never stored: the model holds no string per id.
//!
//! **Threads.** [`Model::fork`] shares everything compiled (an `Arc`); a copy owns only its
//! scratch buffers, so memory does not grow with the number of threads.
//!
//! **Errors.** A division by zero, an index out of bounds or a value out of the range of the
//! variable it is stored into, met while evaluating an enabled transition (its guard included),
//! sends that transition to the unique *error state* (all bytes zero, process 0 in state number
//! `states(0)`, which no real state uses), as DiVinE does. The error state has no successors.
//!
//! **`system sync`**: every process moves at once (one transition each, channels ignored as in
//! DiVinE); a step's id is the mixed-radix number of its per-process transitions.

pub mod ast;
pub mod compile;
pub mod lexer;
pub mod parser;
pub mod vm;

use super::{Fired, LabelId, Model, TransitionId};
use crate::error::{line_col, ModelError, TextError};
use ast::SystemKind;
use compile::{LtKind, Program};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vm::{Code, Fault};

/// Positions and the file name for error messages.
pub struct Diag<'a> {
    text: &'a [u8],
    path: &'a Path,
}

impl<'a> Diag<'a> {
    pub fn new(text: &'a [u8], path: &'a Path) -> Self {
        Diag { text, path }
    }

    /// A syntax or semantic error at byte offset `at`.
    pub fn syntax(&self, at: usize, message: &str) -> ModelError {
        let (line, column) = line_col(self.text, at);
        ModelError::Syntax(TextError {
            path: self.path.to_path_buf(),
            line,
            column,
            message: message.to_string(),
        })
    }

    /// A construct this front end does not implement, at byte offset `at`.
    pub fn unsupported(&self, at: usize, construct: &str) -> ModelError {
        let (line, column) = line_col(self.text, at);
        ModelError::Unsupported {
            path: self.path.to_path_buf(),
            line,
            column,
            construct: construct.to_string(),
        }
    }
}

/// Most transition ids accepted: rendez-vous pairs of an asynchronous system (one id each,
/// with the other transitions), or step combinations of a `system sync`.
const MAX_TRANSITION_IDS: u64 = 1 << 20;

/// What a transition id stands for.
#[derive(Clone, Copy, Debug)]
struct IdInfo {
    /// The transition (the sending half of a rendez-vous).
    lt: u32,
    /// The receiving half, or `NONE`.
    recv: u32,
    /// Always leads to the error state when enabled: the two halves assign a common global
    /// variable, or the value counts of a rendez-vous differ.
    static_err: bool,
}

const NONE: u32 = u32::MAX;

/// The transitions leaving one process state, in id order.
#[derive(Clone, Copy, Debug)]
struct Entry {
    lt: u32,
    first_id: u32,
    /// Receivers of a rendez-vous send: `receivers[start..end]`.
    recv_start: u32,
    recv_end: u32,
}

/// Outcome of a guard.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pass {
    No,
    Yes,
    /// The guard faulted: the transition is enabled and leads to the error state.
    Fault,
}

/// Buffers reused across calls, so exploring allocates nothing per state.
#[derive(Clone, Default)]
struct Scratch {
    dst: Vec<u8>,
    stack: Vec<i32>,
    vals: Vec<i32>,
    /// Receiver guard results of the current state, valid when `stamp[r] == gen`.
    stamp: Vec<u32>,
    memo: Vec<Pass>,
    gen: u32,
    /// `system sync`: per-transition successors and, per process, the enabled ones.
    sync_succ: Vec<u8>,
    sync_enabled: Vec<Vec<(u32, bool)>>,
    sync_pick: Vec<usize>,
    sync_picks: Vec<(u32, bool)>,
}

/// A compiled DVE model: the compiled program and its numbering, shared (read-only) by the
/// copies [`Model::fork`] makes for other threads, and each copy's own scratch buffers.
pub struct DveModel {
    shared: Arc<Shared>,
    scratch: RefCell<Scratch>,
    fire_scratch: RefCell<Scratch>,
}

/// Everything of a [`DveModel`] that exploring only reads.
struct Shared {
    path: PathBuf,
    prog: Program,
    ids: Vec<IdInfo>,
    /// `entries[ent_start[base[p] + q] .. ent_start[base[p] + q + 1]]`: transitions of process
    /// `p` leaving its state `q`.
    entries: Vec<Entry>,
    ent_start: Vec<u32>,
    base: Vec<u32>,
    receivers: Vec<u32>,
    has_commit: bool,
    error_state: Vec<u8>,
    /// `system sync`: per process its transitions (all but buffered ones) and id weight.
    sync_lts: Vec<Vec<u32>>,
    sync_weight: Vec<u64>,
    transitions: usize,
    /// 1 + the id of the first transition found to lead to the error state (0: none yet),
    /// set by whichever thread meets it (forks share it).
    faulted: AtomicU64,
}

/// Reads, parses and compiles a DVE file.
pub fn load(path: &Path) -> Result<DveModel, ModelError> {
    let bytes = std::fs::read(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes, path)
}

/// Parses and compiles DVE source text; `path` names it in error messages.
pub fn parse(text: &[u8], path: &Path) -> Result<DveModel, ModelError> {
    let diag = Diag::new(text, path);
    let toks = lexer::tokenize(text, &diag)?;
    let spec = parser::Parser::new(&toks, &diag).spec()?;
    let prog = compile::compile(&spec, &diag)?;
    DveModel::new(prog, path, &diag)
}

/// "1 process", "2 processes".
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn intersects(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Equal => return true,
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    false
}

/// Refuses an asynchronous system with more than [`MAX_TRANSITION_IDS`] transition ids
/// (`recv_of`: the receiving transitions of each rendez-vous channel), before any is built:
/// at the channel with the most rendez-vous pairs, or else at the transition that passes the
/// limit.
fn check_async_ids(
    prog: &Program,
    recv_of: &HashMap<u32, Vec<u32>>,
    diag: &Diag,
) -> Result<(), ModelError> {
    // Receivers per (channel, process): a sender pairs with those of the other processes.
    let mut own: HashMap<(u32, u32), u64> = HashMap::new();
    for (&c, rs) in recv_of {
        for &r in rs {
            *own.entry((c, prog.lts[r as usize].proc)).or_default() += 1;
        }
    }
    // Per channel: rendez-vous pairs and sending transitions.
    let mut pairs: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut total = 0u64;
    let mut passed_at = None;
    for lt in &prog.lts {
        total += match lt.kind {
            LtKind::RvRecv { .. } => 0,
            LtKind::RvSend { chan, .. } => {
                let all = recv_of.get(&chan).map_or(0, |v| v.len() as u64);
                let n = all - own.get(&(chan, lt.proc)).copied().unwrap_or(0);
                let e = pairs.entry(chan).or_default();
                e.0 += n;
                e.1 += 1;
                n
            }
            _ => 1,
        };
        if total > MAX_TRANSITION_IDS && passed_at.is_none() {
            passed_at = Some(lt.at);
        }
    }
    let Some(passed_at) = passed_at else {
        return Ok(());
    };
    let most = pairs
        .iter()
        .map(|(&c, &(n, senders))| (n, std::cmp::Reverse(c), senders))
        .max();
    Err(match most {
        Some((n, std::cmp::Reverse(c), senders)) if n > 0 => {
            let ch = &prog.chans[c as usize];
            diag.unsupported(
                ch.at,
                &format!(
                    "more than {MAX_TRANSITION_IDS} transition ids ({total}): channel '{}' pairs each of its {senders} sending transitions with every receiving transition of another process, {n} rendez-vous pairs",
                    ch.name
                ),
            )
        }
        _ => diag.unsupported(
            passed_at,
            &format!("more than {MAX_TRANSITION_IDS} transition ids ({total})"),
        ),
    })
}

impl DveModel {
    fn new(prog: Program, path: &Path, diag: &Diag) -> Result<Self, ModelError> {
        let mut error_state = vec![0u8; prog.state_len];
        let p0 = &prog.procs[0];
        p0.set_state(&mut error_state, p0.states.len() as u16);
        let has_commit = prog.procs.iter().any(|p| p.committed.iter().any(|&c| c));
        let mut m = Shared {
            path: path.to_path_buf(),
            ids: Vec::new(),
            entries: Vec::new(),
            ent_start: Vec::new(),
            base: Vec::new(),
            receivers: Vec::new(),
            has_commit,
            error_state,
            sync_lts: Vec::new(),
            sync_weight: Vec::new(),
            transitions: 0,
            faulted: AtomicU64::new(0),
            prog,
        };
        match m.prog.system {
            SystemKind::Async => m.number_async(diag)?,
            SystemKind::Sync => m.number_sync(diag)?,
        }
        Ok(DveModel::with_shared(Arc::new(m)))
    }

    /// A model on `shared` with scratch buffers of its own.
    fn with_shared(shared: Arc<Shared>) -> Self {
        DveModel {
            scratch: RefCell::new(shared.fresh_scratch()),
            fire_scratch: RefCell::new(shared.fresh_scratch()),
            shared,
        }
    }

    /// The number of processes.
    pub fn process_count(&self) -> usize {
        self.shared.prog.procs.len()
    }

    /// Whether `state` is the error state.
    pub fn is_error_state(&self, state: &[u8]) -> bool {
        self.shared.is_error_state(state)
    }
}

impl Shared {
    /// Numbers the transitions of an asynchronous system (see the module docs).
    fn number_async(&mut self, diag: &Diag) -> Result<(), ModelError> {
        let prog = &self.prog;
        let mut by_state: Vec<Vec<Vec<u32>>> = prog
            .procs
            .iter()
            .map(|p| vec![Vec::new(); p.states.len()])
            .collect();
        // Receivers per channel, in transition order.
        let mut recv_of: HashMap<u32, Vec<u32>> = HashMap::new();
        for (i, lt) in prog.lts.iter().enumerate() {
            match lt.kind {
                LtKind::RvRecv { chan, .. } => recv_of.entry(chan).or_default().push(i as u32),
                _ => by_state[lt.proc as usize][lt.from as usize].push(i as u32),
            }
        }
        check_async_ids(prog, &recv_of, diag)?;
        for states in &by_state {
            self.base.push(self.ent_start.len() as u32);
            for lts in states {
                self.ent_start.push(self.entries.len() as u32);
                for &li in lts {
                    let lt = &prog.lts[li as usize];
                    let first_id = self.ids.len() as u32;
                    let recv_start = self.receivers.len() as u32;
                    match &lt.kind {
                        LtKind::RvSend { chan, values } => {
                            for &ri in recv_of.get(chan).map(|v| &v[..]).unwrap_or(&[]) {
                                let r = &prog.lts[ri as usize];
                                if r.proc == lt.proc {
                                    continue;
                                }
                                let LtKind::RvRecv { targets, .. } = &r.kind else {
                                    continue;
                                };
                                let arity_err = !values.is_empty() && values.len() != targets.len();
                                let conflict = intersects(&lt.glob_writes, &r.glob_writes);
                                self.receivers.push(ri);
                                self.ids.push(IdInfo {
                                    lt: li,
                                    recv: ri,
                                    static_err: arity_err || conflict,
                                });
                            }
                        }
                        _ => self.ids.push(IdInfo {
                            lt: li,
                            recv: NONE,
                            static_err: false,
                        }),
                    }
                    self.entries.push(Entry {
                        lt: li,
                        first_id,
                        recv_start,
                        recv_end: self.receivers.len() as u32,
                    });
                }
            }
        }
        self.ent_start.push(self.entries.len() as u32);
        self.transitions = self.ids.len();
        Ok(())
    }

    /// Numbers the steps of a synchronous system: process 0 is the most significant digit.
    fn number_sync(&mut self, diag: &Diag) -> Result<(), ModelError> {
        let prog = &self.prog;
        for p in 0..prog.procs.len() {
            let lts: Vec<u32> = (0..prog.lts.len() as u32)
                .filter(|&i| {
                    let lt = &prog.lts[i as usize];
                    lt.proc as usize == p
                        && !matches!(lt.kind, LtKind::BufSend { .. } | LtKind::BufRecv { .. })
                })
                .collect();
            self.sync_lts.push(lts);
        }
        let mut total: u64 = 1;
        for l in self.sync_lts.iter().rev() {
            self.sync_weight.push(total);
            total = total.saturating_mul(l.len() as u64);
        }
        if total > MAX_TRANSITION_IDS {
            let product = match total {
                u64::MAX => "more than 2^64".to_string(),
                n => n.to_string(),
            };
            return Err(diag.unsupported(
                prog.system_at,
                &format!(
                    "a 'system sync' with more than {MAX_TRANSITION_IDS} combinations of process transitions (the transition counts of its {} processes multiply to {product})",
                    prog.procs.len()
                ),
            ));
        }
        self.sync_weight.reverse();
        self.transitions = total as usize;
        Ok(())
    }

    /// The process transition of `system sync` step `id` that process `p` takes.
    fn sync_lt(&self, id: u64, p: usize) -> u32 {
        let k = (id / self.sync_weight[p]) as usize % self.sync_lts[p].len();
        self.sync_lts[p][k]
    }

    /// The label of id `id` (see the module docs), `None` for no such id.
    fn label(&self, id: usize) -> Option<String> {
        if id >= self.transitions {
            return None;
        }
        let name = |li: u32| self.prog.lts[li as usize].name.as_str();
        if self.prog.system == SystemKind::Sync {
            let names: Vec<&str> = (0..self.sync_lts.len())
                .map(|p| name(self.sync_lt(id as u64, p)))
                .collect();
            return Some(names.join("|"));
        }
        let info = self.ids[id];
        Some(if info.recv == NONE {
            name(info.lt).to_string()
        } else {
            format!("{}|{}", name(info.lt), name(info.recv))
        })
    }

    /// Whether `state` is the error state.
    fn is_error_state(&self, state: &[u8]) -> bool {
        state == &self.error_state[..]
    }

    fn check_len(&self, s: &[u8]) -> Result<(), ModelError> {
        crate::model::check_state_len(s, self.prog.state_len, "a DVE model")
    }

    fn internal(&self, what: &str) -> ModelError {
        ModelError::Invalid {
            path: self.path.clone(),
            message: format!("internal error evaluating the model: {what}"),
        }
    }

    /// Whether `src` is the error state (process 0 in its out-of-range state), and otherwise
    /// whether every process state is valid.
    fn classify(&self, src: &[u8]) -> Result<bool, ModelError> {
        let p0 = &self.prog.procs[0];
        if p0.state_of(src) as usize == p0.states.len() {
            return Ok(true);
        }
        for p in &self.prog.procs {
            if p.state_of(src) as usize >= p.states.len() {
                return Err(ModelError::Other(format!(
                    "process '{}' in state number {} of {} (not a state of this model)",
                    p.name,
                    p.state_of(src),
                    p.states.len()
                )));
            }
        }
        Ok(false)
    }

    fn any_committed(&self, src: &[u8]) -> bool {
        self.has_commit
            && self
                .prog
                .procs
                .iter()
                .any(|p| p.committed[p.state_of(src) as usize])
    }

    #[inline]
    fn guard(&self, code: Code, src: &[u8], stack: &mut [i32]) -> Result<Pass, ModelError> {
        if code.is_empty() {
            return Ok(Pass::Yes);
        }
        match vm::run(&self.prog.ops, code, &self.prog.pool, src, stack, None) {
            Ok(0) => Ok(Pass::No),
            Ok(_) => Ok(Pass::Yes),
            Err(Fault::Internal) => Err(self.internal("guard")),
            Err(_) => Ok(Pass::Fault),
        }
    }

    /// Whether transition `lt` (not a rendez-vous receive) may fire in `src` as far as its own
    /// process is concerned: control state, guard, buffer room or content.
    #[inline]
    fn local_pass(&self, li: u32, src: &[u8], stack: &mut [i32]) -> Result<Pass, ModelError> {
        let lt = &self.prog.lts[li as usize];
        if self.prog.procs[lt.proc as usize].state_of(src) != lt.from {
            return Ok(Pass::No);
        }
        let g = self.guard(lt.guard, src, stack)?;
        if g == Pass::No {
            return Ok(g);
        }
        match lt.kind {
            LtKind::BufSend { chan, .. } => {
                let ch = &self.prog.chans[chan as usize];
                if ch.count(src) >= ch.cap {
                    return Ok(Pass::No);
                }
            }
            LtKind::BufRecv { chan, .. } if self.prog.chans[chan as usize].count(src) == 0 => {
                return Ok(Pass::No);
            }
            _ => {}
        }
        Ok(g)
    }

    /// Writes the successor of `src` by `(lt, recv, fault)` (a transition, its receiver or
    /// `NONE`, whether it already faulted) into `dst`; the error state when it faulted before
    /// or while running its effects (then it returns `true`).
    fn apply(
        &self,
        src: &[u8],
        (lt, recv, fault): (u32, u32, bool),
        dst: &mut Vec<u8>,
        stack: &mut [i32],
        vals: &mut [i32],
    ) -> Result<bool, ModelError> {
        dst.clear();
        if !fault {
            dst.extend_from_slice(src);
            match self.execute(lt, recv, dst, stack, vals) {
                Ok(()) => return Ok(false),
                Err(Fault::Internal) => return Err(self.internal("effect")),
                Err(_) => dst.clear(),
            }
        }
        dst.extend_from_slice(&self.error_state);
        Ok(true)
    }

    /// Remembers transition `id` as leading to the error state, if it is the first.
    #[cold]
    fn faulted(&self, id: u64) {
        let _ = self
            .faulted
            .compare_exchange(0, id + 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The effect of a transition on `dst` (a copy of the source state): channel operation or
    /// rendez-vous value transfer first, then (for a rendez-vous) the receiver's state change and
    /// effects, then the transition's own state change and effects, each assignment seeing the
    /// previous ones.
    fn execute(
        &self,
        li: u32,
        recv: u32,
        dst: &mut [u8],
        stack: &mut [i32],
        vals: &mut [i32],
    ) -> Result<(), Fault> {
        let prog = &self.prog;
        let (ops, pool) = (&prog.ops[..], &prog.pool[..]);
        let lt = &prog.lts[li as usize];
        match &lt.kind {
            LtKind::Plain | LtKind::RvRecv { .. } => {}
            LtKind::RvSend { values, .. } => {
                if recv != NONE {
                    let r = &prog.lts[recv as usize];
                    if let LtKind::RvRecv { targets, .. } = &r.kind {
                        if !values.is_empty() {
                            for (i, &c) in values.iter().enumerate() {
                                *vals.get_mut(i).ok_or(Fault::Internal)? =
                                    vm::run(ops, c, pool, &*dst, stack, None)?;
                            }
                            for (i, &t) in targets.iter().enumerate() {
                                let v = *vals.get(i).ok_or(Fault::Internal)?;
                                vm::run(ops, t, pool, &mut *dst, stack, Some(v))?;
                            }
                        }
                    }
                    prog.procs[r.proc as usize].set_state(dst, r.to);
                    vm::run(ops, r.effects, pool, &mut *dst, stack, None)?;
                }
            }
            LtKind::BufSend { chan, values } => {
                let ch = &prog.chans[*chan as usize];
                let types = ch.types.as_deref().unwrap_or(&[]);
                let n = ch.count(dst);
                if n >= ch.cap {
                    return Err(Fault::Internal);
                }
                let mut at = ch.items_off() + (n * ch.item) as usize;
                for (&c, ty) in values.iter().zip(types) {
                    let v = vm::run(ops, c, pool, &*dst, stack, None)?;
                    // Items are stored in their declared type, converted like DiVinE does.
                    match ty {
                        ast::Ty::Byte => dst[at] = v as u8,
                        ast::Ty::Int => dst[at..at + 2].copy_from_slice(&(v as i16).to_le_bytes()),
                    }
                    at += ty.width();
                }
                ch.set_count(dst, n + 1);
            }
            LtKind::BufRecv { chan, targets } => {
                let ch = &prog.chans[*chan as usize];
                let types = ch.types.as_deref().unwrap_or(&[]);
                let n = ch.count(dst);
                if n == 0 || n > ch.cap {
                    // Not a state this model produces.
                    return Err(Fault::Internal);
                }
                let first = ch.items_off();
                let mut at = first;
                for (i, ty) in types.iter().enumerate() {
                    *vals.get_mut(i).ok_or(Fault::Internal)? = match ty {
                        ast::Ty::Byte => dst[at] as i32,
                        ast::Ty::Int => i16::from_le_bytes([dst[at], dst[at + 1]]) as i32,
                    };
                    at += ty.width();
                }
                // FIFO: shift the remaining items down and clear the freed slot, so that equal
                // queues have equal bytes.
                let item = ch.item as usize;
                let used = n as usize * item;
                dst.copy_within(first + item..first + used, first);
                dst[first + used - item..first + used].fill(0);
                ch.set_count(dst, n - 1);
                for (i, &t) in targets.iter().enumerate() {
                    let v = *vals.get(i).ok_or(Fault::Internal)?;
                    vm::run(ops, t, pool, &mut *dst, stack, Some(v))?;
                }
            }
        }
        prog.procs[lt.proc as usize].set_state(dst, lt.to);
        vm::run(ops, lt.effects, pool, &mut *dst, stack, None)?;
        Ok(())
    }

    /// The receiver half `r` of a rendez-vous: enabled in `src` (memoised per state).
    #[inline]
    fn receiver_pass(
        &self,
        r: u32,
        src: &[u8],
        committed: bool,
        s: &mut Scratch,
    ) -> Result<Pass, ModelError> {
        let ri = r as usize;
        if s.stamp[ri] == s.gen {
            return Ok(s.memo[ri]);
        }
        let lt = &self.prog.lts[ri];
        let p = &self.prog.procs[lt.proc as usize];
        let pass = if p.state_of(src) != lt.from || (committed && !p.committed[lt.from as usize]) {
            Pass::No
        } else {
            self.guard(lt.guard, src, &mut s.stack)?
        };
        s.stamp[ri] = s.gen;
        s.memo[ri] = pass;
        Ok(pass)
    }

    /// Calls `f(id, fault)` for every transition enabled in `src` (not the error state), in
    /// ascending id order.
    fn for_each_enabled(
        &self,
        src: &[u8],
        s: &mut Scratch,
        f: &mut dyn FnMut(u32, bool, &mut Scratch) -> Result<(), ModelError>,
    ) -> Result<(), ModelError> {
        let committed = self.any_committed(src);
        s.gen = s.gen.wrapping_add(1);
        if s.gen == 0 {
            s.stamp.fill(0);
            s.gen = 1;
        }
        for (p, proc_) in self.prog.procs.iter().enumerate() {
            let q = proc_.state_of(src) as usize;
            if committed && !proc_.committed[q] {
                continue;
            }
            let k = self.base[p] as usize + q;
            let (a, b) = (self.ent_start[k] as usize, self.ent_start[k + 1] as usize);
            for e in &self.entries[a..b] {
                let lt = &self.prog.lts[e.lt as usize];
                let pass = self.local_pass(e.lt, src, &mut s.stack)?;
                if pass == Pass::No {
                    continue;
                }
                if !matches!(lt.kind, LtKind::RvSend { .. }) {
                    f(e.first_id, pass == Pass::Fault, s)?;
                    continue;
                }
                for (k, ri) in (e.recv_start..e.recv_end).enumerate() {
                    let r = self.receivers[ri as usize];
                    let rp = self.receiver_pass(r, src, committed, s)?;
                    if rp == Pass::No {
                        continue;
                    }
                    let id = e.first_id + k as u32;
                    let fault = pass == Pass::Fault
                        || rp == Pass::Fault
                        || self.ids[id as usize].static_err;
                    f(id, fault, s)?;
                }
            }
        }
        Ok(())
    }

    /// `system sync`: the successor of one step, composed as DiVinE does from each process's
    /// own successor (`picks[p]`: process `p`'s transition and whether it faulted; `succ` holds
    /// the own successors by transition): each process's control state and locals come from
    /// its own successor, and each global variable from the successor of the transition that
    /// assigns it. Two transitions assigning a common global variable, or a fault, give the
    /// error state (then it returns `true`).
    fn sync_compose(
        &self,
        src: &[u8],
        picks: &[(u32, bool)],
        succ: &[u8],
        dst: &mut Vec<u8>,
    ) -> bool {
        let n = self.prog.state_len;
        dst.clear();
        let fault = picks.iter().any(|&(_, f)| f)
            || picks.iter().enumerate().any(|(i, &(a, _))| {
                picks[i + 1..].iter().any(|&(b, _)| {
                    intersects(
                        &self.prog.lts[a as usize].glob_writes,
                        &self.prog.lts[b as usize].glob_writes,
                    )
                })
            });
        if fault {
            dst.extend_from_slice(&self.error_state);
            return true;
        }
        dst.extend_from_slice(src);
        for (p, &(li, _)) in picks.iter().enumerate() {
            let lt = &self.prog.lts[li as usize];
            let own = &succ[li as usize * n..(li as usize + 1) * n];
            let (a, b) = self.prog.procs[p].region;
            dst[a as usize..b as usize].copy_from_slice(&own[a as usize..b as usize]);
            for &v in &lt.glob_writes {
                let var = &self.prog.vars[v as usize];
                if let compile::Slot::State(off) = var.slot {
                    let len = var.len.unwrap_or(1) as usize * var.ty.width();
                    let off = off as usize;
                    dst[off..off + len].copy_from_slice(&own[off..off + len]);
                }
            }
        }
        false
    }

    /// `system sync`: computes the own successor of transition `li` in `src` into its slot of
    /// `succ`; returns whether it is enabled and whether it faulted.
    fn sync_local(&self, li: u32, src: &[u8], s: &mut Scratch) -> Result<Option<bool>, ModelError> {
        let lt = &self.prog.lts[li as usize];
        if self.prog.procs[lt.proc as usize].state_of(src) != lt.from {
            return Ok(None);
        }
        let pass = self.guard(lt.guard, src, &mut s.stack)?;
        if pass == Pass::No {
            return Ok(None);
        }
        let n = self.prog.state_len;
        let need = self.prog.lts.len() * n;
        if s.sync_succ.len() < need {
            s.sync_succ.resize(need, 0);
        }
        let slot = &mut s.sync_succ[li as usize * n..(li as usize + 1) * n];
        slot.copy_from_slice(src);
        let mut fault = pass == Pass::Fault;
        if !fault {
            self.prog.procs[lt.proc as usize].set_state(slot, lt.to);
            match vm::run(
                &self.prog.ops,
                lt.effects,
                &self.prog.pool,
                &mut *slot,
                &mut s.stack,
                None,
            ) {
                Ok(_) => {}
                Err(Fault::Internal) => return Err(self.internal("effect")),
                Err(_) => fault = true,
            }
        }
        Ok(Some(fault))
    }

    fn sync_successors(
        &self,
        src: &[u8],
        s: &mut Scratch,
        sink: &mut dyn FnMut(TransitionId, LabelId, &[u8]),
    ) -> Result<(), ModelError> {
        let np = self.prog.procs.len();
        if s.sync_enabled.len() < np {
            s.sync_enabled.resize(np, Vec::new());
        }
        for p in 0..np {
            let mut en = std::mem::take(&mut s.sync_enabled[p]);
            en.clear();
            for (k, &li) in self.sync_lts[p].iter().enumerate() {
                if let Some(fault) = self.sync_local(li, src, s)? {
                    en.push((k as u32, fault));
                }
            }
            let empty = en.is_empty();
            s.sync_enabled[p] = en;
            if empty {
                return Ok(());
            }
        }
        // Odometer over the enabled choices, process 0 most significant: ascending ids.
        s.sync_pick.clear();
        s.sync_pick.resize(np, 0);
        let mut picks = std::mem::take(&mut s.sync_picks);
        let mut dst = std::mem::take(&mut s.dst);
        loop {
            picks.clear();
            let mut id = 0u64;
            for p in 0..np {
                let (k, fault) = s.sync_enabled[p][s.sync_pick[p]];
                id += k as u64 * self.sync_weight[p];
                picks.push((self.sync_lts[p][k as usize], fault));
            }
            if self.sync_compose(src, &picks, &s.sync_succ, &mut dst) {
                self.faulted(id);
            }
            sink(TransitionId(id as u32), LabelId(id as u32), &dst);
            let mut p = np;
            loop {
                if p == 0 {
                    s.dst = dst;
                    s.sync_picks = picks;
                    return Ok(());
                }
                p -= 1;
                s.sync_pick[p] += 1;
                if s.sync_pick[p] < s.sync_enabled[p].len() {
                    break;
                }
                s.sync_pick[p] = 0;
            }
        }
    }

    fn sync_fire(
        &self,
        src: &[u8],
        t: u64,
        s: &mut Scratch,
        dst: &mut Vec<u8>,
    ) -> Result<Fired, ModelError> {
        let np = self.prog.procs.len();
        let mut picks = Vec::with_capacity(np);
        for p in 0..np {
            let li = self.sync_lt(t, p);
            match self.sync_local(li, src, s)? {
                Some(fault) => picks.push((li, fault)),
                None => return Ok(Fired::Disabled),
            }
        }
        if self.sync_compose(src, &picks, &s.sync_succ, dst) {
            self.faulted(t);
        }
        Ok(Fired::Enabled(LabelId(t as u32)))
    }

    fn value_of(&self, v: &compile::VarInfo, s: &[u8]) -> String {
        let compile::Slot::State(off) = v.slot else {
            return String::new();
        };
        let read = |i: usize| -> i32 {
            let o = off as usize + i * v.ty.width();
            match v.ty {
                ast::Ty::Byte => s[o] as i32,
                ast::Ty::Int => i16::from_le_bytes([s[o], s[o + 1]]) as i32,
            }
        };
        match v.len {
            None => format!("{}={}", v.name, read(0)),
            Some(n) => {
                let items: Vec<String> = (0..n as usize).map(|i| read(i).to_string()).collect();
                format!("{}=[{}]", v.name, items.join(","))
            }
        }
    }
}

impl Model for DveModel {
    /// Shares the compiled model; only the scratch buffers are new.
    fn fork(&self) -> Option<Box<dyn Model + Send>> {
        Some(Box::new(DveModel::with_shared(Arc::clone(&self.shared))))
    }

    /// E.g. `DVE (async): 3 processes, 21 transition ids (4 rendez-vous pairs), 15-byte
    /// states`: ids, not explored transitions (see the module docs).
    fn describe(&self) -> String {
        let m = &*self.shared;
        let ids = counted(m.transitions, "transition id", "transition ids");
        let (kind, ids) = match m.prog.system {
            SystemKind::Async => {
                let pairs = m.ids.iter().filter(|i| i.recv != NONE).count();
                let pairs = counted(pairs, "rendez-vous pair", "rendez-vous pairs");
                ("async", format!("{ids} ({pairs})"))
            }
            SystemKind::Sync => (
                "sync",
                format!("{ids} (one per combination of process transitions)"),
            ),
        };
        format!(
            "DVE ({kind}): {}, {ids}, {}-byte states",
            counted(m.prog.procs.len(), "process", "processes"),
            m.prog.state_len
        )
    }

    fn initial_state(&self, out: &mut Vec<u8>) -> Result<(), ModelError> {
        out.clear();
        out.extend_from_slice(&self.shared.prog.initial);
        Ok(())
    }

    fn state_len(&self) -> Option<usize> {
        Some(self.shared.prog.state_len)
    }

    fn transition_count(&self) -> usize {
        self.shared.transitions
    }

    fn successors(
        &self,
        src: &[u8],
        sink: &mut dyn FnMut(TransitionId, LabelId, &[u8]),
    ) -> Result<(), ModelError> {
        let m = &*self.shared;
        m.check_len(src)?;
        if m.classify(src)? {
            return Ok(());
        }
        self.with_scratch(&self.scratch, |s| {
            if m.prog.system == SystemKind::Sync {
                return m.sync_successors(src, s, sink);
            }
            let mut dst = std::mem::take(&mut s.dst);
            let mut vals = std::mem::take(&mut s.vals);
            let r = m.for_each_enabled(src, s, &mut |id, fault, s| {
                let info = m.ids[id as usize];
                if m.apply(
                    src,
                    (info.lt, info.recv, fault),
                    &mut dst,
                    &mut s.stack,
                    &mut vals,
                )? {
                    m.faulted(id as u64);
                }
                sink(TransitionId(id), LabelId(id), &dst);
                Ok(())
            });
            s.dst = dst;
            s.vals = vals;
            r
        })
    }

    fn enabled(&self, src: &[u8], out: &mut Vec<TransitionId>) -> Result<(), ModelError> {
        let m = &*self.shared;
        out.clear();
        m.check_len(src)?;
        if m.classify(src)? {
            return Ok(());
        }
        if m.prog.system == SystemKind::Sync {
            return self.successors(src, &mut |t, _, _| out.push(t));
        }
        self.with_scratch(&self.scratch, |s| {
            m.for_each_enabled(src, s, &mut |id, _, _| {
                out.push(TransitionId(id));
                Ok(())
            })
        })
    }

    fn fire(&self, src: &[u8], t: TransitionId, dst: &mut Vec<u8>) -> Result<Fired, ModelError> {
        let m = &*self.shared;
        m.check_len(src)?;
        if t.0 as usize >= m.transitions || m.classify(src)? {
            return Ok(Fired::Disabled);
        }
        self.with_scratch(&self.fire_scratch, |s| {
            if m.prog.system == SystemKind::Sync {
                return m.sync_fire(src, t.0 as u64, s, dst);
            }
            let info = m.ids[t.0 as usize];
            let committed = m.any_committed(src);
            let lt = &m.prog.lts[info.lt as usize];
            if committed && !m.prog.procs[lt.proc as usize].committed[lt.from as usize] {
                return Ok(Fired::Disabled);
            }
            let mut fault = match m.local_pass(info.lt, src, &mut s.stack)? {
                Pass::No => return Ok(Fired::Disabled),
                p => p == Pass::Fault,
            };
            if info.recv != NONE {
                let r = &m.prog.lts[info.recv as usize];
                let rp = &m.prog.procs[r.proc as usize];
                if rp.state_of(src) != r.from || (committed && !rp.committed[r.from as usize]) {
                    return Ok(Fired::Disabled);
                }
                match m.guard(r.guard, src, &mut s.stack)? {
                    Pass::No => return Ok(Fired::Disabled),
                    p => fault |= p == Pass::Fault || info.static_err,
                }
            }
            let Scratch { stack, vals, .. } = s;
            if m.apply(src, (info.lt, info.recv, fault), dst, stack, vals)? {
                m.faulted(t.0 as u64);
            }
            Ok(Fired::Enabled(LabelId(t.0)))
        })
    }

    /// A rendez-vous (both halves) is a synchronisation, anything else a local step: the
    /// type-oriented cache replacement then keeps the states where processes meet.
    fn transition_kind(&self, t: TransitionId) -> u8 {
        let m = &*self.shared;
        match m.ids.get(t.0 as usize) {
            Some(i) if i.recv != NONE => crate::model::KIND_SYNC,
            _ => crate::model::KIND_LOCAL,
        }
    }

    /// Dependent when either id changes a process's committedness, or one writes what the
    /// other reads or writes: an id's read (write) set is the union of its transitions' sets,
    /// so the test runs over each transition of `a` against each of `b`.
    fn dependent(&self, a: TransitionId, b: TransitionId) -> bool {
        let m = &*self.shared;
        let (a, b) = (a.0 as usize, b.0 as usize);
        if m.prog.system == SystemKind::Sync || a == b || a >= m.ids.len() || b >= m.ids.len() {
            return true;
        }
        let (ha, hb) = (m.halves(a), m.halves(b));
        let changes_commit = |lt: &compile::Lt| {
            let c = &m.prog.procs[lt.proc as usize].committed;
            c[lt.from as usize] != c[lt.to as usize]
        };
        if ha.iter().chain(&hb).flatten().any(|lt| changes_commit(lt)) {
            return true;
        }
        ha.iter().flatten().any(|x| {
            hb.iter().flatten().any(|y| {
                intersects(&x.writes, &y.writes)
                    || intersects(&x.writes, &y.reads)
                    || intersects(&y.writes, &x.reads)
            })
        })
    }

    fn label_count(&self) -> usize {
        self.shared.transitions
    }

    fn error_transition(&self) -> Option<String> {
        match self.shared.faulted.load(Ordering::Relaxed) {
            0 => None,
            t => Some(self.label_name(LabelId((t - 1) as u32))),
        }
    }

    fn label_name(&self, l: LabelId) -> String {
        self.shared
            .label(l.0 as usize)
            .unwrap_or_else(|| format!("?{}", l.0))
    }

    fn format_state(&self, state: &[u8]) -> String {
        let m = &*self.shared;
        if state.len() != m.prog.state_len {
            return format!("{state:?}");
        }
        if m.is_error_state(state) {
            return "(error state)".into();
        }
        let mut parts = Vec::new();
        for v in m.prog.vars.iter().filter(|v| v.owner.is_none()) {
            if matches!(v.slot, compile::Slot::State(_)) {
                parts.push(m.value_of(v, state));
            }
        }
        for c in m.prog.chans.iter().filter(|c| c.cap > 0) {
            let n = c.count(state).min(c.cap) as usize;
            let mut items = Vec::new();
            let mut at = c.items_off();
            for _ in 0..n {
                let mut fields = Vec::new();
                for ty in c.types.as_deref().unwrap_or(&[]) {
                    fields.push(match ty {
                        ast::Ty::Byte => state[at] as i32,
                        ast::Ty::Int => i16::from_le_bytes([state[at], state[at + 1]]) as i32,
                    });
                    at += ty.width();
                }
                let f: Vec<String> = fields.iter().map(|v| v.to_string()).collect();
                items.push(format!("({})", f.join(",")));
            }
            parts.push(format!("{}=[{}]", c.name, items.join(",")));
        }
        for (pi, p) in m.prog.procs.iter().enumerate() {
            let q = p.state_of(state) as usize;
            let st = p.states.get(q).map(|s| s.as_str()).unwrap_or("?");
            let locals: Vec<String> = m
                .prog
                .vars
                .iter()
                .filter(|v| v.owner == Some(pi) && matches!(v.slot, compile::Slot::State(_)))
                .map(|v| m.value_of(v, state))
                .collect();
            if locals.is_empty() {
                parts.push(format!("{}:{st}", p.name));
            } else {
                parts.push(format!("{}:{st}({})", p.name, locals.join(" ")));
            }
        }
        parts.join(" ")
    }
}

impl DveModel {
    /// Runs `f` on the scratch space in `cell`, or on a fresh one if it is in use: a sink that
    /// calls back into the model (none does today) gets a fresh scratch instead of a panic.
    fn with_scratch<R>(&self, cell: &RefCell<Scratch>, f: impl FnOnce(&mut Scratch) -> R) -> R {
        match cell.try_borrow_mut() {
            Ok(mut s) => f(&mut s),
            Err(_) => f(&mut self.shared.fresh_scratch()),
        }
    }
}

impl Shared {
    /// The transitions asynchronous id `id` stands for: the transition (the sending half of a
    /// rendez-vous) and the receiving half; `[None, None]` for no such id.
    fn halves(&self, id: usize) -> [Option<&compile::Lt>; 2] {
        match self.ids.get(id) {
            Some(i) => [
                Some(&self.prog.lts[i.lt as usize]),
                (i.recv != NONE).then(|| &self.prog.lts[i.recv as usize]),
            ],
            None => [None, None],
        }
    }

    fn fresh_scratch(&self) -> Scratch {
        Scratch {
            dst: Vec::with_capacity(self.prog.state_len),
            stack: vec![0; self.prog.max_stack],
            vals: vec![0; self.prog.max_arity.max(1)],
            stamp: vec![0; self.prog.lts.len()],
            memo: vec![Pass::No; self.prog.lts.len()],
            ..Scratch::default()
        }
    }
}

#[cfg(test)]
mod tests;
