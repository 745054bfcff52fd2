//! `.jailignore`: the files of the build context that COPY never sees, with
//! `.dockerignore` semantics (moby's `patternmatcher`, as BuildKit uses it).
//!
//! Which file: the recipe's own beside it (`Containerfile.dockerignore`,
//! `NAME.jailignore`, as BuildKit reads `<Dockerfile>.dockerignore`:
//! [`Ignore::load_for`]), else the context's `.jailignore`, else
//! `.containerignore` (podman and buildah), else `.dockerignore` — the first
//! that exists is the only one read, so a context brought from docker or
//! podman is filtered as it was there, and the build says which file it
//! used ([`Ignore::file`]).
//!
//! The file, line by line:
//!
//! - a line starting with `#` (in the first column) is a comment; blank
//!   lines are skipped; other lines are trimmed of surrounding whitespace;
//! - `!pattern` is an exception: it re-includes what earlier lines
//!   excluded; a lone `!` is an error;
//! - a pattern is cleaned like Go's `filepath.Clean` (`./a//b/` is `a/b`)
//!   and is relative to the context root even when written with a leading
//!   `/`.
//!
//! Matching a path (relative to the context root, `/`-separated):
//!
//! - `*` and `?` never match `/`; `[a-z]`, `[!a]`/`[^a]` and `\` escapes
//!   work as in Go's `filepath.Match`; `**` as a whole component matches
//!   any number of directories (`**/x`, `a/**/b`, `a/**`). `{`, `}` are
//!   literal.
//! - A pattern applies to a path when it matches the path itself or any of
//!   its parent directories, so `build` excludes `build/out/a.o`.
//! - The patterns are read in order and the last one that applies decides
//!   (an exception can only undo an earlier exclusion).
//! - An excluded directory is skipped whole unless an exception's text
//!   starts with the directory's path plus `/` (`!build/keep.txt` for
//!   `build`). This is Docker's rule, literal prefix and all: `!**/keep`
//!   does not reach into an excluded `build`. Inside such a directory only
//!   what is re-included is copied, with its parent directories.
//!
//! Differences from Docker: `**` is special only as a whole path component
//! (Docker's `**.txt` also matches below directories, here it is `*.txt`);
//! patterns are matched on bytes, so non-UTF-8 names work.

use std::fs;
use std::io;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

use super::NativeError;

/// The name of jbuild's own ignore file in the build context.
pub const FILE_NAME: &str = ".jailignore";

/// The ignore files a build context may have, in the order they are looked
/// for: jbuild's own, then podman's and buildah's, then docker's.
pub const FILE_NAMES: [&str; 3] = [FILE_NAME, ".containerignore", ".dockerignore"];

/// Parsed `.jailignore` patterns. See the module docs for the rules.
#[derive(Debug, Clone)]
pub struct Ignore {
    patterns: Vec<Pattern>,
    has_exceptions: bool,
    /// The file the patterns came from (`None` for [`Ignore::parse`]d text).
    file: Option<String>,
    /// Whether that file is the recipe's own (`Containerfile.dockerignore`).
    recipe_own: bool,
}

#[derive(Debug, Clone)]
struct Pattern {
    /// Cleaned, without `!`: what Docker's prefix rule compares.
    text: String,
    exception: bool,
    matcher: GlobMatcher,
}

impl Ignore {
    /// Reads the context's ignore file, the first of `FILE_NAMES` that
    /// exists in `context_dir`; `None` if there is none.
    pub fn load(context_dir: &Path) -> Result<Option<Ignore>, NativeError> {
        Ignore::first_of(
            FILE_NAMES
                .iter()
                .map(|n| (context_dir.join(n), n.to_string())),
        )
    }

    /// The ignore file for a build of the recipe `recipe`: the recipe's own
    /// beside it (`<recipe>.jailignore`, `.containerignore` or
    /// `.dockerignore`, as BuildKit reads `<Dockerfile>.dockerignore`),
    /// which wins over the context's; else the context's ([`Ignore::load`]).
    pub fn load_for(context_dir: &Path, recipe: &Path) -> Result<Option<Ignore>, NativeError> {
        if let (Some(dir), Some(name)) = (recipe.parent(), recipe.file_name()) {
            let name = name.to_string_lossy();
            let own = FILE_NAMES.iter().map(|suffix| {
                let file = format!("{name}{suffix}");
                (dir.join(&file), file)
            });
            if let Some(mut ignore) = Ignore::first_of(own)? {
                ignore.recipe_own = true;
                return Ok(Some(ignore));
            }
        }
        Ignore::load(context_dir)
    }

