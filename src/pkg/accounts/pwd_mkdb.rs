//! `pwd_mkdb`: `/etc/pwd.db`, `/etc/spwd.db` and (with `-p`) `/etc/passwd`
//! from `master.passwd`, in the encoding of FreeBSD's
//! `usr.sbin/pwd_mkdb/pwd_mkdb.c` and the reader that must match it
//! (`pwdb_parse_entry_v4` in `lib/libc/gen/getpwent.c`):
//!
//! - the hash files as `pwd_mkdb` opens them (4096-byte buckets, fill
//!   factor 32, 256 elements, big-endian; [`crate::pkg::hashdb`]);
//! - the key `"\xFFVERSION"` with the one byte 4;
//! - for each user line, keys `'A'` + name, `'B'` + the line's number
//!   (big-endian u32, comments and blank lines not counted) and `'C'` +
//!   uid (big-endian u32), the first line of a name or a uid winning
//!   (`R_NOOVERWRITE`); `+`/`-` NIS lines also `'E'` + their count, and
//!   the key `'D'` holding 3 once there is one;
//! - each record `name\0 passwd\0 uid gid change class\0 gecos\0 dir\0
//!   shell\0 expire fields`, numbers big-endian u32, `fields` the
//!   `_PWF_*` bits of the fields the line has non-empty (`__pw_scan`);
//!   `pwd.db`'s password is `*`;
//! - `passwd`: `name:*:uid:gid:gecos:dir:shell`, comments left out, an id
//!   the line lacks left empty.
//!
//! A line `__pw_scan` rejects (not ten fields, no uid or gid for a
//! non-NIS user, an id not a number or above 2³²−1, root with a uid
//! other than 0, a line of 2047 bytes or more) fails the whole run with
//! `pwd_mkdb`'s messages and exit status 1, nothing written.
//!
//! The command: `pwd_mkdb [-C] [-i] [-N] [-p] [-d dir] [-s cachesize]
//! [-u user] [-v] file`. `-C` checks only; `-i`, `-N`, `-s` and `-v`
//! change nothing here (no lock to wait for); `-u user` regenerates
//! everything, which gives the databases `pwd_mkdb -u` would (its result
//! for the other users is the same) plus the version key. `file` is moved
//! to `dir/master.passwd` (mode 0600) as `pwd_mkdb` moves it.

use std::path::{Path, PathBuf};

use super::{confined, shown, write_file, LINE_MAX};
use crate::pkg::hashdb::{self, Params};
use crate::pkg::script::{CommandError, Io};

/// `_PWF_*` (`pwd.h`): which fields the line had.
const PWF_NAME: u32 = 0x1;
const PWF_PASSWD: u32 = 0x2;
const PWF_UID: u32 = 0x4;
const PWF_GID: u32 = 0x8;
const PWF_CHANGE: u32 = 0x10;
const PWF_CLASS: u32 = 0x20;
const PWF_GECOS: u32 = 0x40;
const PWF_DIR: u32 = 0x80;
const PWF_SHELL: u32 = 0x100;
const PWF_EXPIRE: u32 = 0x200;

/// `_PW_VERSIONED(x, 4)` of `_PW_KEYBYNAME` … `_PW_KEYYPBYNUM`.
const KEY_BY_NAME: u8 = b'A';
const KEY_BY_NUM: u8 = b'B';
const KEY_BY_UID: u8 = b'C';
const KEY_YP_ENABLED: u8 = b'D';
const KEY_YP_BY_NUM: u8 = b'E';
const VERSION_KEY: &[u8] = b"\xffVERSION";
const VERSION: u8 = 4;

/// One `master.passwd` line as `__pw_scan` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub passwd: String,
    pub uid: u32,
    pub gid: u32,
    pub change: u32,
    pub class: String,
    pub gecos: String,
    pub dir: String,
    pub shell: String,
    pub expire: u32,
    pub fields: u32,
}

