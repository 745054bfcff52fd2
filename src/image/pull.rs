//! The pull transaction, the one way an image from elsewhere gets a name
//! in the store, for `jbuild pull` and for a build's FROM alike:
//!
//! 0. the pull takes the store lock shared ([`StoreLock::shared`]) and
//!    holds it until the image is named, or until what it added is taken
//!    away: that is its *pin* (below);
//! 1. the [`ImageSource`] copies the image into the store *untagged* (the
//!    untagged entry, written once every blob is in, keeps them from
//!    `prune` until the name replaces it);
//! 2. meanwhile the [`Unpacker`] applies every layer into `chain-`
//!    snapshots, bottom first, each while its blob downloads: the source
//!    tells what has arrived ([`Arrivals`]: the manifest once checked, each
//!    blob as its store file grows), and a layer's snapshot is committed
//!    only once its blob has arrived whole with its size and digest
//!    checked, and its diff ID is the config's. A later layer may download
//!    while an earlier one unpacks. (A source that tells nothing is
//!    unpacked from the store once its copy is done.)
//! 3. the copy done and every layer applied: the image gets its name,
//!    replacing the untagged entry.
//!
//! When a layer is refused, or the copy fails (a blob cut short, or not
//! the blob its digest names), or anything else fails, what the pull added
//! is taken away (a refused layer stops the copy first): the half-applied
//! snapshot is already gone (the unpacker removes it), and the untagged
//! entry is removed; the layers of this image the pull unpacked, and the
//! blobs it added, go only under the store lock held exclusively, taken
//! without waiting — and of the layers only those no image uses. If
//! another jbuild holds the lock (a pull or a build that may have found one
//! of those layers and not yet built on it), they stay for
//! `jbuild prune` (or `jbuild check --repair`), harmless. A stored image of
//! the same name, if any, is left as it was.
//!
//! # The pin
//!
//! Layers are unpacked while their blobs arrive, so a `chain-` snapshot
//! this pull committed is, until the image is named, used by no image in
//! `index.json`, and between committing one layer and preparing the next
//! nothing stands on it: to `prune` (and `check --repair`) it looks like
//! an unused layer. What keeps it is the shared store lock the pull holds
//! from before its first snapshot until its name is written: `prune`
//! decides which layers are unused, and removes them, only under the store
//! lock held exclusively ([`super::gc::prune`]), so it waits for the pull;
//! `check --repair` without that lock leaves unused layers alone, and a
//! plain `check` that finds it held calls them pending, not reclaimable
//! (`crate::check`). No
//! record is written (nothing to leave behind when a pull is killed: the
//! kernel drops the lock), and no index entry names a manifest whose blobs
//! are still arriving (which `check` would call damage). `prune` already
//! waited for that lock to remove blobs; it now takes it before it looks
//! at snapshots.
//!
//! The pin keeps another pull's cleanup off this pull's layers too. Two
//! images may share a base: a pull finds the base another pull has just
//! unpacked, and goes on to its next layer, standing on nothing yet. If
//! the other pull then fails, it must not take the base away: a failed
//! pull removes the layers it made only under the lock held exclusively,
//! which this pull's pin refuses while it runs.
//!
//! A layer the store held before the pull may be what failed: its copy
//! damaged since (a disk error), not the image. Such a blob is re-hashed,
//! and if damaged the error says so ([`PullError::DamagedStoredLayer`]).

use crate::blame::Blame;
use std::collections::HashSet;
use std::io::Read;

use oci_spec::image::{Descriptor, ImageManifest};

pub use super::arrivals::Arrivals;
use super::media::{self, MAX_DOCUMENT};
use super::names::{chain_ids, SnapshotName};
use super::unpack::{UnpackError, Unpacker};
use super::{load_descriptor, ImageError, LoadedImage, Platform};
use crate::digest::Digest;
use crate::report::Reporter;
use crate::snapshot::{SnapshotError, Snapshotter};
use crate::store::{descriptor_digest, ImageName, Store, StoreError, StoreLock};

/// Where images come from (a registry, for jbuild): copies an image into
/// the store, untagged, for [`pull`] to unpack and name.
pub trait ImageSource: Send + Sync {
    /// The name `reference` is stored under once pulled (its full,
    /// normalised name: `alpine` is `docker.io/library/alpine:latest`), or
    /// `None` when the reference is not one this source can fetch.
    fn name(&self, reference: &str) -> Option<String>;

    /// Copies the image `reference` names (the manifest for `platform`,
    /// when it is an index) into `store` without naming it; returns the
    /// descriptor of what was stored. The reference comes parsed (once, by
    /// [`pull`]), so a source that wraps another passes it on as it is. Tells `arrivals` what has arrived as
    /// it goes, so the pull unpacks layers while they download; a source
    /// that tells nothing still works (its image is unpacked from the store
    /// once this returns).
    fn fetch(
        &self,
        store: &Store,
        reference: &ImageName,
        platform: &Platform,
        reporter: &dyn Reporter,
        arrivals: &Arrivals,
    ) -> Result<Descriptor, FetchError>;
}

