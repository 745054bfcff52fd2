//! Removing content: blobs, and temporary files dead processes left. What
//! to remove is decided above the store ([`crate::image::gc`] walks the
//! images); the store only lists and deletes.

use std::fs;
use std::time::{Duration, SystemTime};

use super::{Store, StoreError};
use crate::digest::Digest;
use crate::fsutil::places::existing_own_dir;

/// Temporary blob files untouched for this long belong to a process that
/// died; younger ones may still be written by a live one.
pub const STALE_TMP: Duration = Duration::from_secs(3600);

impl Store {
    /// The digests of every blob file in the store, in no order. Files not
    /// named by a digest are not blobs, and not listed. A `blobs/sha256`
    /// that is a symlink is refused ([`crate::fsutil::places`]).
    pub fn blob_digests(&self) -> Result<Vec<Digest>, StoreError> {
        // Never through a symlink: what is listed here may be removed.
        let Some(dir) = existing_own_dir(&self.root, "blobs/sha256")? else {
            return Ok(Vec::new());
        };
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(format!("cannot read {}", dir.display()), e)),
        };
        let mut digests = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| StoreError::io(format!("cannot read {}", dir.display()), e))?;
            if let Ok(d) = format!("sha256:{}", entry.file_name().to_string_lossy()).parse() {
                digests.push(d);
            }
        }
        Ok(digests)
    }

    /// Deletes a blob. Deleting one that is not there is not an error.
    /// Whether anything still refers to it is the caller's business.
    pub fn remove_blob(&self, d: &Digest) -> Result<(), StoreError> {
        let path = self.blob_path(d);
        // The registry repositories remembered for it (a hint for mounts),
        // and its unpacked size, remembered by `jbuild images`: only in
        // the store's own directories, never through a symlink.
        for notes in ["origins", "sizes"] {
            if let Some(dir) = self.existing_private_dir(notes) {
                let _ = fs::remove_file(dir.join(d.hex()));
            }
        }
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(
                format!("cannot remove {}", path.display()),
                e,
            )),
        }
    }

    /// Removes the temporary blob files in `.jbuild/tmp` untouched for
    /// [`STALE_TMP`], but not partial blobs, which have bounds of their
    /// own (`super::partial`). Best effort: one that cannot be removed stays for
    /// the next time. A `.jbuild/tmp` that is not a real directory is left
    /// alone (`jbuild check` reports it).
    pub fn remove_stale_tmp(&self) {
        let Some(tmp) = self.existing_private_dir("tmp") else {
            return;
        };
        let now = SystemTime::now();
        for entry in fs::read_dir(&tmp).into_iter().flatten().flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(super::PARTIAL_PREFIX)
            {
                continue;
            }
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_TMP);
            if stale {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}
