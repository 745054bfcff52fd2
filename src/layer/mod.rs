//! Layers: from a change list to a compressed OCI layer blob, and from a
//! blob back into a root.
//!
//! The pieces, in the order data flows on export:
//!
//! 1. [`crate::diff`] says what changed (a canonical change list);
//! 2. [`tar::write_tar`] writes those paths of the child root as a
//!    deterministic tar stream;
//! 3. [`export`] compresses it and, in the same streaming pass, computes the
//!    two digests an image needs: the *diff ID* (sha256 of the uncompressed
//!    tar, which the image config lists) and the *digest* and size of the
//!    compressed blob (which the manifest lists).
//!
//! And on pull, [`apply::apply`] decompresses a blob, hashes the tar as it
//! goes (so the caller can check the diff ID) and writes it into a root,
//! treating every byte as hostile.

pub mod apply;
pub mod archive;
pub mod compare;
mod compress;
mod error;
pub mod fflags;
pub mod header;
pub mod limits;
mod pgzip;
mod reader;
pub mod tar;

use std::fmt;
use std::str::FromStr;

pub use apply::{apply, apply_with_flags, apply_with_limits, ApplyOptions, ApplyStats};
pub use compress::{decompress, export, export_with_flags, export_with_workers, uncompressed_size};
pub use error::{EntryProblem, LayerError};
pub use limits::Limits;
/// The hostile-tar reader alone, for the fuzz targets (`fuzz/`).
#[doc(hidden)]
pub use reader::{Header as TarHeader, TarReader};
pub use tar::{write_tar, write_tar_with_flags};

use crate::digest::Digest;

pub const MEDIA_TYPE_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const MEDIA_TYPE_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const MEDIA_TYPE_TAR_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// What docker (schema 2) calls a gzip layer; accepted when applying.
pub const MEDIA_TYPE_DOCKER_TAR_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// How a layer blob is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// gzip, level 6: what every registry and runtime reads.
    Gzip,
    /// zstd, level 3: smaller and much faster; needs a recent runtime.
    Zstd,
    /// The plain tar.
    None,
}

impl Compression {
    /// The OCI media type of a layer compressed this way.
    pub fn media_type(self) -> &'static str {
        match self {
            Compression::Gzip => MEDIA_TYPE_TAR_GZIP,
            Compression::Zstd => MEDIA_TYPE_TAR_ZSTD,
            Compression::None => MEDIA_TYPE_TAR,
        }
    }

    /// The compression of a layer of media type `media_type`: the OCI
    /// layer types (also the non-distributable ones) and docker's.
    pub fn from_media_type(media_type: &str) -> Option<Compression> {
        let oci = [
            "application/vnd.oci.image.layer.v1.tar",
            "application/vnd.oci.image.layer.nondistributable.v1.tar",
        ];
        for base in oci {
            if let Some(rest) = media_type.strip_prefix(base) {
                return match rest {
                    "" => Some(Compression::None),
                    "+gzip" => Some(Compression::Gzip),
                    "+zstd" => Some(Compression::Zstd),
                    _ => None,
                };
            }
        }
        match media_type {
            "application/vnd.docker.image.rootfs.diff.tar" => Some(Compression::None),
            MEDIA_TYPE_DOCKER_TAR_GZIP
            | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => {
                Some(Compression::Gzip)
            }
            _ => None,
        }
    }
}

impl FromStr for Compression {
    type Err = LayerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gzip" => Ok(Compression::Gzip),
            "zstd" => Ok(Compression::Zstd),
            "none" => Ok(Compression::None),
            _ => Err(LayerError::Compression(s.to_string())),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::None => "none",
        })
    }
}

/// How the tar stream is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TarOptions {
    /// No mtime in the layer is later than this (Unix seconds): set it to
    /// `SOURCE_DATE_EPOCH` for reproducible layers. Whiteouts carry it as
    /// their mtime.
    pub clamp_mtime: u64,
}

/// What [`export`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedLayer {
    /// sha256 of the blob as written (compressed): the manifest's digest.
    pub digest: Digest,
    /// sha256 of the uncompressed tar: the config's `rootfs.diff_ids`.
    pub diff_id: Digest,
    /// Size of the blob in bytes.
    pub size: u64,
    pub media_type: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_names_and_media_types() {
        for c in [Compression::Gzip, Compression::Zstd, Compression::None] {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
            assert_eq!(Compression::from_media_type(c.media_type()), Some(c));
        }
        assert!("lz4".parse::<Compression>().is_err());
        assert_eq!(
            Compression::from_media_type(MEDIA_TYPE_DOCKER_TAR_GZIP),
            Some(Compression::Gzip)
        );
        assert_eq!(
            Compression::from_media_type(
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd"
            ),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::from_media_type("application/vnd.oci.image.layer.v1.tar+lz4"),
            None
        );
        assert_eq!(Compression::from_media_type("application/json"), None);
    }
}
