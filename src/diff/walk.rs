//! The portable differ: walk the parent and the child side by side.
//!
//! Both trees are read with `lstat` (a symlink is compared as a symlink,
//! never followed) and directories are listed sorted by name bytes, so the
//! walk is a merge of two sorted lists at every level. A path present in
//! both is Modified when any of these differ:
//!
//! - type; permission bits including setuid, setgid and sticky; uid; gid;
//! - size and link count (not for directories: a directory's size is an
//!   artefact of its history, and its link count counts subdirectories);
//! - mtime, seconds and nanoseconds;
//! - symlink target; device numbers (character and block devices);
//! - extended attributes (names and values); FreeBSD file flags;
//! - content, but only read when size and mtime are equal and the mtime has
//!   no nanoseconds — a filesystem that truncates times could otherwise hide
//!   a same-size rewrite within one second.
//!
//! Inode numbers are never compared across the trees: the dir snapshotter
//! copies files, so every inode differs even when nothing changed. Within
//! the child they are used to find all the names of a hard-linked file.
//!
//! The raw result goes through [`canonicalize`] like any differ's.

use std::cmp::Ordering;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::canonical::read_dir_sorted;
use super::choose::Cancel;
use super::meta::{self, FileKind, Meta};
use super::*;

#[derive(Debug, Default, Clone)]
pub struct TreeWalkDiffer;

impl TreeWalkDiffer {
    pub fn new() -> Self {
        TreeWalkDiffer
    }
}

impl Differ for TreeWalkDiffer {
    fn name(&self) -> &'static str {
        "tree-walk"
    }

    fn changes_named(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
    ) -> Result<(Vec<Change>, &'static str), DiffError> {
        Ok((self.walk(parent, child, None)?, self.name()))
    }
}

impl TreeWalkDiffer {
    /// [`Differ::changes`] that stops with [`DiffError::Cancelled`] soon
    /// after `cancel` is set: the flag is checked at every entry, so a
    /// walk that is stopped (see [`choose`]) ends within one `lstat` or
    /// directory read (plus the content comparison of one file).
    pub fn changes_cancellable(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
        cancel: &Cancel,
    ) -> Result<Vec<Change>, DiffError> {
        self.walk(parent, child, Some(cancel))
    }

    fn walk(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
        cancel: Option<&Cancel>,
    ) -> Result<Vec<Change>, DiffError> {
        let mut walk = Walk {
            child: child.root,
            changes: Vec::new(),
            links: LinkIndex::default(),
        };
        match parent {
            Some(p) => walk.compare_dir_until(p.root, Path::new(""), cancel)?,
            None => walk.add_children_until(Path::new(""), cancel)?,
        }
        let Walk { changes, links, .. } = walk;
        if let Some(c) = cancel {
            c.check()?;
        }
        canonicalize(changes, parent.map(|p| p.root), child.root, Some(&links))
    }
}

/// The walk's state: the child's root, the raw changes found so far and
/// the child's hard-link index. Other differs walk the parts of a tree they
/// cannot judge otherwise with it (the overlay differ, under an opaque
/// directory), so the two find the same raw changes there.
pub(crate) struct Walk<'a> {
    pub(crate) child: &'a Path,
    pub(crate) changes: Vec<Change>,
    pub(crate) links: LinkIndex,
}

fn lstat(path: &Path) -> Result<Meta, DiffError> {
    meta::lstat(path).map_err(|e| DiffError::io(format!("cannot lstat {}", path.display()), e))
}

