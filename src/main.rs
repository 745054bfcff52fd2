//! The `jbuild` command line. The library does the work; this file sorts
//! errors into exit codes and prints one report.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
