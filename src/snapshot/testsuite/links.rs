//! Hard links through a child's changes: a file with several names is one
//! file in the child as on a real file system, whatever the backend keeps
//! below it — a write through one name shows through the others (during
//! the step and after its commit), removing one name lowers the others'
//! link count, and the parent keeps what it had.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use filetime::FileTime;

use super::{changes_between, commit_with, read, write};
use crate::diff::ChangeKind;
use crate::snapshot::{Labels, Snapshotter};

fn link(root: &Path, from: &str, to: &str) {
    let to = root.join(to);
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::hard_link(root.join(from), to).unwrap();
}

fn append(root: &Path, rel: &str, text: &str) {
    fs::OpenOptions::new()
        .append(true)
        .open(root.join(rel))
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

fn md(root: &Path, rel: &str) -> fs::Metadata {
    fs::symlink_metadata(root.join(rel)).unwrap()
}

pub fn check_hardlinks_kept_through_writes(sn: &dyn Snapshotter) {
    let old = FileTime::from_unix_time(1_500_000_000, 0);
    commit_with(sn, "base", None, |r| {
        write(r, "etc/a", "a\n");
        link(r, "etc/a", "etc/b");
        link(r, "etc/a", "x/y/c");
        write(r, "e/k", "k");
        link(r, "e/k", "e/l");
        write(r, "m/s", "s");
        link(r, "m/s", "m/t");
        for d in ["etc", "x/y", "x", "e", "m"] {
            filetime::set_file_times(r.join(d), old, old).unwrap();
        }
    });
    let child = sn.prepare("child-active", Some("base")).unwrap();
    append(&child, "etc/a", "changed\n");
    // The step itself sees one file.
    assert_eq!(read(&child, "etc/b").as_deref(), Some("a\nchanged\n"));
    assert_eq!(read(&child, "x/y/c").as_deref(), Some("a\nchanged\n"));
    fs::remove_file(child.join("e/k")).unwrap();
    assert_eq!(md(&child, "e/l").nlink(), 1, "e/l once e/k is gone");
    fs::set_permissions(child.join("m/t"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        md(&child, "m/s").mode() & 0o777,
        0o600,
        "m/s after chmod m/t"
    );
    sn.commit("child", "child-active", &Labels::new()).unwrap();

    let (base, child) = (sn.view("base").unwrap(), sn.view("child").unwrap());
    let ino = |p: &str| md(&child, p).ino();
    assert_eq!(ino("etc/a"), ino("etc/b"));
    assert_eq!(ino("etc/a"), ino("x/y/c"));
    assert_eq!(md(&child, "etc/a").nlink(), 3);
    for name in ["etc/a", "etc/b", "x/y/c"] {
        assert_eq!(
            read(&child, name).as_deref(),
            Some("a\nchanged\n"),
            "{name}"
        );
    }
    assert!(!child.join("e/k").exists());
    assert_eq!(md(&child, "e/l").nlink(), 1, "e/l");
    assert_eq!(ino("m/s"), ino("m/t"));
    assert_eq!(md(&child, "m/s").mode() & 0o777, 0o600);
    for d in ["etc", "x/y", "x", "m"] {
        assert_eq!(md(&child, d).mtime(), old.unix_seconds(), "mtime of {d}");
    }
    // The parent keeps what it had.
    for name in ["etc/a", "etc/b", "x/y/c"] {
        assert_eq!(read(&base, name).as_deref(), Some("a\n"), "base {name}");
    }
    assert_eq!(md(&base, "etc/b").nlink(), 3);
    assert_eq!(md(&base, "e/l").nlink(), 2);
    assert_eq!(md(&base, "m/t").mode() & 0o777, 0o644);

    // The layer: every name of a changed file, and no directory the
    // backend had to touch to keep the names together.
    let changes = changes_between(sn, ("base", &base), ("child", &child));
    let got: BTreeSet<(PathBuf, ChangeKind)> =
        changes.into_iter().map(|c| (c.path, c.kind)).collect();
    let modified = ["e", "e/l", "etc/a", "etc/b", "m/s", "m/t", "x/y/c"];
    let want: BTreeSet<(PathBuf, ChangeKind)> = modified
        .iter()
        .map(|p| (PathBuf::from(p), ChangeKind::Modified))
        .chain([(PathBuf::from("e/k"), ChangeKind::Deleted)])
        .collect();
    assert_eq!(got, want);

    // Layers stack on it: a write through another name reaches them all.
    commit_with(sn, "grandchild", Some("child"), |r| {
        append(r, "x/y/c", "again\n");
        assert_eq!(read(r, "etc/a").as_deref(), Some("a\nchanged\nagain\n"));
    });
    let top = sn.view("grandchild").unwrap();
    assert_eq!(read(&top, "etc/b").as_deref(), Some("a\nchanged\nagain\n"));
    assert_eq!(md(&top, "etc/b").nlink(), 3);
    assert_eq!(read(&child, "etc/b").as_deref(), Some("a\nchanged\n"));
}
