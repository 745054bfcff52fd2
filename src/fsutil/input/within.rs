//! Files read from a directory that is itself the input: an OCI layout
//! (`import oci:DIR`, jbuild's own store). (The directories written into
//! one are checked by [`crate::fsutil::places`].)
//!
//! The directory is named by the user and followed as named; nothing
//! below it is. Each path is walked one component at a time from an open
//! descriptor of the directory (`openat`/`fstatat` with `O_NOFOLLOW`,
//! `AT_SYMLINK_NOFOLLOW`), so a `blobs -> /` or a blob that is a symlink
//! to `/etc/shadow` is refused where it stands, naming it, and never
//! opened. Unlike [`super::Beneath`], a symlink leading to another place
//! inside is refused too: an OCI layout has no reason to hold one (the
//! archive reader refuses them in the tar stream for the same reason).
//!
//! What is opened must be a regular file: the type is read with
//! `O_NONBLOCK` set, so a FIFO is refused at once instead of waiting for a
//! writer; its size is checked against the caller's bound before a byte
//! is read, and the read is bounded again in case it grows.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{fcntl, openat, AtFlags, FcntlArg, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};

use super::InputError;

/// A directory whose contents are opened without following any symlink
/// below it (see the module documentation).
#[derive(Debug, Clone)]
pub struct Within {
    root: PathBuf,
}

impl Within {
    pub fn new(root: impl Into<PathBuf>) -> Within {
        Within { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens `rel` for reading if it is a regular file of at most `max`
    /// bytes, reached from the root through real directories only;
    /// returns it with its size.
    pub fn open(&self, rel: &Path, max: u64) -> Result<(File, u64), InputError> {
        let (dir, name) = self.parent(rel)?;
        let name = name.ok_or(InputError::NotRegular {
            what: "a directory",
        })?;
        // What is there, before opening it: a symlink is refused by name.
        let st = match fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::ENOENT) => return Err(InputError::Missing),
            Err(e) => return Err(InputError::Io(e.into())),
        };
        regular(&st)?;
        let fd = openat(
            &dir,
            name.as_os_str(),
            OFlag::O_RDONLY
                | OFlag::O_NOFOLLOW
                | OFlag::O_NONBLOCK
                | OFlag::O_NOCTTY
                | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ENOENT => InputError::Missing,
            // Replaced by a symlink since it was looked at.
            Errno::ELOOP | Errno::EMLINK => InputError::NotRegular { what: "a symlink" },
            e => InputError::Io(e.into()),
        })?;
        // And again on what was opened: it may have been swapped meanwhile.
        let st = fstat(&fd).map_err(|e| InputError::Io(e.into()))?;
        regular(&st)?;
        let size = st.st_size as u64;
        if size > max {
            return Err(InputError::TooLarge { size, max });
        }
        // Reads of a regular file never wait; cleared all the same, so
        // the file behaves as any other handed on.
        fcntl(&fd, FcntlArg::F_SETFL(OFlag::empty())).map_err(|e| InputError::Io(e.into()))?;
        Ok((File::from(fd), size))
    }

    /// Reads `rel` whole, as [`Within::open`] opens it, at most `max`
    /// bytes whatever its size said.
    pub fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>, InputError> {
        let (file, size) = self.open(rel, max)?;
        super::read_at_most(file, max, size)
    }

    /// The size of `rel` if it is a regular file reached through real
    /// directories only; `None` for anything else or nothing.
    pub fn regular_len(&self, rel: &Path) -> Option<u64> {
        let (dir, name) = self.parent(rel).ok()?;
        let st = fstatat(&dir, name?.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        regular(&st).ok()?;
        Some(st.st_size as u64)
    }

    /// Walks `rel` from the root: every component but the last must be a
    /// real directory. Returns the last directory opened and the name of
    /// the last component, left to the caller.
    fn parent(&self, rel: &Path) -> Result<(OwnedFd, Option<PathBuf>), InputError> {
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => parts.push(n),
                Component::CurDir => {}
                // Callers pass paths they made; anything else is a bug.
                _ => {
                    return Err(InputError::Io(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("`{}` is not a plain relative path", rel.display()),
                    )))
                }
            }
        }
        let last = parts.pop();
        let mut dir = open_root(&self.root).map_err(|e| match e {
            Errno::ENOENT => InputError::Missing,
            e => InputError::Io(io::Error::from(e)),
        })?;
        let mut walked = PathBuf::new();
        for part in parts {
            walked.push(part);
            let through = |what| InputError::Through {
                part: walked.clone(),
                what,
            };
            match fstatat(&dir, part, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if kind(&st) == SFlag::S_IFDIR => {}
                Ok(st) => return Err(through(describe(&st))),
                Err(Errno::ENOENT) => return Err(InputError::Missing),
                Err(e) => return Err(InputError::Io(e.into())),
            }
            dir = open_dir(&dir, part).map_err(|e| match e {
                Errno::ELOOP | Errno::EMLINK => through("a symlink"),
                Errno::ENOTDIR => through("something else"),
                Errno::ENOENT => InputError::Missing,
                e => InputError::Io(e.into()),
            })?;
        }
        Ok((dir, last.map(PathBuf::from)))
    }
}

