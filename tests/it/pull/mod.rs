//! The pull transaction: at the library level from an OCI layout, and
//! hostile layers through `jbuild pull` from a registry.

mod hostile;
mod transaction;
