//! How slowly, and for how long, one transfer may go.
//!
//! `timeout_secs` gives up on a registry that says nothing; a registry that
//! sends a byte every 20 s is never silent that long, and would keep a pull
//! (and the store lock it holds) alive for days. So every blob and manifest
//! moved is also held to
//!
//! - a rate floor: once the registry has answered, every window of
//!   [`TransferLimits::window`] must move at least
//!   `min_rate × window` bytes (resumptions and retries included: a
//!   registry that cuts the connection after each byte gains nothing);
//! - a deadline: the whole transfer, from its first request to its last
//!   byte, ends within [`TransferLimits::deadline`].
//!
//! A [`Pace`] is told what moved and when; [`Pace::check`] says whether
//! the transfer is still within both. It keeps a few dozen samples, never
//! one per chunk, so a fast transfer costs nothing.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// The rate floor and deadline of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferLimits {
    /// Bytes per second every [`window`](Self::window) must average; `0`:
    /// no floor.
    pub min_rate: u64,
    pub window: Duration,
    /// The longest the transfer may take in all; `None`: no deadline.
    pub deadline: Option<Duration>,
}

impl Default for TransferLimits {
    fn default() -> Self {
        TransferLimits::from_settings(&crate::config::RegistrySettings::default())
    }
}

impl TransferLimits {
    /// The limits `[registries]` sets (its defaults where it says
    /// nothing).
    pub fn from_settings(r: &crate::config::RegistrySettings) -> TransferLimits {
        use crate::config::{
            DEFAULT_BLOB_DEADLINE_SECS, DEFAULT_MIN_RATE, DEFAULT_RATE_WINDOW_SECS,
        };
        TransferLimits {
            min_rate: r.min_rate.unwrap_or(DEFAULT_MIN_RATE),
            window: secs(
                r.rate_window_secs
                    .unwrap_or(DEFAULT_RATE_WINDOW_SECS)
                    .max(1),
            ),
            deadline: Some(r.blob_deadline_secs.unwrap_or(DEFAULT_BLOB_DEADLINE_SECS))
                .filter(|s| *s > 0)
                .map(secs),
        }
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Why a transfer was given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slow {
    /// The last `window` moved `moved` bytes, fewer than the floor asks.
    Rate {
        moved: u64,
        window: Duration,
        min_rate: u64,
    },
    /// The deadline passed with `moved` bytes moved.
    Deadline { moved: u64, after: Duration },
}

impl fmt::Display for Slow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slow::Rate {
                moved,
                window,
                min_rate,
            } => write!(
                f,
                "moved {moved} bytes in the last {} s ({}), below the floor of {min_rate} B/s \
                 (`min_rate` over `rate_window_secs`)",
                window.as_secs(),
                rate(*moved, *window)
            ),
            Slow::Deadline { moved, after } => write!(
                f,
                "had not finished after {} s (`blob_deadline_secs`): {moved} bytes moved, {}",
                after.as_secs(),
                rate(*moved, *after)
            ),
        }
    }
}

/// `moved` bytes over `d` as a rate people read: `0.4 B/s`, `12.0 KiB/s`.
fn rate(moved: u64, d: Duration) -> String {
    let r = moved as f64 / d.as_secs_f64().max(0.001);
    if r < 1024.0 {
        format!("{r:.1} B/s")
    } else {
        format!("{:.1} KiB/s", r / 1024.0)
    }
}

/// One transfer's progress against its [`TransferLimits`].
#[derive(Debug)]
pub struct Pace {
    limits: TransferLimits,
    started: Instant,
    /// When the floor's clock started: the registry's first answer.
    floor_from: Option<Instant>,
    /// Bytes moved in all.
    moved: u64,
    /// The count [`Pace::counted`] was last told.
    last_count: u64,
    /// `(when, moved by then)`, oldest first, at least a
    /// [`Pace::granule`] apart.
    samples: VecDeque<(Instant, u64)>,
}

