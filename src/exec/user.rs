//! Who a step runs as: `USER` and `COPY --chown` specs resolved against the
//! root's own `/etc/passwd` and `/etc/group` (never the host's).
//!
//! The rules follow Docker's, so recipes behave as their authors expect:
//!
//! - `name` or `uid`: the passwd entry gives the primary group and home;
//!   supplementary groups are every `/etc/group` line listing the name.
//!   A numeric uid with no entry runs with gid 0 and home `/`.
//! - `user:group`: exactly that group, and no other membership (Docker:
//!   "the user will have only the specified group membership").
//! - Numeric ids never need an entry; names always do.
//!
//! FreeBSD keeps the same seven fields in `/etc/passwd` as Linux (the
//! ten-field file is `master.passwd`, which only holds the password
//! hashes besides), so one parser serves both.

use std::fs;
use std::io;
use std::path::Path;

use super::ExecError;
use crate::fsutil::resolve_in_root;

/// The credentials a step's process gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// All groups for `setgroups(2)`, the primary `gid` first.
    pub groups: Vec<u32>,
    /// The default for `HOME` when the step's environment has none.
    pub home: String,
}

/// Resolves a `USER` spec (`user`, `uid`, `user:group`, `uid:gid`); `None`
/// is root.
pub fn resolve_user(root: &Path, spec: Option<&str>) -> Result<Identity, ExecError> {
    let spec = spec.unwrap_or("0");
    let (user, group) = split_spec(spec)?;
    let passwd = Passwd::load(root)?;
    let groups = GroupFile::load(root)?;

    let entry = passwd.find(user);
    let uid = match (entry, parse_id(user)) {
        (Some(e), _) => e.uid,
        (None, Some(id)) => id,
        (None, None) => return Err(ExecError::UnknownUser(user.to_string())),
    };
    let home = entry.map_or_else(|| "/".to_string(), |e| e.home.clone());

    if let Some(group) = group {
        let gid = groups.resolve(group)?;
        return Ok(Identity {
            uid,
            gid,
            groups: vec![gid],
            home,
        });
    }
    let gid = entry.map_or(0, |e| e.gid);
    let mut all = vec![gid];
    if let Some(e) = entry {
        for g in groups.memberships(&e.name) {
            if !all.contains(&g) {
                all.push(g);
            }
        }
    }
    Ok(Identity {
        uid,
        gid,
        groups: all,
        home,
    })
}

/// Resolves a `COPY --chown` spec (`user[:group]`, names or numbers) to the
/// owner to give copied files. Without a group, a known user's primary
/// group is used, and for a numeric uid not in passwd the same number.
pub fn resolve_owner(root: &Path, spec: &str) -> Result<(u32, u32), ExecError> {
    let (user, group) = split_spec(spec)?;
    let passwd = Passwd::load(root)?;
    let entry = passwd.find(user);
    let (uid, primary) = match (entry, parse_id(user)) {
        (Some(e), _) => (e.uid, e.gid),
        (None, Some(id)) => (id, id),
        (None, None) => return Err(ExecError::UnknownUser(user.to_string())),
    };
    let gid = match group {
        Some(g) => GroupFile::load(root)?.resolve(g)?,
        None => primary,
    };
    Ok((uid, gid))
}

/// The passwd name of a `USER` spec's user part (`name`, `uid`,
/// `name:group`), for tools that take names only (jail(8)'s
/// `exec.jail_user`); `None` when the root's passwd has no such user.
pub fn user_name(root: &Path, spec: &str) -> Result<Option<String>, ExecError> {
    let (user, _) = split_spec(spec)?;
    Ok(Passwd::load(root)?.find(user).map(|e| e.name.clone()))
}

fn split_spec(spec: &str) -> Result<(&str, Option<&str>), ExecError> {
    let invalid = || {
        ExecError::Invalid(format!(
            "user `{spec}` is not `user`, `uid`, `user:group` or `uid:gid`"
        ))
    };
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() || group.is_some_and(|g| g.is_empty() || g.contains(':')) {
        return Err(invalid());
    }
    Ok((user, group))
}

