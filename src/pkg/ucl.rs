//! A bounded reader for the part of UCL that pkg's own files use.
//!
//! pkg(8) reads its repository configurations (`/etc/pkg/FreeBSD.conf`),
//! a repository's `meta.conf` and its fingerprint files with libucl. There
//! is no well-kept pure-Rust UCL crate (the ones on crates.io are
//! unmaintained bindings or partial parsers last released years ago), and
//! binding libucl would add a C library to a Rust build for a few
//! kilobytes of configuration. So jbuild reads the subset those files are
//! written in, and refuses the rest by name instead of guessing:
//!
//! - an implicit top-level object (`key: value` lines) or a braced one;
//! - keys bare (`FreeBSD`, `signature_type`, `FreeBSD-ports`) or quoted,
//!   followed by `:` or `=` (or nothing before `{`);
//! - values: double-quoted strings with JSON's escapes, single-quoted
//!   strings, numbers, `true/false/yes/no/on/off`, bare words (`tzst`),
//!   objects `{}` and arrays `[]`;
//! - `;`, `,` and line ends between pairs; `#` and `/* */` comments.
//!
//! Macros (`.include`), heredocs (`<<EOD`) and UCL's own variables are
//! errors naming the line: pkg's files carry none, and a reader of an image's
//! configuration should not open other files on its say. A repeated key is
//! kept twice, in order (UCL makes an implicit array of it; pkg applies
//! both, the later last), so callers see what libucl's iteration shows.
//!
//! Bounded: [`MAX_TEXT`] bytes, [`MAX_DEPTH`] levels, [`MAX_VALUES`] values.

use std::fmt;

/// The most bytes one UCL text may have (pkg's files are a few KiB).
pub const MAX_TEXT: usize = 1 << 20;
/// The most nested objects and arrays.
pub const MAX_DEPTH: usize = 32;
/// The most values in one text.
pub const MAX_VALUES: usize = 100_000;

/// A UCL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// Pairs in the order written; a key may repeat.
    Object(Vec<(String, Value)>),
    Array(Vec<Value>),
}

impl Value {
    /// The last value of `key` (later wins, as pkg applies them), keys
    /// compared without case as pkg compares option names.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A boolean as libucl reads one: `true/yes/on`, `false/no/off`, also
    /// written as a string.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Str(s) => word_bool(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn pairs(&self) -> &[(String, Value)] {
        match self {
            Value::Object(p) => p,
            _ => &[],
        }
    }
}

fn word_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Why a text is not UCL jbuild reads, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}, column {column}: {reason}")]
pub struct UclError {
    pub line: usize,
    pub column: usize,
    pub reason: String,
}

impl crate::blame::Blame for UclError {
    /// A document from a repository or package the user chose.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// How much one text may hold: [`Limits::CONFIG`] for configuration
/// files, larger ones for texts that are big by nature (a package's
/// `+MANIFEST` lists every file it installs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub text: usize,
    pub depth: usize,
    pub values: usize,
}

impl Limits {
    /// [`MAX_TEXT`], [`MAX_DEPTH`], [`MAX_VALUES`].
    pub const CONFIG: Limits = Limits {
        text: MAX_TEXT,
        depth: MAX_DEPTH,
        values: MAX_VALUES,
    };
}

/// Parses `text` into its top-level object, within [`Limits::CONFIG`].
pub fn parse(text: &str) -> Result<Value, UclError> {
    parse_with(text, Limits::CONFIG)
}

