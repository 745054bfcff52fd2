//! `jbuild build`: examples end to end, flags, RUN mounts and secrets, the
//! registry build cache, and the native instructions one by one.

mod cache;
mod e2e;
mod epoch;
mod flags;
mod foreign_os;
mod mounts;
mod native;
