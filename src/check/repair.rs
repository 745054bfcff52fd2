//! `jbuild check --repair`: doing the [`Fix`] of each finding.
//!
//! What repair does, in this order:
//!
//! 1. writes a missing or unreadable `oci-layout` (its content is fixed), or
//!    finishes creating a store whose creation was interrupted; removes a
//!    symlink where jbuild keeps a place of scratch files, notes or caches
//!    (the link itself, never what it points to: [`super::places`]);
//! 2. deletes corrupt blob files — the images using them then lack a blob,
//!    and the next check says which to pull or build again — only while
//!    holding the store lock (a pull finding the blob in place keeps it);
//! 3. removes unreferenced blobs through the store's own garbage collector
//!    ([`crate::image::gc::prune_blobs`]), only while holding the store lock
//!    exclusively, so no blob a pull is about to tag can go;
//! 4. removes leftover temporary files whose guarding lock is free (or that
//!    are older than [`crate::store::STALE_TMP`]);
//! 5. removes active snapshots of dead processes and unused unpacked layers
//!    (leaves first; the layers only while holding the store lock: a
//!    running pull's layers are used by no image until it names it), and
//!    stale blob labels.
//!
//! It never untags an image and never edits `index.json`. Each action is
//! one [`Repaired`] of the result, done, left alone or failed; a failed
//! action does not stop the rest.

use std::fs;
use std::path::Path;

use super::leftovers::is_stale;
use super::{Fix, Guard, Report};
use crate::config::Paths;
use crate::fsutil::write_atomic;
use crate::image::gc::{owner_alive, pid_alive};
use crate::image::SnapshotName;
use crate::report::plain::bytes;
use crate::snapshot::Snapshotter;
use crate::store::lock::try_flock;
use crate::store::{Store, StoreLock};

/// What `oci-layout` holds (the only version jbuild writes).
const LAYOUT_JSON: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// What one repair action came to, with its line for people
/// (`repaired: …`): the variant is for code, the line is not parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repaired {
    /// Something was written or removed.
    Done(String),
    /// Left alone on purpose: another process may be using it. A later
    /// `jbuild check --repair` may do it.
    Left(String),
    /// Tried, and it failed; the line says why.
    Failed(String),
}

impl Repaired {
    /// Whether the action changed anything, so that checking again may
    /// find more to do.
    pub fn made_progress(&self) -> bool {
        matches!(self, Repaired::Done(_))
    }

    /// The line for people.
    pub fn line(&self) -> &str {
        match self {
            Repaired::Done(l) | Repaired::Left(l) | Repaired::Failed(l) => l,
        }
    }
}

impl std::fmt::Display for Repaired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.line())
    }
}

/// In JSON an action is its line, as `jbuild --json check --repair` has
/// always printed it.
impl serde::Serialize for Repaired {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.line())
    }
}

/// `r` as done, or as failed with `failed`'s line.
fn outcome<E>(r: Result<(), E>, done: String, failed: impl FnOnce(E) -> String) -> Repaired {
    match r {
        Ok(()) => Repaired::Done(done),
        Err(e) => Repaired::Failed(failed(e)),
    }
}

