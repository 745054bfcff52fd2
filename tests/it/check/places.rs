//! The store's own places are checked before they are trusted (issue 29,
//! items 5 and 15): a directory jbuild keeps under its root (`tmp/`,
//! `cache/`, `store/.jbuild/tmp`, `.jbuild/sizes`, `.jbuild/origins`, a
//! layer's `fs/`) that is a symlink out of the root is damage `check`
//! reports; no command reads, writes or removes through it (a canary
//! directory outside the root is the same before and after); a layer
//! missing its `fs/`, or with a corrupt `meta.json`, is a finding, not a
//! failure of the check.

use crate::support::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{jbuild, ok, run};

use super::dir::{check, check_json, kinds, text};

const RECIPE: &str = "FROM scratch\nCOPY site /site\nLINE_IN_FILE \"x\" /etc/x\n";

/// A root with one image `one:1` (two layers, a COPY of `ctx/site`),
/// whose context files are old enough for the content-hash cache to keep.
fn built(t: &Path) -> PathBuf {
    let ctx = t.join("ctx");
    fs::create_dir_all(ctx.join("site")).unwrap();
    fs::write(ctx.join("Jailfile"), RECIPE).unwrap();
    fs::write(ctx.join("site/a"), "a\n").unwrap();
    let old = SystemTime::now() - Duration::from_secs(3600);
    for p in [ctx.join("site/a"), ctx.join("site"), ctx.join("Jailfile")] {
        filetime::set_file_mtime(&p, filetime::FileTime::from_system_time(old)).unwrap();
    }
    let root = t.join("root");
    ok(jbuild(&root).args(["build", "-q", "-t", "one:1"]).arg(&ctx));
    root
}

/// A directory outside the root holding files of every name a leftover
/// check looks for, each an hour old: what must survive every command.
fn canary(t: &Path, name: &str) -> PathBuf {
    let dir = t.join(name);
    fs::create_dir_all(dir.join("sub")).unwrap();
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(7200));
    for f in [
        "precious.txt".to_string(),
        "ab".repeat(32),
        ".tmp-x".into(),
        ".download-y".into(),
        "sub/deep".into(),
    ] {
        fs::write(dir.join(&f), format!("canary {f}\n")).unwrap();
        filetime::set_file_mtime(dir.join(&f), old).unwrap();
    }
    dir
}

/// Names and contents of every file under `dir`.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    common::snapshot_tree(dir)
        .into_iter()
        .map(|(k, e)| (k, e.content))
        .collect()
}

/// `place` (under `root`) replaced by a symlink to `target`.
fn plant(root: &Path, place: &str, target: &Path) -> PathBuf {
    let at = root.join(place);
    if at.is_dir() {
        fs::remove_dir_all(&at).unwrap();
    }
    fs::create_dir_all(at.parent().unwrap()).unwrap();
    symlink(target, &at).unwrap();
    at
}

fn damaged_where(v: &serde_json::Value) -> Vec<String> {
    v["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["where"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_symlinked_scratch_or_notes_place_is_damage_and_nothing_outside_is_touched() {
    for place in [
        "store/.jbuild/tmp",
        "tmp",
        "store/.jbuild/sizes",
        "store/.jbuild/origins",
    ] {
        let t = tempfile::tempdir().unwrap();
        let root = built(t.path());
        let outside = canary(t.path(), "outside");
        let before = tree(&outside);
        let link = plant(&root, place, &outside);

        let (code, v) = check_json(&root, &[]);
        assert_eq!(code, 1, "{place}: {v:#}");
        assert_eq!(kinds(&v, "damaged"), ["symlinked-place"], "{place}: {v:#}");
        assert_eq!(
            damaged_where(&v),
            [link.display().to_string()],
            "{place}: {v:#}"
        );
        assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");

        // The commands that remove leftovers and notes: never through it.
        let o = run(jbuild(&root).args(["prune"]));
        assert_eq!(tree(&outside), before, "{place}: prune: {}", text(&o));
        let o = run(jbuild(&root).args(["rmi", "one:1"]));
        assert!(o.status.success(), "{}", text(&o));
        let o = run(jbuild(&root).args(["prune"]));
        assert_eq!(tree(&outside), before, "{place}: prune: {}", text(&o));

        // Repair takes away the symlink, never what it points to.
        let o = check(&root, &["--repair"]);
        assert_eq!(tree(&outside), before, "{place}: {}", text(&o));
        assert!(
            fs::symlink_metadata(&link).is_err(),
            "{place}: the symlink stays: {}",
            text(&o)
        );
        assert!(o.status.success(), "{place}: {}", text(&o));
        let (code, v) = check_json(&root, &[]);
        assert_eq!(code, 0, "{place}: {v:#}");
        assert_eq!(tree(&outside), before, "{place}");
    }
}

#[test]
fn a_symlinked_cache_is_damage_and_a_build_writes_nothing_through_it() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    fs::remove_dir_all(root.join("cache")).unwrap();
    let outside = canary(t.path(), "outside");
    let before = tree(&outside);
    let link = plant(&root, "cache", &outside);

    // A build that would save context hashes there.
    fs::write(t.path().join("ctx/site/b"), "b\n").unwrap();
    let old = SystemTime::now() - Duration::from_secs(3600);
    filetime::set_file_mtime(
        t.path().join("ctx/site/b"),
        filetime::FileTime::from_system_time(old),
    )
    .unwrap();
    let o = run(jbuild(&root)
        .args(["build", "-q", "-t", "two:1"])
        .arg(t.path().join("ctx")));
    assert_eq!(tree(&outside), before, "{}", text(&o));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains(&link.display().to_string()),
        "{}",
        text(&o)
    );

    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), ["symlinked-place"], "{v:#}");
    let o = check(&root, &["--repair"]);
    assert_eq!(tree(&outside), before, "{}", text(&o));
    assert!(o.status.success(), "{}", text(&o));
}

