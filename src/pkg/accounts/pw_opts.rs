//! What `pw`'s commands share ([`super::pw`], [`super::pw_user`]): the
//! exit statuses, `getopt(3)`, the run's context, `pw.conf`, names and
//! id allocation as pw does them.

use std::path::{Path, PathBuf};

use super::{confined, Accounts, Group};
use crate::pkg::script::{CommandError, Io};

pub const EX_USAGE: i32 = 64;
pub const EX_DATAERR: i32 = 65;
pub const EX_NOUSER: i32 = 67;
pub const EX_SOFTWARE: i32 = 70;
pub const EX_OSFILE: i32 = 72;
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
pub(crate) struct Ctx<'r> {
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

/// A name or a number given as pw's first word: digits only are an id.
pub(crate) fn name_or_id(arg1: Option<String>) -> (Option<String>, Option<u64>) {
    match arg1 {
        Some(a) if !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()) => (None, a.parse().ok()),
        Some(a) => (Some(a), None),
        None => (None, None),
    }
}

/// `pw_checkname`: the characters pw refuses in a name (`gecos`: in a
/// comment), and its length.
pub(crate) fn check_name(name: &str, gecos: bool) -> Result<(), String> {
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
pub(crate) struct Conf {
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
pub(crate) fn next_id(
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
pub(crate) fn gid_policy(
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
pub(crate) fn add_members(
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
