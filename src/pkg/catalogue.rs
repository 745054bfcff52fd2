//! A repository's catalogue, in every generation pkg(8) still serves
//! (pkg-repository(5); `../shared/notes/pkg-anyhost.md` §1.1–1.3).
//!
//! - `meta.conf` (UCL, not signed) says how the rest is packed: [`Meta`].
//! - `data.pkg` (pkg 2.x) is a tar holding `data`, one JSON object whose
//!   `packages` array holds a manifest per package.
//! - `packagesite.pkg`, or `.tzst`/`.txz` on older mirrors, is a tar
//!   holding `packagesite.yaml`: one compact JSON manifest a line.
//!
//! Each tar is compressed with zstd, xz or gzip, or not at all (told by
//! its first bytes, as libarchive does), and carries the signature members
//! ([`Extracted`]) that [`super::sign`] checks before anything read here is
//! used. Bounded: the archive's size is checked before it is decompressed,
//! the decompressed stream, each member and the entries are counted, and a
//! catalogue holds at most [`MAX_PACKAGES`] packages.

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::path::Path;

use blake2::Blake2b512;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::ucl::{self, Value};
use crate::layer::{LayerError, TarReader};

/// The largest catalogue archive read (FreeBSD's are tens of MiB).
pub const MAX_ARCHIVE: u64 = 1 << 30;
/// The most bytes a catalogue may decompress to.
pub const MAX_UNPACKED: u64 = 4 << 30;
/// The most tar entries in a catalogue archive.
pub const MAX_ENTRIES: usize = 64;
/// pkg's `PKG_REPO_MAX_SIGNATURE_ENTRIES` and `_SIZE` (`pkg_repo.c`).
pub const MAX_SIGNATURE_ENTRIES: usize = 8;
pub const MAX_SIGNATURE_SIZE: u64 = 1 << 20;
/// The most packages in one catalogue (FreeBSD's has about 36 000).
pub const MAX_PACKAGES: usize = 500_000;
/// The longest line of `packagesite.yaml`.
pub const MAX_LINE: u64 = 16 << 20;

/// `meta.conf`, with pkg's defaults (`pkg_repo_meta_set_default`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub version: i64,
    pub packing_format: String,
    pub manifests: String,
    pub manifests_archive: String,
    pub data: String,
    pub data_archive: String,
    pub source_identifier: Option<String>,
    pub revision: Option<i64>,
    /// Certificates by name (`cert { name, type, data }`), for `.sig`
    /// members without a `.pub`.
    pub certs: BTreeMap<String, Vec<u8>>,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            version: 2,
            packing_format: "tzst".into(),
            manifests: "packagesite.yaml".into(),
            manifests_archive: "packagesite".into(),
            data: "data".into(),
            data_archive: "data".into(),
            source_identifier: None,
            revision: None,
            certs: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("{what}: meta.conf")]
    Meta {
        what: String,
        #[source]
        source: ucl::UclError,
    },
    #[error("{what}: meta.conf: {reason}")]
    MetaValue { what: String, reason: String },
    #[error("{what}: {size} bytes, more than the {max} a catalogue may have")]
    TooLarge { what: String, size: u64, max: u64 },
    #[error("{what}: {reason}")]
    Malformed { what: String, reason: String },
    #[error("{what}: the archive has no `{member}`")]
    NoMember { what: String, member: String },
    #[error("{what}: package {index}")]
    Package {
        what: String,
        index: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what}: reading the archive")]
    Tar {
        what: String,
        #[source]
        source: LayerError,
    },
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl Blame for CatalogueError {
    /// A catalogue that does not read is the repository's, which the user
    /// chose; a local read or write that fails is the machine's.
    fn is_user_error(&self) -> bool {
        !matches!(self, CatalogueError::Io { .. })
    }
}

