//! Checking snapshots, through the [`Snapshotter`] seam (so the same checks
//! run on `dir` and `zfs`).
//!
//! - Labels jbuild writes are well-formed (digests where digests belong).
//! - A committed snapshot's parent exists.
//! - A `chain-<id>` snapshot's `jbuild:chainid` label is `sha256:<id>`, and
//!   any snapshot with `jbuild:diffid` and `jbuild:chainid` has the chain ID
//!   that follows from its parent's chain ID and its own diff ID: a build
//!   trusts these labels to find layers, so a wrong one is damage.
//! - A `jbuild:blob.<compression>` label naming a blob the store no longer
//!   has is stale (reclaimable; a build ignores it and exports again).
//! - Active snapshots whose process (`active-<pid>-<n>`) is gone, and
//!   unpacked layers (`chain-<id>`) no image in the store uses, are
//!   reclaimable — exactly what `jbuild prune` removes
//!   ([`crate::image::gc::dead_active`], [`crate::image::gc::unused_chains`]);
//!   unused layers are pending instead while other jbuild processes are
//!   adding content (a running pull's layers are named by no image until it
//!   names its image: [`super::adding`]).
//! - Jails cloned from snapshots (`jbuild create` on ZFS) are users of
//!   their layers, never leftovers; a jail that no longer stands on the
//!   layer it was cloned from (promoted, or its layer replaced) is damage:
//!   jbuild no longer knows what it holds.
//! - `--deep`: each committed snapshot is diffed against its parent again and
//!   the layer's diff ID compared with its label ([`super::deep`]).

use std::collections::{HashMap, HashSet};
use std::fs;

use super::deep::REMOVE_CACHE;
use super::{Adding, CheckError, Finding, Fix, Report};
use crate::digest::Digest;
use crate::image::gc::{chains_in_use, dead_active, unused_chains};
use crate::image::{next_chain, SnapshotName};
use crate::snapshot::clones::{holders, jails_of};
use crate::snapshot::{label, Flaw, FlawKind, Info, Kind, Snapshotter};
use crate::store::Store;

