//! `jbuild system df` against what the state root holds, measured here
//! on its own: blobs reached from `index.json` by reading the manifests,
//! snapshot directories walked, caches walked; then `prune` and `prune
//! --cache` free what the RECLAIMABLE column said.

use crate::support::common::{jbuild, ok};

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::Value;

/// Apparent bytes under `dir`, each inode once.
fn du(dir: &Path) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else if seen.insert(m.ino()) {
                total += m.len();
            }
        }
    }
    total
}

fn blob(root: &Path, digest: &str) -> std::path::PathBuf {
    root.join("store/blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

/// Every blob's size, and those `index.json` reaches (manifests, their
/// configs and layers; lists and their manifests).
fn blobs(root: &Path) -> (BTreeMap<String, u64>, HashSet<String>) {
    let mut all = BTreeMap::new();
    for e in fs::read_dir(root.join("store/blobs/sha256")).unwrap() {
        let e = e.unwrap();
        all.insert(
            format!("sha256:{}", e.file_name().to_string_lossy()),
            e.metadata().unwrap().len(),
        );
    }
    let index: Value =
        serde_json::from_slice(&fs::read(root.join("store/index.json")).unwrap()).unwrap();
    let mut todo: Vec<String> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["digest"].as_str().unwrap().to_string())
        .collect();
    let mut reached = HashSet::new();
    while let Some(d) = todo.pop() {
        if !reached.insert(d.clone()) {
            continue;
        }
        let Ok(bytes) = fs::read(blob(root, &d)) else {
            continue;
        };
        let Ok(doc) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        for key in ["manifests", "layers"] {
            for m in doc[key].as_array().into_iter().flatten() {
                todo.push(m["digest"].as_str().unwrap().to_string());
            }
        }
        if let Some(c) = doc["config"]["digest"].as_str() {
            todo.push(c.to_string());
        }
    }
    (all, reached)
}

/// The snapshots of the `dir` backend by name, with their sizes.
fn snapshots(root: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for kind in ["committed", "active"] {
        if let Ok(rd) = fs::read_dir(root.join("snapshots/dir").join(kind)) {
            for e in rd {
                let e = e.unwrap();
                out.insert(e.file_name().to_string_lossy().into_owned(), du(&e.path()));
            }
        }
    }
    out
}

fn df(root: &Path) -> BTreeMap<String, (u64, u64, u64)> {
    let v: Value =
        serde_json::from_str(&ok(jbuild(root).args(["--json", "system", "df"]))).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
            (
                r["type"].as_str().unwrap().to_string(),
                (n("total"), n("size"), n("reclaimable")),
            )
        })
        .collect()
}

fn context(dir: &Path, jailfile: &str, file: &str, bytes: usize) -> std::path::PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(
        dir.join(file),
        crate::support::common::noise(bytes, bytes as u64),
    )
    .unwrap();
    fs::write(dir.join("Jailfile"), jailfile).unwrap();
    dir.to_path_buf()
}

#[test]
fn system_df_says_what_the_state_root_holds_and_what_prune_frees() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let a = context(
        &t.path().join("a"),
        "FROM scratch\nCOPY a.bin /a.bin\n",
        "a.bin",
        300_000,
    );
    ok(jbuild(&root).args(["build", "-q", "-t", "a:1"]).arg(&a));
    let b = context(
        &t.path().join("b"),
        "FROM a:1\nCOPY b.bin /b.bin\n",
        "b.bin",
        200_000,
    );
    ok(jbuild(&root).args(["build", "-q", "-t", "b:1"]).arg(&b));
    let archive = t.path().join("a.tar");
    ok(jbuild(&root)
        .args(["-q", "save", "-o"])
        .arg(&archive)
        .arg("a:1"));
    ok(jbuild(&root).args(["rmi", "b:1"]));
    for (dir, file, n) in [
        ("cache/packages", "p.pkg", 70_000),
        ("cache/freebsd/14.1-RELEASE", "base.txz", 50_000),
        ("cache/mounts/go", "m", 30_000),
    ] {
        fs::create_dir_all(root.join(dir)).unwrap();
        fs::write(root.join(dir).join(file), vec![7u8; n]).unwrap();
    }

    let rows = df(&root);
    let (all, reached) = blobs(&root);
    let unreached: u64 = all
        .iter()
        .filter(|(d, _)| !reached.contains(*d))
        .map(|(_, n)| n)
        .sum();
    assert!(unreached > 200_000, "b:1's layer is left: {unreached}");
    assert_eq!(rows["images"], (1, all.values().sum(), unreached));
    let snaps = snapshots(&root);
    let steps: u64 = snaps
        .iter()
        .filter(|(n, _)| n.starts_with("step-"))
        .map(|(_, s)| s)
        .sum();
    let count = snaps.keys().filter(|n| n.starts_with("step-")).count() as u64;
    assert_eq!(count, 2, "{snaps:?}");
    assert_eq!(rows["build cache"], (count, steps, steps));
    assert_eq!(rows["layers"], (0, 0, 0));
    assert_eq!(rows["snapshots"], (0, 0, 0));
    assert_eq!(rows["package cache"], (1, 70_000, 70_000));
    assert_eq!(rows["release cache"], (1, 50_000, 0));
    assert_eq!(rows["cache mounts"], (1, 30_000, 30_000));

    // `prune` frees the unreached blobs; `prune --cache` the build cache,
    // the package cache and the cache mounts, not the release sets.
    ok(jbuild(&root).arg("prune"));
    let (all, _) = blobs(&root);
    assert_eq!(df(&root)["images"], (1, all.values().sum(), 0));
    ok(jbuild(&root).args(["prune", "--cache"]));
    let after = df(&root);
    assert_eq!(after["build cache"], (0, 0, 0));
    assert_eq!(after["package cache"].1, 0);
    assert_eq!(after["cache mounts"].1, 0);
    assert_eq!(after["release cache"], (1, 50_000, 0));

    // Unpacked layers (`chain-`): an imported image made into a jail
    // unpacks them; untagged, they are what `prune` frees.
    let other = t.path().join("other");
    ok(jbuild(&other).args(["-q", "load", "-i"]).arg(&archive));
    ok(jbuild(&other)
        .env("JBUILD_CONFIG", "/dev/null")
        .args(["-q", "create", "--path"])
        .arg(t.path().join("jail"))
        .arg("--conf")
        .arg(t.path().join("jail.conf"))
        .args(["a:1", "j"]));
    let chains: BTreeMap<String, u64> = snapshots(&other)
        .into_iter()
        .filter(|(n, _)| n.starts_with("chain-"))
        .collect();
    assert_eq!(chains.len(), 1, "{chains:?}");
    let size: u64 = chains.values().sum();
    assert!(size >= 300_000, "{size}");
    assert_eq!(df(&other)["layers"], (1, size, 0));
    ok(jbuild(&other).args(["rmi", "a:1"]));
    assert_eq!(df(&other)["layers"], (1, size, size));
    ok(jbuild(&other).arg("prune"));
    assert_eq!(df(&other)["layers"], (0, 0, 0));
    let text = ok(jbuild(&other).args(["system", "df"]));
    assert!(
        text.starts_with("TYPE") && text.contains("release cache"),
        "{text}"
    );
}
