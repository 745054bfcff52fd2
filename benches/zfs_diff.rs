//! Layer export through `zfs diff` against the tree walk, on real OpenZFS.
//!
//! Run by hand with `bash benches/zfs-diff.sh`, which boots the qemu lane's
//! OpenZFS guest and runs this there with `JBUILD_TEST_ZFS_POOL` set. On a
//! host without that variable it says so and does nothing.
//!
//! It builds a base dataset of 50,000 files (500 directories of 100, 0–4 KiB
//! each), then for each change — 1 file, 100 files, 10% of the files
//! rewritten — a clone of the base with that change, and times, best of 3,
//! the export of that layer (diff + tar + zstd + digests, to a sink):
//! through `ZfsDiffer` (which must use `zfs diff`), then through the tree
//! walk, in one run. Both layers must have the same diff ID.
//! `JBUILD_BENCH_FILES` changes the number of files.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jbuild::diff::walk::TreeWalkDiffer;
use jbuild::diff::zfs::ZfsDiffer;
use jbuild::diff::{Change, DiffError, Differ, SnapshotRef};
use jbuild::layer::{export, Compression, TarOptions};

fn zfs(args: &[&str]) -> String {
    let out = Command::new("zfs").args(args).output().expect("run zfs");
    assert!(
        out.status.success(),
        "zfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn mountpoint(ds: &str) -> PathBuf {
    PathBuf::from(zfs(&["get", "-H", "-o", "value", "mountpoint", ds]).trim())
}

fn content(i: usize, generation: u32) -> Vec<u8> {
    let size = (i * 7919 + generation as usize * 104_729) % 4097;
    let line = format!("file {i} generation {generation}\n");
    line.as_bytes()
        .iter()
        .copied()
        .cycle()
        .take(size.max(line.len()))
        .collect()
}

fn path_of(root: &Path, i: usize) -> PathBuf {
    root.join(format!("d{:03}/f{:03}", i / 100, i % 100))
}

fn best_of_3(mut f: impl FnMut() -> String) -> (Duration, String) {
    let mut best = Duration::MAX;
    let mut out = String::new();
    for _ in 0..3 {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed());
    }
    (best, out)
}

fn export_through(
    changes: impl Fn() -> Result<Vec<Change>, DiffError>,
    root: &Path,
) -> (usize, String) {
    let list = changes().unwrap();
    let opts = TarOptions { clamp_mtime: 0 };
    let (layer, _) = export(root, &list, &opts, Compression::Zstd, io::sink()).unwrap();
    (list.len(), layer.diff_id.to_string())
}

fn main() {
    let Ok(pool) = std::env::var("JBUILD_TEST_ZFS_POOL") else {
        eprintln!(
            "skipped: needs OpenZFS; run `bash benches/zfs-diff.sh` (boots the qemu lane's guest)"
        );
        return;
    };
    let files: usize = std::env::var("JBUILD_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let p = format!("{pool}/bench");
    let _ = Command::new("zfs")
        .args(["destroy", "-r", "-f", &p])
        .status();
    zfs(&["create", &p]);
    zfs(&["create", &format!("{p}/base")]);
    let base = mountpoint(&format!("{p}/base"));
    let t = Instant::now();
    for i in 0..files {
        let f = path_of(&base, i);
        if i % 100 == 0 {
            fs::create_dir_all(f.parent().unwrap()).unwrap();
        }
        fs::write(f, content(i, 0)).unwrap();
    }
    zfs(&["snapshot", &format!("{p}/base@jbuild")]);
    eprintln!("base: {files} files in {:.1} s", t.elapsed().as_secs_f64());

    let walk = TreeWalkDiffer::new();
    let zd = ZfsDiffer::new(&p);
    println!("| change | changes listed | zfs diff export | tree-walk export | ratio |");
    println!("|---|---|---|---|---|");
    for (label, n) in [
        ("1 file", 1),
        ("100 files", 100),
        ("10% of the files", files / 10),
    ] {
        let name = format!("c{n}");
        let ds = format!("{p}/{name}");
        zfs(&["clone", &format!("{p}/base@jbuild"), &ds]);
        let root = mountpoint(&ds);
        // Spread over the tree: every (files / n)th file.
        let step = (files / n.max(1)).max(1);
        for k in 0..n {
            fs::write(path_of(&root, (k * step + 37) % files), content(k, 1)).unwrap();
        }
        zfs(&["snapshot", &format!("{ds}@jbuild")]);
        let pr = SnapshotRef {
            name: "base",
            root: &base,
        };
        let cr = SnapshotRef {
            name: &name,
            root: &root,
        };
        let mut listed = 0;
        let (tz, dz) = best_of_3(|| {
            let (len, id) = export_through(|| zd.changes_via_zfs(pr, cr), &root);
            listed = len;
            id
        });
        let (tw, dw) = best_of_3(|| export_through(|| walk.changes(Some(pr), cr), &root).1);
        assert_eq!(dz, dw, "{label}: the layers differ");
        println!(
            "| {label} | {listed} | {:.3} s | {:.3} s | {:.1}x |",
            tz.as_secs_f64(),
            tw.as_secs_f64(),
            tw.as_secs_f64() / tz.as_secs_f64()
        );
    }
    let _ = Command::new("zfs")
        .args(["destroy", "-r", "-f", &p])
        .status();
}
