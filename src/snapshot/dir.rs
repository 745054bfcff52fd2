//! The `dir` snapshotter: snapshots as plain directories. It runs anywhere
//! (no ZFS, no privileges beyond what the tree's owners need) at the price
//! of a full copy per `prepare`.
//!
//! ```text
//! ROOT/
//!   active/<key>/meta.json, fs/      writable snapshots
//!   committed/<name>/meta.json, fs/  committed snapshots
//!   trash/                           snapshots being deleted
//!   lock                             flock for the bookkeeping steps
//! ```
//!
//! Where a snapshot's directory is *is* its kind and its name: `commit` is a
//! single `rename(2)` from `active/` to `committed/`, so a snapshot is either
//! wholly active or wholly committed, never half of each. `meta.json` beside
//! the tree holds the parent and the labels (and repeats name and kind for
//! people reading it; the location wins if they ever disagree, e.g. after a
//! crash between writing the final meta and the rename).
//!
//! Keys and names contain `:` (`sha256:…` chain IDs); that is fine on Linux
//! and FreeBSD, and [`validate_name`] keeps `/` and a leading `.` out, so a
//! name is always exactly one path component.
//!
//! The flock is held only for the bookkeeping (checking names and parents,
//! renaming), never while copying a tree. `prepare` writes the child's
//! `meta.json` (naming its parent) before it starts copying, so `remove`
//! sees the child and refuses to take the parent away mid-copy.

mod copy;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    validate_name, Flaw, FlawKind, Info, Kind, Labels, Result, SnapshotError, Snapshotter,
};
use crate::diff::walk::TreeWalkDiffer;
use crate::diff::Differ;
use crate::fsutil::flags::{self, st_flags, FileFlags};
use crate::fsutil::places::{existing_own_dir, own_dir, own_entries, PlaceError};
use crate::fsutil::{sync_dir, write_atomic};

pub use copy::{
    copy_metadata, copy_tree, copy_tree_with, copy_tree_with_flags, CopyCounts, FileCopy,
};

const META: &str = "meta.json";

/// Plain-directory snapshots under one root directory.
#[derive(Debug)]
pub struct DirSnapshotter {
    root: PathBuf,
    /// Read and set when a snapshot is copied, cleared when one is
    /// removed: see [`crate::fsutil::flags`].
    file_flags: Arc<dyn FileFlags>,
}

