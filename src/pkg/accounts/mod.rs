//! Users and groups of an image, as FreeBSD keeps them: `/etc/master.passwd`
//! and `/etc/group` (text), `/etc/passwd` (`pwd_mkdb -p`'s seven-field
//! copy), and `/etc/pwd.db` and `/etc/spwd.db`, the Berkeley DB 1.85 hash
//! files FreeBSD's C library reads users from (`getpwent.c`: without them
//! a user in `master.passwd` exists for no program in the jail).
//!
//! - [`Accounts`]: the two text files read (bounded, every line kept as it
//!   was: comments, blank lines and order, as `pw` keeps them when it
//!   rewrites a file through `pw_copy`/`gr_copy`), changed and written;
//! - [`pwd_mkdb`]: the databases and `passwd` from `master.passwd`, and the
//!   `pwd_mkdb` command;
//! - [`pw`]: the `pw` command (`groupadd`, `useradd`, `groupmod`,
//!   `usermod`, `usershow`, `groupshow`, `userdel`, `groupdel`).
//!
//! Every path is the image's: [`etc_dir`] resolves a directory inside the
//! root and refuses one reached through a symlink that leads out of it
//! (an absolute target, or `..` above the root), and so do the files in
//! it; the host is never read or written. Files are written to a
//! temporary file in their directory and renamed into place, with the
//! modes `pw` and `pwd_mkdb` give them: `master.passwd` and `spwd.db`
//! 0600, `passwd`, `group` and `pwd.db` 0644.

pub mod pw;
mod pw_opts;
mod pw_user;
pub mod pwd_mkdb;

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::pkg::script::CommandError;

/// The most bytes of `master.passwd` or `group` read.
pub const MAX_FILE: u64 = 16 << 20;
/// The longest line `pwd_mkdb` takes (`LINE_MAX`, its NUL counted).
pub const LINE_MAX: usize = 2048;

/// One user as `master.passwd` has it, the text of each field kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub passwd: String,
    pub uid: u32,
    pub gid: u32,
    pub class: String,
    pub change: u64,
    pub expire: u64,
    pub gecos: String,
    pub dir: String,
    pub shell: String,
}

impl User {
    /// The line `pw` writes (`pw_make` in libutil).
    pub fn line(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}:{}:{}:{}:{}:{}",
            self.name,
            self.passwd,
            self.uid,
            self.gid,
            self.class,
            self.change,
            self.expire,
            self.gecos,
            self.dir,
            self.shell
        )
    }

    /// A `master.passwd` line's user, for `pw`'s lookups: ten fields with
    /// numeric ids, else `None` (a comment, a blank or NIS line).
    pub fn parse(line: &str) -> Option<User> {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() != 10 || line.trim_start().starts_with('#') {
            return None;
        }
        Some(User {
            name: f[0].to_string(),
            passwd: f[1].to_string(),
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            class: f[4].to_string(),
            change: f[5].parse().unwrap_or(0),
            expire: f[6].parse().unwrap_or(0),
            gecos: f[7].to_string(),
            dir: f[8].to_string(),
            shell: f[9].to_string(),
        })
    }
}

/// One group as `/etc/group` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub passwd: String,
    pub gid: u32,
    pub members: Vec<String>,
}

impl Group {
    /// The line `pw` writes (`gr_make`): members joined by commas.
    pub fn line(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.name,
            self.passwd,
            self.gid,
            self.members.join(",")
        )
    }

    pub fn parse(line: &str) -> Option<Group> {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() != 4 || line.trim_start().starts_with('#') {
            return None;
        }
        Some(Group {
            name: f[0].to_string(),
            passwd: f[1].to_string(),
            gid: f[2].parse().ok()?,
            members: f[3]
                .split(',')
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }
}

/// The two text files of an image's `etc` directory, line by line.
#[derive(Debug, Clone)]
pub struct Accounts {
    /// The directory on the host, inside the root.
    pub etc: PathBuf,
    /// `master.passwd`'s lines as read (without their newlines).
    pub master: Vec<String>,
    /// `group`'s lines as read.
    pub group: Vec<String>,
}

impl Accounts {
    /// Reads `master.passwd` and `group` in `etc` (a host path from
    /// [`etc_dir`]); a missing file has no lines.
    pub fn read(root: &Path, etc: &Path) -> Result<Accounts, CommandError> {
        Ok(Accounts {
            etc: etc.to_path_buf(),
            master: lines(&read_text(root, &etc.join("master.passwd"))?),
            group: lines(&read_text(root, &etc.join("group"))?),
        })
    }

    pub fn users(&self) -> impl Iterator<Item = User> + '_ {
        self.master.iter().filter_map(|l| User::parse(l))
    }

    pub fn groups(&self) -> impl Iterator<Item = Group> + '_ {
        self.group.iter().filter_map(|l| Group::parse(l))
    }

    /// The first user named `name`, as `getpwnam` over the text finds it.
    pub fn user(&self, name: &str) -> Option<User> {
        self.users().find(|u| u.name == name)
    }

    pub fn user_by_uid(&self, uid: u32) -> Option<User> {
        self.users().find(|u| u.uid == uid)
    }

    pub fn group(&self, name: &str) -> Option<Group> {
        self.groups().find(|g| g.name == name)
    }

    pub fn group_by_gid(&self, gid: u32) -> Option<Group> {
        self.groups().find(|g| g.gid == gid)
    }

    /// Replaces the line of the user named `name` with `new` (or removes
    /// it, for `None`), or appends `new` when there is none: what
    /// `pw_copy` does.
    pub fn put_user(&mut self, name: &str, new: Option<&User>) {
        put(&mut self.master, name, new.map(User::line), |l| {
            User::parse(l).map(|u| u.name)
        });
    }

    /// [`Accounts::put_user`] for `group` (`gr_copy`).
    pub fn put_group(&mut self, name: &str, new: Option<&Group>) {
        put(&mut self.group, name, new.map(Group::line), |l| {
            Group::parse(l).map(|g| g.name)
        });
    }

    /// Writes `group` (0644).
    pub fn write_group(&self, root: &Path) -> Result<(), CommandError> {
        write_file(
            root,
            &self.etc.join("group"),
            joined(&self.group).as_bytes(),
            0o644,
        )
    }

    /// Writes `master.passwd` (0600), then regenerates `passwd`, `pwd.db`
    /// and `spwd.db` from it, as `pw` does by running `pwd_mkdb -p`.
    pub fn write_users(&self, root: &Path) -> Result<Result<(), String>, CommandError> {
        let text = joined(&self.master);
        let built = match pwd_mkdb::build(&text) {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        write_file(
            root,
            &self.etc.join("master.passwd"),
            text.as_bytes(),
            0o600,
        )?;
        built.write(root, &self.etc, true)?;
        Ok(Ok(()))
    }
}

