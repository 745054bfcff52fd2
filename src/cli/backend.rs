//! Which snapshot backend a command uses, and why: `--backend` (or
//! `$JBUILD_BACKEND`), else `backend =` in the configuration file, else
//! `auto`, which is `zfs` when a dataset is configured (`$JBUILD_ZFS_DATASET`,
//! else `[zfs] dataset`) and usable, and `dir` otherwise.

use anyhow::anyhow;

use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::zfs::ZfsSnapshotter;
use jbuild::snapshot::Snapshotter;

use super::{Ctx, Failure};

/// The backend chosen, in a sentence for `jbuild info`, and the snapshotter.
pub struct Chosen {
    pub reason: String,
    /// Where the snapshots are: a directory, or a dataset.
    pub location: String,
    pub snapshotter: Box<dyn Snapshotter>,
}

/// Where the ZFS dataset name came from, for messages.
fn dataset(ctx: &Ctx) -> Option<(String, String)> {
    if let Some(d) = std::env::var("JBUILD_ZFS_DATASET")
        .ok()
        .filter(|d| !d.is_empty())
    {
        return Some((d, "$JBUILD_ZFS_DATASET".into()));
    }
    let d = ctx.settings.zfs.dataset.clone()?;
    Some((d, format!("[zfs] dataset in {}", config_file(ctx))))
}

fn config_file(ctx: &Ctx) -> String {
    match &ctx.settings.source {
        Some(p) => p.display().to_string(),
        None => "the configuration file (none found; e.g. /etc/jbuild/config.toml)".into(),
    }
}

fn dir(ctx: &Ctx, reason: String) -> Result<Chosen, Failure> {
    let sn = DirSnapshotter::new(ctx.paths.dir_snapshots()).map_err(Failure::internal)?;
    Ok(Chosen {
        reason,
        location: ctx.paths.dir_snapshots().display().to_string(),
        snapshotter: Box::new(sn),
    })
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

pub fn choose(ctx: &Ctx) -> Result<Chosen, Failure> {
    let (requested, by) = match (&ctx.backend, &ctx.settings.backend) {
        (Some(b), _) => (b.as_str(), "--backend (or $JBUILD_BACKEND)".to_string()),
        (None, Some(b)) => (b.as_str(), format!("backend = in {}", config_file(ctx))),
        (None, None) => ("auto", String::new()),
    };
    match requested {
        "dir" => dir(ctx, format!("dir: asked for by {by}")),
        "zfs" => {
            let (ds, from) = dataset(ctx).ok_or_else(|| {
                Failure::user(anyhow!(
                    "the zfs backend (asked for by {by}) needs a parent dataset: set [zfs] dataset in {} \
                     or $JBUILD_ZFS_DATASET, e.g. `zroot/jbuild`",
                    config_file(ctx)
                ))
            })?;
            let sn = ZfsSnapshotter::open(&ds).map_err(|e| {
                Failure::user(anyhow!(e).context(format!(
                    "the zfs backend (asked for by {by}) cannot use {ds} (from {from})"
                )))
            })?;
            Ok(zfs(sn))
        }
        "auto" => match dataset(ctx) {
            None => dir(
                ctx,
                format!(
                    "dir: no ZFS dataset configured ([zfs] dataset in {}, or $JBUILD_ZFS_DATASET)",
                    config_file(ctx)
                ),
            ),
            Some((ds, from)) => match ZfsSnapshotter::open(&ds) {
                Ok(sn) => Ok(zfs(sn)),
                Err(e) => {
                    let e = e.to_string().lines().collect::<Vec<_>>().join("; ");
                    let reason = format!("dir: ZFS dataset {ds} (from {from}) is not usable: {e}");
                    tracing::warn!("{reason}");
                    dir(ctx, reason)
                }
            },
        },
        other => Err(Failure::user(anyhow!(
            "unknown backend `{other}` (from {by}): use auto, zfs or dir"
        ))),
    }
}
