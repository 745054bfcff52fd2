//! The ZFS differ on real OpenZFS, in the qemu lane (`tests/zfs-vm/lane.sh`
//! boots a guest with the OpenZFS module, makes a pool and runs this binary
//! there with `--ignored` and `JBUILD_TEST_ZFS_POOL` set). On the host every
//! test here is ignored with the reason "needs the qemu lane".
//!
//! Each test makes a parent and a child the way the ZFS snapshotter does
//! (`P/base@jbuild`, the child a clone of it, committed as `@jbuild`),
//! exports the layer through `ZfsDiffer` (which must really use `zfs
//! diff`) and through the tree walk, and asserts the two tars are the same
//! bytes.

use crate::support::layer as layer_support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use jbuild::diff::walk::TreeWalkDiffer;
use jbuild::diff::zfs::parse::{self, Change as ZChange, FileType, Format, Name};
use jbuild::diff::zfs::ZfsDiffer;
use jbuild::diff::{Differ, SnapshotRef};
use jbuild::layer::{tar::write_tar, TarOptions};
use layer_support::*;

fn pool() -> String {
    crate::support::lane::require(crate::support::lane::Lane::Qemu);
    std::env::var("JBUILD_TEST_ZFS_POOL").unwrap_or_else(|_| {
        panic!("JBUILD_TEST_ZFS_POOL is not set: these tests run in the qemu lane, `bash tests/zfs-vm/lane.sh`")
    })
}

