//! Which snapshot backend to use, and why: `--backend` (or
//! `$JBUILD_BACKEND`), else `backend =` in the configuration file, else
//! `auto`, which is `zfs` when a dataset is configured (`$JBUILD_ZFS_DATASET`,
//! else `[zfs] dataset`) and usable, else `overlay` where this process can
//! mount one (Linux, as root or in a user namespace that allows it: a probe
//! mount says), and `dir` otherwise. For overlay, the reason also says which
//! xattrs its mounts use and why (`in a user namespace: userxattr`, see
//! [`super::overlay::flavour`]).

use crate::blame::Blame;
use std::fs;

use super::dir::DirSnapshotter;
use super::overlay::OverlaySnapshotter;
use super::zfs::ZfsSnapshotter;
use super::{SnapshotError, Snapshotter};
use crate::config::{Paths, Settings};
use crate::fsutil::places::{existing_own_dir, PlaceError};

/// The backend chosen, in a sentence for `jbuild info`, and the snapshotter.
pub struct Chosen {
    pub reason: String,
    /// Where the snapshots are: a directory, or a dataset.
    pub location: String,
    pub snapshotter: Box<dyn Snapshotter>,
}

#[derive(Debug, thiserror::Error)]
pub enum ChooseError {
    #[error(
        "the zfs backend (asked for by {by}) needs a parent dataset: set [zfs] dataset in {config} \
         or $JBUILD_ZFS_DATASET, e.g. `zroot/jbuild`"
    )]
    NoDataset { by: String, config: String },
    #[error("the zfs backend (asked for by {by}) cannot use {dataset} (from {from})")]
    Unusable {
        by: String,
        dataset: String,
        from: String,
        #[source]
        source: SnapshotError,
    },
    #[error("the overlay backend (asked for by {by}) cannot be used here")]
    Overlay {
        by: String,
        #[source]
        source: SnapshotError,
    },
    #[error("unknown backend `{name}` (from {by}): use auto, zfs, overlay or dir")]
    Unknown { name: String, by: String },
    /// The `dir` backend's directory cannot be made or read.
    #[error(transparent)]
    Dir(SnapshotError),
    /// `snapshots/`, or a backend's directory in it, is a symlink or a
    /// file ([`crate::fsutil::places`]): never used.
    #[error(transparent)]
    Place(#[from] PlaceError),
}

impl Blame for ChooseError {
    /// Whether the user can fix it (a flag, the configuration, a dataset).
    fn is_user_error(&self) -> bool {
        match self {
            ChooseError::Dir(_) => false,
            ChooseError::Place(e) => e.is_stray(),
            _ => true,
        }
    }
}

/// Where the ZFS dataset name came from, for messages.
fn dataset(settings: &Settings) -> Option<(String, String)> {
    if let Some(d) = std::env::var("JBUILD_ZFS_DATASET")
        .ok()
        .filter(|d| !d.is_empty())
    {
        return Some((d, "$JBUILD_ZFS_DATASET".into()));
    }
    let d = settings.zfs.dataset.clone()?;
    Some((d, format!("[zfs] dataset in {}", config_file(settings))))
}

fn config_file(settings: &Settings) -> String {
    match &settings.source {
        Some(p) => p.display().to_string(),
        None => "the configuration file (none found; e.g. /etc/jbuild/config.toml)".into(),
    }
}

fn dir(paths: &Paths, reason: String) -> Result<Chosen, ChooseError> {
    let sn = DirSnapshotter::new(paths.dir_snapshots()).map_err(ChooseError::Dir)?;
    Ok(Chosen {
        reason,
        location: paths.dir_snapshots().display().to_string(),
        snapshotter: Box::new(sn),
    })
}

fn overlay(paths: &Paths, reason: String) -> Result<Chosen, SnapshotError> {
    let sn = OverlaySnapshotter::new(paths.overlay_snapshots())?;
    Ok(Chosen {
        reason: format!("{reason} ({})", sn.flavour().1),
        location: paths.overlay_snapshots().display().to_string(),
        snapshotter: Box::new(sn),
    })
}

/// `auto` without ZFS: overlay if the probe mount works, else dir, saying
/// why in both cases.
fn overlay_else_dir(paths: &Paths, no_zfs: &str) -> Result<Chosen, ChooseError> {
    if !cfg!(target_os = "linux") {
        return dir(paths, format!("dir: {no_zfs}"));
    }
    match overlay(
        paths,
        format!("overlay: {no_zfs}, and this process can mount overlayfs here"),
    ) {
        Ok(chosen) => Ok(chosen),
        Err(e) => {
            let e = crate::report::error_chain(&e);
            dir(
                paths,
                format!("dir: {no_zfs}, and overlayfs cannot be mounted here: {e}"),
            )
        }
    }
}

