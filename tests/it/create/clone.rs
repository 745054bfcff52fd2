//! `jbuild create` on ZFS makes the jail's root a clone of the image's top
//! layer, and the layers a jail stands on stay: `rmi` refuses the image
//! naming the jail, `prune` (and `prune --cache`) keep them and say why,
//! `check` counts the jail as a user and reports one that no longer stands
//! on its layer. One scenario, run on zfs-fuse here and on OpenZFS in the
//! qemu lane (`bash tests/zfs-vm/lane.sh` runs the ignored test there).

use crate::support::common;
use crate::support::zfs_fuse;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

fn zfs(args: &[&str]) -> String {
    let (ok, out) = zfs_fuse::sh("zfs", args);
    assert!(ok, "zfs {args:?}: {out}");
    out.trim_end().to_string()
}

/// `zfs` for commands that unmount: zfs-fuse keeps a dataset "busy" for
/// a moment after its last file was closed.
fn zfs_when_idle(args: &[&str]) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        match zfs_fuse::sh("zfs", args) {
            (true, out) => return out,
            (false, out) if out.contains("busy") => {
                last = out;
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            (false, out) => panic!("zfs {args:?}: {out}"),
        }
    }
    panic!("zfs {args:?}: still busy after 10 s: {last}")
}

fn get(prop: &str, dataset: &str) -> String {
    zfs(&["get", "-H", "-o", "value", prop, dataset])
}

/// A jbuild on the ZFS backend with its layers in `dataset`.
fn on_zfs(root: &Path, dataset: &str) -> Command {
    let mut c = jbuild(root);
    c.env("JBUILD_ZFS_DATASET", dataset)
        .env("JBUILD_CONFIG", "/dev/null")
        .args(["--backend", "zfs"]);
    c
}

fn fails(c: &mut Command) -> String {
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{c:?}: {err}");
    err
}

fn check(c: &mut Command) -> (i32, Value) {
    let o = run(c.args(["--json", "check"]));
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code().unwrap(), v)
}

fn kinds(v: &Value, severity: &str) -> Vec<String> {
    v[severity]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

/// An image of two layers (made on `dir`, imported into the ZFS root, so
/// its layers are `chain-` snapshots) as an OCI layout in `t`.
fn image_layout(t: &Path) -> PathBuf {
    let ctx = t.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nLINE_IN_FILE \"hello\" /etc/motd\nLINE_IN_FILE \"x\" /etc/x\n",
    )
    .unwrap();
    let src = t.join("src");
    ok(jbuild(&src)
        .args(["--backend", "dir", "build", "-q", "-t", "app:1"])
        .arg(&ctx));
    let layout = t.join("layout");
    ok(jbuild(&src)
        .args(["export", "app:1"])
        .arg(format!("oci:{}:app", layout.display())));
    layout
}

