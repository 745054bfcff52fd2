//! Test pools on zfs-fuse (Debian `zfs-fuse` 0.7: real ZFS, pool v23, no
//! `zfs diff`).
//!
//! zfs-fuse is one daemon per machine and test binaries run in parallel, so:
//! every pool has a unique name (`jbt<pid>x<n>`) and a file in its own
//! temporary directory; every live [`Pool`] holds a shared lock on
//! `/run/jbuild-zfs-fuse.users`; the daemon is started (with `-x`, for
//! xattrs) only when none answers, and stopped by the last user only if
//! this harness started it (its pid file is ours). Pools left by a killed
//! run (their process is gone) are destroyed when the next one starts.
//!
//! Without zfs-fuse the tests fail saying to install it, unless
//! `JBUILD_SKIP_ZFS_FUSE=1`.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

const START_LOCK: &str = "/run/jbuild-zfs-fuse.lock";
const USERS_LOCK: &str = "/run/jbuild-zfs-fuse.users";
const PID_FILE: &str = "/run/jbuild-zfs-fuse.pid";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A file-backed pool with the dataset `<pool>/jbuild` mounted under a
/// temporary directory; destroyed on drop (also when the test panicked).
pub struct Pool {
    pub name: String,
    pub dataset: String,
    pub mountpoint: PathBuf,
    _user: Option<Flock<File>>,
    dir: Option<tempfile::TempDir>,
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

fn lock(path: &str, arg: FlockArg) -> Result<Flock<File>, String> {
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))?;
    Flock::lock(f, arg).map_err(|(_, e)| format!("lock {path}: {e}"))
}

fn daemon_answers() -> bool {
    sh("zpool", &["list", "-H"]).0
}

/// Makes sure a zfs-fuse daemon answers, starting one if needed, and
/// registers this process as a user. Call with the start lock held.
fn ensure_daemon() -> Result<Flock<File>, String> {
    if !daemon_answers() {
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
    }
    lock(USERS_LOCK, FlockArg::LockSharedNonblock)
        .or_else(|_| lock(USERS_LOCK, FlockArg::LockShared))
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

impl Pool {
    /// A fresh pool, or `None` when `JBUILD_SKIP_ZFS_FUSE=1`. Panics, saying
    /// what to install, when zfs-fuse is missing or not usable as root.
    pub fn new() -> Option<Pool> {
        if std::env::var("JBUILD_SKIP_ZFS_FUSE").as_deref() == Ok("1") {
            eprintln!("zfs-fuse tests skipped: JBUILD_SKIP_ZFS_FUSE=1");
            return None;
        }
        if !Path::new("/usr/sbin/zfs-fuse").exists() && !sh("sh", &["-c", "command -v zfs-fuse"]).0
        {
            panic!(
                "zfs-fuse is not installed: `apt-get install zfs-fuse` (tests/run installs it), \
                 or set JBUILD_SKIP_ZFS_FUSE=1 to skip the ZFS tests"
            );
        }
        assert!(
            nix::unistd::geteuid().is_root(),
            "the zfs-fuse tests need root (ZFS pools); set JBUILD_SKIP_ZFS_FUSE=1 to skip them"
        );
        let user = {
            let _start = lock(START_LOCK, FlockArg::LockExclusive).unwrap();
            let user = ensure_daemon().unwrap_or_else(|e| panic!("{e}"));
            destroy_stale_pools();
            user
        };
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
        let mut pool = Pool {
            name: name.clone(),
            dataset: format!("{name}/jbuild"),
            mountpoint: mnt.join("jbuild"),
            _user: Some(user),
            dir: Some(dir),
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
        pool.mountpoint = mnt.join("jbuild");
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
        drop(self.dir.take());
        // The last user stops the daemon, and only one this harness started.
        drop(self._user.take());
        let Ok(_start) = lock(START_LOCK, FlockArg::LockExclusive) else {
            return;
        };
        if lock(USERS_LOCK, FlockArg::LockExclusiveNonblock).is_err() {
            return;
        }
        if let Some(pid) = std::fs::read_to_string(PID_FILE)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            let pid = nix::unistd::Pid::from_raw(pid);
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok() {
                let deadline = Instant::now() + Duration::from_secs(10);
                while nix::sys::signal::kill(pid, None).is_ok() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            let _ = std::fs::remove_file(PID_FILE);
        }
    }
}
