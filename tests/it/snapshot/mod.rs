//! The Snapshotter backends: the conformance suite on `dir`, zfs-fuse and
//! OpenZFS (qemu lane), the ZFS differ on OpenZFS, and the CLI end to end
//! on the `overlay` and zfs-fuse backends, and on OpenZFS (qemu lane);
//! the overlay backend in an unprivileged user namespace (userns lane).

mod dir;
mod overlay_cli;
pub mod overlay_userns;
mod zfs_diff_vm;
mod zfs_fuse;
mod zfs_fuse_cli;
mod zfs_vm;
mod zfs_vm_cli;
