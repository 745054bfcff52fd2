//! Diff, export, apply: applying the layer of (parent → child) onto a copy
//! of the parent must give the child back — content, modes, owners, mtimes
//! (to the second), link targets, xattrs and hard-link identity.

use crate::support::layer as layer_support;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use jbuild::layer::{apply, export, ApplyOptions, Compression, TarOptions};
use layer_support::*;

const OPTS: TarOptions = TarOptions {
    clamp_mtime: 4_000_000_000,
};

fn trusted() -> ApplyOptions {
    ApplyOptions {
        allow_devices: true,
        allow_setuid: true,
        same_owner: is_root(),
        start_writeback: true,
        diff_id: true,
    }
}

fn parent_tree(root: &Path) {
    write(root, "etc/passwd", b"root:x:0:0\n");
    write(root, "etc/motd", b"welcome\n");
    write(root, "etc/old.conf", b"old");
    write(root, "bin/sh", b"shell");
    fs::hard_link(root.join("bin/sh"), root.join("bin/ksh")).unwrap();
    write(root, "lib/libz.so.6", b"zlib");
    symlink("libz.so.6", root.join("lib/libz.so")).unwrap();
    write(root, "usr/share/doc/pkg/README", b"docs");
    write(root, "var/cache/pkg/a.pkg", b"a");
    write(root, "var/cache/pkg/b.pkg", b"b");
    write(root, "becomes-dir", b"f");
    write(root, "becomes-file/inner", b"i");
    write(root, "rename-me", b"moving");
    xattr::set(root.join("etc/motd"), "user.note", b"keep").unwrap();
    pin_mtimes(root, 1_600_000_000);
}

