//! jbuild's own package installer, its foundation (`src/pkg`): the ABI and
//! repository configurations of an image, catalogues in each generation
//! pkg serves, their signatures, resolution, fetching into the package
//! cache and installing into a root. The repositories are the
//! tests' own (`tests/support/pkgrepo`), signed with the `openssl` program.

mod accounts;
mod catalogue;
mod certs;
mod conf;
mod db;
mod dump185;
mod entry;
mod fetch;
mod firstboot;
pub(crate) mod flags;
mod hashdb;
mod hints;
mod install;
mod lua;
mod mirror;
mod mkdb;
mod resolve;
mod sign;
mod sign_ecc;
mod sign_eddsa;
