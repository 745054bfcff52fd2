//! `pw useradd`, `usermod`, `usershow` and `userdel` (see [`super::pw`]
//! for what is supported and refused).

use std::fs;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;

use super::pw_opts::{
    check_name, gid_policy, name_or_id, next_id, Conf, Ctx, Getopt, EX_CONFIG, EX_DATAERR,
    EX_NOUSER, EX_SOFTWARE, EX_USAGE,
};
use super::{confined, Accounts, Group, User};
use crate::pkg::script::{CommandError, Io};

/// The options of `useradd` and `usermod` this pw takes.
#[derive(Default)]
struct Opts {
    name: Option<String>,
    uid: Option<u64>,
    group: Option<String>,
    groups: Option<String>,
    class: Option<String>,
    gecos: Option<String>,
    home: Option<String>,
    shell: Option<String>,
    create_home: bool,
    home_mode: Option<u32>,
    skel: Option<String>,
    passwd: Option<String>,
    locked: bool,
    newname: Option<String>,
    dup_ok: bool,
    dry: bool,
    cfg: Option<String>,
}

fn opts(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<Opts, i32> {
    let (name, id) = name_or_id(arg1);
    let mut o = Opts {
        name,
        uid: id,
        ..Opts::default()
    };
    for opt in Getopt::new(args, "C:qn:u:c:d:e:p:g:G:mM:k:s:oL:i:w:h:H:Db:NPy:Yl:") {
        match opt {
            Ok(('C', a)) => o.cfg = a,
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => o.name = a,
            Ok(('u', Some(u))) => match u.parse() {
                Ok(v) if v <= u64::from(u32::MAX) => o.uid = Some(v),
                _ => return Err(ctx.fail(io, EX_USAGE, &format!("Bad id '{u}': invalid"))),
            },
            Ok(('c', Some(c))) => {
                if let Err(m) = check_name(&c, true) {
                    return Err(ctx.fail(io, EX_DATAERR, &m));
                }
                o.gecos = Some(c);
            }
            Ok(('d', a)) => o.home = a,
            Ok(('g', a)) => o.group = a,
            Ok(('G', a)) => o.groups = a,
            Ok(('m', _)) => o.create_home = true,
            Ok(('M', Some(m))) => match u32::from_str_radix(&m, 8) {
                Ok(v) if v <= 0o7777 => o.home_mode = Some(v),
                _ => return Err(ctx.fail(io, EX_USAGE, &format!("Invalid mode: '{m}'"))),
            },
            Ok(('k', a)) => o.skel = a,
            Ok(('s', a)) => o.shell = a,
            Ok(('o', _)) => o.dup_ok = true,
            Ok(('L', a)) => o.class = a,
            Ok(('w', a)) => o.passwd = a,
            Ok(('h', Some(v))) => {
                if v != "-" {
                    return Err(ctx.fail(io, EX_USAGE, "-h/-H with a file descriptor is not carried out by jbuild's pw (only `-h -`)"));
                }
                o.locked = true;
            }
            Ok(('l', a)) => o.newname = a,
            Ok(('N', _)) => o.dry = true,
            Ok((c, _)) => {
                return Err(ctx.fail(
                    io,
                    EX_USAGE,
                    &format!("-{c} is not carried out by jbuild's pw"),
                ))
            }
            Err(_) => return Err(EX_USAGE),
        }
    }
    Ok(o)
}

/// `pw_password` for `-w` (or pw.conf's `defaultpasswd`): `no` is `*`,
/// `none` empty; the others need crypt(3) and are refused.
fn password(ctx: &Ctx<'_>, how: &str, io: &mut Io<'_>) -> Result<String, i32> {
    match how {
        "no" => Ok("*".into()),
        "none" => Ok(String::new()),
        other => Err(ctx.fail(
            io,
            EX_USAGE,
            &format!("-w {other}: passwords that need crypt(3) are not carried out by jbuild's pw"),
        )),
    }
}

/// `shell_path`: a path or empty as given, else the first executable of
/// that name in `shellpath`'s directories, inside the image.
fn shell(ctx: &Ctx<'_>, conf: &Conf, given: &str, io: &mut Io<'_>) -> Result<String, i32> {
    if given.is_empty() || given.starts_with('/') {
        return Ok(given.to_string());
    }
    for dir in conf
        .shell_path
        .split([':', ' ', '\t'])
        .filter(|d| !d.is_empty())
    {
        let cand = format!("{}/{given}", dir.trim_end_matches('/'));
        if let Ok(host) = confined(ctx.root, Path::new(&cand)) {
            if fs::metadata(&host).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            {
                return Ok(cand);
            }
        }
    }
    Err(ctx.fail(
        io,
        EX_CONFIG,
        &format!("can't find shell `{given}' in shell paths"),
    ))
}

/// The group of `-g` (a name or a gid), which must exist.
fn named_group(ctx: &Ctx<'_>, acc: &Accounts, g: &str, io: &mut Io<'_>) -> Result<Group, i32> {
    acc.group(g)
        .or_else(|| g.parse().ok().and_then(|i| acc.group_by_gid(i)))
        .ok_or_else(|| ctx.fail(io, EX_NOUSER, &format!("group `{g}' is not defined")))
}

pub(super) fn add(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let o = match opts(ctx, arg1, args, io) {
        Ok(o) => o,
        Err(c) => return Ok(c),
    };
    let conf = Conf::read(ctx, o.cfg.as_deref())?;
    let Some(name) = o.name.clone() else {
        return Ok(ctx.fail(io, EX_DATAERR, "login name required"));
    };
    if let Err(m) = check_name(&name, false) {
        return Ok(ctx.fail(io, EX_DATAERR, &m));
    }
    let mut acc = Accounts::read(ctx.root, &ctx.etc)?;
    if acc.user(&name).is_some() {
        return Ok(ctx.fail(
            io,
            EX_DATAERR,
            &format!("login name `{name}' already exists"),
        ));
    }
    let uid = match o.uid {
        Some(u) => {
            if acc.user_by_uid(u as u32).is_some() && !o.dup_ok {
                return Ok(ctx.fail(
                    io,
                    EX_DATAERR,
                    &format!("uid `{u}' has already been allocated"),
                ));
            }
            u as u32
        }
        None => match next_id(
            acc.users().map(|u| u.uid),
            conf.min_uid,
            conf.max_uid,
            conf.reuse_uids,
        ) {
            Some(u) => u,
            None => {
                return Ok(ctx.fail(
                    io,
                    EX_SOFTWARE,
                    "unable to allocate a new uid - range fully used",
                ))
            }
        },
    };
    let group_given = o.group.clone().or_else(|| conf.default_group.clone());
    let mut new_group = None;
    let gid = match &group_given {
        Some(g) => match named_group(ctx, &acc, g, io) {
            Ok(g) => g.gid,
            Err(c) => return Ok(c),
        },
        None => match acc.group(&name) {
            Some(g) if g.members.is_empty() => g.gid,
            _ => {
                let prefer = (acc.group_by_gid(uid).is_none()).then_some(u64::from(uid));
                let gid = match gid_policy(ctx, &acc, &conf, prefer.or(None), false, io) {
                    Ok(g) => g,
                    Err(c) => return Ok(c),
                };
                if acc.group(&name).is_some() {
                    return Ok(ctx.fail(
                        io,
                        EX_DATAERR,
                        &format!("group name `{name}' already exists"),
                    ));
                }
                new_group = Some(Group {
                    name: name.clone(),
                    passwd: "*".into(),
                    gid,
                    members: Vec::new(),
                });
                gid
            }
        },
    };
    let passwd = if o.locked {
        "*".to_string()
    } else {
        match password(ctx, o.passwd.as_deref().unwrap_or(&conf.default_passwd), io) {
            Ok(p) => p,
            Err(c) => return Ok(c),
        }
    };
    let sh = match shell(
        ctx,
        &conf,
        o.shell.as_deref().unwrap_or(&conf.default_shell),
        io,
    ) {
        Ok(s) => s,
        Err(c) => return Ok(c),
    };
    let user = User {
        name: name.clone(),
        passwd,
        uid,
        gid,
        class: o
            .class
            .clone()
            .unwrap_or_else(|| conf.default_class.clone()),
        change: 0,
        expire: 0,
        gecos: o.gecos.clone().unwrap_or_else(|| "User &".into()),
        dir: o
            .home
            .clone()
            .unwrap_or_else(|| format!("{}/{name}", conf.home.trim_end_matches('/'))),
        shell: sh,
    };
    if o.dry {
        io.stdout
            .extend_from_slice(format!("{}\n", user.line()).as_bytes());
        return Ok(0);
    }
    if let Some(g) = &new_group {
        acc.put_group(&g.name, Some(g));
    }
    if let Some(list) = &o.groups {
        for gname in list.split([',', ' ', '\t']).filter(|g| !g.is_empty()) {
            let mut g = match named_group(ctx, &acc, gname, io) {
                Ok(g) => g,
                Err(c) => return Ok(c),
            };
            if !g.members.contains(&name) {
                g.members.push(name.clone());
                let n = g.name.clone();
                acc.put_group(&n, Some(&g));
            }
        }
    }
    acc.put_user(&name, Some(&user));
    if let Err(why) = acc.write_users(ctx.root)? {
        return Ok(ctx.fail(io, EX_DATAERR, &why));
    }
    acc.write_group(ctx.root)?;
    if !ctx.alt {
        mail_file(ctx, &user)?;
        if o.create_home {
            home(ctx, &user, o.home_mode, o.skel.as_deref())?;
        }
    }
    Ok(0)
}

/// An empty `/var/mail/NAME`, the user's, where the image has `/var/mail`.
fn mail_file(ctx: &Ctx<'_>, user: &User) -> Result<(), CommandError> {
    let dir = confined(ctx.root, &ctx.top.join("var/mail"))?;
    if !dir.is_dir() {
        return Ok(());
    }
    let path = dir.join(&user.name);
    let io_err = |source| CommandError::Io {
        path: path.clone(),
        source,
    };
    if fs::symlink_metadata(&path).is_err() {
        fs::write(&path, b"").map_err(io_err)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    }
    if !fs::symlink_metadata(&path).map_err(io_err)?.is_symlink() {
        chown(&path, Some(user.uid), Some(user.gid)).map_err(io_err)?;
    }
    Ok(())
}

/// `-m`: the home directory and its missing parents (0755), the home
/// the user's with `mode`, the skeleton's `dot.*` files copied as `.*`.
fn home(
    ctx: &Ctx<'_>,
    user: &User,
    mode: Option<u32>,
    skel: Option<&str>,
) -> Result<(), CommandError> {
    if !user.dir.starts_with('/') || user.dir.len() < 2 {
        return Ok(());
    }
    let rel = ctx.top.clone();
    let dir = confined(ctx.root, &rel.join(user.dir.trim_start_matches('/')))?;
    let io_err = |source| CommandError::Io {
        path: dir.clone(),
        source,
    };
    if let Some(parent) = dir.parent() {
        let mut b = fs::DirBuilder::new();
        b.recursive(true);
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o755);
        b.create(parent).map_err(io_err)?;
    }
    if !dir.exists() {
        fs::create_dir(&dir).map_err(io_err)?;
    }
    fs::set_permissions(&dir, fs::Permissions::from_mode(mode.unwrap_or(0o755))).map_err(io_err)?;
    chown(&dir, Some(user.uid), Some(user.gid)).map_err(io_err)?;
    let skel_dir = confined(
        ctx.root,
        &rel.join(skel.unwrap_or("/usr/share/skel").trim_start_matches('/')),
    )?;
    if let Ok(entries) = fs::read_dir(&skel_dir) {
        let mut names: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for n in names {
            let src = skel_dir.join(&n);
            let Ok(meta) = fs::symlink_metadata(&src) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let s = n.to_string_lossy();
            let target = match s.strip_prefix("dot.") {
                Some(rest) => format!(".{rest}"),
                None => s.to_string(),
            };
            let dst = dir.join(&target);
            if fs::symlink_metadata(&dst).is_ok() {
                continue;
            }
            fs::copy(&src, &dst).map_err(io_err)?;
            fs::set_permissions(
                &dst,
                fs::Permissions::from_mode(meta.permissions().mode() & 0o7777),
            )
            .map_err(io_err)?;
            chown(&dst, Some(user.uid), Some(user.gid)).map_err(io_err)?;
        }
    }
    Ok(())
}

