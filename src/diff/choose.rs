//! Choosing between two differs whose costs follow different things, while
//! the cheap-when-narrow one runs: the decision as data, and the flag that
//! stops a walk.
//!
//! The ZFS differ ([`super::zfs`]) can list a layer two ways. The tree walk
//! costs about the same for every change: one visit per object of the
//! child (`lstat` in both trees), so *objects × the rate of a visit*, both
//! cheap to know (the object count is one `statvfs` on ZFS, the rate a
//! short timed sample of the walk itself). `zfs diff` costs what its
//! changes touch, and its total is not known in advance — but its progress
//! is observable, because it reports objects in object-number order: the
//! object number (the inode) of the last path it printed ÷ the object count
//! is about the fraction it has done, and elapsed ÷ that fraction its
//! projected total.
//!
//! So a build runs `zfs diff` **alone** and [`decide`]s, every few
//! milliseconds, from a [`Probe`] of what is known so far:
//!
//! - a tree of fewer than [`Policy::min_objects`] objects stays on `zfs
//!   diff` (the walk would be cheap too, but a tiny tree never needs it);
//! - until the walk's rate is measured, and for the *probe* — at least
//!   [`Policy::probe_floor`] and [`Policy::probe_share`] of the walk's
//!   predicted cost — `zfs diff` runs on: a narrow change ends within it,
//!   and keeps its full advantage;
//! - past the probe, `zfs diff` is stopped and the walk runs alone once
//!   what `zfs diff` still has to do is, by two projections, more than a
//!   whole walk: from its start (elapsed ÷ fraction done − elapsed), and
//!   from its pace since its first line (objects passed per second since
//!   then, over the objects left). With too little seen for both (no line,
//!   or one object only), once it has taken as long as a whole walk.
//!
//! Why two: `zfs diff` skips unchanged object blocks almost for free, so
//! its cost is not even over the object range. From the start alone, one
//! file at a low object number (its line comes after a start-up of 0.3 s
//! in the guest) looks like a walk of minutes; from the pace alone, 100
//! files of one directory in the middle of the range (lines over 0.3 s,
//! 100 objects apart) look the same. A change spread over every object
//! block is slow by both, and is walked.
//!
//! The two never run side by side for long (only the walk's timing sample,
//! a few tens of milliseconds, overlaps `zfs diff`): on two busy cores a
//! race of both costs the contention on top of the head start. A wrong
//! early switch costs the probe; a switch only ever happens when, as
//! projected, walking from now on is cheaper than letting `zfs diff` end.
//! What no projection sees: a change of many object blocks confined to the
//! low object numbers (all of it early, nothing later) looks slow by both;
//! if it outlasts the probe it is walked, for the probe plus a walk.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::DiffError;

/// A flag one side sets and a walk checks at every entry, with an optional
/// deadline past which it counts as set (a timed sample of the walk).
#[derive(Debug, Default)]
pub struct Cancel {
    flag: AtomicBool,
    deadline: Option<Instant>,
    /// The deadline counts only once this many checks were made.
    min_checks: u64,
    checks: AtomicU64,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// A flag that sets itself at `deadline`, once it was checked at
    /// least `min_checks` times (a timed sample stays a sample when the
    /// machine stalls it).
    pub fn at(deadline: Instant, min_checks: u64) -> Cancel {
        Cancel {
            deadline: Some(deadline),
            min_checks,
            ..Cancel::default()
        }
    }

    /// Asks every side that checks this flag to stop.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Release);
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Acquire)
            || (self.deadline.is_some_and(|d| Instant::now() >= d)
                && self.checks() >= self.min_checks)
    }

    /// [`DiffError::Cancelled`] once [`cancel`](Cancel::cancel) was called
    /// or the deadline passed. Counted: how far a walk got before it
    /// stopped is its number of visits.
    pub fn check(&self) -> Result<(), DiffError> {
        self.checks.fetch_add(1, Ordering::Relaxed);
        if self.is_cancelled() {
            return Err(DiffError::Cancelled);
        }
        Ok(())
    }

    /// How many times [`check`](Cancel::check) was called.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }
}

/// The knobs of [`decide`]; [`Policy::default`] is what a build uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Trees with fewer objects are listed by `zfs diff` whatever it costs.
    pub min_objects: u64,
    /// `zfs diff` runs at least this long before it may be stopped.
    pub probe_floor: Duration,
    /// … and at least this share of the walk's predicted cost: the price
    /// of a wrong early switch, relative to the walk.
    pub probe_share: f64,
    /// How long the walk runs to measure its rate (when `zfs diff` has
    /// not ended by then) …
    pub walk_sample: Duration,
    /// … and how many entries it visits at least.
    pub walk_sample_visits: u64,
}

