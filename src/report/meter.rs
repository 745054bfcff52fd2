//! The figures of a transfer as plain lines and JSON events give them:
//! bytes done of the total (when known), the rate since it started, the
//! time left, and when the next line is due, so a 1 GiB unpack says a few
//! lines rather than thousands. Time is passed in, so the throttle is
//! tested without sleeping.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One transfer being measured.
#[derive(Debug, Clone)]
pub struct Meter {
    pub what: String,
    pub total: Option<u64>,
    pub done: u64,
    started: Instant,
    /// When progress was last said; `None` before the first time.
    said: Option<Instant>,
}

impl Meter {
    pub fn new(what: &str, total: Option<u64>, now: Instant) -> Meter {
        Meter {
            what: what.to_string(),
            total,
            done: 0,
            started: now,
            said: None,
        }
    }

    pub fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// Bytes per second since the start (0 before any time has passed).
    pub fn rate(&self, now: Instant) -> u64 {
        let secs = self.elapsed(now).as_secs_f64();
        if secs <= 0.0 {
            0
        } else {
            (self.done as f64 / secs) as u64
        }
    }

    /// The time left at the rate so far, when the total is known and
    /// something has moved.
    pub fn eta(&self, now: Instant) -> Option<Duration> {
        let total = self.total?;
        let rate = self.rate(now);
        (rate > 0).then(|| Duration::from_secs(total.saturating_sub(self.done) / rate))
    }

    /// Records `done` and says whether progress is due: the first update
    /// after `every` has passed since the last line said, or since the
    /// start (or at once when `say_first`).
    pub fn update(&mut self, done: u64, now: Instant, every: Duration, say_first: bool) -> bool {
        self.done = done;
        let due = match self.said {
            None if say_first => true,
            None => now.saturating_duration_since(self.started) >= every,
            Some(said) => now.saturating_duration_since(said) >= every,
        };
        if due {
            self.said = Some(now);
            true
        } else {
            false
        }
    }
}

/// The transfers a reporter is measuring, by id.
pub struct Meters {
    all: Mutex<HashMap<String, Meter>>,
    every: Duration,
    say_first: bool,
}

impl Meters {
    /// Progress due every `every`, the first at once when `say_first`.
    pub fn new(every: Duration, say_first: bool) -> Meters {
        Meters {
            all: Mutex::new(HashMap::new()),
            every,
            say_first,
        }
    }

    pub fn start(&self, id: &str, what: &str, total: Option<u64>) {
        self.lock()
            .insert(id.to_string(), Meter::new(what, total, Instant::now()));
    }

    /// Records `done` for `id` (a transfer never started is measured
    /// from now, named by its id); a copy of its meter when a line is due.
    pub fn update(&self, id: &str, done: u64) -> Option<Meter> {
        let now = Instant::now();
        let mut all = self.lock();
        let m = all
            .entry(id.to_string())
            .or_insert_with(|| Meter::new(id, None, now));
        m.update(done, now, self.every, self.say_first)
            .then(|| m.clone())
    }

    pub fn finish(&self, id: &str) -> Option<Meter> {
        self.lock().remove(id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Meter>> {
        self.all.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `2m10s`-style durations, whole seconds: how long a step has run.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_progress_is_due_once_per_interval() {
        let t0 = Instant::now();
        let every = crate::report::plain::PLAIN_PROGRESS_EVERY;
        let mut m = Meter::new("unpacking", Some(100 << 20), t0);
        let mut said = 0;
        // an update every 10 ms for 60 s: 6000 updates, 12 lines
        // (docs/progress.md: "at most one line every 5 s")
        for i in 1..=6000u64 {
            if m.update(i << 14, t0 + Duration::from_millis(i * 10), every, false) {
                said += 1;
            }
        }
        assert_eq!(said, 12);
        let mut first = Meter::new("downloading", None, t0);
        assert!(first.update(1, t0, every, true));
        assert!(!first.update(2, t0 + Duration::from_secs(1), every, true));
    }

    #[test]
    fn rate_and_time_left_follow_the_bytes() {
        let t0 = Instant::now();
        let mut m = Meter::new("unpacking", Some(100 << 20), t0);
        let now = t0 + Duration::from_secs(2);
        m.update(20 << 20, now, Duration::ZERO, false);
        assert_eq!(m.rate(now), 10 << 20);
        assert_eq!(m.eta(now), Some(Duration::from_secs(8)));
        let mut n = Meter::new("exporting", None, t0);
        n.update(1, now, Duration::ZERO, false);
        assert_eq!(n.eta(now), None);
    }

    #[test]
    fn clock_reads_like_a_person_writes() {
        assert_eq!(clock(Duration::from_secs(9)), "9s");
        assert_eq!(clock(Duration::from_secs(130)), "2m10s");
        assert_eq!(clock(Duration::from_secs(3725)), "1h02m05s");
    }
}
