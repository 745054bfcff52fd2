//! Blobs a pull did not finish, kept so the next pull continues them.
//!
//! A registry blob being pulled into jbuild's store is written to
//! `.jbuild/tmp/partial-<hex>` (its digest's hex), not to a file with a
//! random name. When the pull is killed (the file simply stays) or fails
//! (the [`StagedBlob`] is dropped unadopted and keeps it), the next pull
//! of the same digest finds the bytes there and asks the registry only for
//! the rest (`Range`). Nothing in a partial file is trusted: the download
//! hashes the kept prefix again and checks the whole blob before it is
//! renamed into `blobs/sha256/` ([`Store::adopt_staged`]); a prefix that
//! turns out wrong is thrown away and the blob fetched whole.
//!
//! # Bounds
//!
//! What is kept is bounded by [`PartialBounds`] (configuration:
//! `[registries] keep_partial_mib` and `keep_partial_hours`): a kept file
//! is cut to `max_bytes` (a prefix of a prefix is still one), and every
//! time a pull stages a blob or gives one up, the partial files older than
//! `max_age` go, then the oldest until the total is within `max_bytes`.
//! A killed pull cannot cut its file; the next command that stages or
//! prunes does. `jbuild prune` removes them all, `jbuild check` lists them
//! as reclaimable, `check --repair` removes them.
//!
//! # Two processes
//!
//! A partial file is only used under an exclusive `flock(2)` on it, taken
//! without waiting: a second pull of the same blob at the same time stages
//! it in an ordinary temporary file instead, and trimming and pruning
//! skip a locked file.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};
use tempfile::{NamedTempFile, TempPath};

use super::{Store, StoreError};
use crate::digest::Digest;

/// The name of a partial blob's file in `.jbuild/tmp/` starts with this.
pub const PARTIAL_PREFIX: &str = "partial-";

/// How much of unfinished downloads is kept, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialBounds {
    /// The most bytes kept in all partial files together; `0` keeps none
    /// (every pull starts each blob afresh).
    pub max_bytes: u64,
    /// A partial file untouched for longer is removed.
    pub max_age: Duration,
}

impl Default for PartialBounds {
    fn default() -> PartialBounds {
        PartialBounds::from_settings(&crate::config::RegistrySettings::default())
    }
}

impl PartialBounds {
    /// What `[registries] keep_partial_mib` and `keep_partial_hours` say,
    /// their defaults filled in.
    pub fn from_settings(r: &crate::config::RegistrySettings) -> PartialBounds {
        use crate::config::{DEFAULT_KEEP_PARTIAL_HOURS, DEFAULT_KEEP_PARTIAL_MIB};
        let mib = r.keep_partial_mib.unwrap_or(DEFAULT_KEEP_PARTIAL_MIB);
        let hours = r.keep_partial_hours.unwrap_or(DEFAULT_KEEP_PARTIAL_HOURS);
        PartialBounds {
            max_bytes: mib.saturating_mul(1 << 20),
            max_age: Duration::from_secs(hours.saturating_mul(3600)),
        }
    }

    /// Nothing is kept.
    pub fn none() -> PartialBounds {
        PartialBounds {
            max_bytes: 0,
            max_age: Duration::ZERO,
        }
    }
}

/// A file a blob is being fetched into, given back to
/// [`Store::adopt_staged`] once the blob is checked. A plain temporary
/// file is removed when dropped unadopted; a partial one
/// ([`Store::partial_blob`]) is kept, within its bounds, for the next pull.
pub struct StagedBlob {
    file: Option<NamedTempFile>,
    keep: Option<Keep>,
    kept: u64,
}

/// What a partial staging file holds on to while it is in use.
struct Keep {
    _lock: Flock<File>,
    dir: PathBuf,
    /// What the names of this kind of partial file start with.
    prefix: &'static str,
    bounds: PartialBounds,
}

impl StagedBlob {
    /// A plain temporary file ([`Store::blob_tempfile`]), removed unless adopted.
    pub fn temporary(file: NamedTempFile) -> StagedBlob {
        StagedBlob {
            file: Some(file),
            keep: None,
            kept: 0,
        }
    }

    pub fn path(&self) -> &Path {
        self.file().path()
    }

    pub fn as_file(&self) -> &File {
        self.file().as_file()
    }

    fn file(&self) -> &NamedTempFile {
        self.file
            .as_ref()
            .expect("present until dropped or adopted")
    }

    /// How many bytes of the blob the file held when it was staged: an
    /// earlier pull's prefix, to be checked with the rest.
    pub fn kept(&self) -> u64 {
        self.kept
    }

    /// Whether what the file holds is kept when it is dropped unadopted.
    pub fn is_partial(&self) -> bool {
        self.keep.is_some()
    }

    /// Removes the file now, whatever it is: its content was wrong.
    pub fn discard(mut self) {
        self.keep = None;
    }

    /// Renames the file to `dest` (fsynced first), holding a partial
    /// file's lock until then.
    pub fn persist(self, dest: &Path) -> io::Result<()> {
        self.persist_synced(dest, true)
    }

