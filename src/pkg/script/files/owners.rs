//! Owners by name or number, looked up in the image at the time of the
//! call (so a user `pw` added a line before is found), and `chown`,
//! `chgrp`.

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{fail, getopt, say, Cx};
use crate::pkg::extract::Owners;
use crate::pkg::script::{CommandError, Io};

/// The image's users and groups: its `/etc` files, or with
/// install's `-N dbdir` the `master.passwd` and `group` in `dbdir`
/// (inside the root).
pub(super) fn accounts(cx: &Cx<'_>, dbdir: Option<&str>) -> Result<Owners, CommandError> {
    let Some(dir) = dbdir else {
        return Owners::read(cx.root).map_err(|(path, source)| CommandError::Io { path, source });
    };
    let mut o = Owners::default();
    for (file, users) in [("master.passwd", true), ("group", false)] {
        let p = format!("{}/{file}", dir.trim_end_matches('/'));
        let host = cx.host(&p, true).map_err(|source| CommandError::Io {
            path: p.clone().into(),
            source,
        })?;
        let mut text = String::new();
        match fs::File::open(&host) {
            Ok(f) => {
                f.take(crate::pkg::extract::MAX_ACCOUNTS)
                    .read_to_string(&mut text)
                    .map_err(|source| CommandError::Io {
                        path: host.clone(),
                        source,
                    })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(CommandError::Io { path: host, source }),
        }
        for line in text.lines() {
            if line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split(':').collect();
            if let (Some(name), Some(id)) =
                (f.first(), f.get(2).and_then(|v| v.parse::<u32>().ok()))
            {
                let map = if users { &mut o.users } else { &mut o.groups };
                map.entry(name.to_string()).or_insert(id);
            }
        }
    }
    Ok(o)
}

/// A user name or number.
pub(super) fn uid(o: &Owners, name: &str) -> Option<u32> {
    o.uid(name).or_else(|| name.parse().ok())
}

/// A group name or number.
pub(super) fn gid(o: &Owners, name: &str) -> Option<u32> {
    o.gid(name).or_else(|| name.parse().ok())
}

pub fn chown(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    super::at_root(root, args, io, chown_in)
}

pub fn chgrp(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    super::at_root(root, args, io, chgrp_in)
}

pub(super) fn chown_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    change(cx, args, io, "chown")
}

pub(super) fn chgrp_in(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    change(cx, args, io, "chgrp")
}

fn change(cx: &Cx<'_>, args: &[String], io: &mut Io<'_>, prog: &str) -> Result<i32, CommandError> {
    let (opts, rest) = match getopt(args, "RhfvxHLPn", "") {
        Ok(x) => x,
        Err(c) => {
            say(io, prog, &format!("illegal option -- {c}"));
            return Ok(1);
        }
    };
    let recursive = opts.iter().any(|o| o.0 == 'R');
    let no_follow = opts.iter().any(|o| o.0 == 'h');
    let quiet = opts.iter().any(|o| o.0 == 'f');
    if rest.len() < 2 {
        let usage = if prog == "chown" {
            "usage: chown [-fhvx] [-R [-H | -L | -P]] owner[:group] file ..."
        } else {
            "usage: chgrp [-fhvx] [-R [-H | -L | -P]] group file ..."
        };
        say(io, prog, usage);
        return Ok(1);
    }
    let spec = &rest[0];
    let accounts = accounts(cx, None)?;
    let (user, group) = if prog == "chgrp" {
        (None, Some(spec.as_str()))
    } else {
        match spec.split_once([':', '.']) {
            Some((u, g)) => ((!u.is_empty()).then_some(u), (!g.is_empty()).then_some(g)),
            None => (Some(spec.as_str()), None),
        }
    };
    let u = match user {
        None => None,
        Some(n) => match uid(&accounts, n) {
            Some(id) => Some(id),
            None => {
                say(io, prog, &format!("{n}: illegal user name"));
                return Ok(1);
            }
        },
    };
    let g = match group {
        None => None,
        Some(n) => match gid(&accounts, n) {
            Some(id) => Some(id),
            None => {
                say(io, prog, &format!("{n}: illegal group name"));
                return Ok(1);
            }
        },
    };
    let mut status = 0;
    for f in &rest[1..] {
        // Without -h the owner of what a symlink points to changes (inside
        // the root); recursion never follows links.
        let host = match cx.host(f, !no_follow) {
            Ok(h) => h,
            Err(e) => return fail(io, prog, f, Path::new(f), e),
        };
        let mut todo = vec![host];
        let mut seen = 0usize;
        while let Some(p) = todo.pop() {
            seen += 1;
            if seen > cx.max_entries {
                return Err(CommandError::Limit {
                    what: format!("{} entries changed by one `{prog} -R`", cx.max_entries),
                });
            }
            let meta = match fs::symlink_metadata(&p) {
                Ok(m) => m,
                Err(e) => {
                    status = 1;
                    if !quiet {
                        fail(io, prog, f, &p, e)?;
                    }
                    continue;
                }
            };
            if cx.same_owner() {
                let uid = u.unwrap_or(meta.uid());
                let gid = g.unwrap_or(meta.gid());
                if let Err(e) = std::os::unix::fs::lchown(&p, Some(uid), Some(gid)) {
                    status = status.max(fail(io, prog, f, &p, e)?);
                }
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
