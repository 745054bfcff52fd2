//! Two differs racing for one change list: the first complete answer wins
//! and the other is cancelled.
//!
//! The ZFS differ has two ways to list a layer whose costs follow different
//! things: `zfs diff` pays per directory that holds a change, the tree walk
//! per entry of the whole tree. Which is cheaper cannot be known up front
//! (a *thin but wide* change — one small file in each of 500 directories —
//! writes few bytes yet costs `zfs diff` 500 directories), so
//! [`race`] runs both and keeps the first answer:
//!
//! - the **first** side starts at once and has a *head start*: when it
//!   answers within it, the second never starts (a narrow change pays for
//!   one differ only, with no contention);
//! - past the head start the **second** starts beside it on its own thread;
//!   the first complete `Ok` wins, and the other is told to stop through
//!   the shared [`Cancel`] and joined before `race` returns (a walk checks
//!   the flag at every entry; a child process is killed and reaped);
//! - an error of one side does not lose the other's answer: `race` waits
//!   for it (and starts the second at once when the first fails early);
//!   both failing is [`DiffError::AllFailed`], naming each side's error.
//!
//! The worst case against knowing the answer in advance is therefore the
//! head start plus the contention of the two sides while both run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::{Change, DiffError};

/// A flag one side sets and every other side checks as it goes.
#[derive(Debug, Default)]
pub struct Cancel {
    flag: AtomicBool,
    checks: AtomicU64,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks every side that checks this flag to stop.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Release);
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// [`DiffError::Cancelled`] once [`cancel`](Cancel::cancel) was called.
    /// Counted, so a test can see how far a side got before it stopped.
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

/// One contender: the name of the differ it runs (what a build reports
/// when it wins) and the work, which must return soon after the
/// [`Cancel`] it is given is set.
pub struct Side<'s> {
    pub name: &'static str,
    #[allow(clippy::type_complexity)]
    pub run: Box<dyn FnOnce(&Cancel) -> Result<Vec<Change>, DiffError> + Send + 's>,
}

impl<'s> Side<'s> {
    pub fn new(
        name: &'static str,
        run: impl FnOnce(&Cancel) -> Result<Vec<Change>, DiffError> + Send + 's,
    ) -> Side<'s> {
        Side {
            name,
            run: Box::new(run),
        }
    }
}

