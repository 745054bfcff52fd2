//! `jbuild build`: examples end to end, flags, the context's ignore file,
//! RUN mounts and secrets, the registry build cache, and the native
//! instructions one by one.

mod add;
mod cache;
mod check;
mod contexts;
mod dockerfile;
mod e2e;
mod epoch;
mod flags;
mod foreign_os;
mod ignore_files;
mod mounts;
mod native;
mod pkg;
mod pkg_files_ignore;
mod pkg_repo;
mod pkg_save;
mod pkg_upgrade;
mod pkgbase;
mod platform_args;
mod recipe_names;
mod rootless;
mod same_image;
