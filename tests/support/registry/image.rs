//! Test images, made in a jbuild store with the store's own API, and checks
//! on what lands in a layout.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::Path;

use flate2::write::GzEncoder;
use jbuild::digest::Digest;
use jbuild::store::{canonical_json, oci_digest, ImageName, Store};
use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, ImageConfigurationBuilder, ImageManifestBuilder, MediaType,
    Os, RootFsBuilder,
};
use sha2::{Digest as _, Sha256};

/// Bytes no compressor shrinks, the same for the same seed.
pub fn noise(seed: &str, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut block = Sha256::digest(seed.as_bytes());
    while out.len() < len {
        out.extend_from_slice(&block);
        block = Sha256::digest(block);
    }
    out.truncate(len);
    out
}

fn layer(files: &[(&str, Vec<u8>)]) -> (Vec<u8>, Vec<u8>) {
    let files: Vec<(&str, u32, &[u8])> = files
        .iter()
        .map(|(name, content)| (*name, 0o644, content.as_slice()))
        .collect();
    let raw = crate::support::tar::ustar(&files);
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    (raw, gz.finish().unwrap())
}

/// An image in `store` tagged `tag`: a layer of `big` incompressible
/// bytes and a small one, both depending on `seed`. Returns the manifest's
/// descriptor and every digest it references (manifest, config, layers).
pub fn make(store: &Store, tag: &str, seed: &str, big: usize) -> (Descriptor, BTreeSet<String>) {
    let layers = [
        vec![("data/blob.bin", noise(seed, big))],
        vec![("etc/motd", format!("hello from {seed}\n").into_bytes())],
    ];
    let (desc, all) = put_image(store, Os::FreeBSD, Arch::Amd64, &layers, HashMap::new());
    store.tag(&ImageName::parse(tag).unwrap(), &desc).unwrap();
    (desc, all)
}

/// An untagged image in `store` for `os/arch`: one gzip layer per entry of
/// `layers` (each a list of files), the config carrying `labels`. Returns
/// the manifest's descriptor and every digest it references.
pub fn put_image(
    store: &Store,
    os: Os,
    arch: Arch,
    layers: &[Vec<(&str, Vec<u8>)>],
    labels: HashMap<String, String>,
) -> (Descriptor, BTreeSet<String>) {
    let layers: Vec<_> = layers.iter().map(|files| layer(files)).collect();
    let config = ImageConfigurationBuilder::default()
        .architecture(arch)
        .os(os)
        .config(ConfigBuilder::default().labels(labels).build().unwrap())
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(
                    layers
                        .iter()
                        .map(|(raw, _)| Digest::of(raw).to_string())
                        .collect::<Vec<_>>(),
                )
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let mut all = BTreeSet::new();
    let mut put = |mt: MediaType, bytes: &[u8]| {
        let (d, n) = store.put_bytes(bytes).unwrap();
        all.insert(d.to_string());
        Descriptor::new(mt, n, oci_digest(&d))
    };
    let config = put(MediaType::ImageConfig, &canonical_json(&config));
    let layer_descs: Vec<_> = layers
        .iter()
        .map(|(_, gz)| put(MediaType::ImageLayerGzip, gz))
        .collect();
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config)
        .layers(layer_descs)
        .build()
        .unwrap();
    let desc = put(MediaType::ImageManifest, &canonical_json(&manifest));
    (desc, all)
}

/// An image in `store` tagged `tag` whose one layer, an uncompressed tar
/// of a single file of `size` bytes read from `content`, is written
/// streaming (never held in memory). Returns the manifest's descriptor and
/// the layer's digest and size.
pub fn streamed(
    store: &Store,
    tag: &str,
    size: u64,
    content: impl std::io::Read,
) -> (Descriptor, Digest, u64) {
    let mut w = store.blob_writer().unwrap();
    crate::support::tar::stream_file(&mut w, "data.bin", size, content).unwrap();
    let (layer, layer_size) = w.commit(None).unwrap();
    let config = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::FreeBSD)
        .config(ConfigBuilder::default().build().unwrap())
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![layer.to_string()])
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let (c, n) = store.put_bytes(&canonical_json(&config)).unwrap();
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(Descriptor::new(MediaType::ImageConfig, n, oci_digest(&c)))
        .layers(vec![Descriptor::new(
            MediaType::ImageLayer,
            layer_size,
            oci_digest(&layer),
        )])
        .build()
        .unwrap();
    let (m, n) = store.put_bytes(&canonical_json(&manifest)).unwrap();
    let desc = Descriptor::new(MediaType::ImageManifest, n, oci_digest(&m));
    store.tag(&ImageName::parse(tag).unwrap(), &desc).unwrap();
    (desc, layer, layer_size)
}

/// The digests an image in an OCI layout references, read from its files:
/// (manifest, config, layers).
pub fn digests_in_layout(layout: &Path, manifest: &str) -> BTreeSet<String> {
    let hex = manifest.strip_prefix("sha256:").unwrap();
    let bytes = fs::read(layout.join("blobs/sha256").join(hex)).unwrap();
    let m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let mut all = BTreeSet::from([manifest.to_string()]);
    all.insert(m["config"]["digest"].as_str().unwrap().to_string());
    for l in m["layers"].as_array().unwrap() {
        all.insert(l["digest"].as_str().unwrap().to_string());
    }
    all
}

/// Re-hashes every blob of an OCI layout; panics on one whose content does
/// not match its name. Returns how many there are.
pub fn verify_layout(layout: &Path) -> usize {
    let dir = layout.join("blobs/sha256");
    let Ok(entries) = fs::read_dir(&dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue; // a temporary file, not a blob
        }
        let mut f = fs::File::open(e.path()).unwrap();
        let mut h = Sha256::new();
        std::io::copy(&mut f, &mut h).unwrap();
        assert_eq!(
            hex::encode(h.finalize()),
            name,
            "corrupt blob in {}",
            dir.display()
        );
        n += 1;
    }
    n
}
