//! The tree-walk differ against real trees: a parent, a child copied from
//! it as the dir snapshotter does, one kind of change at a time. Every case
//! runs on the overlay backend too, whose differ reads only the upper
//! directory: it must find the same changes, and so write the same layer
//! bytes, as the tree walk over the same two trees.

use crate::support::layer as layer_support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use jbuild::diff::walk::TreeWalkDiffer;
use jbuild::diff::{Differ, SnapshotRef};
use jbuild::layer::{write_tar, TarOptions};
use jbuild::snapshot::overlay::OverlaySnapshotter;
use jbuild::snapshot::testsuite::UnmountOnDrop;
use jbuild::snapshot::{Labels, Snapshotter};
use layer_support::*;

/// Builds a parent with `build`, copies it to a child, applies `change` to
/// the child, and returns the diff summary — after checking that the
/// overlay backend finds the same (see [`overlay_summary`]).
fn diff_after(build: impl Fn(&Path), change: impl Fn(&Path)) -> Vec<String> {
    let t = tempfile::tempdir().unwrap();
    let (parent, child) = (t.path().join("parent"), t.path().join("child"));
    fs::create_dir(&parent).unwrap();
    build(&parent);
    copy_tree(&parent, &child);
    change(&child);
    let walked = summary(&diff(Some(&parent), &child));
    assert_eq!(overlay_summary(&build, &change), walked, "overlay differ");
    walked
}

/// The same case on the overlay backend: the parent committed, the child
/// prepared on it (a mount), changed and committed. Its differ must give
/// the tree walk's change list over the two views, and the layer written
/// from it the same bytes.
fn overlay_summary(build: &dyn Fn(&Path), change: &dyn Fn(&Path)) -> Vec<String> {
    let t = tempfile::tempdir().unwrap();
    let _unmount = UnmountOnDrop(t.path().to_path_buf());
    let sn = OverlaySnapshotter::new(t.path().join("sn")).unwrap();
    crate::snapshot::overlay_userns::expect_flavour(&sn);
    let root = sn.prepare("p", None).unwrap();
    build(&root);
    sn.commit("parent", "p", &Labels::new()).unwrap();
    let root = sn.prepare("c", Some("parent")).unwrap();
    change(&root);
    sn.commit("child", "c", &Labels::new()).unwrap();
    let (pv, cv) = (sn.view("parent").unwrap(), sn.view("child").unwrap());
    let refs = || {
        (
            Some(SnapshotRef {
                name: "parent",
                root: &pv,
            }),
            SnapshotRef {
                name: "child",
                root: &cv,
            },
        )
    };
    let differ = sn.differ();
    assert_eq!(differ.name(), "overlay-upper");
    let (p, c) = refs();
    let ours = differ.changes(p, c).unwrap();
    let (p, c) = refs();
    let walked = TreeWalkDiffer::new().changes(p, c).unwrap();
    assert_eq!(
        ours, walked,
        "overlay differ against the walk of the same trees"
    );
    let opts = TarOptions {
        clamp_mtime: 2_000_000_000,
    };
    let tar = |changes| write_tar(&cv, changes, &opts, Vec::new()).unwrap();
    assert!(tar(&ours) == tar(&walked), "layer bytes differ");
    summary(&ours)
}

fn base(root: &Path) {
    write(root, "etc/passwd", b"root:x:0:0\n");
    write(root, "etc/old", b"old\n");
    write(root, "bin/sh", b"#!shell");
    write(root, "usr/share/doc/a/README", b"a");
    write(root, "usr/share/doc/b", b"b");
    write(root, "usr/share/keep", b"k");
    write(root, "var/cache/a", b"1");
    write(root, "var/cache/b", b"2");
    write(root, "x", b"file becomes dir");
    symlink("aaa", root.join("lnk")).unwrap();
}

#[test]
fn identical_trees_have_no_changes() {
    assert!(diff_after(base, |_| {}).is_empty());
}

#[test]
fn base_layer_is_everything_added_in_order() {
    let t = tempfile::tempdir().unwrap();
    base(t.path());
    let got = summary(&diff(None, t.path()));
    assert_eq!(got[..4], ["A bin", "A bin/sh", "A etc", "A etc/old"]);
    assert_eq!(got.len(), 18);
}

#[test]
fn added_file() {
    assert_eq!(
        diff_after(base, |c| drop(write(c, "etc/new", b"n"))),
        ["M etc", "A etc/new"]
    );
}

#[test]
fn modified_content() {
    assert_eq!(
        diff_after(base, |c| drop(write(c, "etc/passwd", b"root:x:0:1\n"))),
        ["M etc/passwd"]
    );
}

#[test]
fn deleted_file() {
    assert_eq!(
        diff_after(base, |c| fs::remove_file(c.join("etc/old")).unwrap()),
        ["M etc", "D etc/old"]
    );
}

#[test]
fn file_replaced_by_directory() {
    let got = diff_after(base, |c| {
        fs::remove_file(c.join("x")).unwrap();
        write(c, "x/y", b"y");
    });
    assert_eq!(got, ["M x", "A x/y"]);
}

#[test]
fn chmod_only() {
    assert_eq!(
        diff_after(base, |c| chmod(&c.join("bin/sh"), 0o4755)),
        ["M bin/sh"]
    );
}

#[test]
fn chown_only() {
    need!(Root);
    let got = diff_after(base, |c| {
        std::os::unix::fs::lchown(c.join("bin/sh"), Some(1), Some(2)).unwrap()
    });
    assert_eq!(got, ["M bin/sh"]);
}

