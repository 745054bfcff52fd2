//! FreeBSD file flags (`schg`, `uchg`, `sappnd`, `nodump`, ...) through
//! jbuild's own code, on Linux: the layer applier, the `dir` snapshotter's
//! copy and removal, and the tar writer, each given [`FreeBsdRules`] as
//! their `FileFlags`.
//!
//! [`FreeBsdRules`] keeps each path's FreeBSD flags in a side table and
//! has the Linux kernel enforce the locking ones the way FreeBSD does:
//! `schg`/`uchg` become the inode's immutable attribute and
//! `sappnd`/`uappnd` its append-only attribute (`chattr +i`, `+a`), under
//! which Linux, like FreeBSD, refuses to unlink, rename over, link to,
//! write, `chmod`, `chown` or `utimes` the file, and to add or remove
//! entries of such a directory (EPERM). So any code that sets flags too
//! early, or replaces a flagged file without clearing it first, fails
//! here as it would on FreeBSD. (`sunlnk`/`uunlnk` have no Linux
//! counterpart and are only kept in the table; symlinks too, as Linux
//! cannot flag them.)
//!
//! Needs root (`CAP_LINUX_IMMUTABLE`) and a filesystem with inode
//! attributes (ext4, xfs, btrfs, tmpfs since Linux 6.0) for the temporary
//! directories: without them the tests fail saying so.

use crate::support::layer as layer_support;

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jbuild::fsutil::flags::FileFlags;
use jbuild::layer::fflags::{self, SF_APPEND, SF_IMMUTABLE, UF_IMMUTABLE, UF_NODUMP};
use jbuild::layer::header::{self, Entry};
use jbuild::layer::{
    apply_with_flags, write_tar, write_tar_with_flags, ApplyOptions, Limits, TarOptions, TarReader,
    MEDIA_TYPE_TAR,
};
use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::{Labels, Snapshotter};

const FS_IMMUTABLE_FL: libc::c_long = 0x10;
const FS_APPEND_FL: libc::c_long = 0x20;
const FS_NODUMP_FL: libc::c_long = 0x40;

/// FreeBSD's file flags on a Linux filesystem: see the module docs.
#[derive(Debug)]
struct FreeBsdRules {
    /// (device, inode) → (a path to it, flags), as FreeBSD keeps flags
    /// on the inode (all names of a hard-linked file share them). An
    /// entry counts only while the inode's Linux attributes still say
    /// what it does, so an inode number reused for a new file does not
    /// inherit a deleted file's flags.
    table: Mutex<HashMap<(u64, u64), (PathBuf, u32)>>,
    /// The tree whose attributes are all cleared when this is dropped
    /// (files are renamed and copied under it, so recorded paths are not
    /// enough).
    sweep: PathBuf,
}

impl FreeBsdRules {
    /// Rules for files under `sweep` (see [`FreeBsdRules::sweep`]).
    fn new(sweep: &Path) -> FreeBsdRules {
        FreeBsdRules {
            table: Mutex::default(),
            sweep: sweep.to_path_buf(),
        }
    }
}

/// Clears the enforcing attributes of everything under `path`.
fn unlock_all(path: &Path) {
    let Ok(m) = fs::symlink_metadata(path) else {
        return;
    };
    if m.file_type().is_symlink() {
        return;
    }
    let _ = set_inode_attributes(path, 0);
    if m.is_dir() {
        for entry in fs::read_dir(path).into_iter().flatten().flatten() {
            unlock_all(&entry.path());
        }
    }
}

/// The Linux inode attributes that enforce `flags` as FreeBSD would.
fn linux_bits(flags: u32) -> libc::c_long {
    let mut bits = 0;
    if flags & (SF_IMMUTABLE | UF_IMMUTABLE) != 0 {
        bits |= FS_IMMUTABLE_FL;
    }
    if flags & (SF_APPEND | fflags::UF_APPEND) != 0 {
        bits |= FS_APPEND_FL;
    }
    if flags & UF_NODUMP != 0 {
        bits |= FS_NODUMP_FL;
    }
    bits
}

