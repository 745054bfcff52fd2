//! A running `zfs diff` child: its output read as it comes, so its progress
//! can be watched, and a way to stop it.
//!
//! libzfs writes the diff through a stdio stream of its own (`fdopen` of
//! the output descriptor), which is block-buffered on a pipe: 4 KiB, ~100
//! lines, arrive at once — seconds apart when every line costs tens of
//! milliseconds. On a terminal the same stream is line-buffered, so the
//! child's stdout is a pseudo-terminal in raw mode (no echo, no newline
//! translation: the bytes are what `zfs diff` wrote). `stdbuf(1)` would not
//! help: it sets the buffering of `stdout` only, not of a stream libzfs
//! opens itself. Where no pty can be had, a pipe does, with coarser
//! progress.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a finished child left: its status and everything it wrote.
pub(super) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

pub(super) struct Running {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    done: bool,
}

impl Running {
    /// Starts `program args…` with stdin from /dev/null, stdout on a pty
    /// (a pipe if none can be opened) and stderr on a pipe, each read by a
    /// thread of its own into a buffer.
    pub fn spawn(program: &Path, args: &[&str]) -> io::Result<Running> {
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stderr(Stdio::piped());
        let pty = raw_pty().ok();
        let master = match pty {
            Some((master, slave)) => {
                cmd.stdout(Stdio::from(slave));
                Some(master)
            }
            None => {
                cmd.stdout(Stdio::piped());
                None
            }
        };
        let mut child = cmd.spawn()?;
        // Our copy of the pty's slave end goes with `cmd`: the master reads
        // end of file (EIO on Linux) once the child's copies are closed.
        drop(cmd);
        let (stdout, stderr) = (Arc::default(), Arc::default());
        let mut readers = Vec::new();
        let out: Option<Box<dyn Read + Send>> = match master {
            Some(m) => Some(Box::new(File::from(m))),
            None => child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        };
        if let Some(r) = out {
            readers.push(read_into(r, Arc::clone(&stdout)));
        }
        if let Some(r) = child.stderr.take() {
            readers.push(read_into(Box::new(r), Arc::clone(&stderr)));
        }
        Ok(Running {
            child,
            stdout,
            stderr,
            readers,
            done: false,
        })
    }

    /// The child's process id (tests check it was reaped).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The last complete line written so far, without its newline.
    pub fn last_line(&self) -> Option<Vec<u8>> {
        let out = self.stdout.lock().unwrap_or_else(|e| e.into_inner());
        let end = out.iter().rposition(|&b| b == b'\n')?;
        let start = out[..end]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        Some(out[start..end].to_vec())
    }

    /// Everything, once the child has ended (its output read to the end).
    pub fn try_finish(&mut self) -> io::Result<Option<Finished>> {
        let Some(status) = self.child.try_wait()? else {
            return Ok(None);
        };
        self.done = true;
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let take = |b: &Arc<Mutex<Vec<u8>>>| {
            std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()))
        };
        Ok(Some(Finished {
            status,
            stdout: take(&self.stdout),
            stderr: take(&self.stderr),
        }))
    }

    /// Kills and reaps the child. Its readers end when the last copy of
    /// its output descriptors closes; they are not waited for.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if !self.done {
            self.done = true;
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn read_into(mut r: Box<dyn Read + Send>, buf: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        // A pty's master reports the end as EIO; any error ends the read
        // (the exit status and the parser judge what was read).
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&chunk[..n]);
        }
    })
}

/// A pseudo-terminal pair in raw mode, both ends close-on-exec (the child
/// gets the slave end as its stdout only; no other child keeps it open).
fn raw_pty() -> nix::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
    let pty = nix::pty::openpty(None, None)?;
    for fd in [&pty.master, &pty.slave] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    let mut t = tcgetattr(&pty.slave)?;
    cfmakeraw(&mut t);
    tcsetattr(&pty.slave, SetArg::TCSANOW, &t)?;
    Ok((pty.master, pty.slave))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn finish(r: &mut Running) -> Finished {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(f) = r.try_finish().unwrap() {
                return f;
            }
            assert!(Instant::now() < end, "the child did not end");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Bytes come through unchanged (no `\r` added, tabs kept), and a line
    /// is seen while the child still runs: `sed` writes through stdio,
    /// which flushes at each newline only on a terminal.
    #[test]
    fn lines_arrive_as_written_and_unchanged() {
        let script = "(printf 'M\\tF\\t/a\\\\0040b\\n+\\tF\\t/d\\n'; exec sleep 30) 2>/dev/null \
                      | exec sed -n p";
        let mut r = Running::spawn(Path::new("sh"), &["-c", script]).unwrap();
        let end = Instant::now() + Duration::from_secs(60);
        while r.last_line().as_deref() != Some(b"+\tF\t/d".as_slice()) {
            assert!(Instant::now() < end, "no line: {:?}", r.last_line());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(r.try_finish().unwrap().is_none(), "sed ended early");
        assert_eq!(
            r.stdout.lock().unwrap().as_slice(),
            b"M\tF\t/a\\0040b\n+\tF\t/d\n"
        );
        let pid = r.id();
        r.kill();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} is left"
        );
        let mut r =
            Running::spawn(Path::new("sh"), &["-c", "printf 'a\\tb\\n'; echo e >&2"]).unwrap();
        let f = finish(&mut r);
        assert!(f.status.success());
        assert_eq!(f.stdout, b"a\tb\n");
        assert_eq!(f.stderr, b"e\n");
    }
}
