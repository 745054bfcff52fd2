//! What `jbuild pull` does once the blobs are in: unpack the image's
//! layers into snapshots, and only then name it; or, when a layer is
//! refused, take away what the pull added.
//!
//! The copy stores the image untagged (an untagged entry in `index.json`
//! keeps its blobs from `prune` while the layers are unpacked). Then:
//!
//! - every layer applies: the image gets its name, replacing the untagged
//!   entry;
//! - a layer is refused: the half-applied snapshot is already gone
//!   (`build::unpack` removes it); the layers of this image unpacked before
//!   it, the untagged entry, and the blobs the pull added are removed. The
//!   blobs only under the exclusive store lock, taken without waiting: if
//!   another jbuild is adding content, they stay for `jbuild prune` (or
//!   `jbuild check --repair`), harmless.

use std::collections::HashSet;

use anyhow::anyhow;
use oci_spec::image::Descriptor;

use super::{Ctx, Failure};
use jbuild::build::{self, BuildEnv};
use jbuild::digest::Digest;
use jbuild::layer::{ApplyOptions, Limits};
use jbuild::plan::state::Platform;
use jbuild::snapshot::Snapshotter;
use jbuild::store::{Store, StoreLock};

/// How layers are unpacked: the configuration file's `[layers]`, with the
/// command's `--allow-setuid` and `--allow-devices` on top.
pub fn layer_policy(ctx: &Ctx, allow_setuid: bool, allow_devices: bool) -> (ApplyOptions, Limits) {
    let s = &ctx.settings.layers;
    let options = ApplyOptions {
        allow_setuid: allow_setuid || s.allow_setuid,
        allow_devices: allow_devices || s.allow_devices,
        ..ApplyOptions::default()
    };
    (options, Limits::from_settings(s))
}

/// The store and snapshots as they were before a pull, to tell what it
/// added.
pub struct Before {
    blobs: HashSet<Digest>,
    indexed: HashSet<String>,
}

impl Before {
    pub fn take(store: &Store) -> Result<Before, Failure> {
        let dir = store.path().join("blobs/sha256");
        let blobs = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .flatten()
                .filter_map(|e| {
                    format!("sha256:{}", e.file_name().to_string_lossy())
                        .parse()
                        .ok()
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashSet::new(),
            Err(e) => {
                return Err(Failure::internal(anyhow!(
                    "cannot read {}: {e}",
                    dir.display()
                )))
            }
        };
        let indexed = store
            .list()
            .map_err(Failure::internal)?
            .into_iter()
            .map(|(_, d)| d.digest().to_string())
            .collect();
        Ok(Before { blobs, indexed })
    }
}

/// Unpacks the pulled image `desc` and names it `name`; on a refused
/// layer, removes what the pull added (see the module docs) and says why.
pub fn unpack_and_tag(
    ctx: &Ctx,
    store: &Store,
    desc: &Descriptor,
    name: &str,
    platform: &Platform,
    policy: (ApplyOptions, Limits),
    before: &Before,
) -> Result<(), Failure> {
    let snapshotter = ctx.snapshotter()?;
    let reporter = ctx.reporter();
    let snapshots_before: HashSet<String> = names(snapshotter.as_ref())?;
    let env = BuildEnv::new(store, snapshotter.as_ref(), reporter.as_ref())
        .with_layers(policy.0, policy.1);
    let unpacked = build::unpack(&env, desc, platform);
    drop(env);
    drop(reporter);
    match unpacked {
        Ok(_) => store.tag_ref(name, desc).map_err(Failure::internal),
        Err(e) => {
            let sn = snapshotter.as_ref();
            // A layer the store already had may be what failed: its copy
            // damaged since (a disk error), not the image.
            let damaged = layer_blobs(store, desc, platform)
                .into_iter()
                .find(|d| before.blobs.contains(d) && !store.blob_is_sound(d));
            discard(store, sn, desc, platform, before, &snapshots_before);
            if let Some(d) = damaged {
                let e = anyhow!(e);
                return Err(Failure::internal(anyhow!(
                    "cannot pull {name}: the store's copy of layer {d}, kept from before this \
                     pull, is damaged (its bytes no longer hash to its name, and unpacking it \
                     failed: {}); run `jbuild check --repair`, which deletes it, then pull again",
                    e.root_cause()
                )));
            }
            Err(Failure {
                user: e.is_user_error(),
                error: anyhow!(e).context(format!(
                    "cannot pull {name}: it cannot be unpacked, so it was not stored \
                     (a stored image of that name, if any, is unchanged)"
                )),
            })
        }
    }
}

/// The digests of an image's layer blobs (empty if its manifest cannot be
/// read).
fn layer_blobs(store: &Store, desc: &Descriptor, platform: &Platform) -> Vec<Digest> {
    let Ok(img) = build::image::load_descriptor(store, desc, platform, "") else {
        return Vec::new();
    };
    img.manifest
        .layers()
        .iter()
        .filter_map(|l| l.digest().to_string().parse().ok())
        .collect()
}

/// The snapshot names an image's layers unpack to, bottom first (empty if
/// its configuration cannot be read: then nothing was unpacked).
fn chain_snapshots(store: &Store, desc: &Descriptor, platform: &Platform) -> Vec<String> {
    let Ok(diff_ids) =
        build::image::load_descriptor(store, desc, platform, "").and_then(|img| img.diff_ids())
    else {
        return Vec::new();
    };
    build::image::chain_ids(&diff_ids)
        .iter()
        .map(build::chain_snapshot)
        .collect()
}

fn names(snapshotter: &dyn Snapshotter) -> Result<HashSet<String>, Failure> {
    Ok(snapshotter
        .list()
        .map_err(Failure::internal)?
        .into_iter()
        .map(|i| i.name)
        .collect())
}

/// Takes away what the failed pull of `desc` added. Best effort: what
/// cannot be removed now is what `prune` removes later, so failures here
/// are logged, not reported over the reason the pull failed.
fn discard(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    desc: &Descriptor,
    platform: &Platform,
    before: &Before,
    snapshots_before: &HashSet<String>,
) {
    // The snapshots of this image's layers below the refused one that this
    // pull made (not others', made meanwhile): top first, as children must
    // go before their parents.
    let now = names(snapshotter).unwrap_or_default();
    for name in chain_snapshots(store, desc, platform).iter().rev() {
        if now.contains(name) && !snapshots_before.contains(name) {
            if let Err(e) = snapshotter.remove(name) {
                tracing::debug!("snapshot {name} is left for prune: {e}");
            }
        }
    }
    if !before.indexed.contains(&desc.digest().to_string()) {
        if let Err(e) = store.remove_untagged(desc) {
            tracing::debug!("cannot drop the untagged entry of {}: {e}", desc.digest());
        }
    }
    match StoreLock::try_exclusive(store) {
        Ok(Some(_lock)) => match store.unreferenced_blobs() {
            Ok(unreferenced) => {
                for d in unreferenced.iter().filter(|d| !before.blobs.contains(d)) {
                    if let Err(e) = store.remove_blob(d) {
                        tracing::debug!("cannot remove {d}: {e}");
                    }
                }
            }
            Err(e) => tracing::debug!("cannot tell which blobs are unreferenced: {e}"),
        },
        Ok(None) => tracing::debug!("the store is busy: the pulled blobs are left for prune"),
        Err(e) => tracing::debug!("cannot lock the store: {e}"),
    }
}
