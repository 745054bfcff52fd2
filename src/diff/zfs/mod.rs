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
//! `zfs diff` is not always the cheaper way. It pays per directory that
//! holds a change (about 0.09 s each in the emulated guest of
//! `benches/zfs-diff.sh`), the tree walk per entry of the whole tree: one
//! file changed is 70x faster through `zfs diff`, 10% of the files across
//! every directory 5x slower. No cheap estimate sees the cost in advance:
//! the `written` property and file counts miss a *thin but wide* change
//! (one small file in each of 500 directories), and a time budget followed
//! by a fallback loses budget + walk whenever `zfs diff` would have won.
//! So the two [race](super::race): `zfs diff` starts alone with a head
//! start of [`HEAD_START`] — a clustered change (a package, a config edit)
//! is listed within it, with no contention — then the tree walk starts
//! beside it, the first complete list wins and the other is cancelled (the
//! walk checks a flag at every entry; the `zfs diff` child is killed and
//! reaped). A change spread wide thus costs at most the head start plus
//! the contention of the two more than the walk alone — which is small
//! only with a spare core: in the loaded, emulated guest of the bench the
//! two share one core's worth and the race costs up to ~1.9x the faster
//! (benches/README.md). Both give the same
//! list, and [`Differ::changes_named`] names the one that produced it.
//!
//! With no parent (a base layer is all of the child) the tree walk is the
//! only way. When `zfs diff` is missing (zfs-fuse has none), fails, or
//! prints what the parser refuses, the walk starts at once and its answer
//! is used; the differ says so once through `tracing::warn!`.

pub mod parse;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::canonical::read_dir_sorted;
use super::meta::{self, Meta};
use super::race::{race, Cancel, Outcome, Side};
use super::walk::{differs, TreeWalkDiffer};
use super::*;
use parse::{Format, Name};

/// The snapshot of a committed dataset that `zfs diff` compares.
pub const SNAPSHOT: &str = "jbuild";

/// How long `zfs diff` runs alone before the tree walk races it. A change
/// that clusters in a few directories is listed within it (0.3 s for one
/// file in the emulated guest of the benches, far less on hardware), so it
/// pays for `zfs diff` only; past it, a change spread over many
/// directories costs at most this much more than the walk alone.
pub const HEAD_START: Duration = Duration::from_secs(1);

/// How often the thread that owns a `zfs diff` child looks for its end or
/// a cancel.
const POLL: Duration = Duration::from_millis(5);

pub struct ZfsDiffer {
    parent_dataset: String,
    program: PathBuf,
    head_start: Duration,
    warned: AtomicBool,
}

impl ZfsDiffer {
    /// A differ for the snapshots under `parent_dataset` (`P` above).
    pub fn new(parent_dataset: impl Into<String>) -> ZfsDiffer {
        ZfsDiffer {
            parent_dataset: parent_dataset.into(),
            program: PathBuf::from("zfs"),
            head_start: HEAD_START,
            warned: AtomicBool::new(false),
        }
    }

    /// Runs `program` instead of `zfs` from `PATH`.
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> ZfsDiffer {
        self.program = program.into();
        self
    }

    /// How long `zfs diff` runs alone before the tree walk joins the race
    /// ([`HEAD_START`] unless set).
    pub fn with_head_start(mut self, head_start: Duration) -> ZfsDiffer {
        self.head_start = head_start;
        self
    }

    fn snapshot_of(&self, name: &str) -> String {
        format!("{}/{name}@{SNAPSHOT}", self.parent_dataset)
    }

