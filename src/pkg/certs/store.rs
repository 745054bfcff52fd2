//! What certctl reads: the certificate files of the source directories,
//! bounded, each file's certificates with their subject hash and SHA-1
//! fingerprint.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::der::{self, Certificate};
use super::{name, CertsError};

/// Bytes read of one certificate file.
pub const MAX_FILE: u64 = 4 << 20;
/// Certificates read in one run.
pub const MAX_CERTS: usize = 20_000;
/// Files looked at in one run.
pub const MAX_FILES: usize = 100_000;
/// How deep a source directory is walked.
pub const MAX_DEPTH: usize = 16;

/// One certificate read, with where it came from.
#[derive(Debug, Clone)]
pub struct Cert {
    pub cert: Certificate,
    pub hash: u32,
    pub sha1: [u8; 20],
    /// The file's path in the image.
    pub path: String,
}

impl Cert {
    pub fn new(cert: Certificate, path: &str) -> Option<Cert> {
        Some(Cert {
            hash: name::hash(&cert.subject)?,
            sha1: name::sha1(&cert.der),
            cert,
            path: path.to_string(),
        })
    }

    /// `X509_cmp`'s order: the SHA-1 of the certificate, then its DER.
    pub fn key(&self) -> ([u8; 20], &[u8]) {
        (self.sha1, &self.cert.der)
    }
}

/// The host path of the image's `path` as the jail follows it.
pub fn in_root(root: &Path, path: &str) -> Result<PathBuf, CertsError> {
    crate::fsutil::resolve_in_root(root, Path::new(path), true).map_err(|source| CertsError::Read {
        path: path.into(),
        source,
    })
}

/// The host path of the image's `path`, refusing a symlink that leads
/// out of the root on the host.
pub fn in_root_strictly(root: &Path, path: &str) -> Result<PathBuf, CertsError> {
    crate::fsutil::resolve_in_root_strictly(root, Path::new(path)).map_err(|e| match e {
        crate::fsutil::InRootError::Outside { .. } => CertsError::Hostile {
            path: path.into(),
            why: format!("{e}: refused"),
        },
        crate::fsutil::InRootError::Io(source) => CertsError::Read {
            path: path.into(),
            source,
        },
    })
}

/// The bytes of a file (bounded), `None` if it cannot be opened.
pub fn read(host: &Path) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    fs::File::open(host)
        .ok()?
        .take(MAX_FILE)
        .read_to_end(&mut v)
        .ok()?;
    Some(v)
}

/// The regular files under the image's directory `dir` (symlinks
/// followed as `find -L` and fts's `FTS_LOGICAL` follow them, inside the
/// root), as image paths sorted by name; `recursive` or only its own
/// entries. The directory itself must not lead out of the root.
pub fn files(
    root: &Path,
    dir: &str,
    recursive: bool,
    seen: &mut usize,
) -> Result<Vec<String>, CertsError> {
    let host = in_root_strictly(root, dir)?;
    let mut out = Vec::new();
    if host.is_dir() {
        walk(
            root,
            dir.trim_end_matches('/'),
            recursive,
            0,
            seen,
            &mut out,
        )?;
    }
    Ok(out)
}

fn walk(
    root: &Path,
    dir: &str,
    recursive: bool,
    depth: usize,
    seen: &mut usize,
    out: &mut Vec<String>,
) -> Result<(), CertsError> {
    let host = in_root(root, dir)?;
    let Ok(entries) = fs::read_dir(&host) else {
        return Ok(());
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    for n in names {
        *seen += 1;
        if *seen > MAX_FILES {
            return Err(CertsError::TooMany(format!("more than {MAX_FILES} files")));
        }
        let path = format!("{dir}/{n}");
        let Ok(meta) = fs::metadata(in_root(root, &path)?) else {
            continue;
        };
        if meta.is_file() {
            out.push(path);
        } else if meta.is_dir() && recursive && depth < MAX_DEPTH {
            walk(root, &path, recursive, depth + 1, seen, out)?;
        }
    }
    Ok(())
}

/// The certificates of the image's file `path`, as PEM_read_X509 reads
/// them one after the other.
pub fn certs_in(root: &Path, path: &str) -> Result<Vec<Cert>, CertsError> {
    let Some(bytes) = read(&in_root(root, path)?) else {
        return Ok(Vec::new());
    };
    Ok(der::pem_certificates(&bytes, MAX_CERTS)
        .into_iter()
        .filter_map(|c| Cert::new(c, path))
        .collect())
}
