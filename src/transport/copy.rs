//! Copying one image (a manifest, or an index and everything under it)
//! between any two transports.

use std::collections::HashMap;
use std::path::Path;

use futures_util::StreamExt;
use oci_spec::image::Descriptor;

use super::{digest_of, BlobOrigin, ManifestRole, Transport, TransportError};
use crate::digest::Digest;
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

    let staging = tempfile::Builder::new()
        .prefix("jbuild-copy-")
        .tempdir()
        .map_err(|e| TransportError::io("cannot create a temporary directory", e))?;
    let copy_blobs = || async {
        let copies = blobs
            .iter()
            .map(|blob| copy_blob(src, dst, blob, staging.path(), progress));
        let mut running = futures_util::stream::iter(copies).buffer_unordered(options.jobs.max(1));
        while let Some(done) = running.next().await {
            done?;
        }
        Ok::<(), TransportError>(())
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

/// One blob across: skipped, mounted, pushed from the source's own file,
/// or fetched to a temporary file and adopted. Each shortcut is taken only
/// when the transport has the ability (see [`super::ability`]).
async fn copy_blob(
    src: &dyn Transport,
    dst: &dyn Transport,
    blob: &Descriptor,
    staging: &Path,
    progress: &(dyn Fn(CopyEvent) + Send + Sync),
) -> Result<(), TransportError> {
    let digest = digest_of(blob, &src.describe())?;
    let size = blob.size();
    let origins = known_origins(src, blob);
    // Both ends learn where the blob now is (a store notes it for later
    // mounts; a registry keeps no notes).
    let known = || {
        if let Some(notes) = dst.origin_notes() {
            notes.remember_origins(blob, &origins);
        }
        if let Some(notes) = src.origin_notes() {
            notes.remember_origins(blob, &known_origins(dst, blob));
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
        let file = local.staging_file()?;
        src.fetch_blob(blob, file.path(), &moved).await?;
        local.adopt_blob(blob, file).await?;
    } else {
        let file = tempfile::Builder::new()
            .prefix("blob-")
            .tempfile_in(staging)
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
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;
    use std::sync::Mutex;

    use async_trait::async_trait;
    use oci_spec::image::{ImageManifestBuilder, MediaType};

    use super::*;
    use crate::store::{canonical_json, oci_digest, Store};
    use crate::transport::{block_on, LayoutTransport, Progress};

    /// A transport with none of the optional abilities, over a layout: it
    /// notes the file each blob was fetched into (with its inode, read
    /// just after) and the file each blob was pushed from.
    struct Plain {
        inner: LayoutTransport,
        fetched: Mutex<Vec<(PathBuf, u64)>>,
        pushed: Mutex<Vec<PathBuf>>,
    }

    impl Plain {
        fn new(inner: LayoutTransport) -> Plain {
            Plain {
                inner,
                fetched: Mutex::default(),
                pushed: Mutex::default(),
            }
        }
    }

    #[async_trait]
    impl Transport for Plain {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        async fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError> {
            self.inner.resolve(reference).await
        }
        async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
            self.inner.fetch_manifest(desc).await
        }
        async fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
            self.inner.has_blob(desc).await
        }
        async fn fetch_blob(
            &self,
            desc: &Descriptor,
            dest: &Path,
            progress: Progress<'_>,
        ) -> Result<(), TransportError> {
            self.inner.fetch_blob(desc, dest, progress).await?;
            let ino = std::fs::metadata(dest).unwrap().ino();
            self.fetched.lock().unwrap().push((dest.to_path_buf(), ino));
            Ok(())
        }
        async fn push_blob(
            &self,
            desc: &Descriptor,
            src: &Path,
            progress: Progress<'_>,
        ) -> Result<(), TransportError> {
            self.pushed.lock().unwrap().push(src.to_path_buf());
            self.inner.push_blob(desc, src, progress).await
        }
        async fn push_manifest(
            &self,
            bytes: &[u8],
            desc: &Descriptor,
            role: ManifestRole<'_>,
        ) -> Result<(), TransportError> {
            self.inner.push_manifest(bytes, desc, role).await
        }
        async fn finish(&self) -> Result<(), TransportError> {
            self.inner.finish().await
        }
    }

    /// A store at `dir` holding one image, `base:1`: a config and a layer.
    /// Returns the store and the paths of its two blobs.
    fn store_with_image(dir: &Path) -> (Store, Vec<PathBuf>) {
        let store = Store::open(dir).unwrap();
        let put = |mt: MediaType, bytes: &[u8]| {
            let (d, n) = store.put_bytes(bytes).unwrap();
            Descriptor::new(mt, n, oci_digest(&d))
        };
        let config = put(MediaType::ImageConfig, b"{}");
        let layer = put(MediaType::ImageLayer, &[7u8; 4096]);
        let manifest = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(config.clone())
            .layers(vec![layer.clone()])
            .build()
            .unwrap();
        let desc = put(MediaType::ImageManifest, &canonical_json(&manifest));
        store.tag_ref("base:1", &desc).unwrap();
        let paths = [config, layer]
            .iter()
            .map(|d| store.blob_path(&digest_of(d, "test").unwrap()))
            .collect();
        (store, paths)
    }

    fn copy(src: &dyn Transport, dst: &dyn Transport) {
        block_on(async {
            copy_image(src, "base:1", dst, Some("base:1"), &|_| {}).await?;
            dst.finish().await
        })
        .unwrap();
    }

    fn sorted(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
        v.sort();
        v
    }

    #[test]
    fn a_blob_the_source_holds_as_a_file_is_pushed_from_that_file() {
        let t = tempfile::tempdir().unwrap();
        let (store, blobs) = store_with_image(&t.path().join("src"));
        let src = LayoutTransport::from_store(store);
        let dst = Plain::new(LayoutTransport::new(t.path().join("dst")));
        copy(&src, &dst);
        assert_eq!(sorted(dst.pushed.into_inner().unwrap()), sorted(blobs));
    }

    #[test]
    fn a_fetched_blob_is_staged_beside_the_destination_and_adopted_by_rename() {
        let t = tempfile::tempdir().unwrap();
        let (store, _) = store_with_image(&t.path().join("src"));
        let src = Plain::new(LayoutTransport::from_store(store));
        let dst_dir = t.path().join("dst");
        let dst = LayoutTransport::new(dst_dir.clone());
        copy(&src, &dst);
        let fetched = src.fetched.into_inner().unwrap();
        assert_eq!(fetched.len(), 2, "{fetched:?}");
        let blobs: Vec<u64> = std::fs::read_dir(dst_dir.join("blobs/sha256"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().ino())
            .collect();
        for (staged, ino) in &fetched {
            assert!(staged.starts_with(&dst_dir), "staged at {staged:?}");
            assert!(!staged.exists(), "{staged:?} was left behind");
            assert!(blobs.contains(ino), "{staged:?} was copied, not renamed");
        }
    }

    #[test]
    fn without_either_ability_a_blob_is_staged_apart_and_pushed_from_there() {
        let t = tempfile::tempdir().unwrap();
        let (store, _) = store_with_image(&t.path().join("src"));
        let src = Plain::new(LayoutTransport::from_store(store));
        let dst = Plain::new(LayoutTransport::new(t.path().join("dst")));
        copy(&src, &dst);
        let fetched: Vec<PathBuf> = src
            .fetched
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(fetched.len(), 2, "{fetched:?}");
        assert!(
            fetched.iter().all(|p| !p.starts_with(t.path())),
            "{fetched:?}"
        );
        assert_eq!(sorted(dst.pushed.into_inner().unwrap()), sorted(fetched));
    }
}
