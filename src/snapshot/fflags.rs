//! A snapshot's FreeBSD file flags on a host without `chflags(2)`.
//!
//! On FreeBSD a file's flags are on the file, and [`HostFlags`] reads and
//! sets them. On Linux they cannot be, so a build step's root gets a
//! [`Sidecar`] instead ([`fsutil::flags::sidecar`](crate::fsutil::flags::sidecar)),
//! and the snapshot owns its table: it is stored in the snapshot's own
//! labels when the step commits (`jbuild:fflags`, then the text in
//! chunks `jbuild:fflags.0`, `.1`, … of at most [`CHUNK`] bytes, which
//! the oldest ZFS here, zfs-fuse, still takes as one user property), so
//! it is there on `dir`, `overlay` and ZFS alike, travels with the
//! snapshot, and goes when the snapshot is removed. The layer writer
//! reads it back when it exports the snapshot (`image::export`), so the
//! flags reach the layer as `SCHILY.fflags` exactly as on FreeBSD, and
//! `jbuild check --deep` exports with the same table.
//!
//! A step's table starts as its parent's (a file keeps its flags in every
//! layer above the one that set them) and is written without the paths
//! the step removed.
//!
//! How a build uses it, around one step:
//!
//! ```text
//! let root = snapshotter.prepare(&active, parent)?;
//! let flags = SnapshotFlags::for_step(snapshotter, parent, &root)?;   // the step's FileFlags
//! run the step, giving `&flags` wherever flags are set (the package installer)
//! labels.extend(flags.labels()?);                                  // kept with the snapshot
//! snapshotter.commit(&name, &active, &labels)?;
//! ```

use std::path::Path;

use super::{Labels, Result, SnapshotError, Snapshotter};
use crate::fsutil::flags::sidecar::{Sidecar, SidecarError};
use crate::fsutil::flags::{FileFlags, HostFlags};

/// The label that says the snapshot has kept flags: `1 N`, format 1 in
/// `N` chunks.
pub const LABEL: &str = "jbuild:fflags";

/// The longest chunk label value, in bytes.
pub const CHUNK: usize = 960;

/// Whether this host keeps flags beside the tree (it has no `chflags(2)`).
pub const KEPT_BESIDE: bool = !cfg!(target_os = "freebsd");

/// The name of chunk `i` of the table.
fn chunk_label(i: usize) -> String {
    format!("{LABEL}.{i}")
}

/// The file flags of one snapshot's tree: the host's, or a table the
/// snapshot keeps in its labels (see the module docs).
#[derive(Debug)]
pub enum SnapshotFlags {
    Host(HostFlags),
    Kept(Sidecar),
}

impl SnapshotFlags {
    /// The flags of a step's root, `root`, just prepared from `parent`:
    /// the parent's table, to be filled by the step.
    pub fn for_step(
        snapshotter: &dyn Snapshotter,
        parent: Option<&str>,
        root: &Path,
    ) -> Result<SnapshotFlags> {
        let labels = match parent {
            Some(p) if KEPT_BESIDE => {
                snapshotter
                    .stat(p)?
                    .ok_or_else(|| SnapshotError::NotFound(p.to_string()))?
                    .labels
            }
            _ => Labels::new(),
        };
        SnapshotFlags::of(&labels, root)
    }

    /// The flags of the committed snapshot whose tree is `root` and whose
    /// labels are `labels`: what its layer is written with.
    pub fn of(labels: &Labels, root: &Path) -> Result<SnapshotFlags> {
        if !KEPT_BESIDE {
            return Ok(SnapshotFlags::Host(HostFlags));
        }
        let text = read_chunks(labels).map_err(|why| {
            SnapshotError::Backend(format!(
                "the file flags kept for {} are damaged ({why}); run `jbuild check`",
                root.display()
            ))
        })?;
        Ok(SnapshotFlags::Kept(
            Sidecar::from_text(root, &text).map_err(from_sidecar)?,
        ))
    }

