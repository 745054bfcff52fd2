//! Test pools on zfs-fuse (Debian `zfs-fuse` 0.7: real ZFS, pool v23, no
//! `zfs diff`).
//!
//! zfs-fuse is one daemon per machine, and it can deadlock when several
//! pools are mounted and used at once (seen on a loaded machine: a
//! `zfs create` blocked for good in a FUSE request). So the tests take
//! turns: a [`Pool`] holds an exclusive lock on `/run/jbuild-zfs-fuse.lock`
//! for its whole life, across threads and test binaries. Every pool has a
//! unique name (`jbt<pid>x<n>`) and a file in its own temporary directory.
//!
//! The daemon is started (with `-x`, for xattrs) only when none answers.
//! One this harness started is stopped by a small reaper process once no
//! test has used it for a few seconds (so consecutive tests share it); a
//! daemon somebody else started is never stopped. A test that runs longer
//! than [`PATIENCE`] has the harness's daemon killed, so that blocked
//! calls fail instead of hanging the run. Pools left by a killed run (their
//! process is gone) are destroyed when the next one starts.
//!
//! [`Pool::new`] declares the zfs-fuse lane for the calling test (see
//! `lane.rs`): without zfs-fuse, or without root, the test is counted as
//! skipped in that lane, or fails where the lane is required.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::lane::{self, Lane};

const LOCK: &str = "/run/jbuild-zfs-fuse.lock";
const STAMP: &str = "/run/jbuild-zfs-fuse.stamp";
const PID_FILE: &str = "/run/jbuild-zfs-fuse.pid";
/// The longest one test may keep a pool.
const PATIENCE: Duration = Duration::from_secs(300);
/// How long the reaper lets an unused daemon live.
const IDLE_SECS: u32 = 5;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A file-backed pool with the dataset `<pool>/jbuild` mounted under a
/// temporary directory; destroyed on drop (also when the test panicked).
pub struct Pool {
    pub name: String,
    pub dataset: String,
    pub mountpoint: PathBuf,
    dir: Option<tempfile::TempDir>,
    watchdog: Option<mpsc::Sender<()>>,
    _turn: Flock<File>,
}

/// Runs a command, returning (success, stdout + stderr).
pub fn sh(cmd: &str, args: &[&str]) -> (bool, String) {
    match Command::new(cmd)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => (false, format!("cannot run {cmd}: {e}")),
    }
}

fn daemon_answers() -> bool {
    sh("zpool", &["list", "-H"]).0
}

/// The pid of the daemon this harness started, if it still runs.
fn our_daemon() -> Option<nix::unistd::Pid> {
    let pid = std::fs::read_to_string(PID_FILE)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let pid = nix::unistd::Pid::from_raw(pid);
    nix::sys::signal::kill(pid, None).ok().map(|()| pid)
}

fn touch_stamp() {
    let _ = File::create(STAMP);
}

