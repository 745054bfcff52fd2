//! `jbuild build`: examples end to end, flags, RUN mounts and secrets, the
//! registry build cache, and the native instructions one by one.

mod cache;
mod e2e;
mod flags;
mod mounts;
mod native;
mod same_image;
