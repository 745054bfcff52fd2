//! The layer tar writer: a canonical change list and the child's root in,
//! a deterministic tar stream out.
//!
//! "We can't just dump the changed files into a tar file": a layer must be
//! applicable on its own and identical byte for byte whenever the same
//! change is exported again. So:
//!
//! - **Order.** Entries come in the order of the change list, which
//!   [`emission_order`] defines: depth first, a directory's own entry before
//!   its contents, and in each directory the opaque marker
//!   (`.wh..wh..opq`) first, then whiteouts (`.wh.<name>`, sorted), then
//!   entries sorted by name bytes. A list out of that order is refused.
//! - **Self-contained.** Every directory above a changed path is written
//!   (with its metadata in the child) before it, even when the directory
//!   itself did not change, as docker and containerd do: a layer never
//!   relies on a lower layer for a directory's mode or owner.
//! - **Stable metadata.** mtime is `min(mtime, clamp_mtime)` in whole
//!   seconds (before 1970 becomes 0); no atime or ctime; numeric owners with
//!   empty user and group names. See [`super::header`] for the header bytes.
//! - **Hard links.** The first name of a multi-link inode written in this
//!   layer is written as the file; later names are hard links (`1`) to it.
//!   The canonical list holds every name (see [`crate::diff`]), so a link
//!   never points at a file the layer lacks.
//! - **Whiteouts**: empty regular files, mode 0, owner 0:0, mtime
//!   `clamp_mtime`. A path of the child whose name starts with `.wh.`
//!   cannot be expressed and is an error.
//! - **Files** are streamed; a sparse file is written in full. Sockets are
//!   skipped: tar has no type for them, and they mean nothing once the
//!   process that made them is gone.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::header::{self, Entry};
use super::{fflags, LayerError, TarOptions};
use crate::diff::emission_order;
use crate::diff::meta::{self, FileKind, Meta};
use crate::diff::{Change, ChangeKind};
use crate::fsutil::flags::{self, FileFlags};

/// Size of the output buffer; also the size of the chunks the export
/// pipeline passes between threads.
pub(crate) const CHUNK: usize = 1 << 20;

const WHITEOUT: &[u8] = b".wh.";
const OPAQUE: &[u8] = b".wh..wh..opq";

/// Writes the layer for `changes` (a canonical change list, see
/// [`crate::diff::canonicalize`]), reading the files from `root`, to `out`,
/// and returns `out`.
pub fn write_tar<W: Write>(
    root: &Path,
    changes: &[Change],
    opts: &TarOptions,
    out: W,
) -> Result<W, LayerError> {
    write_tar_with_flags(root, changes, opts, flags::host(), out)
}

/// [`write_tar`], reading file flags through `file_flags` rather than the
/// host's.
pub fn write_tar_with_flags<W: Write>(
    root: &Path,
    changes: &[Change],
    opts: &TarOptions,
    file_flags: &dyn FileFlags,
    out: W,
) -> Result<W, LayerError> {
    let mut w = Writer {
        root,
        file_flags,
        clamp: opts.clamp_mtime,
        out: Out::new(out),
        dirs: Vec::new(),
        links: HashMap::new(),
        buf: Vec::with_capacity(4 * header::BLOCK),
    };
    let mut prev: Option<&Change> = None;
    for change in changes {
        if let Some(p) = prev {
            if emission_order(p, change) != std::cmp::Ordering::Less {
                return Err(LayerError::Order {
                    prev: p.path.clone(),
                    next: change.path.clone(),
                });
            }
        }
        w.change(change)?;
        prev = Some(change);
    }
    w.out
        .put(&[0u8; 2 * header::BLOCK])
        .map_err(LayerError::Write)?;
    w.out.into_inner().map_err(LayerError::Write)
}

struct Writer<'a, W: Write> {
    root: &'a Path,
    file_flags: &'a dyn FileFlags,
    clamp: u64,
    out: Out<W>,
    /// The directories written so far on the way to the current path: a
    /// chain from the top, `dirs[i]` having `i + 1` components.
    dirs: Vec<PathBuf>,
    /// First name written for each multi-link inode.
    links: HashMap<(u64, u64), Vec<u8>>,
    buf: Vec<u8>,
}