/// Opens the directory `name` beneath `at` without following a symlink
/// there.
fn open_dir<Fd: AsFd>(at: Fd, name: &std::ffi::OsStr) -> Result<OwnedFd, Errno> {
    openat(
        at,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
}

/// Opens the root as named (following a symlink: the user named it).
fn open_root(root: &Path) -> Result<OwnedFd, Errno> {
    nix::fcntl::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode as _) & SFlag::S_IFMT
}

fn regular(st: &FileStat) -> Result<(), InputError> {
    if kind(st) == SFlag::S_IFREG {
        Ok(())
    } else {
        Err(InputError::NotRegular { what: describe(st) })
    }
}

/// What a node is, for a message.
fn describe(st: &FileStat) -> &'static str {
    match kind(st) {
        SFlag::S_IFREG => "a regular file",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFLNK => "a symlink",
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFSOCK => "a socket",
        _ => "not a file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn nothing_below_the_root_is_followed() {
        let t = tempfile::tempdir().unwrap();
        let (root, out) = (t.path().join("layout"), t.path().join("host"));
        fs::create_dir_all(root.join("blobs/sha256")).unwrap();
        fs::create_dir_all(&out).unwrap();
        fs::write(root.join("index.json"), "{}").unwrap();
        fs::write(out.join("shadow"), "root:s3cr3t").unwrap();
        symlink(out.join("shadow"), root.join("blobs/sha256/leak")).unwrap();
        symlink("../index.json", root.join("blobs/sha256/inside")).unwrap();
        symlink(&out, root.join("up")).unwrap();
        nix::unistd::mkfifo(&root.join("fifo"), Mode::S_IRWXU).unwrap();
        // The root itself may be reached through a symlink: the user named it.
        symlink(&root, t.path().join("named")).unwrap();
        let w = Within::new(t.path().join("named"));

        assert_eq!(w.read(Path::new("index.json"), 10).unwrap(), b"{}");
        assert_eq!(w.regular_len(Path::new("index.json")), Some(2));
        let err = |p: &str| w.read(Path::new(p), 100).unwrap_err().to_string();
        for (p, says) in [
            ("blobs/sha256/leak", "it is a symlink, not a regular file"),
            ("blobs/sha256/inside", "it is a symlink"),
            ("up/shadow", "`up` on the way is a symlink"),
            ("fifo", "it is a FIFO, not a regular file"),
            ("blobs", "it is a directory"),
            ("missing", "no such file"),
            ("blobs/none/x", "no such file"),
        ] {
            let e = err(p);
            assert!(e.contains(says), "{p}: {e}");
            assert!(!e.contains("s3cr3t") && !e.contains("11 bytes"), "{e}");
            assert_eq!(w.regular_len(Path::new(p)), None, "{p}");
        }
        assert!(w
            .read(Path::new("index.json"), 1)
            .unwrap_err()
            .to_string()
            .contains("2 bytes, more than the 1"));
    }
}
