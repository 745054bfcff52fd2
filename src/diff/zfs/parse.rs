//! A parser for what `zfs diff` prints, in every form OpenZFS writes.
//!
//! One line per changed object (from `libzfs_diff.c`), fields separated by
//! tabs when `-H` is given:
//!
//! ```text
//! [ctime<TAB>]  CHANGE<TAB>  [TYPE<TAB>]  PATH  [<TAB>NEWPATH | <TAB>(+N) | <TAB>(-N)]
//! ```
//!
//! - `ctime` (`-t`): seconds, a dot and nine digits of nanoseconds; the
//!   seconds are right-aligned in ten columns, so they may start with spaces.
//! - `CHANGE`: `+` added, `-` removed, `M` modified, `R` renamed (then
//!   `NEWPATH` follows). A file deleted and created again under the same
//!   name is a `-` line and a `+` line.
//! - `TYPE` (`-F`): `F` file, `/` directory, `@` symlink, `=` socket, `|`
//!   fifo, `B` block device, `C` character device, `>` door and `P` event
//!   port (Solaris only), `?` anything else.
//! - `PATH` is the mountpoint of the dataset followed by the object's path
//!   inside it (`/` for the root directory). An object whose name cannot be
//!   found because it is on the delete queue (unlinked, still open) is the
//!   mountpoint followed by `(on_delete_queue)`, with no slash between.
//! - A change of link count alone (a hard link added or removed) is an `M`
//!   line whose path is followed by `(+N)` or `(-N)`; it names one of the
//!   object's names only (openzfs#13283).
//! - Without `-h`, every byte of a path that is not printable ASCII (`<=
//!   0x20`, `\` and `>= 0x7f`) is written as `\` and four octal digits
//!   (`\0040` for a space). With `-h` (OpenZFS >= 2.1.5) bytes are written
//!   as they are, so a name holding a tab or a newline cannot be told apart
//!   from the separators: jbuild never asks for `-h`, and the parser refuses
//!   such lines rather than guess.
//!
//! The parser never panics, whatever the input: every malformed line is a
//! [`ParseError`] that names the line, shows it escaped, and says what was
//! expected.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The change column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Modified,
    Renamed,
}

/// The type column (`-F`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    File,
    Dir,
    Symlink,
    Socket,
    Fifo,
    BlockDevice,
    CharDevice,
    Door,
    EventPort,
    Unknown,
}

impl FileType {
    fn from_byte(b: u8) -> Option<FileType> {
        Some(match b {
            b'F' => FileType::File,
            b'/' => FileType::Dir,
            b'@' => FileType::Symlink,
            b'=' => FileType::Socket,
            b'|' => FileType::Fifo,
            b'B' => FileType::BlockDevice,
            b'C' => FileType::CharDevice,
            b'>' => FileType::Door,
            b'P' => FileType::EventPort,
            b'?' => FileType::Unknown,
            _ => return None,
        })
    }
}

/// A path of the output, relative to the dataset's mountpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    /// The dataset's root directory.
    Root,
    /// A path below the root: relative, normalised, never empty.
    Path(PathBuf),
    /// An object on the delete queue: it has no name in the snapshot.
    OnDeleteQueue,
}

/// One line of `zfs diff` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub change: Change,
    /// Present when the output was made with `-F`.
    pub file_type: Option<FileType>,
    pub name: Name,
    /// The new name of a renamed object (`R` lines only).
    pub new_name: Option<Name>,
    /// The change of link count, from a `(+N)`/`(-N)` suffix.
    pub link_delta: Option<i64>,
    /// The object's ctime (`-t`), seconds and nanoseconds.
    pub ctime: Option<(i64, u32)>,
}

/// How the output was asked for: which optional columns it has, and
/// whether names are escaped.
#[derive(Debug, Clone)]
pub struct Format {
    /// The mountpoint of the dataset that was diffed (the "to" side), as
    /// the paths start with it. `/` and the empty string both mean a
    /// dataset mounted at `/`.
    pub mountpoint: Vec<u8>,
    /// `-F`: the type column is present.
    pub classify: bool,
    /// `-t`: the ctime column is present.
    pub timestamps: bool,
    /// `-h`: names are printed as they are, not escaped.
    pub raw_names: bool,
}