fn open_inode(path: &Path) -> io::Result<fs::File> {
    fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// The enforcing inode attributes of `path` (a file or directory).
fn inode_attributes(path: &Path) -> io::Result<libc::c_long> {
    use std::os::fd::AsRawFd;
    let f = open_inode(path)?;
    let mut now: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes the attributes into `now`.
    if unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(now & (FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL))
}

/// Sets the enforcing inode attributes of `path` (a file or directory)
/// to `bits`, keeping its others.
fn set_inode_attributes(path: &Path, bits: libc::c_long) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = open_inode(path)?;
    let mut now: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes the attributes into `now`.
    if unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let want = (now & !(FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL)) | bits;
    // SAFETY: FS_IOC_SETFLAGS reads the attributes from `want`.
    if unsafe { libc::ioctl(f.as_raw_fd(), libc::FS_IOC_SETFLAGS, &want) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl FileFlags for FreeBsdRules {
    fn get(&self, path: &Path, _seen: u32) -> io::Result<u32> {
        let m = fs::symlink_metadata(path)?;
        let flags = match self.table.lock().unwrap().get(&(m.dev(), m.ino())) {
            Some(&(_, flags)) => flags,
            None => return Ok(0),
        };
        if m.file_type().is_symlink() || inode_attributes(path)? == linux_bits(flags) {
            Ok(flags)
        } else {
            Ok(0)
        }
    }

    fn set(&self, path: &Path, flags: u32) -> io::Result<()> {
        let m = fs::symlink_metadata(path)?;
        if !m.file_type().is_symlink() {
            set_inode_attributes(path, linux_bits(flags)).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTTY | libc::EOPNOTSUPP | libc::EINVAL) => panic!(
                    "{}: this filesystem has no inode attributes (chattr); run the tests \
                     with TMPDIR on ext4, xfs, btrfs or tmpfs: {e}",
                    path.display()
                ),
                Some(libc::EPERM) if !layer_support::is_root() => panic!(
                    "setting the immutable attribute needs root (CAP_LINUX_IMMUTABLE); \
                     run the tests as root: {e}"
                ),
                _ => e,
            })?;
        }
        let mut table = self.table.lock().unwrap();
        match flags {
            0 => table.remove(&(m.dev(), m.ino())),
            _ => table.insert((m.dev(), m.ino()), (path.to_path_buf(), flags)),
        };
        Ok(())
    }
}

impl Drop for FreeBsdRules {
    /// Leaves nothing the temporary directories' cleanup cannot delete,
    /// whatever a test did.
    fn drop(&mut self) {
        for (path, _) in self.table.get_mut().unwrap().values() {
            let _ = set_inode_attributes(path, 0);
        }
        unlock_all(&self.sweep);
    }
}

fn flags_of(rules: &FreeBsdRules, path: &Path) -> u32 {
    rules.get(path, 0).unwrap()
}

/// A tar entry: path, content (`None`: a directory; `Some(Err(target))`: a
/// hard link), mode, mtime, flags.
struct E<'a>(
    &'a str,
    Option<Result<&'a [u8], &'a str>>,
    u32,
    u64,
    Option<&'a str>,
);

