//! The `zfs` snapshotter: every snapshot a dataset under one parent
//! dataset `P` (`[zfs] dataset` in the configuration file, or
//! `$JBUILD_ZFS_DATASET`).
//!
//! ```text
//! P                       mounted at M (the children inherit M/<name>)
//! P/<key>                 an active snapshot: a writable dataset
//! P/<name>                a committed snapshot's dataset, readonly=on
//! P/<name>@jbuild         ... and its ZFS snapshot, which makes it committed
//!                         and carries its labels as user properties
//! ```
//!
//! `prepare` is `zfs clone P/<parent>@jbuild P/<key>` (or `zfs create`), so
//! it costs the same whatever the size of the parent. `commit` sets
//! `readonly=on`, takes `P/<key>@jbuild` with the labels in the same
//! command (`zfs snapshot -o jbuild:chainid=...`, one atomic step: a
//! snapshot never exists without its labels), then renames `P/<key>` to
//! `P/<name>`. The name is the last step, so no other process can see a
//! committed `P/<name>` that is not finished; a crash before it leaves a
//! committed `active-<pid>-<n>` that `jbuild prune` removes.
//!
//! Which snapshot a dataset was prepared from is ZFS's own `origin`
//! property, and ZFS itself refuses to destroy an `@jbuild` that has clones:
//! `remove` names the dependants and leaves everything as it was.
//!
//! Everything jbuild knows about a snapshot is on the snapshot (so it
//! travels with `zfs send -p`), and `list` reads all of it with one
//! `zfs get -r` of `P`.

mod clone;
mod cmd;
mod fuse;
mod props;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use self::cmd::{parse_get, zfs, zfs_when_idle, CmdError};
use super::clones::{self, JailClones};
use super::{validate_name, Info, Kind, Labels, Result, SnapshotError, Snapshotter};
use crate::diff::walk::TreeWalkDiffer;
use crate::diff::Differ;

/// The name of the ZFS snapshot that makes a dataset a committed snapshot.
pub const SNAP: &str = "jbuild";

/// Snapshots as ZFS datasets under one parent dataset.
#[derive(Debug)]
pub struct ZfsSnapshotter {
    dataset: String,
    mountpoint: PathBuf,
    /// zfs-fuse needs xattr directories made before a commit; see `fuse`.
    zfs_fuse: bool,
    has_diff: OnceLock<bool>,
}

impl ZfsSnapshotter {
    /// Uses the existing, mounted filesystem `dataset` as the parent of every
    /// snapshot. Fails with what to do when `zfs` is missing or the dataset
    /// does not exist, is not a filesystem or is not mounted.
    pub fn open(dataset: &str) -> Result<ZfsSnapshotter> {
        if !valid_dataset(dataset) {
            return Err(SnapshotError::Backend(format!(
                "`{dataset}` is not a ZFS dataset name: set [zfs] dataset (or $JBUILD_ZFS_DATASET) to e.g. `zroot/jbuild`"
            )));
        }
        let out = zfs(&["get", "-H", "-o", "value", "type,mountpoint,mounted", dataset])
            .map_err(|e| match e {
                e if e.says("dataset does not exist") => SnapshotError::Backend(format!(
                    "ZFS dataset {dataset} does not exist: create it with `zfs create -o mountpoint=/var/db/jbuild/zfs {dataset}`, \
                     or set [zfs] dataset (or $JBUILD_ZFS_DATASET) to one that exists\n  ({e})"
                )),
                e => SnapshotError::Backend(e.to_string()),
            })?;
        let v: Vec<&str> = out.lines().collect();
        let [kind, mountpoint, mounted] = v[..] else {
            return Err(SnapshotError::Backend(format!(
                "unexpected output from `zfs get type,mountpoint,mounted {dataset}`: {out:?}"
            )));
        };
        if kind != "filesystem" {
            return Err(SnapshotError::Backend(format!(
                "ZFS dataset {dataset} is a {kind}, not a filesystem: set [zfs] dataset to a filesystem"
            )));
        }
        if !mountpoint.starts_with('/') {
            return Err(SnapshotError::Backend(format!(
                "ZFS dataset {dataset} has mountpoint={mountpoint}: jbuild needs its snapshots mounted; \
                 run `zfs set mountpoint=/var/db/jbuild/zfs {dataset}`"
            )));
        }
        if mounted != "yes" {
            return Err(SnapshotError::Backend(format!(
                "ZFS dataset {dataset} is not mounted: run `zfs mount {dataset}`"
            )));
        }
        Ok(ZfsSnapshotter {
            dataset: dataset.to_string(),
            zfs_fuse: fuse::is_zfs_fuse(Path::new(mountpoint)),
            has_diff: OnceLock::new(),
            mountpoint: PathBuf::from(mountpoint),
        })
    }

