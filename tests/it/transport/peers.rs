//! Transports against real peers: images jbuild writes must be read by
//! skopeo and umoci, and theirs by jbuild.

use crate::support::tar as tar_support;

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use flate2::write::GzEncoder;
use jbuild::digest::Digest;
use jbuild::store::{canonical_json, descriptor_digest, oci_digest, ImageName, RefName, Store};
use jbuild::transport::{
    copy_image, ArchiveTransport, CopyEvent, LayoutTransport, Location, OpenOptions, Transport,
    TransportError,
};
use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, Os, PlatformBuilder, RootFsBuilder,
};

/// The transport and reference a location written as a user writes it
/// names, parsed as every command parses one.
fn parse_location(s: &str) -> Result<(Box<dyn Transport>, Option<String>), String> {
    let location: Location = s.parse().map_err(|e: TransportError| e.to_string())?;
    let transport = location
        .open(&OpenOptions::default())
        .map_err(|e| e.to_string())?;
    Ok((transport, location.reference()))
}

/// A one-layer FreeBSD image, built by hand in `store` and tagged `tag`.
fn build_image(store: &Store, tag: &str, motd: &str) -> Descriptor {
    let dir = tar_support::Header::new(&tar_support::Fields {
        name: b"etc/",
        kind: b'5',
        mode: 0o755,
        ..Default::default()
    });
    let raw = [
        &dir.as_bytes()[..],
        &tar_support::ustar(&[("etc/motd", 0o644, motd.as_bytes())]),
    ]
    .concat();
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    let layer = gz.finish().unwrap();

    let labels = HashMap::from([("org.example.motd".to_string(), motd.to_string())]);
    let config = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::FreeBSD)
        .config(ConfigBuilder::default().labels(labels).build().unwrap())
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![Digest::of(&raw).to_string()])
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let put = |mt: MediaType, bytes: &[u8]| {
        let (d, n) = store.put_bytes(bytes).unwrap();
        Descriptor::new(mt, n, oci_digest(&d))
    };
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(put(MediaType::ImageConfig, &canonical_json(&config)))
        .layers(vec![put(MediaType::ImageLayerGzip, &layer)])
        .build()
        .unwrap();
    let desc = put(MediaType::ImageManifest, &canonical_json(&manifest));
    store.tag(&ImageName::parse(tag).unwrap(), &desc).unwrap();
    desc
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn skopeo_digest(image: &str) -> String {
    crate::support::lane::require(crate::support::lane::Lane::Skopeo);
    let out = run(Command::new("skopeo").args(["inspect", "--raw"]).arg(image));
    Digest::of(out.as_bytes()).to_string()
}

fn quiet(_: CopyEvent) {}

fn all_blobs_present(store: &Store, manifest: &Descriptor) {
    let bytes = store
        .read_blob(&descriptor_digest(manifest).unwrap(), 1 << 20)
        .unwrap();
    let m: oci_spec::image::ImageManifest = serde_json::from_slice(&bytes).unwrap();
    for d in std::iter::once(m.config()).chain(m.layers()) {
        assert!(
            store.has_blob(&descriptor_digest(d).unwrap()),
            "{} missing",
            d.digest()
        );
    }
}

