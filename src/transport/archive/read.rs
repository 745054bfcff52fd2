//! Reading an OCI archive as it comes: from a file or from a pipe.
//!
//! A pipe cannot be read twice nor sought in, and an archive's entries come
//! in any order (`index.json` may come after the blobs it names), so every
//! entry is written to a staging directory as it is read, and the layout
//! there is resolved only once the archive has ended. The archive is
//! hostile input, read with jbuild's own tar reader ([`TarReader`]) under
//! the same [`Limits`] as a layer:
//!
//! - memory: only an extended header (PAX records, a GNU long name) is
//!   held, and one of more than `max_header` bytes (1 MiB) is refused
//!   before a byte of it is read; content is streamed to the staging
//!   directory through a 64 KiB buffer. So a 300 MiB long name costs
//!   nothing to refuse;
//! - disk: the whole stream is counted as it is read and refused past
//!   `max_size` (8 GiB), so staging never holds more than that;
//! - entries: at most `max_entries`, each path at most `max_path` bytes;
//! - names: only `oci-layout`, `index.json`, `blobs/sha256/<64 hex digits>`
//!   (regular files) and the directories `blobs/`, `blobs/sha256/` (and
//!   `./`) are accepted, each at most once. Anything else is refused, not
//!   skipped: a link, a device, `..`, an absolute path, a blob of another
//!   algorithm, a `manifest.json` (a docker archive is not an OCI archive);
//! - content: a blob must hash to its name as it is written; `index.json`
//!   and `oci-layout` are documents of at most 4 MiB;
//! - the graph: once the archive has ended, `index.json` must parse as an
//!   OCI index (its descriptors name digests, never paths, so nothing can
//!   point outside), and every blob its images need must be staged —
//!   walked from `index.json` through indexes and manifests within the
//!   bounds of one image from outside (`image::walk::Bounds::image`) —
//!   before anything is copied, so a refused archive brings nothing to
//!   the store.
//!
//! After the end-of-archive marker the rest of the stream is read and
//! dropped (still counted), so a writer padding to a record size is not
//! killed by a closed pipe.

