//! How cosign keeps signatures and attestations beside an image: an OCI
//! image manifest tagged `sha256-<hex>.sig` (or `.att`) in the image's
//! repository, one layer per signature (or attestation), each layer's
//! annotations carrying what a verifier needs. A new signature is appended
//! to the manifest that is there. No I/O here: the manifest and its
//! config are built from layer descriptors.

use std::collections::BTreeMap;

use oci_spec::image::{Descriptor, ImageManifest, MediaType};
use serde_json::json;

use crate::digest::Digest;
use crate::store::oci_digest;

/// The media type of a signature layer (a simple-signing payload).
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The media type of an attestation layer (a DSSE envelope).
pub const DSSE_ENVELOPE: &str = "application/vnd.dsse.envelope.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The layer annotation naming an attestation's predicate type.
pub const PREDICATE_ANNOTATION: &str = "predicateType";

/// What an artifact manifest holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Signatures (`.sig`).
    Signature,
    /// Attestations (`.att`).
    Attestation,
    /// Anything else attached (`.att`-like, cosign's `attach` uses a
    /// tag of its own; jbuild uses `.art`).
    Other,
}

impl Kind {
    pub fn suffix(self) -> &'static str {
        match self {
            Kind::Signature => "sig",
            Kind::Attestation => "att",
            Kind::Other => "art",
        }
    }

    /// The tag cosign gives the artifact of the image `subject`.
    pub fn tag(self, subject: &Digest) -> String {
        format!("sha256-{}.{}", subject.hex(), self.suffix())
    }

    /// Whether `tag` is an artifact tag (`sha256-<64 hex>.sig|att|art`),
    /// and of which image digest.
    pub fn parse_tag(tag: &str) -> Option<(Kind, String)> {
        let (suffix, digest) = crate::image::media::artifact_tag(tag)?;
        let kind = [Kind::Signature, Kind::Attestation, Kind::Other]
            .into_iter()
            .find(|k| k.suffix() == suffix)?;
        Some((kind, digest))
    }
}

/// One layer to add: its media type, its bytes and its annotations.
#[derive(Debug, Clone)]
pub struct Layer {
    pub media_type: String,
    pub bytes: Vec<u8>,
    pub annotations: BTreeMap<String, String>,
}

impl Layer {
    pub fn descriptor(&self) -> Descriptor {
        let mut d = Descriptor::new(
            MediaType::from(self.media_type.as_str()),
            self.bytes.len() as u64,
            oci_digest(&Digest::of(&self.bytes)),
        );
        if !self.annotations.is_empty() {
            d.set_annotations(Some(self.annotations.clone().into_iter().collect()));
        }
        d
    }
}

/// The layers of an existing artifact manifest (none if `bytes` is not
/// one).
pub fn layers_of(bytes: &[u8]) -> Result<Vec<Descriptor>, serde_json::Error> {
    let m: ImageManifest = serde_json::from_slice(bytes)?;
    Ok(m.layers().clone())
}

/// The config (cosign's: no platform, one diff ID per layer) and the
/// manifest naming `layers`, as bytes: `(config, manifest)`. With
/// `subject` (the image's descriptor) the manifest is also an OCI 1.1
/// *referrer* of the image: a registry that offers the referrers API
/// (`GET /v2/<name>/referrers/<digest>`) lists it there, and one that
/// does not keeps it as the tagged manifest cosign reads.
pub fn manifest(layers: &[Descriptor], subject: Option<&Descriptor>) -> (Vec<u8>, Vec<u8>) {
    let diff_ids: Vec<String> = layers.iter().map(|l| l.digest().to_string()).collect();
    let config = serde_json::to_vec(&json!({
        "architecture": "",
        "os": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "config": {},
    }))
    .expect("a config always serialises");
    let layers: Vec<serde_json::Value> = layers
        .iter()
        .map(|l| serde_json::to_value(l).expect("a descriptor always serialises"))
        .collect();
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "size": config.len(),
            "digest": Digest::of(&config).to_string(),
        },
        "layers": layers,
    });
    if let Some(s) = subject {
        manifest["subject"] = json!({
            "mediaType": s.media_type().to_string(),
            "size": s.size(),
            "digest": s.digest().to_string(),
        });
    }
    let manifest = serde_json::to_vec(&manifest).expect("a manifest always serialises");
    (config, manifest)
}

/// `existing` with `new` appended, unless the same layer (digest and
/// annotations) is there already — cosign does the same, so signing
/// twice with one key adds nothing.
pub fn append(existing: Vec<Descriptor>, new: Descriptor) -> Vec<Descriptor> {
    let mut layers = existing;
    let same = layers
        .iter()
        .any(|l| l.digest() == new.digest() && l.annotations() == new.annotations());
    if !same {
        layers.push(new);
    }
    layers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_cosigns_and_parse_back() {
        let d = Digest::of(b"image");
        let tag = Kind::Signature.tag(&d);
        assert_eq!(tag, format!("sha256-{}.sig", d.hex()));
        assert_eq!(
            Kind::parse_tag(&tag),
            Some((Kind::Signature, d.to_string()))
        );
        assert_eq!(Kind::parse_tag("sha256-abc.sig"), None);
        assert_eq!(Kind::parse_tag("latest"), None);
    }

    #[test]
    fn appending_the_same_layer_twice_keeps_one() {
        let layer = Layer {
            media_type: SIMPLE_SIGNING.into(),
            bytes: b"{}".to_vec(),
            annotations: [(SIGNATURE_ANNOTATION.to_string(), "MEUC".to_string())].into(),
        };
        let once = append(Vec::new(), layer.descriptor());
        let twice = append(once.clone(), layer.descriptor());
        assert_eq!(twice.len(), 1);
        let (config, bytes) = manifest(&twice, None);
        assert_eq!(layers_of(&bytes).unwrap(), once);
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            once[0].digest().to_string()
        );
    }
}
