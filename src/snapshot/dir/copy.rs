//! A faithful copy of a directory tree: what `prepare` does for the `dir`
//! backend, where a ZFS clone would be used otherwise.
//!
//! "Faithful" means a layer exported from the copy is the layer exported
//! from the original: same types (regular files, directories, symlinks,
//! FIFOs, device nodes), same hard-link groups, owners, permission bits
//! including setuid/setgid/sticky, access and modification times to the
//! nanosecond, extended attributes, and file flags (read and set through
//! [`FileFlags`]; only FreeBSD's files have any). Sockets are
//! skipped: they cannot be copied, and layers do not carry them.
//!
//! The order of the steps per entry is forced by the kernel's rules:
//! `chown` clears setuid/setgid, so the mode is set after it; writing into
//! a directory changes its mtime, so a directory's times are set after its
//! children; `schg`-like flags forbid later changes, so flags are set last
//! of all, once the whole tree is done.
//!
//! A regular file's bytes are copied as cheaply as the filesystem allows
//! (see [`copy_file`]): a reflink where it has them (XFS, btrfs: the copy
//! shares the parent's extents until either is written), else
//! `copy_file_range(2)` (the kernel copies, no round trip through user
//! space), else `read`/`write`. Which one was used is counted in
//! [`CopyCounts`]; the tree is the same whichever it was.

use std::collections::HashMap;
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use filetime::FileTime;
use nix::sys::stat::{Mode, SFlag};

use crate::fsutil::flags::{self, st_flags, FileFlags};

/// Copies the tree at `src` to `dst`, which must not exist.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    copy_tree_with(src, dst, FileCopy::Cheapest).map(drop)
}

/// How [`copy_tree_with`] copies the bytes of regular files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileCopy {
    /// A reflink, else `copy_file_range(2)`, else `read`/`write`: the
    /// first the filesystem supports, file by file.
    Cheapest,
    /// `read`/`write` only: the fallback, on its own (for tests and
    /// measurements).
    ReadWrite,
}

/// How many regular files [`copy_tree_with`] copied by each means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyCounts {
    /// Reflinked (`FICLONE`): extents shared with the source.
    pub reflinked: u64,
    /// Copied in the kernel by `copy_file_range(2)`.
    pub ranged: u64,
    /// Copied through user space by `read`/`write`.
    pub read_write: u64,
}

/// [`copy_tree`], copying regular files' bytes as `how` says, and counting
/// what was used.
pub fn copy_tree_with(src: &Path, dst: &Path, how: FileCopy) -> io::Result<CopyCounts> {
    copy_tree_with_flags(src, dst, how, flags::host())
}

/// [`copy_tree_with`], reading and setting file flags through
/// `file_flags` rather than the host's.
pub fn copy_tree_with_flags(
    src: &Path,
    dst: &Path,
    how: FileCopy,
    file_flags: &dyn FileFlags,
) -> io::Result<CopyCounts> {
    let mut copier = Copier::new(how, file_flags);
    let meta = fs::symlink_metadata(src)?;
    copier.copy(src, dst, &meta)?;
    copier.apply_flags()?;
    Ok(copier.counts)
}

/// Gives `dst` (which exists, of the same type) the owner, mode, extended
/// attributes, times and flags of `src`, but none of its content: the root
/// of an overlay snapshot's upper directory becomes the root of the tree.
pub fn copy_metadata(src: &Path, dst: &Path) -> io::Result<()> {
    let mut copier = Copier::new(FileCopy::Cheapest, flags::host());
    copier.copy_metadata(src, dst, &fs::symlink_metadata(src)?)?;
    copier.apply_flags()
}

struct Copier<'f> {
    /// The first copy made of each multiply-linked inode of the source,
    /// by (device, inode): later names of it become hard links to that copy.
    links: HashMap<(u64, u64), PathBuf>,
    is_root: bool,
    how: FileCopy,
    counts: CopyCounts,
    ways: Ways,
    file_flags: &'f dyn FileFlags,
    /// File flags to set once the whole tree is copied, children first.
    flags: Vec<(PathBuf, u32)>,
}

fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

