//! Variable substitution: `$VAR`, `${VAR}`, `${VAR:-default}`,
//! `${VAR-default}`, `${VAR:+alt}`, `${VAR+alt}`, `${VAR:?message}`,
//! `${VAR?message}`, with quotes and the escape character handled as
//! Docker's shell lexer does.
//!
//! One scanner serves four [`Mode`]s, because the same rules produce the
//! value of a word (quotes removed), a list of fields (unquoted expansions
//! split at whitespace, for PKG/EXPOSE/VOLUME), the instruction text for
//! history (quotes kept, only variables replaced) and a COPY heredoc body
//! (quotes are ordinary characters there).
//!
//! Expansion is bounded as the text grows, never after: a Jailfile of a
//! few lines that doubles a variable thirty times would otherwise ask for
//! gigabytes. No value may grow past [`MAX_VALUE`], and everything one
//! load substitutes, together, past [`MAX_EXPANDED`] ([`Budget`]); the
//! error points at the `$` that would pass the limit.

use std::cell::Cell;
use std::collections::BTreeSet;

use super::diagnostic::{Error, Result};
use super::pattern::Glob;
use super::text::{Pos, Span, Text};

/// How to look a variable up: `None` when it is not set.
pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The most one value may hold after substitution: as much as a whole
/// Jailfile may (`MAX_FILE`), so literal text never reaches it; only
/// expansion can.
pub(crate) const MAX_VALUE: usize = 4 << 20;

/// The most one load's substitutions may produce together (values, history
/// texts, and the ARG values every RUN and PKG step carries): as much as
/// the Jailfile and its INCLUDEs may hold.
pub(crate) const MAX_EXPANDED: usize = 16 << 20;

/// What one load has substituted so far (see [`MAX_EXPANDED`]).
#[derive(Debug, Default)]
pub(crate) struct Budget {
    used: Cell<usize>,
}

/// Which limit an expansion ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Value,
    Recipe,
}

impl Budget {
    /// Room for the next value, and which limit bounds it.
    fn room(&self) -> (usize, Limit) {
        let left = MAX_EXPANDED.saturating_sub(self.used.get());
        if left < MAX_VALUE {
            (left, Limit::Recipe)
        } else {
            (MAX_VALUE, Limit::Value)
        }
    }

    /// Counts `bytes` a step copies (the ARG values RUN and PKG carry),
    /// refusing them at `span` past [`MAX_EXPANDED`].
    pub fn charge(&self, bytes: usize, span: Span) -> Result<()> {
        let used = self.used.get().saturating_add(bytes);
        if used > MAX_EXPANDED {
            return Err(too_much(Limit::Recipe, span));
        }
        self.used.set(used);
        Ok(())
    }
}

/// The error for an expansion at `span` that would pass `limit`. It names
/// the limit, never the value.
fn too_much(limit: Limit, span: Span) -> Error {
    match limit {
        Limit::Value => Error::new(
            span,
            format!(
                "this expansion makes a value of more than {} MiB, the most one value may hold after substitution",
                MAX_VALUE >> 20
            ),
        )
        .with_help("is a variable doubled over and over? no real recipe needs a value this large"),
        Limit::Recipe => Error::new(
            span,
            format!(
                "substitution makes more than {} MiB of values in this recipe, the most one recipe may expand to",
                MAX_EXPANDED >> 20
            ),
        )
        .with_help(
            "is a large variable used over and over? (every RUN and PKG step carries every ARG in scope)",
        ),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Word,
    Fields,
    Raw,
    Heredoc,
}

/// The result of a substitution and the variable names it looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expanded<T> {
    pub value: T,
    pub refs: BTreeSet<String>,
}

/// One word: quotes and escapes removed, variables replaced.
pub(crate) fn word(
    t: &Text,
    escape: char,
    lookup: Lookup<'_>,
    budget: &Budget,
) -> Result<Expanded<String>> {
    joined(run(t, escape, lookup, Mode::Word, budget)?)
}

/// Like [`word`], but unquoted expansions are split at whitespace into
/// several fields (and an unquoted empty expansion gives no field).
pub(crate) fn fields(
    t: &Text,
    escape: char,
    lookup: Lookup<'_>,
    budget: &Budget,
) -> Result<Expanded<Vec<String>>> {
    run(t, escape, lookup, Mode::Fields, budget)
}

/// Variables replaced, everything else (quotes, escapes) kept as written:
/// the instruction text that history records.
pub(crate) fn raw(
    t: &Text,
    escape: char,
    lookup: Lookup<'_>,
    budget: &Budget,
) -> Result<Expanded<String>> {
    joined(run(t, escape, lookup, Mode::Raw, budget)?)
}

