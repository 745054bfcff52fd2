//! `jbuild check --deep`: each committed snapshot's layer made again — the
//! snapshotter's differ against its parent, the same tar writer as an
//! export — and its diff ID compared with the snapshot's `jbuild:diffid`
//! label. A difference means the tree changed after its layer was exported
//! (or the label is wrong): the next image built on it would not be what
//! its digests say.
//!
//! Only layers exported here can be made again byte for byte: the export
//! records its mtime clamp (`jbuild:mtimeclamp`) beside the diff ID. Layers
//! unpacked from an image were checked against their digest when unpacked,
//! and another tool's tar cannot be reproduced; they are counted in a note.

use std::collections::HashSet;
use std::io;

use super::{Finding, Report};
use crate::digest::Digest;
use crate::image::layer_changes;
use crate::layer::{self, Compression, TarOptions};
use crate::snapshot::{label, Info, Kind, Snapshotter};

/// What to do about a damaged snapshot.
pub(super) const REMOVE_CACHE: &str = "remove the build cache with `jbuild prune --cache` (layers are built or unpacked again when needed)";

/// Re-diffs every committed snapshot of `all` that records how its layer
/// was exported, except those in `skip` (dead work).
pub fn check(sn: &dyn Snapshotter, all: &[Info], skip: &HashSet<&str>, report: &mut Report) {
    let differ = sn.differ();
    let (mut checked, mut unpacked) = (0, 0);
    for info in all
        .iter()
        .filter(|i| i.kind == Kind::Committed && !skip.contains(i.name.as_str()))
    {
        let Some(Ok(want)) = info.labels.get(label::DIFF_ID).map(|d| d.parse::<Digest>()) else {
            continue;
        };
        let Some(Ok(clamp)) = info
            .labels
            .get(label::MTIME_CLAMP)
            .map(|c| c.parse::<u64>())
        else {
            unpacked += 1;
            continue;
        };
        checked += 1;
        let location = format!("{} snapshot {}", sn.backend(), info.name);
        let made = layer_changes(sn, differ.as_ref(), info.parent.as_deref(), &info.name)
            .map_err(|e| e.to_string())
            .and_then(|made| {
                layer::export_with_flags(
                    &made.root,
                    &made.changes,
                    &TarOptions { clamp_mtime: clamp },
                    Compression::None,
                    &made.flags,
                    io::sink(),
                )
                .map(|(exported, _)| exported.diff_id)
                .map_err(|e| e.to_string())
            });
        match made {
            Ok(got) if got == want => {}
            Ok(got) => report.push(
                Finding::damaged(
                    "content-mismatch",
                    format!(
                        "snapshot `{}` no longer holds its layer: diffing it against {} gives {got}, its label says {want}",
                        info.name,
                        info.parent.as_deref().map_or("nothing".to_string(), |p| format!("`{p}`"))
                    ),
                    location,
                )
                .action(REMOVE_CACHE),
            ),
            Err(e) => report.push(
                Finding::damaged("content-unreadable", format!("snapshot `{}` cannot be diffed: {e}", info.name), location)
                    .action(REMOVE_CACHE),
            ),
        }
    }
    report
        .notes
        .push(format!("--deep: {checked} layers diffed again"));
    if unpacked > 0 {
        report.notes.push(format!(
            "--deep: {unpacked} layers unpacked from images were not diffed again (their blobs were checked against their digests when unpacked)"
        ));
    }
}
