//! JSON events, one object per line, for scripts (`--json`).

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::{Level, Reporter, StepInfo, StepResult};
use crate::exec::Stream;

pub struct JsonReporter {
    out: Mutex<Box<dyn Write + Send>>,
}

impl JsonReporter {
    pub fn stdout() -> Self {
        JsonReporter {
            out: Mutex::new(Box::new(std::io::stdout())),
        }
    }

    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        JsonReporter { out: Mutex::new(w) }
    }

    /// Writes one event; also used by commands for their final result.
    pub fn emit(&self, value: serde_json::Value) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = serde_json::to_writer(&mut *out, &value);
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }
}

fn result_name(r: StepResult) -> &'static str {
    match r {
        StepResult::Cached => "cached",
        StepResult::Done => "done",
        StepResult::Metadata => "metadata",
        StepResult::Failed => "failed",
    }
}

impl Reporter for JsonReporter {
    fn step_start(&self, s: &StepInfo) {
        self.emit(json!({"event": "step_start", "index": s.index, "total": s.total, "stage": s.stage, "text": s.text}));
    }

    fn step_output(&self, s: &StepInfo, stream: Stream, line: &[u8]) {
        let stream = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        self.emit(json!({"event": "output", "index": s.index, "stream": stream, "line": String::from_utf8_lossy(line)}));
    }

    fn step_done(&self, s: &StepInfo, r: StepResult, elapsed: Duration) {
        self.emit(json!({"event": "step_done", "index": s.index, "result": result_name(r), "seconds": elapsed.as_secs_f64()}));
    }

    fn transfer_start(&self, id: &str, what: &str, total: Option<u64>) {
        self.emit(json!({"event": "transfer_start", "id": id, "what": what, "total": total}));
    }

    fn transfer_progress(&self, _: &str, _: u64) {}

    fn transfer_done(&self, id: &str, skipped: bool) {
        self.emit(json!({"event": "transfer_done", "id": id, "skipped": skipped}));
    }

    fn message(&self, level: Level, text: &str) {
        let level = match level {
            Level::Info => "info",
            Level::Warn => "warning",
        };
        self.emit(json!({"event": "message", "level": level, "text": text}));
    }
}
