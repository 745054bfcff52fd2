//! Comparing two layer blobs entry by entry: the first path whose header
//! or content differs (`jbuild verify` names it when a rebuild's layer is
//! not the image's).
//!
//! jbuild writes entries in canonical order, so two layers of the same
//! tree walk side by side; where the paths part, the one that sorts first
//! is the one the other layer lacks.

use std::io::{self, Read};

use super::compress::decompress;
use super::reader::{Header, TarReader};
use super::LayerError;
use crate::digest::{Digest, HashingWriter};

/// The first difference between two layers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileDifference {
    /// The entry's path as the archives write it.
    pub path: String,
    /// How it differs, in words (`content`, `mode 0644 → 0600`, `only in
    /// the first layer`, ...).
    pub what: String,
}

/// An entry read for comparison: its header and the sha256 of its content.
struct Entry {
    header: Header,
    content: Digest,
}

fn next_entry<R: Read>(tar: &mut TarReader<R>) -> Result<Option<Entry>, LayerError> {
    let Some(header) = tar.next()? else {
        return Ok(None);
    };
    let mut h = HashingWriter::new(io::sink());
    io::copy(&mut tar.content(), &mut h).map_err(LayerError::Read)?;
    let (content, _, _) = h.finish();
    Ok(Some(Entry { header, content }))
}

/// The first entry where layer `a` (media type `a_type`) and layer `b`
/// differ, or `None` when every entry is the same. Streams both: only two
/// headers are held at a time.
pub fn first_difference(
    a_type: &str,
    a: impl Read,
    b_type: &str,
    b: impl Read,
) -> Result<Option<FileDifference>, LayerError> {
    let mut ta = TarReader::new(decompress(a_type, a)?);
    let mut tb = TarReader::new(decompress(b_type, b)?);
    let (mut ea, mut eb) = (next_entry(&mut ta)?, next_entry(&mut tb)?);
    loop {
        let (x, y) = match (&ea, &eb) {
            (None, None) => return Ok(None),
            (Some(x), None) => return Ok(Some(only(x, "first"))),
            (None, Some(y)) => return Ok(Some(only(y, "second"))),
            (Some(x), Some(y)) => (x, y),
        };
        if x.header.path != y.header.path {
            return Ok(Some(if x.header.path < y.header.path {
                only(x, "first")
            } else {
                only(y, "second")
            }));
        }
        if let Some(what) = header_difference(x, y) {
            return Ok(Some(FileDifference {
                path: text(&x.header.path),
                what,
            }));
        }
        ea = next_entry(&mut ta)?;
        eb = next_entry(&mut tb)?;
    }
}

fn only(e: &Entry, which: &str) -> FileDifference {
    FileDifference {
        path: text(&e.header.path),
        what: format!("only in the {which} layer"),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// How two entries of one path differ, first by what matters most.
fn header_difference(x: &Entry, y: &Entry) -> Option<String> {
    let (a, b) = (&x.header, &y.header);
    let kind = |t: u8| match t {
        b'0' => "file",
        b'1' => "hard link",
        b'2' => "symlink",
        b'3' => "character device",
        b'4' => "block device",
        b'5' => "directory",
        b'6' => "fifo",
        _ => "entry",
    };
    if a.typeflag != b.typeflag {
        return Some(format!("type: {} → {}", kind(a.typeflag), kind(b.typeflag)));
    }
    if a.size != b.size {
        return Some(format!("content: {} → {} bytes", a.size, b.size));
    }
    if x.content != y.content {
        return Some("content: same size, other bytes".into());
    }
    if a.linkname != b.linkname {
        return Some(format!(
            "link target: `{}` → `{}`",
            text(&a.linkname),
            text(&b.linkname)
        ));
    }
    if a.mode != b.mode {
        return Some(format!("mode: {:04o} → {:04o}", a.mode, b.mode));
    }
    if (a.uid, a.gid) != (b.uid, b.gid) {
        return Some(format!("owner: {}:{} → {}:{}", a.uid, a.gid, b.uid, b.gid));
    }
    if (a.mtime, a.mtime_nsec) != (b.mtime, b.mtime_nsec) {
        return Some(format!("mtime: {} → {}", a.mtime, b.mtime));
    }
    if (a.devmajor, a.devminor) != (b.devmajor, b.devminor) {
        return Some("device numbers".into());
    }
    if a.xattrs != b.xattrs {
        return Some("extended attributes".into());
    }
    if a.fflags != b.fflags {
        return Some(format!(
            "file flags: {} → {}",
            a.fflags.as_deref().unwrap_or("none"),
            b.fflags.as_deref().unwrap_or("none")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::MEDIA_TYPE_TAR;

    /// A plain tar of `(path, mode, content)` files, written by hand.
    fn tar(files: &[(&str, u32, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (path, mode, content) in files {
            let mut h = [0u8; 512];
            h[..path.len()].copy_from_slice(path.as_bytes());
            let octal = |v: u64, w: usize| format!("{v:0w$o}\0", w = w - 1);
            h[100..108].copy_from_slice(octal(u64::from(*mode), 8).as_bytes());
            h[108..116].copy_from_slice(octal(0, 8).as_bytes());
            h[116..124].copy_from_slice(octal(0, 8).as_bytes());
            h[124..136].copy_from_slice(octal(content.len() as u64, 12).as_bytes());
            h[136..148].copy_from_slice(octal(0, 12).as_bytes());
            h[156] = b'0';
            h[257..263].copy_from_slice(b"ustar\0");
            h[263..265].copy_from_slice(b"00");
            h[148..156].copy_from_slice(b"        ");
            let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
            h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
            out.extend_from_slice(&h);
            out.extend_from_slice(content);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
        out.resize(out.len() + 1024, 0);
        out
    }

    fn diff(a: &[u8], b: &[u8]) -> Option<FileDifference> {
        first_difference(MEDIA_TYPE_TAR, a, MEDIA_TYPE_TAR, b).unwrap()
    }

    #[test]
    fn same_layers_have_no_difference() {
        let a = tar(&[("etc/a", 0o644, b"one"), ("etc/b", 0o644, b"two")]);
        assert_eq!(diff(&a, &a), None);
    }

    #[test]
    fn names_the_first_file_whose_content_differs() {
        let a = tar(&[("a", 0o644, b"x"), ("b", 0o644, b"one"), ("c", 0o644, b"1")]);
        let b = tar(&[("a", 0o644, b"x"), ("b", 0o644, b"two"), ("c", 0o644, b"2")]);
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.path, "b");
        assert_eq!(d.what, "content: same size, other bytes");
    }

    #[test]
    fn names_modes_sizes_and_missing_files() {
        let a = tar(&[("a", 0o644, b"x")]);
        let b = tar(&[("a", 0o600, b"x")]);
        assert_eq!(diff(&a, &b).unwrap().what, "mode: 0644 → 0600");
        let b = tar(&[("a", 0o644, b"xy")]);
        assert_eq!(diff(&a, &b).unwrap().what, "content: 1 → 2 bytes");
        let b = tar(&[("a", 0o644, b"x"), ("b", 0o644, b"")]);
        let d = diff(&a, &b).unwrap();
        assert_eq!(
            (d.path.as_str(), d.what.as_str()),
            ("b", "only in the second layer")
        );
        let b = tar(&[("0", 0o644, b""), ("a", 0o644, b"x")]);
        assert_eq!(diff(&a, &b).unwrap().path, "0");
    }
}
