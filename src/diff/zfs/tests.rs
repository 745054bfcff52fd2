use super::*;
use std::fs;
use std::process::Command;

/// A parent tree and a child copied from it and changed.
fn trees() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let (p, c) = (t.path().join("p"), t.path().join("c"));
    fs::create_dir_all(p.join("etc/sub")).unwrap();
    fs::write(p.join("etc/passwd"), "root").unwrap();
    fs::write(p.join("etc/sub/old"), "old").unwrap();
    fs::write(p.join("a"), "a").unwrap();
    fs::hard_link(p.join("a"), p.join("etc/a-link")).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(&p)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(c.join("etc/passwd"), "root:x").unwrap();
    fs::remove_file(c.join("etc/sub/old")).unwrap();
    fs::write(c.join("etc/sub/new file"), "n").unwrap();
    fs::hard_link(c.join("a"), c.join("b")).unwrap();
    (t, p, c)
}

fn refs<'a>(p: &'a Path, c: &'a Path) -> (SnapshotRef<'a>, SnapshotRef<'a>) {
    (
        SnapshotRef { name: "p", root: p },
        SnapshotRef { name: "c", root: c },
    )
}

#[test]
fn falls_back_to_the_tree_walk_when_zfs_is_missing_fails_or_garbles() {
    let (_t, p, c) = trees();
    let (pr, cr) = refs(&p, &c);
    let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
    assert!(!walk.is_empty());
    for (program, why) in [
        ("/nonexistent/zfs", "cannot run"),
        ("false", "failed"),
        // `echo diff -H -F ...` is one line the parser refuses.
        ("echo", "unknown change"),
    ] {
        let d = ZfsDiffer::new("tank/jbuild").with_program(program);
        let e = d.changes_via_zfs(pr, cr).unwrap_err().to_string();
        assert!(e.contains(why), "{program}: {e}");
        let e = d.choose(pr, cr).unwrap_err().to_string();
        assert!(e.contains(why), "{program}: {e}");
        assert!(!d.warned.load(Ordering::Relaxed));
        assert_eq!(
            d.changes_named(Some(pr), cr).unwrap(),
            (walk.clone(), "tree-walk"),
            "{program}"
        );
        assert!(d.warned.load(Ordering::Relaxed));
    }
}

/// A fake `zfs` that runs `body` (sh) with `$C` the child's root.
fn fake_zfs(dir: &Path, child: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let prog = dir.join("zfs");
    let script = format!("#!/bin/sh\nC='{}'\n{body}\n", child.display());
    fs::write(&prog, script).unwrap();
    fs::set_permissions(&prog, fs::Permissions::from_mode(0o755)).unwrap();
    prog
}

/// A policy that decides at once: no probe, a walk sample of nothing.
fn eager() -> Policy {
    Policy {
        min_objects: 0,
        probe_floor: Duration::ZERO,
        probe_share: 0.0,
        walk_sample: Duration::ZERO,
        walk_sample_visits: 0,
    }
}

/// A `zfs diff` that prints nothing for longer than a whole walk would
/// take is stopped, killed and reaped, and the walk's list is the
/// answer.
#[test]
fn a_silent_zfs_diff_is_stopped_killed_and_reaped_for_the_walk() {
    let (t, p, c) = trees();
    let (pr, cr) = refs(&p, &c);
    let prog = fake_zfs(t.path(), &c, "exec sleep 60");
    let d = ZfsDiffer::new("tank/jbuild")
        .with_program(&prog)
        .with_policy(eager())
        .with_object_count(4096);
    let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
    let start = std::time::Instant::now();
    let got = d.choose(pr, cr).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(50),
        "it waited for the fake"
    );
    assert_eq!((&got.changes, got.by), (&walk, "tree-walk"));
    let probe = got.probe.expect("decided on a probe");
    assert_eq!(probe.done, None, "{probe:?}");
    assert!(probe.walk_per_object.is_some(), "{probe:?}");
    let proc = PathBuf::from(format!("/proc/{}", got.pid));
    assert!(!proc.exists(), "the `zfs diff` child {} is left", got.pid);
}

