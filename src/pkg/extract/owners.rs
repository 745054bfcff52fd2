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
}
