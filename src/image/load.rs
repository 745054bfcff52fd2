//! Reading an image from the store: resolve a reference to a manifest and
//! its config (choosing from an index by platform), every document read
//! within [`MAX_DOCUMENT`] and checked to agree with the others.

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};

use super::config::ConfigExtras;
use super::media::{self, MAX_DOCUMENT};
use super::{platform, ImageError, Platform};
use crate::digest::Digest;
use crate::store::{descriptor_digest, Store, StoreError};

/// An image as the engine uses it.
#[derive(Debug, Clone)]
pub struct LoadedImage {
    pub manifest_digest: Digest,
    pub manifest: ImageManifest,
    pub config: ImageConfiguration,
    /// What the config holds that only Docker's has (`Healthcheck`,
    /// `OnBuild`, `Shell`).
    pub extras: ConfigExtras,
}

impl LoadedImage {
    /// The config's `rootfs.diff_ids`, bottom first; one that is not a
    /// sha256 digest is an error naming the image.
    pub fn diff_ids(&self) -> Result<Vec<Digest>, ImageError> {
        self.config
            .rootfs()
            .diff_ids()
            .iter()
            .map(|d| {
                d.parse::<Digest>().map_err(|source| ImageError::Digest {
                    image: self.manifest_digest.to_string(),
                    source,
                })
            })
            .collect()
    }

    /// The layers' blob digests, bottom first.
    pub fn layer_digests(&self) -> Result<Vec<Digest>, ImageError> {
        self.manifest
            .layers()
            .iter()
            .map(|l| {
                descriptor_digest(l).map_err(|source| ImageError::Digest {
                    image: self.manifest_digest.to_string(),
                    source,
                })
            })
            .collect()
    }
}

/// Reads the image `reference` names in the store, picking `platform` from
/// an index.
pub fn load(
    store: &Store,
    reference: &str,
    platform: &Platform,
) -> Result<LoadedImage, ImageError> {
    let desc = store
        .resolve(reference)?
        .ok_or_else(|| ImageError::NotFound(reference.to_string()))?;
    load_descriptor(store, &desc, platform, reference)
}

/// Reads the image `desc` describes (`reference` names it in errors),
/// picking `platform` from an index.
pub fn load_descriptor(
    store: &Store,
    desc: &Descriptor,
    platform: &Platform,
    reference: &str,
) -> Result<LoadedImage, ImageError> {
    let bad_digest = |source| ImageError::Digest {
        image: reference.to_string(),
        source,
    };
    let digest = descriptor_digest(desc).map_err(bad_digest)?;
    if media::is_index(desc.media_type()) {
        let bytes = store.read_blob(&digest, MAX_DOCUMENT)?;
        let index: ImageIndex =
            serde_json::from_slice(&bytes).map_err(|source| ImageError::Invalid {
                what: "image index",
                digest: digest.clone(),
                source,
            })?;
        let chosen = platform::select(&index, platform).map_err(|source| ImageError::Platform {
            reference: reference.to_string(),
            source,
        })?;
        return load_descriptor(store, &chosen, platform, reference);
    }
    if !media::is_manifest(desc.media_type()) {
        return Err(ImageError::NotAnImage {
            reference: reference.to_string(),
            media_type: desc.media_type().to_string(),
        });
    }
    let bytes = store.read_blob(&digest, MAX_DOCUMENT)?;
    let manifest: ImageManifest =
        serde_json::from_slice(&bytes).map_err(|source| ImageError::Invalid {
            what: "manifest",
            digest: digest.clone(),
            source,
        })?;
    with_config(store, digest, manifest, reference)
}

/// The image whose manifest `manifest` (digest `digest`) was already read:
/// its config read and checked against it.
pub fn with_config(
    store: &Store,
    digest: Digest,
    manifest: ImageManifest,
    reference: &str,
) -> Result<LoadedImage, ImageError> {
    let config_digest =
        descriptor_digest(manifest.config()).map_err(|source| ImageError::Digest {
            image: reference.to_string(),
            source,
        })?;
    let config_bytes = store.read_blob(&config_digest, MAX_DOCUMENT)?;
    from_config_bytes(digest, manifest, &config_digest, &config_bytes)
}

