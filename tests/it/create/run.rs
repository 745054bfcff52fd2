//! `jbuild run` on Linux, through the binary, over a `linux/<arch>` image
//! of static busybox: the command's exit code, the image's Cmd, Env and
//! WorkingDir, `-e`, `-v` read-write and read-only, nothing left in the
//! store or the snapshots; a FreeBSD image refused before anything is
//! made. (FreeBSD's jail life is `create::run_jail`.)
#![cfg(target_os = "linux")]

use crate::support::common::{jbuild, ok, run, static_busybox};

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Output;

/// Every file under the state root's store and snapshots, with its size
/// (directories as -1): what a run must leave as it found.
fn state(root: &Path) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for top in ["store", "snapshots"] {
        let base = root.join(top);
        let mut stack = vec![base.clone()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir).unwrap() {
                let e = e.unwrap();
                let m = fs::symlink_metadata(e.path()).unwrap();
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                if m.is_dir() {
                    // The contents of a snapshot's tree are its own.
                    if !e.path().ends_with("fs") {
                        stack.push(e.path());
                    }
                    out.insert(rel, -1);
                } else {
                    out.insert(rel, m.len() as i64);
                }
            }
        }
    }
    out
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `bb:1`: busybox as /bin/busybox with a few applets linked, an Env, a
/// WorkingDir and a Cmd that says them and exits 7.
fn busybox_image(t: &Path, root: &Path) {
    let arch = jbuild::config::host_architecture();
    let ctx = t.join("ctx");
    let bin = ctx.join("rootfs/bin");
    fs::create_dir_all(&bin).unwrap();
    fs::copy(static_busybox().unwrap(), bin.join("busybox")).unwrap();
    for applet in ["sh", "cat", "touch", "ls"] {
        symlink("busybox", bin.join(applet)).unwrap();
    }
    fs::create_dir_all(ctx.join("rootfs/srv")).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        format!(
            "FROM --platform=linux/{arch} scratch\nCOPY rootfs/ /\nENV GREETING=from-image PATH=/bin\n\
             WORKDIR /srv\nCMD [\"/bin/sh\", \"-c\", \"echo cmd $GREETING in $(pwd); exit 7\"]\n"
        ),
    )
    .unwrap();
    ok(jbuild(root).args(["build", "-q", "-t", "bb:1"]).arg(&ctx));
}

#[test]
fn a_linux_image_runs_its_command_with_env_and_volumes_and_leaves_nothing() {
    need!(Root, Busybox);
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    busybox_image(t.path(), &root);
    let before = state(&root);

    // The command's exit code is jbuild's.
    let o = run(jbuild(&root).args(["run", "--rm", "bb:1", "/bin/sh", "-c", "exit 42"]));
    assert_eq!(o.status.code(), Some(42), "{:?}", text(&o));
    assert_eq!(
        state(&root),
        before,
        "--rm leaves the store and snapshots as they were"
    );

    // The image's own Cmd, Env and WorkingDir; no --rm: nothing kept either.
    let o = run(jbuild(&root).args(["run", "bb:1"]));
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(7), "{out}{err}");
    assert_eq!(out, "cmd from-image in /srv\n");
    assert!(err.contains("on Linux a run keeps nothing"), "{err}");
    assert_eq!(state(&root), before);

    // -e over the image's Env, and a new one.
    let o = run(jbuild(&root).args([
        "run",
        "-e",
        "GREETING=given",
        "-e",
        "OTHER=x=y",
        "bb:1",
        "/bin/sh",
        "-c",
        "echo $GREETING $OTHER",
    ]));
    assert_eq!(text(&o).0, "given x=y\n", "{:?}", text(&o));
    assert_eq!(o.status.code(), Some(0));

    // -v read-write: read and written through; -v :ro: a write refused.
    let data = t.path().join("data");
    fs::create_dir(&data).unwrap();
    fs::write(data.join("in.txt"), "from the host\n").unwrap();
    let rw = format!("{}:/data", data.display());
    let o = run(jbuild(&root).args([
        "run",
        "-v",
        &rw,
        "bb:1",
        "/bin/sh",
        "-c",
        "cat /data/in.txt && echo from inside > /data/out.txt",
    ]));
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(text(&o).0, "from the host\n");
    assert_eq!(
        fs::read_to_string(data.join("out.txt")).unwrap(),
        "from inside\n"
    );
    let ro = format!("{}:/ro:ro", data.display());
    let o = run(jbuild(&root).args([
        "run",
        "-v",
        &ro,
        "bb:1",
        "/bin/sh",
        "-c",
        "cat /ro/in.txt; touch /ro/new",
    ]));
    let (out, err) = text(&o);
    assert_eq!(out, "from the host\n", "{err}");
    assert_ne!(
        o.status.code(),
        Some(0),
        "a write to a :ro volume fails: {err}"
    );
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(!data.join("new").exists());
    // No mount point is left in the image's snapshots either.
    assert_eq!(state(&root), before);

    // A missing program: 127, as a shell says.
    let o = run(jbuild(&root).args(["run", "bb:1", "/bin/nothing"]));
    assert_eq!(o.status.code(), Some(127), "{:?}", text(&o));
    assert_eq!(state(&root), before);
}

#[test]
fn a_freebsd_image_is_refused_before_anything_is_made() {
    let arch = jbuild::config::host_architecture();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("a.txt"), "a\n").unwrap();
    // jbuild's default for FROM scratch: a FreeBSD image.
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY a.txt /a.txt\nCMD [\"/bin/sh\"]\n",
    )
    .unwrap();
    ok(jbuild(&root).args(["build", "-q", "-t", "fb:1"]).arg(&ctx));
    let before = state(&root);
    let o = run(jbuild(&root).args(["run", "--rm", "fb:1", "/bin/sh"]));
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "image fb:1 is for freebsd/{arch}: its programs need a FreeBSD host, and this one is linux/{arch}"
        )),
        "{err}"
    );
    assert_eq!(state(&root), before);
}
