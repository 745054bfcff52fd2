//! The local image store: an OCI image layout directory.
//!
//! ```text
//! STORE/
//!   oci-layout            {"imageLayoutVersion":"1.0.0"}
//!   index.json            the images the store holds, tagged or not
//!   blobs/sha256/<hex>    manifests, configs, layers: named by their digest
//!   .jbuild/              jbuild's own: lock files, tmp/ for blobs being written
//!                         (and tmp/partial-<hex>: what a killed pull had of a blob)
//! ```
//!
//! There is no database beside it: the layout is the one source of truth,
//! and any OCI tool reads it directly (`skopeo inspect oci:STORE:name:tag`,
//! `umoci ls --layout STORE`). Tools ignore `.jbuild/` (the layout spec only
//! defines the three entries above, and skopeo and umoci look at nothing
//! else); its temporary files never sit under `blobs/`, where a tool
//! listing blobs would find them.
//!
//! # How tags are written
//!
//! Each tagged image is one descriptor in `index.json` whose annotation
//! `org.opencontainers.image.ref.name` is the whole normalised name,
//! `[registry/]repository:tag`. skopeo splits `oci:PATH:REF` at the *first*
//! `:` (containers/image `SplitPathAndImage`), so the reference may itself
//! contain `:` and `/` — `oci:/var/db/jbuild/images:localhost:5000/base:14.1`
//! finds ref `localhost:5000/base:14.1` — but the store's own path must not
//! contain a `:`. References also have to match containers/image's
//! `refRegexp` (alphanumerics joined by `-._:@+`, `--` or `/`), which every
//! [`ImageName`] does.
//!
//! Descriptors are kept sorted by ref name, so the same images always give
//! the same `index.json` bytes.
//!
//! # Writing safely
//!
//! Blobs are written to `.jbuild/tmp/`, hashed on the way, fsynced, checked
//! and renamed into `blobs/sha256/` ([`BlobWriter`]); `index.json` is replaced
//! atomically under a lock ([`lock`]). A killed process leaves at most a
//! temporary file behind, never a half-written blob or index.
//!
//! A layout made where there was none ([`Store::create_new`], what
//! `jbuild copy … oci:NEW` writes) is the exception to syncing each write:
//! it is staged out of sight beside its place, synced whole at once and
//! renamed in ([`NewLayout`]; the argument is in `fresh.rs`'s doc).

mod blob;
mod cleanup;
mod fresh;
mod index;
mod index_file;
mod json;
mod layout;
pub mod lock;
pub mod name;
mod partial;
mod sizes;

use crate::blame::Blame;
use std::io;
use std::path::{Path, PathBuf};

pub use blob::BlobWriter;
pub use cleanup::STALE_TMP;
pub use fresh::NewLayout;
pub(crate) use index::valid_ref_name;
pub use index::{Found, RefName};
pub use json::canonical_json;
pub use lock::StoreLock;
pub use name::{ImageName, NameError};
pub use partial::{partial_bytes, stage_partial, PartialBounds, StagedBlob, PARTIAL_PREFIX};

use crate::digest::{Digest, DigestError};
use crate::fsutil::input::{InputError, Within};

/// The largest `index.json` read, of any layout: jbuild's store or an
/// `oci:DIR`. An entry (a tagged manifest with its platform) is about
/// 330 bytes, so 16 MiB holds some 50,000 of them; the index is read and
/// rewritten whole at every tag, and parsing costs about twice its size
/// again, so this bound is what keeps a `tag` on the largest index
/// accepted within 64 MiB more than jbuild's own (docs/security.md,
/// "Inputs jbuild reads"). Anything larger is refused before a byte of it
/// is read.
pub const MAX_INDEX: u64 = 16 << 20;

/// The index's name in a layout.
const INDEX: &str = "index.json";
use crate::fsutil::places::{existing_own_dir, own_dir, PlaceError};

/// The annotation that names a descriptor in `index.json`.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// An OCI image layout on disk, used as jbuild's image store.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    durability: Durability,
}