/// A heredoc body: quotes are plain characters; the escape character only
/// escapes `$`, itself and a backtick.
pub(crate) fn heredoc(
    t: &Text,
    escape: char,
    lookup: Lookup<'_>,
    budget: &Budget,
) -> Result<Expanded<String>> {
    joined(run(t, escape, lookup, Mode::Heredoc, budget)?)
}

/// A substitution's fields as one string.
fn joined(e: Expanded<Vec<String>>) -> Result<Expanded<String>> {
    Ok(Expanded {
        value: e.value.join(""),
        refs: e.refs,
    })
}

fn run(
    t: &Text,
    escape: char,
    lookup: Lookup<'_>,
    mode: Mode,
    budget: &Budget,
) -> Result<Expanded<Vec<String>>> {
    let (room, limit) = budget.room();
    let mut s = Scanner {
        chars: &t.chars,
        i: 0,
        mode,
        escape,
        lookup,
        refs: BTreeSet::new(),
        limit,
    };
    let mut out = Out::new(mode == Mode::Fields, room);
    s.scan(&mut out, None)?;
    budget.used.set(budget.used.get() + out.len);
    Ok(Expanded {
        value: out.finish(mode),
        refs: s.refs,
    })
}

/// Output under construction; with `split`, a list of fields. It never
/// holds more than `room` bytes: what would pass it sets `over` instead,
/// and the scanner stops with an error.
struct Out {
    fields: Vec<String>,
    cur: String,
    started: bool,
    split: bool,
    len: usize,
    room: usize,
    over: bool,
}

impl Out {
    fn new(split: bool, room: usize) -> Out {
        Out {
            fields: Vec::new(),
            cur: String::new(),
            started: false,
            split,
            len: 0,
            room,
            over: false,
        }
    }

    /// Whether `n` more bytes fit; counts them if so.
    fn fits(&mut self, n: usize) -> bool {
        if self.over || self.len.saturating_add(n) > self.room {
            self.over = true;
            return false;
        }
        self.len += n;
        true
    }

    fn lit(&mut self, c: char) {
        if self.fits(c.len_utf8()) {
            self.cur.push(c);
            self.started = true;
        }
    }

    fn expansion(&mut self, value: &str, quoted: bool) {
        if !self.fits(value.len()) {
            return;
        }
        if !self.split || quoted {
            self.cur.push_str(value);
            self.started |= quoted || !value.is_empty();
            return;
        }
        for c in value.chars() {
            if c.is_whitespace() {
                if self.started {
                    self.fields.push(std::mem::take(&mut self.cur));
                    self.started = false;
                }
            } else {
                self.cur.push(c);
                self.started = true;
            }
        }
    }

    fn finish(mut self, mode: Mode) -> Vec<String> {
        if self.started || mode != Mode::Fields {
            self.fields.push(self.cur);
        }
        self.fields
    }
}

struct Scanner<'a> {
    chars: &'a [(char, Pos)],
    i: usize,
    mode: Mode,
    escape: char,
    lookup: Lookup<'a>,
    refs: BTreeSet<String>,
    /// The limit `Out::room` stands for, for the error.
    limit: Limit,
}

