//! The conformance suite every [`Transport`] passes, as the Snapshotter
//! suite is for snapshot backends: resolve, has, fetch, push, finish and
//! the refusals, on an OCI layout, an OCI archive and a registry (a real
//! Distribution, lane `distribution`).
//!
//! A transport's module instantiates it with one line,
//! `transport_suite!(fixture);`, one `#[tokio::test]` per check, each on a
//! fresh place. The checks are about what a caller sees, never about how a
//! transport keeps things: written through one transport, read through
//! another opened on the same place afterwards (an archive is only written
//! at `finish`).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};

use jbuild::blame::Blame;
use jbuild::digest::Digest;
use jbuild::store::oci_digest;
use jbuild::transport::{ManifestRole, Transport, TransportError};
use oci_spec::image::{Descriptor, MediaType};

/// A place under test: `open` makes a new transport to it each call.
pub struct Fixture {
    pub open: Box<dyn Fn() -> Box<dyn Transport> + Send + Sync>,
    /// The tag the suite pushes to and resolves.
    pub tag: String,
    /// Written whole by each transport that pushes (an archive): `has_blob`
    /// answers for what this transport writes, so a blob of the file
    /// already there counts for nothing.
    pub rewritten_whole: bool,
    pub _keep: Box<dyn Any + Send + Sync>,
}

/// A small image: a config, a layer, and the manifest naming them.
pub struct Image {
    dir: tempfile::TempDir,
    pub config: (Vec<u8>, Descriptor),
    pub layer: (Vec<u8>, Descriptor),
    pub manifest: (Vec<u8>, Descriptor),
}

fn desc(media: MediaType, bytes: &[u8]) -> Descriptor {
    Descriptor::new(media, bytes.len() as u64, oci_digest(&Digest::of(bytes)))
}

impl Image {
    pub fn new(seed: u8) -> Image {
        let layer: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(31) as u8) ^ seed)
            .collect();
        let layer_desc = desc(MediaType::ImageLayerGzip, &layer);
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":["{}"]}}}}"#,
            layer_desc.digest()
        )
        .into_bytes();
        let config_desc = desc(MediaType::ImageConfig, &config);
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config_desc,
            "layers": [layer_desc],
        }))
        .unwrap();
        let manifest_desc = desc(MediaType::ImageManifest, &manifest);
        let dir = tempfile::tempdir().unwrap();
        for (bytes, d) in [(&config, &config_desc), (&layer, &layer_desc)] {
            std::fs::write(dir.path().join(d.digest().digest()), bytes).unwrap();
        }
        Image {
            dir,
            config: (config, config_desc),
            layer: (layer, layer_desc),
            manifest: (manifest, manifest_desc),
        }
    }

    pub fn file(&self, d: &Descriptor) -> std::path::PathBuf {
        self.dir.path().join(d.digest().digest())
    }

    /// Pushes the image to `t` under `tag` and finishes.
    pub async fn push(&self, t: &dyn Transport, tag: &str) -> Result<(), TransportError> {
        for (_, d) in [&self.config, &self.layer] {
            if !t.has_blob(d).await? {
                t.push_blob(d, &self.file(d), &|_| {}).await?;
            }
        }
        let (bytes, d) = &self.manifest;
        t.push_manifest(bytes, d, ManifestRole::Root { tag: Some(tag) })
            .await?;
        t.finish().await
    }
}

/// A descriptor of bytes no one pushed.
fn absent() -> (Vec<u8>, Descriptor) {
    let bytes = b"never pushed anywhere".to_vec();
    let d = desc(MediaType::ImageLayerGzip, &bytes);
    (bytes, d)
}

pub async fn pushed_image_reads_back(f: &Fixture) {
    let img = Image::new(1);
    img.push((f.open)().as_ref(), &f.tag).await.unwrap();

    let t = (f.open)();
    let found = t.resolve(&f.tag).await.unwrap();
    assert_eq!(found.digest(), img.manifest.1.digest());
    assert_eq!(found.size(), img.manifest.1.size());
    assert_eq!(t.fetch_manifest(&found).await.unwrap(), img.manifest.0);
    for (bytes, d) in [&img.config, &img.layer] {
        assert_eq!(
            t.has_blob(d).await.unwrap(),
            !f.rewritten_whole,
            "{} is there",
            d.digest()
        );
        let out = tempfile::NamedTempFile::new().unwrap();
        let told = AtomicU64::new(0);
        t.fetch_blob(d, out.path(), &|n| {
            told.fetch_max(n, Ordering::Relaxed);
        })
        .await
        .unwrap();
        assert_eq!(&std::fs::read(out.path()).unwrap(), bytes);
        assert_eq!(
            told.load(Ordering::Relaxed),
            d.size(),
            "progress reaches the blob's size"
        );
    }
    // A transport only read from finishes without doing anything.
    t.finish().await.unwrap();
    assert_eq!(t.resolve(&f.tag).await.unwrap().digest(), found.digest());
}

