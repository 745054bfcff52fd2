//! ADD: what COPY does for the build context, with its tar archives
//! extracted ([`crate::layer::archive`]); files from URLs; git
//! repositories at the commit a ref resolves to.
//!
//! A URL's file is downloaded with [`crate::transport::http`] (the
//! registries' timeouts, retries, proxies and certificates) into jbuild's
//! cache, `cache/add/url/<sha256>`, named by its content. With
//! `--checksum` the step's key is that checksum and the file is fetched
//! only when the step runs and the cache lacks it; a file that does not
//! match is not kept, and the build stops (exit 1). Without one the file
//! is downloaded in the fetch phase, before the build is planned
//! ([`super::fetch`]); its digest is the key, the step copies that file
//! from the cache, and the build says what `--checksum` would pin it. A downloaded file is
//! never extracted (as Docker); it gets mode 0600 unless `--chmod`, and
//! the time 0.
//!
//! Git repositories are read with the `git` program. Each repository is
//! mirrored once into jbuild's cache (`cache/add/git/<sha256 of the URL>`,
//! made beside and renamed into place, so a killed fetch leaves nothing
//! half-made), fetched again once per build, and the ref resolved there
//! in the fetch phase: the commit is part of the step's cache key
//! and its history, so a branch that moved re-runs the step and a pinned
//! commit never does. The step checks the commit out of the mirror into
//! a scratch directory, sets every file's time to the commit's (so the
//! layer depends on the commit, not on when it was checked out), leaves
//! out `.git` unless `--keep-git-dir`, and copies the tree as COPY copies
//! a directory.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use filetime::FileTime;

use super::native::{self, CopyOptions, NativeError};
use crate::digest::Digest;
use crate::fsutil::places;
use crate::jailfile::CopySource;
use crate::keychain::{Credential, Keychain as _};
use crate::transport::http::{Http, HttpError, Limits as HttpLimits};

/// Where ADD keeps what it fetched (`cache/add` under jbuild's root) and
/// extracts and checks out (`tmp`), and how it downloads.
#[derive(Clone)]
pub struct AddPlaces {
    /// jbuild's root directory.
    pub root: PathBuf,
    /// The downloads' HTTP client (the build's registry options).
    pub http: std::sync::Arc<Http>,
    /// What git is told to prove who we are to an `http(s)://` server.
    pub git_credentials: GitCredentials,
}

/// Credentials for git repositories over `http(s)://`, as BuildKit takes
/// them: the build secret `GIT_AUTH_HEADER` (an `Authorization` value as
/// it is) or `GIT_AUTH_TOKEN` (a token, sent as Basic
/// `x-access-token:TOKEN`), each also as `NAME.<host>` for one host only
/// (that one wins); else what the keychain holds for the host (`jbuild
/// login HOST`, docker's and containers' auth files, helpers). git's own
/// configuration (credential helpers, `~/.netrc`, ssh keys for `git@`
/// and `ssh://`) still applies where none of these has anything.
///
/// The header reaches git through its environment
/// (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`), never its
/// command line, which other users can read, and only for URLs of that
/// scheme and host (`http.<scheme>://<host>/.extraHeader`).
#[derive(Clone, Default)]
pub struct GitCredentials {
    /// `None`: the keychain of the environment
    /// ([`crate::keychain::DefaultKeychain::from_env`]), as registries.
    pub keychain: Option<std::sync::Arc<dyn crate::keychain::Keychain>>,
    pub secrets: BTreeMap<String, crate::exec::SecretData>,
}

