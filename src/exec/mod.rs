//! The `Executor` seam: run one build step's process inside a root.
//!
//! A RUN or PKG step is a process started with a root directory (an active
//! snapshot), a command line, an environment, a working directory and a
//! user. The executor confines it (a FreeBSD jail; Linux namespaces and
//! chroot), streams its output line by line to an [`OutputSink`], and
//! reports how it ended. It does not decide *what* runs — the build engine
//! does — and it leaves nothing behind in the root that the step itself did
//! not write (mount points it had to create are removed again).
//!
//! Implementations:
//! - `linux::LinuxExecutor` (Linux only): new mount, PID, UTS, IPC (and, unless the
//!   step asks for the network, network) namespaces, then `chroot`.
//! - `freebsd::JailExecutor` (FreeBSD only): a jail made with jail(8),
//!   the step attached to it with `jail_attach(2)`.
//!
//! Around them: [`user`] resolves `USER` (and `COPY --chown`) in the
//! root's own passwd and group files; [`output`] turns the two output
//! pipes into lines; [`jail_params`] and [`jail_session`] are the jail's
//! command lines and its setup/teardown sequence, and [`attach`] what the
//! step's process does between fork and exec to enter the jail, kept
//! apart from FreeBSD so they are tested everywhere.
//!
//! Both executors answer the same way to a program that is not in the
//! root: `Ok(Outcome::Exited(127))` with `exec: NAME: not found ...` on
//! the step's stderr, as a shell does (126 for one that cannot be run).

#[cfg(unix)]
pub mod attach;
#[cfg(target_os = "freebsd")]
pub mod freebsd;
pub mod jail_params;
#[cfg(unix)]
pub mod jail_session;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod output;
#[cfg(unix)]
mod prepare;
#[cfg(unix)]
pub mod rootless;
#[cfg(unix)]
pub mod signals;
#[cfg(unix)]
pub mod user;

use crate::blame::Blame;
use std::path::Path;

/// Which pipe an output line came from; defined with the Reporter, which
/// shows it, so that `report` need not know about executors.
pub use crate::report::Stream;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// The program and its arguments; `argv[0]` is looked up in `PATH`
    /// inside the root when it has no `/`.
    pub argv: Vec<String>,
    /// The whole environment (nothing is inherited from jbuild's).
    pub env: Vec<(String, String)>,
    /// Working directory inside the root; created if missing.
    pub cwd: String,
    /// `user`, `uid`, `user:group` or `uid:gid`, resolved against the root's
    /// `/etc/passwd` and `/etc/group`; `None` is root.
    pub user: Option<String>,
    /// Whether the step may use the host's network.
    pub network: bool,
    /// The hostname the step sees (`localhost` when empty).
    pub hostname: String,
    /// Extra jail(8) parameters from `JAIL` lines (ignored on Linux).
    pub jail_params: Vec<(String, String)>,
    /// What the step sees besides the root, for the step only (a package
    /// cache, a secret, a scratch tmpfs), mounted in this order; never
    /// part of the layer.
    pub mounts: Vec<Mount>,
}

/// One mount of a step. Every target is an absolute path inside the root;
/// a mount point missing from the root is created for the step and
/// removed after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// A host directory or file (Linux: a bind mount; FreeBSD: nullfs).
    Bind(BindMount),
    /// An empty tmpfs (mode 1777), gone with the step.
    Tmpfs(TmpfsMount),
    /// A file holding a secret, read-only. It is written to a tmpfs only
    /// the step's mounts can see (Linux: one mounted in the step's own
    /// mount namespace; FreeBSD: one mounted for the step and unmounted
    /// after it), never to a disk.
    Secret(SecretFile),
}

impl Mount {
    /// Where the step sees it.
    pub fn target(&self) -> &str {
        match self {
            Mount::Bind(b) => &b.target,
            Mount::Tmpfs(t) => &t.target,
            Mount::Secret(s) => &s.target,
        }
    }
}

