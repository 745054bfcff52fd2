//! Faults between jbuild and a real Distribution registry, injected by a
//! proxy: connections reset in the middle of a blob, truncated and
//! corrupted bodies, 500s, 429 with Retry-After, slow responses. Every push
//! and pull either completes with the right digests or fails with a clear
//! message, and a corrupt blob never enters the store.

use crate::support::registry as registry_support;

use std::process::Output;
use std::time::{Duration, Instant};

use registry_support::image::{digests_in_layout, verify_layout};
use registry_support::proxy::{Fault, FaultKind, Proxy};
use registry_support::{run_bounded, run_ok, Registry, World, LIMIT};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An image pushed to a fresh registry, then pulled by another jbuild
/// through a proxy with `faults`. Returns the pull's output, how long it
/// took, the proxy and both worlds (source, destination).
struct Pulled {
    out: Output,
    took: Duration,
    proxy: Proxy,
    src: World,
    dst: World,
    _reg: Registry,
}

fn pull_through(faults: Vec<Fault>) -> Pulled {
    let src = World::new(1 << 20);
    let reg = Registry::start();
    run_ok(
        src.jbuild()
            .args(["push", "app:1", &format!("{}/jbuild/app:1", reg.host())]),
        LIMIT,
    );
    let proxy = Proxy::start(reg.port, faults);
    let name = format!("127.0.0.1:{}/jbuild/app:1", proxy.port);
    let dst = World::new(0);
    let start = Instant::now();
    let out = run_bounded(dst.jbuild().args(["pull", &name]), LIMIT);
    Pulled {
        took: start.elapsed(),
        out,
        proxy,
        src,
        dst,
        _reg: reg,
    }
}

impl Pulled {
    fn report(&self) -> String {
        format!(
            "exit {:?} after {:?}\nstderr:\n{}\nrequests: {:?}",
            self.out.status.code(),
            self.took,
            text(&self.out.stderr),
            self.proxy.requests()
        )
    }
    /// The pull worked and brought exactly the pushed image.
    fn complete(&self) {
        assert!(
            self.proxy.applied() >= 1,
            "the fault never fired: {}",
            self.report()
        );
        assert!(self.out.status.success(), "{}", self.report());
        assert_eq!(text(&self.out.stdout).trim(), self.src.manifest);
        assert_eq!(
            digests_in_layout(self.dst.store.path(), &self.src.manifest),
            self.src.digests
        );
        verify_layout(self.dst.store.path());
    }
    /// Either of the two above; a corrupt blob is never kept.
    fn complete_or_failed_cleanly(&self, wanted: &str) {
        if self.out.status.success() {
            self.complete()
        } else {
            self.failed_cleanly(wanted)
        }
    }
    /// The pull failed, said so, and left nothing corrupt or named.
    fn failed_cleanly(&self, wanted: &str) {
        assert!(
            self.proxy.applied() >= 1,
            "the fault never fired: {}",
            self.report()
        );
        assert!(!self.out.status.success(), "{}", self.report());
        let err = text(&self.out.stderr);
        assert!(
            err.contains("error:") && err.contains(wanted),
            "{}",
            self.report()
        );
        verify_layout(self.dst.store.path());
        let images = run_ok(self.dst.jbuild().arg("images"), LIMIT);
        assert!(
            !images.contains("jbuild/app"),
            "a failed pull named an image: {images}"
        );
    }
}

const BLOB: &str = "/blobs/sha256:";
/// What a failed blob transfer's message names.
const BLOB_WORD: &str = "blob";

fn once(kind: FaultKind) -> Vec<Fault> {
    vec![Fault::new("GET", BLOB, 1, kind)]
}

fn always(kind: FaultKind) -> Vec<Fault> {
    vec![Fault::new("GET", BLOB, usize::MAX, kind)]
}

impl Pulled {
    /// The pull came back for the rest of each cut blob: a later `GET` of
    /// the same path asked for `Range: bytes=N-` with `0 < N <= cut`
    /// (what reached jbuild before the cut), and the result verified.
    fn resumed(&self) {
        self.complete();
        let cuts = self.proxy.cuts();
        assert!(!cuts.is_empty(), "no body was cut: {}", self.report());
        let heads = self.proxy.heads();
        for (path, cut) in &cuts {
            let line = format!("GET {path} ");
            let tries: Vec<&String> = heads.iter().filter(|h| h.starts_with(&line)).collect();
            let resumed_at: Vec<u64> = tries
                .iter()
                .skip(1)
                .filter_map(|h| range_start(h))
                .collect();
            assert!(
                resumed_at.iter().any(|&n| n > 0 && n <= *cut as u64),
                "no GET {path} with Range: bytes=N- (0 < N <= {cut}) after the cut; \
                 its requests:\n{tries:#?}\n{}",
                self.report()
            );
        }
    }
}

/// `N` of a request head's `Range: bytes=N-`.
fn range_start(head: &str) -> Option<u64> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if !k.trim().eq_ignore_ascii_case("range") {
            return None;
        }
        v.trim()
            .strip_prefix("bytes=")?
            .strip_suffix('-')?
            .parse()
            .ok()
    })
}

#[test]
fn a_connection_reset_in_the_middle_of_a_blob_is_resumed() {
    pull_through(once(FaultKind::ResetMidBody)).resumed();
    // Reset on every answer: each try still brings half of what is left.
    pull_through(always(FaultKind::ResetMidBody)).complete_or_failed_cleanly(BLOB_WORD);
}

#[test]
fn a_truncated_body_is_resumed() {
    pull_through(once(FaultKind::TruncateBody)).resumed();
}

