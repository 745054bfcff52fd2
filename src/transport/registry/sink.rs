//! The file a blob downloads into, written and hashed on a thread of its
//! own.
//!
//! Why a thread: the body arrives on the async runtime, whose two workers
//! (on two cores) also run the connection. Hashing (sha256) and writing
//! the bytes to the page cache are the heaviest work of a download; done
//! on the worker they came in on, the next bytes wait for them. Here the
//! worker hands each chunk (the body's own buffer, not a copy) to the
//! writer thread through a bounded channel, and goes back to the socket:
//! receiving, hashing and writing overlap. The thread also keeps the disk
//! busy behind the write position ([`Writeback`]), so the sync that makes
//! the blob durable at the end of the copy finds little left to write —
//! and it may block while the disk catches up, which a worker must not.
//!
//! A blob of at most [`INLINE`] bytes is written where it arrives
//! instead ([`Mode::Inline`]): a few writes, no thread.
//!
//! Memory stays bounded: at most [`QUEUE`] chunks wait in the channel
//! (hyper reads at most ~400 KiB at a time, and a queued chunk keeps its
//! read buffer from being reused: 16 queued chunks raised a 512 MiB pull's
//! peak RSS by 10 MiB, test `registry::limits`), and a full channel makes
//! the download wait, as a slow disk should.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

use bytes::Bytes;
use sha2::{Digest as _, Sha256};
use tokio::sync::{mpsc, oneshot};

use crate::fsutil::durable::Writeback;

/// Chunks waiting for the writer, at most.
const QUEUE: usize = 4;

enum Cmd {
    Write(Bytes),
    /// Answered once every chunk sent before it is written: the hash of
    /// everything in the file so far, or the first write error.
    Flush(oneshot::Sender<io::Result<Sha256>>),
    /// Empties the file and the hash: the blob starts again at byte 0.
    Restart(oneshot::Sender<io::Result<()>>),
}

/// A blob's file being written (see the module doc). Chunks are written
/// in the order given; [`BlobSink::flush`] waits for them.
pub(super) struct BlobSink {
    mode: Mode,
    /// Chunks were sent since the last flush.
    pending: bool,
}

enum Mode {
    /// A small blob, written where it arrives: a thread's start and a
    /// hand-off per chunk cost more than its few writes (measured: a 2 MB
    /// copy's median 0.071 s → 0.097 s with a thread, at load 13), and
    /// below [`Writeback::STEP`] there is no writeback to start.
    Inline(Writer),
    Thread(mpsc::Sender<Cmd>),
}

/// Blobs up to this size are written inline ([`Mode::Inline`]).
const INLINE: u64 = 2 * Writeback::STEP;

impl BlobSink {
    /// Writes `file` from its current position (its end: it holds `len`
    /// bytes already, hashed into `hasher`) to `size` bytes.
    pub fn new(file: File, len: u64, hasher: Sha256, size: u64) -> io::Result<BlobSink> {
        let writer = Writer {
            file,
            hasher,
            len,
            writeback: Writeback::from(len),
            failed: None,
        };
        let mode = if size.saturating_sub(len) <= INLINE {
            Mode::Inline(writer)
        } else {
            let (tx, rx) = mpsc::channel(QUEUE);
            std::thread::Builder::new()
                .name("blob-writer".into())
                .spawn(move || writer.run(rx))?;
            Mode::Thread(tx)
        };
        Ok(BlobSink {
            mode,
            pending: false,
        })
    }

    /// Queues `chunk` to be hashed and appended.
    pub async fn write(&mut self, chunk: Bytes) -> io::Result<()> {
        self.pending = true;
        match &mut self.mode {
            Mode::Inline(w) => {
                w.take(chunk);
                Ok(())
            }
            Mode::Thread(tx) => tx.send(Cmd::Write(chunk)).await.map_err(|_| gone()),
        }
    }

    /// Whether chunks were queued since the last flush.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Waits until every queued chunk is in the file; returns the hash of
    /// the file's whole content (or the first write error).
    pub async fn flush(&mut self) -> io::Result<Sha256> {
        let r = match &mut self.mode {
            Mode::Inline(w) => w.state(),
            Mode::Thread(tx) => {
                let (ack, answer) = oneshot::channel();
                tx.send(Cmd::Flush(ack)).await.map_err(|_| gone())?;
                answer.await.map_err(|_| gone())?
            }
        };
        self.pending = false;
        r
    }

