//! Leftovers of interrupted work: temporary files a killed process never
//! renamed into place or removed.
//!
//! | where | written by | guarded by |
//! |---|---|---|
//! | `store/.jbuild/tmp/*` | blobs being written (builds, pulls, imports) | the store lock |
//! | `store/.jbuild/tmp/partial-<hex>` | what a killed or failed pull had of a blob, kept for the next pull | the store lock |
//! | `store/.jbuild/origins/<hex>` of a blob the store lacks | pulls (where a blob came from) | the store lock |
//! | `store/.jbuild/origins/.<hex>.tmp-<pid>` | an origin note being written | process `<pid>` being gone |
//! | `store/.tmp-*` | `index.json` being replaced | the index lock |
//! | `snapshots/dir/committed/<name>/.tmp-*` | a `meta.json` being replaced | the `dir` snapshotter's lock |
//! | `tmp/*` | scratch space | the store lock |
//! | `cache/**/.download-*`, `.write-*`, `.tmp-*`, `.fetch-*` | release and package downloads, the content-hash cache | nothing: age only |
//! | `cache/**/.partial-*` | what a killed or failed release or package download had, kept for the next one | nothing: age only |
//!
//! A file is a leftover when the lock that guards its kind is free (nobody
//! is writing one now), or when it has not been touched for
//! [`STALE_TMP`] (its writer is long dead). Otherwise it may be a live
//! process's work and is not even listed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{CheckError, Facts, Finding, Fix, Guard, Report};
use crate::config::Paths;
use crate::fsutil::places::own_entries;
use crate::store::STALE_TMP;

/// Which guards were free when the check ran.
#[derive(Debug, Clone, Copy, Default)]
pub struct FreeGuards {
    pub store: bool,
    pub index: bool,
    pub dir_snapshots: bool,
}

impl FreeGuards {
    /// Looks at the locks now, never waiting and never creating a lock
    /// file. `store_lock_held`: this process holds the store lock itself
    /// (`--repair`), so it is free for our purposes.
    pub fn probe(paths: &Paths, store_lock_held: bool) -> FreeGuards {
        let private = paths.store().join(".jbuild");
        FreeGuards {
            store: store_lock_held || lock_free(&private.join("lock")),
            index: lock_free(&private.join("index.lock")),
            dir_snapshots: lock_free(&paths.dir_snapshots().join("lock")),
        }
    }

    pub fn is_free(&self, guard: Guard) -> bool {
        match guard {
            Guard::Store => self.store,
            Guard::Index => self.index,
            Guard::DirSnapshots => self.dir_snapshots,
            Guard::Age => false,
            Guard::Process(pid) => !crate::image::gc::pid_alive(pid),
        }
    }
}

/// Whether nobody holds a lock on `path` (a missing lock file is free).
/// The file is opened read-only and never created, so that asking works
/// on a read-only root (flock needs no write access).
pub fn lock_free(path: &Path) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(mut file) = fs::File::open(path) else {
        return !path.exists();
    };
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(_held) => return true,
            Err((f, nix::errno::Errno::EINTR)) => file = f,
            Err(_) => return false,
        }
    }
}

/// Whether `path` was last changed more than [`STALE_TMP`] ago.
pub fn is_stale(path: &Path) -> bool {
    fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() > STALE_TMP)
}

