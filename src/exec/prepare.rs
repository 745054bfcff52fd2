//! Host-side work both executors share, done before a step's process
//! starts and after it ends: checking the spec, building the environment,
//! finding the program in the root, creating the working directory, and
//! creating (then removing again) the mount points the executor needs.
//!
//! Every path inside the root goes through [`resolve_in_root`], so a
//! symlink in the root can never make us create or mount something on
//! the host.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use super::user::{resolve_user, Identity};
use super::{ExecError, Mount, Outcome, OutputSink, RunSpec, SecretData, Stream};
use crate::fsutil::resolve_in_root;

/// A step ready to start: what both executors work out before confining it.
pub(crate) struct Ready {
    /// The root, canonical (mount targets and jail paths need it so).
    pub root: PathBuf,
    pub ident: Identity,
    pub env: Vec<(String, String)>,
    /// The working directory inside the root (created if it was missing).
    pub cwd: String,
    /// The program's path as the step sees it (exec happens after chroot
    /// or jail_attach).
    pub program: String,
}

impl Ready {
    /// A spawn failure of this step, with why.
    pub fn spawn_error(&self, spec: &RunSpec, reason: String) -> ExecError {
        ExecError::Spawn {
            program: spec.argv[0].clone(),
            root: self.root.display().to_string(),
            reason,
        }
    }
}

/// Checks `spec`, resolves the user, environment, working directory and
/// program inside `root`. `Ok(None)` means the program does not exist: the
/// shell-style message is already on the step's stderr and the step ends
/// with exit code 127. `need_root` says why this executor needs root.
pub(crate) fn preflight(
    root: &Path,
    spec: &RunSpec,
    out: &mut dyn OutputSink,
    need_root: &str,
) -> Result<Option<Ready>, ExecError> {
    check_spec(spec)?;
    let root = root
        .canonicalize()
        .map_err(io_err(format!("the root {} is not usable", root.display())))?;
    if !nix::unistd::geteuid().is_root() {
        return Err(ExecError::Spawn {
            program: spec.argv[0].clone(),
            root: root.display().to_string(),
            reason: need_root.to_string(),
        });
    }
    let ident = resolve_user(&root, spec.user.as_deref())?;
    let env = step_env(spec, &ident.home);
    let cwd = prepare_cwd(&root, &spec.cwd)?;
    let path = env_value(&env, "PATH").unwrap_or_default();
    let Some(program) = find_program(&root, &cwd, &spec.argv[0], path)? else {
        out.line(
            Stream::Stderr,
            not_found_message(&spec.argv[0], path).as_bytes(),
        );
        return Ok(None);
    };
    Ok(Some(Ready {
        root,
        ident,
        env,
        cwd,
        program,
    }))
}

/// What a failed spawn means: a setup stage that failed in the child
/// (`describe(stage, index, errno)` says which), or an exec failure a shell
/// would report as 126 or 127 (the message goes to the step's stderr and
/// the step ends with that code), or anything else. `Err` is the reason.
pub(crate) fn spawn_failed(
    e: io::Error,
    program: &str,
    out: &mut dyn OutputSink,
    describe: impl FnOnce(u8, u8, i32) -> String,
) -> Result<Outcome, String> {
    if let Some((stage, index, errno)) = decode_setup_error(&e) {
        return Err(describe(stage, index, errno));
    }
    match e
        .raw_os_error()
        .and_then(|errno| exec_failure(program, errno))
    {
        Some((code, message)) => {
            out.line(Stream::Stderr, message.as_bytes());
            Ok(Outcome::Exited(code))
        }
        None => Err(e.to_string()),
    }
}