    /// Empties the file and its hash: the blob starts again at byte 0.
    pub async fn restart(&mut self) -> io::Result<()> {
        match &mut self.mode {
            Mode::Inline(w) => w.restart(),
            Mode::Thread(tx) => {
                let (ack, answer) = oneshot::channel();
                tx.send(Cmd::Restart(ack)).await.map_err(|_| gone())?;
                answer.await.map_err(|_| gone())?
            }
        }
    }
}

fn gone() -> io::Error {
    io::Error::other("the blob's writer thread stopped")
}

/// The writer thread's side.
struct Writer {
    file: File,
    hasher: Sha256,
    /// Bytes in the file.
    len: u64,
    writeback: Writeback,
    /// The first write error: later chunks are dropped, and every flush
    /// reports it until the file starts again.
    failed: Option<io::Error>,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        while let Some(cmd) = rx.blocking_recv() {
            match cmd {
                Cmd::Write(chunk) => self.take(chunk),
                Cmd::Flush(ack) => {
                    let _ = ack.send(self.state());
                }
                Cmd::Restart(ack) => {
                    let _ = ack.send(self.restart());
                }
            }
        }
    }

    /// Writes `chunk`, unless an earlier write failed.
    fn take(&mut self, chunk: Bytes) {
        if self.failed.is_none() {
            if let Err(e) = self.write(&chunk) {
                self.failed = Some(e);
            }
        }
    }

    /// The hash so far, or the write error.
    fn state(&self) -> io::Result<Sha256> {
        match &self.failed {
            Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Ok(self.hasher.clone()),
        }
    }

    fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.hasher.update(chunk);
        self.file.write_all(chunk)?;
        self.len += chunk.len() as u64;
        self.writeback.wrote(&self.file, self.len);
        Ok(())
    }

    fn restart(&mut self) -> io::Result<()> {
        self.failed = None;
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.hasher = Sha256::new();
        self.len = 0;
        self.writeback = Writeback::new();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes that take each [`Mode`].
    const SIZES: [u64; 2] = [11, INLINE + 1];

    #[tokio::test]
    async fn writes_in_order_hashes_and_starts_again() {
        for size in SIZES {
            writes_in_order(size).await;
        }
    }

    async fn writes_in_order(size: u64) {
        let t = tempfile::NamedTempFile::new().unwrap();
        let mut sink = BlobSink::new(t.reopen().unwrap(), 0, Sha256::new(), size).unwrap();
        for part in [&b"hello "[..], b"world"] {
            sink.write(Bytes::copy_from_slice(part)).await.unwrap();
        }
        assert!(sink.pending());
        let h = sink.flush().await.unwrap();
        assert!(!sink.pending());
        assert_eq!(h.finalize()[..], Sha256::digest(b"hello world")[..]);
        assert_eq!(std::fs::read(t.path()).unwrap(), b"hello world");

        sink.restart().await.unwrap();
        sink.write(Bytes::from_static(b"again")).await.unwrap();
        let h = sink.flush().await.unwrap();
        assert_eq!(h.finalize()[..], Sha256::digest(b"again")[..]);
        assert_eq!(std::fs::read(t.path()).unwrap(), b"again");
    }

    #[tokio::test]
    async fn continues_a_file_with_its_hash() {
        let t = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(t.path(), b"kept ").unwrap();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(t.path())
            .unwrap();
        file.seek(SeekFrom::End(0)).unwrap();
        let mut sink =
            BlobSink::new(file, 5, Sha256::new_with_prefix(b"kept "), INLINE + 6).unwrap();
        sink.write(Bytes::from_static(b"rest")).await.unwrap();
        let h = sink.flush().await.unwrap();
        assert_eq!(h.finalize()[..], Sha256::digest(b"kept rest")[..]);
    }

    #[tokio::test]
    async fn a_write_error_is_reported_at_the_flush() {
        for size in SIZES {
            write_error(size).await;
        }
    }

    async fn write_error(size: u64) {
        // A file opened read-only: every write fails.
        let t = tempfile::NamedTempFile::new().unwrap();
        let file = File::open(t.path()).unwrap();
        let mut sink = BlobSink::new(file, 0, Sha256::new(), size).unwrap();
        sink.write(Bytes::from_static(b"x")).await.unwrap();
        assert!(sink.flush().await.is_err());
        // And again: what follows a lost chunk is not the blob.
        sink.write(Bytes::from_static(b"y")).await.unwrap();
        assert!(sink.flush().await.is_err());
    }
}
