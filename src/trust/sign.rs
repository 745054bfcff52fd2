//! Making signatures, attestations and attachments, and key pairs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::artifact::{self, Kind, Layer};
use super::dsse::{Envelope, Statement, IN_TOTO_PAYLOAD_TYPE};
use super::payload::SimpleSigning;
use super::{Place, SigningKey, TrustError};
use crate::keychain::Secret;

/// What was written: the image signed (or attested), and where.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Signed {
    /// The image as the place names it.
    pub image: String,
    /// The image's digest, what the payload names.
    pub digest: String,
    /// The artifact's tag in the image's repository (`sha256-<hex>.sig`).
    pub tag: String,
    /// The digest of the artifact manifest written.
    pub manifest: String,
    /// How many layers (signatures, attestations) it holds now.
    pub layers: usize,
}

/// Signs the image `place` names with `key`, as `cosign sign --key` does:
/// a simple-signing payload, appended to its `.sig` manifest.
pub fn sign(place: &dyn Place, key: &SigningKey) -> Result<Signed, TrustError> {
    let digest = place.subject_digest()?;
    let payload = SimpleSigning::new(&place.repository(), &digest.to_string()).to_bytes();
    let signature = B64.encode(key.sign(&payload));
    attach(
        place,
        Kind::Signature,
        Layer {
            media_type: artifact::SIMPLE_SIGNING.into(),
            bytes: payload,
            annotations: [(artifact::SIGNATURE_ANNOTATION.to_string(), signature)].into(),
        },
    )
}

/// Attests `predicate` (of `predicate_type`, a URI) about the image
/// `place` names, as `cosign attest --key` does: an in-toto statement in
/// a DSSE envelope signed with `key`, appended to its `.att` manifest.
/// Without a key the envelope has no signature: jbuild reads it
/// ([`super::read_attestations`]), no verifier accepts it.
pub fn attest(
    place: &dyn Place,
    key: Option<&SigningKey>,
    predicate_type: &str,
    predicate: serde_json::Value,
) -> Result<Signed, TrustError> {
    let digest = place.subject_digest()?;
    let statement = Statement::new(
        &place.repository(),
        &digest.to_string(),
        predicate_type,
        predicate,
    );
    let envelope = match key {
        Some(key) => Envelope::sign(IN_TOTO_PAYLOAD_TYPE, &statement.to_bytes(), key),
        None => Envelope::unsigned(IN_TOTO_PAYLOAD_TYPE, &statement.to_bytes()),
    };
    attach(
        place,
        Kind::Attestation,
        Layer {
            media_type: artifact::DSSE_ENVELOPE.into(),
            bytes: envelope.to_bytes(),
            annotations: [
                (artifact::SIGNATURE_ANNOTATION.to_string(), String::new()),
                (
                    artifact::PREDICATE_ANNOTATION.to_string(),
                    predicate_type.to_string(),
                ),
            ]
            .into(),
        },
    )
}

/// Attaches `layer` (any media type and bytes) to the image `place`
/// names, in its artifact manifest of `kind` (appended to what is there).
pub fn attach(place: &dyn Place, kind: Kind, layer: Layer) -> Result<Signed, TrustError> {
    let subject = place.subject()?;
    let digest = place.subject_digest()?;
    let tag = kind.tag(&digest);
    let existing = match place.artifact(&tag)? {
        Some(bytes) => artifact::layers_of(&bytes).map_err(|e| TrustError::NoneVerified {
            image: place.describe(),
            reasons: vec![format!("`{tag}` is not an image manifest ({e})")],
        })?,
        None => Vec::new(),
    };
    let layers = artifact::append(existing, layer.descriptor());
    let (config, manifest) = artifact::manifest(&layers, Some(&subject));
    let config_desc = Layer {
        media_type: "application/vnd.oci.image.config.v1+json".into(),
        bytes: config,
        annotations: BTreeMap::new(),
    };
    place.write_artifact(
        &[
            (layer.descriptor(), layer.bytes),
            (config_desc.descriptor(), config_desc.bytes),
        ],
        &manifest,
        &tag,
    )?;
    Ok(Signed {
        image: place.describe(),
        digest: digest.to_string(),
        tag,
        manifest: crate::digest::Digest::of(&manifest).to_string(),
        layers: layers.len(),
    })
}

/// The files a new key pair was written to.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyFiles {
    pub private: PathBuf,
    pub public: PathBuf,
}

/// Writes a new key pair as `cosign generate-key-pair` does:
/// `PREFIX.key` (encrypted with `password`, mode 0600) and `PREFIX.pub`.
/// Refuses to replace either file.
pub fn generate_key_pair(prefix: &Path, password: &Secret) -> Result<KeyFiles, TrustError> {
    let private = with_ext(prefix, "key");
    let public = with_ext(prefix, "pub");
    for p in [&private, &public] {
        if p.exists() {
            return Err(TrustError::KeyExists { path: p.clone() });
        }
    }
    let key = SigningKey::generate();
    let pem = key
        .to_encrypted_pem(password.expose().as_bytes())
        .map_err(|source| TrustError::Key {
            path: private.clone(),
            source,
        })?;
    write_new(&private, pem.as_bytes(), 0o600)?;
    write_new(&public, key.public().to_pem().as_bytes(), 0o644)?;
    Ok(KeyFiles { private, public })
}

fn with_ext(prefix: &Path, ext: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TrustError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| TrustError::WriteKey {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(err)
}
