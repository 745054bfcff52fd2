//! `oci-archive:FILE`: an OCI image layout in a tar file, as skopeo and
//! podman write it.
//!
//! Reading extracts the archive once into a temporary directory (removed
//! when the transport is dropped) and reads
//! that as a layout. The archive is treated as hostile: only directories
//! and regular files are accepted, every path must stay inside (no
//! absolute paths, no `..`), and nothing is extracted over anything else;
//! blobs are then checked against their digests like any others.
//!
//! Writing builds a layout in a temporary directory beside FILE and, at
//! `finish`, writes it as a tar — sorted entries, owner 0, fixed modes and
//! mtime 0, so the same image gives the same archive bytes — to a
//! temporary file that is renamed over FILE. An existing FILE is replaced,
//! not added to (as skopeo does).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter};
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use oci_spec::image::Descriptor;
use tempfile::TempDir;
use tokio::sync::OnceCell;

use super::{blocking, LayoutTransport, ManifestRole, Progress, Transport, TransportError};
use crate::fsutil::sync_dir;

/// An OCI archive file as a transport.
pub struct ArchiveTransport {
    file: PathBuf,
    /// The extracted archive, when read from.
    reader: OnceCell<Staged>,
    /// The layout being built, when written to.
    writer: OnceCell<Staged>,
}

/// A layout in a temporary directory, removed with it.
struct Staged {
    _dir: TempDir,
    layout: LayoutTransport,
}

impl ArchiveTransport {
    pub fn new(file: PathBuf) -> ArchiveTransport {
        ArchiveTransport {
            file,
            reader: OnceCell::new(),
            writer: OnceCell::new(),
        }
    }

    fn location(&self) -> String {
        format!("oci-archive:{}", self.file.display())
    }

    async fn reader(&self) -> Result<&LayoutTransport, TransportError> {
        let staged = self
            .reader
            .get_or_try_init(|| {
                let (file, location) = (self.file.clone(), self.location());
                blocking(move || {
                    // Not beside the archive: it may be on a read-only mount.
                    let dir = tempfile::Builder::new()
                        .prefix("jbuild-archive-")
                        .tempdir()
                        .map_err(|e| {
                            TransportError::io("cannot create a temporary directory", e)
                        })?;
                    extract(&file, dir.path(), &location)?;
                    let layout = LayoutTransport::new(dir.path().to_path_buf());
                    Ok(Staged { _dir: dir, layout })
                })
            })
            .await?;
        Ok(&staged.layout)
    }

    async fn writer(&self) -> Result<&LayoutTransport, TransportError> {
        let staged = self
            .writer
            .get_or_try_init(|| {
                let file = self.file.clone();
                blocking(move || {
                    let dir = temp_dir_beside(&file)?;
                    let layout = LayoutTransport::new(dir.path().join("layout"));
                    Ok(Staged { _dir: dir, layout })
                })
            })
            .await?;
        Ok(&staged.layout)
    }
}

fn temp_dir_beside(file: &Path) -> Result<TempDir, TransportError> {
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::Builder::new()
        .prefix(".jbuild-archive-")
        .tempdir_in(parent)
        .map_err(|e| {
            TransportError::io(
                format!(
                    "cannot create a temporary directory in {}",
                    parent.display()
                ),
                e,
            )
        })
}

#[async_trait]
impl Transport for ArchiveTransport {
    fn describe(&self) -> String {
        self.location()
    }

    async fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError> {
        self.reader()
            .await?
            .resolve(reference)
            .await
            .map_err(|e| relocate(e, &self.location()))
    }

    async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
        self.reader()
            .await?
            .fetch_manifest(desc)
            .await
            .map_err(|e| relocate(e, &self.location()))
    }

    /// Whether the archive being written has the blob: the archive is
    /// written whole, so what an existing FILE holds does not count.
    async fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
        self.writer().await?.has_blob(desc).await
    }

    async fn fetch_blob(
        &self,
        desc: &Descriptor,
        dest: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        self.reader()
            .await?
            .fetch_blob(desc, dest, progress)
            .await
            .map_err(|e| relocate(e, &self.location()))
    }

    async fn push_blob(
        &self,
        desc: &Descriptor,
        src: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        self.writer().await?.push_blob(desc, src, progress).await
    }

    async fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        role: ManifestRole<'_>,
    ) -> Result<(), TransportError> {
        self.writer().await?.push_manifest(bytes, desc, role).await
    }

    async fn finish(&self) -> Result<(), TransportError> {
        let Some(staged) = self.writer.get() else {
            return Ok(());
        };
        staged.layout.finish().await?;
        let (layout, file) = (staged.layout.path().to_path_buf(), self.file.clone());
        blocking(move || write_archive(&layout, &file)).await
    }
}

/// Errors from the extracted copy name the archive, not the temporary
/// directory.
fn relocate(e: TransportError, location: &str) -> TransportError {
    match e {
        TransportError::NotFound { reference, .. } => TransportError::NotFound {
            location: location.into(),
            reference,
        },
        TransportError::Mismatch {
            what,
            expected,
            actual,
            ..
        } => TransportError::Mismatch {
            location: location.into(),
            what,
            expected,
            actual,
        },
        TransportError::Invalid { what, reason, .. } => TransportError::Invalid {
            location: location.into(),
            what,
            reason,
        },
        TransportError::TooLarge {
            what, size, max, ..
        } => TransportError::TooLarge {
            location: location.into(),
            what,
            size,
            max,
        },
        other => other,
    }
}

