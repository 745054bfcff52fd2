//! What a jail made from an image does when it starts: the image's
//! Entrypoint, Cmd, Env, WorkingDir and User as jail.conf(5) says them.
//!
//! jail(8) runs `exec.start` inside the new jail and waits for it to end
//! before `jail -c` returns, so a command that stays in the foreground (a
//! server, an init) would hold `service jail start` forever. ocijail and
//! runj avoid that by making a `persist` jail and running the process in it
//! themselves, the container living as long as the process. jail.conf has
//! no such runner, so the rules are:
//!
//! | the image runs | the entry |
//! |---|---|
//! | nothing, or only a shell (`CMD /bin/sh`, as FreeBSD's own images) | the jail boots: `exec.start = '/bin/sh /etc/rc'`, `exec.stop = '/bin/sh /etc/rc.shutdown'` when the root has `/etc/rc`; else `persist` and no process (`jexec NAME /bin/sh` gives the shell) |
//! | a command, the root has `/bin/sh` | `exec.start = '[cd DIR && ][K=V ...] ARGV &'`: started in the background, the jail ends with it, as a container does; its output in `exec.consolelog` |
//! | a command, no `/bin/sh` (a static image) | `persist`, and the host starts it after the jail is made: `exec.poststart = 'env K=V daemon -f -o LOG jexec [-d DIR] NAME ARGV'` |
//!
//! A shell given to a supervisor (`ENTRYPOINT ["/init"] CMD ["/bin/sh"]`,
//! as s6-overlay images are) is dropped: the supervisor is the jail's life.
//! A shell behind a wrapper (`tini`, `dumb-init`) is still only a shell.
//! `USER` becomes `exec.jail_user` (a passwd name: jail(8) takes no uid);
//! a group in it cannot be said and is noted in a comment. The user's view
//! of these rules is docs/create.md.

use std::path::Path;

use super::{flag, param, CreateError};
use crate::exec::user::user_name;
use crate::fsutil::resolve_in_root;
use crate::image::ImageState;
use crate::jailconf::Param;

/// Programs that run services from a directory until stopped.
const SUPERVISORS: &[&str] = &["init", "s6-svscan", "runsvdir", "runit"];
/// Programs that only pass signals on to the command they are given.
const WRAPPERS: &[&str] = &["tini", "dumb-init", "catatonit"];
/// Shells, which without a terminal read nothing and exit at once.
const SHELLS: &[&str] = &[
    "sh", "csh", "tcsh", "bash", "zsh", "ksh", "mksh", "ash", "dash",
];

/// What starts with the jail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// FreeBSD's boot: /etc/rc.
    Boot,
    /// No process: the jail persists for `jexec`.
    Stay,
    /// The image's program.
    Run(Vec<String>),
}