fn zfs(args: &[&str]) -> Vec<u8> {
    let out = Command::new("zfs").args(args).output().expect("run zfs");
    assert!(
        out.status.success(),
        "zfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A parent dataset `P` of its own for one test, destroyed afterwards.
struct Ds {
    name: String,
}

impl Ds {
    fn new(test: &str) -> Ds {
        let name = format!("{}/{test}", pool());
        let _ = Command::new("zfs")
            .args(["destroy", "-r", "-f", &name])
            .stderr(std::process::Stdio::null())
            .status();
        zfs(&["create", &name]);
        Ds { name }
    }

    fn root(&self, snap: &str) -> PathBuf {
        let out = zfs(&[
            "get",
            "-H",
            "-o",
            "value",
            "mountpoint",
            &format!("{}/{snap}", self.name),
        ]);
        PathBuf::from(String::from_utf8(out).unwrap().trim())
    }

    /// `P/base`, built by `build`, committed.
    fn base(&self, build: impl FnOnce(&Path)) -> PathBuf {
        let ds = format!("{}/base", self.name);
        zfs(&["create", &ds]);
        let root = self.root("base");
        build(&root);
        zfs(&["snapshot", &format!("{ds}@jbuild")]);
        root
    }

    /// `P/<name>`, a clone of `P/<parent>@jbuild` changed by `change`,
    /// committed.
    fn child(&self, parent: &str, name: &str, change: impl FnOnce(&Path)) -> PathBuf {
        let ds = format!("{}/{name}", self.name);
        zfs(&["clone", &format!("{}/{parent}@jbuild", self.name), &ds]);
        let root = self.root(name);
        change(&root);
        zfs(&["snapshot", &format!("{ds}@jbuild")]);
        root
    }

    fn zfs_diff(&self, parent: &str, child: &str, flags: &str) -> Vec<u8> {
        let from = format!("{}/{parent}@jbuild", self.name);
        let to = format!("{}/{child}@jbuild", self.name);
        zfs(&["diff", flags, &from, &to])
    }
}

impl Drop for Ds {
    fn drop(&mut self) {
        let _ = Command::new("zfs")
            .args(["destroy", "-r", "-f", &self.name])
            .status();
    }
}

/// The layer from `parent` to `child` through both differs: asserts the
/// change lists and the tar bytes are equal, returns the summary.
fn both(ds: &Ds, parent: &str, child: &str) -> Vec<String> {
    let (proot, croot) = (ds.root(parent), ds.root(child));
    let p = SnapshotRef {
        name: parent,
        root: &proot,
    };
    let c = SnapshotRef {
        name: child,
        root: &croot,
    };
    let z = ZfsDiffer::new(&ds.name).changes_via_zfs(p, c).unwrap();
    let w = TreeWalkDiffer::new().changes(Some(p), c).unwrap();
    assert_eq!(
        summary(&z),
        summary(&w),
        "change lists differ (left: zfs diff)"
    );
    let opts = TarOptions {
        clamp_mtime: 4_000_000_000,
    };
    let tz = write_tar(&croot, &z, &opts, Vec::new()).unwrap();
    let tw = write_tar(&croot, &w, &opts, Vec::new()).unwrap();
    assert!(
        tz == tw,
        "the layers differ ({} and {} bytes)",
        tz.len(),
        tw.len()
    );
    summary(&z)
}

fn base_tree(root: &Path) {
    write(root, "etc/passwd", b"root:x:0:0\n");
    write(root, "etc/old", b"old\n");
    write(root, "bin/sh", b"#!shell");
    write(root, "usr/share/doc/a/README", b"a");
    write(root, "usr/share/doc/b", b"b");
    write(root, "var/cache/a", b"1");
    write(root, "var/cache/b", b"2");
    write(root, "x", b"file becomes dir");
    mkdir(root, "d/e");
    write(root, "d/e/f", b"dir becomes file");
    symlink("aaa", root.join("lnk")).unwrap();
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn no_change_is_an_empty_layer() {
    let ds = Ds::new("nochange");
    ds.base(base_tree);
    ds.child("base", "c", |_| {});
    assert!(both(&ds, "base", "c").is_empty());
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn add_modify_chmod_mtime_delete() {
    let ds = Ds::new("basic");
    ds.base(base_tree);
    ds.child("base", "c", |c| {
        write(c, "etc/new", b"n");
        write(c, "etc/passwd", b"root:x:0:1\n");
        chmod(&c.join("bin/sh"), 0o4755);
        set_mtime(&c.join("usr/share/doc/b"), 1_000_000, 5);
        fs::remove_file(c.join("var/cache/a")).unwrap();
        write(c, "new/deep/dir/file", b"deep");
    });
    let got = both(&ds, "base", "c");
    assert!(got.contains(&"A new/deep/dir/file".to_string()), "{got:?}");
    assert!(got.contains(&"D var/cache/a".to_string()), "{got:?}");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn renames_of_files_and_directories() {
    let ds = Ds::new("renames");
    ds.base(base_tree);
    ds.child("base", "c", |c| {
        fs::rename(c.join("etc/old"), c.join("etc/older")).unwrap();
        fs::rename(c.join("usr/share/doc"), c.join("usr/doc")).unwrap();
        fs::rename(c.join("var/cache/b"), c.join("bin/b")).unwrap();
    });
    let got = both(&ds, "base", "c");
    assert!(got.contains(&"A usr/doc/a/README".to_string()), "{got:?}");
    // usr/share held only doc: now it is opaque (and empty).
    assert!(got.contains(&"O usr/share".to_string()), "{got:?}");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn swapped_directories() {
    let ds = Ds::new("swap");
    ds.base(|r| {
        write(r, "a/x", b"from a");
        write(r, "b/x", b"from b, longer");
    });
    ds.child("base", "c", |c| {
        fs::rename(c.join("a"), c.join("t")).unwrap();
        fs::rename(c.join("b"), c.join("a")).unwrap();
        fs::rename(c.join("t"), c.join("b")).unwrap();
    });
    both(&ds, "base", "c");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn hard_links() {
    let ds = Ds::new("links");
    ds.base(|r| {
        write(r, "bin/sh", b"#!shell");
        write(r, "d/a", b"shared");
        fs::hard_link(r.join("d/a"), r.join("d/b")).unwrap();
        // One file with names in three directories, like FreeBSD's /rescue.
        write(r, "rescue/tool", b"multi");
        mkdir(r, "usr/bin");
        mkdir(r, "sbin");
        fs::hard_link(r.join("rescue/tool"), r.join("usr/bin/tool")).unwrap();
        fs::hard_link(r.join("rescue/tool"), r.join("sbin/tool")).unwrap();
        write(r, "keep", b"k");
        fs::hard_link(r.join("keep"), r.join("keep2")).unwrap();
    });
    // A link added to an unchanged file.
    ds.child("base", "add", |c| {
        fs::hard_link(c.join("bin/sh"), c.join("bin/sh2")).unwrap()
    });
    assert_eq!(both(&ds, "base", "add"), ["M bin", "M bin/sh", "A bin/sh2"]);
    // The group is completed: b dropped, c linked to a.
    ds.child("base", "group", |c| {
        fs::remove_file(c.join("d/b")).unwrap();
        fs::hard_link(c.join("d/a"), c.join("d/c")).unwrap();
    });
    assert_eq!(
        both(&ds, "base", "group"),
        ["M d", "D d/b", "M d/a", "A d/c"]
    );
    // A changed file with three names in three directories: zfs diff
    // names one of them.
    ds.child("base", "changed", |c| {
        fs::write(c.join("usr/bin/tool"), b"multi, rewritten").unwrap();
    });
    let got = both(&ds, "base", "changed");
    assert_eq!(got, ["M rescue/tool", "M sbin/tool", "M usr/bin/tool"]);
    // A link removed: only the directory and the survivor change.
    ds.child("base", "unlink", |c| {
        fs::remove_file(c.join("keep2")).unwrap()
    });
    both(&ds, "base", "unlink");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn symlinks() {
    let ds = Ds::new("symlinks");
    ds.base(base_tree);
    ds.child("base", "c", |c| {
        fs::remove_file(c.join("lnk")).unwrap();
        symlink("bbb", c.join("lnk")).unwrap();
        symlink("/etc/passwd", c.join("etc/abs")).unwrap();
        fs::remove_file(c.join("etc/old")).unwrap();
        symlink("passwd", c.join("etc/old")).unwrap();
        // A directory replaced by a symlink out of the tree.
        fs::remove_dir_all(c.join("usr/share/doc")).unwrap();
        symlink("/", c.join("usr/share/doc")).unwrap();
    });
    both(&ds, "base", "c");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn type_changes() {
    let ds = Ds::new("types");
    ds.base(base_tree);
    ds.child("base", "c", |c| {
        fs::remove_file(c.join("x")).unwrap();
        write(c, "x/y", b"y");
        fs::remove_dir_all(c.join("d")).unwrap();
        write(c, "d", b"now a file");
        nix::unistd::mkfifo(
            &c.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
    });
    let got = both(&ds, "base", "c");
    assert!(
        got.contains(&"M x".to_string()) && got.contains(&"M d".to_string()),
        "{got:?}"
    );
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn recreated_file() {
    let ds = Ds::new("recreate");
    ds.base(base_tree);
    ds.child("base", "c", |c| {
        fs::remove_file(c.join("etc/passwd")).unwrap();
        write(c, "etc/passwd", b"root:x:0:0\n");
    });
    let out = ds.zfs_diff("base", "c", "-HF");
    let recs = parse::parse(&out, &Format::jbuild(&ds.root("c"))).unwrap();
    let kinds: Vec<ZChange> = recs
        .iter()
        .filter(|r| r.name == Name::Path("etc/passwd".into()))
        .map(|r| r.change)
        .collect();
    assert_eq!(kinds, [ZChange::Removed, ZChange::Added], "{recs:?}");
    both(&ds, "base", "c");
}

fn odd_names(c: &Path) {
    write(c, "file with spaces.txt", b"s");
    write(c, "ünïcödé-日本.txt", b"u");
    write(c, "tab\there", b"t");
    write(c, "new\nline", b"n");
    write(c, "back\\slash", b"b");
    write(c, "-dash", b"d");
    write(c, "(on_delete_queue)", b"not really");
    write(c, "dir with space/inner", b"i");
    fs::write(c.join(std::ffi::OsStr::new("\u{7f}del")), b"x").unwrap();
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn escaped_names() {
    let ds = Ds::new("names");
    ds.base(base_tree);
    ds.child("base", "c", odd_names);
    let got = both(&ds, "base", "c");
    assert!(got.contains(&"A tab\there".to_string()), "{got:?}");
    assert!(got.contains(&"A new\nline".to_string()), "{got:?}");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn opaque_directories() {
    let ds = Ds::new("opaque");
    ds.base(base_tree);
    ds.child("base", "c", |c| {
        // Every entry replaced: opaque, plus what is new.
        fs::remove_dir_all(c.join("var/cache")).unwrap();
        write(c, "var/cache/fresh", b"f");
        // Emptied: opaque with nothing under it.
        fs::remove_file(c.join("usr/share/doc/b")).unwrap();
        fs::remove_dir_all(c.join("usr/share/doc/a")).unwrap();
    });
    let got = both(&ds, "base", "c");
    assert!(got.contains(&"O usr/share/doc".to_string()), "{got:?}");
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn chain_of_clones() {
    let ds = Ds::new("chain");
    ds.base(base_tree);
    ds.child("base", "c1", |c| drop(write(c, "etc/one", b"1")));
    ds.child("c1", "c2", |c| {
        write(c, "etc/two", b"2");
        fs::remove_file(c.join("etc/one")).unwrap();
    });
    assert_eq!(both(&ds, "c1", "c2"), ["M etc", "D etc/one", "A etc/two"]);
}

/// `zfs diff` on a dataset whose snapshot is not there fails: the differ
/// says why, and `changes` falls back to the tree walk.
#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn failing_zfs_diff_falls_back() {
    let ds = Ds::new("fallback");
    let root = ds.base(base_tree);
    let p = SnapshotRef {
        name: "base",
        root: &root,
    };
    let c = SnapshotRef {
        name: "nonexistent",
        root: &root,
    };
    let d = ZfsDiffer::new(&ds.name);
    let e = d.changes_via_zfs(p, c).unwrap_err().to_string();
    assert!(e.contains("zfs diff"), "{e}");
    assert!(d.changes(Some(p), c).unwrap().is_empty());
}

/// The parser against live output, escaped and with `-h`; the captures are
/// written to `$JBUILD_ZFS_CAPTURE_DIR` when that is set, for the fixtures.
#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn parser_reads_live_output() {
    let ds = Ds::new("live");
    ds.base(|r| {
        base_tree(r);
        write(r, "etc/old name", b"o");
    });
    ds.child("base", "c", |c| {
        odd_names(c);
        write(c, "etc/passwd", b"changed");
        fs::remove_file(c.join("var/cache/a")).unwrap();
        fs::rename(c.join("etc/old name"), c.join("etc/new näme")).unwrap();
        fs::hard_link(c.join("bin/sh"), c.join("bin/sh2")).unwrap();
        symlink("target", c.join("sym")).unwrap();
        mkdir(c, "newdir");
    });
    let mnt = ds.root("c");
    let escaped = ds.zfs_diff("base", "c", "-HF");
    let raw = ds.zfs_diff("base", "c", "-HFh");
    if let Some(dir) = std::env::var_os("JBUILD_ZFS_CAPTURE_DIR") {
        let dir = PathBuf::from(dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("live-escaped.txt"), &escaped).unwrap();
        fs::write(dir.join("live-h.txt"), &raw).unwrap();
        fs::write(
            dir.join("live-mountpoint.txt"),
            mnt.as_os_str().as_encoded_bytes(),
        )
        .unwrap();
    }
    let recs = parse::parse(&escaped, &Format::jbuild(&mnt)).unwrap();
    let has = |change: ZChange, t: FileType, name: &str| {
        recs.iter().any(|r| {
            r.change == change && r.file_type == Some(t) && r.name == Name::Path(name.into())
        })
    };
    assert!(
        has(ZChange::Added, FileType::File, "tab\there"),
        "{recs:#?}"
    );
    assert!(
        has(ZChange::Added, FileType::File, "new\nline"),
        "{recs:#?}"
    );
    assert!(
        has(ZChange::Added, FileType::File, "ünïcödé-日本.txt"),
        "{recs:#?}"
    );
    assert!(has(ZChange::Added, FileType::Symlink, "sym"), "{recs:#?}");
    assert!(has(ZChange::Added, FileType::Dir, "newdir"), "{recs:#?}");
    assert!(
        has(ZChange::Modified, FileType::File, "etc/passwd"),
        "{recs:#?}"
    );
    assert!(
        has(ZChange::Removed, FileType::File, "var/cache/a"),
        "{recs:#?}"
    );
    assert!(
        recs.iter().any(|r| r.change == ZChange::Renamed
            && r.name == Name::Path("etc/old name".into())
            && r.new_name == Some(Name::Path("etc/new näme".into()))),
        "{recs:#?}"
    );
    assert!(
        recs.iter()
            .any(|r| r.name == Name::Path("bin/sh".into()) && r.link_delta == Some(1)),
        "{recs:#?}"
    );
    assert!(recs.iter().any(|r| r.name == Name::Root), "{recs:#?}");
    // -h: a name with a tab or a newline cannot be read back, and the
    // parser says so rather than guess.
    let f = Format {
        raw_names: true,
        ..Format::jbuild(&mnt)
    };
    let e = parse::parse(&raw, &f).unwrap_err();
    assert!(
        e.reason.contains("unexpected field") || e.reason.contains("unknown change"),
        "{e}"
    );
    // Without such names, -h and escaped output say the same.
    ds.child("base", "plain", |c| {
        write(c, "file with spaces.txt", b"s");
        write(c, "ünïcödé-日本.txt", b"u");
        write(c, "back\\slash", b"b");
        fs::rename(c.join("etc/old name"), c.join("etc/new näme")).unwrap();
    });
    let mnt = ds.root("plain");
    let escaped = ds.zfs_diff("base", "plain", "-HF");
    let raw = ds.zfs_diff("base", "plain", "-HFh");
    if let Some(dir) = std::env::var_os("JBUILD_ZFS_CAPTURE_DIR") {
        let dir = PathBuf::from(dir);
        fs::write(dir.join("live-plain-escaped.txt"), &escaped).unwrap();
        fs::write(dir.join("live-plain-h.txt"), &raw).unwrap();
    }
    let f = Format {
        raw_names: true,
        ..Format::jbuild(&mnt)
    };
    let mut a = parse::parse(&escaped, &Format::jbuild(&mnt)).unwrap();
    let mut b = parse::parse(&raw, &f).unwrap();
    let key = |r: &parse::Record| format!("{r:?}");
    a.sort_by_key(key);
    b.sort_by_key(key);
    assert_eq!(a, b);
    assert!(
        escaped != raw,
        "the escaped output should differ from -h output"
    );
}

/// An object unlinked but still open when the snapshot was taken is on the
/// delete queue: `zfs diff` prints `(on_delete_queue)` for it (or nothing).
#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn unlinked_open_file() {
    let ds = Ds::new("deleteq");
    ds.base(base_tree);
    let ds_c = format!("{}/c", ds.name);
    zfs(&["clone", &format!("{}/base@jbuild", ds.name), &ds_c]);
    let root = ds.root("c");
    let held = fs::File::create(root.join("held")).unwrap();
    fs::remove_file(root.join("held")).unwrap();
    zfs(&["snapshot", &format!("{ds_c}@jbuild")]);
    let out = ds.zfs_diff("base", "c", "-HF");
    eprintln!(
        "zfs diff with an open unlinked file:\n{}",
        parse::escape(&out)
    );
    if let Some(dir) = std::env::var_os("JBUILD_ZFS_CAPTURE_DIR") {
        fs::write(PathBuf::from(dir).join("live-on-delete-queue.txt"), &out).unwrap();
    }
    parse::parse(&out, &Format::jbuild(&root)).unwrap();
    both(&ds, "base", "c");
    drop(held);
}

/// The differ a build uses runs `zfs diff` alone and watches it: a narrow
/// change (one file, early in the object range: one line, then the end) is
/// listed by `zfs diff`; a wide one (every 10th of 5,000 files: every
/// object block, tens of seconds of `zfs diff` here against a few of walk)
/// is stopped past the probe and walked, the `zfs diff` child killed and
/// reaped. Each time the layer is the walk's, byte for byte, and the name
/// reported is that of the differ that listed it. The tree has more
/// objects than the default policy's floor, so the choice is a build's.
#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn the_choice_lists_narrow_changes_with_zfs_diff_and_wide_ones_with_the_walk() {
    let ds = Ds::new("choose");
    let files = 5000;
    let path = |i: usize| format!("d{:02}/f{:02}", i / 100, i % 100);
    let proot = ds.base(|r| {
        for i in 0..files {
            write(r, path(i), format!("file {i}\n").as_bytes());
        }
    });
    ds.child("base", "narrow", |c| drop(write(c, path(37), b"narrow")));
    ds.child("base", "wide", |c| {
        for i in (7..files).step_by(10) {
            write(c, path(i), b"wide");
        }
    });
    let d = ZfsDiffer::new(&ds.name);
    let p = SnapshotRef {
        name: "base",
        root: &proot,
    };
    for (child, want, changed) in [("narrow", "zfs-diff", 1), ("wide", "tree-walk", files / 10)] {
        let croot = ds.root(child);
        let c = SnapshotRef {
            name: child,
            root: &croot,
        };
        let walk = TreeWalkDiffer::new().changes(Some(p), c).unwrap();
        assert_eq!(walk.len(), changed, "{child}");
        let got = d.choose(p, c).unwrap();
        assert_eq!(got.by, want, "{child}: chosen on {:?}", got.probe);
        let opts = TarOptions { clamp_mtime: 0 };
        let tc = write_tar(&croot, &got.changes, &opts, Vec::new()).unwrap();
        let tw = write_tar(&croot, &walk, &opts, Vec::new()).unwrap();
        assert!(tc == tw, "{child}: the layer is not the walk's");
        // Whichever listed it, no `zfs diff` is left running or unreaped.
        let proc = PathBuf::from(format!("/proc/{}", got.pid));
        assert!(!proc.exists(), "{child}: `zfs diff` {} is left", got.pid);
        // As a build asks for it.
        assert_eq!(d.changes_named(Some(p), c).unwrap().1, want, "{child}");
    }
}
