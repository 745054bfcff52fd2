//! `jbuild copy` between repositories of one registry mounts blobs, and
//! `jbuild push` to an OCI layout names the image as `export` does —
//! against a real Distribution registry, with skopeo reading the result.

use crate::support::common;
use crate::support::registry as registry_support;
use crate::support::tar as tar_support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use common::{jbuild, ok};
use jbuild::digest::Digest;
use jbuild::store::{canonical_json, oci_digest, Store};
use oci_spec::image::{
    Arch, ImageConfigurationBuilder, ImageManifestBuilder, MediaType, Os, RootFsBuilder,
};
use registry_support::proxy::Proxy;
use registry_support::Registry;

/// A one-layer image in `store` (an uncompressed tar: `pull` unpacks it),
/// tagged `name`; returns its manifest and config digests.
fn image(store: &Store, name: &str) -> (String, String) {
    let content: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let layer = tar_support::ustar(&[("data.bin", 0o644, &content)]);
    let config = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::FreeBSD)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![Digest::of(&layer).to_string()])
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let put = |mt: MediaType, bytes: &[u8]| {
        let (d, n) = store.put_bytes(bytes).unwrap();
        oci_spec::image::Descriptor::new(mt, n, oci_digest(&d))
    };
    let config = put(MediaType::ImageConfig, &canonical_json(&config));
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config.clone())
        .layers(vec![put(MediaType::ImageLayer, &layer)])
        .build()
        .unwrap();
    let desc = put(MediaType::ImageManifest, &canonical_json(&manifest));
    store.tag_ref(name, &desc).unwrap();
    (desc.digest().to_string(), config.digest().to_string())
}

/// The status of a HEAD request to the registry.
fn head(reg: &Registry, path: &str) -> u16 {
    let mut s = TcpStream::connect(reg.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "HEAD {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        reg.addr()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn skopeo_digest(image: &str) -> String {
    crate::support::lane::require(crate::support::lane::Lane::Skopeo);
    let raw = ok(Command::new("skopeo").args(["inspect", "--raw", "--tls-verify=false", image]));
    Digest::of(raw.as_bytes()).to_string()
}

#[test]
fn a_copy_between_repositories_of_one_registry_mounts_the_blobs() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let store = Store::open(&root.join("store")).unwrap();
    let name = format!("{}/jails/base:14.1", reg.addr());
    let (manifest, config) = image(&store, &name);
    ok(jbuild(&root).args(["push", &name]));

    // Distribution's HEAD does not see a blob of another repository, so a
    // blob reported as already there below was mounted, not sent.
    assert_eq!(head(&reg, &format!("/v2/jails/base/blobs/{config}")), 200);
    assert_eq!(head(&reg, &format!("/v2/mirror/base/blobs/{config}")), 404);
    let other = format!("{}/mirror/base:1", reg.addr());
    let events = ok(jbuild(&root).args(["--json", "copy", &format!("docker://{name}"), &other]));
    let skipped: Vec<bool> = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "transfer_done")
        .map(|v| v["skipped"] == true)
        .collect();
    assert_eq!(skipped, vec![true, true], "{events}");
    assert_eq!(head(&reg, &format!("/v2/mirror/base/blobs/{config}")), 200);
    assert_eq!(skopeo_digest(&format!("docker://{other}")), manifest);
}

#[test]
fn push_to_a_layout_without_a_tag_uses_the_images_own() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let store = Store::open(&root.join("store")).unwrap();
    let name = format!("{}/jails/web:2.0", reg.addr());
    let (manifest, _) = image(&store, &name);
    let layout = t.path().join("layout");
    let out = ok(jbuild(&root).args(["push", &name, &format!("oci:{}", layout.display())]));
    assert_eq!(out.trim(), manifest);
    assert_eq!(
        skopeo_digest(&format!("oci:{}:2.0", layout.display())),
        manifest
    );
}

#[test]
fn a_pulled_image_pushed_to_another_repository_is_mounted_not_uploaded() {
    let reg = Registry::start();
    // Every request goes through a proxy that logs it: the mounts are
    // seen, not inferred.
    let proxy = Proxy::start(reg.port, Vec::new());
    let via = format!("127.0.0.1:{}", proxy.port);
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let name = format!("{via}/jails/base:14.1");
    let (manifest, config) = image(&Store::open(&a.join("store")).unwrap(), &name);
    ok(jbuild(&a).args(["push", &name]));
    ok(jbuild(&b).args(["pull", &name]));
    let blobs = Store::open(&b.join("store")).unwrap();
    let layer = blobs
        .blob_digests()
        .unwrap()
        .into_iter()
        .map(|d| d.to_string())
        .find(|d| *d != config && *d != manifest)
        .unwrap();

    // The store remembers where the pulled blobs came from, so pushing
    // them to another repository of that registry mounts them.
    let other = format!("{via}/apps/web:1");
    assert_eq!(head(&reg, &format!("/v2/apps/web/blobs/{config}")), 404);
    proxy.clear_log();
    let events = ok(jbuild(&b).args(["--json", "push", &name, &other]));
    let log = proxy.requests();
    // `POST /v2/apps/web/blobs/uploads/?mount=<digest>&from=jails/base`,
    // once per blob (the query is form-encoded: `%3A`, `%2F`).
    let mut mounts: Vec<String> = log
        .iter()
        .filter_map(|r| r.strip_prefix("POST /v2/apps/web/blobs/uploads/?"))
        .filter_map(|q| {
            let url = reqwest::Url::parse(&format!("http://x/?{q}")).unwrap();
            let pairs: HashMap<String, String> = url.query_pairs().into_owned().collect();
            (pairs.get("from").map(String::as_str) == Some("jails/base"))
                .then(|| pairs.get("mount").cloned())
                .flatten()
        })
        .collect();
    mounts.sort();
    let mut wanted = vec![config.clone(), layer];
    wanted.sort();
    assert_eq!(mounts, wanted, "mount requests in {log:#?}");
    let uploads: Vec<&String> = log
        .iter()
        .filter(|r| r.starts_with("PATCH ") || (r.starts_with("PUT ") && r.contains("/blobs/")))
        .collect();
    assert!(uploads.is_empty(), "blob bytes were sent: {uploads:#?}");
    let skipped: Vec<bool> = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "transfer_done")
        .map(|v| v["skipped"] == true)
        .collect();
    assert_eq!(skipped, vec![true, true], "{events}");
    assert_eq!(skopeo_digest(&format!("docker://{other}")), manifest);

    // The store that pushed them first remembers where it pushed them.
    let third = format!("{via}/apps/api:1");
    let events = ok(jbuild(&a).args(["--json", "push", &name, &third]));
    assert!(!events.contains(r#""skipped":false"#), "{events}");

    // A store whose blobs came from nowhere uploads them (the control).
    let c = t.path().join("c");
    image(&Store::open(&c.join("store")).unwrap(), &name);
    let fourth = format!("{via}/apps/cli:1");
    let events = ok(jbuild(&c).args(["--json", "push", &name, &fourth]));
    assert!(
        events.contains(r#""skipped":false"#),
        "the source store has no origins, so it uploads: {events}"
    );
}
