//! A source file's physical lines, each character with its position: what
//! the lexer and the heredoc reader walk; and the one bound both hold an
//! instruction to ([`MAX_INSTRUCTION`]).

use super::diagnostic::Error;
use super::text::{FileId, Pos, Span};

/// A physical line: its number and characters with positions.
pub(crate) struct Line<'a> {
    pub number: u32,
    pub text: &'a str,
    pub file: FileId,
}

impl Line<'_> {
    pub fn chars(&self) -> impl Iterator<Item = (char, Pos)> + '_ {
        let (file, line) = (self.file, self.number);
        self.text
            .chars()
            .enumerate()
            .map(move |(i, c)| (c, Pos::new(file, line, col(i))))
    }

    pub fn is_blank_or_comment(&self) -> bool {
        let t = self.text.trim_start();
        t.is_empty() || t.starts_with('#')
    }

    /// The position of the line's first character.
    pub fn start(&self) -> Pos {
        Pos::new(self.file, self.number, 1)
    }

    /// The position just past the line's last character.
    pub fn end(&self) -> Pos {
        Pos::new(self.file, self.number, col(self.text.chars().count()))
    }
}

/// The 1-based column (or line number) of 0-based `index`.
pub(crate) fn col(index: usize) -> u32 {
    u32::try_from(index)
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}

/// The physical lines of `text` (a leading BOM, `\r` before `\n` and a
/// final empty line dropped).
pub(crate) fn lines(file: FileId, text: &str) -> Vec<Line<'_>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines: Vec<Line<'_>> = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| Line {
            number: col(i),
            text: l.strip_suffix('\r').unwrap_or(l),
            file,
        })
        .collect();
    if lines.last().is_some_and(|l| l.text.is_empty()) {
        lines.pop();
    }
    lines
}

/// The most characters one instruction may hold: its line with the lines
/// it continues on and its heredoc bodies. An instruction is held as
/// `Text`, sixteen bytes a character, in a few copies while it is parsed
/// and resolved; this keeps that to tens of MiB. Real instructions are a
/// few KiB; long content belongs in a file of the context.
pub(crate) const MAX_INSTRUCTION: usize = 1 << 20;

/// The error for an instruction longer than [`MAX_INSTRUCTION`], at `span`.
pub(crate) fn too_long(span: Span) -> Error {
    Error::new(
        span,
        format!(
            "this instruction is more than {} MiB long (with its continuation lines and heredocs), the most one instruction may be",
            MAX_INSTRUCTION >> 20
        ),
    )
    .with_help("keep long content in a file of the build context and COPY it")
}
