//! A repository's files as they are fetched, before anything trusts them:
//! its `meta.conf` and its catalogue archive, from the first place that
//! serves them — for a `pkg+http(s)://` url with `mirror_type: srv`, the
//! mirrors its DNS SRV records name, then the host itself
//! ([`super::mirror::candidates`]); with `mirror_type: http`, the mirrors
//! the list at the url names, in its order ([`super::mirror::list`]); for
//! any other url, the url.
//!
//! pkg's order (`libpkg/pkg_repo.c`): `meta.conf`, else the older
//! `meta.txz` (a tar, xz, holding `meta` and signature members like a
//! catalogue's: [`meta_txz`]), else pkg's defaults; then `data.pkg`, `data.<packing_format>`, and
//! only when neither is there `packagesite.pkg`,
//! `packagesite.<packing_format>`. A mirror that fails (it cannot be
//! reached, or answers with an error other than "not found") is left for
//! the next one, as pkg moves to its next SRV target.
//!
//! These are fetched once a build: the build fetches them for a PKG step's
//! key (the archive's digest) when it reaches the step and keeps the
//! archive in jbuild's package cache by that digest ([`Fetched::keep_in`]);
//! the step then reads the kept files
//! ([`super::repository::Sources::kept`]) and checks their signatures
//! against the image's trust, as it would a download.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::catalogue::{self, Generation, Meta};
use super::mirror::{self, Resolver};
use super::repo_conf::MirrorType;
use super::repo_error::{RepoError, MAX_ARCHIVE, MAX_META};
use crate::digest::{Digest, HashingReader};
use crate::transport::block_on;
use crate::transport::http::{Http, HttpError, Limits};

/// The files of one repository, fetched (or, for `file://`, found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The url as configured (`${ABI}` expanded, `pkg+` kept): what the
    /// step looks its repository up by.
    pub url: String,
    /// Where the files came from: the SRV target or the host that served
    /// them, `pkg+` taken off; the repository's packages are fetched
    /// below it.
    pub base: String,
    /// The text of `meta.conf`; `None` when the repository has none.
    pub meta: Option<String>,
    /// Without `meta.conf`, pkg's older `meta.txz` as served (its `meta`
    /// member and signatures, checked by the reader: [`meta_txz`]).
    pub meta_txz: Option<Vec<u8>>,
    /// The archive's name (`data.pkg`, `packagesite.txz`, ...).
    pub archive: String,
    /// Which catalogue generation the archive holds, and its member.
    pub generation: Generation,
    pub member: String,
    /// The archive on disk.
    pub path: PathBuf,
    /// The SHA-256 of the archive file: what a PKG step's key holds.
    pub digest: Digest,
}

/// Catalogues fetched for PKG steps' keys, by [`Fetched::url`].
pub type Kept = BTreeMap<String, Fetched>;

