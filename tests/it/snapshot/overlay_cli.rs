//! The CLI end to end on the `overlay` backend: `auto` picks it (and says
//! why), the examples build to the very digests the `dir` backend gives
//! (RUN steps included, in the Linux namespace jail on the mounted tree),
//! two pulled images share their base's snapshot, `check` and `prune`
//! understand it — and no command leaves a mount behind.

use crate::support::common;
use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use jbuild::snapshot::overlay::mount::unmount_under;
use jbuild::snapshot::testsuite::UnmountOnDrop;
use registry_support::{run_ok, Registry, LIMIT};

/// `jbuild` on `root` with the backend `backend`.
fn jb(root: &Path, backend: &str) -> Command {
    let mut c = common::jbuild(root);
    c.env("JBUILD_BACKEND", backend);
    c
}

/// Fails if anything is still mounted under `dir` (and takes it down, so
/// one failure does not leave mounts to the next test).
fn assert_no_mounts(dir: &Path) {
    let left = unmount_under(dir).unwrap();
    assert_eq!(left, 0, "mounts were left under {}", dir.display());
}

fn committed(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root.join("snapshots/overlay/committed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn jailfile(dir: &Path, text: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), text).unwrap();
    dir.to_path_buf()
}

#[test]
fn auto_picks_overlay_as_root_and_info_says_why() {
    need!(Root);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let root = t.path().join("root");
    fs::write(t.path().join("empty.toml"), "").unwrap();
    let mut c = common::jbuild(&root);
    c.env_remove("JBUILD_BACKEND")
        .env("JBUILD_CONFIG", t.path().join("empty.toml"))
        .env_remove("JBUILD_ZFS_DATASET");
    let out = common::ok(c.arg("info"));
    assert!(out.contains("backend          overlay\n"), "{out}");
    assert!(
        out.contains("no ZFS dataset configured") && out.contains("can mount overlayfs here"),
        "{out}"
    );
    assert!(out.contains("differ           overlay-upper"), "{out}");
    assert_no_mounts(t.path());
}

#[test]
fn auto_falls_back_to_dir_where_overlayfs_cannot_mount_and_says_why() {
    // An overlay's upper directory cannot itself be on overlayfs: a state
    // root inside one is a place where the probe mount fails.
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let [l, u, w, m] = ["l", "u", "w", "m"].map(|d| t.path().join(d));
    for d in [&l, &u, &w, &m] {
        fs::create_dir(d).unwrap();
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        l.display(),
        u.display(),
        w.display()
    );
    common::ok(
        Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&m),
    );
    fs::write(t.path().join("empty.toml"), "").unwrap();
    let jbuild = |backend: Option<&str>| {
        let mut c = common::jbuild(&m.join("root"));
        c.env("JBUILD_CONFIG", t.path().join("empty.toml"))
            .env_remove("JBUILD_ZFS_DATASET");
        match backend {
            Some(b) => c.env("JBUILD_BACKEND", b),
            None => c.env_remove("JBUILD_BACKEND"),
        };
        c
    };
    let out = common::ok(jbuild(None).arg("info"));
    assert!(out.contains("backend          dir\n"), "{out}");
    assert!(out.contains("overlayfs cannot be mounted here"), "{out}");
    let refused = jbuild(Some("overlay")).arg("info").output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("use --backend dir"), "{said}");
}

