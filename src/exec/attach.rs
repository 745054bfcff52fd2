//! What the FreeBSD executor's child does between fork and exec, as data:
//! [`plan`] decides every call, with its arguments and in its order, and
//! the FreeBSD executor (`exec::freebsd`, built on FreeBSD only) only performs them, one real
//! system call per [`ChildCall`]. Keeping the decisions here, compiled on
//! every Unix, lets the tests check them on Linux against the rules of
//! the FreeBSD manual pages ([`rule_breaks`]), where the jail itself
//! cannot run.
//!
//! The order, and why:
//!
//! 1. **Default signal actions** for the signals jbuild forwards
//!    ([`super::signals::forwarded`]): execve(2) keeps ignored signals
//!    ignored, and the step must stop on Ctrl-C.
//! 2. **`procctl(PROC_PDEATHSIG_CTL, SIGKILL)`**: if jbuild is killed
//!    outright, the step dies with it. Then **exit if already orphaned**:
//!    jbuild may have died between fork and the procctl, which then never
//!    fires (the parent pid is no longer jbuild's).
//! 3. **`jail_attach(jid)`**: needs the super-user (jail(2): EPERM for
//!    anyone else), so it comes before the credentials are dropped; it
//!    changes the root and the working directory to the jail's path.
//! 4. **`chdir(cwd)`**: the working directory as the jail names it, so
//!    after the attach.
//! 5. **`setgroups`, `setgid`, `setuid`**, in that order: once the user
//!    id is not 0, changing groups is refused (setuid(2), setgroups(2)).
//!    The primary gid is the first of the groups: before FreeBSD 14.3,
//!    setgroups(2) also sets the effective gid from the first entry.
//! 6. **`umask(022)`**, then **exec** (done by `std::process::Command`
//!    after these calls: the program's path as the jail sees it, the
//!    spec's argv, exactly the step's environment).
//!
//! The user's ids come from [`super::user::resolve_user`] unchanged: a
//! numeric uid without a passwd entry runs with gid 0 and groups `[0]`;
//! `uid:gid` runs with exactly that one group.

use std::ffi::CString;
use std::io;

use super::signals;
use super::user::Identity;
use super::{ExecError, Outcome};

/// The step's umask, as a login shell's default.
pub const UMASK: u32 = 0o022;

/// One call the step's process makes before it runs the step's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildCall {
    /// `signal(sig, SIG_DFL)` for each.
    DefaultSignals(Vec<i32>),
    /// `procctl(P_PID, getpid(), PROC_PDEATHSIG_CTL, &sig)`.
    PdeathSig(i32),
    /// `_exit(1)` unless `getppid() == parent`.
    ExitIfOrphaned { parent: i32 },
    /// `jail_attach(jid)`.
    JailAttach { jid: i32 },
    /// `chdir(path)`, the path as the jail names it.
    Chdir(CString),
    /// `setgroups(len, groups)`.
    SetGroups(Vec<u32>),
    /// `setgid(gid)`.
    SetGid(u32),
    /// `setuid(uid)`.
    SetUid(u32),
    /// `umask(mode)`.
    Umask(u32),
    /// `execve`: always the last call, made by `std::process::Command`.
    Exec(Exec),
}

/// The program a step runs, as the jail sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// Its path inside the jail.
    pub program: String,
    /// The spec's argv, `argv[0]` as written.
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
}

/// Which part of the setup a failed call is reported as (packed into the
/// child's error with `super::prepare::setup_error`).
pub const PDEATHSIG: u8 = 1;
pub const ATTACH: u8 = 2;
pub const CHDIR: u8 = 3;
pub const CREDENTIALS: u8 = 4;

impl ChildCall {
    /// The stage a failure of this call is reported as; 0 for calls that
    /// cannot fail (or, for exec, fail in their own way).
    pub fn stage(&self) -> u8 {
        match self {
            ChildCall::PdeathSig(_) => PDEATHSIG,
            ChildCall::JailAttach { .. } => ATTACH,
            ChildCall::Chdir(_) => CHDIR,
            ChildCall::SetGroups(_) | ChildCall::SetGid(_) | ChildCall::SetUid(_) => CREDENTIALS,
            _ => 0,
        }
    }
}

/// The step's process, decided: see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachPlan {
    /// Every call, in order, the last one [`ChildCall::Exec`].
    pub calls: Vec<ChildCall>,
}

