//! Layers between snapshots and blobs: unpacking an image's layers into
//! snapshots (keyed by chain ID, so images that share a base share its
//! snapshots), and exporting the layers a build made into the store
//! (reusing blobs an earlier build recorded on the snapshot).

use std::collections::HashMap;

use super::engine::{active_key, chain_snapshot, BuildEnv, Layer, StageResult};
use super::error::{with_causes, BuildError};
use super::image::{self, LayerRef, LoadedImage};
use std::path::PathBuf;

use crate::diff::{Change, SnapshotRef};
use crate::digest::Digest;
use crate::layer::{self, Compression, LayerError, TarOptions};
use crate::snapshot::{label, Labels, SnapshotError, Snapshotter};

/// Makes sure every layer of `img` exists as a committed snapshot (keyed by
/// chain ID, so images sharing a base share its snapshots) and returns them.
pub(super) fn unpack_image(
    env: &BuildEnv<'_>,
    img: &LoadedImage,
) -> Result<Vec<Layer>, BuildError> {
    let diff_ids = img.diff_ids().map_err(BuildError::Store)?;
    // `image::load` made sure there is one diff ID per layer.
    let count = img.manifest.layers().len();
    let chains = image::chain_ids(&diff_ids);
    // A layer built here is a `step-` snapshot labelled with its chain ID.
    let mut by_chain: HashMap<String, String> = HashMap::new();
    for info in env.snapshotter.list()? {
        if let Some(c) = info.labels.get(label::CHAIN_ID) {
            if info.kind == crate::snapshot::Kind::Committed {
                by_chain.entry(c.clone()).or_insert(info.name);
            }
        }
    }
    let mut layers = Vec::with_capacity(chains.len());
    let mut parent: Option<String> = None;
    let all = img.manifest.layers().iter().zip(&diff_ids).zip(&chains);
    for (i, ((desc, diff_id), chain)) in all.enumerate() {
        let digest: Digest = desc
            .digest()
            .to_string()
            .parse()
            .map_err(|e| BuildError::Store(format!("{e}")))?;
        let blob = LayerRef {
            digest: digest.clone(),
            diff_id: diff_id.clone(),
            size: desc.size(),
            media_type: desc.media_type().to_string(),
        };
        let name = match by_chain.get(&chain.to_string()) {
            Some(existing) => existing.clone(),
            None => {
                let name = chain_snapshot(chain);
                if env.snapshotter.stat(&name)?.is_none() {
                    apply_layer(env, &blob, chain, parent.as_deref(), &name).map_err(
                        |e| match e {
                            Unpack::Refused(source) => BuildError::LayerRefused {
                                digest: blob.digest.to_string(),
                                index: i + 1,
                                count,
                                source,
                            },
                            Unpack::Other(e) => e,
                        },
                    )?;
                }
                name
            }
        };
        parent = Some(name.clone());
        layers.push(Layer {
            snapshot: name,
            blob: Some(blob),
        });
    }
    Ok(layers)
}

/// Why a layer was not unpacked: the layer (its bytes, or what they
/// unpack to), or anything else.
enum Unpack {
    Refused(LayerError),
    Other(BuildError),
}

impl<E: Into<BuildError>> From<E> for Unpack {
    fn from(e: E) -> Self {
        Unpack::Other(e.into())
    }
}

fn apply_layer(
    env: &BuildEnv<'_>,
    blob: &LayerRef,
    chain: &Digest,
    parent: Option<&str>,
    name: &str,
) -> Result<(), Unpack> {
    let active = active_key();
    let root = env.snapshotter.prepare(&active, parent)?;
    let id = format!("unpack-{}", blob.digest);
    let short = blob.digest.to_string();
    let what = format!("unpacking layer {}", &short[..short.len().min(19)]);
    env.reporter.transfer_start(&id, &what, None);
    let result = (|| {
        let file = env
            .store
            .open_blob(&blob.digest)
            .map_err(|e| BuildError::Store(with_causes(&e)))?;
        let stats = layer::apply_with_limits(
            std::io::BufReader::new(file),
            &blob.media_type,
            &root,
            &env.layer_options,
            &env.layer_limits,
        )
        .map_err(Unpack::Refused)?;
        if stats.diff_id != blob.diff_id {
            return Err(Unpack::Refused(LayerError::DiffId {
                expected: blob.diff_id.to_string(),
                actual: stats.diff_id.to_string(),
            }));
        }
        let mut labels: Labels = Labels::new();
        labels.insert(label::DIFF_ID.into(), blob.diff_id.to_string());
        labels.insert(label::CHAIN_ID.into(), chain.to_string());
        env.snapshotter
            .commit(name, &active, &labels)
            .or_else(|e| match e {
                SnapshotError::AlreadyExists(_) => env.snapshotter.remove(&active),
                e => Err(e),
            })?;
        Ok(())
    })();
    if result.is_err() {
        let _ = env.snapshotter.remove(&active);
    }
    env.reporter.transfer_done(&id, false);
    result
}

