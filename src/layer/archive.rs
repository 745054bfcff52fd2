//! Tar archives as `ADD` finds them in a build context: plain, or
//! compressed with gzip, bzip2, xz or zstd. What a file is comes from its
//! first bytes, never its name (as Docker tells them): a compressed file
//! whose content does not start with a tar header is no archive, and is
//! copied as it is.
//!
//! An archive is extracted with the layer applier ([`super::apply`](mod@super::apply)), so
//! it gets everything a hostile layer gets: no entry leaves the directory
//! it is extracted into (`..`, absolute paths, symlinks and hard links
//! that lead out are refused), no entry is written through a symlink the
//! archive made, devices are refused, and [`Limits`] bound its size,
//! entries and paths. Whiteout names (`.wh.*`) mean nothing in an archive
//! extracted into an empty directory: they are left out.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::header::{self, BLOCK};
use super::reader::read_full;
use super::{apply_with_limits, ApplyOptions, ApplyStats, LayerError, Limits, MEDIA_TYPE_TAR};

/// How an archive's tar stream is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveFormat {
    Tar,
    Gzip,
    Bzip2,
    Xz,
    Zstd,
}

impl ArchiveFormat {
    /// The compression `head` (a file's first bytes) starts with, or a
    /// plain stream (`Tar`) when it starts with none.
    fn compression(head: &[u8]) -> ArchiveFormat {
        if head.starts_with(&[0x1f, 0x8b]) {
            ArchiveFormat::Gzip
        } else if head.starts_with(b"BZh") {
            ArchiveFormat::Bzip2
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            ArchiveFormat::Xz
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            ArchiveFormat::Zstd
        } else {
            ArchiveFormat::Tar
        }
    }

    /// The name users know it by.
    pub fn name(self) -> &'static str {
        match self {
            ArchiveFormat::Tar => "tar",
            ArchiveFormat::Gzip => "tar.gz",
            ArchiveFormat::Bzip2 => "tar.bz2",
            ArchiveFormat::Xz => "tar.xz",
            ArchiveFormat::Zstd => "tar.zst",
        }
    }
}

/// The uncompressed stream of `r`, compressed as `format` says.
pub fn decoder<'r, R: Read + 'r>(format: ArchiveFormat, r: R) -> io::Result<Box<dyn Read + 'r>> {
    let r = io::BufReader::with_capacity(64 * 1024, r);
    Ok(match format {
        ArchiveFormat::Tar => Box::new(r),
        ArchiveFormat::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        ArchiveFormat::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(r)),
        ArchiveFormat::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(r)),
        ArchiveFormat::Zstd => Box::new(zstd::Decoder::with_buffer(r)?),
    })
}

/// Whether `file` is a tar archive, and how it is compressed: its first
/// block, once uncompressed, must be a tar header whose checksum holds.
/// Reads at most a few blocks and leaves the file at its start.
pub fn sniff(file: &mut File) -> io::Result<Option<ArchiveFormat>> {
    let mut head = [0u8; 8];
    let n = read_full(file, &mut head)?;
    file.seek(SeekFrom::Start(0))?;
    let format = ArchiveFormat::compression(&head[..n]);
    let mut block = [0u8; BLOCK];
    // A stream that is not what its magic said is no archive.
    let got = decoder(format, &mut *file).and_then(|mut d| read_full(&mut d, &mut block));
    file.seek(SeekFrom::Start(0))?;
    match got {
        Ok(BLOCK) if block.iter().any(|&b| b != 0) && header::checksum_ok(&block) => {
            Ok(Some(format))
        }
        _ => Ok(None),
    }
}

/// Extracts the archive `file` (of `format`, see [`sniff`]) into the
/// directory `dir`, as a hostile layer is applied, within `limits`.
/// Setuid files keep their bits (the archive is the recipe's own);
/// devices are refused.
pub fn extract(
    file: File,
    format: ArchiveFormat,
    dir: &Path,
    limits: &Limits,
) -> Result<ApplyStats, LayerError> {
    let opts = ApplyOptions {
        allow_setuid: true,
        diff_id: false,
        ..ApplyOptions::default()
    };
    let stream = decoder(format, file).map_err(LayerError::Read)?;
    apply_with_limits(stream, MEDIA_TYPE_TAR, dir, &opts, limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tar_of(name: &str, content: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let e = header::Entry {
            path: name.as_bytes(),
            typeflag: header::REGULAR,
            mode: 0o644,
            size: content.len() as u64,
            ..header::Entry::default()
        };
        header::encode(&e, &mut out);
        out.extend_from_slice(content);
        header::pad(&mut out);
        out.extend_from_slice(&[0u8; 2 * BLOCK]);
        out
    }

    fn file_of(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f
    }

    #[test]
    fn tells_archives_by_content_in_every_compression() {
        let tar = tar_of("a.txt", b"hello");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar).unwrap();
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        bz.write_all(&tar).unwrap();
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(&tar).unwrap();
        let zst = zstd::encode_all(&tar[..], 1).unwrap();
        for (bytes, want) in [
            (tar.clone(), ArchiveFormat::Tar),
            (gz.finish().unwrap(), ArchiveFormat::Gzip),
            (bz.finish().unwrap(), ArchiveFormat::Bzip2),
            (xz.finish().unwrap(), ArchiveFormat::Xz),
            (zst, ArchiveFormat::Zstd),
        ] {
            let mut f = file_of(&bytes);
            assert_eq!(sniff(&mut f).unwrap(), Some(want));
            assert_eq!(f.stream_position().unwrap(), 0);
            let dir = tempfile::tempdir().unwrap();
            extract(f, want, dir.path(), &Limits::default()).unwrap();
            assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"hello");
        }
        // Compressed text, text, and nothing at all are no archives.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&[b'x'; 600]).unwrap();
        for bytes in [
            gz.finish().unwrap(),
            vec![b'x'; 600],
            Vec::new(),
            vec![0; 1024],
        ] {
            assert_eq!(sniff(&mut file_of(&bytes)).unwrap(), None);
        }
    }
}
