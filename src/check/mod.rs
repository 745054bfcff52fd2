//! `jbuild check`: is everything jbuild has stored sound, and what is left
//! over from interrupted work?
//!
//! # Vocabulary
//!
//! A check produces *findings*, each of one of three severities:
//!
//! - **damaged**: something stored is wrong and the user must act — a blob
//!   whose content no longer matches its digest, a manifest that is missing,
//!   an `index.json` that does not parse, a snapshot whose chain ID label
//!   does not follow from its parent's. Each finding says what is wrong, where
//!   (path, digest, image name, snapshot name) and what to do.
//! - **reclaimable**: nothing is wrong, but space or clutter can be taken
//!   back — leftovers of interrupted work (temporary files, active
//!   snapshots of processes that are gone) and content no image uses
//!   (unreferenced blobs, unpacked layers no image needs).
//! - **pending**: content no image uses *yet*, seen while other jbuild
//!   processes were adding content (a pull names its image only once its
//!   layers are unpacked): it may be theirs, so it is neither damage nor
//!   reclaimable now ([`adding`]).
//!
//! A finding may carry a [`Fix`]: what `jbuild check --repair` does about
//! it ([`repair`]; [`check_and_repair`] checks, repairs and checks again,
//! and says what each action came to as a [`Repaired`]). Repair removes leftovers and unreferenced content and
//! deletes corrupt blob files (so the next pull fetches them again); it
//! never untags an image and never touches the work of a live process.
//!
//! The check itself only reads: whether other jbuild processes are running
//! is learnt by trying their locks without waiting (a lock file that does
//! not exist is nobody's).
//!
//! The parts: [`places`] (jbuild's own directories are real directories,
//! not symlinks out of the root: nothing under one that is not is looked
//! at), [`store`] (layout, index, every blob re-hashed; `images`: everything
//! reachable from the index), [`leftovers`] (temporary files), [`snapshots`]
//! (labels, parents, chain IDs, dead active snapshots, unused layers);
//! [`adding`] tells the last two whether what no image uses may be a
//! running process's.

pub mod adding;
pub mod deep;
pub mod leftovers;
pub mod places;
pub mod repair;
pub mod snapshots;
pub mod store;

mod facts;
mod images;

pub use adding::Adding;
pub use facts::Facts;
pub use repair::Repaired;

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;

use crate::config::Paths;
use crate::digest::Digest;
use crate::snapshot::Snapshotter;
use crate::store::StoreLock;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something stored is wrong; the user must act.
    Damaged,
    /// Left over or unused; `jbuild check --repair` removes it.
    Reclaimable,
    /// Used by no image yet, while other jbuild processes hold the store
    /// lock: it may be theirs (a pull's layers and blobs are named by no
    /// image until the pull names its image). Not reclaimable now:
    /// `--repair` leaves it and `jbuild prune` waits for them.
    Pending,
}

/// What to do about a pending finding.
const PENDING_ACTION: &str =
    "nothing now: other jbuild processes are adding content and it may be theirs \
     (a pull names its image once its layers are in); run `jbuild check` again when they are done";

/// What `--repair` does about a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    /// Delete a blob file whose content is wrong (the images using it must
    /// be pulled or built again).
    DeleteCorruptBlob(Digest),
    /// Unreferenced blobs go through the store's own garbage collector.
    CollectBlob(Digest),
    /// Remove a leftover file or directory tree, if the lock that guards
    /// its kind can be taken (or it is older than
    /// [`crate::store::STALE_TMP`]).
    RemovePath { path: PathBuf, guard: Guard },
    /// Remove a snapshot (dead active work, an unused unpacked layer).
    RemoveSnapshot(String),
    /// Remove labels from a committed snapshot.
    RemoveLabels {
        snapshot: String,
        labels: Vec<String>,
    },
    /// Write the layout's `oci-layout` file, whose content is fixed.
    WriteLayoutFile(PathBuf),
    /// Finish creating a store whose creation was interrupted
    /// ([`crate::store::Store::open`] does).
    FinishStore(PathBuf),
    /// Remove a symlink where jbuild keeps a directory of its own that it
    /// makes again ([`places`]): the link, never what it points to.
    RemoveSymlink(PathBuf),
}

/// Which lock shows that nobody is writing a temporary file right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// The store lock (`store/.jbuild/lock`), held by pulls and imports
    /// while they add blobs.
    Store,
    /// The index lock (`store/.jbuild/index.lock`), held while
    /// `index.json` is rewritten.
    Index,
    /// The `dir` snapshotter's lock, held while a `meta.json` is rewritten.
    DirSnapshots,
    /// No lock: only the file's age tells (release downloads).
    Age,
    /// The file names the process writing it: it is a leftover once that
    /// process is gone.
    Process(i32),
}

