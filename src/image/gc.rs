//! What no image needs any more: blobs nothing in `index.json` reaches,
//! unpacked layers (`chain-` snapshots) no image uses, active snapshots
//! whose process is gone, and with `--cache` the whole build cache.
//! [`prune`] removes them and says what it removed; `jbuild check` uses
//! the same questions to list them as reclaimable (or as pending, while
//! other processes hold the store lock), and a failed pull to tell which
//! of the layers it made it may take away ([`unused_among`]). A layer a
//! jail was cloned from ([`crate::snapshot::clones`]) is never among them,
//! whether an image still uses it or not: prune keeps it and says which
//! jail holds it.

use std::collections::HashSet;

use oci_spec::image::ImageManifest;

use super::load::with_config;
use super::media::{Document, MAX_DOCUMENT};
use super::names::{chain_ids, SnapshotName};
use super::walk::{Bounds, Walk, WalkError};
use super::ImageError;
use crate::digest::Digest;
use crate::snapshot::clones::{holders, jails_of};
use crate::snapshot::{Info, Kind, SnapshotError, Snapshotter};
use crate::store::{Store, StoreError, StoreLock};

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot tell which layers images use")]
    InUse(#[source] ImageError),
    #[error("{path}")]
    Walk {
        path: String,
        #[source]
        source: WalkError,
    },
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

impl crate::blame::Blame for GcError {
    /// The store and snapshots decide by their own type; images whose
    /// layers cannot be told are the store's damage.
    fn is_user_error(&self) -> bool {
        match self {
            GcError::Store(e) => e.is_user_error(),
            GcError::Snapshot(e) => e.is_user_error(),
            GcError::InUse(_) | GcError::Walk { .. } => false,
        }
    }
}

/// What [`prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneSummary {
    pub snapshots_removed: usize,
    /// The blobs removed, each with its size.
    pub blobs_removed: Vec<(Digest, u64)>,
    /// Snapshots that would have gone but that jails stand on, each with
    /// the jails' names.
    pub kept_for_jails: Vec<(String, Vec<String>)>,
    /// Bytes of partial blobs (what killed or failed pulls had downloaded)
    /// removed.
    pub partial_bytes_removed: u64,
}

impl PruneSummary {
    pub fn bytes_freed(&self) -> u64 {
        self.blobs_removed.iter().map(|(_, n)| n).sum::<u64>() + self.partial_bytes_removed
    }
}

/// The documents reachable from `store`'s index, read from the store: the
/// walk itself, driven to its end. `on_manifest` sees each manifest; a
/// manifest that is referenced but missing is skipped (a layout may be
/// partial); one that does not parse is an error, because guessing could
/// delete what it refers to.
fn walk_store(
    store: &Store,
    mut on_manifest: impl FnMut(&Digest, &ImageManifest) -> Result<(), GcError>,
) -> Result<HashSet<Digest>, GcError> {
    let roots = store.read_index()?.manifests().clone();
    let walk_error = |source| GcError::Walk {
        path: store.path().join("index.json").display().to_string(),
        source,
    };
    let mut walk = Walk::new(roots, Bounds::none()).map_err(walk_error)?;
    while let Some(node) = walk.next_node().map_err(walk_error)? {
        if !node.is_document() || !store.has_blob(&node.digest) {
            continue;
        }
        let bytes = store.read_blob(&node.digest, MAX_DOCUMENT)?;
        let doc = Document::parse(&node.desc, &bytes).map_err(|e| StoreError::Corrupt {
            path: store.blob_path(&node.digest),
            reason: e.to_string(),
        })?;
        if let Document::Manifest(m) = &doc {
            on_manifest(&node.digest, m)?;
        }
        walk.expand(&node, &doc).map_err(walk_error)?;
    }
    Ok(walk.into_visited())
}

/// Blobs that nothing in `index.json` reaches: the walk goes from the
/// index's entries through nested indexes to manifests, and from those to
/// configs, layers and subjects.
///
/// Call it under [`StoreLock::exclusive`] if the result is used to delete,
/// as [`prune_blobs`] does.
pub fn unreferenced_blobs(store: &Store) -> Result<Vec<Digest>, GcError> {
    let reachable = walk_store(store, |_, _| Ok(()))?;
    let mut unreferenced: Vec<Digest> = store
        .blob_digests()?
        .into_iter()
        .filter(|d| !reachable.contains(d))
        .collect();
    unreferenced.sort();
    Ok(unreferenced)
}

/// Removes every unreferenced blob, and temporary files that dead
/// processes left, for a caller that holds the exclusive store lock
/// (`jbuild prune`, `jbuild check --repair`); each removed blob comes with
/// its size.
pub fn prune_blobs(store: &Store, _exclusive: &StoreLock) -> Result<Vec<(Digest, u64)>, GcError> {
    let mut removed = Vec::new();
    for d in unreferenced_blobs(store)? {
        let size = std::fs::metadata(store.blob_path(&d)).map_or(0, |m| m.len());
        store.remove_blob(&d)?;
        removed.push((d, size));
    }
    store.remove_stale_tmp();
    Ok(removed)
}