/// 4,096 objects: a small jail (the CLI's examples) stays on `zfs diff`; a
/// FreeBSD base (tens of thousands) is chosen for. 0.2 s: `zfs diff` of a
/// narrow change in the emulated guest of `benches/zfs-diff.sh` takes
/// 0.3–0.5 s in all, most of it starting up. 5%: the bound of issue 16 is
/// 10% over the faster differ. 50 ms and 500 visits of walk: ~0.13 s in
/// the guest (a sample of a few visits, stalled by a busy host, once made
/// a 50,000-object walk look ten times its cost).
impl Default for Policy {
    fn default() -> Policy {
        Policy {
            min_objects: 4096,
            probe_floor: Duration::from_millis(200),
            probe_share: 0.05,
            walk_sample: Duration::from_millis(50),
            walk_sample_visits: 500,
        }
    }
}

/// What is known while `zfs diff` runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// Since `zfs diff` started.
    pub elapsed: Duration,
    /// The object number of the last path `zfs diff` printed ÷ the object
    /// count (capped at 1); `None` before its first complete line.
    pub done: Option<f64>,
    /// When the first line came (since the start) and its fraction.
    pub first: Option<(Duration, f64)>,
    /// Objects in the child dataset.
    pub objects: u64,
    /// What the walk spends per object, once measured.
    pub walk_per_object: Option<Duration>,
}

impl Probe {
    /// The walk's predicted cost.
    pub fn walk(&self) -> Option<Duration> {
        self.walk_per_object
            .map(|r| r.saturating_mul(u32::try_from(self.objects).unwrap_or(u32::MAX)))
    }

    /// What `zfs diff` has left, projected from its start: elapsed ÷
    /// fraction done − elapsed.
    pub fn rest_from_start(&self) -> Option<Duration> {
        let done = self.done.filter(|d| *d > 0.0)?.min(1.0);
        Some(self.elapsed.div_f64(done).saturating_sub(self.elapsed))
    }

    /// What `zfs diff` has left, projected from its pace since its first
    /// line; `None` until it has moved past that line's object.
    pub fn rest_from_pace(&self) -> Option<Duration> {
        let (t1, d1) = self.first?;
        let done = self.done?.min(1.0);
        if done <= d1 {
            return None;
        }
        let since = self.elapsed.saturating_sub(t1);
        Some(since.mul_f64((1.0 - done) / (done - d1)))
    }
}

/// What to do with the running `zfs diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let it run (look again later).
    Wait,
    /// Stop it and walk the trees.
    Walk,
}