/// The committed snapshots of `root` (dir backend), by name.
fn committed(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(root.join("snapshots/dir/committed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_layer_missing_its_tree_is_damage_to_a_plain_check() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let layer = committed(&root)[0].clone();
    fs::remove_dir_all(layer.join("fs")).unwrap();
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), ["missing-tree"], "{v:#}");
    let where_ = damaged_where(&v);
    assert!(
        where_[0].contains(&*layer.file_name().unwrap().to_string_lossy()),
        "{v:#}"
    );
}

#[test]
fn a_layer_tree_symlinked_out_of_the_root_is_damage_and_no_build_stands_on_it() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let outside = canary(t.path(), "outside");
    let before = tree(&outside);
    // The top layer (the one with a parent): the next step stands on it.
    let layers = committed(&root);
    let top = layers
        .iter()
        .find(|l| {
            !fs::read_to_string(l.join("meta.json"))
                .unwrap()
                .contains("\"parent\": null")
        })
        .unwrap()
        .clone();
    let fs_dir = top.join("fs");
    fs::remove_dir_all(&fs_dir).unwrap();
    symlink(&outside, &fs_dir).unwrap();

    for extra in [&[][..], &["--deep"][..]] {
        let (code, v) = check_json(&root, extra);
        assert_eq!(code, 1, "{extra:?}: {v:#}");
        assert!(
            kinds(&v, "damaged").contains(&"symlinked-place".to_string()),
            "{extra:?}: {v:#}"
        );
        assert!(
            damaged_where(&v).contains(&fs_dir.display().to_string()),
            "{extra:?}: {v:#}"
        );
    }

    // A build whose cached steps stand on it: refused, nothing read from
    // the outside directory into a layer.
    fs::write(
        t.path().join("ctx/Jailfile"),
        format!("{RECIPE}LINE_IN_FILE \"y\" /etc/y\n"),
    )
    .unwrap();
    let o = run(jbuild(&root)
        .args(["build", "-q", "-t", "two:1"])
        .arg(t.path().join("ctx")));
    assert!(!o.status.success(), "built on the outside tree");
    assert!(
        text(&o).contains(&fs_dir.display().to_string()),
        "{}",
        text(&o)
    );
    assert_eq!(tree(&outside), before);
    let o = run(jbuild(&root).args(["images", "-q"]));
    assert!(o.status.success(), "{}", text(&o));

    // Repair leaves it (the layer is the user's to remove) and never
    // follows it.
    let o = check(&root, &["--repair"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(tree(&outside), before);
    let o = run(jbuild(&root).args(["prune", "--cache"]));
    assert_eq!(tree(&outside), before, "{}", text(&o));
}

#[test]
fn a_corrupt_meta_json_is_a_finding_not_a_failed_check() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let layer = committed(&root)[0].clone();
    fs::write(layer.join("meta.json"), b"{\"version\":1,\"na").unwrap();
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), ["bad-meta"], "{v:#}");
    assert!(
        damaged_where(&v)[0].contains(&*layer.file_name().unwrap().to_string_lossy()),
        "{v:#}"
    );
    // Nothing is offered for removal while a snapshot cannot be read.
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");
}
