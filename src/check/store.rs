//! Checking the image store: the layout files, `index.json`, every blob
//! (re-hashed, streaming), and everything the index reaches.
//!
//! A blob whose content does not match its name is *corrupt*; `--repair`
//! deletes it, so the next `jbuild pull` (or build) writes it again. A blob
//! the index reaches but the store lacks is *missing*. Both name the images
//! they break. Blobs nothing reaches are reclaimable, as `jbuild prune`
//! would count them — but only when every manifest and index on the way
//! could be read: otherwise the walk cannot tell what they refer to, and
//! nothing is offered for removal. While other jbuild processes are adding
//! content they are *pending* instead (they may be a running pull's), and
//! those a process names while the check runs are not listed at all
//! ([`super::adding`]).
//!
//! A file under `blobs/sha256/` whose name is not a digest is damage, not a
//! leftover: jbuild never writes one there (its temporary files live in
//! `.jbuild/tmp/`), OCI tools may refuse the layout because of it, and it is
//! not jbuild's to delete — the user moves it out.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::Path;

use oci_spec::image::ImageIndex;

use super::{Adding, CheckError, Facts, Finding, Fix, Report};
use crate::digest::{Digest, HashingReader};
use crate::fsutil::input::{InputError, Within};
use crate::image::gc::unreferenced_blobs;
use crate::image::MAX_DOCUMENT;
use crate::store::{Store, MAX_INDEX};

/// Checks the store at `dir`, adding findings to `report`; `adding` tells
/// whether blobs no image uses may be a running process's.
pub fn check(dir: &Path, adding: &Adding, report: &mut Report) -> Result<Facts, CheckError> {
    let mut facts = Facts::default();
    if !dir.is_dir() {
        report
            .notes
            .push(format!("there is no store at {} yet", dir.display()));
        facts.walk_complete = true;
        return Ok(facts);
    }
    let store = Store::open_unchecked(dir);
    if store.is_unfinished() {
        report.push(Finding::reclaimable(
            "unfinished-store",
            "the store's creation was interrupted (it has no oci-layout file and no blobs); the next jbuild command finishes it",
            dir.display().to_string(),
            Fix::FinishStore(dir.to_path_buf()),
        ).action("`jbuild check --repair` (or any command that uses the store) finishes it"));
        facts.walk_complete = true;
        return Ok(facts);
    }
    check_layout_file(dir, report);
    let index = read_index(dir, report);
    scan_blobs(&store, &mut facts, report)?;
    if let Some(index) = index {
        report.summary.images = index.manifests().len();
        let reachable = super::images::walk(&store, &index, &mut facts, report);
        if facts.walk_complete {
            let mut unreferenced: Vec<_> = facts
                .blobs
                .iter()
                .filter(|(d, _)| !reachable.contains(*d) && !facts.corrupt.contains(*d))
                .collect();
            unreferenced.sort();
            let (pending, unreferenced) = settle_unreferenced(&store, adding, unreferenced);
            for (d, size) in unreferenced {
                report.push(
                    Finding::reclaimable(
                        "unreferenced-blob",
                        format!("blob {d} is not used by any image"),
                        store.blob_path(d).display().to_string(),
                        Fix::CollectBlob(d.clone()),
                    )
                    .bytes(*size)
                    .pending_if(pending),
                );
            }
        } else {
            report.notes.push(
                "blobs no image uses are not counted while a manifest is damaged or missing".into(),
            );
        }
    }
    settle_corrupt(&facts, report);
    report.summary.blobs = facts.blobs.len();
    report.summary.blob_bytes = facts.blobs.values().sum();
    facts.store = Some(store);
    Ok(facts)
}