    /// The labels that keep this table with the snapshot (none on FreeBSD,
    /// or when no path has flags).
    pub fn labels(&self) -> Result<Labels> {
        let SnapshotFlags::Kept(table) = self else {
            return Ok(Labels::new());
        };
        let text = table.to_text().map_err(from_sidecar)?;
        let mut labels = Labels::new();
        if text.is_empty() {
            return Ok(labels);
        }
        // The text is ASCII, so any byte is a place to cut.
        let chunks: Vec<&str> = text
            .as_bytes()
            .chunks(CHUNK)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        labels.insert(LABEL.into(), format!("1 {}", chunks.len()));
        for (i, c) in chunks.iter().enumerate() {
            labels.insert(chunk_label(i), (*c).to_string());
        }
        Ok(labels)
    }
}

impl FileFlags for SnapshotFlags {
    fn get(&self, path: &Path, seen: u32) -> std::io::Result<u32> {
        match self {
            SnapshotFlags::Host(h) => h.get(path, seen),
            SnapshotFlags::Kept(t) => t.get(path, seen),
        }
    }

    fn set(&self, path: &Path, flags: u32) -> std::io::Result<()> {
        match self {
            SnapshotFlags::Host(h) => h.set(path, flags),
            SnapshotFlags::Kept(t) => t.set(path, flags),
        }
    }
}

/// The table's text from `labels` (empty without [`LABEL`]).
fn read_chunks(labels: &Labels) -> std::result::Result<String, &'static str> {
    let Some(head) = labels.get(LABEL) else {
        return Ok(String::new());
    };
    let count = match head.split_once(' ') {
        Some(("1", n)) => n.parse::<usize>().map_err(|_| "a bad chunk count")?,
        _ => return Err("an unknown format"),
    };
    if count > crate::fsutil::flags::sidecar::MAX_TEXT.div_ceil(CHUNK) {
        return Err("more chunks than jbuild writes");
    }
    let mut text = String::new();
    for i in 0..count {
        text.push_str(labels.get(&chunk_label(i)).ok_or("a chunk is missing")?);
    }
    Ok(text)
}

fn from_sidecar(e: SidecarError) -> SnapshotError {
    match e {
        SidecarError::TooMany { .. } => SnapshotError::Unsupported(e.to_string()),
        SidecarError::Io { path, source } => {
            SnapshotError::io(format!("cannot look at {}", path.display()), source)
        }
        SidecarError::Damaged { .. } => SnapshotError::Backend(e.to_string()),
    }
}

#[cfg(all(test, not(target_os = "freebsd")))]
mod tests {
    use super::*;

    #[test]
    fn a_table_goes_into_chunked_labels_and_back() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let flags = SnapshotFlags::of(&Labels::new(), root).unwrap();
        assert!(flags.labels().unwrap().is_empty(), "no flags, no labels");
        for i in 0..60 {
            let p = root.join(format!(
                "a-rather-long-file-name-so-that-chunks-fill-{i:03}"
            ));
            std::fs::write(&p, "").unwrap();
            flags.set(&p, 0x2_0000 | i).unwrap();
        }
        let labels = flags.labels().unwrap();
        assert!(labels.len() > 3, "{labels:?}");
        assert!(labels.values().all(|v| v.len() <= CHUNK));
        let back = SnapshotFlags::of(&labels, root).unwrap();
        let p = root.join("a-rather-long-file-name-so-that-chunks-fill-059");
        assert_eq!(back.get(&p, 0).unwrap(), 0x2_0000 | 59);
        assert_eq!(back.labels().unwrap(), labels);

        let mut missing = labels.clone();
        missing.remove(&chunk_label(1));
        let e = SnapshotFlags::of(&missing, root).unwrap_err().to_string();
        assert!(e.contains("a chunk is missing"), "{e}");
    }
}
