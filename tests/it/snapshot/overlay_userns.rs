//! The overlay backend in an unprivileged user namespace (the userns
//! lane): root drops to uid 65534 (`setpriv`), which makes a user and a
//! mount namespace (`unshare -Urm`), so every mount is one the kernel
//! allows an unprivileged user — overlayfs with `userxattr`, whose opaque
//! directories are marked `user.overlay.opaque`.
//!
//! - The conformance suite and every differ case of `layer::diff` (the
//!   overlay differ against the tree walk, layer bytes included) run in
//!   this test binary, started again in such a namespace.
//! - A Jailfile whose layers replace a directory (opaque) and delete files
//!   (whiteouts) builds there to the image the `dir` backend and a root
//!   overlay build give, and `jbuild info` says which flavour and why.
//! - A store keeps the flavour it was made in: root's is refused in a user
//!   namespace, saying what to do; root uses one made in a user namespace.
//! - The flavour follows the namespace, not its id map: one that maps
//!   every id to itself (as the initial one does) is still userxattr.

use crate::support::common;
use crate::support::lane::UNPRIVILEGED_USERNS;

use std::fs;
use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jbuild::snapshot::overlay::OverlaySnapshotter;
use jbuild::snapshot::testsuite::UnmountOnDrop;

/// Set in the test binary started in a user namespace: the flavour every
/// overlay snapshotter the tests there make must have.
const EXPECT_FLAVOUR: &str = "JBUILD_TEST_OVERLAY_FLAVOUR";

/// Fails if `$JBUILD_TEST_OVERLAY_FLAVOUR` names another flavour than
/// `sn`'s (the suite's and the differ cases' snapshotters call it).
pub fn expect_flavour(sn: &OverlaySnapshotter) {
    if let Ok(want) = std::env::var(EXPECT_FLAVOUR) {
        assert_eq!(sn.flavour().0.name(), want, "{}", sn.flavour().1);
    }
}

/// `program` as uid 65534, root of a new user namespace with its own
/// mount namespace.
fn unprivileged(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("setpriv");
    c.args(UNPRIVILEGED_USERNS).arg(program);
    // Lanes are the parent test's to count; uid 65534 cannot write the log.
    c.env_remove("JBUILD_LANE_LOG")
        .env_remove("JBUILD_REQUIRE_LANES");
    c
}

/// A directory uid 65534 owns, under `t`.
fn nobodys(t: &Path, name: &str) -> PathBuf {
    let d = t.join(name);
    fs::create_dir_all(&d).unwrap();
    chown(&d, Some(65534), Some(65534)).unwrap();
    d
}

fn text(o: &Output) -> String {
    common::output_text(o)
}

