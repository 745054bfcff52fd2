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
//! addition). [`canonicalize`](walk) turns what a differ found into one
//! canonical form, documented on [`Change`], before the writer sees it.

pub mod walk;

use std::path::{Path, PathBuf};

/// What happened to one path. Paths are relative to the snapshot root, with
/// no leading `/`, and never contain `..` or `.` components.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub kind: ChangeKind,
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
    #[error("{0}")]
    Backend(String),
}

/// Computes the changes that turn `parent` into `child`.
pub trait Differ: Send + Sync {
    /// A short name for messages (`tree-walk`, `zfs-diff`).
    fn name(&self) -> &'static str;

    /// The canonical change list from `parent` (nothing, for a base layer)
    /// to `child`, sorted as the tar writer needs it.
    fn changes(&self, parent: Option<SnapshotRef<'_>>, child: SnapshotRef<'_>) -> Result<Vec<Change>, DiffError>;
}