/// Reads `meta.conf` (`what` names it in errors).
pub fn parse_meta(text: &str, what: &str) -> Result<Meta, CatalogueError> {
    let v = ucl::parse(text).map_err(|source| CatalogueError::Meta {
        what: what.to_string(),
        source,
    })?;
    let mut m = Meta::default();
    let bad = |reason: String| CatalogueError::MetaValue {
        what: what.to_string(),
        reason,
    };
    let name = |key: &str, into: &mut String| -> Result<(), CatalogueError> {
        if let Some(s) = v.get(key).and_then(Value::as_str) {
            // A member or archive name, never a path.
            if s.is_empty() || s.contains('/') || s.starts_with('.') {
                return Err(bad(format!("{key} `{s}` is not a plain file name")));
            }
            *into = s.to_string();
        }
        Ok(())
    };
    name("manifests", &mut m.manifests)?;
    name("manifests_archive", &mut m.manifests_archive)?;
    name("data", &mut m.data)?;
    name("data_archive", &mut m.data_archive)?;
    if let Some(f) = v.get("packing_format").and_then(Value::as_str) {
        if !matches!(f, "tzst" | "txz" | "tbz" | "tgz" | "tar") {
            return Err(bad(format!(
                "packing_format `{f}` is none of tzst, txz, tbz, tgz, tar"
            )));
        }
        m.packing_format = f.to_string();
    }
    if let Some(n) = v.get("version") {
        m.version = n
            .as_int()
            .filter(|n| matches!(n, 1 | 2))
            .ok_or_else(|| bad("version must be 1 or 2".into()))?;
    }
    m.source_identifier = v
        .get("source_identifier")
        .and_then(Value::as_str)
        .map(String::from);
    m.revision = v.get("revision").and_then(Value::as_int);
    for (key, value) in v.pairs() {
        if !key.eq_ignore_ascii_case("cert") {
            continue;
        }
        let certs = match value {
            Value::Array(a) => a.iter().collect(),
            one => vec![one],
        };
        for c in certs {
            if let (Some(n), Some(d)) = (
                c.get("name").and_then(Value::as_str),
                c.get("data").and_then(Value::as_str),
            ) {
                m.certs.insert(n.to_string(), d.as_bytes().to_vec());
            }
        }
    }
    Ok(m)
}

/// The signature members of a catalogue archive and its one data member,
/// written to a temporary file with its SHA-256 (what pkg signs).
#[derive(Debug)]
pub struct Extracted {
    pub member: String,
    pub file: File,
    pub size: u64,
    /// Lowercase hex SHA-256 of the member.
    pub sha256_hex: String,
    /// Its BLAKE2b-512, raw (what pkg's ECC signer signs in `pubkey`
    /// mode).
    pub blake2b: Vec<u8>,
    /// The `signature` member (`signature_type: pubkey`).
    pub signature: Option<Vec<u8>>,
    /// `<name>.sig` and `<name>.pub` members by name
    /// (`signature_type: fingerprints`).
    pub signers: BTreeMap<String, Signer>,
}

#[derive(Debug, Default, Clone)]
pub struct Signer {
    pub sig: Option<Vec<u8>>,
    pub public: Option<Vec<u8>>,
}

