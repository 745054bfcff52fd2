//! Writing Jailfile text: words quoted so the Jailfile parser gives back
//! exactly the value (single quotes: no substitution), and the translated
//! lines with where each came from.

use std::path::{Path, PathBuf};

use super::source::SrcLine;

/// A word as Jailfile text: bare when it is plainly safe, else in single
/// quotes (which keep `$` and everything else literal); a word holding ARG
/// placeholders in double quotes with `${NAME}` in place.
pub fn word(s: &str) -> String {
    if super::symbolic::has(s) {
        return super::symbolic::word(s);
    }
    let safe = !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@%+,=-".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Where a line of the translation came from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Comments jbuild writes at the top.
    Header,
    /// The FROM line, from `--from`.
    From,
    Line(SrcLine),
}

/// A line of the translation. COPY sources are absolute until the build
/// context (the common ancestor of every template used) is known.
#[derive(Debug, Clone)]
pub enum Out {
    Text(String),
    Copy {
        source: PathBuf,
        /// The source ends in `/`: copy what the directory holds.
        contents: bool,
        dest: String,
    },
}

impl Out {
    pub fn render(&self, context: &Path) -> String {
        match self {
            Out::Text(t) => super::symbolic::bare(t),
            Out::Copy {
                source,
                contents,
                dest,
            } => {
                let rel = source.strip_prefix(context).unwrap_or(source);
                let mut rel = rel.to_string_lossy().into_owned();
                if rel.is_empty() {
                    rel = ".".into();
                }
                if *contents && !rel.ends_with('/') {
                    rel.push('/');
                }
                format!("COPY {} {}", word(&rel), word(dest))
            }
        }
    }
}

/// The deepest directory holding every path in `dirs`.
pub fn common_ancestor(dirs: &[PathBuf]) -> PathBuf {
    let mut it = dirs.iter();
    let Some(first) = it.next() else {
        return PathBuf::from("/");
    };
    let mut common: PathBuf = first.clone();
    for d in it {
        while !d.starts_with(&common) {
            if !common.pop() {
                return PathBuf::from("/");
            }
        }
    }
    common
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(word("nginx"), "nginx");
        assert_eq!(word("/usr/local/etc/"), "/usr/local/etc/");
        assert_eq!(word("a b"), "'a b'");
        assert_eq!(word("${X}"), "'${X}'");
        assert_eq!(word("it's"), "'it'\\''s'");
        assert_eq!(word(""), "''");
        assert_eq!(word("-q"), "'-q'");
    }

    #[test]
    fn common_ancestor_of_template_dirs() {
        let d = |s: &str| PathBuf::from(s);
        assert_eq!(common_ancestor(&[d("/t/a/web")]), d("/t/a/web"));
        assert_eq!(
            common_ancestor(&[d("/t/a/web"), d("/t/common/php")]),
            d("/t")
        );
        assert_eq!(common_ancestor(&[d("/x/y"), d("/z")]), d("/"));
    }
}
