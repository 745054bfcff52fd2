//! Exporting: the layers a build made, from snapshots into blobs in the
//! store. A differ lists what changed between a snapshot and its parent,
//! the tar writer turns the list into a deterministic tar, compressed and
//! hashed twice (diff ID and digest) in one pass. A snapshot exported once
//! is labelled with its blob, so a rebuild reuses it without diffing again.

use std::path::{Path, PathBuf};

use super::names::next_chain;
use super::LayerRef;
use crate::diff::{Change, DiffError, Differ, SnapshotRef};
use crate::digest::Digest;
use crate::layer::{self, Compression, LayerError, TarOptions};
use crate::report::{ProgressWriter, Reporter};
use crate::snapshot::fflags::SnapshotFlags;
use crate::snapshot::{label, Labels, SnapshotError, Snapshotter};
use crate::store::{Store, StoreError};

/// Paths (relative to the root) whose content never goes into a layer:
/// the package cache (a mount during PKG steps, but a RUN step may still
/// write there) and pkg's copy of the repository catalogues, as FreeBSD's
/// own OCI images leave them out.
pub const EXCLUDED_FROM_LAYERS: &[&str] = &["var/cache/pkg", "var/db/pkg/repos"];

/// Whether `path` (relative, as a differ gives it) is under one of
/// [`EXCLUDED_FROM_LAYERS`]. The directories themselves stay.
pub fn excluded_from_layers(path: &Path) -> bool {
    EXCLUDED_FROM_LAYERS
        .iter()
        .any(|d| path.starts_with(d) && path != Path::new(d))
}

/// A layer of an image being built: the snapshot holding it, and its blob
/// once exported (or inherited from a base image).
#[derive(Debug, Clone)]
pub struct Layer {
    pub snapshot: String,
    pub blob: Option<LayerRef>,
}

/// Why a layer could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Diff(#[from] DiffError),
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl crate::blame::Blame for ExportError {
    /// A snapshot or the store decide by their own type; a failed diff,
    /// layer or write is jbuild's or the system's.
    fn is_user_error(&self) -> bool {
        match self {
            ExportError::Snapshot(e) => e.is_user_error(),
            ExportError::Store(e) => e.is_user_error(),
            ExportError::Diff(_) | ExportError::Layer(_) | ExportError::Io { .. } => false,
        }
    }
}

/// Exports every layer of `layers` that has no blob yet in `compression`
/// with file times clamped to `epoch`, reusing blobs recorded on the
/// snapshots under the same clamp; returns the layer list.
///
/// The clamp (`SOURCE_DATE_EPOCH`) changes the tar, not the tree a step
/// made, so it is no part of a step's key: a step cached under one clamp
/// is still cached under another, and only its layer is exported again.
/// The snapshot's labels then describe the layer under the new clamp.
pub fn export_layers(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    reporter: &dyn Reporter,
    layers: &mut [Layer],
    compression: Compression,
    epoch: u64,
) -> Result<Vec<LayerRef>, ExportError> {
    let blob_label = format!("{}{}", label::BLOB_PREFIX, compression);
    let differ = snapshotter.differ();
    let mut out: Vec<LayerRef> = Vec::with_capacity(layers.len());
    let mut parent_chain: Option<Digest> = None;
    for i in 0..layers.len() {
        let layer = &layers[i];
        // Inherited layers come with their blob; built ones may have one
        // recorded on the snapshot from an earlier build; else export now.
        let (blob, fresh) = match &layer.blob {
            Some(b) => (b.clone(), None),
            None => match recorded_blob(
                store,
                snapshotter,
                &layer.snapshot,
                &blob_label,
                compression,
                epoch,
            )? {
                Recorded::Blob(b) => (b, None),
                Recorded::Nothing { stale } => {
                    let parent = i.checked_sub(1).map(|p| layers[p].snapshot.as_str());
                    let b = export_one(
                        store,
                        snapshotter,
                        reporter,
                        differ.as_ref(),
                        parent,
                        &layer.snapshot,
                        compression,
                        epoch,
                    )?;
                    (b, Some(stale))
                }
            },
        };
        let chain = next_chain(parent_chain.as_ref(), &blob.diff_id);
        if let Some(stale) = fresh {
            // Taken away before the new labels are written, so no moment
            // shows a blob of the old clamp beside the new clamp.
            if !stale.is_empty() {
                snapshotter.remove_labels(&layers[i].snapshot, &stale)?;
            }
            let mut labels = Labels::new();
            labels.insert(label::DIFF_ID.into(), blob.diff_id.to_string());
            labels.insert(label::CHAIN_ID.into(), chain.to_string());
            labels.insert(blob_label.clone(), blob.digest.to_string());
            labels.insert(label::MTIME_CLAMP.into(), epoch.to_string());
            snapshotter.set_labels(&layers[i].snapshot, &labels)?;
        }
        parent_chain = Some(chain);
        layers[i].blob = Some(blob.clone());
        out.push(blob);
    }
    Ok(out)
}

/// What an earlier export left on a snapshot for this one.
enum Recorded {
    /// The blob it made in this compression under this clamp.
    Blob(LayerRef),
    /// None to reuse; `stale` are the labels to take away before this
    /// export's are written: every blob label, when the recorded layer was
    /// made under another clamp (or an unrecorded one) — those blobs hold
    /// other file times than the diff ID this export records.
    Nothing { stale: Vec<String> },
}

