//! `oci-archive:FILE`: an OCI image layout in a tar file, as skopeo and
//! podman write it; `oci-archive:-` is standard input when read from and
//! standard output when written to, so an image can go through a pipe
//! (`jbuild export web oci-archive:- | ssh host jbuild import oci-archive:-`).
//!
//! Reading stages the archive once, as it comes, into a temporary
//! directory (removed when the transport is dropped) and reads that as a
//! layout; the archive is hostile input, read in bounded memory and disk
//! ([`read`] says what is bounded by what). Blobs are then checked against
//! their descriptors like any others.
//!
//! Writing builds a layout in a temporary directory (beside FILE, or in
//! the system's temporary directory for a stream) and, at `finish`,
//! writes it as one deterministic tar stream ([`write`]) the way every
//! path the user names is written ([`crate::fsutil::output`]): a regular
//! FILE (or a symlink to one) through a temporary file renamed over it, a
//! FIFO or character device (`/dev/stdout` on a pipe) in place, `-` to
//! standard output. An existing regular FILE is replaced, not added to (as
//! skopeo does). A terminal is refused, as docker does.

use std::fs::File;
use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use oci_spec::image::Descriptor;
use tempfile::TempDir;
use tokio::sync::OnceCell;

use super::{blocking, LayoutTransport, ManifestRole, Progress, Transport, TransportError};
use crate::fsutil::output::{Output, Target};
use crate::layer::Limits;

pub mod read;
mod write;

pub use read::ArchiveError;

/// The path that means standard input or output.
pub const STDIO: &str = "-";

/// An OCI archive file as a transport.
pub struct ArchiveTransport {
    file: PathBuf,
    /// The extracted archive, when read from.
    reader: OnceCell<Staged>,
    /// The layout being built, when written to.
    writer: OnceCell<Staged>,
    limits: Limits,
}

/// A layout in a temporary directory, removed with it.
struct Staged {
    _dir: TempDir,
    layout: LayoutTransport,
    /// Where it goes, when written.
    output: Option<Output>,
}

impl ArchiveTransport {
    pub fn new(file: PathBuf) -> ArchiveTransport {
        ArchiveTransport {
            file,
            reader: OnceCell::new(),
            writer: OnceCell::new(),
            limits: Limits::default(),
        }
    }

