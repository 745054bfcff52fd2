//! Writing a file at a path the user names: `build --iidfile`,
//! `--provenance-file`, `push --digestfile`, `sbom --output`,
//! `bastille convert --output`, `export IMG oci-archive:FILE`, `create
//! --conf` (and the fstab and rctl.conf beside it), `man --out DIR`.
//!
//! Why one function for all of them: the natural way to write a result is
//! a temporary file renamed over the path (nobody reads half of it), but a
//! rename *replaces* whatever the path was. As root, `--iidfile /dev/null`
//! or `oci-archive:/dev/stdout` would replace the system's `/dev/null` or
//! `/dev/stdout` with a regular file. So what the path is decides how it
//! is written ([`Output::at`]):
//!
//! | the path is | written |
//! |---|---|
//! | missing, or a regular file | atomically: a temporary file beside it, fsynced, renamed over it, the directory fsynced |
//! | a symlink to a regular file | the same, beside and over the file it points to: the link stays a link (docker writes through it too) |
//! | a FIFO, a character device (`/dev/null`, a terminal), or a symlink to one (`/dev/stdout` on a pipe) | in place: opened for writing, never created, truncated or replaced |
//! | `-` | standard output |
//! | a directory, a socket, a block device, a symlink to nothing | refused, with what it is |
//!
//! A block device is refused because writing a digest or an image over a
//! disk is never what was meant; a socket cannot be opened by name.

use crate::blame::Blame;
use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The path that means standard output.
pub const STDOUT: &str = "-";

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path is something jbuild will not write to.
    #[error("{}: {what}; {help}", path.display())]
    Refused {
        path: PathBuf,
        what: String,
        help: &'static str,
    },
    #[error("cannot write {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Blame for OutputError {
    /// A refused path, or one that is missing its directory, not
    /// permitted and the like, is the user's to fix; a failing disk is not.
    fn is_user_error(&self) -> bool {
        match self {
            OutputError::Refused { .. } => true,
            OutputError::Io { source, .. } => super::path_at_fault(source),
        }
    }
}

/// How an output path is written (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `-`.
    Stdout,
    /// A regular file, or nothing yet: replaced by rename. The path is the
    /// file itself, symlinks resolved, so the rename lands beside it.
    Replace(PathBuf),
    /// A FIFO or character device: written where it is.
    Through(PathBuf),
}

/// A path the user named for jbuild to write, and how it will be written.
#[derive(Debug, Clone)]
pub struct Output {
    /// As the user wrote it, for messages.
    shown: PathBuf,
    target: Target,
    binary: bool,
}

const WRITABLE: &str =
    "name a regular file (replaced whole), a FIFO or character device (written in place), or `-` for standard output";

impl Output {
    /// Looks at `path` (following symlinks, creating nothing) and decides
    /// how it will be written.
    pub fn at(path: &Path) -> Result<Output, OutputError> {
        let target = target(path)?;
        Ok(Output {
            shown: path.to_path_buf(),
            target,
            binary: false,
        })
    }

    /// The output is binary (an archive): a terminal is refused, as docker
    /// refuses to write an image to one.
    pub fn binary(mut self) -> Output {
        self.binary = true;
        self
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The path as the user wrote it.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// Whether the output is written as it is produced, with nothing
    /// staged beside it (standard output, a FIFO, a device).
    pub fn is_stream(&self) -> bool {
        !matches!(self.target, Target::Replace(_))
    }

    /// Whether it goes to a terminal: standard output that is one, or a
    /// terminal named by its path (`/dev/tty`). Only a terminal's own
    /// path is opened to find out, never a FIFO (that would wait for a
    /// reader).
    pub fn is_terminal(&self) -> bool {
        match &self.target {
            Target::Stdout => io::stdout().is_terminal(),
            Target::Replace(_) => false,
            Target::Through(p) => {
                let char_device = fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device());
                char_device
                    && OpenOptions::new()
                        .write(true)
                        .custom_flags_noctty()
                        .open(p)
                        .is_ok_and(|f| f.is_terminal())
            }
        }
    }

