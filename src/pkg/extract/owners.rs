//! Owners and groups by name, resolved in the image being built: its
//! `/etc/master.passwd` (FreeBSD's own list, which `pw` edits), then its
//! `/etc/passwd`, and its `/etc/group`. Never the host's: pkg(8) asks the
//! host (`getpwnam`), so a package installed into another root gets the
//! host's numbers for its names, or root's for names the host lacks
//! (freebsd/pkg#2179); jbuild does what pkg means.
//!
//! The files are opened inside the root ([`crate::fsutil::resolve_in_root`]:
//! a symlink in the image cannot point the lookup at the host) and read
//! bounded.
//!
//! **A name the image lacks** is given number 0, as pkg's lookup gives it
//! (`get_uid_from_uname`/`get_gid_from_gname` in `libpkg` return 0 for a
//! name `getpwnam_r` does not find, and say nothing). jbuild says it, once
//! a package ([`Unresolved::warning`]: each name, how many entries, the
//! first one), not once a file. `root` and `wheel` in an image with no
//! accounts at all are not reported: they are 0 by definition, and a base
//! installs its first package (`FreeBSD-runtime`, which brings
//! `/etc/passwd` and `/etc/group`) into an empty root.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The most bytes of one account file read.
pub const MAX_ACCOUNTS: u64 = 16 << 20;

/// The names of an image's users and groups, with their numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners {
    pub users: BTreeMap<String, u32>,
    pub groups: BTreeMap<String, u32>,
}

impl Owners {
    /// Reads the account files of the image at `root`; a missing file
    /// names no one.
    pub fn read(root: &Path) -> Result<Owners, (PathBuf, io::Error)> {
        let mut o = Owners::default();
        // master.passwd first: the first line naming a user wins, as in
        // pwd_mkdb.
        for (file, id_field) in [("etc/master.passwd", 2), ("etc/passwd", 2)] {
            if let Some(text) = read(root, file)? {
                for (name, id) in entries(&text, id_field) {
                    o.users.entry(name).or_insert(id);
                }
            }
        }
        if let Some(text) = read(root, "etc/group")? {
            for (name, id) in entries(&text, 2) {
                o.groups.entry(name).or_insert(id);
            }
        }
        Ok(o)
    }

    pub fn uid(&self, name: &str) -> Option<u32> {
        self.users.get(name).copied()
    }

    pub fn gid(&self, name: &str) -> Option<u32> {
        self.groups.get(name).copied()
    }

    /// The image's numbers for the user and group names of the entry at
    /// `path`; a name it lacks is 0 (see the module docs), noted in
    /// `unresolved`.
    pub fn ids(
        &self,
        user: &str,
        group: &str,
        path: &str,
        unresolved: &mut Unresolved,
    ) -> (u32, u32) {
        let uid = self.uid(user).unwrap_or_else(|| {
            if !(user == "root" && self.users.is_empty()) {
                unresolved.note(Kind::User, user, path);
            }
            0
        });
        let gid = self.gid(group).unwrap_or_else(|| {
            if !(group == "wheel" && self.groups.is_empty()) {
                unresolved.note(Kind::Group, group, path);
            }
            0
        });
        (uid, gid)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    User,
    Group,
}

/// The owner and group names one package's entries had that the image
/// does not define: each with how many entries and the first one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unresolved {
    names: BTreeMap<(Kind, String), (u64, String)>,
}

impl Unresolved {
    fn note(&mut self, kind: Kind, name: &str, path: &str) {
        self.names
            .entry((kind, name.to_string()))
            .or_insert_with(|| (0, path.to_string()))
            .0 += 1;
    }

