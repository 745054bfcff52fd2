//! Media types, and the JSON documents of an image (manifests and
//! indexes) read from bytes that came from outside.
//!
//! Every question about a media type is answered here, once: whether a
//! descriptor names an index ([`is_index`]), a manifest ([`is_manifest`]),
//! a config ([`is_config`]); docker's media types, which registries still
//! serve for many images, count as their OCI twins (their JSON has the same
//! shape). And the one cap on documents: [`MAX_DOCUMENT`].

use oci_spec::image::{Descriptor, ImageIndex, ImageManifest, MediaType};

/// The largest manifest, index or config jbuild reads (the limit
/// registries use; a real one is a few KiB). Checked before a document is
/// read whole, so a hostile store or registry cannot exhaust memory.
pub const MAX_DOCUMENT: u64 = 4 * 1024 * 1024;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

/// Whether `tag` is the tag of an artifact cosign keeps beside an image
/// (`sha256-<64 hex>.sig`, `.att`, or jbuild's `.art`): what it is
/// (`sig`, `att`, `art`) and the image's digest (`sha256:<hex>`). Such a
/// name in the store is not an image of its own (`jbuild images` skips
/// it; `jbuild push` of the image carries it).
pub fn artifact_tag(tag: &str) -> Option<(&str, String)> {
    let rest = tag.strip_prefix("sha256-")?;
    let (hex, suffix) = rest.split_once('.')?;
    let ok = hex.len() == 64
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && matches!(suffix, "sig" | "att" | "art");
    ok.then(|| (suffix, format!("sha256:{hex}")))
}

/// What a manifest-like document is, by its descriptor's media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Manifest,
    Index,
}

impl DocKind {
    pub fn of(media_type: &MediaType) -> Option<DocKind> {
        match media_type {
            MediaType::ImageManifest => Some(DocKind::Manifest),
            MediaType::ImageIndex => Some(DocKind::Index),
            MediaType::Other(s) if s == DOCKER_MANIFEST => Some(DocKind::Manifest),
            MediaType::Other(s) if s == DOCKER_MANIFEST_LIST => Some(DocKind::Index),
            _ => None,
        }
    }
}

/// Whether `media_type` is an image index (OCI) or manifest list (docker).
pub fn is_index(media_type: &MediaType) -> bool {
    DocKind::of(media_type) == Some(DocKind::Index)
}

/// Whether `media_type` is an image manifest (OCI or docker).
pub fn is_manifest(media_type: &MediaType) -> bool {
    DocKind::of(media_type) == Some(DocKind::Manifest)
}

/// Whether `media_type` is an image configuration (OCI or docker).
pub fn is_config(media_type: &MediaType) -> bool {
    match media_type {
        MediaType::ImageConfig => true,
        MediaType::Other(s) => s == OCI_CONFIG || s == DOCKER_CONFIG,
        _ => false,
    }
}

/// Why bytes are not the document their descriptor says.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("media type `{0}` is not a manifest or an index")]
    NotADocument(String),
    #[error("not valid JSON")]
    Json(#[source] serde_json::Error),
    #[error("its mediaType `{own}` differs from the descriptor's `{descriptor}`")]
    MediaTypeDiffers { own: String, descriptor: String },
    #[error("not a valid image manifest")]
    Manifest(#[source] serde_json::Error),
    #[error("not a valid image index")]
    Index(#[source] serde_json::Error),
}

impl crate::blame::Blame for DocumentError {
    /// A document that is not what its descriptor says is the image's
    /// fault, as [`super::ImageError::Invalid`] is.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A parsed manifest or index.
#[derive(Debug, Clone)]
pub enum Document {
    Manifest(Box<ImageManifest>),
    Index(Box<ImageIndex>),
}

impl Document {
    /// Parses `bytes` as the document `desc` describes. The document's own
    /// `mediaType`, when present, must agree with the descriptor's, so the
    /// same bytes cannot be read as one thing here and another elsewhere.
    pub fn parse(desc: &Descriptor, bytes: &[u8]) -> Result<Document, DocumentError> {
        let kind = DocKind::of(desc.media_type())
            .ok_or_else(|| DocumentError::NotADocument(desc.media_type().to_string()))?;
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(rename = "mediaType")]
            media_type: Option<String>,
        }
        let head: Head = serde_json::from_slice(bytes).map_err(DocumentError::Json)?;
        if let Some(own) = head.media_type {
            if own != desc.media_type().to_string() {
                return Err(DocumentError::MediaTypeDiffers {
                    own,
                    descriptor: desc.media_type().to_string(),
                });
            }
        }
        match kind {
            DocKind::Manifest => serde_json::from_slice(bytes)
                .map(|m| Document::Manifest(Box::new(m)))
                .map_err(DocumentError::Manifest),
            DocKind::Index => serde_json::from_slice(bytes)
                .map(|i| Document::Index(Box::new(i)))
                .map_err(DocumentError::Index),
        }
    }

    /// Everything this document points at: an index's manifests, or a
    /// manifest's config and layers (and `subject`, which a referrer keeps
    /// alive).
    pub fn children(&self) -> Vec<&Descriptor> {
        match self {
            Document::Index(i) => i.manifests().iter().collect(),
            Document::Manifest(m) => std::iter::once(m.config())
                .chain(m.layers())
                .chain(m.subject().as_ref())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::store::oci_digest;

    #[test]
    fn document_media_type_must_agree() {
        let digest = oci_digest(&Digest::of(b"x"));
        let desc = Descriptor::new(MediaType::ImageManifest, 2, digest.clone());
        let index_bytes = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        let err = Document::parse(&desc, index_bytes).unwrap_err().to_string();
        assert!(err.contains("differs"), "{err}");
        let blob = Descriptor::new(MediaType::ImageLayerGzip, 2, digest);
        assert!(Document::parse(&blob, b"{}").is_err());
    }

    #[test]
    fn media_types_answer_for_docker_and_oci_alike() {
        let other = |s: &str| MediaType::Other(s.to_string());
        assert!(is_index(&MediaType::ImageIndex) && is_index(&other(DOCKER_MANIFEST_LIST)));
        assert!(is_manifest(&MediaType::ImageManifest) && is_manifest(&other(DOCKER_MANIFEST)));
        assert!(is_config(&MediaType::ImageConfig) && is_config(&other(DOCKER_CONFIG)));
        assert!(!is_index(&MediaType::ImageManifest) && !is_manifest(&MediaType::ImageLayerGzip));
        assert!(!is_config(&MediaType::ImageLayer));
    }
}
