//! The Linux executor: a step runs as PID 1 of new mount, PID, UTS and IPC
//! namespaces (and a new network namespace unless it asks for the
//! network), chrooted into the root. This is what lets the whole build
//! path run in Linux CI; FreeBSD uses jails.
//!
//! What the step sees: `/proc` of its own PID namespace; a tmpfs `/dev`
//! with `null`, `zero`, `full`, `random`, `urandom`, `tty`, `fd`, the std
//! streams, `pts` and `shm`; the spec's bind mounts (read-only ones are
//! remounted read-only; mounts are not recursive); the host's
//! `/etc/resolv.conf`, read-only, when it has the network and the root
//! has `/etc`; `lo` up in its own network namespace. Its environment is
//! exactly `spec.env` plus `PATH` and `HOME` defaults, stdin is
//! `/dev/null`, umask 022.
//!
//! Mount points missing from the root are created for the run and
//! removed afterwards when empty; the mounts themselves vanish with the
//! mount namespace when the step's processes are gone.
//!
//! Decisions:
//!
//! - **Ctrl-C.** The supervisor process (see the `child` module) stays in jbuild's
//!   process group with default signal handling, so the terminal's
//!   SIGINT kills it as it kills jbuild; the step dies with it
//!   (`PR_SET_PDEATHSIG`), and with the step, as PID 1, every process of
//!   its namespace. The step itself cannot be reached by the SIGINT: PID 1
//!   ignores signals it has no handler for. The same chain runs when
//!   jbuild is killed outright. The run then returns
//!   `Outcome::Signaled(SIGINT)`. Nothing is left running.
//! - **A missing program** is `Ok(Outcome::Exited(127))` with
//!   `exec: NAME: not found (searched PATH=...)` on the step's stderr, as a
//!   shell would do; a program that exists but cannot be executed gives
//!   126. The step failed, not jbuild: the build reports it like any
//!   failing RUN, with the line above it.
//! - **PID 1 is the step** (`echo $$` prints 1, as in BuildKit). So a
//!   step cannot kill itself with `kill -9 $$` (the kernel ignores it);
//!   a signal from outside or the kernel (OOM, segfault) is reported as
//!   `Outcome::Signaled`.

mod child;

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use self::child::{BindPlan, ChildPlan, DevPlan, MountPlan};
use super::prepare::{self, MountPoints, Planned, Staging};
use super::user::Identity;
use super::*;

/// Runs steps in Linux namespaces with `chroot`. Needs root.
#[derive(Debug, Default)]
pub struct LinuxExecutor;

impl LinuxExecutor {
    pub fn new() -> Self {
        LinuxExecutor
    }
}

impl Executor for LinuxExecutor {
    fn name(&self) -> &'static str {
        "linux-namespaces"
    }

    fn run(
        &self,
        root: &Path,
        spec: &RunSpec,
        out: &mut dyn OutputSink,
    ) -> Result<Outcome, ExecError> {
        run(root, spec, out, false)
    }

    /// As [`Executor::run`], the process on jbuild's own standard input,
    /// output and error; while it runs, the signals that would end jbuild
    /// go to it instead ([`super::signals`]), so the caller outlives it
    /// and can clean up.
    fn run_attached(&self, root: &Path, spec: &RunSpec) -> Result<Outcome, ExecError> {
        let mut stderr = |_: Stream, line: &[u8]| {
            use std::io::Write;
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(line);
            let _ = e.write_all(b"\n");
        };
        run(root, spec, &mut stderr, true)
    }
}

