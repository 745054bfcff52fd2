//! `jbuild pull` streams: a layer is applied while its blob downloads (the
//! unpacker reads the store's file of the blob as it grows), layers still
//! apply in order, and a blob is checked whole before its layer is kept —
//! a blob cut short, one whose digest is wrong at its very end, and a
//! hostile entry in the middle of a layer each leave the state root as it
//! was. Against a real Distribution registry, through the fault proxy.

use crate::support::common::noise;
use crate::support::hostile::world::{
    assert_checks_clean, differences, pull, state, text, top_snapshot,
};
use crate::support::hostile::{upload, zstd, Layer, Tar, ZSTD};
use crate::support::registry::proxy::{Condition, Fault, FaultKind, Proxy};
use crate::support::registry::{self as registry_support, Registry};

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jbuild::digest::Digest;

/// The path part a proxy fault matches for the blob of `layer`.
fn blob_path(layer: &Layer) -> &'static str {
    Box::leak(format!("/blobs/{}", Digest::of(&layer.blob)).into_boxed_str())
}

/// A state root in `dir` with an empty configuration.
fn home(dir: &Path, name: &str) -> PathBuf {
    let home = dir.join(name);
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join("jbuild.toml"), "").unwrap();
    home
}

/// A zstd layer of `tar`, honestly described.
fn zstd_layer(tar: &[u8]) -> Layer {
    Layer::raw(zstd(tar), ZSTD, Digest::of(tar))
}

/// The registry holds back all but the first 64 KiB of the layer's blob
/// until `etc/motd`, the tar's first file, is on disk in the active
/// snapshot: the pull can only succeed if it extracts while it downloads.
#[test]
fn a_layer_is_applied_while_its_blob_downloads() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let big = noise(3 << 20, 16);
    let tar = Tar::new()
        .dir(b"etc/")
        .file(b"etc/motd", b"welcome\n")
        .file(b"big", &big)
        .finish();
    for (name, layer) in [("gzip", Layer::gzip(&tar)), ("zstd", zstd_layer(&tar))] {
        let repo = format!("stream/{name}");
        upload(
            &reg.host(),
            &repo,
            "1",
            std::slice::from_ref(&layer),
            std::slice::from_ref(&layer.diff_id),
        );
        let home = home(tmp.path(), name);
        let active = home.join("root/snapshots/dir/active");
        let started = Condition(Arc::new(move || {
            fs::read_dir(&active)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.path().join("fs/etc/motd").exists())
        }));
        let hold = FaultKind::HoldUntil(64 << 10, started);
        let proxy = Proxy::start(
            reg.port,
            vec![Fault::new("GET", blob_path(&layer), 1, hold)],
        );
        let out = pull(&home, &format!("127.0.0.1:{}/{repo}:1", proxy.port), &[]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let held = proxy.held();
        assert_eq!(held.len(), 1, "{name}: the blob was not held: {held:?}");
        assert!(
            held[0].1,
            "{name}: the extraction did not begin before the download ended"
        );
        let root = top_snapshot(&home, std::slice::from_ref(&layer.diff_id));
        assert_eq!(fs::read(root.join("etc/motd")).unwrap(), b"welcome\n");
        assert!(fs::read(root.join("big")).unwrap() == big, "{name}: big");
        assert_checks_clean(&home, name);
    }
}

