//! Copying one image (a manifest, or an index and everything under it)
//! between any two transports.

use std::collections::HashMap;
use std::path::Path;

use futures_util::StreamExt;
use oci_spec::image::Descriptor;

use super::{digest_of, BlobOrigin, ManifestRole, Transport, TransportError};
use crate::digest::Digest;
use crate::image::arrivals::Arrivals;
use crate::image::media::{self, Document};
use crate::image::platform;
use crate::image::walk::{Bounds, Role, Walk, WalkError};
use crate::image::Platform;

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
    /// `done` bytes of a started blob have moved.
    BlobProgress {
        digest: Digest,
        done: u64,
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

/// How [`copy_image_with`] copies.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// Blobs moved at the same time (at least 1).
    pub jobs: usize,
    /// When the image is an index, copy only its manifest for this
    /// platform (as a pull does); `None` copies the whole index.
    pub platform: Option<Platform>,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            jobs: 4,
            platform: None,
        }
    }
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
    copy_image_with(
        src,
        src_ref,
        dst,
        dst_tag,
        &CopyOptions::default(),
        progress,
    )
    .await
}

/// [`copy_image`] with options: blobs move `jobs` at a time, and an index
/// can be narrowed to one platform.
///
/// A blob the source holds as a file (an OCI layout) is pushed from that
/// file; one that must be fetched is streamed into a temporary file on the
/// destination's filesystem when it offers one (jbuild's store), which the
/// destination then adopts by rename — a blob is never held in memory, and
/// never copied twice on disk. A blob the source's registry holds in
/// another repository of the destination's registry is mounted, not
/// uploaded.
pub async fn copy_image_with(
    src: &dyn Transport,
    src_ref: &str,
    dst: &dyn Transport,
    dst_tag: Option<&str>,
    options: &CopyOptions,
    progress: &(dyn Fn(CopyEvent) + Send + Sync),
) -> Result<Descriptor, TransportError> {
    copy_image_telling(src, src_ref, dst, dst_tag, options, None, progress).await
}

/// [`copy_image_with`], telling `arrivals` (when given) what has arrived
/// as the copy goes, so a pull can unpack layers while they download: the
/// image's manifest once it is checked, each blob fetched into a file of
/// the destination (jbuild's store) as a `crate::spool` tail from its
/// first byte (it ends once its size and digest are checked), and each
/// blob the destination had or took in one piece. When the pull abandons
/// what arrives, the copy stops and fails.
pub async fn copy_image_telling(
    src: &dyn Transport,
    src_ref: &str,
    dst: &dyn Transport,
    dst_tag: Option<&str>,
    options: &CopyOptions,
    arrivals: Option<&Arrivals>,
    progress: &(dyn Fn(CopyEvent) + Send + Sync),
) -> Result<Descriptor, TransportError> {
    let mut root = src.resolve(src_ref).await?;
    if let Some(want) = &options.platform {
        if media::is_index(root.media_type()) {
            let bytes = src.fetch_manifest(&root).await?;
            let invalid = |reason: String| TransportError::Invalid {
                location: src.describe(),
                what: format!("image `{src_ref}`"),
                reason,
            };
            let Document::Index(index) =
                Document::parse(&root, &bytes).map_err(|e| invalid(e.to_string()))?
            else {
                return Err(invalid("its index is not an index".into()));
            };
            root = platform::select(&index, want).map_err(|e| invalid(e.to_string()))?;
        }
    }
    let (documents, blobs) = fetch_tree(src, &root).await?;
    if let (Some(arrivals), Some((desc, bytes))) = (arrivals, documents.first()) {
        arrivals.manifest(desc, bytes);
    }

    let staging = Staging::default();
    let copy_blobs = || async {
        let copies = blobs
            .iter()
            .map(|blob| copy_blob(src, dst, blob, &staging, arrivals, progress));
        let mut running = futures_util::stream::iter(copies).buffer_unordered(options.jobs.max(1));
        while let Some(done) = running.next().await {
            done?;
        }
        Ok::<(), TransportError>(())
    };
    // A pull that stopped wanting the blobs (a refused layer) need not
    // wait for the rest of them.
    let copy_blobs = || async {
        let Some(arrivals) = arrivals else {
            return copy_blobs().await;
        };
        tokio::select! {
            // The copy's own outcome first: a blob that failed is why.
            biased;
            done = copy_blobs() => done,
            () = abandoned(arrivals) => Err(TransportError::Abandoned {
                location: dst.describe(),
            }),
        }
    };
    copy_blobs().await?;

    for (i, (desc, bytes)) in documents.iter().enumerate().rev() {
        let role = if i == 0 {
            ManifestRole::Root { tag: dst_tag }
        } else {
            ManifestRole::Child
        };
        let mut again = 0;
        loop {
            match dst.push_manifest(bytes, desc, role).await {
                // A blob went missing after it was found or uploaded: look
                // again (a HEAD each) and upload what is not there.
                Err(e @ TransportError::BlobUnknown { .. }) if again < BLOB_UNKNOWN_RETRIES => {
                    again += 1;
                    tracing::warn!("{e}: uploading the missing blobs again");
                    copy_blobs().await?;
                }
                r => break r?,
            }
        }
        progress(CopyEvent::ManifestDone {
            digest: digest_of(desc, &src.describe())?,
            size: desc.size(),
        });
    }
    Ok(root)
}