/// Does what `report`'s findings call for; returns one [`Repaired`] per action.
/// `lock` is the store lock held exclusively, or `None` when other jbuild
/// processes hold it (then unreferenced blobs and store temporary files
/// are left alone).
pub fn repair(
    report: &Report,
    paths: &Paths,
    snapshotter: Option<&dyn Snapshotter>,
    lock: Option<&StoreLock>,
) -> Vec<Repaired> {
    let mut done = Vec::new();
    let store = Store::open_unchecked(&paths.store());
    let fixes: Vec<_> = report
        .findings
        .iter()
        .filter_map(|f| f.fix.as_ref().map(|x| (f, x)))
        .collect();

    for (_, fix) in &fixes {
        match fix {
            Fix::WriteLayoutFile(path) => done.push(outcome(
                write_atomic(path, LAYOUT_JSON),
                format!("wrote {}", path.display()),
                |e| format!("could not write {}: {e}", path.display()),
            )),
            Fix::FinishStore(dir) => done.push(outcome(
                Store::open(dir).map(drop),
                format!("finished creating the store {}", dir.display()),
                |e| format!("could not finish creating the store {}: {e}", dir.display()),
            )),
            Fix::RemoveSymlink(path) => done.push(outcome(
                remove_symlink(path),
                format!(
                    "removed the symlink {} (not what it pointed to)",
                    path.display()
                ),
                |e| format!("could not remove the symlink {}: {e}", path.display()),
            )),
            _ => {}
        }
    }
    for (finding, fix) in &fixes {
        if let Fix::DeleteCorruptBlob(d) = fix {
            let images = if finding.images.is_empty() {
                String::new()
            } else {
                format!(" (pull or build again: {})", finding.images.join(", "))
            };
            // A pull finding the blob in place would keep it and tag the
            // image: delete only while no one adds content.
            if lock.is_none() {
                done.push(Repaired::Left(format!(
                    "left corrupt blob {d}: other jbuild processes are adding content; run `jbuild check --repair` again when they are done"
                )));
                continue;
            }
            done.push(outcome(
                store.remove_blob(d),
                format!("deleted corrupt blob {d}{images}"),
                |e| format!("could not delete corrupt blob {d}: {e}"),
            ));
        }
    }
    let collect = fixes
        .iter()
        .filter(|(_, f)| matches!(f, Fix::CollectBlob(_)))
        .count();
    if collect > 0 {
        match lock {
            Some(lock) => match crate::image::gc::prune_blobs(&store, lock) {
                Ok(removed) => {
                    for (d, n) in removed {
                        done.push(Repaired::Done(format!(
                            "removed unreferenced blob {d} ({})",
                            bytes(n)
                        )));
                    }
                }
                Err(e) => done.push(Repaired::Failed(format!(
                    "could not remove unreferenced blobs: {e}"
                ))),
            },
            None => done.push(Repaired::Left(format!(
                "left {collect} unreferenced blobs: other jbuild processes are adding content; run `jbuild check --repair` again when they are done"
            ))),
        }
    }

    for (_, fix) in &fixes {
        let Fix::RemovePath { path, guard } = fix else {
            continue;
        };
        // Hold the guarding lock while removing, so no writer starts meanwhile.
        let taken = match guard {
            Guard::Index => try_flock(&paths.store().join(".jbuild/index.lock"))
                .ok()
                .flatten(),
            Guard::DirSnapshots => try_flock(&paths.dir_snapshots().join("lock"))
                .ok()
                .flatten(),
            Guard::Store | Guard::Age | Guard::Process(_) => None,
        };
        let held = match guard {
            Guard::Store => lock.is_some(),
            Guard::Age => false,
            Guard::Process(pid) => !pid_alive(*pid),
            Guard::Index | Guard::DirSnapshots => taken.is_some(),
        };
        if !held && !is_stale(path) {
            done.push(Repaired::Left(format!(
                "left {}: a running jbuild process may be writing it",
                path.display()
            )));
            continue;
        }
        done.push(outcome(
            remove_path(path),
            format!("removed {}", path.display()),
            |e| format!("could not remove {}: {e}", path.display()),
        ));
        drop(taken);
    }

    if let Some(sn) = snapshotter {
        for (_, fix) in &fixes {
            match fix {
                Fix::RemoveSnapshot(name) => {
                    if SnapshotName::is_active(name) && owner_alive(name) {
                        done.push(Repaired::Left(format!(
                            "left snapshot {name}: its process is running"
                        )));
                        continue;
                    }
                    // A layer no image uses yet may be one a running pull
                    // has just unpacked and is about to name (its pin is
                    // the store lock, held shared: `image::pull`).
                    if SnapshotName::is_chain(name) && lock.is_none() {
                        done.push(Repaired::Left(format!(
                            "left unused layer {name}: other jbuild processes are adding content (a pull may be unpacking it); run `jbuild check --repair` again when they are done"
                        )));
                        continue;
                    }
                    done.push(outcome(
                        sn.remove(name),
                        format!("removed snapshot {name}"),
                        |e| format!("could not remove snapshot {name}: {e}"),
                    ));
                }
                Fix::RemoveLabels { snapshot, labels } => {
                    done.push(outcome(
                        sn.remove_labels(snapshot, labels),
                        format!(
                            "removed stale labels {} from snapshot {snapshot}",
                            labels.join(", ")
                        ),
                        |e| format!("could not remove labels from snapshot {snapshot}: {e}"),
                    ));
                }
                _ => {}
            }
        }
    }
    done
}

/// Removes `path` if it is a symlink; anything else there is left.
fn remove_symlink(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::remove_file(path),
        Ok(_) => Err(std::io::Error::other(
            "it is no longer a symlink: left as it is",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn remove_path(path: &Path) -> std::io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}