/// What `meta.json` holds.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Meta {
    version: u32,
    name: String,
    kind: MetaKind,
    pub(super) parent: Option<String>,
    #[serde(default)]
    labels: Labels,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum MetaKind {
    Active,
    Committed,
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError {
    let context = format!("cannot {what} {}", path.display());
    move |e| SnapshotError::io(context, e)
}

impl DirSnapshotter {
    /// Uses (creating) `root`. Snapshots left half-deleted in its trash by
    /// a killed process are removed now.
    ///
    /// Its directories must be real directories, not symlinks
    /// ([`crate::fsutil::places`]): nothing is listed, made or removed
    /// through one.
    pub fn new(root: PathBuf) -> Result<Self> {
        for sub in ["active", "committed", "trash"] {
            own_dir(&root, sub).map_err(place_err)?;
        }
        let sn = DirSnapshotter {
            root,
            file_flags: Arc::new(flags::HostFlags),
        };
        let trash = sn.root.join("trash");
        // Best effort: another process may be deleting the same entries.
        for entry in fs::read_dir(&trash)
            .map_err(io_err("read", &trash))?
            .flatten()
        {
            let _ = remove_tree(&entry.path());
        }
        Ok(sn)
    }

    /// A snapshotter on `root` that only reads (for `jbuild check`):
    /// nothing is made, nothing left in the trash removed; a missing
    /// directory holds no snapshots.
    pub fn inspect(root: PathBuf) -> Self {
        DirSnapshotter {
            root,
            file_flags: Arc::new(flags::HostFlags),
        }
    }

    /// The tree of committed `name`: its `fs/`, which must be a real
    /// directory (a symlink out of the root is never used as a layer).
    pub(super) fn tree(&self, name: &str) -> Result<PathBuf> {
        let dir = self.dir(Kind::Committed, name);
        match existing_own_dir(&dir, "fs").map_err(place_err)? {
            Some(fs) => Ok(fs),
            None => Err(SnapshotError::Backend(format!(
                "committed snapshot `{name}` has no tree ({} is missing); run `jbuild check`",
                dir.join("fs").display()
            ))),
        }
    }

    /// Reads and sets file flags through `file_flags` rather than the
    /// host's (tests give FreeBSD's rules to a Linux filesystem so).
    pub fn with_file_flags(mut self, file_flags: Arc<dyn FileFlags>) -> Self {
        self.file_flags = file_flags;
        self
    }

    pub(super) fn dir(&self, kind: Kind, name: &str) -> PathBuf {
        self.root
            .join(match kind {
                Kind::Active => "active",
                Kind::Committed => "committed",
            })
            .join(name)
    }

    pub(super) fn lock(&self) -> Result<nix::fcntl::Flock<fs::File>> {
        let path = self.root.join("lock");
        crate::store::lock::flock(&path, true).map_err(io_err("lock", &path))
    }

    /// Where the snapshot `name` is, if anywhere.
    pub(super) fn find(&self, name: &str) -> Result<Option<Kind>> {
        validate_name(name)?;
        for kind in [Kind::Committed, Kind::Active] {
            let dir = self.dir(kind, name);
            match fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => return Ok(Some(kind)),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(SnapshotError::io(
                        format!("cannot read {}", dir.display()),
                        e,
                    ))
                }
            }
        }
        Ok(None)
    }

    fn info(&self, kind: Kind, name: &str) -> Result<Info> {
        let meta = self.read_meta(kind, name)?;
        Ok(Info {
            name: name.to_string(),
            kind,
            parent: meta.as_ref().and_then(|m| m.parent.clone()),
            labels: meta.map(|m| m.labels).unwrap_or_default(),
        })
    }

    /// The snapshot's `meta.json`; `None` for an active snapshot whose
    /// `prepare` was killed before writing it.
    /// The `meta.json` of committed `name`, which every committed snapshot has.
    fn committed_meta(&self, name: &str) -> Result<Meta> {
        self.read_meta(Kind::Committed, name)?.ok_or_else(|| {
            SnapshotError::Backend(format!("committed snapshot `{name}` has no {META}"))
        })
    }

    pub(super) fn read_meta(&self, kind: Kind, name: &str) -> Result<Option<Meta>> {
        let path = self.dir(kind, name).join(META);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                let e = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
                SnapshotError::io(format!("{} is corrupt", path.display()), e)
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SnapshotError::io(
                format!("cannot read {}", path.display()),
                e,
            )),
        }
    }

    fn write_meta(&self, dir: &Path, meta: &Meta) -> Result<()> {
        let path = dir.join(META);
        let bytes = serde_json::to_vec_pretty(meta).expect("meta serialises");
        write_atomic(&path, &bytes).map_err(io_err("write", &path))
    }

    pub(super) fn require(&self, name: &str, wanted: Kind) -> Result<()> {
        match self.find(name)? {
            Some(actual) if actual == wanted => Ok(()),
            Some(actual) => Err(SnapshotError::WrongKind {
                name: name.to_string(),
                actual,
                wanted,
            }),
            None => Err(SnapshotError::NotFound(name.to_string())),
        }
    }

    /// Moves a snapshot to the trash: from then on it no longer exists, and
    /// deleting it can take its time (or be finished by the next `new`).
    /// Call with the lock held.
    fn to_trash(&self, kind: Kind, name: &str) -> Result<PathBuf> {
        let from = self.dir(kind, name);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let to = self
            .root
            .join("trash")
            .join(format!("{name}.{}.{nanos}", std::process::id()));
        fs::rename(&from, &to).map_err(io_err("move to the trash", &from))?;
        let parent = from.parent().expect("snapshot dirs have a parent");
        sync_dir(parent).map_err(io_err("sync", parent))?;
        Ok(to)
    }

    /// The bookkeeping half of `prepare`, under the lock: `key` is free,
    /// `parent` is committed, and the active directory exists with a
    /// `meta.json` naming the parent (so the parent cannot be removed while
    /// the child is being made). Returns the active snapshot's directory.
    pub(super) fn begin(&self, key: &str, parent: Option<&str>) -> Result<PathBuf> {
        let dir = self.dir(Kind::Active, key);
        let _lock = self.lock()?;
        if self.find(key)?.is_some() {
            return Err(SnapshotError::AlreadyExists(key.to_string()));
        }
        if let Some(parent) = parent {
            self.require(parent, Kind::Committed)?;
        }
        fs::create_dir(&dir).map_err(io_err("create", &dir))?;
        let meta = Meta {
            version: 1,
            name: key.to_string(),
            kind: MetaKind::Active,
            parent: parent.map(str::to_string),
            labels: Labels::new(),
        };
        self.write_meta(&dir, &meta)?;
        Ok(dir)
    }

    /// `HasChildren` if any snapshot was prepared from `name`.
    pub(super) fn refuse_if_parent(&self, name: &str) -> Result<()> {
        let children: Vec<String> = self
            .list()?
            .into_iter()
            .filter(|i| i.parent.as_deref() == Some(name))
            .map(|i| i.name)
            .collect();
        if children.is_empty() {
            return Ok(());
        }
        Err(SnapshotError::HasChildren {
            name: name.to_string(),
            children: children.join(", "),
        })
    }

    /// Throws away the active snapshot `key` whose `prepare` failed. Best
    /// effort: the error that matters is the one that made it fail.
    pub(super) fn abandon(&self, key: &str) {
        let trashed = self
            .lock()
            .and_then(|_lock| self.to_trash(Kind::Active, key));
        let _ = trashed.and_then(|t| remove_tree_with(&t, &*self.file_flags));
    }

    /// [`Snapshotter::audit`] of these directories (the overlay backend's
    /// too, which keeps its bookkeeping here).
    pub(super) fn audit_dirs(&self) -> Result<(Vec<Info>, Vec<Flaw>)> {
        let (mut all, mut flaws) = (Vec::new(), Vec::new());
        for kind in [Kind::Active, Kind::Committed] {
            let sub = self.dir(kind, "");
            let sub = sub.file_name().expect("a kind's directory has a name");
            let entries = match own_entries(&self.root, sub) {
                Ok(e) => e,
                Err(e) if e.is_stray() => {
                    flaws.push(stray(None, &e));
                    continue;
                }
                Err(e) => return Err(place_err(e)),
            };
            for path in entries {
                let Some(name) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .filter(|n| validate_name(n).is_ok())
                else {
                    continue;
                };
                if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                    continue;
                }
                match self.info(kind, name) {
                    // Gone meanwhile (removed by another process): its
                    // record may have been read as missing.
                    _ if !path.exists() => continue,
                    Ok(info) => all.push(info),
                    Err(e) => {
                        flaws.push(Flaw {
                            kind: FlawKind::BadMeta,
                            snapshot: Some(name.to_string()),
                            path: path.join(META),
                            what: format!(
                                "the record of snapshot `{name}` cannot be read: {}",
                                crate::report::error_chain(&e)
                            ),
                        });
                        all.push(Info {
                            name: name.to_string(),
                            kind,
                            parent: None,
                            labels: Labels::new(),
                        });
                    }
                }
                if kind == Kind::Committed {
                    match existing_own_dir(&path, "fs") {
                        Ok(Some(_)) => {}
                        Ok(None) if !path.exists() => {}
                        Ok(None) => flaws.push(Flaw {
                            kind: FlawKind::MissingTree,
                            snapshot: Some(name.to_string()),
                            path: path.join("fs"),
                            what: format!(
                                "committed snapshot `{name}` has no tree (fs/ is missing)"
                            ),
                        }),
                        Err(e) if e.is_stray() => flaws.push(stray(Some(name), &e)),
                        Err(e) => return Err(place_err(e)),
                    }
                }
            }
        }
        if let Err(e) = existing_own_dir(&self.root, "trash") {
            if e.is_stray() {
                flaws.push(stray(None, &e));
            }
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((all, flaws))
    }

    fn list_kind(&self, kind: Kind, out: &mut Vec<Info>) -> Result<()> {
        let dir = self.dir(kind, "");
        for entry in fs::read_dir(&dir).map_err(io_err("read", &dir))? {
            let entry = entry.map_err(io_err("read", &dir))?;
            let name = entry.file_name();
            // Anything not named like a snapshot (a temporary file) is not one.
            let Some(name) = name.to_str().filter(|n| validate_name(n).is_ok()) else {
                continue;
            };
            if entry
                .file_type()
                .map_err(io_err("read", &entry.path()))?
                .is_dir()
            {
                out.push(self.info(kind, name)?);
            }
        }
        Ok(())
    }
}

