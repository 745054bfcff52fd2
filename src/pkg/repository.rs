//! One repository read whole: its `meta.conf`, its catalogue in the
//! newest generation it serves, the catalogue's signatures checked against
//! the repository's [`Trust`] before a byte of it is parsed.
//!
//! pkg's order (`libpkg/pkg_repo.c`): `meta.conf` (pkg's defaults when a
//! repository has none); then `data.pkg`, `data.<packing_format>`, and
//! only when neither is there `packagesite.pkg`,
//! `packagesite.<packing_format>`.
//!
//! `file://`, `http://` and `https://` repositories are read, through
//! [`transport::http`](crate::transport::http) (the configuration's
//! timeouts, `--cert-dir`, proxies, retries). `pkg+https://` and
//! `pkg+http://` ask pkg to find mirrors by a DNS SRV lookup
//! (`_https._tcp.HOST`); jbuild has no SRV resolver (it would need a DNS
//! library it does not otherwise use), so it asks HOST itself, which
//! FreeBSD's `pkg.FreeBSD.org` serves as well as its mirrors do.

use crate::blame::Blame;

use std::io;
use std::path::{Path, PathBuf};

use super::catalogue::{self, CatalogueError, Generation, Meta, Package};
use super::repo_conf::RepoConfig;
use super::sign::{SignError, Trust};
use crate::transport::block_on;
use crate::transport::http::{Http, HttpError, Limits};

/// The largest `meta.conf` read.
pub const MAX_META: u64 = 1 << 20;

/// A repository's catalogue, verified and parsed.
#[derive(Debug, Clone)]
pub struct Repository {
    pub name: String,
    pub priority: i64,
    /// The url packages are fetched below (`pkg+` taken off).
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

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("repository `{repo}`: {url}: jbuild reads file://, http://, https://, pkg+http:// and pkg+https:// repositories")]
    UnsupportedUrl { repo: String, url: String },
    /// A file of a remote repository that could not be fetched.
    #[error("repository `{repo}`")]
    Fetch {
        repo: String,
        #[source]
        source: HttpError,
    },
    #[error("repository `{repo}` has no url")]
    NoUrl { repo: String },
    #[error("repository `{repo}`: no catalogue in {} (tried {})", dir.display(), tried.join(", "))]
    NoCatalogue {
        repo: String,
        dir: PathBuf,
        tried: Vec<String>,
    },
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    #[error(transparent)]
    Sign(#[from] SignError),
    #[error("repository `{repo}`: reading {}", path.display())]
    Read {
        repo: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Blame for RepoError {
    fn is_user_error(&self) -> bool {
        match self {
            RepoError::Catalogue(e) => e.is_user_error(),
            RepoError::Sign(e) => e.is_user_error(),
            RepoError::Read { .. } => false,
            RepoError::Fetch { source, .. } => source.is_user_error(),
            _ => true,
        }
    }
}

/// Where a repository's files are.
enum Place {
    Dir(PathBuf),
    /// The base URL (no trailing `/`).
    Remote(String),
}

/// The url files are fetched below, and where: `pkg+` taken off (see the
/// module's documentation on SRV).
fn place_of(repo: &str, url: &str) -> Result<(String, Place), RepoError> {
    let srv = url.starts_with("pkg+");
    let url = url
        .strip_prefix("pkg+")
        .unwrap_or(url)
        .trim_end_matches('/')
        .to_string();
    if let Some(dir) = url.strip_prefix("file://") {
        let dir = PathBuf::from(dir);
        return Ok((url, Place::Dir(dir)));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        if srv {
            tracing::debug!(repo, url, "no SRV lookup: the host itself is asked");
        }
        return Ok((url.clone(), Place::Remote(url)));
    }
    Err(RepoError::UnsupportedUrl {
        repo: repo.to_string(),
        url,
    })
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
    let repo = conf.name.clone();
    let url = conf
        .url
        .clone()
        .ok_or_else(|| RepoError::NoUrl { repo: repo.clone() })?;
    let (url, place) = place_of(&repo, &url)?;
    let fetch_err = |source| RepoError::Fetch {
        repo: repo.clone(),
        source,
    };
    let meta = match read_meta(&repo, &place, http).map_err(fetch_err)? {
        Some(text) => catalogue::parse_meta(&text, &format!("repository `{repo}`"))?,
        None => Meta::default(),
    };
    let mut tried = Vec::new();
    let generations = [
        (
            meta.data_archive.clone(),
            meta.data.clone(),
            Generation::Data,
        ),
        (
            meta.manifests_archive.clone(),
            meta.manifests.clone(),
            Generation::Packagesite,
        ),
    ];
    for (archive, member, generation) in generations {
        for name in catalogue::archive_names(&archive, &meta) {
            let Some(path) = archive_file(&place, &name, work, http).map_err(fetch_err)? else {
                tried.push(name);
                continue;
            };
            let what = format!("repository `{repo}`: {name}");
            let mut ex = catalogue::extract(&path, &member, work, &what)?;
            trust.verify(&ex, &meta, &repo)?;
            let packages = catalogue::packages(&mut ex, generation, &what)?;
            return Ok(Repository {
                name: repo,
                priority: conf.priority,
                url,
                meta,
                generation,
                archive: name,
                catalogue_sha256: ex.sha256_hex,
                packages,
            });
        }
    }
    let dir = match place {
        Place::Dir(d) => d,
        Place::Remote(u) => PathBuf::from(u),
    };
    Err(RepoError::NoCatalogue { repo, dir, tried })
}

/// The text of the repository's `meta.conf`; `None` when it has none.
fn read_meta(repo: &str, place: &Place, http: &Http) -> Result<Option<String>, HttpError> {
    let url = match place {
        Place::Dir(dir) => match reqwest::Url::from_file_path(dir.join("meta.conf")) {
            Ok(u) => u.to_string(),
            Err(()) => {
                return Err(HttpError::Url {
                    url: dir.display().to_string(),
                    reason: "not an absolute path".into(),
                })
            }
        },
        Place::Remote(base) => format!("{base}/meta.conf"),
    };
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

/// The catalogue archive `name` as a local file (downloaded into `work`
/// for a remote repository); `None` when the repository has none.
fn archive_file(
    place: &Place,
    name: &str,
    work: &Path,
    http: &Http,
) -> Result<Option<PathBuf>, HttpError> {
    match place {
        Place::Dir(dir) => {
            let path = dir.join(name);
            Ok(path.is_file().then_some(path))
        }
        Place::Remote(base) => {
            let dest = work.join(format!("catalogue-{name}"));
            let url = format!("{base}/{name}");
            match block_on(http.get_to_file(&url, &dest, None, Limits::at_most(MAX_ARCHIVE))) {
                Ok(_) => Ok(Some(dest)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e),
            }
        }
    }
}

/// The largest catalogue archive downloaded (FreeBSD's whole ports tree
/// is about 10 MiB compressed).
pub const MAX_ARCHIVE: u64 = 512 << 20;
