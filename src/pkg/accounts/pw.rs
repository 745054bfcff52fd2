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

use super::{confined, etc_dir, Accounts, Group};
use crate::pkg::script::{CommandError, Io};

pub const EX_USAGE: i32 = 64;
pub const EX_DATAERR: i32 = 65;
pub const EX_NOUSER: i32 = 67;
pub const EX_SOFTWARE: i32 = 70;
pub const EX_OSFILE: i32 = 72;
pub const EX_IOERR: i32 = 74;
pub const EX_CONFIG: i32 = 78;

/// BSD `getopt(3)` over `args`: clustered flags, an option's argument
/// attached or the next word, stopping at the first non-option or `--`.
pub struct Getopt<'a> {
    args: &'a [String],
    spec: &'static str,
    i: usize,
    pos: usize,
}

impl<'a> Getopt<'a> {
    pub fn new(args: &'a [String], spec: &'static str) -> Getopt<'a> {
        Getopt {
            args,
            spec,
            i: 0,
            pos: 0,
        }
    }

    /// The words left after the options.
    pub fn rest(&self) -> &'a [String] {
        &self.args[self.i.min(self.args.len())..]
    }
}

impl Iterator for Getopt<'_> {
    /// `Ok((option, argument))`, or `Err(option)` for an unknown one or
    /// one missing its argument.
    type Item = Result<(char, Option<String>), char>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos == 0 {
            let w = self.args.get(self.i)?;
            if w == "--" {
                self.i += 1;
                return None;
            }
            if !w.starts_with('-') || w.len() < 2 {
                return None;
            }
            self.pos = 1;
        }
        let w = &self.args[self.i];
        let c = w[self.pos..].chars().next().expect("within the word");
        self.pos += c.len_utf8();
        let at_end = self.pos >= w.len();
        let Some(at) = self.spec.find(c).filter(|_| c != ':') else {
            if at_end {
                self.i += 1;
                self.pos = 0;
            }
            return Some(Err(c));
        };
        if self.spec[at + 1..].starts_with(':') {
            let arg = if !at_end {
                Some(w[self.pos..].to_string())
            } else {
                self.i += 1;
                self.args.get(self.i).cloned()
            };
            self.i += 1;
            self.pos = 0;
            return Some(arg.map(|a| (c, Some(a))).ok_or(c));
        }
        if at_end {
            self.i += 1;
            self.pos = 0;
        }
        Some(Ok((c, None)))
    }
}

/// What one pw run works on.
pub(super) struct Ctx<'r> {
    pub root: &'r Path,
    /// The etc directory, on the host, inside the root.
    pub etc: PathBuf,
    /// `-V`: the account files elsewhere; no home or mail made.
    pub alt: bool,
    /// The root pw works in (`-R`, else `/`), as the image names it.
    pub top: PathBuf,
    pub quiet: bool,
}

impl Ctx<'_> {
    /// pw's `errx`: `pw: MESSAGE` on stderr (unless `-q`), the status.
    pub fn fail(&self, io: &mut Io<'_>, code: i32, msg: &str) -> i32 {
        if !self.quiet {
            io.stderr
                .extend_from_slice(format!("pw: {msg}\n").as_bytes());
        }
        code
    }
}

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

/// A name or a number given as pw's first word: digits only are an id.
pub(super) fn name_or_id(arg1: Option<String>) -> (Option<String>, Option<u64>) {
    match arg1 {
        Some(a) if !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()) => (None, a.parse().ok()),
        Some(a) => (Some(a), None),
        None => (None, None),
    }
}

/// `pw_checkname`: the characters pw refuses in a name (`gecos`: in a
/// comment), and its length.
pub(super) fn check_name(name: &str, gecos: bool) -> Result<(), String> {
    let bad: &[char] = if gecos {
        &[':', '!', '@']
    } else {
        &[
            ' ', ',', '\t', ':', '+', '&', '#', '%', '^', '(', ')', '!', '@', '~', '*', '?', '<',
            '>', '=', '|', '\\', '/', '"',
        ]
    };
    for (n, c) in name.chars().enumerate() {
        let dollar_inside = !gecos && c == '$' && n + 1 != name.chars().count();
        let leading_dash = !gecos && c == '-' && n == 0;
        if bad.contains(&c) || c.is_control() || dollar_inside || leading_dash {
            return Err(format!(
                "invalid character `{c}' at position {n} in \"{name}\""
            ));
        }
    }
    if !gecos && name.len() > 32 {
        return Err(format!("name too long `{name}' (max is 32)"));
    }
    Ok(())
}

/// pw.conf's settings this pw reads (see the module docs).
pub(super) struct Conf {
    pub min_uid: u32,
    pub max_uid: u32,
    pub min_gid: u32,
    pub max_gid: u32,
    pub reuse_uids: bool,
    pub reuse_gids: bool,
    pub default_group: Option<String>,
    pub default_class: String,
    pub default_shell: String,
    pub shell_path: String,
    pub home: String,
    pub default_passwd: String,
}

