//! Compression, and the export pipeline that hashes and compresses the tar
//! stream as it is written.
//!
//! On two cores, writing the tar (file reads), hashing it and compressing it
//! one after the other leaves a core idle. So [`export`] runs two threads
//! joined by a bounded queue of 1 MiB buffers: the caller's thread writes the
//! tar and hashes it (diff ID); a second thread compresses and hashes the
//! compressed bytes (digest) as they reach `out`. Both compressors add their
//! own workers, one per core: zstd's, and gzip's blocks ([`super::pgzip`]).
//! An uncompressed layer is hashed once, on the second thread.
//! At most a few buffers are in flight, so memory stays bounded whatever the
//! layer's size.
//!
//! Both compressors are deterministic: gzip with no file name, mtime 0 and
//! OS byte 255 ("unknown"), its blocks' bytes independent of the number of
//! workers; zstd with at least one worker always, because
//! zstd's multi-threaded output depends on its job size, never on the number
//! of workers, but differs from its single-threaded output.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread;

use flate2::read::MultiGzDecoder;

use super::pgzip::ParallelGz;
use super::tar::{write_tar_with_flags, CHUNK};
use super::{Compression, ExportedLayer, LayerError, TarOptions};
use crate::diff::Change;
use crate::digest::HashingWriter;
use crate::fsutil::flags::{self, FileFlags};

const GZIP_LEVEL: u32 = 6;
const ZSTD_LEVEL: i32 = 3;
/// Buffers queued between the tar thread and the compressing thread.
const QUEUE: usize = 4;

/// Writes the layer for `changes` from `root` to `out`, compressed, and
/// returns its digests, size and media type with `out`. The compressor uses
/// as many workers as there are cores (which does not change its output).
pub fn export<W: Write + Send>(
    root: &Path,
    changes: &[Change],
    opts: &TarOptions,
    compression: Compression,
    out: W,
) -> Result<(ExportedLayer, W), LayerError> {
    export_with_flags(root, changes, opts, compression, flags::host(), out)
}

/// [`export`], reading file flags through `file_flags` (a snapshot's
/// own, `snapshot::fflags`) rather than the host's.
pub fn export_with_flags<W: Write + Send>(
    root: &Path,
    changes: &[Change],
    opts: &TarOptions,
    compression: Compression,
    file_flags: &dyn FileFlags,
    out: W,
) -> Result<(ExportedLayer, W), LayerError> {
    let workers = thread::available_parallelism().map_or(1, |n| n.get() as u32);
    export_inner(root, changes, opts, compression, workers, file_flags, out)
}

/// [`export`] with a chosen number of compression workers (at least 1 is used).
pub fn export_with_workers<W: Write + Send>(
    root: &Path,
    changes: &[Change],
    opts: &TarOptions,
    compression: Compression,
    workers: u32,
    out: W,
) -> Result<(ExportedLayer, W), LayerError> {
    export_inner(
        root,
        changes,
        opts,
        compression,
        workers,
        flags::host(),
        out,
    )
}

fn export_inner<W: Write + Send>(
    root: &Path,
    changes: &[Change],
    opts: &TarOptions,
    compression: Compression,
    workers: u32,
    file_flags: &dyn FileFlags,
    out: W,
) -> Result<(ExportedLayer, W), LayerError> {
    let media_type = compression.media_type();
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUE);
    let (recycle_tx, recycle_rx) = mpsc::channel::<Vec<u8>>();
    thread::scope(|s| {
        let compressor = s.spawn(move || compress(rx, recycle_tx, compression, workers, out));
        let sink = ChunkSender {
            tx,
            recycle: recycle_rx,
        };
        // The sender is dropped with the writer, which ends the compressor's
        // input. An uncompressed blob is its own diff ID: hashed once, there.
        let tar = if compression == Compression::None {
            write_tar_with_flags(root, changes, opts, file_flags, sink).map(|_| None)
        } else {
            write_tar_with_flags(root, changes, opts, file_flags, HashingWriter::new(sink))
                .map(|w| Some(w.finish().0))
        };
        let compressed = compressor
            .join()
            .map_err(|_| LayerError::Internal("compression"))?;
        match (tar, compressed) {
            // A failed compressor makes the writer fail too; its error says why.
            (_, Err(e)) => Err(LayerError::Write(e)),
            (Err(e), Ok(_)) => Err(e),
            (Ok(diff_id), Ok((digest, size, out))) => Ok((
                ExportedLayer {
                    diff_id: diff_id.unwrap_or_else(|| digest.clone()),
                    digest,
                    size,
                    media_type,
                },
                out,
            )),
        }
    })
}