#[test]
fn wrong_content_for_a_digest_never_enters_the_store() {
    let p = pull_through(once(FaultKind::CorruptBody));
    p.complete_or_failed_cleanly("does not match");
    pull_through(always(FaultKind::CorruptBody)).failed_cleanly("does not match");
}

#[test]
fn server_errors_are_retried_then_reported() {
    pull_through(once(FaultKind::Status(500, vec![]))).complete();
    let p = pull_through(always(FaultKind::Status(500, vec![])));
    p.failed_cleanly("500");
    assert_eq!(
        p.out.status.code(),
        Some(2),
        "a registry fault is not the user's: {}",
        p.report()
    );
}

#[test]
fn too_many_requests_waits_for_retry_after() {
    let p = pull_through(once(FaultKind::Status(
        429,
        vec![("Retry-After", "2".into())],
    )));
    p.complete();
    assert!(
        p.took >= Duration::from_secs(2),
        "Retry-After: 2 was not honoured: {}",
        p.report()
    );
}

#[test]
fn slow_responses_still_arrive_whole() {
    pull_through(always(FaultKind::Slow(Duration::from_millis(10)))).complete();
}

/// Pushes `app:1` through a proxy with `faults`; returns the push's output
/// and the proxy, and checks what the registry then holds by pulling it
/// directly when the push succeeded.
fn push_through(faults: Vec<Fault>) -> (Output, Proxy) {
    let src = World::new(1 << 20);
    let reg = Registry::start();
    let proxy = Proxy::start(reg.port, faults);
    let out = push_via(&src, &proxy);
    assert!(
        proxy.applied() >= 1,
        "the fault never fired: {:?}",
        proxy.requests()
    );
    if out.status.success() {
        assert_eq!(text(&out.stdout).trim(), src.manifest);
        assert_registry_holds(&reg, &src);
    }
    (out, proxy)
}

/// `jbuild push app:1` from `src` to `jbuild/app:1` through `proxy`.
fn push_via(src: &World, proxy: &Proxy) -> Output {
    run_bounded(
        src.jbuild().args([
            "push",
            "app:1",
            &format!("127.0.0.1:{}/jbuild/app:1", proxy.port),
        ]),
        LIMIT,
    )
}

/// `jbuild/app:1` in `reg`, pulled directly into a fresh root, is `src`'s
/// image whole: every digest, every blob sound.
fn assert_registry_holds(reg: &Registry, src: &World) {
    let dst = World::new(0);
    run_ok(
        dst.jbuild()
            .args(["pull", &format!("{}/jbuild/app:1", reg.host())]),
        LIMIT,
    );
    assert_eq!(
        digests_in_layout(dst.store.path(), &src.manifest),
        src.digests
    );
    verify_layout(dst.store.path());
}

#[test]
fn pushes_survive_transient_faults() {
    for faults in [
        vec![Fault::new(
            "POST",
            "/blobs/uploads/",
            1,
            FaultKind::Status(500, vec![]),
        )],
        vec![Fault::new("PUT", "/blobs/uploads/", 1, FaultKind::Reset)],
        vec![Fault::new(
            "PUT",
            "/manifests/",
            1,
            FaultKind::Status(429, vec![("Retry-After", "1".into())]),
        )],
    ] {
        let (out, proxy) = push_through(faults.clone());
        assert!(
            out.status.success(),
            "{faults:?}: {}\n{:?}",
            text(&out.stderr),
            proxy.requests()
        );
    }
}

#[test]
fn pushes_report_lasting_faults() {
    let (out, _) = push_through(vec![Fault::new(
        "PUT",
        "/manifests/",
        usize::MAX,
        FaultKind::Status(500, vec![]),
    )]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("manifest"),
        "{}",
        text(&out.stderr)
    );

    let (out, _) = push_through(vec![Fault::new(
        "PUT",
        "/blobs/uploads/",
        usize::MAX,
        FaultKind::Reset,
    )]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("upload blob sha256:"),
        "{}",
        text(&out.stderr)
    );
}

/// The registry loses a blob between its upload and the manifest (as
/// Distribution 2.8 can when two pushes upload the same blob at once): the
/// real registry refuses the manifest with MANIFEST_BLOB_UNKNOWN, and jbuild
/// looks again, uploads the blob again and pushes the manifest again.
#[test]
fn a_blob_lost_before_its_manifest_is_uploaded_again() {
    let src = World::new(1 << 20);
    let reg = Registry::start();
    let lost = src
        .digests
        .iter()
        .find(|d| **d != src.manifest)
        .unwrap()
        .clone();
    let delete = format!("/v2/jbuild/app/blobs/{lost}");
    let proxy = Proxy::start(
        reg.port,
        vec![Fault::new(
            "PUT",
            "/manifests/",
            1,
            FaultKind::UpstreamFirst("DELETE", delete.clone()),
        )],
    );
    let out = push_via(&src, &proxy);
    let log = proxy.requests();
    assert!(out.status.success(), "{}\n{log:#?}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), src.manifest);
    // The blob really was gone when the first manifest arrived...
    assert!(
        log.contains(&format!("UPSTREAM DELETE {delete} -> 202")),
        "{log:#?}"
    );
    let manifests = log
        .iter()
        .filter(|r| r.starts_with("PUT ") && r.contains("/manifests/"));
    assert_eq!(manifests.count(), 2, "{log:#?}");
    // ...and was looked for and uploaded again before the second.
    let heads = log
        .iter()
        .filter(|r| r.starts_with("HEAD ") && r.ends_with(&lost))
        .count();
    assert_eq!(heads, 2, "{log:#?}");
    assert!(
        text(&out.stderr).contains("uploading the missing blobs again"),
        "{}",
        text(&out.stderr)
    );
    assert_registry_holds(&reg, &src);
}
