//! Applying a layer to a root, as if the layer were hostile.
//!
//! Every entry's path is normalised (`.` dropped, `..` resolved; a path that
//! climbs above the root, or is absolute, is refused with an error naming
//! the entry) and then resolved with [`crate::fsutil::resolve_in_root`]: directories on the
//! way are followed as the jail would see them, never out of the root, and
//! the last component is never followed, so an entry replaces a symlink
//! rather than writing through it.
//!
//! - An entry replaces what is there unless both are directories, which
//!   merge (the directory takes the entry's metadata; its lower content
//!   stays).
//! - Hard links must point at something already in the root (from a lower
//!   layer or earlier in this one), never at a directory.
//! - Whiteouts (`.wh.<name>`) remove `<name>` from the directory they are in;
//!   opaque markers (`.wh..wh..opq`) remove the directory's lower content.
//!   Both act only on what lower layers put there: what this layer wrote
//!   survives (the OCI spec's rule, whatever the order of entries). Other
//!   `.wh..wh.` names (aufs bookkeeping) are ignored.
//! - Setuid and setgid bits on a file are **refused** unless
//!   [`ApplyOptions::allow_setuid`]: silently stripping them would produce a
//!   root that does not match the layer's diff ID and breaks programs in
//!   ways that are hard to trace. (On directories setgid only picks the
//!   group of new files, so it is allowed.) Character and block devices are
//!   refused unless [`ApplyOptions::allow_devices`]; FIFOs are fine.
//! - Owners are set (numerically) only with [`ApplyOptions::same_owner`];
//!   mode after owner (`chown` clears setuid); extended attributes after
//!   that; mtimes last (for directories, after everything under them); and
//!   file flags (`SCHILY.fflags`) at the very end, since `schg` would block
//!   the rest. What is there already is unlocked before it is replaced,
//!   removed or merged into: a file's flags are cleared before it is
//!   unlinked, a directory's before entries are added to it, a lower
//!   file's before a hard link is made to it (and set again after). Flags
//!   are read and set through [`FileFlags`] (the host's by default: on
//!   systems other than FreeBSD, flags in a layer are ignored).
//!
//! Content is streamed; what is kept in memory grows with the number of
//! entries (the set of paths written, and directories whose metadata is
//! set at the end), not with their size.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use super::compress::decompress;
use super::limits::{human, Capped, Limits};
use super::reader::TarReader;
use super::LayerError;
use crate::digest::Digest;
use crate::fsutil::flags::{self, FileFlags};
use crate::pipe::{pipe, PipeReader, PipeWriter};
use sha2::{Digest as _, Sha256};

mod entry;
mod written;

pub(crate) use entry::Applier;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Create character and block devices (otherwise they are refused).
    pub allow_devices: bool,
    /// Keep setuid and setgid bits on files (otherwise they are refused).
    pub allow_setuid: bool,
    /// Set owners from the layer (`lchown`); needs root.
    pub same_owner: bool,
    /// Start writing each file's data to disk as soon as it is written
    /// (Linux: `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not
    /// wait). A root that is synced once it is whole (a snapshot commit)
    /// then finds most of its data on disk already: the disk works while
    /// the rest of the layer is decoded, instead of after it, with the
    /// CPU idle. A large file's writeback starts every 8 MiB. On for a
    /// release set and PKG; off by default, and off for an image's layers
    /// (`image::unpack`), whose filesystem is synced in the background
    /// instead: started file by file, a layer of 50,000 small files was
    /// 50,000 small writes for the disk and a pull 1.5-2x as slow.
    pub start_writeback: bool,
    /// Hash the uncompressed stream for its diff ID ([`ApplyStats::diff_id`]).
    /// On by default; off only where nothing compares it: a release set,
    /// whose snapshot is exported (and hashed) afresh.
    pub diff_id: bool,
}