/// Checks every snapshot. `store` (if there is one) tells which blobs exist
/// and which layers images use; `walk_complete` says whether the store's
/// images could all be read (else unused layers are not counted);
/// `adding` whether unused layers may be a running process's.
pub fn check(
    sn: &dyn Snapshotter,
    store: Option<&Store>,
    walk_complete: bool,
    adding: &Adding,
    blobs: &HashSet<Digest>,
    deep: bool,
    report: &mut Report,
) -> Result<Vec<Info>, CheckError> {
    let (all, flaws) = sn.audit()?;
    report.summary.snapshots = all.len();
    // A snapshot whose record cannot be read has no known parent or
    // labels: it is not judged by them, and nothing is offered for removal
    // while one is (its children and parents cannot be told).
    let unreadable: HashSet<&str> = flaws
        .iter()
        .filter(|f| f.kind == FlawKind::BadMeta)
        .filter_map(|f| f.snapshot.as_deref())
        .collect();
    for f in &flaws {
        report.push(flaw_finding(sn, f));
    }
    let by_name: HashMap<&str, &Info> = all.iter().map(|i| (i.name.as_str(), i)).collect();
    let dead = dead_active(&all);
    let dead_names: HashSet<&str> = dead.iter().map(|i| i.name.as_str()).collect();
    for info in &dead {
        report.push(Finding::reclaimable(
            "dead-active-snapshot",
            format!(
                "snapshot `{}` is unfinished work of a process that is gone",
                info.name
            ),
            format!("{} snapshot {}", sn.backend(), info.name),
            Fix::RemoveSnapshot(info.name.clone()),
        ));
    }
    let live = all
        .iter()
        .filter(|i| i.kind == Kind::Active && !dead_names.contains(i.name.as_str()))
        .count();
    if live > 0 {
        report.notes.push(format!(
            "{live} active snapshots are work in progress of running processes: left alone"
        ));
    }
    for info in all.iter().filter(|i| {
        i.kind == Kind::Committed
            && !dead_names.contains(i.name.as_str())
            && !unreadable.contains(i.name.as_str())
    }) {
        check_one(sn, info, &by_name, blobs, report);
    }
    if deep {
        super::deep::check(sn, &all, &dead_names, report);
    }
    let jails = jails_of(sn)?;
    for j in &jails {
        if j.origin.as_deref() != Some(j.layer.as_str()) {
            report.push(
                Finding::damaged(
                    "jail-origin-gone",
                    format!(
                        "jail `{}` was cloned from layer `{}`, which it no longer stands on{}",
                        j.jail,
                        j.layer,
                        j.origin
                            .as_ref()
                            .map_or(" (was it promoted?)".into(), |o| format!(" (now `{o}`)"))
                    ),
                    format!("{} dataset {}", sn.backend(), j.dataset),
                )
                .action(
                    "the jail works on its own, but rmi and prune no longer protect its layers: \
                     if you promoted it, `zfs promote` the layer's dataset back, or re-create the jail",
                ),
            );
        }
    }
    let held = holders(&jails);
    if !unreadable.is_empty() {
        report
            .notes
            .push("unused layers are not counted while a snapshot's record cannot be read".into());
    }
    if let Some(store) = store.filter(|_| walk_complete && unreadable.is_empty()) {
        // Asked after listing the snapshots and before reading the index
        // that says which layers are used: a pull's pin covers both.
        let pending = adding.now();
        match chains_in_use(store) {
            Ok(mut in_use) => {
                in_use.extend(held.into_keys());
                for info in unused_chains(&all, &in_use) {
                    report.push(
                        Finding::reclaimable(
                            "unused-layer",
                            format!(
                                "unpacked layer `{}` is not used by any image in the store",
                                info.name
                            ),
                            format!("{} snapshot {}", sn.backend(), info.name),
                            Fix::RemoveSnapshot(info.name.clone()),
                        )
                        .pending_if(pending),
                    );
                }
            }
            Err(e) => report.notes.push(format!(
                "unused layers are not counted: cannot tell which layers images use ({e})"
            )),
        }
    }
    Ok(all)
}

/// The finding about a [`Flaw`] the backend found.
fn flaw_finding(sn: &dyn Snapshotter, f: &Flaw) -> Finding {
    let location = f.path.display().to_string();
    match f.kind {
        FlawKind::BadMeta => Finding::damaged("bad-meta", f.what.clone(), location).action(format!(
            "restore {} from a backup, or remove the snapshot's directory (and with              `jbuild prune --cache` the build cache: layers are built or unpacked again)",
            f.path.display()
        )),
        FlawKind::MissingTree => {
            Finding::damaged("missing-tree", f.what.clone(), location).action(REMOVE_CACHE)
        }
        FlawKind::StrayPlace => {
            let (kind, what) = match fs::read_link(&f.path) {
                Ok(target) => (
                    "symlinked-place",
                    format!(
                        "{} is a symlink to {}, where the {} backend keeps a directory of its own:                          nothing is read, written or removed through it",
                        f.path.display(),
                        target.display(),
                        sn.backend()
                    ),
                ),
                Err(_) => ("not-a-directory", f.what.clone()),
            };
            let action = match &f.snapshot {
                Some(_) => format!(
                    "{REMOVE_CACHE}; the symlink is removed, never what it points to"
                ),
                None => "put the directory itself there: remove the symlink and move what it                          points to in its place"
                    .into(),
            };
            Finding::damaged(kind, what, location).action(action)
        }
    }
}