fn find(acc: &Accounts, name: &Option<String>, id: Option<u64>) -> Option<User> {
    match (name, id) {
        (Some(n), _) => acc.user(n),
        (None, Some(i)) => acc.user_by_uid(i as u32),
        _ => None,
    }
}

fn missing(ctx: &Ctx<'_>, name: &Option<String>, id: Option<u64>, io: &mut Io<'_>) -> i32 {
    match (name, id) {
        (Some(n), _) => ctx.fail(io, EX_NOUSER, &format!("no such user `{n}'")),
        (None, Some(i)) => ctx.fail(io, EX_NOUSER, &format!("no such uid `{i}'")),
        _ => ctx.fail(io, EX_DATAERR, "username or id required"),
    }
}

pub(super) fn modify(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (given_name, given_id) = name_or_id(arg1.clone());
    let o = match opts(ctx, arg1, args, io) {
        Ok(o) => o,
        Err(c) => return Ok(c),
    };
    let conf = Conf::read(ctx, o.cfg.as_deref())?;
    let mut acc = Accounts::read(ctx.root, &ctx.etc)?;
    let name = o.name.clone().or(given_name);
    let lookup_id = if name.is_some() { None } else { given_id };
    let Some(mut user) = find(&acc, &name, lookup_id) else {
        return Ok(missing(ctx, &name, lookup_id, io));
    };
    let old = user.name.clone();
    if let Some(u) = o.uid.filter(|_| name.is_some()) {
        if u as u32 != user.uid && acc.user_by_uid(u as u32).is_some() && !o.dup_ok {
            return Ok(ctx.fail(
                io,
                EX_DATAERR,
                &format!("uid `{u}' has already been allocated"),
            ));
        }
        user.uid = u as u32;
    }
    if let Some(g) = &o.group {
        match named_group(ctx, &acc, g, io) {
            Ok(g) => user.gid = g.gid,
            Err(c) => return Ok(c),
        }
    }
    if let Some(n) = &o.newname {
        if let Err(m) = check_name(n, false) {
            return Ok(ctx.fail(io, EX_DATAERR, &m));
        }
        if acc.user(n).is_some() {
            return Ok(ctx.fail(io, EX_DATAERR, &format!("login name `{n}' already exists")));
        }
        user.name = n.clone();
    }
    if let Some(c) = &o.class {
        user.class = c.clone();
    }
    if let Some(c) = &o.gecos {
        user.gecos = c.clone();
    }
    if let Some(d) = &o.home {
        user.dir = d.clone();
    }
    if let Some(s) = &o.shell {
        match shell(ctx, &conf, s, io) {
            Ok(s) => user.shell = s,
            Err(c) => return Ok(c),
        }
    }
    if o.locked {
        user.passwd = "*".into();
    } else if let Some(w) = &o.passwd {
        match password(ctx, w, io) {
            Ok(p) => user.passwd = p,
            Err(c) => return Ok(c),
        }
    }
    if o.dry {
        io.stdout
            .extend_from_slice(format!("{}\n", user.line()).as_bytes());
        return Ok(0);
    }
    let mut groups: Vec<Group> = acc.groups().collect();
    if let Some(list) = &o.groups {
        let wanted: Vec<&str> = list
            .split([',', ' ', '\t'])
            .filter(|g| !g.is_empty())
            .collect();
        for w in &wanted {
            if let Err(c) = named_group(ctx, &acc, w, io) {
                return Ok(c);
            }
        }
        for g in &mut groups {
            g.members.retain(|m| m != &old);
            if wanted
                .iter()
                .any(|w| *w == g.name || w.parse::<u32>().ok() == Some(g.gid))
            {
                g.members.push(user.name.clone());
            }
        }
    } else if user.name != old {
        for g in &mut groups {
            for m in &mut g.members {
                if *m == old {
                    *m = user.name.clone();
                }
            }
        }
    }
    for g in &groups {
        acc.put_group(&g.name, Some(g));
    }
    acc.put_user(&old, Some(&user));
    if let Err(why) = acc.write_users(ctx.root)? {
        return Ok(ctx.fail(io, EX_DATAERR, &why));
    }
    acc.write_group(ctx.root)?;
    if !ctx.alt && o.create_home {
        home(ctx, &user, o.home_mode, o.skel.as_deref())?;
    }
    Ok(0)
}

