//! The root's own places: the directories jbuild makes under
//! `$JBUILD_ROOT` and in its store must be real directories
//! ([`crate::fsutil::places`]). One that is a symlink (or a file) is
//! damage: jbuild reads, writes and removes nothing through it, and the
//! rest of the check does not look inside it (followed, `--repair` would
//! remove the files of the directory it points to as leftovers).
//!
//! What `--repair` does about one depends on what the place holds: a
//! place of scratch files, notes or caches, which jbuild makes again, is
//! taken away — the symlink itself, never what it points to; a place that
//! holds the store or the snapshots is left for the user to move back.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{Finding, Fix, Report};
use crate::config::Paths;
use crate::fsutil::places::{existing_own_dir, PlaceError};

/// Each place under the root, and whether what it holds can be made again
/// (so that `--repair` may take away a symlink there).
const PLACES: &[(&str, bool)] = &[
    ("store", false),
    ("store/.jbuild", true),
    ("store/.jbuild/tmp", true),
    ("store/.jbuild/sizes", true),
    ("store/.jbuild/origins", true),
    ("store/blobs", false),
    ("store/blobs/sha256", false),
    ("tmp", true),
    ("cache", true),
    ("cache/mounts", true),
    ("cache/freebsd", true),
    ("snapshots", false),
    ("snapshots/dir", false),
    ("snapshots/overlay", false),
];

/// The places that are not real directories, as `check` found them.
#[derive(Debug, Default)]
pub struct Strays(BTreeSet<PathBuf>);

impl Strays {
    /// Whether `path` is at or under a place that is not a real directory:
    /// nothing there is looked at.
    pub fn cover(&self, path: &Path) -> bool {
        self.0.iter().any(|p| path.starts_with(p))
    }
}

/// Checks every place of `paths`' root (and each cache mount's directory),
/// adding a finding for each that is not a real directory.
pub fn check(paths: &Paths, report: &mut Report) -> Strays {
    let root = paths.root();
    let mut strays = Strays::default();
    let mut places: Vec<(PathBuf, bool)> = PLACES
        .iter()
        .map(|(rel, remakable)| (PathBuf::from(rel), *remakable))
        .collect();
    // Each cache mount's directory is mounted into build steps.
    if let Ok(Some(mounts)) = existing_own_dir(root, "cache/mounts") {
        let mut names: Vec<PathBuf> = fs::read_dir(&mounts)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_none_or(|x| x != "lock"))
            .filter_map(|p| p.strip_prefix(root).ok().map(Path::to_path_buf))
            .collect();
        names.sort();
        places.extend(names.into_iter().map(|n| (n, true)));
    }
    for (rel, remakable) in places {
        match existing_own_dir(root, &rel) {
            Ok(_) => {}
            Err(e) if e.is_stray() => {
                let path = e.path().to_path_buf();
                if strays.cover(&path) {
                    continue;
                }
                // The place at fault may be above `rel`: judged as itself.
                let remakable = remakable
                    && PLACES
                        .iter()
                        .filter(|(p, _)| root.join(p) == path)
                        .all(|(_, r)| *r);
                report.push(finding(&e, remakable));
                strays.0.insert(path);
            }
            Err(e) => report.notes.push(format!(
                "{} cannot be checked: {}",
                e.path().display(),
                crate::report::error_chain(&e)
            )),
        }
    }
    strays
}

/// The finding about a place that is not a real directory.
pub fn finding(e: &PlaceError, remakable: bool) -> Finding {
    let path = e.path().to_path_buf();
    let (kind, what) = match e {
        PlaceError::Symlink { target, .. } => (
            "symlinked-place",
            format!(
                "{} is a symlink to {}, where jbuild keeps a directory of its own: nothing is \
                 read, written or removed through it",
                path.display(),
                target.display()
            ),
        ),
        _ => (
            "not-a-directory",
            format!(
                "{} is not a directory, where jbuild keeps a directory of its own",
                path.display()
            ),
        ),
    };
    let finding = Finding::damaged(kind, what, path.display().to_string());
    match (e, remakable) {
        (PlaceError::Symlink { .. }, true) => finding
            .action(
                "`jbuild check --repair` removes the symlink (never what it points to), and jbuild \
                 makes the directory again; to keep it on another disk, mount that disk there",
            )
            .fix(Fix::RemoveSymlink(path)),
        (PlaceError::Symlink { target, .. }, false) => finding.action(format!(
            "put the directory itself there: remove the symlink and move {} to {}",
            target.display(),
            path.display()
        )),
        _ => finding.action("move it aside: jbuild makes the directory again"),
    }
}
