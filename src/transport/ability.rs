//! What some transports can do beyond moving blobs and manifests.
//!
//! Every transport can answer [`Transport`](super::Transport)'s questions:
//! resolve a reference, fetch and push blobs and manifests. A few can do
//! more, and a copy goes faster when they do:
//!
//! - A layout directory keeps each blob as a file. A copy *from* it can
//!   push that file as it is, and a copy *to* it can fetch a blob straight
//!   onto its filesystem and rename it into place: [`LocalBlobs`].
//! - A registry can take a blob from another repository of the same
//!   registry without an upload (a cross-repository mount):
//!   [`BlobMounts`].
//! - jbuild's store keeps notes of the registry repositories its blobs
//!   were pulled from or pushed to, so a later push to that registry can
//!   mount them: [`OriginNotes`].
//!
//! Each ability is a small trait of its own, implemented only by the
//! transports that have it. A copy asks for it with the matching accessor
//! on `Transport` ([`local`](super::Transport::local),
//! [`mounts`](super::Transport::mounts),
//! [`origin_notes`](super::Transport::origin_notes)), which answers `None`
//! unless the transport overrides it; without the ability, the copy does
//! what works everywhere (fetch to a temporary file, then push it).
//!
//! ```
//! # use jbuild::transport::{LayoutTransport, Transport};
//! let store = LayoutTransport::new("/srv/images".into());
//! assert!(store.local().is_some());
//! assert!(store.mounts().is_none());
//! ```

use std::path::PathBuf;

use async_trait::async_trait;
use oci_spec::image::Descriptor;

use super::TransportError;
use crate::store::{PartialBounds, StagedBlob};

/// Where a blob can be found besides its digest: the registry and
/// repository it was read from, so a copy to another repository of the
/// same registry can mount it instead of uploading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobOrigin {
    pub registry: String,
    pub repository: String,
}

/// Blobs kept as files on this machine (an OCI layout directory).
///
/// As a *source*, [`blob_file`](LocalBlobs::blob_file) hands the copy the
/// file that already holds a blob, so it is pushed from there instead of
/// being fetched into a temporary copy first.
///
/// As a *destination*, [`staging_file`](LocalBlobs::staging_file) gives a
/// temporary file on the layout's own filesystem; the source fetches the
/// blob into it (checking size and digest on the way), and
/// [`adopt_blob`](LocalBlobs::adopt_blob) renames it into place. A blob
/// is never held in memory, and never copied twice on disk.
#[async_trait]
pub trait LocalBlobs: Send + Sync {
    /// A file here that already holds the blob, checked when it was
    /// stored. `None` when there is none.
    fn blob_file(&self, desc: &Descriptor) -> Option<PathBuf>;

    /// A temporary file on this destination's own filesystem for a blob on
    /// its way here, to be given back to [`LocalBlobs::adopt_blob`].
    fn staging_file(&self) -> Result<StagedBlob, TransportError>;

    /// A staging file for `desc` that outlives a fetch cut off (kept
    /// within `bounds`), holding what an earlier one kept
    /// ([`StagedBlob::kept`], to be continued with
    /// [`Transport::fetch_blob_from`](super::Transport::fetch_blob_from)).
    /// The default, for a place that keeps nothing: [`LocalBlobs::staging_file`].
    fn resumable_file(
        &self,
        desc: &Descriptor,
        bounds: PartialBounds,
    ) -> Result<StagedBlob, TransportError> {
        let _ = (desc, bounds);
        self.staging_file()
    }

    /// Stores a blob from `file` (one [`LocalBlobs::staging_file`] gave),
    /// whose content the source transport's `fetch_blob` has just checked
    /// against `desc`: by rename, not by copy.
    async fn adopt_blob(&self, desc: &Descriptor, file: StagedBlob) -> Result<(), TransportError>;
}

/// A registry repository, which can take a blob from another repository
/// of the same registry without an upload (the distribution spec's
/// cross-repository mount).
///
/// A copy from a registry learns the source's [`origin`](BlobMounts::origin)
/// (its own repository); a copy to a registry offers each origin it knows
/// to [`mount_blob`](BlobMounts::mount_blob) before it uploads anything.
#[async_trait]
pub trait BlobMounts: Send + Sync {
    /// This repository, where every blob it holds can be mounted from.
    fn origin(&self) -> BlobOrigin;

    /// Asks the registry to take the blob from `from` without an upload.
    /// `Ok(false)`: it could not (another registry, the same repository,
    /// or the registry refused); push the blob.
    async fn mount_blob(
        &self,
        desc: &Descriptor,
        from: &BlobOrigin,
    ) -> Result<bool, TransportError>;
}

/// Notes, kept beside a layout's blobs, of the registry repositories that
/// also hold them: where they were pulled from, and where they were pushed.
///
/// A push from jbuild's store to a registry then offers those repositories
/// to [`BlobMounts::mount_blob`], so a base image pulled from
/// `registry.lan/base` is mounted into `registry.lan/app` rather than
/// uploaded again. The notes are only a hint: losing them costs an upload.
pub trait OriginNotes: Send + Sync {
    /// Registry repositories noted as holding the blob.
    fn origins(&self, desc: &Descriptor) -> Vec<BlobOrigin>;

    /// Notes that the blob, now here, is also in `origins`. Only jbuild's
    /// store writes notes, so reading an `oci:DIR` never changes it.
    fn remember_origins(&self, desc: &Descriptor, origins: &[BlobOrigin]);
}