impl Format {
    /// What jbuild runs: `zfs diff -H -F` (escaped names, no timestamps).
    pub fn jbuild(mountpoint: &Path) -> Format {
        Format {
            mountpoint: mountpoint.as_os_str().as_bytes().to_vec(),
            classify: true,
            timestamps: false,
            raw_names: false,
        }
    }
}

/// A line `zfs diff` should not have printed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("zfs diff output, line {line}: {reason}: `{text}`")]
pub struct ParseError {
    /// 1-based line number in the output.
    pub line: usize,
    /// The line, with every unprintable byte escaped as `zfs diff` would.
    pub text: String,
    pub reason: String,
}

impl crate::blame::Blame for ParseError {
    /// `zfs diff` output jbuild cannot read: the system's.
    fn is_user_error(&self) -> bool {
        false
    }
}

/// Parses the whole output of one `zfs diff -H` run.
pub fn parse(output: &[u8], format: &Format) -> Result<Vec<Record>, ParseError> {
    let mut records = Vec::new();
    if output.is_empty() {
        return Ok(records);
    }
    let body = output.strip_suffix(b"\n").unwrap_or(output);
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        records.push(parse_line(line, format).map_err(|reason| ParseError {
            line: i + 1,
            text: escape(line),
            reason,
        })?);
    }
    Ok(records)
}

/// Parses one line (without its newline). The error is the reason only;
/// [`parse`] adds where.
pub fn parse_line(line: &[u8], format: &Format) -> Result<Record, String> {
    let mut fields = line.split(|&b| b == b'\t');
    let mut take = |what: &str| -> Result<&[u8], String> {
        fields
            .next()
            .ok_or_else(|| format!("the line ends before the {what}"))
    };
    let ctime = if format.timestamps {
        Some(parse_ctime(take("ctime column")?)?)
    } else {
        None
    };
    let change = match take("change column")? {
        b"+" => Change::Added,
        b"-" => Change::Removed,
        b"M" => Change::Modified,
        b"R" => Change::Renamed,
        other => {
            return Err(format!(
                "unknown change `{}` (expected + - M or R)",
                escape(other)
            ))
        }
    };
    let file_type = if format.classify {
        let field = take("type column")?;
        match field {
            [b] => Some(FileType::from_byte(*b).ok_or_else(|| {
                format!(
                    "unknown file type `{}` (expected one of F / @ = | B C > P ?)",
                    escape(field)
                )
            })?),
            _ => {
                return Err(format!(
                    "the type column is `{}`, not one character (was the output made with -F?)",
                    escape(field)
                ))
            }
        }
    } else {
        None
    };
    let hint = if format.raw_names {
        " (a name with a tab in it cannot be read from `zfs diff -h` output)"
    } else {
        ""
    };
    let path = take("path")?;
    let (new_path, suffix) = match change {
        Change::Renamed => (Some(take("new path of the rename")?), None),
        _ => (None, take("").ok()),
    };
    let link_delta = match suffix {
        None => None,
        Some(s) if change == Change::Modified => Some(parse_link_delta(s)?),
        Some(s) => {
            return Err(format!(
                "unexpected field `{}` after the path{hint}",
                escape(s)
            ))
        }
    };
    if let Ok(extra) = take("") {
        return Err(format!(
            "unexpected field `{}` at the end{hint}",
            escape(extra)
        ));
    }
    let name = decode_name(path, format)?;
    let new_name = new_path.map(|p| decode_name(p, format)).transpose()?;
    if new_name == Some(Name::OnDeleteQueue) || (new_name.is_some() && name == Name::OnDeleteQueue)
    {
        return Err("a rename of an object on the delete queue".into());
    }
    Ok(Record {
        change,
        file_type,
        name,
        new_name,
        link_delta,
        ctime,
    })
}

