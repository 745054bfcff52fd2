//! What can go wrong in a build, sorted into the user's mistakes (exit 1)
//! and jbuild's or the system's faults (exit 2).

use crate::blame::Blame;
use std::fmt;

use super::native::NativeError;
use crate::exec::{ExecError, Outcome};
use crate::image::export::ExportError;
use crate::image::index::IndexError;
use crate::image::unpack::UnpackError;
use crate::image::{ImageError, Platform, PullError};
use crate::jailfile::{Diagnostic, Location};
use crate::plan::{PlanError, RootOs, UnknownTarget};
use crate::release::ReleaseError;
use crate::snapshot::SnapshotError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Jailfile(#[from] Diagnostic),
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// `--target` names no stage.
    #[error(transparent)]
    Target(#[from] UnknownTarget),
    /// `--pull=never`, and an image the store lacks.
    #[error(
        "image `{0}` is not in the local store, and --pull=never forbids fetching it: \
         pull it first (`jbuild pull {0}`) or build with --pull=missing"
    )]
    NotPulled(String),
    /// The build context's `.jailignore` cannot be read or used.
    #[error("build context")]
    Context(#[source] NativeError),
    /// A native instruction (COPY, SYSRC, SERVICE, LINE_IN_FILE, RENDER)
    /// that failed.
    #[error(transparent)]
    Native(NativeError),
    /// A step's process that could not be run at all (no executor on this
    /// host, an unknown user, a `COPY --chown` owner not in the root).
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The release of `FROM freebsd:<release>` that could not be fetched,
    /// verified or extracted.
    #[error(transparent)]
    Release(#[from] ReleaseError),
    /// A step that cannot be carried out, in the engine's own words (a
    /// `COPY --from` stage that made no files, a jail parameter that needs
    /// consent).
    #[error("{0}")]
    Step(String),
    /// A RUN or PKG step for an architecture this host cannot run
    /// (see [`super::foreign`]).
    #[error("it cannot run for {platform} on this {host} host: only native instructions (COPY, SYSRC, SERVICE, LINE_IN_FILE, RENDER) build for another architecture; build {platform} on a runner of that architecture")]
    Foreign { platform: Platform, host: String },
    /// A RUN over a root of programs for an OS this host cannot run (a
    /// FreeBSD image on Linux; see [`super::foreign`]).
    #[error(transparent)]
    ForeignOs(Box<ForeignOs>),
    /// The manifest list of `build --manifest`.
    #[error(transparent)]
    Index(Box<IndexError>),
    /// A `RUN --mount=type=secret,...,required=true` whose secret the
    /// build was not given (found before anything runs).
    #[error("this step requires the secret `{id}`, which was not given; pass it with --secret id={id},src=FILE or --secret id={id},env=VAR")]
    MissingSecret { id: String },
    /// A RUN or PKG process that ran and failed.
    #[error("the command ended with {0}")]
    StepFailed(Outcome),
    /// The step (or stage) this error happened in.
    #[error(transparent)]
    Located(Box<Located>),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// What an ADD names that could not be fetched or read.
    #[error(transparent)]
    Add(#[from] super::add::AddError),
    /// A PKG step by jbuild's installer.
    #[error(transparent)]
    Pkg(Box<crate::pkg::install::InstallError>),
    /// The first-start script a PKG step writes for deferred work.
    #[error(transparent)]
    Firstboot(#[from] crate::pkg::firstboot::FirstbootError),
    /// A FROM or `COPY --from` image that cannot be read.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// A FROM or `COPY --from` image whose layers cannot be unpacked.
    #[error(transparent)]
    Unpack(Box<UnpackError>),
    /// A FROM image that could not be pulled.
    #[error(transparent)]
    Pull(Box<PullError>),
    /// A layer of the new image that could not be exported.
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<UnpackError> for BuildError {
    fn from(e: UnpackError) -> Self {
        BuildError::Unpack(Box::new(e))
    }
}

impl From<IndexError> for BuildError {
    fn from(e: IndexError) -> Self {
        BuildError::Index(Box::new(e))
    }
}

impl From<PullError> for BuildError {
    fn from(e: PullError) -> Self {
        BuildError::Pull(Box::new(e))
    }
}

impl BuildError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        BuildError::Io {
            context: context.into(),
            source,
        }
    }

    /// Attaches the Jailfile location (once: an error already located keeps
    /// its innermost location).
    pub fn located(self, location: &Location) -> BuildError {
        match self {
            e @ BuildError::Located(_) | e @ BuildError::Jailfile(_) | e @ BuildError::Plan(_) => e,
            e => BuildError::Located(Box::new(Located {
                location: location.clone(),
                step: None,
                error: e,
            })),
        }
    }

    pub fn with_step(self, text: &str) -> BuildError {
        match self {
            BuildError::Located(mut at) if at.step.is_none() => {
                let short: String = text.lines().next().unwrap_or("").chars().take(80).collect();
                at.step = Some(short);
                BuildError::Located(at)
            }
            e => e,
        }
    }
}

impl From<crate::pkg::install::InstallError> for BuildError {
    fn from(e: crate::pkg::install::InstallError) -> Self {
        BuildError::Pkg(Box::new(e))
    }
}

impl Blame for BuildError {
    /// Whether the user can fix this by changing the recipe, the context
    /// or the command line (exit code 1) rather than it being a fault of
    /// jbuild or the system (exit code 2).
    fn is_user_error(&self) -> bool {
        match self {
            BuildError::Jailfile(_)
            | BuildError::Target(_)
            | BuildError::NotPulled(_)
            | BuildError::Step(_)
            | BuildError::StepFailed(_)
            | BuildError::Foreign { .. }
            | BuildError::ForeignOs(_)
            | BuildError::MissingSecret { .. } => true,
            BuildError::Index(e) => e.is_user_error(),
            BuildError::Add(e) => e.is_user_error(),
            BuildError::Pkg(e) => e.is_user_error(),
            BuildError::Firstboot(e) => e.is_user_error(),
            BuildError::Plan(e) => e.is_user_error(),
            BuildError::Context(e) | BuildError::Native(e) => e.is_user_error(),
            BuildError::Exec(e) => e.is_user_error(),
            BuildError::Release(e) => e.is_user_error(),
            BuildError::Located(at) => at.error.is_user_error(),
            BuildError::Image(e) => e.is_user_error(),
            BuildError::Unpack(e) => e.is_user_error(),
            BuildError::Pull(e) => e.is_user_error(),
            BuildError::Store(e) => e.is_user_error(),
            BuildError::Snapshot(e) => e.is_user_error(),
            BuildError::Export(e) => e.is_user_error(),
            BuildError::Io { .. } => false,
        }
    }
}

/// A build error at the Jailfile line (and step) it happened in, shown on
/// one line as `Jailfile:3:1: `RUN x`: what went wrong`. A wrapper that
/// prints its error: the error's own causes follow it, not the error again.
#[derive(Debug)]
pub struct Located {
    pub location: Location,
    pub step: Option<String>,
    pub error: BuildError,
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.location)?;
        if let Some(step) = &self.step {
            write!(f, "`{step}`: ")?;
        }
        self.error.fmt(f)
    }
}

