//! `PKG` by jbuild's own installer, through the `jbuild` binary on Linux:
//! a base made by the test (a FreeBSD-shaped tree with the userland files
//! the ABI is read from), a repository written by `tests/support/pkgrepo`
//! and signed with the `openssl` program, served from 127.0.0.1 under
//! `${ABI}`; the image's tree, its `local.sqlite` read with the `sqlite3`
//! program, and its layer read by GNU tar. Then the same recipe for
//! freebsd/amd64 and freebsd/arm64 in one multi-platform build.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod deferred;
mod entries;
mod generations;
mod hostile;
mod mirrors;
mod osversion;
mod overlap;
mod pkgcheck;
mod platforms;
mod repos_dir;
mod repos_key;
mod resolve;
mod scripts;
mod signatures;
mod signatures_eddsa;

use crate::support::common::{export_unpacked, jbuild, ok, run};
use crate::support::limits::{Answer, Server};
use crate::support::pkgrepo::image::{freebsd_tree, UID};
use crate::support::pkgrepo::platform::write_repo_for;
use crate::support::pkgrepo::Key;

/// Serves the files under `dir`.
pub(super) fn serve(dir: PathBuf) -> Server {
    Server::start(move |r| {
        let path = r.path.replace("%3A", ":");
        match fs::read(dir.join(path.trim_start_matches('/'))) {
            Ok(body) => Answer::Reply {
                status: "200 OK",
                headers: vec![],
                body,
            },
            Err(_) => Answer::status("404 Not Found"),
        }
    })
}

/// A repository for each ABI under `www`, and a base recipe whose tree
/// is the platform's (`tree-amd64`, `tree-arm64`), all naming `url`.
fn setup(t: &Path) -> (Server, PathBuf) {
    let key = Key::new(t, "repo");
    let www = t.join("www");
    // Packages for any FreeBSD 14 (`FreeBSD:14:*`, as architecture-free
    // packages say): the same bytes under both ABIs' paths.
    for abi in ["FreeBSD:14:amd64", "FreeBSD:14:aarch64"] {
        write_repo_for(&www.join(abi).join("latest"), &key, "FreeBSD:14:*");
    }
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/${{ABI}}/latest", server.port);
    let base = t.join("base");
    for arch in ["amd64", "arm64"] {
        freebsd_tree(&base.join(format!("tree-{arch}")), arch, &url, &key);
    }
    fs::write(
        base.join("Jailfile"),
        "FROM scratch\nARG TARGETARCH\nCOPY tree-${TARGETARCH}/ /\n",
    )
    .unwrap();
    (server, base)
}

/// A repository at `www/FreeBSD:14:amd64/latest` under `t`, written by
/// `write` (given the directory and the signing key), served from
/// 127.0.0.1; and the image `base:1` (freebsd/amd64) built in `root`,
/// whose repository configuration names it (fingerprints, the key in
/// the image).
fn amd64_base(t: &Path, root: &Path, write: impl FnOnce(&Path, &Key)) -> (Server, Key) {
    amd64_base_served(t, root, write, serve)
}

/// [`amd64_base`] with the repository served by `serve` (given the
/// directory to serve).
fn amd64_base_served(
    t: &Path,
    root: &Path,
    write: impl FnOnce(&Path, &Key),
    serve: impl FnOnce(PathBuf) -> Server,
) -> (Server, Key) {
    let key = Key::new(t, "repo");
    let www = t.join("www");
    write(&www.join("FreeBSD:14:amd64/latest"), &key);
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/${{ABI}}/latest", server.port);
    let base = t.join("base");
    freebsd_tree(&base.join("tree"), "amd64", &url, &key);
    fs::write(base.join("Jailfile"), "FROM scratch\nCOPY tree/ /\n").unwrap();
    ok(jbuild(root)
        .args(["build", "-q", "-t", "base:1", "--platform", "freebsd/amd64"])
        .arg(&base));
    (server, key)
}

