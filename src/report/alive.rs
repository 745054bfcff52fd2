//! A long step says it is alive: plain lines and JSON events have no
//! spinner, so a thread beside the step says so every so often until the
//! step ends ("still running (2m10s)"). A CI log that stays silent for ten
//! minutes looks like a hang, and some CI systems end such jobs.

use std::collections::HashMap;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a running step says it is alive in plain lines and JSON
/// events (docs/progress.md states it).
pub const ALIVE_EVERY: Duration = Duration::from_secs(30);

/// The heartbeats of the steps running now, by step index.
pub struct Heartbeats {
    every: Duration,
    running: Mutex<HashMap<usize, Heartbeat>>,
}

struct Heartbeat {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Heartbeats {
    pub fn new(every: Duration) -> Heartbeats {
        Heartbeats {
            every,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Calls `say` with the time since now, every interval, until
    /// [`Heartbeats::stop`] for `index`.
    pub fn start(&self, index: usize, say: impl Fn(Duration) + Send + 'static) {
        let (stop, rx) = mpsc::channel::<()>();
        let every = self.every;
        let started = Instant::now();
        let spawned = std::thread::Builder::new()
            .name("jbuild-alive".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                    say(started.elapsed());
                }
            });
        // A thread that cannot start costs the heartbeat only.
        if let Ok(thread) = spawned {
            let old = self.lock().insert(index, Heartbeat { stop, thread });
            if let Some(old) = old {
                old.end();
            }
        }
    }

    /// Ends the heartbeat of step `index`; nothing more is said for it
    /// once this returns.
    pub fn stop(&self, index: usize) {
        let beat = self.lock().remove(&index);
        if let Some(b) = beat {
            b.end();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Heartbeat>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Heartbeat {
    fn end(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        let all: Vec<_> = self.lock().drain().map(|(_, b)| b).collect();
        for b in all {
            b.end();
        }
    }
}