/// The image whose manifest `manifest` (digest `digest`) was already read,
/// with the bytes of its config (`config_digest`), checked against it:
/// the bytes' digest, their size within [`MAX_DOCUMENT`], and one diff ID
/// per layer.
pub(super) fn from_config_bytes(
    digest: Digest,
    manifest: ImageManifest,
    config_digest: &Digest,
    config_bytes: &[u8],
) -> Result<LoadedImage, ImageError> {
    if config_bytes.len() as u64 > MAX_DOCUMENT {
        return Err(StoreError::TooLarge {
            digest: config_digest.clone(),
            size: config_bytes.len() as u64,
            max: MAX_DOCUMENT,
        }
        .into());
    }
    let actual = Digest::of(config_bytes);
    if actual != *config_digest {
        return Err(StoreError::DigestMismatch {
            expected: config_digest.clone(),
            actual,
            size: config_bytes.len() as u64,
        }
        .into());
    }
    let invalid = |source| ImageError::Invalid {
        what: "image config",
        digest: config_digest.clone(),
        source,
    };
    let mut value: serde_json::Value = serde_json::from_slice(config_bytes).map_err(invalid)?;
    go_key_case(&mut value);
    let extras = ConfigExtras::from_json(&value);
    let config: ImageConfiguration = serde_json::from_value(value).map_err(invalid)?;
    if config.rootfs().diff_ids().len() != manifest.layers().len() {
        return Err(ImageError::Inconsistent {
            digest,
            layers: manifest.layers().len(),
            diff_ids: config.rootfs().diff_ids().len(),
        });
    }
    Ok(LoadedImage {
        manifest_digest: digest,
        manifest,
        config,
        extras,
    })
}

/// The keys of an image config as the Go tools read them: Go's JSON
/// decoder matches field names regardless of case, so podman, buildah and
/// skopeo take FreeBSD's release images' `"config":{"cmd":[...]}` (written
/// so by release/scripts/make-oci-image.sh) as `Cmd`. A key is renamed to
/// the spec's spelling only when that spelling is not there itself.
fn go_key_case(config: &mut serde_json::Value) {
    const TOP: &[&str] = &[
        "created",
        "author",
        "architecture",
        "os",
        "variant",
        "config",
        "rootfs",
        "history",
    ];
    const CONFIG: &[&str] = &[
        "User",
        "ExposedPorts",
        "Env",
        "Entrypoint",
        "Cmd",
        "Volumes",
        "WorkingDir",
        "Labels",
        "StopSignal",
        "ArgsEscaped",
        "Healthcheck",
        "OnBuild",
        "Shell",
    ];
    fn fold(v: &mut serde_json::Value, names: &[&str]) {
        let Some(map) = v.as_object_mut() else { return };
        let odd: Vec<(String, &str)> = map
            .keys()
            .filter_map(|k| {
                let name = names
                    .iter()
                    .find(|n| n.eq_ignore_ascii_case(k) && **n != k)?;
                (!map.contains_key(*name)).then(|| (k.clone(), *name))
            })
            .collect();
        for (k, name) in odd {
            if let Some(x) = map.remove(&k) {
                map.entry(name).or_insert(x);
            }
        }
    }
    fold(config, TOP);
    if let Some(c) = config.get_mut("config") {
        fold(c, CONFIG);
    }
}

#[cfg(test)]
mod go_case_tests {
    #[test]
    fn freebsds_lower_case_cmd_reads_as_cmd_and_the_spec_spelling_wins() {
        let mut v = serde_json::json!({"OS": "freebsd", "os": "linux", "config": {"cmd": ["/bin/sh"], "env": ["A=1"], "Env": ["B=2"]}});
        super::go_key_case(&mut v);
        assert_eq!(v["os"], "linux");
        assert_eq!(v["config"]["Cmd"], serde_json::json!(["/bin/sh"]));
        assert_eq!(v["config"]["Env"], serde_json::json!(["B=2"]));
    }
}
