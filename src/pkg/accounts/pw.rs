//! `pw` (FreeBSD's `usr.sbin/pw`) as package scripts call it, on the
//! image's account files ([`super::Accounts`]), with pw's exit statuses
//! (sysexits) and messages on stderr.
//!
//! Supported: `pw [-R rootdir | -V etcdir] COMMAND [NAME|ID] [options]`,
//! `COMMAND` as one word (`useradd`, `adduser`, …) or two (`user add`):
//!
//! - `groupadd NAME [-n NAME] [-g gid] [-M members] [-o] [-N] [-q] [-h -]`;
//! - `groupmod NAME [-n NAME] [-g gid] [-l newname] [-M members]
//!   [-m members] [-d members] [-N] [-q] [-h -]` (`-M` replaces the
//!   members, else `-d` removes, else `-m` adds, as pw);
//! - `groupshow NAME|GID [-a] [-F] [-q]`, `groupdel NAME|GID`;
//! - `useradd NAME [-n NAME] [-u uid] [-g group] [-G groups] [-L class]
//!   [-c gecos] [-d home] [-s shell] [-m] [-M mode] [-k skel] [-h -]
//!   [-w no|none] [-o] [-N] [-q]`, `usermod` with the same options and
//!   `-l newname`, `usershow NAME|UID [-a] [-F] [-7] [-q]`, `userdel
//!   NAME|UID`;
//! - `-C config` names the `pw.conf` to read (in the image); otherwise
//!   `pw.conf` in the etc directory. Read from it: `minuid`, `maxuid`,
//!   `mingid`, `maxgid`, `reuseuids`, `reusegids`, `defaultgroup`,
//!   `defaultclass`, `defaultshell`, `shellpath`, `home`,
//!   `defaultpasswd` (`no`, `none`).
//!
//! As pw: a new uid or gid is the one after the highest in the range
//! (1000–32000 unless `pw.conf` says), else the first free one; a user
//! without `-g` gets the group of its name (created with gid = uid when
//! that gid is free); `-s` without a `/` is looked for in `shellpath`
//! (`/bin`) inside the image; the gecos is `User &` unless `-c`; the
//! account is written with `*` as password unless `-w none`. `-m`
//! creates the home directory inside the image (its missing parents
//! 0755), owned by the new uid and gid, mode `-M` or 0755 (pw's 0777 less
//! the usual umask 022), and copies the skeleton's `dot.*` files (`-k`,
//! else `/usr/share/skel`) as `.*`; a new user also gets an empty
//! `/var/mail/NAME` (0600, its own) where the image has `/var/mail`, as pw
//! does. With `-V` neither is done, as pw. After a change of users,
//! `passwd`, `pwd.db` and `spwd.db` are regenerated ([`super::pwd_mkdb`]).
//!
//! Refused with `EX_USAGE` (64) and a message: passwords that need
//! crypt(3) or a terminal (`-w yes|random`, `-h`/`-H` with a descriptor),
//! `-P` (pretty output), `-Y`/`-y` (NIS), `lock`, `unlock`, `usernext`,
//! `groupnext`, `-e`/`-p` (expiry dates), `userdel -r`.

use std::path::{Path, PathBuf};

pub use super::pw_opts::Getopt;
use super::pw_opts::{
    add_members, check_name, gid_policy, name_or_id, Conf, Ctx, EX_DATAERR, EX_OSFILE, EX_USAGE,
};
use super::{confined, etc_dir, Accounts, Group};
use crate::pkg::script::{CommandError, Io};

const MODES: [&str; 7] = ["add", "del", "mod", "show", "next", "lock", "unlock"];

