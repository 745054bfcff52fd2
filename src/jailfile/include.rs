//! INCLUDE: another file's instructions, inlined where the INCLUDE stands.
//!
//! The path is substituted in the scope at that point and is relative to
//! the directory of the file that says INCLUDE. The included file's
//! instructions keep their own file and line. A file that (directly or
//! not) includes itself is an error naming the chain.
//!
//! An included file is input from outside, read through
//! [`crate::fsutil::input`]: it must lie beneath the build context or the
//! Jailfile's directory once symlinks are resolved (`INCLUDE
//! /proc/self/environ`, `../x` or a symlink out are refused), be a regular
//! file (a FIFO is refused at once, not waited on) of at most
//! [`super::MAX_FILE`], and the load's total is checked before it is read.
//! No error about a refused file shows a byte of it; and a file whose
//! first instruction is not one jbuild knows is not quoted either (the
//! resolver points at the INCLUDE instead): it is not a recipe.
//!
//! This file finds, checks and reads the included file; the resolver
//! substitutes the path and resolves the instructions read.

use std::path::{Path, PathBuf};

use crate::fsutil::input::{self, Beneath, InputError};

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
    beneath: &Beneath,
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
    let cannot = |why: String| {
        Error::new(
            path.span(),
            format!("cannot read included file `{}`: {why}", full.display()),
        )
    };
    let (file, size) = beneath.open(&full, super::MAX_FILE).map_err(|e| match e {
        InputError::Missing => cannot("no such file".into()).with_help(format!(
            "INCLUDE paths are relative to the including file's directory (`{}`)",
            dir.display()
        )),
        InputError::TooLarge { .. } => cannot(super::why(&std::io::ErrorKind::FileTooLarge.into())),
        InputError::Io(e) => cannot(super::why(&e)),
        e @ (InputError::Outside { .. }
        | InputError::NotRegular { .. }
        | InputError::Through { .. }
        | InputError::EmptyPipe) => {
            cannot(e.to_string()).with_help(
                "INCLUDE reads regular files beneath the build context or the Jailfile's directory: copy the file there",
            )
        }
    })?;
    let too_much = |path: &Text| {
        Error::new(
            path.span(),
            format!(
                "the Jailfile and its INCLUDEs hold more than {} MiB with `{}`",
                MAX_TOTAL >> 20,
                full.display()
            ),
        )
        .with_help("is a file included over and over? include a shared file once")
    };
    // Judged by its size before it is read, and by what was read.
    if sources.total_len() as u64 + size > MAX_TOTAL as u64 {
        return Err(too_much(path));
    }
    let text = input::read_text(file, super::MAX_FILE).map_err(|e| match e {
        InputError::TooLarge { .. } => cannot(super::why(&std::io::ErrorKind::FileTooLarge.into())),
        InputError::Io(e) => cannot(super::why(&e)),
        e => cannot(e.to_string()),
    })?;
    if sources.total_len() + text.len() > MAX_TOTAL {
        return Err(too_much(path));
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
    std::fs::canonicalize(path).unwrap_or_else(|_| input::normalise(path))
}
