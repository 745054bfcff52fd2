//! A terminal: a spinner for the running step, bars for transfers, step
//! output printed above them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::plain::{done_line, secs};
use super::{Level, Reporter, StepInfo, StepResult, Stream};

pub struct TtyReporter {
    multi: MultiProgress,
    step: Mutex<Option<ProgressBar>>,
    transfers: Mutex<HashMap<String, ProgressBar>>,
}

impl Default for TtyReporter {
    fn default() -> Self {
        Self::new()
    }
}

impl TtyReporter {
    pub fn new() -> Self {
        TtyReporter {
            multi: MultiProgress::new(),
            step: Mutex::new(None),
            transfers: Mutex::new(HashMap::new()),
        }
    }

    fn println(&self, line: String) {
        let _ = self.multi.println(line);
    }
}

impl Reporter for TtyReporter {
    fn step_start(&self, s: &StepInfo) {
        let bar = self.multi.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{prefix}] {msg} {elapsed:.dim}")
                .expect("static template"),
        );
        bar.set_prefix(format!("{}/{}", s.index, s.total));
        bar.set_message(s.text.clone());
        // The spinner turns and the elapsed time counts while the step
        // runs, output or not: five redraws a second at most.
        bar.enable_steady_tick(Duration::from_millis(200));
        *self.step.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn step_output(&self, _: &StepInfo, _: Stream, line: &[u8]) {
        self.println(format!("    {}", String::from_utf8_lossy(line)));
    }

    fn step_done(&self, s: &StepInfo, result: StepResult, elapsed: Duration) {
        if let Some(bar) = self.step.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        let tail = match result {
            StepResult::Cached => "cached".to_string(),
            StepResult::Fetched => "fetched from the registry cache".to_string(),
            StepResult::Done => secs(elapsed),
            StepResult::Metadata => String::new(),
            StepResult::Failed => format!("failed after {}", secs(elapsed)),
        };
        self.println(
            format!("[{}/{}] {} {}", s.index, s.total, s.text, tail)
                .trim_end()
                .to_string(),
        );
    }

    fn transfer_start(&self, id: &str, what: &str, total: Option<u64>) {
        let bar = match total {
            Some(n) => {
                let b = self.multi.add(ProgressBar::new(n));
                b.set_style(
                    ProgressStyle::with_template(
                        "{msg:30!} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                    )
                    .expect("static template"),
                );
                b
            }
            None => {
                let b = self.multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template("{spinner} {msg} {bytes} {bytes_per_sec}")
                        .expect("static template"),
                );
                // A counter with no total: the spinner says it is alive
                // while a large file is being read.
                b.enable_steady_tick(Duration::from_millis(200));
                b
            }
        };
        bar.set_message(what.to_string());
        self.transfers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), bar);
    }

    fn transfer_progress(&self, id: &str, done: u64) {
        if let Some(b) = self
            .transfers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
        {
            b.set_position(done);
        }
    }

    fn transfer_done(&self, id: &str, skipped: bool) {
        if let Some(b) = self
            .transfers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
        {
            if !skipped {
                // Draw the last figure whatever the redraw limit: a bar
                // that ends short of its total looks like a fault.
                b.abandon();
            }
            b.finish_and_clear();
            self.multi.remove(&b);
            let what = b.message();
            self.println(if skipped {
                format!("{what}: already present")
            } else {
                done_line(&what, b.position(), b.elapsed())
            });
        }
    }

    fn message(&self, level: Level, text: &str) {
        match level {
            Level::Info => self.println(text.to_string()),
            Level::Warn => self.println(format!("warning: {text}")),
        }
    }
}
