//! The `Transport` seam: moving images in and out, one blob or manifest at
//! a time.
//!
//! # Vocabulary
//!
//! An *image* is a tree of content-addressed pieces: a *manifest* (JSON)
//! names a *config* blob and *layer* blobs; an *index* (JSON) names
//! manifests, one per platform, or further indexes. Each piece is referred
//! to by a *descriptor*: media type, digest, size. A *reference* is how the
//! user names the top of the tree at a location: a tag, or a digest.
//!
//! A transport is one location that holds images — a registry repository
//! (`docker://`, next), an OCI layout directory (`oci:DIR`, jbuild's own
//! store is one), an OCI archive (`oci-archive:FILE`) — and knows how to
//! read and write pieces there. It knows nothing about trees: walking them
//! is [`copy_image`]'s job, so every pair of transports copies the same way
//! (blobs first, skipping those the destination has; manifests last,
//! children before the index that names them).
//!
//! [`Transport`] is what every transport does. What only some can do —
//! keep blobs as files ([`LocalBlobs`]), mount blobs across repositories
//! ([`BlobMounts`]), note where blobs came from ([`OriginNotes`]) — is a
//! small trait of its own that a copy asks for and does without.
//!
//! # Every byte from outside is checked
//!
//! A transport checks what it *reads* against the descriptor it was given
//! — size and digest, while streaming — before anyone sees it, and checks
//! again what it is asked to *write* before it becomes visible at the
//! destination. A descriptor is never trusted to name a path: digests are
//! parsed into [`Digest`], which only has hex digits to offer.
//!
//! Blobs go file to file, so memory stays bounded whatever their size;
//! manifests are read whole but never beyond
//! [`MAX_DOCUMENT`](crate::image::MAX_DOCUMENT). File work runs in
//! `spawn_blocking`, off the async runtime.

mod ability;
mod archive;
mod copy;
pub mod http;
mod layout;
mod location;
pub mod registry;
mod runtime;

use crate::blame::Blame;
use std::io::{self, Read, Write};
use std::path::Path;

use async_trait::async_trait;
use oci_spec::image::Descriptor;

pub use ability::{BlobMounts, BlobOrigin, LocalBlobs, OriginNotes};
pub use archive::{ArchiveError, ArchiveTransport};
pub use copy::{copy_image, copy_image_telling, copy_image_with, CopyEvent, CopyOptions};
pub use layout::LayoutTransport;
pub use location::{Location, OpenOptions};
pub use registry::{RegistryOptions, RegistryPuller, RegistryRef, RegistryTransport};
pub use runtime::{block_on, runtime, runtimes_built, RuntimeError};

use crate::digest::{Digest, HashingWriter};
use crate::store::{descriptor_digest, StoreError};

/// Told the number of bytes of a blob moved so far, as they move.
pub type Progress<'a> = &'a (dyn Fn(u64) + Send + Sync);

/// What a pushed manifest is to the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestRole<'a> {
    /// A manifest named by an index being copied: stored by digest only.
    Child,
    /// The image being copied: recorded under `tag`, or (with `None`) by
    /// digest only — an OCI layout then lists it untagged in `index.json`,
    /// so it stays reachable.
    Root { tag: Option<&'a str> },
}

/// One location that holds images. See the module docs.
#[async_trait]
pub trait Transport: Send + Sync {
    /// The location as the user would write it (`oci:/srv/images`).
    fn describe(&self) -> String;

    /// The descriptor of the manifest or index `reference` names: a tag,
    /// or a digest. `""` means the only image there (an error if there are
    /// several, or none).
    async fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError>;

    /// The bytes of the manifest or index `desc` describes, checked against
    /// its size and digest; refused beyond
    /// [`MAX_DOCUMENT`](crate::image::MAX_DOCUMENT).
    async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError>;

    /// Whether the location already has the blob (so a copy can skip it).
    async fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError>;

