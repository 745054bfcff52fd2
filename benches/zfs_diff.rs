//! Layer export through `zfs diff` against the tree walk, on real OpenZFS.
//!
//! Run by hand with `bash benches/zfs-diff.sh`, which boots the qemu lane's
//! OpenZFS guest and runs this there with `JBUILD_TEST_ZFS_POOL` set. On a
//! host without that variable it says so and does nothing.
//!
//! It builds a base dataset of 50,000 files (500 directories of 100, 0–4 KiB
//! each), then for each change — 1 file, 100 files of one directory, 100
//! files in 100 directories, 10% and 50% of the files (all directories)
//! rewritten — a clone of the base with that change, and times the export
//! of that layer (diff + tar + zstd + digests, to a sink) three ways, in
//! interleaved rounds (best of 3, of 1 past 10 s): through `zfs diff` alone
//! (`ZfsDiffer::changes_via_zfs`), through the tree walk alone, and
//! through the chosen differ (`ZfsDiffer` as a build uses it: `zfs diff`
//! watched and stopped for the walk when it projects slower, see
//! `jbuild::diff::choose`), with the name of the differ that listed it.
//! All three layers must have the same diff ID.
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

/// Rounds of every export, interleaved (each round runs each one in turn,
/// so load from elsewhere falls on all alike): the best time of each, of 3
/// rounds, except that an export that took over 10 s once is not run again
/// (the emulated guest is slow, and such a run is not noise-bound).
fn rounds<const N: usize>(mut exports: [&mut dyn FnMut() -> String; N]) -> [(Duration, String); N] {
    let mut best = [(); N].map(|_| (Duration::MAX, String::new()));
    for _ in 0..3 {
        for (f, b) in exports.iter_mut().zip(best.iter_mut()) {
            if b.0 > Duration::from_secs(10) && b.0 != Duration::MAX {
                continue;
            }
            let t = Instant::now();
            let out = f();
            b.0 = b.0.min(t.elapsed());
            b.1 = out;
        }
    }
    best
}

/// Exports the layer the differ finds; returns its diff ID and the name of
/// the differ that listed it.
fn export_through(
    changes: impl Fn() -> Result<(Vec<Change>, &'static str), DiffError>,
    root: &Path,
) -> String {
    let (list, by) = changes().unwrap();
    let opts = TarOptions { clamp_mtime: 0 };
    let (layer, _) = export(root, &list, &opts, Compression::Zstd, io::sink()).unwrap();
    format!("{} {by}", layer.diff_id)
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
    println!("| change | changes | export via zfs diff | export via tree walk | export via the chosen differ (by) | chosen ÷ faster | walk ÷ chosen |");
    println!("|---|---|---|---|---|---|---|");
    let per_dir = 100;
    for (label, n, spread) in [
        ("1 file", 1, true),
        ("100 files, one directory", 100, false),
        ("100 files, 100 directories", 100, true),
        ("10% of the files", files / 10, true),
        ("50% of the files", files / 2, true),
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
        let count = walk.changes(Some(pr), cr).unwrap().len();
        let [(tz, dz), (tw, dw), (tc, dc)] = rounds([
            &mut || export_through(|| Ok((zd.changes_via_zfs(pr, cr)?, "zfs-diff")), &root),
            &mut || export_through(|| walk.changes_named(Some(pr), cr), &root),
            &mut || export_through(|| zd.changes_named(Some(pr), cr), &root),
        ]);
        let id = |d: &str| d.split(' ').next().unwrap().to_string();
        assert_eq!(id(&dz), id(&dw), "{label}: the layers differ");
        assert_eq!(
            id(&dc),
            id(&dw),
            "{label}: the chosen differ's layer differs"
        );
        let winner = dc.split(' ').nth(1).unwrap_or("?").to_string();
        let faster = tz.min(tw);
        println!(
            "| {label} | {count} | {:.3} s | {:.3} s | {:.3} s ({winner}) | {:.2}x | {:.1}x |",
            tz.as_secs_f64(),
            tw.as_secs_f64(),
            tc.as_secs_f64(),
            tc.as_secs_f64() / faster.as_secs_f64(),
            tw.as_secs_f64() / tc.as_secs_f64()
        );
    }
    let _ = Command::new("zfs")
        .args(["destroy", "-r", "-f", &p])
        .status();
}
