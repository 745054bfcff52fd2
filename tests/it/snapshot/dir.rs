//! The snapshotter conformance suite on the `dir` backend.

use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::testsuite::Fixture;

fn make() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let sn = DirSnapshotter::new(tmp.path().join("snapshots")).unwrap();
    Fixture::new(Box::new(sn), tmp)
}

jbuild::snapshotter_suite!(make);

/// The same suite on the `overlay` backend (Linux, as root; and in a user
/// namespace: `overlay_userns`).
mod overlay {
    use jbuild::blame::Blame;
    use jbuild::snapshot::overlay::OverlaySnapshotter;
    use jbuild::snapshot::testsuite::{Fixture, UnmountOnDrop};

    fn make() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let sn = OverlaySnapshotter::new(tmp.path().join("snapshots")).unwrap();
        crate::snapshot::overlay_userns::expect_flavour(&sn);
        Fixture::new(Box::new(sn), (UnmountOnDrop(tmp.path().to_path_buf()), tmp))
    }

    jbuild::snapshotter_suite!(make);

    /// 200 layers named like chain IDs (`lowerdir=` would need ~22 KB, the
    /// kernel takes one page): every tree is right, and so is every layer's
    /// diff, including those stacked on a flattened copy.
    #[test]
    fn two_hundred_layers_stay_mountable_by_flattening() {
        use std::fs;
        use std::path::Path;

        use jbuild::diff::{ChangeKind, SnapshotRef};
        use jbuild::snapshot::{Labels, Snapshotter};

        let tmp = tempfile::tempdir().unwrap();
        let _unmount = UnmountOnDrop(tmp.path().to_path_buf());
        let sn = OverlaySnapshotter::new(tmp.path().join("snapshots")).unwrap();
        crate::snapshot::overlay_userns::expect_flavour(&sn);
        let name = |i: usize| format!("chain-sha256:{i:064x}");
        for i in 0..200usize {
            let parent = i.checked_sub(1).map(name);
            let root = sn.prepare("active", parent.as_deref()).unwrap();
            fs::write(root.join(format!("layer-{i}")), i.to_string()).unwrap();
            fs::write(root.join("counter"), i.to_string()).unwrap();
            if i >= 2 {
                fs::remove_file(root.join(format!("layer-{}", i - 2))).unwrap();
            }
            sn.commit(&name(i), "active", &Labels::new()).unwrap();
        }
        let committed = tmp.path().join("snapshots/committed");
        let flats = (0..200)
            .filter(|&i| committed.join(name(i)).join("flat").is_dir())
            .count();
        println!("200 layers: {flats} flattened copies");
        assert!((1..10).contains(&flats), "{flats} flattened copies");

        // Mounts name layers by short links; one a crash did not make is
        // made when a mount needs it.
        let links = tmp.path().join("snapshots/l");
        assert_eq!(fs::read_dir(&links).unwrap().count(), 200);
        for e in fs::read_dir(&links).unwrap().take(100) {
            fs::remove_file(e.unwrap().path()).unwrap();
        }

        let top = sn.view(&name(199)).unwrap();
        let mut names: Vec<String> = fs::read_dir(&top)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["counter", "layer-198", "layer-199"]);
        assert_eq!(fs::read_to_string(top.join("counter")).unwrap(), "199");

        let differ = sn.differ();
        for i in 2..200 {
            let (p, c) = (sn.view(&name(i - 1)).unwrap(), sn.view(&name(i)).unwrap());
            let (pn, cn) = (name(i - 1), name(i));
            let got: Vec<(String, ChangeKind)> = differ
                .changes(
                    Some(SnapshotRef {
                        name: &pn,
                        root: &p,
                    }),
                    SnapshotRef {
                        name: &cn,
                        root: &c,
                    },
                )
                .unwrap()
                .into_iter()
                .map(|c| (c.path.display().to_string(), c.kind))
                .collect();
            let want = vec![
                (format!("layer-{}", i - 2), ChangeKind::Deleted),
                ("counter".to_string(), ChangeKind::Modified),
                (format!("layer-{i}"), ChangeKind::Added),
            ];
            assert_eq!(got, want, "layer {i}");
            assert!(Path::new(&c).exists());
        }
    }

    /// Where the kernel keeps an inode index (root) a step that changes
    /// one name of a lower hard-linked file commits with the names kept one
    /// file (the suite's `check_hardlinks_kept_through_writes`). Where it
    /// keeps none (a user namespace, run by `overlay_userns`) such a step
    /// is refused at commit, naming both paths and what to do, rather than
    /// committing a tree `dir` would not make; a step that leaves them
    /// alone commits there as anywhere.
    #[test]
    fn a_hard_link_changed_without_an_index_is_refused_at_commit() {
        use std::fs;
        use std::io::Write;
        use std::os::unix::fs::MetadataExt;

        use jbuild::snapshot::overlay::Flavour;
        use jbuild::snapshot::{Labels, SnapshotError, Snapshotter};

        let tmp = tempfile::tempdir().unwrap();
        let _unmount = UnmountOnDrop(tmp.path().to_path_buf());
        let sn = OverlaySnapshotter::new(tmp.path().join("snapshots")).unwrap();
        crate::snapshot::overlay_userns::expect_flavour(&sn);
        let root = sn.prepare("base-active", None).unwrap();
        fs::create_dir(root.join("etc")).unwrap();
        fs::write(root.join("etc/a"), "a\n").unwrap();
        fs::hard_link(root.join("etc/a"), root.join("etc/b")).unwrap();
        sn.commit("base", "base-active", &Labels::new()).unwrap();

        let other = sn.prepare("other-active", Some("base")).unwrap();
        fs::write(other.join("etc/c"), "c").unwrap();
        sn.commit("other", "other-active", &Labels::new()).unwrap();

        let step = sn.prepare("step-active", Some("base")).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(step.join("etc/a"))
            .unwrap()
            .write_all(b"changed\n")
            .unwrap();
        let committed = sn.commit("step", "step-active", &Labels::new());
        match sn.flavour().0 {
            Flavour::Trusted => {
                committed.unwrap();
                let view = sn.view("step").unwrap();
                let md = |n: &str| fs::symlink_metadata(view.join(n)).unwrap();
                assert_eq!(md("etc/a").ino(), md("etc/b").ino());
                assert_eq!(
                    fs::read_to_string(view.join("etc/b")).unwrap(),
                    "a\nchanged\n"
                );
            }
            Flavour::UserXattr => {
                let e = committed.unwrap_err();
                let said = e.to_string();
                assert!(matches!(e, SnapshotError::Unsupported(_)), "{e:?}");
                assert!(
                    e.is_user_error(),
                    "the environment's limit, the user's to answer"
                );
                for part in ["/etc/a", "/etc/b", "as root", "--backend dir"] {
                    assert!(said.contains(part), "{part}: {said}");
                }
                // Still active, and removable as any failed step.
                sn.remove("step-active").unwrap();
            }
        }
    }
}

