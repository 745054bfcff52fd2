//! `SYSRC`: sysrc(8) on an rc.conf-style file inside a root.
//!
//! What sysrc(8) does, and so what this does:
//!
//! - `name=value` edits the *last* assignment to `name` in the file (a line
//!   matching `^[ \t]*name=`), replacing only the value and keeping what
//!   follows it (a trailing `# comment`) and every other byte of the file.
//!   A single-quoted value stays single-quoted; unquoted, empty and
//!   double-quoted values are written double-quoted. Without an assignment,
//!   `name="value"` is appended. An assignment whose value starts with `$`,
//!   `` ` `` or `\` is left alone and a new one is appended after it.
//! - `name+=words` adds each word not already in the current value,
//!   `name-=words` removes every occurrence of each word, keeping the
//!   variable (possibly empty). Words are separated by blanks, or by the
//!   first character of the argument when that is not a letter, digit, `.`
//!   or `/` (`SYSRC ifconfig_lo0_aliases+=,alias1`). The current value is
//!   the file's last assignment or, when the file has none, the one in the
//!   root's `/etc/defaults/rc.conf` (sysrc reads the defaults too).
//!
//! Where jbuild differs, on purpose:
//!
//! - Values are literal: `"`, `\`, `$` and `` ` `` are escaped (sysrc writes
//!   the value between quotes as given, so `$x` would expand at boot). A
//!   value containing `'` turns a single-quoted assignment into a
//!   double-quoted one. Newlines and NUL are refused.
//! - sysrc learns the current value by running sh(1) on the files; jbuild
//!   runs nothing, so `+=`/`-=` on a value that is a shell expression is an
//!   error instead of a guess.
//! - A file without a final newline gets one before an appended line (sysrc
//!   would glue the new assignment onto the last line), and quoted values
//!   spanning several lines are understood.
//! - A symlinked file is followed inside the root and its target edited
//!   (sysrc's `mv` would replace the link with a regular file).

use std::path::{Path, PathBuf};

use crate::jailfile::SysrcOp;

use super::{is_var_name, read_optional, replace_if_changed, target_file, NativeError};

/// What a SYSRC did, as sysrc(8) prints it (`name: before -> after`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysrcChange {
    pub name: String,
    /// The value before, `None` if the variable was not set (or was a shell
    /// expression).
    pub before: Option<String>,
    pub after: String,
}

/// Applies `name=value` (or `+=`, `-=`) to `file` (a path inside `root`,
/// usually `/etc/rc.conf`), creating the file (0644) and its directories
/// (0755) if missing, keeping mode and owner of an existing file.
pub fn sysrc(
    root: &Path,
    file: &str,
    name: &str,
    op: SysrcOp,
    value: &str,
) -> Result<SysrcChange, NativeError> {
    if !is_var_name(name) {
        return Err(NativeError::InvalidName {
            name: name.to_string(),
            what: "rc.conf variable",
        });
    }
    if value.contains(['\n', '\0']) {
        let reason = "values cannot contain a newline or NUL";
        return Err(NativeError::InvalidValue {
            name: name.to_string(),
            reason,
        });
    }
    let shown = Path::new("/").join(file);
    let host = target_file(root, file)?;
    let old = read_optional(&host, &shown)?;
    let text: &[u8] = old.as_ref().map_or(&[], |(b, _)| b);
    let found = last_assignment(text, name, &shown)?;

    let (before, (path, line)) = match &found {
        Some(a) => (a.literal.clone(), (shown.clone(), a.line)),
        None => default_value(root, name)?,
    };
    let after = match op {
        SysrcOp::Set => value.to_string(),
        SysrcOp::Append | SysrcOp::Remove => {
            let Some(current) = before.clone() else {
                return Err(NativeError::NotLiteral {
                    name: name.to_string(),
                    path,
                    line,
                });
            };
            if op == SysrcOp::Append {
                append_words(&current, value)
            } else {
                remove_words(&current, value)
            }
        }
    };

    let mut new = Vec::with_capacity(text.len() + name.len() + after.len() + 4);
    match found.filter(|a| a.editable) {
        Some(a) => {
            new.extend_from_slice(&text[..a.start]);
            new.extend_from_slice(quote(&after, a.single).as_bytes());
            new.extend_from_slice(&text[a.end..]);
        }
        None => {
            new.extend_from_slice(text);
            if !new.is_empty() && !new.ends_with(b"\n") {
                new.push(b'\n');
            }
            new.extend_from_slice(format!("{name}={}\n", quote(&after, false)).as_bytes());
        }
    }
    replace_if_changed(&host, &shown, old.as_ref(), &new)?;
    Ok(SysrcChange {
        name: name.to_string(),
        before,
        after,
    })
}