impl GitCredentials {
    /// The git configuration that sends the credential for `url`, as
    /// (key, value); `None` when there is none or `url` is not http(s).
    fn config_for(&self, url: &str) -> Result<Option<(String, String)>, AddError> {
        use base64::Engine;
        let Some((scheme, host)) = http_host(url) else {
            return Ok(None);
        };
        let secret = |name: &str| {
            self.secrets
                .get(&format!("{name}.{host}"))
                .or_else(|| self.secrets.get(name))
                .map(|s| String::from_utf8_lossy(s.expose()).trim().to_string())
        };
        let basic = |user: &str, password: &str| {
            let pair = format!("{user}:{password}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        };
        let value = if let Some(header) = secret("GIT_AUTH_HEADER") {
            header
        } else if let Some(token) = secret("GIT_AUTH_TOKEN") {
            basic("x-access-token", &token)
        } else {
            let found = match &self.keychain {
                Some(k) => k.get(&host),
                None => crate::keychain::DefaultKeychain::from_env().and_then(|k| k.get(&host)),
            }
            .map_err(|e| AddError::Credentials {
                host: host.clone(),
                source: e,
            })?;
            match found {
                Some(Credential::Basic { username, password }) => {
                    basic(&username, password.expose())
                }
                Some(Credential::IdentityToken(t)) => format!("Bearer {}", t.expose()),
                None => return Ok(None),
            }
        };
        // Whatever jbuild prints from now on is scrubbed of it.
        crate::keychain::Secret::new(value.clone());
        Ok(Some((
            format!("http.{scheme}://{host}/.extraHeader"),
            format!("Authorization: {value}"),
        )))
    }
}

/// The scheme and `host[:port]` of an `http(s)://` URL (any user part
/// left out).
fn http_host(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    (!host.is_empty()).then(|| (scheme.to_string(), host.to_string()))
}

impl AddPlaces {
    /// ADD's places under `root`, downloading with `http`, with no
    /// credentials for git beyond git's own.
    pub fn new(root: PathBuf, http: std::sync::Arc<Http>) -> AddPlaces {
        AddPlaces {
            root,
            http,
            git_credentials: GitCredentials::default(),
        }
    }

    /// Gives git `credentials` for `http(s)://` repositories.
    pub fn with_git_credentials(mut self, credentials: GitCredentials) -> AddPlaces {
        self.git_credentials = credentials;
        self
    }

    pub(super) fn scratch(&self) -> Result<PathBuf, AddError> {
        places::own_dir(&self.root, "tmp").map_err(|e| AddError::Place(e.into()))
    }

    fn url_dir(&self) -> Result<PathBuf, AddError> {
        places::own_dir(&self.root, "cache/add/url").map_err(|e| AddError::Place(e.into()))
    }

    /// The cached file of content `digest`.
    fn cached(&self, digest: &Digest) -> Result<PathBuf, AddError> {
        Ok(self.url_dir()?.join(format!("sha256-{}", digest.hex())))
    }

    /// The file `url` names, in the cache: fetched unless there, and
    /// checked against `checksum` (a file that does not match is not
    /// kept). `max` bounds its size.
    pub(super) fn download(
        &self,
        url: &str,
        checksum: Option<&Digest>,
        max: u64,
    ) -> Result<(Digest, PathBuf), AddError> {
        if let Some(d) = checksum {
            let path = self.cached(d)?;
            if path.is_file() {
                return Ok((d.clone(), path));
            }
        }
        let dir = self.url_dir()?;
        let incoming = tempfile::Builder::new()
            .prefix(".incoming-")
            .tempdir_in(&dir)
            .map_err(AddError::Io)?;
        let into = incoming.path().join("file");
        let http = &self.http;
        let got = crate::transport::block_on::<_, AddError>(async {
            Ok(http
                .get_to_file(url, &into, checksum, HttpLimits::at_most(max))
                .await?)
        })?;
        let path = self.cached(&got.sha256)?;
        fs::rename(&into, &path).map_err(AddError::Io)?;
        Ok((got.sha256, path))
    }

    fn git_dir(&self) -> Result<PathBuf, AddError> {
        places::own_dir(&self.root, "cache/add/git").map_err(|e| AddError::Place(e.into()))
    }
}

/// Why an ADD could not read what it names.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    #[error("ADD {url}: `git {action}` failed: {detail}")]
    Git {
        url: String,
        action: String,
        detail: String,
    },
    #[error("ADD {url}: the git repository has no ref `{reference}`: {detail}")]
    NoRef {
        url: String,
        reference: String,
        detail: String,
    },
    #[error("ADD of a git repository needs the `git` program, which cannot be run")]
    NoGit(#[source] std::io::Error),
    #[error("the credentials for {host}")]
    Credentials {
        host: String,
        #[source]
        source: crate::keychain::KeychainError,
    },
    #[error("ADD {0}: this build has no place to keep what ADD fetches")]
    NoPlaces(String),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Runtime(#[from] crate::transport::RuntimeError),
    #[error("jbuild's directories for what ADD fetches")]
    Place(#[source] std::io::Error),
    #[error("ADD: a file it fetched cannot be read or written")]
    Io(#[source] std::io::Error),
    #[error(transparent)]
    Native(#[from] NativeError),
}

impl crate::blame::Blame for AddError {
    /// The recipe's to fix (exit 1): a repository or ref that is not
    /// there, a missing `git`; jbuild's own places and disks are not.
    fn is_user_error(&self) -> bool {
        match self {
            AddError::Git { .. } | AddError::NoRef { .. } | AddError::NoGit(_) => true,
            // The user's auth files or helpers.
            AddError::Credentials { .. } => true,
            AddError::Native(e) => e.is_user_error(),
            AddError::Http(e) => e.is_user_error(),
            AddError::NoPlaces(_) | AddError::Place(_) | AddError::Io(_) | AddError::Runtime(_) => {
                false
            }
        }
    }
}

/// Runs `git args...`; its standard output, or why it failed (its last
/// lines of standard error).
fn git(url: &str, args: &[&str]) -> Result<String, AddError> {
    git_with(url, args, None)
}

/// [`git`] with `config` (a key and value) in git's environment.
fn git_with(
    url: &str,
    args: &[&str],
    config: Option<&(String, String)>,
) -> Result<String, AddError> {
    let mut command = Command::new("git");
    if let Some((key, value)) = config {
        command
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", key)
            .env("GIT_CONFIG_VALUE_0", value);
    }
    let out = command
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/false")
        .stdin(Stdio::null())
        .output()
        .map_err(AddError::NoGit)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let detail: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let detail = detail[detail.len().saturating_sub(3)..].join("; ");
    let action = args
        .iter()
        .find(|a| !a.starts_with('-') && !a.contains('/'))
        .unwrap_or(&"")
        .to_string();
    Err(AddError::Git {
        url: url.to_string(),
        action,
        detail: format!("{} ({})", detail, out.status),
    })
}

/// Git mirrors fetched by this build, by URL: each is fetched once a build.
#[derive(Default)]
pub(super) struct GitMirrors {
    fetched: HashMap<String, PathBuf>,
    commits: HashMap<(String, Option<String>), String>,
}

impl GitMirrors {
    /// The commit `reference` (a branch, tag or commit; the default branch
    /// when `None`) of the repository `url` is at now.
    pub(super) fn commit(
        &mut self,
        places: Option<&AddPlaces>,
        url: &str,
        reference: Option<&str>,
    ) -> Result<String, AddError> {
        let key = (url.to_string(), reference.map(str::to_string));
        if let Some(c) = self.commits.get(&key) {
            return Ok(c.clone());
        }
        let mirror = self.mirror(places, url)?;
        let m = mirror.to_string_lossy().into_owned();
        let wanted = format!("{}^{{commit}}", reference.unwrap_or("HEAD"));
        let commit = git(
            url,
            &[
                "-C",
                &m,
                "rev-parse",
                "--verify",
                "--end-of-options",
                &wanted,
            ],
        )
        .map_err(|e| match e {
            AddError::Git { detail, .. } => AddError::NoRef {
                url: url.to_string(),
                reference: reference.unwrap_or("HEAD").to_string(),
                detail,
            },
            other => other,
        })?;
        self.commits.insert(key, commit.clone());
        Ok(commit)
    }

    /// The mirror of `url` in the cache, fetched once this build.
    fn mirror(&mut self, places: Option<&AddPlaces>, url: &str) -> Result<PathBuf, AddError> {
        if let Some(p) = self.fetched.get(url) {
            return Ok(p.clone());
        }
        let places = places.ok_or_else(|| AddError::NoPlaces(url.to_string()))?;
        let dir = places.git_dir()?;
        let auth = places.git_credentials.config_for(url)?;
        let git = |url: &str, args: &[&str]| git_with(url, args, auth.as_ref());
        let name = Digest::of(url.as_bytes()).hex().to_string();
        let mirror = dir.join(format!("{name}.git"));
        let m = mirror.to_string_lossy().into_owned();
        if mirror.is_dir() {
            git(
                url,
                &[
                    "-C", &m, "fetch", "--quiet", "--prune", "--tags", "--force", "origin",
                ],
            )?;
        } else {
            let fresh = tempfile::Builder::new()
                .prefix(".fetch-")
                .tempdir_in(&dir)
                .map_err(AddError::Io)?;
            let into = fresh.path().join("m.git");
            let i = into.to_string_lossy().into_owned();
            git(url, &["clone", "--quiet", "--mirror", "--", url, &i])?;
            match fs::rename(&into, &mirror) {
                Ok(()) => {}
                // Another build mirrored it meanwhile: use that one.
                Err(_) if mirror.is_dir() => {}
                Err(e) => return Err(AddError::Io(e)),
            }
        }
        self.fetched.insert(url.to_string(), mirror.clone());
        Ok(mirror)
    }

    /// Checks `commit` of `url` out into a new directory under `scratch`
    /// (kept while the returned guard lives): `.git` only with `keep_git`,
    /// every file's time the commit's.
    pub(super) fn checkout(
        &mut self,
        places: Option<&AddPlaces>,
        url: &str,
        commit: &str,
        keep_git: bool,
    ) -> Result<tempfile::TempDir, AddError> {
        let mirror = self.mirror(places, url)?;
        let places = places.ok_or_else(|| AddError::NoPlaces(url.to_string()))?;
        let scratch = tempfile::Builder::new()
            .prefix("git-")
            .tempdir_in(places.scratch()?)
            .map_err(AddError::Io)?;
        let tree = scratch.path().join("tree");
        let (m, t) = (mirror.to_string_lossy(), tree.to_string_lossy());
        git(
            url,
            &[
                "clone",
                "--quiet",
                "--no-checkout",
                "--no-hardlinks",
                "--",
                &m,
                &t,
            ],
        )?;
        git(url, &["-C", &t, "checkout", "--quiet", "--detach", commit])?;
        git(url, &["-C", &t, "remote", "set-url", "origin", url])?;
        let time = git(url, &["-C", &t, "log", "-1", "--format=%ct", commit])?;
        let time = FileTime::from_unix_time(time.parse().unwrap_or(0), 0);
        if !keep_git {
            fs::remove_dir_all(tree.join(".git")).map_err(AddError::Io)?;
        }
        set_times(&tree, time).map_err(AddError::Io)?;
        Ok(scratch)
    }
}

/// Sets the times of `dir` and everything below it (symlinks themselves,
/// never followed) to `time`.
fn set_times(dir: &Path, time: FileTime) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            set_times(&path, time)?;
        }
        filetime::set_symlink_file_times(&path, time, time)?;
    }
    filetime::set_symlink_file_times(dir, time, time)
}

/// Copies the checked-out tree `scratch/tree` to `dest` in `root`, as COPY
/// copies a directory.
pub(super) fn copy_tree(
    scratch: &Path,
    dest: &str,
    root: &Path,
    workdir: &str,
    opts: &CopyOptions,
) -> Result<native::CopyStats, AddError> {
    let dest = if dest.ends_with('/') {
        dest.to_string()
    } else {
        format!("{dest}/")
    };
    Ok(native::copy(
        &scratch.join("tree"),
        &[CopySource::Path("/".into())],
        &dest,
        root,
        workdir,
        None,
        opts,
    )?)
}

/// Copies the downloaded file `cached` to `dest` in `root` as COPY copies
/// a file named `name` (from the URL): into `dest` when it ends in `/` or
/// is a directory, else as `dest`. Mode 0600 unless `--chmod`, time 0.
pub(super) fn copy_download(
    cached: &Path,
    name: &str,
    scratch: &Path,
    dest: &str,
    root: &Path,
    workdir: &str,
    opts: &CopyOptions,
) -> Result<native::CopyStats, AddError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("url-")
        .tempdir_in(scratch)
        .map_err(AddError::Io)?;
    let file = dir.path().join(name);
    fs::copy(cached, &file).map_err(AddError::Io)?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).map_err(AddError::Io)?;
    let zero = FileTime::from_unix_time(0, 0);
    filetime::set_file_times(&file, zero, zero).map_err(AddError::Io)?;
    Ok(native::copy(
        dir.path(),
        &[CopySource::Path(name.to_string())],
        dest,
        root,
        workdir,
        None,
        opts,
    )?)
}
