//! Build contexts that are not a directory here, as docker and podman take
//! them: a git repository (`https://host/repo.git#ref:subdir`,
//! `git@host:repo.git#ref`, `ssh://…`, `git://…`, `github.com/owner/repo`,
//! a `file://` repository), a tar archive at an `http(s)://` or `file://`
//! URL, or `-`, a tar archive on standard input. A URL or standard input
//! that holds no archive is a recipe, built with an empty context (as
//! `docker build - < Dockerfile`).
//!
//! Everything is read as hostile input, by the parts ADD uses: a
//! repository is mirrored in `cache/add/git` and checked out at the commit
//! its ref resolves to (`super::add::GitMirrors`, credentials from
//! [`super::add::GitCredentials`]); an archive is downloaded into
//! `cache/add/url` (`AddPlaces::download`) or copied from standard
//! input (at most `[layers] max_size` bytes), and extracted with
//! [`crate::layer::archive::extract`], as a hostile layer is applied: no
//! entry leaves the directory, no link leads out, `[layers]` bounds it.
//! A subdirectory (`#ref:subdir`) is found without following a link out
//! of the checkout.
//!
//! The checkout or extraction lives in jbuild's `tmp/` for as long as the
//! [`RemoteContext`] does. Its [`ContextSource`] says where it came from:
//! the provenance names it, and a repository's commit is part of the key
//! of every step that reads the context (a step that copies a file the
//! new commit did not change still runs again: the key says where the
//! files came from, as a BuildKit git source's does).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::add::{AddError, AddPlaces, GitMirrors};
use crate::blame::Blame;
use crate::jailfile::{self, Diagnostic};
use crate::layer::archive;
use crate::layer::{LayerError, Limits};

/// What `jbuild build CONTEXT` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextSpec {
    /// A directory here.
    Dir(PathBuf),
    /// A git repository: the URL git is given, the ref (`None`: the
    /// default branch) and the subdirectory that is the context.
    Git {
        url: String,
        reference: Option<String>,
        subdir: Option<String>,
    },
    /// A tar archive (or a recipe) at an `http(s)://` or `file://` URL.
    Url(String),
    /// `-`: a tar archive (or a recipe) on standard input.
    Stdin,
}

impl ContextSpec {
    /// Tells what `arg` names, as docker does: `-`; git URLs (`git@`,
    /// `git://`, `ssh://`, `github.com/`, an `http(s)://` URL whose path
    /// ends in `.git`, a `file://` URL of a directory or a `.git`); other
    /// `http(s)://` and `file://` URLs; else a directory.
    pub fn parse(arg: &str) -> ContextSpec {
        if arg == "-" {
            return ContextSpec::Stdin;
        }
        let (base, fragment) = match arg.split_once('#') {
            Some((b, f)) => (b, Some(f)),
            None => (arg, None),
        };
        let web = base.starts_with("https://") || base.starts_with("http://");
        let git = base.starts_with("git@")
            || base.starts_with("git://")
            || base.starts_with("ssh://")
            || base.starts_with("github.com/")
            || (web && base.trim_end_matches('/').ends_with(".git"))
            || base.strip_prefix("file://").is_some_and(|p| {
                p.trim_end_matches('/').ends_with(".git") || Path::new(p).is_dir()
            });
        if git {
            let url = match base.strip_prefix("github.com/") {
                Some(rest) => format!("https://github.com/{rest}"),
                None => base.to_string(),
            };
            // `#ref:subdir`; a ref has no `:` (git refuses one).
            let (reference, subdir) = match fragment {
                Some(f) => match f.split_once(':') {
                    Some((r, d)) => (r, Some(d)),
                    None => (f, None),
                },
                None => ("", None),
            };
            return ContextSpec::Git {
                url,
                reference: Some(reference).filter(|r| !r.is_empty()).map(String::from),
                subdir: subdir
                    .map(|d| d.trim_matches('/'))
                    .filter(|d| !d.is_empty())
                    .map(String::from),
            };
        }
        if web || base.starts_with("file://") {
            return ContextSpec::Url(arg.to_string());
        }
        ContextSpec::Dir(PathBuf::from(arg))
    }
}

/// Where a context came from, for the provenance and the cache keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextSource {
    /// `git+URL[#ref[:subdir]]`, the archive's URL, or `jbuild:stdin`; a
    /// password in the URL is left out.
    pub uri: String,
    /// `sha1` (or `sha256`) of the commit; `sha256` of the archive.
    pub digest: BTreeMap<String, String>,
    /// The commit a repository's ref resolved to.
    pub revision: Option<String>,
}

