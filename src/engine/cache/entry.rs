//! The registry cache's format, version 1 (see `docs/cache.md`): what an
//! entry is, how it is named, and how one read from a registry is checked
//! before anything of it is used.
//!
//! An **entry** is the result of one build step, stored in a registry
//! repository as an ordinary OCI image manifest tagged
//! `jbuild-v1-<64 hex digits of the step's cache key>`. The manifest names
//! a small config blob of media type [`CONFIG_MEDIA_TYPE`] (what the entry
//! claims: the key, the layer's diff ID, ...) and exactly one layer: the
//! step's layer blob as `jbuild build` exports it. Every registry stores
//! such a manifest; nothing here needs a server of jbuild's own.

use oci_spec::image::{Descriptor, ImageManifest};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::digest::Digest;
use crate::image::media::OCI_MANIFEST;
use crate::layer::Compression;
use crate::store::canonical_json;

/// The version of this format; it is in every tag and every config.
pub const FORMAT: u32 = 1;
/// The media type of an entry's config blob.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.jbuild.cache.step.v1+json";
/// An entry's config is a few hundred bytes; anything this big is not one.
pub const MAX_CONFIG: u64 = 64 * 1024;

/// The tag an entry for `key` has in a cache repository (73 characters;
/// tags may have 128).
pub fn tag(key: &Digest) -> String {
    format!("jbuild-v{FORMAT}-{}", key.hex())
}

/// What an entry says about itself: its config blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryConfig {
    /// [`FORMAT`].
    pub format: u32,
    /// The step's cache key.
    pub key: Digest,
    /// The key of the step below it in its stage, if any (for people and
    /// for expiry scripts: nothing is looked up by it).
    pub parent: Option<Digest>,
    /// The digest of the uncompressed layer tar.
    #[serde(rename = "diffID")]
    pub diff_id: Digest,
    /// `gzip` or `zstd`: the layer's compression.
    pub compression: String,
    /// The `SOURCE_DATE_EPOCH` file times were clamped to in the layer.
    #[serde(rename = "mtimeClamp")]
    pub mtime_clamp: u64,
    /// The instruction, after substitution, as the image history records it.
    pub step: String,
}

/// An entry ready to push: its config bytes and its manifest bytes.
#[derive(Debug, Clone)]
pub struct EncodedEntry {
    pub config: Vec<u8>,
    pub config_digest: Digest,
    pub manifest: Vec<u8>,
    pub manifest_digest: Digest,
}

/// The layer blob of a step, as the export made it.
#[derive(Debug, Clone)]
pub struct LayerBlob {
    pub digest: Digest,
    pub size: u64,
    pub media_type: String,
}

/// The bytes of the entry `config` describes, whose layer is `layer`.
pub fn encode(config: &EntryConfig, layer: &LayerBlob) -> EncodedEntry {
    let config_bytes = canonical_json(config);
    let config_digest = Digest::of(&config_bytes);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": config_digest.to_string(),
            "size": config_bytes.len(),
        },
        "layers": [{
            "mediaType": layer.media_type,
            "digest": layer.digest.to_string(),
            "size": layer.size,
        }],
    });
    let manifest = canonical_json(&manifest);
    EncodedEntry {
        manifest_digest: Digest::of(&manifest),
        manifest,
        config: config_bytes,
        config_digest,
    }
}

/// Why an entry read from a registry is not used.
#[derive(Debug, thiserror::Error)]
pub enum BadEntry {
    #[error("its manifest is not an OCI image manifest of jbuild's cache: {0}")]
    Manifest(String),
    #[error("its config is not valid: {0}")]
    Config(String),
    #[error("it is in format {0}; this jbuild reads format {FORMAT}")]
    Format(u32),
    #[error("it is the entry of another key ({0})")]
    OtherKey(Digest),
    #[error("its layer is {media_type}, but its config says {compression}")]
    Compression {
        media_type: String,
        compression: String,
    },
}

