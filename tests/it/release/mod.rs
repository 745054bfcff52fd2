//! `FROM freebsd:<release>` end to end through the `jbuild` binary, against
//! a release directory served over HTTP on 127.0.0.1 by this test: a small
//! generated `base.txz` (directories, a setuid file, hard links, a
//! symlink, a file with a `SCHILY.fflags` record) and `lib32.txz`, with
//! their MANIFEST. Checks what the exported layer holds, that a cached
//! rebuild downloads nothing, that a tampered or hostile set is refused
//! with nothing stored, and (as root, with busybox-static) that a PKG step
//! shares the package cache, keeps caches out of layers and is re-run when
//! its repository's catalogue changes.

use crate::support::common;
use crate::support::layer as layer_support;
use crate::support::tar as tar_support;

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use common::*;
use layer_support::{RawEntry, RawTar};
use server::Server;
use sha2::{Digest as _, Sha256};

/// Download faults: a digest that fails at the end, a truncated set.
mod faults;

/// What the fetch phase fetches, counted: once a build and platform.
mod fetch_once;

/// PKG steps and pkgbase bases on a generated release.
mod pkg;

/// A RUN over a release on a Linux host.
mod run_refused;

/// The mirror's HTTP server.
mod server;

/// Sets and their MANIFEST: built, cached, tampered, hostile.
mod sets;

/// Mirrors and repositories on HTTPS, and silent ones.
mod tls;

const RELEASE: &str = "14.3-RELEASE";

fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// The tar of a tiny FreeBSD base: what matters for extraction.
fn base_tar(busybox: Option<&Path>) -> Vec<u8> {
    let mut t = RawTar::default()
        .dir(b"./")
        .dir(b"./bin/")
        .dir(b"./etc/")
        .dir(b"./lib/")
        .dir(b"./rescue/")
        .dir(b"./usr/")
        .dir(b"./usr/bin/")
        .dir(b"./usr/sbin/")
        .dir(b"./usr/src/")
        .dir(b"./var/")
        .dir(b"./var/cache/")
        .dir(b"./var/db/")
        .file(b"./bin/ls", b"ls program")
        .hard_link(b"./rescue/ls", b"./bin/ls")
        .hard_link(b"./rescue/cat", b"./bin/ls")
        .symlink(b"./sys", b"usr/src/sys")
        .file(b"./etc/motd", b"FreeBSD 14.3\n")
        .entry(RawEntry {
            name: b"./usr/bin/su",
            mode: 0o4555,
            content: b"su program",
            ..Default::default()
        })
        .pax(&[("SCHILY.fflags", b"schg")])
        .file(b"./lib/libc.so.7", b"libc");
    if let Some(bb) = busybox {
        let bytes = fs::read(bb).unwrap();
        t = t
            .entry(RawEntry {
                name: b"./bin/busybox",
                mode: 0o755,
                content: &bytes,
                ..Default::default()
            })
            .symlink(b"./bin/sh", b"busybox")
            .entry(RawEntry {
                name: b"./usr/sbin/pkg",
                mode: 0o755,
                content: FAKE_PKG,
                ..Default::default()
            });
    }
    t.finish()
}

/// Stands in for pkg(8) (which cannot run on Linux): records its
/// arguments and environment, and writes where pkg writes.
const FAKE_PKG: &[u8] = b"#!/bin/sh
bb=/bin/busybox
$bb mkdir -p /var/db/pkg/repos/FreeBSD /usr/local/sbin /var/cache/pkg
echo \"catalogue\" > /var/db/pkg/repos/FreeBSD/db
for p in \"$@\"; do echo \"$p\" >> /usr/local/sbin/installed; done
echo \"ASSUME_ALWAYS_YES=$ASSUME_ALWAYS_YES\" >> /usr/local/sbin/installed
$bb ls /usr/local/etc/pkg/repos >> /usr/local/sbin/installed 2>/dev/null
$bb ls /var/cache/pkg | $bb sed 's/^/cached: /' >> /usr/local/sbin/installed
echo package > /var/cache/pkg/$3.pkg
";

