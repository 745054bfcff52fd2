//! The ZFS differ: ask `zfs diff` what changed, so exporting a layer costs
//! what changed rather than a walk of the whole tree.
//!
//! The datasets follow the ZFS snapshotter's layout: under one parent
//! dataset `P`, the snapshot named `N` is the dataset `P/N`, committed as
//! `P/N@jbuild`, and a child is a clone of its parent's `@jbuild`, so
//! `zfs diff -H -F P/<parent>@jbuild P/<child>@jbuild` is legal and cheap.
//! Content is read from the child's mounted root, never from `zfs diff`.
//!
//! `zfs diff` reports objects, not names, and the layer needs names, so its
//! lines are only *candidates*: each candidate path is looked up in both
//! trees and judged exactly as the tree walk judges a path (see
//! [`super::walk`]), then the list goes through [`canonicalize`]. What
//! `zfs diff` cannot say is found around the candidates, still at a cost
//! that follows the change:
//!
//! - a renamed or new directory: everything under it (a rename is one `R`
//!   line for the directory alone);
//! - a directory present in both: the names it gained or lost (one name per
//!   inode: adding or removing a hard link prints only `M <some name> (+1)`);
//!   all its names when it is a different directory under the same name;
//! - a changed file with several links: its other names (openzfs#13283),
//!   searched first in its own directory, then by one walk of the child
//!   that reads directories only (`d_ino`, no `stat`) and stops as soon as
//!   every name is found.
//!
//! The layer is therefore byte-identical to the tree walk's for the same
//! snapshots (a test in the qemu lane checks it).
//!
//! # Which differ lists a layer
//!
//! `zfs diff` is not always the cheaper way. libzfs looks at every object
//! of each object block (32 dnodes) holding a change, and for each finds
//! its path in both snapshots (a search of its directory), so its cost
//! follows how *spread* the change is over the object numbers, not how
//! many files changed: one file or 100 in one directory take 0.3–0.5 s in
//! the emulated guest of `benches/zfs-diff.sh`, 10% of 50,000 files
//! (every object block) over ten times the walk. The tree walk costs the
//! same for any change: one visit per object. No cheap figure tells the
//! two apart in advance (`written` and file counts miss a thin but wide
//! change), so `zfs diff` runs alone and its progress is watched: the
//! [choice](super::choose) stops it and walks once, as projected, what it
//! has left costs more than a whole walk (and never for a tree of fewer
//! than [`Policy::min_objects`] objects). Both give the same list, and
//! [`Differ::changes_named`] names the one that produced it.
//!
//! With no parent (a base layer is all of the child) the tree walk is the
//! only way. When `zfs diff` is missing (zfs-fuse has none), fails, or
//! prints what the parser refuses, the walk is used; the differ says so
//! once through `tracing::warn!`.

pub mod parse;
mod run;
mod sample;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::canonical::read_dir_sorted;
use super::choose::{decide, Decision, Policy, Probe};
use super::meta::{self, Meta};
use super::walk::{differs, TreeWalkDiffer};
use super::*;
use parse::{Format, Name};
use run::Running;
use sample::{Sample, Sampled};

/// The snapshot of a committed dataset that `zfs diff` compares.
pub const SNAPSHOT: &str = "jbuild";

/// How often the running `zfs diff` is looked at.
const POLL: Duration = Duration::from_millis(10);

/// When the walk's rate is measured if `zfs diff` is still running (a
/// narrow change on fast hardware is listed before, and pays nothing).
const SAMPLE_AFTER: Duration = Duration::from_millis(100);

pub struct ZfsDiffer {
    parent_dataset: String,
    program: PathBuf,
    policy: Policy,
    objects: Option<u64>,
    warned: AtomicBool,
}

/// How a layer's changes were listed, and what was known when the differ
/// that listed them was chosen.
#[derive(Debug)]
pub struct Choice {
    pub changes: Vec<Change>,
    /// `zfs-diff` or `tree-walk`.
    pub by: &'static str,
    /// The last look at the running `zfs diff` (none when it ended before
    /// the first look).
    pub probe: Option<Probe>,
    /// The `zfs diff` child's process id.
    pub pid: u32,
}

