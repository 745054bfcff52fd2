//! Repository configurations as pkg(8) reads them from an image.
//!
//! pkg reads the `*.conf` files of each directory of `REPOS_DIR`, by
//! default `/etc/pkg/` then `/usr/local/etc/pkg/repos/` (pkg.conf(5)), each
//! directory's files in name order. Every file holds UCL objects named after
//! repositories; a repository named again in a later file (or later in the
//! same file) keeps what it had and takes the keys written there: that is
//! how `FreeBSD: { enabled: no }` in `/usr/local/etc/pkg/repos/` turns the
//! base system's repository off. Keys are compared without case, as pkg
//! does.
//!
//! Values are expanded as libucl expands the variables pkg registers
//! (`${ABI}`, `${OSNAME}`, `${VERSION_MAJOR}`, `${VERSION_MINOR}`,
//! `${ARCH}`, in `${NAME}` or `$NAME` form; an unknown one stays as
//! written), from the image's [`Abi`], never the host's.
//!
//! `REPOS_DIR` set in the image's `pkg.conf` replaces the default list
//! ([`super::pkg_conf::repos_dirs`]). What is not read yet: the
//! `repositories` object of `pkg.conf` itself, the `env`/`ip_version`
//! keys, and `<NAME>_ENABLED` environment overrides.

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::abi::Abi;
use super::ucl::{self, UclError, Value};

/// pkg's default `REPOS_DIR`, relative to the root.
pub const REPOS_DIRS: [&str; 2] = ["etc/pkg", "usr/local/etc/pkg/repos"];
/// The most `.conf` files read from one directory.
pub const MAX_FILES: usize = 256;

/// How a repository's mirrors are found (`mirror_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MirrorType {
    #[default]
    None,
    /// DNS SRV records of `_https._tcp.<host>` (`pkg+https://` urls).
    Srv,
    /// A list of `URL: <url>` lines at the url.
    Http,
}

/// How a repository's catalogue is signed (`signature_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignatureType {
    #[default]
    None,
    /// One RSA key, the file `pubkey` names.
    Pubkey,
    /// Signers whose key fingerprints are in `fingerprints/trusted` and
    /// not in `fingerprints/revoked`.
    Fingerprints,
}

/// One repository, every file that named it applied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepoConfig {
    pub name: String,
    pub url: Option<String>,
    pub enabled: bool,
    /// Higher wins when two repositories have a package (default 0).
    pub priority: i64,
    pub mirror_type: MirrorType,
    pub signature_type: SignatureType,
    /// A directory of the image (with `trusted/` and `revoked/`).
    pub fingerprints: Option<String>,
    /// A file of the image.
    pub pubkey: Option<String>,
    /// The files that named it, in the order applied (paths in the root).
    pub files: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum RepoConfError {
    #[error("{}", path.display())]
    Ucl {
        path: PathBuf,
        #[source]
        source: UclError,
    },
    #[error("{}: repository `{repo}`: {key}: {reason}", path.display())]
    BadValue {
        path: PathBuf,
        repo: String,
        key: String,
        reason: String,
    },
    #[error(
        "repository `{name}` is enabled but no file gives it a url (named in {}): \
         add `url: \"...\"` or `enabled: no`",
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NoUrl { name: String, files: Vec<PathBuf> },
    #[error("{}: more than {MAX_FILES} .conf files", dir.display())]
    TooManyFiles { dir: PathBuf },
    #[error("{}: more than {} bytes", path.display(), ucl::MAX_TEXT)]
    TooLarge { path: PathBuf },
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The image's `pkg.conf`, for its `REPOS_DIR`.
    #[error(transparent)]
    PkgConf(Box<super::pkg_conf::PkgConfError>),
}

impl Blame for RepoConfError {
    /// A configuration that does not read is the image's (the recipe's);
    /// a read that fails is the machine's.
    fn is_user_error(&self) -> bool {
        match self {
            RepoConfError::Read { .. } => false,
            RepoConfError::PkgConf(e) => e.is_user_error(),
            _ => true,
        }
    }
}

/// The variables pkg registers with libucl, from the image's ABI.
pub fn variables(abi: &Abi) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("ABI", abi.to_string()),
        ("OSNAME", "FreeBSD".to_string()),
        ("VERSION_MAJOR", abi.major.to_string()),
        ("VERSION_MINOR", abi.minor.to_string()),
        ("ARCH", abi.arch.clone()),
    ])
}