impl<'f> Copier<'f> {
    fn copy(&mut self, src: &Path, dst: &Path, meta: &Metadata) -> io::Result<()> {
        let ft = meta.file_type();
        if !ft.is_dir() && meta.nlink() > 1 {
            let inode = (meta.dev(), meta.ino());
            if let Some(first) = self.links.get(&inode) {
                return fs::hard_link(first, dst).map_err(|e| with_path(e, "link", dst));
            }
            self.links.insert(inode, dst.to_path_buf());
        }
        let made = if ft.is_dir() {
            // Owner-only until its children are in; the real mode comes last.
            DirBuilder::new()
                .mode(0o700)
                .create(dst)
                .map_err(|e| with_path(e, "create", dst))?;
            for entry in fs::read_dir(src).map_err(|e| with_path(e, "read", src))? {
                let entry = entry.map_err(|e| with_path(e, "read", src))?;
                let child_meta = entry
                    .metadata()
                    .map_err(|e| with_path(e, "read", &entry.path()))?;
                self.copy(&entry.path(), &dst.join(entry.file_name()), &child_meta)?;
            }
            Ok(())
        } else if ft.is_file() {
            copy_file(src, dst, self.how, &mut self.ways).map(|used| match used {
                Used::Reflink => self.counts.reflinked += 1,
                Used::Range => self.counts.ranged += 1,
                Used::ReadWrite => self.counts.read_write += 1,
            })
        } else if ft.is_symlink() {
            fs::read_link(src).and_then(|target| std::os::unix::fs::symlink(target, dst))
        } else if ft.is_fifo() {
            nix::unistd::mkfifo(dst, Mode::S_IRUSR | Mode::S_IWUSR).map_err(io::Error::from)
        } else if ft.is_char_device() || ft.is_block_device() {
            let kind = if ft.is_char_device() {
                SFlag::S_IFCHR
            } else {
                SFlag::S_IFBLK
            };
            nix::sys::stat::mknod(dst, kind, Mode::S_IRUSR | Mode::S_IWUSR, meta.rdev() as _)
                .map_err(io::Error::from)
        } else {
            return Ok(()); // a socket
        };
        made.map_err(|e| with_path(e, "create", dst))?;
        self.copy_metadata(src, dst, meta)
            .map_err(|e| with_path(e, "copy the metadata of", src))
    }

    fn new(how: FileCopy, file_flags: &'f dyn FileFlags) -> Copier<'f> {
        Copier {
            links: HashMap::new(),
            is_root: nix::unistd::geteuid().is_root(),
            how,
            counts: CopyCounts::default(),
            ways: Ways::default(),
            file_flags,
            flags: Vec::new(),
        }
    }

    fn copy_metadata(&mut self, src: &Path, dst: &Path, meta: &Metadata) -> io::Result<()> {
        let is_symlink = meta.file_type().is_symlink();
        match std::os::unix::fs::lchown(dst, Some(meta.uid()), Some(meta.gid())) {
            Err(e) if !self.is_root && e.raw_os_error() == Some(libc::EPERM) => {}
            other => other?,
        }
        let mode = meta.mode() & 0o7777;
        if !self.is_root && !is_symlink && mode & 0o200 == 0 {
            // Setting user xattrs needs write permission; the real mode follows.
            fs::set_permissions(dst, fs::Permissions::from_mode(mode | 0o200))?;
        }
        copy_xattrs(src, dst, self.is_root)?;
        if !is_symlink {
            fs::set_permissions(dst, fs::Permissions::from_mode(mode))?;
        }
        let atime = FileTime::from_last_access_time(meta);
        let mtime = FileTime::from_last_modification_time(meta);
        filetime::set_symlink_file_times(dst, atime, mtime)?;
        let flags = self.file_flags.get(src, st_flags(meta))?;
        if flags != 0 {
            self.flags.push((dst.to_path_buf(), flags));
        }
        Ok(())
    }

    fn apply_flags(&self) -> io::Result<()> {
        for (path, flags) in &self.flags {
            self.file_flags
                .set(path, *flags)
                .map_err(|e| with_path(e, "set file flags on", path))?;
        }
        Ok(())
    }
}

/// The ways [`copy_file`] has found the filesystem cannot do, so it stops
/// asking: on ext4, `FICLONE` fails for every file, and 50,000 failed
/// calls are 50,000 wasted system calls.
#[derive(Debug, Default)]
struct Ways {
    #[cfg(target_os = "linux")]
    no_reflink: bool,
    no_range: bool,
}

/// What [`copy_file`] copied a file's bytes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Used {
    // FICLONE is Linux's; FreeBSD's ZFS clones blocks through
    // copy_file_range instead.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Reflink,
    Range,
    ReadWrite,
}