impl ZfsDiffer {
    /// A differ for the snapshots under `parent_dataset` (`P` above).
    pub fn new(parent_dataset: impl Into<String>) -> ZfsDiffer {
        ZfsDiffer {
            parent_dataset: parent_dataset.into(),
            program: PathBuf::from("zfs"),
            policy: Policy::default(),
            objects: None,
            warned: AtomicBool::new(false),
        }
    }

    /// Runs `program` instead of `zfs` from `PATH`.
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> ZfsDiffer {
        self.program = program.into();
        self
    }

    /// Chooses by `policy` instead of [`Policy::default`].
    pub fn with_policy(mut self, policy: Policy) -> ZfsDiffer {
        self.policy = policy;
        self
    }

    /// Takes the child to hold `objects` objects instead of asking
    /// `statvfs` (which counts a dataset's objects on ZFS only: host tests
    /// use this).
    pub fn with_object_count(mut self, objects: u64) -> ZfsDiffer {
        self.objects = Some(objects);
        self
    }

    fn snapshot_of(&self, name: &str) -> String {
        format!("{}/{name}@{SNAPSHOT}", self.parent_dataset)
    }

    /// Starts `zfs diff -H -F` from `parent` to `child`.
    fn start(&self, parent: &str, child: &str) -> Result<(Running, String), DiffError> {
        let (from, to) = (self.snapshot_of(parent), self.snapshot_of(child));
        let run =
            Running::spawn(&self.program, &["diff", "-H", "-F", &from, &to]).map_err(|e| {
                DiffError::Backend(format!("cannot run `{}`: {e}", self.program.display()))
            })?;
        Ok((run, format!("zfs diff {from} {to}")))
    }

    /// Waits for `run` to end and parses its output.
    fn records(
        &self,
        mut run: Running,
        what: &str,
        child: SnapshotRef<'_>,
    ) -> Result<Vec<parse::Record>, DiffError> {
        loop {
            if let Some(out) = self.finished(&mut run, what, child)? {
                return Ok(out);
            }
            std::thread::sleep(POLL);
        }
    }

    /// The parsed output once `run` has ended; [`DiffError::Backend`] says
    /// why it could not be used.
    fn finished(
        &self,
        run: &mut Running,
        what: &str,
        child: SnapshotRef<'_>,
    ) -> Result<Option<Vec<parse::Record>>, DiffError> {
        let f = match run.try_finish() {
            Ok(None) => return Ok(None),
            Ok(Some(f)) => f,
            Err(e) => return Err(DiffError::Backend(format!("cannot wait for `{what}`: {e}"))),
        };
        if !f.status.success() {
            let stderr = String::from_utf8_lossy(&f.stderr);
            return Err(DiffError::Backend(format!(
                "`{what}` failed ({}): {}",
                f.status,
                stderr.trim()
            )));
        }
        parse::parse(&f.stdout, &Format::jbuild(child.root))
            .map(Some)
            .map_err(|e| DiffError::Backend(e.to_string()))
    }

    fn fall_back(&self, why: &DiffError) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!("{why}; finding changes by walking both trees instead (slower)");
        } else {
            tracing::debug!("{why}; tree walk");
        }
    }
}

impl ZfsDiffer {
    /// The changes as `zfs diff` finds them, with no fallback and no
    /// choice: a `zfs diff` that cannot be run, fails, or prints what the
    /// parser refuses is a [`DiffError::Backend`]. Tests and benches call
    /// this to be sure `zfs diff` was used.
    pub fn changes_via_zfs(
        &self,
        parent: SnapshotRef<'_>,
        child: SnapshotRef<'_>,
    ) -> Result<Vec<Change>, DiffError> {
        let (run, what) = self.start(parent.name, child.name)?;
        let records = self.records(run, &what, child)?;
        self.judge(records, parent, child)
    }

    /// The candidates `zfs diff` named, judged in both trees.
    fn judge(
        &self,
        records: Vec<parse::Record>,
        parent: SnapshotRef<'_>,
        child: SnapshotRef<'_>,
    ) -> Result<Vec<Change>, DiffError> {
        let mut candidates = Vec::new();
        for r in records {
            for name in std::iter::once(r.name).chain(r.new_name) {
                match name {
                    Name::Path(p) => candidates.push(p),
                    // The root's own changes cannot be in a layer, but its
                    // entries may have changed.
                    Name::Root => candidates.push(PathBuf::new()),
                    // Unlinked but open: in neither tree.
                    Name::OnDeleteQueue => {}
                }
            }
        }
        let (changes, links) = Judge::new(parent.root, child.root).run(candidates)?;
        canonicalize(changes, Some(parent.root), child.root, Some(&links))
    }

