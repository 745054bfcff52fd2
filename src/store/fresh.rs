//! A layout made where there was none (`jbuild copy … oci:NEW`): built out
//! of sight beside its place, synced whole at once, then renamed into
//! place — two waits for the disk instead of one per file.
//!
//! # The order
//!
//! 1. [`Store::create_new`]`(PLACE)`: the missing parents of PLACE are
//!    created (noting whose entries change), staging directories dead
//!    processes left for PLACE are removed, and `PARENT/.NAME.jbuild-new-…/`
//!    is made: a complete empty layout (`oci-layout`, `index.json`,
//!    `blobs/sha256/`) and `.jbuild/lock`, held shared while it lives.
//!    Nothing is synced. The staging directory is kept open from its
//!    creation, so the sync of step 3 reports a failed writeback of
//!    anything written under it.
//! 2. Blobs and tags go into it as into any store, but nothing is synced as
//!    it is written ([`super::Durability::Staged`]): no fsync per blob,
//!    per rename, per change of `index.json`.
//! 3. [`NewLayout::publish`]: (a) every file and directory of the staged
//!    layout — each blob, `index.json`, `oci-layout`, `blobs/sha256/`,
//!    `blobs/` and the staging directory itself — is made durable at once
//!    ([`sync_tree_of`]: on Linux one `syncfs` of the filesystem they are
//!    on, elsewhere an fsync of each, all at the same time): the first
//!    wait; (b) the staging
//!    directory is renamed to PLACE (one atomic rename); (c) PARENT, and
//!    each directory whose entry step 1 added, are fsynced at the same
//!    time: the second wait.
//!
//! # Why this keeps the store's promise
//!
//! - Nothing already stored can be lost: there was nothing at PLACE.
//! - Until (b), PLACE does not exist. A crash before it leaves PLACE as it
//!   was — absent — and a staging directory, which the next
//!   [`Store::create_new`] of the same place removes once its lock is free
//!   (its process is gone).
//! - (b) comes only after (a) returned, so every name and every byte under
//!   the staging directory is durable before the one name that makes the
//!   layout visible. After a crash PLACE is absent or the whole layout,
//!   image included; `index.json` never names a blob that is not durable.
//! - After (c) the rename is durable too: the command's success survives a
//!   crash. `.jbuild/` (a lock file, an empty `tmp/`) is not synced: losing
//!   it loses nothing.
//!
//! An existing layout is not written this way: it is opened with
//! [`Store::open`] and keeps the ordering of each write (module doc of
//! [`super`]).
//!
//! Someone else may make PLACE meanwhile (another jbuild copying to the
//! same new layout): the rename then fails, and what was staged is merged
//! into their layout as any write to an existing layout is made — the
//! blobs, already durable from (a), renamed in, then each tag through
//! [`Store::update_index`], which syncs the blobs directory before it
//! writes `index.json`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::lock::{try_flock, StoreLock};
use super::{Durability, Store, StoreError, STALE_TMP};
use crate::fsutil::{parent_of, sync_all_at_once, sync_tree_of};

/// What follows `.NAME` in a staging directory's name.
const STAGING: &str = ".jbuild-new-";

/// A staging directory whose lock file is younger than this is never
/// judged dead: its creator may be between creating the lock file and
/// taking the lock.
const LOCK_GRACE: Duration = Duration::from_secs(5);

/// A layout being made for a place where there was none (see the module
/// doc): write into [`NewLayout::store`], then [`NewLayout::publish`].
/// Dropped unpublished, it removes what it staged.
#[derive(Debug)]
pub struct NewLayout {
    /// The staged layout, in its staging directory.
    store: Store,
    place: PathBuf,
    /// The directories whose entries the new layout (and the parents made
    /// for it) add, synced after the rename.
    parents: Vec<PathBuf>,
    /// Held while the staging directory is in use: a free one marks a
    /// staging directory a dead process left.
    lock: Option<StoreLock>,
    /// Whether the staging directory stays when this is dropped (it was
    /// renamed into place, or a test left it as a killed process would).
    keep: bool,
    /// The staging directory, open since it was made: what step 3a syncs
    /// through (module doc).
    top: fs::File,
}

/// The points of [`NewLayout::publish`] between its waits, where tests
/// stop it as a kill would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Everything staged is durable (a); not renamed yet.
    Synced,
    /// Renamed into place (b); the parents not synced yet.
    Placed,
}

impl Store {
    /// A [`NewLayout`] for `place`, which must not exist yet: `None` when
    /// something is there (open it with [`Store::open`]) or `place` names
    /// no entry of its own (`/`, `..`).
    pub fn create_new(place: &Path) -> Result<Option<NewLayout>, StoreError> {
        let Some(name) = place.file_name().map(|n| n.to_string_lossy()) else {
            return Ok(None);
        };
        match fs::symlink_metadata(place) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Ok(_) => return Ok(None),
            Err(e) => {
                return Err(StoreError::io(
                    format!("cannot read {}", place.display()),
                    e,
                ))
            }
        }
        let parent = parent_of(place).to_path_buf();
        // The entry of each directory made here lives in its parent.
        let mut parents = vec![parent.clone()];
        let mut missing = parent.clone();
        while fs::symlink_metadata(&missing).is_err() && missing != Path::new(".") {
            missing = parent_of(&missing).to_path_buf();
            parents.push(missing.clone());
        }
        fs::create_dir_all(&parent)
            .map_err(|e| StoreError::io(format!("cannot create {}", parent.display()), e))?;
        let prefix = format!(".{name}{STAGING}");
        remove_dead_staging(&parent, &prefix);
        let root = make_staging_dir(&parent, &prefix)?;
        let top = fs::File::open(&root).map_err(|e| {
            let _ = fs::remove_dir(&root);
            StoreError::io(format!("cannot open {}", root.display()), e)
        })?;
        let mut new = NewLayout {
            store: Store {
                root,
                durability: Durability::Staged,
            },
            place: place.to_path_buf(),
            parents,
            lock: None,
            keep: false,
            top,
        };
        new.lock = Some(StoreLock::shared(&new.store)?);
        new.store.create_layout()?;
        Ok(Some(new))
    }

    /// A layout at `dir` that no crash needs to keep (an archive's, written
    /// from a temporary directory): created if missing, and nothing written
    /// to it is ever synced.
    pub fn create_scratch(dir: &Path) -> Result<Store, StoreError> {
        let mut store = Store::open_unchecked(dir);
        store.durability = Durability::Deferred;
        if !dir.join(super::layout::LAYOUT_FILE).is_file() {
            store.create_layout()?;
        }
        store.check_layout()?;
        Ok(store)
    }
}

