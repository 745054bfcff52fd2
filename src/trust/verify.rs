//! Checking signatures and attestations against a public key.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::artifact::{self, Kind};
use super::dsse::{Envelope, Statement};
use super::payload::SimpleSigning;
use super::{Place, PublicKey, TrustError, MAX_ARTIFACT_LAYER};

/// One signature the key verified.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verified {
    /// The image as the place names it.
    pub image: String,
    /// Its digest: what the payload names.
    pub digest: String,
    /// Where the payload says it was signed (`critical.identity`).
    pub docker_reference: String,
    /// The payload's `optional` annotations, if any.
    pub annotations: serde_json::Value,
}

/// Every signature of the image `place` names that `key` verifies, as
/// `cosign verify --key` does: the signature is the key's over the
/// payload, and the payload names the image's digest. An image with no
/// `.sig`, or none that passes, is an error naming each reason.
pub fn verify_signatures(place: &dyn Place, key: &PublicKey) -> Result<Vec<Verified>, TrustError> {
    let digest = place.subject_digest()?.to_string();
    let image = place.describe();
    let layers = artifact_layers(place, Kind::Signature, &image)?;
    let mut good = Vec::new();
    let mut reasons = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let n = i + 1;
        if layer.media_type().to_string() != artifact::SIMPLE_SIGNING {
            reasons.push(format!(
                "layer {n} is `{}`, not a signature",
                layer.media_type()
            ));
            continue;
        }
        let Some(sig) = layer
            .annotations()
            .as_ref()
            .and_then(|a| a.get(artifact::SIGNATURE_ANNOTATION))
        else {
            reasons.push(format!(
                "signature {n} has no `{}` annotation",
                artifact::SIGNATURE_ANNOTATION
            ));
            continue;
        };
        let Ok(sig) = B64.decode(sig) else {
            reasons.push(format!("signature {n} is not base64"));
            continue;
        };
        let payload = place.read_blob(layer, MAX_ARTIFACT_LAYER)?;
        if !key.verify(&payload, &sig) {
            reasons.push(format!(
                "signature {n} is not the key's signature of its payload"
            ));
            continue;
        }
        let p = match SimpleSigning::parse(&payload) {
            Ok(p) => p,
            Err(e) => {
                reasons.push(format!(
                    "the payload of signature {n} is not a simple-signing payload ({e})"
                ));
                continue;
            }
        };
        if p.digest() != digest {
            reasons.push(format!(
                "signature {n} is for {}, not for the image's digest {digest}",
                p.digest()
            ));
            continue;
        }
        good.push(Verified {
            image: image.clone(),
            digest: digest.clone(),
            docker_reference: p.critical.identity.docker_reference.clone(),
            annotations: serde_json::to_value(&p.optional).unwrap_or_default(),
        });
    }
    if good.is_empty() {
        if reasons.is_empty() {
            reasons.push("the signature manifest has no layers".into());
        }
        return Err(TrustError::NoneVerified { image, reasons });
    }
    Ok(good)
}

/// Every attestation of `predicate_type` (a URI; `None`: any) about the
/// image `place` names that `key` verifies, as `cosign verify-attestation`
/// does: the envelope is the key's, and the statement names the image.
pub fn verify_attestations(
    place: &dyn Place,
    key: &PublicKey,
    predicate_type: Option<&str>,
) -> Result<Vec<Statement>, TrustError> {
    attestations(place, Some(key), predicate_type)
}

/// Every attestation of `predicate_type` about the image `place` names,
/// its signature NOT checked: for what is checked another way (`jbuild
/// verify` takes a provenance's arguments, and the rebuild's digest is
/// the check).
pub fn read_attestations(
    place: &dyn Place,
    predicate_type: Option<&str>,
) -> Result<Vec<Statement>, TrustError> {
    attestations(place, None, predicate_type)
}

fn attestations(
    place: &dyn Place,
    key: Option<&PublicKey>,
    predicate_type: Option<&str>,
) -> Result<Vec<Statement>, TrustError> {
    let digest = place.subject_digest()?.to_string();
    let image = place.describe();
    let layers = artifact_layers(place, Kind::Attestation, &image)?;
    let mut good = Vec::new();
    let mut reasons = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let n = i + 1;
        if layer.media_type().to_string() != artifact::DSSE_ENVELOPE {
            reasons.push(format!(
                "layer {n} is `{}`, not an attestation",
                layer.media_type()
            ));
            continue;
        }
        let bytes = place.read_blob(layer, MAX_ARTIFACT_LAYER)?;
        let statement = match Envelope::parse(&bytes).and_then(|e| e.statement(key)) {
            Ok(s) => s,
            Err(e) => {
                reasons.push(format!("attestation {n}: {e}"));
                continue;
            }
        };
        if !statement.names_digest(&digest) {
            reasons.push(format!(
                "attestation {n} is not about the image's digest {digest}"
            ));
            continue;
        }
        if predicate_type.is_some_and(|t| t != statement.predicate_type) {
            reasons.push(format!(
                "attestation {n} is of type {}, not {}",
                statement.predicate_type,
                predicate_type.unwrap_or_default()
            ));
            continue;
        }
        good.push(statement);
    }
    if good.is_empty() {
        if reasons.is_empty() {
            reasons.push("the attestation manifest has no layers".into());
        }
        return Err(TrustError::NoneVerified { image, reasons });
    }
    Ok(good)
}

fn artifact_layers(
    place: &dyn Place,
    kind: Kind,
    image: &str,
) -> Result<Vec<oci_spec::image::Descriptor>, TrustError> {
    let digest = place.subject_digest()?;
    let tag = kind.tag(&digest);
    let Some(bytes) = place.artifact(&tag)? else {
        return Err(match kind {
            Kind::Attestation => TrustError::NoAttestations {
                image: image.to_string(),
                tag,
            },
            _ => TrustError::NoSignatures {
                image: image.to_string(),
                tag,
            },
        });
    };
    artifact::layers_of(&bytes).map_err(|e| TrustError::NoneVerified {
        image: image.to_string(),
        reasons: vec![format!("`{tag}` is not an image manifest ({e})")],
    })
}
