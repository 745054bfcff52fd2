//! A software bill of materials for an image, from pkg(8)'s database.
//!
//! FreeBSD records every package it installs in `/var/db/pkg/local.sqlite`:
//! name, version, the port it came from (its *origin*), licenses and how
//! they combine, a digest of its manifest, and what it depends on. An image
//! built with `PKG` (or `RUN pkg install`) carries that database in its
//! root, so the image can say what is in it without anything being run.
//!
//! The path, in order:
//!
//! 1. [`root::read_files`] finds the database and `/bin/freebsd-version`
//!    in the image's layer blobs, top layer first, honouring whiteouts —
//!    nothing is unpacked, so an image without snapshots works too.
//! 2. [`pkgdb::read`] reads the copy of the database as hostile input
//!    (read-only, immutable, tables only, rows and values bounded).
//! 3. [`Inventory`] holds what was found; `spdx` and `cyclonedx` write
//!    it as SPDX 2.3 or CycloneDX 1.5 JSON. The bytes depend only on the
//!    image: the document's name space and serial number come from the
//!    manifest digest, its time from the image config's `created`, and
//!    every list is sorted.
//!
//! [`document`] does all three; it is what `jbuild sbom` calls, and what
//! attaching an SBOM to an image calls.

mod cyclonedx;
mod license;
pub mod pkgdb;
mod purl;
pub mod root;
mod spdx;

use crate::blame::Blame;
use std::io::Read;
use std::time::UNIX_EPOCH;

use crate::digest::Digest;
use crate::image::{self, ImageError, LoadedImage, Platform};
use crate::layer::LayerError;
use crate::store::{Store, StoreError};

pub use license::expression as license_expression;
pub use pkgdb::{DbError, DbLimits, Dep, Package};

/// Where pkg keeps its database, inside the root.
pub const PKG_DB: &str = "var/db/pkg/local.sqlite";
/// The script that knows the base system's release.
pub const FREEBSD_VERSION: &str = "bin/freebsd-version";

/// The most bytes of `/bin/freebsd-version` read (it is a short script).
const MAX_SCRIPT: u64 = 1 << 20;

/// The formats `jbuild sbom` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// SPDX 2.3, JSON.
    Spdx,
    /// CycloneDX 1.5, JSON.
    CycloneDx,
}

impl Format {
    /// The media type of a document in this format (for an attachment).
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Spdx => "application/spdx+json",
            Format::CycloneDx => "application/vnd.cyclonedx+json",
        }
    }
}

/// What the image holds, as the documents say it.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The image as the caller named it.
    pub reference: String,
    pub manifest_digest: Digest,
    /// The image config's `created`, as `YYYY-MM-DDThh:mm:ssZ` (the epoch
    /// when the config has none).
    pub created: String,
    /// The base system's userland release (`14.1-RELEASE-p5`), from
    /// `/bin/freebsd-version`.
    pub release: Option<String>,
    /// Whether the root has a pkg database at all.
    pub has_database: bool,
    /// Every installed package, sorted by name.
    pub packages: Vec<Package>,
}

