//! Writing a staged OCI layout as an archive, as one stream: each entry's
//! header, then its content, never going back. So the same code writes a
//! file (a temporary one, fsynced and renamed over the destination), a
//! FIFO or device in place, and standard output (a pipe, or whatever the
//! shell made of it): `fsutil::output` decides which.
//!
//! The tar is jbuild's own ([`header::encode`]) and deterministic: sorted
//! entries, owner 0, modes 0755/0644, mtime 0; the same image gives the
//! same archive bytes.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::layer::header::{self, Entry, BLOCK};

use super::super::TransportError;

/// The entries of the layout at `layout`, in archive order: a path in the
/// archive and the file it comes from (`None` for a directory).
fn entries(layout: &Path) -> Result<Vec<(String, Option<PathBuf>)>, TransportError> {
    let blobs = layout.join("blobs/sha256");
    let read_err = |e| TransportError::io(format!("cannot read {}", blobs.display()), e);
    let mut names: Vec<String> = Vec::new();
    for entry in fs::read_dir(&blobs).map_err(read_err)? {
        names.push(
            entry
                .map_err(read_err)?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    names.sort();
    // Byte order of the paths in the archive.
    let mut entries: Vec<(String, Option<PathBuf>)> =
        vec![("blobs/".into(), None), ("blobs/sha256/".into(), None)];
    entries.extend(
        names
            .iter()
            .map(|n| (format!("blobs/sha256/{n}"), Some(blobs.join(n)))),
    );
    entries.push(("index.json".into(), Some(layout.join("index.json"))));
    entries.push(("oci-layout".into(), Some(layout.join("oci-layout"))));
    Ok(entries)
}

/// Writes the layout at `layout` to `out` as a tar stream.
pub(super) fn write_tar(layout: &Path, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
    let entries = entries(layout).map_err(io::Error::other)?;
    let mut head = Vec::with_capacity(2 * BLOCK);
    for (name, source) in &entries {
        head.clear();
        let file = match source {
            None => {
                header::encode(
                    &Entry {
                        path: name.as_bytes(),
                        typeflag: header::DIRECTORY,
                        mode: 0o755,
                        ..Entry::default()
                    },
                    &mut head,
                );
                None
            }
            Some(path) => {
                let file = File::open(path)?;
                let size = file.metadata()?.len();
                header::encode(
                    &Entry {
                        path: name.as_bytes(),
                        typeflag: header::REGULAR,
                        mode: 0o644,
                        size,
                        ..Entry::default()
                    },
                    &mut head,
                );
                Some((file, size))
            }
        };
        out.write_all(&head)?;
        if let Some((file, size)) = file {
            // Exactly the size the header promised, even if the file grew.
            let copied = io::copy(&mut file.take(size), out)?;
            if copied != size {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{name} shrank while it was being written"),
                ));
            }
            out.write_all(&[0u8; BLOCK][..header::padding(size)])?;
        }
    }
    out.write_all(&[0u8; 2 * BLOCK])?;
    out.flush()
}