/// The test binary's tests matching `filters`, as `--list` names them.
fn listed(filters: &[&str]) -> Vec<String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(filters)
        .args(["--list", "--format", "terse"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_suite_and_the_differ_cases_pass_in_an_unprivileged_user_namespace() {
    need!(Userns);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let tmp = nobodys(t.path(), "tmp");
    let filters = ["snapshot::dir::overlay::", "layer::diff::"];
    // The namespace maps one uid (65534, as root): giving a file to
    // another owner fails there with EINVAL, so the two cases that chown
    // to other ids stay outside (docs/storage.md, "What works
    // unprivileged"). And the kernel keeps no inode index there, so a
    // write through one name of a lower hard-linked file is refused at
    // commit (`a_hard_link_changed_without_an_index_is_refused_at_commit`
    // runs there and says so) instead of reaching the other names.
    let skips = [
        "layer::diff::chown_only",
        "snapshot::dir::overlay::check_owners_preserved",
        "snapshot::dir::overlay::check_hardlinks_kept_through_writes",
    ];
    let tests: Vec<String> = listed(&filters)
        .into_iter()
        .filter(|t| !skips.contains(&t.as_str()))
        .collect();
    assert!(
        tests
            .iter()
            .any(|t| t.contains("check_differ_sees_child_changes"))
            && tests
                .iter()
                .any(|t| t.contains("a_hard_link_changed_without_an_index_is_refused"))
            && tests
                .iter()
                .any(|t| t.contains("directory_removed_and_made_again")),
        "{tests:?}"
    );
    let out = unprivileged(std::env::current_exe().unwrap())
        .args(filters)
        .args(skips.iter().flat_map(|s| ["--skip", s]))
        .args(["--test-threads", "2"])
        .env("TMPDIR", &tmp)
        .env(EXPECT_FLAVOUR, "userxattr")
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    for test in &tests {
        assert!(
            said.contains(&format!("test {test} ... ok")),
            "{test} did not pass in the user namespace:\n{said}"
        );
    }
}

/// `jbuild` on `root` as uid 65534 in a user namespace (overlay backend).
fn jb_unprivileged(root: &Path, home: &Path) -> Command {
    let mut c = unprivileged(env!("CARGO_BIN_EXE_jbuild"));
    c.env("JBUILD_ROOT", root)
        .env("HOME", home)
        .env("JBUILD_BACKEND", "overlay")
        .env("RUST_LOG", "warn")
        .env_remove("JBUILD_CONFIG")
        .env_remove("JBUILD_ZFS_DATASET");
    c
}

/// Runs and asserts success; returns stdout, trimmed.
fn ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{c:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The committed layer whose upper directory has `rel`.
fn layer_with(store: &Path, rel: &str) -> PathBuf {
    let committed = store.join("snapshots/overlay/committed");
    fs::read_dir(&committed)
        .unwrap()
        .map(|e| e.unwrap().path().join("fs"))
        .find(|fs| fs.join(rel).symlink_metadata().is_ok())
        .unwrap_or_else(|| panic!("no layer under {} has {rel}", committed.display()))
}

/// A temporary directory uid 65534 may enter (whatever is mounted under
/// it is taken down first when dropped) holding a build context `ctx`:
/// busybox and `files`.
fn world(files: &[(&str, &str)]) -> ((UnmountOnDrop, tempfile::TempDir), PathBuf) {
    let t = tempfile::tempdir().unwrap();
    fs::set_permissions(
        t.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let ctx = t.path().join("ctx");
    for (rel, text) in files {
        fs::create_dir_all(ctx.join(rel).parent().unwrap()).unwrap();
        fs::write(ctx.join(rel), text).unwrap();
    }
    fs::copy(common::static_busybox().unwrap(), ctx.join("busybox")).unwrap();
    ((UnmountOnDrop(t.path().to_path_buf()), t), ctx)
}

#[test]
fn a_build_in_a_user_namespace_has_the_layers_of_dir_and_of_root_overlay() {
    need!(Userns, Busybox);
    let (dirs, ctx) = world(&[
        ("tree/a/1", "1"),
        ("tree/a/2", "2"),
        ("tree/b/3", "3"),
        ("tree/keep", "k"),
    ]);
    // Mounts under it are taken down before it is deleted (field order).
    let t = dirs.1.path();
    // The RUN step replaces a directory (opaque) and deletes a file
    // (whiteout); the last COPY stacks on it.
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\nCOPY tree /srv/tree\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox rm -r /srv/tree/a /srv/tree/b/3 \
         && /bin/busybox mkdir /srv/tree/a && echo new > /srv/tree/a/new\"]\n\
         COPY tree/keep /srv/more\n",
    )
    .unwrap();
    let build = |c: &mut Command| {
        ok(c.env("SOURCE_DATE_EPOCH", "1700000000")
            .args(["build", "-q", "-t", "t:1"])
            .arg(&ctx))
    };
    let on_dir = build(&mut common::jbuild(&t.join("dir")));
    let root_overlay = t.join("root-overlay");
    let on_root_overlay = build(common::jbuild(&root_overlay).env("JBUILD_BACKEND", "overlay"));
    let (store, home) = (nobodys(t, "userns"), nobodys(t, "home"));
    let in_userns = build(&mut jb_unprivileged(&store, &home));
    assert!(in_userns.starts_with("sha256:"), "{in_userns}");
    assert_eq!(on_dir, on_root_overlay, "root's overlay build");
    assert_eq!(in_userns, on_dir, "the user namespace's overlay build");

    // The layers really are userxattr ones: the replaced directory carries
    // user.overlay.opaque, the deleted file is a 0/0 whiteout.
    let ns_store = store;
    let layer = layer_with(&ns_store, "srv/tree/a/new");
    assert_eq!(
        xattr::get(layer.join("srv/tree/a"), "user.overlay.opaque")
            .unwrap()
            .as_deref(),
        Some(&b"y"[..])
    );
    let whiteout = fs::symlink_metadata(layer.join("srv/tree/b/3")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &whiteout.file_type()
    ));
    let flavour = |root: &Path| fs::read_to_string(root.join("snapshots/overlay/flavour")).unwrap();
    assert_eq!(flavour(&ns_store), "userxattr\n");
    assert_eq!(flavour(&root_overlay), "trusted\n");

    let checked = ok(jb_unprivileged(&ns_store, &home).args(["check", "--deep"]));
    assert!(checked.contains("all sound"), "{checked}");

    // Unpacked there too: the `dir` build's image, through a layout, into
    // a new store's overlay snapshots (its whiteouts made through the
    // mount), read back as a bundle's tree.
    let layout = format!("oci:{}:t", t.join("layout").display());
    ok(common::jbuild(&t.join("dir")).args(["export", "t:1", &layout]));
    ok(Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(t.join("layout")));
    let unpacked = nobodys(t, "unpacked");
    ok(jb_unprivileged(&unpacked, &home).args(["import", &layout, "t:1"]));
    let bundle = unpacked.join("bundle");
    ok(jb_unprivileged(&unpacked, &home)
        .args(["create", "--bundle"])
        .arg(&bundle)
        .args(["t:1", "one"]));
    let names = |rel: &str| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(bundle.join("rootfs").join(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("srv/tree/a"), ["new"]);
    assert!(names("srv/tree/b").is_empty());
    let info = ok(jb_unprivileged(&ns_store, &home).arg("info"));
    assert!(info.contains("backend          overlay\n"), "{info}");
    assert!(info.contains("(in a user namespace: userxattr)"), "{info}");
}

/// Without an inode index (every user namespace) a step that writes
/// through one name of a lower hard-linked file cannot commit the layer
/// the other backends make: the build is refused as the environment's
/// limit, exit 1 saying what to do, not as an internal fault (exit 2).
#[test]
fn a_hard_link_written_through_one_name_without_an_index_exits_1_saying_what_to_do() {
    need!(Userns, Busybox);
    let (dirs, ctx) = world(&[("README", "links")]);
    let t = dirs.1.path();
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox mkdir /etc && echo a > /etc/a \
         && /bin/busybox ln /etc/a /etc/b\"]\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"echo changed >> /etc/a\"]\n",
    )
    .unwrap();
    let (store, home) = (nobodys(t, "userns"), nobodys(t, "home"));
    let out = jb_unprivileged(&store, &home)
        .args(["build", "-q", "-t", "links:1"])
        .arg(&ctx)
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("/etc/a") && said.contains("--backend dir"),
        "{said}"
    );
}

#[test]
fn a_store_keeps_the_flavour_it_was_made_in() {
    need!(Userns, Busybox);
    let (dirs, ctx) = world(&[("d/old", "old")]);
    // Mounts under it are taken down before it is deleted (field order).
    let t = dirs.1.path();
    let home = nobodys(t, "home");
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\nCOPY d /d\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox rm -r /d && /bin/busybox mkdir /d \
         && echo new > /d/new\"]\n",
    )
    .unwrap();

    // Made in a user namespace, used by root: mounted with userxattr, so
    // the opaque directory hides the old file from a RUN step of root's.
    let ns_store = nobodys(t, "userns");
    ok(jb_unprivileged(&ns_store, &home)
        .args(["build", "-q", "-t", "base:1"])
        .arg(&ctx));
    let info = ok(common::jbuild(&ns_store)
        .env("JBUILD_BACKEND", "overlay")
        .arg("info"));
    assert!(
        info.contains("(as root, in the userxattr flavour this store was made in)"),
        "{info}"
    );
    let app = t.join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(
        app.join("Jailfile"),
        "FROM base:1\nRUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox ls /d > /seen\"]\n",
    )
    .unwrap();
    ok(common::jbuild(&ns_store)
        .env("JBUILD_BACKEND", "overlay")
        .args(["build", "-q", "-t", "app:1"])
        .arg(&app));
    let seen = layer_with(&ns_store, "seen");
    assert_eq!(fs::read_to_string(seen.join("seen")).unwrap(), "new\n");

    // Made by root, opened in a user namespace: refused, saying why and
    // what to do (the store handed to uid 65534, so that nothing but the
    // flavour stands in the way).
    let root_store = t.join("root");
    ok(common::jbuild(&root_store)
        .env("JBUILD_BACKEND", "overlay")
        .args(["build", "-q", "-t", "base:1"])
        .arg(&ctx));
    ok(Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&root_store));
    let out = jb_unprivileged(&root_store, &home)
        .arg("info")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("trusted.overlay")
            && said.contains("JBUILD_ROOT")
            && said.contains("--backend dir"),
        "{said}"
    );
    // `auto` goes on with `dir`, and says why.
    let out = ok(jb_unprivileged(&root_store, &home)
        .env("JBUILD_BACKEND", "auto")
        .arg("info"));
    assert!(out.contains("backend          dir\n"), "{out}");
    assert!(out.contains("trusted.overlay"), "{out}");
}

