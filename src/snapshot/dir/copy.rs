//! A faithful copy of a directory tree: what `prepare` does for the `dir`
//! backend, where a ZFS clone would be used otherwise.
//!
//! "Faithful" means a layer exported from the copy is the layer exported
//! from the original: same types (regular files, directories, symlinks,
//! FIFOs, device nodes), same hard-link groups, owners, permission bits
//! including setuid/setgid/sticky, access and modification times to the
//! nanosecond, extended attributes, and on FreeBSD file flags. Sockets are
//! skipped: they cannot be copied, and layers do not carry them.
//!
//! The order of the steps per entry is forced by the kernel's rules:
//! `chown` clears setuid/setgid, so the mode is set after it; writing into
//! a directory changes its mtime, so a directory's times are set after its
//! children; `schg`-like flags forbid later changes, so flags are set last
//! of all, once the whole tree is done.

use std::collections::HashMap;
use std::fs::{self, DirBuilder, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use filetime::FileTime;
use nix::sys::stat::{Mode, SFlag};

/// Copies the tree at `src` to `dst`, which must not exist.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let mut copier = Copier::new();
    let meta = fs::symlink_metadata(src)?;
    copier.copy(src, dst, &meta)?;
    #[cfg(target_os = "freebsd")]
    copier.apply_flags()?;
    Ok(())
}

/// Gives `dst` (which exists, of the same type) the owner, mode, extended
/// attributes, times and flags of `src`, but none of its content: the root
/// of an overlay snapshot's upper directory becomes the root of the tree.
pub fn copy_metadata(src: &Path, dst: &Path) -> io::Result<()> {
    let mut copier = Copier::new();
    copier.copy_metadata(src, dst, &fs::symlink_metadata(src)?)?;
    #[cfg(target_os = "freebsd")]
    copier.apply_flags()?;
    Ok(())
}

struct Copier {
    /// The first copy made of each multiply-linked inode of the source,
    /// by (device, inode): later names of it become hard links to that copy.
    links: HashMap<(u64, u64), PathBuf>,
    is_root: bool,
    /// File flags to set once the whole tree is copied, children first.
    #[cfg(target_os = "freebsd")]
    flags: Vec<(PathBuf, u32)>,
}

fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

impl Copier {
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
            fs::copy(src, dst).map(drop)
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

    fn new() -> Copier {
        Copier {
            links: HashMap::new(),
            is_root: nix::unistd::geteuid().is_root(),
            #[cfg(target_os = "freebsd")]
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
        #[cfg(target_os = "freebsd")]
        {
            use std::os::freebsd::fs::MetadataExt as _;
            if meta.st_flags() != 0 {
                self.flags.push((dst.to_path_buf(), meta.st_flags()));
            }
        }
        Ok(())
    }

    #[cfg(target_os = "freebsd")]
    fn apply_flags(&self) -> io::Result<()> {
        for (path, flags) in &self.flags {
            set_flags(path, *flags).map_err(|e| with_path(e, "set file flags on", path))?;
        }
        Ok(())
    }
}

/// `lchflags(2)`: FreeBSD file flags (`schg`, `uappnd`, `nodump`, ...).
#[cfg(target_os = "freebsd")]
pub(super) fn set_flags(path: &Path, flags: u32) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::lchflags(c.as_ptr(), flags as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
