//! Recursive-descent parser for DVE (the grammar of DiVinE's `dve_grammar.yy`, the
//! interpreter that produced the BEEM counts), with a few harmless relaxations: `init`,
//! `accept`, `commit` and `assert` clauses in any order, `guard`, `sync` and `effect` in any
//! order, `guard e1, e2;` as a conjunction, and the `;` after the last transition optional.
//!
//! Binary operator precedence, from loosest to tightest (all left-associative, as in DiVinE —
//! note that `&&` and `||` share one level, and so do `&`, `|` and `^`):
//!
//! | level | operators |
//! |---|---|
//! | 1 | `imply` (`=>`) |
//! | 2 | `or` `||` `and` `&&` |
//! | 3 | `&` `|` `^` |
//! | 4 | `==` `!=` |
//! | 5 | `<` `<=` `>` `>=` |
//! | 6 | `<<` `>>` |
//! | 7 | `+` `-` |
//! | 8 | `*` `/` `%` |
//!
//! Unary `-`, `~`, `not`/`!` bind tighter than any binary operator. Expressions deeper than
//! [`MAX_DEPTH`] are refused (with a position), so no input can exhaust the stack.

use super::ast::*;
use super::lexer::{Tok, Token};
use super::Diag;
use crate::error::ModelError;

/// The deepest expression tree accepted (parentheses, operator chains, indices).
pub const MAX_DEPTH: u32 = 200;

pub struct Parser<'a> {
    toks: &'a [Token],
    pos: usize,
    diag: &'a Diag<'a>,
    /// How many expression levels are being parsed right now (bounds the recursion).
    nest: u32,
}

type R<T> = Result<T, ModelError>;

fn binop(t: &Tok) -> Option<(u8, BinOp)> {
    Some(match t {
        Tok::Imply => (1, BinOp::Imply),
        Tok::OrOr => (2, BinOp::Or),
        Tok::AndAnd => (2, BinOp::And),
        Tok::Amp => (3, BinOp::BitAnd),
        Tok::Pipe => (3, BinOp::BitOr),
        Tok::Caret => (3, BinOp::BitXor),
        Tok::Eq => (4, BinOp::Eq),
        Tok::Ne => (4, BinOp::Ne),
        Tok::Lt => (5, BinOp::Lt),
        Tok::Le => (5, BinOp::Le),
        Tok::Gt => (5, BinOp::Gt),
        Tok::Ge => (5, BinOp::Ge),
        Tok::Shl => (6, BinOp::Shl),
        Tok::Shr => (6, BinOp::Shr),
        Tok::Plus => (7, BinOp::Add),
        Tok::Minus => (7, BinOp::Sub),
        Tok::Star => (8, BinOp::Mul),
        Tok::Slash => (8, BinOp::Div),
        Tok::Percent => (8, BinOp::Mod),
        _ => return None,
    })
}