/// Reads the catalogue archive at `path` (`what` names it in errors):
/// the member `member` goes to a temporary file in `work`.
pub fn extract(
    path: &Path,
    member: &str,
    work: &Path,
    what: &str,
) -> Result<Extracted, CatalogueError> {
    let io_err = |source| CatalogueError::Io {
        what: format!("{what}: {}", path.display()),
        source,
    };
    let malformed = |reason: String| CatalogueError::Malformed {
        what: what.to_string(),
        reason,
    };
    let file = File::open(path).map_err(io_err)?;
    let size = file.metadata().map_err(io_err)?.len();
    if size > MAX_ARCHIVE {
        return Err(CatalogueError::TooLarge {
            what: what.to_string(),
            size,
            max: MAX_ARCHIVE,
        });
    }
    let stream = Bounded {
        inner: decompressor(BufReader::new(file)).map_err(io_err)?,
        left: MAX_UNPACKED,
    };
    let mut tar = TarReader::new(stream).with_max_header(64 * 1024);
    let mut out = Extracted {
        member: member.to_string(),
        file: tempfile::tempfile_in(work).map_err(io_err)?,
        size: 0,
        sha256_hex: String::new(),
        blake2b: Vec::new(),
        signature: None,
        signers: BTreeMap::new(),
    };
    let (mut found, mut entries, mut signature_entries) = (false, 0, 0);
    let tar_err = |source: LayerError| match source {
        LayerError::Read(e) if e.kind() == io::ErrorKind::FileTooLarge => {
            CatalogueError::TooLarge {
                what: what.to_string(),
                size: MAX_UNPACKED,
                max: MAX_UNPACKED,
            }
        }
        source => CatalogueError::Tar {
            what: what.to_string(),
            source,
        },
    };
    while let Some(h) = tar.next().map_err(tar_err)? {
        entries += 1;
        if entries > MAX_ENTRIES {
            return Err(malformed(format!("more than {MAX_ENTRIES} entries")));
        }
        if h.typeflag != b'0' {
            continue;
        }
        let name = String::from_utf8_lossy(&h.path)
            .trim_start_matches("./")
            .to_string();
        if name == member {
            if found {
                return Err(malformed(format!("`{member}` is in the archive twice")));
            }
            found = true;
            let mut hasher = HashTee {
                file: &mut out.file,
                sha: Sha256::new(),
                blake2b: Blake2b512::new(),
            };
            let copied = io::copy(&mut tar.content(), &mut hasher)
                .map_err(|e| tar_err(tar.truncated(e, member.as_bytes())))?;
            out.sha256_hex = hex::encode(hasher.sha.finalize());
            out.blake2b = hasher.blake2b.finalize().to_vec();
            out.size = copied;
            continue;
        }
        let sig_kind = if name == "signature" {
            Some(None)
        } else if let Some(n) = name.strip_suffix(".sig") {
            Some(Some((n.to_string(), true)))
        } else {
            name.strip_suffix(".pub")
                .map(|n| Some((n.to_string(), false)))
        };
        let Some(kind) = sig_kind else { continue };
        signature_entries += 1;
        if signature_entries > MAX_SIGNATURE_ENTRIES {
            return Err(malformed(format!(
                "more than {MAX_SIGNATURE_ENTRIES} signature entries"
            )));
        }
        if h.size > MAX_SIGNATURE_SIZE {
            return Err(malformed(format!(
                "`{name}` is larger than {MAX_SIGNATURE_SIZE} bytes"
            )));
        }
        let mut bytes = Vec::new();
        tar.content()
            .read_to_end(&mut bytes)
            .map_err(|e| tar_err(tar.truncated(e, name.as_bytes())))?;
        match kind {
            None => out.signature = Some(bytes),
            Some((n, true)) => out.signers.entry(n).or_default().sig = Some(bytes),
            Some((n, false)) => out.signers.entry(n).or_default().public = Some(bytes),
        }
    }
    if !found {
        return Err(CatalogueError::NoMember {
            what: what.to_string(),
            member: member.to_string(),
        });
    }
    out.file.rewind().map_err(io_err)?;
    Ok(out)
}

/// The tar stream of a catalogue archive, by its first bytes.
pub(crate) fn decompressor<'a, R: BufRead + 'a>(mut r: R) -> io::Result<Box<dyn Read + 'a>> {
    let head = r.fill_buf()?;
    Ok(if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::Decoder::with_buffer(r)?)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(liblzma::bufread::XzDecoder::new(r))
    } else if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(r))
    } else if head.starts_with(b"BZh") {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a bzip2 catalogue (packing_format tbz), which jbuild does not read",
        ));
    } else {
        Box::new(r)
    })
}

/// A reader that fails with `FileTooLarge` past `left` bytes.
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "catalogue too large",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

struct HashTee<'a> {
    file: &'a mut File,
    sha: Sha256,
    blake2b: Blake2b512,
}

impl Write for HashTee<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.sha.update(&buf[..n]);
        self.blake2b.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A package as a catalogue lists it (the keys jbuild uses; the rest of
/// a manifest is read from the package itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Package {
    pub name: String,
    pub origin: String,
    pub version: String,
    pub comment: String,
    pub abi: String,
    pub arch: String,
    pub prefix: String,
    /// `sum`: the package file's checksum ([`super::checksum`]).
    pub sum: String,
    pub flatsize: u64,
    pub pkgsize: u64,
    /// Where the package file is, relative to the repository's url
    /// (`repopath`; older catalogues have only `path`, current ones both).
    pub repopath: String,
    #[serde(rename = "path")]
    pub legacy_path: String,
    pub deps: BTreeMap<String, Dep>,
    pub conflicts: Vec<String>,
    pub provides: Vec<String>,
    pub requires: Vec<String>,
    pub shlibs_required: Vec<String>,
    pub shlibs_provided: Vec<String>,
    pub vital: bool,
    pub annotations: BTreeMap<String, String>,
    /// The port's options (`on`/`off`, or booleans in some catalogues):
    /// what `pkg_jobs_need_upgrade` compares with the installed
    /// package's ([`Package::options`]).
    #[serde(rename = "options")]
    pub raw_options: BTreeMap<String, serde_json::Value>,
    /// pkg's digest of the manifest (`manifestdigest` once installed):
    /// the same digest on both sides means the same package.
    pub digest: String,
}

