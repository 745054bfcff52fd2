//! jbuild: Jailfiles → layered snapshots → OCI images.
//!
//! The path of the data, and which module owns each part, is described in
//! `docs/architecture.md`. In short:
//!
//! - [`jailfile`] parses recipes and resolves variables;
//! - [`plan`] turns them into steps with cache keys (nothing runs there);
//! - [`engine`] runs the steps: [`snapshot`] holds the trees, [`exec`] runs
//!   processes in them, native instructions edit them directly;
//! - [`image`] is everything between an image in the store and its
//!   snapshots: unpack, export, the pull transaction, garbage collection;
//! - [`diff`] and [`layer`] turn snapshots into layer tars and back;
//! - [`store`] is the local OCI image layout; [`transport`] moves images
//!   between it and other places;
//! - [`report`] is how any of it talks to the user.

// A function past 150 lines (clippy.toml) hides its steps: split it.
#![warn(clippy::too_many_lines)]

pub mod bastille;
pub mod blame;
pub mod check;
pub mod compare;
pub mod config;
pub mod create;
pub mod diff;
pub mod digest;
pub mod engine;
pub mod exec;
pub mod fsutil;
pub mod image;
pub mod jailconf;
pub mod jailfile;
pub mod jailparam;
pub mod keychain;
pub mod layer;
pub(crate) mod pipe;
pub mod pkg;
pub mod plan;
pub mod release;
pub mod report;
pub mod sbom;
pub mod snapshot;
pub(crate) mod spool;
pub mod store;
pub mod transport;
pub mod trust;