#[test]
fn mtime_only() {
    assert_eq!(
        diff_after(base, |c| set_mtime(&c.join("bin/sh"), 1_000_000, 5)),
        ["M bin/sh"]
    );
}

#[test]
fn symlink_retargeted_with_same_size_and_mtime() {
    let got = diff_after(base, |c| {
        let before = fs::symlink_metadata(c.join("lnk")).unwrap();
        let dir_before = fs::metadata(c).unwrap();
        fs::remove_file(c.join("lnk")).unwrap();
        symlink("bbb", c.join("lnk")).unwrap();
        let t = filetime::FileTime::from_last_modification_time(&before);
        filetime::set_symlink_file_times(c.join("lnk"), t, t).unwrap();
        let t = filetime::FileTime::from_last_modification_time(&dir_before);
        filetime::set_file_times(c, t, t).unwrap();
    });
    assert_eq!(got, ["M lnk"]);
}

#[test]
fn hard_link_added_to_unchanged_file() {
    let got = diff_after(base, |c| {
        fs::hard_link(c.join("bin/sh"), c.join("bin/sh2")).unwrap()
    });
    // The old name's link count changed, and both names are in the layer.
    assert_eq!(got, ["M bin", "M bin/sh", "A bin/sh2"]);
}

#[test]
fn hard_link_group_is_completed() {
    // a and b are linked; the child drops b and links c to a. a itself is
    // unchanged (same link count), but it must be in the layer so that c
    // can be written as a link to it.
    let got = diff_after(
        |p| {
            write(p, "d/a", b"shared");
            fs::hard_link(p.join("d/a"), p.join("d/b")).unwrap();
        },
        |c| {
            fs::remove_file(c.join("d/b")).unwrap();
            fs::hard_link(c.join("d/a"), c.join("d/c")).unwrap();
        },
    );
    assert_eq!(got, ["M d", "D d/b", "M d/a", "A d/c"]);
}

#[test]
fn deleted_directory_is_one_whiteout() {
    let got = diff_after(base, |c| {
        fs::remove_dir_all(c.join("usr/share/doc")).unwrap()
    });
    assert_eq!(got, ["M usr/share", "D usr/share/doc"]);
}

#[test]
fn opaque_when_nothing_of_the_parent_survives() {
    let got = diff_after(base, |c| {
        fs::remove_file(c.join("var/cache/a")).unwrap();
        fs::remove_file(c.join("var/cache/b")).unwrap();
        write(c, "var/cache/c", b"3");
    });
    assert_eq!(got, ["O var/cache", "A var/cache/c"]);

    let got = diff_after(base, |c| {
        fs::remove_file(c.join("var/cache/a")).unwrap();
        fs::remove_file(c.join("var/cache/b")).unwrap();
    });
    assert_eq!(got, ["O var/cache"]);
}

#[test]
fn not_opaque_when_something_survives() {
    let got = diff_after(base, |c| fs::remove_file(c.join("var/cache/a")).unwrap());
    assert_eq!(got, ["M var/cache", "D var/cache/a"]);
}

#[test]
fn xattr_change() {
    let got = diff_after(base, |c| {
        xattr::set(c.join("etc/passwd"), "user.jbuild", b"v").unwrap()
    });
    assert_eq!(got, ["M etc/passwd"]);
}

#[test]
fn same_size_and_whole_second_mtime_compares_content() {
    let pin = |p: &Path| set_mtime(&p.join("f"), 1_600_000_000, 0);
    let build = |p: &Path| {
        write(p, "f", b"one");
        pin(p);
    };
    let got = diff_after(build, |c| {
        write(c, "f", b"two");
        pin(c);
    });
    assert_eq!(got, ["M f"]);
    let got = diff_after(build, |c| {
        write(c, "f", b"one");
        pin(c);
    });
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn fifo_and_type_change_to_symlink() {
    let got = diff_after(base, |c| {
        nix::unistd::mkfifo(
            &c.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        fs::remove_file(c.join("etc/old")).unwrap();
        symlink("passwd", c.join("etc/old")).unwrap();
    });
    assert_eq!(got, ["M etc", "M etc/old", "A fifo"]);
}

#[test]
fn copied_up_but_unchanged_is_no_change() {
    // On overlay each of these copies the file (and its directories) up
    // into the child's layer directory; the content and metadata end as
    // they were, so neither differ lists anything.
    let got = diff_after(base, |c| {
        drop(
            fs::OpenOptions::new()
                .write(true)
                .open(c.join("usr/share/doc/a/README"))
                .unwrap(),
        );
        let sh = c.join("bin/sh");
        let mode = fs::metadata(&sh).unwrap().permissions();
        chmod(&sh, 0o700);
        fs::set_permissions(&sh, mode).unwrap();
    });
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn directory_removed_and_made_again() {
    // On overlay the new directory is opaque (`trusted.overlay.opaque=y`,
    // `user.overlay.opaque=y` in a user namespace):
    // nothing of the parent's shows through it, whiteouts or not.
    let got = diff_after(base, |c| {
        fs::remove_dir_all(c.join("usr/share/doc")).unwrap();
        write(c, "usr/share/doc/new", b"n");
    });
    assert_eq!(
        got,
        ["M usr/share", "O usr/share/doc", "A usr/share/doc/new"]
    );

    // A name that comes back is compared with the parent's.
    let got = diff_after(base, |c| {
        fs::remove_dir_all(c.join("usr/share/doc")).unwrap();
        write(c, "usr/share/doc/b", b"b2");
    });
    assert_eq!(
        got,
        [
            "M usr/share",
            "M usr/share/doc",
            "D usr/share/doc/a",
            "M usr/share/doc/b"
        ]
    );
}
