//! zfs-fuse, the ZFS that runs in Linux CI (Debian `zfs-fuse` 0.7, pool
//! v23), and the one thing the snapshotter does differently there.
//!
//! On a read-only zfs-fuse mount, listing the xattrs of a directory (or of
//! a symlink, a device node, a FIFO) that never had any fails with ENOSYS
//! (the daemon would have to create its hidden xattr directory, and
//! cannot), and the Linux FUSE
//! client then turns `listxattr` off for the whole mount: every later
//! listing, of any file, fails with EOPNOTSUPP, and a layer exported from
//! that view would silently lose its xattrs. So before a commit makes a
//! zfs-fuse dataset read-only, every such entry gets its xattr directory
//! (a directory by setting and removing a probe attribute, the others by
//! listing theirs; the empty xattr directory stays and nothing visible
//! changes but a directory's ctime). Real ZFS needs none of this.
//!
//! And zfs-fuse can hang for good when two of its mounts change at once:
//! seen in CI and again by hand (1 run in ~35 of the racing-commit test),
//! two `umount`s of sibling datasets blocked in `fuse_get_req` and the
//! daemon with them. So on zfs-fuse every command that mounts, unmounts or
//! destroys a dataset waits for [`mount_turn`], one machine-wide lock, as
//! the daemon is one per machine.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

const PROBE: &str = "user.jbuild.xattr-dir";

/// The lock file of [`mount_turn`].
const MOUNT_LOCK: &str = "/run/jbuild-zfs-fuse-mounts.lock";

/// Waits until no other process or thread mounts, unmounts or destroys a
/// zfs-fuse dataset, and holds that turn until dropped. `None` (no wait)
/// when `zfs_fuse` is false, as real ZFS handles concurrent mounts itself,
/// and when the lock file cannot be had (not root: then `zfs` itself
/// refuses, with its own message).
pub(super) fn mount_turn(zfs_fuse: bool) -> Option<Flock<File>> {
    if !zfs_fuse {
        return None;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(MOUNT_LOCK)
        .inspect_err(|e| tracing::warn!("{MOUNT_LOCK}: {e}; going on without it"))
        .ok()?;
    Flock::lock(file, FlockArg::LockExclusive)
        .inspect_err(|(_, e)| tracing::warn!("cannot lock {MOUNT_LOCK}: {e}; going on without it"))
        .ok()
}

/// Whether `mountpoint` is a zfs-fuse mount (`fuse.zfs` in the mount table).
pub(super) fn is_zfs_fuse(mountpoint: &Path) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    table.lines().any(|l| {
        let mut f = l.split(' ');
        let (_, Some(dir), Some(kind)) = (f.next(), f.next(), f.next()) else {
            return false;
        };
        kind == "fuse.zfs" && Path::new(&dir.replace("\\040", " ")) == mountpoint
    })
}

/// Gives every directory under `root` (itself included), and every entry
/// that is neither a directory nor a regular file, an xattr directory.
/// Does nothing when the daemon runs without xattr support (`-x`): then
/// there are no xattrs to lose.
pub(super) fn make_xattr_dirs(root: &Path) -> io::Result<()> {
    match prime(root) {
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(()),
        r => r?,
    }
    walk(root)
}

fn prime(dir: &Path) -> io::Result<()> {
    xattr::set(dir, PROBE, b"")?;
    xattr::remove(dir, PROBE)
}

/// A symlink's xattrs fail to list on a read-only mount as a bare
/// directory's do, with the same effect (the whole mount then lists none):
/// seen for a symlink met before a file with xattrs, whose layer lost them
/// (`check_differ_sees_xattrs_past_symlinks`). Linux lets no `user.*`
/// xattr on a symlink; listing its xattrs on the writable mount makes the
/// xattr directory as well (and writes nothing when it is there), so
/// symlinks, device nodes, FIFOs and sockets are listed.
fn walk(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            prime(&path)?;
            walk(&path)?;
        } else if !kind.is_file() {
            // `xattr::list` is llistxattr(2): the symlink's own.
            xattr::list(&path)?;
        }
    }
    Ok(())
}
