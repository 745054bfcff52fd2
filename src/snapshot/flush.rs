//! Writeback while a step runs: the disk writes a step's files as the step
//! makes them, so the sync at its commit finds little left to do.
//!
//! A snapshot is synced whole when it is committed (`syncfs`, the
//! durability guarantee in docs/architecture.md). Written first and synced
//! last, a COPY of 50,000 files (300 MB) left the CPU idle while its commit
//! waited for the disk, then the disk idle while the layer was exported
//! (issue 34: 0.7 s of a first build's 20 `syncfs` were that one commit).
//! Per-file `sync_file_range` would start each file's writeback, but on an
//! overlay mount it does nothing (the data is in the upper file's pages,
//! not the overlay file's), so a [`Flusher`] instead syncs the root's
//! filesystem from a thread of its own every [`Flusher::PERIOD`] while the
//! step runs. The step never waits for it; the commit's own sync still
//! makes the snapshot durable, so the guarantee is unchanged.
//!
//! An image's layer is unpacked under a [`Flusher`] too
//! (`image::unpack`), for the same reason: a pull's layer is synced whole
//! at its commit; so are a pkgbase base's install (`engine::pkgbase`) and
//! a release's sets (`release::apply_set`, `FROM freebsd:X`), and the
//! package installer leaves its files' writeback to it.
//!
//! Elsewhere than Linux it does nothing (on FreeBSD a build's snapshots
//! live on ZFS, which commits its transaction groups itself).

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Syncs the filesystem of a step's root in the background until dropped.
#[derive(Debug)]
pub struct Flusher {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// How often the root's filesystem is synced while the step runs: a
    /// step shorter than this (most small COPYs) never syncs twice.
    pub const PERIOD: Duration = Duration::from_millis(250);

    /// Starts syncing the filesystem holding `root`. Best effort: when the
    /// root cannot be opened, or a sync fails, only the commit's sync is
    /// left to do the work (and to report an error).
    pub fn start(root: &Path) -> Flusher {
        let Ok(dir) = std::fs::File::open(root) else {
            return Flusher {
                stop: None,
                thread: None,
            };
        };
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("flusher".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(Self::PERIOD) {
                    sync_fs(&dir);
                }
            })
            .ok();
        Flusher {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Flusher {
    /// Stops the thread, waiting for a sync under way (the commit that
    /// follows would wait for the same writes).
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn sync_fs(dir: &std::fs::File) {
    if let Err(e) = nix::unistd::syncfs(dir) {
        tracing::debug!("background sync of a step's root: {e}");
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn sync_fs(_dir: &std::fs::File) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flusher_stops_when_dropped_and_tolerates_a_missing_root() {
        let dir = tempfile::tempdir().unwrap();
        let f = Flusher::start(dir.path());
        assert!(f.thread.is_some());
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        thread::sleep(Flusher::PERIOD * 2);
        let t = std::time::Instant::now();
        drop(f);
        assert!(t.elapsed() < Duration::from_secs(5));
        let none = Flusher::start(&dir.path().join("missing"));
        assert!(none.thread.is_none());
    }
}