impl NewLayout {
    /// The staged layout: write blobs and tags here.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where the layout goes.
    pub fn place(&self) -> &Path {
        &self.place
    }

    /// Puts the staged layout at its place, durably (steps 3a–c of the
    /// module doc), and returns the store there. If another process made
    /// the place meanwhile, what was staged is merged into its layout.
    pub fn publish(self) -> Result<Store, StoreError> {
        Ok(self
            .publish_until(None)?
            .expect("publishing stops only where it is told to"))
    }

    /// [`NewLayout::publish`], stopping after `stop` as a killed process
    /// would (nothing more done, nothing cleaned up): `None` then.
    fn publish_until(mut self, stop: Option<Step>) -> Result<Option<Store>, StoreError> {
        let root = self.store.root.clone();
        let mut paths = vec![
            root.clone(),
            root.join("blobs"),
            root.join("blobs/sha256"),
            root.join(super::layout::LAYOUT_FILE),
            root.join("index.json"),
        ];
        paths.extend(
            self.store
                .blob_digests()?
                .iter()
                .map(|d| self.store.blob_path(d)),
        );
        sync_tree_of(&self.top, &root, &paths)
            .map_err(|e| StoreError::io(format!("cannot sync {}", root.display()), e))?;
        if stop == Some(Step::Synced) {
            return Ok(self.die());
        }
        if let Err(e) = fs::rename(&root, &self.place) {
            if fs::symlink_metadata(&self.place).is_ok() {
                return self.merge().map(Some);
            }
            return Err(StoreError::io(
                format!("cannot move {} to {}", root.display(), self.place.display()),
                e,
            ));
        }
        self.keep = true;
        crate::fsutil::record("rename", &self.place);
        if stop == Some(Step::Placed) {
            return Ok(self.die());
        }
        sync_all_at_once(&self.parents).map_err(|e| {
            StoreError::io(
                format!("cannot sync the parent of {}", self.place.display()),
                e,
            )
        })?;
        Ok(Some(Store {
            root: self.place.clone(),
            durability: Durability::Ordered,
        }))
    }

    /// What a kill leaves: the staging directory as it is, its lock free.
    fn die(mut self) -> Option<Store> {
        self.keep = true;
        self.lock = None;
        None
    }

    /// Moves what was staged into the layout another process made at the
    /// place; the staging directory goes when `self` is dropped.
    fn merge(self) -> Result<Store, StoreError> {
        let theirs = Store::open(&self.place)?;
        let _adding = StoreLock::shared(&theirs)?;
        for d in self.store.blob_digests()? {
            if !theirs.has_blob(&d) {
                let (from, to) = (self.store.blob_path(&d), theirs.blob_path(&d));
                fs::rename(&from, &to).map_err(|e| {
                    StoreError::io(format!("cannot move a blob into {}", to.display()), e)
                })?;
            }
        }
        for (name, desc) in self.store.list()? {
            match name {
                super::RefName::Untagged => theirs.add_untagged(&desc)?,
                named => theirs.tag_ref(&named.to_string(), &desc)?,
            }
        }
        Ok(theirs)
    }
}

impl Drop for NewLayout {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.store.root);
        }
    }
}

/// Makes `PARENT/PREFIX<unique>`, with the mode any new directory gets
/// (not a temporary directory's 0700: it becomes the layout).
fn make_staging_dir(parent: &Path, prefix: &str) -> Result<PathBuf, StoreError> {
    let mut rng = fastrand::Rng::new();
    loop {
        let dir = parent.join(format!("{prefix}{:016x}", rng.u64(..)));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(StoreError::io(
                    format!("cannot create {}", dir.display()),
                    e,
                ))
            }
        }
    }
}

/// Removes the staging directories in `parent` (named `prefix…`) whose
/// process is gone: their lock is free (and its file past
/// [`LOCK_GRACE`]), or they have no lock file and are older than
/// [`STALE_TMP`]. Best effort: what cannot be removed stays.
fn remove_dead_staging(parent: &Path, prefix: &str) {
    let now = SystemTime::now();
    let age = |p: &Path| {
        fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .map(|t| now.duration_since(t).unwrap_or_default())
    };
    for entry in fs::read_dir(parent).into_iter().flatten().flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let dir = entry.path();
        let lock = dir.join(".jbuild/lock");
        match age(&lock) {
            Ok(a) if a > LOCK_GRACE => {
                if let Ok(Some(_held)) = try_flock(&lock) {
                    let _ = fs::remove_dir_all(&dir);
                }
            }
            Ok(_) => {}
            Err(_) => {
                if age(&dir).is_ok_and(|a| a > STALE_TMP) {
                    let _ = fs::remove_dir_all(&dir);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
