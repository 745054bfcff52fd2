//! What can go wrong reading a repository ([`RepoError`]) and the bounds
//! on what is read, shared by the reader (`pkg::repository`) and the
//! fetch of its files (`pkg::repository_files`) without either importing
//! the other.

use std::io;
use std::path::PathBuf;

use super::catalogue::CatalogueError;
use super::sign::SignError;
use crate::blame::Blame;
use crate::transport::http::HttpError;

/// The largest `meta.conf` read.
pub const MAX_META: u64 = 1 << 20;

/// The largest catalogue archive downloaded (FreeBSD's whole ports tree
/// is about 10 MiB compressed).
pub const MAX_ARCHIVE: u64 = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("repository `{repo}`: {url}: jbuild reads file://, http://, https://, pkg+http:// and pkg+https:// repositories")]
    UnsupportedUrl { repo: String, url: String },
    #[error("repository `{repo}`: {url}: `mirror_type: http` wants the http:// or https:// url of the mirror list; `pkg+` urls are for `mirror_type: srv` (pkg refuses this pairing too)")]
    HttpMirrorPkgUrl { repo: String, url: String },
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
