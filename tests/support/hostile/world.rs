//! The world the hostile test runs in: one registry, a temp dir under
//! `/tmp/jbuild-hostile-…` with a canary directory the layers aim at, a
//! template state root holding a good image, and one copy of it per case;
//! and what is compared before and after each pull.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use super::{upload, Layer, Tar};
use crate::support::common;
use crate::support::limits::run_measured;
use crate::support::registry::{self as registry_support, run_bounded, Registry};
use jbuild::digest::Digest;

/// Where the layers aim: the shared temp dir of this test, which holds the
/// canary directory and the state roots.
pub struct Aim {
    pub top: PathBuf,
}

impl Aim {
    /// `/tmp/jbuild-hostile-…/REL`.
    pub fn abs(&self, rel: &str) -> Vec<u8> {
        self.top.join(rel).into_os_string().into_encoded_bytes()
    }
    /// `../` enough times to climb out of any root, then the same place.
    pub fn up(&self, rel: &str) -> Vec<u8> {
        let mut p = b"../".repeat(12);
        p.extend_from_slice(&self.abs(rel)[1..]);
        p
    }
}

/// An image of the corpus: its layers, and the diff IDs its configuration
/// claims (`None`: the layers' own).
pub struct Img {
    pub layers: Vec<Layer>,
    pub diff_ids: Option<Vec<Digest>>,
}

pub fn one(tar: Vec<u8>) -> Img {
    Img {
        layers: vec![Layer::tar(tar)],
        diff_ids: None,
    }
}

pub fn layers(layers: Vec<Layer>) -> Img {
    Img {
        layers,
        diff_ids: None,
    }
}

/// What a state root holds that a refused pull must leave as it was: the
/// store (its blobs, index and jbuild's own leftovers) and the snapshots,
/// lock files aside.
pub fn state(home: &Path) -> BTreeMap<String, common::Entry> {
    let mut all = BTreeMap::new();
    for (sub, tree) in [("store", "root/store"), ("snapshots", "root/snapshots/dir")] {
        let dir = home.join(tree);
        if !dir.exists() {
            continue;
        }
        for (k, v) in common::snapshot_tree(&dir) {
            let lock = k.ends_with("lock") && v.kind == "file" && v.content.is_empty();
            if !lock {
                all.insert(format!("{sub}/{k}"), v);
            }
        }
    }
    all
}

/// The shared temp dir minus the state roots: the canary and its markers.
pub fn outside(top: &Path) -> BTreeMap<String, common::Entry> {
    common::snapshot_tree(top)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("case-"))
        .collect()
}

pub fn jbuild(home: &Path) -> std::process::Command {
    registry_support::jbuild(home)
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `jbuild check` on a state root must find it sound, with nothing to
/// reclaim either: a refused pull leaves no leftover.
pub fn assert_checks_clean(home: &Path, what: &str) {
    let mut c = jbuild(home);
    let out = run_bounded(c.args(["--json", "check"]), Duration::from_secs(60));
    let report = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: jbuild check:\n{report}{}",
        text(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(v["sound"], true, "{what}: {report}");
    assert_eq!(v["damaged"], serde_json::json!([]), "{what}: {report}");
    assert_eq!(v["reclaimable"], serde_json::json!([]), "{what}: {report}");
}

pub fn pull(home: &Path, reference: &str, flags: &[&str]) -> Output {
    let mut c = jbuild(home);
    c.arg("pull").args(flags).arg(reference);
    let m = run_measured(&mut c, b"", Duration::from_secs(60));
    PULL_PEAK_KIB.with(|p| p.set(p.get().max(m.max_rss_kib)));
    m.output
}

thread_local! {
    /// The largest peak RSS of a [`pull`] run on this thread (each test has
    /// a thread of its own), in KiB.
    static PULL_PEAK_KIB: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// The committed snapshot that holds the whole root of an image whose
/// layers have these diff IDs.
pub fn top_snapshot(home: &Path, diff_ids: &[Digest]) -> PathBuf {
    let chain = jbuild::image::chain_ids(diff_ids);
    let name = jbuild::image::SnapshotName::chain(chain.last().unwrap());
    home.join("root/snapshots/dir/committed")
        .join(name)
        .join("fs")
}

pub struct World {
    _tmp: tempfile::TempDir,
    pub aim: Aim,
    reg: Registry,
    pub template: PathBuf,
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::Builder::new()
            .prefix("jbuild-hostile-")
            .tempdir_in("/tmp")
            .unwrap();
        let top = tmp.path().to_path_buf();
        let canary = top.join("canary");
        fs::create_dir_all(canary.join("d")).unwrap();
        fs::write(canary.join("secret"), "precious").unwrap();
        let reg = Registry::start();
        let template = top.join("template");
        fs::create_dir_all(&template).unwrap();
        // Small limits, so that bombs stop early and tests stay fast.
        fs::write(
            template.join("jbuild.toml"),
            "[layers]\nmax_size = 4_194_304\nmax_entries = 5000\n",
        )
        .unwrap();
        World {
            _tmp: tmp,
            aim: Aim { top },
            reg,
            template,
        }
    }

    /// Uploads `img` to the registry as `repo:1`; returns the reference and
    /// the digest of its last layer.
    pub fn publish(&self, repo: &str, img: &Img) -> (String, String) {
        let reference = format!("{}/{repo}:1", self.reg.host());
        let own: Vec<Digest> = img.layers.iter().map(|l| l.diff_id.clone()).collect();
        let diff_ids = img.diff_ids.as_deref().unwrap_or(&own);
        upload(&self.reg.host(), repo, "1", &img.layers, diff_ids);
        let last = Digest::of(&img.layers.last().unwrap().blob).to_string();
        (reference, last)
    }

    /// A fresh state root holding the good image, for one case.
    pub fn home(&self, case: &str) -> PathBuf {
        let home = self.aim.top.join(format!("case-{case}"));
        common::copy_tree(&self.template, &home);
        home
    }
}

/// The peak resident memory, in KiB, of the largest `jbuild pull` the
/// calling test ran through [`pull`], each measured on its own by GNU time.
/// (Not `getrusage(RUSAGE_CHILDREN)`: every test of the one `it` binary
/// shares this process, so its children are every test's — registries,
/// peers — and a child forked from the large test process carries the
/// test's own high-water mark across `exec`.)
pub fn max_rss_of_pulls() -> i64 {
    PULL_PEAK_KIB.with(|p| p.get())
}

/// The paths that differ between two states, for a readable failure.
pub fn differences(
    before: &BTreeMap<String, common::Entry>,
    after: &BTreeMap<String, common::Entry>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in after {
        match before.get(k) {
            None => out.push(format!("added {k}")),
            Some(b) if b != v => out.push(format!("changed {k}")),
            _ => {}
        }
    }
    out.extend(
        before
            .keys()
            .filter(|k| !after.contains_key(*k))
            .map(|k| format!("removed {k}")),
    );
    out
}

/// The image the roots hold before each case: a gzip layer with a hard
/// link, and a second layer with a whiteout.
pub fn good_image() -> Img {
    let base = Tar::new()
        .dir(b"etc/")
        .file(b"etc/motd", b"welcome\n")
        .file(b"etc/rc.conf", b"sshd_enable=YES\n")
        .file_mode(b"bin/sh", 0o755, b"#!shell")
        .hard_link(b"bin/-sh", b"bin/sh");
    let top = Tar::new()
        .file(b"etc/.wh.rc.conf", b"")
        .file(b"etc/hosts", b"::1\n");
    layers(vec![Layer::gzip(&base.finish()), Layer::tar(top.finish())])
}
