//! Jail clones on ZFS ([`JailClones`]): `jbuild create` makes the jail's
//! dataset a clone of the image's top `P/<name>@jbuild`.
//!
//! ```text
//! zfs clone -o mountpoint=ROOT -o jbuild:image=sha256:… -o jbuild:jail=NAME
//!           -o jbuild:layer=<name> P/<name>@jbuild DATASET
//! ```
//!
//! One command: the dataset appears mounted and labelled, or not at all.
//! Which jails stand on which layer is read back with one `zfs get -r` of
//! the pool (the labels and ZFS's `origin`). The commands are built here
//! as data ([`clone_args`], [`jails_args`]) and tested on any host.

use std::path::Path;

use super::cmd::{parse_get, zfs};
use super::{fuse, props, ZfsSnapshotter, SNAP};
use crate::snapshot::clones::{label, CloneError, CloneSpec, JailClone, JailClones};
use crate::snapshot::{validate_name, Kind, Labels, Result, SnapshotError};

/// `zfs clone` of `origin` (a full `pool/…@snap` name) as `spec` says.
pub(super) fn clone_args(origin: &str, layer: &str, spec: &CloneSpec<'_>) -> Result<Vec<String>> {
    let mut labels = Labels::new();
    labels.insert(label::JAIL.into(), spec.jail.into());
    labels.insert(label::IMAGE.into(), spec.image.into());
    labels.insert(label::LAYER.into(), layer.into());
    let mountpoint = spec
        .mountpoint
        .to_str()
        .filter(|m| m.starts_with('/') && !m.chars().any(|c| c.is_control() || c == ','));
    let Some(mountpoint) = mountpoint else {
        return Err(SnapshotError::Backend(format!(
            "{} cannot be a ZFS mountpoint: give an absolute path without commas or control characters",
            spec.mountpoint.display()
        )));
    };
    let mut args = vec![
        "clone".to_string(),
        "-o".into(),
        format!("mountpoint={mountpoint}"),
    ];
    for a in props::assignments(&labels)? {
        args.push("-o".into());
        args.push(a);
    }
    args.push(origin.into());
    args.push(spec.dataset.into());
    Ok(args)
}

/// `zfs get` of what tells jail clones apart, over the whole pool.
pub(super) fn jails_args(pool: &str) -> Vec<String> {
    ["get", "-H", "-p", "-r", "-o", "name,property,value,source"]
        .into_iter()
        .map(String::from)
        .chain([
            format!("{},{},{},origin", label::JAIL, label::IMAGE, label::LAYER),
            pool.to_string(),
        ])
        .collect()
}

/// The jail clones in `zfs get` output of [`jails_args`]; `parent` is the
/// snapshotter's dataset `P`, whose `@jbuild` snapshots are its layers.
pub(super) fn parse_jails(out: &str, parent: &str) -> Vec<JailClone> {
    let mut by_name: std::collections::BTreeMap<&str, JailClone> = Default::default();
    let layer_prefix = format!("{parent}/");
    let layer_suffix = format!("@{SNAP}");
    for p in parse_get(out) {
        if p.name.contains('@') {
            continue;
        }
        let j = by_name.entry(p.name).or_insert_with(|| JailClone {
            jail: String::new(),
            dataset: p.name.to_string(),
            image: String::new(),
            layer: String::new(),
            origin: None,
        });
        let ours = p.source == "local" || p.source == "received";
        let value = || props::label_value(p.value).unwrap_or_default();
        match p.property {
            label::JAIL if ours => j.jail = value(),
            label::IMAGE if ours => j.image = value(),
            label::LAYER if ours => j.layer = value(),
            "origin" => {
                j.origin = p
                    .value
                    .strip_prefix(&layer_prefix)
                    .and_then(|o| o.strip_suffix(&layer_suffix))
                    .filter(|o| validate_name(o).is_ok())
                    .map(str::to_string)
            }
            _ => {}
        }
    }
    by_name
        .into_values()
        .filter(|j| !j.jail.is_empty())
        .collect()
}

/// The pool of a dataset name: its first component.
pub(super) fn pool_of(dataset: &str) -> &str {
    dataset.split('/').next().unwrap_or(dataset)
}

impl JailClones for ZfsSnapshotter {
    fn pool(&self) -> &str {
        pool_of(&self.dataset)
    }

    fn dataset_at(&self, dir: &Path) -> Result<Option<String>> {
        let out = zfs(&["list", "-H", "-o", "name,mountpoint"]).map_err(|e| self.fail(e))?;
        Ok(out.lines().find_map(|l| {
            let (name, mnt) = l.split_once('\t')?;
            (Path::new(mnt) == dir).then(|| name.to_string())
        }))
    }

