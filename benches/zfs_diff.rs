//! Layer export through `zfs diff` against the tree walk, on real OpenZFS.
//!
//! Run by hand with `bash benches/zfs-diff.sh`, which boots the qemu lane's
//! OpenZFS guest and runs this there with `JBUILD_TEST_ZFS_POOL` set. On a
//! host without that variable it says so and does nothing.
//!
//! It builds a base dataset of 50,000 files (500 directories of 100, 0–4 KiB
//! each), then for each change — 1 file, 100 files of one directory, 100
//! files in 100 directories, 10% of the files (all directories) rewritten —
//! a clone of the base with that change, and times `zfs diff` alone, then
//! the export of that layer (diff + tar + zstd + digests, to a sink) through
//! `ZfsDiffer` (which must use `zfs diff`) and through the tree walk, best
//! of 3 (of 1 past 10 s). Both layers must have the same diff ID.
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

/// Best of 3, or of 1 when a run takes over 10 s (the emulated guest is
/// slow, and such a run is not noise-bound).
fn best_of_3(mut f: impl FnMut() -> String) -> (Duration, String) {
    let mut best = Duration::MAX;
    let mut out = String::new();
    for _ in 0..3 {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed());
        if best > Duration::from_secs(10) {
            break;
        }
    }
    (best, out)
}

/// How long `zfs diff -H -F` alone takes, and how many lines it prints.
fn zfs_diff_alone(from: &str, to: &str) -> (Duration, usize) {
    let t = Instant::now();
    let out = zfs(&["diff", "-H", "-F", from, to]);
    (t.elapsed(), out.lines().count())
}

/// Exports the layer the differ finds; returns its diff ID.
fn export_through(changes: impl Fn() -> Result<Vec<Change>, DiffError>, root: &Path) -> String {
    let list = changes().unwrap();
    let opts = TarOptions { clamp_mtime: 0 };
    let (layer, _) = export(root, &list, &opts, Compression::Zstd, io::sink()).unwrap();
    layer.diff_id.to_string()
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
    println!("| change | zfs diff lines | `zfs diff` alone | export via zfs diff | export via tree walk | ratio |");
    println!("|---|---|---|---|---|---|");
    let per_dir = 100;
    for (label, n, spread) in [
        ("1 file", 1, true),
        ("100 files, one directory", 100, false),
        ("100 files, 100 directories", 100, true),
        ("10% of the files", files / 10, true),
    ] {
        let name = format!("c{n}{}", if spread { "s" } else { "d" });
        let ds = format!("{p}/{name}");
        zfs(&["clone", &format!("{p}/base@jbuild"), &ds]);
        let root = mountpoint(&ds);
        // Spread over the tree (every (files / n)th file), or the first n
        // files of one directory.
        let step = if spread { (files / n.max(1)).max(1) } else { 1 };
        let first = if spread {
            37
        } else {
            (files / 2) / per_dir * per_dir
        };
        for k in 0..n {
            fs::write(path_of(&root, (first + k * step) % files), content(k, 1)).unwrap();
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
        let (alone, lines) = zfs_diff_alone(&format!("{p}/base@jbuild"), &format!("{ds}@jbuild"));
        let (tz, dz) = best_of_3(|| export_through(|| zd.changes_via_zfs(pr, cr), &root));
        let (tw, dw) = best_of_3(|| export_through(|| walk.changes(Some(pr), cr), &root));
        assert_eq!(dz, dw, "{label}: the layers differ");
        println!(
            "| {label} | {lines} | {:.3} s | {:.3} s | {:.3} s | {:.1}x |",
            alone.as_secs_f64(),
            tz.as_secs_f64(),
            tw.as_secs_f64(),
            tw.as_secs_f64() / tz.as_secs_f64()
        );
    }
    let _ = Command::new("zfs")
        .args(["destroy", "-r", "-f", &p])
        .status();
}
