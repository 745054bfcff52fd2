//! Helpers shared by the layer tests: building trees, copying them as the
//! dir snapshotter does, comparing them, and crafting raw tar streams.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use filetime::FileTime;
use jbuild::diff::walk::TreeWalkDiffer;
use jbuild::diff::{Change, Differ, SnapshotRef};

pub use crate::support::tar::pax_records;
use crate::support::tar::{Fields, Header};

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Writes `content` to `root/rel`, creating parents.
pub fn write(root: &Path, rel: impl AsRef<Path>, content: &[u8]) -> PathBuf {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, content).unwrap();
    p
}

pub fn mkdir(root: &Path, rel: impl AsRef<Path>) -> PathBuf {
    let p = root.join(rel);
    fs::create_dir_all(&p).unwrap();
    p
}

pub fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

pub fn set_mtime(p: &Path, secs: i64, nsec: u32) {
    let t = FileTime::from_unix_time(secs, nsec);
    filetime::set_symlink_file_times(p, t, t).unwrap();
}

/// Gives every file under `root` (and `root`) the same mtime, with
/// nanoseconds, so trees built at different times compare equal.
pub fn pin_mtimes(root: &Path, secs: i64) {
    let mut all = vec![root.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        let p = all[i].clone();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                all.push(e.unwrap().path());
            }
        }
        i += 1;
    }
    // Deepest first, so setting a child does not touch a set parent.
    for p in all.iter().rev() {
        set_mtime(p, secs, 123_456_789);
    }
}

/// Copies a tree as the dir snapshotter does (modes, owners, mtimes with
/// nanoseconds, xattrs, hard links).
pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a failed");
}

pub fn diff(parent: Option<&Path>, child: &Path) -> Vec<Change> {
    let p = parent.map(|root| SnapshotRef {
        name: "parent",
        root,
    });
    TreeWalkDiffer::new()
        .changes(
            p,
            SnapshotRef {
                name: "child",
                root: child,
            },
        )
        .unwrap()
}

/// Changes as `(kind letter, path)` for compact assertions.
pub fn summary(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| {
            let k = match c.kind {
                jbuild::diff::ChangeKind::Added => 'A',
                jbuild::diff::ChangeKind::Modified => 'M',
                jbuild::diff::ChangeKind::Deleted => 'D',
                jbuild::diff::ChangeKind::Opaque => 'O',
            };
            format!("{k} {}", c.path.display())
        })
        .collect()
}

/// What a tree comparison looks at, for one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: &'static str,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
    /// File content, or symlink target.
    pub data: Vec<u8>,
    pub rdev: u64,
    pub xattrs: Vec<(OsString, Vec<u8>)>,
    /// Other names of the same inode (hard links), sorted.
    pub links: Vec<PathBuf>,
}

/// Every path under `root` (not `root` itself) with what it holds.
pub fn scan(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<(u64, u64), Vec<PathBuf>> = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let rel = rel.join(e.unwrap().file_name());
            let p = root.join(&rel);
            let m = fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let (kind, data) = if ft.is_dir() {
                stack.push(rel.clone());
                ("dir", Vec::new())
            } else if ft.is_symlink() {
                (
                    "symlink",
                    fs::read_link(&p).unwrap().as_os_str().as_bytes().to_vec(),
                )
            } else if ft.is_file() {
                ("file", fs::read(&p).unwrap())
            } else {
                ("special", Vec::new())
            };
            if !ft.is_dir() && m.nlink() > 1 {
                inodes
                    .entry((m.dev(), m.ino()))
                    .or_default()
                    .push(rel.clone());
            }
            let mut xattrs: Vec<(OsString, Vec<u8>)> = xattr::list(&p)
                .unwrap()
                .map(|n| {
                    let v = xattr::get(&p, &n).unwrap().unwrap_or_default();
                    (n, v)
                })
                .collect();
            xattrs.sort();
            let node = Node {
                kind,
                mode: m.mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
                mtime: m.mtime(),
                data,
                rdev: m.rdev(),
                xattrs,
                links: Vec::new(),
            };
            out.insert(rel, node);
        }
    }
    for names in inodes.values() {
        for n in names {
            let mut others: Vec<PathBuf> = names.iter().filter(|o| *o != n).cloned().collect();
            others.sort();
            out.get_mut(n).unwrap().links = others;
        }
    }
    out
}

/// Asserts two trees hold the same paths with the same content and
/// metadata (mtimes to the second), listing every difference.
pub fn assert_same_tree(got: &Path, want: &Path) {
    let (a, b) = (scan(got), scan(want));
    let mut problems = Vec::new();
    for (p, n) in &b {
        match a.get(p) {
            None => problems.push(format!("missing: {}", p.display())),
            Some(m) if m != n => problems.push(format!(
                "differs: {}\n  got  {m:?}\n  want {n:?}",
                p.display()
            )),
            _ => {}
        }
    }
    for p in a.keys().filter(|p| !b.contains_key(*p)) {
        problems.push(format!("extra: {}", p.display()));
    }
    assert!(
        problems.is_empty(),
        "trees differ:\n{}",
        problems.join("\n")
    );
}