#[derive(Debug, thiserror::Error)]
pub enum SbomError {
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("image `{image}`: cannot read layer {layer}")]
    Layer {
        image: String,
        layer: Digest,
        #[source]
        source: LayerError,
    },
    #[error("image `{image}`: {path} is not a regular file (jbuild reads it only as one)")]
    NotRegular { image: String, path: String },
    #[error(
        "image `{image}`: {path} is {bytes} bytes; jbuild reads at most {max} \
         (a real one is far smaller: is this the image you meant?)"
    )]
    TooLarge {
        image: String,
        path: String,
        bytes: u64,
        max: u64,
    },
    #[error(
        "image `{image}`: /{PKG_DB} is not a package database jbuild can read \
         (the file comes from the image: rebuild the image with pkg(8), or document another one)"
    )]
    Database {
        image: String,
        #[source]
        source: DbError,
    },
    #[error("cannot make a temporary copy of a file of the image")]
    Temp(#[source] std::io::Error),
    #[error("cannot write the document")]
    Encode(#[source] serde_json::Error),
}

impl Blame for SbomError {
    /// The image's content (a database or file that is not what it should
    /// be) and a name that matches nothing are the user's; a damaged store
    /// and the system's failures are not.
    fn is_user_error(&self) -> bool {
        match self {
            SbomError::Image(e) => !e.is_malformed() && e.is_user_error(),
            SbomError::Store(e) => e.is_user_error(),
            SbomError::NotRegular { .. }
            | SbomError::TooLarge { .. }
            | SbomError::Database { .. } => true,
            SbomError::Layer { .. } | SbomError::Temp(_) | SbomError::Encode(_) => false,
        }
    }
}

/// The SBOM of the stored image `reference` (for `platform` when it names
/// an index), in `format`.
pub fn document(
    store: &Store,
    reference: &str,
    platform: &Platform,
    format: Format,
) -> Result<Vec<u8>, SbomError> {
    let inv = inventory(store, reference, platform, &DbLimits::default())?;
    render(&inv, format)
}

/// [`Inventory`] written in `format`.
pub fn render(inv: &Inventory, format: Format) -> Result<Vec<u8>, SbomError> {
    let value = match format {
        Format::Spdx => spdx::document(inv),
        Format::CycloneDx => cyclonedx::document(inv),
    };
    let mut out = serde_json::to_vec_pretty(&value).map_err(SbomError::Encode)?;
    out.push(b'\n');
    Ok(out)
}

/// What the stored image `reference` holds.
pub fn inventory(
    store: &Store,
    reference: &str,
    platform: &Platform,
    limits: &DbLimits,
) -> Result<Inventory, SbomError> {
    let desc = store.find(reference)?.descriptor;
    let img = image::load_descriptor(store, &desc, platform, reference)?;
    inventory_of(store, &img, reference, limits)
}

/// What the loaded image `img` holds (`reference` names it in messages).
pub fn inventory_of(
    store: &Store,
    img: &LoadedImage,
    reference: &str,
    limits: &DbLimits,
) -> Result<Inventory, SbomError> {
    let mut files = root::read_files(
        store,
        img,
        reference,
        &[(PKG_DB, limits.max_bytes), (FREEBSD_VERSION, MAX_SCRIPT)],
    )?;
    let release = match files.remove(FREEBSD_VERSION) {
        Some(root::Found::File(f)) => {
            let mut text = String::new();
            f.take(MAX_SCRIPT)
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| userland_version(&text))
        }
        _ => None,
    };
    let (has_database, packages) = match files.remove(PKG_DB) {
        Some(root::Found::File(f)) => {
            let packages = pkgdb::read(f.path(), limits).map_err(|source| SbomError::Database {
                image: reference.to_string(),
                source,
            })?;
            (true, packages)
        }
        _ => (false, Vec::new()),
    };
    Ok(Inventory {
        reference: reference.to_string(),
        manifest_digest: img.manifest_digest.clone(),
        created: created(img.config.created().as_deref()),
        release,
        has_database,
        packages,
    })
}

/// `USERLAND_VERSION="14.1-RELEASE-p5"` from `freebsd-version(1)`'s text.
pub fn userland_version(script: &str) -> Option<String> {
    script.lines().find_map(|line| {
        let value = line.trim().strip_prefix("USERLAND_VERSION=")?;
        let value = value.trim().trim_matches('"').trim_matches('\'');
        let ok = !value.is_empty()
            && value.len() <= 64
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        ok.then(|| value.to_string())
    })
}

/// An image's `created` as SPDX wants a time: UTC, to the second.
fn created(config_created: Option<&str>) -> String {
    config_created
        .and_then(|c| humantime::parse_rfc3339_weak(c).ok())
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_else(|| humantime::format_rfc3339_seconds(UNIX_EPOCH).to_string())
}

/// pkg's checksum string `2$<type>$<hash>` as a SHA-256 in hex, when it is
/// one (type 1, `PKG_HASH_TYPE_SHA256_HEX`); pkg's other encodings (its
/// own base32, BLAKE2) have no SPDX or CycloneDX form jbuild can claim.
pub fn sha256_of(pkg_digest: &str) -> Option<String> {
    let mut parts = pkg_digest.splitn(3, '$');
    let (_version, kind, hash) = (parts.next()?, parts.next()?, parts.next()?);
    let hex_ok = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    (kind == "1" && hex_ok).then(|| hash.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_read_from_freebsd_version() {
        let script = "#!/bin/sh\nset -e\n\nUSERLAND_VERSION=\"14.1-RELEASE-p5\"\n: ${ROOT:=}\n";
        assert_eq!(userland_version(script).as_deref(), Some("14.1-RELEASE-p5"));
        assert_eq!(userland_version("USERLAND_VERSION=\"$(evil)\"\n"), None);
        assert_eq!(userland_version("#!/bin/sh\n"), None);
    }

    #[test]
    fn only_hex_sha256_digests_become_checksums() {
        let hex = "a".repeat(64);
        assert_eq!(sha256_of(&format!("2$1${hex}")), Some(hex.clone()));
        assert_eq!(sha256_of(&format!("2$0${hex}")), None);
        assert_eq!(sha256_of("2$2$abc"), None);
        assert_eq!(sha256_of("garbage"), None);
    }

    #[test]
    fn created_is_utc_to_the_second() {
        assert_eq!(
            created(Some("2024-05-01T10:20:30.123456789Z")),
            "2024-05-01T10:20:30Z"
        );
        assert_eq!(created(None), "1970-01-01T00:00:00Z");
        assert_eq!(created(Some("not a time")), "1970-01-01T00:00:00Z");
    }
}