/// The process as both executors start it: `program` (its path as the
/// step sees it) run with `argv` (`argv[0]` as written), exactly `env`,
/// no stdin, output into pipes.
pub(crate) fn command_for(
    program: &str,
    argv: &[String],
    env: &[(String, String)],
) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(program);
    cmd.arg0(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// `PATH` when the step's environment has none (FreeBSD's and Linux's
/// usual directories, `/usr/local` last as in FreeBSD's login.conf).
pub(crate) const DEFAULT_PATH: &str =
    "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin";

fn io_err(context: String) -> impl FnOnce(io::Error) -> ExecError {
    move |source| ExecError::Io { context, source }
}

/// Rejects what cannot be passed to `execve(2)`: an empty command, NUL
/// bytes, environment names with `=`.
pub(crate) fn check_spec(spec: &RunSpec) -> Result<(), ExecError> {
    let invalid = |what: String| Err(ExecError::Invalid(what));
    if spec.argv.is_empty() || spec.argv[0].is_empty() {
        return invalid("the step has no command to run".into());
    }
    if let Some(a) = spec.argv.iter().find(|a| a.contains('\0')) {
        return invalid(format!("argument {a:?} contains a NUL byte"));
    }
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
            return invalid(format!(
                "environment variable {k:?} cannot be passed to a process"
            ));
        }
    }
    if spec.hostname.contains('\0') || spec.cwd.contains('\0') {
        return invalid("the hostname or working directory contains a NUL byte".into());
    }
    for m in &spec.mounts {
        if !m.target().starts_with('/') {
            return invalid(format!(
                "mount target `{}` must be an absolute path inside the root",
                m.target()
            ));
        }
    }
    Ok(())
}

/// The step's whole environment: `spec.env`, plus `PATH` and `HOME` when
/// it does not set them.
pub(crate) fn step_env(spec: &RunSpec, home: &str) -> Vec<(String, String)> {
    let mut env = spec.env.clone();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    if !env.iter().any(|(k, _)| k == "HOME") {
        env.push(("HOME".into(), home.into()));
    }
    env
}

/// The value of `name` in `env` (the last one wins, as in `execve`).
pub(crate) fn env_value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// How a host path under `root` is named from inside it (`/` for the root).
pub(crate) fn in_root(root: &Path, host: &Path) -> String {
    let rel = host.strip_prefix(root).unwrap_or(Path::new(""));
    format!("/{}", rel.display())
}

/// Creates the working directory if it is missing (as Docker does for
/// `WORKDIR`; it stays in the layer) and returns its name inside the root.
pub(crate) fn prepare_cwd(root: &Path, cwd: &str) -> Result<String, ExecError> {
    let cwd = if cwd.is_empty() { "/" } else { cwd };
    let context = || {
        format!(
            "cannot create the working directory {cwd} in {}",
            root.display()
        )
    };
    let host = resolve_in_root(root, Path::new("/").join(cwd).as_path(), true)
        .map_err(io_err(context()))?;
    fs::create_dir_all(&host).map_err(io_err(context()))?;
    Ok(in_root(root, &host))
}