/// A decimal id; names that merely start with digits stay names.
fn parse_id(s: &str) -> Option<u32> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// Reads a file inside the root; a missing file reads as empty (a minimal
/// root without `/etc` still runs numeric ids).
fn read_in_root(root: &Path, path: &str) -> Result<String, ExecError> {
    let io_err = |source: io::Error| ExecError::Io {
        context: format!("cannot read {path} in {}", root.display()),
        source,
    };
    let host = resolve_in_root(root, Path::new(path), true).map_err(io_err)?;
    match fs::read(&host) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io_err(e)),
    }
}

/// Splits a colon-separated database into fields, skipping blank lines,
/// comments and NIS `+`/`-` lines.
fn records(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with(['#', '+', '-']))
        .map(|l| l.split(':').collect())
}

struct PasswdEntry {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
}

struct Passwd(Vec<PasswdEntry>);

impl Passwd {
    fn load(root: &Path) -> Result<Self, ExecError> {
        let text = read_in_root(root, "/etc/passwd")?;
        let entries = records(&text)
            .filter_map(|f| {
                let uid = f.get(2)?.parse().ok()?;
                let gid = f.get(3)?.parse().ok()?;
                let home = f.get(5).filter(|h| !h.is_empty()).unwrap_or(&"/");
                Some(PasswdEntry {
                    name: f[0].to_string(),
                    uid,
                    gid,
                    home: home.to_string(),
                })
            })
            .collect();
        Ok(Passwd(entries))
    }

    /// By name first, then (for a number) by uid, as getpwnam then getpwuid.
    fn find(&self, user: &str) -> Option<&PasswdEntry> {
        self.0
            .iter()
            .find(|e| e.name == user)
            .or_else(|| parse_id(user).and_then(|id| self.0.iter().find(|e| e.uid == id)))
    }
}

struct GroupEntry {
    name: String,
    gid: u32,
    members: Vec<String>,
}

struct GroupFile(Vec<GroupEntry>);

impl GroupFile {
    fn load(root: &Path) -> Result<Self, ExecError> {
        let text = read_in_root(root, "/etc/group")?;
        let entries = records(&text)
            .filter_map(|f| {
                let gid = f.get(2)?.parse().ok()?;
                let members = f
                    .get(3)
                    .map(|m| {
                        m.split(',')
                            .map(str::trim)
                            .filter(|m| !m.is_empty())
                            .map(String::from)
                            .collect()
                    })
                    .unwrap_or_default();
                Some(GroupEntry {
                    name: f[0].to_string(),
                    gid,
                    members,
                })
            })
            .collect();
        Ok(GroupFile(entries))
    }

    fn resolve(&self, group: &str) -> Result<u32, ExecError> {
        if let Some(g) = self.0.iter().find(|g| g.name == group) {
            return Ok(g.gid);
        }
        parse_id(group).ok_or_else(|| ExecError::UnknownGroup(group.to_string()))
    }

