//! jbuild's own places: the directories it makes under a root it owns
//! (`$JBUILD_ROOT`'s `store/`, `tmp/`, `cache/`, `snapshots/`; a store's
//! `.jbuild/tmp`, `.jbuild/sizes`, `.jbuild/origins`; a snapshot's `fs/`).
//!
//! Each is checked before anything is read, written or removed there:
//! every component from the root down must be a real directory — not a
//! symlink, not a file. A symlink there is damage (or someone's attempt to
//! move part of the root elsewhere): followed, it would make `check
//! --repair` delete the files of the directory it points to as
//! "leftovers", `prune` take away a directory it does not own, and a build
//! use a tree outside the root as a layer. So it is never followed: the
//! command stops with a [`PlaceError`] that names it, and `jbuild check`
//! reports it as damage.
//!
//! The root itself may be a symlink: it is where the user put jbuild's
//! state (`$JBUILD_ROOT`), or a layout the user named.
//!
//! The checks are `lstat`s of each component, once per use: they keep
//! jbuild from following a symlink that is there, not from a process
//! that races to swap a directory for one while jbuild works (that
//! process could write the root anyway).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a place of jbuild's own cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error(
        "{} is a symlink (to {}), not a directory of jbuild's own: jbuild never reads, writes \
         or removes through it; run `jbuild check`, and put a real directory there",
        path.display(),
        target.display()
    )]
    Symlink { path: PathBuf, target: PathBuf },
    #[error(
        "{} is not a directory, but jbuild keeps a directory of its own there; run `jbuild check`, \
         and move it aside",
        path.display()
    )]
    NotADirectory { path: PathBuf },
    #[error("cannot {what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl crate::blame::Blame for PlaceError {
    /// Something of the user's in the way of jbuild's own directory
    /// ([`PlaceError::is_stray`]) is theirs to move; a failed call is the system's.
    fn is_user_error(&self) -> bool {
        self.is_stray()
    }
}

impl PlaceError {
    /// The place at fault.
    pub fn path(&self) -> &Path {
        match self {
            PlaceError::Symlink { path, .. }
            | PlaceError::NotADirectory { path }
            | PlaceError::Io { path, .. } => path,
        }
    }

    /// Whether the place is not a directory (a symlink or another kind of
    /// file): damage the user fixes, not a fault of the system.
    pub fn is_stray(&self) -> bool {
        !matches!(self, PlaceError::Io { .. })
    }
}

impl From<PlaceError> for io::Error {
    fn from(e: PlaceError) -> io::Error {
        let kind = match &e {
            PlaceError::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::NotADirectory,
        };
        io::Error::new(kind, e)
    }
}

/// `root/rel`, every component below `root` a real directory, made where
/// missing. `rel` is relative and plain (no `..`).
pub fn own_dir(root: &Path, rel: impl AsRef<Path>) -> Result<PathBuf, PlaceError> {
    walk(root, rel.as_ref(), true).map(|p| p.expect("made where missing"))
}

/// `root/rel` if it exists, every component below `root` a real
/// directory; `None` if a component is missing. Never writes.
pub fn existing_own_dir(root: &Path, rel: impl AsRef<Path>) -> Result<Option<PathBuf>, PlaceError> {
    walk(root, rel.as_ref(), false)
}

fn walk(root: &Path, rel: &Path, create: bool) -> Result<Option<PathBuf>, PlaceError> {
    let mut at = root.to_path_buf();
    if create && !root.is_dir() {
        fs::create_dir_all(root).map_err(|source| PlaceError::Io {
            what: "create",
            path: root.to_path_buf(),
            source,
        })?;
    }
    for c in rel.components() {
        let Component::Normal(name) = c else {
            debug_assert!(matches!(c, Component::CurDir), "{}", rel.display());
            continue;
        };
        at.push(name);
        loop {
            match fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => break,
                Ok(m) if m.file_type().is_symlink() => {
                    let target = fs::read_link(&at).unwrap_or_default();
                    return Err(PlaceError::Symlink { path: at, target });
                }
                Ok(_) => return Err(PlaceError::NotADirectory { path: at }),
                Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(&at) {
                    Ok(()) => break,
                    // Made by another process meanwhile: looked at again.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(source) => {
                        return Err(PlaceError::Io {
                            what: "create",
                            path: at,
                            source,
                        })
                    }
                },
                Err(source) => {
                    return Err(PlaceError::Io {
                        what: "read",
                        path: at,
                        source,
                    })
                }
            }
        }
    }
    Ok(Some(at))
}

/// The entries of the place `root/rel` (none when it does not exist),
/// sorted; never through a symlink.
pub fn own_entries(root: &Path, rel: impl AsRef<Path>) -> Result<Vec<PathBuf>, PlaceError> {
    let Some(dir) = existing_own_dir(root, rel)? else {
        return Ok(Vec::new());
    };
    let err = |source| PlaceError::Io {
        what: "read",
        path: dir.clone(),
        source,
    };
    let mut out = fs::read_dir(&dir)
        .map_err(err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(err)?;
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn makes_missing_directories_and_refuses_symlinks_and_files() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let made = own_dir(&root, ".jbuild/tmp").unwrap();
        assert!(made.is_dir());
        assert_eq!(existing_own_dir(&root, ".jbuild/tmp").unwrap(), Some(made));
        assert_eq!(existing_own_dir(&root, ".jbuild/sizes").unwrap(), None);

        let outside = t.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), "x").unwrap();
        symlink(&outside, root.join(".jbuild/sizes")).unwrap();
        for r in [
            own_dir(&root, ".jbuild/sizes"),
            existing_own_dir(&root, ".jbuild/sizes/deeper").map(Option::unwrap_or_default),
        ] {
            let e = r.unwrap_err();
            assert!(matches!(e, PlaceError::Symlink { .. }), "{e}");
            assert!(e.is_stray());
            assert!(e.to_string().contains("outside"), "{e}");
        }
        assert!(own_entries(&root, ".jbuild/sizes").is_err());
        assert!(!outside.join("deeper").exists());

        fs::write(root.join(".jbuild/origins"), "").unwrap();
        let e = own_dir(&root, ".jbuild/origins").unwrap_err();
        assert!(matches!(e, PlaceError::NotADirectory { .. }), "{e}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::NotADirectory);
    }

    #[test]
    fn a_symlinked_root_is_the_users_choice() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("real")).unwrap();
        symlink(t.path().join("real"), t.path().join("root")).unwrap();
        own_dir(&t.path().join("root"), "tmp").unwrap();
        assert!(t.path().join("real/tmp").is_dir());
    }
}