    /// Reading is held to `limits` (those of a layer by default).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn location(&self) -> String {
        format!("oci-archive:{}", self.file.display())
    }

    /// An error of the extracted copy, as the archive's.
    fn relocate(&self, e: TransportError) -> TransportError {
        let staged = self.reader.get().map(|s| s.layout.path());
        relocate(e, &self.location(), staged)
    }

    /// An error writing the staging layout `layout`, naming the archive
    /// being written instead (the user named it, and a full disk is its).
    fn written(&self, e: TransportError, layout: &LayoutTransport) -> TransportError {
        match e {
            TransportError::Io { context, source } => TransportError::Io {
                context: context.replace(&layout.describe(), &self.location()),
                source,
            },
            other => other,
        }
    }

    fn stdio(&self) -> bool {
        self.file.as_os_str() == STDIO
    }

    fn refuse_terminal(&self, what: &str) -> TransportError {
        TransportError::Invalid {
            location: self.location(),
            what: what.into(),
            reason: "it is a terminal; redirect it to a file or a pipe (`> image.tar`, `| ssh …`)"
                .into(),
        }
    }

    async fn reader(&self) -> Result<&LayoutTransport, TransportError> {
        if self.stdio() && self.reader.get().is_none() && io::stdin().is_terminal() {
            return Err(self.refuse_terminal("standard input"));
        }
        let staged = self
            .reader
            .get_or_try_init(|| {
                let (file, location) = (self.file.clone(), self.location());
                let (stdio, limits) = (self.stdio(), self.limits);
                blocking(move || {
                    // Not beside the archive: it may be on a read-only mount.
                    let dir = tempfile::Builder::new()
                        .prefix("jbuild-archive-")
                        .tempdir()
                        .map_err(|e| {
                            TransportError::io("cannot create a temporary directory", e)
                        })?;
                    if stdio {
                        read::extract(io::stdin().lock(), dir.path(), &location, &limits)?;
                    } else {
                        let input = File::open(&file).map_err(|e| {
                            TransportError::io(format!("cannot read {}", file.display()), e)
                        })?;
                        read::extract(input, dir.path(), &location, &limits)?;
                    }
                    let layout = LayoutTransport::new(dir.path().to_path_buf());
                    Ok(Staged {
                        _dir: dir,
                        layout,
                        output: None,
                    })
                })
            })
            .await?;
        Ok(&staged.layout)
    }

    async fn writer(&self) -> Result<&LayoutTransport, TransportError> {
        if self.stdio() && self.writer.get().is_none() && io::stdout().is_terminal() {
            return Err(self.refuse_terminal("standard output"));
        }
        let staged = self
            .writer
            .get_or_try_init(|| {
                let (file, location) = (self.file.clone(), self.location());
                blocking(move || {
                    let output = Output::at(&file)
                        .map_err(|source| TransportError::Output {
                            location: location.clone(),
                            source,
                        })?
                        .binary();
                    if output.is_terminal() {
                        return Err(TransportError::Invalid {
                            location,
                            what: file.display().to_string(),
                            reason: "it is a terminal; redirect it to a file or a pipe (`> image.tar`, `| ssh …`)".into(),
                        });
                    }
                    let dir = match output.target() {
                        Target::Replace(real) => temp_dir_beside(real)?,
                        // Nothing can be staged beside a stream.
                        Target::Stdout | Target::Through(_) => tempfile::Builder::new()
                            .prefix("jbuild-archive-")
                            .tempdir()
                            .map_err(|e| {
                                TransportError::io("cannot create a temporary directory", e)
                            })?,
                    };
                    // The archive is the result: its staging layout needs
                    // no syncs.
                    let layout = LayoutTransport::scratch(dir.path().join("layout"));
                    Ok(Staged {
                        _dir: dir,
                        layout,
                        output: Some(output),
                    })
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
            .map_err(|e| self.relocate(e))
    }

    async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
        self.reader()
            .await?
            .fetch_manifest(desc)
            .await
            .map_err(|e| self.relocate(e))
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
            .map_err(|e| self.relocate(e))
    }

    async fn push_blob(
        &self,
        desc: &Descriptor,
        src: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let layout = self.writer().await?;
        let pushed = layout.push_blob(desc, src, progress).await;
        pushed.map_err(|e| self.written(e, layout))
    }

    async fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        role: ManifestRole<'_>,
    ) -> Result<(), TransportError> {
        let layout = self.writer().await?;
        let pushed = layout.push_manifest(bytes, desc, role).await;
        pushed.map_err(|e| self.written(e, layout))
    }

    async fn finish(&self) -> Result<(), TransportError> {
        let Some(staged) = self.writer.get() else {
            return Ok(());
        };
        staged
            .layout
            .finish()
            .await
            .map_err(|e| self.written(e, &staged.layout))?;
        let layout = staged.layout.path().to_path_buf();
        let Some(output) = staged.output.clone() else {
            return Ok(());
        };
        let location = self.location();
        blocking(move || {
            output
                .write_with(|out| write::write_tar(&layout, out))
                .map_err(|source| TransportError::Output { location, source })
        })
        .await
    }
}

/// Errors from the extracted copy name the archive, not the temporary
/// directory (`staged`, where it was extracted): the user gave the
/// archive and knows nothing of the directory, gone when jbuild exits. A
/// blob the archive lacks, or a layout file it holds that is not one
/// jbuild reads (an `oci-layout` of another version, an `index.json` that
/// is not JSON), is the archive's fault.
fn relocate(e: TransportError, location: &str, staged: Option<&Path>) -> TransportError {
    // A file of the archive, named as it is inside it.
    let inside = |path: &Path| match staged.and_then(|s| path.strip_prefix(s).ok()) {
        Some(rel) if !rel.as_os_str().is_empty() => format!("its {}", rel.display()),
        _ => "its image layout".to_string(),
    };
    match e {
        TransportError::Store(crate::store::StoreError::NotALayout { path, reason }) => {
            TransportError::Invalid {
                location: location.into(),
                what: inside(&path),
                reason,
            }
        }
        TransportError::Store(crate::store::StoreError::Corrupt { path, reason }) => {
            TransportError::Invalid {
                location: location.into(),
                what: inside(&path),
                reason,
            }
        }
        TransportError::Store(crate::store::StoreError::BlobNotFound { digest, .. }) => {
            TransportError::Archive {
                location: location.into(),
                source: ArchiveError::MissingBlob(digest),
            }
        }
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