/// `pw` as a package script runs it (see the module docs).
pub fn pw(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let mut top = String::from("/");
    let mut etc: Option<String> = None;
    let mut relocated = false;
    let mut alt = false;
    let mut mode: Option<&str> = None;
    let mut which: Option<&str> = None;
    let mut arg1: Option<String> = None;
    let mut i = 0;
    let usage = |io: &mut Io<'_>, msg: &str| {
        io.stderr
            .extend_from_slice(format!("pw: {msg}\n").as_bytes());
        Ok(EX_USAGE)
    };
    while i < args.len() {
        let w = args[i].as_str();
        if let Some(opt) = w.strip_prefix('-') {
            let flag = opt.chars().next();
            if flag != Some('V') && flag != Some('R') {
                break;
            }
            if relocated {
                io.stderr
                    .extend_from_slice(b"pw: Both '-R' and '-V' specified, only one accepted\n");
                return Ok(1);
            }
            relocated = true;
            let dir = if opt.len() > 1 {
                opt[1..].to_string()
            } else {
                i += 1;
                match args.get(i) {
                    Some(d) => d.clone(),
                    None => return usage(io, "option requires an argument -- V"),
                }
            };
            if !confined(root, Path::new(&dir))?.is_dir() {
                let msg = format!("pw: no such directory `{dir}'\n");
                io.stderr.extend_from_slice(msg.as_bytes());
                return Ok(EX_OSFILE);
            }
            alt = flag == Some('V');
            if flag == Some('R') {
                etc = Some(format!("{}/etc", dir.trim_end_matches('/')));
                top = dir;
            } else {
                etc = Some(dir);
            }
        } else if mode.is_none() && which.is_none() && combo(w).is_some() {
            let (wh, m) = combo(w).expect("just matched");
            which = Some(wh);
            mode = Some(m);
        } else if mode.is_none() && MODES.contains(&w) {
            mode = MODES.iter().find(|m| **m == w).copied();
        } else if which.is_none() && (w == "user" || w == "group") {
            which = Some(if w == "user" { "user" } else { "group" });
        } else if which.is_some() && mode.is_some() {
            arg1 = Some(w.to_string());
        } else {
            return usage(io, &format!("unknown keyword `{w}'"));
        }
        i += 1;
    }
    let (Some(which), Some(mode)) = (which, mode) else {
        return usage(
            io,
            "usage: pw [user|group|lock|unlock] [add|del|mod|show|next] [help|switches/values]",
        );
    };
    let etc_path = etc.unwrap_or_else(|| "/etc".into());
    let mut ctx = Ctx {
        root,
        etc: etc_dir(root, &etc_path)?,
        alt,
        top: PathBuf::from(&top),
        quiet: false,
    };
    let rest = &args[i..];
    match (which, mode) {
        ("group", "add") => group_add(&mut ctx, arg1, rest, io),
        ("group", "mod") => group_mod(&mut ctx, arg1, rest, io),
        ("group", "show") => group_show(&mut ctx, arg1, rest, io),
        ("group", "del") => group_del(&mut ctx, arg1, rest, io),
        ("user", "add") => super::pw_user::add(&mut ctx, arg1, rest, io),
        ("user", "mod") => super::pw_user::modify(&mut ctx, arg1, rest, io),
        ("user", "show") => super::pw_user::show(&mut ctx, arg1, rest, io),
        ("user", "del") => super::pw_user::del(&mut ctx, arg1, rest, io),
        (w, m) => usage(io, &format!("`{w}{m}' is not carried out by jbuild's pw")),
    }
}

/// `useradd` and the other one-word commands (pw's `Combo1`, `Combo2`).
fn combo(w: &str) -> Option<(&'static str, &'static str)> {
    for which in ["user", "group"] {
        for mode in MODES {
            if w == format!("{which}{mode}") || w == format!("{mode}{which}") {
                return Some((which, mode));
            }
        }
    }
    match w {
        "lock" | "unlock" => Some(("user", if w == "lock" { "lock" } else { "unlock" })),
        _ => None,
    }
}

fn read(ctx: &Ctx<'_>) -> Result<Accounts, CommandError> {
    Accounts::read(ctx.root, &ctx.etc)
}

fn password_fd(ctx: &Ctx<'_>, v: &str, io: &mut Io<'_>) -> Result<(), i32> {
    if v == "-" {
        Ok(())
    } else {
        Err(ctx.fail(
            io,
            EX_USAGE,
            "-h/-H with a file descriptor is not carried out by jbuild's pw (only `-h -`)",
        ))
    }
}

