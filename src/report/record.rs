//! Records every call, for tests.

use std::sync::Mutex;
use std::time::Duration;

use super::{Level, Reporter, StepInfo, StepResult, Stream};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    StepStart {
        index: usize,
        text: String,
    },
    Output {
        index: usize,
        stream: Stream,
        line: String,
    },
    StepDone {
        index: usize,
        result: StepResult,
    },
    TransferStart {
        id: String,
        what: String,
    },
    TransferProgress {
        id: String,
        done: u64,
    },
    TransferDone {
        id: String,
        skipped: bool,
    },
    Message {
        level: Level,
        text: String,
    },
}

#[derive(Default)]
pub struct RecordingReporter {
    events: Mutex<Vec<Event>>,
}

impl RecordingReporter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many steps ended with `result`.
    pub fn count(&self, result: StepResult) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, Event::StepDone { result: r, .. } if *r == result))
            .count()
    }

    fn push(&self, e: Event) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(e);
    }
}

impl Reporter for RecordingReporter {
    fn step_start(&self, s: &StepInfo) {
        self.push(Event::StepStart {
            index: s.index,
            text: s.text.clone(),
        });
    }
    fn step_output(&self, s: &StepInfo, stream: Stream, line: &[u8]) {
        self.push(Event::Output {
            index: s.index,
            stream,
            line: String::from_utf8_lossy(line).into_owned(),
        });
    }
    fn step_done(&self, s: &StepInfo, result: StepResult, _: Duration) {
        self.push(Event::StepDone {
            index: s.index,
            result,
        });
    }
    fn transfer_start(&self, id: &str, what: &str, _: Option<u64>) {
        self.push(Event::TransferStart {
            id: id.to_string(),
            what: what.to_string(),
        });
    }
    fn transfer_progress(&self, id: &str, done: u64) {
        self.push(Event::TransferProgress {
            id: id.to_string(),
            done,
        });
    }
    fn transfer_done(&self, id: &str, skipped: bool) {
        self.push(Event::TransferDone {
            id: id.to_string(),
            skipped,
        });
    }
    fn message(&self, level: Level, text: &str) {
        self.push(Event::Message {
            level,
            text: text.to_string(),
        });
    }
}
