//! The `jbuild` binary on the ZFS backend, on zfs-fuse: builds give the
//! same image as on `dir`, images that share a base store it once, prune
//! takes children before parents, and `info` and `--backend` say what
//! they do. See `tests/support/zfs_fuse.rs` for the pools.

use crate::support::common;
use crate::support::lane::{self, Lane};
use crate::support::zfs_fuse;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::*;

fn on_zfs(root: &Path, pool: &zfs_fuse::Pool) -> Command {
    let mut c = jbuild(root);
    // auto: zfs, as the dataset is usable.
    c.env("JBUILD_ZFS_DATASET", &pool.dataset)
        .env("JBUILD_CONFIG", "/dev/null")
        .env_remove("JBUILD_BACKEND");
    c
}

fn build(mut c: Command, tag: &str, ctx: &Path) -> String {
    ok(c.args(["build", "-t", tag]).arg(ctx)).trim().to_string()
}

/// `(name, origin)` of every dataset under the pool's parent dataset, and
/// the names of the `@jbuild` snapshots.
fn datasets(pool: &zfs_fuse::Pool) -> (Vec<(String, String)>, Vec<String>) {
    let prefix = format!("{}/", pool.dataset);
    let mut fs_ = Vec::new();
    let mut snaps = Vec::new();
    for line in pool.zfs_list("name,origin") {
        let (name, origin) = line.split_once('\t').unwrap();
        let Some(rel) = name.strip_prefix(&prefix) else {
            continue;
        };
        match rel.strip_suffix("@jbuild") {
            Some(s) => snaps.push(s.to_string()),
            None => fs_.push((
                rel.to_string(),
                origin.strip_prefix(&prefix).unwrap_or(origin).to_string(),
            )),
        }
    }
    (fs_, snaps)
}

#[test]
fn examples_build_to_the_same_digest_on_zfs_as_on_dir() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let mut examples = vec![("static-site", example("static-site", t.path()))];
    if lane::need(Lane::Busybox) {
        let bb = static_busybox().expect("the busybox lane found it");
        let ctx = example("busybox-linux", t.path());
        fs::copy(bb, ctx.join("busybox")).unwrap();
        examples.push(("busybox-linux", ctx));
    }
    let (dir_root, zfs_root) = (t.path().join("dir"), t.path().join("zfs"));
    for (name, ctx) in &examples {
        let mut on_dir = jbuild(&dir_root);
        on_dir.args(["--backend", "dir"]);
        let want = build(on_dir, name, ctx);
        let mut zfs = on_zfs(&zfs_root, &pool);
        zfs.args(["--backend", "zfs"]);
        let got = build(zfs, name, ctx);
        assert_eq!(got, want, "{name}: zfs and dir give the same image");
    }
    // Every step is a dataset with its @jbuild; nothing else is left.
    let (fs_, snaps) = datasets(&pool);
    assert!(fs_.len() > 5, "{fs_:?}");
    assert!(fs_.iter().all(|(n, _)| n.starts_with("step-")), "{fs_:?}");
    let mut names: Vec<_> = fs_.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    let mut snaps = snaps;
    snaps.sort();
    assert_eq!(names, snaps, "every dataset is committed");
    // A second build is all cache hits, read from the user properties.
    let out = ok(on_zfs(&zfs_root, &pool)
        .args(["--json", "build", "-t", "again"])
        .arg(&examples[0].1));
    assert!(out.contains("\"steps_run\":0"), "{out}");
    // `info` says which backend and why; auto picks zfs here.
    let info = ok(on_zfs(&zfs_root, &pool).arg("info"));
    assert!(
        info.contains(&format!(
            "zfs: dataset {} is mounted at {}",
            pool.dataset,
            pool.mountpoint.display()
        )),
        "{info}"
    );
    assert!(
        info.lines()
            .any(|l| l.starts_with("differ") && l.ends_with("tree-walk")),
        "zfs-fuse has no `zfs diff`: {info}"
    );
}