impl crate::blame::Blame for BadEntry {
    /// The cache repository the user named holds something that is not
    /// an entry of this jbuild's cache.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The two descriptors of an entry's manifest: its config and its layer.
pub struct EntryParts {
    pub config: Descriptor,
    pub layer: Descriptor,
}

/// Checks an entry's manifest bytes (already checked against their digest)
/// and returns the descriptors it names.
pub fn parse_manifest(bytes: &[u8]) -> Result<EntryParts, BadEntry> {
    let m: ImageManifest =
        serde_json::from_slice(bytes).map_err(|e| BadEntry::Manifest(e.to_string()))?;
    if m.config().media_type().to_string() != CONFIG_MEDIA_TYPE {
        return Err(BadEntry::Manifest(format!(
            "its config is {}, not {CONFIG_MEDIA_TYPE}",
            m.config().media_type()
        )));
    }
    if m.config().size() > MAX_CONFIG {
        return Err(BadEntry::Manifest(format!(
            "its config is {} bytes, more than {MAX_CONFIG}",
            m.config().size()
        )));
    }
    let [layer] = m.layers().as_slice() else {
        return Err(BadEntry::Manifest(format!(
            "it has {} layers, not one",
            m.layers().len()
        )));
    };
    if Compression::from_media_type(layer.media_type().as_ref()).is_none() {
        return Err(BadEntry::Manifest(format!(
            "its layer is {}, not a gzip or zstd layer tar",
            layer.media_type()
        )));
    }
    Ok(EntryParts {
        config: m.config().clone(),
        layer: layer.clone(),
    })
}

/// Checks an entry's config bytes (already checked against their digest)
/// against the key it was looked up by and the layer its manifest names.
pub fn parse_config(
    bytes: &[u8],
    key: &Digest,
    layer: &Descriptor,
) -> Result<EntryConfig, BadEntry> {
    #[derive(Deserialize)]
    struct Version {
        format: u32,
    }
    let v: Version = serde_json::from_slice(bytes).map_err(|e| BadEntry::Config(e.to_string()))?;
    if v.format != FORMAT {
        return Err(BadEntry::Format(v.format));
    }
    let c: EntryConfig =
        serde_json::from_slice(bytes).map_err(|e| BadEntry::Config(e.to_string()))?;
    if &c.key != key {
        return Err(BadEntry::OtherKey(c.key));
    }
    let media_type = layer.media_type().to_string();
    if Compression::from_media_type(&media_type).map(|c| c.to_string())
        != Some(c.compression.clone())
    {
        return Err(BadEntry::Compression {
            media_type,
            compression: c.compression,
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EntryConfig {
        EntryConfig {
            format: FORMAT,
            key: Digest::of(b"key"),
            parent: Some(Digest::of(b"parent")),
            diff_id: Digest::of(b"tar"),
            compression: "gzip".into(),
            mtime_clamp: 0,
            step: "RUN true".into(),
        }
    }

    fn layer() -> LayerBlob {
        LayerBlob {
            digest: Digest::of(b"blob"),
            size: 4,
            media_type: Compression::Gzip.media_type().into(),
        }
    }

    #[test]
    fn tags_fit_and_carry_the_version() {
        let t = tag(&Digest::of(b"x"));
        assert!(
            t.starts_with("jbuild-v1-") && t.len() == 74 && t.len() <= 128,
            "{t}"
        );
        assert!(crate::store::valid_ref_name(&t));
    }

    #[test]
    fn an_entry_reads_back_as_written() {
        let e = encode(&config(), &layer());
        let parts = parse_manifest(&e.manifest).unwrap();
        assert_eq!(
            parts.config.digest().to_string(),
            e.config_digest.to_string()
        );
        assert_eq!(parts.layer.digest().to_string(), layer().digest.to_string());
        let c = parse_config(&e.config, &config().key, &parts.layer).unwrap();
        assert_eq!(c, config());
        // The bytes are jbuild's own: a changed encoder changes every entry.
        assert_eq!(
            String::from_utf8(e.config).unwrap(),
            format!(
                "{{\"compression\":\"gzip\",\"diffID\":\"{}\",\"format\":1,\"key\":\"{}\",\"mtimeClamp\":0,\"parent\":\"{}\",\"step\":\"RUN true\"}}",
                Digest::of(b"tar"),
                Digest::of(b"key"),
                Digest::of(b"parent")
            )
        );
    }

    #[test]
    fn entries_that_are_not_ours_are_refused() {
        let e = encode(&config(), &layer());
        let parts = parse_manifest(&e.manifest).unwrap();
        let other = parse_config(&e.config, &Digest::of(b"other"), &parts.layer).unwrap_err();
        assert!(matches!(other, BadEntry::OtherKey(_)), "{other}");

        let mut c = config();
        c.format = 2;
        let v2 = encode(&c, &layer());
        let err = parse_config(&v2.config, &c.key, &parts.layer).unwrap_err();
        assert!(matches!(err, BadEntry::Format(2)), "{err}");

        let mut c = config();
        c.compression = "zstd".into();
        let z = encode(&c, &layer());
        let err = parse_config(&z.config, &c.key, &parts.layer).unwrap_err();
        assert!(matches!(err, BadEntry::Compression { .. }), "{err}");

        let image = String::from_utf8(e.manifest.clone())
            .unwrap()
            .replace(CONFIG_MEDIA_TYPE, crate::image::media::OCI_CONFIG);
        assert!(parse_manifest(image.as_bytes()).is_err());
        let two = String::from_utf8(e.manifest.clone())
            .unwrap()
            .replace("\"layers\":[{", "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\",\"size\":1},{");
        assert!(parse_manifest(two.as_bytes()).is_err());
        assert!(parse_config(b"{\"format\":1}", &config().key, &parts.layer).is_err());
        let unknown = String::from_utf8(e.config.clone())
            .unwrap()
            .replace("{", "{\"extra\":1,");
        assert!(parse_config(unknown.as_bytes(), &config().key, &parts.layer).is_err());
        let big = String::from_utf8(e.manifest.clone()).unwrap().replace(
            &format!("\"size\":{}", e.config.len()),
            &format!("\"size\":{}", MAX_CONFIG + 1),
        );
        let err = parse_manifest(big.as_bytes()).err().unwrap();
        assert!(err.to_string().contains("65537 bytes"), "{err}");
    }
}
