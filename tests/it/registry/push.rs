//! `jbuild push`, `pull` and `copy` against a real Distribution registry
//! on 127.0.0.1, with skopeo as the peer that checks what jbuild wrote.

use crate::support::common;
use crate::support::registry as registry_support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::{jbuild, ok};
use jbuild::digest::Digest;
use jbuild::store::{canonical_json, descriptor_digest, oci_digest, Store};
use oci_spec::image::{Arch, Descriptor, ImageIndexBuilder, MediaType, Os, PlatformBuilder};
use registry_support::proxy::Proxy;
use registry_support::Registry;

/// A one-layer image for `os/arch` with `payload` bytes of content,
/// written into `store` (not tagged).
fn image(store: &Store, os: Os, arch: Arch, payload: &[u8]) -> Descriptor {
    let labels = HashMap::from([("org.example.size".to_string(), payload.len().to_string())]);
    let files = vec![("etc/motd", payload.to_vec())];
    registry_support::image::put_image(store, os, arch, &[files], labels).0
}

/// Bytes that do not compress, so the layer is as large as they are.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    registry_support::image::noise(&seed.to_string(), n)
}

fn store_at(root: &Path) -> Store {
    Store::open(&root.join("store")).unwrap()
}

fn stderr_of(c: &mut Command, code: i32) -> String {
    let out = c.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{c:?}: stdout {} stderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

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

#[test]
fn push_then_pull_keeps_every_digest_and_a_second_push_uploads_nothing() {
    need!(Skopeo);
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let store = store_at(&a);
    // Several blobs of a few MiB, so the parallel path runs.
    let desc = image(&store, Os::FreeBSD, Arch::Amd64, &noise(3 << 20, 7));
    let name = format!("{}/jails/base:14.1", reg.addr());
    store.tag_ref(&name, &desc).unwrap();

    let pushed = ok(jbuild(&a).args(["push", &name, "--jobs", "3"]));
    assert_eq!(pushed.trim(), desc.digest().to_string());

    // skopeo, the peer, sees the same manifest bytes.
    let raw = ok(Command::new("skopeo").args([
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{name}"),
    ]));
    assert_eq!(
        Digest::of(raw.as_bytes()).to_string(),
        desc.digest().to_string()
    );

    let pulled = ok(jbuild(&b).args(["pull", &name]));
    assert_eq!(pulled.trim(), desc.digest().to_string());
    let store_b = store_at(&b);
    assert_eq!(
        store_b.resolve(&name).unwrap().unwrap().digest(),
        desc.digest(),
        "pulled images are named by their full reference"
    );
    all_blobs_present(&store_b, &desc);
    let images = ok(jbuild(&b).arg("images"));
    assert!(
        images.contains(&format!("{}/jails/base", reg.addr())),
        "{images}"
    );

    // Again: every blob is found at the registry and skipped.
    let events = ok(jbuild(&a).args(["--json", "push", &name]));
    let done: Vec<serde_json::Value> = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "transfer_done")
        .collect();
    assert_eq!(done.len(), 2, "{events}");
    assert!(done.iter().all(|v| v["skipped"] == true), "{events}");
    // And seen on the wire, through a proxy in front of the registry: a
    // push of what the registry holds sends no blob. (This test and
    // registry/e2e.rs used to open with the same push and pull.)
    let proxy = Proxy::start(reg.port, vec![]);
    let via = format!("127.0.0.1:{}/jails/base:14.1", proxy.port);
    store.tag_ref(&via, &desc).unwrap();
    ok(jbuild(&a).args(["push", &via]));
    let again: Vec<String> = proxy
        .uploads()
        .into_iter()
        .filter(|r| r.contains("/blobs/"))
        .collect();
    assert!(
        again.is_empty(),
        "the second push uploaded blobs: {again:?}"
    );
    assert!(registry_support::image::verify_layout(store_b.path()) >= 2);

    // A build FROM an image the store lacks pulls it first, as docker does.
    let c = t.path().join("c");
    let ctx = t.path().join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Jailfile"),
        format!("FROM {name}\nLABEL stage=two\n"),
    )
    .unwrap();
    ok(jbuild(&c).args(["build", "-t", "next:1"]).arg(&ctx));
    assert_eq!(
        store_at(&c).resolve(&name).unwrap().unwrap().digest(),
        desc.digest()
    );
    let inspect: serde_json::Value =
        serde_json::from_str(&ok(jbuild(&c).args(["inspect", "next:1"]))).unwrap();
    let pushed_manifest: serde_json::Value = serde_json::from_slice(
        &store
            .read_blob(&descriptor_digest(&desc).unwrap(), 1 << 20)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        inspect["manifest"]["layers"][0]["digest"], pushed_manifest["layers"][0]["digest"],
        "the build is on the pulled layer: {inspect}"
    );

    // The same image under another name and registry repository, then
    // copied registry to OCI layout: digests all the way.
    let other = format!("{}/mirror/base:1", reg.addr());
    let copied = ok(jbuild(&b).args(["copy", &format!("docker://{name}"), &other]));
    assert_eq!(copied.trim(), desc.digest().to_string());
    let layout = t.path().join("layout");
    let out = ok(jbuild(&b).args(["copy", &other, &format!("oci:{}:v1", layout.display())]));
    assert_eq!(out.trim(), desc.digest().to_string());
    let skopeo = ok(Command::new("skopeo").args([
        "inspect",
        "--raw",
        &format!("oci:{}:v1", layout.display()),
    ]));
    assert_eq!(
        Digest::of(skopeo.as_bytes()).to_string(),
        desc.digest().to_string()
    );
}