#[tokio::test]
async fn skopeo_and_umoci_read_what_jbuild_writes() {
    need!(Skopeo, Umoci);
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(&t.path().join("store")).unwrap();
    let name = "localhost:5000/jails/base:14.1";
    let manifest = build_image(&store, name, "hello");

    // The store itself, with a ref holding `:` and `/`.
    let in_store = format!("oci:{}:{name}", store.path().display());
    assert_eq!(skopeo_digest(&in_store), manifest.digest().to_string());
    let inspect = run(Command::new("skopeo").args(["inspect", &in_store]));
    assert!(inspect.contains("\"Os\": \"freebsd\""), "{inspect}");

    // Copied to another layout directory by jbuild.
    let dir = t.path().join("out");
    let src = LayoutTransport::from_store(store.clone());
    let (dst, tag) = parse_location(&format!("oci:{}:v1", dir.display())).unwrap();
    let events = Mutex::new(Vec::new());
    let record = |e: CopyEvent| events.lock().unwrap().push(e);
    let copied = copy_image(&src, name, &*dst, tag.as_deref(), &record)
        .await
        .unwrap();
    dst.finish().await.unwrap();
    assert_eq!(copied.digest(), manifest.digest());
    assert_eq!(
        skopeo_digest(&format!("oci:{}:v1", dir.display())),
        manifest.digest().to_string()
    );
    let umoci = run(Command::new("umoci").args(["ls", "--layout"]).arg(&dir));
    assert_eq!(umoci.trim(), "v1");
    let started = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, CopyEvent::BlobStarted { .. }))
        .count();
    assert_eq!(started, 2, "config and layer");

    // A second copy finds every blob already there.
    events.lock().unwrap().clear();
    copy_image(&src, name, &*dst, Some("v2"), &record)
        .await
        .unwrap();
    let events = events.into_inner().unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, CopyEvent::BlobSkipped { .. }))
            .count(),
        2,
        "{events:?}"
    );
    let out = Store::open_existing(&dir).unwrap();
    let names: Vec<RefName> = out.list().unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [RefName::Other("v1".into()), RefName::Other("v2".into())]
    );
}

#[tokio::test]
async fn archives_round_trip_with_skopeo() {
    need!(Skopeo);
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(&t.path().join("store")).unwrap();
    let manifest = build_image(&store, "jails/base:1", "archived");

    // skopeo writes the archive, jbuild imports it into a fresh store.
    let file = t.path().join("skopeo.tar");
    let from = format!("oci:{}:jails/base:1", store.path().display());
    run(Command::new("skopeo").args([
        "copy",
        "-q",
        &from,
        &format!("oci-archive:{}:tag", file.display()),
    ]));
    let imported = Store::open(&t.path().join("imported")).unwrap();
    let archive = ArchiveTransport::new(file.clone());
    let dst = LayoutTransport::from_store(imported.clone());
    let copied = copy_image(&archive, "tag", &dst, Some("jails/base:1"), &quiet)
        .await
        .unwrap();
    dst.finish().await.unwrap();
    assert_eq!(copied.digest(), manifest.digest());
    assert_eq!(
        imported.resolve("jails/base:1").unwrap().unwrap().digest(),
        manifest.digest()
    );
    all_blobs_present(&imported, &copied);

    // jbuild writes an archive; skopeo reads it; the bytes are reproducible.
    let mut written = Vec::new();
    for i in 0..2 {
        let file = t.path().join(format!("jbuild-{i}.tar"));
        let (dst, tag) = parse_location(&format!("oci-archive:{}:v1", file.display())).unwrap();
        copy_image(
            &LayoutTransport::from_store(store.clone()),
            "jails/base:1",
            &*dst,
            tag.as_deref(),
            &quiet,
        )
        .await
        .unwrap();
        dst.finish().await.unwrap();
        assert_eq!(
            skopeo_digest(&format!("oci-archive:{}:v1", file.display())),
            manifest.digest().to_string()
        );
        written.push(fs::read(&file).unwrap());
    }
    assert!(
        written[0] == written[1],
        "the same image gives the same archive"
    );
    let leftovers: Vec<_> = fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".jbuild-archive-") || n.starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[tokio::test]
