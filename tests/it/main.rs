//! The integration tests: one binary, one module per feature (as uv's
//! `tests/it`), the shared helpers in `tests/support/`, the data in
//! `tests/data/`. `tests/README.md` maps what lives where; run one
//! feature with `cargo test --test it registry::`.
//!
//! Every test runs in this one process, so none may change what the
//! process shares (its environment, working directory, umask, signal
//! handlers): they go to the child commands instead.

#[path = "../support/mod.rs"]
#[macro_use]
mod support;

mod architecture;
mod bastille;
mod build;
mod check;
mod cli;
mod create;
mod docs;
mod exec;
mod fuzz_replay;
mod hostile;
mod image_diff;
mod jailfile;
mod layer;
mod pkg;
mod pull;
mod registry;
mod release;
mod sbom;
mod snapshot;
mod state;
mod transport;
mod trust;
mod verify;
