//! What of the image's `/usr/local/etc/pkg.conf` jbuild's installer
//! follows, as pkg reads it (`pkg_ini`, `libpkg/pkg_config.c`): a UCL
//! object whose keys are compared without case, unknown keys ignored, a
//! key whose value is not of its default's kind ignored (pkg says
//! "Malformed key"). Then what jbuild's configuration sets (`[pkg]
//! files_ignore_glob`, `files_ignore_regex`) replaces the file's, as
//! pkg's environment variables replace it.
//!
//! - `FILES_IGNORE_GLOB`, `FILES_IGNORE_REGEX` (arrays): a package's
//!   file whose absolute path matches a glob (fnmatch(3) without flags:
//!   `*` matches `/` too) or an extended regular expression (found
//!   anywhere in the path) is neither extracted nor recorded in the
//!   database (`match_ucl_lists` in `do_extract`, `pkgdb_register_pkg`).
//! - `AUTOMERGE` (boolean, default true): a configuration file the user
//!   changed is merged with the new version's on upgrade ([`super::merge3`]).
//! - `REPOS_DIR` (array): the directories of repository files
//!   ([`repos_dirs`], read by [`super::repo_conf::load_root_with`], so the
//!   PKG key and the install read the same files).
//! - `MERGETOOL` is not followed: pkg runs that program for a three-way
//!   merge; jbuild runs no program of the image's at install, and merges
//!   with its own [`super::merge3`] as pkg does when no tool is set.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::bytes::{Regex, RegexBuilder};

use super::ucl::{self, Value};
use crate::blame::Blame;

/// Where pkg reads it, under the root (`PREFIX/etc/pkg.conf`).
pub const PKG_CONF: &str = "usr/local/etc/pkg.conf";

/// What jbuild's configuration sets over the image's `pkg.conf` (`None`:
/// the image's stands).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Overrides {
    pub files_ignore_glob: Option<Vec<String>>,
    pub files_ignore_regex: Option<Vec<String>>,
}

impl Overrides {
    /// What a build step's key holds of them (empty when none is set).
    pub fn key_text(&self) -> String {
        let mut out = String::new();
        if let Some(g) = &self.files_ignore_glob {
            out.push_str(&format!("; files_ignore_glob {g:?}"));
        }
        if let Some(r) = &self.files_ignore_regex {
            out.push_str(&format!("; files_ignore_regex {r:?}"));
        }
        out
    }
}

/// The settings in force for one install.
#[derive(Debug, Clone)]
pub struct PkgConf {
    pub ignore: FilesIgnore,
    pub automerge: bool,
    /// The image's file could not be read as UCL: pkg says so and goes
    /// on with its defaults, and so does this (the reason, to say).
    pub warning: Option<String>,
}

impl Default for PkgConf {
    fn default() -> Self {
        PkgConf {
            ignore: FilesIgnore::default(),
            automerge: true,
            warning: None,
        }
    }
}

/// `FILES_IGNORE_GLOB` and `FILES_IGNORE_REGEX`, compiled.
#[derive(Debug, Clone, Default)]
pub struct FilesIgnore {
    globs: Option<GlobSet>,
    regexes: Vec<Regex>,
}