/// Extracts the archive's directories and regular files into `into`.
fn extract(archive: &Path, into: &Path, location: &str) -> Result<(), TransportError> {
    let bad = |what: String, reason: &str| TransportError::Invalid {
        location: location.to_string(),
        what,
        reason: reason.to_string(),
    };
    let read_err = |e| TransportError::io(format!("cannot read {}", archive.display()), e);
    let file = File::open(archive).map_err(read_err)?;
    let mut tar = tar::Archive::new(BufReader::new(file));
    for entry in tar.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let raw = entry.path().map_err(read_err)?.into_owned();
        let what = format!("archive entry `{}`", raw.display());
        let mut rel = PathBuf::new();
        for c in raw.components() {
            match c {
                Component::Normal(n) => rel.push(n),
                Component::CurDir => {}
                _ => return Err(bad(what, "its path leaves the archive")),
            }
        }
        if rel.as_os_str().is_empty() {
            continue;
        }
        let dest = into.join(&rel);
        let write_err = |e| {
            TransportError::io(
                format!("cannot extract {} to {}", raw.display(), dest.display()),
                e,
            )
        };
        match entry.header().entry_type() {
            tar::EntryType::Directory => fs::create_dir_all(&dest).map_err(write_err)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = dest.parent() {
                    fs::create_dir_all(parent).map_err(write_err)?;
                }
                let mut out = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&dest)
                    .map_err(write_err)?;
                io::copy(&mut entry, &mut out).map_err(write_err)?;
            }
            other => {
                return Err(bad(
                    what,
                    &format!("it is a {other:?}; an OCI archive holds only files and directories"),
                ))
            }
        }
    }
    Ok(())
}

/// Writes the layout at `layout` as a deterministic tar, atomically, to
/// `dest`.
fn write_archive(layout: &Path, dest: &Path) -> Result<(), TransportError> {
    let blobs = layout.join("blobs/sha256");
    let read_err = |e| TransportError::io(format!("cannot read {}", blobs.display()), e);
    let mut names: Vec<String> = Vec::new();
    for entry in fs::read_dir(&blobs).map_err(read_err)? {
        names.push(
            entry
                .map_err(read_err)?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    names.sort();
    // Byte order of the paths in the archive.
    let mut entries: Vec<(String, Option<PathBuf>)> =
        vec![("blobs/".into(), None), ("blobs/sha256/".into(), None)];
    entries.extend(
        names
            .iter()
            .map(|n| (format!("blobs/sha256/{n}"), Some(blobs.join(n)))),
    );
    entries.push(("index.json".into(), Some(layout.join("index.json"))));
    entries.push(("oci-layout".into(), Some(layout.join("oci-layout"))));

    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let write_err = |e| TransportError::io(format!("cannot write {}", dest.display()), e);
    let tmp = tempfile::Builder::new()
        .prefix(".jbuild-archive-")
        .tempfile_in(parent)
        .map_err(write_err)?;
    let mut tar = tar::Builder::new(BufWriter::new(tmp));
    for (name, source) in &entries {
        let mut header = tar::Header::new_ustar();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        match source {
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                tar.append_data(&mut header, name, io::empty())
                    .map_err(write_err)?;
            }
            Some(path) => {
                let file = File::open(path).map_err(write_err)?;
                let size = file.metadata().map_err(write_err)?.len();
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(0o644);
                header.set_size(size);
                tar.append_data(&mut header, name, file)
                    .map_err(write_err)?;
            }
        }
    }
    let buffered = tar.into_inner().map_err(write_err)?;
    let tmp = buffered
        .into_inner()
        .map_err(|e| write_err(e.into_error()))?;
    tmp.as_file().sync_all().map_err(write_err)?;
    tmp.persist(dest).map_err(|e| write_err(e.error))?;
    sync_dir(parent).map_err(write_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive_with(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> (TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        let path = t.path().join("a.tar");
        fs::write(&path, b.into_inner().unwrap()).unwrap();
        (t, path)
    }

    fn header(kind: tar::EntryType, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        h
    }

    #[test]
    fn hostile_archives_are_refused() {
        let out = tempfile::tempdir().unwrap();
        // `..` in a path (written raw: the tar crate refuses to build one).
        let (_t, path) = archive_with(|b| {
            let mut h = header(tar::EntryType::Regular, 1);
            h.as_old_mut().name[..9].copy_from_slice(b"../escape");
            h.set_cksum();
            b.append(&h, &b"x"[..]).unwrap();
        });
        let err = extract(&path, out.path(), "t").unwrap_err();
        assert!(err.to_string().contains("leaves the archive"), "{err}");
        assert!(!out.path().parent().unwrap().join("escape").exists());

        let (_t, path) = archive_with(|b| {
            let mut h = header(tar::EntryType::Symlink, 0);
            b.append_link(&mut h, "blobs", "/etc").unwrap();
        });
        let err = extract(&path, out.path(), "t").unwrap_err();
        assert!(err.to_string().contains("Symlink"), "{err}");

        // The same file twice cannot overwrite the first.
        let (_t, path) = archive_with(|b| {
            for content in [&b"a"[..], &b"b"[..]] {
                let mut h = header(tar::EntryType::Regular, 1);
                b.append_data(&mut h, "oci-layout", content).unwrap();
            }
        });
        assert!(extract(&path, out.path(), "t").is_err());
    }
}
