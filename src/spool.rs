//! A file one side writes while others read it as it grows: a pipe
//! without a bound, through the page cache, as `tail -f` follows a log. A
//! pull downloads a layer blob into the store's temporary file, and the
//! unpacker applies it from that file as the bytes land: the download
//! never waits for the extraction (a later layer downloads while an
//! earlier one unpacks), and memory stays bounded whatever the blob's size.
//!
//! The writer only ever appends: a byte in the file is final. It tells the
//! readers when the file grew ([`Spool::grew`]) and, at the end, how the
//! writing ended ([`Spool::finish`]). A [`TailReader`] reads what is in the
//! file, waits when it has caught up, and returns the end of the stream
//! only once the writer has finished well; when the writer finished with an
//! error (a digest that does not match, a body cut short) the reader
//! returns that error after the bytes it already read. So a reader that
//! reached its end read the whole file the writer vouched for. A writer
//! dropped without finishing counts as a failure.

use std::error::Error;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// How the writing ended, as readers see it.
type End = Result<(), Arc<dyn Error + Send + Sync>>;

#[derive(Default)]
struct State {
    /// Bumped each time the file grew or the writing ended, so a reader
    /// that found nothing new knows whether to look again.
    generation: u64,
    end: Option<End>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self, end: Option<End>) {
        let mut st = self.lock();
        if st.end.is_some() {
            return;
        }
        st.generation += 1;
        st.end = end;
        drop(st);
        self.changed.notify_all();
    }
}

/// The writer's side of a spooled file: it appends to the file by its own
/// means and reports here.
pub struct Spool {
    shared: Arc<Shared>,
}

/// The readers' side: makes [`TailReader`]s of the file, each from its
/// start. Cheap to clone.
#[derive(Clone)]
pub struct Tail {
    file: Arc<File>,
    shared: Arc<Shared>,
}

/// A spool for `file`, which its writer appends to through its own
/// handle; readers read through another handle on the same file.
pub fn spool(file: &File) -> io::Result<(Spool, Tail)> {
    let shared = Arc::new(Shared::default());
    let tail = Tail {
        file: Arc::new(file.try_clone()?),
        shared: shared.clone(),
    };
    Ok((Spool { shared }, tail))
}

impl Spool {
    /// The file grew: readers waiting for bytes look again. Telling too
    /// often costs a wake-up; a byte is never read before it is in the
    /// file, however this is called.
    pub fn grew(&self) {
        self.shared.bump(None);
    }

    /// The writing ended: well (every byte is in the file, and the writer
    /// vouches for them), or with `error`, which every reader returns once
    /// it has read what is there.
    pub fn finish(self, result: Result<(), Box<dyn Error + Send + Sync>>) {
        self.shared.bump(Some(result.map_err(Arc::from)));
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        // After `finish` this changes nothing.
        self.shared
            .bump(Some(Err(Arc::from(Box::<dyn Error + Send + Sync>::from(
                "the writer stopped before the end",
            )))));
    }
}

impl Tail {
    /// A reader of the file from its first byte.
    pub fn reader(&self) -> TailReader {
        TailReader {
            tail: self.clone(),
            pos: 0,
        }
    }

    /// Whether the writing ended with an error (or the writer stopped).
    pub fn failed(&self) -> bool {
        matches!(self.shared.lock().end, Some(Err(_)))
    }

    /// Waits until the writing has ended; whether it ended well.
    pub fn wait_end(&self) -> bool {
        let mut st = self.shared.lock();
        loop {
            if let Some(end) = &st.end {
                return end.is_ok();
            }
            st = self
                .shared
                .changed
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Reads a spooled file as it grows; see the module docs.
pub struct TailReader {
    tail: Tail,
    pos: u64,
}

/// The writer's error, as a reader returns it.
#[derive(Debug)]
struct Failed(Arc<dyn Error + Send + Sync>);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for Failed {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl Read for TailReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let shared = &self.tail.shared;
        loop {
            // What was true before the read: if the writing had ended then,
            // an empty read is the real end of the file.
            let (generation, end) = {
                let st = shared.lock();
                (st.generation, st.end.clone())
            };
            let n = self.tail.file.read_at(out, self.pos)?;
            if n > 0 {
                self.pos += n as u64;
                return Ok(n);
            }
            match end {
                Some(Ok(())) => return Ok(0),
                Some(Err(e)) => return Err(io::Error::other(Failed(e))),
                None => {}
            }
            let mut st = shared.lock();
            while st.generation == generation {
                st = shared.changed.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_reader_follows_the_writer_and_ends_when_it_finishes() {
        let mut file = tempfile::tempfile().unwrap();
        let (spool, tail) = spool(&file).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            tail.reader().read_to_end(&mut got).map(|_| got)
        });
        let mut sent = Vec::new();
        for i in 0..50u8 {
            let piece = vec![i; 1000 + i as usize];
            file.write_all(&piece).unwrap();
            sent.extend_from_slice(&piece);
            spool.grew();
            if i % 7 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        spool.finish(Ok(()));
        assert!(
            reader.join().unwrap().unwrap() == sent,
            "every byte, in order"
        );
    }

    #[test]
    fn a_failed_writer_fails_its_readers_after_the_bytes() {
        let mut file = tempfile::tempfile().unwrap();
        let (spool, tail) = spool(&file).unwrap();
        file.write_all(b"half a blob").unwrap();
        spool.finish(Err("digest mismatch".into()));
        let mut r = tail.reader();
        let mut got = [0u8; 64];
        let n = r.read(&mut got).unwrap();
        assert_eq!(&got[..n], b"half a blob");
        let err = r.read(&mut got).unwrap_err();
        assert_eq!(err.to_string(), "digest mismatch");

        // A second reader reads from the start; a writer dropped without
        // finishing is a failure too.
        let (spool, tail) = super::spool(&file).unwrap();
        drop(spool);
        let mut all = Vec::new();
        let err = tail.reader().read_to_end(&mut all).unwrap_err();
        assert!(err.to_string().contains("stopped before the end"), "{err}");
        assert_eq!(all, b"half a blob");
    }
}
