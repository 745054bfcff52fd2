//! Standard output for what commands print as their result and for JSON
//! events (the `outln!` macros of the CLI and [`Stdout`]).
//!
//! `println!` panics when standard output is gone: `jbuild images | head -1`
//! would end in a panic message, and `jbuild check --repair | head` would
//! stop repairing halfway. Here a closed pipe (EPIPE) just ends the output:
//! the command finishes its work and exits as it would have. Any other write
//! error (a full disk under `> file`, `/dev/full`) ends the output too and
//! is kept for the CLI, which reports it once and exits 2 instead of 0, so
//! a script does not take a truncated listing for a whole one.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(OPEN);
static FAILURE: OnceLock<String> = OnceLock::new();

/// Writes `args` to standard output (see the module documentation).
pub fn write(args: fmt::Arguments<'_>) {
    if STATE.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        lost(&e);
    }
}

/// Standard output as an [`io::Write`](std::io::Write) that follows the
/// same rules: writes never fail, and a failure is remembered as with
/// [`write()`].
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if STATE.load(Ordering::Relaxed) == OPEN {
            if let Err(e) = std::io::stdout().lock().write_all(buf) {
                lost(&e);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if STATE.load(Ordering::Relaxed) == OPEN {
            if let Err(e) = std::io::stdout().lock().flush() {
                lost(&e);
            }
        }
        Ok(())
    }
}

fn lost(e: &std::io::Error) {
    if e.kind() == ErrorKind::BrokenPipe {
        STATE.store(CLOSED, Ordering::Relaxed);
    } else if STATE.swap(FAILED, Ordering::Relaxed) == OPEN {
        let _ = FAILURE.set(e.to_string());
    }
}

/// The first write error other than a closed pipe, if output was lost to
/// one (the CLI reports it and exits 2).
pub fn failure() -> Option<&'static str> {
    FAILURE.get().map(String::as_str)
}
