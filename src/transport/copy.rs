//! Copying one image (a manifest, or an index and everything under it)
//! between any two transports.

use std::collections::HashSet;

use oci_spec::image::Descriptor;

use super::{digest_of, ManifestRole, Transport, TransportError};
use crate::digest::Digest;
use crate::store::json::Document;

/// Indexes nested deeper than this are refused (real images use one level).
const MAX_DEPTH: usize = 4;
/// Manifests and indexes in one image, at most.
const MAX_DOCUMENTS: usize = 1024;

/// What [`copy_image`] reports as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyEvent {
    /// The destination already had this blob.
    BlobSkipped {
        digest: Digest,
        size: u64,
    },
    BlobStarted {
        digest: Digest,
        size: u64,
    },
    BlobDone {
        digest: Digest,
        size: u64,
    },
    /// A manifest or index was written to the destination.
    ManifestDone {
        digest: Digest,
        size: u64,
    },
}

/// Copies the image `src_ref` names at `src` to `dst`, tagging it `dst_tag`
/// there (or leaving it untagged), and returns its descriptor.
///
/// Every manifest is fetched and checked first, so a malformed image fails
/// before anything is written. Then the blobs go across, skipping those the
/// destination has, each checked on the way out of `src` and again on the
/// way into `dst`. Manifests go last, children before the index that names
/// them, so the destination never names what it does not hold.
///
/// Call `dst.finish()` after the last copy to that destination.
pub async fn copy_image(
    src: &dyn Transport,
    src_ref: &str,
    dst: &dyn Transport,
    dst_tag: Option<&str>,
    progress: &(dyn Fn(CopyEvent) + Send + Sync),
) -> Result<Descriptor, TransportError> {
    let root = src.resolve(src_ref).await?;
    let (documents, blobs) = fetch_tree(src, &root).await?;

    let staging = tempfile::Builder::new()
        .prefix("jbuild-copy-")
        .tempdir()
        .map_err(|e| TransportError::io("cannot create a temporary directory", e))?;
    for blob in &blobs {
        let digest = digest_of(blob, &src.describe())?;
        let size = blob.size();
        if dst.has_blob(blob).await? {
            progress(CopyEvent::BlobSkipped { digest, size });
            continue;
        }
        progress(CopyEvent::BlobStarted {
            digest: digest.clone(),
            size,
        });
        let path = staging.path().join(digest.hex());
        src.fetch_blob(blob, &path).await?;
        dst.push_blob(blob, &path).await?;
        let _ = tokio::fs::remove_file(&path).await;
        progress(CopyEvent::BlobDone { digest, size });
    }

    for (i, (desc, bytes)) in documents.iter().enumerate().rev() {
        let role = if i == 0 {
            ManifestRole::Root { tag: dst_tag }
        } else {
            ManifestRole::Child
        };
        dst.push_manifest(bytes, desc, role).await?;
        progress(CopyEvent::ManifestDone {
            digest: digest_of(desc, &src.describe())?,
            size: desc.size(),
        });
    }
    Ok(root)
}

/// Every manifest and index under `root` (each parent before its
/// children), with their checked bytes, and the blobs they name, once each.
async fn fetch_tree(
    src: &dyn Transport,
    root: &Descriptor,
) -> Result<(Vec<(Descriptor, Vec<u8>)>, Vec<Descriptor>), TransportError> {
    let mut documents = Vec::new();
    let mut blobs = Vec::new();
    let mut seen = HashSet::new();
    let mut todo = vec![(root.clone(), 0)];
    while let Some((desc, depth)) = todo.pop() {
        let invalid = |reason: String| TransportError::Invalid {
            location: src.describe(),
            what: format!("manifest {}", desc.digest()),
            reason,
        };
        if documents.len() == MAX_DOCUMENTS {
            return Err(invalid(format!(
                "the image has more than {MAX_DOCUMENTS} manifests"
            )));
        }
        let bytes = src.fetch_manifest(&desc).await?;
        match Document::parse(&desc, &bytes).map_err(invalid)? {
            Document::Index(index) => {
                if depth == MAX_DEPTH {
                    return Err(invalid(format!(
                        "indexes are nested more than {MAX_DEPTH} deep"
                    )));
                }
                todo.extend(index.manifests().iter().map(|m| (m.clone(), depth + 1)));
            }
            Document::Manifest(manifest) => {
                for blob in std::iter::once(manifest.config()).chain(manifest.layers()) {
                    if seen.insert(digest_of(blob, &src.describe())?) {
                        blobs.push(blob.clone());
                    }
                }
            }
        }
        documents.push((desc, bytes));
    }
    Ok((documents, blobs))
}
