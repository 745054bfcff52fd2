//! The canonical form of a change list (documented in [`crate::diff`]) and
//! the one function every differ calls to reach it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::meta::{self, Meta};
use super::{Change, ChangeKind, DiffError};

/// The order in which the tar writer emits entries, and so the order of a
/// canonical change list.
///
/// Paths compare component by component (depth-first, a directory before
/// its contents). Within one directory a whiteout — a Deleted change, which
/// the writer emits as `.wh.<name>` — sorts before every sibling entry;
/// whiteouts sort among themselves, and entries among themselves, by name
/// bytes. (An opaque marker is emitted right after its directory's own
/// entry, so an Opaque change sorts as the directory itself does.)
pub fn emission_order(a: &Change, b: &Change) -> Ordering {
    let mut ai = a
        .path
        .as_os_str()
        .as_bytes()
        .split(|&c| c == b'/')
        .peekable();
    let mut bi = b
        .path
        .as_os_str()
        .as_bytes()
        .split(|&c| c == b'/')
        .peekable();
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let rank_x = rank(a.kind, ai.peek().is_none());
                let rank_y = rank(b.kind, bi.peek().is_none());
                let o = rank_x.cmp(&rank_y).then_with(|| x.cmp(y));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

fn rank(kind: ChangeKind, last: bool) -> u8 {
    if last && kind == ChangeKind::Deleted {
        0
    } else {
        1
    }
}

/// The names of every multi-link inode in a child tree, so that changing
/// one name of an inode can pull in the others.
#[derive(Debug, Default)]
pub struct LinkIndex {
    names: HashMap<(u64, u64), Vec<PathBuf>>,
    inode_of: HashMap<PathBuf, (u64, u64)>,
}

impl LinkIndex {
    /// Records `path` (relative to the root) as a name of `m`'s inode, if
    /// that inode has more than one name.
    pub fn record(&mut self, path: &Path, m: &Meta) {
        if m.is_multi_link() {
            self.names
                .entry((m.dev, m.ino))
                .or_default()
                .push(path.to_path_buf());
            self.inode_of.insert(path.to_path_buf(), (m.dev, m.ino));
        }
    }

    /// Walks the whole tree at `root`. For differs that do not see every
    /// file (a tree walk builds its index as it goes).
    pub fn scan(root: &Path) -> Result<LinkIndex, DiffError> {
        let mut index = LinkIndex::default();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for name in read_dir_sorted(&root.join(&rel))? {
                let child = rel.join(&name);
                let host = root.join(&child);
                let m = meta::lstat(&host)
                    .map_err(|e| DiffError::io(format!("cannot lstat {}", host.display()), e))?;
                if m.is_dir() {
                    stack.push(child);
                } else {
                    index.record(&child, &m);
                }
            }
        }
        Ok(index)
    }

    /// Every name of the inode `path` names, if it has several.
    pub fn names_of(&self, path: &Path) -> Option<&[PathBuf]> {
        self.inode_of
            .get(path)
            .and_then(|k| self.names.get(k))
            .map(Vec::as_slice)
    }
}