pub(super) fn show(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (mut name, mut id) = name_or_id(arg1);
    let (mut all, mut force, mut v7) = (false, false, false);
    for o in Getopt::new(args, "C:qn:u:FPa7") {
        match o {
            Ok(('C', _)) => {}
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => name = a,
            Ok(('u', Some(u))) => id = u.parse().ok(),
            Ok(('F', _)) => force = true,
            Ok(('a', _)) => all = true,
            Ok(('7', _)) => v7 = true,
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
    let acc = Accounts::read(ctx.root, &ctx.etc)?;
    let print = |u: &User, out: &mut Vec<u8>| {
        let line = if v7 {
            format!(
                "{}:*:{}:{}:{}:{}:{}",
                u.name, u.uid, u.gid, u.gecos, u.dir, u.shell
            )
        } else {
            u.line()
        };
        out.extend_from_slice(format!("{line}\n").as_bytes());
    };
    if all {
        for u in acc.users() {
            print(&u, io.stdout);
        }
        return Ok(0);
    }
    let user = match find(&acc, &name, id) {
        Some(u) => u,
        None if force => {
            User::parse("nouser:*:4294967295:4294967295::0:0:User &:/nonexistent:/bin/sh")
                .expect("a valid line")
        }
        None => return Ok(missing(ctx, &name, id, io)),
    };
    print(&user, io.stdout);
    Ok(0)
}

pub(super) fn del(
    ctx: &mut Ctx<'_>,
    arg1: Option<String>,
    args: &[String],
    io: &mut Io<'_>,
) -> Result<i32, CommandError> {
    let (mut name, mut id) = name_or_id(arg1);
    for o in Getopt::new(args, "C:qn:u:rYy:") {
        match o {
            Ok(('C', _)) => {}
            Ok(('q', _)) => ctx.quiet = true,
            Ok(('n', a)) => name = a,
            Ok(('u', Some(u))) => id = u.parse().ok(),
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
    let mut acc = Accounts::read(ctx.root, &ctx.etc)?;
    let Some(user) = find(&acc, &name, id) else {
        return Ok(missing(ctx, &name, id, io));
    };
    if user.name == "root" {
        return Ok(ctx.fail(io, EX_DATAERR, "cannot remove user 'root'"));
    }
    let groups: Vec<Group> = acc.groups().collect();
    for mut g in groups {
        if g.name == user.name && g.gid == user.gid && g.members.iter().all(|m| m == &user.name) {
            acc.put_group(&user.name, None);
            continue;
        }
        if g.members.contains(&user.name) {
            g.members.retain(|m| m != &user.name);
            let n = g.name.clone();
            acc.put_group(&n, Some(&g));
        }
    }
    acc.put_user(&user.name, None);
    if let Err(why) = acc.write_users(ctx.root)? {
        return Ok(ctx.fail(io, EX_DATAERR, &why));
    }
    acc.write_group(ctx.root)?;
    Ok(0)
}
