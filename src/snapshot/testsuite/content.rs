//! Checks on what is inside snapshots: layers stack, children are
//! independent of parents, and `prepare` keeps every kind of file and
//! every piece of metadata a layer can carry.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use filetime::FileTime;

use super::{changes_between, commit_with, read, write};
use crate::diff::ChangeKind;
use crate::snapshot::{SnapshotError, Snapshotter};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Commits `base` built by `build`, prepares a child of it and checks that
/// the child's tree is the base's in every detail. Returns both roots.
fn faithful(sn: &dyn Snapshotter, build: impl FnOnce(&Path)) -> (PathBuf, PathBuf) {
    commit_with(sn, "base", None, build);
    let child = sn.prepare("child", Some("base")).unwrap();
    let base = sn.view("base").unwrap();
    assert_same_tree(&base, &child, Path::new("."));
    (base, child)
}

/// Type, mode, owner, size, link count, mtime (ns), content, link target,
/// device number and `user.*` xattrs of every entry.
#[track_caller]
fn assert_same_tree(a: &Path, b: &Path, rel: &Path) {
    let (ma, mb) = (
        fs::symlink_metadata(a).unwrap(),
        fs::symlink_metadata(b).unwrap(),
    );
    let what = rel.display();
    assert_eq!(ma.file_type(), mb.file_type(), "{what}: type");
    assert_eq!(
        ma.mode(),
        mb.mode(),
        "{what}: mode {:o} vs {:o}",
        ma.mode(),
        mb.mode()
    );
    assert_eq!((ma.uid(), ma.gid()), (mb.uid(), mb.gid()), "{what}: owner");
    assert_eq!(
        (ma.mtime(), ma.mtime_nsec()),
        (mb.mtime(), mb.mtime_nsec()),
        "{what}: mtime"
    );
    assert_eq!(user_xattrs(a), user_xattrs(b), "{what}: xattrs");
    let ft = ma.file_type();
    if !ft.is_dir() {
        assert_eq!(
            (ma.len(), ma.nlink()),
            (mb.len(), mb.nlink()),
            "{what}: size, links"
        );
    }
    if ft.is_symlink() {
        assert_eq!(
            fs::read_link(a).unwrap(),
            fs::read_link(b).unwrap(),
            "{what}: target"
        );
    } else if ft.is_file() {
        assert!(
            fs::read(a).unwrap() == fs::read(b).unwrap(),
            "{what}: content"
        );
    } else if ft.is_char_device() || ft.is_block_device() {
        assert_eq!(ma.rdev(), mb.rdev(), "{what}: device");
    } else if ft.is_dir() {
        let names = |p: &Path| {
            let mut v: Vec<_> = fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            v.sort();
            v
        };
        let (na, nb) = (names(a), names(b));
        assert_eq!(na, nb, "{what}: entries");
        for n in na {
            assert_same_tree(&a.join(&n), &b.join(&n), &rel.join(&n));
        }
    }
}