/// One thing a check found.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A short stable name for the kind of finding (`corrupt-blob`,
    /// `missing-blob`, `tmp-file`, ...), for scripts and tests.
    pub kind: &'static str,
    /// What is wrong or left over, in plain words.
    pub what: String,
    /// Where: a path, a digest, a snapshot name.
    #[serde(rename = "where")]
    pub location: String,
    /// The images (ref names) this affects, if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// What to do about it.
    pub action: String,
    /// Bytes it takes, where that is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip)]
    pub fix: Option<Fix>,
}

impl Finding {
    pub fn damaged(
        kind: &'static str,
        what: impl Into<String>,
        location: impl Into<String>,
    ) -> Self {
        Finding {
            severity: Severity::Damaged,
            kind,
            what: what.into(),
            location: location.into(),
            images: Vec::new(),
            action: String::new(),
            bytes: None,
            fix: None,
        }
    }

    pub fn reclaimable(
        kind: &'static str,
        what: impl Into<String>,
        location: impl Into<String>,
        fix: Fix,
    ) -> Self {
        Finding {
            severity: Severity::Reclaimable,
            action: "`jbuild check --repair` removes it".into(),
            fix: Some(fix),
            ..Finding::damaged(kind, what, location)
        }
    }

    /// This finding as [`Severity::Pending`] if `adding` (other processes
    /// were adding content when the check looked: [`Adding::now`]). Its fix
    /// stays, for `--repair` to say why it leaves it.
    pub fn pending_if(self, adding: bool) -> Self {
        if !adding {
            return self;
        }
        Finding {
            severity: Severity::Pending,
            action: PENDING_ACTION.into(),
            ..self
        }
    }

    pub fn action(mut self, action: impl Into<String>) -> Self {
        self.action = action.into();
        self
    }

    pub fn fix(mut self, fix: Fix) -> Self {
        self.fix = Some(fix);
        self
    }

    pub fn bytes(mut self, n: u64) -> Self {
        self.bytes = Some(n);
        self
    }

    /// One finding as plain text: a headline, then `where`, `images` and
    /// `do` lines indented under it.
    pub fn to_text(&self) -> String {
        let sev = match self.severity {
            Severity::Damaged => "damaged",
            Severity::Reclaimable => "reclaimable",
            Severity::Pending => "pending",
        };
        let mut s = format!("{sev}: {}\n  where: {}", self.what, self.location);
        if !self.images.is_empty() {
            s.push_str(&format!("\n  images: {}", self.images.join(", ")));
        }
        if !self.action.is_empty() {
            s.push_str(&format!("\n  do: {}", self.action));
        }
        s
    }
}

/// What the store holds, for the summary line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub images: usize,
    pub blobs: usize,
    pub blob_bytes: u64,
    pub snapshots: usize,
}

/// Everything a check found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub summary: Summary,
    pub findings: Vec<Finding>,
    /// Facts worth saying that are neither damage nor reclaimable (other
    /// jbuild processes are running; a part could not be checked because of
    /// damage elsewhere).
    pub notes: Vec<String>,
}

impl Report {
    pub fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }

    pub fn damaged(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Damaged)
    }

    pub fn reclaimable(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Reclaimable)
    }

    pub fn pending(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Pending)
    }

    pub fn is_damaged(&self) -> bool {
        self.damaged().next().is_some()
    }

    /// The last line of the plain output.
    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        let head = format!(
            "store: {} images, {} blobs ({}), {} snapshots",
            s.images,
            s.blobs,
            crate::report::plain::bytes(s.blob_bytes),
            s.snapshots
        );
        let damaged = self.damaged().count();
        let reclaimable = self.reclaimable().count();
        let pending = self.pending().count();
        let busy = format!("{pending} pending (other jbuild processes are adding content)");
        match (damaged, reclaimable, pending) {
            (0, 0, 0) => format!("{head}: all sound"),
            (0, 0, _) => format!("{head}: no damage; {busy}"),
            (0, r, p) => format!(
                "{head}: no damage; {r} reclaimable (`jbuild check --repair` removes {}){}",
                if r == 1 { "it" } else { "them" },
                if p > 0 {
                    format!("; {busy}")
                } else {
                    String::new()
                }
            ),
            (d, r, p) => format!(
                "{head}: {d} damaged, {r} reclaimable{}",
                if p > 0 {
                    format!(", {p} pending")
                } else {
                    String::new()
                }
            ),
        }
    }

    /// The JSON form: `damaged`, `reclaimable` and `pending` arrays of
    /// findings, the summary and the notes.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "sound": !self.is_damaged(),
            "summary": self.summary,
            "damaged": self.damaged().collect::<Vec<_>>(),
            "reclaimable": self.reclaimable().collect::<Vec<_>>(),
            "pending": self.pending().collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }
}