/// Both ways of running: output into `out` line by line, or (`attached`)
/// on jbuild's own standard streams, `out` then getting only jbuild's own
/// messages about the process (a program not found).
fn run(
    root: &Path,
    spec: &RunSpec,
    out: &mut dyn OutputSink,
    attached: bool,
) -> Result<Outcome, ExecError> {
    let Some(ready) = prepare::preflight(root, spec, out, &need_root())? else {
        return Ok(Outcome::Exited(127));
    };
    let (root, argv0) = (&ready.root, &spec.argv[0]);
    let (ident, cwd, program) = (&ready.ident, &ready.cwd, &ready.program);
    let spawn_error = |reason: String| ready.spawn_error(spec, reason);

    let mut points = MountPoints::new(root);
    let mut staging = None;
    let result = (|| {
        let (plan, bind_names) = plan(root, spec, ident, cwd, &mut points, &mut staging)?;
        let mut cmd = prepare::command_for(&ready.program, &spec.argv, &ready.env);
        if attached {
            use std::process::Stdio;
            cmd.stdin(Stdio::inherit())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit());
        }
        // Installed before the fork, so a signal at any moment from
        // here on leaves jbuild alive to clean up.
        let signals = if attached {
            Some(
                super::signals::StepSignals::install().map_err(|e| ExecError::Io {
                    context: "cannot install signal handlers".into(),
                    source: io::Error::from(e),
                })?,
            )
        } else {
            None
        };
        // SAFETY: `enter` only makes async-signal-safe calls on data
        // computed before the fork (see the `child` module).
        unsafe { cmd.pre_exec(move || child::enter(&plan)) };
        match cmd.spawn() {
            Ok(mut process) if attached => {
                if let Some(s) = &signals {
                    s.forward_to(process.id());
                }
                let status = process.wait().map_err(|source| ExecError::Io {
                    context: format!("running `{argv0}`"),
                    source,
                })?;
                Ok(prepare::outcome(status))
            }
            Ok(mut process) => {
                let (Some(stdout), Some(stderr)) = (process.stdout.take(), process.stderr.take())
                else {
                    return Err(spawn_error("the output pipes were not set up".into()));
                };
                let status = output::collect(stdout, stderr, out, move || process.wait(), |_| {})
                    .and_then(|waited| waited)
                    .map_err(|source| ExecError::Io {
                        context: format!("running `{argv0}`"),
                        source,
                    })?;
                Ok(prepare::outcome(status))
            }
            Err(e) => prepare::spawn_failed(e, program, out, |stage, index, errno| {
                describe_stage(stage, index, errno, &bind_names)
            })
            .map_err(spawn_error),
        }
    })();
    // The staging directory goes with `staging`: the secrets' tmpfs
    // on it only ever existed in the step's mount namespace.
    drop(staging);
    prepare::finish(result, points.cleanup())
}

const NEED_ROOT: &str = "namespaces, mounts and chroot are privileged";

/// Why a step cannot run here, and what to do: run as root, or give the
/// user subordinate ids so that jbuild builds rootless.
fn need_root() -> String {
    match super::rootless::mode() {
        super::rootless::Mode::Unprivileged(why) => {
            format!("build steps need root or a user namespace on Linux: {why}; {NEED_ROOT}")
        }
        _ => format!("build steps need root on Linux (run `jbuild` with sudo); {NEED_ROOT}"),
    }
}

fn cstr(p: &Path) -> Result<CString, ExecError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| ExecError::Invalid(format!("path {} contains a NUL byte", p.display())))
}

/// Computes everything the child needs and creates the mount points.
/// Returns the plan and the names of the bind mounts, for messages.
fn plan(
    root: &Path,
    spec: &RunSpec,
    ident: &Identity,
    cwd: &str,
    points: &mut MountPoints,
    staging: &mut Option<Staging>,
) -> Result<(ChildPlan, Vec<String>), ExecError> {
    let inside = |p: &str| prepare::inside(root, p);
    let proc_dir = inside("/proc")?;
    points.dir(&proc_dir)?;
    let dev_dir = inside("/dev")?;
    points.dir(&dev_dir)?;
    let in_dev = |name: &str| cstr(&dev_dir.join(name));
    let mut nodes = Vec::new();
    for name in ["null", "zero", "full", "random", "urandom", "tty"] {
        let host = Path::new("/dev").join(name);
        if host.exists() {
            nodes.push((cstr(&host)?, in_dev(name)?));
        }
    }
    let mut links = Vec::new();
    for (target, name) in [
        ("/proc/self/fd", "fd"),
        ("/proc/self/fd/0", "stdin"),
        ("/proc/self/fd/1", "stdout"),
        ("/proc/self/fd/2", "stderr"),
    ] {
        links.push((cstr(Path::new(target))?, in_dev(name)?));
    }
    let dev = DevPlan {
        dir: cstr(&dev_dir)?,
        nodes,
        links,
        pts: in_dev("pts")?,
        ptmx: in_dev("ptmx")?,
        shm: in_dev("shm")?,
    };

    let planned = prepare::plan_mounts(root, spec, points)?;
    *staging = Staging::for_mounts(&planned)?;
    let mut mounts = Vec::new();
    let mut names = Vec::new();
    for m in planned {
        mounts.push(match m.what {
            Planned::Bind { host, read_only } => MountPlan::Bind(BindPlan {
                read_only: if read_only {
                    Some(mount_flags_to_keep(&host)?)
                } else {
                    None
                },
                source: cstr(&host)?,
                target: cstr(&m.at)?,
            }),
            Planned::Tmpfs { size } => MountPlan::Tmpfs {
                target: cstr(&m.at)?,
                options: CString::new(prepare::tmpfs_options(size))
                    .map_err(|_| ExecError::Invalid("tmpfs options have a NUL byte".into()))?,
            },
            Planned::Secret {
                name,
                data,
                mode,
                uid,
                gid,
            } => {
                let dir = staging
                    .as_ref()
                    .map(Staging::path)
                    .unwrap_or(Path::new("/"));
                MountPlan::Secret {
                    file: cstr(&dir.join(name))?,
                    target: cstr(&m.at)?,
                    data,
                    mode: mode as libc::mode_t,
                    uid,
                    gid,
                }
            }
        });
        names.push(m.target);
    }
    let staging_dir = match staging {
        Some(s) => Some(cstr(s.path())?),
        None => None,
    };

    let mut unshare_flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
    if !spec.network {
        unshare_flags |= libc::CLONE_NEWNET;
    }
    let hostname = if spec.hostname.is_empty() {
        "localhost"
    } else {
        &spec.hostname
    };
    let plan = ChildPlan {
        parent_pid: std::process::id() as libc::pid_t,
        unshare_flags,
        root: cstr(root)?,
        proc_dir: cstr(&proc_dir)?,
        dev,
        mounts,
        staging: staging_dir,
        hostname: CString::new(hostname)
            .map_err(|_| ExecError::Invalid("hostname has a NUL byte".into()))?,
        loopback_up: !spec.network,
        cwd: CString::new(cwd).map_err(|_| ExecError::Invalid("cwd has a NUL byte".into()))?,
        uid: ident.uid,
        gid: ident.gid,
        groups: (!setgroups_denied()).then(|| ident.groups.clone()),
    };
    Ok((plan, names))
}