    /// [`StagedBlob::persist`], without the fsync when `sync` is false:
    /// for a caller that makes `dest` durable itself before it names it
    /// anywhere durable (the package cache syncs its downloads together).
    pub fn persist_synced(self, dest: &Path, sync: bool) -> io::Result<()> {
        let (file, _keep) = self.take();
        if sync {
            file.as_file().sync_all()?;
        }
        file.persist(dest).map_err(|e| e.error)?;
        Ok(())
    }

    /// The file to rename into place, and what must be held until then.
    fn take(mut self) -> (NamedTempFile, Option<Keep>) {
        let file = self.file.take().expect("present until dropped or adopted");
        (file, self.keep.take())
    }
}

impl Drop for StagedBlob {
    fn drop(&mut self) {
        let (Some(file), Some(keep)) = (self.file.take(), self.keep.take()) else {
            return;
        };
        let len = file.as_file().metadata().map_or(0, |m| m.len());
        if len == 0 || keep.bounds.max_bytes == 0 {
            return; // `file` is removed as it drops
        }
        if len > keep.bounds.max_bytes {
            let _ = file.as_file().set_len(keep.bounds.max_bytes);
        }
        let path = file.path().to_path_buf();
        let _ = file.into_temp_path().keep();
        tracing::debug!(path = %path.display(), "kept a partial blob for the next pull");
        let Keep {
            _lock,
            dir,
            prefix,
            bounds,
        } = keep;
        drop(_lock);
        trim(&dir, prefix, bounds);
    }
}

impl Store {
    /// The staging file for blob `digest` (`size` bytes) of a pull that
    /// can continue a download: `.jbuild/tmp/partial-<hex>`, holding what
    /// an earlier pull kept ([`StagedBlob::kept`]; nothing of it checked
    /// yet). An ordinary temporary file when `bounds` keep nothing or
    /// another process is fetching the same blob now.
    pub fn partial_blob(
        &self,
        digest: &Digest,
        size: u64,
        bounds: PartialBounds,
    ) -> Result<StagedBlob, StoreError> {
        if bounds.max_bytes == 0 {
            return Ok(StagedBlob::temporary(self.blob_tempfile()?));
        }
        let dir = self.private_dir("tmp")?;
        let name = format!("{PARTIAL_PREFIX}{}", digest.hex());
        let staged = stage_partial(&dir, PARTIAL_PREFIX, &name, Some(size), bounds)
            .map_err(|e| StoreError::io(format!("cannot open {}", dir.join(&name).display()), e))?;
        match staged {
            Some(s) => Ok(s),
            None => Ok(StagedBlob::temporary(self.blob_tempfile()?)),
        }
    }

    /// Makes the staged file the blob `digest` ([`Store::adopt_blob`]),
    /// holding a partial file's lock until it is renamed.
    pub fn adopt_staged(&self, staged: StagedBlob, digest: &Digest) -> Result<(), StoreError> {
        let (file, _keep) = staged.take();
        self.adopt_blob(file, digest)
    }

    /// Removes every partial blob no process is using (`jbuild prune`);
    /// returns how many bytes went.
    pub fn remove_partials(&self) -> u64 {
        let Some(dir) = self.existing_private_dir("tmp") else {
            return 0;
        };
        partials(&dir, PARTIAL_PREFIX)
            .into_iter()
            .filter_map(|p| remove_unlocked(&p.path).then_some(p.len))
            .sum()
    }
}

/// Opens (or creates) the partial file `dir/name` under its lock, for a
/// download of at most `size` bytes whose unfinished part is kept within
/// `bounds` (with every other file of `dir` whose name starts with
/// `prefix`); first trims them. `None` when another process holds it, or
/// `name` is not a regular file: the caller downloads into a file of its
/// own. What it holds is cut when longer than `size` (then not a prefix:
/// emptied) or than the bound.
pub fn stage_partial(
    dir: &Path,
    prefix: &'static str,
    name: &str,
    size: Option<u64>,
    bounds: PartialBounds,
) -> io::Result<Option<StagedBlob>> {
    if bounds.max_bytes == 0 {
        return Ok(None);
    }
    trim(dir, prefix, bounds);
    let path = dir.join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)?;
    let lock = match Flock::lock(file.try_clone()?, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            tracing::debug!(path = %path.display(), "another jbuild is fetching this: not resuming");
            return Ok(None);
        }
        Err((_, e)) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    // The name must still be this file (a trim may have removed it
    // between the open and the lock), and a regular one.
    let same =
        fs::symlink_metadata(&path).is_ok_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev());
    if !same || !meta.is_file() {
        return Ok(None);
    }
    let mut kept = meta.len();
    let too_long = size.is_some_and(|n| kept > n);
    if too_long || kept > bounds.max_bytes {
        // Longer than the download: not a prefix of it. Longer than the
        // bound (a killed process could not cut it): cut now.
        let to = if too_long { 0 } else { bounds.max_bytes };
        file.set_len(to)?;
        kept = to;
    }
    if kept > 0 {
        tracing::debug!(path = %path.display(), kept, "continuing a partial download");
    }
    let name = TempPath::try_from_path(&path)?;
    Ok(Some(StagedBlob {
        file: Some(NamedTempFile::from_parts(file, name)),
        keep: Some(Keep {
            _lock: lock,
            dir: dir.to_path_buf(),
            prefix,
            bounds,
        }),
        kept,
    }))
}