/// Looks `argv0` up as `execvp(3)` would inside the root, with the step's
/// `PATH`; relative entries count from `cwd`. Returns the name to exec
/// (inside the root), or `None` when there is no such program.
pub(crate) fn find_program(
    root: &Path,
    cwd: &str,
    argv0: &str,
    path: &str,
) -> Result<Option<String>, ExecError> {
    let resolve = |p: &str| {
        let full = Path::new(cwd).join(p);
        resolve_in_root(root, &full, true).map_err(io_err(format!(
            "cannot look up `{argv0}` in {}",
            root.display()
        )))
    };
    if argv0.contains('/') {
        // Named by path: exec reports anything wrong with the file itself.
        return Ok(fs::symlink_metadata(resolve(argv0)?)
            .ok()
            .map(|_| argv0.to_string()));
    }
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = if dir.starts_with('/') {
            format!("{dir}/{argv0}")
        } else {
            format!("{cwd}/{dir}/{argv0}")
        };
        let host = resolve(&candidate)?;
        if fs::metadata(&host).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0) {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

/// The line a shell would print for a program that is not there.
pub(crate) fn not_found_message(argv0: &str, path: &str) -> String {
    if argv0.contains('/') {
        format!("exec: {argv0}: not found")
    } else {
        format!("exec: {argv0}: not found (searched PATH={path})")
    }
}

/// Turns a failed `execve(2)` into the exit code and message a shell
/// gives (127 not found, 126 not runnable); other errors are not the
/// step's doing and stay errors.
pub(crate) fn exec_failure(program: &str, errno: i32) -> Option<(i32, String)> {
    match errno {
        libc::ENOENT => Some((
            127,
            format!("exec: {program}: No such file or directory (is its #! interpreter or dynamic loader missing from the root?)"),
        )),
        libc::EACCES => Some((126, format!("exec: {program}: Permission denied"))),
        libc::ENOEXEC => Some((126, format!("exec: {program}: Exec format error (not a program for this system)"))),
        _ => None,
    }
}

/// How a process ended, as an [`Outcome`].
pub(crate) fn outcome(status: ExitStatus) -> Outcome {
    match (status.code(), status.signal()) {
        (Some(code), _) => Outcome::Exited(code),
        (None, Some(sig)) => Outcome::Signaled(sig),
        (None, None) => Outcome::Exited(255),
    }
}

/// Errors from the code that runs between fork and exec carry which step
/// of the setup failed, packed with the errno into the one `i32` that
/// `std::process` hands back from a failed child. Plain errnos (below
/// 2^16) are from `execve` itself.
pub(crate) fn setup_error(stage: u8, index: u8, errno: i32) -> io::Error {
    io::Error::from_raw_os_error(
        (i32::from(stage) << 16) | (i32::from(index) << 8) | (errno & 0xff),
    )
}

/// Splits what [`setup_error`] packed: `(stage, index, errno)`, or `None`
/// for an error from `execve`.
pub(crate) fn decode_setup_error(e: &io::Error) -> Option<(u8, u8, i32)> {
    let code = e.raw_os_error()?;
    (code >= 1 << 16).then_some(((code >> 16) as u8, (code >> 8) as u8, code & 0xff))
}

/// A mount a step gets, resolved: where it goes on the host and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedMount {
    /// The target as named inside the root, for messages.
    pub target: String,
    /// The target resolved to a host path under the root.
    pub at: PathBuf,
    pub what: Planned,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Planned {
    /// Linux: a bind mount; FreeBSD: nullfs.
    Bind {
        host: PathBuf,
        read_only: bool,
    },
    Tmpfs {
        size: Option<u64>,
    },
    /// A file `name` in the secrets' staging tmpfs, then bound read-only.
    Secret {
        name: String,
        data: SecretData,
        mode: u32,
        uid: u32,
        gid: u32,
    },
}

/// The options of a step's tmpfs: world-writable with the sticky bit,
/// as `/tmp`, and the size asked for. The same text suits Linux's
/// tmpfs(5) and FreeBSD's tmpfs(5) (`mode=`, `size=` in bytes).
pub(crate) fn tmpfs_options(size: Option<u64>) -> String {
    match size {
        Some(n) => format!("mode=1777,size={n}"),
        None => "mode=1777".to_string(),
    }
}

/// The options of the tmpfs secrets are written to: only root may look.
pub(crate) const STAGING_OPTIONS: &str = "mode=0700";

/// Resolves `path` (named inside the root) to a host path under it.
pub(crate) fn inside(root: &Path, path: &str) -> Result<PathBuf, ExecError> {
    resolve_in_root(root, Path::new(path), true).map_err(io_err(format!(
        "cannot resolve {path} in {}",
        root.display()
    )))
}

/// The step's mounts: `spec.mounts`, then the host's `/etc/resolv.conf`
/// (read-only, so a step cannot write the host's) when the step has the
/// network and the root has an `/etc`. Creates their mount points.
pub(crate) fn plan_mounts(
    root: &Path,
    spec: &RunSpec,
    points: &mut MountPoints,
) -> Result<Vec<PlannedMount>, ExecError> {
    let mut wanted: Vec<(String, Planned)> = Vec::new();
    for (n, m) in spec.mounts.iter().enumerate() {
        let what = match m {
            Mount::Bind(b) => Planned::Bind {
                host: b.host.clone(),
                read_only: b.read_only,
            },
            Mount::Tmpfs(t) => Planned::Tmpfs { size: t.size },
            Mount::Secret(s) => Planned::Secret {
                name: format!("secret-{n}"),
                data: s.data.clone(),
                mode: s.mode,
                uid: s.uid,
                gid: s.gid,
            },
        };
        wanted.push((m.target().to_string(), what));
    }
    let resolv = Path::new("/etc/resolv.conf");
    if spec.network
        && fs::metadata(inside(root, "/etc")?).is_ok_and(|m| m.is_dir())
        && resolv.exists()
    {
        let what = Planned::Bind {
            host: resolv.into(),
            read_only: true,
        };
        wanted.push(("/etc/resolv.conf".into(), what));
    }
    let mut planned = Vec::new();
    for (target, what) in wanted {
        let at = inside(root, &target)?;
        let is_dir = match &what {
            Planned::Bind { host, .. } => fs::metadata(host)
                .map_err(io_err(format!(
                    "cannot mount {} into the step",
                    host.display()
                )))?
                .is_dir(),
            Planned::Tmpfs { .. } => true,
            Planned::Secret { .. } => false,
        };
        if is_dir {
            points.dir(&at)?;
        } else {
            points.file(&at)?;
        }
        planned.push(PlannedMount { target, at, what });
    }
    Ok(planned)
}

/// An empty host directory the secrets' tmpfs is mounted on (inside the
/// step's mount namespace on Linux, so the host only ever sees it empty);
/// removed when dropped.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: tempfile::TempDir,
}

