//! Modes as chmod(1) and install(1) read them (setmode(3)): octal, or
//! symbolic clauses `[ugoa]*[+-=][rwxXst]*|[ugo]`, comma-separated; and
//! `chmod [-R] [-h] [-f] mode file…`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{fail, getopt, say, Cx};
use crate::pkg::script::{CommandError, Io};

#[derive(Debug, Clone)]
pub enum Mode {
    Octal(u32),
    Symbolic(Vec<Clause>),
}

#[derive(Debug, Clone)]
pub struct Clause {
    who: u32,
    ops: Vec<(char, Perm)>,
}

#[derive(Debug, Clone)]
enum Perm {
    Bits { bits: u32, big_x: bool },
    Copy(char),
}

impl Mode {
    /// `None`: not a mode (the program says "invalid file mode").
    pub fn parse(spec: &str) -> Option<Mode> {
        if !spec.is_empty() && spec.chars().all(|c| c.is_digit(8)) {
            let n = u32::from_str_radix(spec, 8).ok()?;
            return (n <= 0o7777).then_some(Mode::Octal(n));
        }
        let mut clauses = Vec::new();
        for part in spec.split(',') {
            let mut chars = part.chars().peekable();
            let mut who = 0;
            while let Some(&c) = chars.peek() {
                who |= match c {
                    'u' => 0o4700,
                    'g' => 0o2070,
                    'o' => 0o0007,
                    'a' => 0o6777,
                    _ => break,
                };
                chars.next();
            }
            let mut ops = Vec::new();
            let mut op = None;
            let mut bits = 0;
            let mut big_x = false;
            for c in chars {
                match c {
                    '+' | '-' | '=' => {
                        if let Some(o) = op {
                            ops.push((o, Perm::Bits { bits, big_x }));
                        }
                        op = Some(c);
                        bits = 0;
                        big_x = false;
                    }
                    'r' if op.is_some() => bits |= 0o444,
                    'w' if op.is_some() => bits |= 0o222,
                    'x' if op.is_some() => bits |= 0o111,
                    'X' if op.is_some() => big_x = true,
                    's' if op.is_some() => bits |= 0o6000,
                    't' if op.is_some() => bits |= 0o1000,
                    'u' | 'g' | 'o' if op.is_some() && bits == 0 && !big_x => {
                        ops.push((op.take().expect("checked"), Perm::Copy(c)));
                    }
                    _ => return None,
                }
            }
            match op {
                Some(o) => ops.push((o, Perm::Bits { bits, big_x })),
                None if ops.is_empty() => return None,
                None => {}
            }
            clauses.push(Clause { who, ops });
        }
        Some(Mode::Symbolic(clauses))
    }

    /// The new mode of a file whose mode is `old` (umask 022 for clauses
    /// without a who, as setmode(3) applies the process's umask).
    pub fn apply(&self, old: u32, is_dir: bool) -> u32 {
        let clauses = match self {
            Mode::Octal(n) => return *n,
            Mode::Symbolic(c) => c,
        };
        let mut m = old & 0o7777;
        for c in clauses {
            let (who, mask) = if c.who == 0 {
                (0o6777, !0o022u32)
            } else {
                (c.who, !0)
            };
            for (op, perm) in &c.ops {
                let bits = match perm {
                    Perm::Bits { bits, big_x } => {
                        let x = if *big_x && (is_dir || m & 0o111 != 0) {
                            0o111
                        } else {
                            0
                        };
                        bits | x
                    }
                    Perm::Copy(from) => {
                        let v = match from {
                            'u' => (m >> 6) & 7,
                            'g' => (m >> 3) & 7,
                            _ => m & 7,
                        };
                        v | (v << 3) | (v << 6)
                    }
                };
                let bits = bits & who & mask;
                m = match op {
                    '+' => m | bits,
                    '-' => m & !bits,
                    _ => (m & !(who & 0o7777)) | bits,
                };
            }
        }
        m
    }
}

pub fn chmod(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    super::at_root(root, args, io, chmod_in)
}

pub(super) fn chmod_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    // A mode may start with `-` (`chmod -w f`): only R, h, f, v, H, L, P
    // are flags.
    let split = args
        .iter()
        .position(|a| !a.starts_with('-') || Mode::parse(a).is_some() || a == "--");
    let (flag_args, rest) = args.split_at(split.unwrap_or(args.len()));
    let (opts, _) = match getopt(flag_args, "RhfvHLP", "") {
        Ok(x) => x,
        Err(c) => {
            say(io, "chmod", &format!("illegal option -- {c}"));
            return Ok(1);
        }
    };
    let rest: Vec<String> = rest.iter().skip_while(|a| *a == "--").cloned().collect();
    let recursive = opts.iter().any(|o| o.0 == 'R');
    let no_follow = opts.iter().any(|o| o.0 == 'h');
    let quiet = opts.iter().any(|o| o.0 == 'f');
    let (Some(spec), files) = (rest.first(), rest.get(1..).unwrap_or(&[])) else {
        say(
            io,
            "chmod",
            "usage: chmod [-fhv] [-R [-H | -L | -P]] mode file ...",
        );
        return Ok(1);
    };
    if files.is_empty() {
        say(
            io,
            "chmod",
            "usage: chmod [-fhv] [-R [-H | -L | -P]] mode file ...",
        );
        return Ok(1);
    }
    let Some(mode) = Mode::parse(spec) else {
        say(io, "chmod", &format!("invalid file mode: {spec}"));
        return Ok(1);
    };
    let mut status = 0;
    for f in files {
        let host = match cx.host(f, !no_follow) {
            Ok(h) => h,
            Err(e) => return fail(io, "chmod", f, Path::new(f), e),
        };
        let mut todo = vec![host];
        let mut seen = 0usize;
        while let Some(p) = todo.pop() {
            seen += 1;
            if seen > cx.max_entries {
                return Err(CommandError::Limit {
                    what: format!("{} entries changed by one `chmod -R`", cx.max_entries),
                });
            }
            let meta = match fs::symlink_metadata(&p) {
                Ok(m) => m,
                Err(e) => {
                    if !quiet {
                        status = status.max(fail(io, "chmod", f, &p, e)?);
                    } else {
                        status = 1;
                    }
                    continue;
                }
            };
            if meta.file_type().is_symlink() {
                continue; // Linux cannot change a link's own mode.
            }
            let new = mode.apply(meta.permissions().mode(), meta.is_dir());
            if let Err(e) = fs::set_permissions(&p, fs::Permissions::from_mode(new)) {
                status = status.max(fail(io, "chmod", f, &p, e)?);
            }
            if recursive && meta.is_dir() {
                let rd = fs::read_dir(&p).map_err(|e| CommandError::Io {
                    path: p.clone(),
                    source: e,
                })?;
                let mut names: Vec<_> = rd.flatten().map(|e| e.path()).collect();
                names.sort();
                todo.extend(names.into_iter().rev());
            }
        }
    }
    Ok(status)
}
