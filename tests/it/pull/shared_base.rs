//! A failed pull takes away what it added, but not a layer someone else
//! has found meanwhile: `good` and `bad` share their first layer, the base.
//! A pull of `bad` unpacks the base, then is held before its refused layer
//! until another unpacking of `good` (a pull, or a build's FROM) has found
//! the base and is about to build on it; then `bad` fails and cleans up,
//! and only then does the other go on. It must succeed, and leave a sound
//! root (`jbuild check --deep`).

use super::transaction::{build_options, good_layers, wait_until, world, Between, HoldAt, World};
use crate::support::common::{jbuild, run};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

use jbuild::diff::Differ;
use jbuild::digest::Digest;
use jbuild::engine::{self, BuildEnv};
use jbuild::image::pull::PullError;
use jbuild::image::unpack::UnpackError;
use jbuild::image::{self, gc, LayerPolicy, Platform, SnapshotName, Unpacker};
use jbuild::report::SilentReporter;
use jbuild::snapshot::{self, Info, Labels, Snapshotter};
use jbuild::store::Store;

/// A snapshotter that, before it prepares a snapshot on a parent `on`
/// accepts, calls `hold`: whoever uses it has found that parent and is
/// about to build on it.
pub(super) struct HoldOn<'a> {
    pub(super) inner: &'a dyn Snapshotter,
    pub(super) on: &'a (dyn Fn(&str) -> bool + Sync),
    pub(super) hold: &'a (dyn Fn() + Sync),
}

impl Snapshotter for HoldOn<'_> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn prepare(&self, key: &str, parent: Option<&str>) -> snapshot::Result<PathBuf> {
        if parent.is_some_and(self.on) {
            (self.hold)();
        }
        self.inner.prepare(key, parent)
    }
    fn commit(&self, name: &str, key: &str, labels: &Labels) -> snapshot::Result<()> {
        self.inner.commit(name, key, labels)
    }
    fn view(&self, name: &str) -> snapshot::Result<PathBuf> {
        self.inner.view(name)
    }
    fn stat(&self, name: &str) -> snapshot::Result<Option<Info>> {
        self.inner.stat(name)
    }
    fn set_labels(&self, name: &str, labels: &Labels) -> snapshot::Result<()> {
        self.inner.set_labels(name, labels)
    }
    fn remove_labels(&self, name: &str, labels: &[String]) -> snapshot::Result<()> {
        self.inner.remove_labels(name, labels)
    }
    fn remove(&self, name: &str) -> snapshot::Result<()> {
        self.inner.remove(name)
    }
    fn list(&self) -> snapshot::Result<Vec<Info>> {
        self.inner.list()
    }
    fn differ(&self) -> Box<dyn Differ> {
        self.inner.differ()
    }
    fn materialize(&self, name: &str, dest: &Path) -> snapshot::Result<()> {
        self.inner.materialize(name, dest)
    }
}

/// The `chain-` snapshots of `good`, bottom first: the base (shared with
/// `bad`), then its own top.
pub(super) fn good_chains() -> Vec<String> {
    let diff_ids: Vec<Digest> = good_layers().iter().map(|l| Digest::of(l)).collect();
    image::chain_ids(&diff_ids)
        .iter()
        .map(SnapshotName::chain)
        .collect()
}

/// Runs a pull of `bad` on this thread and `other` on another: `bad` is
/// held once it has committed the base, until `other` is about to build on
/// the base (through the [`HoldOn`] snapshotter it is given), which is held
/// until the pull of `bad` has returned (what `other` is also given waits
/// for). Returns both results.
fn bad_fails_while<T: Send>(
    w: &World,
    other: impl FnOnce(&dyn Snapshotter, &(dyn Fn() + Sync)) -> T + Send,
) -> (Result<image::pull::Pulled, PullError>, T) {
    let base = good_chains().remove(0);
    let base_made = AtomicBool::new(false);
    let other_on_base = AtomicBool::new(false);
    let bad_returned = AtomicBool::new(false);
    let between = || {
        wait_until("the pull of bad to commit the base", || {
            w.snapshots.stat(&base).unwrap().is_some()
        });
        base_made.store(true, SeqCst);
        wait_until("the other to be about to build on the base", || {
            other_on_base.load(SeqCst)
        });
    };
    let bad_source = Between {
        dir: w.top.join("layout"),
        at: HoldAt::LastLayer,
        between: &between,
    };
    let bad_has_returned = || {
        wait_until("the pull of bad to return", || bad_returned.load(SeqCst));
    };
    let hold = || {
        other_on_base.store(true, SeqCst);
        bad_has_returned();
    };
    let on_base = |parent: &str| parent == base;
    let held = HoldOn {
        inner: &w.snapshots,
        on: &on_base,
        hold: &hold,
    };
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            wait_until("the base", || base_made.load(SeqCst));
            other(&held, &bad_has_returned)
        });
        let bad = image::pull(
            &w.unpacker(),
            &bad_source,
            "bad",
            &Platform::default_for_host(),
        );
        bad_returned.store(true, SeqCst);
        let other = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (bad, other)
    })
}