fn group_add(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (mut name, mut id) = name_or_id(arg1);
    let (mut members, mut cfg, mut dup_ok, mut dry) = (None, None, false, false);
    for o in Getopt::new(args, "C:qn:g:h:H:M:oNPY") {
        match o {
            Ok(('C', a)) => cfg = a,
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => name = a,
            Ok(('g', Some(g))) => match g.parse() {
                Ok(v) => id = Some(v),
                Err(_) => return Ok(ctx.fail(io, EX_USAGE, &format!("Bad id '{g}': invalid"))),
            },
            Ok(('h', Some(v))) => {
                if let Err(c) = password_fd(ctx, &v, io) {
                    return Ok(c);
                }
            }
            Ok(('M', a)) => members = a,
            Ok(('o', _)) => dup_ok = true,
            Ok(('N', _)) => dry = true,
            Ok((o, _)) => {
                return Ok(ctx.fail(
                    io,
                    EX_USAGE,
                    &format!("-{o} is not carried out by jbuild's pw"),
                ))
            }
            Err(_) => return Ok(EX_USAGE),
        }
    }
    let Some(name) = name else {
        return Ok(ctx.fail(io, EX_DATAERR, "group name required"));
    };
    let mut acc = read(ctx)?;
    if acc.group(&name).is_some() {
        return Ok(ctx.fail(
            io,
            EX_DATAERR,
            &format!("group name `{name}' already exists"),
        ));
    }
    let conf = Conf::read(ctx, cfg.as_deref())?;
    if let Err(m) = check_name(&name, false) {
        return Ok(ctx.fail(io, EX_DATAERR, &m));
    }
    let gid = match gid_policy(ctx, &acc, &conf, id, dup_ok, io) {
        Ok(g) => g,
        Err(c) => return Ok(c),
    };
    let mut g = Group {
        name: name.clone(),
        passwd: "*".into(),
        gid,
        members: Vec::new(),
    };
    if let Some(m) = members {
        if let Err(c) = add_members(ctx, &acc, &mut g, &m, io) {
            return Ok(c);
        }
    }
    if dry {
        io.stdout
            .extend_from_slice(format!("{}\n", g.line()).as_bytes());
        return Ok(0);
    }
    acc.put_group(&name, Some(&g));
    acc.write_group(ctx.root)?;
    Ok(0)
}

fn group_mod(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (mut name, mut id) = name_or_id(arg1);
    let (mut set, mut del, mut add, mut newname, mut dry) = (None, None, None, None, false);
    for o in Getopt::new(args, "C:qn:d:g:l:h:H:M:m:NPY") {
        match o {
            Ok(('C', _)) => {}
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => name = a,
            Ok(('g', Some(g))) => match g.parse() {
                Ok(v) => id = Some(v),
                Err(_) => return Ok(ctx.fail(io, EX_USAGE, &format!("Bad id '{g}': invalid"))),
            },
            Ok(('d', a)) => del = a,
            Ok(('l', a)) => newname = a,
            Ok(('h', Some(v))) => {
                if let Err(c) = password_fd(ctx, &v, io) {
                    return Ok(c);
                }
            }
            Ok(('M', a)) => set = a,
            Ok(('m', a)) => add = a,
            Ok(('N', _)) => dry = true,
            Ok((o, _)) => {
                return Ok(ctx.fail(
                    io,
                    EX_USAGE,
                    &format!("-{o} is not carried out by jbuild's pw"),
                ))
            }
            Err(_) => return Ok(EX_USAGE),
        }
    }
    let mut acc = read(ctx)?;
    let found = match (&name, id) {
        (Some(n), _) => acc.group(n),
        (None, Some(i)) => acc.group_by_gid(i as u32),
        (None, None) => return Ok(ctx.fail(io, EX_DATAERR, "groupname or id required")),
    };
    let Some(mut g) = found else {
        return Ok(match name {
            Some(n) => ctx.fail(io, EX_DATAERR, &format!("unknown group `{n}'")),
            None => ctx.fail(
                io,
                EX_DATAERR,
                &format!("unknown gid `{}'", id.unwrap_or(0)),
            ),
        });
    };
    let old = g.name.clone();
    if let Some(i) = id.filter(|&i| i > 0).filter(|_| name.is_some()) {
        g.gid = i as u32;
    }
    if let Some(n) = newname {
        if let Err(m) = check_name(&n, false) {
            return Ok(ctx.fail(io, EX_DATAERR, &m));
        }
        g.name = n;
    }
    let r = if let Some(m) = set {
        g.members.clear();
        add_members(ctx, &acc, &mut g, &m, io)
    } else if let Some(d) = del {
        for m in d.split([',', ' ', '\t']).filter(|m| !m.is_empty()) {
            g.members.retain(|x| x != m);
        }
        Ok(())
    } else if let Some(m) = add {
        add_members(ctx, &acc, &mut g, &m, io)
    } else {
        Ok(())
    };
    if let Err(c) = r {
        return Ok(c);
    }
    if dry {
        io.stdout
            .extend_from_slice(format!("{}\n", g.line()).as_bytes());
        return Ok(0);
    }
    acc.put_group(&old, Some(&g));
    acc.write_group(ctx.root)?;
    Ok(0)
}

