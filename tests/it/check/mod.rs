//! `jbuild check [--repair]` on the `dir` backend and on zfs-fuse.

mod dir;
mod during_pull;
mod zfs_fuse;
