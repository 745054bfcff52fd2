//! The `Snapshotter` seam: where the filesystem of every layer lives.
//!
//! # Vocabulary
//!
//! A *snapshot* is a whole root filesystem tree. It is either
//!
//! - **active**: writable, named by a *key*, made by [`Snapshotter::prepare`]
//!   from a committed parent (or from nothing). A build step runs in an
//!   active snapshot; a pulled layer is unpacked into one.
//! - **committed**: read-only, named by a *name*, made by
//!   [`Snapshotter::commit`] from an active snapshot, which then no longer
//!   exists. Committed snapshots are parents of further snapshots and what
//!   layers are exported from.
//!
//! Keys and names share one namespace and are short strings of
//! `[A-Za-z0-9_.:-]` (see [`validate_name`]); jbuild uses the step's cache
//! key or the layer's chain ID as the name.
//!
//! A snapshot carries its own identity: *labels* (`jbuild:key`,
//! `jbuild:diffid`, `jbuild:chainid`, ...) stored on the snapshot itself — ZFS
//! user properties for the ZFS backend, a metadata file beside the tree for
//! the `dir` backend. There is no second database to fall out of step.
//!
//! # Importing a layer, step by step
//!
//! ```text
//! let root = sn.prepare("active-7f3a", Some(&parent_chain_id))?; // writable copy/clone
//! apply_layer(tar, &root)?;                                      // write into it
//! sn.commit(&chain_id, "active-7f3a", &labels)?;                 // now read-only, named
//! ```
//!
//! If anything fails between `prepare` and `commit`, `remove("active-7f3a")`
//! throws the work away; nothing committed has changed. A crash leaves an
//! active snapshot behind, which [`Snapshotter::list`] shows and prune removes.
//!
//! `prepare` returns a path to work in; it does not mount anything the caller
//! must unmount (backends that need mounts take them down themselves: the
//! `overlay` backend on commit and remove, and the read-only trees `view`
//! mounted when the snapshotter is dropped).

pub mod choose;
pub mod clones;
pub mod dir;
pub mod fflags;
pub mod flush;
pub mod overlay;
pub mod testsuite;
pub mod zfs;

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::diff::Differ;

/// Labels stored on a snapshot (string keys to string values).
pub type Labels = BTreeMap<String, String>;

/// Label names jbuild writes.
pub mod label {
    /// The build-step cache key this snapshot is the result of.
    pub const KEY: &str = "jbuild:key";
    /// The uncompressed digest of this snapshot's layer (diff against parent).
    pub const DIFF_ID: &str = "jbuild:diffid";
    /// The chain ID of this snapshot's layer stack.
    pub const CHAIN_ID: &str = "jbuild:chainid";
    /// Prefix for the blob digest of this layer in a given compression:
    /// `jbuild:blob.gzip`, `jbuild:blob.zstd`.
    pub const BLOB_PREFIX: &str = "jbuild:blob.";
    /// The mtime clamp (`SOURCE_DATE_EPOCH`, Unix seconds) the layer was
    /// exported with: what `jbuild check --deep` needs to export it again.
    pub const MTIME_CLAMP: &str = "jbuild:mtimeclamp";
    /// Unix seconds at which the snapshot was committed.
    pub const CREATED: &str = "jbuild:created";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Active,
    Committed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub name: String,
    pub kind: Kind,
    /// The committed snapshot this one was prepared from.
    pub parent: Option<String>,
    pub labels: Labels,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot name `{0}` is not valid: use 1 to 200 characters of A-Z a-z 0-9 _ . : -")]
    InvalidName(String),
    #[error("snapshot `{0}` does not exist")]
    NotFound(String),
    #[error("snapshot `{0}` already exists")]
    AlreadyExists(String),
    #[error("snapshot `{name}` is {actual:?}, but this needs a {wanted:?} one")]
    WrongKind {
        name: String,
        actual: Kind,
        wanted: Kind,
    },
    #[error("snapshot `{name}` still has children ({children}); remove them first")]
    HasChildren { name: String, children: String },
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Backend(String),
    /// What was asked is something this backend cannot do where it runs
    /// (overlayfs without its inode index asked to keep hard links): the
    /// environment's limit, which the user answers by choosing another
    /// backend or running elsewhere, the message says which.
    #[error("{0}")]
    Unsupported(String),
}

impl SnapshotError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SnapshotError::Io {
            context: context.into(),
            source,
        }
    }
}

impl Blame for SnapshotError {
    /// Whether the user can act on it (another backend, another place):
    /// only [`SnapshotError::Unsupported`]; the rest are faults of the
    /// store or the machine.
    fn is_user_error(&self) -> bool {
        matches!(self, SnapshotError::Unsupported(_))
    }
}

pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;

