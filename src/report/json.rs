//! JSON events, one object per line, for scripts (`--json`).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::alive::{Heartbeats, ALIVE_EVERY};
use super::meter::Meters;
use super::{Level, Reporter, StepInfo, StepResult, Stream};

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

pub struct JsonReporter {
    out: Out,
    /// Each transfer's figures: at most one `transfer_progress` event per
    /// transfer per [`PROGRESS_EVERY`].
    meters: Meters,
    alive: Heartbeats,
}

/// How often a transfer's `transfer_progress` event comes at most.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(500);

impl JsonReporter {
    pub fn stdout() -> Self {
        JsonReporter::to_writer(Box::new(super::stdout::Stdout))
    }

    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        JsonReporter {
            out: Arc::new(Mutex::new(w)),
            meters: Meters::new(PROGRESS_EVERY, true),
            alive: Heartbeats::new(ALIVE_EVERY),
        }
    }

    /// A `step_alive` event every `alive` instead of [`ALIVE_EVERY`]
    /// (tests use a short one).
    pub fn with_alive_every(mut self, alive: Duration) -> Self {
        self.alive = Heartbeats::new(alive);
        self
    }

    /// Writes one event; also used by commands for their final result.
    pub fn emit(&self, value: serde_json::Value) {
        emit(&self.out, value);
    }
}

fn emit(out: &Out, value: serde_json::Value) {
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    let _ = serde_json::to_writer(&mut *out, &value);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
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
        let out = self.out.clone();
        let index = s.index;
        self.alive.start(index, move |d| {
            emit(
                &out,
                json!({"event": "step_alive", "index": index, "seconds": d.as_secs()}),
            )
        });
    }

    fn step_output(&self, s: &StepInfo, stream: Stream, line: &[u8]) {
        let stream = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        self.emit(json!({"event": "output", "index": s.index, "stream": stream, "line": String::from_utf8_lossy(line)}));
    }

    fn step_done(&self, s: &StepInfo, r: StepResult, elapsed: Duration) {
        self.alive.stop(s.index);
        self.emit(json!({"event": "step_done", "index": s.index, "result": result_name(r), "seconds": elapsed.as_secs_f64()}));
    }

    fn transfer_start(&self, id: &str, what: &str, total: Option<u64>) {
        self.meters.start(id, what, total);
        self.emit(json!({"event": "transfer_start", "id": id, "what": what, "total": total}));
    }

    fn export_start(&self, id: &str, what: &str, differ: &str) {
        self.meters.start(id, what, None);
        self.emit(json!({"event": "transfer_start", "id": id, "what": what, "total": null, "differ": differ}));
    }

    fn transfer_progress(&self, id: &str, done: u64) {
        let Some(m) = self.meters.update(id, done) else {
            return;
        };
        let now = Instant::now();
        self.emit(json!({
            "event": "transfer_progress", "id": id, "done": done, "total": m.total,
            "rate": m.rate(now), "eta_seconds": m.eta(now).map(|d| d.as_secs()),
        }));
    }

    fn transfer_done(&self, id: &str, skipped: bool) {
        let now = Instant::now();
        let m = self.meters.finish(id);
        let done = m.as_ref().map_or(0, |m| m.done);
        let total = m.as_ref().and_then(|m| m.total);
        let seconds = m.as_ref().map_or(0.0, |m| m.elapsed(now).as_secs_f64());
        let rate = m.as_ref().map_or(0, |m| m.rate(now));
        self.emit(json!({
            "event": "transfer_done", "id": id, "skipped": skipped,
            "done": done, "total": total, "seconds": seconds, "rate": rate,
        }));
    }

    fn package(&self, s: &StepInfo, what: &str, name: &str, version: &str, bytes: u64) {
        self.emit(json!({"event": "package", "index": s.index, "what": what, "name": name, "version": version, "bytes": bytes}));
    }

    fn deferred(&self, s: &StepInfo, package: &str, script: &str, command: &str, reason: &str) {
        self.emit(json!({"event": "deferred", "index": s.index, "package": package, "script": script, "command": command, "reason": reason}));
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
