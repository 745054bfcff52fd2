//! Rootless builds on Linux: a user without root enters a user namespace
//! of jbuild's own, with the subordinate ids `/etc/subuid` and
//! `/etc/subgid` give the user mapped in (as podman and buildah do), so
//! that `RUN` steps run and files keep the owners a recipe gives them.
//!
//! The decision is data ([`decide`], tested on Linux against
//! subuid(5)/subgid(5) texts): root needs nothing; a user with
//! subordinate ranges and the `newuidmap`/`newgidmap` helpers (shadow's
//! setuid programs, the only way an unprivileged user may map more than
//! its own id) is [`Mode::Rootless`]; any other user stays as it is and
//! is told what to configure ([`Mode::Unprivileged`]).
//!
//! The mechanics ([`enter`], Linux only): jbuild forks; the child leaves
//! for a new user and mount namespace (`unshare(2)`) and waits on a pipe;
//! the parent maps the child's ids with the helpers (inside uid and gid 0
//! are the user's own, 1… its subordinate ranges in order) and lets it
//! go; the child then executes jbuild again with the same arguments, now
//! as root of the namespace, and the parent waits and exits as it did.
//! The child carries [`IN_NAMESPACE`] so that it does not enter again and
//! so that what depends on the real user (where the state lives, which
//! `policy.json` is the user's: [`crate::config::real_root`]) still
//! follows the user, not the namespace's root. The state directory is
//! given to the child explicitly (`JBUILD_ROOT`), as the user's.

#[cfg(target_os = "linux")]
use std::path::Path;

/// Set in the environment of the jbuild that runs in the user namespace
/// jbuild made for a non-root user.
pub const IN_NAMESPACE: &str = crate::config::ROOTLESS_ENV;

/// The most ranges of one user mapped (the kernel takes 340 lines in an
/// id map; a user rarely has more than one range).
const MAX_RANGES: usize = 8;

/// One subordinate range: `count` ids from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub count: u64,
}

/// A user's ids and subordinate ranges: what the namespace maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub uid: u32,
    pub gid: u32,
    pub subuids: Vec<Range>,
    pub subgids: Vec<Range>,
}

impl Mapping {
    /// The arguments after the pid of `newuidmap` (`uid`) or `newgidmap`:
    /// `inside outside count` triples, the user's own id as 0, then each
    /// range from 1 on.
    pub fn helper_args(&self, uid: bool) -> Vec<String> {
        let (own, ranges) = if uid {
            (self.uid, &self.subuids)
        } else {
            (self.gid, &self.subgids)
        };
        let mut args = vec!["0".to_string(), own.to_string(), "1".to_string()];
        let mut inside = 1u64;
        for r in ranges {
            args.extend([inside.to_string(), r.start.to_string(), r.count.to_string()]);
            inside += r.count;
        }
        args
    }

    /// How many ids the namespace has (the user's own and the ranges').
    pub fn ids(&self) -> u64 {
        1 + self.subuids.iter().map(|r| r.count).sum::<u64>()
    }
}

/// How jbuild runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// As root: nothing to do.
    Root,
    /// In the user namespace jbuild made (the child of [`enter`]).
    InNamespace,
    /// A user with subordinate ids: jbuild enters a namespace of its own.
    Rootless(Mapping),
    /// A user without them: build steps cannot run; the text says what
    /// to configure.
    Unprivileged(String),
}

