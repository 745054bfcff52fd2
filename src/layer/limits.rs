//! How much of a layer jbuild is willing to read: the bounds that stop a
//! hostile (or broken) layer from filling the disk or the memory.
//!
//! A layer blob is small on the wire and may be huge once decompressed (a
//! "decompression bomb": gigabytes of zeros compress to a few megabytes).
//! So the *uncompressed* stream is counted as it is read, and reading stops
//! with an error once it passes [`Limits::max_size`]; an entry whose header
//! alone says it is bigger than that is refused before any byte of it is
//! written. What the applier keeps in memory grows with the number of
//! entries and the length of their paths, so both are bounded too, and an
//! extended header (PAX records, a GNU long name) is read into memory only
//! up to [`Limits::max_header`] bytes.

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;

/// The bounds one layer must stay within. The defaults suit jail images
/// (a FreeBSD base is about 1 GiB and 30,000 entries); every one can be
/// raised in the configuration file's `[layers]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the uncompressed tar stream, all of it (`max_size`).
    pub max_size: u64,
    /// Entries in the archive, whiteouts included (`max_entries`).
    pub max_entries: u64,
    /// Bytes of one extended header: PAX records, a GNU long name or long
    /// link name (`max_header`).
    pub max_header: u64,
    /// Bytes of an entry's path, and of a link's target (`max_path`).
    pub max_path: usize,
}

/// Bytes of one path component: what every filesystem jbuild writes to
/// allows (`NAME_MAX`).
pub const MAX_NAME: usize = 255;

/// Bytes of all the paths of one layer together, at least: the applier
/// remembers each path it wrote, so [`Limits::max_path_bytes`] bounds its
/// memory whatever `max_path` is.
pub const MAX_PATH_BYTES: u64 = 256 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_size: 8 << 30,
            max_entries: 1_000_000,
            max_header: 1 << 20,
            max_path: 4096,
        }
    }
}

impl Limits {
    /// Bytes of all the paths of one layer together: 256 bytes an entry,
    /// and at least [`MAX_PATH_BYTES`]; raising `max_entries` raises it.
    pub fn max_path_bytes(&self) -> u64 {
        MAX_PATH_BYTES.max(self.max_entries.saturating_mul(256))
    }

    /// The limits the configuration file's `[layers]` section sets, the
    /// defaults for what it leaves out.
    pub fn from_settings(s: &crate::config::LayerSettings) -> Limits {
        let d = Limits::default();
        Limits {
            max_size: s.max_size.unwrap_or(d.max_size),
            max_entries: s.max_entries.unwrap_or(d.max_entries),
            max_header: s.max_header.unwrap_or(d.max_header),
            max_path: s.max_path.unwrap_or(d.max_path),
        }
    }
}

/// A reader that gives at most `left` bytes and then fails, noting in
/// `tripped` that it did, so the caller can tell a limit from a real read
/// error whatever layer of readers the error passed through.
pub(crate) struct Capped<R> {
    inner: R,
    left: u64,
    tripped: Rc<Cell<bool>>,
}

impl<R: Read> Capped<R> {
    pub(crate) fn new(inner: R, max: u64) -> (Self, Rc<Cell<bool>>) {
        let tripped = Rc::new(Cell::new(false));
        let capped = Capped {
            inner,
            left: max,
            tripped: tripped.clone(),
        };
        (capped, tripped)
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte more than allowed tells "exactly at the limit" from "over".
        let want = buf
            .len()
            .min(usize::try_from(self.left.saturating_add(1)).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n as u64 > self.left {
            self.tripped.set(true);
            return Err(io::Error::other("the layer is larger than allowed"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// `n` bytes in the largest binary unit that divides it exactly
/// (`8 GiB`), else in bytes, for messages.
pub fn human(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_allows_exactly_the_limit() {
        let data = [7u8; 100];
        let (mut r, tripped) = Capped::new(&data[..], 100);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!((out.len(), tripped.get()), (100, false));

        let (mut r, tripped) = Capped::new(&data[..], 99);
        assert!(r.read_to_end(&mut Vec::new()).is_err());
        assert!(tripped.get());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(8 << 30), "8 GiB");
        assert_eq!(human(64 << 20), "64 MiB");
        assert_eq!(human(1000), "1000 bytes");
        assert_eq!(human(3 << 10), "3 KiB");
    }
}
