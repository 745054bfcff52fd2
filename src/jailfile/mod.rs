//! The Jailfile language: parse (with spans), expand INCLUDEs, substitute
//! variables with Dockerfile's ARG/ENV scoping, and hand the planner a
//! [`resolved::Build`]. See `docs/jailfile.md` for the language itself.
//!
//! The pipeline, one file per stage of it:
//!
//! ```text
//! text ──lexer──▶ RawInstr ──parser──▶ Instruction (ast) ──resolve/ops──▶ Build
//!        (lines, continuations,         (flags, words,       (stages, scopes, INCLUDE,
//!         heredoc bodies)                key=value, JSON)     substitution, checks)
//! ```
//!
//! Helpers on the way: `heredoc` (markers and bodies, for the lexer),
//! `forms` (flags, JSON arrays, word counts, for the parser), `subst`
//! (variable substitution), `include` (INCLUDE, for the resolver),
//! `validate` (image references, releases, ports, modes) and `suggest`
//! ("did you mean").
//!
//! Every character keeps its file, line and column (`text`), so any error
//! becomes a [`Diagnostic`] that shows the source line with a caret.

mod ast;
mod diagnostic;
mod forms;
mod heredoc;
mod include;
mod lexer;
mod ops;
mod parser;
mod resolve;
pub mod resolved;
mod subst;
mod suggest;
mod text;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

pub use diagnostic::Diagnostic;
pub use resolved::*;

/// Reads the Jailfile at `path`, expands INCLUDEs (paths relative to the
/// including file; cycles are an error), parses and resolves it.
/// `build_args` are the `--build-arg` values.
pub fn load(path: &Path, build_args: &BTreeMap<String, String>) -> Result<Build, Diagnostic> {
    load_str(path, &read(path)?, build_args)
}

/// Reads a Jailfile's text, with the error a user should see when it
/// cannot be read.
pub fn read(path: &Path) -> Result<String, Diagnostic> {
    std::fs::read_to_string(path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
            _ => e.to_string(),
        };
        Diagnostic::for_file(
            path,
            format!("cannot read Jailfile `{}`: {why}", path.display()),
        )
    })
}

/// Like [`load`], with the text given; `path` names the file in messages
/// and is the base for relative INCLUDE paths.
pub fn load_str(
    path: &Path,
    text: &str,
    build_args: &BTreeMap<String, String>,
) -> Result<Build, Diagnostic> {
    resolve::resolve(path, text, build_args)
}