/// `__pw_scan(line, pw, _PWSCAN_MASTER)`, its warning as the error.
pub fn scan(line: &str) -> Result<Entry, String> {
    let f: Vec<&str> = line.split(':').collect();
    if f.len() != 10 {
        return Err("corrupted entry".into());
    }
    let mut fields = 0;
    let name = f[0];
    if !name.is_empty() && (!name.starts_with('+') || name.len() == 1) {
        fields |= PWF_NAME;
    }
    let nis = name.starts_with('+') || name.starts_with('-');
    if !f[1].is_empty() {
        fields |= PWF_PASSWD;
    }
    let id = |text: &str, what: &str, bit: u32, fields: &mut u32| -> Result<u32, String> {
        if text.is_empty() {
            if !nis {
                return Err(format!("no {what} for user {name}"));
            }
            return Ok(0);
        }
        *fields |= bit;
        match text.parse::<u64>() {
            Ok(v) if v <= u64::from(u32::MAX) => Ok(v as u32),
            Ok(_) => Err(format!("{text} > max {what} value ({})", u32::MAX)),
            Err(_) => Err(format!("{text} {what} is incorrect")),
        }
    };
    let uid = id(f[2], "uid", PWF_UID, &mut fields)?;
    if name == "root" && uid != 0 {
        return Err("root uid should be 0".into());
    }
    let gid = id(f[3], "gid", PWF_GID, &mut fields)?;
    let mut text_field = |s: &str, bit: u32| {
        if !s.is_empty() {
            fields |= bit;
        }
        s.to_string()
    };
    let class = text_field(f[4], PWF_CLASS);
    let change_text = f[5];
    let expire_text = f[6];
    let gecos = text_field(f[7], PWF_GECOS);
    let dir = text_field(f[8], PWF_DIR);
    let shell = text_field(f[9], PWF_SHELL);
    if !change_text.is_empty() {
        fields |= PWF_CHANGE;
    }
    if !expire_text.is_empty() {
        fields |= PWF_EXPIRE;
    }
    Ok(Entry {
        name: name.to_string(),
        passwd: f[1].to_string(),
        uid,
        gid,
        change: atol(change_text) as u32,
        class,
        gecos,
        dir,
        shell,
        expire: atol(expire_text) as u32,
        fields,
    })
}

/// C's `atol`: leading blanks, a sign, digits; 0 for none.
fn atol(s: &str) -> i64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for c in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

impl Entry {
    /// The record stored under each key; `secure` keeps the password
    /// (`spwd.db`), else it is `*` (`pwd.db`).
    pub fn record(&self, secure: bool) -> Vec<u8> {
        let mut r = Vec::with_capacity(64 + self.gecos.len() + self.dir.len());
        let text = |r: &mut Vec<u8>, s: &str| {
            r.extend_from_slice(s.as_bytes());
            r.push(0);
        };
        text(&mut r, &self.name);
        text(&mut r, if secure { &self.passwd } else { "*" });
        for n in [self.uid, self.gid, self.change] {
            r.extend_from_slice(&n.to_be_bytes());
        }
        text(&mut r, &self.class);
        text(&mut r, &self.gecos);
        text(&mut r, &self.dir);
        text(&mut r, &self.shell);
        r.extend_from_slice(&self.expire.to_be_bytes());
        r.extend_from_slice(&self.fields.to_be_bytes());
        r
    }

    /// `pwd_mkdb -p`'s `passwd` line.
    fn v7_line(&self) -> String {
        let id = |bit: u32, v: u32| {
            if self.fields & bit != 0 {
                v.to_string()
            } else {
                String::new()
            }
        };
        format!(
            "{}:*:{}:{}:{}:{}:{}\n",
            self.name,
            id(PWF_UID, self.uid),
            id(PWF_GID, self.gid),
            self.gecos,
            self.dir,
            self.shell
        )
    }
}

