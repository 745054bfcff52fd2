//! A full disk: the state root (or an export's destination) on a small
//! tmpfs, mounted by the test (as root) and unmounted by a guard. A build
//! whose step writes more than fits, a pull of an image larger than the
//! space, an export to a full destination: each fails with exit 1 and a
//! message that says no space is left and where (an export's destination
//! as the user named it, not the store); the store stays sound
//! (earlier images intact, no half blob, no half-tagged image, `jbuild
//! check` clean); with space freed the same command succeeds.

use crate::support::common;
use crate::support::registry as registry_support;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use jbuild::store::{ImageName, Store};
use oci_spec::image::{Arch, Os};
use registry_support::{image, run_bounded, run_ok, Registry, LIMIT};

/// A tmpfs mounted at a temporary directory; unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size_mb: u32) -> Tmpfs {
        // The full-disk tests mount a tmpfs.
        crate::support::lane::require(crate::support::lane::Lane::Root);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small");
        fs::create_dir(&path).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(&path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs failed");
        Tmpfs { path, _dir: dir }
    }

    fn resize(&self, size_mb: u32) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size_mb}m")])
            .arg(&self.path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// A state root at `mnt` (the tmpfs): `home` holds jbuild's config and
/// credentials, `JBUILD_ROOT` points into the small filesystem.
fn jbuild(home: &Path, root: &Path) -> Command {
    let mut c = registry_support::jbuild(home);
    c.env("JBUILD_ROOT", root);
    c
}

/// It failed with exit 1, saying the disk is full and where.
fn assert_full(out: &std::process::Output, place: &Path, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert!(
        err.contains("no space left") && err.contains(&place.display().to_string()),
        "{what}: the message must say no space is left on {}:\n{err}",
        place.display()
    );
}

/// Every blob sound, no temporary file, every tag complete, check clean.
fn assert_sound(home: &Path, root: &Path, what: &str) {
    let store = root.join("store");
    image::verify_layout(&store);
    let tmp = store.join(".jbuild/tmp");
    let left: Vec<_> = fs::read_dir(&tmp)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "{what}: left in {}: {left:?}",
        tmp.display()
    );
    let check = run_bounded(jbuild(home, root).arg("check"), LIMIT);
    assert!(
        check.status.success(),
        "{what}: jbuild check:\n{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn a_pull_larger_than_the_disk_fails_clearly_and_leaves_the_store_sound() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let registry = Registry::start();
    // An image of 12 MiB (noise does not compress) in the registry.
    let seed = h.join("seed");
    fs::create_dir_all(&seed).unwrap();
    let store = Store::open(&seed.join("root/store")).unwrap();
    let (desc, _) = image::put_image(
        &store,
        Os::FreeBSD,
        Arch::Amd64,
        &[vec![("big.bin", image::noise("big", 12 << 20))]],
        HashMap::new(),
    );
    store
        .tag(&ImageName::parse("big:1").unwrap(), &desc)
        .unwrap();
    let big = format!("{}/big:1", registry.host());
    run_ok(
        registry_support::jbuild(&seed).args(["push", "big:1", &big]),
        LIMIT,
    );
    let small = format!("{}/small:1", registry.host());
    let (sdesc, _) = image::put_image(
        &store,
        Os::FreeBSD,
        Arch::Amd64,
        &[vec![("small.bin", image::noise("small", 64 << 10))]],
        HashMap::new(),
    );
    store
        .tag(&ImageName::parse("small:1").unwrap(), &sdesc)
        .unwrap();
    run_ok(
        registry_support::jbuild(&seed).args(["push", "small:1", &small]),
        LIMIT,
    );

    let disk = Tmpfs::mount(8);
    let root = disk.path.join("root");
    run_ok(jbuild(h, &root).args(["pull", &small]), LIMIT);
    let out = run_bounded(jbuild(h, &root).args(["pull", &big]), LIMIT);
    assert_full(&out, &disk.path, "pull");
    assert_sound(h, &root, "after the failed pull");
    let images = run_ok(jbuild(h, &root).arg("images"), LIMIT);
    assert!(
        images.contains("small") && !images.contains("big"),
        "{images}"
    );

    // With space, the same pull works.
    disk.resize(64);
    run_ok(jbuild(h, &root).args(["pull", &big]), LIMIT);
    assert_sound(h, &root, "after the pull with space");
}

#[test]
fn an_export_to_a_full_destination_fails_clearly() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = h.join("root");
    let store = Store::open(&root.join("store")).unwrap();
    image::make(&store, "app:1", "export", 6 << 20);
    let disk = Tmpfs::mount(4);
    for (kind, dest) in [
        ("oci", disk.path.join("layout")),
        ("oci-archive", disk.path.join("app.tar")),
    ] {
        let out = run_bounded(
            jbuild(h, &root).args(["export", "app:1", &format!("{kind}:{}", dest.display())]),
            LIMIT,
        );
        assert_full(&out, &disk.path, kind);
        // The destination is what is full, said as the user named it: not
        // the store (which was only read), nor `prune` (it frees nothing
        // there), nor the staging directory beside it.
        let err = String::from_utf8_lossy(&out.stderr);
        let place = format!("{kind}:{}", dest.display());
        assert!(
            err.contains(&format!("the filesystem holding {place} is full")),
            "{kind}: the destination is not said to be full:\n{err}"
        );
        assert!(!err.contains("prune"), "{kind}: prune suggested:\n{err}");
        assert!(
            !err.contains(&root.display().to_string()),
            "{kind}: the store is blamed:\n{err}"
        );
        assert!(
            !err.lines()
                .any(|l| l.starts_with("error:") && l.contains(".jbuild-archive-")),
            "{kind}: the staging directory is named:\n{err}"
        );
        assert_sound(h, &root, kind);
    }
    disk.resize(128);
    let dest = disk.path.join("layout");
    run_ok(
        jbuild(h, &root).args(["export", "app:1", &format!("oci:{}", dest.display())]),
        LIMIT,
    );
    image::verify_layout(&dest);
}