use std::cell::Cell;
use std::fs::{self, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use crate::digest::{Digest, HashingWriter};
use crate::image::walk::{Bounds, Role, Walk, WalkError};
use crate::image::{Document, MAX_DOCUMENT};
use crate::layer::limits::{human, Capped};
use crate::layer::{header, LayerError, Limits, TarReader};
use oci_spec::image::Descriptor;

use super::super::TransportError;

/// Why an archive's bytes are refused.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("it is not a tar archive jbuild can read (at byte {offset}): {reason}")]
    Malformed { offset: u64, reason: String },
    #[error("it ends early: {0}")]
    Truncated(String),
    #[error("it is larger than the {} jbuild reads (`max_size` under [layers])", human(*.max))]
    TooLarge { max: u64 },
    #[error("it has more than {max} entries (`max_entries` under [layers])")]
    TooManyEntries { max: u64 },
    #[error("entry `{entry}` {reason}")]
    Entry { entry: String, reason: String },
    #[error("blob `{name}` holds other bytes than its name says ({actual})")]
    Digest { name: String, actual: Digest },
    #[error("it has no {0}; an OCI archive has oci-layout, index.json and blobs/")]
    Missing(&'static str),
    #[error("it lacks blob {0}, which its images need")]
    MissingBlob(Digest),
    #[error("its document {digest} cannot be read: {reason}")]
    Document { digest: Digest, reason: String },
    #[error("its images are not a graph jbuild reads")]
    Graph(#[source] WalkError),
    #[error("its index.json is not an OCI image index")]
    Index(#[source] serde_json::Error),
}

impl crate::blame::Blame for ArchiveError {
    /// The archive the user gave.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A path for a message: at most 100 bytes of it.
fn shown(path: &[u8]) -> String {
    let cut = &path[..path.len().min(100)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if path.len() > cut.len() {
        s.push_str(&format!("… ({} bytes)", path.len()));
    }
    s
}

/// What one accepted entry is.
#[derive(Debug, PartialEq)]
enum Slot {
    Dir,
    Document(&'static str),
    Blob(String),
}

/// The slot of `path` (a leading `./` dropped), or why it is refused.
fn slot(path: &[u8], typeflag: u8) -> Result<Slot, &'static str> {
    let mut p = path;
    while let Some(rest) = p.strip_prefix(b"./") {
        p = rest;
    }
    let dir = typeflag == header::DIRECTORY;
    let trimmed = p.strip_suffix(b"/").unwrap_or(p);
    let is_regular = typeflag == header::REGULAR;
    match trimmed {
        b"" | b"." | b"blobs" | b"blobs/sha256" if dir => return Ok(Slot::Dir),
        b"oci-layout" if is_regular => return Ok(Slot::Document("oci-layout")),
        b"index.json" if is_regular => return Ok(Slot::Document("index.json")),
        _ => {}
    }
    if !is_regular && !dir {
        return Err(match typeflag {
            header::SYMLINK => {
                "is a symbolic link; an OCI archive holds only files and directories"
            }
            header::HARD_LINK => "is a hard link; an OCI archive holds only files and directories",
            _ => "is neither a file nor a directory; an OCI archive holds only those",
        });
    }
    if let Some(hex) = p.strip_prefix(b"blobs/sha256/") {
        let ok = hex.len() == 64 && hex.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
        if ok && is_regular {
            return Ok(Slot::Blob(String::from_utf8_lossy(hex).into_owned()));
        }
    }
    Err(if p.starts_with(b"/") {
        "is an absolute path"
    } else if p.split(|&c| c == b'/').any(|c| c == b"..") {
        "leaves the archive (`..`)"
    } else {
        "is not part of an OCI layout: only oci-layout, index.json and \
         blobs/sha256/<64 hex digits> are accepted"
    })
}

/// Reads the archive in `input` into `into` (an empty directory), which
/// then holds an OCI layout whose blobs match their names.
pub(super) fn extract(
    input: impl Read,
    into: &Path,
    location: &str,
    limits: &Limits,
) -> Result<(), TransportError> {
    let (capped, tripped) = Capped::new(BufReader::with_capacity(64 << 10, input), limits.max_size);
    let mut tar = TarReader::new(capped).with_max_header(limits.max_header);
    let refused = |source: ArchiveError| TransportError::Archive {
        location: location.to_string(),
        source,
    };
    let from_tar = |e: LayerError, tripped: &Rc<Cell<bool>>| -> TransportError {
        if tripped.get() {
            return refused(ArchiveError::TooLarge {
                max: limits.max_size,
            });
        }
        match e {
            LayerError::Malformed { offset, reason } => {
                refused(ArchiveError::Malformed { offset, reason })
            }
            LayerError::Truncated(at) => refused(ArchiveError::Truncated(at)),
            LayerError::Entry { entry, problem } => refused(ArchiveError::Entry {
                entry: shown(entry.as_bytes()),
                reason: problem.to_string(),
            }),
            LayerError::Read(e) => TransportError::io(format!("cannot read {location}"), e),
            other => TransportError::io(
                format!("cannot read {location}"),
                io::Error::other(other.to_string()),
            ),
        }
    };
    let blobs = into.join("blobs/sha256");
    fs::create_dir_all(&blobs)
        .map_err(|e| TransportError::io(format!("cannot create {}", blobs.display()), e))?;
    let mut entries = 0u64;
    while let Some(h) = tar.next().map_err(|e| from_tar(e, &tripped))? {
        entries += 1;
        if entries > limits.max_entries {
            return Err(refused(ArchiveError::TooManyEntries {
                max: limits.max_entries,
            }));
        }
        let entry_err = |reason: String| {
            refused(ArchiveError::Entry {
                entry: shown(&h.path),
                reason,
            })
        };
        if h.path.len() > limits.max_path {
            return Err(entry_err(format!(
                "has a path longer than {} bytes (`max_path` under [layers])",
                limits.max_path
            )));
        }
        let kind = slot(&h.path, h.typeflag).map_err(|r| entry_err(r.into()))?;
        let dest = match &kind {
            Slot::Dir => continue,
            Slot::Document(name) => {
                if h.size > MAX_DOCUMENT {
                    return Err(entry_err(format!(
                        "is {} bytes; a document may have at most {}",
                        h.size,
                        human(MAX_DOCUMENT)
                    )));
                }
                into.join(name)
            }
            Slot::Blob(hex) => blobs.join(hex),
        };
        let write_err = |e: io::Error| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                return entry_err("appears twice".into());
            }
            TransportError::io(format!("cannot write {}", dest.display()), e)
        };
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dest)
            .map_err(write_err)?;
        let mut out = HashingWriter::new(file);
        if let Err(e) = io::copy(&mut tar.content(), &mut out) {
            // A read error and a write error look alike here: the limit, a
            // short stream, and the disk are told apart in this order.
            let path = h.path.clone();
            let layer = tar.truncated(e, &path);
            return Err(match layer {
                LayerError::Read(e) if !tripped.get() => write_err(e),
                other => from_tar(other, &tripped),
            });
        }
        let (digest, _, _) = out.finish();
        if let Slot::Blob(hex) = kind {
            if digest.hex() != hex {
                return Err(refused(ArchiveError::Digest {
                    name: hex,
                    actual: digest,
                }));
            }
        }
    }
    // Whatever follows the end-of-archive marker (record padding), counted.
    let mut rest = tar.into_inner();
    if let Err(e) = io::copy(&mut rest, &mut io::sink()) {
        return Err(if tripped.get() {
            refused(ArchiveError::TooLarge {
                max: limits.max_size,
            })
        } else {
            TransportError::io(format!("cannot read {location}"), e)
        });
    }
    // What the layout reader trusts in a store of its own: refused here as
    // the archive's fault. Descriptors name digests, never paths.
    for name in ["oci-layout", "index.json"] {
        if !into.join(name).exists() {
            return Err(refused(ArchiveError::Missing(name)));
        }
    }
    let index = fs::read(into.join("index.json"))
        .map_err(|e| TransportError::io("cannot read the staged index.json", e))?;
    let index = serde_json::from_slice::<oci_spec::image::ImageIndex>(&index)
        .map_err(|e| refused(ArchiveError::Index(e)))?;
    complete(&blobs, index.manifests().clone()).map_err(refused)
}

/// Whether every blob the images of `index.json` need is staged in
/// `blobs`, walking the graph within [`Bounds::image`]: a copy that finds
/// one missing half-way has already brought others to its destination.
/// A `subject` may be elsewhere (a referrer names the image it is about).
fn complete(blobs: &Path, roots: Vec<Descriptor>) -> Result<(), ArchiveError> {
    let mut walk = Walk::new(roots, Bounds::image()).map_err(ArchiveError::Graph)?;
    while let Some(node) = walk.next_node().map_err(ArchiveError::Graph)? {
        let path = blobs.join(node.digest.hex());
        let Ok(meta) = fs::metadata(&path) else {
            if node.role == Role::Subject {
                walk.leave(&node);
                continue;
            }
            return Err(ArchiveError::MissingBlob(node.digest));
        };
        if !node.is_document() {
            continue;
        }
        if meta.len() > MAX_DOCUMENT {
            return Err(ArchiveError::Document {
                digest: node.digest,
                reason: format!(
                    "it is {} bytes, more than {}",
                    meta.len(),
                    human(MAX_DOCUMENT)
                ),
            });
        }
        let bytes = fs::read(&path).map_err(|e| ArchiveError::Document {
            digest: node.digest.clone(),
            reason: e.to_string(),
        })?;
        let doc = Document::parse(&node.desc, &bytes).map_err(|e| ArchiveError::Document {
            digest: node.digest.clone(),
            reason: e.to_string(),
        })?;
        walk.expand(&node, &doc).map_err(ArchiveError::Graph)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_layout_names_are_accepted() {
        let hex = "a".repeat(64);
        let blob = format!("blobs/sha256/{hex}");
        assert_eq!(
            slot(blob.as_bytes(), header::REGULAR),
            Ok(Slot::Blob(hex.clone()))
        );
        let dotted = format!("./{blob}");
        assert_eq!(
            slot(dotted.as_bytes(), header::REGULAR),
            Ok(Slot::Blob(hex))
        );
        assert_eq!(slot(b"./", header::DIRECTORY), Ok(Slot::Dir));
        assert_eq!(slot(b"blobs/sha256/", header::DIRECTORY), Ok(Slot::Dir));
        assert_eq!(
            slot(b"index.json", header::REGULAR),
            Ok(Slot::Document("index.json"))
        );
        for (path, kind) in [
            (&b"blobs/sha256/../../x"[..], header::REGULAR),
            (b"/etc/passwd", header::REGULAR),
            (b"manifest.json", header::REGULAR),
            (b"index.json", header::SYMLINK),
            (b"blobs/sha256/ABC", header::REGULAR),
            (blob_upper().as_bytes(), header::REGULAR),
            (b"blobs/sha512/aa", header::REGULAR),
            (b"blobs", header::REGULAR),
        ] {
            assert!(slot(path, kind).is_err(), "{}", shown(path));
        }
    }

    fn blob_upper() -> String {
        format!("blobs/sha256/{}", "A".repeat(64))
    }
}