/// The three files `pwd_mkdb -p` writes, made before any is written.
pub struct Built {
    pub pwd_db: Vec<u8>,
    pub spwd_db: Vec<u8>,
    pub passwd: String,
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The databases and `passwd` for the text of a `master.passwd`, or
/// `pwd_mkdb`'s complaint (its lines, without the program's name).
pub fn build(text: &str) -> Result<Built, String> {
    let mut insecure: Pairs = vec![(VERSION_KEY.to_vec(), vec![VERSION])];
    let mut secure: Pairs = insecure.clone();
    let mut names = std::collections::HashSet::new();
    let mut uids = std::collections::HashSet::new();
    let mut passwd = String::new();
    let mut cnt: u32 = 0;
    let mut ypcnt: u32 = 0;
    let body = text.strip_suffix('\n').unwrap_or(text);
    for (n, line) in body.split('\n').enumerate() {
        if text.is_empty() {
            break;
        }
        if line.len() >= LINE_MAX - 1 {
            return Err(format!("line #{} too long", n + 1));
        }
        let rest = line.trim_start_matches([' ', '\t']);
        if rest.is_empty() || rest.starts_with('#') {
            continue;
        }
        let e = scan(line).map_err(|w| format!("{w}\nat line #{}", n + 1))?;
        cnt += 1;
        let (rec, srec) = (e.record(false), e.record(true));
        let mut both = |key: Vec<u8>| {
            insecure.push((key.clone(), rec.clone()));
            secure.push((key, srec.clone()));
        };
        let mut by_name = vec![KEY_BY_NAME];
        by_name.extend_from_slice(e.name.as_bytes());
        if names.insert(e.name.clone()) {
            both(by_name);
        }
        let mut by_num = vec![KEY_BY_NUM];
        by_num.extend_from_slice(&cnt.to_be_bytes());
        both(by_num);
        if uids.insert(e.uid) {
            let mut by_uid = vec![KEY_BY_UID];
            by_uid.extend_from_slice(&e.uid.to_be_bytes());
            both(by_uid);
        }
        if e.name.starts_with('+') || e.name.starts_with('-') {
            ypcnt += 1;
            let mut by_yp = vec![KEY_YP_BY_NUM];
            by_yp.extend_from_slice(&ypcnt.to_be_bytes());
            both(by_yp);
        }
        passwd.push_str(&e.v7_line());
    }
    if ypcnt > 0 {
        insecure.push((vec![KEY_YP_ENABLED], vec![3]));
        secure.push((vec![KEY_YP_ENABLED], vec![3]));
    }
    let db = |pairs: &Pairs| hashdb::write(&Params::PWD_MKDB, pairs).map_err(|e| e.to_string());
    Ok(Built {
        pwd_db: db(&insecure)?,
        spwd_db: db(&secure)?,
        passwd,
    })
}

impl Built {
    /// Writes `pwd.db` (0644), `spwd.db` (0600) and, with `passwd`,
    /// `passwd` (0644) into `dir` (a host path inside `root`).
    pub fn write(&self, root: &Path, dir: &Path, passwd: bool) -> Result<(), CommandError> {
        write_file(root, &dir.join("pwd.db"), &self.pwd_db, 0o644)?;
        write_file(root, &dir.join("spwd.db"), &self.spwd_db, 0o600)?;
        if passwd {
            write_file(root, &dir.join("passwd"), self.passwd.as_bytes(), 0o644)?;
        }
        Ok(())
    }
}

const USAGE: &str = "usage: pwd_mkdb [-CiNp] [-d directory] [-s cachesize] [-u username] file\n";

/// `pwd_mkdb` as a package script runs it (see the module docs).
pub fn pwd_mkdb(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let mut check = false;
    let mut old = false;
    let mut dir = String::from("/etc");
    let mut user: Option<String> = None;
    let mut opts = crate::pkg::accounts::pw::Getopt::new(args, "Cd:iNps:u:v");
    for o in opts.by_ref() {
        match o {
            Ok(('C', _)) => check = true,
            Ok(('d', Some(d))) => dir = d,
            Ok(('p', _)) => old = true,
            Ok(('u', Some(u))) => user = Some(u),
            Ok(('i' | 'N' | 's' | 'v', _)) => {}
            _ => {
                io.stderr.extend_from_slice(USAGE.as_bytes());
                return Ok(1);
            }
        }
    }
    let rest = opts.rest();
    if rest.len() != 1 || user.as_deref().is_some_and(|u| u.starts_with(['+', '-'])) {
        io.stderr.extend_from_slice(USAGE.as_bytes());
        return Ok(1);
    }
    let given = &rest[0];
    let file = confined(root, Path::new(given))?;
    if !file.is_file() {
        io.stderr.extend_from_slice(
            format!("pwd_mkdb: {given}: No such file or directory\n").as_bytes(),
        );
        return Ok(1);
    }
    let text = super::read_text(root, &file)?;
    if check {
        for l in text.lines() {
            if let Ok(e) = scan(l) {
                if e.name.len() >= 33 {
                    io.stderr.extend_from_slice(
                        format!("pwd_mkdb: {}: username too long\n", e.name).as_bytes(),
                    );
                    return Ok(1);
                }
            }
        }
        return Ok(0);
    }
    let built = match build(&text) {
        Ok(b) => b,
        Err(why) => {
            for l in why.lines() {
                io.stderr
                    .extend_from_slice(format!("pwd_mkdb: {l}\n").as_bytes());
            }
            io.stderr.extend_from_slice(
                format!("pwd_mkdb: {given}: Inappropriate file type or format\n").as_bytes(),
            );
            return Ok(1);
        }
    };
    let dir = confined(root, Path::new(&dir))?;
    built.write(root, &dir, old)?;
    // The master file last, renamed into the directory, 0600.
    let master = dir.join("master.passwd");
    let io_err = |source| CommandError::Io {
        path: PathBuf::from(shown(root, &master)),
        source,
    };
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    if file != master {
        write_file(root, &master, text.as_bytes(), 0o600)?;
        std::fs::remove_file(&file).map_err(io_err)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_the_non_empty_ones() {
        let e = scan("redis:*:535:535::0:0:Redis:/var/db/redis:/usr/sbin/nologin").unwrap();
        assert_eq!(e.fields, 0x3df);
        assert!(scan("root:*:1:0::0:0:Charlie:/root:/bin/sh").is_err());
        assert!(scan("x:*::0::0:0:g:/:/bin/sh").is_err());
        assert_eq!(scan("+:::::::::").unwrap().fields, PWF_NAME);
    }
}