impl From<BindMount> for Mount {
    fn from(b: BindMount) -> Mount {
        Mount::Bind(b)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub host: std::path::PathBuf,
    /// Absolute path inside the root.
    pub target: String,
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpfsMount {
    pub target: String,
    /// Bytes; `None` is the system's default.
    pub size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFile {
    pub target: String,
    pub data: SecretData,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A secret's bytes: printed as `<redacted>` by `Debug`, so no log of a
/// spec or a plan can show it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretData(Vec<u8>);

impl SecretData {
    pub fn new(bytes: impl Into<Vec<u8>>) -> SecretData {
        SecretData(bytes.into())
    }

    /// The bytes, for the one place that writes them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Receives a step's output, one line at a time (without the newline; a
/// last line without one is passed as it is).
pub trait OutputSink: Send {
    fn line(&mut self, stream: Stream, line: &[u8]);
}

impl<F: FnMut(Stream, &[u8]) + Send> OutputSink for F {
    fn line(&mut self, stream: Stream, line: &[u8]) {
        self(stream, line)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
}

impl Outcome {
    pub fn success(self) -> bool {
        self == Outcome::Exited(0)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Exited(c) => write!(f, "exit code {c}"),
            Outcome::Signaled(s) => write!(f, "killed by signal {s}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot run `{program}` in {root}: {reason}")]
    Spawn {
        program: String,
        root: String,
        reason: String,
    },
    #[error("user `{0}` is not in the root's /etc/passwd (give a numeric uid, or create the user first)")]
    UnknownUser(String),
    #[error("group `{0}` is not in the root's /etc/group")]
    UnknownGroup(String),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("this host cannot run build steps: {0}")]
    Unsupported(String),
    /// The spec itself is wrong (a malformed user, a forbidden jail
    /// parameter, a NUL byte in an argument...); nothing was run.
    #[error("{0}")]
    Invalid(String),
}

impl Blame for ExecError {
    /// Whether the recipe or the way jbuild was started is at fault (exit
    /// code 1): an unknown user or group, a spec that cannot be run, a
    /// host or privileges that cannot run steps, and a file operation that
    /// failed on a path in the root (a WORKDIR that is a file, a mount
    /// point in the way). Other I/O errors are the system's.
    fn is_user_error(&self) -> bool {
        match self {
            ExecError::Spawn { .. }
            | ExecError::UnknownUser(_)
            | ExecError::UnknownGroup(_)
            | ExecError::Unsupported(_)
            | ExecError::Invalid(_) => true,
            ExecError::Io { source, .. } => crate::fsutil::path_at_fault(source),
        }
    }
}

/// Runs one step's process confined to a root. See the module docs.
pub trait Executor: Send + Sync {
    /// A short name for messages (`linux-namespaces`, `jail`).
    fn name(&self) -> &'static str;

    /// Runs `spec` in `root` and waits for it. An `Err` means the process
    /// could not be run at all; a process that ran and failed is `Ok` with
    /// its [`Outcome`].
    fn run(
        &self,
        root: &Path,
        spec: &RunSpec,
        out: &mut dyn OutputSink,
    ) -> Result<Outcome, ExecError>;

    /// Runs `spec` in `root` on jbuild's own standard input, output and
    /// error (a terminal: `jbuild run`) and waits for it; jbuild outlives
    /// it whatever signal ends it, so the caller can clean up.
    fn run_attached(&self, root: &Path, spec: &RunSpec) -> Result<Outcome, ExecError> {
        let _ = (root, spec);
        Err(ExecError::Unsupported(format!(
            "the {} executor runs build steps only",
            self.name()
        )))
    }
}

/// The executor for this host, or why there is none.
pub fn host_executor() -> Result<Box<dyn Executor>, ExecError> {
    #[cfg(target_os = "linux")]
    {
        Ok(Box::new(linux::LinuxExecutor::new()))
    }
    #[cfg(target_os = "freebsd")]
    {
        Ok(Box::new(freebsd::JailExecutor::new()))
    }
    #[cfg(not(any(target_os = "linux", target_os = "freebsd")))]
    {
        Err(ExecError::Unsupported(
            "RUN and PKG need FreeBSD or Linux".into(),
        ))
    }
}