pub async fn the_manifest_resolves_by_digest(f: &Fixture) {
    let img = Image::new(2);
    img.push((f.open)().as_ref(), &f.tag).await.unwrap();
    let t = (f.open)();
    let digest = img.manifest.1.digest().to_string();
    let found = t.resolve(&digest).await.unwrap();
    assert_eq!(found.digest().to_string(), digest);
}

pub async fn an_unknown_tag_is_the_users_not_found(f: &Fixture) {
    Image::new(3)
        .push((f.open)().as_ref(), &f.tag)
        .await
        .unwrap();
    let e = (f.open)().resolve("no-such-tag").await.unwrap_err();
    assert!(
        matches!(e, TransportError::NotFound { .. }),
        "an unknown tag is NotFound: {e:?}"
    );
    assert!(e.is_user_error(), "{e}");
    assert!(e.to_string().contains("no-such-tag"), "names the tag: {e}");
}

pub async fn a_blob_not_pushed_is_not_had_nor_fetched(f: &Fixture) {
    Image::new(4)
        .push((f.open)().as_ref(), &f.tag)
        .await
        .unwrap();
    let t = (f.open)();
    let (_, d) = absent();
    assert!(!t.has_blob(&d).await.unwrap());
    let out = tempfile::NamedTempFile::new().unwrap();
    assert!(t.fetch_blob(&d, out.path(), &|_| {}).await.is_err());
}

pub async fn a_blob_that_is_not_its_descriptor_is_refused(f: &Fixture) {
    let img = Image::new(5);
    let (_, wanted) = absent();
    let t = (f.open)();
    // The layer's bytes offered as another blob: refused, never kept.
    let e = t
        .push_blob(&wanted, &img.file(&img.layer.1), &|_| {})
        .await
        .unwrap_err();
    assert!(
        !matches!(e, TransportError::Io { .. }),
        "a refusal, not an I/O fault: {e:?}"
    );
    img.push(t.as_ref(), &f.tag).await.unwrap();
    assert!(!(f.open)().has_blob(&wanted).await.unwrap());
}

pub async fn a_manifest_that_is_not_its_descriptor_is_refused(f: &Fixture) {
    let img = Image::new(6);
    let t = (f.open)();
    for (_, d) in [&img.config, &img.layer] {
        t.push_blob(d, &img.file(d), &|_| {}).await.unwrap();
    }
    let (bytes, _) = &img.manifest;
    let other = desc(MediaType::ImageManifest, b"{\"schemaVersion\":2}");
    let e = t
        .push_manifest(bytes, &other, ManifestRole::Root { tag: Some(&f.tag) })
        .await
        .unwrap_err();
    assert!(
        matches!(e, TransportError::Mismatch { .. }),
        "refused before it is sent: {e:?}"
    );
}

pub async fn a_second_push_of_the_same_image_is_the_same(f: &Fixture) {
    let img = Image::new(7);
    img.push((f.open)().as_ref(), &f.tag).await.unwrap();
    img.push((f.open)().as_ref(), &f.tag).await.unwrap();
    let t = (f.open)();
    assert_eq!(
        t.resolve(&f.tag).await.unwrap().digest(),
        img.manifest.1.digest()
    );
}

/// One `#[tokio::test]` per check, each on a fresh place from `$make`.
macro_rules! transport_suite {
    ($make:path) => {
        transport_suite!(@ $make,
            pushed_image_reads_back,
            the_manifest_resolves_by_digest,
            an_unknown_tag_is_the_users_not_found,
            a_blob_not_pushed_is_not_had_nor_fetched,
            a_blob_that_is_not_its_descriptor_is_refused,
            a_manifest_that_is_not_its_descriptor_is_refused,
            a_second_push_of_the_same_image_is_the_same
        );
    };
    (@ $make:path, $($check:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let f = $make();
                $crate::transport::conformance::$check(&f).await;
            }
        )*
    };
}

mod layout {
    use super::Fixture;
    use jbuild::transport::LayoutTransport;

    fn make() -> Fixture {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("layout");
        Fixture {
            open: Box::new(move || Box::new(LayoutTransport::new(dir.clone()))),
            tag: "1.0".into(),
            rewritten_whole: false,
            _keep: Box::new(t),
        }
    }
    transport_suite!(make);
}

mod archive {
    use super::Fixture;
    use jbuild::transport::ArchiveTransport;

    fn make() -> Fixture {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("image.tar");
        Fixture {
            open: Box::new(move || Box::new(ArchiveTransport::new(file.clone()))),
            tag: "1.0".into(),
            rewritten_whole: true,
            _keep: Box::new(t),
        }
    }
    transport_suite!(make);
}

mod registry {
    use super::Fixture;
    use crate::support::registry::Registry;
    use jbuild::transport::{RegistryOptions, RegistryRef, RegistryTransport};

    fn make() -> Fixture {
        let reg = Registry::start();
        let name = format!("{}/conformance/image:1.0", reg.host());
        Fixture {
            open: Box::new(move || {
                Box::new(RegistryTransport::new(
                    RegistryRef::parse(&name).unwrap(),
                    RegistryOptions::default(),
                ))
            }),
            tag: "1.0".into(),
            rewritten_whole: false,
            _keep: Box::new(reg),
        }
    }
    transport_suite!(make);
}
