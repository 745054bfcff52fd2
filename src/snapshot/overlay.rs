//! The `overlay` snapshotter (Linux): a snapshot's tree is a stack of
//! layer directories mounted with the kernel's overlayfs, so `prepare`
//! costs the same whatever the size of the parent, and a layer is exported
//! from what the step changed only.
//!
//! ```text
//! ROOT/
//!   active/<key>/meta.json   the parent, as for `dir`
//!               fs/          the upper directory: the step's changes
//!               work/        overlayfs's work directory
//!               merged/      the writable tree `prepare` returns (mounted)
//!   committed/<name>/meta.json, fs/   fs is the layer, never written again
//!               flat/        a whole copy of the tree, when the stack is deep
//!   l/<12 hex digits>        -> ../committed/<name>: short names for mount options
//!   flavour                  `trusted` or `userxattr`: the xattrs of its layers
//!   views/<pid>/<name>/      the read-only trees `view` returned to process <pid>
//!   trash/, lock             as for `dir`
//! ```
//!
//! The bookkeeping is the `dir` backend's (same directories, same
//! `meta.json`, same lock; where a snapshot's directory is *is* its kind and
//! name, and `commit` is one `rename(2)`): only what a tree *is* differs.
//!
//! - `prepare(key, parent)` mounts the parent's stack (its `fs`, its
//!   parent's `fs`, ... topmost first) as lower directories under a fresh
//!   `fs` and `work`, at `merged`. Without a parent there is nothing to
//!   mount: the tree is `fs` itself.
//! - `commit` links up the names of hard-linked files the step copied up
//!   ([`links`]), unmounts `merged`, syncs, removes `work`, and renames the
//!   snapshot to `committed/`. `fs` is from then on a layer other stacks
//!   stand on; nothing writes it again.
//! - `view(name)` mounts the stack read-only under `views/<pid>/` the first
//!   time this process asks, and the snapshotter unmounts its views when it
//!   is dropped, so no command leaves mounts behind and no process takes
//!   away a tree another one is reading. (A stack of one layer needs no
//!   mount: it is that `fs`.) Views of processes that are gone are
//!   unmounted by the next `new`.
//! - Deep stacks: the kernel takes the lower directories in one page of
//!   options and at most 500 of them. When a commit would leave a stack
//!   that passes what a page leaves for it ([`mount::lowerdir_budget`]) or
//!   128 layers ([`mount::needs_flattening`]),
//!   the snapshot also gets `flat/`, a copy of its whole tree, and every
//!   stack above it ends there: one full copy every few dozen layers
//!   instead of one per layer.
//!
//! A crash at any point leaves either an active snapshot (perhaps still
//! mounted, perhaps with a half-made `flat.tmp`) that `remove` — and so
//! `jbuild prune` — takes away, or a committed one, complete as it is, and
//! the dead process's views, which the next `new` unmounts. Mounts do not
//! survive a reboot, and nothing needs them to.
//!
//! Unprivileged use: in a user namespace (`unshare --user --map-root-user
//! --mount`, a rootless container) the mounts need the `userxattr` option
//! and overlayfs keeps its metadata in `user.overlay.*` xattrs instead of
//! `trusted.overlay.*`: the [`Flavour`]. A store records the flavour it
//! was made in and is only ever mounted in it: a store made by root is
//! refused in a user namespace (its opaque directories would be misread
//! silently there), and one made in a user namespace is mounted by root
//! with `userxattr` too ([`flavour`] says why).
//!
//! Hard links: a file with several names in a lower layer stays one file
//! through a step, as on `dir` and ZFS. A step's mount has overlayfs's
//! inode index on (trusted flavour), and `commit` links every name the
//! index kept together into the upper directory before unmounting; without
//! an index (a user namespace) a step that changed such a file in a way
//! the other backends would not show the same is refused at commit
//! ([`links`] says how and why).

mod differ;
pub mod flavour;
pub mod links;
pub mod mount;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use differ::OverlayDiffer;
pub use flavour::Flavour;

