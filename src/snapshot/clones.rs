//! Jails cloned from committed snapshots: an optional ability of a
//! backend that can clone (ZFS), found through
//! [`Snapshotter::jail_clones`](super::Snapshotter::jail_clones).
//!
//! # Vocabulary
//!
//! A *jail clone* is a writable filesystem outside the snapshotter's own
//! namespace (a ZFS dataset such as `zroot/jails/web`, mounted at the
//! jail's root) made from a committed snapshot — the top layer of the
//! image the jail was created from. It costs nothing to make and shares
//! every unchanged block with the layer.
//!
//! The clone carries what it is, as the snapshots do ([`label`]): the
//! jail's name, the image (manifest digest) and the snapshot it was made
//! from. Which snapshot it still stands on is the backend's own answer
//! (ZFS's `origin` property): while a jail stands on a layer, that layer
//! cannot be removed (`rmi` refuses, `prune` keeps it and says which jail
//! holds it) and `jbuild check` counts the jail as a user, not as
//! something left over.
//!
//! A backend without clones (`dir`) has no such ability: `jbuild create`
//! copies the snapshot there ([`Snapshotter::materialize`]).
//!
//! [`Snapshotter::materialize`]: super::Snapshotter::materialize

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::path::Path;

use super::{Result, SnapshotError};

/// Properties a jail clone carries.
pub mod label {
    /// The jail's name; a dataset with it is a jail clone.
    pub const JAIL: &str = "jbuild:jail";
    /// The manifest digest of the image the jail was created from.
    pub const IMAGE: &str = "jbuild:image";
    /// The committed snapshot the clone was made from (what the origin was
    /// when it was made; the backend's origin says what it is now).
    pub const LAYER: &str = "jbuild:layer";
}

/// What to clone a snapshot into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneSpec<'a> {
    /// The new filesystem (`zroot/jails/web`); its parent must exist.
    pub dataset: &'a str,
    /// Where it is mounted: the jail's root.
    pub mountpoint: &'a Path,
    /// The jail's name.
    pub jail: &'a str,
    /// The image's manifest digest.
    pub image: &'a str,
}

/// Why a clone was not made.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    #[error("dataset {0} already exists")]
    Exists(String),
    #[error("the parent dataset of {0} does not exist")]
    NoParent(String),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

impl Blame for CloneError {
    /// A dataset in the way or missing is the user's to fix.
    fn is_user_error(&self) -> bool {
        match self {
            CloneError::Snapshot(e) => e.is_user_error(),
            _ => true,
        }
    }
}

/// A jail clone found on the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailClone {
    pub jail: String,
    pub dataset: String,
    /// The image's manifest digest, as recorded.
    pub image: String,
    /// The snapshot it was made from, as recorded.
    pub layer: String,
    /// The committed snapshot it stands on now; `None` when it no longer
    /// stands on one of this snapshotter's (promoted, or copied elsewhere).
    pub origin: Option<String>,
}

/// The optional ability of a backend that can clone a committed snapshot
/// into a jail's filesystem.
pub trait JailClones {
    /// The pool clones of this backend's snapshots must live in.
    fn pool(&self) -> &str;

    /// The filesystem mounted exactly at `dir`, if any (in any pool).
    fn dataset_at(&self, dir: &Path) -> Result<Option<String>>;

    /// Makes `spec.dataset` a writable clone of the committed snapshot
    /// `snapshot`, mounted at `spec.mountpoint`, carrying [`label`]s. The
    /// dataset appears whole or not at all.
    fn clone_into(&self, snapshot: &str, spec: &CloneSpec<'_>) -> Result<(), CloneError>;

    /// Every jail clone in the pool.
    fn jails(&self) -> Result<Vec<JailClone>>;
}

/// Which jails stand on each snapshot: snapshot name to the jails' names
/// (sorted), from [`JailClones::jails`].
pub fn holders(jails: &[JailClone]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for j in jails {
        if let Some(o) = &j.origin {
            out.entry(o.clone()).or_default().push(j.jail.clone());
        }
    }
    for v in out.values_mut() {
        v.sort();
        v.dedup();
    }
    out
}

/// The jail clones of `sn`, none when its backend cannot clone.
pub fn jails_of(sn: &dyn super::Snapshotter) -> Result<Vec<JailClone>> {
    match sn.jail_clones() {
        Some(c) => c.jails(),
        None => Ok(Vec::new()),
    }
}
