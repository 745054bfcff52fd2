//! A pseudo-terminal for tests of what jbuild asks a person (`login`,
//! a key's password).

use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{text, LIMIT};

/// A pseudo-terminal: the child's standard input, output and error are
/// its terminal side; everything the child writes is collected from the
/// other side.
pub struct Pty {
    master: fs::File,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    pub fn spawn(cmd: &mut Command) -> (Pty, Child) {
        let nix::pty::OpenptyResult { master, slave } = nix::pty::openpty(None, None).unwrap();
        let slave: OwnedFd = slave;
        let child = cmd
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .unwrap();
        let master = fs::File::from(master);
        let mut reader = master.try_clone().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the child's side is closed.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        (Pty { master, seen }, child)
    }

    pub fn seen(&self) -> String {
        text(&self.seen.lock().unwrap())
    }

    /// Waits until the child has written `s`.
    pub fn expect(&self, s: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.seen().contains(s) {
            assert!(
                Instant::now() < deadline,
                "no `{s}` on the terminal; it shows:\n{}",
                self.seen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn type_line(&mut self, s: &str) {
        self.master.write_all(format!("{s}\n").as_bytes()).unwrap();
    }
}

pub fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