/// The `chain-<id>` names of every layer stack of every image the store's
/// index reaches (all platforms of a multi-platform image). A manifest
/// missing from the store (a partial layout) uses nothing; one that cannot
/// be read is an error, because guessing could delete what it uses.
pub fn chains_in_use(store: &Store) -> Result<HashSet<String>, GcError> {
    let mut used = HashSet::new();
    walk_store(store, |digest, manifest| {
        let img = with_config(store, digest.clone(), manifest.clone(), &digest.to_string())
            .map_err(GcError::InUse)?;
        let diff_ids = img.diff_ids().map_err(GcError::InUse)?;
        used.extend(chain_ids(&diff_ids).iter().map(SnapshotName::chain));
        Ok(())
    })?;
    Ok(used)
}

/// Whether the process that owns the active snapshot `name`
/// (`active-<pid>-<n>`) is alive. A name of another form has no owner.
pub fn owner_alive(name: &str) -> bool {
    match SnapshotName::parse(name) {
        Some(SnapshotName::Active { pid, .. }) => i32::try_from(pid).is_ok_and(pid_alive),
        _ => false,
    }
}

/// Whether process `pid` exists (under any user).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        // It exists but belongs to someone else.
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// Active snapshots (and `active-` ones a killed ZFS commit left committed)
/// whose process is gone: leftovers of interrupted work.
pub fn dead_active(all: &[Info]) -> Vec<&Info> {
    all.iter()
        .filter(|i| {
            (i.kind == Kind::Active || SnapshotName::is_active(&i.name)) && !owner_alive(&i.name)
        })
        .collect()
}

/// Committed `chain-` snapshots no image uses (`in_use`) and that nothing
/// else stands on — counting as gone the dead active snapshots and the
/// unused layers above them. Leaves come first: the order to remove them in.
pub fn unused_chains<'a>(all: &'a [Info], in_use: &HashSet<String>) -> Vec<&'a Info> {
    let mut gone: HashSet<&str> = dead_active(all).iter().map(|i| i.name.as_str()).collect();
    let mut out: Vec<&Info> = Vec::new();
    loop {
        let next: Vec<&Info> = all
            .iter()
            .filter(|i| {
                i.kind == Kind::Committed
                    && SnapshotName::is_chain(&i.name)
                    && !in_use.contains(&i.name)
                    && !gone.contains(i.name.as_str())
                    && all
                        .iter()
                        .filter(|c| c.parent.as_deref() == Some(i.name.as_str()))
                        .all(|c| gone.contains(c.name.as_str()))
            })
            .collect();
        if next.is_empty() {
            return out;
        }
        for i in next {
            gone.insert(&i.name);
            out.push(i);
        }
    }
}

/// Of the unpacked layers `made` (the `chain-` snapshots a failed pull
/// committed), those `prune` would remove now, leaves first: no image in
/// `index.json` uses them, no jail was cloned from them, and nothing
/// stands on them but others of `made` (or the active snapshot of a dead
/// process, which the snapshotter then refuses to remove from under).
///
/// For a caller that holds the store lock exclusively (`_exclusive`): then
/// no pull or build is between finding one of them and building on it, as
/// a pull holds the lock shared until it names its image ([`super::pull`](mod@super::pull),
/// "The pin"), and a build for its whole run. `jbuild create` holds no
/// lock while it unpacks, but it unpacks only a named image, whose layers
/// are in use.
pub fn unused_among(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    made: &HashSet<String>,
    _exclusive: &StoreLock,
) -> Result<Vec<String>, GcError> {
    let all = snapshotter.list()?;
    let mut keep = chains_in_use(store)?;
    keep.extend(holders(&jails_of(snapshotter)?).into_keys());
    keep.extend(
        all.iter()
            .filter(|i| !made.contains(&i.name))
            .map(|i| i.name.clone()),
    );
    Ok(unused_chains(&all, &keep)
        .into_iter()
        .map(|i| i.name.clone())
        .collect())
}

