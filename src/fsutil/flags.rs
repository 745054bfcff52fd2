//! File flags (FreeBSD's `chflags(1)`: `schg`, `uappnd`, `nodump`, ...)
//! read and set through one seam, [`FileFlags`], so the code that must
//! respect them — the layer applier, the `dir` snapshotter's copy and
//! removal, the tar writer — is the same code on FreeBSD and in the tests
//! on Linux.
//!
//! Vocabulary: a path's *flags* are a bit set (FreeBSD's `st_flags`; the
//! bits and their names are in `layer::fflags`). Some of them *lock* the
//! file: with `schg`/`uchg` (immutable) set, FreeBSD refuses to unlink,
//! rename over, write, `chmod`, `chown` or `utimes` it (EPERM); with
//! `sappnd`/`uappnd`, to do anything but append. So whoever writes a tree
//! sets flags *last* (after content, owner, mode, times and children),
//! and whoever replaces or deletes a flagged file clears its flags
//! *first*.
//!
//! Implementations: [`HostFlags`], the host's own (`lchflags(2)` and
//! `st_flags` on FreeBSD; on other systems no file has flags, and setting
//! them does nothing, so a layer's flags are ignored there, as before);
//! and, in the tests, one that keeps FreeBSD's flags in a side table and
//! has Linux enforce the locking ones (`tests/it/layer/file_flags.rs`). Code takes
//! a `&dyn FileFlags` from its caller; production callers pass
//! [`host`], except for a build step's root on a host without
//! `chflags(2)`: there [`sidecar::Sidecar`] keeps the flags set through
//! the seam beside the tree (in the snapshot's labels, `snapshot::fflags`),
//! so that they reach the layer as they would on FreeBSD.

use std::fs;
use std::io;
use std::path::Path;

pub mod sidecar;

/// Reads and sets the flags of a path itself (never a symlink's target).
/// See the module docs.
pub trait FileFlags: Send + Sync + std::fmt::Debug {
    /// The flags of `path`. `seen` is what `lstat(2)` said of it just
    /// before ([`st_flags`]): the host's implementation answers with it,
    /// so asking costs no system call.
    fn get(&self, path: &Path, seen: u32) -> io::Result<u32>;

    /// Replaces the flags of `path` with `flags`.
    fn set(&self, path: &Path, flags: u32) -> io::Result<()>;
}

/// The flags in what `lstat(2)` returned: `st_flags` on FreeBSD; no
/// file has any elsewhere.
#[cfg(target_os = "freebsd")]
pub fn st_flags(m: &fs::Metadata) -> u32 {
    use std::os::freebsd::fs::MetadataExt as _;
    m.st_flags()
}

/// The flags in what `lstat(2)` returned: `st_flags` on FreeBSD; no
/// file has any elsewhere.
#[cfg(not(target_os = "freebsd"))]
pub fn st_flags(_: &fs::Metadata) -> u32 {
    0
}

/// The host's file flags: see the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostFlags;

/// The host's file flags, for production callers.
pub fn host() -> &'static dyn FileFlags {
    &HostFlags
}

impl FileFlags for HostFlags {
    fn get(&self, _path: &Path, seen: u32) -> io::Result<u32> {
        Ok(seen)
    }

    #[cfg(target_os = "freebsd")]
    fn set(&self, path: &Path, flags: u32) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
        if unsafe { libc::lchflags(c.as_ptr(), libc::c_ulong::from(flags)) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// No flags here: what a layer says is dropped, as it always was.
    #[cfg(not(target_os = "freebsd"))]
    fn set(&self, _path: &Path, _flags: u32) -> io::Result<()> {
        Ok(())
    }
}

/// Clears the flags of `path` and, for a directory, of everything below
/// it, so the whole tree can be deleted.
pub fn clear_tree(flags: &dyn FileFlags, path: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(path)?;
    if flags.get(path, st_flags(&m))? != 0 {
        flags.set(path, 0)?;
    }
    if m.is_dir() {
        for entry in fs::read_dir(path)? {
            clear_tree(flags, &entry?.path())?;
        }
    }
    Ok(())
}
