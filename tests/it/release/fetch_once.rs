//! The fetch phase: what a build reads from the network — a release's
//! MANIFEST and sets, an ADD URL without `--checksum` — is fetched once,
//! before planning, and the plan and the steps use what was fetched: one
//! request each across the build's passes (a two-platform build checks
//! every platform, then builds each), counted at the mirror.

use super::*;

/// Requests for `path` the server saw.
fn asked(server: &Server, path: &str) -> usize {
    let line = format!("GET {path}");
    server.requests().iter().filter(|r| **r == line).count()
}

#[test]
fn a_release_and_an_unpinned_add_url_are_fetched_once_per_build_and_platform() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    let base = xz(&base_tar(None));
    let amd64 = make_release(&mirror, &base);
    // The same release for arm64, where mirrors keep it.
    let arm64 = mirror.join("arm64/aarch64").join(RELEASE);
    fs::create_dir_all(&arm64).unwrap();
    for f in ["MANIFEST", "base.txz", "lib32.txz"] {
        fs::copy(amd64.join(f), arm64.join(f)).unwrap();
    }
    fs::create_dir_all(mirror.join("files")).unwrap();
    fs::write(mirror.join("files/app.conf"), b"listen 80\n").unwrap();
    let server = Server::start(&mirror);
    let config = no_trusted_manifests(t.path());
    let ctx = context(
        t.path(),
        &format!(
            "FROM freebsd:14.3\nADD {}/files/app.conf /etc/app.conf\nSYSRC hostname=web\n",
            server.url
        ),
    );
    let build = |root: &Path, args: &[&str]| {
        let mut c = jbuild(root);
        c.env("JBUILD_CONFIG", &config)
            .arg("build")
            .args(args)
            .arg("--mirror")
            .arg(&server.url)
            .arg(&ctx);
        ok(&mut c)
    };
    let manifest = |dir: &str| format!("/{dir}/{RELEASE}/MANIFEST");
    let set = |dir: &str| format!("/{dir}/{RELEASE}/base.txz");

    // One platform: the plan's download is the step's file.
    build(
        &t.path().join("one"),
        &["--platform", "freebsd/amd64", "-t", "one:1"],
    );
    let once = [
        (manifest("amd64"), 1),
        (set("amd64"), 1),
        ("/files/app.conf".to_string(), 1),
    ];
    for (path, n) in &once {
        assert_eq!(asked(&server, path), *n, "{path}: {:?}", server.requests());
    }

    // Two platforms, on a fresh root: each platform's MANIFEST and set
    // once, the URL once, across the two checks and the two builds.
    build(
        &t.path().join("two"),
        &[
            "--platform",
            "freebsd/amd64,freebsd/arm64",
            "--manifest",
            "two:list",
        ],
    );
    let twice = [
        (manifest("amd64"), 2),
        (set("amd64"), 2),
        (manifest("arm64/aarch64"), 1),
        (set("arm64/aarch64"), 1),
        ("/files/app.conf".to_string(), 2),
    ];
    for (path, n) in &twice {
        assert_eq!(asked(&server, path), *n, "{path}: {:?}", server.requests());
    }
}
