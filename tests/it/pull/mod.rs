//! The pull transaction: at the library level from an OCI layout,
//! hostile layers through `jbuild pull` from a registry, and layers
//! applied while they download.

mod big_layers;
mod build_pin;
mod hostile;
mod shared_base;
mod stream;
pub(crate) mod transaction;
