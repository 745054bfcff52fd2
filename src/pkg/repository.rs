//! One repository read whole: its `meta.conf`, its catalogue in the
//! newest generation it serves, the catalogue's signatures checked against
//! the repository's [`Trust`] before a byte of it is parsed.
//!
//! pkg's order (`libpkg/pkg_repo.c`): `meta.conf` (pkg's defaults when a
//! repository has none); then `data.pkg`, `data.<packing_format>`, and
//! only when neither is there `packagesite.pkg`,
//! `packagesite.<packing_format>`.
//!
//! Only `file://` repositories are read so far; fetching over HTTP(S)
//! (and `pkg+https://` SRV mirrors) is the next step of issue 31.

use crate::blame::Blame;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::catalogue::{self, CatalogueError, Generation, Meta, Package};
use super::repo_conf::RepoConfig;
use super::sign::{SignError, Trust};

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
    #[error("repository `{repo}`: {url}: only file:// repositories are read so far")]
    UnsupportedUrl { repo: String, url: String },
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
            _ => true,
        }
    }
}

/// Reads the repository `conf` names, checked against `trust`; temporary
/// files go to `work`.
pub fn load(conf: &RepoConfig, trust: &Trust, work: &Path) -> Result<Repository, RepoError> {
    let repo = conf.name.clone();
    let url = conf
        .url
        .clone()
        .ok_or_else(|| RepoError::NoUrl { repo: repo.clone() })?;
    let url = url
        .strip_prefix("pkg+")
        .unwrap_or(&url)
        .trim_end_matches('/')
        .to_string();
    let Some(dir) = url.strip_prefix("file://").map(PathBuf::from) else {
        return Err(RepoError::UnsupportedUrl { repo, url });
    };
    let read_err = |path: &Path| {
        let (repo, path) = (repo.clone(), path.to_path_buf());
        move |source| RepoError::Read { repo, path, source }
    };
    let meta_path = dir.join("meta.conf");
    let meta = match fs::File::open(&meta_path) {
        Ok(f) => {
            let mut text = String::new();
            f.take(MAX_META + 1)
                .read_to_string(&mut text)
                .map_err(read_err(&meta_path))?;
            if text.len() as u64 > MAX_META {
                return Err(CatalogueError::TooLarge {
                    what: format!("repository `{repo}`: meta.conf"),
                    size: text.len() as u64,
                    max: MAX_META,
                }
                .into());
            }
            catalogue::parse_meta(&text, &format!("repository `{repo}`"))?
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Meta::default(),
        Err(e) => return Err(read_err(&meta_path)(e)),
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
            let path = dir.join(&name);
            if !path.is_file() {
                tried.push(name);
                continue;
            }
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
    Err(RepoError::NoCatalogue { repo, dir, tried })
}