/// A context fetched into jbuild's `tmp/`, removed when this is dropped.
pub struct RemoteContext {
    _scratch: tempfile::TempDir,
    /// The context's directory.
    pub dir: PathBuf,
    /// The recipe, when what was fetched is no archive but a recipe.
    pub recipe: Option<String>,
    pub source: ContextSource,
}

#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("the build context {what}")]
    Add {
        what: String,
        #[source]
        source: Box<AddError>,
    },
    #[error("cannot extract the {format} archive of the build context {what}")]
    Archive {
        what: String,
        format: &'static str,
        #[source]
        source: LayerError,
    },
    #[error("the build context on standard input is over {max} bytes ([layers] max_size)")]
    TooBig { max: u64 },
    #[error("the build context {what}: `{subdir}` is not a directory in it")]
    NoSubdir { what: String, subdir: String },
    #[error("the recipe of the build context {what}")]
    Recipe {
        what: String,
        #[source]
        source: Box<Diagnostic>,
    },
    #[error("reading the build context {what}")]
    Read {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("jbuild's scratch directory for the build context")]
    Scratch(#[source] io::Error),
}

impl Blame for ContextError {
    /// What the context holds and where it is are the user's; jbuild's
    /// own directories are not.
    fn is_user_error(&self) -> bool {
        match self {
            ContextError::Add { source, .. } => source.is_user_error(),
            ContextError::Archive { .. }
            | ContextError::TooBig { .. }
            | ContextError::NoSubdir { .. }
            | ContextError::Recipe { .. }
            | ContextError::Read { .. } => true,
            ContextError::Scratch(_) => false,
        }
    }
}

/// Fetches the context `spec` names into `places`' `tmp/`; `None` for a
/// directory, which is used where it is. `stdin` is read for `-` only.
pub fn fetch(
    spec: &ContextSpec,
    places: &AddPlaces,
    limits: &Limits,
    stdin: &mut dyn Read,
) -> Result<Option<RemoteContext>, ContextError> {
    match spec {
        ContextSpec::Dir(_) => Ok(None),
        ContextSpec::Git {
            url,
            reference,
            subdir,
        } => git(places, url, reference.as_deref(), subdir.as_deref()).map(Some),
        ContextSpec::Url(url) => {
            let what = shown(url);
            let add = |source| ContextError::Add {
                what: what.clone(),
                source: Box::new(source),
            };
            let (digest, cached) = places.download(url, None, limits.max_size).map_err(add)?;
            let source = ContextSource {
                uri: what.clone(),
                digest: [("sha256".to_string(), digest.hex().to_string())].into(),
                revision: None,
            };
            unpack(places, limits, &cached, &what, source).map(Some)
        }
        ContextSpec::Stdin => {
            let what = "on standard input".to_string();
            let scratch = scratch(places)?;
            let file = scratch.path().join("input");
            let digest = copy_bounded(stdin, &file, limits.max_size)?;
            let source = ContextSource {
                uri: "jbuild:stdin".into(),
                digest: [("sha256".to_string(), digest)].into(),
                revision: None,
            };
            let fetched = unpack(places, limits, &file, &what, source)?;
            drop(scratch);
            Ok(Some(fetched))
        }
    }
}

fn scratch(places: &AddPlaces) -> Result<tempfile::TempDir, ContextError> {
    let tmp = places.scratch().map_err(|source| ContextError::Add {
        what: "(scratch)".into(),
        source: Box::new(source),
    })?;
    tempfile::Builder::new()
        .prefix("context-")
        .tempdir_in(tmp)
        .map_err(ContextError::Scratch)
}

/// `url` without a password (`user:secret@` → `user@`).
fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}{path}")
        }
        None => url.to_string(),
    }
}

