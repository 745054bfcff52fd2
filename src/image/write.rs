//! Writing a new image into the store: its config and manifest, as
//! canonical JSON, so the same build gives the same digests.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use oci_spec::image::Descriptor;
use serde_json::{json, Map, Value};

use super::media::{MAX_DOCUMENT, OCI_CONFIG, OCI_MANIFEST};
use super::{ImageError, ImageState, JAIL_LABEL_PREFIX};
use crate::digest::Digest;
use crate::jailparam::{jail_annotation_value, jail_label_value};
use crate::store::{canonical_json, Store};

/// The label that carries the Jailfile an image was built from.
pub const JAILFILE_LABEL: &str = "org.jbuild.jailfile";

/// A layer of the image being written.
#[derive(Debug, Clone)]
pub struct LayerRef {
    pub digest: Digest,
    pub diff_id: Digest,
    pub size: u64,
    pub media_type: String,
}

/// `epoch` as RFC 3339; a time past the year 9999, which RFC 3339 cannot
/// write, is the last second it can ([`crate::config::MAX_EPOCH`]: the
/// command line refuses more, a library caller gets no panic).
pub fn rfc3339(epoch: u64) -> String {
    let secs = epoch.min(crate::config::MAX_EPOCH);
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// What `write` needs besides the final state and the layers.
pub struct ImageMeta<'a> {
    pub epoch: u64,
    pub jailfile_text: &'a str,
    pub base: Option<(&'a str, &'a Digest)>,
    /// Annotations for the manifest (`--annotation`), over jbuild's own.
    pub annotations: &'a BTreeMap<String, String>,
    /// Offer the image's jail parameters as manifest annotations too
    /// (`org.freebsd.jail.<param>`, `build --jail-annotations`), under
    /// `annotations`.
    pub jail_annotations: bool,
}

/// Writes the config and manifest of a new image; returns the manifest's
/// descriptor. The bytes depend only on the inputs (sorted keys, fixed
/// times), so the same build gives the same digests.
pub fn write(
    store: &Store,
    state: &ImageState,
    layers: &[LayerRef],
    meta: &ImageMeta<'_>,
) -> Result<(Descriptor, Digest), ImageError> {
    // Refused before the JSON is made when its strings alone are too
    // many: the document would hold each at least once, and making it
    // copies them several times over (issue 29: three 1 MiB ENVs peaked
    // at 80 MiB).
    let floor = config_floor(state, meta);
    if floor > MAX_DOCUMENT as usize {
        return Err(ImageError::TooLarge {
            what: "config",
            size: floor as u64,
            at_least: true,
            max: MAX_DOCUMENT,
            detail: config_detail(state, meta, state.history.len()),
        });
    }
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
    if let Some(sig) = &state.stop_signal {
        cfg.insert("StopSignal".into(), json!(sig));
    }
    state.docker.write_into(&mut cfg);
    let mut labels: BTreeMap<String, String> = state.labels.clone();
    for (k, v) in &state.jail {
        labels.insert(format!("{JAIL_LABEL_PREFIX}{k}"), jail_label_value(k, v));
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
    within_cap("config", config_bytes.len(), || {
        config_detail(state, meta, history.len())
    })?;
    let (config_digest, config_size) = store.put_bytes(&config_bytes)?;

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
    if meta.jail_annotations {
        for (k, v) in &state.jail {
            annotations.insert(
                format!("{JAIL_LABEL_PREFIX}{k}"),
                jail_annotation_value(k, v),
            );
        }
    }
    annotations.extend(meta.annotations.clone());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest.to_string(), "size": config_size},
        "layers": layers.iter().map(|l| json!({"mediaType": l.media_type, "digest": l.digest.to_string(), "size": l.size})).collect::<Vec<_>>(),
        "annotations": annotations,
    });
    let manifest_bytes = canonical_json(&manifest);
    within_cap("manifest", manifest_bytes.len(), || {
        format!(
            "{} layers and {} bytes of annotations",
            layers.len(),
            annotations
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
        )
    })?;
    let (manifest_digest, manifest_size) = store.put_bytes(&manifest_bytes)?;
    let desc: Descriptor = serde_json::from_value(json!({
        "mediaType": OCI_MANIFEST,
        "digest": manifest_digest.to_string(),
        "size": manifest_size,
        "platform": {"os": state.platform.os, "architecture": state.platform.architecture},
    }))
    .map_err(|source| ImageError::Invalid {
        what: "the descriptor of new manifest",
        digest: manifest_digest.clone(),
        source,
    })?;
    Ok((desc, config_digest))
}

/// Refuses a document over [`MAX_DOCUMENT`] before it is stored: every
/// command that reads an image refuses one, so storing it would leave an
/// image nothing can read (and `check` calling the store damaged).
fn within_cap(
    what: &'static str,
    size: usize,
    detail: impl FnOnce() -> String,
) -> Result<(), ImageError> {
    if size as u64 <= MAX_DOCUMENT {
        return Ok(());
    }
    Err(ImageError::TooLarge {
        what,
        size: size as u64,
        at_least: false,
        max: MAX_DOCUMENT,
        detail: detail(),
    })
}

/// The bytes of the strings a config of `state` holds once each (ENV,
/// labels, jail parameters, the Jailfile, history): its length is at least
/// this, JSON's quotes and escapes only adding to it.
fn config_floor(state: &ImageState, meta: &ImageMeta<'_>) -> usize {
    let pairs = |v: &mut dyn Iterator<Item = (&String, &String)>| -> usize {
        v.map(|(k, v)| k.len() + v.len()).sum()
    };
    pairs(&mut state.env.iter().map(|(k, v)| (k, v)))
        + pairs(&mut state.labels.iter())
        + pairs(&mut state.jail.iter().map(|(k, v)| (k, v)))
        + meta.jailfile_text.len()
        + state
            .history
            .iter()
            .filter(|h| h.inherited.is_none())
            .map(|h| h.created_by.len())
            .sum::<usize>()
}

/// What fills a config, largest first, so the message says what to cut.
fn config_detail(state: &ImageState, meta: &ImageMeta<'_>, history: usize) -> String {
    let env: usize = state.env.iter().map(|(k, v)| k.len() + v.len() + 1).sum();
    let labels: usize = state.labels.iter().map(|(k, v)| k.len() + v.len()).sum();
    let created_by: usize = state.history.iter().map(|h| h.created_by.len()).sum();
    let mut parts = [
        (
            env,
            format!("{} ENV variables hold {env} bytes", state.env.len()),
        ),
        (
            labels,
            format!("{} labels hold {labels} bytes", state.labels.len()),
        ),
        (
            created_by,
            format!("{history} history entries (one per instruction) hold {created_by} bytes"),
        ),
        (
            meta.jailfile_text.len(),
            format!(
                "the Jailfile, kept in the `{JAILFILE_LABEL}` label, is {} bytes",
                meta.jailfile_text.len()
            ),
        ),
    ];
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    let parts: Vec<String> = parts.into_iter().map(|(_, p)| p).collect();
    format!("{}; make them smaller or fewer", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(crate::config::MAX_EPOCH), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(1_796_000_000_000_000), "9999-12-31T23:59:59Z");
    }
}