/// Whether the blobs the first walk found unreferenced are pending, and
/// those that still are. The index walked was read before the blobs were
/// listed, so it is read again *after* asking about the lock
/// ([`super::adding`]): a blob a process wrote and named while the blobs
/// were re-hashed is used, not reclaimable, and one it has not named yet
/// is pending. If the index cannot be walked again, the first walk stands.
pub(super) fn settle_unreferenced<'a>(
    store: &Store,
    adding: &Adding,
    unreferenced: Vec<(&'a Digest, &'a u64)>,
) -> (bool, Vec<(&'a Digest, &'a u64)>) {
    if unreferenced.is_empty() {
        return (false, unreferenced);
    }
    if adding.now() {
        return (true, unreferenced);
    }
    match unreferenced_blobs(store) {
        Ok(still) => {
            let still: HashSet<Digest> = still.into_iter().collect();
            let unreferenced = unreferenced
                .into_iter()
                .filter(|(d, _)| still.contains(*d))
                .collect();
            (false, unreferenced)
        }
        Err(e) => {
            tracing::debug!("cannot walk the index again: {e}");
            (false, unreferenced)
        }
    }
}

/// A corrupt blob names the images to fetch again; one no image uses is
/// only reclaimable. Other findings about a blob several images share name
/// all of them in what to do.
fn settle_corrupt(facts: &Facts, report: &mut Report) {
    for f in &mut report.findings {
        // A finding about a blob several images share names them all.
        let shared = [
            "missing-blob",
            "size-mismatch",
            "bad-manifest",
            "bad-config",
            "layer-count",
        ];
        let names: Vec<&str> = f
            .images
            .iter()
            .map(String::as_str)
            .filter(|i| !i.starts_with('<'))
            .collect();
        if shared.contains(&f.kind) && f.images.len() > 1 && !names.is_empty() {
            f.action = format!(
                "pull or build these images again: {} (`jbuild pull NAME`), or remove them with `jbuild rmi {}`",
                names.join(", "),
                names.join(" ")
            );
        }
        let Some(Fix::DeleteCorruptBlob(_)) = &f.fix else {
            continue;
        };
        if !f.images.is_empty() {
            let names: Vec<String> = f
                .images
                .iter()
                .filter(|i| !i.starts_with('<'))
                .map(|i| format!("`jbuild pull {i}`"))
                .collect();
            f.action = if names.is_empty() {
                "`jbuild check --repair` deletes it; then pull or build the image that used it again".into()
            } else {
                format!("`jbuild check --repair` deletes it; then fetch the image again ({}) or build it again", names.join(", "))
            };
        } else if facts.walk_complete {
            f.severity = super::Severity::Reclaimable;
            f.what.push_str(" (no image uses it)");
            f.action = "`jbuild check --repair` removes it".into();
        }
    }
}

fn check_layout_file(dir: &Path, report: &mut Report) {
    let path = dir.join("oci-layout");
    let location = path.display().to_string();
    let fix = Fix::WriteLayoutFile(path.clone());
    let read = Within::new(dir).read(Path::new("oci-layout"), MAX_DOCUMENT);
    let problem = match read {
        Err(InputError::Missing) => "the store's oci-layout file is missing".to_string(),
        Err(e) => format!("the store's oci-layout file cannot be read: {e}"),
        Ok(bytes) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => match v.get("imageLayoutVersion").and_then(|v| v.as_str()) {
                Some(ver) if ver.starts_with("1.") => return,
                Some(ver) => {
                    report.push(
                        Finding::damaged(
                            "layout-version",
                            format!("the store is an OCI layout of version {ver}, which jbuild does not read (1.x)"),
                            location,
                        )
                        .action("point $JBUILD_ROOT elsewhere, or move this store aside"),
                    );
                    return;
                }
                None => "the store's oci-layout file has no imageLayoutVersion".to_string(),
            },
            Err(e) => format!("the store's oci-layout file is not valid JSON ({e})"),
        },
    };
    report.push(
        Finding::damaged(
            "layout-file",
            format!("{problem}: OCI tools will not read the store"),
            location,
        )
        .action("`jbuild check --repair` writes it again ({\"imageLayoutVersion\":\"1.0.0\"})")
        .fix(fix),
    );
}

