//! Blobs: written to a temporary file, checked, then renamed into place.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;

use tempfile::NamedTempFile;

use super::{blob_rel, Store, StoreError, BLOBS};
use crate::digest::{Digest, HashingReader, HashingWriter};
use crate::fsutil::input::InputError;

/// A blob being written. Bytes are hashed as they pass; [`commit`] makes the
/// blob visible under its digest, and dropping the writer without committing
/// removes the temporary file.
///
/// [`commit`]: BlobWriter::commit
pub struct BlobWriter {
    store: Store,
    /// Whether the blob is fsynced before its rename ([`Store::syncs`]).
    sync: bool,
    inner: HashingWriter<BufWriter<NamedTempFile>>,
    /// The blob's writeback, started as it is written when it is to be
    /// synced (now or with its staged layout), so that the fsync in
    /// [`BlobWriter::commit`] or the layout's one sync finds little left
    /// to write (a large layer's export: issue 31; a small copy: 34).
    writeback: Option<crate::fsutil::durable::Writeback>,
}

impl Write for BlobWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(wb) = &mut self.writeback {
            let buffered = self.inner.get_ref();
            let in_file = self.inner.count() - buffered.buffer().len() as u64;
            wb.wrote(buffered.get_ref().as_file(), in_file);
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl BlobWriter {
    /// Finishes the blob: fsync, check against `expected` (if given), and
    /// rename to `blobs/sha256/<hex>`. The rename is made durable with the
    /// next change of `index.json` ([`Store::update_index`] fsyncs the
    /// directory first), once for all the blobs of an image rather than
    /// once per blob: a blob whose rename a crash loses is simply absent,
    /// and nothing durable names it yet. If the store already has the blob,
    /// ours is discarded (the content is the same). On a mismatch nothing is
    /// left behind.
    pub fn commit(self, expected: Option<&Digest>) -> Result<(Digest, u64), StoreError> {
        let (digest, size, buffered) = self.inner.finish();
        let tmp = buffered
            .into_inner()
            .map_err(|e| StoreError::io("cannot write a blob to the store", e.into_error()))?;
        if let Some(expected) = expected {
            if *expected != digest {
                return Err(StoreError::DigestMismatch {
                    expected: expected.clone(),
                    actual: digest,
                    size,
                });
            }
        }
        if self.store.has_blob(&digest) {
            return Ok((digest, size));
        }
        let target = self.store.blobs_dir()?.join(digest.hex());
        if self.sync {
            sync_file(tmp.as_file(), tmp.path())?;
        } else if let Some(wb) = &self.writeback {
            // Synced later with its staged layout: the rest of its
            // writeback starts now, and goes on while the command writes
            // what follows (the other blobs, the index).
            crate::fsutil::durable::start(tmp.as_file(), wb.started(), 0);
            crate::fsutil::record("writeback", &target);
        }
        tmp.persist(&target).map_err(|e| {
            StoreError::io(
                format!("cannot move a blob into {}", target.display()),
                e.error,
            )
        })?;
        Ok((digest, size))
    }
}

/// fsyncs a blob's temporary file before its rename.
fn sync_file(file: &File, path: &std::path::Path) -> Result<(), StoreError> {
    file.sync_all()
        .map_err(|e| StoreError::io(format!("cannot write {}", path.display()), e))?;
    crate::fsutil::record_sync(path);
    Ok(())
}

impl Store {
    /// Whether the store has the blob `d`: a regular file at its place,
    /// reached through real directories (a symlink there is no blob).
    pub fn has_blob(&self, d: &Digest) -> bool {
        self.blob_len(d).is_some()
    }

    /// The size of blob `d`, if [`Store::has_blob`].
    pub fn blob_len(&self, d: &Digest) -> Option<u64> {
        self.within().regular_len(&blob_rel(d))
    }

    /// `blobs/sha256/`, made if missing, to move a blob into: a real
    /// directory, never a symlink, which a rename would write through
    /// ([`crate::fsutil::places`]).
    pub(super) fn blobs_dir(&self) -> Result<PathBuf, StoreError> {
        Ok(crate::fsutil::places::own_dir(&self.root, BLOBS)?)
    }

    /// Whether blob `d` is there and its bytes still hash to its name (read
    /// through once, one buffer at a time). `jbuild check` reports the same
    /// for every blob; this is for one blob a command has doubts about.
    pub fn blob_is_sound(&self, d: &Digest) -> bool {
        let Ok(file) = self.open_blob(d) else {
            return false;
        };
        let mut reader = HashingReader::new(io::BufReader::with_capacity(1 << 20, file));
        io::copy(&mut reader, &mut io::sink()).is_ok() && reader.finish().0 == *d
    }

    /// A writer for a new blob, in a temporary file under `.jbuild/tmp/`.
    pub fn blob_writer(&self) -> Result<BlobWriter, StoreError> {
        let dir = self.private_dir("tmp")?;
        let tmp = tempfile::Builder::new()
            .prefix("blob-")
            .tempfile_in(&dir)
            .map_err(|e| {
                StoreError::io(
                    format!("cannot create a temporary file in {}", dir.display()),
                    e,
                )
            })?;
        Ok(BlobWriter {
            store: self.clone(),
            sync: self.syncs(),
            inner: HashingWriter::new(BufWriter::with_capacity(256 * 1024, tmp)),
            writeback: self
                .reaches_disk()
                .then(crate::fsutil::durable::Writeback::new),
        })
    }