impl std::error::Error for Located {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// A RUN over a root whose programs this host's OS cannot run.
#[derive(Debug)]
pub struct ForeignOs {
    /// The stage's platform.
    pub platform: Platform,
    /// This host, as `os/arch`.
    pub host: String,
    pub root: RootOs,
    /// The PKG line that does what this RUN does, if it only installs
    /// packages.
    pub pkg_line: Option<String>,
}

impl std::error::Error for ForeignOs {}

impl fmt::Display for ForeignOs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let os = os_name(&self.root.os);
        write!(
            f,
            "this step would run {os} programs (a {} root, as {} says) on this {} host, \
             which cannot run them: on Linux, RUN starts the root's programs on the host's kernel. \
             Build on {os}",
            self.platform, self.root.known_from, self.host
        )?;
        if self.root.from_image {
            write!(
                f,
                ", or, if that image holds programs for this host, build it with --platform {}",
                self.host
            )?;
        }
        if let Some(line) = &self.pkg_line {
            write!(
                f,
                ". `{line}` does the same as this line, and builds on any host: jbuild \
                 installs the packages itself"
            )?;
        }
        Ok(())
    }
}

/// An OS as people write it: `FreeBSD` for `freebsd`.
fn os_name(os: &str) -> &str {
    match os {
        "freebsd" => "FreeBSD",
        "linux" => "Linux",
        other => other,
    }
}