fn user_xattrs(p: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut v: Vec<_> = xattr::list(p)
        .map(|names| {
            names
                .filter(|n| n.to_string_lossy().starts_with("user."))
                .map(|n| {
                    (
                        n.to_string_lossy().into_owned(),
                        xattr::get(p, &n).ok().flatten(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn set_mtime(p: &Path, secs: i64, nanos: u32) {
    filetime::set_symlink_file_times(
        p,
        FileTime::from_unix_time(secs, nanos),
        FileTime::from_unix_time(secs, nanos),
    )
    .unwrap();
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

// ---- layers ---------------------------------------------------------------

pub fn check_file_deleted_in_child(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |r| {
        write(r, "etc/a", "a");
        write(r, "etc/b", "b");
    });
    commit_with(sn, "child", Some("base"), |r| {
        fs::remove_file(r.join("etc/a")).unwrap()
    });
    let child = sn.view("child").unwrap();
    assert_eq!(
        (read(&child, "etc/a"), read(&child, "etc/b").as_deref()),
        (None, Some("b"))
    );
    assert_eq!(
        read(&sn.view("base").unwrap(), "etc/a").as_deref(),
        Some("a"),
        "still in the parent"
    );
}

pub fn check_dir_removed_from_lower(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |r| {
        write(r, "d/x/y/z", "deep");
        write(r, "d/keep", "k");
    });
    commit_with(sn, "removed", Some("base"), |r| {
        fs::remove_dir_all(r.join("d/x")).unwrap()
    });
    // Re-creating the directory must not bring back what was under it.
    commit_with(sn, "readded", Some("removed"), |r| write(r, "d/x/new", "n"));
    let removed = sn.view("removed").unwrap();
    assert!(!removed.join("d/x").exists());
    assert_eq!(read(&removed, "d/keep").as_deref(), Some("k"));
    let readded = sn.view("readded").unwrap();
    let names: Vec<_> = fs::read_dir(readded.join("d/x"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["new"]);
    assert_eq!(
        read(&sn.view("base").unwrap(), "d/x/y/z").as_deref(),
        Some("deep")
    );
}

pub fn check_parent_unchanged_by_child_writes(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |r| {
        write(r, "f", "parent");
        write(r, "d/g", "parent");
        set_mtime(&r.join("f"), 1_500_000_000, 1);
    });
    let base = sn.view("base").unwrap();
    let dir_mode = fs::metadata(base.join("d")).unwrap().mode();
    let child = sn.prepare("child", Some("base")).unwrap();
    fs::write(child.join("f"), "child").unwrap();
    fs::write(child.join("d/g"), "child").unwrap();
    fs::create_dir(child.join("new")).unwrap();
    chmod(&child.join("d"), 0o700);
    assert_eq!(read(&child, "f").as_deref(), Some("child"));
    assert_eq!(read(&base, "f").as_deref(), Some("parent"));
    assert_eq!(read(&base, "d/g").as_deref(), Some("parent"));
    assert!(!base.join("new").exists());
    assert_eq!(fs::metadata(base.join("d")).unwrap().mode(), dir_mode);
    assert_eq!(fs::metadata(base.join("f")).unwrap().mtime(), 1_500_000_000);
}

pub fn check_deep_chain(sn: &dyn Snapshotter) {
    let name = |i: usize| format!("level-{i}");
    for i in 0..10usize {
        let parent = i.checked_sub(1).map(name);
        commit_with(sn, &name(i), parent.as_deref(), |r| {
            write(r, &format!("layer-{i}"), &i.to_string());
            write(r, "counter", &i.to_string());
            if i >= 2 {
                fs::remove_file(r.join(format!("layer-{}", i - 2))).unwrap();
            }
        });
    }
    for i in 0..10 {
        let view = sn.view(&name(i)).unwrap();
        let mut names: Vec<String> = fs::read_dir(&view)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let mut want = vec!["counter".to_string(), format!("layer-{i}")];
        if i >= 1 {
            want.push(format!("layer-{}", i - 1));
        }
        want.sort();
        assert_eq!(names, want, "level {i}");
        assert_eq!(read(&view, "counter"), Some(i.to_string()));
        assert_eq!(
            sn.stat(&name(i)).unwrap().unwrap().parent,
            i.checked_sub(1).map(name)
        );
    }
    assert!(matches!(
        sn.remove(&name(0)),
        Err(SnapshotError::HasChildren { .. })
    ));
    for i in (0..10).rev() {
        sn.remove(&name(i)).unwrap();
    }
    assert!(sn.list().unwrap().is_empty());
}

pub fn check_differ_sees_child_changes(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |r| {
        write(r, "a", "a");
        write(r, "b", "b");
        write(r, "d/c", "c");
    });
    commit_with(sn, "child", Some("base"), |r| {
        write(r, "a", "changed");
        fs::remove_file(r.join("b")).unwrap();
        write(r, "e", "e");
    });
    let (base, child) = (sn.view("base").unwrap(), sn.view("child").unwrap());
    let changes = changes_between(sn, ("base", &base), ("child", &child));
    let has = |p: &str, k: ChangeKind| {
        changes
            .iter()
            .any(|c| c.path == Path::new(p) && c.kind == k)
    };
    assert!(has("a", ChangeKind::Modified), "{changes:?}");
    assert!(has("b", ChangeKind::Deleted), "{changes:?}");
    assert!(has("e", ChangeKind::Added), "{changes:?}");
    assert!(
        !changes.iter().any(|c| c.path.starts_with("d")),
        "{changes:?}"
    );
}

// ---- what prepare keeps ---------------------------------------------------

pub fn check_hardlinks_preserved(sn: &dyn Snapshotter) {
    let (_, child) = faithful(sn, |r| {
        write(r, "bin/sh", "#!");
        fs::hard_link(r.join("bin/sh"), r.join("bin/rsh")).unwrap();
        write(r, "sbin/x", "");
        fs::hard_link(r.join("bin/sh"), r.join("sbin/x2")).unwrap();
        fs::hard_link(r.join("sbin/x"), r.join("sbin/x3")).unwrap();
    });
    let ino = |p: &str| fs::symlink_metadata(child.join(p)).unwrap().ino();
    assert_eq!(ino("bin/sh"), ino("bin/rsh"));
    assert_eq!(ino("bin/sh"), ino("sbin/x2"));
    assert_eq!(ino("sbin/x"), ino("sbin/x3"));
    assert_ne!(ino("bin/sh"), ino("sbin/x"));
    assert_eq!(
        fs::symlink_metadata(child.join("bin/sh")).unwrap().nlink(),
        3
    );
}

pub fn check_symlinks_preserved(sn: &dyn Snapshotter) {
    let (_, child) = faithful(sn, |r| {
        write(r, "usr/lib/libc.so.7", "elf");
        fs::create_dir_all(r.join("lib")).unwrap();
        std::os::unix::fs::symlink("../usr/lib/libc.so.7", r.join("lib/libc.so")).unwrap();
        std::os::unix::fs::symlink("/etc/absent", r.join("dangling")).unwrap();
        std::os::unix::fs::symlink("usr/lib", r.join("libdir")).unwrap();
        set_mtime(&r.join("dangling"), 1_234_567_890, 5);
    });
    assert_eq!(
        fs::read_link(child.join("dangling")).unwrap(),
        Path::new("/etc/absent")
    );
    assert!(fs::symlink_metadata(child.join("libdir"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(read(&child, "lib/libc.so").as_deref(), Some("elf"));
}

pub fn check_special_files_preserved(sn: &dyn Snapshotter) {
    let devices = is_root();
    let (_, child) = faithful(sn, |r| {
        nix::unistd::mkfifo(
            &r.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o640),
        )
        .unwrap();
        fs::create_dir(r.join("dev")).unwrap();
        if devices {
            let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
            let null = fs::metadata("/dev/null").unwrap().rdev() as _;
            if let Err(e) = nix::sys::stat::mknod(
                &r.join("dev/null"),
                nix::sys::stat::SFlag::S_IFCHR,
                mode,
                null,
            ) {
                eprintln!(
                    "check_special_files_preserved: no device nodes here ({e}); checked FIFOs only"
                );
            }
        }
    });
    assert!(fs::symlink_metadata(child.join("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
}

pub fn check_modes_preserved(sn: &dyn Snapshotter) {
    let modes = [
        ("suid", 0o4755),
        ("sgid", 0o2755),
        ("both", 0o6711),
        ("private", 0o600),
        ("ro", 0o444),
        ("none", 0),
    ];
    let (_, child) = faithful(sn, |r| {
        for (name, mode) in modes {
            write(r, name, name);
            chmod(&r.join(name), mode);
        }
        for (dir, mode) in [("tmp", 0o1777), ("shared", 0o2775), ("locked", 0o500)] {
            write(r, &format!("{dir}/inside"), "x");
            chmod(&r.join(dir), mode);
        }
    });
    for (name, mode) in modes {
        assert_eq!(
            fs::symlink_metadata(child.join(name)).unwrap().mode() & 0o7777,
            mode,
            "{name}"
        );
    }
    assert_eq!(
        fs::symlink_metadata(child.join("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
}

pub fn check_owners_preserved(sn: &dyn Snapshotter) {
    // A check either runs or fails (no quiet skip): the suite runs as root
    // in CI, where `tests/run` installs and runs everything.
    assert!(
        is_root(),
        "check_owners_preserved needs root to give files other owners: run the suite as root"
    );
    let own = |p: &Path, uid, gid| std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
    let (_, child) = faithful(sn, |r| {
        write(r, "home/u/file", "x");
        own(&r.join("home/u/file"), 1001, 1002);
        own(&r.join("home/u"), 1001, 0);
        write(r, "usr/bin/su", "x");
        own(&r.join("usr/bin/su"), 0, 5);
        chmod(&r.join("usr/bin/su"), 0o4750);
        std::os::unix::fs::symlink("file", r.join("home/u/link")).unwrap();
        own(&r.join("home/u/link"), 4321, 8765);
    });
    let md = |p: &str| fs::symlink_metadata(child.join(p)).unwrap();
    assert_eq!(
        (md("home/u/file").uid(), md("home/u/file").gid()),
        (1001, 1002)
    );
    assert_eq!(
        (md("home/u/link").uid(), md("home/u/link").gid()),
        (4321, 8765)
    );
    assert_eq!(
        md("usr/bin/su").mode() & 0o7777,
        0o4750,
        "setuid survives the chown"
    );
}

pub fn check_mtimes_preserved(sn: &dyn Snapshotter) {
    // A filesystem that keeps whole seconds (zfs-fuse) cannot hold
    // nanoseconds in any snapshot; then the child must match what it kept.
    let probe = sn.prepare("probe", None).unwrap();
    write(&probe, "f", "");
    set_mtime(&probe.join("f"), 1, 5);
    let ns_kept = fs::symlink_metadata(probe.join("f")).unwrap().mtime_nsec() == 5;
    sn.remove("probe").unwrap();
    if !ns_kept {
        eprintln!(
            "check_mtimes_preserved: this filesystem keeps whole seconds; nanoseconds not checked"
        );
    }
    let ns = |n: i64| if ns_kept { n } else { 0 };
    let (_, child) = faithful(sn, |r| {
        write(r, "d/e/f", "x");
        std::os::unix::fs::symlink("f", r.join("d/e/l")).unwrap();
        set_mtime(&r.join("d/e/f"), 1_000_000_000, 123_456_789);
        set_mtime(&r.join("d/e/l"), 1_000_000_001, 987_654_321);
        set_mtime(&r.join("d/e"), 1_000_000_002, 1);
        set_mtime(&r.join("d"), 1_000_000_003, 999_999_999);
        set_mtime(r, 1_000_000_004, 42);
    });
    let md = fs::symlink_metadata(child.join("d/e/f")).unwrap();
    assert_eq!(
        (md.mtime(), md.mtime_nsec()),
        (1_000_000_000, ns(123_456_789))
    );
    let md = fs::symlink_metadata(&child).unwrap();
    assert_eq!((md.mtime(), md.mtime_nsec()), (1_000_000_004, ns(42)));
}

pub fn check_xattrs_preserved(sn: &dyn Snapshotter) {
    let root = sn.prepare("probe", None).unwrap();
    write(&root, "f", "");
    if let Err(e) = xattr::set(root.join("f"), "user.jbuild.probe", b"1") {
        panic!(
            "check_xattrs_preserved: this backend's filesystem refuses user xattrs ({e}); \
             run the suite where it takes them (TMPDIR on ext4, xfs or tmpfs)"
        );
    }
    sn.remove("probe").unwrap();
    let (_, child) = faithful(sn, |r| {
        write(r, "etc/f", "x");
        xattr::set(r.join("etc/f"), "user.jbuild.a", b"value").unwrap();
        xattr::set(r.join("etc/f"), "user.jbuild.empty", b"").unwrap();
        xattr::set(r.join("etc"), "user.jbuild.dir", &[0, 1, 2, 255]).unwrap();
        chmod(&r.join("etc/f"), 0o444);
    });
    assert_eq!(
        xattr::get(child.join("etc/f"), "user.jbuild.a")
            .unwrap()
            .as_deref(),
        Some(&b"value"[..])
    );
    assert_eq!(
        xattr::get(child.join("etc"), "user.jbuild.dir")
            .unwrap()
            .as_deref(),
        Some(&[0, 1, 2, 255][..])
    );
}

/// A layer carries the xattrs a step set, whatever else the trees hold: on
/// zfs-fuse, listing a symlink's xattrs on a read-only mount used to fail
/// with ENOSYS, after which the kernel listed none on that mount at all,
/// and the tree walk (which meets `a`, a symlink, before `d`) exported the
/// layer without them.
pub fn check_differ_sees_xattrs_past_symlinks(sn: &dyn Snapshotter) {
    commit_with(sn, "base", None, |r| {
        std::os::unix::fs::symlink("d/f", r.join("a")).unwrap();
        write(r, "d/f", "f");
    });
    commit_with(sn, "child", Some("base"), |r| {
        xattr::set(r.join("d/f"), "user.jbuild.a", b"value").unwrap();
    });
    let (base, child) = (sn.view("base").unwrap(), sn.view("child").unwrap());
    let changes = changes_between(sn, ("base", &base), ("child", &child));
    let got: Vec<(PathBuf, ChangeKind)> = changes.into_iter().map(|c| (c.path, c.kind)).collect();
    assert_eq!(got, [(PathBuf::from("d/f"), ChangeKind::Modified)]);
}