use super::dir::{place_err, remove_tree, stray, sync_tree, DirSnapshotter};
use super::{Flaw, Info, Kind, Labels, Result, SnapshotError, Snapshotter};
use crate::diff::Differ;
use crate::fsutil::places::{existing_own_dir, own_dir};

/// Snapshots as overlayfs layer directories under one root directory.
#[derive(Debug)]
pub struct OverlaySnapshotter {
    /// The bookkeeping (directories, `meta.json`, lock) is the `dir`
    /// backend's.
    dirs: DirSnapshotter,
    root: PathBuf,
    /// The xattrs of this store's layers, which every mount uses.
    flavour: Flavour,
    /// Why this process mounts in `flavour`, for `jbuild info`.
    why: String,
    /// The views this process mounted, unmounted on drop.
    views: Mutex<Vec<PathBuf>>,
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(io::Error) -> SnapshotError {
    let context = format!("cannot {what} {}", path.display());
    move |e| SnapshotError::io(context, e)
}

impl OverlaySnapshotter {
    /// Uses (creating) `root`, after checking that this process can make
    /// the overlay mounts it needs there in the store's [`Flavour`] (see
    /// [`mount::probe`]), and records that flavour in a new store.
    pub fn new(root: PathBuf) -> Result<Self> {
        let dirs = DirSnapshotter::new(root.clone())?;
        let (this, why) = Flavour::of_this_process()
            .map_err(|e| SnapshotError::io("cannot choose the overlay mount options", e))?;
        let recorded = flavour::recorded(&root)
            .map_err(io_err("read the overlay flavour recorded in", &root))?;
        let flavour = flavour::for_store(recorded, this).map_err(|e| {
            SnapshotError::Backend(format!(
                "the overlay store {} cannot be used here ({why}): {e}",
                root.display()
            ))
        })?;
        let why = match (flavour, this) {
            (Flavour::UserXattr, Flavour::Trusted) => {
                "as root, in the userxattr flavour this store was made in".to_string()
            }
            _ => why.to_string(),
        };
        let sn = OverlaySnapshotter {
            dirs,
            root,
            flavour,
            why,
            views: Mutex::new(Vec::new()),
        };
        sn.unmount_dead_views()?;
        unmount_dead(&sn.root);
        own_dir(&sn.root, "l").map_err(place_err)?;
        // Under this process's views, so that a probe a kill interrupts is
        // cleaned up with them.
        mount::probe(&sn.views_of(std::process::id()), flavour).map_err(|e| {
            SnapshotError::io(
                format!(
                    "cannot mount an overlay ({}) under {} (the overlay backend needs Linux, root \
                     or a user namespace that allows overlay mounts, and a file system overlayfs \
                     accepts as upper layer); use --backend dir",
                    flavour.name(),
                    sn.root.display()
                ),
                e,
            )
        })?;
        if recorded.is_none() {
            let kept = flavour::record(&sn.root, flavour)
                .map_err(io_err("record the overlay flavour of", &sn.root))?;
            // Another process made the store first, in the other flavour.
            if kept != flavour {
                return Err(SnapshotError::Backend(format!(
                    "the overlay store {} was just made by another process in the {} flavour; \
                     run again",
                    sn.root.display(),
                    kept.name()
                )));
            }
        }
        Ok(sn)
    }

    /// A snapshotter on `root` that only reads (for `jbuild check`):
    /// nothing is made and no probe mounted; a missing directory holds no
    /// snapshots. Mounts of processes that are gone are taken down
    /// ([`unmount_dead`]: no file is written for it). `view` of a stack
    /// (`check --deep`) still mounts it, under `views/`.
    pub fn inspect(root: PathBuf) -> Result<Self> {
        let (this, why) = Flavour::of_this_process()
            .map_err(|e| SnapshotError::io("cannot choose the overlay mount options", e))?;
        let recorded = flavour::recorded(&root)
            .map_err(io_err("read the overlay flavour recorded in", &root))?;
        unmount_dead(&root);
        Ok(OverlaySnapshotter {
            dirs: DirSnapshotter::inspect(root.clone()),
            root,
            flavour: recorded.unwrap_or(this),
            why: why.to_string(),
            views: Mutex::new(Vec::new()),
        })
    }

