//! Unpacking: an image's layers into committed snapshots, keyed by chain
//! ID, so images that share a base share its snapshots (containerd's
//! `core/unpack` plays this part there).
//!
//! Each layer is applied into an active snapshot prepared on the one
//! below, as hostile input (see [`crate::layer::apply_with_limits`]), and
//! committed as `chain-<chain id>` only when it applied and its diff ID is
//! the one the config names. A layer that fails leaves nothing: its active
//! snapshot is removed.

use crate::blame::Blame;
use std::collections::HashMap;
use std::io::{self, Read};

use super::export::Layer;
use super::names::{chain_ids, SnapshotName};
use super::{ImageError, LayerRef, LoadedImage, Platform};
use crate::digest::Digest;
use crate::layer::{self, ApplyOptions, LayerError, Limits};
use crate::report::{ProgressReader, Reporter};
use crate::snapshot::flush::Flusher;
use crate::snapshot::{label, Kind, Labels, SnapshotError, Snapshotter};
use crate::store::{Store, StoreError};

/// What layers unpacked from images may hold (setuid files, devices) and
/// how big they may be: the configuration file's `[layers]`, with a
/// command's `--allow-setuid` and `--allow-devices` on top.
#[derive(Debug, Clone, Default)]
pub struct LayerPolicy {
    pub options: ApplyOptions,
    pub limits: Limits,
}

impl LayerPolicy {
    /// The configuration file's `[layers]`, with what a command allows on
    /// top (`--allow-setuid`, `--allow-devices`).
    pub fn from_settings(
        settings: &crate::config::LayerSettings,
        allow_setuid: bool,
        allow_devices: bool,
    ) -> LayerPolicy {
        LayerPolicy {
            options: ApplyOptions {
                allow_setuid: allow_setuid || settings.allow_setuid,
                allow_devices: allow_devices || settings.allow_devices,
                // No writeback file by file: the unpacker syncs the root's
                // filesystem in the background instead (a `Flusher`, see
                // `Unpacker::apply_file`).
                start_writeback: false,
                ..ApplyOptions::default()
            },
            limits: Limits::from_settings(settings),
        }
    }
}

/// Why an image's layers could not all be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// A layer of the image was refused: the `index`th (from 1) of
    /// `count`, blob `digest`. Its bytes, or what they unpack to.
    #[error("layer {digest} ({index} of {count}) is refused{}", source.hint().map(|h| format!("\n  {h}")).unwrap_or_default())]
    LayerRefused {
        digest: Digest,
        index: usize,
        count: usize,
        #[source]
        source: LayerError,
    },
    /// The image cannot be read: its configuration is missing or
    /// malformed, or disagrees with its manifest.
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Blame for UnpackError {
    /// Whether the image is at fault (a refused layer, a malformed image)
    /// or the user's request (a name, a platform): exit 1; else the store's
    /// or the system's fault: exit 2.
    fn is_user_error(&self) -> bool {
        match self {
            UnpackError::LayerRefused { source, .. } => source.is_bad_input(),
            UnpackError::Image(e) => e.is_user_error(),
            UnpackError::Snapshot(e) => e.is_user_error(),
            UnpackError::Store(_) => false,
        }
    }
}

/// Opens a layer blob by its digest, for [`Unpacker::unpack_from`].
pub type OpenBlob<'a> = dyn Fn(&Digest) -> Result<Box<dyn Read + Send>, StoreError> + 'a;

/// Unpacks images from one store into one snapshotter.
pub struct Unpacker<'a> {
    pub store: &'a Store,
    pub snapshotter: &'a dyn Snapshotter,
    pub reporter: &'a dyn Reporter,
    pub policy: LayerPolicy,
}

impl<'a> Unpacker<'a> {
    pub fn new(
        store: &'a Store,
        snapshotter: &'a dyn Snapshotter,
        reporter: &'a dyn Reporter,
        policy: LayerPolicy,
    ) -> Self {
        Unpacker {
            store,
            snapshotter,
            reporter,
            policy,
        }
    }

    /// The committed snapshot that holds the whole root of the image
    /// `reference` (unpacking its layers first if needed), and the image.
    /// `None` for an image without layers.
    pub fn top(
        &self,
        reference: &str,
        platform: &Platform,
    ) -> Result<(Option<String>, LoadedImage), UnpackError> {
        let img = super::load(self.store, reference, platform)?;
        let layers = self.unpack(&img)?;
        Ok((layers.last().map(|l| l.snapshot.clone()), img))
    }

    /// Makes sure every layer of `img` exists as a committed snapshot
    /// (keyed by chain ID, so images sharing a base share its snapshots)
    /// and returns them, bottom first. A layer a build made here and
    /// exported is found by its chain ID label and used as it is.
    pub fn unpack(&self, img: &LoadedImage) -> Result<Vec<Layer>, UnpackError> {
        self.unpack_from(img, &|digest| Ok(Box::new(self.store.open_blob(digest)?)))
    }