impl Staging {
    /// A staging directory when some mount is a secret.
    pub(crate) fn for_mounts(mounts: &[PlannedMount]) -> Result<Option<Staging>, ExecError> {
        if !mounts
            .iter()
            .any(|m| matches!(m.what, Planned::Secret { .. }))
        {
            return Ok(None);
        }
        let dir = tempfile::Builder::new()
            .prefix("jbuild-secrets-")
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(io_err(
                "cannot create a directory for the step's secrets".into(),
            ))?;
        Ok(Some(Staging { dir }))
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The result of a run once its cleanup is done: the run's own error
/// comes first; a cleanup error alone fails the run (the layer would keep
/// a trace of the executor).
pub(crate) fn finish<T>(
    result: Result<T, ExecError>,
    cleanup: Result<(), ExecError>,
) -> Result<T, ExecError> {
    match (result, cleanup) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), cleanup) => {
            if let Err(c) = cleanup {
                tracing::warn!("{c}");
            }
            Err(e)
        }
    }
}

/// Mount points an executor had to create inside the root: removed again
/// when they are still empty, so a step leaves no trace of the executor
/// in its layer — also when the run failed (the `Drop` cleans up too).
#[derive(Debug)]
pub(crate) struct MountPoints {
    root: PathBuf,
    /// In creation order; `true` for directories.
    created: Vec<(PathBuf, bool)>,
}

impl MountPoints {
    pub(crate) fn new(root: &Path) -> Self {
        MountPoints {
            root: root.to_path_buf(),
            created: Vec::new(),
        }
    }