fn base(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn is_shell(argv: &[String]) -> bool {
    matches!(argv, [sh, flags @ ..] if SHELLS.contains(&base(sh))
        && flags.iter().all(|f| ["-l", "-i", "--login"].contains(&f.as_str())))
}

/// The plan for an image's Entrypoint and Cmd, and a note on why.
pub fn decide(
    entrypoint: &[String],
    cmd: &[String],
    has_rc: bool,
    bastille: bool,
) -> (Plan, Option<String>) {
    let boot = |why: String| {
        if has_rc || bastille {
            (Plan::Boot, Some(why))
        } else {
            (
                Plan::Stay,
                Some(format!(
                    "{why}; the root has no /etc/rc, so the jail persists with no process"
                )),
            )
        }
    };
    let shell_note = |argv: &[String]| {
        format!(
            "the image's command `{}` is a shell for a terminal: use it with `jexec NAME {}`",
            argv.join(" "),
            argv.join(" ")
        )
    };
    match (entrypoint, cmd) {
        ([], []) => boot("the image has no command".into()),
        ([], c) if is_shell(c) => boot(shell_note(c)),
        ([sup], c) if SUPERVISORS.contains(&base(sup)) && is_shell(c) => (
            Plan::Run(vec![sup.clone()]),
            Some(format!(
                "{sup} supervises the jail; the shell `{}` given to it is left out",
                c.join(" ")
            )),
        ),
        ([w, rest @ ..], c) if WRAPPERS.contains(&base(w)) => {
            let inner: Vec<String> = rest
                .iter()
                .chain(c)
                .skip_while(|a| a.starts_with('-'))
                .cloned()
                .collect();
            if inner.is_empty() || is_shell(&inner) {
                boot(shell_note(&inner))
            } else {
                let all: Vec<String> = entrypoint.iter().chain(cmd).cloned().collect();
                (Plan::Run(all), None)
            }
        }
        (e, c) => (Plan::Run(e.iter().chain(c).cloned().collect()), None),
    }
}

/// The parameters and comments that start the jail `name` made from
/// `state`, whose root can be read at `root` (`None`: an image without
/// layers).
pub(super) fn start(
    state: &ImageState,
    root: Option<&Path>,
    name: &str,
    bastille: bool,
) -> Result<(Vec<Param>, Vec<String>), CreateError> {
    let has = |p: &str| {
        root.and_then(|r| resolve_in_root(r, Path::new(p), true).ok())
            .is_some_and(|h| h.is_file())
    };
    let empty = Vec::new();
    let (plan, note) = decide(
        state.entrypoint.as_ref().unwrap_or(&empty),
        state.cmd.as_ref().unwrap_or(&empty),
        has("/etc/rc"),
        bastille,
    );
    let mut comments: Vec<String> = note.into_iter().collect();
    let mut params = Vec::new();
    let argv = match plan {
        Plan::Boot => {
            params.push(param("exec.start", "/bin/sh /etc/rc"));
            params.push(param("exec.stop", "/bin/sh /etc/rc.shutdown"));
            return Ok((params, comments));
        }
        Plan::Stay => {
            params.push(flag("persist"));
            return Ok((params, comments));
        }
        Plan::Run(argv) => argv,
    };
    let sh = |args: &[String]| {
        shlex::try_join(args.iter().map(String::as_str)).map_err(|e| {
            CreateError::User(format!("the image's command cannot be written for sh: {e}"))
        })
    };
    // Only names sh can assign: any other would change the command line
    // (and neither sh nor env(1) would take it).
    let shell_name = |k: &str| {
        k.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut env = Vec::new();
    for (k, v) in &state.env {
        if shell_name(k) {
            env.push(format!("{k}={v}"));
        } else {
            comments.push(format!("ENV {k:?} is not a shell variable name: left out"));
        }
    }
    let workdir = state.workdir.as_deref().filter(|w| *w != "/");
    let user = match (&state.user, root) {
        (Some(spec), Some(r)) if !["root", "0", "0:0", "root:wheel"].contains(&spec.as_str()) => {
            let found = user_name(r, spec)
                .map_err(|e| CreateError::User(format!("the image's USER `{spec}`: {e}")))?;
            let Some(user) = found else {
                return Err(CreateError::User(format!(
                    "the image's USER `{spec}` is not in its /etc/passwd; jail(8) runs \
                     exec.start as a named user (exec.jail_user), so no jail was written"
                )));
            };
            if spec.contains(':') {
                comments.push(format!(
                    "USER {spec}: jail(8) runs {user} with the groups of its passwd entry"
                ));
            }
            Some(user)
        }
        _ => None,
    };
    let log = format!("/var/log/jail_{name}_console.log");
    if has("/bin/sh") {
        let mut script = String::new();
        if let Some(w) = workdir {
            script.push_str(&format!("cd {} && ", sh(&[w.to_string()])?));
        }
        for kv in &env {
            // `K=V` quoted as one word keeps the `=` an assignment only when
            // the name is left bare.
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            script.push_str(&format!("{k}={} ", sh(&[v.to_string()])?));
        }
        script.push_str(&sh(&argv)?);
        script.push_str(" &");
        params.push(param("exec.start", &script));
        if let Some(u) = user {
            params.push(param("exec.jail_user", &u));
        }
        if !bastille {
            params.push(param("exec.consolelog", &log));
        }
    } else {
        let mut host = Vec::new();
        if !env.is_empty() {
            host.push("/usr/bin/env".to_string());
            host.extend(env);
        }
        host.extend(["/usr/sbin/daemon", "-f", "-o", &log, "/usr/sbin/jexec"].map(String::from));
        if let Some(u) = user {
            host.extend(["-U".to_string(), u]);
        }
        if let Some(w) = workdir {
            host.extend(["-d".to_string(), w.to_string()]);
        }
        host.push(name.to_string());
        host.extend(argv);
        params.push(flag("persist"));
        params.push(param("exec.poststart", &sh(&host)?));
        comments.push(
            "the root has no /bin/sh: the host starts the image's command with daemon(8) and jexec(8)"
                .into(),
        );
    }
    Ok((params, comments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shells_boot_supervisors_run_and_wrappers_look_through() {
        let cases: &[(&[&str], &[&str], bool, Plan)] = &[
            (&[], &[], true, Plan::Boot),
            (&[], &[], false, Plan::Stay),
            (&[], &["/bin/sh"], true, Plan::Boot),
            (&[], &["/bin/csh", "-l"], false, Plan::Stay),
            (&["/init"], &["/bin/sh"], true, Plan::Run(v(&["/init"]))),
            (&["/init"], &[], true, Plan::Run(v(&["/init"]))),
            (
                &["s6-svscan"],
                &["/etc/s6"],
                true,
                Plan::Run(v(&["s6-svscan", "/etc/s6"])),
            ),
            (&["tini", "--"], &["/bin/sh"], true, Plan::Boot),
            (
                &["tini", "--"],
                &["nginx"],
                true,
                Plan::Run(v(&["tini", "--", "nginx"])),
            ),
            (
                &[],
                &["/bin/sh", "-c", "x"],
                true,
                Plan::Run(v(&["/bin/sh", "-c", "x"])),
            ),
        ];
        for (e, c, rc, want) in cases {
            assert_eq!(&decide(&v(e), &v(c), *rc, false).0, want, "{e:?} {c:?}");
        }
        // Bastille's layout always boots as Bastille writes it.
        assert_eq!(decide(&[], &[], false, true).0, Plan::Boot);
    }
}