/// Makes sure a zfs-fuse daemon answers, starting one (and its reaper) if
/// needed. Call with the lock held.
fn ensure_daemon() -> Result<(), String> {
    if daemon_answers() {
        return Ok(());
    }
    // A pid file left by a daemon that died makes zfs-fuse refuse to start.
    let _ = std::fs::remove_file(PID_FILE);
    let (ok, out) = sh("zfs-fuse", &["-x", "--no-kstat-mount", "-p", PID_FILE]);
    if !ok {
        return Err(format!("cannot start zfs-fuse: {out}"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !daemon_answers() {
        if Instant::now() > deadline {
            return Err("zfs-fuse started but does not answer after 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = our_daemon().ok_or("zfs-fuse started but wrote no pid file")?;
    // The reaper: once the lock is free and the stamp is old, stop the
    // daemon (holding the lock, so no test starts meanwhile), then exit.
    let script = format!(
        r#"while kill -0 {pid} 2>/dev/null; do
             sleep 2
             flock -n -x {LOCK} sh -c '
               [ $(( $(date +%s) - $(stat -c %Y {STAMP}) )) -ge {IDLE_SECS} ] || exit 0
               kill {pid}
               for i in $(seq 100); do kill -0 {pid} 2>/dev/null || exit 0; sleep 0.1; done
               kill -9 {pid}'
           done"#
    );
    Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the zfs-fuse reaper: {e}"))?;
    Ok(())
}

/// Destroys `jbt<pid>x<n>` pools whose process is gone (a killed run).
fn destroy_stale_pools() {
    let (_, out) = sh("zpool", &["list", "-H", "-o", "name"]);
    for pool in out.lines() {
        let Some(pid) = pool
            .strip_prefix("jbt")
            .and_then(|r| r.split('x').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        if !alive {
            let _ = sh("zpool", &["destroy", "-f", pool]);
        }
    }
}

/// Kills the harness's daemon if the test is still running after
/// [`PATIENCE`]: its blocked calls then fail and the test ends.
fn watchdog(name: String) -> mpsc::Sender<()> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(PATIENCE) {
            eprintln!(
                "test pool {name} still in use after {} s: killing zfs-fuse so the test fails instead of hanging",
                PATIENCE.as_secs()
            );
            if let Some(pid) = our_daemon() {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    });
    tx
}

impl Pool {
    /// A fresh pool, or `None` when the zfs-fuse lane cannot run here (the
    /// calling test is then counted as skipped in that lane, and returns).
    pub fn new() -> Option<Pool> {
        if !lane::need(Lane::ZfsFuse) {
            return None;
        }
        let turn = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)
            .unwrap_or_else(|e| panic!("{LOCK}: {e}"));
        let turn = Flock::lock(turn, FlockArg::LockExclusive)
            .unwrap_or_else(|(_, e)| panic!("lock {LOCK}: {e}"));
        touch_stamp();
        ensure_daemon().unwrap_or_else(|e| panic!("{e}"));
        destroy_stale_pools();
        let name = format!(
            "jbt{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::Builder::new()
            .prefix("jbuild-zfs-")
            .tempdir()
            .unwrap();
        let img = dir.path().join("pool.img");
        File::create(&img).unwrap().set_len(128 << 20).unwrap();
        let mnt = dir.path().join("mnt");
        let pool = Pool {
            name: name.clone(),
            dataset: format!("{name}/jbuild"),
            mountpoint: mnt.join("jbuild"),
            dir: Some(dir),
            watchdog: Some(watchdog(name.clone())),
            _turn: turn,
        };
        let (ok, out) = sh(
            "zpool",
            &[
                "create",
                "-m",
                mnt.to_str().unwrap(),
                &name,
                img.to_str().unwrap(),
            ],
        );
        assert!(ok, "zpool create {name}: {out}");
        let (ok, out) = sh("zfs", &["create", &pool.dataset]);
        assert!(ok, "zfs create {}: {out}", pool.dataset);
        Some(pool)
    }

    /// `zfs list -H -r -t all -o <fields> <dataset>`, one line per dataset.
    pub fn zfs_list(&self, fields: &str) -> Vec<String> {
        let (ok, out) = sh(
            "zfs",
            &["list", "-H", "-r", "-t", "all", "-o", fields, &self.dataset],
        );
        assert!(ok, "zfs list: {out}");
        out.lines().map(str::to_string).collect()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // A dataset can stay busy for a moment after its last user closed it.
        let mut last = String::new();
        for _ in 0..50 {
            let (ok, out) = sh("zpool", &["destroy", "-f", &self.name]);
            if ok || out.contains("no such pool") {
                last.clear();
                break;
            }
            last = out;
            std::thread::sleep(Duration::from_millis(100));
        }
        if !last.is_empty() {
            eprintln!("could not destroy test pool {}: {last}", self.name);
        }
        drop(self.watchdog.take());
        drop(self.dir.take());
        touch_stamp();
        // The lock goes last (a field), so the reaper sees a fresh stamp.
    }
}