#[test]
fn examples_build_on_overlay_to_the_digests_of_dir_and_check_is_clean() {
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let bb = common::static_busybox().expect("busybox-static is installed (tests/run)");
    let mut examples = vec![];
    for name in ["static-site", "multi-stage", "busybox-linux"] {
        let ctx = common::example(name, t.path());
        if name == "busybox-linux" {
            fs::copy(&bb, ctx.join("busybox")).unwrap();
        }
        examples.push((name, ctx));
    }
    let (dir_root, ov_root) = (t.path().join("dir"), t.path().join("overlay"));
    for (name, ctx) in &examples {
        let build = |root: &Path, backend: &str| {
            let mut c = jb(root, backend);
            c.env("SOURCE_DATE_EPOCH", "1700000000")
                .args(["build", "-q", "-t", &format!("{name}:1")])
                .arg(ctx);
            common::ok(&mut c).trim().to_string()
        };
        let on_dir = build(&dir_root, "dir");
        let on_overlay = build(&ov_root, "overlay");
        assert!(on_overlay.starts_with("sha256:"), "{on_overlay}");
        assert_eq!(
            on_overlay, on_dir,
            "{name}: overlay and dir give other images"
        );
        assert_no_mounts(t.path());
        // Cached: the same image, no step runs.
        assert_eq!(build(&ov_root, "overlay"), on_dir, "{name} rebuilt");
    }
    // The RUN steps ran on the overlay tree.
    let flat = committed(&ov_root);
    assert!(flat.iter().any(|n| n.starts_with("step-")), "{flat:?}");
    let out = common::ok(jb(&ov_root, "overlay").args(["check", "--deep"]));
    assert!(!out.contains("damaged"), "{out}");
    assert_no_mounts(t.path());
}

#[test]
fn two_pulled_images_store_their_base_once_and_prune_takes_what_is_unused() {
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let reg = Registry::start();
    let (src, dst) = (t.path().join("src"), t.path().join("dst"));
    let big: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    let base = jailfile(
        &t.path().join("base"),
        "FROM scratch\nCOPY big /srv/big\nCOPY etc /etc\n",
    );
    fs::write(base.join("big"), &big).unwrap();
    fs::create_dir_all(base.join("etc")).unwrap();
    fs::write(base.join("etc/a"), "a").unwrap();
    fs::write(base.join("etc/b"), "b").unwrap();
    run_ok(
        jb(&src, "dir")
            .args(["build", "-q", "-t", "base:1"])
            .arg(&base),
        LIMIT,
    );
    let mut pushed = vec![];
    for app in ["one", "two"] {
        let ctx = jailfile(
            &t.path().join(app),
            &format!("FROM base:1\nCOPY {app} /srv/{app}\n"),
        );
        fs::write(ctx.join(app), app).unwrap();
        run_ok(
            jb(&src, "dir")
                .args(["build", "-q", "-t", &format!("{app}:1")])
                .arg(&ctx),
            LIMIT,
        );
        let name = format!("{}/jbuild/{app}:1", reg.host());
        run_ok(
            jb(&src, "dir").args(["push", &format!("{app}:1"), &name]),
            LIMIT,
        );
        pushed.push(name);
    }
    for name in &pushed {
        run_ok(jb(&dst, "overlay").args(["pull", name]), LIMIT);
    }
    assert_no_mounts(t.path());
    // Two base layers, shared, and one top layer each.
    let chains = committed(&dst);
    assert_eq!(chains.len(), 4, "{chains:?}");
    let out = common::ok(jb(&dst, "overlay").args(["check", "--deep"]));
    assert!(!out.contains("damaged"), "{out}");
    // What the pulled image's tree holds: `create` reads it through a view.
    let bundle = t.path().join("bundle");
    common::ok(
        jb(&dst, "overlay")
            .args(["create", "--bundle"])
            .arg(&bundle)
            .args([&pushed[1], "two"]),
    );
    let jail = bundle.join("rootfs");
    assert_eq!(fs::read_to_string(jail.join("srv/big")).unwrap(), big);
    assert_eq!(fs::read_to_string(jail.join("srv/two")).unwrap(), "two");
    assert!(!jail.join("srv/one").exists());

    common::ok(jb(&dst, "overlay").args(["rmi", &pushed[0]]));
    common::ok(jb(&dst, "overlay").args(["prune"]));
    let left = committed(&dst);
    assert_eq!(left.len(), 3, "only `one`'s top layer goes: {left:?}");
    let out = common::ok(jb(&dst, "overlay").args(["check"]));
    assert!(!out.contains("damaged"), "{out}");
    assert_no_mounts(t.path());
}

