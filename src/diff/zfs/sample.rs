//! The walk's timing sample: the tree walk run for a short while on a
//! scoped thread of its own while `zfs diff` runs, to learn what the walk
//! spends per object (the [choice](super::super::choose) needs it). On its
//! own thread, so a `zfs diff` that ends meanwhile is seen at once and the
//! sample stopped, rather than after it.

use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use super::super::choose::{Cancel, Policy};
use super::super::walk::TreeWalkDiffer;
use super::super::{Change, DiffError, SnapshotRef};

/// What the sampling walk ends with (a whole list when the walk fit in the
/// sample, else [`DiffError::Cancelled`]) and how long it took.
type Walked = (Result<Vec<Change>, DiffError>, Duration);

/// The sample of one `zfs diff` run: taken at most once.
pub(super) enum Sample<'scope> {
    /// Not taken yet.
    NotYet,
    /// The walk runs until `cancel` says stop (its deadline, or `zfs diff`
    /// ended).
    Running {
        cancel: Arc<Cancel>,
        handle: ScopedJoinHandle<'scope, Walked>,
    },
    /// Joined, and its outcome handed out.
    Done,
}

/// A sample that ended.
pub(super) struct Sampled {
    /// The whole list, when the walk fit in the sample (it is then the
    /// answer); [`DiffError::Cancelled`] when it was stopped.
    pub listed: Result<Vec<Change>, DiffError>,
    /// What the walk spent per visit.
    pub per_visit: Duration,
}

impl<'scope> Sample<'scope> {
    /// Starts the walk from `parent` to `child` on a thread of `scope`, to
    /// stop after `policy.walk_sample` and `policy.walk_sample_visits`.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        walk: &'env TreeWalkDiffer,
        parent: SnapshotRef<'env>,
        child: SnapshotRef<'env>,
        policy: &Policy,
    ) -> Sample<'scope> {
        let cancel = Arc::new(Cancel::at(
            Instant::now() + policy.walk_sample,
            policy.walk_sample_visits,
        ));
        let stop = Arc::clone(&cancel);
        let handle = scope.spawn(move || {
            let t = Instant::now();
            (
                walk.changes_cancellable(Some(parent), child, &stop),
                t.elapsed(),
            )
        });
        Sample::Running { cancel, handle }
    }

    pub fn is_running(&self) -> bool {
        matches!(self, Sample::Running { .. })
    }

    /// Stops a running walk (`zfs diff` ended: the sample is not needed).
    /// The scope joins its thread.
    pub fn stop(&self) {
        if let Sample::Running { cancel, .. } = self {
            cancel.cancel();
        }
    }

    /// The outcome, once: `None` while the walk runs, and before and
    /// after.
    pub fn ended(&mut self) -> Option<Sampled> {
        match self {
            Sample::Running { handle, .. } if handle.is_finished() => {}
            _ => return None,
        }
        let Sample::Running { cancel, handle } = std::mem::replace(self, Sample::Done) else {
            unreachable!("matched above")
        };
        let (listed, took) = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let visits = cancel.checks().max(1);
        Some(Sampled {
            listed,
            per_visit: took / u32::try_from(visits).unwrap_or(u32::MAX),
        })
    }
}