    /// A temporary file in the store (`.jbuild/tmp/`), for a blob that a
    /// transport fetches and checks itself before [`Store::adopt_blob`]
    /// moves it into place without copying it again.
    pub fn blob_tempfile(&self) -> Result<NamedTempFile, StoreError> {
        let dir = self.private_dir("tmp")?;
        tempfile::Builder::new()
            .prefix("blob-")
            .tempfile_in(&dir)
            .map_err(|e| {
                StoreError::io(
                    format!("cannot create a temporary file in {}", dir.display()),
                    e,
                )
            })
    }

    /// Makes `file` (from [`Store::blob_tempfile`]) the blob `digest`:
    /// fsync and rename (made durable with the next change of `index.json`,
    /// as in [`BlobWriter::commit`]). The caller has checked its content
    /// against `digest` while writing it; an existing blob is kept.
    pub fn adopt_blob(&self, file: NamedTempFile, digest: &Digest) -> Result<(), StoreError> {
        if self.has_blob(digest) {
            return Ok(());
        }
        if self.syncs() {
            sync_file(file.as_file(), file.path())?;
        }
        let target = self.blobs_dir()?.join(digest.hex());
        file.persist(&target).map_err(|e| {
            StoreError::io(
                format!("cannot move a blob into {}", target.display()),
                e.error,
            )
        })?;
        Ok(())
    }

    /// Stores `bytes` as a blob.
    pub fn put_bytes(&self, bytes: &[u8]) -> Result<(Digest, u64), StoreError> {
        let mut w = self.blob_writer()?;
        w.write_all(bytes)
            .map_err(|e| StoreError::io("cannot write a blob to the store", e))?;
        w.commit(None)
    }

    /// Reads a whole blob that is at most `max` bytes (a manifest, a
    /// config), checking it against its digest.
    pub fn read_blob(&self, d: &Digest, max: u64) -> Result<Vec<u8>, StoreError> {
        let (file, size) = self.open_blob_within(d, max)?;
        let path = self.blob_path(d);
        let mut reader = HashingReader::new(file.take(max + 1));
        let mut bytes = Vec::with_capacity(size as usize);
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| StoreError::io(format!("cannot read {}", path.display()), e))?;
        let (actual, n, _) = reader.finish();
        if n > max {
            return Err(StoreError::TooLarge {
                digest: d.clone(),
                size: n,
                max,
            });
        }
        if actual != *d {
            return Err(StoreError::Corrupt {
                path,
                reason: format!("its content has digest {actual}, not the one it is named by"),
            });
        }
        Ok(bytes)
    }

    /// Opens a blob for streaming: a regular file reached through real
    /// directories, never through a symlink, a FIFO or a device (refused
    /// at once). The caller checks the digest if the bytes leave the
    /// store (the transports do).
    pub fn open_blob(&self, d: &Digest) -> Result<File, StoreError> {
        self.open_blob_within(d, u64::MAX).map(|(f, _)| f)
    }

    /// [`Store::open_blob`] of a blob of at most `max` bytes, with its size.
    fn open_blob_within(&self, d: &Digest, max: u64) -> Result<(File, u64), StoreError> {
        self.within().open(&blob_rel(d), max).map_err(|e| match e {
            InputError::Missing => StoreError::BlobNotFound {
                digest: d.clone(),
                path: self.blob_path(d),
            },
            InputError::TooLarge { size, max } => StoreError::TooLarge {
                digest: d.clone(),
                size,
                max,
            },
            InputError::Io(e) => {
                StoreError::io(format!("cannot open {}", self.blob_path(d).display()), e)
            }
            e => self.refused(blob_rel(d), e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tmp_files(s: &Store) -> usize {
        fs::read_dir(s.path().join(".jbuild/tmp")).map_or(0, |d| d.count())
    }

    #[test]
    fn put_and_read() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (d, n) = s.put_bytes(b"hello").unwrap();
        assert_eq!((d.clone(), n), (Digest::of(b"hello"), 5));
        assert!(s.has_blob(&d));
        assert_eq!(s.read_blob(&d, 5).unwrap(), b"hello");
        assert!(matches!(
            s.read_blob(&d, 4),
            Err(StoreError::TooLarge { .. })
        ));
        assert_eq!(
            s.put_bytes(b"hello").unwrap(),
            (d.clone(), 5),
            "writing it again is fine"
        );
        let mut f = s.open_blob(&d).unwrap();
        let mut back = String::new();
        f.read_to_string(&mut back).unwrap();
        assert_eq!(back, "hello");
        assert_eq!(tmp_files(&s), 0);

        let missing = Digest::of(b"nope");
        assert!(!s.has_blob(&missing));
        assert!(matches!(
            s.read_blob(&missing, 10),
            Err(StoreError::BlobNotFound { .. })
        ));
    }

    #[test]
    fn mismatch_is_refused_and_leaves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let mut w = s.blob_writer().unwrap();
        w.write_all(b"evil").unwrap();
        let expected = Digest::of(b"good");
        let err = w.commit(Some(&expected)).unwrap_err();
        assert!(matches!(err, StoreError::DigestMismatch { .. }), "{err}");
        assert!(!s.has_blob(&expected) && !s.has_blob(&Digest::of(b"evil")));
        assert_eq!(tmp_files(&s), 0);
        assert_eq!(
            fs::read_dir(t.path().join("blobs/sha256")).unwrap().count(),
            0
        );

        let mut w = s.blob_writer().unwrap();
        w.write_all(b"abandoned").unwrap();
        drop(w);
        assert_eq!(tmp_files(&s), 0);
    }

    #[test]
    fn corrupt_blob_is_detected_on_read() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (d, _) = s.put_bytes(b"{}").unwrap();
        fs::write(s.blob_path(&d), b"[]").unwrap();
        assert!(matches!(
            s.read_blob(&d, 100),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