/// `jbuild prune`: removes the active snapshots of dead processes, the
/// unpacked layers no image uses (leaves first: on ZFS a layer is the
/// origin of the one above; one a build step stands on stays, as build
/// cache), with `cache` every committed snapshot nothing stands on
/// (repeatedly, children before parents; a live build's active snapshot
/// keeps its parent), every blob no image reaches, and the partial blobs
/// killed or failed pulls kept to resume.
///
/// All of it under the store lock held exclusively, taken first (waiting
/// for it): no build or pull is then running. A pull's `chain-` snapshots
/// are used by no image in `index.json` until it names it, and the shared
/// lock it holds meanwhile is what keeps them ([`super::pull`](mod@super::pull), "The
/// pin"); a build holds it from before it looks up its FROM until it tags
/// its image, which keeps its FROM's layers (whose image `rmi` may have
/// untagged meanwhile), the step it has just committed (nothing stands on
/// it until the next is prepared) and the blobs it writes.
pub fn prune(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    cache: bool,
) -> Result<PruneSummary, GcError> {
    let lock = StoreLock::exclusive(store)?;
    let mut summary = PruneSummary::default();
    for info in dead_active(&snapshotter.list()?) {
        snapshotter.remove(&info.name)?;
        summary.snapshots_removed += 1;
    }
    let held = holders(&jails_of(snapshotter)?);
    let mut in_use = chains_in_use(store)?;
    summary.kept_for_jails = held
        .iter()
        .filter(|(name, _)| cache || (SnapshotName::is_chain(name) && !in_use.contains(*name)))
        .map(|(n, j)| (n.clone(), j.clone()))
        .collect();
    in_use.extend(held.keys().cloned());
    for info in unused_chains(&snapshotter.list()?, &in_use) {
        snapshotter.remove(&info.name)?;
        summary.snapshots_removed += 1;
    }
    if cache {
        loop {
            let all = snapshotter.list()?;
            let mut progress = false;
            for info in all
                .iter()
                .filter(|i| i.kind == Kind::Committed && !held.contains_key(&i.name))
            {
                if !all
                    .iter()
                    .any(|c| c.parent.as_deref() == Some(info.name.as_str()))
                {
                    snapshotter.remove(&info.name)?;
                    summary.snapshots_removed += 1;
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
    }
    summary.blobs_removed = prune_blobs(store, &lock)?;
    summary.partial_bytes_removed = store.remove_partials();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{canonical_json, descriptor_digest, oci_digest, ImageName};
    use oci_spec::image::{Descriptor, ImageIndexBuilder, ImageManifestBuilder, MediaType};
    use std::fs;

    fn put(s: &Store, mt: MediaType, bytes: &[u8]) -> Descriptor {
        let (d, n) = s.put_bytes(bytes).unwrap();
        Descriptor::new(mt, n, oci_digest(&d))
    }

    fn put_manifest(s: &Store, tag: &str) -> (Descriptor, Vec<Digest>) {
        let config = put(
            s,
            MediaType::ImageConfig,
            format!("{{\"tag\":\"{tag}\"}}").as_bytes(),
        );
        let layer = put(
            s,
            MediaType::ImageLayerGzip,
            format!("layer of {tag}").as_bytes(),
        );
        let m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(config.clone())
            .layers(vec![layer.clone()])
            .build()
            .unwrap();
        let desc = put(s, MediaType::ImageManifest, &canonical_json(&m));
        let digests = [&desc, &config, &layer]
            .map(|d| descriptor_digest(d).unwrap())
            .to_vec();
        (desc, digests)
    }

    fn prune_store(s: &Store) -> Vec<Digest> {
        let lock = StoreLock::exclusive(s).unwrap();
        prune_blobs(s, &lock)
            .unwrap()
            .into_iter()
            .map(|(d, _)| d)
            .collect()
    }

    #[test]
    fn walks_manifests_and_nested_indexes() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (direct, direct_blobs) = put_manifest(&s, "direct");
        let (nested, nested_blobs) = put_manifest(&s, "nested");
        let (_, orphan_blobs) = put_manifest(&s, "orphan");
        let inner = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![nested])
            .build()
            .unwrap();
        let inner = put(&s, MediaType::ImageIndex, &canonical_json(&inner));
        let outer = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![inner.clone()])
            .build()
            .unwrap();
        let outer = put(&s, MediaType::ImageIndex, &canonical_json(&outer));
        s.tag(&ImageName::parse("direct").unwrap(), &direct)
            .unwrap();
        s.add_untagged(&outer).unwrap();
        // A referenced manifest that is missing is no reason to fail.
        s.tag_ref(
            "gone",
            &Descriptor::new(
                MediaType::ImageManifest,
                1,
                oci_digest(&Digest::of(b"gone")),
            ),
        )
        .unwrap();
        fs::write(t.path().join("blobs/sha256/not-a-digest"), "x").unwrap();

        let mut orphans = orphan_blobs.clone();
        orphans.sort();
        assert_eq!(unreferenced_blobs(&s).unwrap(), orphans);
        assert_eq!(prune_store(&s), orphans);
        assert!(unreferenced_blobs(&s).unwrap().is_empty());
        for d in direct_blobs.iter().chain(&nested_blobs) {
            assert!(s.has_blob(d), "{d} was kept");
        }
        assert!(s.has_blob(&descriptor_digest(&inner).unwrap()));
        assert!(t.path().join("blobs/sha256/not-a-digest").exists());

        // Untagging the last name makes the image collectable.
        s.untag(&ImageName::parse("direct").unwrap()).unwrap();
        assert_eq!(unreferenced_blobs(&s).unwrap().len(), 3);
    }

    #[test]
    fn corrupt_manifest_stops_the_walk() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let bad = put(&s, MediaType::ImageManifest, b"{\"schemaVersion\":");
        s.tag_ref("bad", &bad).unwrap();
        assert!(matches!(
            unreferenced_blobs(&s),
            Err(GcError::Store(StoreError::Corrupt { .. }))
        ));
    }
}