/// The entry names of a directory, sorted by bytes.
pub fn read_dir_sorted(dir: &Path) -> Result<Vec<OsString>, DiffError> {
    let ctx = || format!("cannot read directory {}", dir.display());
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| DiffError::io(ctx(), e))? {
        names.push(entry.map_err(|e| DiffError::io(ctx(), e))?.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}

/// Turns what a differ found into the canonical change list (see
/// [`crate::diff`] for the rules).
///
/// `parent` and `child` are the readable roots of the two snapshots. The
/// function reads the parent's and the child's listing of each directory
/// that lost entries (to decide Opaque) and `lstat`s changed paths in the
/// child, so its cost follows the size of the change. `links` is the hard
/// link index of the child if the differ has one; without it the child is
/// scanned, but only if a changed file has several names.
///
/// Conflicting changes for one path are merged: Opaque wins over
/// everything but Deleted, Deleted with Added or Modified is Modified (the
/// path was replaced), Added with Modified is Modified.
pub fn canonicalize(
    changes: Vec<Change>,
    parent: Option<&Path>,
    child: &Path,
    links: Option<&LinkIndex>,
) -> Result<Vec<Change>, DiffError> {
    // Hashed, not ordered: the list is sorted once at the end, and a
    // BTreeMap compares paths component by component at every insertion
    // (tens of thousands on a large layer, before its export can start).
    let mut by_path: HashMap<PathBuf, ChangeKind> = HashMap::with_capacity(changes.len());
    for c in changes {
        validate(&c.path)?;
        let kind = match by_path.get(&c.path) {
            None => c.kind,
            Some(&old) => merge(old, c.kind),
        };
        by_path.insert(c.path, kind);
    }

    drop_implied_deletions(&mut by_path, child)?;
    if let Some(parent) = parent {
        fold_opaque(&mut by_path, parent, child)?;
    }
    complete_hard_links(&mut by_path, child, links)?;

    let mut out: Vec<Change> = by_path
        .into_iter()
        .map(|(path, kind)| Change { path, kind })
        .collect();
    out.sort_by(emission_order);
    Ok(out)
}

fn validate(path: &Path) -> Result<(), DiffError> {
    let invalid = |reason| {
        Err(DiffError::InvalidChange {
            path: path.to_path_buf(),
            reason,
        })
    };
    if path.as_os_str().is_empty() {
        return invalid("the root itself cannot be a change");
    }
    let bytes = path.as_os_str().as_bytes();
    if bytes.ends_with(b"/") || bytes.windows(2).any(|w| w == b"//") {
        return invalid("the path is not normalised");
    }
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return invalid("the path must be relative, without `.` or `..`");
    }
    Ok(())
}

fn merge(old: ChangeKind, new: ChangeKind) -> ChangeKind {
    use ChangeKind::*;
    match (old, new) {
        (a, b) if a == b => a,
        (Deleted, _) | (_, Deleted) => Modified,
        (Opaque, _) | (_, Opaque) => Opaque,
        _ => Modified,
    }
}

/// Rule 4: nothing under a deleted path, and no deletion in a directory
/// the child no longer has (or that an Opaque change already empties).
fn drop_implied_deletions(
    by_path: &mut HashMap<PathBuf, ChangeKind>,
    child: &Path,
) -> Result<(), DiffError> {
    let mut dir_ok: HashMap<PathBuf, bool> = HashMap::new();
    let mut drop = Vec::new();
    // The paths whose kind hides what is under them, apart: most change
    // lists (a step that only adds files) have none, and looking every
    // ancestor of every path up in `by_path` compares paths component by
    // component — a tenth of a large layer's export (issue 31).
    let hiding: HashMap<&Path, ChangeKind> = by_path
        .iter()
        .filter(|(_, &k)| matches!(k, ChangeKind::Opaque | ChangeKind::Deleted))
        .map(|(p, &k)| (p.as_path(), k))
        .collect();
    let above = |path: &Path, kind: ChangeKind| {
        !hiding.is_empty()
            && path
                .ancestors()
                .skip(1)
                .any(|a| hiding.get(a) == Some(&kind))
    };
    for (path, &kind) in by_path.iter() {
        let Some(dir) = path.parent() else { continue };
        let opaque_above = above(path, ChangeKind::Opaque);
        let deleted_above = above(path, ChangeKind::Deleted);
        if deleted_above || (kind == ChangeKind::Deleted && opaque_above) {
            drop.push(path.clone());
            continue;
        }
        if kind == ChangeKind::Deleted && !dir.as_os_str().is_empty() {
            let ok = match dir_ok.get(dir) {
                Some(&ok) => ok,
                None => {
                    let ok = is_real_dir(&child.join(dir));
                    dir_ok.insert(dir.to_path_buf(), ok);
                    ok
                }
            };
            if !ok {
                drop.push(path.clone());
            }
        }
    }
    for p in drop {
        by_path.remove(&p);
    }
    Ok(())
}

fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).map(|m| m.is_dir()).unwrap_or(false)
}

