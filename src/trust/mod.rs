//! Trust: signatures and attestations cosign understands, made and checked
//! with key pairs — no network service (no Rekor, no Fulcio).
//!
//! # Vocabulary
//!
//! - A *key pair* is ECDSA P-256: `cosign.key` in cosign's encrypted PEM
//!   (opened with a password), `cosign.pub` a PEM public key ([`keys`]).
//! - A *signature* of an image is made over a *simple-signing payload*
//!   ([`payload`]) naming the image's manifest digest. It is kept as a
//!   layer (media type [`artifact::SIMPLE_SIGNING`], the base64 signature
//!   in the annotation [`artifact::SIGNATURE_ANNOTATION`]) of a manifest
//!   tagged `sha256-<hex>.sig` in the image's repository.
//! - An *attestation* is an in-toto [`dsse::Statement`] (subject: the image;
//!   a predicate of some `predicateType`, e.g. SLSA provenance) signed into
//!   a DSSE [`dsse::Envelope`]; kept as a layer ([`artifact::DSSE_ENVELOPE`],
//!   annotations `dev.cosignproject.cosign/signature: ""` and
//!   `predicateType`) of a manifest tagged `sha256-<hex>.att`.
//! - A *place* ([`place::Place`]) holds an image and its artifacts: a
//!   registry repository ([`place::RegistryPlace`]) or jbuild's store
//!   ([`place::StorePlace`], under the image's name with cosign's tags;
//!   `jbuild push` carries them, `jbuild images` does not list them).
//!
//! # The API later parts build on
//!
//! ```text
//! read_signing_key(path, ask) / read_public_key(path)    keys from files
//! generate_key_pair(prefix, password)                     cosign.key + cosign.pub
//! sign(place, key)               ─▶ Signed      a .sig layer appended
//! verify_signatures(place, pub)  ─▶ Vec<Verified>   or NoSignatures / NoneVerified
//! attest(place, key, predicate_type, predicate) ─▶ Signed   a .att layer
//! verify_attestations(place, pub, predicate_type) ─▶ Vec<dsse::Statement>
//! read_attestations(place, predicate_type) ─▶ the same, signatures unchecked
//! attach(place, kind, layer)     ─▶ Signed      any artifact::Layer, any Kind
//! carry(store, digest, transport)  ─▶ tags    the store's artifacts, pushed along
//! ```
//!
//! Formats are pure ([`keys`], [`payload`], [`dsse`], [`artifact`]: bytes in,
//! bytes out, unit-tested); only [`place`] and the functions here do I/O.
//! Keys and passwords never reach a log, an error or `--json`: errors name
//! the key's file and what failed, never what was read.

pub mod artifact;
mod carry;
pub mod dsse;
pub mod keys;
pub mod payload;
pub mod place;
pub mod policy;
mod sign;
mod verify;

use std::path::{Path, PathBuf};

pub use carry::carry;
pub use keys::{KeyError, PublicKey, SigningKey};
pub use place::{is_artifact_name, Place, RegistryPlace, StorePlace};
pub use sign::{attach, attest, generate_key_pair, sign, KeyFiles, Signed};
pub use verify::{read_attestations, verify_attestations, verify_signatures, Verified};

use crate::keychain::Secret;
use crate::store::StoreError;
use crate::transport::TransportError;

/// The largest signature payload or attestation read (cosign's own
/// documents are a few KiB; an SBOM attestation may be large).
pub const MAX_ARTIFACT_LAYER: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{}: cannot read the key", path.display())]
    ReadKey {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: the key is refused", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: KeyError,
    },
    #[error("{}: the key is encrypted: set COSIGN_PASSWORD or run on a terminal to be asked", path.display())]
    NoPassword { path: PathBuf },
    #[error("{} exists: remove it or choose another --output-key-prefix", path.display())]
    KeyExists { path: PathBuf },
    #[error("{}: cannot write the key", path.display())]
    WriteKey {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{image} has no signatures (no `{tag}` in its repository): sign it with `jbuild sign --key KEY {image}`")]
    NoSignatures { image: String, tag: String },
    #[error("{image} has no attestations (no `{tag}` in its repository)")]
    NoAttestations { image: String, tag: String },
    #[error("no signature of {image} is verified by the key: {}", reasons.join("; "))]
    NoneVerified { image: String, reasons: Vec<String> },
    #[error("the image `{0}` has no name in the store to keep its signatures under: tag it first (`jbuild tag`)")]
    Unnamed(String),
    #[error("{0}")]
    Name(String),
    #[error("{what} is {size} bytes, more than the {max} allowed")]
    TooLarge { what: String, size: u64, max: u64 },
    /// Boxed: a transport error is large, and every result here carries
    /// the error type.
    #[error(transparent)]
    Transport(Box<TransportError>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::transport::RuntimeError> for TrustError {
    fn from(e: crate::transport::RuntimeError) -> TrustError {
        TransportError::from(e).into()
    }
}

impl From<TransportError> for TrustError {
    fn from(e: TransportError) -> TrustError {
        TrustError::Transport(Box::new(e))
    }
}

impl TrustError {
    fn io(context: impl Into<String>, source: std::io::Error) -> TrustError {
        TrustError::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether the user can fix this (a key, a password, an image that is
    /// not signed or whose signature is refused) rather than it being a
    /// fault of jbuild or the system.
    pub fn is_user_error(&self) -> bool {
        match self {
            TrustError::ReadKey { .. }
            | TrustError::Key { .. }
            | TrustError::NoPassword { .. }
            | TrustError::KeyExists { .. }
            | TrustError::WriteKey { .. }
            | TrustError::NoSignatures { .. }
            | TrustError::NoAttestations { .. }
            | TrustError::NoneVerified { .. }
            | TrustError::Unnamed(_)
            | TrustError::Name(_)
            | TrustError::TooLarge { .. } => true,
            TrustError::Transport(e) => e.is_user_error(),
            TrustError::Store(e) => e.is_user_error(),
            TrustError::Io { .. } => false,
        }
    }
}

/// The private key in `path`; `ask` gives the password when the key is
/// encrypted (and is not called otherwise). The password is remembered as
/// a secret, so it is scrubbed from anything printed.
pub fn read_signing_key(
    path: &Path,
    ask: &mut dyn FnMut() -> Option<Secret>,
) -> Result<SigningKey, TrustError> {
    let text = std::fs::read(path).map_err(|source| TrustError::ReadKey {
        path: path.to_path_buf(),
        source,
    })?;
    let mut password = None;
    if SigningKey::needs_password(&text) {
        let p = ask().ok_or_else(|| TrustError::NoPassword {
            path: path.to_path_buf(),
        })?;
        if !p.expose().is_empty() {
            crate::keychain::redact::remember(None, p.expose());
        }
        password = Some(p);
    }
    SigningKey::from_pem(&text, || {
        password
            .as_ref()
            .map(|p| p.expose().as_bytes().to_vec())
            .unwrap_or_default()
    })
    .map_err(|source| TrustError::Key {
        path: path.to_path_buf(),
        source,
    })
}

/// The public key in `path` (PEM).
pub fn read_public_key(path: &Path) -> Result<PublicKey, TrustError> {
    let text = std::fs::read(path).map_err(|source| TrustError::ReadKey {
        path: path.to_path_buf(),
        source,
    })?;
    PublicKey::from_pem(&text).map_err(|source| TrustError::Key {
        path: path.to_path_buf(),
        source,
    })
}