    /// Writes the blob into the file `dest` (created or truncated), checking
    /// size and digest on the way. On error, `dest` holds garbage; the
    /// caller removes it. The file only grows while it is written (a byte
    /// once written is not rewritten), and `progress` is told as it does:
    /// a reader may follow it as it grows (see `crate::spool`).
    async fn fetch_blob(
        &self,
        desc: &Descriptor,
        dest: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError>;

    /// How much of a blob fetched from here may be kept when the fetch is
    /// cut off (a killed or failed pull), for a later fetch to continue
    /// with [`Transport::fetch_blob_from`]; `None` (the default): this
    /// transport fetches blobs whole (a local file is not worth keeping
    /// half of).
    fn resumes(&self) -> Option<crate::store::PartialBounds> {
        None
    }

    /// [`Transport::fetch_blob`] into a `dest` that already holds the
    /// blob's first `kept` bytes, kept by an earlier fetch and not checked
    /// yet: only the rest is fetched when the source can, and the whole is
    /// checked; bytes that turn out wrong are fetched again. Nothing may
    /// read `dest` as it grows (it may start again from its first byte).
    /// The default fetches the whole blob.
    async fn fetch_blob_from(
        &self,
        desc: &Descriptor,
        dest: &Path,
        kept: u64,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let _ = kept;
        self.fetch_blob(desc, dest, progress).await
    }

    /// Stores the blob read from the file `src`. It becomes visible only if
    /// it matches `desc`.
    async fn push_blob(
        &self,
        desc: &Descriptor,
        src: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError>;

    /// Stores a manifest or index (after checking `bytes` against `desc`).
    /// Push every blob and child it names first.
    async fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        role: ManifestRole<'_>,
    ) -> Result<(), TransportError>;

    /// Completes what was pushed (an archive is written here). Call once,
    /// after the last push; a transport that was only read from does
    /// nothing.
    async fn finish(&self) -> Result<(), TransportError>;

    /// Blobs kept as files here, to push from in place and to stage new
    /// ones beside by rename (an OCI layout). `None` by default.
    fn local(&self) -> Option<&dyn LocalBlobs> {
        None
    }

    /// Cross-repository mounts (a registry). `None` by default.
    fn mounts(&self) -> Option<&dyn BlobMounts> {
        None
    }

    /// Notes of the registry repositories that also hold this location's
    /// blobs (jbuild's store). `None` by default.
    fn origin_notes(&self) -> Option<&dyn OriginNotes> {
        None
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("`{0}` is not a location jbuild knows: use oci:DIR[:REF], oci-archive:FILE[:REF] or docker://NAME")]
    InvalidLocation(String),
    /// A name written without a transport where a registry reference is
    /// wanted, that is not one.
    #[error(
        "`{input}` is not a registry reference: {problem} \
         (write host[:port]/repository[:tag], oci:DIR or oci-archive:FILE)"
    )]
    NotRegistryReference {
        input: String,
        problem: crate::store::NameError,
    },
    #[error("{location}: no image `{reference}`")]
    NotFound { location: String, reference: String },
    #[error("{location}: {what} does not match its descriptor: expected {expected}, got {actual}")]
    Mismatch {
        location: String,
        what: String,
        expected: String,
        actual: String,
    },
    #[error("{location}: {what} is {size} bytes, more than the {max} allowed")]
    TooLarge {
        location: String,
        what: String,
        size: u64,
        max: u64,
    },
    #[error("{location}: {what} is not valid: {reason}")]
    Invalid {
        location: String,
        what: String,
        reason: String,
    },
    /// An OCI archive's tar stream is refused: malformed, hostile or too
    /// large.
    #[error("{location}: the archive is refused")]
    Archive {
        location: String,
        #[source]
        source: archive::ArchiveError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The file an image is written to (`oci-archive:FILE`) cannot be
    /// written, or is something jbuild will not write over.
    #[error("{location}: the archive cannot be written")]
    Output {
        location: String,
        #[source]
        source: crate::fsutil::output::OutputError,
    },
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("a background task failed")]
    Task(#[source] tokio::task::JoinError),
    /// A pull stopped wanting the image's blobs before the copy ended (it
    /// refused a layer, and says why itself).
    #[error("{location}: the copy was stopped: the pull it was for failed")]
    Abandoned { location: String },
    /// A registry refused a manifest because a blob it names is not there,
    /// although jbuild had found or uploaded it: another upload of the same
    /// blob raced this one (Distribution 2.8 can lose the repository's link
    /// then), or the registry lost it since. [`copy::copy_image_with`]
    /// uploads what is missing and pushes the manifest again.
    #[error(
        "{location}: cannot {what}: the registry does not have every blob it names ({}); \
         push again",
        errors.words()
    )]
    BlobUnknown {
        location: String,
        what: String,
        /// What the registry said, its codes kept.
        errors: registry::ErrorBody,
    },
    /// No connection to a registry: refused, a host name that does not
    /// resolve, nothing answering in time. `url` is what was tried.
    #[error(
        "{location}: {what}: cannot reach {url} ({}); check the registry's address, \
         and that it is up and reachable from here",
        sent(user.as_deref())
    )]
    Unreachable {
        location: String,
        what: String,
        url: String,
        /// The user whose credentials were to go with the request.
        user: Option<String>,
        #[source]
        source: reqwest::Error,
    },
    /// The credentials kept for a registry cannot be read (a damaged
    /// `config.json`, a credential helper that fails).
    #[error("{location}: cannot read the credentials kept for it")]
    Credentials {
        location: String,
        #[source]
        source: crate::keychain::KeychainError,
    },
    /// A registry (or its token service) that stayed silent longer than
    /// `[registries] timeout_secs` allows: connecting, in the TLS
    /// handshake, or waiting for an answer.
    #[error(
        "{location}: {what}: timed out: {url} sent nothing for longer than `timeout_secs` \
         under [registries] in the configuration file allows; check that the registry is up \
         and reachable from here, or raise `timeout_secs` if it is only slow"
    )]
    TimedOut {
        location: String,
        what: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// TLS with a registry failed: a certificate from a CA jbuild does not
    /// trust or for another name, or a server that does not speak TLS.
    #[error("{location}: {what}: TLS with {url} failed; {}", tls_advice(registry, *wrong_name))]
    Tls {
        location: String,
        what: String,
        url: String,
        registry: String,
        /// The certificate is for another name (else: from an unknown CA,
        /// or no TLS at all).
        wrong_name: bool,
        #[source]
        source: reqwest::Error,
    },
    /// A registry (or its token service) refused: 401 although
    /// credentials were sent, 403, or 401 to a request without any.
    #[error(
        "{location}: {what}: {}",
        denied(registry, *status, user.as_deref(), detail)
    )]
    Denied {
        location: String,
        what: String,
        registry: String,
        status: u16,
        /// The user whose credentials were sent; `None`: none were.
        user: Option<String>,
        /// The registry's own words, or empty.
        detail: String,
    },
    /// A registry moved a blob or manifest slower than `[registries]
    /// min_rate` over `rate_window_secs`, or past `blob_deadline_secs`:
    /// given up (and with it the store lock a pull holds).
    #[error(
        "{location}: {what}: the transfer with {registry} {slow}; if the registry is only slow, \
         lower `min_rate` or raise `rate_window_secs` or `blob_deadline_secs` under [registries] \
         in the configuration file (or $JBUILD_REGISTRY_MIN_RATE, \
         $JBUILD_REGISTRY_RATE_WINDOW_SECS, $JBUILD_REGISTRY_BLOB_DEADLINE_SECS)"
    )]
    TooSlow {
        location: String,
        what: String,
        registry: String,
        slow: registry::Slow,
    },
    /// A registry served a whole blob that is not the blob its digest
    /// names: other bytes (of another size, or of the same).
    #[error(
        "{location}: blob {expected}: the content {registry} served does not match its digest \
         (expected {expected}, got {actual}{detail}): the registry served the wrong content"
    )]
    WrongContent {
        location: String,
        registry: String,
        expected: String,
        actual: String,
        /// `, N bytes where the manifest says M`, or empty.
        detail: String,
    },
    /// A registry refused or failed a request; `message` says what to do.
    #[error("{location}: {message}")]
    Registry {
        location: String,
        message: String,
        /// Whether the user can fix it (credentials, a name, a
        /// certificate) rather than it being the server's or the network's
        /// fault.
        user: bool,
    },
}

