//! Word expansion as sh(1) does it, in its order: tilde, parameters,
//! command substitution and arithmetic, then field splitting by `IFS` of
//! what was not quoted, then pathname expansion inside the root
//! ([`super::glob`]), then quote removal. The parser gives each word's
//! pieces; the quoting of every piece travels with its text so that
//! splitting and globbing touch only what the script left unquoted.

use brush_parser::word::{
    self, Parameter, ParameterExpr, SpecialParameter, WordPiece, WordPieceWithSource,
};

use super::pattern::{Pattern, Seg};
use super::shell::{Shell, Streams, R};

#[derive(Debug, Clone, Default)]
pub(crate) struct Field {
    pub segs: Vec<Seg>,
    /// A quote was in it: an empty field still counts.
    pub quotes: bool,
}

impl Field {
    pub fn text(&self) -> String {
        self.segs.iter().map(|s| s.text.as_str()).collect()
    }

    fn is_empty(&self) -> bool {
        self.segs.iter().all(|s| s.text.is_empty())
    }
}

/// Gathers the fields of one word.
pub(crate) struct Builder {
    pub fields: Vec<Field>,
    pub cur: Field,
    /// Unquoted expansions are split (command words); not in
    /// assignments, `case`, redirections, here-documents, patterns.
    pub split: bool,
    ifs: String,
    /// The last expansion ended in IFS white space: what follows starts
    /// a new field.
    pending: bool,
}

impl Builder {
    pub fn new(split: bool, ifs: &str) -> Builder {
        Builder {
            fields: Vec::new(),
            cur: Field::default(),
            split,
            ifs: ifs.to_string(),
            pending: false,
        }
    }

    fn flush_pending(&mut self) {
        if self.pending {
            self.pending = false;
            self.end_field();
        }
    }

    pub fn lit(&mut self, text: &str, quoted: bool) {
        self.flush_pending();
        if quoted {
            self.cur.quotes = true;
        }
        self.cur.segs.push(Seg {
            text: text.to_string(),
            quoted,
        });
    }

    /// The result of an expansion: split by IFS unless quoted.
    pub fn expanded(&mut self, text: &str, quoted: bool) {
        if quoted || !self.split {
            self.lit(text, quoted);
            return;
        }
        let mut piece = String::new();
        for c in text.chars() {
            if self.ifs.contains(c) {
                if !piece.is_empty() {
                    self.lit(&std::mem::take(&mut piece), false);
                }
                if c.is_whitespace() {
                    if !self.cur.is_empty() || self.cur.quotes {
                        self.pending = true;
                    }
                } else {
                    // A non-white IFS character ends a field, empty or not.
                    self.pending = false;
                    let f = std::mem::take(&mut self.cur);
                    self.fields.push(f);
                }
            } else {
                piece.push(c);
            }
        }
        if !piece.is_empty() {
            self.lit(&piece, false);
        }
    }

    /// Ends the current field (between the words of `$@`).
    pub fn end_field(&mut self) {
        let f = std::mem::take(&mut self.cur);
        if !f.is_empty() || f.quotes {
            self.fields.push(f);
        }
    }

    pub fn finish(mut self) -> Vec<Field> {
        self.pending = false;
        self.end_field();
        self.fields
    }
}

