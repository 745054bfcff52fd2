//! FreeBSD file flags set by the package installer on Linux reach the
//! committed layer, as they would on FreeBSD: the installer sets them
//! through the step's `SnapshotFlags` (a table the snapshot keeps in its
//! labels on a host without chflags(2)), the snapshot is committed and
//! exported by `image::export_layers`, and the layer is read by `bsdtar`
//! (its mtree form names each entry's `flags=`) and GNU tar. A second step
//! over the first changes a flagged file: its entry still carries the
//! flags (a file keeps them in every layer above). The same two steps on
//! `dir`, `overlay` and zfs-fuse give the same diff IDs.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use jbuild::image::{export_layers, Layer};
use jbuild::layer::Compression;
use jbuild::pkg::extract::{install, NoHooks, Options, PackageFile};
use jbuild::report::SilentReporter;
use jbuild::snapshot::fflags::SnapshotFlags;
use jbuild::snapshot::{label, Labels, Snapshotter};
use jbuild::store::Store;
use serde_json::json;

use crate::support::lane::{self, Lane};
use crate::support::layer::bsdtar_flags;
use crate::support::pkgrepo::pkgfile::{self, dir, file, Item};

const EPOCH: u64 = 1_700_000_000;

fn flagged(path: &str, flags: &str, content: &[u8]) -> Item {
    Item::File {
        path: path.into(),
        mode: 0o444,
        uname: "root".into(),
        gname: "wheel".into(),
        content: content.to_vec(),
        flags: Some(flags.into()),
        config: false,
    }
}

/// A package whose files carry flags (and one name more of a flagged
/// file, and one file of more than a chunk's worth of flagged names).
fn package(t: &Path) -> PathBuf {
    let mut items = vec![
        dir("/usr/local/lib", 0o755, "root", "wheel"),
        flagged("/usr/local/lib/libapp.so.1", "schg", b"\x7fELF not really"),
        Item::HardLink {
            path: "/usr/local/lib/libapp.so".into(),
            target: "/usr/local/lib/libapp.so.1".into(),
        },
        flagged("/usr/local/etc/app.state", "nodump,hidden", b"state 1\n"),
        file("/usr/local/bin/app", 0o755, b"#!/bin/sh\n"),
    ];
    // Enough flagged names that the table needs several labels (a ZFS
    // user property holds one).
    for i in 0..40 {
        items.push(flagged(
            &format!("/usr/local/share/app/a-flagged-file-with-a-long-name-{i:02}"),
            "uchg",
            b"x",
        ));
    }
    let contents = pkgfile::Contents {
        items,
        mtime: EPOCH,
        ..pkgfile::Contents::default()
    };
    let path = t.join("app-1.0.pkg");
    pkgfile::write(
        &path,
        &json!({"name": "app", "origin": "test/app", "version": "1.0",
                "prefix": "/usr/local", "abi": "FreeBSD:14:amd64"}),
        &contents,
    );
    path
}

/// Commits the active `key` as `name`, with the step's flags kept.
fn commit(sn: &dyn Snapshotter, name: &str, key: &str, flags: &SnapshotFlags) {
    let mut labels: Labels = [(label::KEY.to_string(), name.to_string())].into();
    labels.extend(flags.labels().unwrap());
    sn.commit(name, key, &labels).unwrap();
}

/// A base, a step installing the package, and a step changing a flagged
/// file, on `sn`; their layers exported into a store under `t`. Returns
/// the diff IDs and the two steps' layer tars.
fn build(sn: &dyn Snapshotter, t: &Path, pkg: &Path) -> (Vec<String>, PathBuf, PathBuf) {
    let root = sn.prepare("active-base", None).unwrap();
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(
        root.join("etc/master.passwd"),
        "root:*:0:0::0:0::/root:/bin/sh\n",
    )
    .unwrap();
    fs::write(root.join("etc/group"), "wheel:*:0:root\n").unwrap();
    let flags = SnapshotFlags::for_step(sn, None, &root).unwrap();
    commit(sn, "step-base", "active-base", &flags);

    let root = sn.prepare("active-pkg", Some("step-base")).unwrap();
    let flags = SnapshotFlags::for_step(sn, Some("step-base"), &root).unwrap();
    let opts = Options {
        clamp_mtime: Some(EPOCH),
        ..Options::default()
    };
    install(
        &root,
        &[PackageFile {
            label: "app-1.0".into(),
            path: pkg.to_path_buf(),
        }],
        &BTreeMap::new(),
        &opts,
        &flags,
        &mut NoHooks,
    )
    .unwrap();
    commit(sn, "step-pkg", "active-pkg", &flags);

    let root = sn.prepare("active-edit", Some("step-pkg")).unwrap();
    let flags = SnapshotFlags::for_step(sn, Some("step-pkg"), &root).unwrap();
    fs::write(root.join("usr/local/etc/app.state"), "state 2\n").unwrap();
    filetime::set_file_mtime(
        root.join("usr/local/etc/app.state"),
        filetime::FileTime::from_unix_time(EPOCH as i64, 0),
    )
    .unwrap();
    commit(sn, "step-edit", "active-edit", &flags);

    let store = Store::open(&t.join("store")).unwrap();
    let mut layers: Vec<Layer> = ["step-base", "step-pkg", "step-edit"]
        .iter()
        .map(|s| Layer {
            snapshot: s.to_string(),
            blob: None,
        })
        .collect();
    let refs = export_layers(
        &store,
        sn,
        &SilentReporter,
        &mut layers,
        Compression::None,
        EPOCH,
    )
    .unwrap();
    let blob = |i: usize| {
        t.join("store/blobs/sha256")
            .join(refs[i].digest.to_string().trim_start_matches("sha256:"))
    };
    let ids = refs.iter().map(|r| r.diff_id.to_string()).collect();
    (ids, blob(1), blob(2))
}

