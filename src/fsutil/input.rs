//! Opening a file that comes from outside jbuild — a file a recipe names
//! (INCLUDE) — as hostile input: it must lie beneath one of the places it
//! is allowed in, after every symlink is resolved; it must be a regular
//! file (a FIFO or a device is refused at once, before anything waits on
//! it); its size is checked before a byte is read, and the read is bounded
//! again in case it grows. Errors name the path and what it is, never a
//! byte of what is in it.
//!
//! Why resolve first and then open with `O_NOFOLLOW`: a symlink inside the
//! allowed place that points at another file inside it is fine (a recipe
//! sharing a part); one that leads out is refused, naming where it leads.
//! The last component is opened without following, so it cannot be turned
//! into a symlink between the check and the open.

mod within;

pub use within::Within;

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Why an input was not read. None of these holds content of the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("no such file")]
    Missing,
    /// Outside every allowed place; `real` is where the path leads when
    /// that is elsewhere than it says (a symlink on the way).
    #[error("{}", outside(real.as_deref(), places))]
    Outside {
        real: Option<PathBuf>,
        places: Vec<PathBuf>,
    },
    #[error("it is {what}, not a regular file")]
    NotRegular { what: &'static str },
    /// A component on the way to it is not a real directory (a symlink,
    /// above all), where nothing is followed ([`Within`]).
    #[error(
        "`{}` on the way is {what}, not a directory; jbuild follows no symlink there",
        part.display()
    )]
    Through { part: PathBuf, what: &'static str },
    #[error("it is {size} bytes, more than the {max} allowed")]
    TooLarge { size: u64, max: u64 },
    /// A pipe ([`read_given`]) whose writer sent nothing, or that has none.
    #[error("it is a pipe that brought nothing (a FIFO nobody writes to?)")]
    EmptyPipe,
    #[error(transparent)]
    Io(io::Error),
}

fn outside(real: Option<&Path>, places: &[PathBuf]) -> String {
    let places: Vec<String> = places
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect();
    let through = real
        .map(|r| format!(" (through a symlink, it is `{}`)", r.display()))
        .unwrap_or_default();
    format!(
        "it is outside {}{through}",
        if places.is_empty() {
            "every place it may be read from".to_string()
        } else {
            places.join(" and ")
        }
    )
}

/// The places a path may lie beneath, each as written (made absolute,
/// `.` and `..` folded) and as it really is (symlinks resolved), so a path
/// is judged by where it really leads.
#[derive(Debug, Clone, Default)]
pub struct Beneath {
    places: Vec<(PathBuf, PathBuf)>,
}

impl Beneath {
    pub fn new<'a>(places: impl IntoIterator<Item = &'a Path>) -> Beneath {
        let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
        for p in places {
            let lexical = normalise(p);
            let real = std::fs::canonicalize(p).unwrap_or_else(|_| lexical.clone());
            if !out.iter().any(|(_, r)| *r == real) {
                out.push((lexical, real));
            }
        }
        Beneath { places: out }
    }

    /// The places as shown in messages.
    pub fn shown(&self) -> Vec<PathBuf> {
        self.places.iter().map(|(l, _)| l.clone()).collect()
    }

    /// Opens `path` for reading if it is a regular file of at most `max`
    /// bytes beneath one of the places; returns it with its size.
    pub fn open(&self, path: &Path, max: u64) -> Result<(File, u64), InputError> {
        let lexical = normalise(path);
        let real = match std::fs::canonicalize(path) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Whether something is there is not told for a path
                // outside: that too would be a fact about the host.
                return Err(if self.holds(&lexical, false) {
                    InputError::Missing
                } else {
                    self.outside(None)
                });
            }
            Err(e) => return Err(InputError::Io(e)),
        };
        if !self.holds(&real, true) {
            let shown = (real != lexical && self.holds(&lexical, false)).then_some(real);
            return Err(self.outside(shown));
        }
        let file = OpenOptions::new()
            .read(true)
            // A FIFO opens at once instead of waiting for a writer; the
            // type is checked before anything reads.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&real)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => InputError::NotRegular { what: "a symlink" },
                _ if e.kind() == io::ErrorKind::NotFound => InputError::Missing,
                _ => InputError::Io(e),
            })?;
        let meta = file.metadata().map_err(InputError::Io)?;
        let t = meta.file_type();
        if !t.is_file() {
            return Err(InputError::NotRegular { what: what(&t) });
        }
        if meta.len() > max {
            return Err(InputError::TooLarge {
                size: meta.len(),
                max,
            });
        }
        Ok((file, meta.len()))
    }

    fn holds(&self, path: &Path, real: bool) -> bool {
        self.places
            .iter()
            .any(|(l, r)| path.starts_with(if real { r } else { l }))
    }

    fn outside(&self, real: Option<PathBuf>) -> InputError {
        InputError::Outside {
            real,
            places: self.shown(),
        }
    }
}