impl Snapshotter for DirSnapshotter {
    fn backend(&self) -> &'static str {
        "dir"
    }

    fn prepare(&self, key: &str, parent: Option<&str>) -> Result<PathBuf> {
        let dir = self.begin(key, parent)?;
        let root = dir.join("fs");
        let made = match parent {
            Some(parent) => self
                .tree(parent)
                .map_err(std::io::Error::other)
                .and_then(|tree| {
                    copy_tree_with_flags(&tree, &root, FileCopy::Cheapest, &*self.file_flags)
                        .map(drop)
                }),
            None => fs::create_dir(&root),
        };
        if let Err(e) = made {
            self.abandon(key);
            return Err(SnapshotError::io(
                format!("cannot prepare snapshot `{key}`"),
                e,
            ));
        }
        Ok(root)
    }

    fn commit(&self, name: &str, key: &str, labels: &Labels) -> Result<()> {
        validate_name(name)?;
        let _lock = self.lock()?;
        self.require(key, Kind::Active)?;
        if name != key && self.find(name)?.is_some() {
            return Err(SnapshotError::AlreadyExists(name.to_string()));
        }
        let from = self.dir(Kind::Active, key);
        let to = self.dir(Kind::Committed, name);
        sync_tree(&from)?;
        let before = self.read_meta(Kind::Active, key)?;
        let parent = before.as_ref().and_then(|m| m.parent.clone());
        let meta = Meta {
            version: 1,
            name: name.to_string(),
            kind: MetaKind::Committed,
            parent,
            labels: labels.clone(),
        };
        self.write_meta(&from, &meta)?;
        if let Err(e) = fs::rename(&from, &to) {
            if let Some(before) = before {
                let _ = self.write_meta(&from, &before);
            }
            if matches!(e.raw_os_error(), Some(libc::EEXIST) | Some(libc::ENOTEMPTY)) {
                return Err(SnapshotError::AlreadyExists(name.to_string()));
            }
            return Err(SnapshotError::io(
                format!("cannot commit {} as {}", from.display(), to.display()),
                e,
            ));
        }
        for dir in [to.parent(), from.parent()].into_iter().flatten() {
            sync_dir(dir).map_err(io_err("sync", dir))?;
        }
        Ok(())
    }

    fn view(&self, name: &str) -> Result<PathBuf> {
        self.require(name, Kind::Committed)?;
        self.tree(name)
    }

    fn stat(&self, name: &str) -> Result<Option<Info>> {
        match self.find(name)? {
            Some(kind) => self.info(kind, name).map(Some),
            None => Ok(None),
        }
    }

    fn set_labels(&self, name: &str, labels: &Labels) -> Result<()> {
        let _lock = self.lock()?;
        self.require(name, Kind::Committed)?;
        let dir = self.dir(Kind::Committed, name);
        let mut meta = self.committed_meta(name)?;
        meta.labels
            .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.write_meta(&dir, &meta)
    }

    fn remove_labels(&self, name: &str, labels: &[String]) -> Result<()> {
        let _lock = self.lock()?;
        self.require(name, Kind::Committed)?;
        let dir = self.dir(Kind::Committed, name);
        let mut meta = self.committed_meta(name)?;
        let before = meta.labels.len();
        meta.labels.retain(|k, _| !labels.contains(k));
        if meta.labels.len() == before {
            return Ok(());
        }
        self.write_meta(&dir, &meta)
    }

    fn remove(&self, name: &str) -> Result<()> {
        let lock = self.lock()?;
        let kind = self
            .find(name)?
            .ok_or_else(|| SnapshotError::NotFound(name.to_string()))?;
        if kind == Kind::Committed {
            self.refuse_if_parent(name)?;
        }
        let trashed = self.to_trash(kind, name)?;
        drop(lock);
        remove_tree_with(&trashed, &*self.file_flags)
    }

    fn list(&self) -> Result<Vec<Info>> {
        let mut all = Vec::new();
        self.list_kind(Kind::Active, &mut all)?;
        self.list_kind(Kind::Committed, &mut all)?;
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    fn differ(&self) -> Box<dyn Differ> {
        Box::new(TreeWalkDiffer::new())
    }

    fn disk_usage(&self, name: &str) -> Result<Option<u64>> {
        let Some(kind) = self.find(name)? else {
            return Err(SnapshotError::NotFound(name.to_string()));
        };
        let dir = self.dir(kind, name);
        super::tree_bytes(&dir)
            .map(Some)
            .map_err(io_err("measure", &dir))
    }

    fn audit(&self) -> Result<(Vec<Info>, Vec<Flaw>)> {
        self.audit_dirs()
    }
}

