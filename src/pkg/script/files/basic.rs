//! `mkdir [-p] [-m mode]`, `rmdir [-p]`, `rm [-f] [-r|-R] [-d]`, `touch
//! [-c]`, `ln [-s] [-f] [-h|-n]`, `mv [-f]`, `cp [-p] [-R|-r]` with
//! FreeBSD's messages and exit statuses; recursive walks never follow a
//! symlink and stop at [`Cx::max_entries`].

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::mode::Mode;
use super::{at_root, fail, getopt, say, Cx};
use crate::pkg::script::path::logical;
use crate::pkg::script::{CommandError, Io};

macro_rules! shared {
    ($($name:ident => $inner:ident),*) => {$(
        pub fn $name(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
            at_root(root, args, io, $inner)
        }
    )*};
}

shared!(mkdir => mkdir_in, rmdir => rmdir_in, rm => rm_in, touch => touch_in, ln => ln_in, mv => mv_in, cp => cp_in);

fn options<'a>(
    io: &mut Io<'_>,
    prog: &str,
    args: &'a [String],
    flags: &str,
    with_value: &str,
    usage: &str,
) -> Option<(Vec<(char, Option<String>)>, Vec<String>)> {
    match getopt(args, flags, with_value) {
        Ok(x) => Some(x),
        Err(c) => {
            say(io, prog, &format!("illegal option -- {c}"));
            io.stderr
                .extend_from_slice(format!("usage: {usage}\n").as_bytes());
            None
        }
    }
}

fn has(opts: &[(char, Option<String>)], c: char) -> bool {
    opts.iter().any(|o| o.0 == c)
}

pub(super) fn mkdir_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let usage = "mkdir [-pv] [-m mode] directory_name ...";
    let Some((opts, dirs)) = options(io, "mkdir", args, "pv", "m", usage) else {
        return Ok(1);
    };
    let mode = match opts.iter().find(|o| o.0 == 'm').and_then(|o| o.1.clone()) {
        None => None,
        Some(m) => match Mode::parse(&m) {
            Some(x) => Some(x),
            None => {
                say(io, "mkdir", &format!("invalid file mode: {m}"));
                return Ok(1);
            }
        },
    };
    if dirs.is_empty() {
        io.stderr
            .extend_from_slice(format!("usage: {usage}\n").as_bytes());
        return Ok(1);
    }
    let mut status = 0;
    for d in &dirs {
        let host = match cx.host(d, true) {
            Ok(h) => h,
            Err(e) => {
                status = fail(io, "mkdir", d, Path::new(d), e)?;
                continue;
            }
        };
        let made = if has(&opts, 'p') {
            super::install::make_dirs(cx, d)
        } else {
            fs::create_dir(&host)
                .and_then(|_| fs::set_permissions(&host, fs::Permissions::from_mode(0o755)))
        };
        if let Err(e) = made {
            status = fail(io, "mkdir", d, &host, e)?;
            continue;
        }
        if let Some(m) = &mode {
            let new = m.apply(0o777, true);
            if let Err(e) = fs::set_permissions(&host, fs::Permissions::from_mode(new)) {
                status = fail(io, "mkdir", d, &host, e)?;
            }
        }
    }
    Ok(status)
}

pub(super) fn rmdir_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let Some((opts, dirs)) = options(io, "rmdir", args, "pv", "", "rmdir [-pv] directory ...")
    else {
        return Ok(1);
    };
    let mut status = 0;
    for d in &dirs {
        let mut cur = logical(cx.cwd, d);
        loop {
            let host = match cx.host(&cur, false) {
                Ok(h) => h,
                Err(e) => {
                    status = fail(io, "rmdir", d, Path::new(d), e)?;
                    break;
                }
            };
            if let Err(e) = fs::remove_dir(&host) {
                status = fail(io, "rmdir", &cur, &host, e)?;
                break;
            }
            if !has(&opts, 'p') {
                break;
            }
            match cur.rsplit_once('/') {
                Some((parent, _)) if !parent.is_empty() => cur = parent.to_string(),
                _ => break,
            }
        }
    }
    Ok(status)
}