/// The whole story on the pool dataset `base`: jbuild's layers in
/// `base/jbuild` (which exists and is mounted), jails under `base/jails`.
fn scenario(base: &str, t: &Path) {
    let p = format!("{base}/jbuild");
    let layout = image_layout(t);
    let root = t.join("root");
    let sn = || on_zfs(&root, &p);
    ok(sn()
        .arg("import")
        .arg(format!("oci:{}:app", layout.display()))
        .arg("app:1"));
    let jails = format!("{base}/jails");
    zfs(&["create", &jails]);
    let jails_dir = PathBuf::from(get("mountpoint", &jails));

    // The default dataset: the root's parent is `base/jails`'s mountpoint.
    let out = run(sn()
        .args(["create", "app:1", "web", "--path"])
        .arg(jails_dir.join("web"))
        .arg("--conf")
        .arg(t.join("etc/web.conf")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let web = format!("{jails}/web");
    let layer = get("jbuild:layer", &web);
    assert!(layer.starts_with("chain-"), "{layer}");
    assert!(
        err.contains(&format!("(ZFS dataset {web}, a clone of layer {layer})")),
        "{err}"
    );
    assert_eq!(get("origin", &web), format!("{p}/{layer}@jbuild"));
    assert_eq!(get("jbuild:jail", &web), "web");
    assert!(get("jbuild:image", &web).starts_with("sha256:"));
    assert_eq!(
        get("mountpoint", &web),
        jails_dir.join("web").display().to_string()
    );
    // Writable, with the image's files, and the layer is untouched.
    let jroot = jails_dir.join("web");
    assert_eq!(
        fs::read_to_string(jroot.join("etc/motd")).unwrap(),
        "hello\n"
    );
    fs::write(jroot.join("etc/jail-only"), "mine").unwrap();
    let layer_dir = PathBuf::from(get("mountpoint", &format!("{p}/{layer}")));
    assert!(layer_dir.join("etc/x").exists());
    assert!(!layer_dir.join("etc/jail-only").exists());

    // --dataset: a jail inside jbuild's own dataset is still a jail.
    let out = run(sn()
        .args(["--json", "create", "app:1", "web2", "--dataset"])
        .arg(format!("{p}/web2"))
        .arg("--path")
        .arg(t.join("web2"))
        .arg("--conf")
        .arg(t.join("etc/web2.conf")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clone"]["dataset"], format!("{p}/web2"), "{v}");
    assert_eq!(v["clone"]["layer"], layer.as_str(), "{v}");
    assert_eq!(
        get("origin", &format!("{p}/web2")),
        format!("{p}/{layer}@jbuild")
    );
    // ... and a dataset that is there already is the user's to move.
    let e = fails(
        sn().args(["create", "app:1", "web3", "--dataset", &web, "--path"])
            .arg(t.join("web3"))
            .arg("--conf")
            .arg(t.join("etc/web3.conf")),
    );
    assert!(e.contains(&format!("dataset {web} already exists")), "{e}");

    // check: the jails are users, not leftovers or unfinished work.
    let (code, v) = check(&mut sn());
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");

    // rmi refuses the image the jails are made from, naming them.
    let e = fails(sn().args(["rmi", "app:1"]));
    assert!(
        e.contains(&format!("jail `web` (dataset {web})"))
            && e.contains(&format!("jail `web2` (dataset {p}/web2)"))
            && e.contains("jbuild rmi -f app:1"),
        "{e}"
    );
    ok(sn().args(["rmi", "-f", "app:1"]));
    let chains = || {
        zfs(&["list", "-H", "-r", "-o", "name", &p])
            .lines()
            .filter(|l| l.contains("/chain-"))
            .count()
    };
    assert_eq!(chains(), 2);
    // prune keeps the layer the jails stand on (and the one below it).
    let out = ok(sn().arg("prune"));
    let kept = format!("kept layer {layer}: jail web, web2 stands on it");
    assert!(out.contains(&kept), "{out}");
    assert_eq!(chains(), 2);
    let out = ok(sn().args(["prune", "--cache"]));
    assert!(out.contains(&kept), "{out}");
    assert_eq!(chains(), 2);
    assert_eq!(get("origin", &web), format!("{p}/{layer}@jbuild"));
    let (code, v) = check(&mut sn());
    assert_eq!(code, 0, "{v:#}");
    assert!(
        !kinds(&v, "reclaimable").contains(&"unused-layer".to_string()),
        "{v:#}"
    );
    assert_eq!(
        fs::read_to_string(jroot.join("etc/jail-only")).unwrap(),
        "mine"
    );

    // A jail that no longer stands on its layer is a finding.
    zfs_when_idle(&["destroy", &format!("{p}/web2")]);
    zfs_when_idle(&["promote", &web]);
    let (code, v) = check(&mut sn());
    assert_ne!(code, 0, "{v:#}");
    assert!(
        kinds(&v, "damaged").contains(&"jail-origin-gone".to_string()),
        "{v:#}"
    );
    assert!(
        v.to_string().contains("jail `web` was cloned from layer"),
        "{v:#}"
    );
    // The advice works: promoting the layer back makes all well again.
    zfs_when_idle(&["promote", &format!("{p}/{layer}")]);
    assert_eq!(get("origin", &web), format!("{p}/{layer}@jbuild"));
    let (code, v) = check(&mut sn());
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");

    // Once the jail is gone, prune takes its layers.
    zfs_when_idle(&["destroy", &web]);
    let out = ok(sn().arg("prune"));
    assert!(out.contains("removed 2 snapshots"), "{out}");
    assert_eq!(chains(), 0);
}

#[test]
fn create_clones_on_zfs_fuse_and_the_jails_layers_stay() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    scenario(&pool.name, t.path());
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn create_clones_on_openzfs_and_the_jails_layers_stay() {
    crate::support::lane::require(crate::support::lane::Lane::Qemu);
    let pool = std::env::var("JBUILD_TEST_ZFS_POOL").unwrap_or_else(|_| {
        panic!("JBUILD_TEST_ZFS_POOL is not set: this test runs in the qemu lane, `bash tests/zfs-vm/lane.sh`")
    });
    let base = format!("{pool}/clone{}", std::process::id());
    zfs(&["create", &base]);
    zfs(&["create", &format!("{base}/jbuild")]);
    let t = tempfile::tempdir().unwrap();
    let r = std::panic::catch_unwind(|| scenario(&base, t.path()));
    let _ = Command::new("zfs")
        .args(["destroy", "-R", "-f", &base])
        .status();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn dataset_needs_a_backend_that_clones() {
    let t = tempfile::tempdir().unwrap();
    let layout = image_layout(t.path());
    let root = t.path().join("root");
    ok(jbuild(&root)
        .args(["--backend", "dir", "import"])
        .arg(format!("oci:{}:app", layout.display()))
        .arg("app:1"));
    let e = fails(
        jbuild(&root)
            .args([
                "--backend",
                "dir",
                "create",
                "app:1",
                "web",
                "--dataset",
                "zroot/jails/web",
                "--path",
            ])
            .arg(t.path().join("web"))
            .arg("--conf")
            .arg(t.path().join("web.conf")),
    );
    assert!(e.contains("the dir backend cannot clone"), "{e}");
    assert!(!t.path().join("web").exists());
}