/// Why a source could not copy an image. The source's own error is kept
/// as the cause; `user` says whether the user can fix it (a name, a
/// credential, an image that is not there or is malformed) rather than it
/// being the system's or the network's fault.
#[derive(Debug)]
pub struct FetchError {
    pub user: bool,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for FetchError {
    // As a transparent wrapper: the source's own causes follow it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The reference is not one the source can fetch.
    #[error("`{0}` is not a reference jbuild can pull")]
    NotFetchable(String),
    /// The copy failed; nothing was named.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The image cannot be unpacked (a refused layer, a malformed image):
    /// what the pull added was taken away.
    #[error(
        "cannot pull {name}: it cannot be unpacked, so it was not stored \
         (a stored image of that name, if any, is unchanged)"
    )]
    Unpack {
        name: String,
        #[source]
        source: Box<UnpackError>,
    },
    /// A layer blob kept from before the pull no longer hashes to its name.
    #[error(
        "cannot pull {name}: the store's copy of layer {digest}, kept from before this \
         pull, is damaged (its bytes no longer hash to its name, and unpacking it \
         failed: {cause}); run `jbuild check --repair`, which deletes it, then pull again"
    )]
    DamagedStoredLayer {
        name: String,
        digest: Digest,
        /// The innermost cause of the unpack failure.
        cause: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

impl Blame for PullError {
    /// Whether the user can fix it (exit 1) rather than it being the
    /// store's or the system's fault (exit 2).
    fn is_user_error(&self) -> bool {
        match self {
            PullError::NotFetchable(_) => true,
            PullError::Fetch(e) => e.user,
            PullError::Unpack { source, .. } => source.is_user_error(),
            PullError::Snapshot(e) => e.is_user_error(),
            PullError::DamagedStoredLayer { .. } | PullError::Store(_) => false,
        }
    }
}

/// An image [`pull`] named.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The name it is stored under.
    pub name: String,
    /// What the name points at (the manifest, or the manifest of
    /// `platform` chosen from an index).
    pub descriptor: Descriptor,
}

/// Pulls `reference` from `source` into the unpacker's store and
/// snapshots: copy, unpack, name; or take away what was added. See the
/// module docs.
pub fn pull(
    unpacker: &Unpacker<'_>,
    source: &dyn ImageSource,
    reference: &str,
    platform: &Platform,
) -> Result<Pulled, PullError> {
    let name = source
        .name(reference)
        .ok_or_else(|| PullError::NotFetchable(reference.to_string()))?;
    let parsed =
        ImageName::parse(reference).map_err(|_| PullError::NotFetchable(reference.to_string()))?;
    let store = unpacker.store;
    let reporter = unpacker.reporter;
    // The pin (see the module docs): taken before anything is unpacked,
    // dropped once the image is named or what the pull added is gone.
    let pin = StoreLock::shared(store)?;
    let before = Before::take(store, unpacker.snapshotter)?;
    let arrivals = Arrivals::default();
    // Two threads, as `curl | tar -x` are two processes: the fetch copies
    // the image into the store, this one unpacks what has arrived.
    let (fetched, unpacked) = std::thread::scope(|s| {
        let fetch = s.spawn(|| {
            // However the fetch returns, the unpacking stops waiting.
            let _end = EndOnDrop(&arrivals);
            source.fetch(store, &parsed, platform, reporter, &arrivals)
        });
        let unpacked = unpack_arriving(unpacker, &arrivals, reference);
        if unpacked.is_err() {
            arrivals.abandon();
        }
        let fetched = fetch
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (fetched, unpacked)
    });
    let told = arrivals.told_manifest();
    let (img, error) = match (fetched, unpacked.map_err(|u| *u)) {
        (Ok(descriptor), Ok(Some(img))) if same_manifest(&descriptor, &img) => {
            store.tag_ref(&name, &descriptor)?;
            return Ok(Pulled { name, descriptor });
        }
        // Nothing was unpacked as it arrived (an index, a source that tells
        // nothing, or one that told of another manifest than it stored):
        // the image is unpacked from the store.
        (Ok(descriptor), Ok(_)) => {
            return sequential(unpacker, name, descriptor, platform, &before, pin);
        }
        (Err(e), Ok(img)) => (img, PullError::Fetch(e)),
        (
            Err(e),
            Err(Unpacking {
                img,
                fetch_first: true,
                ..
            }),
        ) => (img, PullError::Fetch(e)),
        (
            _,
            Err(Unpacking {
                img: Some(img),
                error,
                ..
            }),
        ) => {
            return Err(unpack_failed(
                unpacker,
                name,
                &img,
                told.as_ref(),
                &before,
                pin,
                error,
            ));
        }
        (
            _,
            Err(Unpacking {
                img: None, error, ..
            }),
        ) => {
            let error = PullError::Unpack {
                name,
                source: Box::new(error),
            };
            (None, error)
        }
    };
    discard(
        store,
        unpacker.snapshotter,
        img.as_ref(),
        told.as_ref(),
        &before,
        pin,
    );
    Err(error)
}

