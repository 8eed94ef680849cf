//! Tokens of the DVE language, each with the byte offset it starts at (for line:column
//! messages).
//!
//! Keywords are reserved words as in DiVinE; `and`/`&&`, `or`/`||`, `not`/`!` and
//! `imply`/`=>` are synonyms. `!` is also the send mark of `sync c!e`: the parser decides by
//! position, so the lexer only produces one `Bang` token.

use super::Diag;
use crate::error::ModelError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    Num(i64),
    // keywords
    Byte,
    Int,
    Const,
    Channel,
    Process,
    State,
    Init,
    Accept,
    Commit,
    Assert,
    Trans,
    Guard,
    Sync,
    Effect,
    System,
    Async,
    Property,
    True,
    False,
    // punctuation and operators
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Semi,
    Comma,
    Colon,
    Dot,
    Arrow,
    Bang,
    Question,
    Assign,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Amp,
    Pipe,
    Caret,
    Tilde,
    Shl,
    Shr,
    AndAnd,
    OrOr,
    Not,
    Imply,
    Eof,
}

impl Tok {
    /// How the token is written, for "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        let s = match self {
            Tok::Ident(n) => return format!("identifier '{n}'"),
            Tok::Num(n) => return format!("number {n}"),
            Tok::Eof => return "end of file".into(),
            Tok::Byte => "byte",
            Tok::Int => "int",
            Tok::Const => "const",
            Tok::Channel => "channel",
            Tok::Process => "process",
            Tok::State => "state",
            Tok::Init => "init",
            Tok::Accept => "accept",
            Tok::Commit => "commit",
            Tok::Assert => "assert",
            Tok::Trans => "trans",
            Tok::Guard => "guard",
            Tok::Sync => "sync",
            Tok::Effect => "effect",
            Tok::System => "system",
            Tok::Async => "async",
            Tok::Property => "property",
            Tok::True => "true",
            Tok::False => "false",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Semi => ";",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Dot => ".",
            Tok::Arrow => "->",
            Tok::Bang => "!",
            Tok::Question => "?",
            Tok::Assign => "=",
            Tok::Eq => "==",
            Tok::Ne => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Amp => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Tilde => "~",
            Tok::Shl => "<<",
            Tok::Shr => ">>",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Not => "not",
            Tok::Imply => "imply",
        };
        format!("'{s}'")
    }
}

/// A token and the byte offset where it starts.
#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub at: usize,
}

fn keyword(word: &str) -> Option<Tok> {
    Some(match word {
        "byte" => Tok::Byte,
        "int" => Tok::Int,
        "const" => Tok::Const,
        "channel" => Tok::Channel,
        "process" => Tok::Process,
        "state" => Tok::State,
        "init" => Tok::Init,
        "accept" => Tok::Accept,
        "commit" => Tok::Commit,
        "assert" => Tok::Assert,
        "trans" => Tok::Trans,
        "guard" => Tok::Guard,
        "sync" => Tok::Sync,
        "effect" => Tok::Effect,
        "system" => Tok::System,
        "async" => Tok::Async,
        "property" => Tok::Property,
        "true" => Tok::True,
        "false" => Tok::False,
        "and" => Tok::AndAnd,
        "or" => Tok::OrOr,
        "not" => Tok::Not,
        "imply" => Tok::Imply,
        _ => return None,
    })
}