/// GNU tar lists the layer, owners as numbers, and says it saw the
/// flags record (which it does not apply).
fn gnu_tar_reads(tar: &Path) {
    let out = Command::new("tar")
        .args(["-tvf"])
        .arg(tar)
        .output()
        .expect("GNU tar runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.lines()
            .any(|l| l.contains("0/0") && l.ends_with("usr/local/lib/libapp.so")),
        "{list}"
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("SCHILY.fflags"), "{said}");
}

fn check_layers(backend: &str, pkg_tar: &Path, edit_tar: &Path) {
    let got = bsdtar_flags(pkg_tar);
    let want = |p: &str, f: &str| {
        assert_eq!(
            got.get(p).map(String::as_str),
            Some(f),
            "{backend}: {p} in the PKG step's layer: {got:?}"
        )
    };
    // The first name of a hard-linked file is the file (and carries the
    // inode's flags); the package set them on its other name.
    want("usr/local/lib/libapp.so", "schg");
    want("usr/local/lib/libapp.so.1", "");
    want("usr/local/etc/app.state", "nodump,hidden");
    want(
        "usr/local/share/app/a-flagged-file-with-a-long-name-39",
        "uchg",
    );
    want("usr/local/bin/app", "");
    gnu_tar_reads(pkg_tar);
    // The next step rewrote a flagged file: it keeps its flags there.
    let edit = bsdtar_flags(edit_tar);
    assert_eq!(
        edit.get("usr/local/etc/app.state").map(String::as_str),
        Some("nodump,hidden"),
        "{backend}: the edit step's layer: {edit:?}"
    );
}

#[test]
fn flags_set_through_the_seam_reach_the_layer_the_same_on_every_backend() {
    let t = tempfile::tempdir().unwrap();
    let pkg = package(t.path());
    let mut ids: Vec<(&str, Vec<String>)> = Vec::new();

    let d = t.path().join("dir");
    let sn = jbuild::snapshot::dir::DirSnapshotter::new(d.join("snapshots")).unwrap();
    let (dir_ids, pkg_tar, edit_tar) = build(&sn, &d, &pkg);
    check_layers("dir", &pkg_tar, &edit_tar);
    ids.push(("dir", dir_ids));

    if lane::need(Lane::Root) {
        let o = t.path().join("overlay");
        let _unmount = jbuild::snapshot::testsuite::UnmountOnDrop(o.clone());
        let sn = jbuild::snapshot::overlay::OverlaySnapshotter::new(o.join("snapshots")).unwrap();
        let (got, pkg_tar, edit_tar) = build(&sn, &o, &pkg);
        check_layers("overlay", &pkg_tar, &edit_tar);
        ids.push(("overlay", got));
        drop(sn);
    }
    if lane::need(Lane::ZfsFuse) {
        let pool = crate::support::zfs_fuse::Pool::new().expect("the zfs-fuse lane");
        let sn = jbuild::snapshot::zfs::ZfsSnapshotter::open(&pool.dataset).unwrap();
        let z = t.path().join("zfs");
        let (got, pkg_tar, edit_tar) = build(&sn, &z, &pkg);
        check_layers("zfs-fuse", &pkg_tar, &edit_tar);
        ids.push(("zfs-fuse", got));
    }
    for (backend, got) in &ids[1..] {
        assert_eq!(got, &ids[0].1, "{backend} against dir");
    }
}