// ---- the copy under `prepare`: reflinks, copy_file_range, the fallback ----

mod reflink {
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use jbuild::diff::walk::TreeWalkDiffer;
    use jbuild::diff::{Differ, SnapshotRef};
    use jbuild::layer::{write_tar, TarOptions};
    use jbuild::snapshot::dir::{copy_tree_with, CopyCounts, DirSnapshotter, FileCopy};
    use jbuild::snapshot::Snapshotter;

    use crate::support::common::noise;

    /// A loop-mounted XFS with reflinks (`mkfs.xfs -m reflink=1`, Debian's
    /// xfsprogs) in a temporary directory, unmounted when dropped.
    struct Xfs {
        mnt: PathBuf,
        _tmp: tempfile::TempDir,
    }

    impl Xfs {
        fn new() -> Xfs {
            // Mounting an XFS image needs root.
            crate::support::lane::require(crate::support::lane::Lane::Root);
            let tmp = tempfile::tempdir().unwrap();
            let (img, mnt) = (tmp.path().join("xfs.img"), tmp.path().join("mnt"));
            // Sparse: costs the disk only what the test writes.
            fs::File::create(&img).unwrap().set_len(512 << 20).unwrap();
            fs::create_dir(&mnt).unwrap();
            run(Command::new("mkfs.xfs")
                .args(["-q", "-m", "reflink=1"])
                .arg(&img));
            run(Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(&mnt));
            Xfs { mnt, _tmp: tmp }
        }
    }

    impl Drop for Xfs {
        fn drop(&mut self) {
            // `-d`: the loop device goes with the mount.
            let _ = Command::new("umount").arg("-d").arg(&self.mnt).status();
        }
    }