/// The layer blobs of the OCI layout's (only) image, lowest first.
fn layer_blobs(layout: &Path) -> Vec<PathBuf> {
    let read = |p: PathBuf| -> serde_json::Value {
        serde_json::from_slice(&fs::read(p).unwrap()).unwrap()
    };
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let index = read(layout.join("index.json"));
    let manifest = read(blob(index["manifests"][0]["digest"].as_str().unwrap()));
    manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| blob(l["digest"].as_str().unwrap()))
        .collect()
}

/// Builds `base` (a `tree/` the caller made, `COPY`ed onto scratch) as
/// `base-NAME:1`, then `FROM` it `PKG --no-bootstrap other` as
/// `app-NAME:1`: that second build's output, its tag, and what the store
/// held before it.
fn pkg_other_on(
    root: &Path,
    work: &Path,
    name: &str,
    base: &Path,
) -> (std::process::Output, String, Vec<String>) {
    fs::write(base.join("Jailfile"), "FROM scratch\nCOPY tree/ /\n").unwrap();
    let tag = format!("base-{name}:1");
    ok(jbuild(root)
        .args(["build", "-q", "-t", &tag, "--platform", "freebsd/amd64"])
        .arg(base));
    let app = work.join("app").join(name);
    fs::create_dir_all(&app).unwrap();
    fs::write(
        app.join("Jailfile"),
        format!("FROM {tag}\nPKG --no-bootstrap other\n"),
    )
    .unwrap();
    let app_tag = format!("app-{name}:1");
    let before = stored(root);
    let out = run(jbuild(root).args(["build", "-q", "-t", &app_tag]).arg(&app));
    (out, app_tag, before)
}

/// What a state root holds that a failed build must leave as it was:
/// the store's index and blobs, and the snapshots (`dir` backend).
pub(super) fn stored(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                walk(&p, root, out);
            }
        }
    }
    let mut out = Vec::new();
    for top in ["store", "snapshots"] {
        assert!(root.join(top).is_dir(), "{}: no {top}", root.display());
        walk(&root.join(top), root, &mut out);
    }
    out
}

/// Builds the recipe in `dir` as `tag` with `--json` in `root`: its
/// stdout; the build must succeed.
pub(super) fn build_json(root: &Path, dir: &Path, tag: &str) -> String {
    let out = run(jbuild(root).args(["--json", "build", "-t", tag]).arg(dir));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The lines the steps said (`output` events) in a `--json` stdout.
pub(super) fn said(stdout: &str) -> String {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "output")
        .map(|e| e["line"].as_str().unwrap_or_default().to_string() + "\n")
        .collect()
}

/// `name-version` of each package a build's `--json` events say it
/// installed, in order.
pub(super) fn installed(events: &[serde_json::Value]) -> Vec<String> {
    packages(events, "installed")
}

/// `name-version` of each `package` event of a build's `--json` events
/// saying `what` (`fetched`, `installed`), in order.
pub(super) fn packages(events: &[serde_json::Value], what: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "package" && e["what"] == what)
        .map(|e| {
            format!(
                "{}-{}",
                e["name"].as_str().unwrap(),
                e["version"].as_str().unwrap()
            )
        })
        .collect()
}

