//! The file commands package scripts call, carried out by jbuild inside
//! the image's root with FreeBSD's options, messages and exit statuses:
//! `install` (install(1): `-d`, `-o`, `-g`, `-m`, `-N dbdir`, `-c`, …),
//! `mkdir`, `chown`, `chgrp`, `chmod`, `ln`, `rm`, `rmdir`, `touch`, `mv`,
//! `cp`.
//!
//! Each has the native-command signature every command jbuild carries
//! out for package scripts shares, `fn(root, args, io) -> Result<i32,
//! CommandError>` (the words after the command name; relative paths from
//! the root's `/`), so the installer's dispatch can call them without the
//! interpreter; the interpreter calls the same code with its working
//! directory ([`Cx`]).
//!
//! A user mistake (a missing file, an unknown user, a bad mode) is the
//! program's message on stderr and its exit status; `Err` is kept for
//! what must stop the install: a write to the root that failed for the
//! machine's reasons, or more entries than the limit in a recursive walk.
//! Owners are names looked up in the image's files at the time of the
//! call ([`crate::pkg::extract::Owners::read`]), never the host's; they
//! are set only when jbuild runs as root, as the package extractor sets
//! them.

mod basic;
mod install;
mod mode;
mod owners;

use std::io;
use std::path::{Path, PathBuf};

pub use basic::{cp, ln, mkdir, mv, rm, rmdir, touch};
pub use install::install;
pub use mode::chmod;
pub use owners::{chgrp, chown};

use super::{CommandError, Io};

/// Where a file command runs: the image's root, the script's working
/// directory in it, and the bound on entries a recursive walk visits.
pub struct Cx<'a> {
    pub root: &'a Path,
    pub cwd: &'a str,
    pub max_entries: usize,
}

impl Cx<'_> {
    /// The host path of `p` inside the root (see [`super::path::host`]).
    pub(crate) fn host(&self, p: &str, follow_last: bool) -> io::Result<PathBuf> {
        super::path::host(self.root, self.cwd, p, follow_last)
    }

    /// Owners are set only as root (as the extractor does).
    pub(crate) fn same_owner(&self) -> bool {
        nix::unistd::geteuid().is_root()
    }
}

/// A file command as the interpreter calls it.
pub type Native = fn(&Cx<'_>, &[String], &mut Io<'_>) -> Result<i32, CommandError>;

/// The file command called `name`, if jbuild carries it out.
pub fn native(name: &str) -> Option<Native> {
    Some(match name {
        "install" => install::run,
        "mkdir" => basic::mkdir_in,
        "chown" => owners::chown_in,
        "chgrp" => owners::chgrp_in,
        "chmod" => mode::chmod_in,
        "ln" => basic::ln_in,
        "rm" => basic::rm_in,
        "rmdir" => basic::rmdir_in,
        "touch" => basic::touch_in,
        "mv" => basic::mv_in,
        "cp" => basic::cp_in,
        _ => return None,
    })
}

/// Where FreeBSD keeps the program (`command -v install` says
/// `/usr/bin/install`).
pub fn path_of(name: &str) -> String {
    let dir = match name {
        "install" | "touch" => "/usr/bin",
        "chown" => "/usr/sbin",
        _ => "/bin",
    };
    format!("{dir}/{name}")
}

/// Runs `f` as the shared signature does: from the root's `/`.
fn at_root(root: &Path, args: &[String], io: &mut Io<'_>, f: Native) -> Result<i32, CommandError> {
    let cx = Cx {
        root,
        cwd: "/",
        max_entries: super::Limits::default().glob_matches,
    };
    f(&cx, args, io)
}

/// The program's message on stderr (`prog: text`).
pub(crate) fn say(io: &mut Io<'_>, prog: &str, text: &str) {
    io.stderr
        .extend_from_slice(format!("{prog}: {text}\n").as_bytes());
}

/// An I/O error: the program's message and status 1 when the path is at
/// fault (missing, in the way, not a directory), else a fault that stops
/// the install.
pub(crate) fn fail(
    io: &mut Io<'_>,
    prog: &str,
    shown: &str,
    host: &Path,
    e: io::Error,
) -> Result<i32, CommandError> {
    if crate::fsutil::path_at_fault(&e) {
        say(io, prog, &format!("{shown}: {}", super::path::strerror(&e)));
        Ok(1)
    } else {
        Err(CommandError::Io {
            path: host.to_path_buf(),
            source: e,
        })
    }
}

/// Splits `args` into single-letter flags (with the values of those in
/// `with_value`) and operands, as getopt(3) does; `Err` names an unknown
/// flag.
pub(crate) fn getopt(
    args: &[String],
    flags: &str,
    with_value: &str,
) -> Result<(Vec<(char, Option<String>)>, Vec<String>), char> {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            if with_value.contains(c) {
                let rest: String = chars[k + 1..].iter().collect();
                let v = if !rest.is_empty() {
                    rest
                } else {
                    i += 1;
                    match args.get(i) {
                        Some(v) => v.clone(),
                        None => return Err(c),
                    }
                };
                opts.push((c, Some(v)));
                break;
            }
            if !flags.contains(c) {
                return Err(c);
            }
            opts.push((c, None));
            k += 1;
        }
        i += 1;
    }
    Ok((opts, args[i.min(args.len())..].to_vec()))
}
