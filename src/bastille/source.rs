//! Reading a Bastille template: the `Bastillefile` (and the legacy per-hook
//! files), one instruction per line, with `${NAME}` replaced the way
//! Bastille's `template.sh` does it, split into words the way its `eval`
//! does, and errors that point into the file with a caret.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::jailfile::Diagnostic;

/// One non-blank, non-comment line of a Bastillefile or hook file.
#[derive(Debug, Clone)]
pub struct SrcLine {
    pub file: Arc<PathBuf>,
    /// 1-based.
    pub no: u32,
    /// The line as written (no line break).
    pub text: String,
    /// 1-based character column of the first word, and its length.
    pub cmd_col: u32,
    pub cmd_len: u32,
    /// 1-based character column where the arguments start.
    pub args_col: u32,
}

impl SrcLine {
    /// The first word (the instruction), as written.
    pub fn cmd(&self) -> String {
        self.text
            .chars()
            .skip(self.cmd_col as usize - 1)
            .take(self.cmd_len as usize)
            .collect()
    }

    /// Everything after the first word, trimmed, as written.
    pub fn raw_args(&self) -> String {
        self.text
            .chars()
            .skip(self.args_col as usize - 1)
            .collect::<String>()
            .trim()
            .to_string()
    }

    /// An error pointing at characters `col..col+len` of this line.
    pub fn error_at(&self, col: u32, len: u32, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.as_ref().clone(),
            line: self.no,
            column: col.max(1),
            message: message.into(),
            help: None,
            source_line: self.text.clone(),
            span_len: len.max(1),
        }
    }

    /// An error pointing at the instruction word.
    pub fn error_cmd(&self, message: impl Into<String>) -> Diagnostic {
        self.error_at(self.cmd_col, self.cmd_len, message)
    }

    /// An error pointing at the arguments, or at `word` among them when it
    /// can be found as written.
    pub fn error_word(&self, word: &str, message: impl Into<String>) -> Diagnostic {
        let args: Vec<char> = self.text.chars().collect();
        let start = self.args_col as usize - 1;
        let hay: String = args[start.min(args.len())..].iter().collect();
        if !word.is_empty() {
            if let Some(byte) = hay.find(word) {
                let col = start + hay[..byte].chars().count() + 1;
                return self.error_at(col as u32, word.chars().count() as u32, message);
            }
        }
        let len = self.raw_args().chars().count() as u32;
        self.error_at(self.args_col, len, message)
    }

    /// `path:line` for notes.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.display(), self.no)
    }
}

pub fn with_help(mut d: Diagnostic, help: impl Into<String>) -> Diagnostic {
    d.help = Some(help.into());
    d
}

/// Reads `path` as lines, skipping blank lines and `#` comments as
/// Bastille does (`grep -v '^[[:blank:]]*$' | grep -v '^[[:blank:]]*#'`).
pub fn read_lines(path: &Path) -> Result<Vec<SrcLine>, Diagnostic> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
            _ => e.to_string(),
        };
        Diagnostic::for_file(path, format!("cannot read `{}`: {why}", path.display()))
    })?;
    Ok(lines_of(path, &text))
}

pub fn lines_of(path: &Path, text: &str) -> Vec<SrcLine> {
    let file = Arc::new(path.to_path_buf());
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let lead = line.chars().count() - trimmed.chars().count();
        let cmd_len = trimmed.chars().take_while(|c| !c.is_whitespace()).count();
        out.push(SrcLine {
            file: file.clone(),
            no: i as u32 + 1,
            text: line.to_string(),
            cmd_col: lead as u32 + 1,
            cmd_len: cmd_len as u32,
            args_col: (lead + cmd_len) as u32 + 1,
        });
    }
    out
}

/// Replaces `${NAME}` for every name `lookup` knows, in one pass; other
/// text (including `$NAME` without braces and unknown names) stays as
/// written, as with Bastille's `sed -e 's/\${NAME}/value/g'` list.
pub fn substitute(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find('}') {
            Some(end) if is_name(&after[..end]) => match lookup(&after[..end]) {
                Some(v) => {
                    out.push_str(&v);
                    rest = &after[end + 1..];
                }
                None => {
                    out.push_str("${");
                    rest = after;
                }
            },
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits arguments into words with sh(1) quoting, as Bastille's
/// `eval "bastille cmd TARGET ${_args}"` does (quotes removed, backslash
/// escapes honoured; no expansion, since jbuild runs no host shell).
pub fn words(line: &SrcLine, args: &str) -> Result<Vec<String>, Diagnostic> {
    shlex::split(args).ok_or_else(|| {
        let quote = args
            .char_indices()
            .find(|(_, c)| *c == '"' || *c == '\'')
            .map(|(i, _)| args[i..i + 1].to_string())
            .unwrap_or_default();
        with_help(
            line.error_word(&quote, "unbalanced quote in the arguments"),
            "close the quote on the same line (a Bastillefile instruction is one line)",
        )
    })
}

/// The shell-unquoted form of an ARG value (`"1024M"` is `1024M`).
pub fn unquote(raw: &str) -> String {
    match shlex::split(raw) {
        Some(w) => w.join(" "),
        None => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_is_one_pass_and_braced_only() {
        let look = |n: &str| match n {
            "A" => Some("${B}".to_string()),
            "B" => Some("b".to_string()),
            _ => None,
        };
        assert_eq!(
            substitute("x=${A} y=$B z=${C} ${", &look),
            "x=${B} y=$B z=${C} ${"
        );
        assert_eq!(substitute("${B}${B}", &look), "bb");
    }

    #[test]
    fn comments_and_blanks_are_skipped_with_line_numbers_kept() {
        let l = lines_of(Path::new("B"), "# c\n\n  PKG nginx\n\t# x\nCMD  echo hi\n");
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].no, l[0].cmd(), l[0].raw_args()),
            (3, "PKG".into(), "nginx".into())
        );
        assert_eq!(l[0].cmd_col, 3);
        assert_eq!((l[1].no, l[1].raw_args()), (5, "echo hi".into()));
    }

    #[test]
    fn unquote_removes_shell_quotes() {
        assert_eq!(unquote("\"1024M\""), "1024M");
        assert_eq!(unquote("'a b'"), "a b");
        assert_eq!(unquote("it\"s"), "it\"s");
    }
}