    fn clone_into(&self, snapshot: &str, spec: &CloneSpec<'_>) -> Result<(), CloneError> {
        self.require(snapshot, Kind::Committed)?;
        if !super::valid_dataset(spec.dataset) {
            return Err(SnapshotError::Backend(format!(
                "`{}` is not a ZFS dataset name",
                spec.dataset
            ))
            .into());
        }
        let args = clone_args(&self.snap(snapshot), snapshot, spec)?;
        let made = {
            let _turn = fuse::mount_turn(self.zfs_fuse);
            zfs(&args)
        };
        match made {
            Ok(_) => Ok(()),
            Err(e) if e.says("dataset already exists") => {
                Err(CloneError::Exists(spec.dataset.to_string()))
            }
            Err(e) if e.says("parent does not exist") => {
                Err(CloneError::NoParent(spec.dataset.to_string()))
            }
            Err(e) => Err(self.fail(e).into()),
        }
    }

    fn jails(&self) -> Result<Vec<JailClone>> {
        let out = zfs(&jails_args(pool_of(&self.dataset))).map_err(|e| self.fail(e))?;
        Ok(parse_jails(&out, &self.dataset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jail_clone_is_one_zfs_clone_with_its_mountpoint_and_labels() {
        let spec = CloneSpec {
            dataset: "zroot/jails/web",
            mountpoint: Path::new("/usr/local/jails/web"),
            jail: "web",
            image: "sha256:ab",
        };
        let args = clone_args("zroot/jbuild/chain-1@jbuild", "chain-1", &spec).unwrap();
        assert_eq!(
            args,
            [
                "clone",
                "-o",
                "mountpoint=/usr/local/jails/web",
                "-o",
                "jbuild:image=sha256:ab",
                "-o",
                "jbuild:jail=web",
                "-o",
                "jbuild:layer=chain-1",
                "zroot/jbuild/chain-1@jbuild",
                "zroot/jails/web",
            ]
        );
        for bad in ["relative/root", "/a,b", "/a\nb"] {
            let spec = CloneSpec {
                mountpoint: Path::new(bad),
                ..spec.clone()
            };
            let e = clone_args("p/x@jbuild", "x", &spec).unwrap_err();
            assert!(e.to_string().contains("cannot be a ZFS mountpoint"), "{e}");
        }
    }

    #[test]
    fn jail_clones_are_read_from_one_get_of_the_pool() {
        assert_eq!(
            jails_args("zroot"),
            [
                "get",
                "-H",
                "-p",
                "-r",
                "-o",
                "name,property,value,source",
                "jbuild:jail,jbuild:image,jbuild:layer,origin",
                "zroot",
            ]
        );
        let out = "zroot\tjbuild:jail\t-\t-\n\
                   zroot\torigin\t-\t-\n\
                   zroot/jbuild/chain-1\torigin\t-\t-\n\
                   zroot/jbuild/chain-1@jbuild\torigin\t-\t-\n\
                   zroot/jails/web\tjbuild:jail\tweb\tlocal\n\
                   zroot/jails/web\tjbuild:image\tsha256:ab\tlocal\n\
                   zroot/jails/web\tjbuild:layer\tchain-1\tlocal\n\
                   zroot/jails/web\torigin\tzroot/jbuild/chain-1@jbuild\t-\n\
                   zroot/jails/old\tjbuild:jail\told\tlocal\n\
                   zroot/jails/old\tjbuild:layer\tchain-0\tlocal\n\
                   zroot/jails/old\torigin\t-\t-\n\
                   zroot/jails/old/sub\tjbuild:jail\told\tinherited from zroot/jails/old\n\
                   zroot/other\torigin\tzroot/else@x\t-\n";
        let got = parse_jails(out, "zroot/jbuild");
        assert_eq!(
            got,
            [
                JailClone {
                    jail: "old".into(),
                    dataset: "zroot/jails/old".into(),
                    image: String::new(),
                    layer: "chain-0".into(),
                    origin: None,
                },
                JailClone {
                    jail: "web".into(),
                    dataset: "zroot/jails/web".into(),
                    image: "sha256:ab".into(),
                    layer: "chain-1".into(),
                    origin: Some("chain-1".into()),
                },
            ]
        );
        assert_eq!(pool_of("zroot/jbuild"), "zroot");
        assert_eq!(pool_of("tank"), "tank");
    }
}