    /// `zfs diff` alone, watched, and stopped for the tree walk when the
    /// [choice](super::choose) says so. A `zfs diff` that cannot be used
    /// is a [`DiffError::Backend`] (the caller walks instead).
    pub fn choose(
        &self,
        parent: SnapshotRef<'_>,
        child: SnapshotRef<'_>,
    ) -> Result<Choice, DiffError> {
        let objects = self.objects.or_else(|| object_count(child.root));
        let (mut run, what) = self.start(parent.name, child.name)?;
        let (start, pid) = (Instant::now(), run.id());
        let walk = TreeWalkDiffer::new();
        let (mut rate, mut probe) = (None, None);
        let mut first: Option<(Duration, f64)> = None;
        std::thread::scope(|scope| {
            let mut sample = Sample::NotYet;
            loop {
                if let Some(records) = self.finished(&mut run, &what, child)? {
                    sample.stop();
                    let changes = self.judge(records, parent, child)?;
                    return Ok(Choice {
                        changes,
                        by: self.name(),
                        probe,
                        pid,
                    });
                }
                let elapsed = start.elapsed();
                let Some(objects) = objects.filter(|n| *n >= self.policy.min_objects) else {
                    std::thread::sleep(POLL);
                    continue;
                };
                if matches!(sample, Sample::NotYet) && elapsed >= SAMPLE_AFTER {
                    sample = Sample::start(scope, &walk, parent, child, &self.policy);
                }
                if let Some(Sampled { listed, per_visit }) = sample.ended() {
                    match listed {
                        // The whole walk fit in the sample: it is the answer.
                        Ok(changes) => {
                            run.kill();
                            return Ok(Choice {
                                changes,
                                by: walk.name(),
                                probe,
                                pid,
                            });
                        }
                        Err(DiffError::Cancelled) => rate = Some(per_visit),
                        // The walk itself fails: `zfs diff` is the only way.
                        Err(e) => tracing::debug!("timing the tree walk: {e}"),
                    }
                    continue;
                }
                if sample.is_running() {
                    std::thread::sleep(POLL);
                    continue;
                }
                let done = run
                    .last_line()
                    .and_then(|l| object_of(&l, parent, child))
                    .map(|ino| (ino as f64 / objects as f64).min(1.0));
                if first.is_none() {
                    first = done.map(|d| (elapsed, d));
                }
                let p = Probe {
                    elapsed,
                    done,
                    first,
                    objects,
                    walk_per_object: rate,
                };
                probe = Some(p);
                if decide(&self.policy, &p) == Decision::Walk {
                    tracing::debug!("zfs diff stopped for the tree walk: {p:?}");
                    run.kill();
                    let changes = walk.changes(Some(parent), child)?;
                    return Ok(Choice {
                        changes,
                        by: walk.name(),
                        probe,
                        pid,
                    });
                }
                std::thread::sleep(POLL);
            }
        })
    }
}

impl Differ for ZfsDiffer {
    fn name(&self) -> &'static str {
        "zfs-diff"
    }

    fn changes_named(
        &self,
        parent: Option<SnapshotRef<'_>>,
        child: SnapshotRef<'_>,
    ) -> Result<(Vec<Change>, &'static str), DiffError> {
        let walk = TreeWalkDiffer::new();
        let Some(parent) = parent else {
            return Ok((walk.changes(None, child)?, walk.name()));
        };
        match self.choose(parent, child) {
            Ok(c) => Ok((c.changes, c.by)),
            Err(e @ DiffError::Backend(_)) => {
                self.fall_back(&e);
                Ok((walk.changes(Some(parent), child)?, walk.name()))
            }
            Err(e) => Err(e),
        }
    }
}

/// The objects in the dataset mounted at `root`: on ZFS, `statvfs`'s
/// `f_files − f_ffree` is the dataset's object count.
fn object_count(root: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(root).ok()?;
    Some((s.files() as u64).saturating_sub(s.files_free() as u64))
}