    fn memberships<'a>(&'a self, user: &'a str) -> impl Iterator<Item = u32> + 'a {
        self.0
            .iter()
            .filter(move |g| g.members.iter().any(|m| m == user))
            .map(|g| g.gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root_with(passwd: &str, group: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("etc")).unwrap();
        fs::write(t.path().join("etc/passwd"), passwd).unwrap();
        fs::write(t.path().join("etc/group"), group).unwrap();
        t
    }

    const PASSWD: &str = "# comment\n\
        root:*:0:0:Charlie &:/root:/bin/csh\n\
        www:*:80:80:World Wide Web Owner:/nonexistent:/usr/sbin/nologin\n\
        nobody:*:65534:65534:Unprivileged user:/nonexistent:/usr/sbin/nologin\n\
        builder:*:1001:1001::/home/builder:/bin/sh\n\
        +:::::::\n";
    const GROUP: &str = "wheel:*:0:root\n\
        operator:*:5:root\n\
        www:*:80:\n\
        nogroup:*:65533:\n\
        nobody:*:65534:\n\
        builder:*:1001:\n\
        staff:*:20:builder, www\n\
        video:*:44:builder\n";

    fn id(uid: u32, gid: u32, groups: &[u32], home: &str) -> Identity {
        Identity {
            uid,
            gid,
            groups: groups.to_vec(),
            home: home.into(),
        }
    }

    #[test]
    fn names_numbers_and_groups() {
        let t = root_with(PASSWD, GROUP);
        let r = |s| resolve_user(t.path(), s).unwrap();
        assert_eq!(r(None), id(0, 0, &[0, 5], "/root"));
        assert_eq!(r(Some("root")), id(0, 0, &[0, 5], "/root"));
        assert_eq!(
            r(Some("nobody")),
            id(65534, 65534, &[65534], "/nonexistent")
        );
        assert_eq!(
            r(Some("builder")),
            id(1001, 1001, &[1001, 20, 44], "/home/builder")
        );
        // A number that has an entry gets the entry's group and memberships.
        assert_eq!(
            r(Some("1001")),
            id(1001, 1001, &[1001, 20, 44], "/home/builder")
        );
        // A number without one runs as gid 0, home /, as Docker does.
        assert_eq!(r(Some("4242")), id(4242, 0, &[0], "/"));
        // An explicit group is the only membership.
        assert_eq!(r(Some("builder:www")), id(1001, 80, &[80], "/home/builder"));
        assert_eq!(r(Some("4242:4343")), id(4242, 4343, &[4343], "/"));
        assert_eq!(
            r(Some("www:nogroup")),
            id(80, 65533, &[65533], "/nonexistent")
        );
    }

    #[test]
    fn unknown_and_malformed() {
        let t = root_with(PASSWD, GROUP);
        let e = |s| resolve_user(t.path(), Some(s)).unwrap_err().to_string();
        assert!(
            e("ghost").contains("`ghost` is not in the root's /etc/passwd"),
            "{}",
            e("ghost")
        );
        assert!(e("builder:ghosts").contains("group `ghosts`"));
        for bad in ["", ":", "a:", ":b", "a:b:c"] {
            assert!(
                matches!(
                    resolve_user(t.path(), Some(bad)),
                    Err(ExecError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn no_etc_at_all() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(resolve_user(t.path(), None).unwrap(), id(0, 0, &[0], "/"));
        assert_eq!(
            resolve_user(t.path(), Some("65534")).unwrap(),
            id(65534, 0, &[0], "/")
        );
        assert!(matches!(
            resolve_user(t.path(), Some("nobody")),
            Err(ExecError::UnknownUser(_))
        ));
        assert_eq!(resolve_owner(t.path(), "1000").unwrap(), (1000, 1000));
    }

    #[test]
    fn passwd_is_read_inside_the_root() {
        // /etc -> /etc must mean the root's etc, not the host's.
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("private")).unwrap();
        fs::write(
            t.path().join("private/passwd"),
            "alice:*:1234:99::/home/alice:/bin/sh\n",
        )
        .unwrap();
        symlink("/private", t.path().join("etc")).unwrap();
        assert_eq!(resolve_user(t.path(), Some("alice")).unwrap().uid, 1234);
        assert!(resolve_user(t.path(), Some("daemon")).is_err());
    }

    #[test]
    fn chown_owner() {
        let t = root_with(PASSWD, GROUP);
        let o = |s| resolve_owner(t.path(), s).unwrap();
        assert_eq!(o("builder"), (1001, 1001));
        assert_eq!(o("www:staff"), (80, 20));
        assert_eq!(o("1001"), (1001, 1001));
        assert_eq!(o("5000"), (5000, 5000));
        assert_eq!(o("5000:7"), (5000, 7));
        assert_eq!(o("builder:0"), (1001, 0));
        assert!(matches!(
            resolve_owner(t.path(), "ghost"),
            Err(ExecError::UnknownUser(_))
        ));
        assert!(matches!(
            resolve_owner(t.path(), "www:ghosts"),
            Err(ExecError::UnknownGroup(_))
        ));
    }
}