impl Package {
    /// The options as pkg stores them: `on` or `off`.
    pub fn options(&self) -> BTreeMap<String, String> {
        self.raw_options
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::Bool(true) => "on".to_string(),
                    serde_json::Value::Bool(false) => "off".to_string(),
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect()
    }
}

/// A dependency: by name, with the origin and version it was built with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Dep {
    pub origin: String,
    pub version: String,
}

/// Which member a catalogue was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// `data` in `data.pkg`: JSON with a `packages` array.
    Data,
    /// `packagesite.yaml`: one JSON manifest a line.
    Packagesite,
}

/// The packages of an extracted (and verified) catalogue member.
pub fn packages(
    ex: &mut Extracted,
    generation: Generation,
    what: &str,
) -> Result<Vec<Package>, CatalogueError> {
    let malformed = |reason: String| CatalogueError::Malformed {
        what: what.to_string(),
        reason,
    };
    ex.file.rewind().map_err(|source| CatalogueError::Io {
        what: what.to_string(),
        source,
    })?;
    let mut r = BufReader::with_capacity(1 << 16, &mut ex.file);
    let list = match generation {
        Generation::Data => {
            let data: DataFile =
                serde_json::from_reader(r).map_err(|e| malformed(format!("data: {e}")))?;
            data.packages
        }
        Generation::Packagesite => {
            let mut list = Vec::new();
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = (&mut r)
                    .take(MAX_LINE + 1)
                    .read_until(b'\n', &mut line)
                    .map_err(|source| CatalogueError::Io {
                        what: what.to_string(),
                        source,
                    })?;
                if n == 0 {
                    break;
                }
                if n as u64 > MAX_LINE {
                    return Err(malformed(format!(
                        "line {} is longer than {MAX_LINE} bytes",
                        list.len() + 1
                    )));
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if list.len() >= MAX_PACKAGES {
                    return Err(malformed(format!("more than {MAX_PACKAGES} packages")));
                }
                let p =
                    serde_json::from_slice(&line).map_err(|source| CatalogueError::Package {
                        what: what.to_string(),
                        index: list.len() + 1,
                        source,
                    })?;
                list.push(p);
            }
            list
        }
    };
    let mut list = list;
    for (i, p) in list.iter_mut().enumerate() {
        if p.repopath.is_empty() {
            p.repopath = std::mem::take(&mut p.legacy_path);
        }
        if p.name.is_empty() || p.version.is_empty() {
            return Err(malformed(format!(
                "package {} has no name or version",
                i + 1
            )));
        }
    }
    Ok(list)
}

#[derive(Deserialize)]
struct DataFile {
    #[serde(default, deserialize_with = "bounded_packages")]
    packages: Vec<Package>,
}

fn bounded_packages<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Package>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<Package>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of package manifests")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(p) = seq.next_element()? {
                if v.len() >= MAX_PACKAGES {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX_PACKAGES} packages"
                    )));
                }
                v.push(p);
            }
            Ok(v)
        }
    }
    d.deserialize_seq(V)
}

/// The archive names to try for a catalogue, in pkg's order: `<archive>.pkg`,
/// then `<archive>.<packing_format>`.
pub fn archive_names(archive: &str, meta: &Meta) -> Vec<String> {
    vec![
        format!("{archive}.pkg"),
        format!("{archive}.{}", meta.packing_format),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_conf_defaults_and_fields() {
        let m = parse_meta("", "r").unwrap();
        assert_eq!(m, Meta::default());
        let m = parse_meta(
            "version = 2;\npacking_format = \"txz\";\nmanifests = \"packagesite.yaml\";\n\
             data_archive = \"data\";\ncert { name: \"k\", type: \"rsa\", data: \"PEM\" }\n",
            "r",
        )
        .unwrap();
        assert_eq!(m.packing_format, "txz");
        assert_eq!(m.certs.get("k").map(Vec::as_slice), Some(&b"PEM"[..]));
        let e = parse_meta("data = \"../../etc/passwd\"", "r").unwrap_err();
        assert!(e.to_string().contains("plain file name"), "{e}");
        assert!(parse_meta("packing_format = zip", "r").is_err());
    }
}
