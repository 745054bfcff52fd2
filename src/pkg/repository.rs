//! One repository read whole: its `meta.conf`, its catalogue in the
//! newest generation it serves, the catalogue's signatures checked against
//! the repository's [`Trust`] before a byte of it is parsed.
//!
//! The files are found as pkg finds them ([`super::repository_files`]:
//! `meta.conf`, then the newest catalogue generation served), over
//! `file://`, `http://` and `https://` through
//! [`transport::http`](crate::transport::http) (the configuration's
//! timeouts, `--cert-dir`, proxies, retries). A `pkg+https://` or
//! `pkg+http://` url with `mirror_type: srv` is fetched from the mirrors
//! its DNS SRV records name (`_https._tcp.HOST`, by priority and weight),
//! then from HOST itself ([`super::mirror`]); the packages are then
//! fetched from the mirror that served the catalogue
//! ([`Repository::url`]).
//!
//! A catalogue the build already fetched for the step's key
//! ([`Sources::kept`]) is read from jbuild's package cache instead of
//! being downloaded again; its signatures are checked here all the same.

use std::path::Path;

use super::catalogue::{self, Generation, Meta, Package};
use super::mirror::Resolver;
use super::repo_conf::RepoConfig;
pub use super::repo_error::{RepoError, MAX_ARCHIVE, MAX_META};
use super::repository_files::{self, Kept};
use super::sign::Trust;
use crate::transport::http::Http;

/// A repository's catalogue, verified and parsed.
#[derive(Debug, Clone)]
pub struct Repository {
    pub name: String,
    pub priority: i64,
    /// The url packages are fetched below: the mirror (or the host) that
    /// served the catalogue, `pkg+` taken off.
    pub url: String,
    pub meta: Meta,
    pub generation: Generation,
    /// The archive read (`data.pkg`, `packagesite.txz`, ...).
    pub archive: String,
    /// SHA-256 (hex) of the catalogue member: what it was signed as, and
    /// what a build step's key can hold.
    pub catalogue_sha256: String,
    pub packages: Vec<Package>,
}

/// Where a repository's files may come from besides a fresh download, and
/// who finds its mirrors.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sources<'a> {
    /// Who is asked for the SRV records of a `pkg+` url with
    /// `mirror_type: srv`; the host's nameservers when `None`.
    pub resolver: Option<&'a Resolver>,
    /// Catalogues fetched for the step's key, by url: read
    /// instead of downloaded again (when still intact).
    pub kept: Option<&'a Kept>,
}

/// Reads the repository `conf` names, checked against `trust`; temporary
/// files go to `work`. A remote repository is fetched with the defaults
/// of the registry options: [`load_with`] gives the command's.
pub fn load(conf: &RepoConfig, trust: &Trust, work: &Path) -> Result<Repository, RepoError> {
    load_with(conf, trust, work, &Http::default())
}

/// [`load`], fetching with `http`.
pub fn load_with(
    conf: &RepoConfig,
    trust: &Trust,
    work: &Path,
    http: &Http,
) -> Result<Repository, RepoError> {
    load_from(conf, trust, work, http, Sources::default())
}

/// [`load_with`], reading what `sources` kept and finding mirrors with
/// its resolver.
pub fn load_from(
    conf: &RepoConfig,
    trust: &Trust,
    work: &Path,
    http: &Http,
    sources: Sources<'_>,
) -> Result<Repository, RepoError> {
    let repo = conf.name.clone();
    let url = conf
        .url
        .clone()
        .ok_or_else(|| RepoError::NoUrl { repo: repo.clone() })?;
    let url = url.trim_end_matches('/').to_string();
    let kept = sources
        .kept
        .and_then(|k| k.get(&url))
        .filter(|f| f.intact())
        .cloned();
    let fetched = match kept {
        Some(f) => f,
        None => {
            let system;
            let resolver = match sources.resolver {
                Some(r) => r,
                None => {
                    system = Resolver::system();
                    &system
                }
            };
            repository_files::fetch(&repo, &url, conf.mirror_type, http, resolver, work)?
        }
    };
    let meta = match (&fetched.meta, &fetched.meta_txz) {
        (Some(text), _) => catalogue::parse_meta(text, &format!("repository `{repo}`"))?,
        // pkg's older meta: signed as a catalogue is, and checked before
        // it is used (a `.sig` may take its key from the meta's own
        // certs, as pkg lets it; the fingerprint still decides).
        (None, Some(bytes)) => {
            let (ex, text) = repository_files::meta_txz(&repo, bytes, work)?;
            let meta = catalogue::parse_meta(&text, &format!("repository `{repo}`: meta.txz"))?;
            trust.verify(&ex, &meta, &repo)?;
            meta
        }
        (None, None) => Meta::default(),
    };
    let what = format!("repository `{repo}`: {}", fetched.archive);
    let mut ex = catalogue::extract(&fetched.path, &fetched.member, work, &what)?;
    trust.verify(&ex, &meta, &repo)?;
    let packages = catalogue::packages(&mut ex, fetched.generation, &what)?;
    Ok(Repository {
        name: repo,
        priority: conf.priority,
        url: fetched.base,
        meta,
        generation: fetched.generation,
        archive: fetched.archive,
        catalogue_sha256: ex.sha256_hex,
        packages,
    })
}