/// The flavour is told from the namespace's inode, not from its uid map:
/// a user namespace root makes with every id mapped to itself has the
/// initial namespace's `uid_map` (`0 0 4294967295`), yet `trusted.*`
/// xattrs are out of its reach, so it is userxattr there too.
#[test]
fn a_user_namespace_mapping_every_id_is_still_userxattr() {
    need!(Userns);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    // The child waits (bounded) for its maps, then runs jbuild.
    let script = "i=0; while [ -z \"$(cat /proc/self/uid_map)\" ] && [ $i -lt 500 ]; do \
                  sleep 0.01; i=$((i+1)); done; cat /proc/self/uid_map; exec \"$0\" info";
    let child = Command::new("unshare")
        .args(["--user", "--mount", "sh", "-c", script])
        .arg(env!("CARGO_BIN_EXE_jbuild"))
        .env("JBUILD_ROOT", t.path().join("root"))
        .env("JBUILD_BACKEND", "overlay")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `unshare` itself is in the new namespace by the time its child
    // shell runs; the maps are written from here, the parent namespace.
    let pid = child.id();
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fs::read_link(proc.join("ns/user")).unwrap()
        == fs::read_link("/proc/self/ns/user").unwrap()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "unshare never made its namespace"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for map in ["uid_map", "gid_map"] {
        fs::write(proc.join(map), "0 0 4294967295\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("         0          0 4294967295\n"),
        "{said}"
    );
    assert!(
        stdout.contains("(in a user namespace: userxattr)"),
        "{said}"
    );
}
