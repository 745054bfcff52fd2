//! What needs root (issue 29, items 15 and 16): `check` on a root mounted
//! read-only (it never writes), and the overlay mount a killed process
//! left, taken down by the next command that opens the store.

use crate::support::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jbuild::snapshot::overlay::mount::is_mounted;
use jbuild::snapshot::testsuite::UnmountOnDrop;

use super::dir::text;

/// `jbuild` on `root` with `backend`, or the backend `auto` picks (no
/// configuration file, no dataset) for `None`.
fn jb(t: &Path, root: &Path, backend: Option<&str>) -> Command {
    let mut c = common::jbuild(root);
    match backend {
        Some(b) => {
            c.env("JBUILD_BACKEND", b);
        }
        None => {
            fs::write(t.join("empty.toml"), "").unwrap();
            c.env_remove("JBUILD_BACKEND")
                .env("JBUILD_CONFIG", t.join("empty.toml"))
                .env_remove("JBUILD_ZFS_DATASET");
        }
    }
    c
}

fn sh(cmd: &str) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(o.status.success(), "{cmd}: {}", text(&o));
}

/// `dir` bind-mounted on itself, read-only.
fn read_only(dir: &Path) {
    let d = dir.display();
    sh(&format!(
        "mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}'"
    ));
}

fn built(t: &Path, name: &str, backend: Option<&str>) -> PathBuf {
    let ctx = t.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nLINE_IN_FILE \"a\" /etc/a\nLINE_IN_FILE \"b\" /etc/b\n",
    )
    .unwrap();
    let root = t.join(name);
    common::ok(
        jb(t, &root, backend)
            .args(["build", "-q", "-t", "one:1"])
            .arg(&ctx),
    );
    root
}

#[test]
fn check_on_a_read_only_root_writes_nothing_and_finds_it_sound() {
    need!(Root);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let on_dir = built(t.path(), "on-dir", Some("dir"));
    let on_auto = built(t.path(), "on-auto", None);
    // A root holding only a store (what `import` makes on `dir`).
    let store_only = t.path().join("store-only");
    fs::create_dir(&store_only).unwrap();
    common::copy_tree(&on_dir.join("store"), &store_only.join("store"));
    for r in [&on_dir, &on_auto, &store_only] {
        read_only(r);
    }
    for (root, backend) in [
        (&on_dir, Some("dir")),
        (&on_dir, None),
        (&on_auto, None),
        (&store_only, Some("dir")),
        (&store_only, None),
    ] {
        let o = common::run(jb(t.path(), root, backend).arg("check"));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{} ({backend:?}): {}",
            root.display(),
            text(&o)
        );
        let out = text(&o);
        assert!(out.contains("all sound"), "{out}");
    }
}

#[test]
fn a_killed_builds_overlay_mount_is_taken_down_by_the_next_command() {
    need!(Root, Busybox);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let bb = common::static_busybox().expect("busybox-static is installed (tests/run)");
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"touch /started && /bin/busybox sleep 30\"]\n",
    )
    .unwrap();
    fs::copy(&bb, ctx.join("busybox")).unwrap();
    let root = t.path().join("root");
    // Two kills: one followed by `images` (which only reads the store),
    // one by `check` (which never writes).
    for next in [&["images"][..], &["check"][..]] {
        let mut build = jb(t.path(), &root, Some("overlay"))
            .args(["build", "-q", "-t", "k:1"])
            .arg(&ctx)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let active = root.join("snapshots/overlay/active");
        let deadline = Instant::now() + Duration::from_secs(60);
        let started = loop {
            let found = fs::read_dir(&active).ok().and_then(|d| {
                d.flatten()
                    .map(|e| e.path().join("fs/started"))
                    .find(|p| p.exists())
            });
            if let Some(f) = found {
                break f;
            }
            assert!(Instant::now() < deadline, "the RUN step never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        build.kill().unwrap();
        build.wait().unwrap();
        let merged = started.parent().unwrap().parent().unwrap().join("merged");
        assert!(is_mounted(&merged).unwrap(), "the kill left no mount");
        let o = common::run(jb(t.path(), &root, Some("overlay")).args(next));
        assert!(o.status.success(), "{next:?}: {}", text(&o));
        assert!(
            !is_mounted(&merged).unwrap(),
            "`jbuild {next:?}` left the killed build's mount at {}",
            merged.display()
        );
        common::ok(jb(t.path(), &root, Some("overlay")).args(["prune"]));
    }
    let left = jbuild::snapshot::overlay::mount::unmount_under(t.path()).unwrap();
    assert_eq!(left, 0, "mounts were left");
}