/// Whether this process is in a user namespace that forbids
/// `setgroups(2)` (an unprivileged user's: the kernel requires it before
/// such a user may write its gid map). A process's user namespace is
/// fixed once it runs (jbuild never moves itself), so it is read once.
fn setgroups_denied() -> bool {
    static DENIED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DENIED.get_or_init(|| {
        std::fs::read_to_string("/proc/self/setgroups").is_ok_and(|s| s.trim() == "deny")
    })
}

/// The flags of the mount `host` is on that a read-only remount of a bind
/// of it must repeat (the kernel refuses to drop locked ones).
fn mount_flags_to_keep(host: &Path) -> Result<libc::c_ulong, ExecError> {
    let st = nix::sys::statvfs::statvfs(host).map_err(|e| ExecError::Io {
        context: format!("cannot inspect the mount of {}", host.display()),
        source: io::Error::from(e),
    })?;
    use nix::sys::statvfs::FsFlags;
    let f = st.flags();
    let mut keep = 0;
    for (flag, ms) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f.contains(flag) {
            keep |= ms;
        }
    }
    Ok(keep)
}

/// Says which part of the setup failed, for a person.
fn describe_stage(stage: u8, index: u8, errno: i32, binds: &[String]) -> String {
    let err = io::Error::from_raw_os_error(errno);
    let bind = binds.get(usize::from(index)).map_or("?", String::as_str);
    match stage {
        child::UNSHARE if errno == libc::EPERM => format!(
            "cannot create namespaces: {err} — build steps need root on Linux (run `jbuild` with sudo; in a container, it needs CAP_SYS_ADMIN)"
        ),
        child::UNSHARE => format!("cannot create namespaces: {err}"),
        child::PDEATHSIG => format!("cannot tie the step's life to jbuild's: {err}"),
        child::FORK => format!("cannot start the step's process: {err}"),
        child::PRIVATE => format!("cannot make the step's mounts private: {err}"),
        child::PROC => format!("cannot mount /proc in the root: {err}"),
        child::DEV | child::DEV_NODE => format!("cannot set up /dev in the root: {err}"),
        child::BIND => format!("cannot bind-mount {bind} into the root: {err}"),
        child::BIND_RO => format!("cannot make the mount {bind} read-only: {err}"),
        child::TMPFS => format!("cannot mount a tmpfs at {bind}: {err}"),
        child::SECRET => format!("cannot put the secret at {bind}: {err}"),
        child::HOSTNAME => format!("cannot set the hostname: {err}"),
        child::CHROOT => format!("cannot chroot into the root: {err}"),
        child::CHDIR => format!("cannot enter the working directory: {err}"),
        child::SETGROUPS | child::SETGID | child::SETUID => format!("cannot switch to the step's user: {err}"),
        _ => format!("setup failed: {err}"),
    }
}