fn change_child(root: &Path) {
    fs::remove_file(root.join("etc/old.conf")).unwrap();
    write(root, "etc/passwd", b"root:x:0:0\ntoor:x:0:0\n");
    chmod(&root.join("etc/motd"), 0o600);
    xattr::set(
        root.join("etc/motd"),
        "user.note",
        b"changed\nwith a newline",
    )
    .unwrap();
    fs::rename(root.join("rename-me"), root.join("renamed")).unwrap();
    fs::hard_link(root.join("lib/libz.so.6"), root.join("lib/libz-hard.so")).unwrap();
    fs::remove_file(root.join("lib/libz.so")).unwrap();
    symlink("libz-hard.so", root.join("lib/libz.so")).unwrap();
    fs::remove_dir_all(root.join("usr/share/doc")).unwrap();
    fs::remove_file(root.join("var/cache/pkg/a.pkg")).unwrap();
    fs::remove_file(root.join("var/cache/pkg/b.pkg")).unwrap();
    write(root, "var/cache/pkg/c.pkg", b"c");
    fs::remove_file(root.join("becomes-dir")).unwrap();
    write(root, "becomes-dir/x", b"x");
    fs::remove_dir_all(root.join("becomes-file")).unwrap();
    write(root, "becomes-file", b"now a file");
    write(
        root,
        format!("deep/{}/{}", "d".repeat(150), "long-file-name-".repeat(10)),
        b"long",
    );
    write(root, "names/ünïcödé-日本.txt", b"utf8");
    write(
        root,
        Path::new("names").join(OsStr::from_bytes(b"raw-\xff\xfe")),
        b"raw",
    );
    chmod(&write(root, "usr/bin/su", b"su"), 0o4755);
    nix::unistd::mkfifo(
        &root.join("run-fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o620),
    )
    .unwrap();
    write(root, "empty", b"");
    mkdir(root, "empty-dir");
    if is_root() {
        std::os::unix::fs::lchown(root.join("etc/passwd"), Some(123), Some(456)).unwrap();
        std::os::unix::fs::lchown(root.join("lib/libz.so"), Some(7), Some(8)).unwrap();
        let dev = jbuild::diff::meta::make_dev(1, 3);
        nix::sys::stat::mknod(
            &root.join("null"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            dev,
        )
        .unwrap();
    }
}

struct Pair {
    _t: tempfile::TempDir,
    dir: PathBuf,
    parent: PathBuf,
    child: PathBuf,
}

fn pair() -> Pair {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().to_path_buf();
    let (parent, child) = (dir.join("parent"), dir.join("child"));
    fs::create_dir(&parent).unwrap();
    parent_tree(&parent);
    copy_tree(&parent, &child);
    change_child(&child);
    Pair {
        _t: t,
        dir,
        parent,
        child,
    }
}

#[test]
fn layer_applied_to_the_parent_gives_the_child() {
    let p = pair();
    let changes = diff(Some(&p.parent), &p.child);
    for c in [Compression::Gzip, Compression::Zstd, Compression::None] {
        let (layer, blob) = export(&p.child, &changes, &OPTS, c, Vec::new()).unwrap();
        let target = p.dir.join(format!("applied-{c}"));
        copy_tree(&p.parent, &target);
        let stats = apply(&blob[..], layer.media_type, &target, &trusted()).unwrap();
        assert_eq!(stats.diff_id, Some(layer.diff_id.clone()), "{c}");
        assert!(stats.entries as usize >= changes.len());
        assert_same_tree(&target, &p.child);
    }
}

#[test]
fn base_and_diff_layers_stack_from_nothing() {
    let p = pair();
    let base = diff(None, &p.parent);
    let top = diff(Some(&p.parent), &p.child);
    let target = p.dir.join("stacked");
    fs::create_dir(&target).unwrap();
    for (root, changes) in [(&p.parent, &base), (&p.child, &top)] {
        let (layer, blob) = export(root, changes, &OPTS, Compression::Zstd, Vec::new()).unwrap();
        apply(&blob[..], layer.media_type, &target, &trusted()).unwrap();
    }
    assert_same_tree(&target, &p.child);
}

#[test]
fn a_layer_reapplied_changes_nothing() {
    let p = pair();
    let changes = diff(Some(&p.parent), &p.child);
    let (layer, blob) = export(&p.child, &changes, &OPTS, Compression::Gzip, Vec::new()).unwrap();
    let target = p.dir.join("twice");
    copy_tree(&p.parent, &target);
    apply(&blob[..], layer.media_type, &target, &trusted()).unwrap();
    apply(&blob[..], layer.media_type, &target, &trusted()).unwrap();
    assert_same_tree(&target, &p.child);
}

#[test]
fn the_tree_comparison_notices_differences() {
    let p = pair();
    let r = std::panic::catch_unwind(|| assert_same_tree(&p.parent, &p.child));
    assert!(r.is_err());
    let target = p.dir.join("copy");
    copy_tree(&p.child, &target);
    chmod(&target.join("empty"), 0o600);
    assert!(std::panic::catch_unwind(|| assert_same_tree(&target, &p.child)).is_err());
}

/// Writes an OCI image layout at `dir` whose image `t` has `layers`
/// (media type, digest, size, diff ID).
fn oci_layout(dir: &Path, layers: &[(jbuild::layer::ExportedLayer, Vec<u8>)]) {
    use jbuild::digest::Digest;
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    let put = |bytes: &[u8]| {
        let d = Digest::of(bytes);
        fs::write(blobs.join(d.hex()), bytes).unwrap();
        (d, bytes.len())
    };
    let diff_ids: Vec<String> = layers
        .iter()
        .map(|(l, _)| format!("\"{}\"", l.diff_id))
        .collect();
    let config = format!(
        r#"{{"architecture":"amd64","os":"linux","config":{{}},"rootfs":{{"type":"layers","diff_ids":[{}]}}}}"#,
        diff_ids.join(",")
    );
    let (config_digest, config_size) = put(config.as_bytes());
    let mut descs = Vec::new();
    for (l, blob) in layers {
        put(blob);
        descs.push(format!(
            r#"{{"mediaType":"{}","digest":"{}","size":{}}}"#,
            l.media_type, l.digest, l.size
        ));
    }
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":{config_size}}},"layers":[{}]}}"#,
        descs.join(",")
    );
    let (md, ms) = put(manifest.as_bytes());
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let index = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{md}","size":{ms},"annotations":{{"org.opencontainers.image.ref.name":"t"}}}}]}}"#
    );
    fs::write(dir.join("index.json"), index).unwrap();
}

#[test]
fn umoci_unpacks_our_layers_to_the_same_tree() {
    need!(Root, Umoci);
    let p = pair();
    // Go's archive/tar and umoci's whiteout handling read both layers.
    let layers: Vec<_> = [
        (&p.parent, diff(None, &p.parent)),
        (&p.child, diff(Some(&p.parent), &p.child)),
    ]
    .iter()
    .map(|(src, changes)| export(src, changes, &OPTS, Compression::Gzip, Vec::new()).unwrap())
    .collect();
    let layout = p.dir.join("layout");
    oci_layout(&layout, &layers);
    let rootfs = p.dir.join("umoci-rootfs");
    let out = std::process::Command::new("umoci")
        .args(["raw", "unpack", "--image"])
        .arg(format!("{}:t", layout.display()))
        .arg(&rootfs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "umoci: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same_tree(&rootfs, &p.child);
}