fn zfs(sn: ZfsSnapshotter) -> Chosen {
    Chosen {
        reason: format!(
            "zfs: dataset {} is mounted at {}",
            sn.dataset(),
            sn.mountpoint().display()
        ),
        location: sn.dataset().to_string(),
        snapshotter: Box::new(sn),
    }
}

/// Takes down the mounts processes now gone left in the snapshot
/// directories of `paths` (a killed pull's or build's step), whichever
/// backend made them: what every command that opens the store runs first,
/// without choosing or opening a backend. Only overlay mounts steps today;
/// `dir` mounts nothing and a ZFS dataset's clones outlive any process.
pub fn unmount_dead(paths: &Paths) {
    super::overlay::unmount_dead(&paths.overlay_snapshots());
}

/// The backend asked for and who asked: `--backend`, else the
/// configuration's `backend =`, else `auto` (said by nobody).
fn requested_by<'a>(requested: Option<&'a str>, settings: &'a Settings) -> (&'a str, String) {
    match (requested, &settings.backend) {
        (Some(b), _) => (b, "--backend (or $JBUILD_BACKEND)".to_string()),
        (None, Some(b)) => (
            b.as_str(),
            format!("backend = in {}", config_file(settings)),
        ),
        (None, None) => ("auto", String::new()),
    }
}

/// The snapshots `jbuild check` looks at, opened so that nothing is
/// written ([`DirSnapshotter::inspect`], [`OverlaySnapshotter::inspect`]):
/// the backend `requested` and the configuration call for; for `auto`
/// without a usable dataset, `overlay` where an overlay store exists
/// (on Linux), else `dir`. No probe mount is made to choose.
pub fn inspect(
    requested: Option<&str>,
    settings: &Settings,
    paths: &Paths,
) -> Result<Chosen, ChooseError> {
    let (requested, by) = requested_by(requested, settings);
    let dir = || Chosen {
        reason: "dir".into(),
        location: paths.dir_snapshots().display().to_string(),
        snapshotter: Box::new(DirSnapshotter::inspect(paths.dir_snapshots())),
    };
    let overlay = |by: String| {
        OverlaySnapshotter::inspect(paths.overlay_snapshots())
            .map(|sn| Chosen {
                reason: "overlay".into(),
                location: paths.overlay_snapshots().display().to_string(),
                snapshotter: Box::new(sn),
            })
            .map_err(|source| ChooseError::Overlay { by, source })
    };
    match requested {
        "dir" => Ok(dir()),
        "overlay" => overlay(by),
        "zfs" => choose(Some("zfs"), settings, paths),
        "auto" => {
            if let Some(Ok(sn)) = dataset(settings).map(|(ds, _)| ZfsSnapshotter::open(&ds)) {
                return Ok(zfs(sn));
            }
            let has_overlay =
                fs::symlink_metadata(paths.overlay_snapshots()).is_ok_and(|m| m.is_dir());
            if cfg!(target_os = "linux") && has_overlay {
                overlay(by)
            } else {
                Ok(dir())
            }
        }
        other => Err(ChooseError::Unknown {
            name: other.to_string(),
            by,
        }),
    }
}

/// The backend `requested` (`--backend`, `None` when not given) and the
/// configuration call for.
pub fn choose(
    requested: Option<&str>,
    settings: &Settings,
    paths: &Paths,
) -> Result<Chosen, ChooseError> {
    for place in ["snapshots", "snapshots/dir", "snapshots/overlay"] {
        existing_own_dir(paths.root(), place)?;
    }
    let (requested, by) = requested_by(requested, settings);
    match requested {
        "dir" => dir(paths, format!("dir: asked for by {by}")),
        "overlay" => overlay(paths, format!("overlay: asked for by {by}"))
            .map_err(|source| ChooseError::Overlay { by, source }),
        "zfs" => {
            let (ds, from) = dataset(settings).ok_or_else(|| ChooseError::NoDataset {
                by: by.clone(),
                config: config_file(settings),
            })?;
            let sn = ZfsSnapshotter::open(&ds).map_err(|source| ChooseError::Unusable {
                by,
                dataset: ds,
                from,
                source,
            })?;
            Ok(zfs(sn))
        }
        "auto" => match dataset(settings) {
            None => overlay_else_dir(
                paths,
                &format!(
                    "no ZFS dataset configured ([zfs] dataset in {}, or $JBUILD_ZFS_DATASET)",
                    config_file(settings)
                ),
            ),
            Some((ds, from)) => match ZfsSnapshotter::open(&ds) {
                Ok(sn) => Ok(zfs(sn)),
                Err(e) => {
                    let e = e.to_string().lines().collect::<Vec<_>>().join("; ");
                    let why = format!("ZFS dataset {ds} (from {from}) is not usable: {e}");
                    // Not an error: the build goes on, on overlay or `dir`,
                    // and says why.
                    tracing::warn!("{why}");
                    overlay_else_dir(paths, &why)
                }
            },
        },
        other => Err(ChooseError::Unknown {
            name: other.to_string(),
            by,
        }),
    }
}