impl FilesIgnore {
    /// Compiled from the lists; `what` names where they come from.
    pub fn new(
        globs: &[String],
        regexes: &[String],
        what: &str,
    ) -> Result<FilesIgnore, PkgConfError> {
        let bad = |key: &str, pattern: &str, reason: String| PkgConfError::Pattern {
            what: what.to_string(),
            key: key.to_string(),
            pattern: pattern.to_string(),
            reason,
        };
        let mut set = GlobSetBuilder::new();
        for g in globs {
            let glob = GlobBuilder::new(g)
                .literal_separator(false)
                .build()
                .map_err(|e| bad("FILES_IGNORE_GLOB", g, e.to_string()))?;
            set.add(glob);
        }
        let mut compiled = Vec::with_capacity(regexes.len());
        for r in regexes {
            compiled.push(
                RegexBuilder::new(r)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| bad("FILES_IGNORE_REGEX", r, e.to_string()))?,
            );
        }
        let globs = if globs.is_empty() {
            None
        } else {
            Some(
                set.build()
                    .map_err(|e| bad("FILES_IGNORE_GLOB", &globs.join(", "), e.to_string()))?,
            )
        };
        Ok(FilesIgnore {
            globs,
            regexes: compiled,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.globs.is_none() && self.regexes.is_empty()
    }

    /// Whether the absolute path `path` is ignored.
    pub fn matches(&self, path: &str) -> bool {
        self.globs.as_ref().is_some_and(|g| g.is_match(path))
            || self.regexes.iter().any(|r| r.is_match(path.as_bytes()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PkgConfError {
    #[error("cannot read the image's {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the image's {} cannot be read", path.display())]
    Ucl {
        path: PathBuf,
        #[source]
        source: ucl::UclError,
    },
    #[error("{what}: {key} `{pattern}` is not a pattern pkg could use: {reason}")]
    Pattern {
        what: String,
        key: String,
        pattern: String,
        reason: String,
    },
}

impl Blame for PkgConfError {
    /// The image's file or the user's configuration, save a read that
    /// fails for another reason than the file's size.
    fn is_user_error(&self) -> bool {
        !matches!(self, PkgConfError::Read { source, .. }
            if source.kind() != std::io::ErrorKind::FileTooLarge)
    }
}

/// The most directories `REPOS_DIR` may name.
pub const MAX_REPOS_DIRS: usize = 64;

/// The image's `pkg.conf` parsed (`None`: it has none, or one that is not
/// UCL: then the reason, to say, as pkg says it and uses its defaults).
fn document(root: &Path) -> Result<(Option<Value>, Option<String>), PkgConfError> {
    let file = crate::fsutil::resolve_in_root(root, Path::new(PKG_CONF), true).ok();
    let Some(path) = file.filter(|p| p.is_file()) else {
        return Ok((None, None));
    };
    let text = read_text(&path).map_err(|source| PkgConfError::Read {
        path: path.clone(),
        source,
    })?;
    match ucl::parse(&text) {
        Ok(doc) => Ok((Some(doc), None)),
        Err(source) => {
            let e = PkgConfError::Ucl {
                path: Path::new("/").join(PKG_CONF),
                source,
            };
            let why = std::error::Error::source(&e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            Ok((None, Some(format!("{e}{why}: pkg's defaults are used"))))
        }
    }
}

/// The strings of the array `key` of `doc` (`None`: not set, or not an
/// array, which pkg ignores as malformed).
fn strings(doc: &Option<Value>, key: &str) -> Option<Vec<String>> {
    match doc.as_ref()?.get(key)? {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        ),
        _ => None,
    }
}

/// `REPOS_DIR` of the image's `pkg.conf`: the directories, in the image,
/// whose `*.conf` files pkg reads for repositories, in order
/// (`load_repositories` in `libpkg/pkg_config.c`); `None` when it does
/// not set it (or its pkg.conf is not UCL): pkg's default, `/etc/pkg/` then
/// `/usr/local/etc/pkg/repos/`. More than [`MAX_REPOS_DIRS`] is refused.
pub fn repos_dirs(root: &Path) -> Result<Option<Vec<String>>, PkgConfError> {
    let (doc, _) = document(root)?;
    let dirs = strings(&doc, "REPOS_DIR");
    if dirs.as_ref().is_some_and(|d| d.len() > MAX_REPOS_DIRS) {
        return Err(PkgConfError::Pattern {
            what: format!("the image's /{PKG_CONF}"),
            key: "REPOS_DIR".into(),
            pattern: format!("{} directories", dirs.map_or(0, |d| d.len())),
            reason: format!("more than {MAX_REPOS_DIRS}"),
        });
    }
    Ok(dirs)
}

/// The settings for an install into `root`: its `pkg.conf` (read inside
/// the root; none means pkg's defaults), then `overrides`.
pub fn read(root: &Path, overrides: &Overrides) -> Result<PkgConf, PkgConfError> {
    let (doc, warning) = document(root)?;
    let strings = |key: &str| strings(&doc, key);
    let globs = overrides
        .files_ignore_glob
        .clone()
        .or_else(|| strings("FILES_IGNORE_GLOB"))
        .unwrap_or_default();
    let regexes = overrides
        .files_ignore_regex
        .clone()
        .or_else(|| strings("FILES_IGNORE_REGEX"))
        .unwrap_or_default();
    let automerge = match doc.as_ref().and_then(|d| d.get("AUTOMERGE")) {
        Some(Value::Bool(b)) => *b,
        _ => true,
    };
    Ok(PkgConf {
        ignore: FilesIgnore::new(
            &globs,
            &regexes,
            "FILES_IGNORE (the image's pkg.conf, or [pkg] in jbuild's configuration)",
        )?,
        automerge,
        warning,
    })
}

/// The file's text, at most [`ucl::MAX_TEXT`] bytes.
fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(ucl::MAX_TEXT as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > ucl::MAX_TEXT {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("larger than {} bytes", ucl::MAX_TEXT),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_file_then_jbuilds_configuration() {
        let t = tempfile::tempdir().unwrap();
        let etc = t.path().join("usr/local/etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("pkg.conf"),
            "files_ignore_glob: [\"/usr/local/share/doc/*\"]\n\
             FILES_IGNORE_REGEX = [ \"\\\\.a$\" ];\nAUTOMERGE = no;\n",
        )
        .unwrap();
        let c = read(t.path(), &Overrides::default()).unwrap();
        assert!(!c.automerge);
        assert!(c.ignore.matches("/usr/local/share/doc/foo/README"));
        assert!(c.ignore.matches("/usr/local/lib/libfoo.a"));
        assert!(!c.ignore.matches("/usr/local/lib/libfoo.so"));
        let o = Overrides {
            files_ignore_glob: Some(vec!["/usr/local/lib/*.so".into()]),
            files_ignore_regex: None,
        };
        let c = read(t.path(), &o).unwrap();
        assert!(!c.ignore.matches("/usr/local/share/doc/foo/README"));
        assert!(c.ignore.matches("/usr/local/lib/libfoo.so"));
        assert!(c.ignore.matches("/usr/local/lib/libfoo.a"));
        let none = read(&t.path().join("nothing"), &Overrides::default()).unwrap();
        assert!(none.automerge && none.ignore.is_empty());
        std::fs::write(etc.join("pkg.conf"), "FILES_IGNORE_GLOB = [\n").unwrap();
        let bad = read(t.path(), &Overrides::default()).unwrap();
        assert!(bad.warning.is_some() && bad.ignore.is_empty() && bad.automerge);
    }
}
