//! `--build-arg-file FILE`: build arguments kept in a file, in podman's
//! format — one `NAME=VALUE` a line, lines starting with `#` and blank
//! lines ignored. The value is everything after the first `=`, as
//! `--build-arg NAME=VALUE` would take it (no quotes are removed, no
//! variables expanded). `--build-arg` given on the command line wins over a
//! file's value for the same name.

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most a build-argument file may hold: it is a short list of names
/// and values, not data.
pub const MAX_ARG_FILE: u64 = 1 << 20;

/// A build-argument file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ArgFileError {
    #[error("cannot read build-argument file `{}`{}", path.display(), plainly(source))]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}:{line}: {why}; write one NAME=VALUE a line (lines starting with # are comments)",
        path.display()
    )]
    Line {
        path: PathBuf,
        line: usize,
        why: &'static str,
    },
}

impl Blame for ArgFileError {
    /// Always the user's to fix (exit code 1): a path they gave, a line
    /// they wrote.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// What a person would say of the failed read, for the kinds jbuild words
/// its own way; other errors are left to the cause printed after it.
fn plainly(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::InvalidData | ErrorKind::FileTooLarge => {
            format!(": {}", super::why(e))
        }
        _ => String::new(),
    }
}

/// Reads the build arguments in `path`; a later line wins over an
/// earlier one of the same name.
pub fn read(path: &Path) -> Result<BTreeMap<String, String>, ArgFileError> {
    use std::io::Read;
    let read_err = |source| ArgFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(read_err)?
        .take(MAX_ARG_FILE + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_ARG_FILE {
        return Err(read_err(std::io::ErrorKind::FileTooLarge.into()));
    }
    parse(path, &text)
}

/// Parses the text of a build-argument file (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<BTreeMap<String, String>, ArgFileError> {
    let mut out = BTreeMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let bad = |why| ArgFileError::Line {
            path: path.to_path_buf(),
            line: n + 1,
            why,
        };
        let (name, value) = trimmed
            .split_once('=')
            .ok_or_else(|| bad("no `=` on this line"))?;
        if name.is_empty() {
            return Err(bad("the name before `=` is empty"));
        }
        if name.chars().any(char::is_whitespace) {
            return Err(bad("the name before `=` holds a space"));
        }
        out.insert(name.to_string(), value.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_comments_and_blank_lines() {
        let text = "# a comment\n\nA=1\n  B=two words \nC=\nD=x=y\r\nA=3\n";
        let got = parse(Path::new("args.conf"), text).unwrap();
        let want: BTreeMap<String, String> =
            [("A", "3"), ("B", "two words "), ("C", ""), ("D", "x=y")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_line() {
        for (text, line, why) in [
            ("A=1\nJUSTANAME\n", 2, "no `=`"),
            ("\n\n=1\n", 3, "name before `=` is empty"),
            ("MY VAR=1\n", 1, "holds a space"),
        ] {
            let e = parse(Path::new("ci/args.conf"), text).unwrap_err();
            let shown = e.to_string();
            assert!(
                shown.starts_with(&format!("ci/args.conf:{line}: ")),
                "{shown}"
            );
            assert!(shown.contains(why), "{shown}");
        }
    }
}
