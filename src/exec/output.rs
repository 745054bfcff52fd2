//! Turning a step's two output pipes into lines for an [`OutputSink`].
//!
//! Each pipe gets its own reader thread, so a child that fills one pipe
//! while we wait on the other never deadlocks. The threads cut the bytes
//! into lines and hand them over a bounded channel to the calling thread,
//! which alone owns the sink (sinks are `Send`, not `Sync`). Order is kept
//! within a stream; between the two streams it is the order of arrival.
//!
//! The wait for the process runs on a third thread and is reported on the
//! same channel, so the executor can act the moment the step's process
//! ends — a jail must be removed before its leftover background processes
//! let go of the pipes — and keep draining the output afterwards.

use std::io::{self, Read};
use std::sync::mpsc;
use std::thread;

use super::{OutputSink, Stream};

/// Longest line passed to the sink; a longer one is cut into pieces of
/// this size, so one runaway line cannot take all the memory.
pub const MAX_LINE: usize = 64 * 1024;

/// Cuts a byte stream into lines (without `\n`), at most [`MAX_LINE`] long.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes, calling `emit` for every line completed by them.
    pub fn push(&mut self, mut data: &[u8], emit: &mut dyn FnMut(&[u8])) {
        while !data.is_empty() {
            let room = MAX_LINE - self.partial.len();
            // One byte past the room: a newline right after a full line
            // ends that line rather than making an empty one.
            let window = &data[..data.len().min(room + 1)];
            match window.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.flush_with(&data[..i], emit);
                    data = &data[i + 1..];
                }
                None if data.len() > room => {
                    self.flush_with(&data[..room], emit);
                    data = &data[room..];
                }
                None => {
                    self.partial.extend_from_slice(data);
                    data = &[];
                }
            }
        }
    }

    /// Passes on a last line that had no newline, if any.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&[u8])) {
        if !self.partial.is_empty() {
            emit(&self.partial);
            self.partial.clear();
        }
    }

    fn flush_with(&mut self, tail: &[u8], emit: &mut dyn FnMut(&[u8])) {
        if self.partial.is_empty() {
            emit(tail);
        } else {
            self.partial.extend_from_slice(tail);
            emit(&self.partial);
            self.partial.clear();
        }
    }
}

enum Event<T> {
    Line(Stream, Vec<u8>),
    ReadFailed(Stream, io::Error),
    Exited(T),
}

/// Delivers the lines of `stdout` and `stderr` to `out` until both reach
/// end of file, while `wait` waits for the process on its own thread.
/// `on_exit` runs on the calling thread as soon as `wait` returns (while
/// output may still be arriving); `wait`'s result is returned at the end.
pub fn collect<T, R1, R2>(
    stdout: R1,
    stderr: R2,
    out: &mut dyn OutputSink,
    wait: impl FnOnce() -> T + Send,
    mut on_exit: impl FnMut(&T),
) -> io::Result<T>
where
    T: Send,
    R1: Read + Send,
    R2: Read + Send,
{
    let (tx, rx) = mpsc::sync_channel::<Event<T>>(256);
    thread::scope(|s| {
        let (tx_out, tx_err) = (tx.clone(), tx.clone());
        s.spawn(move || read_lines(stdout, Stream::Stdout, tx_out));
        s.spawn(move || read_lines(stderr, Stream::Stderr, tx_err));
        s.spawn(move || {
            let status = wait();
            let _ = tx.send(Event::Exited(status));
        });

        let mut status = None;
        let mut failure = None;
        for event in rx {
            match event {
                Event::Line(stream, line) => out.line(stream, &line),
                Event::ReadFailed(stream, e) => {
                    failure.get_or_insert(io::Error::new(
                        e.kind(),
                        format!("reading the step's {stream:?}: {e}"),
                    ));
                }
                Event::Exited(st) => {
                    on_exit(&st);
                    status = Some(st);
                }
            }
        }
        match (failure, status) {
            (Some(e), _) => Err(e),
            (None, Some(st)) => Ok(st),
            (None, None) => Err(io::Error::other(
                "the thread waiting for the step ended without a result",
            )),
        }
    })
}

fn read_lines<T>(mut pipe: impl Read, stream: Stream, tx: mpsc::SyncSender<Event<T>>) {
    let mut splitter = LineSplitter::new();
    let mut buf = vec![0u8; 64 * 1024];
    // A send fails only when the receiver is gone (the sink panicked);
    // the reads go on so the child is never blocked on a full pipe.
    let mut emit = |line: &[u8]| {
        let _ = tx.send(Event::Line(stream, line.to_vec()));
    };
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => splitter.push(&buf[..n], &mut emit),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Event::ReadFailed(stream, e));
                break;
            }
        }
    }
    splitter.finish(&mut emit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut s = LineSplitter::new();
        let mut emit = |l: &[u8]| lines.push(l.to_vec());
        for c in chunks {
            s.push(c, &mut emit);
        }
        s.finish(&mut emit);
        lines
    }

    #[test]
    fn lines_across_chunks() {
        assert_eq!(
            split(&[b"a\nb", b"c\n\nd"]),
            vec![b"a".to_vec(), b"bc".to_vec(), b"".to_vec(), b"d".to_vec()]
        );
        assert_eq!(split(&[b"x\n"]), vec![b"x".to_vec()]);
        assert!(split(&[b""]).is_empty());
    }

    #[test]
    fn long_lines_are_cut() {
        let long = vec![b'x'; MAX_LINE * 2 + 10];
        let mut input = long.clone();
        input.extend_from_slice(b"\nend\n");
        // Fed in odd-sized chunks, the cut points stay the same.
        let chunks: Vec<&[u8]> = input.chunks(7777).collect();
        let lines = split(&chunks);
        assert_eq!(
            lines.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![MAX_LINE, MAX_LINE, 10, 3]
        );
        // A line of exactly MAX_LINE bytes is one line, not two.
        let mut exact = vec![b'y'; MAX_LINE];
        exact.push(b'\n');
        assert_eq!(split(&[&exact]).len(), 1);
        let (a, b) = exact.split_at(MAX_LINE);
        assert_eq!(split(&[a, b]).len(), 1);
    }

    #[test]
    fn collect_keeps_streams_apart() {
        let mut got: Vec<(Stream, Vec<u8>)> = Vec::new();
        let mut sink = |s: Stream, l: &[u8]| got.push((s, l.to_vec()));
        let mut exited = false;
        let status = collect(
            &b"one\ntwo"[..],
            &b"err\n"[..],
            &mut sink,
            || 7,
            |s| exited = *s == 7,
        )
        .unwrap();
        assert_eq!(status, 7);
        assert!(exited);
        let of = |want| {
            got.iter()
                .filter(|(s, _)| *s == want)
                .map(|(_, l)| l.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(of(Stream::Stdout), vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(of(Stream::Stderr), vec![b"err".to_vec()]);
    }
}
