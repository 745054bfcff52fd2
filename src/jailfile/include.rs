//! INCLUDE: another file's instructions, inlined where the INCLUDE stands.
//!
//! The path is substituted in the scope at that point and is relative to
//! the directory of the file that says INCLUDE. The included file's
//! instructions keep their own file and line. A file that (directly or
//! not) includes itself is an error naming the chain.
//!
//! This file finds, checks and reads the included file; the resolver
//! substitutes the path and resolves the instructions read.

use std::path::{Component, Path, PathBuf};

use super::diagnostic::{Error, Result, Sources};
use super::text::{FileId, Text};

/// How deep INCLUDEs may nest before we suspect a mistake.
const MAX_INCLUDE_DEPTH: usize = 32;

/// The most text one load reads, the Jailfile and every INCLUDE together
/// (each file alone is bounded by [`super::MAX_FILE`]).
const MAX_TOTAL: usize = 16 << 20;

/// A file an INCLUDE names, read and added to the load's [`Sources`].
pub(super) struct Included {
    pub file: FileId,
    /// What makes it the same file as another INCLUDE's ([`identity`]).
    pub identity: PathBuf,
    /// The path as messages show it.
    pub path: PathBuf,
}

/// Reads the file `INCLUDE path` names (`rel`: the path after
/// substitution) into `sources`. `includes` are the files being included
/// (identity, as shown), outermost first; naming one of them again is a
/// cycle.
pub(super) fn open(
    path: &Text,
    rel: &str,
    sources: &mut Sources,
    includes: &[(PathBuf, PathBuf)],
) -> Result<Included> {
    if rel.is_empty() {
        return Err(
            Error::new(path.span(), "INCLUDE path is empty").with_help("usage: INCLUDE path")
        );
    }
    let dir = sources
        .path(path.start().file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let full = dir.join(rel);
    let id = identity(&full);
    if let Some(i) = includes.iter().position(|(seen, _)| *seen == id) {
        let chain: Vec<String> = includes
            .get(i..)
            .unwrap_or_default()
            .iter()
            .map(|(_, p)| p.display().to_string())
            .collect();
        return Err(Error::new(
            path.span(),
            format!("INCLUDE cycle: {} → {}", chain.join(" → "), full.display()),
        )
        .with_help("remove one of these INCLUDEs"));
    }
    if includes.len() > MAX_INCLUDE_DEPTH {
        return Err(Error::new(
            path.span(),
            format!("INCLUDEs nest more than {MAX_INCLUDE_DEPTH} deep"),
        ));
    }
    let text = super::read_text(&full).map_err(|e| {
        Error::new(
            path.span(),
            format!(
                "cannot read included file `{}`: {}",
                full.display(),
                super::why(&e)
            ),
        )
        .with_help(format!(
            "INCLUDE paths are relative to the including file's directory (`{}`)",
            dir.display()
        ))
    })?;
    if sources.total_len() + text.len() > MAX_TOTAL {
        return Err(Error::new(
            path.span(),
            format!(
                "the Jailfile and its INCLUDEs hold more than {} MiB with `{}`",
                MAX_TOTAL >> 20,
                full.display()
            ),
        )
        .with_help("is a file included over and over? include a shared file once"));
    }
    let file = sources.add(full.clone(), text);
    Ok(Included {
        file,
        identity: id,
        path: full,
    })
}

/// What makes two INCLUDE paths the same file: the canonical path when the
/// file exists, else the absolute path with `.` and `..` folded.
pub(super) fn identity(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}