/// What became of each side, for the caller and for tests: the winner's
/// list and name, and the other side's result if it started (a loser that
/// honoured the cancel returns [`DiffError::Cancelled`]).
#[derive(Debug)]
pub struct Outcome {
    pub result: Result<(Vec<Change>, &'static str), DiffError>,
    /// `None` when the first side answered within its head start.
    pub other: Option<(&'static str, Result<usize, DiffError>)>,
}

/// Runs `first`, then `second` beside it once `head_start` has passed with
/// no answer (or at once when `first` failed); the first complete `Ok`
/// wins. See the module doc.
pub fn race<'s>(first: Side<'s>, second: Side<'s>, head_start: Duration) -> Outcome {
    let cancel = Cancel::new();
    let (tx, rx) = mpsc::channel::<(&'static str, Result<Vec<Change>, DiffError>)>();
    std::thread::scope(|s| {
        let spawn = |side: Side<'s>| {
            let (tx, cancel) = (tx.clone(), &cancel);
            s.spawn(move || {
                // A panicking differ is one side failing, not the export.
                let run = std::panic::AssertUnwindSafe(|| (side.run)(cancel));
                let result = std::panic::catch_unwind(run).unwrap_or_else(|_| {
                    Err(DiffError::Backend(format!(
                        "the {} differ panicked",
                        side.name
                    )))
                });
                let _ = tx.send((side.name, result));
            });
        };
        spawn(first);
        let early = match rx.recv_timeout(head_start) {
            Ok((name, Ok(list))) => {
                return Outcome {
                    result: Ok((list, name)),
                    other: None,
                }
            }
            Ok((name, Err(e))) => Some((name, e)),
            // Every side sends before its thread ends, and `tx` is alive.
            Err(_) => None,
        };
        spawn(second);
        drop(tx);
        let mut failed: Vec<(&'static str, DiffError)> = early.into_iter().collect();
        let mut winner = None;
        while failed.len() < 2 {
            let Ok((name, result)) = rx.recv() else { break };
            match result {
                Ok(list) => {
                    cancel.cancel();
                    winner = Some((list, name));
                    break;
                }
                Err(e) => failed.push((name, e)),
            }
        }
        match winner {
            Some((list, name)) => {
                // The scope joins the loser; its result says whether it
                // stopped because it was told to.
                let other = match failed.pop() {
                    Some((n, e)) => Some((n, Err(e))),
                    None => rx.recv().ok().map(|(n, r)| (n, r.map(|l| l.len()))),
                };
                Outcome {
                    result: Ok((list, name)),
                    other,
                }
            }
            None => {
                let mut it = failed.into_iter();
                let lost = || ("?", DiffError::Backend("the differ sent no answer".into()));
                let a = it.next().unwrap_or_else(lost);
                let b = it.next().unwrap_or_else(lost);
                Outcome {
                    result: Err(DiffError::AllFailed {
                        first: a.0,
                        first_error: Box::new(a.1),
                        second: b.0,
                        second_error: Box::new(b.1),
                    }),
                    other: None,
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::walk::TreeWalkDiffer;
    use crate::diff::{ChangeKind, SnapshotRef};
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Instant;

    fn list(name: &str) -> Vec<Change> {
        vec![Change::new(name, ChangeKind::Added)]
    }

    /// A side that runs until it is cancelled (bounded: it gives up after a
    /// minute with an answer of its own, which a test would then see win or
    /// be reported), counting how often it looked at the flag.
    fn until_cancelled(name: &'static str, looked: Arc<AtomicUsize>) -> Side<'static> {
        Side::new(name, move |c| {
            let end = Instant::now() + Duration::from_secs(60);
            while Instant::now() < end {
                looked.fetch_add(1, Ordering::Relaxed);
                c.check()?;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(list(name))
        })
    }

    #[test]
    fn the_first_within_its_head_start_runs_alone() {
        let started = Arc::new(AtomicBool::new(false));
        let s2 = started.clone();
        let out = race(
            Side::new("fast", |_| Ok(list("fast"))),
            Side::new("never", move |_| {
                s2.store(true, Ordering::Relaxed);
                Ok(list("never"))
            }),
            Duration::from_secs(60),
        );
        assert_eq!(out.result.unwrap(), (list("fast"), "fast"));
        assert!(out.other.is_none());
        assert!(!started.load(Ordering::Relaxed));
    }

    #[test]
    fn the_first_complete_answer_wins_and_the_loser_is_cancelled() {
        for first_wins in [true, false] {
            let looked = Arc::new(AtomicUsize::new(0));
            let l2 = looked.clone();
            // The fast side answers only once the slow one is running, so
            // both really race.
            let fast = Side::new("fast", move |_| {
                while l2.load(Ordering::Relaxed) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(list("fast"))
            });
            let slow = until_cancelled("slow", looked.clone());
            let (first, second) = if first_wins {
                (slow, fast)
            } else {
                (fast, slow)
            };
            // No head start: the second starts at once.
            let out = race(first, second, Duration::ZERO);
            assert_eq!(out.result.unwrap(), (list("fast"), "fast"));
            let (name, r) = out.other.expect("the loser ran");
            assert_eq!(name, "slow");
            assert!(matches!(r, Err(DiffError::Cancelled)), "{r:?}");
        }
    }

    #[test]
    fn an_error_of_one_side_does_not_lose_the_other_answer() {
        for (head_start, fail_first) in [
            (Duration::ZERO, true),
            (Duration::ZERO, false),
            (Duration::from_secs(60), true),
        ] {
            let failing = Side::new("broken", |_| Err(DiffError::Backend("no zfs".into())));
            let slow = Side::new("slow", |_| {
                std::thread::sleep(Duration::from_millis(20));
                Ok(list("slow"))
            });
            let out = if fail_first {
                race(failing, slow, head_start)
            } else {
                race(slow, failing, head_start)
            };
            assert_eq!(out.result.unwrap(), (list("slow"), "slow"));
            let (name, r) = out.other.unwrap();
            assert_eq!(name, "broken");
            assert!(r.unwrap_err().to_string().contains("no zfs"));
        }
    }

    #[test]
    fn both_failing_names_both_errors() {
        let out = race(
            Side::new("zfs-diff", |_| Err(DiffError::Backend("no zfs".into()))),
            Side::new("tree-walk", |_| {
                Err(DiffError::io(
                    "cannot read /x",
                    std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                ))
            }),
            Duration::from_secs(60),
        );
        let e = out.result.unwrap_err().to_string();
        assert!(e.contains("zfs-diff: no zfs"), "{e}");
        assert!(e.contains("tree-walk: cannot read /x"), "{e}");
    }

    #[test]
    fn a_panicking_side_is_an_error_not_a_hang() {
        let out = race(
            Side::new("boom", |_| panic!("differ bug")),
            Side::new("ok", |_| Ok(list("ok"))),
            Duration::from_secs(60),
        );
        assert_eq!(out.result.unwrap(), (list("ok"), "ok"));
    }

    /// A tree of `dirs` directories of `files` files each.
    fn tree(dirs: usize, files: usize) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for d in 0..dirs {
            let dir = t.path().join(format!("d{d}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..files {
                std::fs::write(dir.join(format!("f{f}")), "x").unwrap();
            }
        }
        t
    }

    fn walk_of(root: &std::path::Path, cancel: &Cancel) -> Result<Vec<Change>, DiffError> {
        let r = SnapshotRef { name: "t", root };
        TreeWalkDiffer::new().changes_cancellable(Some(r), r, cancel)
    }

    #[test]
    fn a_cancelled_walk_stops_at_its_next_entry() {
        let t = tree(5, 5);
        let whole = Cancel::new();
        assert_eq!(walk_of(t.path(), &whole).unwrap(), vec![]);
        assert!(whole.checks() >= 30, "{}", whole.checks());
        let stopped = Cancel::new();
        stopped.cancel();
        assert!(matches!(
            walk_of(t.path(), &stopped),
            Err(DiffError::Cancelled)
        ));
        assert_eq!(stopped.checks(), 1);
    }

    /// The real walk loses to a side that answers once the walk has begun:
    /// it stops long before it has visited the whole tree.
    #[test]
    fn a_walk_that_loses_the_race_stops_early() {
        let t = tree(50, 100);
        let whole = Cancel::new();
        walk_of(t.path(), &whole).unwrap();
        let visited = AtomicU64::new(0);
        let walk = Side::new("tree-walk", |c: &Cancel| {
            let r = walk_of(t.path(), c);
            visited.store(c.checks(), Ordering::Relaxed);
            r
        });
        let fast = Side::new("fast", |c: &Cancel| {
            let end = Instant::now() + Duration::from_secs(60);
            while c.checks() < 10 && Instant::now() < end {
                std::thread::yield_now();
            }
            Ok(list("fast"))
        });
        let out = race(walk, fast, Duration::ZERO);
        assert_eq!(out.result.unwrap(), (list("fast"), "fast"));
        let (name, r) = out.other.unwrap();
        assert_eq!(name, "tree-walk");
        assert!(matches!(r, Err(DiffError::Cancelled)), "{r:?}");
        let visited = visited.load(Ordering::Relaxed);
        assert!(
            visited < whole.checks() / 2,
            "the walk visited {visited} of {} entries",
            whole.checks()
        );
    }
}