    /// The first of `candidates` (path, name shown) that exists, parsed.
    fn first_of(
        candidates: impl Iterator<Item = (std::path::PathBuf, String)>,
    ) -> Result<Option<Ignore>, NativeError> {
        for (path, name) in candidates {
            match fs::read(&path) {
                Ok(bytes) => {
                    let mut ignore = Ignore::parse(&String::from_utf8_lossy(&bytes), Some(&path))?;
                    ignore.file = Some(name);
                    return Ok(Some(ignore));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(NativeError::io("read", path)(e)),
            }
        }
        Ok(None)
    }

    /// The name of the file these patterns were read from.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// Whether [`Ignore::file`] is the recipe's own, beside it.
    pub fn is_recipe_own(&self) -> bool {
        self.recipe_own
    }

    /// Parses the text of an ignore file; `origin` names it in errors.
    pub fn parse(text: &str, origin: Option<&Path>) -> Result<Ignore, NativeError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut patterns = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') {
                continue;
            }
            let mut pattern = line.trim();
            if pattern.is_empty() {
                continue;
            }
            let exception = pattern.starts_with('!');
            if exception {
                pattern = pattern[1..].trim();
            }
            let bad = |reason: String| NativeError::BadPattern {
                pattern: line.trim().to_string(),
                origin: origin.map(Path::to_path_buf),
                reason,
            };
            if pattern.is_empty() {
                return Err(bad("`!` needs a pattern after it".into()));
            }
            // `.` cleans to nothing: it would only match the context root,
            // which is never excluded.
            let text = clean(pattern);
            if text.is_empty() {
                continue;
            }
            let matcher = compile_glob(&text).map_err(|e| bad(e.kind().to_string()))?;
            patterns.push(Pattern {
                text,
                exception,
                matcher,
            });
        }
        let has_exceptions = patterns.iter().any(|p| p.exception);
        Ok(Ignore {
            patterns,
            has_exceptions,
            file: None,
            recipe_own: false,
        })
    }

    /// Whether the entry at `rel_path` (relative to the context root) is
    /// left out of the context. For a directory this means the whole
    /// subtree can be skipped: an excluded directory below which an
    /// exception may re-include something is *not* ignored (walk into it and
    /// ask again for each entry; see [`Ignore::excludes`]).
    pub fn is_ignored(&self, rel_path: &Path, is_dir: bool) -> bool {
        self.excludes(rel_path) && !(is_dir && self.may_reinclude_under(rel_path))
    }

    /// Whether the patterns exclude `rel_path` itself (Docker's
    /// `MatchesOrParentMatches`): the last pattern that matches the path or
    /// one of its parents decides.
    pub fn excludes(&self, rel_path: &Path) -> bool {
        let parents: Vec<&Path> = {
            let mut v: Vec<&Path> = rel_path
                .ancestors()
                .skip(1)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            v.reverse();
            v
        };
        let mut excluded = false;
        for p in &self.patterns {
            // An exclusion cannot change an excluded path, nor an exception
            // an included one.
            if p.exception != excluded {
                continue;
            }
            if p.matcher.is_match(rel_path) || parents.iter().any(|d| p.matcher.is_match(d)) {
                excluded = !p.exception;
            }
        }
        excluded
    }

    /// Docker's test for walking into an excluded directory: some exception
    /// starts with `dir/`.
    fn may_reinclude_under(&self, dir: &Path) -> bool {
        if !self.has_exceptions {
            return false;
        }
        let prefix = format!("{}/", dir.to_string_lossy());
        self.patterns
            .iter()
            .any(|p| p.exception && format!("{}/", p.text).starts_with(&prefix))
    }
}

/// Go's `filepath.Clean` for a relative pattern, without a leading `/`
/// (and `""` for a pattern that cleans to `.`).
pub(crate) fn clean(pattern: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if pattern.starts_with('/') => {}
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

/// A glob with Go's `filepath.Match` syntax plus `**` components, as a
/// globset matcher: `*`/`?` stop at `/`, `\` escapes, braces are literal.
pub(crate) fn compile_glob(pattern: &str) -> Result<GlobMatcher, globset::Error> {
    let mut glob = String::with_capacity(pattern.len() + 4);
    let mut in_class = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                glob.push('\\');
                if let Some(next) = chars.next() {
                    glob.push(next);
                }
            }
            '[' if !in_class => {
                in_class = true;
                glob.push(c);
                // A `]` right after `[`, `[!` or `[^` is a member.
                if let Some(&n @ ('!' | '^')) = chars.peek() {
                    glob.push(n);
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    glob.push(']');
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                glob.push(c);
            }
            '{' | '}' if !in_class => {
                glob.push('\\');
                glob.push(c);
            }
            _ => glob.push(c),
        }
    }
    Ok(GlobBuilder::new(&glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()?
        .compile_matcher())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ig(text: &str) -> Ignore {
        Ignore::parse(text, None).unwrap()
    }

    #[test]
    fn cleaning() {
        assert_eq!(clean("./a//b/"), "a/b");
        assert_eq!(clean("/a/../b"), "b");
        assert_eq!(clean("/../x"), "x");
        assert_eq!(clean("../x"), "../x");
        assert_eq!(clean("."), "");
    }

    #[test]
    fn docker_matching() {
        let i = ig("# c\n *.log \nbuild\n!build/keep.txt\n**/tmp\nsecret/**\n/abs\n");
        let ex = |p: &str| i.excludes(Path::new(p));
        assert!(ex("a.log") && !ex("d/a.log"));
        assert!(ex("build") && ex("build/out/x.o") && !ex("build/keep.txt"));
        assert!(ex("tmp") && ex("a/b/tmp/c"));
        assert!(!ex("secret") && ex("secret/x"));
        assert!(ex("abs") && !ex("# c"));
        assert!(!i.is_ignored(Path::new("build"), true));
        assert!(i.is_ignored(Path::new("build"), false));
        assert!(i.is_ignored(Path::new("a/tmp"), true));
    }

    #[test]
    fn last_match_wins_and_exception_prefix_rule() {
        let i = ig("*.md\n!README.md\nREADME.md\n");
        assert!(i.excludes(Path::new("README.md")));
        let i = ig("docs\n!**/keep.md\n");
        // Docker does not walk into `docs` for an exception not starting with `docs/`.
        assert!(i.is_ignored(Path::new("docs"), true));
        assert!(!i.excludes(Path::new("docs/keep.md")));
        let i = ig("{a,b}\n[]]x\n");
        assert!(i.excludes(Path::new("{a,b}")) && !i.excludes(Path::new("a")));
        assert!(i.excludes(Path::new("]x")));
        assert!(Ignore::parse("!\n", None).is_err());
        assert!(Ignore::parse("a[\n", None).is_err());
    }
}
