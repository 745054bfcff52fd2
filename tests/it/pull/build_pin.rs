//! The pin, for a build: a build holds the store lock shared from before
//! it resolves its FROM image until its image is tagged, as a pull does
//! ([`jbuild::image::pull`], "The pin"), so `jbuild prune` waits for it.
//! Between two steps nothing stands on the step just committed, and an
//! image removed (`jbuild rmi`) after the build unpacked it names its
//! layers no more: without the pin, `prune` took either from under the
//! build. Each test holds a build (a library call on another thread) at a
//! `prepare`, runs `jbuild` in a separate process meanwhile, sees `prune`
//! wait for the store lock, lets the build go on, and checks both finished
//! and the image is whole.

use super::shared_base::{check_deep, good_chains, HoldOn};
use super::transaction::{build_options, wait_until, waits_for_flock, world, World};
use crate::support::common::jbuild;
use crate::support::registry::run_bounded;

use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

use jbuild::engine::{self, BuildEnv, BuildError, BuildOutput};
use jbuild::image::{LayerPolicy, Platform, SnapshotName, Unpacker};
use jbuild::report::SilentReporter;
use jbuild::snapshot::Snapshotter;

/// A recipe of two snapshot steps on `good` (two layers).
const RECIPE: &str = "FROM good\nCOPY a /a\nCOPY b /b\n";

/// Builds [`RECIPE`] on another thread, holding it before it prepares a
/// snapshot on a parent `on` accepts; meanwhile runs `before` (each
/// `jbuild` arguments, to its end) and then `prune` (in a separate process,
/// on a third thread), waits until prune has finished or waits for the
/// store lock, and only then lets the build go on. Returns the build's
/// result, whether prune was waiting when the build was let go, and
/// prune's output.
fn prune_while_a_build_is_held(
    w: &World,
    on: &(dyn Fn(&str) -> bool + Sync),
    before: &[&[&str]],
    prune: &[&str],
) -> (Result<BuildOutput, BuildError>, bool, Output) {
    let opts = build_options(&w.top, RECIPE);
    std::fs::write(opts.context.join("a"), "step one\n").unwrap();
    std::fs::write(opts.context.join("b"), "step two\n").unwrap();
    let held = AtomicBool::new(false);
    let released = AtomicBool::new(false);
    let hold = || {
        held.store(true, SeqCst);
        wait_until("the test to let the build go on", || released.load(SeqCst));
    };
    let snapshots = HoldOn {
        inner: &w.snapshots,
        on,
        hold: &hold,
    };
    let pruned: Mutex<Option<Output>> = Mutex::new(None);
    let lock_file = w.top.join("store/.jbuild/lock");
    std::thread::scope(|s| {
        let build = s.spawn(|| {
            let env =
                BuildEnv::new(&w.store, &snapshots, &SilentReporter).with_image_source(&w.source);
            let built = engine::build(&env, &opts);
            // A build that fails before it is held must not leave the test
            // waiting for the hold.
            held.store(true, SeqCst);
            built
        });
        wait_until("the build to be held", || held.load(SeqCst));
        for args in before {
            let o = run_bounded(jbuild(&w.top).args(*args), Duration::from_secs(60));
            assert!(o.status.success(), "jbuild {args:?}: {o:?}");
        }
        let prune_thread = s.spawn(|| {
            let o = run_bounded(jbuild(&w.top).args(prune), Duration::from_secs(60));
            *pruned.lock().unwrap() = Some(o);
        });
        wait_until("prune to finish or wait for the store lock", || {
            pruned.lock().unwrap().is_some() || waits_for_flock(&lock_file)
        });
        let waited = pruned.lock().unwrap().is_none();
        released.store(true, SeqCst);
        let built = build
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        prune_thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let pruned = pruned.lock().unwrap().take().expect("prune's output");
        (built, waited, pruned)
    })
}

/// What every test asks of the outcome: the build succeeded, prune waited
/// for it and then succeeded, the store is sound (`check --deep`), and
/// `out` unpacks to good's files and the two steps'.
fn assert_both_finished(w: &World, outcome: (Result<BuildOutput, BuildError>, bool, Output)) {
    let (built, waited, pruned) = outcome;
    built.unwrap_or_else(|e| {
        panic!(
            "the build failed after prune ran ({pruned:?}): {}",
            jbuild::report::error_chain(&e)
        )
    });
    assert!(waited, "prune did not wait for the build: {pruned:?}");
    assert!(pruned.status.success(), "prune: {pruned:?}");
    let (damaged, _) = check_deep(&w.top);
    assert!(damaged.is_empty(), "{damaged:?}");
    let unpacker = Unpacker::new(
        &w.store,
        &w.snapshots,
        &SilentReporter,
        LayerPolicy::default(),
    );
    let (top, _) = unpacker.top("out", &Platform::default_for_host()).unwrap();
    let root = w.snapshots.view(&top.expect("out has layers")).unwrap();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    assert_eq!(read("etc/motd"), "welcome\n");
    assert_eq!(read("etc/hosts"), "::1\n");
    assert_eq!(read("a"), "step one\n");
    assert_eq!(read("b"), "step two\n");
}

/// `jbuild prune --cache` while a build has committed its first step and
/// not yet prepared its second: nothing stands on step one's snapshot, so
/// prune would take it (and the FROM's layers beneath) but waits for the
/// build. The build pulls its FROM image itself: a pull inside the build
/// takes the same lock shared again.
#[test]
fn prune_cache_between_two_build_steps_waits_for_the_build() {
    let w = world();
    let not_a_layer = |parent: &str| !SnapshotName::is_chain(parent);
    let outcome = prune_while_a_build_is_held(&w, &not_a_layer, &[], &["prune", "--cache"]);
    assert_both_finished(&w, outcome);
}

/// `jbuild rmi` of the FROM image once the build has found its layers and
/// is about to run its first step on them, then `jbuild prune`: no image
/// names those layers now, and prune waits for the build, which then names
/// them again (`out` is good's two layers and the steps').
#[test]
fn prune_after_rmi_of_the_from_image_waits_for_the_build() {
    let w = world();
    w.pull("good").unwrap();
    let from_top = good_chains().pop().unwrap();
    let on_from = |parent: &str| parent == from_top;
    let outcome = prune_while_a_build_is_held(&w, &on_from, &[&["rmi", "pulled/good"]], &["prune"]);
    assert_both_finished(&w, outcome);
}