/// The blob an earlier build exported from `snapshot` in this compression
/// with this clamp, if the snapshot records one and the store still has it.
fn recorded_blob(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    snapshot: &str,
    blob_label: &str,
    compression: Compression,
    epoch: u64,
) -> Result<Recorded, ExportError> {
    let info = snapshotter
        .stat(snapshot)?
        .ok_or_else(|| SnapshotError::NotFound(snapshot.to_string()))?;
    let clamp = info.labels.get(label::MTIME_CLAMP);
    if clamp.and_then(|c| c.parse::<u64>().ok()) != Some(epoch) {
        let stale = info
            .labels
            .keys()
            .filter(|k| k.starts_with(label::BLOB_PREFIX))
            .cloned()
            .collect();
        return Ok(Recorded::Nothing { stale });
    }
    let nothing = Recorded::Nothing { stale: Vec::new() };
    let parse = |l: &str| info.labels.get(l).and_then(|v| v.parse::<Digest>().ok());
    let (Some(digest), Some(diff_id)) = (parse(blob_label), parse(label::DIFF_ID)) else {
        return Ok(nothing);
    };
    match std::fs::metadata(store.blob_path(&digest)) {
        Ok(m) => Ok(Recorded::Blob(LayerRef {
            digest,
            diff_id,
            size: m.len(),
            media_type: compression.media_type().to_string(),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(nothing),
        Err(source) => Err(ExportError::Io {
            context: "reading a layer blob's size".into(),
            source,
        }),
    }
}

/// What goes into the layer of one committed snapshot over its parent.
pub struct LayerChanges {
    /// The child's root, to read the changed paths from.
    pub root: PathBuf,
    /// The differ's changes without the paths never exported
    /// ([`excluded_from_layers`]).
    pub changes: Vec<Change>,
    /// The differ that found them ([`Differ::changes_named`]).
    pub differ: &'static str,
    /// The child's file flags, as the layer writer must read them: the
    /// host's, or those the snapshot keeps ([`SnapshotFlags`]).
    pub flags: SnapshotFlags,
}

/// The [`LayerChanges`] of the committed snapshot `child` over `parent`.
/// `jbuild check --deep` uses it to diff a snapshot again.
pub fn layer_changes(
    snapshotter: &dyn Snapshotter,
    differ: &dyn Differ,
    parent: Option<&str>,
    child: &str,
) -> Result<LayerChanges, ExportError> {
    let child_root = snapshotter.view(child)?;
    let labels = snapshotter
        .stat(child)?
        .ok_or_else(|| SnapshotError::NotFound(child.to_string()))?
        .labels;
    let flags = SnapshotFlags::of(&labels, &child_root)?;
    let parent_root = parent.map(|p| snapshotter.view(p)).transpose()?;
    let (changes, differ) = differ.changes_named(
        parent
            .zip(parent_root.as_deref())
            .map(|(name, root)| SnapshotRef { name, root }),
        SnapshotRef {
            name: child,
            root: &child_root,
        },
    )?;
    let changes = changes
        .into_iter()
        .filter(|c| !excluded_from_layers(&c.path))
        .collect();
    Ok(LayerChanges {
        root: child_root,
        changes,
        differ,
        flags,
    })
}

#[allow(clippy::too_many_arguments)]
fn export_one(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    reporter: &dyn Reporter,
    differ: &dyn Differ,
    parent: Option<&str>,
    child: &str,
    compression: Compression,
    epoch: u64,
) -> Result<LayerRef, ExportError> {
    let LayerChanges {
        root: child_root,
        changes,
        differ,
        flags,
    } = layer_changes(snapshotter, differ, parent, child)?;
    let id = format!("export-{child}");
    reporter.export_start(
        &id,
        &format!("exporting layer {}", &child[..child.len().min(17)]),
        differ,
    );
    // The total is not known before the tar is written: the count is of
    // the compressed bytes written so far, a counter with a rate.
    let written = (|| {
        let writer = ProgressWriter::new(store.blob_writer()?, reporter, &id);
        let (exported, writer) = layer::export_with_flags(
            &child_root,
            &changes,
            &TarOptions { clamp_mtime: epoch },
            compression,
            &flags,
            writer,
        )?;
        writer.into_inner().commit(Some(&exported.digest))?;
        Ok::<_, ExportError>(exported)
    })();
    // Ended either way, so no bar is left turning over an error.
    reporter.transfer_done(&id, false);
    let exported = written?;
    Ok(LayerRef {
        digest: exported.digest,
        diff_id: exported.diff_id,
        size: exported.size,
        media_type: exported.media_type.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_caches_never_reach_a_layer() {
        for p in [
            "var/cache/pkg/nginx-1.26.pkg",
            "var/cache/pkg/sub/x",
            "var/db/pkg/repos/FreeBSD/db",
        ] {
            assert!(excluded_from_layers(Path::new(p)), "{p}");
        }
        for p in [
            "var/cache/pkg",
            "var/db/pkg/repos",
            "var/db/pkg/local.sqlite",
            "var/cache/pkgx/a",
            "usr/local/var/cache/pkg/a",
        ] {
            assert!(!excluded_from_layers(Path::new(p)), "{p}");
        }
    }
}