/// Three layers, each undoing some of the one below, the first slowed down
/// so that the others have arrived before it has: the layers still apply
/// bottom first, and each `chain-` snapshot holds its own stack.
#[test]
fn layers_apply_in_order_whichever_arrives_first() {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let first = Layer::gzip(
        &Tar::new()
            .dir(b"etc/")
            .file(b"etc/motd", b"one\n")
            .file(b"etc/rc.conf", b"sshd_enable=YES\n")
            .file(b"base.bin", &noise(2 << 20, 1))
            .finish(),
    );
    let second = zstd_layer(
        &Tar::new()
            .file(b"etc/.wh.rc.conf", b"")
            .file(b"etc/motd", b"two\n")
            .finish(),
    );
    let third = Layer::tar(
        Tar::new()
            .file(b"etc/motd", b"three\n")
            .file(b"etc/hosts", b"::1\n")
            .finish(),
    );
    let layers = vec![first.clone(), second.clone(), third.clone()];
    let diff_ids: Vec<Digest> = layers.iter().map(|l| l.diff_id.clone()).collect();
    upload(&reg.host(), "stream/layers", "1", &layers, &diff_ids);
    let slow = FaultKind::Slow(Duration::from_millis(5));
    let proxy = Proxy::start(
        reg.port,
        vec![Fault::new("GET", blob_path(&first), 1, slow)],
    );
    let home = home(tmp.path(), "layers");
    let out = pull(
        &home,
        &format!("127.0.0.1:{}/stream/layers:1", proxy.port),
        &[],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(proxy.applied(), 1, "the first layer was not slowed");
    // Each layer is unpacked once, bottom first: one start line each (a
    // layer applied as it arrived is not applied again from the store).
    let started: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("unpacking layer") && !l.contains(" in "))
        .collect();
    let short = |l: &Layer| {
        let d = Digest::of(&l.blob).to_string();
        format!("unpacking layer {}", &d[..19])
    };
    assert_eq!(started.len(), layers.len(), "{err}");
    for (line, layer) in started.iter().zip(&layers) {
        assert!(
            line.starts_with(&short(layer)),
            "{line} is not {}\n{err}",
            short(layer)
        );
    }

    let read = |n: usize, path: &str| fs::read(top_snapshot(&home, &diff_ids[..n]).join(path)).ok();
    assert_eq!(read(1, "etc/motd").as_deref(), Some(&b"one\n"[..]));
    assert!(read(1, "etc/rc.conf").is_some());
    assert_eq!(read(2, "etc/motd").as_deref(), Some(&b"two\n"[..]));
    assert_eq!(read(2, "etc/rc.conf"), None, "the second layer's whiteout");
    assert_eq!(read(3, "etc/motd").as_deref(), Some(&b"three\n"[..]));
    assert_eq!(read(3, "etc/hosts").as_deref(), Some(&b"::1\n"[..]));
    assert_eq!(read(3, "etc/rc.conf"), None);
    assert!(read(3, "base.bin").is_some_and(|b| b.len() == 2 << 20));
    assert_checks_clean(&home, "layers");
}