fn group_show(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (mut name, mut id) = name_or_id(arg1);
    let (mut all, mut force) = (false, false);
    for o in Getopt::new(args, "C:qn:g:FPa") {
        match o {
            Ok(('C', _)) => {}
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => name = a,
            Ok(('g', Some(g))) => match g.parse() {
                Ok(v) => id = Some(v),
                Err(_) => return Ok(ctx.fail(io, EX_USAGE, &format!("Bad id '{g}': invalid"))),
            },
            Ok(('F', _)) => force = true,
            Ok(('a', _)) => all = true,
            Ok((o, _)) => {
                return Ok(ctx.fail(
                    io,
                    EX_USAGE,
                    &format!("-{o} is not carried out by jbuild's pw"),
                ))
            }
            Err(_) => return Ok(EX_USAGE),
        }
    }
    let acc = read(ctx)?;
    if all {
        for g in acc.groups() {
            io.stdout
                .extend_from_slice(format!("{}\n", g.line()).as_bytes());
        }
        return Ok(0);
    }
    let found = match (&name, id) {
        (Some(n), _) => acc.group(n),
        (None, Some(i)) => acc.group_by_gid(i as u32),
        (None, None) => return Ok(ctx.fail(io, EX_DATAERR, "groupname or id required")),
    };
    let g = match found {
        Some(g) => g,
        None if force => Group {
            name: "nogroup".into(),
            passwd: "*".into(),
            gid: u32::MAX,
            members: Vec::new(),
        },
        None => {
            return Ok(match name {
                Some(n) => ctx.fail(io, EX_DATAERR, &format!("unknown group `{n}'")),
                None => ctx.fail(
                    io,
                    EX_DATAERR,
                    &format!("unknown gid `{}'", id.unwrap_or(0)),
                ),
            })
        }
    };
    io.stdout
        .extend_from_slice(format!("{}\n", g.line()).as_bytes());
    Ok(0)
}

fn group_del(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (mut name, mut id) = name_or_id(arg1);
    for o in Getopt::new(args, "C:qn:g:Y") {
        match o {
            Ok(('C', _)) => {}
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => name = a,
            Ok(('g', Some(g))) => id = g.parse().ok(),
            Ok((o, _)) => {
                return Ok(ctx.fail(
                    io,
                    EX_USAGE,
                    &format!("-{o} is not carried out by jbuild's pw"),
                ))
            }
            Err(_) => return Ok(EX_USAGE),
        }
    }
    let mut acc = read(ctx)?;
    let found = match (&name, id) {
        (Some(n), _) => acc.group(n),
        (None, Some(i)) => acc.group_by_gid(i as u32),
        (None, None) => return Ok(ctx.fail(io, EX_DATAERR, "groupname or id required")),
    };
    let Some(g) = found else {
        return Ok(match name {
            Some(n) => ctx.fail(io, EX_DATAERR, &format!("unknown group `{n}'")),
            None => ctx.fail(
                io,
                EX_DATAERR,
                &format!("unknown gid `{}'", id.unwrap_or(0)),
            ),
        });
    };
    acc.put_group(&g.name, None);
    acc.write_group(ctx.root)?;
    Ok(0)
}