fn assert_refused(bad: &Result<image::pull::Pulled, PullError>) {
    match bad {
        Err(PullError::Unpack { source, .. }) => assert!(
            matches!(**source, UnpackError::LayerRefused { index: 2, .. }),
            "{source:?}"
        ),
        other => panic!("the pull of bad was not refused at its second layer: {other:?}"),
    }
}

/// `jbuild --json check --deep` on the root `top`: what it found damaged
/// and reclaimable (the kinds).
pub(super) fn check_deep(top: &Path) -> (Vec<String>, Vec<String>) {
    let o = run(jbuild(top).args(["--json", "check", "--deep"]));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: not JSON:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let kinds = |severity: &str| -> Vec<String> {
        v[severity]
            .as_array()
            .unwrap_or_else(|| panic!("no {severity} in {v:#}"))
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_string())
            .collect()
    };
    (kinds("damaged"), kinds("reclaimable"))
}

/// Whether the image `name` unpacks to the files of `good`, from snapshots
/// that are all there.
fn assert_whole_good(store: &Store, snapshots: &dyn Snapshotter, name: &str) {
    for chain in good_chains() {
        assert!(snapshots.stat(&chain).unwrap().is_some(), "{chain} gone");
    }
    let unpacker = Unpacker::new(store, snapshots, &SilentReporter, LayerPolicy::default());
    let (top, _) = unpacker.top(name, &Platform::default_for_host()).unwrap();
    assert_eq!(top.as_deref(), good_chains().last().map(String::as_str));
    let root = snapshots.view(&top.unwrap()).unwrap();
    assert_eq!(std::fs::read(root.join("etc/motd")).unwrap(), b"welcome\n");
    assert_eq!(std::fs::read(root.join("etc/hosts")).unwrap(), b"::1\n");
}

/// Two pulls: `good` finds the base `bad` made, `bad` fails before `good`
/// builds on it, while `good` is still downloading (no entry in
/// `index.json` names it yet: its source writes the untagged entry only
/// once `bad` has returned). The pull of `good` holds the store lock shared
/// (its pin), so `bad` cannot take it exclusively and leaves the base, and
/// its own blobs, for `prune`.
#[test]
fn a_failed_pull_leaves_the_base_another_pull_has_found() {
    let w = world();
    let (bad, good) = bad_fails_while(&w, |held, bad_has_returned| {
        let unpacker = Unpacker::new(&w.store, held, &SilentReporter, LayerPolicy::default());
        let source = Between {
            dir: w.top.join("layout"),
            at: HoldAt::Entry,
            between: bad_has_returned,
        };
        image::pull(&unpacker, &source, "good", &Platform::default_for_host())
    });
    assert_refused(&bad);
    let good = good.unwrap_or_else(|e| {
        panic!(
            "the pull of good failed after bad's cleanup: {}",
            jbuild::report::error_chain(&e)
        )
    });
    assert_eq!(good.name, "pulled/good");
    prune_takes_what_bad_left(&w, "pulled/good");
}

/// Checks that `name` is whole and the store sound (`check --deep`), and
/// that what `bad` left is its blobs (manifest, config, the refused
/// layer), nothing of `name`'s: prune takes exactly that, and leaves
/// nothing to reclaim.
fn prune_takes_what_bad_left(w: &World, name: &str) {
    assert_whole_good(&w.store, &w.snapshots, name);
    let (damaged, _) = check_deep(&w.top);
    assert!(damaged.is_empty(), "{damaged:?}");
    let summary = gc::prune(&w.store, &w.snapshots, false).unwrap();
    assert_eq!(summary.snapshots_removed, 0, "{summary:?}");
    assert_eq!(summary.blobs_removed.len(), 3, "{summary:?}");
    assert_whole_good(&w.store, &w.snapshots, name);
    assert_eq!(check_deep(&w.top), (vec![], vec![]));
}

/// A pull and a build: `good` is stored but its layers are not unpacked
/// (`prune --cache` took them), and a build FROM it finds the base `bad`
/// made. The build holds the store lock shared (its pin, as a pull's), so
/// `bad` cannot take it exclusively: it leaves the base (which an image,
/// `good`, uses anyway) and its own blobs for `prune`.
#[test]
fn a_failed_pull_leaves_the_base_a_build_has_found() {
    let w = world();
    w.pull("good").unwrap();
    gc::prune(&w.store, &w.snapshots, true).unwrap();
    let no_chains = w.snapshots.list().unwrap();
    assert!(no_chains.is_empty(), "{no_chains:?}");
    let opts = build_options(&w.top, "FROM good\nLABEL made=here\n");
    let (bad, built) = bad_fails_while(&w, |held, _| {
        let env = BuildEnv::new(&w.store, held, &SilentReporter).with_image_source(&w.source);
        engine::build(&env, &opts)
    });
    assert_refused(&bad);
    built.unwrap_or_else(|e| {
        panic!(
            "the build failed after bad's cleanup: {}",
            jbuild::report::error_chain(&e)
        )
    });
    assert_whole_good(&w.store, &w.snapshots, "pulled/good");
    prune_takes_what_bad_left(&w, "out");
}