impl Default for ApplyOptions {
    /// Nothing dangerous allowed; owners set when running as root.
    fn default() -> Self {
        ApplyOptions {
            allow_devices: false,
            allow_setuid: false,
            same_owner: nix::unistd::geteuid().is_root(),
            start_writeback: false,
            diff_id: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyStats {
    /// sha256 of the uncompressed tar stream: compare it with the diff ID
    /// the image config lists. `None` when [`ApplyOptions::diff_id`] is off.
    pub diff_id: Option<Digest>,
    /// Entries applied (whiteouts included, extended headers not).
    pub entries: u64,
    /// Bytes of file content written.
    pub bytes: u64,
}

/// Applies the layer blob `layer` of media type `media_type` (OCI tar,
/// tar+gzip or tar+zstd, or docker's tar.gzip) to the directory `root`,
/// within the default [`Limits`].
pub fn apply<R: Read>(
    layer: R,
    media_type: &str,
    root: &Path,
    opts: &ApplyOptions,
) -> Result<ApplyStats, LayerError> {
    apply_with_limits(layer, media_type, root, opts, &Limits::default())
}

/// [`apply`] within `limits`: a layer that passes one is refused, having
/// written at most `limits.max_size` bytes.
pub fn apply_with_limits<R: Read>(
    layer: R,
    media_type: &str,
    root: &Path,
    opts: &ApplyOptions,
    limits: &Limits,
) -> Result<ApplyStats, LayerError> {
    apply_with_flags(layer, media_type, root, opts, limits, flags::host())
}

/// [`apply_with_limits`], reading and setting file flags through
/// `file_flags` rather than the host's.
pub fn apply_with_flags<R: Read>(
    layer: R,
    media_type: &str,
    root: &Path,
    opts: &ApplyOptions,
    limits: &Limits,
    file_flags: &dyn FileFlags,
) -> Result<ApplyStats, LayerError> {
    let m = fs::symlink_metadata(root).map_err(LayerError::fs("read the metadata of", root))?;
    if !m.is_dir() {
        let e = io::Error::new(
            io::ErrorKind::NotADirectory,
            "the root of a layer must be a directory",
        );
        return Err(LayerError::fs("apply a layer to", root)(e));
    }
    let (capped, tripped) = Capped::new(decompress(media_type, layer)?, limits.max_size);
    // Two threads joined by a bounded pipe, as `gzip -dc | tar -x` are two
    // processes: this one reads, decompresses and hashes; the other
    // extracts. The extraction drops its end on an error, which stops this
    // side at its next write.
    let (tx, rx) = pipe();
    let (extracted, diff_id) = std::thread::scope(|s| {
        let extraction = s.spawn(move || extract(rx, root, opts, limits, file_flags));
        let diff_id = decode(capped, tx, opts.diff_id);
        let extracted = extraction
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (extracted, diff_id)
    });
    match (extracted, diff_id) {
        (Ok((entries, bytes)), Ok(diff_id)) => Ok(ApplyStats {
            diff_id,
            entries,
            bytes,
        }),
        // However the error surfaced (a short read, a truncated entry), it
        // was the cap.
        _ if tripped.get() => Err(LayerError::Limit {
            what: "uncompressed, it is bigger than".into(),
            limit: human(limits.max_size),
            key: "max_size",
        }),
        (Err(e), _) => Err(e),
        // The extraction read the stream to its end, so the decoder
        // finished: it cannot have stopped early.
        (Ok(_), Err(Stopped)) => Err(LayerError::Internal("decompression")),
    }
}

/// The decoder stopped before the end of the stream: the stream failed
/// (the error went down the pipe, where the extraction meets it) or the
/// extraction stopped reading.
struct Stopped;

/// Reads the uncompressed stream into `tx`, hashing it when `hash` is set:
/// its sha256 (the diff ID), or `None` when not asked for.
fn decode(
    mut stream: impl Read,
    mut tx: PipeWriter,
    hash: bool,
) -> Result<Option<Digest>, Stopped> {
    let mut hasher = hash.then(Sha256::new);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Some(h) = &mut hasher {
                    h.update(&buf[..n]);
                }
                // Sent at once: a slow source (a download) gives short
                // reads, and the extraction should not wait for a chunk to
                // fill.
                tx.write_all(&buf[..n])
                    .and_then(|_| tx.flush())
                    .map_err(|_| Stopped)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tx.fail(e);
                return Err(Stopped);
            }
        }
    }
    tx.flush().map_err(|_| Stopped)?;
    Ok(hasher.map(|h| Digest::from_sha(h.finalize().into())))
}

/// Applies the tar stream `stream` to `root`: the entries and the bytes
/// of content written.
fn extract(
    stream: PipeReader,
    root: &Path,
    opts: &ApplyOptions,
    limits: &Limits,
    file_flags: &dyn FileFlags,
) -> Result<(u64, u64), LayerError> {
    let mut tar = TarReader::new(stream).with_max_header(limits.max_header);
    let mut a = Applier::new(root, opts, limits, file_flags);
    while let Some(h) = tar.next()? {
        a.entries += 1;
        a.within_limits(&h)?;
        a.entry(&mut tar, &h)?;
    }
    a.finish()?;
    // The diff ID covers the whole stream, with whatever follows the
    // end-of-archive marker (writers pad to their record size): read to
    // the end, so the decoder hashes it all.
    io::copy(&mut tar.into_inner(), &mut io::sink()).map_err(LayerError::Read)?;
    Ok((a.entries, a.bytes))
}
