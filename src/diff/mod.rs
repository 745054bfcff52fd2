//! The `Differ` seam: what changed between a parent snapshot and its child.
//!
//! A differ produces a *change list* and nothing else; the tar writer in
//! [`crate::layer`] turns a change list plus the child's root into a layer.
//! Keeping the two apart means every differ (the ZFS one that asks
//! `zfs diff`, the portable one that walks both trees) feeds the same
//! writer, so the same change gives byte-identical layers whichever found it.
//!
//! # Canonical change lists
//!
//! Differs see changes differently (`zfs diff` reports a renamed file as one
//! `R` line and only one name per inode; a tree walk sees a deletion and an
//! addition). Every differ hands what it found to [`canonicalize`], which
//! turns it into the one canonical form below. Two differs that agree on
//! *what* changed therefore agree on the list, and so on the layer's bytes.
//!
//! The canonical form:
//!
//! 1. **One change per path.** Paths are relative to the snapshot root, never
//!    empty, with no leading `/` and no `.` or `..` components. The root
//!    directory itself is never listed: a layer cannot express changes to
//!    `/`, and jbuild does not try.
//! 2. **Added** for a path that exists only in the child, **Modified** for
//!    one that exists in both and differs (content, any metadata, or type),
//!    **Deleted** for one that exists only in the parent. A differ must list
//!    every path under an Added directory as Added too.
//! 3. **A directory is listed only for its own sake.** A directory whose own
//!    metadata did not change is not listed just because something under it
//!    changed; the tar writer emits it anyway, as the parent of what changed
//!    (see [`crate::layer::tar`]).
//! 4. **One whiteout per deleted tree.** Nothing under a Deleted path is
//!    listed, and a deletion whose parent is not a directory in the child
//!    (the parent was replaced by a file, say) is dropped: replacing the
//!    parent already removes it.
//! 5. **Opaque directories.** When a directory (other than the root) exists
//!    in both snapshots, had at least one entry in the parent, and *none* of
//!    the parent's entry names exist under it in the child, the directory is
//!    listed once as [`ChangeKind::Opaque`] instead of one Deleted per
//!    entry; what the child has under it is listed as Added, as usual. (A
//!    name "survives" if it exists in the child at all, whatever its type.)
//!    Opaque also says the directory's own entry is written, so it stands
//!    for Modified as well.
//! 6. **Hard links are whole.** If any name of a multi-link inode in the
//!    child is Added or Modified, every name of that inode in the child is
//!    listed (as Modified when not already listed). The writer writes the
//!    first name as a file and the others as links to it, so a layer never
//!    holds a hard link to a file it does not hold.
//! 7. **Sorted as the tar writer emits**: depth-first, a directory before
//!    what is under it, and within a directory every whiteout (Deleted)
//!    before any sibling entry; names compare by bytes. See
//!    [`emission_order`].

pub mod canonical;
pub mod choose;
pub mod meta;
pub mod walk;
pub mod zfs;

use std::path::{Path, PathBuf};

pub use canonical::{canonicalize, emission_order, LinkIndex};

/// What happened to one path. Paths are relative to the snapshot root, with
/// no leading `/`, and never contain `..` or `.` components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// The path exists in the child but not the parent.
    Added,
    /// The path exists in both, and its content, metadata or type differ.
    Modified,
    /// The path exists in the parent but not the child.
    Deleted,
    /// The directory exists in both, but nothing of the parent's content
    /// under it survives: written as an opaque whiteout, not one whiteout
    /// per entry.
    Opaque,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    pub path: PathBuf,
    pub kind: ChangeKind,
}

impl Change {
    pub fn new(path: impl Into<PathBuf>, kind: ChangeKind) -> Change {
        Change {
            path: path.into(),
            kind,
        }
    }
}

/// A snapshot as a differ sees it: its name (a backend may map it to its own
/// identifiers, e.g. a ZFS snapshot) and the root it can be read at.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotRef<'a> {
    pub name: &'a str,
    pub root: &'a Path,
}

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A differ produced a change that cannot be in a canonical list.
    #[error("invalid change for `{}`: {reason}", path.display())]
    InvalidChange { path: PathBuf, reason: &'static str },
    #[error("{0}")]
    Backend(String),
    /// The differ was told to stop (see [`choose::Cancel`]).
    #[error("the differ was cancelled")]
    Cancelled,
}

impl crate::blame::Blame for DiffError {
    /// A differ that fails is jbuild's or the system's fault.
    fn is_user_error(&self) -> bool {
        false
    }
}

impl DiffError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        DiffError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Computes the changes that turn `parent` into `child`.
pub trait Differ: Send + Sync {
    /// A short name for messages (`tree-walk`, `zfs-diff`).
    fn name(&self) -> &'static str;

    /// The canonical change list from `parent` (nothing, for a base layer)
    /// to `child`, sorted as the tar writer needs it, and the
    /// [`name`](Differ::name) of the differ that found it. A differ that
    /// hands a pair to another (the ZFS and overlay differs walk the trees
    /// for a base layer, or when their own way cannot be used) names that
    /// one, so what a build reports is what ran, not what was hoped for.
    fn changes_named(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
    ) -> Result<(Vec<Change>, &'static str), DiffError>;

    /// [`changes_named`](Differ::changes_named) without the name.
    fn changes(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
    ) -> Result<Vec<Change>, DiffError> {
        self.changes_named(parent, child)
            .map(|(changes, _)| changes)
    }
}
