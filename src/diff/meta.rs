//! What jbuild knows about one file without opening it: the `lstat` fields a
//! layer carries, its extended attributes and (on FreeBSD) its file flags.
//!
//! The tree-walk differ compares these between snapshots and the tar writer
//! writes them, so both read them the same way, here.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The type of a file, as a tar entry can describe it (plus sockets, which
/// it cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Regular,
    Dir,
    Symlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
}

/// The `lstat` fields that matter to a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub kind: FileKind,
    /// Permission bits plus setuid, setgid and sticky (`mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub nlink: u64,
    /// Device number, for character and block devices.
    pub rdev: u64,
    /// Identity of the inode, meaningful only within one tree.
    pub dev: u64,
    pub ino: u64,
    /// FreeBSD file flags (`st_flags`); always 0 elsewhere.
    pub flags: u32,
}

impl Meta {
    pub fn from_metadata(m: &fs::Metadata) -> Meta {
        let ft = m.file_type();
        let kind = if ft.is_file() {
            FileKind::Regular
        } else if ft.is_dir() {
            FileKind::Dir
        } else if ft.is_symlink() {
            FileKind::Symlink
        } else if ft.is_char_device() {
            FileKind::CharDevice
        } else if ft.is_block_device() {
            FileKind::BlockDevice
        } else if ft.is_fifo() {
            FileKind::Fifo
        } else {
            FileKind::Socket
        };
        Meta {
            kind,
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec().clamp(0, 999_999_999) as u32,
            nlink: m.nlink(),
            rdev: m.rdev(),
            dev: m.dev(),
            ino: m.ino(),
            flags: crate::fsutil::flags::st_flags(m),
        }
    }

    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }

    /// Whether other names of this inode may exist (directories excepted:
    /// their link count counts subdirectories).
    pub fn is_multi_link(&self) -> bool {
        self.kind != FileKind::Dir && self.nlink > 1
    }
}

/// `lstat`: never follows a symlink.
pub fn lstat(path: &Path) -> io::Result<Meta> {
    fs::symlink_metadata(path).map(|m| Meta::from_metadata(&m))
}

/// The extended attributes of `path` itself (a symlink's own, not its
/// target's), sorted by name. A filesystem without extended attributes has
/// none, rather than an error.
pub fn xattrs(path: &Path) -> io::Result<Vec<(OsString, Vec<u8>)>> {
    let names = match xattr::list(path) {
        Ok(names) => names,
        Err(e) if is_unsupported(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for name in names {
        // An attribute removed between list and get is simply gone.
        if let Some(value) = xattr::get(path, &name)? {
            out.push((name, value));
        }
    }
    out.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
    Ok(out)
}

fn is_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(libc::EOPNOTSUPP)
}

/// The major number of a device number.
pub fn dev_major(rdev: u64) -> u64 {
    libc::major(rdev as libc::dev_t) as u64
}

/// The minor number of a device number.
pub fn dev_minor(rdev: u64) -> u64 {
    libc::minor(rdev as libc::dev_t) as u64
}

/// A device number from its major and minor numbers.
pub fn make_dev(major: u32, minor: u32) -> u64 {
    libc::makedev(major, minor) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_round_trip() {
        let d = make_dev(8, 17);
        assert_eq!((dev_major(d), dev_minor(d)), (8, 17));
    }

    #[test]
    fn lstat_does_not_follow() {
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/", t.path().join("l")).unwrap();
        assert_eq!(lstat(&t.path().join("l")).unwrap().kind, FileKind::Symlink);
    }
}
