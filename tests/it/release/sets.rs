//! Sets and their MANIFEST: a release base built, exported and rebuilt
//! from the cache; a tampered set, a trusted local MANIFEST that
//! disagrees and a hostile set refused with nothing stored; the blob the
//! bootstrap stores is the one a re-export of its snapshot makes.

use super::*;

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
    let stderr = refused(&root, &server, &ctx, &config);
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
    let stderr = refused(&root, &server, &ctx, &config);
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

/// The build of `ctx` fails; its standard error.
fn refused(root: &Path, server: &Server, ctx: &Path, config: &Path) -> String {
    let out = run(&mut build_cmd(root, server, ctx, config));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    stderr
}