/// Splits `text` into tokens; the last one is always `Eof`.
pub fn tokenize(text: &[u8], diag: &Diag) -> Result<Vec<Token>, ModelError> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = text.len();
    while i < n {
        let c = text[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && i + 1 < n && text[i + 1] == b'/' {
            while i < n && text[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && i + 1 < n && text[i + 1] == b'*' {
            let start = i;
            i += 2;
            loop {
                if i + 1 >= n {
                    return Err(diag.syntax(start, "unterminated comment (missing */)"));
                }
                if text[i] == b'*' && text[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
            continue;
        }
        let at = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < n && (text[i].is_ascii_alphanumeric() || text[i] == b'_') {
                i += 1;
            }
            // Only ASCII bytes were consumed, so this is valid UTF-8.
            let word = String::from_utf8_lossy(&text[at..i]).into_owned();
            let tok = keyword(&word).unwrap_or(Tok::Ident(word));
            out.push(Token { tok, at });
            continue;
        }
        if c.is_ascii_digit() {
            let mut v: i64 = 0;
            while i < n && text[i].is_ascii_digit() {
                v = match v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add((text[i] - b'0') as i64))
                {
                    Some(v) if v <= i32::MAX as i64 => v,
                    _ => return Err(diag.syntax(at, "number too large (the limit is 2147483647)")),
                };
                i += 1;
            }
            if i < n && (text[i].is_ascii_alphabetic() || text[i] == b'_') {
                return Err(diag.syntax(at, "malformed number (a digit followed by a letter)"));
            }
            out.push(Token {
                tok: Tok::Num(v),
                at,
            });
            continue;
        }
        let next = if i + 1 < n { text[i + 1] } else { 0 };
        let (tok, len) = match (c, next) {
            (b'-', b'>') => (Tok::Arrow, 2),
            (b'=', b'=') => (Tok::Eq, 2),
            (b'=', b'>') => (Tok::Imply, 2),
            (b'!', b'=') => (Tok::Ne, 2),
            (b'<', b'=') => (Tok::Le, 2),
            (b'>', b'=') => (Tok::Ge, 2),
            (b'<', b'<') => (Tok::Shl, 2),
            (b'>', b'>') => (Tok::Shr, 2),
            (b'&', b'&') => (Tok::AndAnd, 2),
            (b'|', b'|') => (Tok::OrOr, 2),
            (b'{', _) => (Tok::LBrace, 1),
            (b'}', _) => (Tok::RBrace, 1),
            (b'(', _) => (Tok::LParen, 1),
            (b')', _) => (Tok::RParen, 1),
            (b'[', _) => (Tok::LBracket, 1),
            (b']', _) => (Tok::RBracket, 1),
            (b';', _) => (Tok::Semi, 1),
            (b',', _) => (Tok::Comma, 1),
            (b':', _) => (Tok::Colon, 1),
            (b'.', _) => (Tok::Dot, 1),
            (b'!', _) => (Tok::Bang, 1),
            (b'?', _) => (Tok::Question, 1),
            (b'=', _) => (Tok::Assign, 1),
            (b'<', _) => (Tok::Lt, 1),
            (b'>', _) => (Tok::Gt, 1),
            (b'+', _) => (Tok::Plus, 1),
            (b'-', _) => (Tok::Minus, 1),
            (b'*', _) => (Tok::Star, 1),
            (b'/', _) => (Tok::Slash, 1),
            (b'%', _) => (Tok::Percent, 1),
            (b'&', _) => (Tok::Amp, 1),
            (b'|', _) => (Tok::Pipe, 1),
            (b'^', _) => (Tok::Caret, 1),
            (b'~', _) => (Tok::Tilde, 1),
            _ => {
                let shown = if c.is_ascii_graphic() {
                    format!("'{}'", c as char)
                } else {
                    format!("byte 0x{c:02x}")
                };
                return Err(diag.syntax(at, &format!("unexpected character {shown}")));
            }
        };
        out.push(Token { tok, at });
        i += len;
    }
    out.push(Token {
        tok: Tok::Eof,
        at: n,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn toks(s: &str) -> Vec<Tok> {
        let d = Diag::new(s.as_bytes(), Path::new("t.dve"));
        tokenize(s.as_bytes(), &d)
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn operators_comments_and_keywords() {
        assert_eq!(
            toks("a->b /* x */ c!=1 // y\n and not => <<="),
            vec![
                Tok::Ident("a".into()),
                Tok::Arrow,
                Tok::Ident("b".into()),
                Tok::Ident("c".into()),
                Tok::Ne,
                Tok::Num(1),
                Tok::AndAnd,
                Tok::Not,
                Tok::Imply,
                Tok::Shl,
                Tok::Assign,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn errors_have_positions() {
        let s = "byte x;\n  x = 9999999999;";
        let d = Diag::new(s.as_bytes(), Path::new("t.dve"));
        let e = tokenize(s.as_bytes(), &d).unwrap_err().to_string();
        assert!(e.contains("t.dve:2:7"), "{e}");
        let s = "/* open";
        let d = Diag::new(s.as_bytes(), Path::new("t.dve"));
        let e = tokenize(s.as_bytes(), &d).unwrap_err().to_string();
        assert!(e.contains("t.dve:1:1") && e.contains("unterminated"), "{e}");
        let s = "x $";
        let d = Diag::new(s.as_bytes(), Path::new("t.dve"));
        let e = tokenize(s.as_bytes(), &d).unwrap_err().to_string();
        assert!(e.contains("1:3"), "{e}");
        // Columns count characters: three 2-byte 'é' before the '$' (character 26, byte 29).
        let s = "byte y;\nbyte x; /* é é é */ byte $;";
        let d = Diag::new(s.as_bytes(), Path::new("t.dve"));
        let e = tokenize(s.as_bytes(), &d).unwrap_err().to_string();
        assert!(e.contains("t.dve:2:26: unexpected character '$'"), "{e}");
    }
}