/// The files of the repository `repo` at `url` (see the module docs);
/// downloads go to `work`.
pub fn fetch(
    repo: &str,
    url: &str,
    mirror_type: MirrorType,
    http: &Http,
    resolver: &Resolver,
    work: &Path,
) -> Result<Fetched, RepoError> {
    let plain = url.strip_prefix("pkg+").unwrap_or(url);
    if let Some(dir) = plain.strip_prefix("file://") {
        let dir = PathBuf::from(dir.trim_end_matches('/'));
        return from_dir(repo, url, &dir);
    }
    if !(plain.starts_with("https://") || plain.starts_with("http://")) {
        return Err(RepoError::UnsupportedUrl {
            repo: repo.to_string(),
            url: url.to_string(),
        });
    }
    let bases = match (url.starts_with("pkg+"), mirror_type) {
        (true, MirrorType::Srv) => mirror::candidates(url, resolver),
        (true, MirrorType::Http) => {
            return Err(RepoError::HttpMirrorPkgUrl {
                repo: repo.to_string(),
                url: url.to_string(),
            })
        }
        (false, MirrorType::Http) => {
            let mirrors = mirror::list::fetch(repo, plain, http);
            if mirrors.is_empty() {
                vec![plain.to_string()]
            } else {
                mirrors
            }
        }
        _ => vec![plain.to_string()],
    };
    let mut last = None;
    for base in bases {
        let base = base.trim_end_matches('/').to_string();
        match from_remote(repo, url, &base, http, work) {
            Ok(Ok(f)) => return Ok(f),
            Ok(Err(tried)) => {
                last = Some(RepoError::NoCatalogue {
                    repo: repo.to_string(),
                    dir: PathBuf::from(&base),
                    tried,
                })
            }
            Err(e) => {
                tracing::debug!(repo, base, "repository mirror failed: {e}");
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| RepoError::NoUrl {
        repo: repo.to_string(),
    }))
}

/// The archive names pkg tries, in its order, with their generation and
/// member.
fn archives(meta: &Meta) -> Vec<(String, Generation, String)> {
    let mut v = Vec::new();
    for (archive, member, generation) in [
        (&meta.data_archive, &meta.data, Generation::Data),
        (
            &meta.manifests_archive,
            &meta.manifests,
            Generation::Packagesite,
        ),
    ] {
        for name in catalogue::archive_names(archive, meta) {
            v.push((name, generation, member.clone()));
        }
    }
    v
}

fn tried(meta: &Meta) -> Vec<String> {
    archives(meta).into_iter().map(|(n, _, _)| n).collect()
}

/// The parsed `meta.conf` of `text` (pkg's defaults for none).
fn parse_meta(repo: &str, text: Option<&str>) -> Result<Meta, RepoError> {
    match text {
        Some(t) => Ok(catalogue::parse_meta(t, &format!("repository `{repo}`"))?),
        None => Ok(Meta::default()),
    }
}

/// The meta a repository's files say, to find its catalogue by: its
/// `meta.conf`, else its `meta.txz`'s `meta` (not yet checked: the reader
/// checks it before the meta is trusted), else pkg's defaults.
fn parsed_meta(
    repo: &str,
    text: Option<&str>,
    txz: Option<&[u8]>,
    work: &Path,
) -> Result<Meta, RepoError> {
    match (text, txz) {
        (None, Some(bytes)) => {
            let (_, text) = meta_txz(repo, bytes, work)?;
            parse_meta(repo, Some(&text))
        }
        _ => parse_meta(repo, text),
    }
}

/// pkg's older meta file.
pub const META_TXZ: &str = "meta.txz";

/// The `meta` member of a `meta.txz` (`bytes`), extracted into `work` with
/// the archive's signature members (for [`crate::pkg::sign::Trust`] to
/// check, as pkg checks a catalogue's), and its text.
pub fn meta_txz(
    repo: &str,
    bytes: &[u8],
    work: &Path,
) -> Result<(catalogue::Extracted, String), RepoError> {
    let read_err = |path: PathBuf| {
        let repo = repo.to_string();
        move |source| RepoError::Read { repo, path, source }
    };
    let path = work.join(META_TXZ);
    fs::write(&path, bytes).map_err(read_err(path.clone()))?;
    let what = format!("repository `{repo}`: {META_TXZ}");
    let mut ex = catalogue::extract(&path, "meta", work, &what)?;
    let mut text = Vec::new();
    io::Seek::seek(&mut ex.file, io::SeekFrom::Start(0)).map_err(read_err(path.clone()))?;
    io::Read::read_to_end(&mut io::Read::take(&ex.file, MAX_META), &mut text)
        .map_err(read_err(path.clone()))?;
    let text = String::from_utf8(text).map_err(|_| {
        read_err(path)(io::Error::new(
            io::ErrorKind::InvalidData,
            "the meta of meta.txz is not text",
        ))
    })?;
    Ok((ex, text))
}

fn from_dir(repo: &str, url: &str, dir: &Path) -> Result<Fetched, RepoError> {
    let read_err = |path: PathBuf| {
        let repo = repo.to_string();
        move |source| RepoError::Read { repo, path, source }
    };
    let meta_path = dir.join("meta.conf");
    let meta = match fs::File::open(&meta_path) {
        Ok(f) => {
            let mut bytes = Vec::new();
            io::Read::read_to_end(&mut io::Read::take(f, MAX_META), &mut bytes)
                .map_err(read_err(meta_path.clone()))?;
            Some(String::from_utf8(bytes).map_err(|_| {
                read_err(meta_path.clone())(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "meta.conf is not text",
                ))
            })?)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(read_err(meta_path)(e)),
    };
    let meta_txz = match &meta {
        Some(_) => None,
        None => {
            let path = dir.join(META_TXZ);
            match fs::File::open(&path) {
                Ok(f) => {
                    let mut bytes = Vec::new();
                    io::Read::read_to_end(&mut io::Read::take(f, MAX_META), &mut bytes)
                        .map_err(read_err(path))?;
                    Some(bytes)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(read_err(path)(e)),
            }
        }
    };
    let parsed = parsed_meta(repo, meta.as_deref(), meta_txz.as_deref(), dir)?;
    for (name, generation, member) in archives(&parsed) {
        let path = dir.join(&name);
        if !path.is_file() {
            continue;
        }
        let digest = digest_of(&path).map_err(read_err(path.clone()))?;
        return Ok(Fetched {
            url: url.to_string(),
            base: format!("file://{}", dir.display()),
            meta,
            meta_txz,
            archive: name,
            generation,
            member,
            path,
            digest,
        });
    }
    Err(RepoError::NoCatalogue {
        repo: repo.to_string(),
        dir: dir.to_path_buf(),
        tried: tried(&parsed),
    })
}

/// The files from the mirror `base`; the archive names tried when it
/// serves no catalogue.
fn from_remote(
    repo: &str,
    url: &str,
    base: &str,
    http: &Http,
    work: &Path,
) -> Result<Result<Fetched, Vec<String>>, RepoError> {
    let fetch_err = |source| RepoError::Fetch {
        repo: repo.to_string(),
        source,
    };
    let meta = read_meta(repo, base, http).map_err(fetch_err)?;
    let meta_txz = match &meta {
        Some(_) => None,
        None => match block_on(http.get_bytes(&format!("{base}/{META_TXZ}"), MAX_META)) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(fetch_err(e)),
        },
    };
    let parsed = parsed_meta(repo, meta.as_deref(), meta_txz.as_deref(), work)?;
    for (name, generation, member) in archives(&parsed) {
        let dest = work.join(format!("catalogue-{name}"));
        let file = format!("{base}/{name}");
        match block_on(http.get_to_file(&file, &dest, None, Limits::at_most(MAX_ARCHIVE))) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(fetch_err(e)),
        }
        let digest = digest_of(&dest).map_err(|source| RepoError::Read {
            repo: repo.to_string(),
            path: dest.clone(),
            source,
        })?;
        return Ok(Ok(Fetched {
            url: url.to_string(),
            base: base.to_string(),
            meta,
            meta_txz,
            archive: name,
            generation,
            member,
            path: dest,
            digest,
        }));
    }
    Ok(Err(tried(&parsed)))
}