impl TransportError {
    fn io(context: impl Into<String>, source: io::Error) -> TransportError {
        TransportError::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether what was fetched is not what was asked for (a size or
    /// digest that does not match): nothing of it is worth keeping.
    pub fn is_wrong_content(&self) -> bool {
        matches!(
            self,
            TransportError::Mismatch { .. } | TransportError::WrongContent { .. }
        )
    }
}

impl Blame for TransportError {
    /// Whether the user can fix this (a location or reference they typed,
    /// an image that is not there, input that is damaged or refused) rather
    /// than it being a fault of jbuild or the system.
    fn is_user_error(&self) -> bool {
        match self {
            TransportError::InvalidLocation(_)
            | TransportError::NotRegistryReference { .. }
            | TransportError::NotFound { .. }
            | TransportError::Mismatch { .. }
            | TransportError::TooLarge { .. }
            | TransportError::Archive { .. }
            | TransportError::Invalid { .. } => true,
            TransportError::Store(e) => e.is_user_error(),
            TransportError::Output { source, .. } => source.is_user_error(),
            TransportError::Io { .. }
            | TransportError::Task(_)
            | TransportError::Abandoned { .. }
            | TransportError::BlobUnknown { .. } => false,
            TransportError::Unreachable { .. }
            | TransportError::Credentials { .. }
            | TransportError::TimedOut { .. }
            | TransportError::TooSlow { .. }
            | TransportError::WrongContent { .. }
            | TransportError::Tls { .. }
            | TransportError::Denied { .. } => true,
            TransportError::Registry { user, .. } => *user,
        }
    }
}

fn tls_advice(registry: &str, wrong_name: bool) -> String {
    let name = if wrong_name {
        format!(
            "the registry's certificate is not made for `{registry}`: name the registry as its \
             certificate does, or "
        )
    } else {
        String::new()
    };
    format!(
        "{name}if the registry's certificate comes from its own CA, give jbuild the CA with \
         `--cert-dir DIR` (as DIR/{registry}/ca.crt), put it in \
         /etc/docker/certs.d/{registry}/ca.crt or set `certs_dir` under [registries] in the \
         configuration file; if the registry speaks plain HTTP, or to skip the check, use \
         `--tls-verify=false` or list \"{registry}\" under [registries] insecure"
    )
}

fn sent(user: Option<&str>) -> String {
    match user {
        Some(u) => format!("with the credentials of `{u}`"),
        None => "without credentials".into(),
    }
}

fn denied(registry: &str, status: u16, user: Option<&str>, detail: &str) -> String {
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    };
    match user {
        Some(u) => format!(
            "{registry} rejected the credentials for user `{u}` ({status}){detail}; check the \
             user name and password (`jbuild login {registry}` checks and keeps them), and that \
             your account may use the repository"
        ),
        None => format!(
            "access denied ({status}){detail}; no credentials were sent: sign in with \
             `jbuild login {registry}`, or check that the repository exists and is public"
        ),
    }
}

impl From<RuntimeError> for TransportError {
    fn from(e: RuntimeError) -> TransportError {
        TransportError::io("cannot start the async runtime", e.0)
    }
}

/// Runs blocking file work off the async runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TransportError> + Send + 'static,
) -> Result<T, TransportError> {
    runtime::spawn_blocking(f)
        .await
        .map_err(TransportError::Task)?
}

