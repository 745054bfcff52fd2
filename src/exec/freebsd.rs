//! The FreeBSD executor: each step runs in a jail of its own, made with
//! jail(8) for the step and removed after it (see [`super::jail_params`]
//! for the parameters, [`super::jail_session`] for the sequence).
//!
//! The step's process is started by jbuild itself and enters the jail with
//! `jail_attach(2)` between fork and exec, rather than through jexec(8):
//! jexec cannot take a numeric uid without a passwd entry, applies the
//! login class's environment and PATH with `-U` (`setusercontext`), and
//! only recent releases have `-d` for the working directory. Attaching
//! ourselves gives exactly the step's environment, user, groups,
//! directory and umask, with nothing needed inside the root.
//!
//! What the child does between fork and exec is decided in
//! [`super::attach`] (and tested there on any Unix); this file performs
//! it with the real system calls.
//!
//! Decisions:
//!
//! - **Ctrl-C.** The step stays in jbuild's process group, so the
//!   terminal's SIGINT reaches it as it reaches jbuild. When its process
//!   ends, the jail is removed at once (`jail -R` kills anything it left
//!   running), then unmounted and cleaned. While the step runs, jbuild
//!   passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to it rather than dying
//!   ([`super::signals`]), so the teardown always happens. If jbuild is
//!   killed outright (SIGKILL), the step's process gets SIGKILL too
//!   (`PROC_PDEATHSIG_CTL`).
//!   A jail left by a jbuild killed outright is named `jbuild-<pid>-<n>`.
//! - **A missing program** is `Ok(Outcome::Exited(127))` with
//!   `exec: NAME: not found` on stderr, as on Linux.
//! - **securelevel** is not raised; see [`super::jail_params`].

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};

use super::attach::{self, ChildCall, Exec};
use super::jail_session::{run_in_jail, SystemRunner};
use super::prepare::{self, setup_error};
use super::signals::StepSignals;
use super::*;

/// Runs steps in jails. Needs root.
#[derive(Debug, Default)]
pub struct JailExecutor {
    next: AtomicU64,
}

impl JailExecutor {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Executor for JailExecutor {
    fn name(&self) -> &'static str {
        "jail"
    }

    fn run(
        &self,
        root: &Path,
        spec: &RunSpec,
        out: &mut dyn OutputSink,
    ) -> Result<Outcome, ExecError> {
        let Some(ready) = prepare::preflight(root, spec, out, "build steps need root on FreeBSD: jail(8) and jail_attach(2) are privileged (run `jbuild` with sudo or doas)")? else {
            return Ok(Outcome::Exited(127));
        };
        let (root, argv0) = (&ready.root, &spec.argv[0]);
        let (ident, cwd, program) = (&ready.ident, &ready.cwd, &ready.program);
        let spawn_error = |reason: String| ready.spawn_error(spec, reason);

        let name = format!(
            "jbuild-{}-{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        // Installed before the jail exists, so a Ctrl-C at any moment from
        // here on is answered by a teardown rather than by jbuild dying.
        let signals = StepSignals::install().map_err(|e| ExecError::Io {
            context: "cannot take over SIGINT and SIGTERM for the step".into(),
            source: io::Error::from(e),
        })?;
        let mut runner = SystemRunner;
        let result = run_in_jail(&mut runner, root, &name, spec, |session| {
            let exec = Exec {
                program: program.clone(),
                argv: spec.argv.clone(),
                env: ready.env.clone(),
            };
            let parent = std::process::id() as libc::pid_t;
            let plan = attach::plan(ident, cwd, session.jid(), parent, exec)?;
            let mut cmd = plan.command();
            let calls = plan.before_exec().to_vec();
            // SAFETY: `perform` only makes async-signal-safe calls on data
            // computed before the fork.
            unsafe { cmd.pre_exec(move || perform(&calls)) };
            match cmd.spawn() {
                Ok(mut process) => {
                    signals.forward_to(process.id());
                    match (process.stdout.take(), process.stderr.take()) {
                        (Some(stdout), Some(stderr)) => {
                            let mut removed = Ok(());
                            // The jail goes as soon as the step's process ends,
                            // so anything it left running lets go of the pipes.
                            let on_exit =
                                |_: &io::Result<ExitStatus>| removed = session.remove_jail();
                            let waited = output::collect(
                                stdout,
                                stderr,
                                out,
                                move || process.wait(),
                                on_exit,
                            )
                            .and_then(|w| w)
                            .map_err(|source| ExecError::Io {
                                context: format!("running `{argv0}`"),
                                source,
                            });
                            waited.and_then(|status| removed.map(|()| prepare::outcome(status)))
                        }
                        _ => Err(spawn_error("the output pipes were not set up".into())),
                    }
                }
                Err(e) => prepare::spawn_failed(e, program, out, |stage, _, errno| {
                    attach::describe_stage(stage, errno, &name)
                })
                .map_err(spawn_error),
            }
        });
        // The jail is gone by now.
        attach::verdict(signals.received(), result)
    }
}

fn check(ret: libc::c_int, stage: u8) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(setup_error(
            stage,
            0,
            io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    }
}

/// Between fork and exec: each call of the plan ([`super::attach`]) as
/// its one system call, nothing decided here. The exec itself is
/// `std::process::Command`'s, after this returns.
unsafe fn perform(calls: &[ChildCall]) -> io::Result<()> {
    for call in calls {
        let stage = call.stage();
        match call {
            ChildCall::DefaultSignals(signals) => {
                for &sig in signals {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            ChildCall::PdeathSig(sig) => {
                let mut death: libc::c_int = *sig;
                let death_ptr = (&mut death as *mut libc::c_int).cast::<libc::c_void>();
                check(
                    libc::procctl(
                        libc::P_PID,
                        libc::getpid() as libc::id_t,
                        libc::PROC_PDEATHSIG_CTL,
                        death_ptr,
                    ),
                    stage,
                )?;
            }
            ChildCall::ExitIfOrphaned { parent } => {
                if libc::getppid() != *parent {
                    libc::_exit(1);
                }
            }
            ChildCall::JailAttach { jid } => check(libc::jail_attach(*jid), stage)?,
            ChildCall::Chdir(dir) => check(libc::chdir(dir.as_ptr()), stage)?,
            ChildCall::SetGroups(groups) => check(
                libc::setgroups(groups.len() as libc::c_int, groups.as_ptr()),
                stage,
            )?,
            ChildCall::SetGid(gid) => check(libc::setgid(*gid), stage)?,
            ChildCall::SetUid(uid) => check(libc::setuid(*uid), stage)?,
            ChildCall::Umask(mode) => {
                libc::umask(*mode as libc::mode_t);
            }
            ChildCall::Exec(_) => {}
        }
    }
    Ok(())
}