impl Shell<'_> {
    fn ifs(&self) -> String {
        self.get("IFS").unwrap_or(" \t\n").to_string()
    }

    fn parse_word(&self, text: &str) -> R<Vec<WordPieceWithSource>> {
        word::parse(text, &super::parser_options()).map_err(|e| {
            super::ScriptError::Parse {
                line: self.line,
                message: format!("{e}"),
            }
            .into()
        })
    }

    /// A command's word: its fields after splitting and pathname
    /// expansion.
    pub(crate) fn expand_fields(&mut self, text: &str, s: &mut Streams) -> R<Vec<String>> {
        let pieces = self.parse_word(text)?;
        let mut b = Builder::new(true, &self.ifs());
        self.pieces(&pieces, false, &mut b, s)?;
        let mut out = Vec::new();
        for f in b.finish() {
            self.check_word(&f)?;
            let globbed = if self.state.opts.noglob {
                None
            } else {
                self.glob(&f)?
            };
            match globbed {
                Some(paths) => out.extend(paths),
                None => out.push(f.text()),
            }
        }
        Ok(out)
    }

    /// A word expanded to one string: no splitting, no pathname
    /// expansion (assignments, `case`'s word, redirection targets).
    pub(crate) fn expand_string(&mut self, text: &str, s: &mut Streams) -> R<String> {
        let pieces = self.parse_word(text)?;
        let mut b = Builder::new(false, &self.ifs());
        self.pieces(&pieces, false, &mut b, s)?;
        let fields = b.finish();
        let joined = fields.iter().map(Field::text).collect::<Vec<_>>().join(" ");
        self.check_len(joined.len())?;
        Ok(joined)
    }

    /// A pattern (`case`, `${X#…}`): quoted parts match literally.
    pub(crate) fn expand_pattern(&mut self, text: &str, s: &mut Streams) -> R<Pattern> {
        let pieces = self.parse_word(text)?;
        let mut b = Builder::new(false, &self.ifs());
        self.pieces(&pieces, false, &mut b, s)?;
        let segs: Vec<Seg> = b.finish().into_iter().flat_map(|f| f.segs).collect();
        Ok(Pattern::new(&segs))
    }

    /// A here-document's body: parameters, `$(…)` and `$((…))` expanded,
    /// quotes kept as they are.
    pub(crate) fn expand_heredoc(&mut self, text: &str, s: &mut Streams) -> R<String> {
        let pieces = word::parse_heredoc(text, &super::parser_options()).map_err(|e| {
            super::ScriptError::Parse {
                line: self.line,
                message: format!("{e}"),
            }
        })?;
        let mut b = Builder::new(false, &self.ifs());
        self.pieces(&pieces, true, &mut b, s)?;
        let t: String = b.finish().iter().map(Field::text).collect();
        self.check_len(t.len())?;
        Ok(t)
    }

    fn check_word(&self, f: &Field) -> R<()> {
        self.check_len(f.segs.iter().map(|s| s.text.len()).sum())
    }

    pub(crate) fn check_len(&self, n: usize) -> R<()> {
        if n > self.limits.variable_bytes {
            return Err(self.limit(format!(
                "{} bytes in one expanded word",
                self.limits.variable_bytes
            )));
        }
        Ok(())
    }

    pub(crate) fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        b: &mut Builder,
        s: &mut Streams,
    ) -> R<()> {
        for (i, p) in pieces.iter().enumerate() {
            // A `${` the parser left as text is a form sh does not have
            // (`${X/a/b}`, `${X:1}`): sh's "bad substitution".
            if let (WordPiece::Text(t), Some(WordPiece::Text(next))) =
                (&p.piece, pieces.get(i + 1).map(|n| &n.piece))
            {
                if t.ends_with('$') && next.starts_with('{') {
                    return Err(self.unsupported(format!(
                        "`${next}` (a bash `${{…}}` form such as ${{X/pattern/string}})"
                    )));
                }
            }
            self.piece(&p.piece, quoted, b, s)?;
        }
        Ok(())
    }

    pub(crate) fn piece(
        &mut self,
        p: &WordPiece,
        quoted: bool,
        b: &mut Builder,
        s: &mut Streams,
    ) -> R<()> {
        match p {
            WordPiece::Text(t) => b.lit(t, quoted),
            WordPiece::SingleQuotedText(t) => b.lit(t, true),
            WordPiece::AnsiCQuotedText(t) => {
                let (text, _) = super::printf::escapes(t, false);
                b.lit(&text, true)
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                let only_at = inner.len() == 1
                    && matches!(
                        &inner[0].piece,
                        WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                            parameter: Parameter::Special(
                                SpecialParameter::AllPositionalParameters { concatenate: false }
                            ),
                            ..
                        })
                    );
                if only_at && self.state.positional.is_empty() {
                    return Ok(());
                }
                b.lit("", true);
                self.pieces(inner, true, b, s)?;
            }
            WordPiece::TildeExpansion(t) => match t {
                word::TildeExpr::Home => {
                    let home = self.get("HOME").unwrap_or("/").to_string();
                    b.lit(&home, true)
                }
                word::TildeExpr::UserHome(user) => match self.home_of(user) {
                    Some(home) => b.lit(&home, true),
                    None => b.lit(&format!("~{user}"), true),
                },
                _ => return Err(self.unsupported("`~+`, `~-` and the directory-stack tilde forms")),
            },
            WordPiece::ParameterExpansion(e) => self.parameter(e, quoted, b, s)?,
            WordPiece::CommandSubstitution(text) => {
                let out = self.substitute(text, s)?;
                b.expanded(&out, quoted)
            }
            WordPiece::BackquotedCommandSubstitution(text) => {
                let text = unescape_backquoted(text);
                let out = self.substitute(&text, s)?;
                b.expanded(&out, quoted)
            }
            WordPiece::EscapeSequence(e) => {
                let rest = e.strip_prefix('\\').unwrap_or(e);
                if rest == "\n" {
                    return Ok(());
                }
                let special = matches!(rest, "$" | "`" | "\"" | "\\");
                if quoted && !special {
                    b.lit(e, true)
                } else {
                    b.lit(rest, true)
                }
            }
            WordPiece::ArithmeticExpression(e) => {
                let n = self.arith(&e.value, s)?;
                b.expanded(&n.to_string(), quoted)
            }
        }
        Ok(())
    }

    /// `$(…)`: run by the interpreter in a subshell; its output without
    /// trailing newlines.
    pub(crate) fn substitute(&mut self, text: &str, s: &mut Streams) -> R<String> {
        let script = super::parse_at(text, self.line)?;
        let mut inner = Streams::default();
        let base = self.line_base;
        let line = self.line;
        self.line_base = self.line;
        let status = self.subshell(|sh| sh.program(&script.program, &mut inner));
        self.line_base = base;
        self.line = line;
        let status = match status {
            Ok(st) => st,
            Err(super::shell::Ctl::Error(m)) => {
                inner.err.extend_from_slice(format!("sh: {m}\n").as_bytes());
                2
            }
            Err(e) => return Err(e),
        };
        self.status = status;
        self.last_substitution = Some(status);
        s.err.append(&mut inner.err);
        self.check_output(s)?;
        let mut out = String::from_utf8_lossy(&inner.out).into_owned();
        while out.ends_with('\n') {
            out.pop();
        }
        self.check_len(out.len())?;
        Ok(out)
    }
}

impl Shell<'_> {
    /// `~user`: the home directory in the image's `master.passwd`.
    fn home_of(&self, user: &str) -> Option<String> {
        let host = super::path::host(&self.root, "/", "/etc/master.passwd", true).ok()?;
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(
                std::fs::File::open(host).ok()?,
                crate::pkg::extract::MAX_ACCOUNTS,
            ),
            &mut text,
        )
        .ok()?;
        text.lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&user) && f.len() >= 9)
            .map(|f| f[8].to_string())
    }
}

/// Inside backquotes, `\\`, `` \` `` and `\$` stand for the character.
fn unescape_backquoted(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n) = chars.peek() {
                if matches!(n, '\\' | '`' | '$') {
                    out.push(n);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}