    /// The parent dataset `P`.
    pub fn dataset(&self) -> &str {
        &self.dataset
    }

    /// Where `P` is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Whether this host's `zfs` has `zfs diff` (OpenZFS does; zfs-fuse
    /// does not), i.e. whether a `zfs diff` differ can work here.
    pub fn has_zfs_diff(&self) -> bool {
        *self.has_diff.get_or_init(|| match zfs(&["diff"]) {
            Ok(_) => true,
            Err(e) => !e.says("unrecognized command") && !matches!(e, CmdError::Spawn(_)),
        })
    }

    fn ds(&self, name: &str) -> String {
        format!("{}/{name}", self.dataset)
    }

    fn snap(&self, name: &str) -> String {
        format!("{}/{name}@{SNAP}", self.dataset)
    }

    fn fail(&self, e: CmdError) -> SnapshotError {
        SnapshotError::Backend(e.to_string())
    }

    /// Every snapshot under `P`, or only `name` (and its `@jbuild`), from
    /// one `zfs get -r`.
    fn read(&self, only: Option<&str>) -> Result<BTreeMap<String, Info>> {
        let target = only.map_or_else(|| self.dataset.clone(), |n| self.ds(n));
        let out = match zfs(&[
            "get",
            "-H",
            "-p",
            "-r",
            "-s",
            "local,received,none",
            "-o",
            "name,property,value,source",
            "all",
            &target,
        ]) {
            Ok(out) => out,
            Err(e) if only.is_some() && e.says("dataset does not exist") => String::new(),
            Err(e) => return Err(self.fail(e)),
        };
        let prefix = format!("{}/", self.dataset);
        let mut found: BTreeMap<String, Info> = BTreeMap::new();
        let mut labels: BTreeMap<String, Labels> = BTreeMap::new();
        // A jail cloned into P (`create --dataset P/NAME`) is not a snapshot.
        let mut jails = Vec::new();
        for p in parse_get(&out) {
            let Some(rest) = p.name.strip_prefix(&prefix) else {
                continue;
            };
            let (name, snap) = match rest.split_once('@') {
                Some((n, s)) => (n, Some(s)),
                None => (rest, None),
            };
            // Datasets that do not look like jbuild's are somebody else's.
            if validate_name(name).is_err() {
                continue;
            }
            match snap {
                None if p.property == clones::label::JAIL && p.source == "local" => {
                    jails.push(name.to_string());
                }
                None => {
                    let info = found.entry(name.to_string()).or_insert_with(|| Info {
                        name: name.to_string(),
                        kind: Kind::Active,
                        parent: None,
                        labels: Labels::new(),
                    });
                    if p.property == "origin" {
                        info.parent = p
                            .value
                            .strip_prefix(&prefix)
                            .and_then(|o| o.strip_suffix(&format!("@{SNAP}")))
                            .map(str::to_string);
                    }
                }
                // Received: labels that came with `zfs send -p | zfs recv`.
                Some(SNAP) if p.source == "local" || p.source == "received" => {
                    if let (Some(k), Some(v)) =
                        (props::label_name(p.property), props::label_value(p.value))
                    {
                        labels.entry(name.to_string()).or_default().insert(k, v);
                    }
                }
                Some(SNAP) if p.property == "type" => {
                    labels.entry(name.to_string()).or_default();
                }
                Some(_) => {}
            }
        }
        for (name, l) in labels {
            if let Some(info) = found.get_mut(&name) {
                info.kind = Kind::Committed;
                info.labels = l;
            }
        }
        for j in jails {
            found.remove(&j);
        }
        Ok(found)
    }

    fn require(&self, name: &str, wanted: Kind) -> Result<Info> {
        match self.stat(name)? {
            Some(info) if info.kind == wanted => Ok(info),
            Some(info) => Err(SnapshotError::WrongKind {
                name: name.to_string(),
                actual: info.kind,
                wanted,
            }),
            None => Err(SnapshotError::NotFound(name.to_string())),
        }
    }