/// The text of `BASE/meta.conf`; `None` when there is none.
fn read_meta(repo: &str, base: &str, http: &Http) -> Result<Option<String>, HttpError> {
    let url = format!("{base}/meta.conf");
    match block_on(http.get_bytes(&url, MAX_META)) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| HttpError::Protocol {
                url,
                reason: format!("repository `{repo}`: meta.conf is not text"),
            }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The SHA-256 of the file at `path`.
pub fn digest_of(path: &Path) -> io::Result<Digest> {
    let mut r = HashingReader::new(fs::File::open(path)?);
    io::copy(&mut r, &mut io::sink())?;
    let (d, _, _): (Digest, _, _) = r.finish();
    Ok(d)
}

impl Fetched {
    /// Moves a downloaded archive into the package cache `cache_dir`
    /// (under `catalogues/`, named by its digest, so a catalogue is kept
    /// once however many builds fetch it, and `prune --cache` frees it).
    /// A `file://` archive is copied there, and its digest is the copy's:
    /// the step installs from what its key holds even if the file changes
    /// in between (it is the repository's, anyone may rewrite it).
    pub fn keep_in(mut self, cache_dir: &Path) -> io::Result<Fetched> {
        let dir = cache_dir.join("catalogues");
        fs::create_dir_all(&dir)?;
        if self.base.starts_with("file://") {
            let copy = tempfile::Builder::new()
                .prefix(".catalogue-")
                .tempfile_in(&dir)?;
            fs::copy(&self.path, copy.path())?;
            self.digest = digest_of(copy.path())?;
            let dest = dir.join(format!("{}-{}", self.digest.hex(), self.archive));
            if !dest.is_file() {
                copy.persist(&dest).map_err(|e| e.error)?;
            }
            self.path = dest;
            return Ok(self);
        }
        let dest = dir.join(format!("{}-{}", self.digest.hex(), self.archive));
        if dest.is_file() {
            fs::remove_file(&self.path)?;
        } else {
            fs::rename(&self.path, &dest).or_else(|_| {
                fs::copy(&self.path, &dest)?;
                fs::remove_file(&self.path)
            })?;
        }
        self.path = dest;
        Ok(self)
    }

    /// Whether the kept archive is still there with its digest (a cache
    /// pruned, or a file changed, between the key and the step).
    pub fn intact(&self) -> bool {
        digest_of(&self.path).is_ok_and(|d| d == self.digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_catalogue_is_kept_as_keyed_when_the_file_changes() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        fs::create_dir_all(&repo).unwrap();
        let archive = repo.join("data.pkg");
        fs::write(&archive, b"as keyed").unwrap();
        let fetched = Fetched {
            url: format!("file://{}", repo.display()),
            base: format!("file://{}", repo.display()),
            meta: None,
            meta_txz: None,
            archive: "data.pkg".into(),
            generation: Generation::Data,
            member: "data".into(),
            path: archive.clone(),
            digest: digest_of(&archive).unwrap(),
        };
        let keyed = fetched.digest.clone();
        let kept = fetched.keep_in(&t.path().join("cache")).unwrap();
        // The repository's file changes between the key and the install.
        fs::write(&archive, b"changed after").unwrap();
        assert_eq!(kept.digest, keyed);
        assert!(kept.intact(), "the kept catalogue is still the keyed one");
        assert_eq!(fs::read(&kept.path).unwrap(), b"as keyed");
        assert!(kept.path.starts_with(t.path().join("cache/catalogues")));
    }
}