impl Mode {
    /// One line for `jbuild info`.
    pub fn describe(&self) -> String {
        match self {
            Mode::Root => "root".into(),
            Mode::InNamespace => "rootless (in jbuild's user namespace)".into(),
            Mode::Rootless(m) => format!(
                "rootless: a user namespace of {} ids (uid {} as root, subordinate uids {})",
                m.ids(),
                m.uid,
                m.subuids
                    .iter()
                    .map(|r| format!("{}-{}", r.start, r.start + r.count - 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Mode::Unprivileged(why) => format!("unprivileged: {why}"),
        }
    }
}

/// The ranges `subid` (the text of `/etc/subuid` or `/etc/subgid`) gives
/// the user `name` with id `id`: lines `owner:start:count`, the owner a
/// login name or a numeric id, as subuid(5) says; comments, blank and
/// malformed lines and empty ranges are skipped.
pub fn ranges(subid: &str, name: Option<&str>, id: u32) -> Vec<Range> {
    let mut out = Vec::new();
    for line in subid.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split(':');
        let (Some(owner), Some(start), Some(count), None) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let ours = Some(owner) == name || owner.parse::<u32>().is_ok_and(|n| n == id);
        let (Ok(start), Ok(count)) = (start.parse::<u64>(), count.parse::<u64>()) else {
            continue;
        };
        if ours
            && count > 0
            && start
                .checked_add(count)
                .is_some_and(|e| e <= u64::from(u32::MAX))
        {
            out.push(Range { start, count });
            if out.len() == MAX_RANGES {
                break;
            }
        }
    }
    out
}

/// What the system says, as data: the effective uid and gid, the user's
/// name, the two files' texts (`None` when missing), whether each helper
/// is installed, whether this is already the namespace's child.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub euid: u32,
    pub egid: u32,
    pub name: Option<&'a str>,
    pub subuid: Option<&'a str>,
    pub subgid: Option<&'a str>,
    pub newuidmap: bool,
    pub newgidmap: bool,
    pub in_namespace: bool,
}

/// How jbuild runs, from `facts`.
pub fn decide(facts: &Facts<'_>) -> Mode {
    if facts.in_namespace {
        return Mode::InNamespace;
    }
    if facts.euid == 0 {
        return Mode::Root;
    }
    let who = facts
        .name
        .map_or_else(|| format!("uid {}", facts.euid), str::to_string);
    let owner = facts
        .name
        .map_or_else(|| facts.euid.to_string(), str::to_string);
    let subuids = ranges(facts.subuid.unwrap_or(""), facts.name, facts.euid);
    let subgids = ranges(facts.subgid.unwrap_or(""), facts.name, facts.euid);
    let add = format!(
        "add a line `{owner}:100000:65536` (a range no other user has) to /etc/subuid and \
         to /etc/subgid (usermod --add-subuids 100000-165535 --add-subgids 100000-165535 \
         {owner}), or run jbuild as root"
    );
    if subuids.is_empty() || subgids.is_empty() {
        let file = if subuids.is_empty() {
            "/etc/subuid"
        } else {
            "/etc/subgid"
        };
        return Mode::Unprivileged(format!(
            "{who} has no subordinate ids in {file}, so build steps cannot run: {add}"
        ));
    }
    if !facts.newuidmap || !facts.newgidmap {
        return Mode::Unprivileged(format!(
            "{who} has subordinate ids, but newuidmap and newgidmap are not installed \
             (Debian and Ubuntu: apt-get install uidmap; Fedora: shadow-utils), so build \
             steps cannot run"
        ));
    }
    Mode::Rootless(Mapping {
        uid: facts.euid,
        gid: facts.egid,
        subuids,
        subgids,
    })
}

/// How this process runs, read from the system.
pub fn mode() -> Mode {
    let euid = nix::unistd::geteuid().as_raw();
    // Every command asks at start: root and the namespace's child are
    // answered without a user lookup, file reads or a PATH search.
    if std::env::var_os(IN_NAMESPACE).is_some() {
        return Mode::InNamespace;
    }
    if euid == 0 {
        return Mode::Root;
    }
    let egid = nix::unistd::getegid().as_raw();
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(euid))
        .ok()
        .flatten()
        .map(|u| u.name);
    // System files, read bounded (a real one is a few lines).
    let read = |p: &str| {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(p)
            .and_then(|f| f.take(4 << 20).read_to_string(&mut text))
            .ok()
            .map(|_| text)
    };
    let (subuid, subgid) = (read("/etc/subuid"), read("/etc/subgid"));
    decide(&Facts {
        euid,
        egid,
        name: name.as_deref(),
        subuid: subuid.as_deref(),
        subgid: subgid.as_deref(),
        newuidmap: helper("newuidmap").is_some(),
        newgidmap: helper("newgidmap").is_some(),
        in_namespace: false,
    })
}