    /// The xattrs this store's layers use, and why this process mounts
    /// them so (e.g. "in a user namespace: userxattr").
    pub fn flavour(&self) -> (Flavour, &str) {
        (self.flavour, &self.why)
    }

    fn views_of(&self, pid: u32) -> PathBuf {
        self.root.join("views").join(pid.to_string())
    }

    /// Unmounts and removes the views of processes that no longer run (a
    /// killed build's).
    fn unmount_dead_views(&self) -> Result<()> {
        let views = own_dir(&self.root, "views").map_err(place_err)?;
        for entry in fs::read_dir(&views).map_err(io_err("read", &views))? {
            let entry = entry.map_err(io_err("read", &views))?;
            let alive = match entry.file_name().to_str().map(str::parse::<i32>) {
                Some(Ok(pid)) => nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                    .map_or_else(|e| e == nix::errno::Errno::EPERM, |()| true),
                _ => false,
            };
            if !alive {
                let dir = entry.path();
                // Nothing is mounted below once this succeeds, so deleting
                // the tree deletes only the dead process's directories.
                mount::unmount_under(&dir).map_err(io_err("unmount what is under", &dir))?;
                remove_tree(&dir)?;
            }
        }
        Ok(())
    }

    /// The directory the snapshots live in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lower directories of committed `name`'s tree, topmost first: its
    /// layer, its parent's, ... down to the first one that has a flattened
    /// copy (which then stands for everything below it).
    fn stack(&self, name: &str) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        let mut next = Some(name.to_string());
        while let Some(name) = next {
            // Real directories of the snapshot's only: a symlink out of
            // the root is never a lower layer.
            let dir = self.dirs.dir(Kind::Committed, &name);
            if let Some(flat) = existing_own_dir(&dir, "flat").map_err(place_err)? {
                out.push(flat);
                break;
            }
            out.push(self.dirs.tree(&name)?);
            next = self
                .dirs
                .read_meta(Kind::Committed, &name)?
                .ok_or_else(|| SnapshotError::NotFound(name.clone()))?
                .parent;
        }
        Ok(out)
    }

    /// The short name of committed `name`'s directory, `l/<12 hex digits of
    /// its sha256>`, a symlink to `../committed/<name>`: mount options name
    /// layers through it, so that a page holds three times as many.
    fn short(&self, name: &str) -> (PathBuf, PathBuf) {
        let digest = crate::digest::Digest::of(name.as_bytes());
        (
            self.root.join("l").join(&digest.hex()[..12]),
            Path::new("../committed").join(name),
        )
    }

    /// `stack` as mount options name it: each layer through its short link,
    /// made if a crash left the layer without one, unless another name
    /// sharing its 12 digits has it (then the long path).
    fn for_mount(&self, stack: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = Vec::with_capacity(stack.len());
        for layer in stack {
            let committed = self.dirs.dir(Kind::Committed, "");
            let named = layer
                .parent()
                .filter(|dir| dir.parent() == Some(committed.as_path()))
                .and_then(Path::file_name)
                .and_then(|n| n.to_str());
            let short = named.and_then(|name| {
                let (link, target) = self.short(name);
                let sub = layer.file_name()?;
                // A commit killed before making its link: made now.
                let found = fs::read_link(&link).or_else(|_| {
                    std::os::unix::fs::symlink(&target, &link)?;
                    fs::read_link(&link)
                });
                (found.ok()? == target).then(|| link.join(sub))
            });
            out.push(short.unwrap_or_else(|| layer.clone()));
        }
        out
    }

    /// Mounts the active snapshot `key` (whose directories exist) over the
    /// stack of `parent`.
    fn mount_active(&self, key: &str, parent: &str) -> Result<PathBuf> {
        let dir = self.dirs.dir(Kind::Active, key);
        let (upper, work, merged) = (dir.join("fs"), dir.join("work"), dir.join("merged"));
        let opts = mount::options(
            &self.for_mount(&self.stack(parent)?),
            Some((&upper, &work)),
            self.flavour,
        );
        mount::mount(&opts, &merged, false).map_err(io_err("mount an overlay at", &merged))?;
        Ok(merged)
    }