    /// [`Unpacker::unpack`], each layer blob read from what `open` gives
    /// for its digest: the store's file, or (for a pull) the blob as it
    /// arrives, which ends only once its digest is checked.
    pub fn unpack_from(
        &self,
        img: &LoadedImage,
        open: &OpenBlob<'_>,
    ) -> Result<Vec<Layer>, UnpackError> {
        let diff_ids = img.diff_ids()?;
        let digests = img.layer_digests()?;
        // `load` made sure there is one diff ID per layer.
        let count = img.manifest.layers().len();
        let chains = chain_ids(&diff_ids);
        // A layer built here is a `step-` snapshot labelled with its chain ID.
        let mut by_chain: HashMap<String, String> = HashMap::new();
        for info in self.snapshotter.list()? {
            if let Some(c) = info.labels.get(label::CHAIN_ID) {
                if info.kind == Kind::Committed {
                    by_chain.entry(c.clone()).or_insert(info.name);
                }
            }
        }
        let mut layers = Vec::with_capacity(chains.len());
        let mut parent: Option<String> = None;
        let all = img
            .manifest
            .layers()
            .iter()
            .zip(digests)
            .zip(&diff_ids)
            .zip(&chains);
        for (i, (((desc, digest), diff_id), chain)) in all.enumerate() {
            let blob = LayerRef {
                digest,
                diff_id: diff_id.clone(),
                size: desc.size(),
                media_type: desc.media_type().to_string(),
            };
            let name = match by_chain.get(&chain.to_string()) {
                Some(existing) => existing.clone(),
                None => {
                    let name = SnapshotName::chain(chain);
                    if self.snapshotter.stat(&name)?.is_none() {
                        self.apply(open, &blob, chain, parent.as_deref(), &name)
                            .map_err(|e| match e {
                                Apply::Refused(source) => UnpackError::LayerRefused {
                                    digest: blob.digest.clone(),
                                    index: i + 1,
                                    count,
                                    source,
                                },
                                Apply::Other(e) => e,
                            })?;
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

    fn apply(
        &self,
        open: &OpenBlob<'_>,
        blob: &LayerRef,
        chain: &Digest,
        parent: Option<&str>,
        name: &str,
    ) -> Result<(), Apply> {
        let file = open(&blob.digest)?;
        let mut labels: Labels = Labels::new();
        labels.insert(label::DIFF_ID.into(), blob.diff_id.to_string());
        labels.insert(label::CHAIN_ID.into(), chain.to_string());
        self.apply_file(file, blob, parent, name, &labels)
    }

    /// Applies the layer blob `blob` read from `file` as hostile input into
    /// a snapshot prepared on `parent`, and commits it as `name` with
    /// `labels` only when it applied, `file` was read to its end without an
    /// error (a blob still arriving ends only once its digest is checked),
    /// and its diff ID is `blob.diff_id`. On any error the active snapshot
    /// is removed. The build's registry cache applies its entries through
    /// here, so they meet the same applier and [`LayerPolicy`] as pulled
    /// layers.
    pub fn apply_file(
        &self,
        file: impl Read,
        blob: &LayerRef,
        parent: Option<&str>,
        name: &str,
        labels: &Labels,
    ) -> Result<(), Apply> {
        let active = SnapshotName::active();
        let root = self.snapshotter.prepare(&active, parent)?;
        let id = format!("unpack-{}", blob.digest);
        let short = blob.digest.to_string();
        let what = format!("unpacking layer {}", &short[..short.len().min(19)]);
        // The count is of the blob's bytes read (compressed, as stored):
        // its size is known from the descriptor, so the bar has a total,
        // a rate and a time left, as the download's has.
        self.reporter.transfer_start(&id, &what, Some(blob.size));
        let mut counted = ProgressReader::new(file, self.reporter, &id);
        let result = (|| {
            // The disk writes the layer while it is applied, so the
            // commit's sync finds little left (issue 34: pull + unpack
            // against `curl | tar -x` then `sync`): the root's filesystem
            // is synced every 250 ms on a thread of its own. Not file by
            // file (`ApplyOptions::start_writeback`): 50,000 small files
            // started one by one were 50,000 small writes for the disk,
            // and the pull took 1.5-2x as long (benches/README.md). The
            // commit's own sync still makes the layer durable.
            let flusher = Flusher::start(&root);
            let stats = layer::apply_with_limits(
                std::io::BufReader::new(&mut counted),
                &blob.media_type,
                &root,
                &self.policy.options,
                &self.policy.limits,
            )
            .map_err(Apply::Refused)?;
            drop(flusher);
            // Past the compressed stream's end there may be bytes no
            // decoder reads; reading to the end is also how a blob still
            // arriving says it arrived whole, with its digest checked.
            io::copy(&mut counted, &mut io::sink())
                .map_err(|e| Apply::Refused(LayerError::Read(e)))?;
            if stats.diff_id.as_ref() != Some(&blob.diff_id) {
                return Err(Apply::Refused(LayerError::DiffId {
                    expected: blob.diff_id.to_string(),
                    actual: stats
                        .diff_id
                        .map_or_else(|| "not computed".into(), |d| d.to_string()),
                }));
            }
            self.snapshotter
                .commit(name, &active, labels)
                .or_else(|e| match e {
                    SnapshotError::AlreadyExists(_) => self.snapshotter.remove(&active),
                    e => Err(e),
                })?;
            Ok(())
        })();
        if result.is_err() {
            let _ = self.snapshotter.remove(&active);
        }
        self.reporter.transfer_progress(&id, counted.done());
        self.reporter.transfer_done(&id, false);
        result
    }
}

/// Why a layer was not applied: the layer (its bytes, or what they
/// unpack to), or anything else.
#[derive(Debug)]
pub enum Apply {
    /// The layer is refused: the applier would not take it, or its diff
    /// ID is not the one claimed.
    Refused(LayerError),
    /// Anything else: the snapshotter, the store.
    Other(UnpackError),
}

impl<E: Into<UnpackError>> From<E> for Apply {
    fn from(e: E) -> Self {
        Apply::Other(e.into())
    }
}