/// The digest of `desc`, or why it cannot be used.
fn digest_of(desc: &Descriptor, location: &str) -> Result<Digest, TransportError> {
    descriptor_digest(desc).map_err(|e| TransportError::Invalid {
        location: location.to_string(),
        what: format!("descriptor {}", desc.digest()),
        reason: e.to_string(),
    })
}

/// Copies `reader` to `writer`, checking size and digest against `desc`.
/// Reads at most one byte more than the descriptor's size.
fn copy_checked<W: Write>(
    reader: impl Read,
    writer: W,
    desc: &Descriptor,
    location: &str,
) -> Result<W, TransportError> {
    let expected = digest_of(desc, location)?;
    let mut hashing = HashingWriter::new(writer);
    io::copy(&mut reader.take(desc.size() + 1), &mut hashing)
        .map_err(|e| TransportError::io(format!("{location}: cannot copy {expected}"), e))?;
    let (actual, size, writer) = hashing.finish();
    check(desc, &expected, &actual, size, location)?;
    Ok(writer)
}

/// Checks bytes already read against their descriptor.
fn check_bytes(bytes: &[u8], desc: &Descriptor, location: &str) -> Result<(), TransportError> {
    let expected = digest_of(desc, location)?;
    check(
        desc,
        &expected,
        &Digest::of(bytes),
        bytes.len() as u64,
        location,
    )
}

fn check(
    desc: &Descriptor,
    expected: &Digest,
    actual: &Digest,
    size: u64,
    location: &str,
) -> Result<(), TransportError> {
    check_size(desc, expected, size, location)?;
    if actual != expected {
        return Err(TransportError::Mismatch {
            location: location.to_string(),
            what: format!("content of {expected}"),
            expected: expected.to_string(),
            actual: actual.to_string(),
        });
    }
    Ok(())
}

/// Checks the number of bytes read (at most one more than expected) of
/// the blob `expected` against its descriptor.
fn check_size(
    desc: &Descriptor,
    expected: &Digest,
    size: u64,
    location: &str,
) -> Result<(), TransportError> {
    if size == desc.size() {
        return Ok(());
    }
    Err(TransportError::Mismatch {
        location: location.to_string(),
        what: format!("size of {expected}"),
        expected: desc.size().to_string(),
        actual: if size > desc.size() {
            format!("more than {}", desc.size())
        } else {
            size.to_string()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_checked_refuses_wrong_size_and_content() {
        let desc = |bytes: &[u8], size| {
            Descriptor::new(
                oci_spec::image::MediaType::ImageLayer,
                size,
                crate::store::oci_digest(&Digest::of(bytes)),
            )
        };
        assert!(copy_checked(&b"abc"[..], Vec::new(), &desc(b"abc", 3), "t").is_ok());
        let long = copy_checked(&b"abcd"[..], Vec::new(), &desc(b"abc", 3), "t").unwrap_err();
        assert!(matches!(long, TransportError::Mismatch { .. }), "{long}");
        let short = copy_checked(&b"ab"[..], Vec::new(), &desc(b"abc", 3), "t").unwrap_err();
        assert!(matches!(short, TransportError::Mismatch { .. }), "{short}");
        let other = copy_checked(&b"abd"[..], Vec::new(), &desc(b"abc", 3), "t").unwrap_err();
        assert!(other.to_string().contains("content"), "{other}");
    }
}