    /// Writes `bytes` (see [`Output::write_with`]).
    pub fn write(&self, bytes: &[u8]) -> Result<(), OutputError> {
        self.write_with(|w| w.write_all(bytes))
    }

    /// Hands `produce` a writer for the output and finishes it: for a
    /// regular file, a temporary file beside it that replaces it only once
    /// `produce` succeeded and the bytes are on disk; for a stream, the
    /// stream itself (what `produce` wrote before a failure stays written).
    pub fn write_with(
        &self,
        produce: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), OutputError> {
        match &self.target {
            Target::Stdout => {
                if self.binary && io::stdout().is_terminal() {
                    return Err(self.refuse_terminal());
                }
                let mut out = BufWriter::with_capacity(64 << 10, io::stdout().lock());
                produce(&mut out)
                    .and_then(|()| out.flush())
                    .map_err(|source| self.io(source))
            }
            Target::Through(p) => {
                let file = OpenOptions::new()
                    .write(true)
                    .custom_flags_noctty()
                    .open(p)
                    .map_err(|source| self.io(source))?;
                if self.binary && file.is_terminal() {
                    return Err(self.refuse_terminal());
                }
                let mut out = BufWriter::with_capacity(64 << 10, file);
                produce(&mut out)
                    .and_then(|()| out.flush())
                    .map_err(|source| self.io(source))
            }
            Target::Replace(p) => replace_with(p, produce).map_err(|source| self.io(source)),
        }
    }

    fn io(&self, source: io::Error) -> OutputError {
        OutputError::Io {
            path: self.shown.clone(),
            source,
        }
    }

    fn refuse_terminal(&self) -> OutputError {
        OutputError::Refused {
            path: self.shown.clone(),
            what: "is a terminal".into(),
            help: "redirect it to a file or a pipe (`> image.tar`, `| ssh …`)",
        }
    }
}

/// Whether `path` names this process's standard output: `-`, or a path
/// that leads to the very file standard output is (`/dev/stdout`,
/// `/dev/fd/1`, the file a shell redirected it to). What would print a
/// result there stays quiet then, so the output is not mixed with it.
pub fn is_standard_output(path: &Path) -> bool {
    if path.as_os_str() == STDOUT {
        return true;
    }
    let Ok(named) = fs::metadata(path) else {
        return false;
    };
    use std::os::fd::AsFd;
    let Ok(out) = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| fs::File::from(fd).metadata())
    else {
        return false;
    };
    (named.dev(), named.ino()) == (out.dev(), out.ino())
}

/// Writes `bytes` at the path the user named, as [`Output`] decides.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    Output::at(path)?.write(bytes)
}

/// `O_NOCTTY`: opening a terminal by name must not make it the process's
/// controlling terminal.
trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOCTTY)
    }
}

fn target(path: &Path) -> Result<Target, OutputError> {
    if path.as_os_str() == STDOUT {
        return Ok(Target::Stdout);
    }
    let refuse = |what: String| OutputError::Refused {
        path: path.to_path_buf(),
        what,
        help: WRITABLE,
    };
    let io_err = |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return match fs::symlink_metadata(path) {
                Ok(l) if l.file_type().is_symlink() => {
                    let to = fs::read_link(path).unwrap_or_default();
                    Err(refuse(format!(
                        "is a symlink to `{}`, which does not exist",
                        to.display()
                    )))
                }
                // Missing: made by rename like a regular file (a missing
                // directory on the way fails there, naming the path).
                _ => Ok(Target::Replace(path.to_path_buf())),
            };
        }
        Err(e) => return Err(io_err(e)),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        let linked = fs::symlink_metadata(path)
            .map_err(io_err)?
            .file_type()
            .is_symlink();
        if !linked {
            return Ok(Target::Replace(path.to_path_buf()));
        }
        // The file the link leads to, so the rename replaces it and not
        // the link. A link whose real path is not that file (a descriptor
        // of `/proc/self/fd` for a deleted file) is written through.
        return Ok(match fs::canonicalize(path) {
            Ok(real)
                if fs::metadata(&real)
                    .is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino())) =>
            {
                Target::Replace(real)
            }
            _ => Target::Through(path.to_path_buf()),
        });
    }
    if kind.is_fifo() || kind.is_char_device() {
        return Ok(Target::Through(path.to_path_buf()));
    }
    let what = if kind.is_dir() {
        "is a directory"
    } else if kind.is_block_device() {
        "is a block device (a disk), which jbuild does not write over"
    } else if kind.is_socket() {
        "is a socket, which cannot be opened by name"
    } else {
        "is not a file"
    };
    Err(refuse(what.into()))
}

