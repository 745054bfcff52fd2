//! The code that runs between `fork` and `exec`, in the processes
//! `std::process::Command` forks from a multithreaded jbuild.
//!
//! Such a child may only make async-signal-safe calls: another thread may
//! have held the allocator's lock at the moment of the fork, so nothing
//! here allocates, formats or locks. Everything is computed beforehand in
//! a [`ChildPlan`]; this module only hands its C strings to syscalls.
//!
//! Two processes are involved:
//!
//! 1. The *supervisor* (the child std forked) resets the signals that must
//!    end a build, asks to die with jbuild (`PR_SET_PDEATHSIG`), enters
//!    new namespaces with `unshare(2)` and forks again. It then closes
//!    every descriptor but stdio (so std's exec-error pipe reaches end of
//!    file when the step execs), waits for the step and ends the same way
//!    it did: `_exit` with its exit code, or killed by the same signal.
//! 2. The *step* is PID 1 of the new PID namespace. It also dies with its
//!    parent, mounts `/proc`, `/dev` and the bind mounts, sets the
//!    hostname, brings `lo` up, chroots, changes directory, drops to the
//!    step's user and returns to std, which execs the program.
//!
//! Errors are returned to std as `io::Error`s packed with the failing
//! stage (see [`setup_error`]); std passes them to the parent through its
//! exec-error pipe.

use std::ffi::CString;
use std::io;
use std::ptr;

use crate::exec::prepare::setup_error;

// Stages of the setup, for error messages (see `describe_stage`).
pub(super) const PDEATHSIG: u8 = 1;
pub(super) const UNSHARE: u8 = 2;
pub(super) const FORK: u8 = 3;
pub(super) const PRIVATE: u8 = 4;
pub(super) const PROC: u8 = 5;
pub(super) const DEV: u8 = 6;
pub(super) const DEV_NODE: u8 = 7;
pub(super) const BIND: u8 = 8;
pub(super) const BIND_RO: u8 = 9;
pub(super) const HOSTNAME: u8 = 10;
pub(super) const CHROOT: u8 = 11;
pub(super) const CHDIR: u8 = 12;
pub(super) const SETGROUPS: u8 = 13;
pub(super) const SETGID: u8 = 14;
pub(super) const SETUID: u8 = 15;
pub(super) const TMPFS: u8 = 16;
pub(super) const SECRET: u8 = 17;

/// Everything the child needs, computed by the parent before the fork.
/// All paths are host paths already resolved inside the root, except
/// `cwd`, which is named from inside it (it is used after `chroot`).
#[derive(Debug)]
pub(super) struct ChildPlan {
    pub parent_pid: libc::pid_t,
    pub unshare_flags: libc::c_int,
    pub root: CString,
    pub proc_dir: CString,
    pub dev: DevPlan,
    /// The step's mounts, in order (`describe_stage` names them by index).
    pub mounts: Vec<MountPlan>,
    /// Where the secrets' tmpfs goes (an empty host directory; mounted in
    /// the step's namespace only), when there are secrets.
    pub staging: Option<CString>,
    pub hostname: CString,
    pub loopback_up: bool,
    pub cwd: CString,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// `None`: the groups stay as they are, because this user namespace
    /// forbids `setgroups(2)` (its `/proc/self/setgroups` is `deny`, as in
    /// one an unprivileged user made with `unshare --map-root-user`).
    pub groups: Option<Vec<libc::gid_t>>,
}

/// A small `/dev` on a tmpfs: host device nodes bind-mounted onto empty
/// files, the usual symlinks, and optional `pts` and `shm`.
#[derive(Debug)]
pub(super) struct DevPlan {
    pub dir: CString,
    /// (host device, file in the new /dev)
    pub nodes: Vec<(CString, CString)>,
    /// (link target, link path)
    pub links: Vec<(CString, CString)>,
    pub pts: CString,
    pub ptmx: CString,
    pub shm: CString,
}

#[derive(Debug)]
pub(super) enum MountPlan {
    Bind(BindPlan),
    /// A tmpfs at `target` with these options.
    Tmpfs {
        target: CString,
        options: CString,
    },
    /// `data` written to `file` in the staging tmpfs, then `file` bound
    /// read-only at `target`.
    Secret {
        file: CString,
        target: CString,
        data: crate::exec::SecretData,
        mode: libc::mode_t,
        uid: libc::uid_t,
        gid: libc::gid_t,
    },
}

