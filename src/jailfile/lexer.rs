//! From file text to logical instructions.
//!
//! A Jailfile is read line by line, as Docker reads a Dockerfile:
//!
//! - parser directives (`# escape=\``, `# syntax=...`) may open the file;
//! - blank lines and lines whose first non-blank character is `#` are
//!   skipped;
//! - a line ending in the escape character (`\` unless changed) continues
//!   on the next line; comment and blank lines inside such a continuation
//!   are skipped, and the pieces are joined without anything in between;
//! - after a RUN or COPY line with heredoc markers (`<<EOF`), the following
//!   lines are the heredoc bodies, read verbatim up to their terminators.
//!
//! The result is a list of [`RawInstr`]: a keyword and its arguments as
//! [`Text`] (characters with positions), plus the heredoc bodies.

use super::diagnostic::{Error, Result};
use super::heredoc::{self, Heredoc};
use super::line::{col, lines, too_long, Line, MAX_INSTRUCTION};
use super::text::{FileId, Pos, Span, Text};

/// One instruction as written, before its arguments are understood.
#[derive(Debug, Clone)]
pub(crate) struct RawInstr {
    /// The keyword as written (any case).
    pub keyword: Text,
    /// Everything after the keyword, continuations joined, trimmed.
    pub args: Text,
    pub heredocs: Vec<Heredoc>,
    /// The escape character in effect for this file.
    pub escape: char,
}

impl RawInstr {
    pub fn keyword_upper(&self) -> String {
        self.keyword.as_string().to_uppercase()
    }

    pub fn keyword_span(&self) -> Span {
        self.keyword.span()
    }
}

/// Splits a file into instructions (all of them: tests and small texts).
#[cfg(test)]
pub(crate) fn lex(file: FileId, source: &str) -> Result<Vec<RawInstr>> {
    lexer(file, source)?.collect()
}

/// The instructions of a file, one at a time, so that only the one being
/// resolved is held as [`Text`] (sixteen bytes a character): a file of
/// many instructions costs its own text and one instruction, not every
/// instruction at once. Reads the parser directives first.
pub(crate) fn lexer(file: FileId, source: &str) -> Result<Lexer<'_>> {
    let lines = lines(file, source);
    let (escape, next) = directives(&lines)?;
    Ok(Lexer {
        lines,
        next,
        escape,
        done: false,
    })
}

/// See [`lexer`]; it ends after the first error.
pub(crate) struct Lexer<'a> {
    lines: Vec<Line<'a>>,
    next: usize,
    escape: char,
    done: bool,
}

impl Iterator for Lexer<'_> {
    type Item = Result<RawInstr>;

    fn next(&mut self) -> Option<Result<RawInstr>> {
        if self.done {
            return None;
        }
        let item = self.instruction().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

impl Lexer<'_> {
    /// The next instruction, or `None` at the end of the file.
    fn instruction(&mut self) -> Result<Option<RawInstr>> {
        let (lines, escape) = (&self.lines, self.escape);
        let i = &mut self.next;
        while let Some(line) = lines.get(*i) {
            *i += 1;
            if line.is_blank_or_comment() {
                continue;
            }
            let mut logical = Text::new(line.end());
            let mut current = line;
            let mut first = true;
            loop {
                let skip = if first {
                    current
                        .text
                        .chars()
                        .take_while(|c| c.is_whitespace())
                        .count()
                } else {
                    0
                };
                first = false;
                // Characters `skip..len` hold the content, trailing
                // whitespace left out; walked in place, not copied.
                let len = current.text.trim_end().chars().count().max(skip);
                let last = current.chars().take(len).skip(skip).last();
                match last {
                    Some((c, _)) if c == escape => {
                        if logical.len() + len - skip > MAX_INSTRUCTION {
                            return Err(too_long(Span::at(line.start())));
                        }
                        for (c, p) in current.chars().take(len - 1).skip(skip) {
                            logical.push(c, p);
                        }
                        while lines.get(*i).is_some_and(Line::is_blank_or_comment) {
                            *i += 1;
                        }
                        match lines.get(*i) {
                            Some(next) => {
                                current = next;
                                *i += 1;
                            }
                            // A continuation on the file's last line ends
                            // the instruction there, as BuildKit reads it.
                            None => break,
                        }
                    }
                    _ => {
                        if logical.len() + len - skip > MAX_INSTRUCTION {
                            return Err(too_long(Span::at(line.start())));
                        }
                        for (c, p) in current.chars().take(len).skip(skip) {
                            logical.push(c, p);
                        }
                        if logical.is_empty() {
                            logical.end = current.end();
                        }
                        break;
                    }
                }
            }
            // Trimmed and split in place: a line may be megabytes long,
            // and a copy of it as `Text` costs sixteen bytes a character.
            logical.trim_in_place();
            let kw_len = logical
                .chars
                .iter()
                .position(|(c, _)| c.is_whitespace())
                .unwrap_or(logical.len());
            let keyword = logical.split_off_front(kw_len);
            let mut args = logical;
            args.trim_in_place();
            let args = if args.is_empty() {
                Text::new(keyword.end)
            } else {
                args
            };
            let upper = keyword.as_string().to_uppercase();
            let heredocs = if upper == "RUN" || upper == "COPY" {
                let markers = heredoc::find_markers(&args, escape);
                let room = MAX_INSTRUCTION.saturating_sub(keyword.len() + args.len());
                heredoc::read_bodies(markers, lines, i, room)?
            } else {
                Vec::new()
            };
            if keyword.is_empty() {
                continue;
            }
            return Ok(Some(RawInstr {
                keyword,
                args,
                heredocs,
                escape,
            }));
        }
        Ok(None)
    }
}

