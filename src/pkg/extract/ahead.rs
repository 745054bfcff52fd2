//! Packages decompressed ahead of their extraction, on a thread of their
//! own: the zstd or xz decoder works on one core while the other writes
//! files (and hashes their content), as `zstd -dc | tar -x` runs its two
//! halves at once. The decoder goes through the packages in install order
//! and runs at most [`DEPTH`] chunks of [`CHUNK`] bytes ahead, so memory
//! stays bounded (about 2.5 MiB) however large a package is, and it runs
//! on into the next package while the last files of one are written.
//!
//! Nothing is trusted more for being decoded early: the extraction reads
//! the same bytes, in the same order, through the same caps and checks as
//! when it decoded them itself.
//!
//! The packages' files come from a [`Files`]: when the packages are still
//! being downloaded (`pkg::install`'s pipeline), the decoder waits for the
//! next one in install order, and stops where one will not come.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::rc::Rc;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

/// Bytes of one chunk handed over.
pub const CHUNK: usize = 256 << 10;
/// Chunks decoded and not yet read, at most.
pub const DEPTH: usize = 8;

enum Msg {
    Chunk(Vec<u8>, usize),
    /// The package's stream ended.
    End,
    /// Reading or decompressing it failed (the thread stops).
    Failed(io::Error),
}

/// Where the decoder finds each package's file, in install order; shared
/// with the thread that decodes.
pub trait Files: Sync {
    /// The file of the package at `i` (from 0, in install order), waiting
    /// until it is there; `None` past the last one, or when it will not
    /// come (its download failed, or the install stopped: [`Files::close`]).
    fn file(&self, i: usize) -> Option<io::Result<File>>;
    /// The install is over, whether done or failed: a [`Files::file`]
    /// waiting now returns `None`.
    fn close(&self) {}
}

/// Package files already whole on disk, by path.
impl Files for Vec<std::path::PathBuf> {
    fn file(&self, i: usize) -> Option<io::Result<File>> {
        self.get(i).map(File::open)
    }
}

/// The decoding side: runs on its own thread until every package is
/// decoded or the reading side is gone.
pub struct Decoder<'f> {
    files: &'f dyn Files,
    full: SyncSender<Msg>,
    empty: Receiver<Vec<u8>>,
}

/// The reading side, shared by the readers of consecutive packages.
pub struct Ahead {
    full: Receiver<Msg>,
    empty: Sender<Vec<u8>>,
    /// The current package's `End` (or failure) has been received.
    ended: Cell<bool>,
}

/// A decoder of the packages of `files` (in the order they will be read)
/// and its reader.
pub fn pair(files: &dyn Files) -> (Decoder<'_>, Rc<Ahead>) {
    let (full_tx, full_rx) = sync_channel(DEPTH);
    let (empty_tx, empty_rx) = channel();
    (
        Decoder {
            files,
            full: full_tx,
            empty: empty_rx,
        },
        Rc::new(Ahead {
            full: full_rx,
            empty: empty_tx,
            ended: Cell::new(false),
        }),
    )
}

impl Decoder<'_> {
    /// Decodes every package in turn; returns when done, at the first
    /// failure (handed over to the reader), or when the reader is gone.
    pub fn run(self) {
        let mut i = 0;
        while let Some(file) = self.files.file(i) {
            i += 1;
            match file.and_then(|f| self.one(f)) {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    let _ = self.full.send(Msg::Failed(e));
                    return;
                }
            }
        }
    }

    /// One package; `Ok(false)` when the reader is gone.
    fn one(&self, file: File) -> io::Result<bool> {
        let mut stream =
            super::super::catalogue::decompressor(BufReader::with_capacity(1 << 17, file))?;
        loop {
            let mut buf = self.empty.try_recv().unwrap_or_else(|_| vec![0; CHUNK]);
            let n = loop {
                match stream.read(&mut buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r?,
                }
            };
            if n == 0 {
                return Ok(self.full.send(Msg::End).is_ok());
            }
            if self.full.send(Msg::Chunk(buf, n)).is_err() {
                return Ok(false);
            }
        }
    }
}

impl Ahead {
    /// A reader of the next package's decompressed bytes. The previous
    /// package's reader must have been [`Ahead::finish`]ed.
    pub fn next_package(self: &Rc<Self>) -> PackageStream {
        self.ended.set(false);
        PackageStream {
            ahead: self.clone(),
            chunk: Vec::new(),
            len: 0,
            at: 0,
        }
    }

    /// Reads what is left of the current package (a tar's padding after
    /// its end), so the next reader starts at the next package.
    pub fn finish(&self) -> io::Result<()> {
        while let Some((buf, _)) = self.recv()? {
            let _ = self.empty.send(buf);
        }
        Ok(())
    }

    /// The next chunk of the current package and its length, or `None`
    /// at its end.
    fn recv(&self) -> io::Result<Option<(Vec<u8>, usize)>> {
        if self.ended.get() {
            return Ok(None);
        }
        match self.full.recv() {
            Ok(Msg::Chunk(buf, n)) => Ok(Some((buf, n))),
            Ok(Msg::End) => {
                self.ended.set(true);
                Ok(None)
            }
            Ok(Msg::Failed(e)) => {
                self.ended.set(true);
                Err(e)
            }
            Err(_) => {
                self.ended.set(true);
                Err(io::Error::other("the package decoder stopped"))
            }
        }
    }
}

/// One package's decompressed bytes, as the decoder hands them over.
pub struct PackageStream {
    ahead: Rc<Ahead>,
    /// The chunk being read (a buffer of [`CHUNK`] bytes), its length and
    /// how much of it is read.
    chunk: Vec<u8>,
    len: usize,
    at: usize,
}

impl Read for PackageStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.len {
            let Some((buf, n)) = self.ahead.recv()? else {
                return Ok(0);
            };
            let used = std::mem::replace(&mut self.chunk, buf);
            if !used.is_empty() {
                let _ = self.ahead.empty.send(used);
            }
            (self.len, self.at) = (n, 0);
        }
        let n = out.len().min(self.len - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
