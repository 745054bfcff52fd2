//! [`Adding`]: whether other jbuild processes are adding content to the
//! store while the check looks, so that content no image uses *yet* is
//! called *pending*, not reclaimable.
//!
//! A pull holds the store lock shared from before it unpacks its first
//! layer until it names its image ([`crate::image::pull`](mod@crate::image::pull), "The pin"); a
//! build from before it looks up its FROM until it tags; an import or a
//! copy into the store from its first blob until it tags. Meanwhile its blobs and its `chain-` layers are reached
//! by no entry of `index.json`: they look exactly like what `jbuild prune`
//! removes. `prune` waits for the lock and `check --repair` leaves them
//! when it cannot take it; a plain check, which never waits, asks
//! [`Adding::now`] instead.
//!
//! When it asks matters. Content that looks unused was seen (listed) at
//! some moment, and the index that does not name it was read at another.
//! A pin covers both moments: it was taken before the content was written
//! and is released only after the name is in `index.json`. So the lock is
//! asked about *after* listing the content and *before* reading the index
//! that decides what is used: if the content is a running process's, its
//! pin is held at that moment. Asked at any other time, a pull that began
//! and ended while the check ran could be missed.

use std::path::{Path, PathBuf};

use super::leftovers::lock_free;

/// Where to ask whether other jbuild processes are adding content.
#[derive(Debug, Clone)]
pub struct Adding {
    /// The store lock file; `None` when this process holds the lock
    /// exclusively (`--repair`), so nobody else is adding.
    lock: Option<PathBuf>,
}

impl Adding {
    /// For the store at `store_dir`. `store_lock_held`: this process holds
    /// its lock exclusively.
    pub fn for_store(store_dir: &Path, store_lock_held: bool) -> Adding {
        Adding {
            lock: (!store_lock_held).then(|| store_dir.join(".jbuild/lock")),
        }
    }

    /// Whether another process holds the store lock right now (shared or
    /// exclusive). Never waits and never creates the lock file; the lock is
    /// taken for an instant if it is free (flock has no other way to ask),
    /// which delays a pull starting at that instant by as much.
    pub fn now(&self) -> bool {
        self.lock.as_deref().is_some_and(|l| !lock_free(l))
    }
}
