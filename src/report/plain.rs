//! Plain lines for CI logs and pipes: one line per event, nothing redrawn.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use super::{Level, Reporter, StepInfo, StepResult, Stream};

/// Writes to standard error, so standard output stays free for results.
pub struct PlainReporter {
    out: Mutex<Box<dyn Write + Send>>,
}

impl PlainReporter {
    pub fn stderr() -> Self {
        PlainReporter {
            out: Mutex::new(Box::new(std::io::stderr())),
        }
    }

    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        PlainReporter { out: Mutex::new(w) }
    }

    fn say(&self, text: std::fmt::Arguments<'_>) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{text}");
    }
}

impl Reporter for PlainReporter {
    fn step_start(&self, s: &StepInfo) {
        self.say(format_args!("[{}/{}] {}", s.index, s.total, s.text));
    }

    fn step_output(&self, _: &StepInfo, _: Stream, line: &[u8]) {
        self.say(format_args!("    {}", String::from_utf8_lossy(line)));
    }

    fn step_done(&self, s: &StepInfo, result: StepResult, elapsed: Duration) {
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

    fn transfer_start(&self, _: &str, what: &str, total: Option<u64>) {
        match total {
            Some(n) => self.say(format_args!("{what} ({})", bytes(n))),
            None => self.say(format_args!("{what}")),
        }
    }

    fn transfer_progress(&self, _: &str, _: u64) {}

    fn transfer_done(&self, id: &str, skipped: bool) {
        if skipped {
            self.say(format_args!("{id}: already present"));
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