impl Conf {
    pub fn read(ctx: &Ctx<'_>, given: Option<&str>) -> Result<Conf, CommandError> {
        let file = match given {
            Some(g) => confined(ctx.root, Path::new(g))?,
            None => ctx.etc.join("pw.conf"),
        };
        let text = super::read_text(ctx.root, &file)?;
        let mut c = Conf {
            min_uid: 1000,
            max_uid: 32000,
            min_gid: 1000,
            max_gid: 32000,
            reuse_uids: false,
            reuse_gids: false,
            default_group: None,
            default_class: String::new(),
            default_shell: "sh".into(),
            shell_path: "/bin".into(),
            home: "/home".into(),
            default_passwd: "no".into(),
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let (key, value) = match line.split_once(['=', ' ', '\t']) {
                Some((k, v)) => (k.trim(), v.trim().trim_start_matches('=').trim()),
                None => continue,
            };
            let value = value.trim_matches('"');
            let num = |v: &str, d: u32| v.parse().unwrap_or(d);
            let yes = |v: &str| matches!(v, "yes" | "true" | "1");
            match key {
                "minuid" => c.min_uid = num(value, c.min_uid),
                "maxuid" => c.max_uid = num(value, c.max_uid),
                "mingid" => c.min_gid = num(value, c.min_gid),
                "maxgid" => c.max_gid = num(value, c.max_gid),
                "reuseuids" => c.reuse_uids = yes(value),
                "reusegids" => c.reuse_gids = yes(value),
                "defaultgroup" if !value.is_empty() => c.default_group = Some(value.into()),
                "defaultclass" => c.default_class = value.into(),
                "defaultshell" if !value.is_empty() => c.default_shell = value.into(),
                "shellpath" if !value.is_empty() => c.shell_path = value.into(),
                "home" if !value.is_empty() => c.home = value.into(),
                "defaultpasswd" if !value.is_empty() => c.default_passwd = value.into(),
                _ => {}
            }
        }
        if c.min_uid >= c.max_uid {
            (c.min_uid, c.max_uid) = (1000, 32000);
        }
        if c.min_gid >= c.max_gid {
            (c.min_gid, c.max_gid) = (1000, 32000);
        }
        Ok(c)
    }
}

/// The next id pw allocates in `min..=max` given the ids in use: after
/// the highest used, else (or with `reuse`) the first free.
pub(super) fn next_id(
    used: impl Iterator<Item = u32>,
    min: u32,
    max: u32,
    reuse: bool,
) -> Option<u32> {
    let taken: std::collections::BTreeSet<u32> = used.filter(|&i| i >= min && i <= max).collect();
    let first_free = || (min..=max).find(|i| !taken.contains(i));
    if reuse {
        return first_free();
    }
    match taken.last() {
        None => Some(min),
        Some(&hi) if hi < max => Some(hi + 1),
        Some(_) => first_free(),
    }
}

/// The gid a new group gets: the one given (refused if taken, unless
/// `-o`; pw takes 0 as none given), else the next free one.
pub(super) fn gid_policy(
    ctx: &Ctx<'_>,
    acc: &Accounts,
    conf: &Conf,
    id: Option<u64>,
    dup_ok: bool,
    io: &mut Io<'_>,
) -> Result<u32, i32> {
    if let Some(id) = id.filter(|&i| i > 0) {
        if acc.group_by_gid(id as u32).is_some() && !dup_ok {
            return Err(ctx.fail(
                io,
                EX_DATAERR,
                &format!("gid `{id}' has already been allocated"),
            ));
        }
        return Ok(id as u32);
    }
    next_id(
        acc.groups().map(|g| g.gid),
        conf.min_gid,
        conf.max_gid,
        conf.reuse_gids,
    )
    .ok_or_else(|| {
        ctx.fail(
            io,
            EX_SOFTWARE,
            "unable to allocate a new gid - range fully used",
        )
    })
}

/// Members named in `list` (commas, blanks) added to `group`: each must
/// be a user (or a uid), as `grp_add_members` requires.
pub(super) fn add_members(
    ctx: &Ctx<'_>,
    acc: &Accounts,
    group: &mut Group,
    list: &str,
    io: &mut Io<'_>,
) -> Result<(), i32> {
    for m in list.split([',', ' ', '\t']).filter(|m| !m.is_empty()) {
        let user = acc.user(m).or_else(|| {
            m.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| m.parse().ok().and_then(|u| acc.user_by_uid(u)))
                .flatten()
        });
        let Some(user) = user else {
            return Err(ctx.fail(io, EX_NOUSER, &format!("user `{m}' does not exist")));
        };
        if !group.members.contains(&user.name) {
            group.members.push(user.name);
        }
    }
    Ok(())
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
