//! A bounded pipe between threads, in chunks: what lets stages of one
//! stream run at once, each on its own core, as `curl | xz -d | tar -x`
//! does with processes. The bootstrap joins its download, xz decoder and
//! extraction with it (`release`); the layer applier its decompression
//! and hashing to its extraction (`layer::apply`).
//!
//! The writer sends a chunk when it has [`CHUNK`] bytes (or is dropped);
//! at most [`DEPTH`] chunks wait, so a fast producer waits for a slow
//! consumer. A writer can hand an error on ([`PipeWriter::fail`]); the
//! reader returns it where the bytes stop. Dropping the writer is the end
//! of the stream; dropping the reader makes every later write fail, which
//! is how a producer learns that nobody listens any more.

use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

const CHUNK: usize = 256 << 10;
const DEPTH: usize = 16;

type Chunk = io::Result<Vec<u8>>;

pub(crate) fn pipe() -> (PipeWriter, PipeReader) {
    let (tx, rx) = sync_channel(DEPTH);
    (
        PipeWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        },
        PipeReader {
            rx,
            cur: Vec::new(),
            pos: 0,
        },
    )
}

pub(crate) struct PipeWriter {
    tx: SyncSender<Chunk>,
    buf: Vec<u8>,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the reading end stopped")
}

impl PipeWriter {
    /// Sends what is buffered, then `e`, which the reader returns after
    /// those bytes.
    pub(crate) fn fail(mut self, e: io::Error) {
        let _ = self.flush();
        let _ = self.tx.send(Err(e));
    }
}

impl Write for PipeWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx.send(Ok(chunk)).map_err(|_| gone())
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

pub(crate) struct PipeReader {
    rx: Receiver<Chunk>,
    cur: Vec<u8>,
    pos: usize,
}

impl Read for PipeReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(chunk) => {
                    self.cur = chunk?;
                    self.pos = 0;
                }
                Err(_) => return Ok(0), // the writer is done
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_errors_arrive_in_order() {
        let (mut w, mut r) = pipe();
        let data: Vec<u8> = (0..CHUNK * 3 + 5).map(|i| i as u8).collect();
        let t = std::thread::spawn(move || {
            w.write_all(&data).unwrap();
            w.fail(io::Error::other("broke"));
            data
        });
        let mut got = Vec::new();
        let err = r.read_to_end(&mut got).unwrap_err();
        let data = t.join().unwrap();
        assert_eq!(err.to_string(), "broke");
        assert!(got == data, "every byte before the error");
    }

    #[test]
    fn a_dropped_reader_fails_the_writer() {
        let (mut w, r) = pipe();
        drop(r);
        assert!(w.write_all(&[0; CHUNK]).is_err());
    }
}