/// The helper `name` on `PATH`, else in `/usr/bin` or `/usr/sbin`.
fn helper(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin".into(), "/usr/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Why jbuild could not enter its user namespace.
#[derive(Debug, thiserror::Error)]
pub enum RootlessError {
    #[error("cannot make a user namespace for a rootless build")]
    Namespace(#[source] std::io::Error),
    #[error(
        "{helper} refused to map the subordinate ids ({detail}): check the user's lines in \
         /etc/subuid and /etc/subgid (subuid(5)), or run jbuild as root"
    )]
    Helper {
        helper: &'static str,
        detail: String,
    },
}

impl crate::blame::Blame for RootlessError {
    /// The machine's configuration is the user's to fix.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// Runs this jbuild again, with the same arguments, as root of a new
/// user and mount namespace mapping `mapping`, and returns its exit code.
/// `state` is the state directory the user's jbuild would use.
#[cfg(target_os = "linux")]
pub fn enter(mapping: &Mapping, state: &Path) -> Result<i32, RootlessError> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let cstr = |b: &[u8]| CString::new(b).map_err(|_| ns_err(libc::EINVAL));
    let exe = cstr(b"/proc/self/exe")?;
    let argv: Vec<CString> = std::env::args_os()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let mut envp: Vec<CString> = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k == "JBUILD_ROOT" || k == IN_NAMESPACE {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        envp.push(cstr(&kv)?);
    }
    let mut root = b"JBUILD_ROOT=".to_vec();
    root.extend_from_slice(state.as_os_str().as_bytes());
    envp.push(cstr(&root)?);
    envp.push(cstr(format!("{IN_NAMESPACE}=1").as_bytes())?);
    let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
        v.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv_p, envp_p) = (ptrs(&argv), ptrs(&envp));

    // Two pipes: `go` (parent → child: the ids are mapped, exec) and
    // `ready` (child → parent: the child is in its new namespaces). The
    // parent maps only once the child has unshared: newuidmap writes the
    // child's uid_map, which the kernel refuses (EPERM) while the child is
    // still in the parent's user namespace.
    let pipe = || -> Result<(libc::c_int, libc::c_int), RootlessError> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(RootlessError::Namespace(std::io::Error::last_os_error()));
        }
        Ok((fds[0], fds[1]))
    };
    let (read_end, write_end) = pipe()?;
    let (ready_read, ready_write) = match pipe() {
        Ok(p) => p,
        Err(e) => {
            // SAFETY: our descriptors, not used again.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            return Err(e);
        }
    };
    // SAFETY: the child makes only async-signal-safe calls (prctl,
    // unshare, close, read, write, execve, _exit) on memory prepared above.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(RootlessError::Namespace(std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: as above; the child never returns from this block.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            libc::close(write_end);
            libc::close(ready_read);
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                libc::_exit(125);
            }
            libc::write(ready_write, [1u8].as_ptr().cast(), 1);
            libc::close(ready_write);
            let mut go = [0u8; 1];
            if libc::read(read_end, go.as_mut_ptr().cast(), 1) != 1 {
                libc::_exit(125);
            }
            libc::execve(exe.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr());
            libc::_exit(127);
        }
    }
    // SAFETY: the parent's copies of the child's ends are not used.
    unsafe {
        libc::close(read_end);
        libc::close(ready_write);
    }
    // Wait for the child to be in its namespaces (a byte), or gone (end of
    // file: unshare failed, and its exit status says so below).
    let mut byte = [0u8; 1];
    let unshared = loop {
        // SAFETY: one byte into a local buffer from our pipe.
        let n = unsafe { libc::read(ready_read, byte.as_mut_ptr().cast(), 1) };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break n == 1;
        }
    };
    // SAFETY: our descriptor, not used again.
    unsafe { libc::close(ready_read) };
    let mapped = if unshared {
        map_ids(pid, mapping)
    } else {
        Err(RootlessError::Namespace(std::io::Error::other(
            "the kernel refused a new user namespace (is \
             user.max_user_namespaces 0, or unprivileged user namespaces restricted?)",
        )))
    };
    if let Err(e) = mapped {
        // Closing the write end unwritten makes the child's read fail.
        // SAFETY: our descriptor; the child is ours to reap.
        unsafe {
            libc::close(write_end);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(e);
    }
    // SAFETY: one byte from a local buffer into our pipe.
    unsafe {
        libc::write(write_end, [1u8].as_ptr().cast(), 1);
        libc::close(write_end);
    }
    let mut status = 0;
    loop {
        // SAFETY: reaping our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(RootlessError::Namespace(e));
        }
    }
    Ok(if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            125 => {
                return Err(RootlessError::Namespace(std::io::Error::other(
                    "the kernel refused a new user namespace (is \
                     user.max_user_namespaces 0, or unprivileged user namespaces restricted?)",
                )))
            }
            code => code,
        }
    } else {
        128 + libc::WTERMSIG(status)
    })
}

