//! What the applier remembers per entry, measured through `jbuild pull`
//! under GNU time against docs/security.md's bound for a layer of up to
//! the default `max_entries` (a million): 256 MiB.
//!
//! A million files take minutes to write in a debug build, so the test
//! pulls 200,000 entries whose paths are 99 bytes long (a long path costs
//! the applier most), and a layer of 1,000 such entries for the baseline,
//! and holds the peak projected to 999,000 entries (the baseline plus
//! 999,000 times what one entry added) to the bound. The applier stored
//! each entry's host path, in two sets: about 300 bytes an entry, or 300
//! MiB projected, where the review measured 427 MiB for 999,000 entries.
//! A one-off run of 999,000 entries through this code peaked at 115 MiB.
//!
//! Every run is capped at 4 GiB of address space, so code that loses the
//! bound fails the test instead of taking the machine with it.

use crate::support::hostile as hostile_support;
use crate::support::limits::{run_measured_capped, Measured};

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hostile_support::world::{jbuild, top_snapshot, World};
use hostile_support::{header, Head, Layer, GZIP};
use jbuild::digest::Digest;
use sha2::{Digest as _, Sha256};

/// docs/security.md: the peak of a pull of a layer of up to a million
/// entries.
const LAYER_BOUND_KIB: i64 = 256 << 10;
/// The entries the bound is projected to.
const ENTRIES: i64 = 999_000;
/// Address space any run here may take.
const CAP: u64 = 4 << 30;

/// `jbuild pull REF` on the state root `home`, measured; its figures
/// printed under `what`.
fn pull(home: &Path, reference: &str, what: &str) -> Measured {
    let mut c = jbuild(home);
    c.args(["pull", reference]);
    let m = run_measured_capped(&mut c, b"", Duration::from_secs(300), CAP);
    eprintln!(
        "{what}: exit {:?}, {:.1?}, peak RSS {} KiB",
        m.output.status.code(),
        m.elapsed,
        m.max_rss_kib
    );
    assert_eq!(m.output.status.code(), Some(0), "{what}: {}", m.text());
    m
}

/// A gzip layer of `entries` empty files, 1,000 to a directory (each
/// directory an entry too), every path 99 bytes long, written as it is
/// made (the tar is never held whole).
fn wide_layer(entries: usize) -> Layer {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut sha = Sha256::new();
    let mut put = |b: &[u8]| {
        sha.update(b);
        gz.write_all(b).unwrap();
    };
    let dir = |d: usize| format!("usr/local/share/doc/a-package-with-a-rather-long-name-{d:06}/");
    let mut file = header(&Head {
        name: format!("{}a-file-name-{:022}.txt", dir(0), 0).as_bytes(),
        ..Head::default()
    });
    assert_eq!(file.as_bytes().iter().position(|&b| b == 0), Some(99));
    for i in 0..entries {
        let (d, f) = (i / 1000, i % 1000);
        if f == 0 {
            put(header(&Head {
                name: dir(d).as_bytes(),
                kind: b'5',
                mode: 0o755,
                ..Head::default()
            })
            .as_bytes());
            continue;
        }
        // The same header, its name changed in place (a header built
        // afresh for each entry took a minute in a debug build).
        let path = format!("{}a-file-name-{f:022}.txt", dir(d));
        file.as_mut_bytes()[..99].copy_from_slice(path.as_bytes());
        file.set_cksum();
        put(file.as_bytes());
    }
    put(&[0u8; 1024]);
    let diff_id = Digest::from_sha(sha.finalize().into());
    Layer::raw(gz.finish().unwrap(), GZIP, diff_id)
}

/// A tmpfs for the state root (a million files on a disk take minutes);
/// unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Tmpfs {
        fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2g,nr_inodes=2m", "tmpfs"])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs failed");
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Publishes a wide layer of `entries` and pulls it into a fresh state
/// root on a tmpfs; the pull's peak RSS in KiB.
fn pull_wide(w: &World, entries: usize) -> i64 {
    let layer = wide_layer(entries);
    let img = hostile_support::world::layers(vec![layer]);
    let diff_ids: Vec<Digest> = img.layers.iter().map(|l| l.diff_id.clone()).collect();
    let (reference, _) = w.publish(&format!("big/wide{entries}"), &img);
    let home = w.home(&format!("wide-{entries}"));
    fs::write(home.join("jbuild.toml"), "").unwrap();
    let _disk = Tmpfs::mount(&home.join("root"));
    let m = pull(&home, &reference, &format!("{entries} entries"));
    let top = top_snapshot(&home, &diff_ids);
    let files = fs::read_dir(top.join("usr/local/share/doc"))
        .unwrap()
        .map(|d| fs::read_dir(d.unwrap().path()).unwrap().count())
        .sum::<usize>();
    assert_eq!(files + entries.div_ceil(1000), entries);
    m.max_rss_kib
}

#[test]
fn a_layer_of_a_million_entries_stays_within_the_documented_memory() {
    need!(Root);
    let started = Instant::now();
    let w = World::new();
    let small = 1_000;
    let big = 200_000;
    let base = pull_wide(&w, small);
    let peak = pull_wide(&w, big);
    let per_entry = (peak - base) as f64 * 1024.0 / (big - small) as f64;
    let projected = base + (per_entry * ENTRIES as f64 / 1024.0) as i64;
    eprintln!(
        "{per_entry:.0} bytes an entry: {} MiB projected for {ENTRIES} entries; {:.1?} in all",
        projected >> 10,
        started.elapsed()
    );
    assert!(
        projected <= LAYER_BOUND_KIB,
        "{per_entry:.0} bytes an entry (peak {peak} KiB for {big} entries, {base} KiB for \
         {small}): {projected} KiB for {ENTRIES} entries, more than docs/security.md's 256 MiB"
    );
}