/// The object number (inode) of the path one line of `zfs diff` names: in
/// the child, or in the parent for a path the child no longer has.
fn object_of(line: &[u8], parent: SnapshotRef<'_>, child: SnapshotRef<'_>) -> Option<u64> {
    let r = parse::parse_line(line, &Format::jbuild(child.root)).ok()?;
    let rel = match r.new_name.unwrap_or(r.name) {
        Name::Path(p) => p,
        Name::Root => PathBuf::new(),
        Name::OnDeleteQueue => return None,
    };
    meta::lstat(&child.root.join(&rel))
        .or_else(|_| meta::lstat(&parent.root.join(&rel)))
        .ok()
        .map(|m| m.ino)
}

/// Decides what each candidate path is, as the tree walk would.
struct Judge<'a> {
    parent: Tree<'a>,
    child: Tree<'a>,
}

impl<'a> Judge<'a> {
    fn new(parent: &'a Path, child: &'a Path) -> Self {
        Judge {
            parent: Tree::new(parent),
            child: Tree::new(child),
        }
    }

    fn run(mut self, candidates: Vec<PathBuf>) -> Result<(Vec<Change>, LinkIndex), DiffError> {
        let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
        let mut queue: VecDeque<PathBuf> = VecDeque::new();
        for c in candidates {
            if seen.insert(c.clone()) {
                queue.push_back(c);
            }
        }
        let mut changes = Vec::new();
        let mut links = LinkIndex::default();
        let mut linked: Vec<(PathBuf, Meta)> = Vec::new();
        // Inodes whose names were searched for already: once is enough.
        let mut searched: HashSet<u64> = HashSet::new();
        while let Some(rel) = queue.pop_front() {
            let is_root = rel.as_os_str().is_empty();
            let pm = self.parent.lookup(&rel)?;
            let cm = self.child.lookup(&rel)?;
            let mut more: Vec<OsString> = Vec::new();
            match (&pm, &cm) {
                (None, None) => {}
                (Some(_), None) => changes.push(Change::new(&rel, ChangeKind::Deleted)),
                (None, Some(cm)) => {
                    changes.push(Change::new(&rel, ChangeKind::Added));
                    if cm.is_dir() {
                        more = read_dir_sorted(&self.child.root.join(&rel))?;
                    }
                }
                (Some(pm), Some(cm)) => {
                    let (pp, cp) = (self.parent.root.join(&rel), self.child.root.join(&rel));
                    if !is_root && differs(&pp, pm, &cp, cm)? {
                        changes.push(Change::new(&rel, ChangeKind::Modified));
                    }
                    more = match (pm.is_dir(), cm.is_dir()) {
                        (_, false) => Vec::new(),
                        (false, true) => read_dir_sorted(&cp)?,
                        (true, true) => entries_to_check(&pp, pm, &cp, cm)?,
                    };
                }
            }
            if let Some(cm) = cm.filter(Meta::is_multi_link) {
                links.record(&rel, &cm);
                if changes.last().is_some_and(|c| c.path == rel) && searched.insert(cm.ino) {
                    linked.push((rel.clone(), cm));
                }
            }
            for name in more {
                let p = rel.join(name);
                if seen.insert(p.clone()) {
                    queue.push_back(p);
                }
            }
            // Other names of a changed multi-link file are judged like any
            // candidate (Added if new, Modified if their link count moved).
            if queue.is_empty() && !linked.is_empty() {
                for name in other_names(self.child.root, &std::mem::take(&mut linked))? {
                    if seen.insert(name.clone()) {
                        queue.push_back(name);
                    }
                }
            }
        }
        Ok((changes, links))
    }
}

/// Which names of a directory present in both trees need a look: those
/// only one side has, or every name when it is another directory (same
/// name, different object; e.g. two directories swapped by renames).
fn entries_to_check(
    pp: &Path,
    pm: &Meta,
    cp: &Path,
    cm: &Meta,
) -> Result<Vec<OsString>, DiffError> {
    let before = read_dir_sorted(pp)?;
    let after = read_dir_sorted(cp)?;
    if pm.ino != cm.ino {
        let mut all = before;
        all.extend(after);
        all.sort();
        all.dedup();
        return Ok(all);
    }
    let b: BTreeSet<&OsString> = before.iter().collect();
    let a: BTreeSet<&OsString> = after.iter().collect();
    Ok(b.symmetric_difference(&a).map(|n| (*n).clone()).collect())
}

