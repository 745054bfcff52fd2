//! `jbuild system df`: what the state root holds, by kind, and how much
//! of it `jbuild prune` (or `prune --cache`) would free.
//!
//! | row | what | reclaimable |
//! |---|---|---|
//! | images | the images in the store (names and untagged), the blobs they reach | the blobs no image reaches (left by `rmi`): `prune` |
//! | layers | unpacked image layers (`chain-` snapshots) | those no image uses and no jail stands on: `prune` |
//! | snapshots | work in progress (`active-` snapshots) | those of processes that are gone: `prune` |
//! | build cache | build steps' results (`step-` snapshots) | all but those jails stand on: `prune --cache` |
//! | package cache | jbuild's own package files (`cache/packages`) | all: `prune --cache` |
//! | release cache | FreeBSD release sets (`cache/freebsd`) | none: nothing removes them |
//! | cache mounts | `RUN --mount=type=cache` directories (`cache/mounts`) | all: `prune --cache` |
//!
//! Sizes are apparent sizes (each file once), so they add up as `du
//! --apparent-size` would; a snapshot backend that cannot measure a
//! snapshot cheaply (ZFS) gives no size for the snapshot rows.

use std::collections::HashSet;

use super::gc::{self, GcError};
use super::list::ListError;
use super::names::SnapshotName;
use crate::blame::Blame;
use crate::config::Paths;
use crate::snapshot::clones::{holders, jails_of};
use crate::snapshot::{Info, Kind, SnapshotError, Snapshotter};
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error(transparent)]
    Gc(#[from] GcError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    List(#[from] ListError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("cannot measure {path}")]
    Measure {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Blame for UsageError {
    /// Measuring reads only jbuild's own state: a failure is not the
    /// user's doing, but a damaged store is said by its own error.
    fn is_user_error(&self) -> bool {
        match self {
            UsageError::Store(e) => e.is_user_error(),
            UsageError::List(e) => e.is_user_error(),
            UsageError::Snapshot(e) => e.is_user_error(),
            _ => false,
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    /// `images`, `layers`, `snapshots`, `build cache`, `package cache`,
    /// `release cache`, `cache mounts`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// How many (images, snapshots, files).
    pub total: usize,
    /// Bytes; `None` when the backend cannot say.
    pub size: Option<u64>,
    pub reclaimable: Option<u64>,
    /// The command that frees `reclaimable`.
    pub freed_by: Option<&'static str>,
}

/// Measures everything (see the module doc).
pub fn usage(
    store: &Store,
    snapshotter: &dyn Snapshotter,
    paths: &Paths,
) -> Result<Vec<Row>, UsageError> {
    let io = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| UsageError::Measure { path, source }
    };
    let mut rows = Vec::new();

    let unreferenced: HashSet<_> = gc::unreferenced_blobs(store)?.into_iter().collect();
    let (mut used, mut unused) = (0, 0);
    for d in store.blob_digests()? {
        let path = store.blob_path(&d);
        let n = std::fs::metadata(&path).map_err(io(&path))?.len();
        if unreferenced.contains(&d) {
            unused += n;
        } else {
            used += n;
        }
    }
    let images = super::list::list(store, &Default::default())?;
    rows.push(Row {
        kind: "images",
        total: images.len(),
        size: Some(used + unused),
        reclaimable: Some(unused),
        freed_by: Some("jbuild prune"),
    });

    let all = snapshotter.list()?;
    let held = holders(&jails_of(snapshotter)?);
    let mut in_use = gc::chains_in_use(store)?;
    in_use.extend(held.keys().cloned());
    let unused_chains: HashSet<&str> = gc::unused_chains(&all, &in_use)
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    let dead: HashSet<&str> = gc::dead_active(&all)
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    let mut sized = |kind: &'static str,
                     pick: &dyn Fn(&Info) -> bool,
                     gone: &dyn Fn(&str) -> bool,
                     freed_by: &'static str|
     -> Result<(), UsageError> {
        let mut row = Row {
            kind,
            total: 0,
            size: Some(0),
            reclaimable: Some(0),
            freed_by: Some(freed_by),
        };
        for info in all.iter().filter(|i| pick(i)) {
            row.total += 1;
            let n = snapshotter.disk_usage(&info.name)?;
            row.size = row.size.zip(n).map(|(a, b)| a + b);
            if gone(&info.name) {
                row.reclaimable = row.reclaimable.zip(n).map(|(a, b)| a + b);
            }
        }
        rows.push(row);
        Ok(())
    };
    let active = |i: &Info| i.kind == Kind::Active || SnapshotName::is_active(&i.name);
    let step = |i: &Info| matches!(SnapshotName::parse(&i.name), Some(SnapshotName::Step(_)));
    sized(
        "layers",
        &|i| !active(i) && !step(i),
        &|n| unused_chains.contains(n),
        "jbuild prune",
    )?;
    sized("snapshots", &active, &|n| dead.contains(n), "jbuild prune")?;
    sized(
        "build cache",
        &|i| !active(i) && step(i),
        &|n| !held.contains_key(n),
        "jbuild prune --cache",
    )?;

    for (kind, dir, freed_by) in [
        (
            "package cache",
            paths.package_cache(),
            Some("jbuild prune --cache"),
        ),
        ("release cache", paths.root().join("cache/freebsd"), None),
        (
            "cache mounts",
            paths.mount_cache(),
            Some("jbuild prune --cache"),
        ),
    ] {
        let size = crate::snapshot::tree_bytes(&dir).map_err(io(&dir))?;
        let total = match std::fs::read_dir(&dir) {
            Ok(entries) => entries.count(),
            Err(_) => 0,
        };
        rows.push(Row {
            kind,
            total,
            size: Some(size),
            reclaimable: Some(if freed_by.is_some() { size } else { 0 }),
            freed_by,
        });
    }
    Ok(rows)
}