impl Walk<'_> {
    /// `rel` exists in both trees.
    pub(crate) fn compare(&mut self, parent: &Path, rel: &Path) -> Result<(), DiffError> {
        self.compare_until(parent, rel, None)
    }

    /// `rel` exists only in the child: it and everything under it is Added.
    pub(crate) fn add(&mut self, rel: &Path) -> Result<(), DiffError> {
        self.add_until(rel, None)
    }

    /// Compares the directory `rel`, present as a directory in both trees,
    /// checking `cancel` (when there is one) at every entry.
    fn compare_dir_until(
        &mut self,
        parent: &Path,
        rel: &Path,
        cancel: Option<&Cancel>,
    ) -> Result<(), DiffError> {
        let before = read_dir_sorted(&parent.join(rel))?;
        let after = read_dir_sorted(&self.child.join(rel))?;
        let (mut i, mut j) = (0, 0);
        while i < before.len() || j < after.len() {
            if let Some(c) = cancel {
                c.check()?;
            }
            let order = match (before.get(i), after.get(j)) {
                (Some(b), Some(a)) => b.as_bytes().cmp(a.as_bytes()),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            match order {
                Ordering::Less => {
                    self.changes
                        .push(Change::new(rel.join(&before[i]), ChangeKind::Deleted));
                    i += 1;
                }
                Ordering::Greater => {
                    self.add_until(&rel.join(&after[j]), cancel)?;
                    j += 1;
                }
                Ordering::Equal => {
                    self.compare_until(parent, &rel.join(&after[j]), cancel)?;
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    fn compare_until(
        &mut self,
        parent: &Path,
        rel: &Path,
        cancel: Option<&Cancel>,
    ) -> Result<(), DiffError> {
        let (pp, cp) = (parent.join(rel), self.child.join(rel));
        let (pm, cm) = (lstat(&pp)?, lstat(&cp)?);
        self.links.record(rel, &cm);
        if differs(&pp, &pm, &cp, &cm)? {
            self.changes.push(Change::new(rel, ChangeKind::Modified));
        }
        match (pm.is_dir(), cm.is_dir()) {
            (true, true) => self.compare_dir_until(parent, rel, cancel),
            (false, true) => self.add_children_until(rel, cancel),
            _ => Ok(()),
        }
    }

    fn add_until(&mut self, rel: &Path, cancel: Option<&Cancel>) -> Result<(), DiffError> {
        let m = lstat(&self.child.join(rel))?;
        self.added(rel, &m, cancel)
    }

    /// `rel`, whose `lstat` is `m`, is Added, and so is everything under it.
    fn added(&mut self, rel: &Path, m: &Meta, cancel: Option<&Cancel>) -> Result<(), DiffError> {
        self.links.record(rel, m);
        self.changes.push(Change::new(rel, ChangeKind::Added));
        if m.is_dir() {
            self.add_children_until(rel, cancel)?;
        }
        Ok(())
    }

    fn add_children_until(&mut self, rel: &Path, cancel: Option<&Cancel>) -> Result<(), DiffError> {
        for (name, m) in read_dir_sorted_lstat(&self.child.join(rel))? {
            if let Some(c) = cancel {
                c.check()?;
            }
            self.added(&rel.join(name), &m, cancel)?;
        }
        Ok(())
    }
}

/// The entries of a directory with their `lstat`, sorted by name bytes.
/// Each `lstat` is made relative to the open directory (`fstatat`), not
/// through the whole path again: on an overlay view of a large new tree
/// (a `PKG` step's), walking every path from the root was most of the
/// walk's time (issue 31).
fn read_dir_sorted_lstat(dir: &Path) -> Result<Vec<(std::ffi::OsString, Meta)>, DiffError> {
    let ctx = || format!("cannot read directory {}", dir.display());
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DiffError::io(ctx(), e))? {
        let entry = entry.map_err(|e| DiffError::io(ctx(), e))?;
        // `DirEntry::metadata` does not follow a symlink, as `lstat`.
        let m = entry.metadata().map_err(|e| {
            let path = entry.path();
            DiffError::io(format!("cannot lstat {}", path.display()), e)
        })?;
        entries.push((entry.file_name(), Meta::from_metadata(&m)));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(entries)
}

/// Whether the same path in two trees differs in anything a layer carries.
pub(crate) fn differs(pp: &Path, pm: &Meta, cp: &Path, cm: &Meta) -> Result<bool, DiffError> {
    let dir = cm.is_dir();
    if pm.kind != cm.kind
        || pm.mode != cm.mode
        || pm.uid != cm.uid
        || pm.gid != cm.gid
        || (!dir && (pm.size != cm.size || pm.nlink != cm.nlink))
        || pm.mtime != cm.mtime
        || pm.mtime_nsec != cm.mtime_nsec
        || pm.flags != cm.flags
    {
        return Ok(true);
    }
    let io_err = |p: &Path| {
        let p: PathBuf = p.to_path_buf();
        move |e| DiffError::io(format!("cannot read {}", p.display()), e)
    };
    let special_differs = match cm.kind {
        FileKind::Symlink => {
            std::fs::read_link(pp).map_err(io_err(pp))?
                != std::fs::read_link(cp).map_err(io_err(cp))?
        }
        FileKind::CharDevice | FileKind::BlockDevice => pm.rdev != cm.rdev,
        _ => false,
    };
    if special_differs {
        return Ok(true);
    }
    if meta::xattrs(pp).map_err(io_err(pp))? != meta::xattrs(cp).map_err(io_err(cp))? {
        return Ok(true);
    }
    if cm.kind == FileKind::Regular && cm.mtime_nsec == 0 && cm.size > 0 {
        return Ok(!same_content(pp, cp).map_err(io_err(cp))?);
    }
    Ok(false)
}

fn same_content(a: &Path, b: &Path) -> io::Result<bool> {
    let mut ra = BufReader::with_capacity(64 * 1024, File::open(a)?);
    let mut rb = BufReader::with_capacity(64 * 1024, File::open(b)?);
    loop {
        let (ba, bb) = (ra.fill_buf()?, rb.fill_buf()?);
        let n = ba.len().min(bb.len());
        if n == 0 {
            return Ok(ba.is_empty() && bb.is_empty());
        }
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
        ra.consume(n);
        rb.consume(n);
    }
}