fn put(
    lines: &mut Vec<String>,
    name: &str,
    new: Option<String>,
    name_of: impl Fn(&str) -> Option<String>,
) {
    match lines
        .iter()
        .position(|l| name_of(l).as_deref() == Some(name))
    {
        Some(i) => match new {
            Some(n) => lines[i] = n,
            None => {
                lines.remove(i);
            }
        },
        None => {
            if let Some(n) = new {
                lines.push(n);
            }
        }
    }
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

fn joined(lines: &[String]) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// The host path of the directory `dir` names in the image, refused if a
/// symlink on the way leads out of the root.
pub fn etc_dir(root: &Path, dir: &str) -> Result<PathBuf, CommandError> {
    confined(root, Path::new(dir))
}

/// `path` in the image (absolute, or relative to its `/`), followed as the
/// jail would, refused if that leaves the root.
pub fn confined(root: &Path, path: &Path) -> Result<PathBuf, CommandError> {
    crate::fsutil::resolve_in_root_strictly(root, path).map_err(|e| match e {
        crate::fsutil::InRootError::Outside { .. } => CommandError::Hostile {
            path: path.to_path_buf(),
            why: e.to_string(),
        },
        crate::fsutil::InRootError::Io(source) => CommandError::Io {
            path: path.to_path_buf(),
            source,
        },
    })
}

/// A host path under `root` back to the image's own name for it.
pub fn shown(root: &Path, host: &Path) -> String {
    match host.strip_prefix(root) {
        Ok(rel) => format!("/{}", rel.display()),
        Err(_) => host.display().to_string(),
    }
}

/// The text of `file` (a host path inside the root), bounded; a missing
/// file is empty. A symlink there must stay inside the root.
pub fn read_text(root: &Path, file: &Path) -> Result<String, CommandError> {
    let inside = confined(root, &PathBuf::from(shown(root, file)))?;
    let f = match fs::File::open(&inside) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(String::new()),
        Err(source) => {
            return Err(CommandError::Io {
                path: file.to_path_buf(),
                source,
            })
        }
    };
    let mut bytes = Vec::new();
    f.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| CommandError::Io {
            path: file.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(CommandError::Hostile {
            path: PathBuf::from(shown(root, file)),
            why: format!("more than {MAX_FILE} bytes"),
        });
    }
    String::from_utf8(bytes).map_err(|_| CommandError::Hostile {
        path: PathBuf::from(shown(root, file)),
        why: "not UTF-8 text".into(),
    })
}

/// Writes `bytes` to `file` (a host path inside the root) through a
/// temporary file in its directory renamed into place, with `mode`. The
/// name itself is replaced (a symlink there is not followed); its
/// directory must lie inside the root.
pub fn write_file(root: &Path, file: &Path, bytes: &[u8], mode: u32) -> Result<(), CommandError> {
    let io_err = |source| CommandError::Io {
        path: PathBuf::from(shown(root, file)),
        source,
    };
    let dir = file.parent().unwrap_or(root);
    let dir = confined(root, &PathBuf::from(shown(root, dir)))?;
    let name = file.file_name().ok_or_else(|| CommandError::Hostile {
        path: file.to_path_buf(),
        why: "no file name".into(),
    })?;
    if let Ok(meta) = fs::symlink_metadata(dir.join(name)) {
        if meta.file_type().is_symlink() {
            // Followed, it must stay inside; replaced, it never is followed.
            confined(root, &PathBuf::from(shown(root, &dir.join(name))))?;
        }
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".jbuild-")
        .tempfile_in(&dir)
        .map_err(io_err)?;
    tmp.write_all(bytes).map_err(io_err)?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode)).map_err(io_err)?;
    tmp.persist(dir.join(name)).map_err(|e| io_err(e.error))?;
    Ok(())
}