#[derive(Debug)]
pub(super) struct BindPlan {
    pub source: CString,
    pub target: CString,
    /// For a read-only mount: the flags of the source's mount to keep
    /// (nosuid, nodev, noexec...) when remounting read-only.
    pub read_only: Option<libc::c_ulong>,
}

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn check(ret: libc::c_int, stage: u8, index: usize) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(setup_error(stage, index.min(255) as u8, last_errno()))
    }
}

/// Entry point, called from `pre_exec` in the child std forked. Returns
/// (in the step process) once it is ready to exec.
///
/// # Safety
/// Must only be called in a freshly forked child, with a plan computed
/// before the fork.
pub(super) unsafe fn enter(plan: &ChildPlan) -> io::Result<()> {
    // The supervisor may have inherited jbuild's handlers or ignored
    // signals; a forked copy must neither run jbuild's handlers nor
    // survive the Ctrl-C that stops the build.
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGCHLD,
    ] {
        libc::signal(sig, libc::SIG_DFL);
    }
    check(
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ),
        PDEATHSIG,
        0,
    )?;
    if libc::getppid() != plan.parent_pid {
        // jbuild died before the death signal was armed.
        libc::_exit(1);
    }
    check(libc::unshare(plan.unshare_flags), UNSHARE, 0)?;
    // A raw fork: glibc's fork() would run atfork handlers, which is not
    // ours to do in a child of a multithreaded process.
    let pid = libc::syscall(
        libc::SYS_clone,
        libc::SIGCHLD as libc::c_long,
        0usize,
        0usize,
        0usize,
        0usize,
    );
    if pid < 0 {
        return Err(setup_error(FORK, 0, last_errno()));
    }
    if pid > 0 {
        supervise(pid as libc::pid_t);
    }
    check(
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ),
        PDEATHSIG,
        1,
    )?;
    setup_step(plan)
}

/// The supervisor's life after the fork: wait for the step, end alike.
unsafe fn supervise(step: libc::pid_t) -> ! {
    close_descriptors_from(3);
    let mut status = 0;
    loop {
        let r = libc::waitpid(step, &mut status, 0);
        if r == step {
            break;
        }
        if r < 0 && last_errno() != libc::EINTR {
            libc::_exit(125);
        }
    }
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // Die of the same signal, without writing a core of this copy of
        // jbuild.
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        // Only reached for a signal whose default is not to terminate.
        libc::_exit(128 + sig);
    }
    libc::_exit(125)
}

unsafe fn close_descriptors_from(first: libc::c_uint) {
    if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0) == 0 {
        return;
    }
    // Kernels before 5.9 have no close_range.
    let mut limit: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        1024
    };
    for fd in first as libc::c_int..max {
        libc::close(fd);
    }
}

unsafe fn setup_step(p: &ChildPlan) -> io::Result<()> {
    let null = ptr::null::<libc::c_char>();
    // Nothing mounted from here on may propagate back to the host.
    check(
        libc::mount(
            null,
            c"/".as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            ptr::null(),
        ),
        PRIVATE,
        0,
    )?;
    let proc_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    check(
        libc::mount(
            c"proc".as_ptr(),
            p.proc_dir.as_ptr(),
            c"proc".as_ptr(),
            proc_flags,
            ptr::null(),
        ),
        PROC,
        0,
    )?;
    setup_dev(&p.dev)?;
    if let Some(staging) = &p.staging {
        check(
            libc::mount(
                c"tmpfs".as_ptr(),
                staging.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"mode=0700".as_ptr().cast(),
            ),
            SECRET,
            0,
        )?;
    }
    for (i, m) in p.mounts.iter().enumerate() {
        match m {
            MountPlan::Bind(b) => bind(&b.source, &b.target, b.read_only, i)?,
            MountPlan::Tmpfs { target, options } => check(
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    options.as_ptr().cast(),
                ),
                TMPFS,
                i,
            )?,
            MountPlan::Secret {
                file,
                target,
                data,
                mode,
                uid,
                gid,
            } => {
                write_secret(file, data.expose(), *mode, *uid, *gid)
                    .map_err(|errno| setup_error(SECRET, i.min(255) as u8, errno))?;
                let keep = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                bind(file, target, Some(keep), i)?;
            }
        }
    }
    let name = p.hostname.as_bytes();
    check(
        libc::sethostname(name.as_ptr().cast(), name.len() as _),
        HOSTNAME,
        0,
    )?;
    if p.loopback_up {
        // Best effort: a step without network still expects 127.0.0.1.
        loopback_up();
    }
    check(libc::chroot(p.root.as_ptr()), CHROOT, 0)?;
    check(libc::chdir(p.cwd.as_ptr()), CHDIR, 0)?;
    if let Some(groups) = &p.groups {
        check(
            libc::setgroups(groups.len() as _, groups.as_ptr()),
            SETGROUPS,
            0,
        )?;
    }
    check(libc::setgid(p.gid), SETGID, 0)?;
    check(libc::setuid(p.uid), SETUID, 0)?;
    libc::umask(0o022);
    Ok(())
}