/// Rule 5: a directory none of whose parent entries survive becomes Opaque.
fn fold_opaque(
    by_path: &mut HashMap<PathBuf, ChangeKind>,
    parent: &Path,
    child: &Path,
) -> Result<(), DiffError> {
    let mut dirs_with_deletions: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for (path, &kind) in by_path.iter() {
        if kind == ChangeKind::Deleted {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                dirs_with_deletions
                    .entry(dir.to_path_buf())
                    .or_default()
                    .push(path.clone());
            }
        }
    }
    for (dir, deleted) in dirs_with_deletions {
        if !is_real_dir(&parent.join(&dir)) || !is_real_dir(&child.join(&dir)) {
            continue;
        }
        let before = read_dir_sorted(&parent.join(&dir))?;
        let after: HashSet<OsString> = read_dir_sorted(&child.join(&dir))?.into_iter().collect();
        if before.is_empty() || before.iter().any(|n| after.contains(n)) {
            continue;
        }
        for d in deleted {
            by_path.remove(&d);
        }
        by_path.insert(dir, ChangeKind::Opaque);
    }
    Ok(())
}

/// Rule 6: every name of a multi-link inode whose one name changed.
fn complete_hard_links(
    by_path: &mut HashMap<PathBuf, ChangeKind>,
    child: &Path,
    links: Option<&LinkIndex>,
) -> Result<(), DiffError> {
    let scanned;
    let links = match links {
        Some(l) => l,
        None => {
            let mut any = false;
            // In path order, so that a failing lstat names the same path
            // every time.
            let mut changed: Vec<&PathBuf> = by_path
                .iter()
                .filter(|(_, &k)| matches!(k, ChangeKind::Added | ChangeKind::Modified))
                .map(|(p, _)| p)
                .collect();
            changed.sort_unstable_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
            for path in changed {
                let host = child.join(path);
                let m = meta::lstat(&host)
                    .map_err(|e| DiffError::io(format!("cannot lstat {}", host.display()), e))?;
                if m.is_multi_link() {
                    any = true;
                    break;
                }
            }
            if !any {
                return Ok(());
            }
            scanned = LinkIndex::scan(child)?;
            &scanned
        }
    };
    let mut extra = Vec::new();
    for (path, &kind) in by_path.iter() {
        if matches!(kind, ChangeKind::Added | ChangeKind::Modified) {
            for name in links.names_of(path).unwrap_or_default() {
                if !by_path.contains_key(name) {
                    extra.push(name.clone());
                }
            }
        }
    }
    for name in extra {
        // Not listed, so it existed before and is unchanged but for the
        // link count: rewritten, i.e. Modified.
        by_path.insert(name, ChangeKind::Modified);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeKind::*;

    fn c(p: &str, k: ChangeKind) -> Change {
        Change::new(p, k)
    }

    #[test]
    fn whiteouts_before_siblings_and_depth_first() {
        let mut v = [
            c("a.c/x", Added),
            c("a/b", Added),
            c("a", Modified),
            c("z", Deleted),
            c("b", Added),
            c("a/a", Deleted),
            c("a/b/c", Added),
            c("a/zz", Deleted),
        ];
        v.sort_by(emission_order);
        let order: Vec<&str> = v.iter().map(|c| c.path.to_str().unwrap()).collect();
        assert_eq!(
            order,
            ["z", "a", "a/a", "a/zz", "a/b", "a/b/c", "a.c/x", "b"]
        );
    }

    #[test]
    fn rejects_bad_paths() {
        let t = tempfile::tempdir().unwrap();
        for bad in ["", "/etc", "a/../b", "./a", "a//b", "a/"] {
            let r = canonicalize(vec![c(bad, Added)], None, t.path(), None);
            assert!(matches!(r, Err(DiffError::InvalidChange { .. })), "{bad}");
        }
    }

    #[test]
    fn merges_conflicts() {
        assert_eq!(merge(Deleted, Added), Modified);
        assert_eq!(merge(Added, Modified), Modified);
        assert_eq!(merge(Opaque, Modified), Opaque);
        assert_eq!(merge(Opaque, Deleted), Modified);
    }
}