impl Pace {
    pub fn new(limits: TransferLimits, now: Instant) -> Pace {
        Pace {
            limits,
            started: now,
            floor_from: None,
            moved: 0,
            last_count: 0,
            samples: VecDeque::new(),
        }
    }

    /// The floor's clock starts (the registry answered); later calls change
    /// nothing.
    pub fn start_floor(&mut self, now: Instant) {
        if self.floor_from.is_none() {
            self.floor_from = Some(now);
            self.samples.push_back((now, self.moved));
        }
    }

    /// `n` more bytes moved.
    pub fn add(&mut self, n: u64, now: Instant) {
        self.moved += n;
        self.sample(now);
    }

    /// Notes what has moved by `now`, unless the last note is younger
    /// than a [`Pace::granule`]. Taken when bytes come and when the pace
    /// is checked, so a transfer that stops has its stop noted too.
    fn sample(&mut self, now: Instant) {
        let fresh = self
            .samples
            .back()
            .is_none_or(|(at, _)| now.saturating_duration_since(*at) >= self.granule());
        if fresh && self.floor_from.is_some() {
            self.samples.push_back((now, self.moved));
        }
    }

    /// The current attempt has moved `count` bytes; a count below the last
    /// one is a new attempt, counted from nothing.
    pub fn counted(&mut self, count: u64, now: Instant) {
        let more = count.checked_sub(self.last_count).unwrap_or(count);
        self.last_count = count;
        if more > 0 {
            self.add(more, now);
        }
    }

