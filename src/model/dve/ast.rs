//! The syntax tree of a DVE file, as written (names unresolved). Every node keeps the byte
//! offset of its first token so that semantic errors can name a line and column.

/// A variable type: `byte` is unsigned 8-bit, `int` signed 16-bit (as in DiVinE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Byte,
    Int,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Byte => "byte",
            Ty::Int => "int",
        }
    }
    /// Bytes in the state vector.
    pub fn width(self) -> usize {
        match self {
            Ty::Byte => 1,
            Ty::Int => 2,
        }
    }
    /// Whether `v` is a value of the type.
    pub fn holds(self, v: i64) -> bool {
        match self {
            Ty::Byte => (0..=255).contains(&v),
            Ty::Int => (i16::MIN as i64..=i16::MAX as i64).contains(&v),
        }
    }
}

/// A name and where it is written.
#[derive(Clone, Debug)]
pub struct Name {
    pub text: String,
    pub at: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    BitNot,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
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
    And,
    Or,
    Imply,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Num(i64),
    /// A variable or constant (scalar), or an array used without index (an error found later).
    Var(Name),
    /// `a[e]`
    Index(Name, Box<Expr>),
    /// `P->x` or `P->x[e]`: a local variable of another process.
    Foreign(Name, Name, Option<Box<Expr>>),
    /// `P.s`: whether process `P` is in state `s`.
    InState(Name, Name),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub at: usize,
    /// Height of the tree (1 for a leaf); bounded by the parser so that recursive passes
    /// over it cannot exhaust the stack.
    pub depth: u32,
}

/// `= e` or `= { e, e, … }`.
#[derive(Clone, Debug)]
pub enum Init {
    Scalar(Expr),
    List(Vec<Expr>, usize),
}

/// One declared variable or constant.
#[derive(Clone, Debug)]
pub struct VarDecl {
    pub name: Name,
    pub ty: Ty,
    pub is_const: bool,
    /// The array size expression, for arrays.
    pub array: Option<Expr>,
    pub init: Option<Init>,
}

/// One declared channel: untyped (`channel c;`) or typed (`channel {byte, int} c[N];`,
/// buffered when `N > 0`).
#[derive(Clone, Debug)]
pub struct ChanDecl {
    pub name: Name,
    pub types: Option<Vec<Ty>>,
    pub size: Option<Expr>,
}

/// `sync c!e` / `sync c!{e, e}` / `sync c?x` / `sync c?{x, a[i]}`; receive targets are
/// parsed as expressions and checked to be assignable by the compiler.
#[derive(Clone, Debug)]
pub struct SyncSpec {
    pub at: usize,
    pub chan: Name,
    pub send: bool,
    pub values: Vec<Expr>,
}

#[derive(Clone, Debug)]
pub struct Assignment {
    pub target: Expr,
    pub value: Expr,
}

#[derive(Clone, Debug)]
pub struct TransDecl {
    pub at: usize,
    pub from: Name,
    pub to: Name,
    pub guards: Vec<Expr>,
    pub sync: Option<SyncSpec>,
    pub effects: Vec<Assignment>,
}

#[derive(Clone, Debug)]
pub struct ProcDecl {
    pub name: Name,
    pub vars: Vec<VarDecl>,
    pub states: Vec<Name>,
    pub init: Option<Name>,
    pub accept: Vec<Name>,
    pub commit: Vec<Name>,
    pub asserts: Vec<(Name, Expr)>,
    pub trans: Vec<TransDecl>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemKind {
    Async,
    Sync,
}

/// A whole DVE file.
#[derive(Clone, Debug)]
pub struct Spec {
    pub vars: Vec<VarDecl>,
    pub chans: Vec<ChanDecl>,
    pub procs: Vec<ProcDecl>,
    pub system: SystemKind,
    /// Where the `system` declaration is.
    pub system_at: usize,
}