/// Finds the leftovers under `paths`' root.
pub fn check(
    paths: &Paths,
    facts: &Facts,
    guards: FreeGuards,
    report: &mut Report,
) -> Result<(), CheckError> {
    let mut busy = false;
    let mut found = |path: PathBuf, guard: Guard, kind: &'static str, what: &str| {
        if guards.is_free(guard) || is_stale(&path) {
            let size = tree_size(&path);
            report.push(
                Finding::reclaimable(
                    kind,
                    what.to_string(),
                    path.display().to_string(),
                    Fix::RemovePath { path, guard },
                )
                .bytes(size),
            );
        } else {
            busy = true;
        }
    };
    let store = paths.store();
    let root = paths.root();
    for p in place_entries(root, "store/.jbuild/tmp")? {
        if has_prefix(&p, &[crate::store::PARTIAL_PREFIX]) {
            // Kept on purpose, for the next pull to continue: reclaimable,
            // not damage.
            found(
                p,
                Guard::Store,
                "partial-blob",
                "part of a blob a killed or failed pull downloaded, kept for the next pull to continue",
            );
            continue;
        }
        found(
            p,
            Guard::Store,
            "tmp-file",
            "a blob an interrupted build, pull or import was writing",
        );
    }
    // Notes named by a blob's hex digest: the origin of a pulled blob (a
    // hint for pushes) and a layer's unpacked size (`jbuild images`).
    let notes = [
        (
            "origins",
            "stale-origin",
            "where a blob the store no longer has came from (a hint for pushes)",
            "an origin note an interrupted pull or push was writing",
        ),
        (
            "sizes",
            "stale-size",
            "the unpacked size of a blob the store no longer has",
            "an unpacked-size note an interrupted `jbuild images` was writing",
        ),
    ];
    for (dir, stale, what, half_written) in notes {
        for p in place_entries(root, &format!("store/.jbuild/{dir}"))? {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // `.<hex>.tmp-<pid>`: an origin note being written by process
            // <pid>; `.tmp-*`: a size note being written (by age only).
            let writer = if name.starts_with(".tmp-") {
                Some(Guard::Age)
            } else {
                name.strip_prefix('.')
                    .and_then(|n| n.rsplit_once(".tmp-"))
                    .map(|(_, pid)| pid.parse().map_or(Guard::Age, Guard::Process))
            };
            if let Some(guard) = writer {
                found(p, guard, "tmp-file", half_written);
                continue;
            }
            let present = format!("sha256:{name}")
                .parse()
                .is_ok_and(|d| facts.blobs.contains_key(&d));
            if !present {
                found(p, Guard::Store, stale, what);
            }
        }
    }
    // While `oci-layout` is missing the store is being created, and its
    // creation writes `index.json` and `oci-layout` without the index lock
    // (no `.jbuild/` yet: a layout jbuild creates stays a plain one). Its
    // temporary files are then only judged by age.
    let created = store.join("oci-layout").exists();
    for p in place_entries(root, "store")?
        .into_iter()
        .filter(|p| has_prefix(p, &[".tmp-"]))
    {
        if created || is_stale(&p) {
            found(
                p,
                Guard::Index,
                "tmp-file",
                "a copy of index.json an interrupted write left",
            );
        }
    }
    // Active snapshots are whole work in progress: a dead one goes as a whole.
    for snapshot in place_entries(root, "snapshots/dir/committed")? {
        if !fs::symlink_metadata(&snapshot).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        for p in entries(&snapshot)?
            .into_iter()
            .filter(|p| has_prefix(p, &[".tmp-"]))
        {
            found(
                p,
                Guard::DirSnapshots,
                "tmp-file",
                "a copy of a snapshot's meta.json an interrupted write left",
            );
        }
    }
    for p in place_entries(root, "tmp")? {
        found(
            p,
            Guard::Store,
            "tmp-file",
            "scratch space of interrupted work",
        );
    }
    let mut cache = Vec::new();
    if let Ok(Some(dir)) = crate::fsutil::places::existing_own_dir(root, "cache") {
        find_temp(&dir, 0, &mut cache)?;
    }
    for p in cache {
        if has_prefix(&p, &[crate::transport::http::PARTIAL_PREFIX]) {
            found(
                p,
                Guard::Age,
                "partial-download",
                "part of a download a killed or failed command had, kept for the next one to continue",
            );
            continue;
        }
        found(
            p,
            Guard::Age,
            "tmp-file",
            "an interrupted download or cache write",
        );
    }
    if busy {
        report.notes.push(format!(
            "other jbuild processes are running: temporary files touched in the last {} minutes are left alone",
            STALE_TMP.as_secs() / 60
        ));
    }
    Ok(())
}

fn has_prefix(p: &Path, prefixes: &[&str]) -> bool {
    p.file_name()
        .map(|n| n.to_string_lossy())
        .is_some_and(|n| prefixes.iter().any(|pre| n.starts_with(pre)))
}

/// The entries of jbuild's own place `root/rel`, sorted: none if it does
/// not exist, or is not a real directory (a symlink is never followed:
/// [`super::places`] reports it).
fn place_entries(root: &Path, rel: &str) -> Result<Vec<PathBuf>, CheckError> {
    match own_entries(root, rel) {
        Ok(e) => Ok(e),
        Err(e) if e.is_stray() => Ok(Vec::new()),
        Err(e) => {
            let context = format!("cannot read {}", e.path().display());
            Err(CheckError::io(context, e.into()))
        }
    }
}

/// The entries of `dir` (none if it does not exist), sorted.
fn entries(dir: &Path) -> Result<Vec<PathBuf>, CheckError> {
    let read = match fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CheckError::io(format!("cannot read {}", dir.display()), e)),
    };
    let mut out = read
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| CheckError::io(format!("cannot read {}", dir.display()), e))?;
    out.sort();
    Ok(out)
}

/// Temporary files under the cache (a few levels deep: `cache/freebsd/<release>/<arch>/`).
fn find_temp(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) -> Result<(), CheckError> {
    if depth > 6 {
        return Ok(());
    }
    for p in entries(dir)? {
        let meta = match fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(_) => continue,
        };
        let temp = [".download-", ".write-", ".tmp-", ".fetch-", ".partial-"];
        if meta.is_file() && has_prefix(&p, &temp) {
            out.push(p);
        } else if meta.is_dir() && p.file_name().is_some_and(|n| n != "pkg") {
            // pkg(8)'s own cache is pkg's business.
            find_temp(&p, depth + 1, out)?;
        }
    }
    Ok(())
}

/// Bytes under `path` (a file, or a tree counted without following links).
pub fn tree_size(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| tree_size(&e.path()))
        .sum()
}