/// What a check looks at.
pub struct Inputs<'a> {
    pub paths: &'a Paths,
    /// The snapshot backend in use; `None` skips the snapshot checks.
    pub snapshotter: Option<&'a dyn Snapshotter>,
    /// This process holds the store lock exclusively (`--repair` does), so
    /// the store's temporary files are nobody else's work.
    pub store_lock_held: bool,
    /// Diff every layer exported here again and compare its diff ID
    /// ([`deep`]; costs a read of every snapshot).
    pub deep: bool,
}

/// Runs every check. Errors are internal faults (a snapshot backend that
/// cannot list); what is wrong with stored data is a finding.
///
/// Damage is judged twice unless this process holds the store lock: other
/// jbuild processes may remove content while the check reads it (`prune`
/// deletes blobs and layers under the store lock, `rmi` untags first), so
/// a blob or layer that disappears between two reads looks missing. The
/// whole check runs again, and only damage seen both times is damage;
/// what the second look no longer finds was gone, and a note says so.
pub fn check(inputs: &Inputs<'_>) -> Result<Report, CheckError> {
    let first = check_once(inputs)?;
    if !first.is_damaged() || inputs.store_lock_held {
        return Ok(first);
    }
    let seen: HashSet<(&str, &str)> = first
        .damaged()
        .map(|f| (f.kind, f.location.as_str()))
        .collect();
    let mut again = check_once(inputs)?;
    let before = again.findings.len();
    again.findings.retain(|f| {
        f.severity != Severity::Damaged || seen.contains(&(f.kind, f.location.as_str()))
    });
    let gone = first
        .damaged()
        .count()
        .saturating_sub(again.damaged().count())
        + before
        - again.findings.len();
    if gone > 0 {
        again.notes.push(format!(
            "{gone} problems seen once were not there when looked at again: content other \
             jbuild processes removed meanwhile (prune), not damage"
        ));
    }
    Ok(again)
}

fn check_once(inputs: &Inputs<'_>) -> Result<Report, CheckError> {
    let mut report = Report::default();
    let strays = places::check(inputs.paths, &mut report);
    let guards = leftovers::FreeGuards::probe(inputs.paths, inputs.store_lock_held);
    let adding = Adding::for_store(&inputs.paths.store(), inputs.store_lock_held);
    let facts = if strays.cover(&inputs.paths.store().join("blobs/sha256")) {
        report
            .notes
            .push("the store is not checked: its blob directory is not a real directory".into());
        Facts::default()
    } else {
        store::check(&inputs.paths.store(), &adding, &mut report)?
    };
    leftovers::check(inputs.paths, &facts, guards, &mut report)?;
    let snapshots_stray = strays.cover(&inputs.paths.dir_snapshots())
        || strays.cover(&inputs.paths.overlay_snapshots());
    if snapshots_stray {
        report
            .notes
            .push("snapshots are not checked: their directory is not a real directory".into());
    }
    if let Some(sn) = inputs.snapshotter.filter(|_| !snapshots_stray) {
        let present: HashSet<Digest> = facts.blobs.keys().cloned().collect();
        snapshots::check(
            sn,
            facts.store.as_ref(),
            facts.walk_complete,
            &adding,
            &present,
            inputs.deep,
            &mut report,
        )?;
    }
    Ok(report)
}

/// Passes of repair: deleting a corrupt manifest can make its layers
/// unreferenced, which the next pass removes.
const MAX_PASSES: usize = 3;

/// `jbuild check --repair`: checks, does what the findings call for
/// ([`repair::repair`]) and checks again, for up to `MAX_PASSES` passes
/// while they make progress. Returns the final check's report and every
/// action of every pass, in order.
///
/// `lock` is the store lock held exclusively, or `None` when other jbuild
/// processes hold it (their work is then left alone); it, not
/// `inputs.store_lock_held`, says whether the lock is held.
pub fn check_and_repair(
    inputs: &Inputs<'_>,
    lock: Option<&StoreLock>,
) -> Result<(Report, Vec<Repaired>), CheckError> {
    let inputs = Inputs {
        store_lock_held: lock.is_some(),
        ..*inputs
    };
    let mut report = check(&inputs)?;
    let mut repaired = Vec::new();
    for _ in 0..MAX_PASSES {
        if report.findings.iter().all(|f| f.fix.is_none()) {
            break;
        }
        let done = repair::repair(&report, inputs.paths, inputs.snapshotter, lock);
        let progress = done.iter().any(Repaired::made_progress);
        repaired.extend(done);
        report = check(&inputs)?;
        if !progress {
            break;
        }
    }
    Ok((report, repaired))
}

/// A failure of the check itself (not of what it checks).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl crate::blame::Blame for CheckError {
    /// A snapshot decides by its own type; a failed read is the system's.
    fn is_user_error(&self) -> bool {
        match self {
            CheckError::Snapshot(e) => e.is_user_error(),
            CheckError::Io { .. } => false,
        }
    }
}

impl CheckError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CheckError::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests;