/// Reads `file` as UTF-8 text, at most `max` bytes whatever its size said
/// (a file under `/proc` says 0): more is [`InputError::TooLarge`], other
/// bytes than UTF-8 an error of kind `InvalidData`, neither showing any.
pub fn read_text(file: File, max: u64) -> Result<String, InputError> {
    let bytes = read_at_most(file, max, 0)?;
    String::from_utf8(bytes)
        .map_err(|_| InputError::Io(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text")))
}

/// Reads a file the user named on the command line (`--secret
/// src=FILE`), at most `max` bytes: the path is followed as given (it is
/// the user's), and it must be a regular file or a pipe — `<(command)` and
/// `/dev/stdin` on a pipe are pipes. A device (`/dev/zero`, a terminal), a
/// directory or a socket is refused before anything is read. A FIFO is
/// opened without waiting for a writer and read to its end; one that
/// nobody writes to gives nothing, which is refused too, as a pipe that
/// brought nothing.
pub fn read_given(path: &Path, max: u64) -> Result<Vec<u8>, InputError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(InputError::Io)?;
    let meta = file.metadata().map_err(InputError::Io)?;
    let t = meta.file_type();
    if !(t.is_file() || t.is_fifo()) {
        return Err(InputError::NotRegular { what: what(&t) });
    }
    if t.is_file() && meta.len() > max {
        return Err(InputError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    // A pipe is read as one: each read waits for what its writer sends.
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .map_err(|e| InputError::Io(e.into()))?;
    let bytes = read_at_most(file, max, 0)?;
    if t.is_fifo() && bytes.is_empty() {
        return Err(InputError::EmptyPipe);
    }
    Ok(bytes)
}

/// Reads `from` to its end, at most `max` bytes: one byte more is asked
/// for, so an input larger than it said (a file that grew, a pipe) is
/// refused rather than cut. `reserve` is what to allocate first (the size
/// a file said, already checked against `max`).
fn read_at_most(from: impl Read, max: u64, reserve: u64) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::with_capacity(reserve.min(max) as usize);
    from.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(InputError::Io)?;
    if bytes.len() as u64 > max {
        return Err(InputError::TooLarge {
            size: bytes.len() as u64,
            max,
        });
    }
    Ok(bytes)
}

/// What a node that is not a regular file is, for a message.
fn what(t: &std::fs::FileType) -> &'static str {
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_socket() => "a socket",
        _ if t.is_symlink() => "a symlink",
        _ => "not a file",
    }
}

/// `path` made absolute (against the working directory) with `.` and `..`
/// folded, without looking at the filesystem.
pub fn normalise(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn only_regular_files_beneath_the_places() {
        let t = tempfile::tempdir().unwrap();
        let (ctx, out) = (t.path().join("ctx"), t.path().join("out"));
        fs::create_dir_all(ctx.join("sub")).unwrap();
        fs::create_dir_all(&out).unwrap();
        fs::write(ctx.join("sub/a.jf"), "RUN a\n").unwrap();
        fs::write(out.join("secret"), "TOKEN=s3cr3t\n").unwrap();
        symlink("sub/a.jf", ctx.join("inside")).unwrap();
        symlink(out.join("secret"), ctx.join("leak")).unwrap();
        nix::unistd::mkfifo(&ctx.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let b = Beneath::new([ctx.as_path()]);

        let read = |p: &Path| b.open(p, 100).and_then(|(f, _)| read_text(f, 100));
        assert_eq!(read(&ctx.join("sub/a.jf")).unwrap(), "RUN a\n");
        assert_eq!(read(&ctx.join("inside")).unwrap(), "RUN a\n");
        assert_eq!(read(&ctx.join("sub/../sub/a.jf")).unwrap(), "RUN a\n");
        let err = |p: &Path| read(p).unwrap_err().to_string();
        for (p, says) in [
            (ctx.join("../out/secret"), "it is outside"),
            (out.join("secret"), "it is outside"),
            (out.join("missing"), "it is outside"),
            (ctx.join("missing"), "no such file"),
            (ctx.join("fifo"), "a FIFO, not a regular file"),
            (ctx.join("sub"), "a directory"),
            (PathBuf::from("/proc/self/environ"), "it is outside"),
        ] {
            let e = err(&p);
            assert!(e.contains(says), "{}: {e}", p.display());
            assert!(!e.contains("s3cr3t"), "{e}");
        }
        let e = err(&ctx.join("leak"));
        assert!(
            e.contains("through a symlink") && e.contains("out/secret"),
            "{e}"
        );
        assert!(!e.contains("s3cr3t"), "{e}");
        fs::write(ctx.join("big"), vec![b'#'; 101]).unwrap();
        assert!(err(&ctx.join("big")).contains("101 bytes, more than the 100"));
    }
}