    /// Runs `zfs diff -H -F` and parses it. [`DiffError::Backend`] says why
    /// it could not be used; once `cancel` is set the child is killed and
    /// reaped and the answer is [`DiffError::Cancelled`].
    fn zfs_diff(
        &self,
        parent: SnapshotRef<'_>,
        child: SnapshotRef<'_>,
        cancel: &Cancel,
    ) -> Result<Vec<parse::Record>, DiffError> {
        let (from, to) = (self.snapshot_of(parent.name), self.snapshot_of(child.name));
        let mut proc = Command::new(&self.program)
            .args(["diff", "-H", "-F", &from, &to])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                DiffError::Backend(format!("cannot run `{}`: {e}", self.program.display()))
            })?;
        let (out, err) = (proc.stdout.take(), proc.stderr.take());
        let (status, stdout, stderr) = std::thread::scope(|s| {
            let o = s.spawn(move || read_all(out));
            let e = s.spawn(move || read_all(err));
            // Polled, so the one thread that owns the child both kills and
            // reaps it (no signal can reach a reused pid).
            let status = loop {
                if cancel.is_cancelled() {
                    let _ = proc.kill();
                    let _ = proc.wait();
                    break None;
                }
                match proc.try_wait() {
                    Ok(Some(st)) => break Some(Ok(st)),
                    Ok(None) => std::thread::sleep(POLL),
                    Err(e) => {
                        let _ = proc.kill();
                        let _ = proc.wait();
                        break Some(Err(e));
                    }
                }
            };
            let (stdout, stderr) = (o.join(), e.join());
            (status, stdout, stderr)
        });
        let status = match status {
            None => return Err(DiffError::Cancelled),
            Some(Err(e)) => {
                return Err(DiffError::Backend(format!(
                    "cannot wait for `zfs diff {from} {to}`: {e}"
                )))
            }
            Some(Ok(st)) => st,
        };
        let (stdout, stderr) = (stdout.unwrap_or_default(), stderr.unwrap_or_default());
        if !status.success() {
            let stderr = String::from_utf8_lossy(&stderr);
            return Err(DiffError::Backend(format!(
                "`zfs diff {from} {to}` failed ({status}): {}",
                stderr.trim()
            )));
        }
        parse::parse(&stdout, &Format::jbuild(child.root))
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
    /// The changes as `zfs diff` finds them, with no fallback and no race:
    /// a `zfs diff` that cannot be run, fails, or prints what the parser
    /// refuses is a [`DiffError::Backend`]. Tests and benches call this to
    /// be sure `zfs diff` was used.
    pub fn changes_via_zfs(
        &self,
        parent: SnapshotRef<'_>,
        child: SnapshotRef<'_>,
    ) -> Result<Vec<Change>, DiffError> {
        self.changes_cancellable(parent, child, &Cancel::new())
    }

    /// [`changes_via_zfs`](ZfsDiffer::changes_via_zfs) that stops with
    /// [`DiffError::Cancelled`] soon after `cancel` is set: the `zfs diff`
    /// child is killed and reaped, and judging the candidates checks the
    /// flag at each.
    pub fn changes_cancellable(
        &self,
        parent: SnapshotRef<'_>,
        child: SnapshotRef<'_>,
        cancel: &Cancel,
    ) -> Result<Vec<Change>, DiffError> {
        let records = self.zfs_diff(parent, child, cancel)?;
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
        let (changes, links) = Judge::new(parent.root, child.root).run(candidates, cancel)?;
        canonicalize(changes, Some(parent.root), child.root, Some(&links))
    }

    /// The race of `zfs diff` (with its head start) and the tree walk, and
    /// what became of each side (see [`race`]).
    pub fn race(&self, parent: SnapshotRef<'_>, child: SnapshotRef<'_>) -> Outcome {
        let walk = TreeWalkDiffer::new();
        let zfs = Side::new(self.name(), |cancel: &Cancel| {
            let r = self.changes_cancellable(parent, child, cancel);
            if let Err(e @ DiffError::Backend(_)) = &r {
                self.fall_back(e);
            }
            r
        });
        let tree = Side::new(walk.name(), |cancel: &Cancel| {
            walk.changes_cancellable(Some(parent), child, cancel)
        });
        race(zfs, tree, self.head_start)
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
        self.race(parent, child).result
    }
}