/// `text` with `${NAME}` and `$NAME` replaced where NAME is in `vars`.
pub fn expand(text: &str, vars: &BTreeMap<&'static str, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, len) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        match vars.get(name) {
            Some(v) if len > 0 => {
                out.push_str(v);
                rest = &after[len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The repositories of the image at `root`, from pkg's default
/// directories, enabled or not, sorted by name.
pub fn load_root(root: &Path, abi: &Abi) -> Result<Vec<RepoConfig>, RepoConfError> {
    load_root_with(root, abi, None)
}

/// [`load_root`], with the host directory `local` (`--pkg-repos DIR`) read
/// in place of the image's `/usr/local/etc/pkg/repos`, as when it is
/// mounted there for pkg(8). The directories are pkg's `REPOS_DIR`: the
/// image's `pkg.conf`'s when it sets it ([`super::pkg_conf::repos_dirs`]),
/// else [`REPOS_DIRS`]. When the image's list does not name
/// `/usr/local/etc/pkg/repos`, `local` is read after its directories
/// (pkg(8) would not see the mount; the flag asks for it to be used).
pub fn load_root_with(
    root: &Path,
    abi: &Abi,
    local: Option<&Path>,
) -> Result<Vec<RepoConfig>, RepoConfError> {
    let dirs: Vec<String> =
        match super::pkg_conf::repos_dirs(root).map_err(|e| RepoConfError::PkgConf(Box::new(e)))? {
            Some(dirs) => dirs,
            None => REPOS_DIRS.iter().map(|d| format!("/{d}")).collect(),
        };
    let is_local = |d: &str| d.trim_matches('/') == REPOS_DIRS[1];
    let mut texts = Vec::new();
    let read_local = |texts: &mut Vec<(PathBuf, String)>, local: &Path| {
        for (name, text) in conf_files(local, &|n| Ok(local.join(n)))? {
            texts.push((local.join(name), text));
        }
        Ok::<_, RepoConfError>(())
    };
    for dir in &dirs {
        if let (Some(local), true) = (local, is_local(dir)) {
            read_local(&mut texts, local)?;
            continue;
        }
        let rel = Path::new(dir.trim_start_matches('/'));
        let host = crate::fsutil::resolve_in_root(root, rel, true).map_err(|source| {
            RepoConfError::Read {
                path: root.join(rel),
                source,
            }
        })?;
        for (name, text) in conf_files(&host, &|n| {
            crate::fsutil::resolve_in_root(root, &rel.join(n), true)
        })? {
            texts.push((PathBuf::from("/").join(rel).join(name), text));
        }
    }
    if let (Some(local), false) = (local, dirs.iter().any(|d| is_local(d))) {
        read_local(&mut texts, local)?;
    }
    from_texts(&texts, abi)
}

/// The repositories of plain directories (`--pkg-repos DIR`), in order.
pub fn load_dirs(dirs: &[PathBuf], abi: &Abi) -> Result<Vec<RepoConfig>, RepoConfError> {
    let mut texts = Vec::new();
    for dir in dirs {
        for (name, text) in conf_files(dir, &|n| Ok(dir.join(n)))? {
            texts.push((dir.join(name), text));
        }
    }
    from_texts(&texts, abi)
}

/// The `*.conf` files of `dir` in name order (none if it is missing);
/// `open` gives the host path of a name.
fn conf_files(
    dir: &Path,
    open: &dyn Fn(&str) -> io::Result<PathBuf>,
) -> Result<Vec<(String, String)>, RepoConfError> {
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RepoConfError::Read { path, source }
    };
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new())
        }
        Err(e) => return Err(read_err(dir)(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry.map_err(read_err(dir))?.file_name();
        let name = name.to_string_lossy().into_owned();
        if name.ends_with(".conf") && !name.starts_with('.') {
            names.push(name);
        }
        if names.len() > MAX_FILES {
            return Err(RepoConfError::TooManyFiles {
                dir: dir.to_path_buf(),
            });
        }
    }
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let path = open(&name).map_err(read_err(&dir.join(&name)))?;
        let file = match fs::File::open(&path) {
            Ok(f) => f,
            // pkg skips what it cannot open as a file (a dangling link).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(read_err(&path)(e)),
        };
        if !file.metadata().map_err(read_err(&path))?.is_file() {
            continue;
        }
        let mut bytes = Vec::new();
        file.take(ucl::MAX_TEXT as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(read_err(&path))?;
        if bytes.len() > ucl::MAX_TEXT {
            return Err(RepoConfError::TooLarge { path });
        }
        out.push((name, String::from_utf8_lossy(&bytes).into_owned()));
    }
    Ok(out)
}

/// Applies the texts in order (`(path shown, UCL)`), as pkg does.
pub fn from_texts(
    texts: &[(PathBuf, String)],
    abi: &Abi,
) -> Result<Vec<RepoConfig>, RepoConfError> {
    let vars = variables(abi);
    let mut repos: BTreeMap<String, RepoConfig> = BTreeMap::new();
    for (path, text) in texts {
        let top = ucl::parse(text).map_err(|source| RepoConfError::Ucl {
            path: path.clone(),
            source,
        })?;
        for (name, body) in top.pairs() {
            let Value::Object(keys) = body else {
                return Err(bad(
                    path,
                    name,
                    "",
                    "a repository must be an object `{ ... }`",
                ));
            };
            let repo = repos.entry(name.clone()).or_insert_with(|| RepoConfig {
                name: name.clone(),
                enabled: true,
                ..RepoConfig::default()
            });
            repo.files.push(path.clone());
            for (key, value) in keys {
                apply(repo, path, key, value, &vars)?;
            }
        }
    }
    let mut out = Vec::new();
    for (_, repo) in repos {
        if repo.url.is_none() {
            if repo.enabled {
                return Err(RepoConfError::NoUrl {
                    name: repo.name,
                    files: repo.files,
                });
            }
            continue;
        }
        out.push(repo);
    }
    Ok(out)
}

/// The `url`s (as written, variables unexpanded) of the repositories of
/// one configuration text that say `mirror_type: http`: what the fetch
/// phase, which reads `--pkg-repos` files for their urls only, asks
/// through a mirror list. A text that does not parse names none (the step
/// reports it).
pub fn http_mirrored_urls(text: &str) -> Vec<String> {
    let Ok(top) = ucl::parse(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (_, body) in top.pairs() {
        let Value::Object(keys) = body else {
            continue;
        };
        let get = |k: &str| {
            keys.iter()
                .rev()
                .find(|(key, _)| key.eq_ignore_ascii_case(k))
                .and_then(|(_, v)| v.as_str())
        };
        if let (Some(url), Some(m)) = (get("url"), get("mirror_type")) {
            if m.eq_ignore_ascii_case("http") {
                out.push(url.to_string());
            }
        }
    }
    out
}

fn bad(path: &Path, repo: &str, key: &str, reason: &str) -> RepoConfError {
    RepoConfError::BadValue {
        path: path.to_path_buf(),
        repo: repo.to_string(),
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

fn apply(
    repo: &mut RepoConfig,
    path: &Path,
    key: &str,
    value: &Value,
    vars: &BTreeMap<&'static str, String>,
) -> Result<(), RepoConfError> {
    let string = || {
        value
            .as_str()
            .map(|s| expand(s, vars))
            .ok_or_else(|| bad(path, &repo.name, key, "a string was expected"))
    };
    match key.to_ascii_lowercase().as_str() {
        "url" => repo.url = Some(string()?),
        "enabled" => {
            repo.enabled = value
                .as_bool()
                .ok_or_else(|| bad(path, &repo.name, key, "yes or no was expected"))?
        }
        "priority" => {
            repo.priority = value
                .as_int()
                .ok_or_else(|| bad(path, &repo.name, key, "a number was expected"))?
        }
        "mirror_type" => {
            repo.mirror_type = match string()?.to_ascii_lowercase().as_str() {
                "srv" => MirrorType::Srv,
                "http" => MirrorType::Http,
                "none" => MirrorType::None,
                _ => return Err(bad(path, &repo.name, key, "one of srv, http, none")),
            }
        }
        "signature_type" => {
            repo.signature_type = match string()?.to_ascii_lowercase().as_str() {
                "pubkey" => SignatureType::Pubkey,
                "fingerprints" => SignatureType::Fingerprints,
                "none" => SignatureType::None,
                _ => {
                    return Err(bad(
                        path,
                        &repo.name,
                        key,
                        "one of pubkey, fingerprints, none",
                    ))
                }
            }
        }
        "fingerprints" => repo.fingerprints = Some(string()?),
        "pubkey" => repo.pubkey = Some(string()?),
        // pkg reads `ip_version` and `env` too; neither changes what is
        // fetched or trusted, and unknown keys pkg ignores with a warning.
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abi() -> Abi {
        Abi {
            major: 14,
            minor: 3,
            arch: "aarch64".into(),
            osversion: 1_403_000,
        }
    }

    #[test]
    fn variables_expand_in_both_forms_and_unknown_ones_stay() {
        let v = variables(&abi());
        assert_eq!(
            expand(
                "pkg+https://x/${ABI}/quarterly_$VERSION_MINOR/$ARCH/${NOPE}$",
                &v
            ),
            "pkg+https://x/FreeBSD:14:aarch64/quarterly_3/aarch64/${NOPE}$"
        );
        assert_eq!(
            expand("/usr/share/keys/pkgbase-${VERSION_MAJOR}", &v),
            "/usr/share/keys/pkgbase-14"
        );
    }

    #[test]
    fn later_files_override_per_key() {
        let texts = vec![
            (
                PathBuf::from("/etc/pkg/FreeBSD.conf"),
                "FreeBSD: { url: \"pkg+https://pkg.FreeBSD.org/${ABI}/quarterly\", \
                 mirror_type: \"srv\", signature_type: \"fingerprints\", \
                 fingerprints: \"/usr/share/keys/pkg\", enabled: yes }"
                    .to_string(),
            ),
            (
                PathBuf::from("/usr/local/etc/pkg/repos/FreeBSD.conf"),
                "FreeBSD: { url: \"pkg+https://pkg.FreeBSD.org/${ABI}/latest\" }\n\
                 local: { url: \"file:///repo\", priority: 10, SIGNATURE_TYPE: \"PUBKEY\", pubkey: \"/k.pem\" }\n\
                 off: { enabled: no }"
                    .to_string(),
            ),
        ];
        let repos = from_texts(&texts, &abi()).unwrap();
        assert_eq!(repos.len(), 2, "{repos:?}");
        let f = &repos[0];
        assert_eq!(
            f.url.as_deref(),
            Some("pkg+https://pkg.FreeBSD.org/FreeBSD:14:aarch64/latest")
        );
        assert_eq!(f.mirror_type, MirrorType::Srv);
        assert_eq!(f.signature_type, SignatureType::Fingerprints);
        assert_eq!(f.files.len(), 2);
        let l = &repos[1];
        assert_eq!((l.priority, l.signature_type), (10, SignatureType::Pubkey));
        assert_eq!(l.pubkey.as_deref(), Some("/k.pem"));
    }

    #[test]
    fn an_enabled_repository_without_url_is_refused_naming_its_files() {
        let texts = vec![(
            PathBuf::from("/etc/pkg/x.conf"),
            "x: { priority: 1 }".to_string(),
        )];
        let e = from_texts(&texts, &abi()).unwrap_err();
        assert!(
            e.to_string().contains("`x`") && e.to_string().contains("/etc/pkg/x.conf"),
            "{e}"
        );
        let texts = vec![(
            PathBuf::from("/a.conf"),
            "x: { mirror_type: ftp, url: u }".to_string(),
        )];
        assert!(from_texts(&texts, &abi())
            .unwrap_err()
            .to_string()
            .contains("mirror_type"));
    }

    #[test]
    fn repos_dir_of_the_image_pkg_conf_names_the_directories_read() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write("etc/pkg/FreeBSD.conf", "FreeBSD: { url: a }");
        write("usr/local/etc/pkg/repos/local.conf", "mine: { url: b }");
        write("opt/repos/other.conf", "other: { url: c }");
        let names = |local: Option<&Path>| -> Vec<String> {
            let repos = load_root_with(root, &abi(), local).unwrap();
            repos.into_iter().map(|r| r.name).collect()
        };
        assert_eq!(names(None), ["FreeBSD", "mine"]);
        write(
            "usr/local/etc/pkg.conf",
            "REPOS_DIR: [\"/opt/repos/\", \"/usr/local/etc/pkg/repos\"]",
        );
        assert_eq!(names(None), ["mine", "other"]);
        // `--pkg-repos` stands for /usr/local/etc/pkg/repos where the list
        // has it, and is read last where it does not.
        let flag = root.join("flag");
        fs::create_dir_all(&flag).unwrap();
        fs::write(flag.join("f.conf"), "flagged: { url: d }").unwrap();
        assert_eq!(names(Some(&flag)), ["flagged", "other"]);
        write("usr/local/etc/pkg.conf", "REPOS_DIR = [ \"/opt/repos\" ];");
        assert_eq!(names(None), ["other"]);
        assert_eq!(names(Some(&flag)), ["flagged", "other"]);
        // More directories than pkg.conf may name: refused, naming the key.
        let many: Vec<String> = (0..=crate::pkg::pkg_conf::MAX_REPOS_DIRS)
            .map(|i| format!("\"/d{i}\""))
            .collect();
        write(
            "usr/local/etc/pkg.conf",
            &format!("REPOS_DIR = [{}];", many.join(", ")),
        );
        let e = load_root_with(root, &abi(), None).unwrap_err();
        assert!(e.to_string().contains("REPOS_DIR"), "{e}");
        // Not an array: malformed, pkg's default stands.
        write("usr/local/etc/pkg.conf", "REPOS_DIR = \"/opt/repos\";");
        assert_eq!(names(None), ["FreeBSD", "mine"]);
    }
}