    /// Before the active snapshot `key` (in `dir`, over `parent`) is
    /// unmounted: the names of a lower file with several that the step
    /// copied up are all linked in its upper directory, or, on a mount the
    /// kernel gave no inode index, the step is refused if it changed such a
    /// file in a way that cannot be kept ([`links`]).
    fn keep_hard_links(&self, key: &str, dir: &Path, parent: &str) -> Result<()> {
        let (upper, work, merged) = (dir.join("fs"), dir.join("work"), dir.join("merged"));
        let (view, lowers) = (self.view(parent)?, self.stack(parent)?);
        let step = links::Step {
            upper: &upper,
            work: &work,
            merged: &merged,
            parent: &view,
            lowers: &lowers,
            flavour: self.flavour,
        };
        let context = || format!("cannot keep the hard links of snapshot `{key}`");
        if step.has_index() {
            let started = std::time::Instant::now();
            let linked = links::link_up(&step).map_err(|e| SnapshotError::io(context(), e))?;
            if linked > 0 {
                tracing::debug!(
                    "snapshot `{key}`: {linked} names of copied-up hard-linked files linked into \
                     its layer in {:?}",
                    started.elapsed()
                );
            }
        } else if let Some(broken) =
            links::check_unbroken(&step).map_err(|e| SnapshotError::io(context(), e))?
        {
            return Err(SnapshotError::Unsupported(format!(
                "cannot commit snapshot `{key}`: {broken}"
            )));
        }
        Ok(())
    }

    /// Makes `dir/flat` a whole copy of the tree `lowers` make, by way of a
    /// read-only mount at `dir/merged`. A crash leaves `flat.tmp`, which the
    /// next try (or the snapshot's removal) throws away.
    fn flatten(&self, dir: &Path, lowers: &[PathBuf]) -> Result<()> {
        let (tmp, flat, merged) = (dir.join("flat.tmp"), dir.join("flat"), dir.join("merged"));
        if tmp.exists() {
            remove_tree(&tmp)?;
        }
        fs::create_dir_all(&merged).map_err(io_err("create", &merged))?;
        mount::mount(
            &mount::options(&self.for_mount(lowers), None, self.flavour),
            &merged,
            true,
        )
        .map_err(io_err("mount an overlay at", &merged))?;
        let copied = super::dir::copy_tree(&merged, &tmp);
        mount::unmount(&merged).map_err(io_err("unmount", &merged))?;
        copied.map_err(io_err("flatten the layers into", &tmp))?;
        sync_tree(&tmp)?;
        fs::rename(&tmp, &flat).map_err(io_err("rename", &tmp))
    }
}