/// The value of `name` in the root's `/etc/defaults/rc.conf` and where it
/// was found: `Some("")` if unset there or the file is missing, `None` if
/// it is an expression.
fn default_value(
    root: &Path,
    name: &str,
) -> Result<(Option<String>, (PathBuf, usize)), NativeError> {
    let shown = Path::new("/etc/defaults/rc.conf");
    let host = crate::fsutil::resolve_in_root(root, shown, true)
        .map_err(NativeError::io("resolve", shown))?;
    let found = match read_optional(&host, shown)? {
        Some((bytes, _)) => last_assignment(&bytes, name, shown)?,
        None => None,
    };
    Ok(match found {
        Some(a) => (a.literal, (shown.to_path_buf(), a.line)),
        None => (Some(String::new()), (shown.to_path_buf(), 0)),
    })
}

/// The last `name=` assignment of a file.
#[derive(Debug)]
struct Assignment {
    /// 1-based line number, for messages.
    line: usize,
    /// The byte range sysrc would replace: the quoted string with its
    /// quotes, the unquoted word, or an empty range for `name=`.
    start: usize,
    end: usize,
    /// Whether sysrc would edit it in place (the value does not start with
    /// `$`, `` ` `` or `\`).
    editable: bool,
    single: bool,
    /// The value, if it is a literal jbuild can read without a shell.
    literal: Option<String>,
}

fn last_assignment(
    text: &[u8],
    name: &str,
    shown: &Path,
) -> Result<Option<Assignment>, NativeError> {
    let mut last = None;
    let mut offset = 0;
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let indent = line
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let rest = &line[indent..];
        if rest.starts_with(name.as_bytes()) && rest.get(name.len()) == Some(&b'=') {
            last = Some((index + 1, offset + indent + name.len() + 1));
        }
        offset += line.len() + 1;
    }
    let Some((line, start)) = last else {
        return Ok(None);
    };
    parse_value(text, start, line)
        .map(Some)
        .map_err(|reason| NativeError::Syntax {
            path: shown.to_path_buf(),
            line,
            reason,
        })
}

/// Characters that end an unquoted shell word.
fn ends_word(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
    )
}

fn parse_value(text: &[u8], start: usize, line: usize) -> Result<Assignment, &'static str> {
    let mut a = Assignment {
        line,
        start,
        end: start,
        editable: true,
        single: false,
        literal: None,
    };
    match text.get(start) {
        None => a.literal = Some(String::new()),
        Some(&c) if ends_word(c) => a.literal = Some(String::new()),
        Some(b'$' | b'`' | b'\\') => a.editable = false,
        Some(b'\'') => {
            let len = text[start + 1..]
                .iter()
                .position(|&b| b == b'\'')
                .ok_or("unterminated single quote")?;
            a.end = start + len + 2;
            a.single = true;
            a.literal = Some(String::from_utf8_lossy(&text[start + 1..a.end - 1]).into_owned());
        }
        Some(b'"') => {
            let mut value = Vec::new();
            let mut literal = true;
            let mut i = start + 1;
            loop {
                match text.get(i) {
                    None => return Err("unterminated double quote"),
                    Some(b'"') => break,
                    Some(b'\\') => match text.get(i + 1) {
                        Some(&c @ (b'"' | b'\\' | b'$' | b'`')) => {
                            value.push(c);
                            i += 1;
                        }
                        Some(b'\n') => i += 1,
                        _ => value.push(b'\\'),
                    },
                    Some(&c) => {
                        literal &= c != b'$' && c != b'`';
                        value.push(c);
                    }
                }
                i += 1;
            }
            a.end = i + 1;
            a.literal = literal.then(|| String::from_utf8_lossy(&value).into_owned());
        }
        Some(_) => {
            let len = text[start..]
                .iter()
                .position(|&b| ends_word(b))
                .unwrap_or(text.len() - start);
            a.end = start + len;
            let word = &text[start..a.end];
            let plain = !word
                .iter()
                .any(|b| matches!(b, b'$' | b'`' | b'\\' | b'"' | b'\''));
            a.literal = plain.then(|| String::from_utf8_lossy(word).into_owned());
        }
    }
    // `name="a"b` is a concatenation: sysrc edits the quoted part, but the
    // value is not one jbuild can read.
    if a.end > start && text.get(a.end).is_some_and(|&b| !ends_word(b)) {
        a.literal = None;
    }
    Ok(a)
}