/// Copies at most `max` bytes of `from` to the new file `to`; the sha256
/// of what it copied (hex).
fn copy_bounded(from: &mut dyn Read, to: &Path, max: u64) -> Result<String, ContextError> {
    let read = |source| ContextError::Read {
        what: "on standard input".into(),
        source,
    };
    let mut out = File::create(to).map_err(ContextError::Scratch)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read(e)),
        };
        total += n as u64;
        if total > max {
            return Err(ContextError::TooBig { max });
        }
        hash.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(ContextError::Scratch)?;
    }
    out.sync_all().map_err(ContextError::Scratch)?;
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The archive `file` extracted into a new scratch `tree/`; a file that is
/// no archive is the recipe, with an empty context.
fn unpack(
    places: &AddPlaces,
    limits: &Limits,
    file: &Path,
    what: &str,
    source: ContextSource,
) -> Result<RemoteContext, ContextError> {
    let read = |source| ContextError::Read {
        what: what.to_string(),
        source,
    };
    let scratch = scratch(places)?;
    let dir = scratch.path().join("tree");
    fs::create_dir(&dir).map_err(ContextError::Scratch)?;
    let mut f = File::open(file).map_err(read)?;
    let recipe = match archive::sniff(&mut f).map_err(read)? {
        Some(format) => {
            archive::extract(f, format, &dir, limits).map_err(|source| ContextError::Archive {
                what: what.to_string(),
                format: format.name(),
                source,
            })?;
            None
        }
        None => Some(jailfile::read_from(f, Path::new(what)).map_err(|source| {
            ContextError::Recipe {
                what: what.to_string(),
                source: Box::new(source),
            }
        })?),
    };
    Ok(RemoteContext {
        _scratch: scratch,
        dir,
        recipe,
        source,
    })
}

/// The repository `url` checked out at the commit `reference` resolves
/// to, its `subdir` the context.
fn git(
    places: &AddPlaces,
    url: &str,
    reference: Option<&str>,
    subdir: Option<&str>,
) -> Result<RemoteContext, ContextError> {
    let what = shown(url);
    let add = |source| ContextError::Add {
        what: what.clone(),
        source: Box::new(source),
    };
    let mut mirrors = GitMirrors::default();
    let commit = mirrors.commit(Some(places), url, reference).map_err(add)?;
    let checkout = mirrors
        .checkout(Some(places), url, &commit, false)
        .map_err(add)?;
    let tree = checkout.path().join("tree");
    let dir = match subdir {
        None => tree,
        Some(d) => {
            // Followed as a process in the checkout would: no link out.
            let found = crate::fsutil::resolve_in_root(&tree, Path::new(d), true)
                .ok()
                .filter(|p| fs::metadata(p).is_ok_and(|m| m.is_dir()));
            found.ok_or_else(|| ContextError::NoSubdir {
                what: what.clone(),
                subdir: d.to_string(),
            })?
        }
    };
    let mut uri = format!("git+{what}");
    if reference.is_some() || subdir.is_some() {
        uri.push('#');
        uri.push_str(reference.unwrap_or_default());
        if let Some(d) = subdir {
            uri.push(':');
            uri.push_str(d);
        }
    }
    let algorithm = if commit.len() == 64 { "sha256" } else { "sha1" };
    Ok(RemoteContext {
        _scratch: checkout,
        dir,
        recipe: None,
        source: ContextSource {
            uri,
            digest: [(algorithm.to_string(), commit.clone())].into(),
            revision: Some(commit),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_contexts_apart_as_docker_does() {
        let git = |url: &str, r: Option<&str>, d: Option<&str>| ContextSpec::Git {
            url: url.into(),
            reference: r.map(String::from),
            subdir: d.map(String::from),
        };
        assert_eq!(ContextSpec::parse("-"), ContextSpec::Stdin);
        assert_eq!(
            ContextSpec::parse("https://h/r.git#v1.2:sub/dir"),
            git("https://h/r.git", Some("v1.2"), Some("sub/dir"))
        );
        assert_eq!(
            ContextSpec::parse("https://h/r.git#:sub"),
            git("https://h/r.git", None, Some("sub"))
        );
        assert_eq!(
            ContextSpec::parse("git@h:o/r.git#main"),
            git("git@h:o/r.git", Some("main"), None)
        );
        assert_eq!(
            ContextSpec::parse("github.com/o/r"),
            git("https://github.com/o/r", None, None)
        );
        assert_eq!(
            ContextSpec::parse("file:///srv/r.git#abc"),
            git("file:///srv/r.git", Some("abc"), None)
        );
        assert_eq!(
            ContextSpec::parse("https://h/ctx.tar.gz"),
            ContextSpec::Url("https://h/ctx.tar.gz".into())
        );
        assert_eq!(
            ContextSpec::parse("file:///nonexistent/ctx.tar"),
            ContextSpec::Url("file:///nonexistent/ctx.tar".into())
        );
        assert_eq!(
            ContextSpec::parse("some/dir"),
            ContextSpec::Dir("some/dir".into())
        );
    }

    #[test]
    fn a_password_in_a_url_is_not_shown() {
        assert_eq!(shown("https://me:s3cret@h/r.git#x"), "https://me@h/r.git#x");
        assert_eq!(shown("https://h/a@b"), "https://h/a@b");
    }
}