/// Writes a release directory: `<dir>/amd64/<RELEASE>/{MANIFEST,base.txz,lib32.txz}`.
fn make_release(dir: &Path, base: &[u8]) -> PathBuf {
    let rel = dir.join("amd64").join(RELEASE);
    fs::create_dir_all(&rel).unwrap();
    let lib32 = xz(&RawTar::default()
        .dir(b"./usr/")
        .dir(b"./usr/lib32/")
        .file(b"./usr/lib32/libc.so.7", b"lib32 libc")
        .finish());
    fs::write(rel.join("base.txz"), base).unwrap();
    fs::write(rel.join("lib32.txz"), &lib32).unwrap();
    fs::write(
        rel.join("MANIFEST"),
        format!(
            "base.txz\t{}\t9\tbase\t\"Base system (MANDATORY)\"\ton\nlib32.txz\t{}\t1\tlib32\t\"32-bit compatibility libraries\"\ton\n",
            sha256_hex(base),
            sha256_hex(&lib32)
        ),
    )
    .unwrap();
    rel
}

/// The generated release (no busybox) served from `t/mirror`, and an
/// empty configuration file for [`build_cmd`].
fn served_release(t: &Path) -> (Server, PathBuf) {
    let mirror = t.join("mirror");
    make_release(&mirror, &xz(&base_tar(None)));
    let server = Server::start(&mirror);
    let config = t.join("config.toml");
    fs::write(&config, "").unwrap();
    (server, config)
}

/// A configuration file in `t` whose trusted MANIFESTs directory is
/// empty (this machine's own copies are not read).
fn no_trusted_manifests(t: &Path) -> PathBuf {
    let config = t.join("config.toml");
    fs::write(
        &config,
        format!(
            "[freebsd]\nmanifests_dir = \"{}\"\n",
            t.join("no-manifests").display()
        ),
    )
    .unwrap();
    config
}

fn context(dir: &Path, jailfile: &str) -> PathBuf {
    let ctx = dir.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Jailfile"), jailfile).unwrap();
    ctx
}

/// `jbuild build` with the test's mirror, no host configuration, amd64.
fn build_cmd(root: &Path, server: &Server, ctx: &Path, config: &Path) -> std::process::Command {
    let mut c = jbuild(root);
    c.env("JBUILD_CONFIG", config)
        .args(["--json", "build", "--platform", "freebsd/amd64", "--mirror"])
        .arg(&server.url)
        .arg(ctx);
    c
}

fn result(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "result")
        .unwrap_or_else(|| panic!("no result in {stdout}"))
}

/// Every file under `dir`, with its size: what "nothing stored" compares.
fn listing(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.insert(rel, if m.is_file() { m.len() } else { 0 });
        }
    }
    out
}

/// A tar entry as the test looks at it.
#[derive(Debug)]
struct TarEntry {
    kind: u8,
    mode: u32,
    link: Option<String>,
    content: Vec<u8>,
}

/// The layers (in order) of the image `tag` exported to an OCI layout.
fn exported_layers(root: &Path, tag: &str, into: &Path) -> Vec<BTreeMap<String, TarEntry>> {
    ok(jbuild(root)
        .arg("export")
        .arg(tag)
        .arg(format!("oci:{}:t", into.display())));
    let blob = |d: &str| {
        into.join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(into.join("index.json")).unwrap()).unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(
        &fs::read(blob(index["manifests"][0]["digest"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let f = fs::File::open(blob(l["digest"].as_str().unwrap())).unwrap();
            let mut raw = Vec::new();
            flate2::read::GzDecoder::new(f)
                .read_to_end(&mut raw)
                .unwrap();
            let mut m = BTreeMap::new();
            for e in tar_support::list(&raw) {
                let path = String::from_utf8(e.path).unwrap();
                let link = (!e.link.is_empty()).then(|| String::from_utf8(e.link).unwrap());
                m.insert(
                    path.trim_end_matches('/').to_string(),
                    TarEntry {
                        kind: e.kind,
                        mode: e.mode,
                        link,
                        content: e.content,
                    },
                );
            }
            m
        })
        .collect()
}