/// When what a [`Store`] writes is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// As it is written, in the order "Writing safely" above gives: every
    /// store at its own place.
    Ordered,
    /// Not as it is written: a layout being made out of sight, synced whole
    /// before it takes its place ([`NewLayout`]). Its blobs' writeback is
    /// started as they are written and when each is complete, so that the
    /// one sync of the whole finds little left to write (issue 34: the
    /// 2 MB copy's `syncfs` was mostly its one blob's data).
    Staged,
    /// Never: a layout no crash needs to keep (a scratch layout an archive
    /// is written from), whose bytes need not reach the disk at all.
    Deferred,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path} is not an OCI image layout: {reason}")]
    NotALayout { path: PathBuf, reason: String },
    #[error("{path} is corrupt: {reason} (it was left as it is)")]
    Corrupt { path: PathBuf, reason: String },
    #[error("blob {digest} is not in the store ({path})")]
    BlobNotFound { digest: Digest, path: PathBuf },
    #[error("content does not match its digest: expected {expected}, got {actual} ({size} bytes)")]
    DigestMismatch {
        expected: Digest,
        actual: Digest,
        size: u64,
    },
    /// A file of the layout that is not read: a symlink, a FIFO, a device,
    /// one under a component that is not a real directory, or one larger
    /// than its bound. Never says a byte of what it leads to. `why` is the
    /// reason, said on the line.
    #[error("{}: {why}", path.display())]
    Refused { path: PathBuf, why: InputError },
    /// A change that would make `index.json` larger than every reader
    /// reads ([`MAX_INDEX`]).
    #[error(
        "{} would be {size} bytes with this change, more than the {} MiB an index may \
         have; remove names first (`jbuild rmi`)",
        path.display(), max >> 20
    )]
    IndexFull { path: PathBuf, size: u64, max: u64 },
    #[error("blob {digest} is {size} bytes, more than the {max} allowed here")]
    TooLarge { digest: Digest, size: u64, max: u64 },
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("`{0}` is not a valid reference name for an OCI layout")]
    BadRefName(String),
    #[error("no image `{0}` in the store (see `jbuild images`)")]
    NotFound(String),
    #[error(
        "`{reference}` matches more than one image: {}; give more of the digest, or a name",
        candidates.join(", ")
    )]
    Ambiguous {
        reference: String,
        candidates: Vec<String>,
    },
    #[error("descriptor has an unusable digest")]
    Digest(#[from] DigestError),
    /// One of the store's own directories is a symlink or a file
    /// ([`crate::fsutil::places`]): nothing is done through it.
    #[error(transparent)]
    Place(#[from] PlaceError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl StoreError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> StoreError {
        StoreError::Io {
            context: context.into(),
            source,
        }
    }
}

impl Blame for StoreError {
    /// Whether the user can fix it: a name that finds nothing, or more than
    /// one image, or is not a valid name. Anything else is damage or the
    /// system's.
    fn is_user_error(&self) -> bool {
        matches!(
            self,
            StoreError::NotFound(_)
                | StoreError::IndexFull { .. }
                | StoreError::Ambiguous { .. }
                | StoreError::Name(_)
                | StoreError::BadRefName(_)
        ) || matches!(self, StoreError::Place(p) if p.is_stray())
    }
}

impl Store {
    /// The layout's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Whether writes are synced as they happen ([`Durability::Ordered`]).
    fn syncs(&self) -> bool {
        self.durability == Durability::Ordered
    }

    /// Whether what is written will be synced, now or with the whole
    /// ([`Durability::Ordered`], [`Durability::Staged`]): its writeback is
    /// worth starting early.
    fn reaches_disk(&self) -> bool {
        self.durability != Durability::Deferred
    }

    /// Where the blob `d` is (or would be).
    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join(blob_rel(d))
    }

    /// The layout's files, read without following a symlink inside it
    /// ([`Within`]); the directories it writes into, checked the same way.
    fn within(&self) -> Within {
        Within::new(&self.root)
    }

    /// `rel` (a path in the layout) refused for `e`.
    fn refused(&self, rel: impl AsRef<Path>, e: InputError) -> StoreError {
        StoreError::Refused {
            path: self.root.join(rel),
            why: e,
        }
    }

    fn index_path(&self) -> PathBuf {
        self.root.join("index.json")
    }

    /// jbuild's private directory inside the layout, created on first use so
    /// that only reading a layout never changes it; refused when it (or
    /// `.jbuild/`) is a symlink or a file ([`crate::fsutil::places`]).
    fn private_dir(&self, sub: &str) -> Result<PathBuf, StoreError> {
        Ok(own_dir(&self.root, Path::new(".jbuild").join(sub))?)
    }

    /// jbuild's private directory `sub` inside the layout if it exists as
    /// a real directory: `None` when it is missing, or a symlink or a file
    /// (never read, written or removed through; `jbuild check` reports it).
    fn existing_private_dir(&self, sub: &str) -> Option<PathBuf> {
        existing_own_dir(&self.root, Path::new(".jbuild").join(sub))
            .ok()
            .flatten()
    }

    fn lock_file(
        &self,
        name: &str,
        exclusive: bool,
    ) -> Result<nix::fcntl::Flock<std::fs::File>, StoreError> {
        let path = self.private_dir("")?.join(name);
        lock::flock(&path, exclusive)
            .map_err(|e| StoreError::io(format!("cannot lock {}", path.display()), e))
    }
}

/// Where blob `d` is in a layout.
fn blob_rel(d: &Digest) -> PathBuf {
    Path::new(BLOBS).join(d.hex())
}

/// The directory of a layout's blobs.
const BLOBS: &str = "blobs/sha256";

/// The digest of a descriptor as jbuild's [`Digest`]. Only sha256 is
/// accepted; every path in the store is derived from the result, which is
/// what keeps a hostile descriptor from naming a file outside `blobs/`.
pub fn descriptor_digest(desc: &oci_spec::image::Descriptor) -> Result<Digest, DigestError> {
    desc.digest().to_string().parse()
}

/// jbuild's [`Digest`] as oci-spec's.
pub fn oci_digest(d: &Digest) -> oci_spec::image::Digest {
    d.to_string()
        .parse()
        .expect("a sha256 digest is a valid OCI digest")
}
