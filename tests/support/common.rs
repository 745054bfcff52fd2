//! Helpers shared by the end-to-end tests: run the real `jbuild` binary
//! against a throwaway state root, and compare trees.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `n` bytes from `seed` that nobody would compress or deduplicate by
/// accident (xorshift).
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A `jbuild` command using `root` as its state directory, with a fixed
/// environment (no SOURCE_DATE_EPOCH from the caller, no colours).
pub fn jbuild(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_jbuild"));
    c.env("JBUILD_ROOT", root)
        .env_remove("SOURCE_DATE_EPOCH")
        // The tests that read snapshots on disk were written for `dir`;
        // those of the other backends ask for theirs.
        .env("JBUILD_BACKEND", "dir")
        .env("RUST_LOG", "warn");
    c
}

/// Runs and asserts success; returns stdout.
pub fn ok(c: &mut Command) -> String {
    let out = c.output().expect("run jbuild");
    assert!(
        out.status.success(),
        "{:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        c,
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `"event": "result"` object of a `--json` run's standard output.
pub fn json_result(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "result")
        .unwrap_or_else(|| panic!("no result event in:\n{stdout}"))
}

pub fn run(c: &mut Command) -> Output {
    c.output().expect("run jbuild")
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Copies an example's build context to a temp dir (so tests can add files
/// such as the busybox binary without touching the checkout).
pub fn example(name: &str, into: &Path) -> PathBuf {
    let dst = into.join(name);
    copy_tree(&repo().join("Jailfile.examples").join(name), &dst);
    dst
}

pub fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let t = dst.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            copy_tree(&e.path(), &t);
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(e.path()).unwrap(), &t).unwrap();
        } else {
            fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The stored `image` exported by `jbuild` on `root` to the OCI layout
/// `work/oci-NAME` (tag `x`) and unpacked by umoci (rootless) into
/// `work/rootfs-NAME`: the layout and the root.
pub fn export_unpacked(root: &Path, image: &str, work: &Path) -> (PathBuf, PathBuf) {
    super::lane::require(super::lane::Lane::Umoci);
    let name = image.replace([':', '/'], "-");
    let layout = work.join(format!("oci-{name}"));
    ok(jbuild(root)
        .arg("export")
        .arg(image)
        .arg(format!("oci:{}:x", layout.display())));
    let rootfs = work.join(format!("rootfs-{name}"));
    umoci_unpack(&format!("{}:x", layout.display()), &rootfs, true);
    (layout, rootfs)
}

/// Unpacks `image` (`LAYOUT:TAG`) with umoci into `dest`, as a real peer
/// reads jbuild's output; `rootless` keeps ownership out of the picture.
pub fn umoci_unpack(image: &str, dest: &Path, rootless: bool) {
    super::lane::require(super::lane::Lane::Umoci);
    let mut c = Command::new("umoci");
    c.args(["raw", "unpack"]);
    if rootless {
        c.arg("--rootless");
    }
    let out = c
        .arg("--image")
        .arg(image)
        .arg(dest)
        .output()
        .expect("run umoci");
    assert!(
        out.status.success(),
        "umoci raw unpack {image}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The static busybox, if this machine has it (Debian: busybox-static).
pub fn static_busybox() -> Option<PathBuf> {
    let p = PathBuf::from("/bin/busybox");
    let out = Command::new("ldd").arg(&p).output().ok()?;
    // ldd says "not a dynamic executable" for static binaries.
    (p.exists() && !out.status.success()
        || String::from_utf8_lossy(&out.stderr).contains("not a dynamic"))
    .then_some(p)
}

/// What a tree holds, path by path: type, permissions, owner, content or
/// link target, and which paths share an inode (hard links). Times are left
/// out: layers clamp them.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: &'static str,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub content: Vec<u8>,
    pub link_group: Option<String>,
}

pub fn snapshot_tree(root: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<(u64, u64), String> = BTreeMap::new();
    walk(root, root, &mut out, &mut inodes);
    // Only keep link groups for inodes seen more than once.
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for e in out.values() {
        if let Some(g) = &e.link_group {
            *counts.entry(g.clone()).or_default() += 1;
        }
    }
    for e in out.values_mut() {
        if e.link_group.as_ref().is_some_and(|g| counts[g] < 2) {
            e.link_group = None;
        }
    }
    out
}

fn walk(
    root: &Path,
    dir: &Path,
    out: &mut BTreeMap<String, Entry>,
    inodes: &mut BTreeMap<(u64, u64), String>,
) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let m = fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let ft = m.file_type();
        let (kind, content, group) = if ft.is_dir() {
            ("dir", Vec::new(), None)
        } else if ft.is_symlink() {
            (
                "symlink",
                fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
                None,
            )
        } else if ft.is_file() {
            let first = inodes
                .entry((m.dev(), m.ino()))
                .or_insert_with(|| rel.clone())
                .clone();
            ("file", fs::read(&p).unwrap(), Some(first))
        } else {
            ("special", Vec::new(), None)
        };
        out.insert(
            rel,
            Entry {
                kind,
                mode: m.permissions().mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
                content,
                link_group: group,
            },
        );
        if ft.is_dir() {
            walk(root, &p, out, inodes);
        }
    }
}

/// A finished command for a failure message: its status, then standard
/// output and standard error.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