pub(super) fn rm_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let Some((opts, files)) = options(
        io,
        "rm",
        args,
        "dfiIPRrvWx",
        "",
        "rm [-f | -i] [-dIPRrvWx] file ...",
    ) else {
        return Ok(1);
    };
    let force = has(&opts, 'f');
    let recursive = has(&opts, 'r') || has(&opts, 'R');
    if files.is_empty() && !force {
        io.stderr
            .extend_from_slice(b"usage: rm [-f | -i] [-dIPRrvWx] file ...\n");
        return Ok(1);
    }
    let mut status = 0;
    let mut budget = cx.max_entries;
    for f in &files {
        let base = f.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if base == "." || base == ".." {
            say(io, "rm", "\".\" and \"..\" may not be removed");
            status = 1;
            continue;
        }
        if logical(cx.cwd, f) == "/" {
            say(io, "rm", "\"/\" may not be removed");
            status = 1;
            continue;
        }
        let host = match cx.host(f, false) {
            Ok(h) => h,
            Err(e) => {
                status = fail(io, "rm", f, Path::new(f), e)?;
                continue;
            }
        };
        let meta = match fs::symlink_metadata(&host) {
            Ok(m) => m,
            Err(e) if force && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                status = fail(io, "rm", f, &host, e)?;
                continue;
            }
        };
        let r = if meta.is_dir() {
            if recursive {
                remove_tree(&host, &mut budget)
            } else if has(&opts, 'd') {
                fs::remove_dir(&host)
            } else {
                say(io, "rm", &format!("{f}: is a directory"));
                status = 1;
                continue;
            }
        } else {
            fs::remove_file(&host)
        };
        if let Err(e) = r {
            if e.kind() == io::ErrorKind::Other && e.to_string().starts_with("limit") {
                return Err(CommandError::Limit {
                    what: format!("{} entries removed by one `rm -r`", cx.max_entries),
                });
            }
            status = fail(io, "rm", f, &host, e)?;
        }
    }
    Ok(status)
}

/// Removes a directory tree without following any symlink in it.
fn remove_tree(dir: &Path, budget: &mut usize) -> io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        if *budget == 0 {
            return Err(io::Error::other("limit"));
        }
        *budget -= 1;
        let p = e.path();
        if e.file_type()?.is_dir() {
            remove_tree(&p, budget)?;
        } else {
            fs::remove_file(&p)?;
        }
    }
    fs::remove_dir(dir)
}

pub(super) fn touch_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let Some((opts, files)) = options(io, "touch", args, "acfhm", "rtd", "touch [-A [-][[hh]mm]SS] [-achm] [-r file] [-t [[CC]YY]MMDDhhmm[.SS]]\n       [-d YYYY-MM-DDThh:mm:SS[.frac][tz]] file ...") else {
        return Ok(1);
    };
    let mut status = 0;
    for f in &files {
        let host = match cx.host(f, !has(&opts, 'h')) {
            Ok(h) => h,
            Err(e) => {
                status = fail(io, "touch", f, Path::new(f), e)?;
                continue;
            }
        };
        if host.symlink_metadata().is_err() {
            if has(&opts, 'c') {
                continue;
            }
            let made = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&host)
                .and_then(|_| fs::set_permissions(&host, fs::Permissions::from_mode(0o644)));
            if let Err(e) = made {
                status = fail(io, "touch", f, &host, e)?;
            }
            continue;
        }
        let now = std::time::SystemTime::now();
        let r = fs::File::options()
            .write(true)
            .open(&host)
            .and_then(|file| {
                file.set_times(fs::FileTimes::new().set_accessed(now).set_modified(now))
            });
        if let Err(e) = r {
            if !host.is_dir() {
                status = fail(io, "touch", f, &host, e)?;
            }
        }
    }
    Ok(status)
}

/// `dst`, or `dst/basename(src)` when `dst` is a directory (followed).
fn into_dir(cx: &Cx<'_>, src: &str, dst: &str, follow_dir: bool) -> String {
    let is_dir = follow_dir && cx.host(dst, true).is_ok_and(|h| h.is_dir());
    if is_dir {
        let base = src.trim_end_matches('/').rsplit('/').next().unwrap_or(src);
        format!("{}/{base}", dst.trim_end_matches('/'))
    } else {
        dst.to_string()
    }
}

pub(super) fn ln_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let usage = "ln [-s [-F] | -L | -P] [-f | -i] [-hnv] source_file [target_file]\n       ln [-s [-F] | -L | -P] [-f | -i] [-hnv] source_file ... target_dir";
    let Some((opts, ops)) = options(io, "ln", args, "FfhiLnPsvw", "", usage) else {
        return Ok(1);
    };
    let (targets, link_dir) = match ops.len() {
        0 => {
            io.stderr
                .extend_from_slice(format!("usage: {usage}\n").as_bytes());
            return Ok(1);
        }
        1 => (&ops[..], ".".to_string()),
        _ => (&ops[..ops.len() - 1], ops[ops.len() - 1].clone()),
    };
    let no_deref = has(&opts, 'h') || has(&opts, 'n');
    let mut status = 0;
    for t in targets {
        let link = if ops.len() == 1 {
            into_dir(cx, t, ".", true)
        } else {
            into_dir(cx, t, &link_dir, !no_deref)
        };
        let host = match cx.host(&link, false) {
            Ok(h) => h,
            Err(e) => {
                status = fail(io, "ln", &link, Path::new(&link), e)?;
                continue;
            }
        };
        if host.symlink_metadata().is_ok() {
            if !has(&opts, 'f') {
                say(io, "ln", &format!("{link}: File exists"));
                status = 1;
                continue;
            }
            if host.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                say(io, "ln", &format!("{link}: Is a directory"));
                status = 1;
                continue;
            }
            if let Err(e) = fs::remove_file(&host) {
                status = fail(io, "ln", &link, &host, e)?;
                continue;
            }
        }
        let r = if has(&opts, 's') {
            // The link's text is data: whatever it says, it is resolved
            // inside the root when anything follows it.
            std::os::unix::fs::symlink(t, &host)
        } else {
            match cx.host(t, true) {
                Ok(src) => fs::hard_link(src, &host),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = r {
            status = fail(io, "ln", &link, &host, e)?;
        }
    }
    Ok(status)
}

