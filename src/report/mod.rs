//! The `Reporter` seam: how progress and step output reach the user.
//!
//! The library never prints. Whatever it wants to say goes to a `Reporter`:
//! the CLI picks one (bars on a terminal, plain lines in CI or a pipe, JSON
//! events for scripts, nothing with `--quiet`), tests record the calls.
//! Calls may come from several threads; implementations keep their own
//! locking.

mod alive;
mod json;
mod meter;
pub mod plain;
mod progress;
mod record;
pub mod stdout;
mod tty;

pub use alive::ALIVE_EVERY;
pub use progress::{ProgressReader, ProgressWriter};

pub use json::{JsonReporter, PROGRESS_EVERY as JSON_PROGRESS_EVERY};
pub use plain::PlainReporter;
pub use record::{Event, RecordingReporter};
pub use tty::TtyReporter;

use std::time::Duration;

/// An error and its causes on one line (`a: b: c`). The cause is often
/// what a person needs (a full disk, a refused TLS certificate, a DNS
/// failure several levels down a reqwest error), so messages that keep
/// only a string keep this one. No error prints its own source (the
/// house rule, held by `tests/it/cli/chains.rs`), so each cause is
/// joined as it is.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Which of a step's output pipes a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One build step as the reporter sees it.
#[derive(Debug, Clone)]
pub struct StepInfo {
    /// 1-based position across all stages.
    pub index: usize,
    pub total: usize,
    /// The stage name or number.
    pub stage: String,
    /// The instruction, after substitution, as history records it.
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepResult {
    /// Found in the cache; nothing ran.
    Cached,
    /// Restored from a registry build cache (`--cache-from`): its layer
    /// was fetched and applied; nothing ran.
    Fetched,
    /// Ran and was committed.
    Done,
    /// Metadata only; no filesystem change.
    Metadata,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

/// Where a build and a transfer say what they do: the terminal (plain or
/// with progress bars), `--json` events, or nothing (`--quiet`). Calls
/// come from the engine's threads in the order things happen; a reporter
/// keeps no state the engine relies on.
pub trait Reporter: Send + Sync {
    /// Step `step` begins, before its cache is looked up (a metadata step
    /// gets its `step_done` at once).
    fn step_start(&self, step: &StepInfo);
    /// One line the step's process wrote to `stream`, without its newline
    /// (bytes as written: a reporter decides how to show what is not
    /// UTF-8).
    fn step_output(&self, step: &StepInfo, stream: Stream, line: &[u8]);
    /// Step `step` ended as `result`, `elapsed` after its `step_start`
    /// (the cache lookup included).
    fn step_done(&self, step: &StepInfo, result: StepResult, elapsed: Duration);
    /// A transfer or export of `total` bytes (if known) named `what` begins.
    fn transfer_start(&self, id: &str, what: &str, total: Option<u64>);
    /// `done` bytes of transfer `id` so far (a count that only grows).
    /// Callers may call it often ([`ProgressReader`] does every 256 KiB);
    /// reporters throttle what they show.
    fn transfer_progress(&self, id: &str, done: u64);
    /// Transfer `id` ended; `skipped` when nothing moved (the destination
    /// had it already).
    fn transfer_done(&self, id: &str, skipped: bool);
    /// A line for the user that belongs to no step or transfer (a warning,
    /// what a cache did).
    fn message(&self, level: Level, text: &str);
    /// A package of a PKG step: `what` is `fetched` or `installed`,
    /// `bytes` the package file's or the content's. Only `--json` shows
    /// it as an event; the step's output says it to people.
    fn package(&self, _step: &StepInfo, _what: &str, _name: &str, _version: &str, _bytes: u64) {}
    /// A command of a package's script a PKG step deferred to the jail's
    /// first start: `package` (`name-version`), `script` (`post-install`),
    /// the `command` as sh runs it, `reason` (`rebuilder` or `unknown`).
    /// Only `--json` shows it as an event; the step's output says it to
    /// people.
    fn deferred(
        &self,
        _step: &StepInfo,
        _package: &str,
        _script: &str,
        _command: &str,
        _reason: &str,
    ) {
    }
    /// A layer export (a transfer with no known total) begins; `differ` is
    /// the [`Differ::name`](crate::diff::Differ::name) that listed its
    /// changes (`zfs-diff`, `tree-walk`, `overlay-upper`), so a script can
    /// tell which one a build used. Reporters that do not show it treat it
    /// as [`transfer_start`](Reporter::transfer_start).
    fn export_start(&self, id: &str, what: &str, differ: &str) {
        let _ = differ;
        self.transfer_start(id, what, None);
    }
}

/// Says nothing (`--quiet`).
pub struct SilentReporter;

impl Reporter for SilentReporter {
    fn step_start(&self, _: &StepInfo) {}
    fn step_output(&self, _: &StepInfo, _: Stream, _: &[u8]) {}
    fn step_done(&self, _: &StepInfo, _: StepResult, _: Duration) {}
    fn transfer_start(&self, _: &str, _: &str, _: Option<u64>) {}
    fn transfer_progress(&self, _: &str, _: u64) {}
    fn transfer_done(&self, _: &str, _: bool) {}
    fn message(&self, _: Level, _: &str) {}
}