/// Whether `img` is the image `desc` describes.
fn same_manifest(desc: &Descriptor, img: &LoadedImage) -> bool {
    desc.digest().as_ref() == img.manifest_digest.to_string()
}

/// The pull of an image already copied into the store: unpack it from
/// there, then name it; `pin` is held until then.
fn sequential(
    unpacker: &Unpacker<'_>,
    name: String,
    descriptor: Descriptor,
    platform: &Platform,
    before: &Before,
    pin: StoreLock,
) -> Result<Pulled, PullError> {
    let store = unpacker.store;
    let img = match load_descriptor(store, &descriptor, platform, descriptor.digest().as_ref()) {
        Ok(img) => img,
        Err(e) => {
            let snapshotter = unpacker.snapshotter;
            discard(store, snapshotter, None, Some(&descriptor), before, pin);
            return Err(PullError::Unpack {
                name,
                source: Box::new(e.into()),
            });
        }
    };
    match unpacker.unpack(&img) {
        Ok(_) => {
            store.tag_ref(&name, &descriptor)?;
            Ok(Pulled { name, descriptor })
        }
        Err(e) => Err(unpack_failed(
            unpacker,
            name,
            &img,
            Some(&descriptor),
            before,
            pin,
            e,
        )),
    }
}

/// Takes away what the pull of `img` added after its unpacking failed
/// with `e` (releasing `pin`), and says why: `e`, or a layer the store
/// held before the pull that is damaged.
fn unpack_failed(
    unpacker: &Unpacker<'_>,
    name: String,
    img: &LoadedImage,
    desc: Option<&Descriptor>,
    before: &Before,
    pin: StoreLock,
    e: UnpackError,
) -> PullError {
    let store = unpacker.store;
    let damaged = img
        .layer_digests()
        .unwrap_or_default()
        .into_iter()
        .find(|d| before.blobs.contains(d) && !store.blob_is_sound(d));
    discard(store, unpacker.snapshotter, Some(img), desc, before, pin);
    if let Some(digest) = damaged {
        return PullError::DamagedStoredLayer {
            name,
            digest,
            cause: innermost(&e),
        };
    }
    PullError::Unpack {
        name,
        source: Box::new(e),
    }
}

/// Ends `arrivals` when dropped: the fetch has returned (or panicked).
struct EndOnDrop<'a>(&'a Arrivals);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Why the unpacking side of a pull stopped.
struct Unpacking {
    /// The image, when it could be read.
    img: Option<LoadedImage>,
    error: UnpackError,
    /// The fetch had failed (or ended) before the unpacking did: the
    /// fetch's error is the reason, not what the unpacking made of it.
    fetch_first: bool,
}

/// The unpacking side of a pull: the image's manifest as the fetch tells
/// it, its config and layers read as they arrive, each layer applied while
/// it downloads. `None` when there is nothing to unpack as it arrives (an
/// index, or a source that tells nothing): the pull unpacks the image from
/// the store once the fetch has put it there.
fn unpack_arriving(
    unpacker: &Unpacker<'_>,
    arrivals: &Arrivals,
    reference: &str,
) -> Result<Option<LoadedImage>, Box<Unpacking>> {
    let stop = |img: Option<LoadedImage>, error: UnpackError| {
        Box::new(Unpacking {
            img,
            error,
            fetch_first: arrivals.failed_or_ended(),
        })
    };
    let Some((desc, bytes)) = arrivals.wait_manifest() else {
        return Ok(None);
    };
    if !media::is_manifest(desc.media_type()) {
        return Ok(None);
    }
    let img = arriving_image(unpacker.store, arrivals, &desc, &bytes, reference)
        .map_err(|e| stop(None, e.into()))?;
    let open = |digest: &Digest| arrivals.open(unpacker.store, digest);
    match unpacker.unpack_from(&img, &open) {
        Ok(_) => Ok(Some(img)),
        Err(e) => {
            // A layer refused before its blob was checked whole: what the
            // check says decides whose fault it was (a corrupt download
            // makes a decoder fail first).
            if let UnpackError::LayerRefused { digest, .. } = &e {
                arrivals.settle(digest);
            }
            Err(stop(Some(img), e))
        }
    }
}

