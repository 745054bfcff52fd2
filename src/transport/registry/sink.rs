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
    tx: mpsc::Sender<Cmd>,
    /// Chunks were sent since the last flush.
    pending: bool,
}

impl BlobSink {
    /// Writes `file` from its current position (its end: it holds `len`
    /// bytes already, hashed into `hasher`).
    pub fn new(file: File, len: u64, hasher: Sha256) -> io::Result<BlobSink> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            file,
            hasher,
            len,
            writeback: Writeback::from(len),
            failed: None,
        };
        std::thread::Builder::new()
            .name("blob-writer".into())
            .spawn(move || writer.run(rx))?;
        Ok(BlobSink { tx, pending: false })
    }

    /// Queues `chunk` to be hashed and appended.
    pub async fn write(&mut self, chunk: Bytes) -> io::Result<()> {
        self.pending = true;
        self.tx.send(Cmd::Write(chunk)).await.map_err(|_| gone())
    }

    /// Whether chunks were queued since the last flush.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Waits until every queued chunk is in the file; returns the hash of
    /// the file's whole content (or the first write error).
    pub async fn flush(&mut self) -> io::Result<Sha256> {
        let (ack, answer) = oneshot::channel();
        self.tx.send(Cmd::Flush(ack)).await.map_err(|_| gone())?;
        let r = answer.await.map_err(|_| gone())?;
        self.pending = false;
        r
    }

    /// Empties the file and its hash: the blob starts again at byte 0.
    pub async fn restart(&mut self) -> io::Result<()> {
        let (ack, answer) = oneshot::channel();
        self.tx.send(Cmd::Restart(ack)).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
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
                Cmd::Write(chunk) => {
                    if self.failed.is_none() {
                        if let Err(e) = self.write(&chunk) {
                            self.failed = Some(e);
                        }
                    }
                }
                Cmd::Flush(ack) => {
                    let _ = ack.send(match &self.failed {
                        Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
                        None => Ok(self.hasher.clone()),
                    });
                }
                Cmd::Restart(ack) => {
                    self.failed = None;
                    let _ = ack.send(self.restart());
                }
            }
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

    #[tokio::test]
    async fn writes_in_order_hashes_and_starts_again() {
        let t = tempfile::NamedTempFile::new().unwrap();
        let mut sink = BlobSink::new(t.reopen().unwrap(), 0, Sha256::new()).unwrap();
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
        let mut sink = BlobSink::new(file, 5, Sha256::new_with_prefix(b"kept ")).unwrap();
        sink.write(Bytes::from_static(b"rest")).await.unwrap();
        let h = sink.flush().await.unwrap();
        assert_eq!(h.finalize()[..], Sha256::digest(b"kept rest")[..]);
    }

    #[tokio::test]
    async fn a_write_error_is_reported_at_the_flush() {
        // A file opened read-only: every write fails.
        let t = tempfile::NamedTempFile::new().unwrap();
        let file = File::open(t.path()).unwrap();
        let mut sink = BlobSink::new(file, 0, Sha256::new()).unwrap();
        sink.write(Bytes::from_static(b"x")).await.unwrap();
        assert!(sink.flush().await.is_err());
        // And again: what follows a lost chunk is not the blob.
        sink.write(Bytes::from_static(b"y")).await.unwrap();
        assert!(sink.flush().await.is_err());
    }
}