#[test]
fn a_build_killed_mid_run_leaves_a_mounted_step_that_prune_takes_away() {
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let bb = common::static_busybox().expect("busybox-static is installed (tests/run)");
    let ctx = jailfile(
        &t.path().join("ctx"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"touch /started && /bin/busybox sleep 30\"]\n",
    );
    fs::copy(&bb, ctx.join("busybox")).unwrap();
    let root = t.path().join("root");
    let mut build = jb(&root, "overlay")
        .args(["build", "-q", "-t", "k:1"])
        .arg(&ctx)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The step runs when its tree (mounted) has the file it writes.
    let active = root.join("snapshots/overlay/active");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let started = loop {
        let found = fs::read_dir(&active).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path().join("fs/started"))
                .find(|p| p.exists())
        });
        if let Some(f) = found {
            break f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the RUN step never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    build.kill().unwrap();
    build.wait().unwrap();
    let merged = started.parent().unwrap().parent().unwrap().join("merged");
    assert!(
        jbuild::snapshot::overlay::mount::is_mounted(&merged).unwrap(),
        "the killed step's tree is still mounted"
    );
    let out = common::ok(jb(&root, "overlay").args(["check"]));
    assert!(out.contains("reclaimable"), "{out}");
    common::ok(jb(&root, "overlay").args(["prune"]));
    assert!(fs::read_dir(&active).unwrap().next().is_none());
    assert_no_mounts(t.path());
    let out = common::ok(jb(&root, "overlay").args(["check"]));
    assert!(
        !out.contains("damaged") && !out.contains("reclaimable"),
        "{out}"
    );
}

/// Issue 28's reproduction: a file written through one of its two names in
/// a later RUN step. overlayfs without its inode index copied that name up
/// alone, so `/etc/b` kept `a` there while `dir` (and ZFS) showed `a
/// changed`: another image, which `jbuild verify` (a rebuild on `dir`)
/// rejected. Now the two backends give one digest, the image's two names
/// are one file, and verify accepts the overlay build.
#[test]
fn a_file_written_through_one_of_its_names_gives_the_image_of_dir() {
    need!(Root, Busybox);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let ctx = jailfile(
        &t.path().join("ctx"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
         RUN mkdir -p /etc && echo a > /etc/a && ln /etc/a /etc/b\n\
         RUN echo changed >> /etc/a\n\
         RUN cat /etc/b > /seen\n",
    );
    fs::copy(common::static_busybox().unwrap(), ctx.join("busybox")).unwrap();
    let build = |root: &Path, backend: &str| {
        let mut c = jb(root, backend);
        c.env("SOURCE_DATE_EPOCH", "1700000000")
            .args(["build", "-q", "-t", "links:1"])
            .arg(&ctx);
        common::ok(&mut c).trim().to_string()
    };
    let (dir_root, ov_root) = (t.path().join("dir"), t.path().join("overlay"));
    let on_dir = build(&dir_root, "dir");
    let on_overlay = build(&ov_root, "overlay");
    let bundle = t.path().join("bundle");
    common::ok(
        jb(&ov_root, "overlay")
            .args(["create", "--bundle"])
            .arg(&bundle)
            .args(["links:1", "links"]),
    );
    let rootfs = bundle.join("rootfs");
    let read = |n: &str| fs::read_to_string(rootfs.join(n)).unwrap();
    assert_eq!(read("seen"), "a\nchanged\n", "what the last step read");
    assert_eq!(read("etc/b"), "a\nchanged\n");
    assert_eq!(
        on_overlay, on_dir,
        "overlay and dir give other images for one recipe"
    );
    common::ok(
        jb(&ov_root, "overlay")
            .args(["verify", "links:1", "--context"])
            .arg(&ctx),
    );
    assert_no_mounts(t.path());
}
