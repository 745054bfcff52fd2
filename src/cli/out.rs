//! Standard output for what commands print as their result.
//!
//! `println!` panics when standard output is gone: `jbuild images | head -1`
//! would end in a panic message, and `jbuild check --repair | head` would
//! stop repairing halfway. Here a closed pipe (EPIPE) just ends the output:
//! the command finishes its work and exits as it would have. Any other write
//! error (a full disk under `> file`, `/dev/full`) is reported once on
//! standard error, and the command then exits 2 instead of 0, so a script
//! does not take a truncated listing for a whole one.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicU8, Ordering};

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(OPEN);

/// Writes `args` to standard output (see the module documentation).
pub fn write(args: fmt::Arguments<'_>) {
    if STATE.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut out = std::io::stdout().lock();
    let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) else {
        return;
    };
    if e.kind() == ErrorKind::BrokenPipe {
        STATE.store(CLOSED, Ordering::Relaxed);
    } else if STATE.swap(FAILED, Ordering::Relaxed) == OPEN {
        eprintln!("error: cannot write to standard output: {e}");
    }
}

/// Whether some output was lost to a write error other than a closed pipe.
pub fn failed() -> bool {
    STATE.load(Ordering::Relaxed) == FAILED
}

/// `println!` for results: see [`write`].
macro_rules! outln {
    () => {
        $crate::cli::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for results: see [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!($($arg)*))
    };
}