    /// The mounted root of `P/name`, mounting it if ZFS has not.
    fn mounted_root(&self, name: &str) -> Result<PathBuf> {
        let ds = self.ds(name);
        let out = zfs(&["get", "-H", "-o", "value", "mountpoint,mounted", &ds])
            .map_err(|e| self.fail(e))?;
        let mut lines = out.lines();
        let (Some(mountpoint), Some(mounted)) = (lines.next(), lines.next()) else {
            return Err(SnapshotError::Backend(format!(
                "unexpected output from `zfs get mountpoint,mounted {ds}`: {out:?}"
            )));
        };
        if !mountpoint.starts_with('/') {
            return Err(SnapshotError::Backend(format!(
                "ZFS dataset {ds} has mountpoint={mountpoint}: run `zfs inherit mountpoint {ds}`"
            )));
        }
        if mounted != "yes" {
            let _turn = fuse::mount_turn(self.zfs_fuse);
            zfs(&["mount", &ds]).map_err(|e| self.fail(e))?;
        }
        Ok(PathBuf::from(mountpoint))
    }

    /// `zfs rename from to`. zfs-fuse cannot rename a mounted filesystem
    /// ("dataset is busy"), so there the dataset is unmounted around it.
    fn rename(&self, from: &str, to: &str) -> Result<(), CmdError> {
        let _turn = fuse::mount_turn(self.zfs_fuse);
        match zfs(&["rename", from, to]) {
            Err(e) if e.says("dataset is busy") => {
                zfs_when_idle(&["umount", from])?;
                let renamed = zfs_when_idle(&["rename", from, to]);
                let now = if renamed.is_ok() { to } else { from };
                let mounted = zfs(&["mount", now]);
                renamed?;
                mounted.map(drop)
            }
            r => r.map(drop),
        }
    }

    /// Undoes the first steps of a commit whose rename failed: `key` is
    /// active again, writable and without `@jbuild`.
    fn uncommit(&self, key: &str) -> Result<()> {
        zfs_when_idle(&["destroy", &self.snap(key)]).map_err(|e| self.fail(e))?;
        zfs(&["inherit", "readonly", &self.ds(key)]).map_err(|e| self.fail(e))?;
        Ok(())
    }

    fn children(&self, name: &str) -> Result<Vec<String>> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|i| i.parent.as_deref() == Some(name))
            .map(|i| i.name)
            .collect())
    }

    /// The snapshots made from `name`, and the jails cloned from it: what
    /// ZFS names "dependent clones" (the jails are looked for only then,
    /// as that reads the whole pool).
    fn dependants(&self, name: &str) -> Result<Vec<String>> {
        let mut out = self.children(name)?;
        for j in self.jails()? {
            if j.origin.as_deref() == Some(name) {
                out.push(format!("jail {} ({})", j.jail, j.dataset));
            }
        }
        Ok(out)
    }
}

/// A filesystem name as `zfs` accepts it, and nothing an argument parser
/// could take for an option.
fn valid_dataset(dataset: &str) -> bool {
    !dataset.is_empty()
        && dataset.len() < 200
        && dataset.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && !c.starts_with('-')
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b))
        })
}

