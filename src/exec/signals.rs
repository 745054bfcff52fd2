//! jbuild outlives the step it runs in a jail, so it can tear the jail
//! down. Without this, Ctrl-C would kill jbuild at once (the default
//! action of SIGINT) and leave the jail, its devfs and its nullfs mounts
//! behind on the host.
//!
//! While a [`StepSignals`] guard lives, SIGINT, SIGQUIT, SIGTERM and SIGHUP
//! sent to jbuild are passed on to the step's process instead (Ctrl-C
//! reaches the step directly too: it is in jbuild's process group; a
//! signal that is already pending is not delivered twice). The step ends,
//! jbuild tears down, and the guard reports the signal so the build stops
//! rather than goes on. The step's process starts with default actions:
//! handlers are reset by execve(2), and the FreeBSD executor resets them
//! before attaching to the jail as well.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

const SIGNALS: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGHUP,
];

/// The signals jbuild passes on to the step (as numbers, for the
/// FreeBSD executor's plan, which resets them in the child).
pub fn forwarded() -> Vec<i32> {
    SIGNALS.iter().map(|&s| s as i32).collect()
}

/// The step's pid (0: none yet) and the last signal received (0: none).
/// One step at a time: the build loop runs steps one after another.
static CHILD: AtomicI32 = AtomicI32::new(0);
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    RECEIVED.store(sig, Ordering::SeqCst);
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// See the module docs. Restores the previous actions when dropped.
pub struct StepSignals {
    old: Vec<(Signal, SigAction)>,
}

impl StepSignals {
    pub fn install() -> nix::Result<StepSignals> {
        CHILD.store(0, Ordering::SeqCst);
        RECEIVED.store(0, Ordering::SeqCst);
        let action = SigAction::new(
            SigHandler::Handler(forward),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut guard = StepSignals { old: Vec::new() };
        for sig in SIGNALS {
            // SAFETY: `forward` only touches atomics and calls kill(2).
            let old = unsafe { sigaction(sig, &action) }?;
            guard.old.push((sig, old));
        }
        Ok(guard)
    }

    /// The step's process, once started: signals go to it from now on.
    pub fn forward_to(&self, pid: u32) {
        CHILD.store(pid as i32, Ordering::SeqCst);
    }

    /// The signal jbuild received while the guard lived, if any.
    pub fn received(&self) -> Option<i32> {
        match RECEIVED.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

impl Drop for StepSignals {
    fn drop(&mut self) {
        CHILD.store(0, Ordering::SeqCst);
        for (sig, old) in self.old.drain(..).rev() {
            // SAFETY: restoring the action that was there before.
            let _ = unsafe { sigaction(sig, &old) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// jbuild gets SIGTERM while a step runs: it survives, the step gets
    /// the signal and ends, and the guard says what happened.
    #[test]
    fn a_signal_to_jbuild_goes_to_the_step_and_jbuild_lives_on() {
        let guard = StepSignals::install().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        guard.forward_to(child.id());
        nix::sys::signal::raise(Signal::SIGTERM).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert_eq!(guard.received(), Some(libc::SIGTERM));
        drop(guard);
        // The previous action (default) is back; no child is targeted.
        assert_eq!(CHILD.load(Ordering::SeqCst), 0);
        let now = unsafe {
            sigaction(
                Signal::SIGTERM,
                &SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty()),
            )
        }
        .unwrap();
        assert_eq!(now.handler(), SigHandler::SigDfl);
    }
}