#[test]
fn a_build_whose_step_fills_the_disk_fails_clearly() {
    let bb = common::static_busybox().expect("/bin/busybox from busybox-static");
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ctx = h.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::copy(&bb, ctx.join("busybox")).unwrap();
    let base = "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\n\
                RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n";
    fs::write(ctx.join("Jailfile"), base).unwrap();
    let disk = Tmpfs::mount(24);
    let root = disk.path.join("root");
    run_ok(
        jbuild(h, &root).args(["build", "-t", "base:1"]).arg(&ctx),
        LIMIT,
    );
    // 10 MiB of noise fits in the step's snapshot, not again as a layer
    // blob beside it: the export fills the disk.
    fs::write(
        ctx.join("Jailfile"),
        format!("{base}RUN head -c 10485760 /dev/urandom > /noise\n"),
    )
    .unwrap();
    let out = run_bounded(
        jbuild(h, &root).args(["build", "-t", "big:1"]).arg(&ctx),
        LIMIT,
    );
    assert_full(&out, &disk.path, "build (layer export)");
    assert_sound(h, &root, "after the failed export");
    // 30 MiB do not fit at all: the step's own write fails (inside the
    // jail, where `head` says so), the step is not committed.
    let ctx2 = h.join("ctx2");
    fs::create_dir_all(&ctx2).unwrap();
    fs::copy(&bb, ctx2.join("busybox")).unwrap();
    fs::write(
        ctx2.join("Jailfile"),
        format!("{base}RUN head -c 31457280 /dev/urandom > /noise\n"),
    )
    .unwrap();
    let out = run_bounded(
        jbuild(h, &root).args(["build", "-t", "huge:1"]).arg(&ctx2),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "build (step): {err}");
    assert!(err.contains("Jailfile:4:1"), "{err}");
    assert_sound(h, &root, "after the failed step");
    let images = run_ok(jbuild(h, &root).arg("images"), LIMIT);
    assert!(
        images.contains("base") && !images.contains("big"),
        "{images}"
    );
    disk.resize(128);
    run_ok(
        jbuild(h, &root).args(["build", "-t", "big:1"]).arg(&ctx),
        LIMIT,
    );
    run_ok(
        jbuild(h, &root).args(["build", "-t", "huge:1"]).arg(&ctx2),
        LIMIT,
    );
    assert_sound(h, &root, "after the builds with space");
}
