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
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;
use layer_support::{RawEntry, RawTar};
use sha2::{Digest as _, Sha256};

/// What the fetch phase fetches, counted: once a build and platform.
mod fetch_once;

/// PKG steps and pkgbase bases on a generated release.
mod pkg;

/// A RUN over a release on a Linux host.
mod run_refused;

/// Mirrors and repositories on HTTPS, and silent ones.
mod tls;

const RELEASE: &str = "14.3-RELEASE";

/// A static-file HTTP/1.1 server on 127.0.0.1 (a free port) that records
/// every request line. Stopped and joined on drop.
struct Server {
    url: String,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, log2, stop2) = (dir.to_path_buf(), log.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => serve(s, &dir, &log2),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
        });
        Server {
            url,
            log,
            stop,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request per connection (`Connection: close`); GET and HEAD; an
/// ETag of the content's sha256.
fn serve(stream: TcpStream, dir: &Path, log: &Mutex<Vec<String>>) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    log.lock().unwrap().push(format!("{method} {path}"));
    let mut out = stream;
    let file = dir.join(path.trim_start_matches('/'));
    let body = if path.contains("..") {
        None
    } else {
        fs::read(&file).ok()
    };
    match body {
        Some(body) => {
            let etag = hex::encode(Sha256::digest(&body));
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: \"{etag}\"\r\nConnection: close\r\n\r\n",
                body.len()
            );
            if method == "GET" {
                send_body(&mut out, &file, &body);
            }
        }
        None => {
            let _ = write!(
                out,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    }
    let _ = out.flush();
}

/// Sends `body`, unless a file beside `file` says to misbehave:
/// `<file>.truncate`: only the first half, then the connection closes
/// (the length announced is the whole body's); `<file>.gate` (a directory
/// D, a tab, a path R): the first 64 KiB, then a pause until some
/// `D/*/fs/R` exists (at most 20 s), then the rest; whether it appeared
/// in time is written to `<file>.gate-result` (`seen` or `timeout`).
fn send_body(out: &mut TcpStream, file: &Path, body: &[u8]) {
    let beside = |ext: &str| PathBuf::from(format!("{}.{ext}", file.display()));
    if beside("truncate").exists() {
        let _ = out.write_all(&body[..body.len() / 2]);
        return;
    }
    let Ok(gate) = fs::read_to_string(beside("gate")) else {
        let _ = out.write_all(body);
        return;
    };
    let (dir, rel) = gate.trim_end().split_once('\t').unwrap();
    let first = body.len().min(64 << 10);
    let _ = out.write_all(&body[..first]);
    let _ = out.flush();
    let appeared = || {
        fs::read_dir(dir)
            .into_iter()
            .flatten()
            .any(|e| e.unwrap().path().join("fs").join(rel).exists())
    };
    let start = std::time::Instant::now();
    while !appeared() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = if appeared() { "seen" } else { "timeout" };
    fs::write(beside("gate-result"), seen).unwrap();
    let _ = out.write_all(&body[first..]);
}

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

#[test]
fn release_base_builds_exports_and_a_cached_rebuild_downloads_nothing() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    let sets = make_release(&mirror, &xz(&base_tar(None)));
    let server = Server::start(&mirror);
    let config = no_trusted_manifests(t.path());
    let root = t.path().join("root");
    let ctx = context(
        t.path(),
        "FROM freebsd:14.3\nSYSRC hostname=web\nCMD [\"/bin/sh\"]\n",
    );
    let build_out = |extra: &[&str]| {
        let mut c = build_cmd(&root, &server, &ctx, &config);
        c.args(["-t", "rel:1"]).args(extra);
        ok(&mut c)
    };
    let build = |extra: &[&str]| result(&build_out(extra));

    let out = build_out(&["--sets", "lib32"]);
    let first = result(&out);
    // The downloads were reported as transfers.
    for set in ["base.txz", "lib32.txz"] {
        assert!(
            out.lines()
                .any(|l| l.contains("transfer_start") && l.contains(&format!("downloading {set}"))),
            "{out}"
        );
    }
    // Each set's bytes were read, of its size, to the end: downloaded and
    // extracted in one pass, so the download is the extraction's progress.
    let events: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for set in ["base", "lib32"] {
        let id = format!("{}/amd64/{RELEASE}/{set}.txz", server.url);
        let size = fs::metadata(sets.join(format!("{set}.txz"))).unwrap().len();
        let start = events
            .iter()
            .find(|e| e["event"] == "transfer_start" && e["id"] == id.as_str())
            .unwrap_or_else(|| panic!("no extraction of {set} reported:\n{out}"));
        assert_eq!(start["total"], size, "{start}");
        let done = events
            .iter()
            .find(|e| e["event"] == "transfer_done" && e["id"] == id.as_str())
            .unwrap_or_else(|| panic!("the extraction of {set} never ended:\n{out}"));
        assert_eq!(done["done"], size, "{done}");
    }
    let mut asked = server.requests();
    asked.sort();
    assert_eq!(
        asked,
        [
            format!("GET /amd64/{RELEASE}/MANIFEST"),
            format!("GET /amd64/{RELEASE}/base.txz"),
            format!("GET /amd64/{RELEASE}/lib32.txz"),
        ]
    );
    assert_eq!(first["steps_run"], 1, "{first}");
    let cache = root.join(format!("cache/freebsd/amd64/{RELEASE}"));
    let cached: Vec<_> = listing(&cache).into_keys().collect();
    assert_eq!(cached, ["MANIFEST", "base.txz", "lib32.txz"]);

    let layers = exported_layers(&root, "rel:1", &t.path().join("oci"));
    assert_eq!(layers.len(), 2);
    let base = &layers[0];
    assert_eq!(base["bin/ls"].content, b"ls program");
    // Hard links stay hard links, to the first name in the layer.
    for name in ["rescue/cat", "rescue/ls"] {
        assert_eq!(base[name].kind, b'1', "{name}");
        assert_eq!(base[name].link.as_deref(), Some("bin/ls"), "{name}");
    }
    assert_eq!(base["sys"].kind, b'2');
    assert_eq!(base["sys"].link.as_deref(), Some("usr/src/sys"));
    assert_eq!(base["usr/bin/su"].mode & 0o7777, 0o4555);
    assert_eq!(base["lib/libc.so.7"].content, b"libc");
    assert_eq!(base["usr/lib32/libc.so.7"].content, b"lib32 libc");
    assert_eq!(base["etc/motd"].content, b"FreeBSD 14.3\n");
    let top = &layers[1];
    assert!(
        String::from_utf8_lossy(&top["etc/rc.conf"].content).contains("hostname=\"web\""),
        "{:?}",
        String::from_utf8_lossy(&top["etc/rc.conf"].content)
    );
    assert!(
        !top.contains_key("bin/ls"),
        "the step's layer holds only its change"
    );

    // The same build again: nothing is downloaded, nothing runs, same image.
    let before = server.requests().len();
    let second = build(&["--sets", "lib32"]);
    assert_eq!(server.requests().len(), before, "{:?}", server.requests());
    assert_eq!(second["steps_run"], 0);
    assert_eq!(second["manifest"], first["manifest"]);

    // Without lib32 the base is another one (its key lists its sets).
    let third = build(&[]);
    assert_eq!(server.requests().len(), before);
    assert_eq!(third["steps_run"], 1);
    assert_ne!(third["manifest"], first["manifest"]);
}