/// Something wrong with how a backend keeps a snapshot (or its own
/// directories) on disk, found by [`Snapshotter::audit`] for `jbuild
/// check`: damage the user must see, where [`Snapshotter::list`] would
/// fail or not look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flaw {
    pub kind: FlawKind,
    /// The snapshot it is about, if it is about one.
    pub snapshot: Option<String>,
    /// The file or directory at fault.
    pub path: PathBuf,
    /// What is wrong, in plain words.
    pub what: String,
}

/// The kinds of [`Flaw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlawKind {
    /// A snapshot's own record (`meta.json`) does not parse.
    BadMeta,
    /// A committed snapshot has no tree (`fs/`).
    MissingTree,
    /// A directory the backend keeps is a symlink (or not a directory):
    /// it is never followed ([`crate::fsutil::places`]).
    StrayPlace,
}

/// Where the layers of images and build steps live. See the module docs for
/// the vocabulary.
pub trait Snapshotter: Send + Sync {
    /// The backend's name as users select it (`dir`, `zfs`, `overlay`).
    fn backend(&self) -> &'static str;

    /// Creates the active snapshot `key` as a copy (or clone) of the committed
    /// snapshot `parent`, or empty when `parent` is `None`, and returns the
    /// path of its writable root.
    fn prepare(&self, key: &str, parent: Option<&str>) -> Result<PathBuf>;

    /// Turns the active snapshot `key` into the committed snapshot `name`
    /// with `labels`. Fails with `AlreadyExists` (leaving `key` in place) if
    /// `name` is already committed: another process got there first.
    fn commit(&self, name: &str, key: &str, labels: &Labels) -> Result<()>;

    /// The read-only root of a committed snapshot.
    fn view(&self, name: &str) -> Result<PathBuf>;

    /// Information about a snapshot, `None` if it does not exist.
    fn stat(&self, name: &str) -> Result<Option<Info>>;

    /// Adds or replaces labels on a committed snapshot (e.g. the diff ID once
    /// its layer was exported). Other labels are kept.
    fn set_labels(&self, name: &str, labels: &Labels) -> Result<()>;

    /// Removes labels from a committed snapshot (a `jbuild:blob.*` label
    /// naming a blob the store no longer has). Labels it does not have are
    /// ignored.
    fn remove_labels(&self, name: &str, labels: &[String]) -> Result<()>;

    /// Removes an active or committed snapshot. A committed snapshot that is
    /// the parent of others is refused with `HasChildren`.
    fn remove(&self, name: &str) -> Result<()>;

    /// Every snapshot, active and committed, in name order.
    fn list(&self) -> Result<Vec<Info>>;

    /// [`Snapshotter::list`] for `jbuild check`: a snapshot whose record
    /// cannot be read is listed with no parent and no labels and a
    /// [`Flaw`] says why, and each committed snapshot's tree is looked at
    /// (there, not a symlink out of the root). Never writes.
    fn audit(&self) -> Result<(Vec<Info>, Vec<Flaw>)> {
        Ok((self.list()?, Vec::new()))
    }

    /// The fastest correct differ for snapshots of this backend.
    fn differ(&self) -> Box<dyn Differ>;

    /// Makes `dest` (which must not exist) a writable tree with the
    /// content of the committed snapshot `name`, independent of it: what a
    /// jail made from an image runs in (`jbuild create`). The default is a
    /// faithful copy (owners, modes, links, times, flags); a backend that
    /// can clone offers [`Snapshotter::jail_clones`] as well, which
    /// `jbuild create` prefers where it can.
    fn materialize(&self, name: &str, dest: &std::path::Path) -> Result<()> {
        let src = self.view(name)?;
        dir::copy_tree(&src, dest).map_err(|e| {
            SnapshotError::io(
                format!("cannot copy snapshot `{name}` to {}", dest.display()),
                e,
            )
        })
    }

    /// Cloning committed snapshots into jails' filesystems, for a backend
    /// that can (ZFS; see [`clones`]). `None`: `jbuild create` copies.
    fn jail_clones(&self) -> Option<&dyn clones::JailClones> {
        None
    }

    /// The bytes snapshot `name` keeps on disk itself (its own files,
    /// each counted once, apparent sizes), for `jbuild system df`; `None`
    /// where the backend cannot say cheaply (ZFS shares blocks between a
    /// snapshot and its clones: `zfs list -o used` tells).
    fn disk_usage(&self, name: &str) -> Result<Option<u64>> {
        let _ = name;
        Ok(None)
    }
}

/// The apparent size of the files under `dir` (symlinks not followed),
/// each inode counted once; 0 when it does not exist.
pub fn tree_bytes(dir: &std::path::Path) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for e in entries {
            let e = e?;
            let m = std::fs::symlink_metadata(e.path())?;
            if m.is_dir() {
                stack.push(e.path());
            } else if seen.insert((m.dev(), m.ino())) {
                total += m.len();
            }
        }
    }
    Ok(total)
}

/// Checks that a key or name fits every backend's rules.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(SnapshotError::InvalidName(name.to_string()))
    }
}
