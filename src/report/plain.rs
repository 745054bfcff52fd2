//! Plain lines for CI logs and pipes: one line per event, nothing redrawn.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::alive::{Heartbeats, ALIVE_EVERY};
use super::meter::{clock, Meter, Meters};
use super::{Level, Reporter, StepInfo, StepResult, Stream};

/// How often a transfer says how far it has got in plain lines: a 1 GiB
/// unpack of 6 s says one line, a 10-minute upload 120.
pub const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(5);

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

/// Writes to standard error, so standard output stays free for results.
pub struct PlainReporter {
    out: Out,
    meters: Meters,
    alive: Heartbeats,
}

impl PlainReporter {
    pub fn stderr() -> Self {
        PlainReporter::to_writer(Box::new(std::io::stderr()))
    }

    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        PlainReporter {
            out: Arc::new(Mutex::new(w)),
            meters: Meters::new(PLAIN_PROGRESS_EVERY, false),
            alive: Heartbeats::new(ALIVE_EVERY),
        }
    }

    /// Progress lines every `progress` and a running step's "still
    /// running" every `alive`, instead of [`PLAIN_PROGRESS_EVERY`] and
    /// [`ALIVE_EVERY`] (tests use short ones).
    pub fn with_intervals(mut self, progress: Duration, alive: Duration) -> Self {
        self.meters = Meters::new(progress, false);
        self.alive = Heartbeats::new(alive);
        self
    }

    fn say(&self, text: std::fmt::Arguments<'_>) {
        say(&self.out, text);
    }
}

fn say(out: &Out, text: std::fmt::Arguments<'_>) {
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(out, "{text}");
}

/// `what: 48.0 MiB of 96.0 MiB (50%), 40.1 MiB/s, 1s left`, or without a
/// total `what: 48.0 MiB, 40.1 MiB/s`.
fn progress_line(m: &Meter, now: Instant) -> String {
    let rate = bytes(m.rate(now));
    match m.total {
        Some(total) => {
            let pct = (m.done as f64 * 100.0 / total.max(1) as f64).min(100.0);
            let left = m.eta(now).map(clock).unwrap_or_else(|| "?".into());
            format!(
                "{}: {} of {} ({pct:.0}%), {rate}/s, {left} left",
                m.what,
                bytes(m.done),
                bytes(total)
            )
        }
        None => format!("{}: {}, {rate}/s", m.what, bytes(m.done)),
    }
}

/// `what: 96.0 MiB in 1.20s (80.0 MiB/s)`, the figures at the end.
pub(crate) fn done_line(what: &str, done: u64, elapsed: Duration) -> String {
    if done == 0 {
        return format!("{what}: done in {}", secs(elapsed));
    }
    let rate = (done as f64 / elapsed.as_secs_f64().max(1e-3)) as u64;
    format!(
        "{what}: {} in {} ({}/s)",
        bytes(done),
        secs(elapsed),
        bytes(rate)
    )
}

impl Reporter for PlainReporter {
    fn step_start(&self, s: &StepInfo) {
        self.say(format_args!("[{}/{}] {}", s.index, s.total, s.text));
        let out = self.out.clone();
        let (index, total) = (s.index, s.total);
        self.alive.start(index, move |d| {
            say(
                &out,
                format_args!("[{index}/{total}] still running ({})", clock(d)),
            )
        });
    }

    fn step_output(&self, _: &StepInfo, _: Stream, line: &[u8]) {
        self.say(format_args!("    {}", String::from_utf8_lossy(line)));
    }

    fn step_done(&self, s: &StepInfo, result: StepResult, elapsed: Duration) {
        self.alive.stop(s.index);
        match result {
            StepResult::Cached => self.say(format_args!("[{}/{}] cached", s.index, s.total)),
            StepResult::Fetched => self.say(format_args!(
                "[{}/{}] fetched from the registry cache",
                s.index, s.total
            )),
            StepResult::Done => self.say(format_args!(
                "[{}/{}] done in {}",
                s.index,
                s.total,
                secs(elapsed)
            )),
            StepResult::Metadata => {}
            StepResult::Failed => self.say(format_args!(
                "[{}/{}] failed after {}",
                s.index,
                s.total,
                secs(elapsed)
            )),
        }
    }

    fn transfer_start(&self, id: &str, what: &str, total: Option<u64>) {
        self.meters.start(id, what, total);
        match total {
            Some(n) => self.say(format_args!("{what} ({})", bytes(n))),
            None => self.say(format_args!("{what}")),
        }
    }

    fn transfer_progress(&self, id: &str, done: u64) {
        if let Some(m) = self.meters.update(id, done) {
            self.say(format_args!("{}", progress_line(&m, Instant::now())));
        }
    }

    fn transfer_done(&self, id: &str, skipped: bool) {
        let meter = self.meters.finish(id);
        if skipped {
            self.say(format_args!("{id}: already present"));
        } else if let Some(m) = meter {
            let line = done_line(&m.what, m.done, m.elapsed(Instant::now()));
            self.say(format_args!("{line}"));
        }
    }

    fn message(&self, level: Level, text: &str) {
        match level {
            Level::Info => self.say(format_args!("{text}")),
            Level::Warn => self.say(format_args!("warning: {text}")),
        }
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// `12.3 MiB`-style sizes.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