impl Snapshotter for ZfsSnapshotter {
    fn backend(&self) -> &'static str {
        "zfs"
    }

    fn prepare(&self, key: &str, parent: Option<&str>) -> Result<PathBuf> {
        validate_name(key)?;
        if let Some(parent) = parent {
            self.require(parent, Kind::Committed)?;
        }
        let ds = self.ds(key);
        let made = {
            let _turn = fuse::mount_turn(self.zfs_fuse);
            match parent {
                Some(parent) => zfs(&["clone", &self.snap(parent), &ds]),
                None => zfs(&["create", &ds]),
            }
        };
        match made {
            Ok(_) => {}
            Err(e) if e.says("dataset already exists") => {
                return Err(SnapshotError::AlreadyExists(key.to_string()))
            }
            // The parent went away between the check and the clone.
            Err(e) if parent.is_some() && e.says("does not exist") => {
                return Err(SnapshotError::NotFound(parent.unwrap_or_default().into()))
            }
            Err(e) => return Err(self.fail(e)),
        }
        self.mounted_root(key).inspect_err(|_| {
            let _turn = fuse::mount_turn(self.zfs_fuse);
            let _ = zfs_when_idle(&["destroy", &ds]);
        })
    }

    fn commit(&self, name: &str, key: &str, labels: &Labels) -> Result<()> {
        validate_name(name)?;
        self.require(key, Kind::Active)?;
        if name != key && self.stat(name)?.is_some() {
            return Err(SnapshotError::AlreadyExists(name.to_string()));
        }
        let assignments = props::assignments(labels)?;
        let ds = self.ds(key);
        if self.zfs_fuse {
            let root = self.mounted_root(key)?;
            fuse::make_xattr_dirs(&root).map_err(|e| {
                SnapshotError::io(format!("cannot prepare {} for commit", root.display()), e)
            })?;
        }
        zfs(&["set", "readonly=on", &ds]).map_err(|e| self.fail(e))?;
        let mut args = vec!["snapshot".to_string()];
        for a in assignments {
            args.push("-o".into());
            args.push(a);
        }
        args.push(self.snap(key));
        if let Err(e) = zfs(&args) {
            let _ = zfs(&["inherit", "readonly", &ds]);
            return Err(self.fail(e));
        }
        if name == key {
            return Ok(());
        }
        if let Err(e) = self.rename(&ds, &self.ds(name)) {
            // Another process committed `name` first (or the rename failed):
            // `key` goes back to being active, as the trait promises.
            if let Err(undo) = self.uncommit(key) {
                return Err(SnapshotError::Backend(format!(
                    "{e}\n  and undoing the commit of `{key}` failed too: {undo}; \
                     remove it with `jbuild prune` once no build runs"
                )));
            }
            if e.says("dataset already exists") {
                return Err(SnapshotError::AlreadyExists(name.to_string()));
            }
            return Err(self.fail(e));
        }
        Ok(())
    }

    fn view(&self, name: &str) -> Result<PathBuf> {
        self.require(name, Kind::Committed)?;
        self.mounted_root(name)
    }

    fn stat(&self, name: &str) -> Result<Option<Info>> {
        validate_name(name)?;
        Ok(self.read(Some(name))?.remove(name))
    }

    fn set_labels(&self, name: &str, labels: &Labels) -> Result<()> {
        validate_name(name)?;
        let assignments = props::assignments(labels)?;
        self.require(name, Kind::Committed)?;
        let snap = self.snap(name);
        // This zfs-fuse and older ZFS set one property per command.
        for a in assignments {
            zfs(&["set", &a, &snap]).map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    fn remove_labels(&self, name: &str, labels: &[String]) -> Result<()> {
        validate_name(name)?;
        self.require(name, Kind::Committed)?;
        let snap = self.snap(name);
        // `zfs inherit` of a user property on a snapshot removes it (a
        // snapshot has nothing to inherit from); one not set is no error.
        for l in labels {
            let prop = props::property_name(l)?;
            zfs(&["inherit", &prop, &snap]).map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    fn remove(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        let info = self
            .stat(name)?
            .ok_or_else(|| SnapshotError::NotFound(name.to_string()))?;
        let has_children = |children: Vec<String>| SnapshotError::HasChildren {
            name: name.to_string(),
            children: children.join(", "),
        };
        if info.kind == Kind::Committed {
            let children = self.children(name)?;
            if !children.is_empty() {
                return Err(has_children(children));
            }
        }
        // -r takes the `@jbuild` with it; never -R, which would take clones.
        let destroyed = {
            let _turn = fuse::mount_turn(self.zfs_fuse);
            zfs_when_idle(&["destroy", "-r", &self.ds(name)])
        };
        match destroyed {
            Ok(_) => Ok(()),
            // A clone made since the check: ZFS refused, nothing changed.
            Err(e) if e.says("dependent clones") => Err(has_children(self.dependants(name)?)),
            Err(e) if e.says("dataset does not exist") => {
                Err(SnapshotError::NotFound(name.to_string()))
            }
            Err(e) => Err(SnapshotError::Backend(format!(
                "{e}\n  (is a process still using {}?)",
                self.mountpoint.join(name).display()
            ))),
        }
    }

    fn list(&self) -> Result<Vec<Info>> {
        Ok(self.read(None)?.into_values().collect())
    }

    fn differ(&self) -> Box<dyn Differ> {
        if self.has_zfs_diff() {
            return Box::new(crate::diff::zfs::ZfsDiffer::new(self.dataset.clone()));
        }
        // zfs-fuse has no `zfs diff`: the tree walk, without a warning per export.
        Box::new(TreeWalkDiffer::new())
    }

    fn jail_clones(&self) -> Option<&dyn JailClones> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_names_are_checked_before_zfs_sees_them() {
        for good in ["zroot/jbuild", "tank", "t/a.b_c:d-e/f"] {
            assert!(valid_dataset(good), "{good}");
        }
        for bad in [
            "",
            "/zroot",
            "zroot/",
            "zroot//j",
            "-o",
            "zroot/-x",
            "zroot/../x",
            "tank@snap",
            "tank#b",
            "tank/a b",
            "tank/\n",
            "tänk",
        ] {
            assert!(!valid_dataset(bad), "{bad:?}");
            let e = ZfsSnapshotter::open(bad).unwrap_err().to_string();
            assert!(e.contains("[zfs] dataset"), "{e}");
        }
    }
}