/// The value as sysrc writes it: in double quotes with `"`, `\`, `$` and
/// `` ` `` escaped, or in single quotes when the assignment had them and the
/// value allows it.
fn quote(value: &str, single: bool) -> String {
    if single && !value.contains('\'') {
        return format!("'{value}'");
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// sysrc(8)'s word separator for `+=`/`-=`: the argument's first
/// character unless it is blank, a letter, a digit, `.` or `/`.
fn delimiter(arg: &str) -> Option<char> {
    arg.chars()
        .next()
        .filter(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | ' ' | '\t' | '\n')))
}

fn words(s: &str, delim: Option<char>) -> Vec<&str> {
    match delim {
        Some(d) => s.split(d).filter(|w| !w.is_empty()).collect(),
        None => s.split_ascii_whitespace().collect(),
    }
}

/// sysrc(8)'s `+=`: the current value verbatim, then each new word not in
/// it, joined by the delimiter.
fn append_words(current: &str, add: &str) -> String {
    let delim = delimiter(add);
    let sep = delim.unwrap_or(' ');
    let have = words(current, delim);
    let mut new = current.to_string();
    for word in words(add, delim) {
        if !have.contains(&word) {
            new.push(sep);
            new.push_str(word);
        }
    }
    new.strip_prefix(sep).map(str::to_string).unwrap_or(new)
}

/// sysrc(8)'s `-=`: the words of the current value that are not removed,
/// joined by the delimiter.
fn remove_words(current: &str, remove: &str) -> String {
    let delim = delimiter(remove);
    let gone = words(remove, delim);
    let kept: Vec<&str> = words(current, delim)
        .into_iter()
        .filter(|w| !gone.contains(w))
        .collect();
    kept.join(&delim.unwrap_or(' ').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Assignment {
        last_assignment(text.as_bytes(), "x", Path::new("/f"))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn parses_value_forms() {
        assert_eq!(
            parse("x=\"a \\\"b\\\" \\$c\" # c").literal.as_deref(),
            Some("a \"b\" $c")
        );
        assert_eq!(parse("x='a $b'").literal.as_deref(), Some("a $b"));
        assert_eq!(parse("x=plain;y=1").literal.as_deref(), Some("plain"));
        assert_eq!(parse("x=").literal.as_deref(), Some(""));
        assert_eq!(parse("x=\"$HOME\"").literal, None);
        assert!(parse("x=\"$HOME\"").editable);
        assert!(!parse("x=`hostname`").editable);
        assert_eq!(parse("x=\"a\"b").literal, None);
        assert_eq!(
            parse("x=\"multi\nline\"").literal.as_deref(),
            Some("multi\nline")
        );
        assert!(last_assignment(b"x=\"open", "x", Path::new("/f")).is_err());
        // Only whole names at the start of a line count.
        assert!(last_assignment(b"xx=1\n#x=2\n", "x", Path::new("/f"))
            .unwrap()
            .is_none());
    }

    #[test]
    fn words_like_sysrc() {
        assert_eq!(append_words("", "lo1"), "lo1");
        assert_eq!(append_words("lo0  lo1", "lo1 lo2"), "lo0  lo1 lo2");
        assert_eq!(append_words("a,b", ",c,a"), "a,b,c");
        assert_eq!(remove_words("a b a c", "a"), "b c");
        assert_eq!(remove_words("a", "a"), "");
        assert_eq!(remove_words("a,b,c", ",b"), "a,c");
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a \"$b\" `c` \\", false), r#""a \"\$b\" \`c\` \\""#);
        assert_eq!(quote("it's", true), "\"it's\"");
        assert_eq!(quote("$x", true), "'$x'");
    }
}