/// A tar stream built by hand, block by block, for hostile-input tests.
#[derive(Default)]
pub struct RawTar {
    pub bytes: Vec<u8>,
}

pub struct RawEntry<'a> {
    pub name: &'a [u8],
    pub typeflag: u8,
    pub mode: u32,
    pub linkname: &'a [u8],
    pub content: &'a [u8],
    pub devmajor: u32,
    pub devminor: u32,
}

impl Default for RawEntry<'_> {
    fn default() -> Self {
        RawEntry {
            name: b"",
            typeflag: b'0',
            mode: 0o644,
            linkname: b"",
            content: b"",
            devmajor: 0,
            devminor: 0,
        }
    }
}

impl RawTar {
    pub fn header(e: &RawEntry<'_>) -> [u8; 512] {
        Header::new(&Fields {
            name: e.name,
            kind: e.typeflag,
            mode: e.mode,
            size: e.content.len() as u64,
            mtime: 1_600_000_000,
            link: e.linkname,
            dev: (e.devmajor, e.devminor),
            ..Fields::default()
        })
        .0
    }

    pub fn entry(mut self, e: RawEntry<'_>) -> Self {
        self.bytes.extend_from_slice(&Self::header(&e));
        self.bytes.extend_from_slice(e.content);
        self.bytes.resize(self.bytes.len().div_ceil(512) * 512, 0);
        self
    }

    pub fn file(self, name: &[u8], content: &[u8]) -> Self {
        self.entry(RawEntry {
            name,
            content,
            ..Default::default()
        })
    }

    pub fn dir(self, name: &[u8]) -> Self {
        self.entry(RawEntry {
            name,
            typeflag: b'5',
            mode: 0o755,
            ..Default::default()
        })
    }

    pub fn symlink(self, name: &[u8], target: &[u8]) -> Self {
        self.entry(RawEntry {
            name,
            typeflag: b'2',
            mode: 0o777,
            linkname: target,
            ..Default::default()
        })
    }

    pub fn hard_link(self, name: &[u8], target: &[u8]) -> Self {
        self.entry(RawEntry {
            name,
            typeflag: b'1',
            linkname: target,
            ..Default::default()
        })
    }

    /// A PAX extended header (records given as `key=value`).
    pub fn pax(self, records: &[(&str, &[u8])]) -> Self {
        let data = pax_records(records);
        self.entry(RawEntry {
            name: b"PaxHeaders/x",
            typeflag: b'x',
            content: &data,
            ..Default::default()
        })
    }

    /// A GNU long-name header for the next entry.
    pub fn gnu_long_name(self, name: &[u8]) -> Self {
        let mut data = name.to_vec();
        data.push(0);
        self.entry(RawEntry {
            name: b"././@LongLink",
            typeflag: b'L',
            content: &data,
            ..Default::default()
        })
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0u8; 1024]);
        self.bytes
    }
}

/// The tar stream `tar` compressed as `compression` would store it.
pub fn compressed(tar: &[u8], compression: jbuild::layer::Compression) -> Vec<u8> {
    use jbuild::layer::Compression;
    use std::io::Write;
    match compression {
        Compression::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(tar).unwrap();
            gz.finish().unwrap()
        }
        Compression::Zstd => zstd::encode_all(tar, 3).unwrap(),
        Compression::None => tar.to_vec(),
    }
}

/// bsdtar's mtree form of the layer `tar` (`--options mtree:KEYWORDS`,
/// e.g. `!all,type,mode,flags`): each path (without `./`) with its
/// keywords and their values.
pub fn bsdtar_mtree(tar: &Path, keywords: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let out = Command::new("bsdtar")
        .args(["-cf", "-", "--format", "mtree", "--options"])
        .arg(format!("mtree:{keywords}"))
        .arg(format!("@{}", tar.display()))
        .output()
        .expect("bsdtar (libarchive-tools) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut words = l.split(' ');
            let path = words.next().unwrap().trim_start_matches("./").to_string();
            let keys = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (path, keys)
        })
        .collect()
}

/// Each entry's `flags=` in bsdtar's mtree form of the layer `tar` (none:
/// "").
pub fn bsdtar_flags(tar: &Path) -> BTreeMap<String, String> {
    bsdtar_mtree(tar, "flags,type")
        .into_iter()
        .map(|(path, mut keys)| (path, keys.remove("flags").unwrap_or_default()))
        .collect()
}
