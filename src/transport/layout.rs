//! `oci:DIR`: an OCI image layout directory — jbuild's own store, or one
//! skopeo, umoci or another jbuild wrote.
//!
//! Where DIR does not exist when the first write comes, the layout is made
//! out of sight and put in place, synced whole, by [`Transport::finish`]
//! ([`NewLayout`]: two waits for the disk, however many blobs); an
//! existing layout is written in place, each write synced in order.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use oci_spec::image::Descriptor;

use super::{
    blocking, check_bytes, check_size, copy_checked, digest_of, BlobOrigin, LocalBlobs,
    ManifestRole, OriginNotes, Progress, Transport, TransportError,
};
use crate::fsutil::input::Within;
use crate::image::MAX_DOCUMENT;
use crate::store::{NewLayout, PartialBounds, StagedBlob, Store, StoreError, StoreLock};

/// An OCI layout directory as a transport. Reading never changes the
/// directory; the first write creates the layout if there is none.
#[derive(Clone)]
pub struct LayoutTransport(Arc<Inner>);

struct Inner {
    dir: PathBuf,
    /// The layout once opened (or staged). The lock is held while it is
    /// opened or created: parallel blob tasks each creating it would find
    /// the other's half-made layout.
    opened: Mutex<Opened>,
    /// How a layout that is not there is made.
    making: Making,
    /// A shared [`StoreLock`] from the first push to `finish`, so a prune
    /// running meanwhile cannot remove blobs not yet named by `index.json`.
    writing: Mutex<Option<StoreLock>>,
    /// Whether blob origins are remembered here: only in jbuild's own
    /// store, so reading an `oci:DIR` never changes it.
    remember: bool,
}

/// What [`Inner::store`] has opened: nothing yet, a layout, or one being
/// made where there was none (put in place by `finish`).
enum Opened {
    Not,
    Layout(Store),
    Staged(NewLayout),
}

impl Opened {
    fn store(&self) -> Option<&Store> {
        match self {
            Opened::Not => None,
            Opened::Layout(s) => Some(s),
            Opened::Staged(new) => Some(new.store()),
        }
    }
}

/// How a [`LayoutTransport`] makes its layout when DIR is not there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Making {
    /// Out of sight, then put in place durably ([`NewLayout`]).
    New,
    /// At DIR, never synced: a layout no crash needs to keep.
    Scratch,
}

impl LayoutTransport {
    pub fn new(dir: PathBuf) -> LayoutTransport {
        LayoutTransport::with(dir, None, Making::New)
    }

    /// A layout at `dir` whose writes are never synced: a scratch layout
    /// in a temporary directory (an archive is written from one), which a
    /// crash may lose whole.
    pub fn scratch(dir: PathBuf) -> LayoutTransport {
        LayoutTransport::with(dir, None, Making::Scratch)
    }

    /// The layout of an open store (jbuild's own).
    pub fn from_store(store: Store) -> LayoutTransport {
        let dir = store.path().to_path_buf();
        LayoutTransport::with(dir, Some(store), Making::New)
    }

    fn with(dir: PathBuf, store: Option<Store>, making: Making) -> LayoutTransport {
        let remember = store.is_some();
        LayoutTransport(Arc::new(Inner {
            dir,
            opened: Mutex::new(store.map_or(Opened::Not, Opened::Layout)),
            making,
            writing: Mutex::new(None),
            remember,
        }))
    }

    pub fn path(&self) -> &Path {
        &self.0.dir
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, TransportError> + Send + 'static,
    ) -> Result<T, TransportError> {
        let inner = self.0.clone();
        blocking(move || f(&inner).map_err(|e| inner.foreign(e))).await
    }
}

/// Repositories remembered per blob, at most.
const MAX_ORIGINS: usize = 8;

/// Where the note of `digest`'s origins is to be written: in
/// `.jbuild/origins`, a real directory of the layout's (made when
/// missing), never through a symlink ([`crate::fsutil::places`]).
fn origins_path(layout: &Path, digest: &crate::digest::Digest) -> Option<PathBuf> {
    let dir = crate::fsutil::places::own_dir(layout, ORIGINS).ok()?;
    Some(dir.join(digest.hex()))
}

/// Where the notes on `digest` are, in a layout.
fn origins_rel(digest: &crate::digest::Digest) -> PathBuf {
    Path::new(ORIGINS).join(digest.hex())
}

