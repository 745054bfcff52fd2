//! The registry harness proved with skopeo alone: a real CNCF
//! Distribution registry on 127.0.0.1 (plain, htpasswd, bearer tokens, TLS
//! with a test CA) and the fault-injecting proxy do what jbuild's tests
//! rely on them to do. None of these runs jbuild: they test the tests, so
//! their names start with `harness_` and `tests/run` counts them apart
//! (tests/README.md).

use crate::support::registry as registry_support;

use std::fs;
use std::path::Path;
use std::time::Duration;

use registry_support::image::{digests_in_layout, verify_layout};
use registry_support::proxy::{Fault, FaultKind, Proxy};
use registry_support::tls::TestCa;
use registry_support::token::{TokenServer, ISSUER};
use registry_support::{htpasswd, run_bounded, run_ok, Options, Registry, World, LIMIT};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The manifest digest a layout's only image (tag `t`) has.
fn layout_manifest(layout: &Path) -> String {
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

// ---------------------------------------------------------------------
// The harness, proved with skopeo.
// ---------------------------------------------------------------------

#[test]
fn harness_skopeo_round_trip_through_distribution_keeps_every_digest() {
    let w = World::new(1 << 20);
    let reg = Registry::start();
    let dest = format!("docker://{}/jbuild/app:1", reg.host());
    run_ok(
        w.skopeo()
            .args(["copy", "--dest-tls-verify=false"])
            .arg(w.oci_source())
            .arg(&dest),
        LIMIT,
    );
    let out = w.path("pulled");
    run_ok(
        w.skopeo()
            .args(["copy", "--src-tls-verify=false"])
            .arg(&dest)
            .arg(format!("oci:{}:t", out.display())),
        LIMIT,
    );
    assert_eq!(layout_manifest(&out), w.manifest);
    assert_eq!(digests_in_layout(&out, &w.manifest), w.digests);
    assert_eq!(verify_layout(&out), w.digests.len());
}

#[test]
fn harness_skopeo_second_push_through_the_proxy_uploads_no_blob() {
    let w = World::new(64 << 10);
    let reg = Registry::start();
    let proxy = Proxy::start(reg.port, vec![]);
    let dest = format!("docker://127.0.0.1:{}/jbuild/app:1", proxy.port);
    let push = || {
        run_ok(
            w.skopeo()
                .args(["copy", "--dest-tls-verify=false"])
                .arg(w.oci_source())
                .arg(&dest),
            LIMIT,
        )
    };
    push();
    let first = proxy.uploads();
    assert!(
        first
            .iter()
            .filter(|r| r.contains("/blobs/uploads/"))
            .count()
            >= 3,
        "the first push uploads three blobs: {first:?}"
    );
    proxy.clear_log();
    push();
    let again: Vec<_> = proxy
        .uploads()
        .into_iter()
        .filter(|r| r.contains("/blobs/"))
        .collect();
    assert!(again.is_empty(), "second push uploaded blobs: {again:?}");
    assert!(
        proxy.requests().iter().any(|r| r.starts_with("HEAD ")),
        "the second push asked which blobs exist: {:?}",
        proxy.requests()
    );
}

#[test]
fn harness_skopeo_htpasswd_registry_refuses_without_and_accepts_with_credentials() {
    let w = World::new(4 << 10);
    let hp = htpasswd(w.tmp.path(), &[("alice", "wonderland")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let dest = format!("docker://{}/jbuild/app:1", reg.host());
    let denied = run_bounded(
        w.skopeo()
            .args([
                "copy",
                "--dest-tls-verify=false",
                "--dest-creds",
                "alice:wrong",
            ])
            .arg(w.oci_source())
            .arg(&dest),
        LIMIT,
    );
    assert!(!denied.status.success());
    assert!(
        stderr(&denied).contains("unauthorized"),
        "{}",
        stderr(&denied)
    );
    run_ok(
        w.skopeo()
            .args([
                "copy",
                "--dest-tls-verify=false",
                "--dest-creds",
                "alice:wonderland",
            ])
            .arg(w.oci_source())
            .arg(&dest),
        LIMIT,
    );
}

#[test]
fn harness_skopeo_bearer_token_flow() {
    let w = World::new(4 << 10);
    let tokens = TokenServer::start(w.tmp.path(), "bob", "builder");
    let reg = Registry::start_with(&Options {
        token: Some((tokens.realm(), ISSUER.into(), tokens.bundle.clone())),
        ..Options::default()
    });
    let dest = format!("docker://{}/jbuild/app:1", reg.host());
    let denied = run_bounded(
        w.skopeo()
            .args([
                "copy",
                "--dest-tls-verify=false",
                "--dest-creds",
                "bob:nope",
            ])
            .arg(w.oci_source())
            .arg(&dest),
        LIMIT,
    );
    assert!(!denied.status.success(), "wrong password accepted");
    run_ok(
        w.skopeo()
            .args([
                "copy",
                "--dest-tls-verify=false",
                "--dest-creds",
                "bob:builder",
            ])
            .arg(w.oci_source())
            .arg(&dest),
        LIMIT,
    );
    let asked = tokens.requests.lock().unwrap().clone();
    assert!(
        asked.iter().any(
            |r| r.contains("scope=repository%3Ajbuild%2Fapp%3Apull%2Cpush")
                || r.contains("scope=repository:jbuild/app:pull,push")
        ),
        "token requests: {asked:?}"
    );
    assert!(reg
        .log()
        .contains("\"PUT /v2/jbuild/app/manifests/1 HTTP/1.1\" 201"));
}

#[test]
fn harness_skopeo_tls_with_the_test_ca_and_refusal_without_it() {
    let w = World::new(4 << 10);
    let ca = TestCa::new(&w.path("tls"));
    let reg = Registry::start_with(&Options {
        tls: Some((ca.server_cert.clone(), ca.server_key.clone())),
        ..Options::default()
    });
    let dest = format!("docker://{}/jbuild/app:1", reg.host());
    let refused = run_bounded(w.skopeo().arg("copy").arg(w.oci_source()).arg(&dest), LIMIT);
    assert!(!refused.status.success(), "an unknown CA was trusted");
    assert!(
        stderr(&refused).contains("certificate signed by unknown authority"),
        "{}",
        stderr(&refused)
    );
    let certs = w.path("certs.d");
    fs::create_dir_all(&certs).unwrap();
    fs::copy(&ca.ca_cert, certs.join("ca.crt")).unwrap();
    run_ok(
        w.skopeo()
            .args(["copy", "--dest-cert-dir"])
            .arg(&certs)
            .arg(w.oci_source())
            .arg(&dest),
        LIMIT,
    );
}

/// Pulls with skopeo through a proxy with `fault`: the pull must fail
/// with stderr saying `fails_with` (the fault reached skopeo as such), or
/// (`None`) bring every digest; either way no blob in the destination is
/// corrupt.
fn skopeo_pull_with(fault: FaultKind, times: usize, fails_with: Option<&str>) {
    let w = World::new(1 << 20);
    let reg = Registry::start();
    run_ok(
        w.skopeo()
            .args(["copy", "--dest-tls-verify=false"])
            .arg(w.oci_source())
            .arg(format!("docker://{}/jbuild/app:1", reg.host())),
        LIMIT,
    );
    let proxy = Proxy::start(
        reg.port,
        vec![Fault::new("GET", "/blobs/sha256:", times, fault)],
    );
    let out = w.path("pulled");
    let res = run_bounded(
        w.skopeo()
            .args(["copy", "--src-tls-verify=false"])
            .arg(format!("docker://127.0.0.1:{}/jbuild/app:1", proxy.port))
            .arg(format!("oci:{}:t", out.display())),
        LIMIT,
    );
    assert!(
        proxy.applied() >= 1,
        "the fault never fired: {:?}",
        proxy.requests()
    );
    verify_layout(&out);
    if let Some(wanted) = fails_with {
        assert!(!res.status.success(), "skopeo took a faulty blob");
        assert!(
            stderr(&res).contains(wanted),
            "skopeo's error lacks `{wanted}`: {}",
            stderr(&res)
        );
    } else {
        // A fault skopeo rides out: it must bring the whole image.
        assert!(
            res.status.success(),
            "skopeo failed through {:?}: {}",
            proxy.requests(),
            stderr(&res)
        );
        assert_eq!(digests_in_layout(&out, &w.manifest), w.digests);
    }
}

#[test]
fn harness_skopeo_faults_corrupt_blob_is_refused() {
    skopeo_pull_with(FaultKind::CorruptBody, 1, Some("Digest did not match"));
}

#[test]
fn harness_skopeo_faults_reset_and_truncation_fail_cleanly() {
    skopeo_pull_with(FaultKind::ResetMidBody, 1, Some("happened during read"));
    skopeo_pull_with(FaultKind::TruncateBody, 1, Some("unexpected EOF"));
}

#[test]
fn harness_skopeo_faults_slow_blobs_still_arrive() {
    skopeo_pull_with(FaultKind::Slow(Duration::from_millis(5)), 2, None);
}

#[test]
fn harness_skopeo_faults_server_errors() {
    // skopeo (1.9) does not retry a blob answered 500: the injected
    // status must reach it as such. A 429 it waits out and retries, so it
    // must then bring the whole image.
    skopeo_pull_with(
        FaultKind::Status(500, vec![]),
        1,
        Some("invalid status code from registry 500"),
    );
    skopeo_pull_with(
        FaultKind::Status(429, vec![("Retry-After", "1".into())]),
        1,
        None,
    );
}
