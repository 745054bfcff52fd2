//! `docker://NAME`: a repository of an OCI registry (the distribution
//! spec), as a [`Transport`].
//!
//! - Blobs the registry has are found with a HEAD and skipped; a blob
//!   read from another repository of the same registry is mounted
//!   (`POST …/uploads/?mount=…&from=…`; a 202 means "no", and the blob is
//!   uploaded).
//! - Uploads open a session (`POST …/uploads/`) and stream the file in one
//!   monolithic `PUT` with its size, hashed on the way: a file that does not
//!   match its descriptor is never committed. A failed upload starts over
//!   with a new session.
//! - Downloads stream into the file they are given, hashed on the way; a
//!   connection lost in the middle resumes with a `Range` request, and the
//!   whole blob is still checked at the end.
//! - Manifests are pushed as the exact bytes whose digest was computed.
//! - Every request is retried on connection errors, 408, 429 and 5xx
//!   (see [`retry`]), and signs in again once on a 401. Signing in is one
//!   flow (`signin.rs`) for login, pull and push, on one reading of the
//!   registry's challenges (`challenge.rs`).
//!
//! The connection (scheme, certificates, credentials) is opened on first
//! use, so naming a registry costs nothing until it is reached.

mod blob;
mod body;
pub mod challenge;
mod conn;
mod download;
mod endpoint;
mod failure;
mod inspect;
mod login;
mod manifest;
pub mod oauth;
mod options;
mod pace;
mod pull;
pub mod reference;
pub mod retry;
mod signin;
mod sink;
mod tags;
mod upload;
mod verifier;

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use oci_spec::image::Descriptor;
use tokio::sync::OnceCell;

pub use pull::{fetch_into, report, RegistryPuller};
pub use reference::RegistryRef;
pub use retry::RetryPolicy;

use self::conn::Conn;
use super::{BlobMounts, ManifestRole, Progress, Transport, TransportError};
use crate::digest::Digest;
pub use blob::range_start;
pub use body::{head_of_body, read_capped, ErrorBody, ErrorCode, RegistryError};
pub use endpoint::{client_for, reach, ClientError, Endpoint};
pub(crate) use failure::{is_transient, tls_error};
pub use inspect::RemoteImage;
pub use login::verify;
pub use options::{
    insecure_list, RegistryOperation, RegistryOptions, BLOB_DEADLINE_ENV, DEFAULT_CERTS_DIRS,
    INSECURE_ENV, MIN_RATE_ENV, RATE_WINDOW_ENV,
};
pub use pace::{Slow, TransferLimits};
pub use tags::MAX_PAGES;

/// One repository of a registry.
pub struct RegistryTransport {
    reference: RegistryRef,
    options: RegistryOptions,
    conn: OnceCell<Conn>,
    /// Manifests fetched by `resolve`, so `fetch_manifest` need not ask
    /// again.
    manifests: Mutex<Vec<(Digest, Vec<u8>)>>,
}

impl RegistryTransport {
    pub fn new(reference: RegistryRef, options: RegistryOptions) -> RegistryTransport {
        RegistryTransport {
            reference,
            options,
            conn: OnceCell::new(),
            manifests: Mutex::new(Vec::new()),
        }
    }

    pub fn reference(&self) -> &RegistryRef {
        &self.reference
    }

    async fn conn(&self) -> Result<&Conn, TransportError> {
        self.conn
            .get_or_try_init(|| Conn::open(&self.reference, &self.options))
            .await
    }

    fn location(&self) -> String {
        format!("docker://{}", self.reference.name())
    }
}

/// Each request is in the file of what it moves: `manifest.rs`,
/// `download.rs`, `upload.rs` (which also mounts).
#[async_trait]
impl Transport for RegistryTransport {
    fn describe(&self) -> String {
        self.location()
    }

    async fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError> {
        self.resolve_manifest(reference).await
    }

    async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
        self.read_manifest(desc).await
    }

    async fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
        self.head_blob(desc).await
    }

    async fn fetch_blob(
        &self,
        desc: &Descriptor,
        dest: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        self.download_blob(desc, dest, 0, progress).await
    }

    fn resumes(&self) -> Option<crate::store::PartialBounds> {
        (self.options.partials.max_bytes > 0).then_some(self.options.partials)
    }

    async fn fetch_blob_from(
        &self,
        desc: &Descriptor,
        dest: &Path,
        kept: u64,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        self.download_blob(desc, dest, kept, progress).await
    }

    async fn push_blob(
        &self,
        desc: &Descriptor,
        src: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        self.upload_blob(desc, src, progress).await
    }

    async fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        role: ManifestRole<'_>,
    ) -> Result<(), TransportError> {
        self.put_manifest(bytes, desc, role).await
    }

    async fn finish(&self) -> Result<(), TransportError> {
        Ok(())
    }

    fn mounts(&self) -> Option<&dyn BlobMounts> {
        Some(self)
    }
}