    /// Makes sure the directory `host` (a resolved path under the root)
    /// exists, creating it and its missing parents.
    pub(crate) fn dir(&mut self, host: &Path) -> Result<(), ExecError> {
        let context = || format!("cannot create the mount point {}", host.display());
        if !host.starts_with(&self.root) {
            return Err(ExecError::Invalid(context()));
        }
        let mut missing = Vec::new();
        let mut p = host;
        while fs::symlink_metadata(p).is_err() && p != self.root {
            missing.push(p.to_path_buf());
            p = p.parent().unwrap_or(&self.root);
        }
        for dir in missing.into_iter().rev() {
            fs::create_dir(&dir).map_err(io_err(context()))?;
            self.created.push((dir, true));
        }
        if !fs::metadata(host).is_ok_and(|m| m.is_dir()) {
            let e = io::Error::new(
                io::ErrorKind::AlreadyExists,
                "it exists and is not a directory",
            );
            return Err(io_err(context())(e));
        }
        Ok(())
    }

    /// Makes sure the file `host` exists, creating an empty one.
    pub(crate) fn file(&mut self, host: &Path) -> Result<(), ExecError> {
        if fs::symlink_metadata(host).is_ok() {
            return Ok(());
        }
        if let Some(parent) = host.parent() {
            self.dir(parent)?;
        }
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(host)
            .map_err(io_err(format!(
                "cannot create the mount point {}",
                host.display()
            )))?;
        self.created.push((host.to_path_buf(), false));
        Ok(())
    }

    /// Removes what was created, newest first, when still empty.
    pub(crate) fn cleanup(&mut self) -> Result<(), ExecError> {
        let mut first = Ok(());
        while let Some((path, is_dir)) = self.created.pop() {
            let res = if is_dir {
                fs::remove_dir(&path)
            } else {
                match fs::symlink_metadata(&path) {
                    Ok(m) if m.is_file() && m.len() == 0 => fs::remove_file(&path),
                    _ => Ok(()),
                }
            };
            match res {
                Ok(()) => {}
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENOTEMPTY) => {}
                Err(e) => {
                    if first.is_ok() {
                        first = Err(io_err(format!(
                            "cannot remove the mount point {}",
                            path.display()
                        ))(e));
                    }
                }
            }
        }
        first
    }
}

impl Drop for MountPoints {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn mount_points_leave_nothing_but_what_was_there() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::create_dir(root.join("var")).unwrap();
        let mut mp = MountPoints::new(root);
        mp.dir(&root.join("var/cache/pkg")).unwrap();
        mp.dir(&root.join("proc")).unwrap();
        mp.file(&root.join("etc/resolv.conf")).unwrap();
        fs::write(root.join("var/cache/kept"), "x").unwrap();
        mp.cleanup().unwrap();
        let mut left: Vec<_> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["var"]);
        assert!(root.join("var/cache/kept").exists());
        assert!(!root.join("var/cache/pkg").exists());
    }

    #[test]
    fn program_lookup() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::create_dir_all(root.join("work/tools")).unwrap();
        for (p, mode) in [
            ("usr/bin/tool", 0o755),
            ("usr/bin/data", 0o644),
            ("work/tools/local", 0o755),
        ] {
            fs::write(root.join(p), "").unwrap();
            fs::set_permissions(root.join(p), fs::Permissions::from_mode(mode)).unwrap();
        }
        symlink("usr/bin", root.join("bin")).unwrap();
        let find = |a, path| find_program(root, "/work", a, path).unwrap();
        assert_eq!(find("tool", "/bin:/usr/bin"), Some("/bin/tool".into()));
        assert_eq!(find("data", "/bin:/usr/bin"), None);
        assert_eq!(
            find("local", "/bin:tools"),
            Some("/work/tools/local".into())
        );
        assert_eq!(find("tools/local", ""), Some("tools/local".into()));
        assert_eq!(find("/nope", "/bin"), None);
        assert!(not_found_message("tool", DEFAULT_PATH).starts_with("exec: tool: not found"));
    }

    #[test]
    fn setup_errors_round_trip() {
        let e = setup_error(5, 2, libc::EPERM);
        assert_eq!(decode_setup_error(&e), Some((5, 2, libc::EPERM)));
        assert_eq!(
            decode_setup_error(&io::Error::from_raw_os_error(libc::ENOENT)),
            None
        );
    }
}
