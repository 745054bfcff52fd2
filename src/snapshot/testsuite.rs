//! The conformance suite every [`Snapshotter`] backend passes, after
//! containerd's `testsuite.SnapshotterSuite`.
//!
//! A backend's test file instantiates it with one line, which expands to
//! one `#[test]` per check, each on a fresh snapshotter:
//!
//! ```text
//! fn make() -> Fixture {
//!     let tmp = tempfile::tempdir().unwrap();
//!     let sn = DirSnapshotter::new(tmp.path().join("sn")).unwrap();
//!     Fixture::new(Box::new(sn), tmp) // the TempDir lives as long as the snapshotter
//! }
//! jbuild::snapshotter_suite!(make);
//! ```
//!
//! `snapshotter_suite!(make, differ: #[ignore = "why"])` puts attributes on
//! the one check that needs the backend's differ, and
//! `snapshotter_suite!(make, all: #[ignore = "why"])` on every check (for a
//! backend that only a special test lane can run). Checks that need
//! privileges or filesystem support the machine lacks (owners without root,
//! device nodes, `user.*` xattrs) pass after saying on stderr what they
//! skipped.
//!
//! The checks are about behaviour a caller can see, never about how a
//! backend stores things: the suite holds the `dir` and `zfs` backends to
//! one contract.

mod content;
mod links;

use std::any::Any;
use std::fs;
use std::path::Path;

pub use content::*;
pub use links::*;

use super::{Kind, Labels, SnapshotError, Snapshotter};

/// A snapshotter under test, with whatever must outlive it (a temporary
/// directory, a test pool).
pub struct Fixture {
    pub snapshotter: Box<dyn Snapshotter>,
    _keep: Box<dyn Any>,
}

impl Fixture {
    pub fn new(snapshotter: Box<dyn Snapshotter>, keep: impl Any) -> Fixture {
        Fixture {
            snapshotter,
            _keep: Box::new(keep),
        }
    }
}

/// Detaches every mount under its directory when dropped: keep one
/// beside the `TempDir` of a backend that mounts (put it first in a tuple,
/// so it is dropped before the directory is deleted).
pub struct UnmountOnDrop(pub std::path::PathBuf);

impl Drop for UnmountOnDrop {
    fn drop(&mut self) {
        if let Err(e) = super::overlay::mount::unmount_under(&self.0) {
            eprintln!("cannot unmount what is under {}: {e}", self.0.display());
        }
    }
}