async fn tampered_blobs_never_reach_the_destination() {
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(&t.path().join("store")).unwrap();
    let manifest = build_image(&store, "victim", "original");
    let bytes = store
        .read_blob(&descriptor_digest(&manifest).unwrap(), 1 << 20)
        .unwrap();
    let m: oci_spec::image::ImageManifest = serde_json::from_slice(&bytes).unwrap();
    let layer = descriptor_digest(&m.layers()[0]).unwrap();
    // Same size, different bytes.
    let mut content = fs::read(store.blob_path(&layer)).unwrap();
    let last = content.len() - 1;
    content[last] ^= 0xff;
    fs::write(store.blob_path(&layer), content).unwrap();

    let dir = t.path().join("dst");
    let dst = LayoutTransport::new(dir.clone());
    let err = copy_image(
        &LayoutTransport::from_store(store.clone()),
        "victim",
        &dst,
        Some("v"),
        &quiet,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, TransportError::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains(&layer.to_string()), "{err}");
    // A new layout is staged beside its place until `finish`: nothing is
    // at the place, and the failed copy's staging goes with the transport.
    assert!(!dir.exists(), "a failed copy made no layout");
    drop(dst);
    // The staging goes with the transport's last handle: the failed copy
    // returned at the first error, and a file task of another blob, already
    // running on tokio's blocking pool (it cannot be cancelled), may hold
    // one until it ends. Waited for, at most 30 s.
    let left = || -> Vec<_> {
        fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".dst."))
            .collect()
    };
    for _ in 0..300 {
        if left().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(left().is_empty(), "{:?}", left());

    // A tampered manifest is refused before anything is copied.
    let manifest_path = store.blob_path(&descriptor_digest(&manifest).unwrap());
    let mut m = fs::read(&manifest_path).unwrap();
    m[0] = b' ';
    fs::write(&manifest_path, m).unwrap();
    let dst2 = LayoutTransport::new(t.path().join("dst2"));
    let err = copy_image(
        &LayoutTransport::from_store(store),
        "victim",
        &dst2,
        None,
        &quiet,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, TransportError::Mismatch { .. }), "{err}");
    assert!(!t.path().join("dst2").exists(), "nothing was written");
}

#[tokio::test]
async fn indexes_are_copied_whole() {
    need!(Skopeo, Umoci);
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(&t.path().join("store")).unwrap();
    let amd64 = build_image(&store, "parts:amd64", "amd64");
    let arm64 = build_image(&store, "parts:arm64", "arm64");
    let with_platform = |d: &Descriptor, arch: Arch| {
        let mut d = d.clone();
        d.set_platform(Some(
            PlatformBuilder::default()
                .architecture(arch)
                .os(Os::FreeBSD)
                .build()
                .unwrap(),
        ));
        d
    };
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![
            with_platform(&amd64, Arch::Amd64),
            with_platform(&arm64, Arch::ARM64),
        ])
        .build()
        .unwrap();
    let (d, n) = store.put_bytes(&canonical_json(&index)).unwrap();
    let index_desc = Descriptor::new(MediaType::ImageIndex, n, oci_digest(&d));
    store
        .tag(&ImageName::parse("multi:1").unwrap(), &index_desc)
        .unwrap();

    let dir = t.path().join("dst");
    let dst = LayoutTransport::new(dir.clone());
    let copied = copy_image(
        &LayoutTransport::from_store(store),
        "multi:1",
        &dst,
        Some("multi"),
        &quiet,
    )
    .await
    .unwrap();
    dst.finish().await.unwrap();
    assert_eq!(copied.digest(), index_desc.digest());
    let out = Store::open_existing(&dir).unwrap();
    assert_eq!(
        out.list().unwrap().len(),
        1,
        "children are stored, not listed"
    );
    all_blobs_present(&out, &amd64);
    all_blobs_present(&out, &arm64);
    assert!(jbuild::image::gc::unreferenced_blobs(&out)
        .unwrap()
        .is_empty());
    let umoci = run(Command::new("umoci").args(["ls", "--layout"]).arg(&dir));
    assert_eq!(umoci.trim(), "multi");
    let raw = run(Command::new("skopeo").args([
        "inspect",
        "--raw",
        &format!("oci:{}:multi", dir.display()),
    ]));
    assert!(raw.contains("arm64"), "{raw}");
}

#[tokio::test]
async fn reading_a_missing_layout_changes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("none");
    let (src, _) = parse_location(&format!("oci:{}", missing.display())).unwrap();
    assert!(src.resolve("x").await.is_err());
    assert!(!Path::new(&missing).exists());
    let store = Store::open(&t.path().join("store")).unwrap();
    build_image(&store, "one", "1");
    let src = LayoutTransport::from_store(store.clone());
    assert!(src.resolve("").await.is_ok(), "the only image");
    build_image(&store, "two", "2");
    assert!(matches!(
        src.resolve("").await,
        Err(TransportError::Invalid { .. })
    ));
    assert!(matches!(
        src.resolve("three").await,
        Err(TransportError::NotFound { .. })
    ));
}
