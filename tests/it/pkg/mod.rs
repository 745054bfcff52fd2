//! jbuild's own package installer, its foundation (`src/pkg`): the ABI and
//! repository configurations of an image, catalogues in each generation
//! pkg serves, their signatures, and resolution. The repositories are the
//! tests' own (`tests/support/pkgrepo`), signed with the `openssl` program.

mod catalogue;
mod conf;
mod fetch;
mod resolve;
mod sign;