pub(super) fn mv_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let usage =
        "mv [-f | -i | -n] [-hv] source target\n       mv [-f | -i | -n] [-v] source ... directory";
    let Some((opts, ops)) = options(io, "mv", args, "fhinv", "", usage) else {
        return Ok(1);
    };
    if ops.len() < 2 {
        io.stderr
            .extend_from_slice(format!("usage: {usage}\n").as_bytes());
        return Ok(64);
    }
    let (dst, srcs) = ops.split_last().expect("two");
    let mut status = 0;
    for src in srcs {
        let target = into_dir(cx, src, dst, true);
        let (from, to) = match (cx.host(src, false), cx.host(&target, false)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                status = fail(io, "mv", src, Path::new(src), e)?;
                continue;
            }
        };
        if has(&opts, 'n') && to.symlink_metadata().is_ok() {
            continue;
        }
        if let Err(e) = fs::rename(&from, &to) {
            status = fail(io, "mv", &format!("rename {src} to {target}"), &from, e)?;
        }
    }
    Ok(status)
}

pub(super) fn cp_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let usage = "cp [-R [-H | -L | -P]] [-f | -i | -n] [-alpsvx] source_file target_file\n       cp [-R [-H | -L | -P]] [-f | -i | -n] [-alpsvx] source_file ... target_directory";
    let Some((opts, ops)) = options(io, "cp", args, "afHilLnPpRrsvx", "", usage) else {
        return Ok(1);
    };
    if ops.len() < 2 {
        io.stderr
            .extend_from_slice(format!("usage: {usage}\n").as_bytes());
        return Ok(1);
    }
    let recursive = has(&opts, 'R') || has(&opts, 'r') || has(&opts, 'a');
    let preserve = has(&opts, 'p') || has(&opts, 'a');
    let (dst, srcs) = ops.split_last().expect("two");
    let mut status = 0;
    let mut budget = cx.max_entries;
    for src in srcs {
        let target = into_dir(cx, src, dst, true);
        // The top source is followed (cp -R without -H/-L still follows
        // a named directory's own link only with -H; jbuild follows
        // regular-file links, as cp without -R does).
        let from = match cx.host(src, !recursive) {
            Ok(h) => h,
            Err(e) => {
                status = fail(io, "cp", src, Path::new(src), e)?;
                continue;
            }
        };
        let to = match cx.host(&target, true) {
            Ok(h) => h,
            Err(e) => {
                status = fail(io, "cp", &target, Path::new(&target), e)?;
                continue;
            }
        };
        let meta = match fs::symlink_metadata(&from) {
            Ok(m) => m,
            Err(e) => {
                status = fail(io, "cp", src, &from, e)?;
                continue;
            }
        };
        if meta.is_dir() && !recursive {
            say(io, "cp", &format!("{src} is a directory (not copied)."));
            status = 1;
            continue;
        }
        match copy_tree(&from, &to, preserve, cx.same_owner(), &mut budget) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Other && e.to_string() == "limit" => {
                return Err(CommandError::Limit {
                    what: format!("{} entries copied by one `cp -R`", cx.max_entries),
                })
            }
            Err(e) => status = fail(io, "cp", src, &from, e)?,
        }
    }
    Ok(status)
}

/// Copies a file, a symlink (as a symlink) or a directory tree; the
/// destination's last component is never written through a symlink.
fn copy_tree(
    from: &Path,
    to: &Path,
    preserve: bool,
    owners: bool,
    budget: &mut usize,
) -> io::Result<()> {
    if *budget == 0 {
        return Err(io::Error::other("limit"));
    }
    *budget -= 1;
    let meta = fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        if to.symlink_metadata().is_ok() {
            fs::remove_file(to)?;
        }
        return std::os::unix::fs::symlink(fs::read_link(from)?, to);
    }
    if meta.is_dir() {
        if !to.is_dir() {
            fs::create_dir(to)?;
        }
        let mut names: Vec<PathBuf> = fs::read_dir(from)?.flatten().map(|e| e.path()).collect();
        names.sort();
        for p in names {
            let name = p.file_name().expect("entry").to_owned();
            copy_tree(&p, &to.join(name), preserve, owners, budget)?;
        }
    } else {
        if to
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            fs::remove_file(to)?;
        }
        let data = fs::read(from)?;
        fs::write(to, data)?;
    }
    let mode = if preserve {
        meta.mode() & 0o7777
    } else {
        meta.mode() & 0o777 & !0o022
    };
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    if preserve {
        if owners {
            std::os::unix::fs::lchown(to, Some(meta.uid()), Some(meta.gid()))?;
        }
        let times = fs::FileTimes::new()
            .set_modified(meta.modified()?)
            .set_accessed(meta.accessed()?);
        if !meta.is_dir() {
            fs::File::options().write(true).open(to)?.set_times(times)?;
        }
    }
    Ok(())
}