#[test]
fn a_tampered_set_is_refused_and_nothing_is_stored() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    let good = xz(&base_tar(None));
    let rel = make_release(&mirror, &good);
    // The mirror serves another base.txz than its MANIFEST lists.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n / 2] ^= 0xff;
    fs::write(rel.join("base.txz"), &bad).unwrap();
    let server = Server::start(&mirror);
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let root = t.path().join("root");
    // Something in the store and the snapshots first.
    let scratch = context(&t.path().join("s"), "FROM scratch\nSYSRC hostname=x\n");
    ok(jbuild(&root).args(["build", "-t", "s:1"]).arg(&scratch));
    let (store, snaps) = (
        listing(&root.join("store")),
        listing(&root.join("snapshots")),
    );

    let ctx = context(t.path(), "FROM freebsd:14.3-RELEASE\nSYSRC hostname=web\n");
    let out = run(build_cmd(&root, &server, &ctx, &config).args(["-t", "rel:1"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("does not match the release's MANIFEST")
            && stderr.contains(&sha256_hex(&good))
            && stderr.contains(&sha256_hex(&bad))
            && stderr.contains("Jailfile:1"),
        "{stderr}"
    );
    assert_eq!(listing(&root.join("store")), store);
    assert_eq!(listing(&root.join("snapshots")), snaps);
    let cache = root.join(format!("cache/freebsd/amd64/{RELEASE}"));
    assert_eq!(
        listing(&cache).into_keys().collect::<Vec<_>>(),
        Vec::<String>::new(),
        "no set, no MANIFEST, no temporary file is kept"
    );
}

/// The store's and the snapshots' files, after a first build from scratch
/// in `root` (so that there is something to compare).
fn stored_after_a_scratch_build(root: &Path, t: &Path) -> [BTreeMap<String, u64>; 2] {
    let scratch = context(&t.join("s"), "FROM scratch\nSYSRC hostname=x\n");
    ok(jbuild(root).args(["build", "-t", "s:1"]).arg(&scratch));
    [
        listing(&root.join("store")),
        listing(&root.join("snapshots")),
    ]
}

/// Builds `FROM freebsd:14.3`, which must fail with exit 1 leaving the
/// store and the snapshots as `stored` and the set cache empty; returns
/// the build's stderr.
fn fails_keeping_nothing(
    root: &Path,
    server: &Server,
    config: &Path,
    t: &Path,
    stored: [BTreeMap<String, u64>; 2],
) -> String {
    let ctx = context(t, "FROM freebsd:14.3\n");
    let out = run(&mut build_cmd(root, server, &ctx, config));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(listing(&root.join("store")), stored[0], "the store");
    assert_eq!(listing(&root.join("snapshots")), stored[1], "the snapshots");
    let cache = root.join(format!("cache/freebsd/amd64/{RELEASE}"));
    assert_eq!(listing(&cache), BTreeMap::new(), "nothing cached");
    stderr
}

/// The set is extracted as it arrives: the server holds back all but the
/// first 64 KiB until a file near the start of the tar is on disk in the
/// active snapshot. Its last bytes (valid xz stream padding: the tar
/// extracts whole) make its sha256 differ from the MANIFEST's, so once the
/// download ends the build stops, and nothing is committed or cached.
#[test]
fn a_set_extracts_while_it_downloads_and_a_mismatch_at_the_end_keeps_nothing() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    let big = noise(3 << 20, 7);
    let good = xz(&RawTar::default()
        .dir(b"./")
        .dir(b"./etc/")
        .file(b"./etc/motd", b"FreeBSD 14.3\n")
        .file(b"./big", &big)
        .finish());
    let rel = make_release(&mirror, &good);
    let mut padded = good.clone();
    padded.extend_from_slice(&[0; 4]);
    fs::write(rel.join("base.txz"), &padded).unwrap();
    let root = t.path().join("root");
    fs::write(
        rel.join("base.txz.gate"),
        format!("{}\tetc/motd", root.join("snapshots/dir/active").display()),
    )
    .unwrap();
    let server = Server::start(&mirror);
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let stored = stored_after_a_scratch_build(&root, t.path());

    let stderr = fails_keeping_nothing(&root, &server, &config, t.path(), stored);
    assert_eq!(
        fs::read_to_string(rel.join("base.txz.gate-result")).unwrap(),
        "seen",
        "the extraction began before the download ended"
    );
    assert!(
        stderr.contains("does not match the release's MANIFEST")
            && stderr.contains(&sha256_hex(&good))
            && stderr.contains(&sha256_hex(&padded)),
        "{stderr}"
    );
}