/// Parses `text` into its top-level object, within `limits`.
pub fn parse_with(text: &str, limits: Limits) -> Result<Value, UclError> {
    if text.len() > limits.text {
        return Err(UclError {
            line: 1,
            column: 1,
            reason: format!(
                "{} bytes, more than the {} allowed",
                text.len(),
                limits.text
            ),
        });
    }
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        depth: 0,
        values: 0,
        limits,
    };
    p.skip_space()?;
    let v = if p.peek() == Some(b'{') {
        p.i += 1;
        p.object(Some(b'}'))?
    } else {
        p.object(None)?
    };
    p.skip_space()?;
    if p.i < p.s.len() {
        return Err(p.err("text after the end of the top-level object"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
    values: usize,
    limits: Limits,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn err(&self, reason: impl fmt::Display) -> UclError {
        let before = &self.s[..self.i.min(self.s.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        UclError {
            line,
            column: self.i - start + 1,
            reason: reason.to_string(),
        }
    }

    /// Skips blanks, line ends and comments.
    fn skip_space(&mut self) -> Result<(), UclError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => self.i += 1,
                Some(b'#') => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.i += 1;
                    }
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'*') => {
                    let start = self.i;
                    self.i += 2;
                    loop {
                        match self.peek() {
                            None => {
                                self.i = start;
                                return Err(self.err("a /* comment that never ends"));
                            }
                            Some(b'*') if self.s.get(self.i + 1) == Some(&b'/') => {
                                self.i += 2;
                                break;
                            }
                            Some(_) => self.i += 1,
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn count(&mut self) -> Result<(), UclError> {
        self.values += 1;
        if self.values > self.limits.values {
            return Err(self.err(format!("more than {} values", self.limits.values)));
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), UclError> {
        self.depth += 1;
        if self.depth > self.limits.depth {
            return Err(self.err(format!("nested deeper than {} levels", self.limits.depth)));
        }
        Ok(())
    }

    /// Pairs up to `close` (or the end of the text for the implicit
    /// top-level object), the opening brace already read.
    fn object(&mut self, close: Option<u8>) -> Result<Value, UclError> {
        self.enter()?;
        let mut pairs = Vec::new();
        loop {
            self.skip_space()?;
            match (self.peek(), close) {
                (None, None) => break,
                (None, Some(_)) => return Err(self.err("an object that is never closed")),
                (Some(b), Some(c)) if b == c => {
                    self.i += 1;
                    break;
                }
                (Some(b'.'), _) => return Err(self.err("UCL macros (.include, ...) are not read")),
                _ => {}
            }
            let key = self.key()?;
            self.skip_blanks();
            match self.peek() {
                Some(b':' | b'=') => self.i += 1,
                Some(b'{' | b'[') => {}
                _ => return Err(self.err(format!("`{key}` is not followed by `:`, `=` or `{{`"))),
            }
            self.skip_space()?;
            let value = self.value()?;
            pairs.push((key, value));
            self.skip_blanks();
            if matches!(self.peek(), Some(b';' | b',')) {
                self.i += 1;
            }
        }
        self.depth -= 1;
        self.count()?;
        Ok(Value::Object(pairs))
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r')) {
            self.i += 1;
        }
    }

    fn key(&mut self) -> Result<String, UclError> {
        match self.peek() {
            Some(b'"') => self.dquoted(),
            Some(b'\'') => self.squoted(),
            Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'/' => {
                let start = self.i;
                while self.peek().is_some_and(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/')
                }) {
                    self.i += 1;
                }
                Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
            }
            _ => Err(self.err("a key was expected")),
        }
    }

    fn value(&mut self) -> Result<Value, UclError> {
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.object(Some(b'}'))
            }
            Some(b'[') => {
                self.i += 1;
                self.array()
            }
            Some(b'"') => {
                self.count()?;
                Ok(Value::Str(self.dquoted()?))
            }
            Some(b'\'') => {
                self.count()?;
                Ok(Value::Str(self.squoted()?))
            }
            Some(b'<') if self.s.get(self.i + 1) == Some(&b'<') => {
                Err(self.err("UCL heredocs (<<EOD) are not read"))
            }
            Some(_) => {
                self.count()?;
                self.word()
            }
            None => Err(self.err("a value was expected")),
        }
    }

    fn array(&mut self) -> Result<Value, UclError> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            self.skip_space()?;
            match self.peek() {
                None => return Err(self.err("an array that is never closed")),
                Some(b']') => {
                    self.i += 1;
                    break;
                }
                _ => {}
            }
            items.push(self.value()?);
            self.skip_space()?;
            if matches!(self.peek(), Some(b',' | b';')) {
                self.i += 1;
            }
        }
        self.depth -= 1;
        self.count()?;
        Ok(Value::Array(items))
    }

    /// A bare word up to a separator: a number, a boolean or a string.
    fn word(&mut self) -> Result<Value, UclError> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|b| !matches!(b, b';' | b',' | b'}' | b']' | b'\n' | b'#' | b'\r'))
        {
            self.i += 1;
        }
        let w = String::from_utf8_lossy(&self.s[start..self.i])
            .trim()
            .to_string();
        if w.is_empty() {
            return Err(self.err("a value was expected"));
        }
        if let Some(b) = word_bool(&w) {
            return Ok(Value::Bool(b));
        }
        if let Ok(i) = w.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        if w.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'-')
        {
            if let Ok(f) = w.parse::<f64>() {
                return Ok(Value::Float(f));
            }
        }
        Ok(Value::Str(w))
    }

    fn squoted(&mut self) -> Result<String, UclError> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => {
                    self.i = start;
                    return Err(self.err("a string that never ends"));
                }
                Some(b'\'') => {
                    self.i += 1;
                    break;
                }
                Some(b'\\') if matches!(self.s.get(self.i + 1), Some(b'\'' | b'\\')) => {
                    out.push(self.s[self.i + 1]);
                    self.i += 2;
                }
                Some(b) => {
                    out.push(b);
                    self.i += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| self.err("a string that is not UTF-8"))
    }

    fn dquoted(&mut self) -> Result<String, UclError> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                self.i = start;
                return Err(self.err("a string that never ends"));
            };
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else { continue };
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = self.s.get(self.i..self.i + 4).unwrap_or_default();
                            let c = std::str::from_utf8(hex)
                                .ok()
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .ok_or_else(|| self.err("a bad \\u escape"))?;
                            self.i += 4;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                b => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("a string that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_freebsd_conf() {
        let text = r#"# $FreeBSD$
FreeBSD: {
  url: "pkg+https://pkg.FreeBSD.org/${ABI}/quarterly",
  mirror_type: "srv",
  signature_type: "fingerprints",
  fingerprints: "/usr/share/keys/pkg",
  enabled: yes,
  priority = 2
}
/* a comment */ FreeBSD-kmods { enabled: no }
"#;
        let v = parse(text).unwrap();
        let repo = v.get("freebsd").unwrap();
        assert_eq!(
            repo.get("url").unwrap().as_str(),
            Some("pkg+https://pkg.FreeBSD.org/${ABI}/quarterly")
        );
        assert_eq!(repo.get("ENABLED").unwrap().as_bool(), Some(true));
        assert_eq!(repo.get("priority").unwrap().as_int(), Some(2));
        assert_eq!(
            v.get("FreeBSD-kmods")
                .unwrap()
                .get("enabled")
                .unwrap()
                .as_bool(),
            Some(false)
        );
    }

    #[test]
    fn repeated_keys_stay_in_order_and_the_last_wins() {
        let v = parse("a = 1; a = 2; b = [1, \"x\\u00e9\", {c: d}]").unwrap();
        assert_eq!(v.pairs().len(), 3);
        assert_eq!(v.get("a"), Some(&Value::Int(2)));
        assert_eq!(
            v.get("b"),
            Some(&Value::Array(vec![
                Value::Int(1),
                Value::Str("xé".into()),
                Value::Object(vec![("c".into(), Value::Str("d".into()))])
            ]))
        );
    }

    #[test]
    fn what_is_not_read_is_refused_with_its_place() {
        let e = parse("a: 1\n.include \"/etc/passwd\"\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1), "{e}");
        assert!(parse("a: <<EOD\nx\nEOD\n").is_err());
        assert!(parse("a: \"open").is_err());
        assert!(parse("a { b: 1").is_err());
        let deep = "a: ".to_string() + &"[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).unwrap_err().reason.contains("deeper"));
        let many = "a: [".to_string() + &"1,".repeat(MAX_VALUES) + "]";
        assert!(parse(&many)
            .unwrap_err()
            .reason
            .contains("more than 100000 values"));
        let big = "a: \"".to_string() + &"x".repeat(MAX_TEXT) + "\"";
        assert!(parse(&big).unwrap_err().reason.contains("allowed"));
    }
}