    #[track_caller]
    fn run(cmd: &mut Command) -> String {
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Whether every extent of `path` is shared with another file, from
    /// the kernel's FIEMAP flags as `filefrag -v` prints them.
    fn all_extents_shared(path: &Path) -> bool {
        let out = run(Command::new("filefrag").arg("-v").arg(path));
        let extents: Vec<&str> = out
            .lines()
            .filter(|l| {
                l.trim_start()
                    .split(':')
                    .next()
                    .is_some_and(|n| n.trim().parse::<u32>().is_ok())
            })
            .collect();
        assert!(!extents.is_empty(), "no extents listed:\n{out}");
        extents.iter().all(|l| l.contains("shared"))
    }

    /// One of each kind of entry the copy handles, with metadata a layer
    /// carries; three regular files of different sizes (one empty).
    fn varied_tree(root: &Path) -> u64 {
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::write(root.join("usr/bin/big"), noise(3 << 20, 7)).unwrap();
        fs::write(root.join("usr/bin/small"), b"#!/bin/sh\necho hi\n").unwrap();
        fs::write(root.join("empty"), b"").unwrap();
        fs::hard_link(root.join("usr/bin/small"), root.join("usr/bin/again")).unwrap();
        symlink("bin/small", root.join("usr/link")).unwrap();
        nix::unistd::mkfifo(&root.join("fifo"), nix::sys::stat::Mode::S_IRUSR).unwrap();
        xattr::set(root.join("usr/bin/big"), "user.note", b"kept").unwrap();
        fs::set_permissions(
            root.join("usr/bin/small"),
            fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        std::os::unix::fs::chown(root.join("usr/bin/big"), Some(123), Some(456)).unwrap();
        for (i, p) in [
            "usr/bin/big",
            "usr/bin/small",
            "empty",
            "usr/bin",
            "usr",
            ".",
        ]
        .iter()
        .enumerate()
        {
            let t = filetime::FileTime::from_unix_time(1_600_000_000 + i as i64, 123_456_789);
            filetime::set_symlink_file_times(root.join(p), t, t).unwrap();
        }
        3
    }

    /// The layer the tree walk exports for `root` against nothing, mtimes
    /// unclamped: equal layers, equal trees in everything a layer carries.
    fn layer(root: &Path) -> Vec<u8> {
        let changes = TreeWalkDiffer::new()
            .changes(None, SnapshotRef { name: "t", root })
            .unwrap();
        let opts = TarOptions {
            clamp_mtime: u64::MAX,
        };
        write_tar(root, &changes, &opts, Vec::new()).unwrap()
    }

    /// On XFS with reflinks, `prepare` of the dir backend reflinks: the
    /// child's file shares every extent with its parent's, the disk
    /// barely notices a 64 MiB copy, and writing the child leaves the
    /// parent as it was.
    #[test]
    fn prepare_reflinks_on_xfs() {
        let xfs = Xfs::new();
        let sn = DirSnapshotter::new(xfs.mnt.join("snapshots")).unwrap();
        let data = noise(64 << 20, 3);
        let base = sn.prepare("base-active", None).unwrap();
        fs::write(base.join("blob"), &data).unwrap();
        sn.commit("base", "base-active", &Default::default())
            .unwrap();
        let parent = sn.view("base").unwrap().join("blob");
        assert!(
            !all_extents_shared(&parent),
            "nothing is shared before the copy"
        );

        let before = nix::sys::statvfs::statvfs(&xfs.mnt).unwrap();
        let child = sn.prepare("child", Some("base")).unwrap();
        let after = nix::sys::statvfs::statvfs(&xfs.mnt).unwrap();
        let used = (before.blocks_free() - after.blocks_free()) * before.fragment_size();
        assert!(
            all_extents_shared(&child.join("blob")),
            "the copy is a reflink"
        );
        assert!(all_extents_shared(&parent), "and so is the original");
        assert!(
            used < 4 << 20,
            "a 64 MiB reflinked copy took {used} bytes of the disk"
        );

        fs::write(child.join("blob"), b"changed").unwrap();
        assert!(
            fs::read(&parent).unwrap() == data,
            "the parent is untouched"
        );
    }

    /// The same tree whichever way the bytes went: reflink (XFS),
    /// `copy_file_range` (ext4, where `FICLONE` is refused), `read`/`write`
    /// (the fallback); each copy's layer is the source's, byte for byte.
    #[test]
    fn every_copy_method_gives_the_same_tree() {
        let xfs = Xfs::new();
        let ext4 = tempfile::tempdir().unwrap();
        for (fs_root, cheapest) in [
            (
                xfs.mnt.as_path(),
                CopyCounts {
                    reflinked: 3,
                    ..CopyCounts::default()
                },
            ),
            (
                ext4.path(),
                CopyCounts {
                    ranged: 3,
                    ..CopyCounts::default()
                },
            ),
        ] {
            let src = fs_root.join("src");
            fs::create_dir(&src).unwrap();
            let files = varied_tree(&src);
            let want = layer(&src);
            for (how, counts) in [
                (FileCopy::Cheapest, cheapest),
                (
                    FileCopy::ReadWrite,
                    CopyCounts {
                        read_write: files,
                        ..CopyCounts::default()
                    },
                ),
            ] {
                let dst = fs_root.join(format!("{how:?}"));
                let got = copy_tree_with(&src, &dst, how).unwrap();
                assert_eq!(got, counts, "{how:?} on {}", fs_root.display());
                assert!(
                    layer(&dst) == want,
                    "{how:?} on {}: layers differ",
                    fs_root.display()
                );
            }
        }
    }
}