/// Expands to one `#[test]` per check of the suite. See the module docs.
#[macro_export]
macro_rules! snapshotter_suite {
    ($make:expr) => {
        $crate::snapshotter_suite!($make, differ:);
    };
    ($make:expr, differ: $(#[$attr:meta])*) => {
        $crate::snapshotter_suite!(@with $make; []; [$(#[$attr])*]);
    };
    ($make:expr, all: $(#[$attr:meta])*) => {
        $crate::snapshotter_suite!(@with $make; [$(#[$attr])*]; [$(#[$attr])*]);
    };
    (@with $make:expr; $all:tt; [$(#[$attr:meta])*]) => {
        $crate::__snapshot_tests!($make; $all;
            check_prepare_empty_commit_view,
            check_view_of_active_refused,
            check_file_deleted_in_child,
            check_dir_removed_from_lower,
            check_parent_unchanged_by_child_writes,
            check_commit_unknown_key,
            check_commit_existing_name_keeps_key,
            check_prepare_missing_parent,
            check_prepare_active_parent_refused,
            check_prepare_existing_key_refused,
            check_remove_parent_with_children_refused,
            check_remove_active,
            check_remove_committed,
            check_labels_persist_and_merge,
            check_stat_missing_is_none,
            check_list_kinds_and_parents,
            check_invalid_names_refused,
            check_hardlinks_preserved,
            check_hardlinks_kept_through_writes,
            check_symlinks_preserved,
            check_special_files_preserved,
            check_modes_preserved,
            check_owners_preserved,
            check_mtimes_preserved,
            check_xattrs_preserved,
            check_differ_sees_xattrs_past_symlinks,
            check_deep_chain,
            check_materialize_is_independent,
        );
        #[test]
        $(#[$attr])*
        fn check_differ_sees_child_changes() {
            let fixture: $crate::snapshot::testsuite::Fixture = ($make)();
            $crate::snapshot::testsuite::check_differ_sees_child_changes(&*fixture.snapshotter);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __snapshot_tests {
    ($make:expr; $all:tt; $($check:ident),* $(,)?) => {
        $(
            $crate::__snapshot_tests!(@one $make; $all; $check);
        )*

        /// The macro's list and [`CHECKS`] must not drift apart.
        #[test]
        fn suite_covers_every_check() {
            let generated = [$(stringify!($check),)* "check_differ_sees_child_changes"];
            let all: Vec<&str> = $crate::snapshot::testsuite::CHECKS.iter().map(|(n, _)| *n).collect();
            assert_eq!(generated.to_vec(), all);
        }
    };
    (@one $make:expr; [$(#[$attr:meta])*]; $check:ident) => {
        #[test]
        $(#[$attr])*
        fn $check() {
            let fixture: $crate::snapshot::testsuite::Fixture = ($make)();
            $crate::snapshot::testsuite::$check(&*fixture.snapshotter);
        }
    };
}

/// One check of the suite.
pub type Check = fn(&dyn Snapshotter);

/// Every check, by name, in the order `snapshotter_suite!` lists them.
pub const CHECKS: &[(&str, Check)] = &[
    (
        "check_prepare_empty_commit_view",
        check_prepare_empty_commit_view,
    ),
    ("check_view_of_active_refused", check_view_of_active_refused),
    ("check_file_deleted_in_child", check_file_deleted_in_child),
    ("check_dir_removed_from_lower", check_dir_removed_from_lower),
    (
        "check_parent_unchanged_by_child_writes",
        check_parent_unchanged_by_child_writes,
    ),
    ("check_commit_unknown_key", check_commit_unknown_key),
    (
        "check_commit_existing_name_keeps_key",
        check_commit_existing_name_keeps_key,
    ),
    ("check_prepare_missing_parent", check_prepare_missing_parent),
    (
        "check_prepare_active_parent_refused",
        check_prepare_active_parent_refused,
    ),
    (
        "check_prepare_existing_key_refused",
        check_prepare_existing_key_refused,
    ),
    (
        "check_remove_parent_with_children_refused",
        check_remove_parent_with_children_refused,
    ),
    ("check_remove_active", check_remove_active),
    ("check_remove_committed", check_remove_committed),
    (
        "check_labels_persist_and_merge",
        check_labels_persist_and_merge,
    ),
    ("check_stat_missing_is_none", check_stat_missing_is_none),
    ("check_list_kinds_and_parents", check_list_kinds_and_parents),
    ("check_invalid_names_refused", check_invalid_names_refused),
    ("check_hardlinks_preserved", check_hardlinks_preserved),
    (
        "check_hardlinks_kept_through_writes",
        check_hardlinks_kept_through_writes,
    ),
    ("check_symlinks_preserved", check_symlinks_preserved),
    (
        "check_special_files_preserved",
        check_special_files_preserved,
    ),
    ("check_modes_preserved", check_modes_preserved),
    ("check_owners_preserved", check_owners_preserved),
    ("check_mtimes_preserved", check_mtimes_preserved),
    ("check_xattrs_preserved", check_xattrs_preserved),
    (
        "check_differ_sees_xattrs_past_symlinks",
        check_differ_sees_xattrs_past_symlinks,
    ),
    ("check_deep_chain", check_deep_chain),
    (
        "check_materialize_is_independent",
        check_materialize_is_independent,
    ),
    (
        "check_differ_sees_child_changes",
        check_differ_sees_child_changes,
    ),
];

/// Runs every check, each on a fresh snapshotter from `make`.
pub fn run_all(make: &dyn Fn() -> Fixture) {
    for (name, check) in CHECKS {
        eprintln!("snapshotter suite: {name}");
        check(&*make().snapshotter);
    }
}

// ---- helpers -------------------------------------------------------------

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, content).unwrap();
}

fn read(root: &Path, rel: &str) -> Option<String> {
    fs::read_to_string(root.join(rel)).ok()
}

/// Prepares `key` from `parent`, lets `build` write into it, commits it as
/// `name`.
fn commit_with(sn: &dyn Snapshotter, name: &str, parent: Option<&str>, build: impl FnOnce(&Path)) {
    let key = format!("{name}-active");
    let root = sn.prepare(&key, parent).unwrap();
    build(&root);
    sn.commit(name, &key, &Labels::new()).unwrap();
}

/// What the backend's differ lists between the committed `parent` and
/// `child`, whose trees are `parent_root` and `child_root` (their views).
fn changes_between(
    sn: &dyn Snapshotter,
    (parent, parent_root): (&str, &Path),
    (child, child_root): (&str, &Path),
) -> Vec<crate::diff::Change> {
    sn.differ()
        .changes(
            Some(crate::diff::SnapshotRef {
                name: parent,
                root: parent_root,
            }),
            crate::diff::SnapshotRef {
                name: child,
                root: child_root,
            },
        )
        .unwrap()
}

#[track_caller]
fn assert_err(r: Result<impl std::fmt::Debug, SnapshotError>, want: fn(&SnapshotError) -> bool) {
    match r {
        Err(e) if want(&e) => {}
        other => panic!("unexpected result: {other:?}"),
    }
}

// ---- bookkeeping checks --------------------------------------------------

/// `materialize` (what `jbuild create` makes a jail root with) gives a tree
/// with the snapshot's content, which can change without touching it.
pub fn check_materialize_is_independent(sn: &dyn Snapshotter) {
    commit_with(sn, "m-base", None, |r| write(r, "etc/motd", "base"));
    commit_with(sn, "m-top", Some("m-base"), |r| {
        write(r, "etc/rc.conf", "x=1")
    });
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("jail");
    sn.materialize("m-top", &dest).unwrap();
    assert_eq!(read(&dest, "etc/motd").as_deref(), Some("base"));
    assert_eq!(read(&dest, "etc/rc.conf").as_deref(), Some("x=1"));
    write(&dest, "etc/motd", "changed in the jail");
    let view = sn.view("m-top").unwrap();
    assert_eq!(read(&view, "etc/motd").as_deref(), Some("base"));
    assert_err(
        sn.materialize("m-missing", &tmp.path().join("other")),
        |e| matches!(e, SnapshotError::NotFound(_)),
    );
}

pub fn check_prepare_empty_commit_view(sn: &dyn Snapshotter) {
    let root = sn.prepare("k", None).unwrap();
    assert!(root.is_dir());
    assert_eq!(
        fs::read_dir(&root).unwrap().count(),
        0,
        "an empty prepare is empty"
    );
    write(&root, "etc/motd", "hi");
    sn.commit("base", "k", &labels(&[("jbuild:key", "k1")]))
        .unwrap();
    assert_eq!(sn.stat("k").unwrap(), None, "the key is gone after commit");
    let info = sn.stat("base").unwrap().unwrap();
    assert_eq!((info.kind, info.parent), (Kind::Committed, None));
    assert_eq!(
        read(&sn.view("base").unwrap(), "etc/motd").as_deref(),
        Some("hi")
    );
    let names: Vec<String> = sn.list().unwrap().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["base"]);
}

pub fn check_view_of_active_refused(sn: &dyn Snapshotter) {
    sn.prepare("k", None).unwrap();
    assert_err(sn.view("k"), |e| {
        matches!(
            e,
            SnapshotError::WrongKind {
                actual: Kind::Active,
                ..
            }
        )
    });
    assert_err(sn.view("missing"), |e| {
        matches!(e, SnapshotError::NotFound(_))
    });
}

pub fn check_commit_unknown_key(sn: &dyn Snapshotter) {
    assert_err(sn.commit("n", "no-such-key", &Labels::new()), |e| {
        matches!(e, SnapshotError::NotFound(_))
    });
    commit_with(sn, "base", None, |_| {});
    assert_err(sn.commit("n", "base", &Labels::new()), |e| {
        matches!(
            e,
            SnapshotError::WrongKind {
                actual: Kind::Committed,
                wanted: Kind::Active,
                ..
            }
        )
    });
    assert_eq!(sn.stat("n").unwrap(), None);
}

pub fn check_commit_existing_name_keeps_key(sn: &dyn Snapshotter) {
    commit_with(sn, "n", None, |r| write(r, "f", "first"));
    let root = sn.prepare("k2", None).unwrap();
    write(&root, "f", "second");
    assert_err(sn.commit("n", "k2", &Labels::new()), |e| {
        matches!(e, SnapshotError::AlreadyExists(_))
    });
    let info = sn.stat("k2").unwrap().expect("the key stays");
    assert_eq!(info.kind, Kind::Active);
    assert_eq!(
        read(&root, "f").as_deref(),
        Some("second"),
        "and its content with it"
    );
    assert_eq!(read(&sn.view("n").unwrap(), "f").as_deref(), Some("first"));
    sn.commit("n2", "k2", &Labels::new()).unwrap();
    assert_eq!(
        read(&sn.view("n2").unwrap(), "f").as_deref(),
        Some("second")
    );
}

pub fn check_prepare_missing_parent(sn: &dyn Snapshotter) {
    assert_err(sn.prepare("k", Some("nope")), |e| {
        matches!(e, SnapshotError::NotFound(_))
    });
    assert_eq!(sn.stat("k").unwrap(), None, "nothing is left behind");
    assert!(sn.list().unwrap().is_empty());
}

pub fn check_prepare_active_parent_refused(sn: &dyn Snapshotter) {
    sn.prepare("a", None).unwrap();
    assert_err(sn.prepare("b", Some("a")), |e| {
        matches!(
            e,
            SnapshotError::WrongKind {
                actual: Kind::Active,
                wanted: Kind::Committed,
                ..
            }
        )
    });
    assert_eq!(sn.stat("b").unwrap(), None);
}

pub fn check_prepare_existing_key_refused(sn: &dyn Snapshotter) {
    sn.prepare("k", None).unwrap();
    assert_err(sn.prepare("k", None), |e| {
        matches!(e, SnapshotError::AlreadyExists(_))
    });
    sn.commit("n", "k", &Labels::new()).unwrap();
    // Keys and names share one namespace.
    assert_err(sn.prepare("n", None), |e| {
        matches!(e, SnapshotError::AlreadyExists(_))
    });
}

pub fn check_remove_parent_with_children_refused(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |r| write(r, "f", "x"));
    sn.prepare("child", Some("base")).unwrap();
    assert_err(
        sn.remove("base"),
        |e| matches!(e, SnapshotError::HasChildren { children, .. } if children.contains("child")),
    );
    sn.commit("child-c", "child", &Labels::new()).unwrap();
    assert_err(sn.remove("base"), |e| {
        matches!(e, SnapshotError::HasChildren { .. })
    });
    assert_eq!(
        read(&sn.view("base").unwrap(), "f").as_deref(),
        Some("x"),
        "a refused remove changes nothing"
    );
    sn.remove("child-c").unwrap();
    sn.remove("base").unwrap();
    assert!(sn.list().unwrap().is_empty());
}

pub fn check_remove_active(sn: &dyn Snapshotter) {
    let root = sn.prepare("k", None).unwrap();
    write(&root, "a/b/c", "x");
    let ro = root.join("a/ro");
    fs::create_dir(&ro).unwrap();
    write(&ro, "inside", "x");
    fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
    sn.remove("k").unwrap();
    assert_eq!(sn.stat("k").unwrap(), None);
    assert!(sn.list().unwrap().is_empty());
    assert_err(sn.remove("k"), |e| matches!(e, SnapshotError::NotFound(_)));
    sn.prepare("k", None).unwrap();
}

pub fn check_remove_committed(sn: &dyn Snapshotter) {
    commit_with(sn, "n", None, |r| write(r, "f", "old"));
    sn.remove("n").unwrap();
    assert_eq!(sn.stat("n").unwrap(), None);
    assert_err(sn.view("n"), |e| matches!(e, SnapshotError::NotFound(_)));
    commit_with(sn, "n", None, |r| write(r, "g", "new"));
    let view = sn.view("n").unwrap();
    assert_eq!(
        (read(&view, "f"), read(&view, "g").as_deref()),
        (None, Some("new")),
        "the name is reused cleanly"
    );
}

pub fn check_labels_persist_and_merge(sn: &dyn Snapshotter) {
    sn.prepare("k", None).unwrap();
    assert_err(sn.set_labels("k", &labels(&[("a", "1")])), |e| {
        matches!(e, SnapshotError::WrongKind { .. })
    });
    sn.commit("n", "k", &labels(&[("a", "1"), ("b", "2")]))
        .unwrap();
    assert_eq!(
        sn.stat("n").unwrap().unwrap().labels,
        labels(&[("a", "1"), ("b", "2")])
    );
    sn.set_labels("n", &labels(&[("b", "3"), ("jbuild:diffid", "sha256:00")]))
        .unwrap();
    let want = labels(&[("a", "1"), ("b", "3"), ("jbuild:diffid", "sha256:00")]);
    assert_eq!(sn.stat("n").unwrap().unwrap().labels, want);
    assert_eq!(sn.list().unwrap()[0].labels, want);
    assert_err(sn.set_labels("missing", &Labels::new()), |e| {
        matches!(e, SnapshotError::NotFound(_))
    });
    // Removing labels keeps the others; one the snapshot lacks is no error.
    sn.remove_labels("n", &["jbuild:diffid".into(), "a".into(), "absent".into()])
        .unwrap();
    assert_eq!(sn.stat("n").unwrap().unwrap().labels, labels(&[("b", "3")]));
    sn.remove_labels("n", &["jbuild:diffid".into()]).unwrap();
    assert_eq!(sn.list().unwrap()[0].labels, labels(&[("b", "3")]));
    assert_err(sn.remove_labels("missing", &["b".into()]), |e| {
        matches!(e, SnapshotError::NotFound(_))
    });
}

pub fn check_stat_missing_is_none(sn: &dyn Snapshotter) {
    assert_eq!(sn.stat("missing").unwrap(), None);
    commit_with(sn, "n", None, |_| {});
    assert_eq!(sn.stat("missing").unwrap(), None);
}

pub fn check_list_kinds_and_parents(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |_| {});
    commit_with(sn, "c1", Some("base"), |_| {});
    sn.prepare("a1", Some("c1")).unwrap();
    sn.prepare("a2", None).unwrap();
    let got: Vec<(String, Kind, Option<String>)> = sn
        .list()
        .unwrap()
        .into_iter()
        .map(|i| (i.name, i.kind, i.parent))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        vec![
            (s("a1"), Kind::Active, Some(s("c1"))),
            (s("a2"), Kind::Active, None),
            (s("base"), Kind::Committed, None),
            (s("c1"), Kind::Committed, Some(s("base"))),
        ]
    );
    assert_eq!(
        sn.stat("a1").unwrap().unwrap().parent.as_deref(),
        Some("c1")
    );
}

pub fn check_invalid_names_refused(sn: &dyn Snapshotter) {
    commit_with(sn, "good:name_1.0-x", None, |_| {});
    sn.prepare("key", None).unwrap();
    let long = "a".repeat(201);
    for bad in [
        "",
        "..",
        "../x",
        "a/b",
        ".hidden",
        "-x",
        "a b",
        "a\0b",
        "é",
        long.as_str(),
    ] {
        let invalid = |e: &SnapshotError| matches!(e, SnapshotError::InvalidName(_));
        assert_err(sn.prepare(bad, None), invalid);
        assert_err(sn.prepare("k2", Some(bad)), invalid);
        assert_err(sn.commit(bad, "key", &Labels::new()), invalid);
        assert_err(sn.commit("n", bad, &Labels::new()), invalid);
        assert_err(sn.view(bad), invalid);
        assert_err(sn.stat(bad), invalid);
        assert_err(sn.set_labels(bad, &Labels::new()), invalid);
        assert_err(sn.remove(bad), invalid);
    }
    assert_eq!(sn.list().unwrap().len(), 2, "nothing was created");
}
