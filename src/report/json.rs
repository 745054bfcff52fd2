//! JSON events, one object per line, for scripts (`--json`).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Level, Reporter, StepInfo, StepResult, Stream};

pub struct JsonReporter {
    out: Mutex<Box<dyn Write + Send>>,
    /// When each transfer last reported progress: at most one
    /// `transfer_progress` event per transfer per [`PROGRESS_EVERY`].
    progress: Mutex<HashMap<String, Instant>>,
}

const PROGRESS_EVERY: Duration = Duration::from_millis(500);

impl JsonReporter {
    pub fn stdout() -> Self {
        JsonReporter::to_writer(Box::new(super::stdout::Stdout))
    }

    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        JsonReporter {
            out: Mutex::new(w),
            progress: Mutex::new(HashMap::new()),
        }
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
        StepResult::Fetched => "fetched",
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

    fn transfer_progress(&self, id: &str, done: u64) {
        let now = Instant::now();
        {
            let mut last = self.progress.lock().unwrap_or_else(|e| e.into_inner());
            match last.get(id) {
                Some(t) if now.duration_since(*t) < PROGRESS_EVERY => return,
                _ => last.insert(id.to_string(), now),
            };
        }
        self.emit(json!({"event": "transfer_progress", "id": id, "done": done}));
    }

    fn transfer_done(&self, id: &str, skipped: bool) {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn transfer_progress_is_throttled_per_transfer() {
        let out = Shared::default();
        let r = JsonReporter::to_writer(Box::new(out.clone()));
        r.transfer_start("a", "blob a", Some(10));
        r.transfer_progress("a", 1);
        r.transfer_progress("a", 2); // within 500 ms of the last: dropped
        r.transfer_progress("b", 5); // another transfer: its own clock
        r.transfer_done("a", false);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let events: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let progress: Vec<(String, u64)> = events
            .iter()
            .filter(|e| e["event"] == "transfer_progress")
            .map(|e| {
                (
                    e["id"].as_str().unwrap().to_string(),
                    e["done"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(progress, vec![("a".into(), 1), ("b".into(), 5)]);
        assert_eq!(events.last().unwrap()["event"], "transfer_done");
    }
}
