//! Small work is cheap: a copy between a registry and an OCI layout touches
//! neither the state root, nor the temporary directory, nor the system's CA
//! certificates (a plain-HTTP registry never shows one), makes only the
//! requests it needs, and leaves a complete layout behind.

use crate::support::registry as registry_support;

use std::fs;
use std::path::Path;

use jbuild::digest::Digest;
use registry_support::proxy::Proxy;
use registry_support::{run_bounded, succeeds, text, Registry, World, LIMIT};

/// Every blob of the layout at `dir` hashes to its name, and `index.json`
/// names `manifest`: what a killed or careless writer would not leave.
fn assert_complete(dir: &Path, manifest: &str) {
    let blobs = dir.join("blobs/sha256");
    let mut n = 0;
    for e in fs::read_dir(&blobs).unwrap() {
        let e = e.unwrap();
        let bytes = fs::read(e.path()).unwrap();
        assert_eq!(
            Digest::of(&bytes).hex(),
            e.file_name().to_str().unwrap(),
            "{}",
            e.path().display()
        );
        n += 1;
    }
    assert!(n >= 3, "{n} blobs in {}", blobs.display());
    let index = fs::read_to_string(dir.join("index.json")).unwrap();
    assert!(index.contains(manifest), "{index}");
}

/// A world whose `app:1` is pushed to a fresh registry as `small/app:1`
/// (returned as `host/small/app:1`).
fn pushed() -> (World, Registry, String) {
    let w = World::new(0);
    let reg = Registry::start();
    let src = format!("{}/small/app:1", reg.host());
    succeeds(&run_bounded(
        w.jbuild().args(["push", "app:1", &src]),
        LIMIT,
    ));
    (w, reg, src)
}

#[test]
fn a_copy_between_a_registry_and_a_layout_opens_no_state_root() {
    let (w, reg, src) = pushed();

    // A state root and a temporary directory that cannot exist (their
    // parent is a file): any command that opened the store, a lock or the
    // snapshots, or made a temporary directory, would fail.
    let file = w.path("a-file");
    fs::write(&file, b"").unwrap();
    let nowhere = file.join("root");
    let no_tmp = file.join("tmp");
    let layout = w.path("layout");
    let oci = format!("oci:{}:1", layout.display());
    for (from, to) in [
        (format!("docker://{src}"), oci.clone()),
        (oci.clone(), format!("docker://{}/small/back:1", reg.host())),
    ] {
        let out = run_bounded(
            w.jbuild()
                .env("JBUILD_ROOT", &nowhere)
                .env("TMPDIR", &no_tmp)
                .env_remove("JBUILD_BACKEND")
                .args(["copy", &from, &to]),
            LIMIT,
        );
        let digest = succeeds(&out);
        assert_eq!(digest.trim(), w.manifest, "{from} -> {to}");
    }
    assert!(!nowhere.exists());
    assert_complete(&layout, &w.manifest);

    // Between two registries (not one: it mounts) each blob passes through
    // a temporary file: that copy does need the directory, and says so when
    // it is missing.
    let other = Registry::start();
    let between = |tmp: &Path| {
        run_bounded(
            w.jbuild().env("TMPDIR", tmp).args([
                "copy",
                &format!("docker://{src}"),
                &format!("docker://{}/other/app:1", other.host()),
            ]),
            LIMIT,
        )
    };
    let out = between(&no_tmp);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("cannot create a temporary directory"), "{err}");
    let tmp = w.path("tmp");
    fs::create_dir_all(&tmp).unwrap();
    assert_eq!(succeeds(&between(&tmp)).trim(), w.manifest);
}

/// A system whose CA certificates would be refused (none where
/// rustls-native-certs looks) copies from a plain-HTTP registry without a
/// word about them, even with `--debug`, which says when they are read:
/// they were never read. The TLS half of this is
/// `tls::a_system_without_ca_certificates_…`, where they are.
#[test]
fn a_plain_http_copy_reads_no_ca_certificates() {
    let (w, _reg, src) = pushed();
    let none = w.path("no-system-certs");
    fs::create_dir_all(&none).unwrap();
    let out = run_bounded(
        w.jbuild()
            .env("SSL_CERT_FILE", none.join("none.pem"))
            .env("SSL_CERT_DIR", &none)
            .args([
                "--debug",
                "copy",
                &format!("docker://{src}"),
                &format!("oci:{}:1", w.path("layout").display()),
            ]),
        LIMIT,
    );
    succeeds(&out);
    let err = text(&out.stderr);
    assert!(!err.contains("CA certificates"), "{err}");
}