const ORIGINS: &str = ".jbuild/origins";

/// The notes on `digest` in the layout at `dir`; none when they cannot be
/// read (a symlink, a FIFO, more than a few lines: never followed, waited
/// on or read whole).
fn read_origins(dir: &Path, digest: &crate::digest::Digest) -> Vec<BlobOrigin> {
    let bytes = Within::new(dir)
        .read(&origins_rel(digest), MAX_ORIGINS_FILE)
        .unwrap_or_default();
    parse_origins(&String::from_utf8_lossy(&bytes))
}

/// The most a file of notes is read: [`MAX_ORIGINS`] lines of a registry
/// and a repository each, with room to spare.
const MAX_ORIGINS_FILE: u64 = 64 << 10;

fn parse_origins(text: &str) -> Vec<BlobOrigin> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(r, p)| !r.is_empty() && !p.is_empty() && !p.contains(' '))
        .map(|(r, p)| BlobOrigin {
            registry: r.to_string(),
            repository: p.to_string(),
        })
        .take(MAX_ORIGINS)
        .collect()
}

/// What `index.json` gets for a pushed manifest ([`ManifestRole`], owned).
enum Record {
    Child,
    Tag(String),
    Untagged,
}

impl Inner {
    fn location(&self) -> String {
        format!("oci:{}", self.dir.display())
    }

    /// A file of an `oci:DIR` that is not read or written through (a
    /// symlink, a FIFO, one too large) is that layout's fault, which the
    /// user named: refused as invalid input. In jbuild's own store the
    /// same is damage, and stays a store error.
    fn foreign(&self, e: TransportError) -> TransportError {
        match e {
            TransportError::Store(StoreError::Refused { path, why }) if !self.remember => {
                TransportError::Invalid {
                    location: self.location(),
                    what: format!(
                        "`{}`",
                        path.strip_prefix(&self.dir).unwrap_or(&path).display()
                    ),
                    reason: why.to_string(),
                }
            }
            // Not a layout jbuild reads (another layout version, no
            // oci-layout), or a document of it that does not parse: what
            // the user named is not what jbuild reads.
            TransportError::Store(StoreError::NotALayout { reason, .. }) if !self.remember => {
                TransportError::Invalid {
                    location: self.location(),
                    what: "the directory".into(),
                    reason: format!("it is not an OCI image layout: {reason}"),
                }
            }
            TransportError::Store(StoreError::Corrupt { path, reason }) if !self.remember => {
                TransportError::Invalid {
                    location: self.location(),
                    what: format!(
                        "`{}`",
                        path.strip_prefix(&self.dir).unwrap_or(&path).display()
                    ),
                    reason,
                }
            }
            e => e,
        }
    }

    fn store(&self, create: bool) -> Result<Store, TransportError> {
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = opened.store() {
            return Ok(s.clone());
        }
        *opened = match (create, self.making) {
            (false, _) => Opened::Layout(Store::open_existing(&self.dir)?),
            (true, Making::Scratch) => Opened::Layout(Store::create_scratch(&self.dir)?),
            (true, Making::New) => match Store::create_new(&self.dir)? {
                Some(new) => Opened::Staged(new),
                None => Opened::Layout(Store::open(&self.dir)?),
            },
        };
        Ok(opened.store().expect("opened above").clone())
    }

    /// Puts a layout made where there was none in its place; the store
    /// there serves whatever comes after.
    fn publish(&self) -> Result<(), TransportError> {
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Opened::Staged(_) = &*opened {
            let Opened::Staged(new) = std::mem::replace(&mut *opened, Opened::Not) else {
                unreachable!("matched above")
            };
            *opened = Opened::Layout(new.publish()?);
        }
        Ok(())
    }

    /// The store, opened (or created) for writing under the shared lock.
    fn writable(&self) -> Result<Store, TransportError> {
        let store = self.store(true)?;
        let mut writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        if writing.is_none() {
            *writing = Some(StoreLock::shared(&store)?);
        }
        Ok(store)
    }

    fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError> {
        let store = self.store(false)?;
        if reference.is_empty() {
            let mut all = store.list()?;
            return match all.len() {
                1 => Ok(all.remove(0).1),
                n => Err(TransportError::Invalid {
                    location: self.location(),
                    what: "the reference".into(),
                    reason: format!("none was given, and the layout holds {n} images, not one"),
                }),
            };
        }
        store
            .resolve(reference)?
            .ok_or_else(|| TransportError::NotFound {
                location: self.location(),
                reference: reference.to_string(),
            })
    }

    fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
        if desc.size() > MAX_DOCUMENT {
            return Err(TransportError::TooLarge {
                location: self.location(),
                what: format!("manifest {}", desc.digest()),
                size: desc.size(),
                max: MAX_DOCUMENT,
            });
        }
        let file = self
            .store(false)?
            .open_blob(&digest_of(desc, &self.location())?)?;
        copy_checked(
            file,
            Vec::with_capacity(desc.size() as usize),
            desc,
            &self.location(),
        )
    }

    fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
        let len = self
            .store(true)?
            .blob_len(&digest_of(desc, &self.location())?);
        Ok(len == Some(desc.size()))
    }

    fn fetch_blob(&self, desc: &Descriptor, dest: &Path) -> Result<(), TransportError> {
        let src = self
            .store(false)?
            .open_blob(&digest_of(desc, &self.location())?)?;
        let out = File::create(dest)
            .map_err(|e| TransportError::io(format!("cannot create {}", dest.display()), e))?;
        let mut out = copy_checked(src, io::BufWriter::new(out), desc, &self.location())?;
        out.flush()
            .map_err(|e| TransportError::io(format!("cannot write {}", dest.display()), e))
    }

    fn push_blob(&self, desc: &Descriptor, src: &Path) -> Result<(), TransportError> {
        let store = self.writable()?;
        let digest = digest_of(desc, &self.location())?;
        if self.has_blob(desc)? {
            return Ok(());
        }
        // What a source's `blob_file` checked a moment ago: not followed
        // if it has become a symlink since, nor waited on as a FIFO.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(src)
            .and_then(|f| match f.metadata()?.is_file() {
                true => Ok(f),
                false => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a regular file",
                )),
            })
            .map_err(|e| TransportError::io(format!("cannot open {}", src.display()), e))?;
        let mut writer = store.blob_writer()?;
        // The blob writer hashes; here only the size is checked on the way.
        let n = io::copy(&mut file.take(desc.size() + 1), &mut writer).map_err(|e| {
            TransportError::io(format!("{}: cannot write {digest}", self.location()), e)
        })?;
        check_size(desc, &digest, n, &self.location())?;
        writer
            .commit(Some(&digest))
            .map(drop)
            .map_err(|e| self.mismatch(e))
    }

    fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        record: Record,
    ) -> Result<(), TransportError> {
        check_bytes(bytes, desc, &self.location())?;
        let store = self.writable()?;
        let mut writer = store.blob_writer()?;
        writer.write_all(bytes).map_err(|e| {
            TransportError::io(format!("{}: cannot write a manifest", self.location()), e)
        })?;
        writer
            .commit(Some(&digest_of(desc, &self.location())?))
            .map_err(|e| self.mismatch(e))?;
        match record {
            Record::Child => Ok(()),
            Record::Tag(tag) => Ok(store.tag_ref(&tag, desc)?),
            Record::Untagged => Ok(store.add_untagged(desc)?),
        }
    }

    fn mismatch(&self, e: StoreError) -> TransportError {
        match e {
            StoreError::DigestMismatch {
                expected, actual, ..
            } => TransportError::Mismatch {
                location: self.location(),
                what: format!("content of {expected}"),
                expected: expected.to_string(),
                actual: actual.to_string(),
            },
            other => other.into(),
        }
    }
}

#[async_trait]
impl Transport for LayoutTransport {
    fn describe(&self) -> String {
        self.0.location()
    }

    async fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError> {
        let reference = reference.to_string();
        self.run(move |i| i.resolve(&reference)).await
    }

