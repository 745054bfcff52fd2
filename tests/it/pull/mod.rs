//! The pull transaction: at the library level from an OCI layout,
//! hostile layers through `jbuild pull` from a registry, and layers
//! applied while they download, pulls that resume across runs.

mod big_layers;
mod build_pin;
mod hostile;
mod resume;
mod shared_base;
mod stream;
pub(crate) mod transaction;