impl AttachPlan {
    /// The calls made between fork and exec (all but the exec).
    pub fn before_exec(&self) -> &[ChildCall] {
        match self.calls.split_last() {
            Some((ChildCall::Exec(_), rest)) => rest,
            _ => &self.calls,
        }
    }

    /// The process to spawn: the program, argv and environment of the
    /// final exec, with no stdin and its output in pipes.
    pub fn command(&self) -> std::process::Command {
        match self.calls.last() {
            Some(ChildCall::Exec(e)) => super::prepare::command_for(&e.program, &e.argv, &e.env),
            _ => unreachable!("a plan always ends with its exec"),
        }
    }
}

/// The calls that run `exec` as `ident` in the directory `cwd` (named
/// inside the jail) of jail `jid`, in a process started by `parent`
/// (jbuild's pid).
pub fn plan(
    ident: &Identity,
    cwd: &str,
    jid: i32,
    parent: i32,
    exec: Exec,
) -> Result<AttachPlan, ExecError> {
    let cwd = CString::new(cwd.as_bytes())
        .map_err(|_| ExecError::Invalid("cwd has a NUL byte".into()))?;
    Ok(AttachPlan {
        calls: vec![
            ChildCall::DefaultSignals(signals::forwarded()),
            ChildCall::PdeathSig(libc::SIGKILL),
            ChildCall::ExitIfOrphaned { parent },
            ChildCall::JailAttach { jid },
            ChildCall::Chdir(cwd),
            ChildCall::SetGroups(ident.groups.clone()),
            ChildCall::SetGid(ident.gid),
            ChildCall::SetUid(ident.uid),
            ChildCall::Umask(UMASK),
            ChildCall::Exec(exec),
        ],
    })
}

/// What a failed setup stage means, for the step's error.
pub fn describe_stage(stage: u8, errno: i32, jail: &str) -> String {
    let err = io::Error::from_raw_os_error(errno);
    match stage {
        PDEATHSIG => format!("cannot tie the step's life to jbuild's: {err}"),
        ATTACH => format!("cannot enter jail {jail}: {err}"),
        CHDIR => format!("cannot enter the working directory: {err}"),
        CREDENTIALS => format!("cannot switch to the step's user: {err}"),
        _ => format!("setup failed: {err}"),
    }
}

/// The step's result once its jail is gone: a signal jbuild received
/// (and forwarded) stops the build even if the step carried on and
/// succeeded; otherwise the step's own result stands.
pub fn verdict(
    received: Option<i32>,
    result: Result<Outcome, ExecError>,
) -> Result<Outcome, ExecError> {
    match (received, result) {
        (Some(sig), Ok(outcome)) if outcome.success() => Err(ExecError::Io {
            context: format!("the build was interrupted (signal {sig})"),
            source: io::Error::from(io::ErrorKind::Interrupted),
        }),
        (_, result) => result,
    }
}

