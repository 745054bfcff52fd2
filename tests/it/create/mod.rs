//! `jbuild create`: jails from images (ZFS clones, images other tools
//! made) and jail parameters in and out of images.

mod clone;
mod foreign;
mod jail_params;
mod mounts;
mod run;
mod run_jail;
