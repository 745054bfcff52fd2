//! The `jbuild` command line. The library does the work; this file sorts
//! errors into exit codes and prints one report.

// As in lib.rs: a function past 150 lines (clippy.toml) is split.
#![warn(clippy::too_many_lines)]

mod cli;

fn main() {
    std::process::exit(cli::main());
}