    async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
        let desc = desc.clone();
        self.run(move |i| i.fetch_manifest(&desc)).await
    }

    async fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
        let desc = desc.clone();
        self.run(move |i| i.has_blob(&desc)).await
    }

    async fn fetch_blob(
        &self,
        desc: &Descriptor,
        dest: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let (desc, dest) = (desc.clone(), dest.to_path_buf());
        let size = desc.size();
        self.run(move |i| i.fetch_blob(&desc, &dest)).await?;
        progress(size);
        Ok(())
    }

    async fn push_blob(
        &self,
        desc: &Descriptor,
        src: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let (desc, src) = (desc.clone(), src.to_path_buf());
        let size = desc.size();
        self.run(move |i| i.push_blob(&desc, &src)).await?;
        progress(size);
        Ok(())
    }

    async fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        role: ManifestRole<'_>,
    ) -> Result<(), TransportError> {
        let (bytes, desc) = (bytes.to_vec(), desc.clone());
        let record = match role {
            ManifestRole::Child => Record::Child,
            ManifestRole::Root { tag: Some(tag) } => Record::Tag(tag.to_string()),
            ManifestRole::Root { tag: None } => Record::Untagged,
        };
        self.run(move |i| i.push_manifest(&bytes, &desc, record))
            .await
    }

    async fn finish(&self) -> Result<(), TransportError> {
        self.run(|i| i.publish()).await?;
        self.0
            .writing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        Ok(())
    }

    fn local(&self) -> Option<&dyn LocalBlobs> {
        Some(self)
    }

    fn origin_notes(&self) -> Option<&dyn OriginNotes> {
        Some(self)
    }
}

/// Blobs are files under `blobs/sha256/`; staged ones are created in the
/// layout's own temporary directory, so adopting one is a rename.
#[async_trait]
impl LocalBlobs for LayoutTransport {
    /// Only a regular file of the right size, reached without a symlink
    /// in the layout; anything else is left to `fetch_blob`, which says
    /// why it is refused.
    fn blob_file(&self, desc: &Descriptor) -> Option<PathBuf> {
        let store = self.0.store(false).ok()?;
        let digest = digest_of(desc, &self.0.location()).ok()?;
        (store.blob_len(&digest) == Some(desc.size())).then(|| store.blob_path(&digest))
    }

    fn staging_file(&self) -> Result<StagedBlob, TransportError> {
        Ok(StagedBlob::temporary(self.0.writable()?.blob_tempfile()?))
    }

    /// Only in jbuild's own store: an `oci:DIR` gets no partial blobs.
    fn resumable_file(
        &self,
        desc: &Descriptor,
        bounds: PartialBounds,
    ) -> Result<StagedBlob, TransportError> {
        if !self.0.remember {
            return self.staging_file();
        }
        let digest = digest_of(desc, &self.0.location())?;
        Ok(self
            .0
            .writable()?
            .partial_blob(&digest, desc.size(), bounds)?)
    }

    async fn adopt_blob(&self, desc: &Descriptor, file: StagedBlob) -> Result<(), TransportError> {
        let desc = desc.clone();
        self.run(move |i| {
            let digest = digest_of(&desc, &i.location())?;
            let len = file
                .as_file()
                .metadata()
                .map_err(|e| {
                    TransportError::io(format!("cannot read {}", file.path().display()), e)
                })?
                .len();
            check_size(&desc, &digest, len, &i.location())?;
            Ok(i.writable()?.adopt_staged(file, &digest)?)
        })
        .await
    }
}

/// Notes live in `.jbuild/origins/`, written only in jbuild's own store.
impl OriginNotes for LayoutTransport {
    fn origins(&self, desc: &Descriptor) -> Vec<BlobOrigin> {
        let Ok(digest) = digest_of(desc, &self.0.location()) else {
            return Vec::new();
        };
        read_origins(&self.0.dir, &digest)
    }

    /// Kept in `.jbuild/origins/<hex>`, one `registry repository` per
    /// line, newest first, at most `MAX_ORIGINS`. Only a hint for
    /// mounts: losing it costs an upload, so failures are ignored.
    fn remember_origins(&self, desc: &Descriptor, origins: &[BlobOrigin]) {
        if origins.is_empty() || !self.0.remember {
            return;
        }
        let Ok(digest) = digest_of(desc, &self.0.location()) else {
            return;
        };
        let Some(path) = origins_path(&self.0.dir, &digest) else {
            tracing::debug!(
                "cannot note where {digest} came from: .jbuild/origins is not a directory"
            );
            return;
        };
        let mut all = origins.to_vec();
        for o in read_origins(&self.0.dir, &digest) {
            if !all.contains(&o) {
                all.push(o);
            }
        }
        all.truncate(MAX_ORIGINS);
        let text: String = all
            .iter()
            .map(|o| format!("{} {}\n", o.registry, o.repository))
            .collect();
        let Some(dir) = path.parent() else { return };
        let tmp = dir.join(format!(".{}.tmp-{}", digest.hex(), std::process::id()));
        let written = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!("cannot note where {digest} came from: {e}");
        }
    }
}
