//! `FROM freebsd:<release>` end to end through the `jbuild` binary, against
//! a release directory served over HTTP on 127.0.0.1 by this test: a small
//! generated `base.txz` (directories, a setuid file, hard links, a
//! symlink, a file with a `SCHILY.fflags` record) and `lib32.txz`, with
//! their MANIFEST. Checks what the exported layer holds, that a cached
//! rebuild downloads nothing, that a tampered or hostile set is refused
//! with nothing stored, and (as root, with busybox-static) that a PKG step
//! shares the package cache, keeps caches out of layers and is re-run when
//! its repository's catalogue changes.

mod common;
mod layer_support;
mod tar_support;

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
    let config = t.path().join("config.toml");
    fs::write(
        &config,
        format!(
            "[freebsd]\nmanifests_dir = \"{}\"\n",
            t.path().join("no-manifests").display()
        ),
    )
    .unwrap();
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
/// a short tar that happens to extract; nothing is committed or cached.
#[test]
fn a_truncated_download_keeps_nothing() {
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    let rel = make_release(
        &mirror,
        &xz(&RawTar::default()
            .dir(b"./")
            .file(b"./big", &noise(1 << 20, 7))
            .finish()),
    );
    fs::write(rel.join("base.txz.truncate"), "").unwrap();
    let server = Server::start(&mirror);
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let root = t.path().join("root");
    let stored = stored_after_a_scratch_build(&root, t.path());

    let stderr = fails_keeping_nothing(&root, &server, &config, t.path(), stored);
    assert!(
        stderr.contains("base.txz") && stderr.contains("the transfer broke off"),
        "{stderr}"
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

#[test]
fn pkg_shares_its_cache_keeps_caches_out_of_layers_and_follows_the_catalogue() {
    let (true, Some(bb)) = (is_root(), static_busybox()) else {
        eprintln!("skipping: needs root and /bin/busybox from busybox-static");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    make_release(&mirror, &xz(&base_tar(Some(&bb))));
    let server = Server::start(&mirror);
    // A local repository (file://) whose catalogue the key follows.
    let repo = t.path().join("repo/FreeBSD:14:amd64");
    fs::create_dir_all(&repo).unwrap();
    fs::write(repo.join("packagesite.pkg"), "catalogue v1").unwrap();
    let repos = t.path().join("repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(
        repos.join("local.conf"),
        format!(
            "FreeBSD: {{ enabled: no }}\nlocal: {{ url: \"file://{}/repo/${{ABI}}\" }}\n",
            t.path().display()
        ),
    )
    .unwrap();
    let config = t.path().join("config.toml");
    fs::write(
        &config,
        format!("[pkg]\nrepos_dir = \"{}\"\n", repos.display()),
    )
    .unwrap();
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:14.3\nPKG nginx\n");
    let build = || {
        let mut c = build_cmd(&root, &server, &ctx, &config);
        c.args(["-t", "web:1"]);
        result(&ok(&mut c))
    };

    let first = build();
    assert_eq!(first["steps_run"], 1, "{first}");
    // The package landed in the shared cache on the host (the cache mount
    // of /var/cache/pkg, as `RUN --mount=type=cache,target=/var/cache/pkg`
    // would have it)...
    assert_eq!(
        fs::read_to_string(root.join("cache/mounts/%2Fvar%2Fcache%2Fpkg/nginx.pkg")).unwrap(),
        "package\n"
    );
    let layers = exported_layers(&root, "web:1", &t.path().join("oci1"));
    let pkg_layer = &layers[1];
    let installed =
        String::from_utf8_lossy(&pkg_layer["usr/local/sbin/installed"].content).to_string();
    assert!(
        installed.starts_with("install\n-y\nnginx\nASSUME_ALWAYS_YES=yes\nlocal.conf\n"),
        "{installed}"
    );
    // ... and neither it nor pkg's catalogue copy is in the layer; the
    // repository override was visible to the step only.
    for (path, _) in pkg_layer.iter() {
        assert!(
            !path.starts_with("var/cache/pkg/") && !path.starts_with("var/db/pkg/repos/"),
            "{path} reached the layer"
        );
        assert!(
            !path.starts_with("usr/local/etc/pkg"),
            "{path} reached the layer"
        );
    }

    // Same catalogue: cached. New catalogue: the PKG step runs again, and
    // finds the package from the first run in the shared cache.
    assert_eq!(build()["steps_run"], 0);
    fs::write(repo.join("packagesite.pkg"), "catalogue v2").unwrap();
    let third = build();
    assert_eq!(third["steps_run"], 1, "{third}");
    assert_ne!(third["manifest"], first["manifest"]);
    let layers = exported_layers(&root, "web:1", &t.path().join("oci2"));
    let installed =
        String::from_utf8_lossy(&layers[1]["usr/local/sbin/installed"].content).to_string();
    assert!(installed.contains("cached: nginx.pkg"), "{installed}");

    // Offline, the catalogue is not consulted: a newer one changes nothing.
    let mut c = build_cmd(&root, &server, &ctx, &config);
    let offline1 = result(&ok(c.args(["--pkg-offline", "-t", "web:off"])));
    fs::write(repo.join("packagesite.pkg"), "catalogue v3").unwrap();
    let mut c = build_cmd(&root, &server, &ctx, &config);
    let offline2 = result(&ok(c.args(["--pkg-offline", "-t", "web:off"])));
    assert_eq!(offline1["steps_run"], 1);
    assert_eq!(offline2["steps_run"], 0);
}

#[test]
fn jail_parameters_that_weaken_the_build_jail_need_consent() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let build = |ctx: &Path, extra: &[&str], config: &Path| {
        let mut c = jbuild(&root);
        c.env("JBUILD_CONFIG", config)
            .arg("build")
            .args(extra)
            .arg(ctx);
        run(&mut c)
    };
    // Parameters only stored for the runtime jail need no consent, and the
    // ones that act on the host are simply not used while building.
    let stored = context(
        &t.path().join("a"),
        "FROM scratch\nSYSRC a=b\nJAIL allow.raw_sockets=1 devfs_ruleset=0 exec.start=\"/bin/sh /etc/rc\" host.hostname=web\n",
    );
    let out = build(&stored, &[], &config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A RUN step after them would run in a weakened jail: refused before
    // anything runs, naming the JAIL line.
    let ctx = context(
        &t.path().join("b"),
        "FROM scratch\nJAIL allow.set_hostname=1 securelevel=3 exec.start=/bin/sh\nJAIL allow.raw_sockets=1 devfs_ruleset=0\nRUN [\"/bin/true\"]\n",
    );
    let out = build(&ctx, &[], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Jailfile:3")
            && stderr.contains("allow.raw_sockets=1")
            && stderr.contains("line 4")
            && stderr.contains("--allow-jail-param allow.raw_sockets"),
        "{stderr}"
    );
    // One consent is not two.
    let out = build(&ctx, &["--allow-jail-param", "allow.raw_sockets"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("devfs_ruleset=0"),
        "{stderr}"
    );
    // With both, the check passes and the step itself runs (and, in this
    // empty root, finds no /bin/true).
    let both = [
        "--allow-jail-param",
        "allow.raw_sockets",
        "--allow-jail-param",
        "devfs_ruleset",
    ];
    let out = build(&ctx, &both, &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("--allow-jail-param"), "{stderr}");
    // The configuration file can give the consent as well.
    fs::write(
        &config,
        "[freebsd]\nallow_jail_params = [\"allow.raw_sockets\", \"devfs_ruleset\"]\n",
    )
    .unwrap();
    let out = build(&ctx, &[], &config);
    let stderr2 = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr2.contains("--allow-jail-param"), "{stderr2}");
    assert_eq!(out.status.code(), Some(1));
}

/// PKG keys follow an HTTP repository's catalogue through HEAD requests
/// (nothing is downloaded): a new `packagesite.pkg` (a new ETag) is a new
/// key; `packagesite.txz` is asked when there is no `.pkg`.
#[test]
fn an_http_repository_is_asked_for_its_catalogue_with_head_only() {
    let t = tempfile::tempdir().unwrap();
    let served = t.path().join("www");
    let repo = served.join("repo/FreeBSD:14:amd64/latest");
    fs::create_dir_all(&repo).unwrap();
    fs::write(repo.join("packagesite.pkg"), "catalogue 1").unwrap();
    let server = Server::start(&served);
    let repos = t.path().join("repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(
        repos.join("mine.conf"),
        format!(
            "FreeBSD: {{ enabled: no }}\nmine: {{ url: \"pkg+{}/repo/${{ABI}}/latest\", mirror_type: \"none\" }}\n",
            server.url
        ),
    )
    .unwrap();
    let env = jbuild::engine::FreeBsdEnv {
        pkg_repos_dir: Some(repos),
        ..Default::default()
    };
    let abi = Some("FreeBSD:14:amd64");
    let first = env.pkg_repositories(abi).unwrap();
    assert_eq!(first, env.pkg_repositories(abi).unwrap());
    fs::write(repo.join("packagesite.pkg"), "catalogue 2").unwrap();
    let second = env.pkg_repositories(abi).unwrap();
    assert_ne!(first, second);
    fs::remove_file(repo.join("packagesite.pkg")).unwrap();
    fs::write(repo.join("packagesite.txz"), "old style").unwrap();
    let third = env.pkg_repositories(abi).unwrap();
    assert_ne!(second, third);
    fs::remove_file(repo.join("packagesite.txz")).unwrap();
    let e = env.pkg_repositories(abi).unwrap_err().to_string();
    assert!(e.contains("--pkg-offline"), "{e}");
    let asked = server.requests();
    assert!(
        asked
            .iter()
            .all(|r| r.starts_with("HEAD /repo/FreeBSD:14:amd64/latest/packagesite.")),
        "{asked:?}"
    );
    // 1 + 1 + 1, then .pkg and .txz twice.
    assert_eq!(asked.len(), 7, "{asked:?}");
}

/// Stands in for pkg(8) on the host (the real one runs on FreeBSD only):
/// logs its command line, the repository configuration and the keys the
/// root holds when it runs, and installs into `--rootdir` what pkg would
/// leave there. A file `fail` beside it makes it fail as pkg does on a
/// bad signature.
const STAND_IN_PKG: &str = r#"#!/bin/sh
here=$(dirname "$0")
log="$here/pkg.log"
root="$2"
echo "argv: $*" >> "$log"
echo "conf: $(tr '\n' ' ' < "$4/FreeBSD-base.conf")" >> "$log"
for k in "$root"/usr/share/keys/*/trusted/*; do echo "key: ${k#$root}" >> "$log"; done
[ -d "$root/usr/share/keys/pkgbase-15/revoked" ] || [ -d "$root/usr/share/keys/pkgbase-16/revoked" ] || echo "no revoked dir" >> "$log"
if [ -e "$here/fail" ]; then
  echo "pkg: No trusted public keys found" >&2
  exit 1
fi
case "${11}" in
update)
  mkdir -p "$root/var/db/pkg/repos/FreeBSD-base"
  echo catalogue > "$root/var/db/pkg/repos/FreeBSD-base/db"
  echo "Updating FreeBSD-base repository catalogue..."
  ;;
install)
  mkdir -p "$root/bin" "$root/var/cache/pkg" "$root/var/db/pkg"
  echo "$6" > "$root/bin/freebsd-version"
  echo package > "$root/var/cache/pkg/FreeBSD-runtime.pkg"
  echo db > "$root/var/db/pkg/local.sqlite"
  shift 14
  echo "Installing $*"
  ;;
esac
"#;

#[test]
fn a_pkgbase_base_is_installed_by_pkg_and_follows_the_catalogue() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let www = t.path().join("www");
    let repo15 = www.join("FreeBSD:15:amd64/base_release_0");
    fs::create_dir_all(&repo15).unwrap();
    fs::write(repo15.join("packagesite.pkg"), "catalogue 1").unwrap();
    let server = Server::start(&www);
    let bin = t.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let pkg = bin.join("pkg");
    fs::write(&pkg, STAND_IN_PKG).unwrap();
    fs::set_permissions(&pkg, fs::Permissions::from_mode(0o755)).unwrap();
    let keys = t.path().join("keys");
    fs::create_dir_all(&keys).unwrap();
    let settings = |pkg_line: &str| {
        format!(
            "[freebsd]\nmanifests_dir = \"{}\"\npkgbase_url = \"{}/${{ABI}}/base_release_${{VERSION_MINOR}}\"\npkg_keys_dir = \"{}\"\n{pkg_line}",
            t.path().join("no-manifests").display(),
            server.url,
            keys.display()
        )
    };
    let config = t.path().join("config.toml");
    fs::write(&config, settings(&format!("pkg = \"{}\"\n", pkg.display()))).unwrap();
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:15.0-RELEASE\nSYSRC hostname=web\n");
    let build = |extra: &[&str]| {
        let mut c = build_cmd(&root, &server, &ctx, &config);
        c.args(["-t", "pb:1"]).args(extra);
        c
    };
    let log = || fs::read_to_string(bin.join("pkg.log")).unwrap_or_default();

    let out = ok(&mut build(&["--freebsd-base", "pkgbase"]));
    let first = result(&out);
    assert_eq!(first["steps_run"], 1, "{first}");
    // pkg's output is the FROM step's output.
    assert!(
        out.lines()
            .any(|l| l.contains("Installing FreeBSD-set-minimal-jail")),
        "{out}"
    );
    // Planning asked the repository for its catalogue's identity, by HEAD
    // only; nothing of the release mirror was needed.
    assert_eq!(
        server.requests(),
        ["HEAD /FreeBSD:15:amd64/base_release_0/packagesite.pkg"]
    );
    let logged = log();
    let argv: Vec<&str> = logged
        .lines()
        .filter_map(|l| l.strip_prefix("argv: "))
        .collect();
    assert_eq!(argv.len(), 2, "{logged}");
    let words: Vec<Vec<&str>> = argv.iter().map(|a| a.split(' ').collect()).collect();
    // pkg(8): global options (--rootdir, --repo-conf-dir, -o) before the
    // command, as Bastille's bootstrap and FreeBSD's make-oci-image.sh
    // give them; the catalogue first, then the set.
    for w in &words {
        assert_eq!(w[0], "--rootdir", "{logged}");
        assert_eq!(w[2], "--repo-conf-dir", "{logged}");
        assert_eq!(
            w[4..10],
            [
                "-o",
                "ABI=FreeBSD:15:amd64",
                "-o",
                "IGNORE_OSVERSION=yes",
                "-o",
                "ASSUME_ALWAYS_YES=yes"
            ]
        );
        assert!(Path::new(w[1]).starts_with(&root), "the root is a snapshot");
        assert!(
            !Path::new(w[3]).starts_with(&root),
            "the configuration is not in it"
        );
    }
    assert_eq!(words[0][10..], ["update", "-r", "FreeBSD-base"]);
    assert_eq!(
        words[1][10..],
        [
            "install",
            "-y",
            "-r",
            "FreeBSD-base",
            "FreeBSD-set-minimal-jail"
        ]
    );
    // The repository's signatures are checked against the keys, which
    // were in the root before pkg first ran.
    let conf = logged.lines().find(|l| l.starts_with("conf: ")).unwrap();
    assert!(
        conf.contains(&format!(
            "url: \"{}/FreeBSD:15:amd64/base_release_0\"",
            server.url
        )) && conf.contains("signature_type: \"fingerprints\"")
            && conf.contains("fingerprints: \"/usr/share/keys/pkgbase-15\""),
        "{conf}"
    );
    let seen: Vec<&str> = logged.lines().filter(|l| l.starts_with("key: ")).collect();
    assert_eq!(
        seen,
        [
            "key: /usr/share/keys/pkgbase-15/trusted/awskms-15",
            "key: /usr/share/keys/pkgbase-15/trusted/backup-signing-15"
        ]
        .repeat(2)
    );
    assert!(!logged.contains("no revoked dir"), "{logged}");

    let layers = exported_layers(&root, "pb:1", &t.path().join("oci"));
    let base = &layers[0];
    assert_eq!(
        base["bin/freebsd-version"].content,
        b"ABI=FreeBSD:15:amd64\n"
    );
    assert!(
        String::from_utf8_lossy(&base["usr/share/keys/pkgbase-15/trusted/awskms-15"].content)
            .contains("1d7b45d20fa8d6ed26f9b4a13ac81a6b5df860b9fe644d07b87e92298ba72595")
    );
    assert_eq!(base["var/db/pkg/local.sqlite"].content, b"db\n");
    // The catalogue and the downloaded packages stay out of the layer.
    for gone in [
        "var/cache/pkg/FreeBSD-runtime.pkg",
        "var/db/pkg/repos/FreeBSD-base/db",
    ] {
        assert!(!base.contains_key(gone), "{gone} in the base layer");
    }
    let history = base_history(&root, "pb:1");
    assert!(
        history.contains("pkgbase FreeBSD-set-minimal-jail") && history.contains("etag"),
        "{history}"
    );

    // Again, the catalogue unchanged: pkg does not run, the same image.
    let second = result(&ok(&mut build(&["--freebsd-base", "pkgbase"])));
    assert_eq!(log().lines().filter(|l| l.starts_with("argv")).count(), 2);
    assert_eq!(second["steps_run"], 0);
    assert_eq!(second["manifest"], first["manifest"]);

    // A new catalogue: the base is installed again, and what follows it.
    fs::write(repo15.join("packagesite.pkg"), "catalogue 2").unwrap();
    let third = result(&ok(&mut build(&["--freebsd-base", "pkgbase"])));
    assert_eq!(log().lines().filter(|l| l.starts_with("argv")).count(), 4);
    assert_eq!(third["steps_run"], 1);
    assert_ne!(third["manifest"], first["manifest"]);

    // pkg failing (here: a signature it cannot check) stops the build,
    // naming the command and what pkg said; nothing is committed.
    fs::write(repo15.join("packagesite.pkg"), "catalogue 3").unwrap();
    fs::write(bin.join("fail"), "").unwrap();
    let out = run(&mut build(&["--freebsd-base", "pkgbase"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("update -r FreeBSD-base") && err.contains("No trusted public keys found"),
        "{err}"
    );
    fs::remove_file(bin.join("fail")).unwrap();
    let fourth = result(&ok(&mut build(&["--freebsd-base", "pkgbase"])));
    assert_eq!(fourth["steps_run"], 1);

    // 16.0 is made from pkgbase without being asked, with the host's keys.
    let repo16 = www.join("FreeBSD:16:amd64/base_release_0");
    fs::create_dir_all(&repo16).unwrap();
    fs::write(repo16.join("packagesite.pkg"), "catalogue 16").unwrap();
    fs::create_dir_all(keys.join("pkgbase-16/trusted")).unwrap();
    fs::write(keys.join("pkgbase-16/trusted/k16"), "fingerprint: \"16\"\n").unwrap();
    let ctx16 = t.path().join("ctx16");
    fs::create_dir_all(&ctx16).unwrap();
    fs::write(ctx16.join("Jailfile"), "FROM freebsd:16.0-RELEASE\n").unwrap();
    let mut c = build_cmd(&root, &server, &ctx16, &config);
    ok(c.args(["-t", "pb:16"]));
    let logged = log();
    assert!(logged.contains("ABI=FreeBSD:16:amd64"), "{logged}");
    assert!(
        logged.contains("key: /usr/share/keys/pkgbase-16/trusted/k16"),
        "{logged}"
    );

    // A host that cannot run pkg(8) says so, and what to use instead,
    // before anything is fetched.
    fs::write(&config, settings("")).unwrap();
    fs::write(repo15.join("packagesite.pkg"), "catalogue 4").unwrap();
    let before = server.requests().len();
    let out = run(&mut build(&["--freebsd-base", "pkgbase"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("needs pkg(8) on the host")
            && err.contains("--freebsd-base=sets")
            && err.contains("build on FreeBSD"),
        "{err}"
    );
    assert_eq!(server.requests().len(), before, "{:?}", server.requests());
}

/// The `created_by` of the image's first history entry.
fn base_history(root: &Path, tag: &str) -> String {
    let out = ok(jbuild(root).args(["inspect", tag]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v.pointer("/config/history/0/created_by")
        .and_then(|h| h.as_str())
        .unwrap_or_else(|| panic!("no history in {out}"))
        .to_string()
}