/// The choice, from what is known so far (see the module doc).
pub fn decide(policy: &Policy, p: &Probe) -> Decision {
    if p.objects < policy.min_objects {
        return Decision::Wait;
    }
    let Some(walk) = p.walk() else {
        return Decision::Wait;
    };
    if p.elapsed < policy.probe_floor.max(walk.mul_f64(policy.probe_share)) {
        return Decision::Wait;
    }
    let rest = match (p.rest_from_start(), p.rest_from_pace()) {
        (Some(a), Some(b)) => a.min(b),
        // Too little seen to project: all we know is what it has spent.
        _ if p.elapsed >= walk => return Decision::Walk,
        _ => return Decision::Wait,
    };
    if rest > walk {
        Decision::Walk
    } else {
        Decision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// 50,000 objects at 0.25 ms each: a 12.5 s walk (the bench's guest).
    /// The first line came at 0.3 s, at 0.1% of the objects.
    fn probe(elapsed_ms: u64, done: Option<f64>) -> Probe {
        Probe {
            elapsed: MS * elapsed_ms as u32,
            done,
            first: done.map(|_| (MS * 300, 0.001)),
            objects: 50_000,
            walk_per_object: Some(Duration::from_micros(250)),
        }
    }

    #[test]
    fn the_walk_and_zfs_diff_are_predicted_from_rate_and_progress() {
        let p = probe(1300, Some(0.101));
        assert_eq!(p.walk(), Some(Duration::from_millis(12_500)));
        let from_start = p.rest_from_start().unwrap().as_secs_f64();
        assert!(
            (from_start - (1.3 / 0.101 - 1.3)).abs() < 1e-6,
            "{from_start}"
        );
        // 10% of the objects in 1 s: 9 s for the 90% left.
        let pace = p.rest_from_pace().unwrap().as_secs_f64();
        assert!((pace - 8.99).abs() < 1e-6, "{pace}");
        assert_eq!(probe(1000, Some(0.0)).rest_from_start(), None);
        assert_eq!(probe(1000, Some(0.001)).rest_from_pace(), None);
        assert_eq!(probe(1000, None).rest_from_pace(), None);
        assert_eq!(
            probe(1000, Some(3.0)).rest_from_start(),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn a_wide_change_is_walked_once_the_probe_is_over() {
        let pol = Policy::default();
        // Every object block changed: 0.4% done at 0.6 s, pace 3/300 per
        // second. The probe is 5% of 12.5 s = 625 ms.
        assert_eq!(decide(&pol, &probe(600, Some(0.004))), Decision::Wait);
        assert_eq!(decide(&pol, &probe(630, Some(0.004))), Decision::Walk);
    }

    #[test]
    fn zfs_diff_runs_on_while_either_projection_says_it_ends_first() {
        let pol = Policy::default();
        // 8 s done, 40%: 12 s left from the start, less by its pace.
        assert_eq!(decide(&pol, &probe(8000, Some(0.4))), Decision::Wait);
        // One file early in the range: one line, no pace yet.
        assert_eq!(decide(&pol, &probe(1000, Some(0.001))), Decision::Wait);
        // 100 files of one directory in the middle: slow by its pace (0.2%
        // in 0.4 s), but half done in 0.9 s.
        let middle = Probe {
            first: Some((MS * 500, 0.498)),
            ..probe(900, Some(0.5))
        };
        assert!(middle.rest_from_pace().unwrap() > middle.walk().unwrap());
        assert_eq!(decide(&pol, &middle), Decision::Wait);
        // A few blocks early in the range, then quiet: slow by its start,
        // fast by its pace (1% in 0.1 s).
        let early = Probe {
            first: Some((MS * 900, 0.001)),
            ..probe(1000, Some(0.011))
        };
        assert!(early.rest_from_start().unwrap() > early.walk().unwrap());
        assert_eq!(decide(&pol, &early), Decision::Wait);
        // Slow by both, by a little: 13 s left either way.
        let both = Probe {
            first: Some((Duration::ZERO, 0.0)),
            ..probe(1000, Some(1.0 / 14.0))
        };
        assert_eq!(decide(&pol, &both), Decision::Walk);
        // Slow by both, by less than a walk (12 s).
        let less = Probe {
            first: Some((Duration::ZERO, 0.0)),
            ..probe(1000, Some(1.0 / 13.0))
        };
        assert_eq!(decide(&pol, &less), Decision::Wait);
    }

    #[test]
    fn with_too_little_seen_it_waits_for_as_long_as_a_walk() {
        let pol = Policy::default();
        for done in [None, Some(0.001)] {
            assert_eq!(decide(&pol, &probe(12_000, done)), Decision::Wait);
            assert_eq!(decide(&pol, &probe(12_500, done)), Decision::Walk);
        }
    }

    #[test]
    fn nothing_is_decided_before_the_walk_is_measured_nor_for_tiny_trees() {
        let pol = Policy::default();
        let unmeasured = Probe {
            walk_per_object: None,
            ..probe(60_000, None)
        };
        assert_eq!(decide(&pol, &unmeasured), Decision::Wait);
        let tiny = Probe {
            objects: 4095,
            ..probe(60_000, None)
        };
        assert_eq!(decide(&pol, &tiny), Decision::Wait);
        let small = Probe {
            objects: 4096,
            ..probe(60_000, None)
        };
        assert_eq!(decide(&pol, &small), Decision::Walk);
    }

    #[test]
    fn the_probe_has_a_floor_for_fast_walks() {
        let pol = Policy::default();
        // A 50 ms walk: 5% of it is 2.5 ms, the floor 200 ms.
        let fast = |ms| Probe {
            walk_per_object: Some(Duration::from_micros(1)),
            ..probe(ms, None)
        };
        assert_eq!(decide(&pol, &fast(150)), Decision::Wait);
        assert_eq!(decide(&pol, &fast(200)), Decision::Walk);
    }

    #[test]
    fn a_deadline_cancels_by_itself() {
        let c = Cancel::at(Instant::now(), 0);
        assert!(matches!(c.check(), Err(DiffError::Cancelled)));
        // Not before it was checked twice.
        let c = Cancel::at(Instant::now(), 2);
        assert!(c.check().is_ok());
        assert!(matches!(c.check(), Err(DiffError::Cancelled)));
        let c = Cancel::at(Instant::now() + Duration::from_secs(600), 0);
        assert!(c.check().is_ok());
        c.cancel();
        assert!(c.check().is_err());
        assert_eq!(c.checks(), 2);
    }
}
