//! Removing content: blobs, and temporary files dead processes left. What
//! to remove is decided above the store ([`crate::image::gc`] walks the
//! images); the store only lists and deletes.

use std::fs;
use std::time::{Duration, SystemTime};

use super::{Store, StoreError};
use crate::digest::Digest;

/// Temporary blob files untouched for this long belong to a process that
/// died; younger ones may still be written by a live one.
pub const STALE_TMP: Duration = Duration::from_secs(3600);

impl Store {
    /// The digests of every blob file in the store, in no order. Files not
    /// named by a digest are not blobs, and not listed.
    pub fn blob_digests(&self) -> Result<Vec<Digest>, StoreError> {
        let dir = self.root.join("blobs/sha256");
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
        // The registry repositories remembered for it (a hint for mounts).
        let _ = fs::remove_file(self.root.join(".jbuild/origins").join(d.hex()));
        // Its unpacked size, remembered by `jbuild images`.
        let _ = fs::remove_file(self.root.join(".jbuild/sizes").join(d.hex()));
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
    /// [`STALE_TMP`]. Best effort: one that cannot be removed stays for
    /// the next time.
    pub fn remove_stale_tmp(&self) {
        let tmp = self.root.join(".jbuild/tmp");
        let now = SystemTime::now();
        for entry in fs::read_dir(&tmp).into_iter().flatten().flatten() {
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