#[test]
fn images_sharing_a_base_store_it_once_and_prune_removes_unused_layers_children_first() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    // Two images on one base, made on `dir` and exported as OCI layouts.
    let src = t.path().join("src");
    let site = example("static-site", t.path());
    build(jbuild(&src), "site:1", &site);
    for v in ["a", "b"] {
        let ctx = t.path().join(v);
        fs::create_dir_all(&ctx).unwrap();
        fs::write(
            ctx.join("Jailfile"),
            format!("FROM site:1\nSYSRC {v}_enable=YES\n"),
        )
        .unwrap();
        build(jbuild(&src), &format!("{v}:1"), &ctx);
        ok(jbuild(&src)
            .args(["export", &format!("{v}:1")])
            .arg(format!("oci:{}:{v}", t.path().join("layout").display())));
    }
    // Imported into the ZFS root, and used: their layers are unpacked.
    let root = t.path().join("zfs");
    for v in ["a", "b"] {
        ok(on_zfs(&root, &pool)
            .arg("import")
            .arg(format!("oci:{}:{v}", t.path().join("layout").display()))
            .arg(format!("{v}:imported")));
        let ctx = t.path().join(format!("use-{v}"));
        fs::create_dir_all(&ctx).unwrap();
        fs::write(
            ctx.join("Jailfile"),
            format!("FROM {v}:imported\nLABEL use={v}\n"),
        )
        .unwrap();
        build(on_zfs(&root, &pool), &format!("use-{v}:1"), &ctx);
    }
    let inspect: serde_json::Value =
        serde_json::from_str(&ok(on_zfs(&root, &pool).args(["inspect", "a:imported"]))).unwrap();
    let base_layers = inspect["manifest"]["layers"].as_array().unwrap().len() - 1;
    let (fs_, snaps) = datasets(&pool);
    let chains: Vec<_> = fs_
        .iter()
        .filter(|(n, _)| n.starts_with("chain-"))
        .collect();
    assert_eq!(
        chains.len(),
        base_layers + 2,
        "the {base_layers} base layers once, plus one top layer per image: {fs_:?}"
    );
    assert_eq!(snaps.len(), fs_.len(), "all committed: {snaps:?}");
    // Each layer is a clone of the one below: one root, and the two tops
    // are clones of the same base top.
    let roots: Vec<_> = chains.iter().filter(|(_, o)| o == "-").collect();
    assert_eq!(roots.len(), 1, "{chains:?}");
    let tops: Vec<_> = chains
        .iter()
        .filter(|(n, _)| !chains.iter().any(|(_, o)| *o == format!("{n}@jbuild")))
        .collect();
    assert_eq!(tops.len(), 2, "{chains:?}");
    assert_eq!(tops[0].1, tops[1].1, "both tops clone one base: {tops:?}");

    // Plain prune removes the layers no image uses any more, children
    // before parents (a base with clones cannot go): first a's top only,
    let count = |p: &zfs_fuse::Pool| datasets(p).0.len();
    for n in ["a:imported", "use-a:1"] {
        ok(on_zfs(&root, &pool).args(["rmi", n]));
    }
    let out = ok(on_zfs(&root, &pool).arg("prune"));
    assert!(out.contains("removed 1 snapshots"), "{out}");
    assert_eq!(count(&pool), base_layers + 1);
    // and b's image still has every layer: using it unpacks nothing.
    build(on_zfs(&root, &pool), "use-b:2", &t.path().join("use-b"));
    assert_eq!(count(&pool), base_layers + 1);
    // then, with no image left, all of it.
    for n in ["b:imported", "use-b:1", "use-b:2"] {
        ok(on_zfs(&root, &pool).args(["rmi", n]));
    }
    let out = ok(on_zfs(&root, &pool).arg("prune"));
    assert!(
        out.contains(&format!("removed {} snapshots", base_layers + 1)),
        "{out}"
    );
    let (fs_, snaps) = datasets(&pool);
    assert!(fs_.is_empty() && snaps.is_empty(), "{fs_:?} {snaps:?}");
}

#[test]
fn asking_for_zfs_when_it_is_not_usable_is_a_clear_user_error() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let missing = format!("{}/missing", pool.name);
    let out = run(jbuild(t.path())
        .env("JBUILD_ZFS_DATASET", &missing)
        .env("JBUILD_CONFIG", "/dev/null")
        .args(["--backend", "zfs", "info"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("ZFS dataset {missing} does not exist"))
            && err.contains("zfs create -o mountpoint=")
            && err.contains("$JBUILD_ZFS_DATASET"),
        "{err}"
    );
    // auto falls back (to overlay, as root) and says why.
    let info = ok(jbuild(t.path())
        .env("JBUILD_ZFS_DATASET", &missing)
        .env("JBUILD_CONFIG", "/dev/null")
        .env_remove("JBUILD_BACKEND")
        .arg("info"));
    assert!(
        info.contains(&format!(
            "overlay: ZFS dataset {missing} (from $JBUILD_ZFS_DATASET) is not usable"
        )),
        "{info}"
    );
}

#[test]
fn prune_removes_what_a_killed_commit_left_and_keeps_live_work() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    // A commit killed after its snapshot and before its rename leaves a
    // committed `active-<pid>-<n>` of a process that is gone.
    let dead = format!("{}/active-999999999-0", pool.dataset);
    let live = format!("{}/active-{}-0", pool.dataset, std::process::id());
    for (args, what) in [
        (vec!["create", dead.as_str()], "create"),
        (vec!["snapshot", &format!("{dead}@jbuild")], "snapshot"),
        (vec!["create", live.as_str()], "create live"),
    ] {
        let (ok, out) = zfs_fuse::sh("zfs", &args);
        assert!(ok, "{what}: {out}");
    }
    let out = ok(on_zfs(t.path(), &pool).arg("prune"));
    assert!(out.contains("removed 1 snapshots"), "{out}");
    let (fs_, snaps) = datasets(&pool);
    assert_eq!(
        fs_,
        [(format!("active-{}-0", std::process::id()), "-".to_string())]
    );
    assert!(snaps.is_empty(), "{snaps:?}");
}