fn parse_ctime(field: &[u8]) -> Result<(i64, u32), String> {
    let bad = || format!("`{}` is not a ctime (seconds.nanoseconds)", escape(field));
    let text = std::str::from_utf8(field).map_err(|_| bad())?.trim_start();
    let (s, ns) = text.split_once('.').ok_or_else(bad)?;
    if ns.len() != 9 || !ns.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let s: i64 = s.parse().map_err(|_| bad())?;
    Ok((s, ns.parse().map_err(|_| bad())?))
}

fn parse_link_delta(field: &[u8]) -> Result<i64, String> {
    let bad = || {
        format!(
            "`{}` after the path is not a link-count change like (+1) or (-2)",
            escape(field)
        )
    };
    let inner = field
        .strip_prefix(b"(")
        .and_then(|f| f.strip_suffix(b")"))
        .ok_or_else(bad)?;
    let (sign, digits) = match inner.split_first() {
        Some((b'+', d)) => (1, d),
        Some((b'-', d)) => (-1, d),
        _ => return Err(bad()),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let n: i64 = std::str::from_utf8(digits)
        .map_err(|_| bad())?
        .parse()
        .map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    Ok(sign * n)
}

/// Decodes a path field and makes it relative to the mountpoint.
fn decode_name(field: &[u8], format: &Format) -> Result<Name, String> {
    let full = if format.raw_names {
        field.to_vec()
    } else {
        unescape(field)?
    };
    let mnt = format.mountpoint.as_slice();
    let mnt = if mnt == b"/" { &b""[..] } else { mnt };
    let mnt = mnt.strip_suffix(b"/").unwrap_or(mnt);
    let rest = full.strip_prefix(mnt).ok_or_else(|| {
        format!(
            "the path `{}` is not under the mountpoint `{}`",
            escape(&full),
            escape(mnt)
        )
    })?;
    if rest == b"(on_delete_queue)" {
        return Ok(Name::OnDeleteQueue);
    }
    let rel = match rest {
        b"" | b"/" => return Ok(Name::Root),
        [b'/', rel @ ..] => rel,
        _ => {
            return Err(format!(
                "the path `{}` is not under the mountpoint `{}`",
                escape(&full),
                escape(mnt)
            ))
        }
    };
    let path = Path::new(OsStr::from_bytes(rel));
    let normal = !rel.ends_with(b"/")
        && !rel.windows(2).any(|w| w == b"//")
        && !rel.contains(&0)
        && path.components().all(|c| matches!(c, Component::Normal(_)));
    if !normal {
        return Err(format!(
            "the path `{}` is not a plain path below the mountpoint (`.`, `..`, `//` or NUL)",
            escape(&full)
        ));
    }
    Ok(Name::Path(path.to_path_buf()))
}

/// Undoes `zfs diff`'s escaping: `\` and four octal digits is one byte.
pub fn unescape(field: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let b = field[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let digits = field.get(i + 1..i + 5).unwrap_or(&field[i + 1..]);
        let value = (digits.len() == 4 && digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .then(|| digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0')))
            .filter(|&v| v <= 0xff)
            .ok_or_else(|| {
                format!(
                    "`\\{}` in a path is not an escape (`\\` and four octal digits up to \\0377)",
                    escape(digits)
                )
            })?;
        out.push(value as u8);
        i += 5;
    }
    Ok(out)
}

/// Writes bytes as `zfs diff` does without `-h`, but for spaces, so a line
/// in a message is always printable and unambiguous.
pub fn escape(bytes: &[u8]) -> String {
    struct Escaped<'a>(&'a [u8]);
    impl fmt::Display for Escaped<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            for &b in self.0 {
                if b >= b' ' && b != b'\\' && b < 0x7f {
                    write!(f, "{}", b as char)?;
                } else {
                    write!(f, "\\{b:04o}")?;
                }
            }
            Ok(())
        }
    }
    Escaped(bytes).to_string()
}

#[cfg(test)]
mod tests;
