//! Bytes counted as they pass: a reader (a layer blob being unpacked) or a
//! writer (a layer blob being exported) that tells a [`Reporter`] how many
//! bytes have gone through, so a bar moves and a counter counts.
//!
//! A call per 256 KiB, not per read: a 1 GiB unpack makes about 4000
//! calls, and the reporters throttle what they show further.

use std::io::{self, Read, Write};

use super::Reporter;

/// Bytes between two calls to [`Reporter::transfer_progress`].
const STEP: u64 = 256 << 10;

struct Count<'r> {
    reporter: &'r dyn Reporter,
    id: String,
    done: u64,
    said: u64,
}

impl Count<'_> {
    fn add(&mut self, n: usize) {
        self.done += n as u64;
        if self.done - self.said >= STEP {
            self.say();
        }
    }

    fn say(&mut self) {
        self.said = self.done;
        self.reporter.transfer_progress(&self.id, self.done);
    }
}

/// A reader that reports the bytes read through it as transfer `id`.
pub struct ProgressReader<'r, R> {
    inner: R,
    count: Count<'r>,
}

impl<'r, R: Read> ProgressReader<'r, R> {
    pub fn new(inner: R, reporter: &'r dyn Reporter, id: &str) -> Self {
        ProgressReader {
            inner,
            count: Count {
                reporter,
                id: id.to_string(),
                done: 0,
                said: 0,
            },
        }
    }

    /// Bytes read so far.
    pub fn done(&self) -> u64 {
        self.count.done
    }
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.count.said != self.count.done {
            // The end: the last figure is the whole.
            self.count.say();
        }
        self.count.add(n);
        Ok(n)
    }
}

/// A writer that reports the bytes written through it as transfer `id`.
pub struct ProgressWriter<'r, W> {
    inner: W,
    count: Count<'r>,
}

impl<'r, W: Write> ProgressWriter<'r, W> {
    pub fn new(inner: W, reporter: &'r dyn Reporter, id: &str) -> Self {
        ProgressWriter {
            inner,
            count: Count {
                reporter,
                id: id.to_string(),
                done: 0,
                said: 0,
            },
        }
    }

    /// The writer, after the last figure is reported.
    pub fn into_inner(mut self) -> W {
        if self.count.said != self.count.done {
            self.count.say();
        }
        self.inner
    }
}

impl<W: Write> Write for ProgressWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count.add(n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Event, RecordingReporter};

    fn progress(r: &RecordingReporter) -> Vec<u64> {
        r.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::TransferProgress { done, .. } => Some(done),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_reader_counts_up_to_every_byte_in_steps() {
        let r = RecordingReporter::new();
        let data = vec![7u8; (STEP * 3 + 100) as usize];
        let mut reader = ProgressReader::new(&data[..], &r, "x");
        io::copy(&mut reader, &mut io::sink()).unwrap();
        let seen = progress(&r);
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert!(seen.len() >= 3 && seen.len() <= 5, "{seen:?}");
        assert_eq!(seen.last(), Some(&(data.len() as u64)));
    }

    #[test]
    fn a_writer_reports_its_last_figure_when_done() {
        let r = RecordingReporter::new();
        let mut w = ProgressWriter::new(Vec::new(), &r, "x");
        w.write_all(&[1u8; 1000]).unwrap();
        assert!(progress(&r).is_empty());
        let out = w.into_inner();
        assert_eq!(progress(&r), vec![out.len() as u64]);
    }
}
