//! Export throughput against the shell pipelines it replaces.
//!
//! `cargo bench --bench export` builds a synthetic tree of 50,000 files
//! (0–16 KiB each, a mix of text, structured binary and random bytes, about
//! 400 MB) in a temporary directory, then times, best of 3:
//!
//! - jbuild's `export` (tar + diff ID + compression + digest) to a sink;
//! - `tar -cf - -C DIR . | zstd -T0 -3 > /dev/null`, `| gzip -6`, `| pigz -6`,
//!   `| cat` (GNU tar does not read files when writing to /dev/null itself).
//!
//! Set `JBUILD_BENCH_FILES` to change the number of files, and
//! `JBUILD_BENCH_DIR` to build the tree elsewhere than the system temp dir.

use std::fs;
use std::io;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use jbuild::diff::walk::TreeWalkDiffer;
use jbuild::diff::{Differ, SnapshotRef};
use jbuild::layer::{export, Compression, TarOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const WORDS: &[&str] = &[
    "the", "jail", "layer", "snapshot", "config", "usr", "local", "etc", "lib", "bin", "share",
    "pkg", "freebsd", "rc", "conf", "enable", "YES", "NO", "#", "=", "/", "include", "define",
    "return", "if", "else", "int", "char", "void",
];

fn build_tree(root: &Path, files: usize) -> u64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut total = 0;
    for i in 0..files {
        let dir = root.join(format!("d{:02}/s{:02}", i % 20, (i / 20) % 25));
        if i < 500 {
            fs::create_dir_all(&dir).unwrap();
        }
        let size = (rng.next() % 16385) as usize;
        let mut data = Vec::with_capacity(size);
        match rng.next() % 10 {
            // Text: the bulk of a base system's configuration and sources.
            0..=3 => {
                while data.len() < size {
                    data.extend_from_slice(
                        WORDS[(rng.next() % WORDS.len() as u64) as usize].as_bytes(),
                    );
                    data.push(if rng.next() % 8 == 0 { b'\n' } else { b' ' });
                }
            }
            // Structured binary: repeated records with some noise.
            4..=6 => {
                while data.len() < size {
                    let r = rng.next();
                    data.extend_from_slice(&[
                        0,
                        0,
                        (r & 0xff) as u8,
                        0x7f,
                        b'E',
                        b'L',
                        b'F',
                        (r >> 8 & 3) as u8,
                    ]);
                }
            }
            // Already compressed or random.
            _ => {
                while data.len() < size {
                    data.extend_from_slice(&rng.next().to_le_bytes());
                }
            }
        }
        data.truncate(size);
        total += size as u64;
        fs::write(dir.join(format!("f{i:05}")), &data).unwrap();
    }
    total
}

fn best_of_3(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap()
}

fn shell(cmd: &str) -> Duration {
    best_of_3(|| {
        let st = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
        assert!(st.success(), "{cmd}");
    })
}

fn main() {
    let files: usize = std::env::var("JBUILD_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let base = std::env::var_os("JBUILD_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let tmp = tempfile::Builder::new()
        .prefix("jbuild-bench-")
        .tempdir_in(base)
        .unwrap();
    let root = tmp.path().join("tree");
    fs::create_dir(&root).unwrap();
    let start = Instant::now();
    let bytes = build_tree(&root, files);
    println!(
        "tree: {files} files, {:.0} MB, built in {:.1?}",
        bytes as f64 / 1e6,
        start.elapsed()
    );

    let snap = SnapshotRef {
        name: "bench",
        root: &root,
    };
    let mut changes = Vec::new();
    let diff_time = best_of_3(|| changes = TreeWalkDiffer::new().changes(None, snap).unwrap());
    let opts = TarOptions {
        clamp_mtime: 1_700_000_000,
    };
    let ours =
        |c: Compression| best_of_3(|| drop(export(&root, &changes, &opts, c, io::sink()).unwrap()));
    let dir = root.display();
    // JBUILD_BENCH_ONLY=zstd|gzip|none: just run that export (for a profiler).
    if let Ok(only) = std::env::var("JBUILD_BENCH_ONLY") {
        let c: Compression = only.parse().unwrap();
        for _ in 0..5 {
            println!("{c}: {:.2?}", ours(c));
        }
        return;
    }

    let rows = [
        (
            "zstd -3",
            ours(Compression::Zstd),
            shell(&format!(
                "tar -cf - -C {dir} . | zstd -q -T0 -3 > /dev/null"
            )),
            "tar | zstd -T0 -3",
        ),
        (
            "gzip -6",
            ours(Compression::Gzip),
            shell(&format!("tar -cf - -C {dir} . | gzip -6 > /dev/null")),
            "tar | gzip -6",
        ),
        (
            "gzip -6",
            ours(Compression::Gzip),
            shell(&format!("tar -cf - -C {dir} . | pigz -6 > /dev/null")),
            "tar | pigz -6",
        ),
        (
            "none",
            ours(Compression::None),
            shell(&format!("tar -cf - -C {dir} . | cat > /dev/null")),
            "tar",
        ),
    ];
    println!(
        "tree-walk diff (base layer, {} changes): {:.2?}",
        changes.len(),
        diff_time
    );
    println!(
        "{:<10} {:>10} {:>9}   {:<20} {:>10} {:>9}   {:>6}",
        "jbuild", "time", "MB/s", "reference", "time", "MB/s", "ratio"
    );
    for (name, mine, theirs, reference) in rows {
        let mbps = |d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
        println!(
            "{name:<10} {:>10.2?} {:>9.0}   {reference:<20} {:>10.2?} {:>9.0}   {:>5.2}x",
            mine,
            mbps(mine),
            theirs,
            mbps(theirs),
            theirs.as_secs_f64() / mine.as_secs_f64()
        );
    }
    println!("ratio = reference time / jbuild time (above 1: jbuild is faster)");
}