#[cfg(target_os = "linux")]
fn ns_err(errno: i32) -> RootlessError {
    RootlessError::Namespace(std::io::Error::from_raw_os_error(errno))
}

#[cfg(target_os = "linux")]
fn map_ids(pid: libc::pid_t, mapping: &Mapping) -> Result<(), RootlessError> {
    for (helper_name, uid) in [("newuidmap", true), ("newgidmap", false)] {
        let program = helper(helper_name).unwrap_or_else(|| helper_name.into());
        let out = std::process::Command::new(&program)
            .arg(pid.to_string())
            .args(mapping.helper_args(uid))
            .output()
            .map_err(|e| RootlessError::Helper {
                helper: helper_name,
                detail: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(RootlessError::Helper {
                helper: helper_name,
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(subuid: &'a str, subgid: &'a str) -> Facts<'a> {
        Facts {
            euid: 1000,
            egid: 1000,
            name: Some("ann"),
            subuid: Some(subuid),
            subgid: Some(subgid),
            newuidmap: true,
            newgidmap: true,
            in_namespace: false,
        }
    }

    #[test]
    fn subuid_lines_match_by_name_or_id_as_subuid_5_says() {
        let text = "# comment\n\nbob:100000:65536\nann:165536:65536\n1000:300000:10\n\
                    ann:bad:1\nann:1:0\nann:1:2:3\n";
        assert_eq!(
            ranges(text, Some("ann"), 1000),
            [
                Range {
                    start: 165536,
                    count: 65536
                },
                Range {
                    start: 300000,
                    count: 10
                }
            ]
        );
        assert!(ranges(text, Some("eve"), 1001).is_empty());
    }

    #[test]
    fn the_user_is_root_inside_and_the_ranges_follow() {
        let Mode::Rootless(m) = decide(&facts("ann:100000:65536\n", "ann:200000:1000\n")) else {
            panic!()
        };
        assert_eq!(
            m.helper_args(true),
            ["0", "1000", "1", "1", "100000", "65536"]
        );
        assert_eq!(
            m.helper_args(false),
            ["0", "1000", "1", "1", "200000", "1000"]
        );
        assert_eq!(m.ids(), 65537);
    }

    #[test]
    fn without_ranges_or_helpers_it_says_what_to_configure() {
        let Mode::Unprivileged(why) = decide(&facts("", "ann:1:2\n")) else {
            panic!()
        };
        assert!(
            why.contains("/etc/subuid") && why.contains("ann:100000:65536"),
            "{why}"
        );
        let mut f = facts("ann:1:2\n", "ann:1:2\n");
        f.newgidmap = false;
        let Mode::Unprivileged(why) = decide(&f) else {
            panic!()
        };
        assert!(why.contains("uidmap"), "{why}");
        f.euid = 0;
        assert_eq!(decide(&f), Mode::Root);
        f.in_namespace = true;
        assert_eq!(decide(&f), Mode::InNamespace);
    }
}