/// A download that breaks off half-way (the server closes the connection
/// short of the length it announced) is an error naming the transfer, not
/// a short tar that happens to extract; nothing is committed, and the set
/// cache holds only the part that arrived (`.partial-<sha256>`, which the
/// next build continues: docs/storage.md), never a set.
#[test]
fn a_truncated_download_commits_nothing_and_keeps_only_its_part() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    let set = xz(&RawTar::default()
        .dir(b"./")
        .file(b"./big", &noise(1 << 20, 7))
        .finish());
    let rel = make_release(&mirror, &set);
    fs::write(rel.join("base.txz.truncate"), "").unwrap();
    let server = Server::start(&mirror);
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let root = t.path().join("root");
    let stored = stored_after_a_scratch_build(&root, t.path());

    let ctx = context(t.path(), "FROM freebsd:14.3\n");
    let out = run(&mut build_cmd(&root, &server, &ctx, &config));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("base.txz") && stderr.contains("the transfer broke off"),
        "{stderr}"
    );
    assert_eq!(listing(&root.join("store")), stored[0], "the store");
    assert_eq!(listing(&root.join("snapshots")), stored[1], "the snapshots");
    let kept = listing(&root.join(format!("cache/freebsd/amd64/{RELEASE}")));
    let part = format!(".partial-{}", sha256_hex(&set));
    assert_eq!(
        kept.keys().collect::<Vec<_>>(),
        [&part],
        "only the part that arrived"
    );
    assert!(
        kept[&part] > 0 && kept[&part] < set.len() as u64,
        "{kept:?}: a part, not the set of {} bytes",
        set.len()
    );
}