/// A temporary file beside `path`, filled by `produce`, fsynced and
/// renamed over it; then its directory fsynced.
fn replace_with(
    path: &Path,
    produce: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = super::parent_of(path);
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    let mut out = BufWriter::with_capacity(64 << 10, tmp);
    produce(&mut out)?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    tmp.as_file().sync_all()?;
    super::record_sync(tmp.path());
    tmp.persist(path).map_err(|e| e.error)?;
    super::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn target_of(p: &Path) -> Target {
        Output::at(p).unwrap().target().clone()
    }

    #[test]
    fn what_a_path_is_decides_how_it_is_written() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        assert_eq!(target_of(Path::new("-")), Target::Stdout);
        assert_eq!(target_of(&d.join("new")), Target::Replace(d.join("new")));
        fs::write(d.join("file"), "old").unwrap();
        assert_eq!(target_of(&d.join("file")), Target::Replace(d.join("file")));
        symlink(d.join("file"), d.join("link")).unwrap();
        let real = fs::canonicalize(d.join("file")).unwrap();
        assert_eq!(target_of(&d.join("link")), Target::Replace(real));
        nix::unistd::mkfifo(&d.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(target_of(&d.join("fifo")), Target::Through(d.join("fifo")));
        // Only looked at, never written.
        let null = Path::new("/dev/null");
        assert_eq!(target_of(null), Target::Through(null.to_path_buf()));

        for (path, says) in [
            (d.to_path_buf(), "is a directory"),
            (d.join("dangling"), "which does not exist"),
        ] {
            if path.ends_with("dangling") {
                symlink(d.join("nowhere"), &path).unwrap();
            }
            let e = Output::at(&path).unwrap_err();
            assert!(e.is_user_error());
            assert!(e.to_string().contains(says), "{e}");
            assert!(e.to_string().contains("FIFO"), "{e}");
        }
    }

    #[test]
    fn a_symlink_to_a_file_stays_a_link() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        fs::create_dir(d.join("real")).unwrap();
        fs::write(d.join("real/id"), "old").unwrap();
        symlink("real/id", d.join("id")).unwrap();
        write_output(&d.join("id"), b"new").unwrap();
        assert!(fs::symlink_metadata(d.join("id"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(d.join("real/id")).unwrap(), b"new");
        // No temporary file left beside either.
        assert_eq!(fs::read_dir(d).unwrap().count(), 2);
        assert_eq!(fs::read_dir(d.join("real")).unwrap().count(), 1);
    }

    #[test]
    fn a_fifo_is_written_in_place() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write_output(&fifo, b"sha256:x").unwrap();
        assert_eq!(reader.join().unwrap(), b"sha256:x");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        fs::write(&p, "old").unwrap();
        let e = Output::at(&p)
            .unwrap()
            .write_with(|w| {
                w.write_all(b"half")?;
                Err(io::Error::other("stopped"))
            })
            .unwrap_err();
        assert!(!e.is_user_error(), "{e}");
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
    }
}