impl Scanner<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).map(|&(c, _)| c)
    }

    /// Scans until `stop` (outside quotes) or the end; says whether `stop` was found.
    fn scan(&mut self, out: &mut Out, stop: Option<char>) -> Result<bool> {
        let raw = self.mode == Mode::Raw;
        let mut quote: Option<(char, Pos)> = None;
        while let Some(&(c, pos)) = self.chars.get(self.i) {
            if out.over {
                return Err(too_much(self.limit, Span::at(pos)));
            }
            match quote {
                None if Some(c) == stop => {
                    self.i += 1;
                    return Ok(true);
                }
                None if self.mode == Mode::Heredoc => match c {
                    _ if c == self.escape
                        && matches!(self.peek(1), Some(n) if n == '$' || n == '`' || n == self.escape) =>
                    {
                        out.lit(self.peek(1).unwrap_or(c));
                        self.i += 2;
                    }
                    '$' => self.dollar(out, false)?,
                    _ => {
                        out.lit(c);
                        self.i += 1;
                    }
                },
                None if c == self.escape => {
                    match self.peek(1) {
                        Some(n) => {
                            if raw {
                                out.lit(c);
                            }
                            out.lit(n);
                        }
                        None => out.lit(c),
                    }
                    self.i += 2;
                }
                None if c == '\'' || c == '"' => {
                    quote = Some((c, pos));
                    out.started = true;
                    if raw {
                        out.lit(c);
                    }
                    self.i += 1;
                }
                None if c == '$' => self.dollar(out, false)?,
                None if out.split && c.is_whitespace() => out.expansion(" ", false),
                None => {
                    out.lit(c);
                    self.i += 1;
                }
                Some(('\'', _)) => {
                    if c != '\'' || raw {
                        out.lit(c);
                    }
                    quote = quote.filter(|_| c != '\'');
                    self.i += 1;
                }
                Some((_, _)) if c == '"' => {
                    quote = None;
                    if raw {
                        out.lit(c);
                    }
                    self.i += 1;
                }
                Some((_, _))
                    if c == self.escape
                        && matches!(self.peek(1), Some(n) if n == '"' || n == '$' || n == self.escape) =>
                {
                    if raw {
                        out.lit(c);
                    }
                    out.lit(self.peek(1).unwrap_or(c));
                    self.i += 2;
                }
                Some((_, _)) if c == '$' => self.dollar(out, true)?,
                Some((_, _)) => {
                    out.lit(c);
                    self.i += 1;
                }
            }
        }
        if out.over {
            let end = self.chars.last().map_or_else(Pos::default, |&(_, p)| p);
            return Err(too_much(self.limit, Span::at(end)));
        }
        if let Some((q, pos)) = quote {
            return Err(Error::at(
                pos,
                format!("unterminated quote: this `{q}` is never closed"),
            )
            .with_help(format!(
                "close it with a matching `{q}`, or escape it as `{}{q}`",
                self.escape
            )));
        }
        Ok(false)
    }

    /// At a `$`: a variable reference, or a literal `$`.
    fn dollar(&mut self, out: &mut Out, quoted: bool) -> Result<()> {
        let dollar = self
            .chars
            .get(self.i)
            .map_or_else(Pos::default, |&(_, p)| p);
        match self.peek(1) {
            Some('{') => self.braced(out, quoted, dollar),
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.i += 1;
                let name = self.name();
                let value = self.get(&name).unwrap_or_default();
                out.expansion(&value, quoted);
                self.within(out, dollar)
            }
            _ => {
                out.lit('$');
                self.i += 1;
                Ok(())
            }
        }
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self
            .peek(0)
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            name.push(c);
            self.i += 1;
        }
        name
    }

    fn get(&mut self, name: &str) -> Option<String> {
        self.refs.insert(name.to_string());
        (self.lookup)(name)
    }

    /// `${NAME}` and `${NAME<modifier>word}`; `self.i` is at the `$`.
    fn braced(&mut self, out: &mut Out, quoted: bool, dollar: Pos) -> Result<()> {
        const HELP: &str =
            "supported forms: ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:+alternative}, \
                            ${NAME+alternative}, ${NAME:?message}, ${NAME#pattern}, ${NAME##pattern}, \
                            ${NAME%pattern}, ${NAME%%pattern}, ${NAME/pattern/replacement}, \
                            ${NAME//pattern/replacement}";
        self.i += 2;
        let name = self.name();
        let unterminated = || {
            Error::new(Span::new(dollar, 2), "unterminated `${`: no `}` closes it")
                .with_help("close the variable reference with `}`, or escape the dollar sign to write it literally")
        };
        if name.is_empty() {
            return Err(match self.peek(0) {
                None => unterminated(),
                Some(_) => Error::new(
                    Span::new(dollar, 2),
                    "bad substitution: expected a variable name after `${`",
                )
                .with_help(HELP),
            });
        }
        if let Some(c @ ('#' | '%' | '/')) = self.peek(0) {
            return self.pattern(out, quoted, dollar, &name, c);
        }
        let colon = self.peek(0) == Some(':');
        let op = match (self.peek(0), self.peek(1)) {
            (Some('}'), _) => None,
            (Some(':'), Some(c @ ('-' | '+' | '?'))) | (Some(c @ ('-' | '+' | '?')), _) => Some(c),
            (None, _) => return Err(unterminated()),
            (Some(_), _) => {
                let at = self.chars.get(self.i).map_or(dollar, |&(_, p)| p);
                let shown: String = self
                    .chars
                    .get(self.i..)
                    .unwrap_or_default()
                    .iter()
                    .take(if colon { 2 } else { 1 })
                    .map(|&(c, _)| c)
                    .collect();
                return Err(Error::at(
                    at,
                    format!("unsupported modifier `{shown}` in `${{{name}...}}`"),
                )
                .with_help(HELP));
            }
        };
        let value = self.get(&name);
        let Some(op) = op else {
            self.i += 1;
            out.expansion(&value.unwrap_or_default(), quoted);
            return self.within(out, dollar);
        };
        self.i += if colon { 2 } else { 1 };
        let mut word = Out::new(false, out.room - out.len);
        let saved = self.mode;
        if self.mode == Mode::Fields {
            self.mode = Mode::Word;
        }
        let closed = self.scan(&mut word, Some('}'));
        self.mode = saved;
        if !closed? {
            return Err(unterminated());
        }
        let word = word.cur;
        let set = if colon {
            value.as_deref().is_some_and(|v| !v.is_empty())
        } else {
            value.is_some()
        };
        let result = match op {
            '-' if set => value.unwrap_or_default(),
            '-' => word,
            '+' if set => word,
            '+' => String::new(),
            _ if set => value.unwrap_or_default(),
            _ => {
                let why = if word.is_empty() {
                    "is not set".to_string()
                } else {
                    word
                };
                return Err(
                    Error::new(Span::new(dollar, 2), format!("{name}: {why}")).with_help(format!(
                        "pass it with `--build-arg {name}=...` or declare it with ARG/ENV"
                    )),
                );
            }
        };
        out.expansion(&result, quoted);
        self.within(out, dollar)
    }

    /// `${NAME#pattern}`, `##`, `%`, `%%`, `/pattern/replacement` and
    /// `//`, as BuildKit reads them: the pattern a glob (`*`, `?`; `\*`
    /// and `\?` literal) after its variables are expanded; `self.i` is at
    /// the operator `op`.
    fn pattern(
        &mut self,
        out: &mut Out,
        quoted: bool,
        dollar: Pos,
        name: &str,
        op: char,
    ) -> Result<()> {
        let unterminated = || {
            Error::new(Span::new(dollar, 2), "unterminated `${`: no `}` closes it")
                .with_help("close the variable reference with `}`, or escape the dollar sign to write it literally")
        };
        let twice = self.peek(1) == Some(op);
        self.i += if twice { 2 } else { 1 };
        let saved = self.mode;
        // Escapes kept: `\*` is a literal star to the matcher.
        self.mode = Mode::Raw;
        let mut pattern = Out::new(false, out.room - out.len);
        let closed = self.scan(&mut pattern, Some(if op == '/' { '/' } else { '}' }));
        self.mode = saved;
        if !closed? {
            return Err(unterminated());
        }
        let glob = Glob::new(&pattern.cur, self.escape);
        let value: Vec<char> = self.get(name).unwrap_or_default().chars().collect();
        // A replacement reads the value once from each place: bounded.
        if op == '/' && value.len().saturating_mul(value.len()) > MAX_REPLACE_WORK {
            return Err(Error::new(
                Span::new(dollar, 2),
                format!(
                    "`${{{name}/...}}` over a value of {} characters: jbuild replaces in values of at most {} characters",
                    value.len(),
                    MAX_REPLACE_CHARS
                ),
            ));
        }
        let result = if op == '/' {
            if self.mode == Mode::Fields {
                self.mode = Mode::Word;
            }
            let mut replacement = Out::new(false, out.room - out.len);
            let closed = self.scan(&mut replacement, Some('}'));
            self.mode = saved;
            if !closed? {
                return Err(unterminated());
            }
            glob.replace(&value, &replacement.cur, twice)
        } else {
            let n = value.len();
            let cut = |i: usize, j: usize| value[i..j].iter().collect::<String>();
            let found = if op == '#' {
                let ends = glob.prefixes(&value);
                let at = |i: &usize| ends[*i];
                match twice {
                    false => (0..=n).find(at),
                    true => (0..=n).rev().find(at),
                }
                .map(|i| cut(i, n))
            } else {
                // Suffixes of the value are prefixes of it reversed.
                let back: Vec<char> = value.iter().rev().copied().collect();
                let ends = glob.reversed().prefixes(&back);
                let at = |k: &usize| ends[*k];
                match twice {
                    false => (0..=n).find(at),
                    true => (0..=n).rev().find(at),
                }
                .map(|k| cut(0, n - k))
            };
            found.unwrap_or_else(|| value.iter().collect())
        };
        out.expansion(&result, quoted);
        self.within(out, dollar)
    }

    /// The error for the expansion at `dollar`, if it did not fit.
    fn within(&self, out: &Out, dollar: Pos) -> Result<()> {
        if out.over {
            return Err(too_much(self.limit, Span::new(dollar, 1)));
        }
        Ok(())
    }
}

