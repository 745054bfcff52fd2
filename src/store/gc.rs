//! Finding and removing blobs nothing refers to.

use std::collections::HashSet;
use std::fs;
use std::time::{Duration, SystemTime};

use oci_spec::image::Descriptor;

use super::json::{DocKind, Document, MAX_MANIFEST_SIZE};
use super::lock::StoreLock;
use super::{descriptor_digest, Store, StoreError};
use crate::digest::Digest;

/// Temporary blob files untouched for this long belong to a process that
/// died; younger ones may still be written by a live one.
pub const STALE_TMP: Duration = Duration::from_secs(3600);

impl Store {
    /// Blobs that nothing in `index.json` reaches: the walk goes from the
    /// index's entries through nested indexes to manifests, and from those
    /// to configs, layers and subjects. A manifest that is referenced but
    /// missing is skipped (a layout may be partial); one that does not parse
    /// is an error, because guessing could delete what it refers to.
    ///
    /// Call it under [`StoreLock::exclusive`] if the result is used to
    /// delete, as [`prune`](Store::prune) does.
    pub fn unreferenced_blobs(&self) -> Result<Vec<Digest>, StoreError> {
        let mut reachable = HashSet::new();
        let mut todo: Vec<(Digest, Descriptor)> = self.index_roots()?;
        while let Some((digest, desc)) = todo.pop() {
            if !reachable.insert(digest.clone()) || !self.has_blob(&digest) {
                continue;
            }
            for child in self.children_of(&digest, &desc)? {
                todo.push((descriptor_digest(&child)?, child));
            }
        }
        let dir = self.root.join("blobs/sha256");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(format!("cannot read {}", dir.display()), e)),
        };
        let mut unreferenced = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| StoreError::io(format!("cannot read {}", dir.display()), e))?;
            // Files not named by a digest are not blobs, and not ours to delete.
            let Ok(d) = format!("sha256:{}", entry.file_name().to_string_lossy()).parse::<Digest>()
            else {
                continue;
            };
            if !reachable.contains(&d) {
                unreferenced.push(d);
            }
        }
        unreferenced.sort();
        Ok(unreferenced)
    }

    /// What the blob `digest`, described by `desc`, points at. Only
    /// manifests and indexes point at anything.
    fn children_of(
        &self,
        digest: &Digest,
        desc: &Descriptor,
    ) -> Result<Vec<Descriptor>, StoreError> {
        if DocKind::of(desc.media_type()).is_none() {
            return Ok(Vec::new());
        }
        let bytes = self.read_blob(digest, MAX_MANIFEST_SIZE)?;
        let doc = Document::parse(desc, &bytes).map_err(|reason| StoreError::Corrupt {
            path: self.blob_path(digest),
            reason,
        })?;
        Ok(doc.children().into_iter().cloned().collect())
    }

    /// Deletes a blob. Deleting one that is not there is not an error.
    /// Whether anything still refers to it is the caller's business.
    pub fn remove_blob(&self, d: &Digest) -> Result<(), StoreError> {
        let path = self.blob_path(d);
        // The registry repositories remembered for it (a hint for mounts).
        let _ = fs::remove_file(self.root.join(".jbuild/origins").join(d.hex()));
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(
                format!("cannot remove {}", path.display()),
                e,
            )),
        }
    }

    /// Removes every unreferenced blob, and temporary files that dead
    /// processes left, under the exclusive store lock. Returns what was
    /// removed.
    pub fn prune(&self) -> Result<Vec<Digest>, StoreError> {
        let lock = StoreLock::exclusive(self)?;
        Ok(self
            .prune_locked(&lock)?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }

    /// [`prune`](Store::prune) for a caller that already holds the
    /// exclusive store lock (`jbuild prune`, `jbuild check --repair`); each
    /// removed blob comes with its size.
    pub fn prune_locked(&self, _exclusive: &StoreLock) -> Result<Vec<(Digest, u64)>, StoreError> {
        let mut removed = Vec::new();
        for d in self.unreferenced_blobs()? {
            let size = fs::metadata(self.blob_path(&d)).map_or(0, |m| m.len());
            self.remove_blob(&d)?;
            removed.push((d, size));
        }
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
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{canonical_json, oci_digest, ImageName};
    use oci_spec::image::{ImageIndexBuilder, ImageManifestBuilder, MediaType};

    fn put(s: &Store, mt: MediaType, bytes: &[u8]) -> Descriptor {
        let (d, n) = s.put_bytes(bytes).unwrap();
        Descriptor::new(mt, n, oci_digest(&d))
    }

    fn put_manifest(s: &Store, tag: &str) -> (Descriptor, Vec<Digest>) {
        let config = put(
            s,
            MediaType::ImageConfig,
            format!("{{\"tag\":\"{tag}\"}}").as_bytes(),
        );
        let layer = put(
            s,
            MediaType::ImageLayerGzip,
            format!("layer of {tag}").as_bytes(),
        );
        let m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(config.clone())
            .layers(vec![layer.clone()])
            .build()
            .unwrap();
        let desc = put(s, MediaType::ImageManifest, &canonical_json(&m));
        let digests = [&desc, &config, &layer]
            .map(|d| descriptor_digest(d).unwrap())
            .to_vec();
        (desc, digests)
    }

    #[test]
    fn walks_manifests_and_nested_indexes() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (direct, direct_blobs) = put_manifest(&s, "direct");
        let (nested, nested_blobs) = put_manifest(&s, "nested");
        let (_, orphan_blobs) = put_manifest(&s, "orphan");
        let inner = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![nested])
            .build()
            .unwrap();
        let inner = put(&s, MediaType::ImageIndex, &canonical_json(&inner));
        let outer = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![inner.clone()])
            .build()
            .unwrap();
        let outer = put(&s, MediaType::ImageIndex, &canonical_json(&outer));
        s.tag(&ImageName::parse("direct").unwrap(), &direct)
            .unwrap();
        s.add_untagged(&outer).unwrap();
        // A referenced manifest that is missing is no reason to fail.
        s.tag_ref(
            "gone",
            &Descriptor::new(
                MediaType::ImageManifest,
                1,
                oci_digest(&Digest::of(b"gone")),
            ),
        )
        .unwrap();
        fs::write(t.path().join("blobs/sha256/not-a-digest"), "x").unwrap();

        let mut orphans = orphan_blobs.clone();
        orphans.sort();
        assert_eq!(s.unreferenced_blobs().unwrap(), orphans);
        assert_eq!(s.prune().unwrap(), orphans);
        assert!(s.unreferenced_blobs().unwrap().is_empty());
        for d in direct_blobs.iter().chain(&nested_blobs) {
            assert!(s.has_blob(d), "{d} was kept");
        }
        assert!(s.has_blob(&descriptor_digest(&inner).unwrap()));
        assert!(t.path().join("blobs/sha256/not-a-digest").exists());

        // Untagging the last name makes the image collectable.
        s.untag(&ImageName::parse("direct").unwrap()).unwrap();
        assert_eq!(s.unreferenced_blobs().unwrap().len(), 3);
    }

    #[test]
    fn corrupt_manifest_stops_the_walk() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let bad = put(&s, MediaType::ImageManifest, b"{\"schemaVersion\":");
        s.tag_ref("bad", &bad).unwrap();
        assert!(matches!(
            s.unreferenced_blobs(),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