impl<W: Write> Writer<'_, W> {
    fn change(&mut self, change: &Change) -> Result<(), LayerError> {
        let path = &change.path;
        let parent = path.parent().unwrap_or(Path::new(""));
        self.enter(parent)?;
        match change.kind {
            ChangeKind::Deleted => {
                let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
                self.marker(parent, &[WHITEOUT, name].concat())
            }
            ChangeKind::Opaque => {
                let m = self.lstat(path)?;
                if !m.is_dir() {
                    return Err(LayerError::Unrepresentable {
                        path: path.clone(),
                        reason: "an opaque change needs a directory",
                    });
                }
                self.entry(path, &m)?;
                self.marker(path, OPAQUE)
            }
            ChangeKind::Added | ChangeKind::Modified => {
                let m = self.lstat(path)?;
                self.entry(path, &m)
            }
        }
    }

    /// Writes the directories from the top down to `dir` that are not
    /// written yet.
    fn enter(&mut self, dir: &Path) -> Result<(), LayerError> {
        while self.dirs.last().is_some_and(|top| !dir.starts_with(top)) {
            self.dirs.pop();
        }
        let wanted: Vec<&Path> = dir
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .collect();
        for ancestor in wanted.into_iter().rev().skip(self.dirs.len()) {
            let m = self.lstat(ancestor)?;
            if !m.is_dir() {
                return Err(LayerError::Unrepresentable {
                    path: ancestor.to_path_buf(),
                    reason: "a change lies under it, but it is not a directory",
                });
            }
            self.entry(ancestor, &m)?;
        }
        Ok(())
    }

    fn lstat(&self, rel: &Path) -> Result<Meta, LayerError> {
        let host = self.root.join(rel);
        meta::lstat(&host).map_err(LayerError::fs("read the metadata of", host))
    }

    fn mtime(&self, m: &Meta) -> u64 {
        u64::try_from(m.mtime).unwrap_or(0).min(self.clamp)
    }

    /// Writes a whiteout or opaque marker named `name` in `dir`.
    fn marker(&mut self, dir: &Path, name: &[u8]) -> Result<(), LayerError> {
        let mut path = dir.as_os_str().as_bytes().to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        let e = Entry {
            path: &path,
            typeflag: header::REGULAR,
            mtime: self.clamp,
            ..Entry::default()
        };
        self.header(&e)
    }

    fn header(&mut self, e: &Entry<'_>) -> Result<(), LayerError> {
        self.buf.clear();
        header::encode(e, &mut self.buf);
        self.out.put(&self.buf).map_err(LayerError::Write)
    }

    /// Writes the entry for the file at `rel`, described by `m`.
    fn entry(&mut self, rel: &Path, m: &Meta) -> Result<(), LayerError> {
        let name = rel.file_name().map(|n| n.as_bytes()).unwrap_or_default();
        if name.starts_with(WHITEOUT) {
            return Err(LayerError::Unrepresentable {
                path: rel.to_path_buf(),
                reason: "names starting with `.wh.` mean whiteouts in a layer",
            });
        }
        if m.kind == FileKind::Socket {
            return Ok(());
        }
        let host = self.root.join(rel);
        let mut path = rel.as_os_str().as_bytes().to_vec();
        let mut e = Entry {
            path: &[],
            typeflag: header::REGULAR,
            mode: m.mode,
            uid: m.uid.into(),
            gid: m.gid.into(),
            mtime: self.mtime(m),
            ..Entry::default()
        };
        if m.is_multi_link() {
            if let Some(first) = self.links.get(&(m.dev, m.ino)) {
                // A link shares the inode's xattrs and flags; the file carries them.
                let first = first.clone();
                e.typeflag = header::HARD_LINK;
                e.linkname = &first;
                e.path = &path;
                return self.header(&e);
            }
            self.links.insert((m.dev, m.ino), path.clone());
        }
        let xattrs = meta::xattrs(&host)
            .map_err(LayerError::fs("read the extended attributes of", &host))?;
        let flags = self
            .file_flags
            .get(&host, m.flags)
            .map_err(LayerError::fs("read the file flags of", &host))?;
        let flags = fflags::to_text(flags);
        e.xattrs = &xattrs;
        e.fflags = flags.as_deref();
        let target;
        match m.kind {
            FileKind::Socket => {}
            FileKind::Dir => {
                path.push(b'/');
                e.typeflag = header::DIRECTORY;
                self.dirs.push(rel.to_path_buf());
            }
            FileKind::Regular => e.size = m.size,
            FileKind::Symlink => {
                target = fs::read_link(&host).map_err(LayerError::fs("read the symlink", &host))?;
                e.typeflag = header::SYMLINK;
                e.linkname = target.as_os_str().as_bytes();
            }
            FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo => {
                e.typeflag = match m.kind {
                    FileKind::CharDevice => header::CHAR_DEVICE,
                    FileKind::BlockDevice => header::BLOCK_DEVICE,
                    _ => header::FIFO,
                };
                if m.kind != FileKind::Fifo {
                    e.devmajor = meta::dev_major(m.rdev);
                    e.devminor = meta::dev_minor(m.rdev);
                }
            }
        }
        e.path = &path;
        self.header(&e)?;
        if m.kind == FileKind::Regular {
            self.content(&host, m)?;
        }
        Ok(())
    }

    /// Streams exactly `m.size` bytes of the file and the block padding.
    fn content(&mut self, host: &Path, m: &Meta) -> Result<(), LayerError> {
        let changed = || LayerError::Changed {
            path: host.to_path_buf(),
        };
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(host)
            .map_err(LayerError::fs("open", host))?;
        let now = file
            .metadata()
            .map_err(LayerError::fs("read the metadata of", host))?;
        if now.ino() != m.ino || now.dev() != m.dev || now.size() != m.size {
            return Err(changed());
        }
        let mut file = file;
        let copied = self.out.fill_from(&mut file, m.size).map_err(|e| match e {
            Side::Read(e) => LayerError::fs("read", host)(e),
            Side::Write(e) => LayerError::Write(e),
        })?;
        if copied != m.size {
            return Err(changed());
        }
        let pad = header::padding(m.size);
        self.out
            .put(&[0u8; header::BLOCK][..pad])
            .map_err(LayerError::Write)
    }
}

