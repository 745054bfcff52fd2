//! Images in the store as the build engine reads and writes them: resolve
//! a reference to a manifest and config (choosing from an index by
//! platform), and write a new config and manifest.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};
use serde_json::{json, Map, Value};

use crate::digest::Digest;
use crate::plan::state::JAIL_LABEL_PREFIX;
use crate::plan::{ImageState, Platform};
use crate::store::{canonical_json, Store};

pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// JSON documents larger than this are refused (a manifest or config is a
/// few KiB; this bounds memory against a hostile store or registry).
pub const MAX_JSON: u64 = 4 << 20;
/// The label that carries the Jailfile an image was built from.
pub const JAILFILE_LABEL: &str = "org.jbuild.jailfile";

/// An image as the engine uses it.
#[derive(Debug, Clone)]
pub struct LoadedImage {
    pub manifest_digest: Digest,
    pub manifest: ImageManifest,
    pub config: ImageConfiguration,
}

impl LoadedImage {
    /// The config's `rootfs.diff_ids`, bottom first; one that is not a
    /// sha256 digest is an error naming the image.
    pub fn diff_ids(&self) -> Result<Vec<Digest>, String> {
        self.config
            .rootfs()
            .diff_ids()
            .iter()
            .map(|d| {
                d.parse::<Digest>()
                    .map_err(|e| format!("image {}: {e}", self.manifest_digest))
            })
            .collect()
    }
}

fn parse_digest(d: &oci_spec::image::Digest) -> Result<Digest, String> {
    d.to_string().parse().map_err(|e| format!("{e}"))
}

/// Reads the image `reference` names in the store, picking `platform` from
/// an index.
pub fn load(store: &Store, reference: &str, platform: &Platform) -> Result<LoadedImage, String> {
    let desc = store
        .resolve(reference)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("image `{reference}` is not in the local store (see `jbuild images`; import or pull it first)"))?;
    load_descriptor(store, &desc, platform, reference)
}

pub fn load_descriptor(
    store: &Store,
    desc: &Descriptor,
    platform: &Platform,
    reference: &str,
) -> Result<LoadedImage, String> {
    let digest = parse_digest(desc.digest())?;
    let bytes = store
        .read_blob(&digest, MAX_JSON)
        .map_err(|e| e.to_string())?;
    let media = desc.media_type().to_string();
    if media == MEDIA_INDEX || media == DOCKER_LIST {
        let index: ImageIndex = serde_json::from_slice(&bytes)
            .map_err(|e| format!("image index {digest} is not valid: {e}"))?;
        let chosen = index
            .manifests()
            .iter()
            .find(|m| {
                m.platform().as_ref().is_some_and(|p| {
                    p.os().to_string() == platform.os && p.architecture().to_string() == platform.architecture
                })
            })
            .ok_or_else(|| {
                let have: Vec<String> = index
                    .manifests()
                    .iter()
                    .filter_map(|m| m.platform().as_ref().map(|p| format!("{}/{}", p.os(), p.architecture())))
                    .collect();
                format!("image `{reference}` has no {platform} variant (it has: {}); choose one with --platform", have.join(", "))
            })?
            .clone();
        return load_descriptor(store, &chosen, platform, reference);
    }
    if media != MEDIA_MANIFEST && media != DOCKER_MANIFEST {
        return Err(format!("`{reference}` is a {media}, not an image"));
    }
    let manifest: ImageManifest = serde_json::from_slice(&bytes)
        .map_err(|e| format!("manifest {digest} is not valid: {e}"))?;
    let config_digest = parse_digest(manifest.config().digest())?;
    let config_bytes = store
        .read_blob(&config_digest, MAX_JSON)
        .map_err(|e| e.to_string())?;
    let config: ImageConfiguration = serde_json::from_slice(&config_bytes)
        .map_err(|e| format!("image config {config_digest} is not valid: {e}"))?;
    if config.rootfs().diff_ids().len() != manifest.layers().len() {
        return Err(format!(
            "image {digest} is inconsistent: {} layers but {} diff IDs in its config",
            manifest.layers().len(),
            config.rootfs().diff_ids().len()
        ));
    }
    Ok(LoadedImage {
        manifest_digest: digest,
        manifest,
        config,
    })
}

/// A layer of the image being written.
#[derive(Debug, Clone)]
pub struct LayerRef {
    pub digest: Digest,
    pub diff_id: Digest,
    pub size: u64,
    pub media_type: String,
}

pub fn rfc3339(epoch: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(epoch)).to_string()
}

/// What `write` needs besides the final state and the layers.
pub struct ImageMeta<'a> {
    pub epoch: u64,
    pub jailfile_text: &'a str,
    pub base: Option<(&'a str, &'a Digest)>,
}