/// One partial file in the staging directory.
struct PartialFile {
    path: PathBuf,
    len: u64,
    modified: SystemTime,
}

/// The partial files in `dir` (regular files only, never followed).
fn partials(dir: &Path, prefix: &str) -> Vec<PartialFile> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|e| {
            let m = fs::symlink_metadata(e.path()).ok()?;
            m.is_file().then(|| PartialFile {
                path: e.path(),
                len: m.len(),
                modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect()
}

/// Removes `path` unless a process holds its lock (it is fetching it).
fn remove_unlocked(path: &Path) -> bool {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        // Removed while locked: a pull that opens the name now makes a
        // new file, and one that opened it before sees it is gone.
        Ok(_held) => fs::remove_file(path).is_ok(),
        Err(_) => false,
    }
}

/// Keeps the partial files in `dir` within `bounds`: those older than
/// `max_age` go, then the oldest until the rest fit in `max_bytes`; a
/// single file longer than `max_bytes` is cut to it. Files in use are left
/// alone. Best effort.
fn trim(dir: &Path, prefix: &str, bounds: PartialBounds) {
    let now = SystemTime::now();
    let mut files = partials(dir, prefix);
    files.sort_by_key(|f| std::cmp::Reverse(f.modified)); // newest first
    let mut total = 0u64;
    for f in files {
        let age = now.duration_since(f.modified).unwrap_or_default();
        let fits = total + f.len.min(bounds.max_bytes) <= bounds.max_bytes;
        if age > bounds.max_age || !fits || bounds.max_bytes == 0 {
            if remove_unlocked(&f.path) {
                tracing::debug!(path = %f.path.display(), "removed a partial blob past its bounds");
            }
            continue;
        }
        if f.len > bounds.max_bytes {
            cut_unlocked(&f.path, bounds.max_bytes);
        }
        total += f.len.min(bounds.max_bytes);
    }
}

/// Cuts `path` to `len` bytes unless a process is using it.
fn cut_unlocked(path: &Path, len: u64) {
    let Ok(file) = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return;
    };
    if let Ok(held) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        let _ = held.set_len(len);
    }
}

/// The bytes of partial blobs in a store's staging directory `dir` (for
/// `jbuild check`'s and `system df`'s reckoning).
pub fn partial_bytes(dir: &Path) -> u64 {
    partials(dir, PARTIAL_PREFIX).iter().map(|f| f.len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn bounds(max: u64) -> PartialBounds {
        PartialBounds {
            max_bytes: max,
            max_age: Duration::from_secs(3600),
        }
    }

    #[test]
    fn a_dropped_partial_is_kept_cut_to_the_bound_and_found_again() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let d = Digest::of(b"the blob");
        let staged = s.partial_blob(&d, 100, bounds(10)).unwrap();
        assert!(staged.is_partial());
        assert_eq!(staged.kept(), 0);
        staged.as_file().write_all(&[7u8; 40]).unwrap();
        // A second stager of the same blob meanwhile gets a plain file.
        let other = s.partial_blob(&d, 100, bounds(10)).unwrap();
        assert!(!other.is_partial());
        drop(other);
        drop(staged);
        let again = s.partial_blob(&d, 100, bounds(10)).unwrap();
        assert_eq!(again.kept(), 10, "cut to the bound");
        // Longer than the blob: not a prefix, dropped.
        drop(again);
        let short = s.partial_blob(&d, 5, bounds(10)).unwrap();
        assert_eq!(short.kept(), 0);
        short.discard();
        assert_eq!(s.remove_partials(), 0);
    }

    #[test]
    fn trimming_keeps_the_newest_within_the_total() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        for (i, n) in [(1u8, 6u64), (2, 6)] {
            let d = Digest::of(&[i]);
            let staged = s.partial_blob(&d, 100, bounds(10)).unwrap();
            staged.as_file().set_len(n).unwrap();
            drop(staged);
            std::thread::sleep(Duration::from_millis(20));
        }
        let dir = t.path().join(".jbuild/tmp");
        assert_eq!(partial_bytes(&dir), 6, "the older one went");
        let d2 = Digest::of(&[2u8]);
        let staged = s.partial_blob(&d2, 100, bounds(10)).unwrap();
        assert_eq!(staged.kept(), 6);
        assert_eq!(s.remove_partials(), 0, "in use: not removed");
        drop(staged);
        assert_eq!(s.remove_partials(), 6);
        assert_eq!(partial_bytes(&dir), 0);
    }
}