#[test]
fn an_index_is_pushed_whole_and_pulled_by_platform() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let store = store_at(&a);
    let entries: Vec<Descriptor> = [(Os::FreeBSD, Arch::Amd64, 1), (Os::FreeBSD, Arch::ARM64, 2)]
        .into_iter()
        .map(|(os, arch, seed)| {
            let mut d = image(&store, os.clone(), arch.clone(), &noise(1000, seed));
            d.set_platform(Some(
                PlatformBuilder::default()
                    .os(os)
                    .architecture(arch)
                    .build()
                    .unwrap(),
            ));
            d
        })
        .collect();
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(entries.clone())
        .build()
        .unwrap();
    let (d, n) = store.put_bytes(&canonical_json(&index)).unwrap();
    let index_desc = Descriptor::new(MediaType::ImageIndex, n, oci_digest(&d));
    store.tag_ref("multi:1", &index_desc).unwrap();
    let dest = format!("{}/jails/multi:1", reg.addr());

    let pushed = ok(jbuild(&a).args(["push", "multi:1", &dest]));
    assert_eq!(pushed.trim(), index_desc.digest().to_string());

    let arm = ok(jbuild(&b).args(["pull", "--platform", "freebsd/arm64", &dest]));
    assert_eq!(arm.trim(), entries[1].digest().to_string());
    all_blobs_present(&store_at(&b), &entries[1]);

    let err = stderr_of(
        jbuild(&b).args(["pull", "--platform", "linux/riscv64", &dest]),
        1,
    );
    assert!(
        err.contains("linux/riscv64") && err.contains("freebsd/amd64, freebsd/arm64"),
        "{err}"
    );
}

#[test]
fn mistakes_are_the_users_and_say_what_to_do() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let missing = format!("{}/nothing/here:1", reg.addr());
    let err = stderr_of(jbuild(&root).args(["pull", &missing]), 1);
    assert!(
        err.contains(&format!("docker://{}/nothing/here", reg.addr())) && err.contains("`1`"),
        "{err}"
    );
    let err = stderr_of(jbuild(&root).args(["pull", "Not/A/Name"]), 1);
    assert!(err.contains("not a registry reference"), "{err}");
    let err = stderr_of(jbuild(&root).args(["push", "absent:1"]), 1);
    assert!(err.contains("no image `absent:1`"), "{err}");
    // A registry that is not there: the user's to look at (exit 1, issue
    // 17), after retries, naming the address tried.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = stderr_of(
        jbuild(&root).args(["pull", &format!("127.0.0.1:{port}/x:1")]),
        1,
    );
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}

/// `push --jobs N` keeps N blob uploads in flight at once, never more:
/// the proxy holds each upload's `PUT` until one more than N are in
/// flight (which never happens) or a bounded wait passes, and records the
/// peak. The image has 6 blobs (config and 5 layers), more than any N
/// tried; no `--jobs` means 4 (`JobsArg`'s default).
#[test]
fn push_jobs_n_keeps_n_uploads_in_flight() {
    use registry_support::proxy::{Gate, Proxy};
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("a");
    let store = store_at(&home);
    let layers: Vec<Vec<(&str, Vec<u8>)>> = (0..5)
        .map(|i| vec![("etc/motd", noise(64 << 10, i))])
        .collect();
    let (desc, _) = registry_support::image::put_image(
        &store,
        Os::FreeBSD,
        Arch::Amd64,
        &layers,
        HashMap::new(),
    );
    store.tag_ref("app:1", &desc).unwrap();
    for (jobs, expected) in [(Some(1), 1), (Some(3), 3), (None, 4)] {
        // A fresh registry each time: every blob is uploaded.
        let reg = Registry::start();
        let proxy = Proxy::start_gated(
            reg.port,
            Gate {
                method: "PUT",
                path: "/blobs/uploads/",
                release_at: expected + 1,
                wait: std::time::Duration::from_secs(2),
            },
        );
        let name = format!("127.0.0.1:{}/jails/app:1", proxy.port);
        let mut push = jbuild(&home);
        push.args(["push", "app:1", &name]);
        if let Some(n) = jobs {
            push.args(["--jobs", &n.to_string()]);
        }
        ok(&mut push);
        let puts = proxy
            .requests()
            .into_iter()
            .filter(|r| r.starts_with("PUT ") && r.contains("/blobs/uploads/"))
            .count();
        assert_eq!(puts, 6, "--jobs {jobs:?}: {:#?}", proxy.requests());
        assert_eq!(
            proxy.peak_in_flight(),
            expected,
            "--jobs {jobs:?}: uploads in flight at once"
        );
    }
}
