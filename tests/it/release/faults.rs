//! Download faults: a set extracted while it downloads whose digest
//! fails at the end, and a truncated download, commit nothing (only the
//! part of a set is kept, for the next build to continue). TLS faults are
//! in `tls.rs`.

use super::*;

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