/// Copies the bytes of the regular file `src` to a new file `dst` (mode
/// 0600 until [`Copier::copy_metadata`] sets the real one).
///
/// `std::fs::copy` nearly does on Linux: it calls `copy_file_range`, which
/// within one XFS or btrfs the kernel turns into a reflink (seen with
/// strace and `filefrag -v` on Linux 6.18: one call, extents "shared"),
/// and on ext4 copies in the kernel. Not on FreeBSD, where it loops
/// `read`/`write` in user space; and it says neither what it did nor lets
/// a test force the fallback. So the
/// order is ours: `FICLONE` (Linux; one call for the whole file), then
/// `copy_file_range(2)` (Linux, FreeBSD 13+; on ZFS with block cloning it
/// clones too), then `read`/`write` from wherever the kernel stopped. A
/// filesystem that cannot do one answers `EXDEV`, `EOPNOTSUPP`, `EINVAL`,
/// `ENOSYS`... ([`try_next`]); any other error is the copy's.
///
/// A failure that says the filesystem cannot ([`cannot_here`]) is
/// remembered in `ways` for the rest of the tree; one that may be about
/// this file only is not.
fn copy_file(src: &Path, dst: &Path, how: FileCopy, ways: &mut Ways) -> io::Result<Used> {
    let mut from = File::open(src)?;
    let mut to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)?;
    if how == FileCopy::Cheapest {
        #[cfg(target_os = "linux")]
        if !ways.no_reflink {
            match reflink(&from, &to) {
                Ok(()) => return Ok(Used::Reflink),
                Err(e) if try_next(&e) => ways.no_reflink |= cannot_here(&e),
                Err(e) => return Err(e),
            }
        }
        #[cfg(any(target_os = "linux", target_os = "freebsd"))]
        if !ways.no_range {
            match copy_range(&from, &to) {
                Ok(()) => return Ok(Used::Range),
                Err(e) if try_next(&e) => ways.no_range |= cannot_here(&e),
                Err(e) => return Err(e),
            }
        }
    }
    // Both files' offsets are where `copy_range` stopped (0 if it never
    // started), so this finishes what it began.
    let mut buf = vec![0u8; 128 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
    }
    Ok(Used::ReadWrite)
}

/// `ioctl(dst, FICLONE, src)`: `dst` shares all of `src`'s extents.
#[cfg(target_os = "linux")]
fn reflink(from: &File, to: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: both descriptors are open for the duration of the call, and
    // FICLONE takes the source descriptor as its integer argument.
    if unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONE, from.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `copy_file_range(2)` until the end of `from`, from both files' offsets.
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
fn copy_range(from: &File, to: &File) -> io::Result<()> {
    loop {
        // At most 1 GiB a call: what both kernels take without complaint.
        match nix::fcntl::copy_file_range(from, None, to, None, 1 << 30) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether a failed reflink or `copy_file_range` means "not here, try the
/// next way" rather than a failed copy: another filesystem (`EXDEV`), an
/// unsupported operation (`EOPNOTSUPP`, `ENOTTY` for an unknown ioctl,
/// `ENOSYS`, `EINVAL` for a filesystem without the method), or a file the
/// method refuses (`EBADF`, `ETXTBSY`, `EPERM` on some kernels for
/// special files).
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
fn try_next(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EXDEV
                | libc::EOPNOTSUPP
                | libc::ENOTTY
                | libc::ENOSYS
                | libc::EINVAL
                | libc::EBADF
                | libc::ETXTBSY
                | libc::EPERM
        )
    ) || unsupported(e)
}

/// Whether a failed reflink or `copy_file_range` says the filesystem (or
/// the pair of them) cannot, for any file: `EXDEV`, `EOPNOTSUPP`,
/// `ENOTTY`, `ENOSYS`.
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
fn cannot_here(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EXDEV | libc::EOPNOTSUPP | libc::ENOTTY | libc::ENOSYS)
    ) || unsupported(e)
}

fn copy_xattrs(src: &Path, dst: &Path, is_root: bool) -> io::Result<()> {
    let names = match xattr::list(src) {
        Ok(names) => names,
        Err(e) if unsupported(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        let Some(value) = xattr::get(src, &name)? else {
            continue;
        };
        match xattr::set(dst, &name, &value) {
            Ok(()) => {}
            // Without root, `trusted.*` and `security.*` cannot be written;
            // the copy keeps what an unprivileged copy can keep.
            Err(e) if !is_root && e.raw_os_error() == Some(libc::EPERM) => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot set extended attribute {}: {e}",
                        name.to_string_lossy()
                    ),
                ))
            }
        }
    }
    Ok(())
}

fn unsupported(e: &io::Error) -> bool {
    // The same number on Linux and FreeBSD, but not everywhere.
    let code = e.raw_os_error();
    code == Some(libc::ENOTSUP) || code == Some(libc::EOPNOTSUPP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_a_tree() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::create_dir_all(src.join("d/e")).unwrap();
        fs::write(src.join("d/f"), "content").unwrap();
        fs::hard_link(src.join("d/f"), src.join("d/e/g")).unwrap();
        std::os::unix::fs::symlink("../nowhere", src.join("d/link")).unwrap();
        fs::set_permissions(src.join("d"), fs::Permissions::from_mode(0o1750)).unwrap();
        copy_tree(&src, &t.path().join("dst")).unwrap();
        let dst = t.path().join("dst");
        assert_eq!(fs::read_to_string(dst.join("d/f")).unwrap(), "content");
        let (a, b) = (
            fs::metadata(dst.join("d/f")).unwrap(),
            fs::metadata(dst.join("d/e/g")).unwrap(),
        );
        assert_eq!(a.ino(), b.ino());
        assert_eq!(
            fs::read_link(dst.join("d/link")).unwrap(),
            Path::new("../nowhere")
        );
        assert_eq!(fs::metadata(dst.join("d")).unwrap().mode() & 0o7777, 0o1750);
        assert!(copy_tree(&src, &dst).is_err(), "the target must not exist");
    }
}