fn check_one(
    sn: &dyn Snapshotter,
    info: &Info,
    by_name: &HashMap<&str, &Info>,
    blobs: &HashSet<Digest>,
    report: &mut Report,
) {
    let location = format!("{} snapshot {}", sn.backend(), info.name);
    let damaged = |report: &mut Report, kind, what: String| {
        report.push(Finding::damaged(kind, what, location.clone()).action(REMOVE_CACHE));
    };
    // A malformed one is a `bad-label` finding of its own, made below.
    let digest_label = |name: &str| info.labels.get(name).map(|v| v.parse::<Digest>());
    let mut stale = Vec::new();
    for (k, v) in &info.labels {
        let is_digest = k == label::KEY
            || k == label::DIFF_ID
            || k == label::CHAIN_ID
            || k.starts_with(label::BLOB_PREFIX);
        if is_digest {
            match v.parse::<Digest>() {
                Err(_) => damaged(
                    report,
                    "bad-label",
                    format!(
                        "snapshot `{}` has label {k}=`{v}`, which is not a sha256 digest",
                        info.name
                    ),
                ),
                Ok(d) if k.starts_with(label::BLOB_PREFIX) && !blobs.contains(&d) => {
                    stale.push(k.clone())
                }
                Ok(_) => {}
            }
        } else if (k == label::CREATED || k == label::MTIME_CLAMP) && v.parse::<u64>().is_err() {
            damaged(
                report,
                "bad-label",
                format!(
                    "snapshot `{}` has label {k}=`{v}`, which is not a time in seconds",
                    info.name
                ),
            );
        }
    }
    if !stale.is_empty() {
        report.push(Finding::reclaimable(
            "stale-label",
            format!("snapshot `{}` records a layer blob the store no longer has ({}); builds export the layer again", info.name, stale.join(", ")),
            location.clone(),
            Fix::RemoveLabels { snapshot: info.name.clone(), labels: stale },
        ));
    }
    let parent = match &info.parent {
        Some(p) => match by_name.get(p.as_str()) {
            Some(p) => Some(*p),
            None => {
                damaged(
                    report,
                    "missing-parent",
                    format!(
                        "snapshot `{}` was made from `{p}`, which no longer exists",
                        info.name
                    ),
                );
                return;
            }
        },
        None => None,
    };
    let chain = digest_label(label::CHAIN_ID);
    if let Some(SnapshotName::Chain(hex)) = SnapshotName::parse(&info.name) {
        match &chain {
            Some(Ok(c)) if c.hex() == hex => {}
            Some(Ok(c)) => damaged(
                report,
                "chain-mismatch",
                format!(
                    "snapshot `{}` is labelled with chain ID {c}, not the one its name says",
                    info.name
                ),
            ),
            None => damaged(
                report,
                "chain-mismatch",
                format!("snapshot `{}` has no {} label", info.name, label::CHAIN_ID),
            ),
            Some(Err(_)) => {}
        }
    }
    let (Some(Ok(chain)), Some(Ok(diff_id))) = (chain, digest_label(label::DIFF_ID)) else {
        return;
    };
    let clamp = |i: &Info| i.labels.get(label::MTIME_CLAMP).cloned();
    let parent_chain = match parent {
        None => None,
        // A parent exported since under another clamp (a build with
        // another SOURCE_DATE_EPOCH) is labelled with the chain of that
        // clamp's layers, not the one this layer was exported on.
        Some(p) if clamp(p).is_some() && clamp(info).is_some() && clamp(p) != clamp(info) => return,
        Some(p) => match p.labels.get(label::CHAIN_ID).map(|c| c.parse::<Digest>()) {
            Some(Ok(c)) => Some(c),
            // Without the parent's chain ID there is nothing to compare with.
            _ => return,
        },
    };
    let expected = next_chain(parent_chain.as_ref(), &diff_id);
    if expected != chain {
        damaged(
            report,
            "chain-mismatch",
            format!(
                "snapshot `{}` is labelled with chain ID {chain}, but its diff ID {diff_id} on top of {} gives {expected}",
                info.name,
                parent.map_or("nothing".to_string(), |p| format!("`{}`", p.name))
            ),
        );
    }
}