/// The output buffer: [`CHUNK`] bytes, written to the sink whole. File
/// content is read straight into it (no intermediate copy, and no
/// zero-filling of a fresh buffer for every file, which `io::copy` into a
/// `BufWriter` costs).
struct Out<W> {
    inner: W,
    buf: Box<[u8]>,
    filled: usize,
}

/// Which side of a copy failed.
enum Side {
    Read(io::Error),
    Write(io::Error),
}

impl<W: Write> Out<W> {
    fn new(inner: W) -> Self {
        Out {
            inner,
            buf: vec![0u8; CHUNK].into_boxed_slice(),
            filled: 0,
        }
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        let filled = std::mem::take(&mut self.filled);
        self.inner.write_all(&self.buf[..filled])
    }

    fn put(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            if self.filled == self.buf.len() {
                self.flush_buf()?;
            }
            let n = data.len().min(self.buf.len() - self.filled);
            self.buf[self.filled..self.filled + n].copy_from_slice(&data[..n]);
            self.filled += n;
            data = &data[n..];
        }
        Ok(())
    }

    /// Reads up to `len` bytes of `r` into the stream; returns how many
    /// there were (fewer if `r` ended early).
    fn fill_from(&mut self, r: &mut impl Read, len: u64) -> Result<u64, Side> {
        let mut copied = 0;
        while copied < len {
            if self.filled == self.buf.len() {
                self.flush_buf().map_err(Side::Write)?;
            }
            let room = self.buf.len() - self.filled;
            let want = usize::try_from(len - copied).map_or(room, |left| left.min(room));
            match r.read(&mut self.buf[self.filled..self.filled + want]) {
                Ok(0) => break,
                Ok(n) => {
                    self.filled += n;
                    copied += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Side::Read(e)),
            }
        }
        Ok(copied)
    }

    fn into_inner(mut self) -> io::Result<W> {
        self.flush_buf()?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}