/// Exports every layer of `result` that has no blob yet in `compression`,
/// reusing blobs recorded on the snapshots; returns the layer list.
pub(super) fn export_layers(
    env: &BuildEnv<'_>,
    result: &mut StageResult,
    compression: Compression,
    epoch: u64,
) -> Result<Vec<LayerRef>, BuildError> {
    let blob_label = format!("{}{}", label::BLOB_PREFIX, compression);
    let differ = env.snapshotter.differ();
    let mut out: Vec<LayerRef> = Vec::with_capacity(result.layers.len());
    let mut parent_chain: Option<Digest> = None;
    for i in 0..result.layers.len() {
        let layer = &result.layers[i];
        // Inherited layers come with their blob; built ones may have one
        // recorded on the snapshot from an earlier build; else export now.
        let (blob, fresh) = match &layer.blob {
            Some(b) => (b.clone(), false),
            None => match recorded_blob(env, &layer.snapshot, &blob_label, compression)? {
                Some(b) => (b, false),
                None => {
                    let parent = i.checked_sub(1).map(|p| result.layers[p].snapshot.as_str());
                    let b = export_one(
                        env,
                        differ.as_ref(),
                        parent,
                        &layer.snapshot,
                        compression,
                        epoch,
                    )?;
                    (b, true)
                }
            },
        };
        let chain = image::next_chain(parent_chain.as_ref(), &blob.diff_id);
        if fresh {
            let mut labels = Labels::new();
            labels.insert(label::DIFF_ID.into(), blob.diff_id.to_string());
            labels.insert(label::CHAIN_ID.into(), chain.to_string());
            labels.insert(blob_label.clone(), blob.digest.to_string());
            labels.insert(label::MTIME_CLAMP.into(), epoch.to_string());
            env.snapshotter.set_labels(&layer.snapshot, &labels)?;
        }
        parent_chain = Some(chain);
        result.layers[i].blob = Some(blob.clone());
        out.push(blob);
    }
    Ok(out)
}

/// The blob an earlier build exported from `snapshot` in this compression,
/// if the snapshot records one and the store still has it.
fn recorded_blob(
    env: &BuildEnv<'_>,
    snapshot: &str,
    blob_label: &str,
    compression: Compression,
) -> Result<Option<LayerRef>, BuildError> {
    let info = env
        .snapshotter
        .stat(snapshot)?
        .ok_or_else(|| SnapshotError::NotFound(snapshot.to_string()))?;
    let parse = |l: &str| info.labels.get(l).and_then(|v| v.parse::<Digest>().ok());
    let (Some(digest), Some(diff_id)) = (parse(blob_label), parse(label::DIFF_ID)) else {
        return Ok(None);
    };
    match std::fs::metadata(env.store.blob_path(&digest)) {
        Ok(m) => Ok(Some(LayerRef {
            digest,
            diff_id,
            size: m.len(),
            media_type: compression.media_type().to_string(),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BuildError::io("reading a layer blob's size", e)),
    }
}

/// What goes into the layer of the committed snapshot `child` over
/// `parent`: the differ's changes without the paths never exported
/// ([`super::freebsd::excluded_from_layers`]), and the child's root to read
/// them from. `jbuild check --deep` uses it to diff a snapshot again.
pub fn layer_changes(
    snapshotter: &dyn Snapshotter,
    differ: &dyn crate::diff::Differ,
    parent: Option<&str>,
    child: &str,
) -> Result<(PathBuf, Vec<Change>), BuildError> {
    let child_root = snapshotter.view(child)?;
    let parent_root = parent.map(|p| snapshotter.view(p)).transpose()?;
    let changes = differ
        .changes(
            parent
                .zip(parent_root.as_deref())
                .map(|(name, root)| SnapshotRef { name, root }),
            SnapshotRef {
                name: child,
                root: &child_root,
            },
        )
        .map_err(|e| BuildError::Layer(with_causes(&e)))?;
    let changes = changes
        .into_iter()
        .filter(|c| !super::freebsd::excluded_from_layers(&c.path))
        .collect();
    Ok((child_root, changes))
}

fn export_one(
    env: &BuildEnv<'_>,
    differ: &dyn crate::diff::Differ,
    parent: Option<&str>,
    child: &str,
    compression: Compression,
    epoch: u64,
) -> Result<LayerRef, BuildError> {
    let (child_root, changes) = layer_changes(env.snapshotter, differ, parent, child)?;
    let id = format!("export-{child}");
    env.reporter.transfer_start(
        &id,
        &format!("exporting layer {}", &child[..child.len().min(17)]),
        None,
    );
    let writer = env
        .store
        .blob_writer()
        .map_err(|e| BuildError::Store(with_causes(&e)))?;
    let (exported, writer) = layer::export(
        &child_root,
        &changes,
        &TarOptions { clamp_mtime: epoch },
        compression,
        writer,
    )
    .map_err(|e| BuildError::Layer(with_causes(&e)))?;
    writer
        .commit(Some(&exported.digest))
        .map_err(|e| BuildError::Store(with_causes(&e)))?;
    env.reporter.transfer_done(&id, false);
    Ok(LayerRef {
        digest: exported.digest,
        diff_id: exported.diff_id,
        size: exported.size,
        media_type: exported.media_type.to_string(),
    })
}