/// One snapshot's tree, looked up by relative path without ever following
/// a symlink: a path whose ancestor is not a real directory does not exist.
struct Tree<'a> {
    root: &'a Path,
    dirs: HashMap<PathBuf, bool>,
}

impl<'a> Tree<'a> {
    fn new(root: &'a Path) -> Self {
        Tree {
            root,
            dirs: HashMap::new(),
        }
    }

    fn lookup(&mut self, rel: &Path) -> Result<Option<Meta>, DiffError> {
        if let Some(dir) = rel.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !self.is_dir(dir)? {
                return Ok(None);
            }
        }
        self.lstat(rel)
    }

    fn is_dir(&mut self, rel: &Path) -> Result<bool, DiffError> {
        if let Some(&d) = self.dirs.get(rel) {
            return Ok(d);
        }
        let d = self.lookup(rel)?.is_some_and(|m| m.is_dir());
        self.dirs.insert(rel.to_path_buf(), d);
        Ok(d)
    }

    fn lstat(&self, rel: &Path) -> Result<Option<Meta>, DiffError> {
        let p = self.root.join(rel);
        match meta::lstat(&p) {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(DiffError::io(format!("cannot lstat {}", p.display()), e)),
        }
    }
}

/// Every other name of each multi-link file in `files`: first in the
/// file's own directory, then in one walk of the whole child that stops
/// once every inode has all its names.
fn other_names(root: &Path, files: &[(PathBuf, Meta)]) -> Result<Vec<PathBuf>, DiffError> {
    let mut want: HashMap<u64, (u64, BTreeSet<PathBuf>)> = HashMap::new();
    for (p, m) in files {
        want.entry(m.ino)
            .or_insert_with(|| (m.nlink, BTreeSet::new()))
            .1
            .insert(p.clone());
    }
    let mut searched: BTreeSet<PathBuf> = BTreeSet::new();
    for (p, _) in files {
        let dir = p.parent().unwrap_or(Path::new("")).to_path_buf();
        if searched.insert(dir.clone()) {
            scan_dir(root, &dir, &mut want, &mut |_| {})?;
        }
    }
    let complete = |want: &HashMap<u64, (u64, BTreeSet<PathBuf>)>| {
        want.values().all(|(n, names)| names.len() as u64 >= *n)
    };
    let mut stack = vec![PathBuf::new()];
    while !complete(&want) {
        let Some(dir) = stack.pop() else { break };
        let skip = searched.contains(&dir);
        let mut subdirs = Vec::new();
        if skip {
            // Its files were searched; only its subdirectories are needed.
            for_each_entry(root, &dir, |name, e| {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    subdirs.push(dir.join(name));
                }
            })?;
        } else {
            scan_dir(root, &dir, &mut want, &mut |d| subdirs.push(d))?;
        }
        stack.extend(subdirs);
    }
    Ok(want.into_values().flat_map(|(_, names)| names).collect())
}

/// Records the names in `dir` whose inode is wanted, and hands each
/// subdirectory to `subdir`. Readdir's inode numbers save a `stat` per
/// entry; a match is confirmed with `lstat`.
fn scan_dir(
    root: &Path,
    dir: &Path,
    want: &mut HashMap<u64, (u64, BTreeSet<PathBuf>)>,
    subdir: &mut dyn FnMut(PathBuf),
) -> Result<(), DiffError> {
    let mut hits = Vec::new();
    for_each_entry(root, dir, |name, e| {
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            subdir(dir.join(name));
        } else if want.contains_key(&e.ino()) {
            hits.push(dir.join(name));
        }
    })?;
    for p in hits {
        let host = root.join(&p);
        let m = meta::lstat(&host)
            .map_err(|e| DiffError::io(format!("cannot lstat {}", host.display()), e))?;
        if let Some((_, names)) = want.get_mut(&m.ino) {
            names.insert(p);
        }
    }
    Ok(())
}

fn for_each_entry(
    root: &Path,
    dir: &Path,
    mut f: impl FnMut(OsString, &std::fs::DirEntry),
) -> Result<(), DiffError> {
    let host = root.join(dir);
    let ctx = || format!("cannot read directory {}", host.display());
    for e in std::fs::read_dir(&host).map_err(|e| DiffError::io(ctx(), e))? {
        let e = e.map_err(|e| DiffError::io(ctx(), e))?;
        f(e.file_name(), &e);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
