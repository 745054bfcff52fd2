//! Transports other than the registry: OCI layouts and archives read and
//! written by real peers (skopeo, umoci), `oci-archive:-` through a pipe,
//! and hostile archives.

mod archive_messages;
mod archive_pipe;
mod conformance;
mod hostile_archive;
mod peers;
mod save_load;