/// Writes the config and manifest of a new image; returns the manifest's
/// descriptor. The bytes depend only on the inputs (sorted keys, fixed
/// times), so the same build gives the same digests.
pub fn write(
    store: &Store,
    state: &ImageState,
    layers: &[LayerRef],
    meta: &ImageMeta<'_>,
) -> Result<(Descriptor, Digest), String> {
    let created = rfc3339(meta.epoch);
    let mut cfg = Map::new();
    let env: Vec<String> = state.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !env.is_empty() {
        cfg.insert("Env".into(), json!(env));
    }
    if let Some(c) = &state.cmd {
        cfg.insert("Cmd".into(), json!(c));
    }
    if let Some(e) = &state.entrypoint {
        cfg.insert("Entrypoint".into(), json!(e));
    }
    if let Some(w) = &state.workdir {
        cfg.insert("WorkingDir".into(), json!(w));
    }
    if let Some(u) = &state.user {
        cfg.insert("User".into(), json!(u));
    }
    if !state.exposed_ports.is_empty() {
        let ports: Map<String, Value> = state
            .exposed_ports
            .iter()
            .map(|p| (p.clone(), json!({})))
            .collect();
        cfg.insert("ExposedPorts".into(), Value::Object(ports));
    }
    if !state.volumes.is_empty() {
        let vols: Map<String, Value> = state
            .volumes
            .iter()
            .map(|v| (v.clone(), json!({})))
            .collect();
        cfg.insert("Volumes".into(), Value::Object(vols));
    }
    let mut labels: BTreeMap<String, String> = state.labels.clone();
    for (k, v) in &state.jail {
        labels.insert(format!("{JAIL_LABEL_PREFIX}{k}"), v.clone());
    }
    labels.insert(JAILFILE_LABEL.into(), meta.jailfile_text.to_string());
    cfg.insert("Labels".into(), json!(labels));

    let history: Vec<Value> = state
        .history
        .iter()
        .map(|h| match &h.inherited {
            Some(inherited) => serde_json::to_value(inherited).unwrap_or(Value::Null),
            None => {
                let mut e =
                    json!({"created": created, "created_by": h.created_by, "comment": "jbuild"});
                if h.empty_layer {
                    e["empty_layer"] = json!(true);
                }
                e
            }
        })
        .collect();
    let mut config = json!({
        "created": created,
        "architecture": state.platform.architecture,
        "os": state.platform.os,
        "config": Value::Object(cfg),
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.diff_id.to_string()).collect::<Vec<_>>()},
        "history": history,
    });
    if let Some(v) = &state.platform.variant {
        config["variant"] = json!(v);
    }
    let config_bytes = canonical_json(&config);
    let (config_digest, config_size) = store.put_bytes(&config_bytes).map_err(|e| e.to_string())?;

    let mut annotations = BTreeMap::new();
    annotations.insert(
        "org.opencontainers.image.created".to_string(),
        created.clone(),
    );
    if let Some((name, digest)) = meta.base {
        annotations.insert(
            "org.opencontainers.image.base.name".into(),
            name.to_string(),
        );
        annotations.insert(
            "org.opencontainers.image.base.digest".into(),
            digest.to_string(),
        );
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest.to_string(), "size": config_size},
        "layers": layers.iter().map(|l| json!({"mediaType": l.media_type, "digest": l.digest.to_string(), "size": l.size})).collect::<Vec<_>>(),
        "annotations": annotations,
    });
    let manifest_bytes = canonical_json(&manifest);
    let (manifest_digest, manifest_size) = store
        .put_bytes(&manifest_bytes)
        .map_err(|e| e.to_string())?;
    let desc: Descriptor = serde_json::from_value(json!({
        "mediaType": MEDIA_MANIFEST,
        "digest": manifest_digest.to_string(),
        "size": manifest_size,
        "platform": {"os": state.platform.os, "architecture": state.platform.architecture},
    }))
    .map_err(|e| format!("internal: descriptor: {e}"))?;
    Ok((desc, config_digest))
}

/// Chain IDs as the OCI image spec defines them: the first layer's diff
/// ID, then `sha256(parent_chain + " " + diff_id)`.
pub fn chain_ids(diff_ids: &[Digest]) -> Vec<Digest> {
    let mut out: Vec<Digest> = Vec::with_capacity(diff_ids.len());
    for d in diff_ids {
        out.push(next_chain(out.last(), d));
    }
    out
}

/// The chain ID of a layer with `diff_id` on top of the chain `parent`.
pub fn next_chain(parent: Option<&Digest>, diff_id: &Digest) -> Digest {
    match parent {
        None => diff_id.clone(),
        Some(parent) => Digest::of(format!("{parent} {diff_id}").as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_ids_follow_the_spec() {
        let a = Digest::of(b"a");
        let b = Digest::of(b"b");
        let c = chain_ids(&[a.clone(), b.clone()]);
        assert_eq!(c[0], a);
        assert_eq!(c[1], Digest::of(format!("{a} {b}").as_bytes()));
    }

    #[test]
    fn epoch_formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
