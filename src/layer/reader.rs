//! Reading a tar stream that may be hostile.
//!
//! Reads ustar, PAX (`x` records apply to the next entry; `g` global
//! records are read and ignored) and GNU (`L` long names, `K` long link
//! names) headers, verifying every checksum. Extended headers are the only
//! thing held in memory, and they are limited to [`META_MAX`] bytes (or
//! what [`TarReader::with_max_header`] sets); entry
//! content is streamed through [`TarReader::content`]. Sparse files (GNU `S`
//! entries or PAX `GNU.sparse.*` records) are refused rather than guessed
//! at: no layer writer jbuild knows produces them.

use std::io::{self, Read};

use super::header::{self, BLOCK};
use super::{EntryProblem, LayerError};

/// The most bytes one extended header (PAX records, a GNU long name) may
/// have.
pub const META_MAX: u64 = 1 << 20;

/// One entry, with every extended header applied.
#[derive(Debug, Default)]
pub struct Header {
    pub path: Vec<u8>,
    pub linkname: Vec<u8>,
    /// One of the `header` type flags; `\0` and `7` are reported as `0`,
    /// and an old-style `\0` entry whose name ends in `/` as `5`.
    pub typeflag: u8,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub devmajor: u64,
    pub devminor: u64,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub fflags: Option<String>,
    /// The owner's and group's names (ustar `uname`/`gname`, PAX
    /// `uname`/`gname`): layers go by the numbers, FreeBSD packages by
    /// these (`pkg::extract` resolves them in the image).
    pub uname: Vec<u8>,
    pub gname: Vec<u8>,
}

pub struct TarReader<R> {
    inner: R,
    /// Bytes consumed so far (for messages).
    offset: u64,
    /// Unread content and padding of the current entry.
    remaining: u64,
    padding: u64,
    /// The most bytes one extended header may have.
    max_header: u64,
}

impl<R: Read> TarReader<R> {
    pub fn new(inner: R) -> Self {
        TarReader {
            inner,
            offset: 0,
            remaining: 0,
            padding: 0,
            max_header: META_MAX,
        }
    }

    /// Extended headers larger than `max` bytes are refused unread.
    pub fn with_max_header(mut self, max: u64) -> Self {
        self.max_header = max;
        self
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The content of the entry last returned by [`next`](Self::next). A
    /// stream that ends early gives an `UnexpectedEof` error.
    pub fn content(&mut self) -> Content<'_, R> {
        Content { r: self }
    }

    /// The next entry, or `None` at the end-of-archive marker. Content left
    /// unread of the previous entry is skipped.
    #[allow(clippy::should_implement_trait)] // fallible: not an Iterator
    pub fn next(&mut self) -> Result<Option<Header>, LayerError> {
        let mut pax: Option<Vec<u8>> = None;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        loop {
            self.skip_rest()?;
            let at = self.offset;
            let mut block = [0u8; BLOCK];
            match read_full(&mut self.inner, &mut block).map_err(LayerError::Read)? {
                0 => {
                    return Err(LayerError::Truncated(
                        "there is no end-of-archive marker".into(),
                    ))
                }
                n if n < BLOCK => {
                    return Err(LayerError::Truncated(format!(
                        "inside the header at byte {at}"
                    )))
                }
                _ => self.offset += BLOCK as u64,
            }
            if block.iter().all(|&b| b == 0) {
                if pax.is_some() || long_name.is_some() || long_link.is_some() {
                    return Err(LayerError::Malformed {
                        offset: at,
                        reason: "the archive ends right after an extended header".into(),
                    });
                }
                return Ok(None);
            }
            let malformed = |reason: &str| LayerError::Malformed {
                offset: at,
                reason: reason.to_string(),
            };
            if !header::checksum_ok(&block) {
                return Err(malformed("header checksum mismatch"));
            }
            let size = header::parse_numeric(&block[124..136])
                .ok_or_else(|| malformed("bad size field"))?;
            self.remaining = size;
            self.padding = header::padding(size) as u64;
            let typeflag = block[156];
            match typeflag {
                header::PAX_LOCAL
                | header::PAX_GLOBAL
                | header::GNU_LONG_NAME
                | header::GNU_LONG_LINK => {
                    if size > self.max_header {
                        return Err(malformed(&format!(
                            "an extended header of {size} bytes, more than the {} allowed \
                             (`max_header` under [layers])",
                            super::limits::human(self.max_header)
                        )));
                    }
                    let mut data = vec![0u8; size as usize];
                    self.content()
                        .read_exact(&mut data)
                        .map_err(|e| self.truncated(e, b"extended header"))?;
                    let slot = match typeflag {
                        header::PAX_LOCAL => &mut pax,
                        header::GNU_LONG_NAME => &mut long_name,
                        header::GNU_LONG_LINK => &mut long_link,
                        _ => continue,
                    };
                    if slot.is_some() {
                        return Err(malformed("two extended headers of one kind for one entry"));
                    }
                    *slot = Some(data);
                    continue;
                }
                _ => {}
            }
            let mut h = parse_ustar(&block).ok_or_else(|| malformed("bad numeric field"))?;
            h.size = size;
            if let Some(name) = long_name {
                h.path = trim_nuls(name);
            }
            if let Some(link) = long_link {
                h.linkname = trim_nuls(link);
            }
            if let Some(data) = pax {
                let records =
                    header::parse_pax(&data).ok_or_else(|| malformed("bad PAX records"))?;
                apply_pax(&mut h, &records).map_err(|p| LayerError::entry(&h.path, p))?;
                self.remaining = h.size;
                self.padding = header::padding(h.size) as u64;
            }
            return Ok(Some(h));
        }
    }

