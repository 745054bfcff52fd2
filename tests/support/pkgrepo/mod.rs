//! FreeBSD package repositories written by the tests themselves, from
//! pkg-repository(5) and pkg's sources (`../shared/notes/pkg-anyhost.md`),
//! sharing no code with `src/pkg`: what jbuild reads must come from a
//! writer that did not learn the format from jbuild.

pub mod elf;
