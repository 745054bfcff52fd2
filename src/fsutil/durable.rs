//! Writeback behind the write position: a file written from start to end
//! (a blob as it downloads, a layer as it is exported) is pushed to the
//! disk while it is still being written, so the sync that makes it durable
//! at the end finds little left to write.
//!
//! Why: jbuild syncs what it reports as done (the guarantee in
//! docs/architecture.md, "Durability"). Written first and synced last, a
//! 1 GiB blob sits in the page cache until the final `fsync`, which then
//! waits for the whole gigabyte: the disk idles during the transfer and the
//! transfer idles during the sync. [`Writeback`] starts the disk on each
//! [`Writeback::STEP`] as soon as it is written (Linux:
//! `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not wait) and,
//! when the disk falls more than [`Writeback::LAG`] behind, waits for the
//! oldest range to be on disk before going on — the writer is held back to
//! the disk's pace instead of piling up dirty pages that the final sync
//! must then write.
//!
//! What this does **not** do: make anything durable. `sync_file_range`
//! neither writes the file's metadata (its size, its block map) nor
//! flushes the disk's cache; the file is durable only after
//! [`sync_file`] (`fsync`), which every caller still makes before it names
//! the file anywhere durable. The promise is unchanged; only the wait at
//! the end is shorter.
//!
//! Elsewhere (FreeBSD has no `sync_file_range`): [`Writeback`] does
//! nothing and the final `fsync` writes everything, as before.
//!
//! Who uses it: the registry download's writer thread
//! (`transport/registry/sink.rs`) and the store's `BlobWriter` (a layer
//! as it is exported, when the store syncs). Any code that writes a large file in one
//! pass and syncs it at the end can: keep a [`Writeback`] beside the file
//! and call [`Writeback::wrote`] after each write with the bytes now in
//! the file. Call it on a thread that may block (a writer thread, a
//! `spawn_blocking` task), not on an async worker: the wait for a lagging
//! disk blocks.

use std::fs::File;
use std::io;

/// Writeback of one file written in order, started a step at a time and
/// never more than [`Writeback::LAG`] behind the bytes written.
#[derive(Debug, Default, Clone)]
pub struct Writeback {
    /// Bytes whose writeback has been started.
    started: u64,
    /// Bytes known to be on the disk (waited for).
    waited: u64,
}

impl Writeback {
    /// The writeback of a range is started once this much is written past
    /// the last start: large enough that the disk gets long requests,
    /// small enough that it starts early.
    pub const STEP: u64 = 8 << 20;

    /// The most that is written and not yet on the disk before the writer
    /// waits for the oldest range: what the final sync may still have to
    /// write. A few steps, so the disk always has work queued.
    pub const LAG: u64 = 64 << 20;

    /// A file written from its first byte.
    pub fn new() -> Writeback {
        Writeback::default()
    }

    /// A file that already holds `len` bytes (continued, not rewritten):
    /// those are left to the final sync.
    pub fn from(len: u64) -> Writeback {
        Writeback {
            started: len,
            waited: len,
        }
    }

    /// Bytes whose writeback has been started: what follows them is left
    /// for a final [`start`] or sync.
    pub fn started(&self) -> u64 {
        self.started
    }

    /// `file` now holds `written` bytes (written in order from where the
    /// last call left off): starts the writeback of what a step has
    /// gathered, and waits when the disk lags by more than
    /// [`Writeback::LAG`]. Best effort: a failure only leaves more for
    /// the final sync, which reports any real error.
    pub fn wrote(&mut self, file: &File, written: u64) {
        if written < self.started {
            // The file was cut short and is written again.
            *self = Writeback::from(written);
            return;
        }
        if written - self.started < Self::STEP {
            return;
        }
        start(file, self.started, written - self.started);
        self.started = written;
        if self.started - self.waited > Self::LAG {
            let until = self.started - Self::LAG;
            wait(file, self.waited, until - self.waited);
            self.waited = until;
        }
    }
}

/// Starts writing `len` bytes of `file` from `offset` (0: to its end) to the disk and
/// returns without waiting for them.
#[cfg(target_os = "linux")]
pub fn start(file: &File, offset: u64, len: u64) {
    range(file, offset, len, libc::SYNC_FILE_RANGE_WRITE);
}

/// Writes `len` bytes of `file` from `offset` to the disk, waiting for any
/// writeback already under way there first and for the writes at the end.
#[cfg(target_os = "linux")]
pub fn wait(file: &File, offset: u64, len: u64) {
    range(
        file,
        offset,
        len,
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    );
}

#[cfg(target_os = "linux")]
fn range(file: &File, offset: u64, len: u64, flags: libc::c_uint) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(offset),
        libc::off64_t::try_from(len),
    ) else {
        return;
    };
    // SAFETY: the descriptor is open while `file` is borrowed, and
    // sync_file_range reads no memory of ours. Its result is ignored on
    // purpose: the final fsync writes whatever this did not.
    unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, flags) };
}

/// No `sync_file_range` here: the final [`sync_file`] writes it all.
#[cfg(not(target_os = "linux"))]
pub fn start(_file: &File, _offset: u64, _len: u64) {}

/// No `sync_file_range` here: the final [`sync_file`] writes it all.
#[cfg(not(target_os = "linux"))]
pub fn wait(_file: &File, _offset: u64, _len: u64) {}

/// Makes `file`'s content and metadata durable (`fsync`): what a file
/// written with a [`Writeback`] still needs before anything durable names
/// it.
pub fn sync_file(file: &File) -> io::Result<()> {
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn starts_a_step_at_a_time_and_never_lags_more_than_lag() {
        let t = tempfile::tempfile().unwrap();
        let mut f = t.try_clone().unwrap();
        let mut wb = Writeback::new();
        let chunk = vec![7u8; 1 << 20];
        let mut n = 0u64;
        for _ in 0..100 {
            f.write_all(&chunk).unwrap();
            n += chunk.len() as u64;
            wb.wrote(&t, n);
            assert!(n - wb.started < Writeback::STEP, "started at {n}");
            assert!(wb.started - wb.waited <= Writeback::LAG);
            assert!(wb.waited <= wb.started && wb.started <= n);
        }
        assert_eq!(wb.started, 96 << 20);
        assert_eq!(wb.waited, 32 << 20);
        // Cut short and written again: starts over from there.
        wb.wrote(&t, 0);
        assert_eq!((wb.started, wb.waited), (0, 0));
        sync_file(&t).unwrap();
    }
}
