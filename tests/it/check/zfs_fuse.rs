//! `jbuild check` on the ZFS backend, on zfs-fuse: the snapshot checks go
//! through the Snapshotter, so labels are ZFS user properties, an active
//! snapshot is a dataset without `@jbuild`, and repair removes labels with
//! `zfs inherit`.

use crate::support::common;
use crate::support::zfs_fuse;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

fn on_zfs(root: &Path, pool: &zfs_fuse::Pool) -> Command {
    let mut c = jbuild(root);
    c.env("JBUILD_ZFS_DATASET", &pool.dataset)
        .env("JBUILD_CONFIG", "/dev/null")
        .args(["--backend", "zfs"]);
    c
}

fn check(root: &Path, pool: &zfs_fuse::Pool, extra: &[&str]) -> (i32, Value) {
    let o = run(on_zfs(root, pool).args(["--json", "check"]).args(extra));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().unwrap(), v)
}

fn kinds(v: &Value, severity: &str) -> Vec<String> {
    let mut k: Vec<String> = v[severity]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect();
    k.sort();
    k
}

fn zfs(args: &[&str]) -> String {
    let (ok, out) = zfs_fuse::sh("zfs", args);
    assert!(ok, "zfs {args:?}: {out}");
    out
}

#[test]
fn check_and_repair_on_zfs() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let ctx = t.path().join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nLINE_IN_FILE \"hello\" /etc/motd\nLINE_IN_FILE \"x\" /etc/x\n",
    )
    .unwrap();
    let root = t.path().join("root");
    ok(on_zfs(&root, &pool)
        .args(["build", "-q", "-t", "one:1"])
        .arg(&ctx));
    let (code, v) = check(&root, &pool, &["--deep"]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");
    assert_eq!(v["summary"]["snapshots"], 2, "{v:#}");
    assert!(
        v["notes"].to_string().contains("2 layers diffed again"),
        "{v:#}"
    );

    // The top layer: the step snapshot with /etc/x.
    let top = pool
        .zfs_list("name,origin")
        .into_iter()
        .filter_map(|l| {
            let (name, origin) = l.split_once('\t')?;
            let rel = name.strip_prefix(&format!("{}/", pool.dataset))?;
            (!rel.contains('@') && origin != "-").then(|| rel.to_string())
        })
        .next()
        .expect("the second layer is a clone of the first");
    let snap = format!("{}/{top}@jbuild", pool.dataset);

    // Work of a process that is gone: a dataset without @jbuild.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    zfs(&["create", &format!("{}/active-{dead}-1", pool.dataset)]);
    // A chain ID label that does not follow, and a blob label for a blob
    // the store does not have.
    let good_chain = zfs(&["get", "-H", "-o", "value", "jbuild:chainid", &snap]);
    zfs(&[
        "set",
        &format!("jbuild:chainid=sha256:{}", "0".repeat(64)),
        &snap,
    ]);
    let stale = format!("sha256:{}", "ab".repeat(32));
    zfs(&["set", &format!("jbuild:blob.zstd={stale}"), &snap]);

    let (code, v) = check(&root, &pool, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), vec!["chain-mismatch"], "{v:#}");
    assert_eq!(
        kinds(&v, "reclaimable"),
        vec!["dead-active-snapshot", "stale-label"],
        "{v:#}"
    );
    assert!(
        v["damaged"][0]["where"].as_str().unwrap().ends_with(&top),
        "{v:#}"
    );

    zfs(&[
        "set",
        &format!("jbuild:chainid={}", good_chain.trim()),
        &snap,
    ]);
    let (code, v) = check(&root, &pool, &["--repair"]);
    assert_eq!(code, 0, "{v:#}");
    let did = v["repaired"].to_string();
    assert!(
        did.contains(&format!("removed snapshot active-{dead}-1")),
        "{did}"
    );
    assert!(
        did.contains("removed stale labels jbuild:blob.zstd"),
        "{did}"
    );
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");
    assert_eq!(
        zfs(&["get", "-H", "-o", "value", "jbuild:blob.zstd", &snap]).trim(),
        "-",
        "the label is gone"
    );
    assert!(zfs(&["get", "-H", "-o", "value", "jbuild:blob.gzip", &snap]).starts_with("sha256:"));
    let names = pool.zfs_list("name").join("\n");
    assert!(!names.contains("active-"), "{names}");
}