pub(super) fn sqlite(db: &Path, query: &str) -> String {
    let out = Command::new("sqlite3").arg(db).arg(query).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The newest layer blob of the OCI layout's image, listed by GNU tar with
/// numeric owners.
pub(super) fn last_layer_listing(layout: &Path) -> String {
    let out = Command::new("tar")
        .arg("--numeric-owner")
        .arg("-tvf")
        .arg(last_layer(layout))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The newest layer blob of the OCI layout's image.
pub(super) fn last_layer(layout: &Path) -> PathBuf {
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let manifest: serde_json::Value = serde_json::from_slice(
        &fs::read(blob(index["manifests"][0]["digest"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    blob(layers.last().unwrap()["digest"].as_str().unwrap())
}

#[test]
fn pkg_installs_packages_on_linux_into_the_image_and_its_database() {
    let t = tempfile::tempdir().unwrap();
    let (server, base) = setup(t.path());
    let root = t.path().join("root");
    ok(jbuild(&root)
        .args(["build", "-q", "-t", "base:1", "--platform", "freebsd/amd64"])
        .arg(&base));
    let app = t.path().join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(app.join("Jailfile"), "FROM base:1\nPKG app\n").unwrap();
    let build = || build_json(&root, &app, "app:1");
    let stdout = build();
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        installed(&events),
        ["pkg-2.1.2", "libfoo-1.0", "app-2.1_3,1"],
        "{stdout}"
    );
    // The bars of the downloads and the extraction end at the bytes the
    // package events count.
    for (bar, what) in [("pkg-fetch", "fetched"), ("pkg-install", "installed")] {
        let bytes: u64 = events
            .iter()
            .filter(|e| e["event"] == "package" && e["what"] == what)
            .map(|e| e["bytes"].as_u64().unwrap())
            .sum();
        let ends: Vec<u64> = events
            .iter()
            .filter(|e| e["event"] == "transfer_done")
            .filter(|e| e["id"].as_str().unwrap().ends_with(&format!(":{bar}")))
            .map(|e| e["done"].as_u64().unwrap())
            .collect();
        assert_eq!(ends, [bytes], "{bar}: {stdout}");
    }
    let said = said(&stdout);
    assert!(said.contains("app-2.1_3,1: app says thanks"), "{said}");
    let asked: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        asked
            .iter()
            .any(|p| p.contains("FreeBSD") && p.ends_with("/All/app-2.1_3,1.pkg")),
        "{asked:?}"
    );

    let (layout, rootfs) = export_unpacked(&root, "app:1", t.path());
    assert_eq!(
        fs::read(rootfs.join("usr/local/etc/app.conf")).unwrap(),
        b"port = 80\n"
    );
    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(
            &db,
            "SELECT name, version, automatic FROM packages ORDER BY name"
        ),
        "app|2.1_3,1|0\nlibfoo|1.0|1\npkg|2.1.2|0\n"
    );
    assert_eq!(sqlite(&db, "PRAGMA integrity_check"), "ok\n");
    let listing = last_layer_listing(&layout);
    let data = listing
        .lines()
        .find(|l| l.ends_with("usr/local/share/app/data"))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(
        data.starts_with(&format!("-rw-r----- {UID}/{UID} ")),
        "{data}"
    );
    assert!(listing.contains("var/db/pkg/local.sqlite"), "{listing}");

    // The same catalogue: the step is reused.
    let again = build();
    assert!(again.contains("\"steps_run\":0"), "{again}");
}

#[test]
fn pkg_builds_every_platform_of_a_multi_platform_build_on_one_host() {
    let t = tempfile::tempdir().unwrap();
    let (server, base) = setup(t.path());
    let root = t.path().join("root");
    let both = ["--platform", "freebsd/amd64", "--platform", "freebsd/arm64"];
    ok(jbuild(&root)
        .args(["build", "-q", "--manifest", "base:1"])
        .args(both)
        .arg(&base));
    let app = t.path().join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(
        app.join("Jailfile"),
        "FROM base:1\nPKG --no-bootstrap other\n",
    )
    .unwrap();
    let out = run(jbuild(&root)
        .args(["build", "-q", "--manifest", "app:1"])
        .args(both)
        .arg(&app));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Each platform read its own ABI's repository (`${ABI}` from each
    // platform's userland); the package files, byte for byte the same in
    // both, were fetched once into the package cache (by checksum) and
    // installed into both.
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.path.replace("%3A", ":"))
        .collect();
    for abi in ["FreeBSD:14:amd64", "FreeBSD:14:aarch64"] {
        assert!(
            asked.contains(&format!("/{abi}/latest/data.pkg")),
            "{abi}: {asked:?}"
        );
    }
    let fetched = asked.iter().filter(|p| p.ends_with("/All/other-0.5.pkg"));
    assert_eq!(fetched.count(), 1, "{asked:?}");
}