/// The good image `stream/app:1` (two layers) is pulled into a state root;
/// then the registry serves `bad_top` as the second layer of `stream/app:1`
/// instead. Pulling it again through a proxy that does `fault` to every
/// answer with the bad layer must fail with exit `code`, saying every one
/// of `wanted`, and leave the root exactly as it was: the stored image of
/// that name untouched, no new blob, snapshot, name or leftover (but the
/// part of a blob that keeps breaking off, kept to be continued).
fn a_failed_pull_leaves_nothing(
    name: &str,
    bad_top: Layer,
    fault: Option<FaultKind>,
    code: i32,
    wanted: &[&str],
) {
    let reg = Registry::start();
    let tmp = tempfile::tempdir().unwrap();
    let base = Layer::gzip(
        &Tar::new()
            .dir(b"etc/")
            .file(b"etc/motd", b"welcome\n")
            .finish(),
    );
    let good_top = zstd_layer(&Tar::new().file(b"etc/hosts", b"::1\n").finish());
    let publish = |layers: &[Layer]| {
        let diff_ids: Vec<Digest> = layers.iter().map(|l| l.diff_id.clone()).collect();
        upload(&reg.host(), "stream/app", "1", layers, &diff_ids);
    };
    publish(&[base.clone(), good_top]);
    let home = home(tmp.path(), name);
    let direct = format!("{}/stream/app:1", reg.host());
    let out = pull(&home, &direct, &[]);
    assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    let images = || {
        registry_support::run_ok(
            registry_support::jbuild(&home).args(["images", "--digests-only"]),
            Duration::from_secs(30),
        )
    };
    let images_before = images();
    let before = state(&home);

    publish(&[base, bad_top.clone()]);
    // A blob that keeps breaking off at a byte: what came before it is
    // kept, for the next pull to continue (docs/storage.md).
    let kept = match &fault {
        Some(FaultKind::CutAt(at)) => Some(*at),
        _ => None,
    };
    let faults = fault.map(|kind| Fault::new("GET", blob_path(&bad_top), usize::MAX, kind));
    let proxy = Proxy::start(reg.port, faults.into_iter().collect());
    let out = pull(
        &home,
        &format!("127.0.0.1:{}/stream/app:1", proxy.port),
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{name}: {err}");
    for w in wanted {
        assert!(err.contains(w), "{name}: stderr lacks `{w}`:\n{err}");
    }
    // The base layer the two images share is now known to be at the
    // proxy's address too (`.jbuild/origins`, a hint for cross-repository
    // mounts): true of the registry, so it may change.
    let partial = format!(
        "store/.jbuild/tmp/partial-{}",
        Digest::of(&bad_top.blob).hex()
    );
    let changed: Vec<String> = differences(&before, &state(&home))
        .into_iter()
        .filter(|c| !c.starts_with("changed store/.jbuild/origins/"))
        .filter(|c| kept.is_none() || *c != format!("added {partial}"))
        .collect();
    assert!(
        changed.is_empty(),
        "{name}: the pull left {changed:?}\n{err}"
    );
    assert_eq!(images(), images_before, "{name}");
    if let Some(at) = kept {
        let len = fs::metadata(home.join("root").join(&partial)).map(|m| m.len());
        assert_eq!(len.ok(), Some(at), "{name}: the part kept");
        registry_support::run_ok(
            registry_support::jbuild(&home).arg("prune"),
            Duration::from_secs(60),
        );
    }
    assert_checks_clean(&home, name);
}

/// A big layer (so that its download is still going when the pull reads
/// its first bytes) of `etc/motd`, 3 MiB of noise, then `tail`.
fn big_layer(tail: Tar) -> Layer {
    let tar = Tar::new()
        .file(b"etc/motd", b"changed\n")
        .file(b"big", &noise(3 << 20, 9));
    let mut bytes = tar.finish();
    // `finish` ends the archive; the tail goes before the end marker.
    bytes.truncate(bytes.len() - 1024);
    bytes.extend_from_slice(&tail.finish());
    Layer::gzip(&bytes)
}

#[test]
fn a_blob_cut_short_leaves_only_the_part_it_had() {
    a_failed_pull_leaves_nothing(
        "cut",
        big_layer(Tar::new().file(b"etc/hosts", b"::2\n")),
        Some(FaultKind::CutAt(1 << 20)),
        2,
        &["kept failing at byte 1048576"],
    );
}

/// One byte flipped in the middle of the blob: the decoder stumbles on it
/// before the blob has arrived, but the pull says what the blob's digest,
/// checked at its end, says.
#[test]
fn a_blob_whose_digest_is_wrong_at_its_end_leaves_nothing() {
    a_failed_pull_leaves_nothing(
        "digest",
        big_layer(Tar::new().file(b"etc/hosts", b"::2\n")),
        Some(FaultKind::CorruptBody),
        1,
        &["does not match"],
    );
}

#[test]
fn a_hostile_entry_in_the_middle_of_a_layer_leaves_nothing() {
    let escape = [&b"../"[..].repeat(12), &b"tmp/jbuild-stream-pwned"[..]].concat();
    a_failed_pull_leaves_nothing(
        "hostile",
        big_layer(Tar::new().file(&escape, b"x").file(b"etc/hosts", b"::2\n")),
        None,
        1,
        &["cannot pull", "would land outside the root"],
    );
    assert!(!Path::new("/tmp/jbuild-stream-pwned").exists());
}