    /// How often to look when nothing moves: often enough that a drip is
    /// given up close to its window's end.
    pub fn tick(&self) -> Duration {
        (self.limits.window / 8).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    fn granule(&self) -> Duration {
        self.limits.window / 32
    }

    /// Whether the transfer is within its deadline and, when `floor`, its
    /// rate floor (a transfer whose bytes have all moved, waiting for the
    /// registry's answer, is held to the deadline alone).
    pub fn check(&mut self, now: Instant, floor: bool) -> Result<(), Slow> {
        let elapsed = now.saturating_duration_since(self.started);
        if let Some(d) = self.limits.deadline.filter(|d| elapsed >= *d) {
            return Err(Slow::Deadline {
                moved: self.moved,
                after: d,
            });
        }
        let (Some(from), true) = (self.floor_from, floor && self.limits.min_rate > 0) else {
            return Ok(());
        };
        self.sample(now);
        let window = self.limits.window;
        if now.saturating_duration_since(from) < window {
            return Ok(());
        }
        // Moved by the start of the window: the latest sample at or before
        // it (a sample is a count reached by then, so this errs towards
        // counting more in the window, never less).
        let edge = now - window;
        while self.samples.len() > 1 && self.samples[1].0 <= edge {
            self.samples.pop_front();
        }
        let before = self.samples.front().map_or(0, |(_, m)| *m);
        let moved = self.moved - before;
        let need = u128::from(self.limits.min_rate) * window.as_millis() / 1000;
        if u128::from(moved) < need {
            return Err(Slow::Rate {
                moved,
                window,
                min_rate: self.limits.min_rate,
            });
        }
        Ok(())
    }

    /// The time left before the deadline, from `now`.
    pub fn time_left(&self, now: Instant) -> Option<Duration> {
        self.limits
            .deadline
            .map(|d| d.saturating_sub(now.saturating_duration_since(self.started)))
    }

    /// [`Slow::Deadline`] as of now, for a transfer stopped by its
    /// deadline between two checks.
    pub fn past_deadline(&self) -> Slow {
        Slow::Deadline {
            moved: self.moved,
            after: self.limits.deadline.unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(min_rate: u64, window: u64, deadline: Option<u64>) -> TransferLimits {
        TransferLimits {
            min_rate,
            window: secs(window),
            deadline: deadline.map(secs),
        }
    }

    #[test]
    fn a_drip_fails_the_floor_once_a_window_has_passed() {
        let t0 = Instant::now();
        let mut p = Pace::new(limits(1024, 30, None), t0);
        p.start_floor(t0);
        // A byte every 20 s.
        for i in 1..=3u64 {
            let now = t0 + secs(20 * i);
            p.add(1, now);
            let r = p.check(now, true);
            if i == 1 {
                assert_eq!(r, Ok(()), "within the first window");
            } else {
                let Err(Slow::Rate { moved, .. }) = r else {
                    panic!("{r:?}")
                };
                assert!(moved <= 2, "{moved}");
            }
        }
    }

    #[test]
    fn a_steady_transfer_at_the_floor_passes_and_a_pause_fails() {
        let t0 = Instant::now();
        let mut p = Pace::new(limits(1000, 10, None), t0);
        p.start_floor(t0);
        let mut now = t0;
        for _ in 0..600 {
            now += Duration::from_millis(100);
            p.add(110, now);
            assert_eq!(p.check(now, true), Ok(()));
        }
        // Nothing for 11 s: the window holds nothing.
        now += secs(11);
        assert!(matches!(
            p.check(now, true),
            Err(Slow::Rate { moved: 0, .. })
        ));
        // Held to the deadline alone (all bytes sent), it passes.
        assert_eq!(p.check(now, false), Ok(()));
        assert!(p.samples.len() <= 40, "{}", p.samples.len());
    }

    #[test]
    fn a_transfer_that_stops_fails_the_floor_a_window_later() {
        // 4 MiB at once, then nothing (a registry that stops reading a
        // push): the window after the stop holds nothing.
        let t0 = Instant::now();
        let mut p = Pace::new(limits(1024, 2, None), t0);
        p.start_floor(t0);
        p.counted(4 << 20, t0 + Duration::from_millis(10));
        let mut now = t0;
        let mut failed = None;
        while failed.is_none() && now < t0 + secs(10) {
            now += Duration::from_millis(200);
            p.counted(4 << 20, now);
            failed = p.check(now, true).err().map(|_| now - t0);
        }
        let after = failed.expect("the floor fails a transfer that stopped");
        assert!(after <= Duration::from_millis(2400), "{after:?}");
    }

    #[test]
    fn the_floor_waits_for_the_first_answer_and_the_deadline_does_not() {
        let t0 = Instant::now();
        let mut p = Pace::new(limits(1024, 5, Some(60)), t0);
        assert_eq!(p.check(t0 + secs(50), true), Ok(()));
        p.start_floor(t0 + secs(50));
        assert_eq!(p.check(t0 + secs(54), true), Ok(()));
        let e = p.check(t0 + secs(61), true).unwrap_err();
        assert!(matches!(e, Slow::Deadline { moved: 0, .. }), "{e:?}");
        assert!(e.to_string().contains("after 60 s"), "{e}");
        assert_eq!(p.time_left(t0 + secs(70)), Some(Duration::ZERO));
    }

    #[test]
    fn a_new_attempt_counts_from_nothing() {
        let t0 = Instant::now();
        let mut p = Pace::new(limits(0, 5, None), t0);
        p.counted(100, t0);
        p.counted(30, t0);
        p.counted(50, t0);
        assert_eq!(p.moved, 150);
    }

    #[test]
    fn settings_give_the_limits_and_zero_turns_them_off() {
        let d = TransferLimits::default();
        assert_eq!(d.min_rate, crate::config::DEFAULT_MIN_RATE);
        assert_eq!(d.window, secs(crate::config::DEFAULT_RATE_WINDOW_SECS));
        assert_eq!(
            d.deadline,
            Some(secs(crate::config::DEFAULT_BLOB_DEADLINE_SECS))
        );
        let s = crate::config::Settings::parse(
            "[registries]\nmin_rate = 0\nrate_window_secs = 0\nblob_deadline_secs = 0\n",
        )
        .unwrap();
        let l = TransferLimits::from_settings(&s.registries);
        assert_eq!(l, limits(0, 1, None));
        let mut p = Pace::new(l, Instant::now());
        p.start_floor(Instant::now());
        assert_eq!(p.check(Instant::now() + secs(1 << 20), true), Ok(()));
    }
}
