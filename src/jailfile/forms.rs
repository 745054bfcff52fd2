//! Argument forms shared by several instructions: leading `--flag=value`
//! flags, word lists of a given length, JSON arrays (exec form) and the
//! "missing argument" errors that go with them.

use super::ast::{CommandSrc, Keyword};
use super::diagnostic::{Error, Result};
use super::heredoc::Heredoc;
use super::suggest;
use super::text::Text;
use super::words::{find_unquoted, split_words};

/// A `--name=value` flag before the arguments.
pub(super) struct Flag {
    pub name: String,
    pub value: Text,
}

/// One instruction's arguments being parsed.
pub(super) struct Parser<'a> {
    pub kw: Keyword,
    pub args: &'a Text,
    pub escape: char,
    pub heredocs: &'a [Heredoc],
}

impl Parser<'_> {
    pub(super) fn missing(&self, at: &Text) -> Error {
        Error::at(at.end, format!("{} needs more arguments", self.kw.name()))
            .with_help(format!("usage: {}", self.kw.usage()))
    }

    pub(super) fn words(&self, t: &Text) -> Result<Vec<Text>> {
        split_words(t, self.escape)
    }

    /// Exactly `n` words.
    pub(super) fn exactly(&self, t: &Text, n: usize, what: &str) -> Result<Vec<Text>> {
        let words = self.words(t)?;
        if words.len() < n {
            return Err(self.missing(t));
        }
        if let Some(extra) = words.get(n) {
            return Err(Error::new(
                extra.span(),
                format!(
                    "{} takes {what}; unexpected `{}`",
                    self.kw.name(),
                    extra.as_string()
                ),
            )
            .with_help(format!(
                "usage: {} (quote arguments that contain spaces)",
                self.kw.usage()
            )));
        }
        Ok(words)
    }

    pub(super) fn at_least_one(&self, t: &Text) -> Result<Vec<Text>> {
        let words = self.words(t)?;
        if words.is_empty() {
            return Err(self.missing(t));
        }
        Ok(words)
    }

    pub(super) fn one(&self, t: &Text) -> Result<Text> {
        Ok(self
            .exactly(t, 1, "one argument")?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// Leading `--name=value` flags, each checked against `allowed`.
    pub(super) fn flags(&self, allowed: &[&str]) -> Result<(Vec<Flag>, Text)> {
        self.flags_repeating(allowed, &[])
    }

    /// Like [`Parser::flags`]; the flags in `repeatable` may be given
    /// more than once (`RUN --mount=... --mount=...`).
    pub(super) fn flags_repeating(
        &self,
        allowed: &[&str],
        repeatable: &[&str],
    ) -> Result<(Vec<Flag>, Text)> {
        self.flags_with(allowed, repeatable, &[])
    }

    /// Like [`Parser::flags_repeating`]; the flags in `boolean` may stand
    /// alone (`COPY --link`, value `true`) or be given `=true`/`=false`.
    pub(super) fn flags_with(
        &self,
        allowed: &[&str],
        repeatable: &[&str],
        boolean: &[&str],
    ) -> Result<(Vec<Flag>, Text)> {
        let args = self.args;
        let mut flags: Vec<Flag> = Vec::new();
        let mut i = 0;
        loop {
            while args.char_at(i).is_some_and(char::is_whitespace) {
                i += 1;
            }
            if !(args.char_at(i) == Some('-') && args.char_at(i + 1) == Some('-')) {
                break;
            }
            let mut j = i;
            while args.char_at(j).is_some_and(|c| !c.is_whitespace()) {
                j += 1;
            }
            let word = args.slice(i, j);
            let (name, value) = match find_unquoted(&word, '=', self.escape) {
                Some(eq) => (word.slice(2, eq).as_string(), Some(word.slice_from(eq + 1))),
                None => (word.slice_from(2).as_string(), None),
            };
            let kw = self.kw.name();
            let supported = || {
                allowed
                    .iter()
                    .map(|a| format!("--{a}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !allowed.contains(&name.as_str()) {
                let mut help = format!("supported: {}", supported());
                if let Some(s) = suggest::closest(&name, allowed.iter().copied()) {
                    help = format!("did you mean `--{s}`? {help}");
                }
                return Err(Error::new(
                    word.span(),
                    format!("`--{name}` is not supported on {kw}"),
                )
                .with_help(help));
            }
            let value = match value {
                None if boolean.contains(&name.as_str()) => Text::synthetic("true", word.end),
                Some(v) if boolean.contains(&name.as_str()) => match v.as_string().as_str() {
                    "true" | "false" => v,
                    other => {
                        return Err(Error::new(
                            v.span(),
                            format!("`--{name}={other}`: expected true or false"),
                        )
                        .with_help(format!("write --{name} (or --{name}=false)")))
                    }
                },
                Some(v) if !v.is_empty() => v,
                _ => {
                    return Err(Error::new(word.span(), format!("`--{name}` needs a value"))
                        .with_help(format!("usage: {}", self.kw.usage())))
                }
            };
            if !repeatable.contains(&name.as_str()) && flags.iter().any(|f| f.name == name) {
                return Err(Error::new(
                    word.span(),
                    format!("`--{name}` is given twice"),
                ));
            }
            flags.push(Flag { name, value });
            i = j;
        }
        Ok((flags, args.slice_from(i).trim()))
    }

    /// A JSON array of strings, if `t` starts with `[`; anything else
    /// starting with `[` is an error (for COPY and VOLUME, where falling
    /// back to words would only produce odd paths).
    pub(super) fn json(&self, t: &Text) -> Result<Option<Vec<Text>>> {
        if !t.starts_with("[") {
            return Ok(None);
        }
        match serde_json::from_str::<Vec<String>>(&t.as_string()) {
            Ok(items) => Ok(Some(
                items
                    .iter()
                    .map(|s| Text::synthetic(s, t.start()))
                    .collect(),
            )),
            Err(e) => Err(json_error(t, &e).with_help(format!(
                "write a JSON array of double-quoted strings, or drop the brackets; usage: {}",
                self.kw.usage()
            ))),
        }
    }

    /// Shell or exec form; invalid JSON falls back to the shell form, as
    /// in Docker.
    pub(super) fn command(&self, t: &Text) -> Result<CommandSrc> {
        if t.is_empty() {
            return Err(self.missing(t));
        }
        let s = t.as_string();
        if s.starts_with('[') {
            if let Ok(v) = serde_json::from_str::<Vec<String>>(&s) {
                return Ok(CommandSrc::Exec(v));
            }
        }
        Ok(CommandSrc::Shell(s))
    }
}

/// Points at the character serde_json complained about (its line and
/// column count within the JSON text; columns in bytes).
fn json_error(t: &Text, e: &serde_json::Error) -> Error {
    let msg = e.to_string();
    let msg = msg.rfind(" at line ").map_or(msg.as_str(), |i| &msg[..i]);
    let (mut line, mut col) = (1, 0);
    let mut at = t.end;
    for &(c, pos) in &t.chars {
        if c == '\n' {
            line += 1;
            col = 0;
            continue;
        }
        col += c.len_utf8();
        if line == e.line() && col >= e.column() {
            at = pos;
            break;
        }
    }
    Error::at(at, format!("invalid JSON array: {msg}"))
}

/// `[A-Za-z_][A-Za-z0-9_]*`
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