/// Parser directives at the top of the file: `# escape=`` ` and the
/// ignored `# syntax=` and `# check=`. They end at the first line that is
/// not one. Returns the escape character and the first line after them.
fn directives(lines: &[Line<'_>]) -> Result<(char, usize)> {
    let mut escape = '\\';
    let mut seen_escape = false;
    for (i, line) in lines.iter().enumerate() {
        let Some((key, value, value_col)) = directive(line.text) else {
            return Ok((escape, i));
        };
        if key == "escape" {
            let pos = Pos::new(line.file, line.number, value_col);
            if seen_escape {
                return Err(Error::at(pos, "the `escape` directive is given twice"));
            }
            seen_escape = true;
            escape = match value {
                "\\" => '\\',
                "`" => '`',
                _ => {
                    return Err(Error::new(
                        Span::new(pos, col(value.chars().count()) - 1),
                        format!("invalid escape character `{value}`"),
                    )
                    .with_help("the escape directive takes `\\` or a backtick"))
                }
            };
        }
    }
    Ok((escape, lines.len()))
}

/// `# key=value` with a known key: (key lowercased, value, value's column).
fn directive(line: &str) -> Option<(&'static str, &str, u32)> {
    let rest = line.trim_start().strip_prefix('#')?;
    let (key, value) = rest.split_once('=')?;
    let key = match key.trim().to_ascii_lowercase().as_str() {
        "escape" => "escape",
        "syntax" => "syntax",
        "check" => "check",
        _ => return None,
    };
    let value_trimmed = value.trim();
    let offset = line.len() - value.len() + (value.len() - value.trim_start().len());
    let value_col = col(line.get(..offset).map_or(0, |s| s.chars().count()));
    Some((key, value_trimmed, value_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexed(src: &str) -> Vec<(String, String)> {
        lex(0, src)
            .unwrap()
            .iter()
            .map(|r| (r.keyword.as_string(), r.args.as_string()))
            .collect()
    }

    #[test]
    fn continuation_skips_comments_and_blank_lines() {
        let src = "# c\nFROM scratch\nRUN a \\\n  # inner\n\n   b\n  \nrun c";
        assert_eq!(
            lexed(src),
            [
                ("FROM".into(), "scratch".into()),
                ("RUN".into(), "a    b".into()),
                ("run".into(), "c".into())
            ]
        );
    }

    #[test]
    fn escape_directive_and_positions() {
        let src = "# escape=`\r\nFROM scratch\r\nRUN dir c:\\ `\r\n  x";
        let r = lex(0, src).unwrap();
        assert_eq!(r[1].args.as_string(), "dir c:\\   x");
        assert_eq!(r[1].args.chars.last().unwrap().1, Pos::new(0, 4, 3));
    }

    #[test]
    fn a_continuation_on_the_last_line_ends_the_instruction() {
        assert_eq!(
            lexed("FROM scratch\nRUN a \\\n# only a comment\n"),
            [
                ("FROM".into(), "scratch".into()),
                ("RUN".into(), "a".into())
            ]
        );
        assert_eq!(
            lexed("FROM scratch \\"),
            [("FROM".into(), "scratch".into())]
        );
    }

    #[test]
    fn bad_escape_directive() {
        let e = lex(0, "#escape=x\nFROM scratch").unwrap_err();
        assert_eq!((e.span.pos.line, e.span.pos.col), (1, 9));
    }
}
