//! Errors for people: where (file:line:column), the source line with a
//! caret under the offending part, what is wrong and what to do.
//!
//! Inside the module an [`Error`] carries a [`Span`] (file id, line, column,
//! length); at the edge it becomes a [`Diagnostic`], which owns the file
//! name and the source line so it can be printed long after parsing.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::text::{FileId, Pos, Span};

/// A Jailfile error, ready to print. `Display` renders it like rustc,
/// without an `error: ` prefix (the CLI adds that):
///
/// ```text
/// unknown instruction `RUNN`
///   --> web/Jailfile:3:1
///    |
///  3 | RUNN pkg install -y nginx
///    | ^^^^
///    = help: did you mean `RUN`?
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    /// 1-based; 0 when the error is about the file as a whole (unreadable).
    pub line: u32,
    /// 1-based, in characters.
    pub column: u32,
    pub message: String,
    pub help: Option<String>,
    /// The source line pointed into, without its line break.
    pub source_line: String,
    /// How many characters the caret underlines (at least 1).
    pub span_len: u32,
}

impl Diagnostic {
    /// An error about a file as a whole, e.g. one that cannot be read.
    pub fn for_file(file: &Path, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            message: message.into(),
            help: None,
            source_line: String::new(),
            span_len: 1,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        let pad = self.line.to_string().len() + 1;
        if self.line == 0 {
            write!(f, "\n{:pad$}--> {}", "", self.file.display())?;
        } else {
            write!(
                f,
                "\n{:pad$}--> {}:{}:{}",
                "",
                self.file.display(),
                self.line,
                self.column
            )?;
            let (shown, caret_at, caret_len) = caret(&self.source_line, self.column, self.span_len);
            write!(f, "\n{:pad$} |", "")?;
            write!(
                f,
                "\n{}",
                format!("{:>pad$} | {shown}", self.line).trim_end()
            )?;
            write!(
                f,
                "\n{:pad$} | {:caret_at$}{}",
                "",
                "",
                "^".repeat(caret_len)
            )?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n{:pad$} = help: {help}", "")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

impl crate::blame::Blame for Diagnostic {
    /// A recipe (or template) that does not read: the user's to fix.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The most characters of a source line an error shows: a window around
/// the column, with `…` where it was cut (a line may be megabytes long).
const SHOWN: usize = 160;

/// The line as displayed (tabs as 4 spaces, at most [`SHOWN`] characters
/// of it around the column) and where the caret goes, in display cells.
fn caret(line: &str, column: u32, len: u32) -> (String, usize, usize) {
    let width = |c: char| if c == '\t' { 4 } else { 1 };
    let chars: Vec<char> = line.chars().collect();
    let before = column.saturating_sub(1) as usize;
    let (from, to) = if chars.len() <= SHOWN {
        (0, chars.len())
    } else {
        let from = before.saturating_sub(SHOWN / 3).min(chars.len() - SHOWN);
        (from, from + SHOWN)
    };
    let window = chars.get(from..to).unwrap_or_default();
    let mut shown = String::new();
    if from > 0 {
        shown.push('…');
    }
    for &c in window {
        if c == '\t' {
            shown.push_str("    ");
        } else {
            shown.push(c);
        }
    }
    if to < chars.len() {
        shown.push('…');
    }
    let lead = usize::from(from > 0);
    let at: usize = lead
        + chars
            .get(from..before.clamp(from, to))
            .unwrap_or_default()
            .iter()
            .map(|&c| width(c))
            .sum::<usize>()
        + before.saturating_sub(chars.len());
    let rest = chars.get(before.min(to)..to).unwrap_or_default();
    let under: usize = match len {
        0 => rest.iter().map(|&c| width(c)).sum(),
        n => rest.iter().take(n as usize).map(|&c| width(c)).sum(),
    };
    // A caret never asks the formatter for more than a line's width.
    (
        shown.trim_end().to_string(),
        at.min(SHOWN + 8),
        under.clamp(1, SHOWN),
    )
}

/// An error inside the module: a span and words; see [`Diagnostic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub span: Span,
    pub message: String,
    pub help: Option<String>,
}

impl Error {
    pub fn new(span: Span, message: impl Into<String>) -> Error {
        Error {
            span,
            message: message.into(),
            help: None,
        }
    }

    pub fn at(pos: Pos, message: impl Into<String>) -> Error {
        Error::new(Span::at(pos), message)
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Error {
        self.help = Some(help.into());
        self
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// Every file read during one load (the Jailfile and what it INCLUDEs), so
/// errors can name them and quote their lines.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    files: Vec<SourceFile>,
}

#[derive(Debug)]
struct SourceFile {
    path: Arc<PathBuf>,
    /// Shared with the resolver reading it, never copied.
    text: Arc<str>,
}

impl Sources {
    pub fn add(&mut self, path: PathBuf, text: String) -> FileId {
        self.files.push(SourceFile {
            path: Arc::new(path),
            text: text.into(),
        });
        FileId::try_from(self.files.len() - 1).unwrap_or(FileId::MAX)
    }

    /// The bytes of text read so far, all files together.
    pub fn total_len(&self) -> usize {
        self.files.iter().map(|f| f.text.len()).sum()
    }

    pub fn path(&self, id: FileId) -> Arc<PathBuf> {
        self.files
            .get(id as usize)
            .map_or_else(|| Arc::new(PathBuf::new()), |f| f.path.clone())
    }

    pub fn text(&self, id: FileId) -> &str {
        self.files.get(id as usize).map_or("", |f| &f.text)
    }

    /// The text of file `id`, shared (for reading it while adding others).
    pub fn shared_text(&self, id: FileId) -> Arc<str> {
        self.files
            .get(id as usize)
            .map_or_else(|| Arc::from(""), |f| f.text.clone())
    }

    pub fn diagnostic(&self, e: Error) -> Diagnostic {
        let Span { pos, len } = e.span;
        let source_line = self
            .text(pos.file)
            .split('\n')
            .nth(pos.line.saturating_sub(1) as usize)
            .unwrap_or("")
            .trim_end_matches('\r')
            .trim_start_matches('\u{feff}')
            .to_string();
        Diagnostic {
            file: self.path(pos.file).as_ref().clone(),
            line: pos.line.max(1),
            column: pos.col.max(1),
            message: e.message,
            help: e.help,
            source_line,
            span_len: len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_rustc() {
        let mut s = Sources::default();
        let f = s.add(
            PathBuf::from("web/Jailfile"),
            "FROM scratch\n\nRUNN pkg install -y nginx\n".into(),
        );
        let e = Error::new(
            Span::new(Pos::new(f, 3, 1), 4),
            "unknown instruction `RUNN`",
        )
        .with_help("did you mean `RUN`?");
        let want = "unknown instruction `RUNN`
  --> web/Jailfile:3:1
   |
 3 | RUNN pkg install -y nginx
   | ^^^^
   = help: did you mean `RUN`?";
        assert_eq!(s.diagnostic(e).to_string(), want);
    }

    #[test]
    fn caret_counts_characters_and_tabs() {
        assert_eq!(caret("\tRUN é x", 6, 1), ("    RUN é x".into(), 8, 1));
        assert_eq!(caret("ab", 5, 1), ("ab".into(), 4, 1));
        assert_eq!(caret("abcdef", 3, 0), ("abcdef".into(), 2, 4));
    }

    #[test]
    fn a_long_line_is_shown_around_the_column() {
        let line = format!("LABEL a={}", "x".repeat(3_000_000));
        let (shown, at, under) = caret(&line, 2_000_000, 3);
        assert_eq!(shown.chars().count(), SHOWN + 2, "{shown}");
        assert!(shown.starts_with('…') && shown.ends_with('…'));
        assert_eq!((at, under), (1 + SHOWN / 3, 3));
        let (shown, at, _) = caret(&line, 3, 1);
        assert!(shown.starts_with("LABEL") && shown.ends_with('…'));
        assert_eq!(at, 2);
        // Rendering does not panic on a column far past what a format
        // width may be.
        let mut s = Sources::default();
        let f = s.add(PathBuf::from("J"), line);
        let d = s.diagnostic(Error::new(Span::new(Pos::new(f, 1, 2_999_000), 1), "x"));
        assert!(d.to_string().len() < 1000);
    }
}