#[test]
fn a_trusted_local_manifest_that_disagrees_stops_the_build() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    make_release(&mirror, &xz(&base_tar(None)));
    let server = Server::start(&mirror);
    let trusted = t.path().join("manifests");
    let trusted_rel = trusted.join("amd64").join(RELEASE);
    fs::create_dir_all(&trusted_rel).unwrap();
    let other = "0".repeat(64);
    fs::write(
        trusted_rel.join("MANIFEST"),
        format!("base.txz\t{other}\t9\tbase\t\"Base system (MANDATORY)\"\ton\n"),
    )
    .unwrap();
    let config = t.path().join("config.toml");
    fs::write(
        &config,
        format!("[freebsd]\nmanifests_dir = \"{}\"\n", trusted.display()),
    )
    .unwrap();
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:14.3\n");
    let out = run(&mut build_cmd(&root, &server, &ctx, &config));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("does not match")
            && stderr.contains(&other)
            && stderr.contains("manifests/amd64"),
        "{stderr}"
    );
    // Only the MANIFEST was asked for: no set was downloaded.
    assert_eq!(
        server.requests(),
        [format!("GET /amd64/{RELEASE}/MANIFEST")]
    );

    // With the same sha256 the build goes on.
    let real = fs::read_to_string(mirror.join("amd64").join(RELEASE).join("MANIFEST")).unwrap();
    fs::write(trusted_rel.join("MANIFEST"), real).unwrap();
    ok(&mut build_cmd(&root, &server, &ctx, &config));
}

#[test]
fn a_hostile_set_is_refused_and_nothing_escapes() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    // Consistent with its MANIFEST, but climbing out of the root, in the
    // middle of the stream: after 2 MiB already extracted.
    let hostile = xz(&RawTar::default()
        .dir(b"./")
        .file(b"./etc/ok", b"fine")
        .file(b"./big", &noise(2 << 20, 7))
        .file(
            b"../../../../../../../../../../tmp/jbuild-escaped",
            b"escaped",
        )
        .finish());
    make_release(&mirror, &hostile);
    let server = Server::start(&mirror);
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:14.3\n");
    let out = run(&mut build_cmd(&root, &server, &ctx, &config));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("base.txz") && stderr.contains("jbuild-escaped"),
        "{stderr}"
    );
    assert!(!Path::new("/tmp/jbuild-escaped").exists());
    // No snapshot was committed, and the failed one was removed.
    let snaps: Vec<String> = listing(&root.join("snapshots/dir"))
        .into_keys()
        .filter(|k| !k.contains('/'))
        .collect();
    assert!(
        snaps
            .iter()
            .all(|s| !s.starts_with("step-") && !s.starts_with("active-")),
        "{snaps:?}"
    );
}

/// The base layer a bootstrap exports (as the set is extracted, with every
/// file's writeback started early) is byte for byte the layer a later
/// export of the same committed snapshot gives: the zstd blob the build
/// stored is what exporting its snapshot again makes, and `check --deep`
/// (which diffs every built snapshot again) finds nothing.
#[test]
fn the_bootstrap_stores_the_blob_a_re_export_of_its_snapshot_makes() {
    use jbuild::diff::Differ;
    use jbuild::snapshot::Snapshotter;
    let t = tempfile::tempdir().unwrap();
    let (server, config) = served_release(t.path());
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:14.3\n");
    let mut c = build_cmd(&root, &server, &ctx, &config);
    let built = result(&ok(c.args(["-t", "rel:1", "--compression", "zstd"])));

    let layout = t.path().join("oci");
    ok(jbuild(&root)
        .args(["push", "rel:1"])
        .arg(format!("oci:{}", layout.display())));
    let manifest = built["manifest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("blobs/sha256").join(manifest)).unwrap())
            .unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest:#}");
    let stored = layers[0]["digest"].as_str().unwrap();

    let sn = jbuild::snapshot::dir::DirSnapshotter::new(root.join("snapshots/dir")).unwrap();
    let base: Vec<_> = sn
        .list()
        .unwrap()
        .into_iter()
        .filter(|i| i.kind == jbuild::snapshot::Kind::Committed)
        .collect();
    assert_eq!(base.len(), 1, "{base:?}");
    let tree = sn.view(&base[0].name).unwrap();
    let clamp: u64 = base[0].labels["jbuild:mtimeclamp"].parse().unwrap();
    let changes = jbuild::diff::walk::TreeWalkDiffer::new()
        .changes(
            None,
            jbuild::diff::SnapshotRef {
                name: &base[0].name,
                root: &tree,
            },
        )
        .unwrap();
    let (again, _) = jbuild::layer::export(
        &tree,
        &changes,
        &jbuild::layer::TarOptions { clamp_mtime: clamp },
        jbuild::layer::Compression::Zstd,
        std::io::sink(),
    )
    .unwrap();
    assert_eq!(
        again.digest.to_string(),
        stored,
        "the blob a re-export makes"
    );

    let checked = ok(jbuild(&root).args(["check", "--deep"]));
    assert!(checked.contains("1 layers diffed again"), "{checked}");
    assert!(!checked.contains("damaged"), "{checked}");
}