impl Snapshotter for OverlaySnapshotter {
    fn backend(&self) -> &'static str {
        "overlay"
    }

    fn prepare(&self, key: &str, parent: Option<&str>) -> Result<PathBuf> {
        let dir = self.dirs.begin(key, parent)?;
        let upper = dir.join("fs");
        let Some(parent) = parent else {
            fs::create_dir(&upper).map_err(|e| {
                self.dirs.abandon(key);
                SnapshotError::io(format!("cannot prepare snapshot `{key}`"), e)
            })?;
            return Ok(upper);
        };
        // The upper directory's root is the tree's root: it starts as the
        // parent's (owner, mode, times, xattrs), as a copy would.
        let made = ["fs", "work", "merged"]
            .iter()
            .try_for_each(|d| fs::create_dir(dir.join(d)))
            .map_err(|e| SnapshotError::io(format!("cannot prepare snapshot `{key}`"), e))
            .and_then(|()| self.view(parent))
            .and_then(|root| {
                super::dir::copy_metadata(&root, &upper)
                    .map_err(|e| SnapshotError::io(format!("cannot prepare snapshot `{key}`"), e))
            })
            .and_then(|()| self.mount_active(key, parent));
        if made.is_err() {
            let _ = mount::unmount(&dir.join("merged"));
            self.dirs.abandon(key);
        }
        made
    }

    fn commit(&self, name: &str, key: &str, labels: &Labels) -> Result<()> {
        super::validate_name(name)?;
        self.dirs.require(key, Kind::Active)?;
        // Checked before unmounting, so that `key` is left as it was.
        if name != key && self.dirs.find(name)?.is_some() {
            return Err(SnapshotError::AlreadyExists(name.to_string()));
        }
        let dir = self.dirs.dir(Kind::Active, key);
        let merged = dir.join("merged");
        let parent = self
            .dirs
            .read_meta(Kind::Active, key)?
            .and_then(|m| m.parent);
        if let Some(parent) = &parent {
            self.keep_hard_links(key, &dir, parent)?;
        }
        mount::unmount(&merged).map_err(io_err("unmount", &merged))?;
        let work = dir.join("work");
        if work.exists() {
            remove_tree(&work)?;
        }
        // Only ever an empty mount point: never a tree deleted through a
        // mount.
        match fs::remove_dir(&merged) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_err("remove", &merged)(e));
            }
            _ => {}
        }
        if let Some(parent) = &parent {
            let mut lowers = vec![dir.join("fs")];
            lowers.extend(self.stack(parent)?);
            if mount::needs_flattening(&self.for_mount(&lowers), &self.root) {
                self.flatten(&dir, &lowers)?;
            }
        }
        let committed = self.dirs.commit(name, key, labels);
        if committed.is_ok() {
            // Best effort: without it, mounts name the layer by its long path.
            let (link, target) = self.short(name);
            let _ = std::os::unix::fs::symlink(target, link);
        }
        if committed.is_err() {
            // Another process committed `name` first: `key` is still ours,
            // and its tree is mounted again where `prepare` said it was.
            if let (Some(parent), Ok(Some(Kind::Active))) = (&parent, self.dirs.find(key)) {
                let remounted = ["work", "merged"]
                    .iter()
                    .try_for_each(|d| fs::create_dir_all(dir.join(d)))
                    .map_err(io_err("create", &dir))
                    .and_then(|()| self.mount_active(key, parent));
                if let Err(e) = remounted {
                    tracing::warn!("cannot mount snapshot `{key}` again: {e}");
                }
            }
        }
        committed
    }

    fn view(&self, name: &str) -> Result<PathBuf> {
        self.dirs.require(name, Kind::Committed)?;
        let stack = self.stack(name)?;
        if let [only] = &stack[..] {
            return Ok(only.clone());
        }
        let merged = self.views_of(std::process::id()).join(name);
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        if !views.contains(&merged) {
            fs::create_dir_all(&merged).map_err(io_err("create", &merged))?;
            mount::mount(
                &mount::options(&self.for_mount(&stack), None, self.flavour),
                &merged,
                true,
            )
            .map_err(io_err("mount an overlay at", &merged))?;
            views.push(merged.clone());
        }
        Ok(merged)
    }

    fn stat(&self, name: &str) -> Result<Option<Info>> {
        self.dirs.stat(name)
    }

    fn set_labels(&self, name: &str, labels: &Labels) -> Result<()> {
        self.dirs.set_labels(name, labels)
    }

    fn remove_labels(&self, name: &str, labels: &[String]) -> Result<()> {
        self.dirs.remove_labels(name, labels)
    }

    fn remove(&self, name: &str) -> Result<()> {
        let kind = self
            .dirs
            .find(name)?
            .ok_or_else(|| SnapshotError::NotFound(name.to_string()))?;
        if kind == Kind::Committed {
            // Refused before anything is unmounted: a child's tree stands on
            // this one.
            self.dirs.refuse_if_parent(name)?;
        }
        let merged = self.dirs.dir(kind, name).join("merged");
        mount::unmount(&merged).map_err(io_err("unmount", &merged))?;
        if kind == Kind::Committed {
            // Every process's view of it: a tree that no longer exists.
            let views = self.root.join("views");
            for entry in fs::read_dir(&views)
                .map_err(io_err("read", &views))?
                .flatten()
            {
                let view = entry.path().join(name);
                mount::unmount(&view).map_err(io_err("unmount", &view))?;
                let _ = fs::remove_dir(&view);
            }
            self.views
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|v| !v.ends_with(name));
        }
        self.dirs.remove(name)?;
        if kind == Kind::Committed {
            let (link, target) = self.short(name);
            if fs::read_link(&link).is_ok_and(|t| t == target) {
                fs::remove_file(&link).map_err(io_err("remove", &link))?;
            }
        }
        Ok(())
    }

    /// A layer's own directory (its upper files, and a flattened copy
    /// where one was made), as the `dir` bookkeeping keeps it.
    fn disk_usage(&self, name: &str) -> Result<Option<u64>> {
        self.dirs.disk_usage(name)
    }

    fn list(&self) -> Result<Vec<Info>> {
        self.dirs.list()
    }

    fn audit(&self) -> Result<(Vec<Info>, Vec<Flaw>)> {
        let (all, mut flaws) = self.dirs.audit_dirs()?;
        for place in ["l", "views"] {
            if let Err(e) = existing_own_dir(&self.root, place) {
                if e.is_stray() {
                    flaws.push(stray(None, &e));
                }
            }
        }
        for info in all.iter().filter(|i| i.kind == Kind::Committed) {
            if let Err(e) = existing_own_dir(&self.dirs.dir(Kind::Committed, &info.name), "flat") {
                if e.is_stray() {
                    flaws.push(stray(Some(&info.name), &e));
                }
            }
        }
        Ok((all, flaws))
    }

    fn differ(&self) -> Box<dyn Differ> {
        Box::new(OverlayDiffer::new(
            self.dirs.dir(Kind::Committed, ""),
            self.flavour,
        ))
    }
}

