//! install(1): `install -d [-g group] [-m mode] [-N dbdir] [-o owner]
//! dir…` makes directories (with their parents), `install [-c] [-g] [-m]
//! [-o] src… dst` copies files (a symlink at the destination is replaced,
//! never written through). Owner and group names are the image's (or
//! `-N dbdir`'s), checked before anything is made, as install(1) does:
//! an unknown one is "unknown user"/"unknown group", exit 67 (EX_NOUSER);
//! a bad mode exit 64 (EX_USAGE); a failed mkdir or copy exit 71
//! (EX_OSERR). Flags install(1) has that change nothing here (`-b -C -p
//! -S -s -U -v`, and `-B -D -f -h -l -M -T` with their values) are
//! accepted; `-s` strips nothing (no FreeBSD `strip` here).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::mode::Mode;
use super::owners::{accounts, gid, uid};
use super::{getopt, say, Cx};
use crate::pkg::script::{CommandError, Io};

const EX_USAGE: i32 = 64;
const EX_NOUSER: i32 = 67;
const EX_OSERR: i32 = 71;

const USAGE: &str = "usage: install [-bCcpSsUv] [-f flags] [-g group] [-m mode] [-o owner]\n               file1 file2\n       install [-bCcpSsUv] [-f flags] [-g group] [-m mode] [-o owner]\n               file1 ... fileN directory\n       install -dU [-vU] [-g group] [-m mode] [-N dbdir] [-o owner]\n               directory ...";

pub fn install(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    super::at_root(root, args, io, run)
}

pub(super) fn run(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let (opts, operands) = match getopt(args, "bCcdpSsUv", "BDfghlMmNoT") {
        Ok(x) => x,
        Err(_) => {
            io.stderr.extend_from_slice(format!("{USAGE}\n").as_bytes());
            return Ok(EX_USAGE);
        }
    };
    let mut dirs = false;
    let (mut owner, mut group, mut mode, mut dbdir) = (None, None, None, None);
    for (c, v) in opts {
        match (c, v) {
            ('d', _) => dirs = true,
            ('o', Some(v)) => owner = Some(v),
            ('g', Some(v)) => group = Some(v),
            ('N', Some(v)) => dbdir = Some(v),
            ('m', Some(v)) => match Mode::parse(&v) {
                Some(m) => mode = Some(m),
                None => {
                    say(io, "install", &format!("invalid file mode: {v}"));
                    return Ok(EX_USAGE);
                }
            },
            _ => {}
        }
    }
    if operands.is_empty() || (!dirs && operands.len() < 2) {
        io.stderr.extend_from_slice(format!("{USAGE}\n").as_bytes());
        return Ok(EX_USAGE);
    }
    let accounts = if owner.is_some() || group.is_some() {
        match accounts(cx, dbdir.as_deref()) {
            Ok(a) => a,
            Err(CommandError::Io { .. }) if dbdir.is_some() => {
                let d = dbdir.unwrap_or_default();
                say(
                    io,
                    "install",
                    &format!("Unable to use user and group databases in `{d}'"),
                );
                return Ok(EX_OSERR);
            }
            Err(e) => return Err(e),
        }
    } else {
        Default::default()
    };
    let u = match &owner {
        None => None,
        Some(n) => match uid(&accounts, n) {
            Some(id) => Some(id),
            None => {
                say(io, "install", &format!("unknown user {n}"));
                return Ok(EX_NOUSER);
            }
        },
    };
    let g = match &group {
        None => None,
        Some(n) => match gid(&accounts, n) {
            Some(id) => Some(id),
            None => {
                say(io, "install", &format!("unknown group {n}"));
                return Ok(EX_NOUSER);
            }
        },
    };
    let owners = (u, g);
    if dirs {
        for d in &operands {
            let host = match cx.host(d, true) {
                Ok(h) => h,
                Err(e) => return oserr(io, &format!("mkdir {d}"), &e, Path::new(d)),
            };
            if let Err(e) = make_dirs(cx, d) {
                return oserr(io, &format!("mkdir {d}"), &e, &host);
            }
            let m = mode.as_ref().map_or(0o755, |m| m.apply(0o755, true));
            if let Err(e) = finish(cx, &host, m, owners) {
                return oserr(io, d, &e, &host);
            }
        }
        return Ok(0);
    }
    let (dst, srcs) = operands.split_last().expect("two operands");
    let dst_is_dir = cx.host(dst, true).is_ok_and(|h| h.is_dir());
    if srcs.len() > 1 && !dst_is_dir {
        say(io, "install", &format!("{dst}: Not a directory"));
        return Ok(EX_OSERR);
    }
    for src in srcs {
        let target = if dst_is_dir {
            let base = src.trim_end_matches('/').rsplit('/').next().unwrap_or(src);
            format!("{}/{base}", dst.trim_end_matches('/'))
        } else {
            dst.clone()
        };
        let from = match cx.host(src, true) {
            Ok(h) => h,
            Err(e) => return oserr(io, src, &e, Path::new(src)),
        };
        let data = match fs::read(&from) {
            Ok(d) => d,
            Err(e) => return oserr(io, src, &e, &from),
        };
        let to = match cx.host(&target, false) {
            Ok(h) => h,
            Err(e) => return oserr(io, &target, &e, Path::new(&target)),
        };
        // install unlinks the target and makes a new file.
        if to.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            if let Err(e) = fs::remove_file(&to) {
                return oserr(io, &target, &e, &to);
            }
        }
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&to)
            .and_then(|mut f| f.write_all(&data));
        if let Err(e) = written {
            return oserr(io, &target, &e, &to);
        }
        let m = mode.as_ref().map_or(0o755, |m| m.apply(0o755, false));
        if let Err(e) = finish(cx, &to, m, owners) {
            return oserr(io, &target, &e, &to);
        }
    }
    Ok(0)
}

/// `mkdir -p` inside the root: each missing component made 0755.
pub(super) fn make_dirs(cx: &Cx<'_>, d: &str) -> io::Result<()> {
    let logical = crate::pkg::script::path::logical(cx.cwd, d);
    let mut so_far = String::new();
    for part in logical.split('/').filter(|p| !p.is_empty()) {
        so_far.push('/');
        so_far.push_str(part);
        let host = cx.host(&so_far, true)?;
        match fs::symlink_metadata(&host) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&host).or_else(|e| if host.is_dir() { Ok(()) } else { Err(e) })?;
                fs::set_permissions(&host, fs::Permissions::from_mode(0o755))?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sets the owner (as root) and the mode of what install made.
fn finish(
    cx: &Cx<'_>,
    host: &Path,
    mode: u32,
    (u, g): (Option<u32>, Option<u32>),
) -> io::Result<()> {
    if cx.same_owner() && (u.is_some() || g.is_some()) {
        std::os::unix::fs::lchown(host, u, g)?;
    }
    fs::set_permissions(host, fs::Permissions::from_mode(mode))
}

/// install's `err(EX_OSERR, …)`: the message and 71 when the path is at
/// fault; a fault of the machine stops the install.
fn oserr(io: &mut Io<'_>, what: &str, e: &io::Error, host: &Path) -> Result<i32, CommandError> {
    if crate::fsutil::path_at_fault(e) {
        say(
            io,
            "install",
            &format!("{what}: {}", crate::pkg::script::path::strerror(e)),
        );
        Ok(EX_OSERR)
    } else {
        Err(CommandError::Io {
            path: host.to_path_buf(),
            source: io::Error::new(e.kind(), e.to_string()),
        })
    }
}