/// Binds `source` at `target`, then makes it read-only (keeping `keep`,
/// the flags the kernel will not let a bind drop) when asked.
unsafe fn bind(
    source: &CString,
    target: &CString,
    read_only: Option<libc::c_ulong>,
    i: usize,
) -> io::Result<()> {
    let null = ptr::null::<libc::c_char>();
    check(
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            null,
            libc::MS_BIND,
            ptr::null(),
        ),
        BIND,
        i,
    )?;
    if let Some(keep) = read_only {
        let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | keep;
        check(
            libc::mount(null, target.as_ptr(), null, flags, ptr::null()),
            BIND_RO,
            i,
        )?;
    }
    Ok(())
}

/// Creates `file` (new, in the staging tmpfs) holding `data`, owned and
/// moded as asked. Returns the errno of what failed.
unsafe fn write_secret(
    file: &CString,
    data: &[u8],
    mode: libc::mode_t,
    uid: libc::uid_t,
    gid: libc::gid_t,
) -> Result<(), i32> {
    let fd = libc::open(
        file.as_ptr(),
        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
        0o600 as libc::c_uint,
    );
    if fd < 0 {
        return Err(last_errno());
    }
    let mut rest = data;
    let mut result = Ok(());
    while !rest.is_empty() {
        let n = libc::write(fd, rest.as_ptr().cast(), rest.len());
        if n < 0 {
            if last_errno() == libc::EINTR {
                continue;
            }
            result = Err(last_errno());
            break;
        }
        rest = &rest[n as usize..];
    }
    if result.is_ok() && (libc::fchown(fd, uid, gid) != 0 || libc::fchmod(fd, mode) != 0) {
        result = Err(last_errno());
    }
    libc::close(fd);
    result
}

unsafe fn setup_dev(d: &DevPlan) -> io::Result<()> {
    let null = ptr::null::<libc::c_char>();
    let opts = c"mode=755,size=65536k";
    let flags = libc::MS_NOSUID | libc::MS_STRICTATIME;
    check(
        libc::mount(
            c"tmpfs".as_ptr(),
            d.dir.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            opts.as_ptr().cast(),
        ),
        DEV,
        0,
    )?;
    for (i, (host, file)) in d.nodes.iter().enumerate() {
        let fd = libc::open(
            file.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
            0o666,
        );
        if fd < 0 {
            return Err(setup_error(DEV_NODE, i.min(255) as u8, last_errno()));
        }
        libc::close(fd);
        check(
            libc::mount(
                host.as_ptr(),
                file.as_ptr(),
                null,
                libc::MS_BIND,
                ptr::null(),
            ),
            DEV_NODE,
            i,
        )?;
    }
    for (target, link) in &d.links {
        check(libc::symlink(target.as_ptr(), link.as_ptr()), DEV, 1)?;
    }
    // pts and shm are extras: a step without them still runs.
    if libc::mkdir(d.pts.as_ptr(), 0o755) == 0 {
        let opts = c"newinstance,ptmxmode=0666,mode=0620";
        let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
        if libc::mount(
            c"devpts".as_ptr(),
            d.pts.as_ptr(),
            c"devpts".as_ptr(),
            flags,
            opts.as_ptr().cast(),
        ) == 0
        {
            libc::symlink(c"pts/ptmx".as_ptr(), d.ptmx.as_ptr());
        }
    }
    if libc::mkdir(d.shm.as_ptr(), 0o1777) == 0 {
        let opts = c"mode=1777,size=65536k";
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        libc::mount(
            c"shm".as_ptr(),
            d.shm.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            opts.as_ptr().cast(),
        );
    }
    Ok(())
}

unsafe fn loopback_up() {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if fd < 0 {
        return;
    }
    let mut req: libc::ifreq = std::mem::zeroed();
    req.ifr_name[0] = b'l' as libc::c_char;
    req.ifr_name[1] = b'o' as libc::c_char;
    if libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) == 0 {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req);
    }
    libc::close(fd);
}