/// How often a manifest the destination refused for a missing blob is
/// pushed again after its blobs were (re)uploaded.
const BLOB_UNKNOWN_RETRIES: u32 = 2;

/// Returns once the pull abandoned what arrives (looked at every 50 ms;
/// the copy it races ends it otherwise).
async fn abandoned(arrivals: &Arrivals) {
    while !arrivals.abandoned() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The temporary directory of a copy between two places that are not
/// jbuild's own files (a registry to a registry): each blob passes through
/// a file in it. Made at the first such blob, so a copy into a layout or
/// out of one creates none.
#[derive(Default)]
struct Staging(std::sync::OnceLock<tempfile::TempDir>);

impl Staging {
    fn dir(&self) -> Result<&Path, TransportError> {
        if let Some(dir) = self.0.get() {
            return Ok(dir.path());
        }
        let made = tempfile::Builder::new()
            .prefix("jbuild-copy-")
            .tempdir()
            .map_err(|e| TransportError::io("cannot create a temporary directory", e))?;
        // Two blobs may race here: the directory made second is dropped
        // (removed) and both use the first.
        Ok(self.0.get_or_init(|| made).path())
    }
}

/// One blob across: skipped, mounted, pushed from the source's own file,
/// or fetched to a temporary file and adopted. Each shortcut is taken only
/// when the transport has the ability (see [`super::ability`]).
async fn copy_blob(
    src: &dyn Transport,
    dst: &dyn Transport,
    blob: &Descriptor,
    staging: &Staging,
    arrivals: Option<&Arrivals>,
    progress: &(dyn Fn(CopyEvent) + Send + Sync),
) -> Result<(), TransportError> {
    let digest = digest_of(blob, &src.describe())?;
    let size = blob.size();
    let origins = known_origins(src, blob);
    // Both ends learn where the blob now is (a store notes it for later
    // mounts; a registry keeps no notes), and a pull that it is there.
    let known = || {
        if let Some(notes) = dst.origin_notes() {
            notes.remember_origins(blob, &origins);
        }
        if let Some(notes) = src.origin_notes() {
            notes.remember_origins(blob, &known_origins(dst, blob));
        }
        if let Some(arrivals) = arrivals {
            arrivals.stored(&digest);
        }
    };
    if dst.has_blob(blob).await? {
        known();
        progress(CopyEvent::BlobSkipped { digest, size });
        return Ok(());
    }
    if let Some(mounts) = dst.mounts() {
        for origin in &origins {
            if mounts.mount_blob(blob, origin).await? {
                known();
                progress(CopyEvent::BlobSkipped { digest, size });
                return Ok(());
            }
        }
    }
    progress(CopyEvent::BlobStarted {
        digest: digest.clone(),
        size,
    });
    let moved = |done: u64| {
        progress(CopyEvent::BlobProgress {
            digest: digest.clone(),
            done,
        })
    };
    if let Some(path) = src.local().and_then(|l| l.blob_file(blob)) {
        dst.push_blob(blob, &path, &moved).await?;
    } else if let Some(local) = dst.local() {
        let file = match src.resumes() {
            Some(bounds) => local.resumable_file(blob, bounds)?,
            None => local.staging_file()?,
        };
        let kept = file.kept();
        // A pull reads the blob from the staging file as it grows; it
        // reaches the end only once the fetch has checked the blob. Not
        // one continued from an earlier pull's bytes: those are unchecked,
        // and if they are wrong the file starts again, which a reader
        // could not take back (the pull reads that blob once it is stored).
        let spool = match arrivals {
            Some(arrivals) if kept == 0 => {
                let (spool, tail) = crate::spool::spool(file.as_file())
                    .map_err(|e| TransportError::io("cannot read a blob as it arrives", e))?;
                arrivals.coming(&digest, tail);
                Some(spool)
            }
            _ => None,
        };
        let grew = |done: u64| {
            moved(done);
            if let Some(spool) = &spool {
                spool.grew();
            }
        };
        let fetched = if kept > 0 {
            src.fetch_blob_from(blob, file.path(), kept, &grew).await
        } else {
            src.fetch_blob(blob, file.path(), &grew).await
        };
        if let Some(spool) = spool {
            spool.finish(match &fetched {
                Ok(()) => Ok(()),
                Err(e) => Err(crate::report::error_chain(e).into()),
            });
        }
        match fetched {
            Ok(()) => local.adopt_blob(blob, file).await?,
            Err(e) => {
                // What came may be kept for the next pull (a partial
                // staging file is, when dropped), unless it is not the blob
                // or the file could not be written (a full disk is not
                // filled further).
                if e.is_wrong_content() || matches!(e, TransportError::Io { .. }) {
                    file.discard();
                }
                return Err(e);
            }
        }
    } else {
        let file = tempfile::Builder::new()
            .prefix("blob-")
            .tempfile_in(staging.dir()?)
            .map_err(|e| TransportError::io("cannot create a temporary file", e))?;
        src.fetch_blob(blob, file.path(), &moved).await?;
        dst.push_blob(blob, file.path(), &|_| {}).await?;
    }
    known();
    progress(CopyEvent::BlobDone { digest, size });
    Ok(())
}

/// Registry repositories known to hold `blob` besides `t`: a registry's
/// own repository, or those a store has noted.
fn known_origins(t: &dyn Transport, blob: &Descriptor) -> Vec<BlobOrigin> {
    let mut all = Vec::new();
    if let Some(mounts) = t.mounts() {
        all.push(mounts.origin());
    }
    if let Some(notes) = t.origin_notes() {
        all.extend(notes.origins(blob));
    }
    all
}

/// Every manifest and index under `root` with their checked bytes, the
/// root first and each document before every document it names (so pushed
/// in reverse, children go before the index that names them), and the
/// blobs they name, once each. The walk is [`crate::image::walk`]'s,
/// bounded as for any image from outside.
async fn fetch_tree(
    src: &dyn Transport,
    root: &Descriptor,
) -> Result<(Vec<(Descriptor, Vec<u8>)>, Vec<Descriptor>), TransportError> {
    let location = src.describe();
    let refused = |what: String, e: WalkError| TransportError::Invalid {
        location: location.clone(),
        what,
        reason: e.to_string(),
    };
    let root_what = || format!("manifest {}", root.digest());
    let mut walk =
        Walk::new([root.clone()], Bounds::image()).map_err(|e| refused(root_what(), e))?;
    // Each document's bytes and the documents it names.
    let mut documents: HashMap<Digest, (Descriptor, Vec<u8>, Vec<Digest>)> = HashMap::new();
    let mut blobs = Vec::new();
    loop {
        let node = match walk.next_node() {
            Ok(Some(node)) => node,
            Ok(None) => break,
            Err(e) => return Err(refused(root_what(), e)),
        };
        match node.role {
            Role::Config | Role::Layer => {
                blobs.push(node.desc);
                continue;
            }
            // A referrer's subject is another image: not part of this copy.
            Role::Subject => continue,
            Role::Entry => {}
        }
        let what = format!("manifest {}", node.desc.digest());
        let bytes = src.fetch_manifest(&node.desc).await?;
        let doc = Document::parse(&node.desc, &bytes).map_err(|e| TransportError::Invalid {
            location: location.clone(),
            what: what.clone(),
            reason: e.to_string(),
        })?;
        walk.expand(&node, &doc).map_err(|e| refused(what, e))?;
        let children = match &doc {
            Document::Index(index) => index
                .manifests()
                .iter()
                .map(|m| digest_of(m, &location))
                .collect::<Result<_, _>>()?,
            Document::Manifest(_) => Vec::new(),
        };
        documents.insert(node.digest, (node.desc, bytes, children));
    }
    // Post-order from the root (children first), reversed.
    let mut order: Vec<Digest> = Vec::with_capacity(documents.len());
    let mut done = std::collections::HashSet::new();
    let mut stack = vec![(digest_of(root, &location)?, false)];
    while let Some((d, expanded)) = stack.pop() {
        if expanded {
            order.push(d);
            continue;
        }
        if !done.insert(d.clone()) {
            continue;
        }
        stack.push((d.clone(), true));
        if let Some((_, _, children)) = documents.get(&d) {
            stack.extend(children.iter().rev().map(|c| (c.clone(), false)));
        }
    }
    let tree = order
        .into_iter()
        .rev()
        .filter_map(|d| documents.remove(&d).map(|(desc, bytes, _)| (desc, bytes)))
        .collect();
    Ok((tree, blobs))
}

#[cfg(test)]
mod tests;
