//! The jail's root on a backend that can clone (ZFS): a clone of the
//! image's top layer, not a copy.
//!
//! Which dataset, decided by [`decide`] (no ZFS needed to test it):
//!
//! | given | the jail's dataset | root |
//! |---|---|---|
//! | `--dataset D` (in the layers' pool) | `D`, mounted at the root | clone |
//! | `--dataset D` in another pool | refused: a clone cannot leave its pool | — |
//! | the root's parent directory is the mountpoint of `P2` in the layers' pool | `P2/<root's name>` | clone |
//! | the parent is another pool's dataset, or no dataset's mountpoint | — | copy, saying why |
//!
//! So `zfs create -o mountpoint=/usr/local/jails zroot/jails` once makes
//! every `jbuild create IMAGE NAME` a clone `zroot/jails/NAME`. The clone
//! is labelled with the jail, the image and the layer
//! ([`crate::snapshot::clones::label`]); `rmi`, `prune` and `check` read
//! them back. A backend without clones (`dir`) copies, as before.

use std::path::Path;

use super::{copy_root, CreateError, CreateOptions};
use crate::snapshot::clones::CloneSpec;
use crate::snapshot::Snapshotter;

/// How the jail's root was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootFrom {
    /// A clone of the committed snapshot `layer` as the dataset `dataset`.
    Clone { dataset: String, layer: String },
    /// A copy (or an empty directory for an image without layers); `why`
    /// says why not a clone on a backend that can clone.
    Copy { why: Option<String> },
}

/// Where the root goes, as [`decide`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    Clone(String),
    Copy(String),
}

/// Decides between a clone and a copy (see the module doc). `pool` is the
/// pool of the image's layers; `parent_dataset` the dataset mounted at the
/// root's parent directory, if one is.
pub(super) fn decide(
    requested: Option<&str>,
    pool: &str,
    parent_dataset: Option<&str>,
    root: &Path,
) -> Result<Decision, CreateError> {
    let pool_of = |d: &str| d.split('/').next().unwrap_or(d).to_string();
    if let Some(d) = requested {
        if pool_of(d) != pool {
            return Err(CreateError::User(format!(
                "--dataset {d}: the image's layers are in pool {pool}, and a clone lives in the pool of what it is cloned from; \
                 choose a dataset in {pool}"
            )));
        }
        return Ok(Decision::Clone(d.to_string()));
    }
    let parent = root.parent().unwrap_or(Path::new("/"));
    let name = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let plain = !name.is_empty()
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
    match parent_dataset {
        Some(p) if pool_of(p) == pool && plain => Ok(Decision::Clone(format!("{p}/{name}"))),
        Some(p) if pool_of(p) == pool => Ok(Decision::Copy(format!(
            "`{name}` cannot be a ZFS dataset name; give --dataset to clone"
        ))),
        Some(p) => Ok(Decision::Copy(format!(
            "{} is dataset {p}, not in pool {pool} where the image's layers are; give --dataset {pool}/… to clone",
            parent.display()
        ))),
        None => Ok(Decision::Copy(format!(
            "{} is not the mountpoint of a ZFS dataset; to clone, make it one \
             (`zfs create -o mountpoint={} {pool}/jails`) or give --dataset",
            parent.display(),
            parent.display()
        ))),
    }
}

/// Makes the jail's root from the image's top snapshot `top`: a clone
/// where the backend can and [`decide`] says so, else a copy.
pub(super) fn make_root(
    snapshotter: &dyn Snapshotter,
    top: Option<&str>,
    opts: &CreateOptions,
    image: &str,
) -> Result<RootFrom, CreateError> {
    let (clones, top) = match (snapshotter.jail_clones(), top) {
        (Some(c), Some(top)) => (c, top),
        (clones, top) => {
            if let Some(d) = &opts.dataset {
                return Err(CreateError::User(match clones {
                    None => format!(
                        "--dataset {d}: the {} backend cannot clone; use the zfs backend, or leave --dataset out to copy",
                        snapshotter.backend()
                    ),
                    Some(_) => format!(
                        "--dataset {d}: image {} has no layers, so there is nothing to clone",
                        opts.image
                    ),
                }));
            }
            copy_root(snapshotter, top, &opts.root)?;
            return Ok(RootFrom::Copy { why: None });
        }
    };
    let root = absolute(&opts.root)?;
    let parent = root.parent().unwrap_or(Path::new("/"));
    let parent_dataset = match opts.dataset {
        Some(_) => None,
        None => match parent.canonicalize() {
            Ok(p) => clones.dataset_at(&p)?,
            Err(_) => None,
        },
    };
    match decide(
        opts.dataset.as_deref(),
        clones.pool(),
        parent_dataset.as_deref(),
        &root,
    )? {
        Decision::Copy(why) => {
            copy_root(snapshotter, Some(top), &opts.root)?;
            Ok(RootFrom::Copy { why: Some(why) })
        }
        Decision::Clone(dataset) => {
            super::clear_root(&root)?;
            clones.clone_into(
                top,
                &CloneSpec {
                    dataset: &dataset,
                    mountpoint: &root,
                    jail: &opts.name,
                    image,
                },
            )?;
            Ok(RootFrom::Clone {
                dataset,
                layer: top.to_string(),
            })
        }
    }
}

/// `path` made absolute against the working directory (a mountpoint must
/// be), without resolving links the root does not have yet.
fn absolute(path: &Path) -> Result<std::path::PathBuf, CreateError> {
    std::path::absolute(path).map_err(super::io(format!("cannot resolve {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blame::Blame;

    fn root() -> &'static Path {
        Path::new("/usr/local/jails/web")
    }

    #[test]
    fn the_jails_dataset_comes_from_the_roots_parent_in_the_layers_pool() {
        assert_eq!(
            decide(None, "zroot", Some("zroot/jails"), root()).unwrap(),
            Decision::Clone("zroot/jails/web".into())
        );
        assert_eq!(
            decide(Some("zroot/j/w"), "zroot", None, root()).unwrap(),
            Decision::Clone("zroot/j/w".into())
        );
    }

    #[test]
    fn a_clone_cannot_leave_its_pool_and_otherwise_the_root_is_copied_saying_why() {
        let e = decide(Some("tank/jails/web"), "zroot", None, root()).unwrap_err();
        assert!(e.is_user_error());
        assert!(
            e.to_string().contains("layers are in pool zroot")
                && e.to_string().contains("choose a dataset in zroot"),
            "{e}"
        );
        let Decision::Copy(why) = decide(None, "zroot", Some("tank/jails"), root()).unwrap() else {
            panic!("another pool's parent is a copy")
        };
        assert!(
            why.contains("/usr/local/jails is dataset tank/jails"),
            "{why}"
        );
        let Decision::Copy(why) = decide(None, "zroot", None, root()).unwrap() else {
            panic!("no dataset is a copy")
        };
        assert!(
            why.contains("zfs create -o mountpoint=/usr/local/jails zroot/jails"),
            "{why}"
        );
        let odd = Path::new("/usr/local/jails/a b");
        let Decision::Copy(why) = decide(None, "zroot", Some("zroot/jails"), odd).unwrap() else {
            panic!("a name ZFS refuses is a copy")
        };
        assert!(why.contains("`a b` cannot be a ZFS dataset name"), "{why}");
    }
}
