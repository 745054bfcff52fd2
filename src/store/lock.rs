//! Locks between processes sharing one store.
//!
//! Two lock files live in the store's private `.jbuild/` directory, each
//! taken with `flock(2)` (released by the kernel when a process dies, so a
//! killed jbuild never leaves the store locked):
//!
//! - `.jbuild/index.lock`, exclusive, held only for one read-modify-write of
//!   `index.json` ([`Store::update_index`], `tag`, `untag`). Readers take no
//!   lock: `index.json` is only ever replaced by an atomic rename.
//! - `.jbuild/lock`, the [`StoreLock`]: *shared* by anyone adding content
//!   whose blobs are not reachable from `index.json` yet (a build, a pull: from
//!   the first blob written until the image is tagged), *exclusive* for
//!   removing content ([`crate::image::gc::prune`]), so garbage collection never deletes
//!   a blob that is about to be tagged.
//!
//! Lock order: a `StoreLock` first, the index lock inside it. The index lock
//! is taken and released within one `Store` call and never held while taking
//! a `StoreLock`, so a process holding a `StoreLock` (of either kind) can tag.
//! Blob writes need neither: they go to a temporary file and are renamed in.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{Store, StoreError};

/// A held [`StoreLock`] (see the module docs). Released on drop.
#[derive(Debug)]
pub struct StoreLock {
    _lock: Flock<File>,
}

impl StoreLock {
    /// Waits for and takes the store lock exclusively: no one else is adding
    /// content. Hold it to remove blobs.
    pub fn exclusive(store: &Store) -> Result<StoreLock, StoreError> {
        StoreLock::take(store, true)
    }

    /// Takes the store lock, saying once on standard error (as a warning
    /// log line) when another jbuild holds it and this one waits: a `prune`
    /// behind a long pull tells why it does not return.
    fn take(store: &Store, exclusive: bool) -> Result<StoreLock, StoreError> {
        let path = store.private_dir("")?.join("lock");
        let lock = flock_telling(&path, exclusive, |path| {
            tracing::warn!(
                "another jbuild is {} the store ({}); waiting for it to finish",
                if exclusive {
                    "adding to or removing from"
                } else {
                    "removing from"
                },
                path.display()
            )
        })
        .map_err(|e| StoreError::io(format!("cannot lock {}", path.display()), e))?;
        Ok(StoreLock { _lock: lock })
    }

    /// Takes the store lock exclusively if no one holds it now; `None` if
    /// another process holds it (shared or exclusive): jbuild processes are
    /// adding or removing content. Never waits.
    pub fn try_exclusive(store: &Store) -> Result<Option<StoreLock>, StoreError> {
        let path = store.private_dir("")?.join("lock");
        try_flock(&path)
            .map(|l| l.map(|l| StoreLock { _lock: l }))
            .map_err(|e| StoreError::io(format!("cannot lock {}", path.display()), e))
    }

    /// Waits for and takes the store lock shared: content this process adds
    /// is safe from garbage collection until it is tagged.
    pub fn shared(store: &Store) -> Result<StoreLock, StoreError> {
        StoreLock::take(store, false)
    }
}

fn open_lock_file(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // A symlink planted in its place would have the lock created (and
    // held) wherever it points.
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

/// Opens (creating) `path` and takes an exclusive `flock` on it if that is
/// possible right now; `None` if another open file holds a lock on it.
pub fn try_flock(path: &Path) -> io::Result<Option<Flock<File>>> {
    let mut file = open_lock_file(path)?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Some(lock)),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
}

/// [`flock`], calling `waiting` once when the lock is held by another
/// open file and this call is about to wait for it.
pub(crate) fn flock_telling(
    path: &Path,
    exclusive: bool,
    waiting: impl FnOnce(&Path),
) -> io::Result<Flock<File>> {
    let mut file = open_lock_file(path)?;
    let arg = if exclusive {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockSharedNonblock
    };
    loop {
        match Flock::lock(file, arg) {
            Ok(lock) => return Ok(lock),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, Errno::EWOULDBLOCK)) => break,
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
    waiting(path);
    flock(path, exclusive)
}

/// Opens (creating) `path` and takes a `flock` on it, waiting as long as it
/// takes.
pub(crate) fn flock(path: &Path, exclusive: bool) -> io::Result<Flock<File>> {
    let mut file = open_lock_file(path)?;
    let arg = if exclusive {
        FlockArg::LockExclusive
    } else {
        FlockArg::LockShared
    };
    loop {
        match Flock::lock(file, arg) {
            Ok(lock) => return Ok(lock),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
}