impl Drop for OverlaySnapshotter {
    fn drop(&mut self) {
        let views = std::mem::take(self.views.get_mut().unwrap_or_else(|e| e.into_inner()));
        for view in views {
            if let Err(e) = mount::unmount(&view) {
                tracing::warn!("cannot unmount {}: {e}", view.display());
            }
        }
        let _ = remove_mountpoints(&self.views_of(std::process::id()));
    }
}

/// Takes down the mounts that processes now gone left under the overlay
/// store at `root`: the tree of an active snapshot `active-<pid>-<n>`
/// (a killed pull's or build's step) and the views of `views/<pid>/`.
/// Only mounts: the snapshot itself stays, for `jbuild prune` (or `check
/// --repair`) to remove; nothing is written under `root`. Cheap where
/// there is no overlay store (one `stat`). Best effort: a mount that
/// cannot be taken down now is tried again by the next command.
pub fn unmount_dead(root: &Path) {
    if !root.is_dir() {
        return;
    }
    let (Ok(points), Ok(root)) = (mount::mounts_under(root), fs::canonicalize(root)) else {
        return;
    };
    for point in points {
        let Ok(rel) = point.strip_prefix(&root) else {
            continue;
        };
        let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
        let owner = match parts[..] {
            ["active", key, "merged"] => key
                .strip_prefix("active-")
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<i32>().ok())),
            ["views", pid, ..] => pid.parse::<i32>().ok(),
            _ => None,
        };
        let Some(pid) = owner.filter(|&pid| pid > 0) else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            .map_or_else(|e| e == nix::errno::Errno::EPERM, |()| true);
        if !alive {
            if let Err(e) = mount::unmount(&point) {
                tracing::debug!("cannot unmount {}: {e}", point.display());
            }
        }
    }
}

/// Removes `dir` and the (empty, unmounted) mount points in it: never
/// anything else, so a mount that is somehow still there is left alone
/// rather than emptied.
fn remove_mountpoints(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        fs::remove_dir(entry?.path())?;
    }
    fs::remove_dir(dir)
}