fn read_index(dir: &Path, report: &mut Report) -> Option<ImageIndex> {
    let path = dir.join("index.json");
    let location = path.display().to_string();
    let action = "restore index.json from a backup; blobs are not affected, but until then jbuild \
                  cannot tell which images the store holds (`jbuild check --repair` does not touch it)";
    // Bounded, and never waited on: a FIFO there is damage to report.
    let bytes = match Within::new(dir).read(Path::new("index.json"), MAX_INDEX) {
        Ok(b) => b,
        Err(e) => {
            let what = match e {
                InputError::Missing => "the store's index.json is missing".to_string(),
                e => format!("the store's index.json cannot be read: {e}"),
            };
            report.push(Finding::damaged("index", what, location).action(action));
            return None;
        }
    };
    match serde_json::from_slice::<ImageIndex>(&bytes) {
        Ok(i) => Some(i),
        Err(e) => {
            report.push(
                Finding::damaged(
                    "index",
                    format!("the store's index.json does not parse ({e})"),
                    location,
                )
                .action(action),
            );
            None
        }
    }
}

/// Re-hashes every file under `blobs/sha256/`, one buffer at a time.
fn scan_blobs(store: &Store, facts: &mut Facts, report: &mut Report) -> Result<(), CheckError> {
    let dir = store.path().join("blobs/sha256");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(CheckError::io(format!("cannot read {}", dir.display()), e)),
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| CheckError::io(format!("cannot read {}", dir.display()), e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().ok();
        let is_file = kind.is_some_and(|t| t.is_file());
        let digest = format!("sha256:{name}").parse::<Digest>().ok();
        let named_like_one = digest.is_some();
        let Some(digest) = digest.filter(|_| is_file) else {
            // What it is, when its name is a blob's: a FIFO or a symlink
            // in a blob's place is never opened (it would hang, or lead
            // out of the store).
            let what = match kind {
                Some(t) if named_like_one && !t.is_file() => {
                    format!("is {}, not a blob", node_kind(&t))
                }
                _ => "is not a blob".to_string(),
            };
            report.push(
                Finding::damaged(
                    "not-a-blob",
                    format!("`{name}` in the store's blob directory {what} (only files named by their sha256 digest belong there)"),
                    path.display().to_string(),
                )
                .action("move it out of the store: OCI tools may refuse the layout because of it"),
            );
            continue;
        };
        let file = match fs::File::open(&path) {
            Ok(f) => f,
            // Removed since the directory was listed (a prune): gone, not
            // damage, and not counted.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                report.push(
                    Finding::damaged(
                        "unreadable-blob",
                        format!("blob {digest} cannot be read: {e}"),
                        path.display().to_string(),
                    )
                    .action("check the file's permissions and the disk"),
                );
                continue;
            }
        };
        let mut reader = HashingReader::new(io::BufReader::with_capacity(1 << 20, file));
        if let Err(e) = io::copy(&mut reader, &mut io::sink()) {
            report.push(
                Finding::damaged("unreadable-blob", format!("blob {digest} cannot be read: {e}"), path.display().to_string())
                    .action("check the disk; `jbuild check --repair` deletes the blob, then pull or build what uses it again")
                    .fix(Fix::DeleteCorruptBlob(digest.clone())),
            );
            facts.corrupt.insert(digest.clone());
            facts.blobs.insert(digest, 0);
            continue;
        }
        let (actual, size, _) = reader.finish();
        if actual != digest {
            facts.corrupt.insert(digest.clone());
            report.push(
                Finding::damaged(
                    "corrupt-blob",
                    format!("blob {digest} is corrupt: its {size} bytes hash to {actual}"),
                    path.display().to_string(),
                )
                .action("`jbuild check --repair` deletes it; then pull or build the images that use it again")
                .fix(Fix::DeleteCorruptBlob(digest.clone()))
                .bytes(size),
            );
        }
        facts.blobs.insert(digest, size);
    }
    Ok(())
}

/// What a node of the blob directory is, for a finding.
fn node_kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match () {
        _ if t.is_symlink() => "a symlink",
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_socket() => "a socket",
        _ => "something else",
    }
}
