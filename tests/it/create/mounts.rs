//! Mount points in a jail's root (docs/create.md, "Mount points"): after
//! `jbuild create` — plain, `--bastille` and `--bundle` — every VOLUME of
//! the image is a directory in the root (mount(8) needs its target), the
//! image's own kept with its owner and mode, missing ones made root's
//! 0755, a symlink inside the root followed as the jail follows it; and an
//! image whose mount point a symlink leads out of the root is refused
//! before anything is written, inside the root or out of it.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::support::common::{jbuild, ok, run};

/// The fstab line a Bastille `MOUNT /var/log/nginx-host var/log/nginx
/// nullfs rw 0 0` leaves with the image.
const FSTAB_LABEL: &str =
    "LABEL org.jbuild.fstab./var/log/nginx=\"/var/log/nginx-host /var/log/nginx nullfs rw 0 0\"\n";

/// Builds `tag` from `tree/` copied onto `/` (owned 80:80) and the
/// Jailfile lines `tail`; `shape` fills the tree.
fn image(state: &Path, dir: &Path, tag: &str, tail: &str, shape: impl FnOnce(&Path)) {
    let ctx = dir.join(format!("ctx-{}", tag.replace(':', "-")));
    let tree = ctx.join("tree");
    fs::create_dir_all(tree.join("etc")).unwrap();
    fs::write(tree.join("etc/passwd"), "root:*:0:0::/root:/bin/sh\n").unwrap();
    fs::write(tree.join("etc/group"), "wheel:*:0:root\n").unwrap();
    shape(&tree);
    fs::write(
        ctx.join("Jailfile"),
        format!("FROM --platform=freebsd/amd64 scratch\nCOPY --chown=80:80 tree/ /\n{tail}"),
    )
    .unwrap();
    ok(jbuild(state).args(["build", "-t", tag]).arg(&ctx));
}

/// The three ways `create` makes a root, each into its own place under
/// `dir`: the root made.
fn create(state: &Path, dir: &Path, image: &str, mode: &str) -> std::process::Output {
    let mut c = jbuild(state);
    c.args(["create", image]);
    match mode {
        "plain" => c
            .arg("j")
            .arg("--path")
            .arg(dir.join("plain/root"))
            .arg("--conf")
            .arg(dir.join("plain/j.conf")),
        "bastille" => c
            .args(["j", "--bastille", "--path"])
            .arg(dir.join("bastille/jails/j/root"))
            .arg("--conf")
            .arg(dir.join("bastille/jails/j/jail.conf")),
        "bundle" => c.arg("--bundle").arg(dir.join("bundle")),
        _ => unreachable!(),
    };
    c.args(["--allow-jail-param", "mount.fstab"]);
    run(&mut c)
}

fn root_of(dir: &Path, mode: &str) -> PathBuf {
    match mode {
        "plain" => dir.join("plain/root"),
        "bastille" => dir.join("bastille/jails/j/root"),
        _ => dir.join("bundle/rootfs"),
    }
}

const MODES: [&str; 3] = ["plain", "bastille", "bundle"];

#[test]
fn every_mount_point_and_volume_is_a_directory_in_the_root() {
    need!(Root);
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    image(
        &state,
        t.path(),
        "vols:1",
        &format!("VOLUME /srv/www /data/db /home/data /var/log/nginx\n{FSTAB_LABEL}"),
        |tree| {
            fs::create_dir_all(tree.join("srv/www")).unwrap();
            fs::set_permissions(tree.join("srv/www"), fs::Permissions::from_mode(0o750)).unwrap();
            fs::create_dir_all(tree.join("usr/home")).unwrap();
            symlink("usr/home", tree.join("home")).unwrap();
        },
    );
    for mode in MODES {
        let out = create(&state, t.path(), "vols:1", mode);
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = root_of(t.path(), mode);
        let meta = |p: &str| {
            let m = fs::symlink_metadata(root.join(p))
                .unwrap_or_else(|e| panic!("{mode}: {p} in {}: {e}", root.display()));
            assert!(m.is_dir(), "{mode}: {p} is not a directory");
            (m.mode() & 0o7777, m.uid(), m.gid())
        };
        // The image's own, as it is.
        assert_eq!(meta("srv/www"), (0o750, 80, 80), "{mode}");
        // Missing ones (and the directories above them): root's, 0755.
        for p in ["data", "data/db", "var", "var/log", "var/log/nginx"] {
            assert_eq!(meta(p), (0o755, 0, 0), "{mode}: {p}");
        }
        // Through a symlink inside the root, where the jail sees it.
        assert_eq!(meta("usr/home/data"), (0o755, 0, 0), "{mode}");
        assert!(fs::symlink_metadata(root.join("home"))
            .unwrap()
            .file_type()
            .is_symlink());
        if mode != "bundle" {
            let fstab = if mode == "plain" {
                t.path().join("plain/j.fstab")
            } else {
                t.path().join("bastille/jails/j/fstab")
            };
            let text = fs::read_to_string(&fstab).unwrap();
            let want = format!(
                "/var/log/nginx-host {}/var/log/nginx nullfs rw 0 0",
                root.display()
            );
            assert!(
                text.lines().any(|l| l == want),
                "{mode}: no `{want}` in\n{text}"
            );
        }
    }
}

#[test]
fn a_mount_point_a_symlink_leads_out_of_the_root_is_refused_and_nothing_is_made() {
    need!(Root);
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let outside = t.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    // `/var/log` is the host's directory: absolutely, and by climbing.
    let climb = format!(
        "{}{}",
        "../".repeat(40),
        outside.strip_prefix("/").unwrap().display()
    );
    for (tag, target) in [("abs:1", outside.display().to_string()), ("climb:1", climb)] {
        image(
            &state,
            t.path(),
            tag,
            &format!("VOLUME /var/log/nginx\n{FSTAB_LABEL}"),
            |tree| {
                fs::create_dir_all(tree.join("var")).unwrap();
                symlink(&target, tree.join("var/log")).unwrap();
            },
        );
        for mode in MODES {
            let made = t.path().join(mode);
            let out = create(&state, t.path(), tag, mode);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{tag} {mode}: {err}");
            assert!(
                err.contains("VOLUME /var/log/nginx")
                    && err.contains(&format!("through the symlink /var/log -> {target}")),
                "{tag} {mode}: {err}"
            );
            assert_eq!(
                fs::read_dir(&outside).unwrap().count(),
                0,
                "{tag} {mode}: something was made in {}",
                outside.display()
            );
            assert!(!made.exists(), "{tag} {mode}: {} was made", made.display());
        }
    }
}
