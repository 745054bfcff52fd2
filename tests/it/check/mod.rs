//! `jbuild check [--repair]` on the `dir` backend and on zfs-fuse; the
//! store's own places checked before they are trusted (`places`), check
//! racing prune (`concurrent`), and what needs root (`as_root`: a
//! read-only root, a killed process's overlay mount).

mod as_root;
mod concurrent;
mod dir;
mod during_pull;
mod places;
mod zfs_fuse;
