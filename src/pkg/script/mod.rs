//! A package's shell scripts, read and carried out without FreeBSD
//! (issue 32).
//!
//! pkg(8) runs a package's `pre-install`/`post-install` text with the
//! host's `/bin/sh`. Off FreeBSD there is no `pw`, no `pwd_mkdb`, no
//! FreeBSD `install`, so jbuild reads the script itself: [`parse`] turns it
//! into a syntax tree with `brush-parser`, and [`run`] carries it out with
//! a small interpreter of FreeBSD sh(1)'s semantics that never spawns a
//! process and never touches a path outside the image's root.
//!
//! **Why brush-parser.** It is a maintained (releases through 2026),
//! MIT-licensed POSIX/bash parser that gives the whole tree (lists,
//! pipelines, compound commands, here-documents, redirections) with each
//! command's line, and parses words into their pieces (quotes, `${…}`
//! forms, `$(…)`, `$((…))`) so the interpreter expands them exactly.
//! `yash-syntax` is GPL-3.0 (jbuild is BSD-2-Clause); `conch-parser` has
//! not been released since 2019. Bash-only syntax the parser accepts
//! (`[[ ]]`, arrays, `${x/a/b}`, `(( ))`, …) is refused at run time.
//!
//! What runs where:
//! - the shell itself ([`exec`], [`expand`], [`param`], [`arith`],
//!   [`pattern`], [`glob`], [`redirect`]): lists, `&&`/`||`/`!`,
//!   pipelines (stages run one after the other, each one's output the
//!   next one's input), `if`/`while`/`until`/`for`/`case`, `( … )` and
//!   `{ …; }`, functions, parameter expansion, quoting, field splitting,
//!   pathname expansion inside the root, `$(…)`/backticks (run by the
//!   interpreter), `$((…))`, here-documents and redirections to files in
//!   the root, `/dev/null`, or the other stream;
//! - builtins with sh(1)'s semantics ([`builtins`], [`cond`],
//!   [`printf`]), small text utilities the templates pipe through
//!   ([`text`]: `grep`, `cat`, `basename`, `dirname`, `head`, `tr`, `wc`),
//!   and the file commands ([`files`]: `install`, `mkdir`, `chown`,
//!   `chgrp`, `chmod`, `ln`, `rm`, `rmdir`, `touch`, `mv`, `cp`), each with
//!   the native-command signature the installer's other commands share
//!   (`fn(root, args, io) -> Result<i32, CommandError>`), owners looked up
//!   in the image's own account files at the time of the call;
//! - every other command goes to the caller's [`Host`] (`pw`, `service`,
//!   `pwd_mkdb`, …); one the host does not carry out stops the script
//!   with [`CommandError::Unknown`], naming the command and the line.
//!
//! Paths: every path a script names is resolved inside the root as the
//! jail would see it ([`crate::fsutil::resolve_in_root`]: symlinks
//! followed with the root as `/`, `..` stopping at it), relative ones from
//! the working directory `cd` moves inside the root.
//!
//! Not supported, each stopping the script with
//! [`ScriptError::Unsupported`] naming the line: background jobs (`&`),
//! `trap`, `exec`, `wait`, `ulimit`, `umask` with an argument,
//! `.`/`source` (a package script has nothing in the image to include
//! that would be the package's own), bash-only syntax (`[[ ]]`, `(( ))`,
//! arrays, `${x/a/b}`, `${x:1:2}`, `<<<`, process substitution), `~user`,
//! `getopts`, `alias`. File descriptors other than 0, 1 and 2 are
//! refused. With `2>&1` a command's error output follows its standard
//! output (the interpreter gathers each stream whole, so their
//! interleaving is not kept).

pub mod arith;
pub mod builtins;
pub mod cond;
mod error;
pub mod exec;
pub mod expand;
pub mod files;
pub mod glob;
pub mod io;
mod limits;
pub mod param;
pub mod path;
pub mod pattern;
pub mod printf;
pub mod redirect;
mod shell;
mod simple;
pub mod text;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use error::ScriptError;
pub use io::{CommandError, Io};
pub use limits::Limits;

/// A parsed script, reusable for several runs.
#[derive(Debug, Clone)]
pub struct Script {
    pub(crate) program: brush_parser::ast::Program,
}

/// The parser's options for sh(1): POSIX mode, no bash extended globs.
pub(crate) fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        enable_extended_globbing: false,
        posix_mode: true,
        sh_mode: true,
        tilde_expansion_at_word_start: true,
        tilde_expansion_after_colon: false,
        parser_impl: brush_parser::ParserImpl::default(),
    }
}

/// Parses a script; an error names the line.
pub fn parse(text: &str) -> Result<Script, ScriptError> {
    parse_at(text, 1)
}

/// Parses text found at `line` of the script (`eval`'s, `$(…)`'s), so
/// that an error names the script's own line.
pub(crate) fn parse_at(text: &str, line: usize) -> Result<Script, ScriptError> {
    let mut parser = brush_parser::Parser::new(text.as_bytes(), &parser_options());
    match parser.parse_program() {
        Ok(program) => Ok(Script { program }),
        Err(e) => {
            use brush_parser::ParseError as P;
            let (at, message) = match &e {
                P::ParsingNear(p) => (Some(p.line), format!("syntax error near column {}", p.column)),
                P::ParsingAtEndOfInput => (
                    Some(text.lines().count().max(1)),
                    "syntax error: unexpected end of the script (an unclosed `if`, `case`, quote or here-document?)"
                        .to_string(),
                ),
                P::Tokenizing { inner, position } => (position.as_ref().map(|p| p.line), inner.to_string()),
            };
            Err(ScriptError::Parse {
                line: line + at.unwrap_or(1) - 1,
                message,
            })
        }
    }
}

/// What the script starts with: its environment (`PKG_NAME`,
/// `PKG_PREFIX`, `PKG_ROOTDIR`, …, all exported) and its positional
/// parameters (`$1…`; pkg gives `name-version` and, for the combined
/// `install` script, `PRE-INSTALL` or `POST-INSTALL`).
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub vars: Vec<(String, String)>,
    pub args: Vec<String>,
}

/// What a script did: its exit status and its output.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Who carries out the commands the interpreter does not know itself.
pub trait Host {
    /// `name` as written after expansion (`/usr/sbin/pw`, `pw`, `service`,
    /// …); `Err(CommandError::Unknown)` if the host does not carry it out.
    fn command(
        &mut self,
        name: &str,
        args: &[String],
        io: &mut Io<'_>,
    ) -> Result<i32, CommandError>;
    /// Whether `name` is one the host carries out (for `command -v`,
    /// `type`, `which`).
    fn knows(&self, name: &str) -> bool;
}

/// Runs `script` in the image at `root` (its `/`), commands the
/// interpreter does not know going to `host`.
pub fn run(
    root: &Path,
    script: &Script,
    env: &Env,
    host: &mut dyn Host,
    limits: &Limits,
) -> Result<Ran, ScriptError> {
    shell::Shell::new(root, env, host, limits).run_script(script)
}