/// All a child's pipe gives until it closes. A read error ends it early;
/// the exit status and the parser judge what was read.
fn read_all(pipe: Option<impl io::Read>) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(mut p) = pipe {
        let _ = p.read_to_end(&mut buf);
    }
    buf
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

    fn run(
        mut self,
        candidates: Vec<PathBuf>,
        cancel: &Cancel,
    ) -> Result<(Vec<Change>, LinkIndex), DiffError> {
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
            cancel.check()?;
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
mod tests {
    use super::*;
    use std::fs;
    use std::process::Command;

    /// A parent tree and a child copied from it and changed.
    fn trees() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let (p, c) = (t.path().join("p"), t.path().join("c"));
        fs::create_dir_all(p.join("etc/sub")).unwrap();
        fs::write(p.join("etc/passwd"), "root").unwrap();
        fs::write(p.join("etc/sub/old"), "old").unwrap();
        fs::write(p.join("a"), "a").unwrap();
        fs::hard_link(p.join("a"), p.join("etc/a-link")).unwrap();
        let st = Command::new("cp")
            .arg("-a")
            .arg(&p)
            .arg(&c)
            .status()
            .unwrap();
        assert!(st.success());
        fs::write(c.join("etc/passwd"), "root:x").unwrap();
        fs::remove_file(c.join("etc/sub/old")).unwrap();
        fs::write(c.join("etc/sub/new file"), "n").unwrap();
        fs::hard_link(c.join("a"), c.join("b")).unwrap();
        (t, p, c)
    }

    fn refs<'a>(p: &'a Path, c: &'a Path) -> (SnapshotRef<'a>, SnapshotRef<'a>) {
        (
            SnapshotRef { name: "p", root: p },
            SnapshotRef { name: "c", root: c },
        )
    }

    #[test]
    fn falls_back_to_the_tree_walk_when_zfs_is_missing_fails_or_garbles() {
        let (_t, p, c) = trees();
        let (pr, cr) = refs(&p, &c);
        let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
        assert!(!walk.is_empty());
        for (program, why) in [
            ("/nonexistent/zfs", "cannot run"),
            ("false", "failed"),
            // `echo diff -H -F ...` is one line the parser refuses.
            ("echo", "unknown change"),
        ] {
            // A long head start: the walk starts only once `zfs diff` failed.
            let d = ZfsDiffer::new("tank/jbuild")
                .with_program(program)
                .with_head_start(Duration::from_secs(600));
            let e = d.changes_via_zfs(pr, cr).unwrap_err().to_string();
            assert!(e.contains(why), "{program}: {e}");
            let out = d.race(pr, cr);
            assert_eq!(
                out.result.unwrap(),
                (walk.clone(), "tree-walk"),
                "{program}"
            );
            let (name, r) = out.other.unwrap();
            assert_eq!(name, "zfs-diff");
            assert!(r.unwrap_err().to_string().contains(why), "{program}");
            assert!(d.warned.load(Ordering::Relaxed));
        }
    }

    /// A fake `zfs` that records its pid, then sleeps for a minute.
    fn sleeping_zfs(dir: &Path) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let (prog, pidfile) = (dir.join("zfs"), dir.join("pid"));
        let script = format!(
            "#!/bin/sh\necho $$ > {0}.tmp && mv {0}.tmp {0}\nexec sleep 60\n",
            pidfile.display()
        );
        fs::write(&prog, script).unwrap();
        fs::set_permissions(&prog, fs::Permissions::from_mode(0o755)).unwrap();
        (prog, pidfile)
    }

    /// The walk wins while `zfs diff` still runs: the child is killed and
    /// reaped before the answer is returned (no process, not even a
    /// zombie, is left with its pid).
    #[test]
    fn a_losing_zfs_diff_is_killed_and_reaped() {
        let (t, p, c) = trees();
        let (pr, cr) = refs(&p, &c);
        let (prog, pidfile) = sleeping_zfs(t.path());
        let d = ZfsDiffer::new("tank/jbuild").with_program(&prog);
        let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
        // The other side answers once the child is surely running.
        let zfs = Side::new("zfs-diff", |cancel: &Cancel| {
            d.changes_cancellable(pr, cr, cancel)
        });
        let fake_walk = Side::new("tree-walk", |_: &Cancel| {
            let end = std::time::Instant::now() + Duration::from_secs(60);
            while !pidfile.exists() && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(walk.clone())
        });
        let out = race(zfs, fake_walk, Duration::ZERO);
        assert_eq!(out.result.unwrap(), (walk.clone(), "tree-walk"));
        let (name, r) = out.other.unwrap();
        assert_eq!(name, "zfs-diff");
        assert!(matches!(r, Err(DiffError::Cancelled)), "{r:?}");
        let pid = fs::read_to_string(&pidfile).unwrap();
        let proc = PathBuf::from(format!("/proc/{}", pid.trim()));
        assert!(
            !proc.exists(),
            "the `zfs diff` child {} is left",
            pid.trim()
        );
        // Through the differ itself: the fake never answers, so the walk's
        // list is the one reported.
        let d = d.with_head_start(Duration::ZERO);
        assert_eq!(d.changes_named(Some(pr), cr).unwrap(), (walk, "tree-walk"));
    }

    #[test]
    fn runs_zfs_diff_on_the_agreed_snapshot_names() {
        let (_t, p, c) = trees();
        let (pr, cr) = refs(&p, &c);
        let e = ZfsDiffer::new("tank/jbuild")
            .with_program("false")
            .changes_via_zfs(pr, cr)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`zfs diff tank/jbuild/p@jbuild tank/jbuild/c@jbuild`"),
            "{e}"
        );
    }

    /// Judging from the root down finds what the tree walk finds. (On
    /// copies every directory is another inode, so every name is looked at;
    /// the qemu lane tests the cheap paths on real clones.)
    #[test]
    fn judging_from_the_root_matches_the_tree_walk() {
        let (_t, p, c) = trees();
        let (pr, cr) = refs(&p, &c);
        let walk = TreeWalkDiffer::new().changes(Some(pr), cr).unwrap();
        let (changes, links) = Judge::new(&p, &c)
            .run(vec![PathBuf::new()], &Cancel::new())
            .unwrap();
        let got = canonicalize(changes, Some(&p), &c, Some(&links)).unwrap();
        assert_eq!(got, walk);
    }

    #[test]
    fn other_names_are_found_in_the_own_directory_then_anywhere() {
        let (_t, _p, c) = trees();
        let m = meta::lstat(&c.join("a")).unwrap();
        let mut names = other_names(&c, &[(PathBuf::from("a"), m)]).unwrap();
        names.sort();
        assert_eq!(names, ["a", "b", "etc/a-link"].map(PathBuf::from));
    }

    #[test]
    fn a_symlinked_ancestor_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("d")).unwrap();
        fs::write(t.path().join("d/f"), "x").unwrap();
        std::os::unix::fs::symlink("d", t.path().join("l")).unwrap();
        let mut tree = Tree::new(t.path());
        assert!(tree.lookup(Path::new("d/f")).unwrap().is_some());
        assert!(tree.lookup(Path::new("l/f")).unwrap().is_none());
    }
}
