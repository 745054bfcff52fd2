//! Each ability a copy uses, seen from the files its blobs go through.

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
        // In the destination, or (a new layout) in its staging directory
        // beside it: on its filesystem either way.
        let beside = staged.starts_with(t.path()) && !staged.starts_with(t.path().join("src"));
        assert!(beside, "staged at {staged:?}");
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