/// The same slow `zfs diff` on a tree of fewer objects than the
/// policy's floor is waited for: its list is the answer.
#[test]
fn a_tiny_tree_stays_on_zfs_diff_however_slow() {
    let (t, p, c) = trees();
    let (pr, cr) = refs(&p, &c);
    // The root changed: every name is judged (on copies, every
    // directory is another object), which finds the walk's list.
    let prog = fake_zfs(t.path(), &c, "sleep 1; printf 'M\\t/\\t%s/\\n' \"$C\"");
    let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
    for objects in [4095, 0] {
        let policy = Policy {
            min_objects: 4096,
            ..eager()
        };
        let d = ZfsDiffer::new("tank/jbuild")
            .with_program(&prog)
            .with_policy(policy)
            .with_object_count(objects);
        let got = d.choose(pr, cr).unwrap();
        assert_eq!((&got.changes, got.by), (&walk, "zfs-diff"), "{objects}");
    }
    // With more objects the same fake is stopped. (It sleeps longer here:
    // a loaded machine may not run the watcher within one second, and a
    // `zfs diff` that finished first would be taken; a stopped one costs
    // nothing.)
    let prog = fake_zfs(t.path(), &c, "sleep 30; printf 'M\\t/\\t%s/\\n' \"$C\"");
    let d = ZfsDiffer::new("tank/jbuild")
        .with_program(&prog)
        .with_policy(eager())
        .with_object_count(4096);
    assert_eq!(d.choose(pr, cr).unwrap().by, "tree-walk");
}

/// A line names an object: the path's inode in the child, or in the
/// parent for a path the child no longer has.
#[test]
fn a_line_names_the_object_zfs_diff_has_reached() {
    let (_t, p, c) = trees();
    let (pr, cr) = refs(&p, &c);
    let ino = |path: &Path| meta::lstat(path).unwrap().ino;
    let line = |s: String| s.into_bytes();
    let cs = c.display();
    assert_eq!(
        object_of(&line(format!("M\tF\t{cs}/etc/passwd")), pr, cr),
        Some(ino(&c.join("etc/passwd")))
    );
    assert_eq!(
        object_of(&line(format!("-\tF\t{cs}/etc/sub/old")), pr, cr),
        Some(ino(&p.join("etc/sub/old")))
    );
    assert_eq!(
        object_of(&line(format!("+\tF\t{cs}/etc/sub/new\\0040file")), pr, cr),
        Some(ino(&c.join("etc/sub/new file")))
    );
    assert_eq!(object_of(b"garbage", pr, cr), None);
}

#[test]
fn runs_zfs_diff_on_the_agreed_snapshot_names() {
    let (_t, p, c) = trees();
    let (pr, cr) = refs(&p, &c);
    let e = ZfsDiffer::new("tank/jbuild")
        .with_program("false")
        .changes_via_zfs(pr, cr)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`zfs diff tank/jbuild/p@jbuild tank/jbuild/c@jbuild`"),
        "{e}"
    );
}

/// Judging from the root down finds what the tree walk finds. (On
/// copies every directory is another inode, so every name is looked at;
/// the qemu lane tests the cheap paths on real clones.)
#[test]
fn judging_from_the_root_matches_the_tree_walk() {
    let (_t, p, c) = trees();
    let (pr, cr) = refs(&p, &c);
    let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
    let (changes, links) = Judge::new(&p, &c).run(vec![PathBuf::new()]).unwrap();
    let got = canonicalize(changes, Some(&p), &c, Some(&links)).unwrap();
    assert_eq!(got, walk);
}

#[test]
fn other_names_are_found_in_the_own_directory_then_anywhere() {
    let (_t, _p, c) = trees();
    let m = meta::lstat(&c.join("a")).unwrap();
    let mut names = other_names(&c, &[(PathBuf::from("a"), m)]).unwrap();
    names.sort();
    assert_eq!(names, ["a", "b", "etc/a-link"].map(PathBuf::from));
}

#[test]
fn a_symlinked_ancestor_is_not_followed() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("d")).unwrap();
    fs::write(t.path().join("d/f"), "x").unwrap();
    std::os::unix::fs::symlink("d", t.path().join("l")).unwrap();
    let mut tree = Tree::new(t.path());
    assert!(tree.lookup(Path::new("d/f")).unwrap().is_some());
    assert!(tree.lookup(Path::new("l/f")).unwrap().is_none());
}