    fn skip_rest(&mut self) -> Result<(), LayerError> {
        let want = self.remaining + self.padding;
        if want > 0 {
            let skipped = io::copy(&mut (&mut self.inner).take(want), &mut io::sink())
                .map_err(LayerError::Read)?;
            self.offset += skipped;
            if skipped < want {
                return Err(LayerError::Truncated(format!(
                    "inside an entry's content at byte {}",
                    self.offset
                )));
            }
        }
        self.remaining = 0;
        self.padding = 0;
        Ok(())
    }

    /// Maps an error reading content: an early end is a truncated layer.
    pub fn truncated(&self, e: io::Error, entry: &[u8]) -> LayerError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            LayerError::Truncated(format!("inside `{}`", String::from_utf8_lossy(entry)))
        } else {
            LayerError::Read(e)
        }
    }
}

/// The content of one entry.
pub struct Content<'a, R> {
    r: &'a mut TarReader<R>,
}

impl<R: Read> Read for Content<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.r.remaining == 0 || buf.is_empty() {
            return Ok(0);
        }
        let max = buf
            .len()
            .min(usize::try_from(self.r.remaining).unwrap_or(usize::MAX));
        let n = self.r.inner.read(&mut buf[..max])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.r.remaining -= n as u64;
        self.r.offset += n as u64;
        Ok(n)
    }
}

/// Reads until `buf` is full or the stream ends; the bytes read.
pub(super) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn trim_nuls(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// The fields of a ustar (or GNU, or v7) header block.
fn parse_ustar(b: &[u8; BLOCK]) -> Option<Header> {
    let posix = &b[257..263] == b"ustar\0";
    let gnu = &b[257..263] == b"ustar ";
    let mut path = header::field_str(&b[0..100]).to_vec();
    if posix {
        let prefix = header::field_str(&b[345..500]);
        if !prefix.is_empty() {
            path = [prefix, b"/", &path].concat();
        }
    }
    let mut typeflag = b[156];
    if typeflag == 0 && path.ends_with(b"/") {
        typeflag = header::DIRECTORY;
    } else if typeflag == 0 || typeflag == header::CONTIGUOUS {
        typeflag = header::REGULAR;
    }
    let device = typeflag == header::CHAR_DEVICE || typeflag == header::BLOCK_DEVICE;
    let (devmajor, devminor) = if device && (posix || gnu) {
        (
            header::parse_numeric(&b[329..337])?,
            header::parse_numeric(&b[337..345])?,
        )
    } else {
        (0, 0)
    };
    Some(Header {
        path,
        linkname: header::field_str(&b[157..257]).to_vec(),
        typeflag,
        mode: (header::parse_numeric(&b[100..108])? & 0o7777) as u32,
        uid: header::parse_numeric(&b[108..116])?,
        gid: header::parse_numeric(&b[116..124])?,
        // Pre-1970 times (negative base-256) are not worth refusing a layer.
        mtime: header::parse_numeric(&b[136..148])
            .map_or(0, |t| i64::try_from(t).unwrap_or(i64::MAX)),
        devmajor,
        devminor,
        uname: if posix || gnu {
            header::field_str(&b[265..297]).to_vec()
        } else {
            Vec::new()
        },
        gname: if posix || gnu {
            header::field_str(&b[297..329]).to_vec()
        } else {
            Vec::new()
        },
        ..Header::default()
    })
}

/// Applies the PAX records that jbuild honours; others are ignored.
fn apply_pax(h: &mut Header, records: &[(&[u8], &[u8])]) -> Result<(), EntryProblem> {
    let bad = |what: &str| EntryProblem::Unsupported(format!("malformed PAX record `{what}`"));
    let number = |v: &[u8], what: &str| -> Result<u64, EntryProblem> {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(what))
    };
    for &(key, value) in records {
        match key {
            b"path" if !value.is_empty() => h.path = value.to_vec(),
            b"linkpath" if !value.is_empty() => h.linkname = value.to_vec(),
            b"size" => h.size = number(value, "size")?,
            b"uid" => h.uid = number(value, "uid")?,
            b"gid" => h.gid = number(value, "gid")?,
            b"uname" => h.uname = value.to_vec(),
            b"gname" => h.gname = value.to_vec(),
            b"SCHILY.devmajor" => h.devmajor = number(value, "SCHILY.devmajor")?,
            b"SCHILY.devminor" => h.devminor = number(value, "SCHILY.devminor")?,
            b"mtime" => (h.mtime, h.mtime_nsec) = parse_time(value).ok_or_else(|| bad("mtime"))?,
            b"SCHILY.fflags" => h.fflags = Some(String::from_utf8_lossy(value).into_owned()),
            _ if key.starts_with(b"SCHILY.xattr.") => {
                h.xattrs
                    .push((key[b"SCHILY.xattr.".len()..].to_vec(), value.to_vec()));
            }
            _ if key.starts_with(b"GNU.sparse.") => {
                return Err(EntryProblem::Unsupported(
                    "sparse file (GNU.sparse PAX records)".into(),
                ));
            }
            _ => {}
        }
    }
    if h.path.contains(&0) || h.linkname.contains(&0) {
        return Err(bad("path"));
    }
    Ok(())
}

