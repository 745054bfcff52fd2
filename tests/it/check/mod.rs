//! `jbuild check [--repair]` on the `dir` backend and on zfs-fuse.

mod dir;
mod zfs_fuse;