impl<'a> Parser<'a> {
    pub fn new(toks: &'a [Token], diag: &'a Diag<'a>) -> Self {
        Parser {
            toks,
            pos: 0,
            diag,
            nest: 0,
        }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek2(&self) -> &Tok {
        &self.toks[(self.pos + 1).min(self.toks.len() - 1)].tok
    }

    fn at(&self) -> usize {
        self.toks[self.pos].at
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    fn unexpected<T>(&self, what: &str) -> R<T> {
        Err(self.diag.syntax(
            self.at(),
            &format!("expected {what}, found {}", self.peek().describe()),
        ))
    }

    fn expect(&mut self, t: &Tok, what: &str) -> R<()> {
        if self.eat(t) {
            Ok(())
        } else {
            self.unexpected(what)
        }
    }

    fn name(&mut self, what: &str) -> R<Name> {
        match self.peek().clone() {
            Tok::Ident(text) => {
                let at = self.at();
                self.bump();
                Ok(Name { text, at })
            }
            _ => self.unexpected(what),
        }
    }

    /// The whole file.
    pub fn spec(&mut self) -> R<Spec> {
        let mut vars = Vec::new();
        let mut chans = Vec::new();
        loop {
            match self.peek() {
                Tok::Const | Tok::Byte | Tok::Int => self.var_decls(&mut vars)?,
                Tok::Channel => self.chan_decls(&mut chans)?,
                _ => break,
            }
        }
        let mut procs = Vec::new();
        while self.peek() == &Tok::Process {
            procs.push(self.process()?);
        }
        if procs.is_empty() {
            return self.unexpected("a declaration or 'process'");
        }
        if self.peek() != &Tok::System {
            return self.unexpected("'process' or 'system'");
        }
        let system_at = self.at();
        self.bump();
        let system = match self.peek() {
            Tok::Async => SystemKind::Async,
            Tok::Sync => SystemKind::Sync,
            _ => return self.unexpected("'async' or 'sync'"),
        };
        self.bump();
        if self.peek() == &Tok::Property {
            return Err(self.diag.unsupported(
                self.at(),
                "a property process ('system … property P'); explore the plain instance",
            ));
        }
        self.expect(&Tok::Semi, "';' after the system type")?;
        if self.peek() != &Tok::Eof {
            return self.unexpected("end of file after 'system …;'");
        }
        Ok(Spec {
            vars,
            chans,
            procs,
            system,
            system_at,
        })
    }

    fn ty(&mut self) -> R<Ty> {
        match self.peek() {
            Tok::Byte => {
                self.bump();
                Ok(Ty::Byte)
            }
            Tok::Int => {
                self.bump();
                Ok(Ty::Int)
            }
            _ => self.unexpected("a type ('byte' or 'int')"),
        }
    }

    /// The optional `[e]` after a declared name (an array size, a channel capacity); `close`
    /// names the missing `]` in the error.
    fn bracketed(&mut self, close: &str) -> R<Option<Expr>> {
        if !self.eat(&Tok::LBracket) {
            return Ok(None);
        }
        let e = self.expr()?;
        self.expect(&Tok::RBracket, close)?;
        Ok(Some(e))
    }

    /// `item, item, … }` after a `{`: one item at least; `close` names the missing `}`.
    fn braced_list<T>(&mut self, item: fn(&mut Self) -> R<T>, close: &str) -> R<Vec<T>> {
        let mut items = vec![item(self)?];
        while self.eat(&Tok::Comma) {
            items.push(item(self)?);
        }
        self.expect(&Tok::RBrace, close)?;
        Ok(items)
    }

    /// `[const] byte|int x [N] [= init], …;`
    fn var_decls(&mut self, out: &mut Vec<VarDecl>) -> R<()> {
        let is_const = self.eat(&Tok::Const);
        let ty = self.ty()?;
        loop {
            let name = self.name("a variable name")?;
            let array = self.bracketed("']' after the array size")?;
            let init = if self.eat(&Tok::Assign) {
                if self.peek() == &Tok::LBrace {
                    let at = self.at();
                    self.bump();
                    let items =
                        self.braced_list(Self::expr, "',' or '}' in the initialiser list")?;
                    Some(Init::List(items, at))
                } else {
                    Some(Init::Scalar(self.expr()?))
                }
            } else {
                None
            };
            out.push(VarDecl {
                name,
                ty,
                is_const,
                array,
                init,
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::Semi, "',' or ';' after the declaration")
    }

    /// `channel a, b;` or `channel {byte, int} c[N], …;`
    fn chan_decls(&mut self, out: &mut Vec<ChanDecl>) -> R<()> {
        self.bump();
        let types = if self.eat(&Tok::LBrace) {
            Some(self.braced_list(Self::ty, "',' or '}' in the channel type list")?)
        } else {
            None
        };
        loop {
            let name = self.name("a channel name")?;
            let size = self.bracketed("']' after the channel capacity")?;
            out.push(ChanDecl {
                name,
                types: types.clone(),
                size,
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::Semi, "',' or ';' after the channel declaration")
    }

    fn name_list(&mut self, what: &str) -> R<Vec<Name>> {
        let mut v = vec![self.name(what)?];
        while self.eat(&Tok::Comma) {
            v.push(self.name(what)?);
        }
        self.expect(&Tok::Semi, "',' or ';'")?;
        Ok(v)
    }

    fn process(&mut self) -> R<ProcDecl> {
        self.bump();
        let name = self.name("a process name")?;
        self.expect(&Tok::LBrace, "'{' after the process name")?;
        let mut vars = Vec::new();
        loop {
            match self.peek() {
                Tok::Const | Tok::Byte | Tok::Int => self.var_decls(&mut vars)?,
                Tok::Channel => {
                    return Err(self.diag.unsupported(
                        self.at(),
                        "a channel declared inside a process (declare it globally)",
                    ))
                }
                _ => break,
            }
        }
        self.expect(&Tok::State, "a local declaration or 'state'")?;
        let states = self.name_list("a state name")?;
        let mut init = None;
        let mut accept = Vec::new();
        let mut commit = Vec::new();
        let mut asserts = Vec::new();
        let mut trans = Vec::new();
        loop {
            match self.peek() {
                Tok::Init => {
                    let at = self.at();
                    self.bump();
                    if init.is_some() {
                        return Err(self.diag.syntax(at, "a second 'init' clause"));
                    }
                    let n = self.name("the initial state")?;
                    self.expect(&Tok::Semi, "';' after the initial state")?;
                    init = Some(n);
                }
                Tok::Accept => {
                    self.bump();
                    if let Tok::Ident(kind) = self.peek() {
                        match kind.as_str() {
                            "buchi" => {
                                self.bump();
                            }
                            "genbuchi" | "muller" | "rabin" | "streett" => {
                                return Err(self.diag.unsupported(
                                    self.at(),
                                    &format!("'accept {kind}' acceptance conditions"),
                                ))
                            }
                            _ => {}
                        }
                    }
                    accept.extend(self.name_list("an accepting state")?);
                }
                Tok::Commit => {
                    self.bump();
                    commit.extend(self.name_list("a committed state")?);
                }
                Tok::Assert => {
                    self.bump();
                    loop {
                        let s = self.name("a state name")?;
                        self.expect(&Tok::Colon, "':' after the state of an assertion")?;
                        let e = self.expr()?;
                        asserts.push((s, e));
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                    self.expect(&Tok::Semi, "',' or ';' after the assertions")?;
                }
                Tok::Trans => {
                    self.bump();
                    self.transitions(&mut trans)?;
                }
                Tok::RBrace => {
                    self.bump();
                    break;
                }
                _ => {
                    return self.unexpected("'init', 'accept', 'commit', 'assert', 'trans' or '}'")
                }
            }
        }
        Ok(ProcDecl {
            name,
            vars,
            states,
            init,
            accept,
            commit,
            asserts,
            trans,
        })
    }

    /// `a -> b { … }, -> c { … }, d -> e { … };` (a transition starting with `->` leaves the
    /// state of the previous one).
    fn transitions(&mut self, out: &mut Vec<TransDecl>) -> R<()> {
        let mut prev: Option<Name> = None;
        loop {
            let at = self.at();
            let from = if self.peek() == &Tok::Arrow {
                match &prev {
                    Some(p) => Name {
                        text: p.text.clone(),
                        at,
                    },
                    None => return self.unexpected("a source state"),
                }
            } else {
                self.name("a source state")?
            };
            self.expect(&Tok::Arrow, "'->' between the states of a transition")?;
            let to = self.name("a target state")?;
            self.expect(&Tok::LBrace, "'{' opening the transition body")?;
            let mut t = TransDecl {
                at,
                from: from.clone(),
                to,
                guards: Vec::new(),
                sync: None,
                effects: Vec::new(),
            };
            let (mut seen_guard, mut seen_effect) = (false, false);
            loop {
                let kw_at = self.at();
                match self.peek() {
                    Tok::Guard => {
                        self.bump();
                        if seen_guard {
                            return Err(self.diag.syntax(kw_at, "a second 'guard' clause"));
                        }
                        seen_guard = true;
                        t.guards.push(self.expr()?);
                        while self.eat(&Tok::Comma) {
                            t.guards.push(self.expr()?);
                        }
                        self.expect(&Tok::Semi, "';' after the guard")?;
                    }
                    Tok::Sync => {
                        self.bump();
                        if t.sync.is_some() {
                            return Err(self.diag.syntax(kw_at, "a second 'sync' clause"));
                        }
                        t.sync = Some(self.sync_spec(kw_at)?);
                    }
                    Tok::Effect => {
                        self.bump();
                        if seen_effect {
                            return Err(self.diag.syntax(kw_at, "a second 'effect' clause"));
                        }
                        seen_effect = true;
                        loop {
                            let target = self.expr()?;
                            self.expect(&Tok::Assign, "'=' in the assignment")?;
                            let value = self.expr()?;
                            t.effects.push(Assignment { target, value });
                            if !self.eat(&Tok::Comma) {
                                break;
                            }
                        }
                        self.expect(&Tok::Semi, "',' or ';' after the effects")?;
                    }
                    Tok::RBrace => {
                        self.bump();
                        break;
                    }
                    _ => return self.unexpected("'guard', 'sync', 'effect' or '}'"),
                }
            }
            out.push(t);
            prev = Some(from);
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::Semi => {
                    self.bump();
                    return Ok(());
                }
                Tok::RBrace => return Ok(()),
                _ => return self.unexpected("',' or ';' after the transition"),
            }
        }
    }

    fn sync_spec(&mut self, at: usize) -> R<SyncSpec> {
        let chan = self.name("a channel name")?;
        let send = match self.peek() {
            Tok::Bang => true,
            Tok::Question => false,
            _ => return self.unexpected("'!' or '?' after the channel"),
        };
        self.bump();
        let mut values = Vec::new();
        if self.eat(&Tok::LBrace) {
            values.push(self.expr()?);
            while self.eat(&Tok::Comma) {
                values.push(self.expr()?);
            }
            self.expect(&Tok::RBrace, "',' or '}' in the value list")?;
        } else if self.peek() != &Tok::Semi {
            values.push(self.expr()?);
        }
        self.expect(&Tok::Semi, "';' after the synchronisation")?;
        Ok(SyncSpec {
            at,
            chan,
            send,
            values,
        })
    }

    /// An expression (the loosest level).
    pub fn expr(&mut self) -> R<Expr> {
        self.binary(1)
    }

    fn mk(&self, kind: ExprKind, at: usize, depth: u32) -> R<Expr> {
        if depth > MAX_DEPTH {
            return Err(self.diag.unsupported(
                at,
                &format!("an expression nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(Expr { kind, at, depth })
    }

    fn binary(&mut self, min: u8) -> R<Expr> {
        let mut lhs = self.unary()?;
        while let Some((level, op)) = binop(self.peek()) {
            if level < min {
                break;
            }
            self.bump();
            let rhs = self.binary(level + 1)?;
            let (at, d) = (lhs.at, 1 + lhs.depth.max(rhs.depth));
            lhs = self.mk(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), at, d)?;
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> R<Expr> {
        // Every recursion of the expression parser passes through here.
        if self.nest >= MAX_DEPTH {
            return Err(self.diag.unsupported(
                self.at(),
                &format!("an expression nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        self.nest += 1;
        let r = self.unary_inner();
        self.nest -= 1;
        r
    }

    fn unary_inner(&mut self) -> R<Expr> {
        let at = self.at();
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Tilde => UnOp::BitNot,
            Tok::Not | Tok::Bang => UnOp::Not,
            _ => return self.primary(),
        };
        self.bump();
        let e = self.unary()?;
        let d = e.depth + 1;
        self.mk(ExprKind::Unary(op, Box::new(e)), at, d)
    }

    fn primary(&mut self) -> R<Expr> {
        let at = self.at();
        match self.peek().clone() {
            Tok::Num(v) => {
                self.bump();
                self.mk(ExprKind::Num(v), at, 1)
            }
            Tok::True => {
                self.bump();
                self.mk(ExprKind::Num(1), at, 1)
            }
            Tok::False => {
                self.bump();
                self.mk(ExprKind::Num(0), at, 1)
            }
            Tok::LParen => {
                self.bump();
                let mut e = self.expr()?;
                self.expect(&Tok::RParen, "')'")?;
                e.depth += 1;
                if e.depth > MAX_DEPTH {
                    return self.mk(ExprKind::Num(0), at, e.depth);
                }
                Ok(e)
            }
            Tok::Ident(_) => {
                let name = self.name("an identifier")?;
                match self.peek() {
                    Tok::LBracket => {
                        self.bump();
                        let idx = self.expr()?;
                        self.expect(&Tok::RBracket, "']' after the index")?;
                        let d = idx.depth + 1;
                        self.mk(ExprKind::Index(name, Box::new(idx)), at, d)
                    }
                    Tok::Dot => {
                        self.bump();
                        let state = self.name("a state name after '.'")?;
                        self.mk(ExprKind::InState(name, state), at, 1)
                    }
                    // `P->x` inside an expression; a transition's `a -> b {` is never parsed
                    // as an expression, and `x -> y` cannot follow a complete expression
                    // elsewhere.
                    Tok::Arrow if matches!(self.peek2(), Tok::Ident(_)) => {
                        self.bump();
                        let var = self.name("a variable name after '->'")?;
                        if self.eat(&Tok::LBracket) {
                            let idx = self.expr()?;
                            self.expect(&Tok::RBracket, "']' after the index")?;
                            let d = idx.depth + 1;
                            self.mk(ExprKind::Foreign(name, var, Some(Box::new(idx))), at, d)
                        } else {
                            self.mk(ExprKind::Foreign(name, var, None), at, 1)
                        }
                    }
                    _ => self.mk(ExprKind::Var(name), at, 1),
                }
            }
            _ => self.unexpected("an expression"),
        }
    }
}