/// The longest value `${NAME/pattern/replacement}` replaces in: its
/// work grows with the square of the value's length.
const MAX_REPLACE_CHARS: usize = 4 * 1024;
const MAX_REPLACE_WORK: usize = MAX_REPLACE_CHARS * MAX_REPLACE_CHARS;

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Text {
        Text::line_one(s)
    }

    fn vars(name: &str) -> Option<String> {
        match name {
            "A" => Some("alpha".into()),
            "E" => Some(String::new()),
            "L" => Some(" x  y ".into()),
            _ => None,
        }
    }

    fn w(s: &str) -> String {
        word(&text(s), '\\', &vars, &Budget::default())
            .unwrap()
            .value
    }

    #[test]
    fn modifiers() {
        assert_eq!(w("$A-${A}_$A_"), "alpha-alpha_");
        assert_eq!(w("${E:-d}|${E-d}|${U-d}|${U:-${A}}"), "d||d|alpha");
        assert_eq!(w("${A:+y}|${E:+y}|${E+y}|${U+y}"), "y||y|");
        assert_eq!(w("${A:?no}"), "alpha");
        assert_eq!(w("${U:-\"a b\"}"), "a b");
    }

    /// BuildKit's examples of the pattern forms, and their edges.
    #[test]
    fn pattern_modifiers() {
        let v = |name: &str| match name {
            "S" => Some("foobarbaz".to_string()),
            "F" => Some("app-1.2.tar.gz".to_string()),
            "A" => Some("alpha".to_string()),
            _ => None,
        };
        let w = |s: &str| word(&text(s), '\\', &v, &Budget::default()).unwrap().value;
        assert_eq!(w("${S#f*b}|${S##f*b}"), "arbaz|az");
        assert_eq!(w("${S%b*}|${S%%b*}"), "foobar|foo");
        assert_eq!(w("${S/ba/fo}|${S//ba/fo}"), "fooforbaz|fooforfoz");
        assert_eq!(
            w("${F%.tar.gz}|${F%%.*}|${F##*.}|${F#app-}"),
            "app-1.2|app-1|gz|1.2.tar.gz"
        );
        // No match leaves the value; an unset variable is empty.
        assert_eq!(w("${S#x*}|${U%a}|${S/q/r}"), "foobarbaz||foobarbaz");
        // `?` is one character; `\*` a literal star; the pattern expands.
        assert_eq!(
            w("${S#f?o}|${S/\\*/x}|${S#${A%pha}}"),
            "barbaz|foobarbaz|foobarbaz"
        );
        assert_eq!(w("${A/l/${S%baz}}"), "afoobarpha");
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            w(r#"'$A' "$A" \$A "\$A \n" $ $1 a\ b"#),
            r#"$A alpha $A $A \n $ $1 a b"#
        );
        let r = raw(
            &text(r#"k="$A b" '$A' \$A"#),
            '\\',
            &vars,
            &Budget::default(),
        )
        .unwrap();
        assert_eq!(r.value, r#"k="alpha b" '$A' \$A"#);
        assert_eq!(r.refs.into_iter().collect::<Vec<_>>(), ["A"]);
        let h = heredoc(
            &text(r#"'$A' "$A" \$A \n"#),
            '\\',
            &vars,
            &Budget::default(),
        )
        .unwrap()
        .value;
        assert_eq!(h, r#"'alpha' "alpha" $A \n"#);
    }

    #[test]
    fn fields_split_unquoted_expansions() {
        let f = |s: &str| {
            fields(&text(s), '\\', &vars, &Budget::default())
                .unwrap()
                .value
        };
        assert_eq!(f("a$L"), ["a", "x", "y"]);
        assert_eq!(f("a${A}b"), ["aalphab"]);
        assert_eq!(f("\"$L\""), [" x  y "]);
        assert!(f("$E$U").is_empty());
        assert_eq!(f("\"\""), [""]);
        assert_eq!(f("${U:-p q}"), ["p", "q"]);
    }

    #[test]
    fn errors_point_at_the_dollar() {
        let e = |s: &str| {
            let e = word(&text(s), '\\', &vars, &Budget::default()).unwrap_err();
            (e.span.pos.col, e.message)
        };
        assert_eq!(
            e("ab ${A"),
            (4, "unterminated `${`: no `}` closes it".into())
        );
        assert_eq!(
            e("${}"),
            (
                1,
                "bad substitution: expected a variable name after `${`".into()
            )
        );
        assert_eq!(
            e("x${A^^}"),
            (5, "unsupported modifier `^` in `${A...}`".into())
        );
        assert_eq!(
            e("${A:-x"),
            (1, "unterminated `${`: no `}` closes it".into())
        );
        assert_eq!(e("${U:?set U}"), (1, "U: set U".into()));
        assert_eq!(
            e("'abc"),
            (1, "unterminated quote: this `'` is never closed".into())
        );
    }
}