/// The rules of jail(2), setuid(2), setgroups(2), procctl(2) and
/// execve(2) that a plan must keep, each broken one described; empty
/// when the plan is sound. `forwarded` are the signals jbuild passes on
/// to the step.
pub fn rule_breaks(plan: &AttachPlan, forwarded: &[i32]) -> Vec<String> {
    let calls = &plan.calls;
    let at = |want: fn(&ChildCall) -> bool| calls.iter().position(want);
    let mut breaks = Vec::new();
    let mut before = |a: Option<usize>, b: Option<usize>, rule: &str| match (a, b) {
        (Some(a), Some(b)) if a < b => {}
        _ => breaks.push(rule.to_string()),
    };
    let signals = at(|c| matches!(c, ChildCall::DefaultSignals(_)));
    let pdeath = at(|c| *c == ChildCall::PdeathSig(libc::SIGKILL));
    let orphan = at(|c| matches!(c, ChildCall::ExitIfOrphaned { .. }));
    let attach = at(|c| matches!(c, ChildCall::JailAttach { .. }));
    let chdir = at(|c| matches!(c, ChildCall::Chdir(_)));
    let groups = at(|c| matches!(c, ChildCall::SetGroups(_)));
    let gid = at(|c| matches!(c, ChildCall::SetGid(_)));
    let uid = at(|c| matches!(c, ChildCall::SetUid(_)));
    let umask = at(|c| matches!(c, ChildCall::Umask(_)));
    let exec = at(|c| matches!(c, ChildCall::Exec(_)));
    before(
        pdeath,
        orphan,
        "the orphan check follows PROC_PDEATHSIG_CTL (SIGKILL)",
    );
    before(
        attach,
        chdir,
        "jail_attach comes before the chdir inside the jail",
    );
    before(
        attach,
        groups,
        "jail_attach (root only) comes before setgroups",
    );
    before(attach, uid, "jail_attach (root only) comes before setuid");
    before(groups, gid, "setgroups comes before setgid");
    before(gid, uid, "setgid comes before setuid");
    for (call, what) in [
        (signals, "default signal actions"),
        (pdeath, "PROC_PDEATHSIG_CTL"),
        (chdir, "chdir"),
        (umask, "umask"),
    ] {
        before(call, exec, &format!("{what} comes before exec"));
    }
    if exec != Some(calls.len().saturating_sub(1)) {
        breaks.push("exec is the last call".into());
    }
    let count = |want: fn(&ChildCall) -> bool| calls.iter().filter(|c| want(c)).count();
    let credentials = count(|c| {
        matches!(
            c,
            ChildCall::SetGroups(_) | ChildCall::SetGid(_) | ChildCall::SetUid(_)
        )
    });
    if credentials != 3 {
        breaks.push("setgroups, setgid and setuid are made once each".into());
    }
    if let (Some(ChildCall::SetGroups(g)), Some(ChildCall::SetGid(gid))) =
        (groups.map(|i| &calls[i]), gid.map(|i| &calls[i]))
    {
        if g.first() != Some(gid) {
            breaks.push("the primary gid is the first of the groups".into());
        }
    }
    if let Some(ChildCall::DefaultSignals(reset)) = signals.map(|i| &calls[i]) {
        if forwarded.iter().any(|s| !reset.contains(s)) {
            breaks.push("every forwarded signal is at its default action".into());
        }
    }
    breaks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::user::resolve_user;

    const PASSWD: &str = "root:*:0:0::/root:/bin/sh\nbuilder:*:1001:1001::/home/builder:/bin/sh\n";
    const GROUP: &str = "wheel:*:0:root\nbuilder:*:1001:\nstaff:*:20:builder\nvideo:*:44:builder\n";

    /// The identity `user` gets in a root with [`PASSWD`] and [`GROUP`],
    /// as the executor resolves it.
    fn ident(user: Option<&str>) -> Identity {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/passwd"), PASSWD).unwrap();
        std::fs::write(root.path().join("etc/group"), GROUP).unwrap();
        resolve_user(root.path(), user).unwrap()
    }

    fn exec() -> Exec {
        Exec {
            program: "/bin/sh".into(),
            argv: vec!["sh".into(), "-c".into(), "make install".into()],
            env: vec![("PATH".into(), "/bin:/usr/bin".into())],
        }
    }

    fn plan_for(user: Option<&str>) -> AttachPlan {
        plan(&ident(user), "/usr/src", 42, 4000, exec()).unwrap()
    }

    #[test]
    fn every_call_in_order_with_its_arguments() {
        let p = plan_for(Some("builder"));
        assert_eq!(
            p.calls,
            [
                ChildCall::DefaultSignals(vec![
                    libc::SIGINT,
                    libc::SIGQUIT,
                    libc::SIGTERM,
                    libc::SIGHUP
                ]),
                ChildCall::PdeathSig(libc::SIGKILL),
                ChildCall::ExitIfOrphaned { parent: 4000 },
                ChildCall::JailAttach { jid: 42 },
                ChildCall::Chdir(CString::new("/usr/src").unwrap()),
                ChildCall::SetGroups(vec![1001, 20, 44]),
                ChildCall::SetGid(1001),
                ChildCall::SetUid(1001),
                ChildCall::Umask(0o022),
                ChildCall::Exec(exec()),
            ]
        );
        assert_eq!(p.before_exec(), &p.calls[..p.calls.len() - 1]);
        assert_eq!(rule_breaks(&p, &signals::forwarded()), Vec::<String>::new());
    }

    /// The ids each kind of `USER` ends up with, through the same resolver
    /// as the executor: root by default, a numeric uid without a passwd
    /// entry keeps gid 0 and only it, `uid:gid` has only that group.
    #[test]
    fn credentials_for_each_kind_of_user() {
        let creds = |user| {
            let p = plan_for(user);
            assert_eq!(
                rule_breaks(&p, &signals::forwarded()),
                Vec::<String>::new(),
                "{user:?}"
            );
            p.calls[5..8].to_vec()
        };
        use ChildCall::{SetGid, SetGroups, SetUid};
        assert_eq!(creds(None), [SetGroups(vec![0]), SetGid(0), SetUid(0)]);
        assert_eq!(
            creds(Some("4242")),
            [SetGroups(vec![0]), SetGid(0), SetUid(4242)]
        );
        assert_eq!(
            creds(Some("4242:4343")),
            [SetGroups(vec![4343]), SetGid(4343), SetUid(4242)]
        );
        assert_eq!(
            creds(Some("builder:staff")),
            [SetGroups(vec![20]), SetGid(20), SetUid(1001)]
        );
    }

    /// The checker itself: each rule, broken on purpose, is reported.
    #[test]
    fn each_broken_rule_is_reported() {
        let good = plan_for(Some("builder"));
        let forwarded = signals::forwarded();
        type Edit<'a> = &'a dyn Fn(&mut Vec<ChildCall>);
        let broken = |edit: Edit<'_>| {
            let mut p = good.clone();
            edit(&mut p.calls);
            rule_breaks(&p, &forwarded)
        };
        let cases: [(&str, Edit<'_>); 9] = [
            ("setgid comes before setuid", &|c| c.swap(6, 7)),
            ("setgroups comes before setgid", &|c| c.swap(5, 6)),
            ("jail_attach (root only) comes before setuid", &|c| {
                let attach = c.remove(3);
                c.insert(7, attach);
            }),
            ("jail_attach comes before the chdir", &|c| c.swap(3, 4)),
            ("the orphan check follows", &|c| c.swap(1, 2)),
            ("umask comes before exec", &|c| c.swap(8, 9)),
            ("exec is the last call", &|c| c.push(ChildCall::Umask(0))),
            ("the primary gid is the first", &|c| {
                c[5] = ChildCall::SetGroups(vec![20, 1001]);
            }),
            ("every forwarded signal", &|c| {
                c[0] = ChildCall::DefaultSignals(vec![libc::SIGINT]);
            }),
        ];
        for (rule, edit) in cases {
            let breaks = broken(edit);
            assert!(
                breaks.iter().any(|b| b.contains(rule)),
                "`{rule}` not reported: {breaks:?}"
            );
        }
        let without_setuid = broken(&|c| c.retain(|c| !matches!(c, ChildCall::SetUid(_))));
        assert!(without_setuid.iter().any(|b| b.contains("once each")));
    }

    #[test]
    fn the_command_is_the_plans_exec() {
        let cmd = plan_for(None).command();
        assert_eq!(cmd.get_program(), "/bin/sh");
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(args, ["-c", "make install"]);
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            env,
            [(
                std::ffi::OsStr::new("PATH"),
                Some(std::ffi::OsStr::new("/bin:/usr/bin"))
            )]
        );
    }

    #[test]
    fn stages_and_their_messages() {
        let p = plan_for(None);
        let stages: Vec<u8> = p.calls.iter().map(ChildCall::stage).collect();
        assert_eq!(
            stages,
            [
                0,
                PDEATHSIG,
                0,
                ATTACH,
                CHDIR,
                CREDENTIALS,
                CREDENTIALS,
                CREDENTIALS,
                0,
                0
            ]
        );
        assert_eq!(
            describe_stage(ATTACH, libc::EPERM, "jbuild-1-0"),
            format!(
                "cannot enter jail jbuild-1-0: {}",
                io::Error::from_raw_os_error(libc::EPERM)
            )
        );
        assert!(describe_stage(CREDENTIALS, libc::EPERM, "j").starts_with("cannot switch"));
        assert!(matches!(
            plan(&ident(None), "/a\0b", 1, 1, exec()),
            Err(ExecError::Invalid(_))
        ));
    }

    /// A signal jbuild got stops the build even when the step succeeded;
    /// a step that failed or could not run keeps its own result.
    #[test]
    fn a_received_signal_turns_success_into_interruption() {
        let e = verdict(Some(libc::SIGINT), Ok(Outcome::Exited(0))).unwrap_err();
        assert!(e.to_string().contains("interrupted (signal 2)"), "{e}");
        assert_eq!(
            verdict(Some(libc::SIGINT), Ok(Outcome::Signaled(2))).unwrap(),
            Outcome::Signaled(2)
        );
        assert_eq!(
            verdict(None, Ok(Outcome::Exited(0))).unwrap(),
            Outcome::Exited(0)
        );
        assert!(matches!(
            verdict(Some(libc::SIGTERM), Err(ExecError::Invalid("x".into()))),
            Err(ExecError::Invalid(_))
        ));
    }
}