    /// The one warning for the package, `None` when every name resolved.
    pub fn warning(&self) -> Option<String> {
        if self.names.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .names
            .iter()
            .map(|((kind, name), (count, first))| {
                let kind = match kind {
                    Kind::User => "user",
                    Kind::Group => "group",
                };
                let entries = match count {
                    1 => format!("`{first}`"),
                    n => format!("{n} entries, the first `{first}`"),
                };
                format!("{kind} `{name}` ({entries})")
            })
            .collect();
        Some(format!(
            "the image has no {}: given number 0 (root, wheel), as pkg does; \
             add the accounts before this step (a package that creates them, or a RUN with pw)",
            names.join(", no ")
        ))
    }
}

/// `name:...` lines whose field `id_field` is a number; comments, blank
/// lines and NIS `+`/`-` entries are skipped.
fn entries(text: &str, id_field: usize) -> impl Iterator<Item = (String, u32)> + '_ {
    text.lines().filter_map(move |line| {
        let line = line.trim_end_matches('\r');
        if line.trim_start().starts_with('#') || line.starts_with(['+', '-']) {
            return None;
        }
        let fields: Vec<&str> = line.split(':').collect();
        let name = fields.first().filter(|n| !n.is_empty())?;
        let id = fields.get(id_field)?.parse().ok()?;
        Some((name.to_string(), id))
    })
}

fn read(root: &Path, rel: &str) -> Result<Option<String>, (PathBuf, io::Error)> {
    let fail = |e| (root.join(rel), e);
    let path = crate::fsutil::resolve_in_root(root, Path::new(rel), true).map_err(fail)?;
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_ACCOUNTS + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_ACCOUNTS {
        return Err(fail(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {MAX_ACCOUNTS} bytes"),
        )));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_root_first_line_winning() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("etc")).unwrap();
        std::fs::write(
            t.path().join("etc/master.passwd"),
            "# comment\nroot:*:0:0::0:0:Charlie &:/root:/bin/sh\nredis:*:535:535::0:0:Redis:/var/db/redis:/usr/sbin/nologin\n+nis:::::::::\n",
        )
        .unwrap();
        std::fs::write(
            t.path().join("etc/passwd"),
            "redis:*:999:999:x:/:/bin/sh\nwww:*:80:80:World Wide Web Owner:/nonexistent:/usr/sbin/nologin\nbad:*:x:1::/:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(t.path().join("etc/group"), "wheel:*:0:root\nredis:*:535:\n").unwrap();
        let o = Owners::read(t.path()).unwrap();
        assert_eq!(o.uid("redis"), Some(535));
        assert_eq!(o.uid("www"), Some(80));
        assert_eq!(o.uid("bad"), None);
        assert_eq!(o.uid("+nis"), None);
        assert_eq!(o.gid("redis"), Some(535));
        assert_eq!(o.gid("wheel"), Some(0));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(Owners::read(empty.path()).unwrap(), Owners::default());
    }

    #[test]
    fn a_missing_name_is_0_said_once_and_root_in_an_empty_image_not_at_all() {
        let mut u = Unresolved::default();
        let none = Owners::default();
        assert_eq!(none.ids("root", "wheel", "/etc/group", &mut u), (0, 0));
        assert_eq!(none.ids("root", "wheel", "/bin/sh", &mut u), (0, 0));
        assert_eq!(u.warning(), None, "root and wheel of an empty image");

        let mut o = Owners::default();
        o.users.insert("www".into(), 80);
        o.groups.insert("staff".into(), 20);
        assert_eq!(o.ids("www", "staff", "/a", &mut u), (80, 20));
        assert_eq!(u.warning(), None);
        // Accounts without root: root is a name the image lacks.
        assert_eq!(o.ids("root", "staff", "/b", &mut u), (0, 20));
        assert_eq!(o.ids("redis", "redis", "/c", &mut u), (0, 0));
        assert_eq!(o.ids("redis", "staff", "/d", &mut u), (0, 20));
        assert_eq!(
            u.warning().unwrap(),
            "the image has no user `redis` (2 entries, the first `/c`), no user `root` (`/b`), \
             no group `redis` (`/c`): given number 0 (root, wheel), as pkg does; \
             add the accounts before this step (a package that creates them, or a RUN with pw)"
        );
    }
}