/// A place of the backend's that is not a real directory, as a snapshot
/// error (a symlink or a file there is the user's to fix).
pub(super) fn place_err(e: PlaceError) -> SnapshotError {
    if e.is_stray() {
        SnapshotError::Backend(e.to_string())
    } else {
        let context = format!("cannot use {}", e.path().display());
        SnapshotError::io(context, e.into())
    }
}

/// The [`Flaw`] of a place that is not a real directory.
pub(super) fn stray(snapshot: Option<&str>, e: &PlaceError) -> Flaw {
    Flaw {
        kind: FlawKind::StrayPlace,
        snapshot: snapshot.map(str::to_string),
        path: e.path().to_path_buf(),
        what: e.to_string(),
    }
}

/// Makes the tree's data durable before it becomes a committed snapshot.
pub(super) fn sync_tree(dir: &Path) -> Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let f = fs::File::open(dir).map_err(io_err("open", dir))?;
        nix::unistd::syncfs(&f)
            .map_err(|e| SnapshotError::io(format!("cannot sync {}", dir.display()), e.into()))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = dir;
        nix::unistd::sync();
        Ok(())
    }
}

/// Deletes a tree that is no longer a snapshot. Entries that forbid it
/// (directories without write permission when not root; FreeBSD `schg`
/// and similar flags) are made deletable first.
pub(super) fn remove_tree(path: &Path) -> Result<()> {
    remove_tree_with(path, flags::host())
}

/// [`remove_tree`], clearing file flags through `file_flags`.
fn remove_tree_with(path: &Path, file_flags: &dyn FileFlags) -> Result<()> {
    if fs::remove_dir_all(path).is_ok() || fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    make_deletable(path, file_flags).map_err(io_err("make deletable", path))?;
    fs::remove_dir_all(path).map_err(io_err("remove", path))
}

fn make_deletable(path: &Path, file_flags: &dyn FileFlags) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::symlink_metadata(path)?;
    if file_flags.get(path, st_flags(&meta))? != 0 {
        file_flags.set(path, 0)?;
    }
    if meta.is_dir() {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
        for entry in fs::read_dir(path)? {
            make_deletable(&entry?.path(), file_flags)?;
        }
    }
    Ok(())
}