/// The compressing thread: everything from `rx`, compressed, into `out`.
fn compress<W: Write>(
    rx: Receiver<Vec<u8>>,
    recycle: Sender<Vec<u8>>,
    compression: Compression,
    workers: u32,
    out: W,
) -> io::Result<(crate::digest::Digest, u64, W)> {
    let hashed = HashingWriter::new(out);
    let hashed = match compression {
        Compression::Gzip => thread::scope(|s| {
            let mut enc = ParallelGz::new(s, GZIP_LEVEL, workers as usize, hashed)?;
            pump(&rx, &recycle, &mut enc)?;
            enc.finish()
        })?,
        Compression::Zstd => {
            let mut enc = zstd_encoder(hashed, workers)?;
            pump(&rx, &recycle, &mut enc)?;
            enc.finish()?
        }
        Compression::None => {
            let mut hashed = hashed;
            pump(&rx, &recycle, &mut hashed)?;
            hashed
        }
    };
    Ok(hashed.finish())
}

fn pump(rx: &Receiver<Vec<u8>>, recycle: &Sender<Vec<u8>>, w: &mut impl Write) -> io::Result<()> {
    for buf in rx {
        w.write_all(&buf)?;
        // The writer may be gone already; then the buffer is simply dropped.
        let _ = recycle.send(buf);
    }
    Ok(())
}

/// The size of each zstd job (the input one worker compresses at a time).
///
/// zstd's own choice at level 3 is 8 MiB (four 2 MiB windows), and its
/// multi-threaded context then holds about ten of them: an input ring of
/// the workers' jobs plus three spare (40 MiB with two workers) and an
/// output buffer per job in flight (up to four) — some 75 MiB, which was
/// most of a large `PKG` step's peak (issue 31: 144 MiB against a 128 MiB
/// target, 52 MiB before the export began). At one window (2 MiB) the
/// same context holds about 20 MiB.
const ZSTD_JOB_SIZE: u32 = 2 << 20;

/// How much of the job before each job starts with as its prefix, as
/// zstd's `overlapLog`: 8 is half the window (1 MiB). zstd's default at
/// level 3 (6, 256 KiB) is made for 8 MiB jobs; with 2 MiB jobs it lost
/// 2.8 % of ratio on `benches/pkg.sh`'s layer, half a window gives the
/// 8 MiB jobs' size back (136.3 MB of 413 MB either way) for about 3 %
/// more CPU. The output depends on this and on [`ZSTD_JOB_SIZE`] (never
/// on the number of workers): changing either changes every zstd layer's
/// digest.
const ZSTD_OVERLAP_LOG: u32 = 8;

/// A zstd level-3 encoder with a content checksum, `workers` (≥ 1)
/// threads, jobs of [`ZSTD_JOB_SIZE`] overlapping by [`ZSTD_OVERLAP_LOG`].
pub(crate) fn zstd_encoder<W: Write>(w: W, workers: u32) -> io::Result<zstd::Encoder<'static, W>> {
    use zstd::stream::raw::CParameter;
    let mut enc = zstd::Encoder::new(w, ZSTD_LEVEL)?;
    enc.include_checksum(true)?;
    enc.multithread(workers.max(1))?;
    enc.set_parameter(CParameter::JobSize(ZSTD_JOB_SIZE))?;
    enc.set_parameter(CParameter::OverlapSizeLog(ZSTD_OVERLAP_LOG))?;
    Ok(enc)
}

/// The writing end of the queue: each write (the tar writer's buffer is
/// [`CHUNK`] bytes, so writes come whole chunks at a time) is copied into a
/// recycled buffer and sent.
struct ChunkSender {
    tx: SyncSender<Vec<u8>>,
    recycle: Receiver<Vec<u8>>,
}

impl Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut buf = self
            .recycle
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        buf.clear();
        buf.extend_from_slice(data);
        self.tx.send(buf).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the compressing thread stopped")
        })?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The length of a layer blob's tar stream once uncompressed: what the
/// layer takes unpacked, its tar headers included. Reads the whole blob.
pub fn uncompressed_size<R: Read>(media_type: &str, blob: R) -> Result<u64, LayerError> {
    io::copy(&mut decompress(media_type, blob)?, &mut io::sink()).map_err(LayerError::Read)
}

/// The uncompressed tar stream of a layer blob of media type `media_type`.
pub fn decompress<'r, R: Read + 'r>(
    media_type: &str,
    blob: R,
) -> Result<Box<dyn Read + 'r>, LayerError> {
    match Compression::from_media_type(media_type) {
        Some(Compression::None) => Ok(Box::new(blob)),
        Some(Compression::Gzip) => Ok(Box::new(MultiGzDecoder::new(io::BufReader::with_capacity(
            CHUNK / 4,
            blob,
        )))),
        Some(Compression::Zstd) => Ok(Box::new(
            zstd::Decoder::new(blob).map_err(LayerError::Read)?,
        )),
        None => Err(LayerError::MediaType(media_type.to_string())),
    }
}