/// The requests of a small copy each way, as the registry sees them
/// through a logging proxy: one `/v2/` ping, then only what moves the image
/// (crane, for comparison: a ping, the manifest, and each blob).
#[test]
fn a_small_copy_makes_only_the_requests_it_needs() {
    let w = World::new(0);
    let reg = Registry::start();
    let proxy = Proxy::start(reg.port, Vec::new());
    let via = format!("127.0.0.1:{}", proxy.port);
    succeeds(&run_bounded(
        w.jbuild()
            .args(["push", "app:1", &format!("{via}/small/app:1")]),
        LIMIT,
    ));
    let blobs: Vec<String> = w
        .digests
        .iter()
        .filter(|d| **d != w.manifest)
        .cloned()
        .collect();
    let n = blobs.len();
    assert!(n >= 2, "{:?}", w.digests);

    proxy.clear_log();
    let oci = format!("oci:{}:1", w.path("layout").display());
    succeeds(&run_bounded(
        w.jbuild()
            .args(["copy", &format!("docker://{via}/small/app:1"), &oci]),
        LIMIT,
    ));
    let mut got = proxy.requests();
    got.sort();
    let mut wanted = vec![
        "GET /v2/".to_string(),
        "GET /v2/small/app/manifests/1".to_string(),
    ];
    wanted.extend(blobs.iter().map(|b| format!("GET /v2/small/app/blobs/{b}")));
    wanted.sort();
    assert_eq!(got, wanted);

    proxy.clear_log();
    succeeds(&run_bounded(
        w.jbuild()
            .args(["copy", &oci, &format!("docker://{via}/small/back:1")]),
        LIMIT,
    ));
    let got = proxy.requests();
    let count = |prefix: &str| got.iter().filter(|r| r.starts_with(prefix)).count();
    assert_eq!(count("GET /v2/"), 1, "{got:#?}");
    // Per blob: a HEAD (is it there?), a POST (a session), a PUT (the
    // bytes); then the manifest's PUT.
    assert_eq!(count("HEAD /v2/small/back/blobs/"), n, "{got:#?}");
    assert_eq!(count("POST /v2/small/back/blobs/uploads/"), n, "{got:#?}");
    assert_eq!(count("PUT /v2/small/back/"), n + 1, "{got:#?}");
    assert_eq!(got.len(), 3 * n + 2, "{got:#?}");
}

/// A registry on this machine is asked in plain HTTP first, whichever way
/// it is spelt (`127.0.0.1:PORT`, `localhost:PORT`): no TLS handshake is
/// tried and seen to fail first, as docker and crane try one (a connection
/// and a round trip more on every command). The registry's answer to that
/// first `/v2/` is also the sign-in's, so `/v2/` is asked once. A loopback
/// registry that speaks TLS is still reached over HTTPS
/// (`tls::tls_with_a_generated_ca_…`).
#[test]
fn a_loopback_registry_is_asked_in_plain_http_before_any_tls() {
    let w = World::new(0);
    let reg = Registry::start();
    let proxy = Proxy::start(reg.port, Vec::new());
    for (i, host) in ["127.0.0.1", "localhost"].into_iter().enumerate() {
        let via = format!("{host}:{}", proxy.port);
        proxy.clear_log();
        succeeds(&run_bounded(
            w.jbuild()
                .args(["push", "app:1", &format!("{via}/small/app{i}:1")]),
            LIMIT,
        ));
        let oci = format!("oci:{}:1", w.path(&format!("layout{i}")).display());
        succeeds(&run_bounded(
            w.jbuild()
                .args(["copy", &format!("docker://{via}/small/app{i}:1"), &oci]),
            LIMIT,
        ));
        let got = proxy.requests();
        assert_eq!(proxy.not_http(), 0, "{via}: a TLS handshake was tried");
        let pings = got.iter().filter(|r| *r == "GET /v2/").count();
        assert_eq!(pings, 2, "{via}: one /v2/ a command: {got:#?}");
    }
}