/// The image whose checked manifest `bytes` (described by `desc`) the
/// fetch told, with its config read as it arrives.
fn arriving_image(
    store: &Store,
    arrivals: &Arrivals,
    desc: &Descriptor,
    bytes: &[u8],
    reference: &str,
) -> Result<LoadedImage, ImageError> {
    let digest = descriptor_digest(desc).map_err(|source| ImageError::Digest {
        image: reference.to_string(),
        source,
    })?;
    let manifest: ImageManifest =
        serde_json::from_slice(bytes).map_err(|source| ImageError::Invalid {
            what: "manifest",
            digest: digest.clone(),
            source,
        })?;
    let config = descriptor_digest(manifest.config()).map_err(|source| ImageError::Digest {
        image: reference.to_string(),
        source,
    })?;
    let mut config_bytes = Vec::new();
    arrivals
        .open(store, &config)?
        .take(MAX_DOCUMENT + 1)
        .read_to_end(&mut config_bytes)
        .map_err(|e| StoreError::io(format!("cannot read the config {config}"), e))?;
    super::load::from_config_bytes(digest, manifest, &config, &config_bytes)
}

/// The text of the innermost cause of `e`.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The store and snapshots as they were before a pull, to tell what it
/// added.
struct Before {
    blobs: HashSet<Digest>,
    indexed: HashSet<String>,
    snapshots: HashSet<String>,
}

impl Before {
    fn take(store: &Store, snapshotter: &dyn Snapshotter) -> Result<Before, PullError> {
        Ok(Before {
            blobs: store.blob_digests()?.into_iter().collect(),
            indexed: store
                .list()?
                .into_iter()
                .map(|(_, d)| d.digest().to_string())
                .collect(),
            snapshots: names(snapshotter)?,
        })
    }
}

fn names(snapshotter: &dyn Snapshotter) -> Result<HashSet<String>, SnapshotError> {
    Ok(snapshotter.list()?.into_iter().map(|i| i.name).collect())
}

/// Takes away what the failed pull of `desc` (read as `img`, when it could
/// be read: else nothing was unpacked) added, and releases the pull's
/// `pin`. Best effort: what cannot be removed now is what `prune` removes
/// later, so failures here are logged, not reported over the reason the
/// pull failed.
///
/// Its untagged entry goes at once; the layers it unpacked and the blobs
/// it added only under the store lock held exclusively, taken without
/// waiting once the pin is dropped (the pin is a shared hold of the same
/// lock, on another open file, which would refuse it). A layer this pull
/// unpacked may be one another pull has found since, and is about to build
/// on: that pull holds the lock shared (its pin) until it names its image,
/// so while it runs the lock is refused, and what this pull made stays for
/// `prune`. Of the layers, only those no image uses go
/// ([`super::gc::unused_among`]): `jbuild create` unpacking a named image
/// holds no lock, and may stand on one of them in a moment. (A build holds
/// the lock shared for its whole run, but steps aside while it pulls its
/// FROM, so a failed FROM pull cleans up as `jbuild pull` does.)
fn discard(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    img: Option<&LoadedImage>,
    desc: Option<&Descriptor>,
    before: &Before,
    pin: StoreLock,
) {
    if let Some(desc) = desc.filter(|d| !before.indexed.contains(&d.digest().to_string())) {
        if let Err(e) = store.remove_untagged(desc) {
            tracing::debug!("cannot drop the untagged entry of {}: {e}", desc.digest());
        }
    }
    drop(pin);
    let lock = match StoreLock::try_exclusive(store) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            tracing::debug!("the store is busy: the pulled layers and blobs are left for prune");
            return;
        }
        Err(e) => {
            tracing::debug!("cannot lock the store: {e}");
            return;
        }
    };
    // The snapshots of this image's layers that this pull made (not those
    // that were there before it).
    let made: HashSet<String> = match img.map(LoadedImage::diff_ids) {
        Some(Ok(diff_ids)) => chain_ids(&diff_ids)
            .iter()
            .map(SnapshotName::chain)
            .filter(|name| !before.snapshots.contains(name))
            .collect(),
        _ => HashSet::new(),
    };
    if !made.is_empty() {
        match super::gc::unused_among(store, snapshotter, &made, &lock) {
            Ok(unused) => {
                for name in unused {
                    if let Err(e) = snapshotter.remove(&name) {
                        tracing::debug!("snapshot {name} is left for prune: {e}");
                    }
                }
            }
            Err(e) => tracing::debug!("cannot tell which layers are unused: {e}"),
        }
    }
    match super::gc::unreferenced_blobs(store) {
        Ok(unreferenced) => {
            for d in unreferenced.iter().filter(|d| !before.blobs.contains(d)) {
                if let Err(e) = store.remove_blob(d) {
                    tracing::debug!("cannot remove {d}: {e}");
                }
            }
        }
        Err(e) => tracing::debug!("cannot tell which blobs are unreferenced: {e}"),
    }
}
