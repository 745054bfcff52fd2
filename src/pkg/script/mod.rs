//! A package's shell scripts, read and carried out without FreeBSD
//! (issue 32).

pub mod io;

pub use io::{CommandError, Io};