fn layer(entries: &[E<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for E(path, what, mode, mtime, flags) in entries {
        let (typeflag, size, linkname, content): (u8, u64, &[u8], &[u8]) = match what {
            None => (header::DIRECTORY, 0, b"", b""),
            Some(Ok(c)) => (header::REGULAR, c.len() as u64, b"", c),
            Some(Err(target)) => (header::HARD_LINK, 0, target.as_bytes(), b""),
        };
        let e = Entry {
            path: path.as_bytes(),
            typeflag,
            mode: *mode,
            size,
            mtime: *mtime,
            linkname,
            fflags: *flags,
            ..Entry::default()
        };
        header::encode(&e, &mut out);
        out.extend_from_slice(content);
        header::pad(&mut out);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

fn apply(tar: &[u8], root: &Path, rules: &FreeBsdRules) {
    let opts = ApplyOptions {
        allow_devices: false,
        allow_setuid: false,
        same_owner: true,
        start_writeback: false,
        diff_id: true,
    };
    apply_with_flags(tar, MEDIA_TYPE_TAR, root, &opts, &Limits::default(), rules)
        .unwrap_or_else(|e| panic!("applying the layer: {e:#}"));
}

const T: u64 = 1_600_000_000;

/// A base layer as FreeBSD's sets have them: `schg` programs (one with a
/// hard link), a `schg` directory with content, `sappnd` and `nodump`
/// files.
fn base_layer() -> Vec<u8> {
    layer(&[
        E("bin/", None, 0o755, T, None),
        E("bin/sh", Some(Ok(b"#!sh")), 0o555, T, Some("schg")),
        E("bin/sh2", Some(Err("bin/sh")), 0o555, T, None),
        E("sbin/", None, 0o755, T, Some("schg")),
        E("sbin/init", Some(Ok(b"init")), 0o500, T, Some("schg")),
        E("var/", None, 0o755, T, None),
        E("var/empty/", None, 0o555, T, Some("schg")),
        E("var/empty/.keep", Some(Ok(b"")), 0o444, T, None),
        E("var/log", Some(Ok(b"one\n")), 0o600, T, Some("sappnd")),
        E("etc/", None, 0o755, T, None),
        E("etc/dump", Some(Ok(b"d")), 0o644, T, Some("uchg,nodump")),
    ])
}

/// The flags are set after content, owner, mode and times (or the kernel
/// refuses those), and they hold: an immutable file cannot be written.
#[test]
fn a_flagged_layer_is_applied_with_flags_last() {
    need!(Root);
    let tmp = tempfile::tempdir().unwrap();
    let rules = FreeBsdRules::new(tmp.path());
    apply(&base_layer(), tmp.path(), &rules);
    let r = tmp.path();
    assert_eq!(flags_of(&rules, &r.join("bin/sh")), SF_IMMUTABLE);
    assert_eq!(flags_of(&rules, &r.join("sbin")), SF_IMMUTABLE);
    assert_eq!(flags_of(&rules, &r.join("var/empty")), SF_IMMUTABLE);
    assert_eq!(flags_of(&rules, &r.join("var/log")), SF_APPEND);
    assert_eq!(
        flags_of(&rules, &r.join("etc/dump")),
        UF_IMMUTABLE | UF_NODUMP
    );
    assert_eq!(flags_of(&rules, &r.join("bin")), 0);
    let sh = fs::symlink_metadata(r.join("bin/sh")).unwrap();
    assert_eq!((sh.mode() & 0o7777, sh.mtime() as u64), (0o555, T));
    assert_eq!(
        sh.ino(),
        fs::symlink_metadata(r.join("bin/sh2")).unwrap().ino()
    );
    assert_eq!(fs::read(r.join("bin/sh")).unwrap(), b"#!sh");
    let empty = fs::symlink_metadata(r.join("var/empty")).unwrap();
    assert_eq!((empty.mode() & 0o7777, empty.mtime() as u64), (0o555, T));
    assert!(r.join("var/empty/.keep").is_file());
    // The rules are the kernel's, not the test's word.
    let refused = fs::write(r.join("bin/sh"), b"x").unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
    let refused = fs::remove_file(r.join("var/empty/.keep")).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
}

/// A later layer replaces a `schg` file, whites out a `sappnd` file and a
/// `schg` directory with content, adds to a `schg` directory, and links to
/// a lower `schg` file: each flagged thing is unlocked first, and what the
/// layer flags is locked again at the end.
#[test]
fn a_later_layer_replaces_and_whites_out_flagged_files() {
    need!(Root);
    let tmp = tempfile::tempdir().unwrap();
    let rules = FreeBsdRules::new(tmp.path());
    let r = tmp.path();
    apply(&base_layer(), r, &rules);
    let upper = layer(&[
        E("bin/", None, 0o755, T, None),
        E("bin/sh", Some(Ok(b"#!new sh")), 0o555, T + 1, None),
        E("etc/", None, 0o755, T, None),
        E("etc/init-link", Some(Err("sbin/init")), 0o500, T, None),
        E("sbin/", None, 0o755, T, Some("schg")),
        E("sbin/new", Some(Ok(b"new")), 0o500, T, None),
        E("var/", None, 0o755, T, None),
        E("var/.wh.empty", Some(Ok(b"")), 0, T, None),
        E("var/.wh.log", Some(Ok(b"")), 0, T, None),
    ]);
    apply(&upper, r, &rules);
    assert_eq!(fs::read(r.join("bin/sh")).unwrap(), b"#!new sh");
    assert_eq!(flags_of(&rules, &r.join("bin/sh")), 0);
    fs::write(r.join("bin/sh"), b"writable now").unwrap();
    assert!(!r.join("var/empty").exists() && !r.join("var/log").exists());
    assert_eq!(fs::read(r.join("sbin/new")).unwrap(), b"new");
    assert_eq!(flags_of(&rules, &r.join("sbin")), SF_IMMUTABLE);
    // The link shares the lower file's inode, whose flags are back.
    let link = fs::symlink_metadata(r.join("etc/init-link")).unwrap();
    let init = fs::symlink_metadata(r.join("sbin/init")).unwrap();
    assert_eq!(link.ino(), init.ino());
    assert_eq!(flags_of(&rules, &r.join("sbin/init")), SF_IMMUTABLE);
    assert_eq!(
        flags_of(&rules, &r.join("etc/dump")),
        UF_IMMUTABLE | UF_NODUMP
    );
}

/// `prepare` copies a flagged tree with its flags, set after everything
/// else; `remove` deletes flagged trees.
#[test]
fn the_dir_snapshotter_copies_flags_last_and_removes_flagged_trees() {
    need!(Root);
    let tmp = tempfile::tempdir().unwrap();
    let rules = Arc::new(FreeBsdRules::new(tmp.path()));
    let sn = DirSnapshotter::new(tmp.path().join("snapshots"))
        .unwrap()
        .with_file_flags(rules.clone());
    let root = sn.prepare("base-active", None).unwrap();
    apply(&base_layer(), &root, &rules);
    sn.commit("base", "base-active", &Labels::default())
        .unwrap();
    let base = sn.view("base").unwrap();
    let copy = sn.prepare("child", Some("base")).unwrap();
    for rel in [
        "bin/sh",
        "bin/sh2",
        "sbin",
        "sbin/init",
        "var/empty",
        "var/log",
        "etc/dump",
        "bin",
    ] {
        let (a, b) = (base.join(rel), copy.join(rel));
        assert_eq!(flags_of(&rules, &b), flags_of(&rules, &a), "{rel}");
        let (ma, mb) = (
            fs::symlink_metadata(&a).unwrap(),
            fs::symlink_metadata(&b).unwrap(),
        );
        assert_eq!(
            (mb.mode(), mb.mtime(), mb.mtime_nsec()),
            (ma.mode(), ma.mtime(), ma.mtime_nsec()),
            "{rel}"
        );
    }
    assert_eq!(flags_of(&rules, &copy.join("bin/sh")), SF_IMMUTABLE);
    assert_eq!(fs::read(copy.join("bin/sh")).unwrap(), b"#!sh");
    let refused = fs::remove_file(copy.join("sbin/init")).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
    sn.remove("child").unwrap();
    sn.remove("base").unwrap();
    assert!(!copy.exists() && !base.exists());
    let trash: Vec<_> = fs::read_dir(tmp.path().join("snapshots/trash"))
        .unwrap()
        .collect();
    assert!(trash.is_empty(), "{trash:?}");
}

/// The flags of each entry as the tar stream carries them.
fn carried(tar: &[u8]) -> Vec<(String, Option<String>)> {
    let mut reader = TarReader::new(tar);
    let mut out = Vec::new();
    while let Some(h) = reader.next().unwrap() {
        reader.content().read_to_end(&mut Vec::new()).unwrap();
        out.push((String::from_utf8_lossy(&h.path).into_owned(), h.fflags));
    }
    out
}

/// The tar writer writes `SCHILY.fflags` from the flags source, and an
/// applier with the same source reads them back: out and in equal.
#[test]
fn the_tar_writer_exports_flags_and_they_come_back() {
    need!(Root);
    let tmp = tempfile::tempdir().unwrap();
    let rules = FreeBsdRules::new(tmp.path());
    let src = tmp.path().join("src");
    fs::create_dir(&src).unwrap();
    apply(&base_layer(), &src, &rules);
    let changes = layer_support::diff(None, &src);
    let opts = TarOptions {
        clamp_mtime: T + 10,
    };
    let tar = write_tar_with_flags(&src, &changes, &opts, &rules, Vec::new()).unwrap();
    let flags: HashMap<_, _> = carried(&tar).into_iter().collect();
    let some = |s: &str| Some(s.to_string());
    assert_eq!(flags["bin/sh"], some("schg"));
    assert_eq!(
        flags["bin/sh2"], None,
        "a hard link carries no flags of its own"
    );
    assert_eq!(flags["sbin/"], some("schg"));
    assert_eq!(flags["var/log"], some("sappnd"));
    assert_eq!(flags["etc/dump"], some("uchg,nodump"));
    assert_eq!(flags["bin/"], None);
    // The host's source on Linux: no file has flags.
    let plain = write_tar(&src, &changes, &opts, Vec::new()).unwrap();
    assert!(carried(&plain).iter().all(|(_, f)| f.is_none()));

    let dst = tmp.path().join("dst");
    fs::create_dir(&dst).unwrap();
    apply(&tar, &dst, &rules);
    for c in &changes {
        let (a, b) = (src.join(&c.path), dst.join(&c.path));
        assert_eq!(
            flags_of(&rules, &b),
            flags_of(&rules, &a),
            "{}",
            c.path.display()
        );
    }
    let again = write_tar_with_flags(&dst, &changes, &opts, &rules, Vec::new()).unwrap();
    assert_eq!(
        again, tar,
        "the layer written from the applied tree differs"
    );
}

/// The side table follows inodes: a file replaced without its flags
/// cleared does not pass them on (so the checks above cannot pass by a
/// stale entry).
#[test]
fn the_rules_follow_the_inode() {
    need!(Root);
    let tmp = tempfile::tempdir().unwrap();
    let rules = FreeBsdRules::new(tmp.path());
    let f = tmp.path().join("f");
    fs::write(&f, b"a").unwrap();
    rules.set(&f, UF_NODUMP).unwrap();
    assert_eq!(flags_of(&rules, &f), UF_NODUMP);
    let g = tmp.path().join("g");
    fs::write(&g, b"b").unwrap();
    fs::rename(&g, &f).unwrap();
    assert_eq!(flags_of(&rules, &f), 0);
    fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
}
