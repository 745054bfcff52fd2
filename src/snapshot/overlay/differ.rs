//! The overlay differ: a committed snapshot's upper directory lists every
//! path its step touched, so only those are looked at, and the cost of a
//! diff follows the size of the change, not of the tree.
//!
//! What the upper directory holds, and what it means:
//!
//! - a character device 0/0 is a *whiteout*: the path was deleted
//!   (Deleted, if the parent has it);
//! - a directory with `trusted.overlay.opaque=y` (`user.overlay.opaque=y`
//!   in a store of the userxattr [`Flavour`]) replaced the parent's
//!   directory wholesale: that directory is compared with the parent's in
//!   full, as the tree walk does (the canonical form then makes it Opaque,
//!   or Deleted and Added entries where a name survives);
//! - anything else was created, or *copied up* — and a copy-up happens for
//!   a chmod, a chown, an open for writing, or an entry changed below a
//!   directory, whether or not the result differs. So a path found here is
//!   only a candidate: it is compared with the parent's by the tree walk's
//!   own rule ([`crate::diff::walk`]), reading both through the mounted
//!   trees. A file opened for writing and left as it was, or changed and
//!   changed back, is therefore in the layer exactly when the walk would
//!   put it there.
//!
//! Paths that are not in the upper directory are the parent's, unchanged.
//! The raw changes then go through [`canonicalize`], as every differ's do,
//! so the layer is byte for byte the tree walk's.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

use super::flavour::Flavour;
use crate::diff::meta::{self, FileKind, Meta};
use crate::diff::walk::{differs, TreeWalkDiffer, Walk};
use crate::diff::{
    canonical::read_dir_sorted, canonicalize, Change, ChangeKind, DiffError, Differ, LinkIndex,
    SnapshotRef,
};

/// Diffs a committed overlay snapshot against its parent from its upper
/// directory. Anything else (a base layer, a snapshot compared with some
/// other than its own parent) is handed to the tree walk.
#[derive(Debug, Clone)]
pub struct OverlayDiffer {
    committed: PathBuf,
    /// Which xattrs mark opaque directories in the upper directories.
    flavour: Flavour,
}

impl OverlayDiffer {
    /// A differ for the snapshots whose committed directories are under
    /// `committed` (`ROOT/committed`), made in `flavour`.
    pub fn new(committed: PathBuf, flavour: Flavour) -> Self {
        OverlayDiffer { committed, flavour }
    }

    /// The upper directory of `child`, if `parent` is the snapshot it was
    /// prepared from.
    fn upper(&self, child: &str, parent: &str) -> Option<PathBuf> {
        let dir = self.committed.join(child);
        let bytes = std::fs::read(dir.join("meta.json")).ok()?;
        let meta: crate::snapshot::dir::Meta = serde_json::from_slice(&bytes).ok()?;
        // Only a real directory of the snapshot's: a symlink out of the root
        // is not read (the walk then reads the views, which refuse it too).
        let upper = crate::fsutil::places::existing_own_dir(&dir, "fs").ok()??;
        (meta.parent.as_deref() == Some(parent)).then_some(upper)
    }
}

impl Differ for OverlayDiffer {
    fn name(&self) -> &'static str {
        "overlay-upper"
    }

    fn changes_named(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
    ) -> Result<(Vec<Change>, &'static str), DiffError> {
        let (Some(p), Some(upper)) = (parent, parent.and_then(|p| self.upper(child.name, p.name)))
        else {
            let walk = TreeWalkDiffer::new();
            return Ok((walk.changes(parent, child)?, walk.name()));
        };
        let mut scan = Scan {
            upper: &upper,
            flavour: self.flavour,
            parent: p.root,
            walk: Walk {
                child: child.root,
                changes: Vec::new(),
                links: LinkIndex::default(),
            },
        };
        scan.dir(Path::new(""))?;
        let Walk { changes, links, .. } = scan.walk;
        let changes = canonicalize(changes, Some(p.root), child.root, Some(&links))?;
        Ok((changes, self.name()))
    }
}

struct Scan<'a> {
    upper: &'a Path,
    flavour: Flavour,
    parent: &'a Path,
    /// The tree walk over the mounted trees, for the candidates.
    walk: Walk<'a>,
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> DiffError + '_ {
    move |e| DiffError::io(format!("cannot read {}", path.display()), e)
}

/// `lstat`, or `None` when nothing is there.
fn lstat_opt(path: &Path) -> Result<Option<Meta>, DiffError> {
    match meta::lstat(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_at(path)(e)),
    }
}

/// An overlayfs whiteout: a character device numbered 0/0.
pub fn is_whiteout(m: &Meta) -> bool {
    m.kind == FileKind::CharDevice && m.rdev == 0
}

/// Whether the upper directory `path` hides everything below it in the
/// lower layers, as a mount in `flavour` reads it.
pub fn is_opaque(path: &Path, flavour: Flavour) -> Result<bool, DiffError> {
    match xattr::get(path, OsStr::new(flavour.opaque_xattr())) {
        Ok(v) => Ok(v.as_deref() == Some(b"y")),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(false),
        Err(e) => Err(io_at(path)(e)),
    }
}

impl Scan<'_> {
    /// The entries of the upper directory `rel`, a directory in the parent
    /// and in the child that is not opaque.
    fn dir(&mut self, rel: &Path) -> Result<(), DiffError> {
        for name in read_dir_sorted(&self.upper.join(rel))? {
            let rel = rel.join(name);
            let up = self.upper.join(&rel);
            let um = meta::lstat(&up).map_err(io_at(&up))?;
            let Some(pm) = lstat_opt(&self.parent.join(&rel))? else {
                if !is_whiteout(&um) {
                    self.walk.add(&rel)?;
                }
                continue;
            };
            if is_whiteout(&um) {
                self.walk
                    .changes
                    .push(Change::new(rel, ChangeKind::Deleted));
            } else if pm.is_dir() && um.is_dir() && !is_opaque(&up, self.flavour)? {
                let (pp, cp) = (self.parent.join(&rel), self.walk.child.join(&rel));
                let cm = meta::lstat(&cp).map_err(io_at(&cp))?;
                if differs(&pp, &pm, &cp, &cm)? {
                    self.walk
                        .changes
                        .push(Change::new(&rel, ChangeKind::Modified));
                }
                self.dir(&rel)?;
            } else {
                // A file, a type change or an opaque directory: the walk's
                // own comparison, in full below an opaque directory.
                self.walk.compare(self.parent, &rel)?;
            }
        }
        Ok(())
    }
}