/// `[-]seconds[.fraction]` into seconds and nanoseconds.
fn parse_time(v: &[u8]) -> Option<(i64, u32)> {
    let s = std::str::from_utf8(v).ok()?;
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let secs: i64 = int.parse().ok()?;
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    let nsec: u32 = digits.parse().ok()?;
    if int.starts_with('-') && nsec > 0 {
        // -1.5 is 1.5 s before the epoch: -2 s + 0.5 s.
        return Some((secs - 1, 1_000_000_000 - nsec));
    }
    Some((secs, nsec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::fflags;

    #[test]
    fn times() {
        assert_eq!(parse_time(b"1700000000"), Some((1_700_000_000, 0)));
        assert_eq!(parse_time(b"1.5"), Some((1, 500_000_000)));
        assert_eq!(parse_time(b"1.1234567891"), Some((1, 123_456_789)));
        assert_eq!(parse_time(b"-1.5"), Some((-2, 500_000_000)));
        assert_eq!(parse_time(b"-0.25"), Some((-1, 750_000_000)));
        assert_eq!(parse_time(b"x"), None);
    }

    #[test]
    fn reads_back_what_the_writer_encodes() {
        let xattrs = vec![(std::ffi::OsString::from("user.k"), b"v\nw".to_vec())];
        let long = [&b"d/"[..], &[b'n'; 150][..]].concat();
        let mut bytes = Vec::new();
        let e = header::Entry {
            path: &long,
            typeflag: header::REGULAR,
            mode: 0o640,
            uid: 1 << 30,
            size: 3,
            mtime: 7,
            xattrs: &xattrs,
            fflags: Some("schg,uappnd"),
            ..header::Entry::default()
        };
        header::encode(&e, &mut bytes);
        bytes.extend_from_slice(b"abc");
        header::pad(&mut bytes);
        bytes.extend_from_slice(&[0u8; 1024]);

        let mut r = TarReader::new(&bytes[..]);
        let h = r.next().unwrap().unwrap();
        assert_eq!(
            (h.path.as_slice(), h.mode, h.uid, h.size, h.mtime),
            (&long[..], 0o640, 1 << 30, 3, 7)
        );
        assert_eq!(h.xattrs, [(b"user.k".to_vec(), b"v\nw".to_vec())]);
        let flags = fflags::from_text(h.fflags.as_deref().unwrap());
        assert_eq!(flags, fflags::SF_IMMUTABLE | fflags::UF_APPEND);
        let mut content = Vec::new();
        r.content().read_to_end(&mut content).unwrap();
        assert_eq!(content, b"abc");
        assert!(r.next().unwrap().is_none());
    }
}
