//! Deterministic JSON, and reading the JSON documents of an image
//! (manifests and indexes) from bytes that came from outside.
//!
//! oci-spec keeps labels, annotations and exposed ports in `HashMap`s, whose
//! order changes from run to run. A digest is taken over bytes, so every
//! JSON document jbuild writes goes through [`canonical_json`]: serialised
//! into a `serde_json::Value` first, whose objects are `BTreeMap`s — keys in
//! byte order — as long as serde_json's `preserve_order` feature is off.
//! Nothing in the dependency graph enables it today (`cargo tree -e features
//! -i serde_json`); the test `serde_json_objects_are_sorted` fails the day
//! something does.

use oci_spec::image::{Descriptor, ImageIndex, ImageManifest, MediaType};
use serde::Serialize;

/// The largest manifest or index jbuild reads (the limit registries use).
pub const MAX_MANIFEST_SIZE: u64 = 4 * 1024 * 1024;

/// docker's media types, which registries still serve for many images; their
/// JSON has the same shape as the OCI ones.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// `v` as compact JSON with object keys in byte order.
///
/// # Panics
///
/// If `v` cannot be represented as JSON (a map with non-string keys): a bug
/// in the caller's type, not a condition of the input.
pub fn canonical_json<T: Serialize>(v: &T) -> Vec<u8> {
    let value = serde_json::to_value(v).expect("value serialisable as JSON");
    serde_json::to_vec(&value).expect("a JSON value always serialises")
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
    pub fn parse(desc: &Descriptor, bytes: &[u8]) -> Result<Document, String> {
        let kind = DocKind::of(desc.media_type()).ok_or_else(|| {
            format!(
                "media type `{}` is not a manifest or an index",
                desc.media_type()
            )
        })?;
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(rename = "mediaType")]
            media_type: Option<String>,
        }
        let head: Head =
            serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
        if let Some(own) = head.media_type {
            if own != desc.media_type().to_string() {
                return Err(format!(
                    "its mediaType `{own}` differs from the descriptor's `{}`",
                    desc.media_type()
                ));
            }
        }
        match kind {
            DocKind::Manifest => serde_json::from_slice(bytes)
                .map(|m| Document::Manifest(Box::new(m)))
                .map_err(|e| format!("not a valid image manifest: {e}")),
            DocKind::Index => serde_json::from_slice(bytes)
                .map(|i| Document::Index(Box::new(i)))
                .map_err(|e| format!("not a valid image index: {e}")),
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
    use oci_spec::image::{ConfigBuilder, ImageConfigurationBuilder};
    use std::collections::HashMap;

    #[test]
    fn serde_json_objects_are_sorted() {
        let mut m = serde_json::Map::new();
        m.insert("b".into(), 1.into());
        m.insert("a".into(), 2.into());
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"a":2,"b":1}"#,
            "serde_json's preserve_order got enabled"
        );
    }

    #[test]
    fn canonical_json_is_deterministic_with_hashmaps() {
        let make = |order: &[usize]| {
            let keys: Vec<String> = (0..40).map(|i| format!("label.{i}")).collect();
            let mut labels = HashMap::new();
            for &i in order {
                labels.insert(keys[i].clone(), format!("v{i}"));
            }
            let ports: Vec<String> = order.iter().map(|i| format!("{}/tcp", 1000 + i)).collect();
            let config = ConfigBuilder::default()
                .labels(labels)
                .exposed_ports(ports)
                .build()
                .unwrap();
            let c = ImageConfigurationBuilder::default()
                .config(config)
                .build()
                .unwrap();
            canonical_json(&c)
        };
        let forward: Vec<usize> = (0..40).collect();
        let backward: Vec<usize> = (0..40).rev().collect();
        let a = make(&forward);
        assert_eq!(a, make(&backward));
        let text = String::from_utf8(a).unwrap();
        assert!(text.find("label.0").unwrap() < text.find("label.1\"").unwrap());
        assert!(!text.contains(' ') && !text.contains('\n'));
    }

    #[test]
    fn document_media_type_must_agree() {
        let digest = oci_digest(&Digest::of(b"x"));
        let desc = Descriptor::new(MediaType::ImageManifest, 2, digest.clone());
        let index_bytes = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        let err = Document::parse(&desc, index_bytes).unwrap_err();
        assert!(err.contains("differs"), "{err}");
        let blob = Descriptor::new(MediaType::ImageLayerGzip, 2, digest);
        assert!(Document::parse(&blob, b"{}").is_err());
    }
}
