//! The planner: a resolved Jailfile in, steps with cache keys out. Nothing
//! runs here, so caching can be tested with fake inputs (BuildKit's split
//! of what a step *is* from running it).
//!
//! A filesystem-changing step's key covers what decides its result:
//!
//! - the identity of what it starts from (the previous layer's key, or the
//!   base: `scratch` and the platform, a base image's manifest digest, an
//!   earlier stage's top layer);
//! - the instruction after substitution and the ARG values it uses;
//! - for RUN and PKG, the execution context (ENV, USER, WORKDIR, `JAIL`
//!   parameters) — nothing else of the config, so a changed LABEL does not
//!   re-run a single step;
//! - for PKG, also the FreeBSD ABI and OSVERSION of the root and the
//!   state of the package repositories ([`PlanInputs::pkg_repositories`]);
//! - for COPY, the content digest of its sources (including mode and owner,
//!   not mtimes) and the WORKDIR a relative destination is taken against;
//! - for ADD, the same for its context sources, the content digest of
//!   each URL's file (its `--checksum`, else the file downloaded now:
//!   [`PlanInputs::remote_file`]) and the commit each git repository's
//!   ref resolves to ([`PlanInputs::git_commit`]), which the history
//!   records too ([`PlannedStep::recorded`]).
//! - for `RUN --mount`, each mount's options (type, target, id, sharing,
//!   mode, owner, size) and, for a bind mount, what it shows (the content
//!   digest of its source in the context, or the stage's or image's
//!   identity) — never a secret's value nor a cache mount's contents.
//!
//! Metadata instructions (ENV, LABEL, CMD, ...) have no key of their own;
//! they are history entries with `empty_layer` and edit the config.

pub mod bases;
pub mod key;
pub mod state;

use crate::blame::Blame;
use std::collections::BTreeSet;
use std::error::Error;
use std::fmt;

use crate::digest::Digest;
use crate::image::platform::BadPlatform;
use crate::image::Platform;
use crate::jailfile::{
    AddSource, Base, Build, CopyFrom, CopySource, Location, MountKind, Op, Step,
};
use key::KeyEncoder;
pub use state::ImageState;

/// What the planner needs from the outside world.
pub trait PlanInputs {
    /// The manifest digest and config of an image named in FROM or
    /// `COPY --from`, for `platform`.
    fn image(&self, reference: &str, platform: &Platform) -> Result<BaseImage, InputError>;
    /// The content digest of what a COPY from the build context reads.
    fn context_sources(&self, sources: &[CopySource]) -> Result<Digest, InputError>;
    /// The content digest of what a `RUN --mount=type=bind` of the build
    /// context shows: like [`PlanInputs::context_sources`], but with the
    /// files `.jailignore` leaves out too (a mount cannot hide them).
    fn bound_context(&self, paths: &[String]) -> Result<Digest, InputError> {
        let sources: Vec<CopySource> = paths.iter().cloned().map(CopySource::Path).collect();
        self.context_sources(&sources)
    }
    /// The distribution sets `FROM freebsd:<release>` is made of, as
    /// `(name, sha256)` from the release's verified MANIFEST, in
    /// extraction order.
    fn release(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<Vec<(String, Digest)>, InputError> {
        let _ = platform;
        Err(InputError::user(format!(
            "FROM freebsd:{release} needs a release mirror, which this build was not given"
        )))
    }
    /// What `FROM freebsd:<release>` is made of: its distribution sets
    /// ([`PlanInputs::release`]) unless the build makes this release's
    /// base from the pkgbase repository.
    fn release_contents(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<ReleaseContents, InputError> {
        self.release(release, platform).map(ReleaseContents::Sets)
    }
    /// What PKG steps depend on besides the root: the repository
    /// configuration and the state of the repositories' catalogues (see
    /// `engine::freebsd`, "PKG keying"). `abi` is `FreeBSD:14:amd64` when
    /// the stage's release is known.
    fn pkg_repositories(&self, abi: Option<&str>) -> Result<String, InputError> {
        let _ = abi;
        Ok("unknown".into())
    }
    /// The content digest of the file an ADD downloads from `url`: the
    /// `--checksum` itself when given (the file is fetched, and checked
    /// against it, only when the step runs), else the digest of the file
    /// downloaded now into jbuild's cache.
    fn remote_file(&self, url: &str, checksum: Option<&Digest>) -> Result<Digest, InputError> {
        match checksum {
            Some(d) => Ok(d.clone()),
            None => Err(InputError::user(format!(
                "ADD {url}: this build cannot download files"
            ))),
        }
    }
    /// The commit (hex) the git repository `url` has at `reference` (its
    /// default branch when `None`): what an ADD of it is pinned to.
    fn git_commit(&self, url: &str, reference: Option<&str>) -> Result<String, InputError> {
        let _ = reference;
        Err(InputError::user(format!(
            "ADD {url}: this build cannot read git repositories"
        )))
    }
}

/// What a `FROM freebsd:<release>` base is made of, as it is keyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseContents {
    /// Distribution sets, `(name, sha256)`, in extraction order.
    Sets(Vec<(String, Digest)>),
    /// Packages installed from a pkgbase repository (`FreeBSD-set-...`),
    /// and what else decides the result: the repository, the identity of
    /// its catalogue, the signing keys (`release::PkgBase::identity`).
    Packages {
        packages: Vec<String>,
        source: String,
    },
}

/// The FreeBSD version a stage's root is known to have (from `FROM
/// freebsd:<release>`, or the stage it builds on): what pkg(8) calls ABI
/// and OSVERSION.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeBsdVersion {
    /// `FreeBSD:14:amd64`
    pub abi: String,
    /// `__FreeBSD_version` of the release: `1403000` for 14.3.
    pub osversion: u32,
}

impl FreeBsdVersion {
    /// From a release name (`14.3-RELEASE-p2`) and an OCI architecture.
    /// Releases have `__FreeBSD_version` = major * 100000 + minor * 1000.
    pub fn of_release(release: &str, architecture: &str) -> Option<FreeBsdVersion> {
        let version = release.split('-').next()?;
        let (major, minor) = version.split_once('.')?;
        let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
        let arch = match architecture {
            "arm64" => "aarch64",
            "386" => "i386",
            "ppc64" => "powerpc64",
            "ppc64le" => "powerpc64le",
            "arm" => "armv7",
            other => other,
        };
        Some(FreeBsdVersion {
            abi: format!("FreeBSD:{major}:{arch}"),
            osversion: major * 100_000 + minor * 1000,
        })
    }
}

#[derive(Debug, Clone)]
pub struct BaseImage {
    pub manifest: Digest,
    pub config: oci_spec::image::ImageConfiguration,
    /// What the config holds that only Docker's has.
    pub extras: crate::image::config::ConfigExtras,
}

#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// `--platform`: overrides FROM's and the base image's.
    pub platform: Option<Platform>,
    /// `--no-cache`: a nonce mixed into every key, so nothing matches.
    pub no_cache_nonce: Option<String>,
    /// `--target`: the stage (its index in the Jailfile, see
    /// [`target_stage`]) to build, with the stages it needs; `None`: the
    /// last one.
    pub target: Option<usize>,
}

/// A `--target` that names no stage of the Jailfile.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{file}` has no stage `{target}` to build; its stages are {}",
    stages.join(", ")
)]
pub struct UnknownTarget {
    pub target: String,
    pub file: String,
    /// Each stage as it can be named: `name (index)`, or the index alone.
    pub stages: Vec<String>,
}

/// The index of the stage `target` names: its `AS` name (any case, as
/// names are kept lowercased), else its index in the Jailfile.
pub fn target_stage(build: &Build, target: &str) -> Result<usize, UnknownTarget> {
    let lower = target.to_ascii_lowercase();
    let by_name = build
        .stages
        .iter()
        .find(|s| s.name.as_deref() == Some(lower.as_str()));
    let by_index = || {
        target
            .parse::<usize>()
            .ok()
            .filter(|i| *i < build.stages.len())
    };
    match by_name.map(|s| s.index).or_else(by_index) {
        Some(i) => Ok(i),
        None => Err(UnknownTarget {
            target: target.to_string(),
            file: build
                .stages
                .first()
                .map(|s| s.location.file.display().to_string())
                .unwrap_or_default(),
            stages: build
                .stages
                .iter()
                .map(|s| match &s.name {
                    Some(n) => format!("`{n}` ({})", s.index),
                    None => format!("`{}`", s.index),
                })
                .collect(),
        }),
    }
}

/// Why a [`PlanInputs`] question had no answer: the error itself, kept
/// whole as the cause (the report shows its chain; the CLI looks in it for
/// a full disk), and whether the user can fix it (a name, a context file,
/// a release) or it is a fault of jbuild or the system.
pub struct InputError {
    user: bool,
    error: Box<dyn Error + Send + Sync>,
}

impl InputError {
    pub fn new(user: bool, error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        InputError {
            user,
            error: error.into(),
        }
    }

    /// The user's to fix: exit code 1. A `String` makes a plain message.
    pub fn user(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        InputError::new(true, error)
    }

    /// jbuild's or the system's fault: exit code 2.
    pub fn internal(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        InputError::new(false, error)
    }

    /// The error the input gave.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl Blame for InputError {
    fn is_user_error(&self) -> bool {
        self.user
    }
}

impl fmt::Debug for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputError")
            .field("user", &self.user)
            .field("error", &self.error)
            .finish()
    }
}

/// Shows the input's error as it is, a transparent wrapper: the input
/// error's own causes follow it (not the error again, which would print
/// its line twice).
impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl Error for InputError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

/// A plan that cannot be made, at the Jailfile line it is about, shown on
/// one line (`Jailfile:2:1: what`); the kind's own causes follow it.
#[derive(Debug)]
pub struct PlanError {
    pub location: Location,
    pub kind: PlanErrorKind,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.kind)
    }
}

impl Error for PlanError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.kind.source()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanErrorKind {
    #[error("the Jailfile has no FROM line")]
    NoFrom,
    #[error(transparent)]
    Platform(#[from] BadPlatform),
    #[error("stage {0} is not built before this one")]
    StageNotBuilt(usize),
    #[error("COPY --from stage {0} is not built before this one")]
    CopyFromNotBuilt(usize),
    /// A question to [`PlanInputs`] that had no answer.
    #[error(transparent)]
    Input(#[from] InputError),
}

impl Blame for PlanError {
    /// Whether the user can fix this (exit code 1): always, but for an
    /// input that failed by a fault of jbuild or the system.
    fn is_user_error(&self) -> bool {
        match &self.kind {
            PlanErrorKind::Input(e) => e.is_user_error(),
            PlanErrorKind::NoFrom
            | PlanErrorKind::Platform(_)
            | PlanErrorKind::StageNotBuilt(_)
            | PlanErrorKind::CopyFromNotBuilt(_) => true,
        }
    }
}

#[derive(Debug, Clone)]
pub enum PlannedBase {
    Scratch,
    /// `FROM freebsd:<release>`: one layer made of the release's sets;
    /// its snapshot is `step-<key>`.
    FreeBsdRelease {
        release: String,
        key: Digest,
    },
    Image {
        reference: String,
        manifest: Digest,
    },
    Stage(usize),
}

/// What a RUN or PKG step runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecContext {
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub workdir: String,
    pub jail: Vec<(String, String)>,
    /// `SHELL`: what a shell-form RUN runs with (`None`: `/bin/sh -c`).
    pub shell: Option<Vec<String>>,
    /// The platform an image named by `COPY --from` or a bind mount's
    /// `from=` is read for: the build's (`--platform`), else the stage's
    /// FROM `--platform`, else the default; never the host's by accident.
    pub platform: Platform,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    /// Edits the config only.
    Metadata,
    /// Makes a layer: committed as snapshot `key`, on top of `parent` (the
    /// previous layer step of this stage) or of the stage's base.
    Layer {
        key: Digest,
        parent: Option<Digest>,
        /// Boxed: most steps of a plan are layers, and the context is the
        /// larger part of one.
        exec: Box<ExecContext>,
    },
}

#[derive(Debug, Clone)]
pub struct PlannedStep {
    /// 1-based across the whole plan (FROM lines count), for progress.
    pub number: usize,
    pub step: Step,
    /// The step's text as history and provenance record it: its text,
    /// with the commit each git repository an ADD reads was pinned to.
    pub recorded: String,
    pub kind: StepKind,
}

#[derive(Debug, Clone)]
pub struct PlannedStage {
    pub index: usize,
    pub name: Option<String>,
    pub base: PlannedBase,
    pub from_text: String,
    pub from_number: usize,
    pub location: Location,
    pub steps: Vec<PlannedStep>,
    /// The config state at the start (from the base) and at the end.
    pub base_state: ImageState,
    pub state: ImageState,
    /// The identity of the stage's top filesystem: its last layer key, or
    /// its base's identity when it has no layer step.
    pub top_identity: Digest,
    /// The key of the stage's last layer step, if any.
    pub top_key: Option<Digest>,
    /// The FreeBSD version of the stage's root, when known.
    pub freebsd: Option<FreeBsdVersion>,
    /// What the programs in the stage's root are built for, when the base
    /// says so: what decides whether a RUN can start them on this host
    /// (`engine::foreign`).
    pub root_os: Option<RootOs>,
}

/// The operating system a stage's root holds programs for, and how that
/// is known. `FROM freebsd:<release>` holds FreeBSD; a FROM image's config
/// names its `os`; a stage FROM an earlier stage holds what that one does.
/// `FROM scratch` is not known: only the recipe's own COPYs put programs
/// there, and the platform jbuild labels it with (FreeBSD by default, as
/// jbuild makes jail templates) says nothing of them. An image config
/// naming no OS is not known either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootOs {
    /// As an image config's `os` has it: `freebsd`, `linux`.
    pub os: String,
    /// Where that comes from, for messages: `FROM freebsd:14.3-RELEASE`,
    /// or the config of the image FROM names.
    pub known_from: String,
    /// Whether it comes from an image's config, which `--platform` at
    /// that image's build may have set.
    pub from_image: bool,
}

impl PlannedStage {
    /// How users name the stage in messages.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.index.to_string())
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    /// Only the stages the target needs, in file order. `stages[i].index`
    /// is the position in the Jailfile.
    pub stages: Vec<PlannedStage>,
    pub total_steps: usize,
}

impl Plan {
    pub fn stage(&self, index: usize) -> Option<&PlannedStage> {
        self.stages.iter().find(|s| s.index == index)
    }

    pub fn target(&self) -> &PlannedStage {
        self.stages.last().expect("a plan has at least one stage")
    }
}

/// The stages `target` needs (itself included), directly or through others.
pub fn needed_stages(build: &Build, target: usize) -> BTreeSet<usize> {
    let mut needed = BTreeSet::new();
    let mut todo = vec![target];
    while let Some(i) = todo.pop() {
        if !needed.insert(i) {
            continue;
        }
        let stage = &build.stages[i];
        if let Base::Stage(b) = stage.base {
            todo.push(b);
        }
        for step in &stage.steps {
            match &step.op {
                Op::Copy {
                    from: Some(CopyFrom::Stage(s)),
                    ..
                } => todo.push(*s),
                Op::Run { mounts, .. } => {
                    todo.extend(mounts.iter().filter_map(|m| match &m.kind {
                        MountKind::Bind {
                            from: Some(CopyFrom::Stage(s)),
                            ..
                        } => Some(*s),
                        _ => None,
                    }))
                }
                _ => {}
            }
        }
    }
    needed
}

#[allow(clippy::too_many_lines)] // split on branch wt/planfetch
pub fn plan(build: &Build, inputs: &dyn PlanInputs, opts: &PlanOptions) -> Result<Plan, PlanError> {
    if build.stages.is_empty() {
        return Err(PlanError {
            location: crate::jailfile::Location {
                file: Default::default(),
                line: 1,
                column: 1,
            },
            kind: PlanErrorKind::NoFrom,
        });
    }
    let last = build.stages.len() - 1;
    let needed = needed_stages(build, opts.target.unwrap_or(last).min(last));
    let mut stages: Vec<PlannedStage> = Vec::new();
    let mut number = 0;
    for stage in build.stages.iter().filter(|s| needed.contains(&s.index)) {
        let err = |kind: PlanErrorKind| PlanError {
            location: stage.location.clone(),
            kind,
        };
        let platform = match (&opts.platform, &stage.platform) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(p)) => Some(Platform::parse(p).map_err(|e| err(e.into()))?),
            (None, None) => None,
        };
        let sources_platform = platform.clone().unwrap_or_else(Platform::default_for_host);
        let (base, base_state, base_identity) = match &stage.base {
            Base::Scratch => {
                let p = platform.unwrap_or_else(Platform::default_for_host);
                let id = KeyEncoder::new()
                    .str("base", "scratch")
                    .str("platform", &p.to_string())
                    .finish();
                (PlannedBase::Scratch, ImageState::empty(p), id)
            }
            Base::FreeBsdRelease(rel) => {
                let p = platform.unwrap_or_else(Platform::default_for_host);
                let contents = inputs
                    .release_contents(rel, &p)
                    .map_err(|e| err(e.into()))?;
                let mut e = KeyEncoder::new();
                let shown = match &contents {
                    ReleaseContents::Sets(sets) => {
                        e.str("base", "freebsd-release")
                            .str("release", rel)
                            .str("platform", &p.to_string())
                            .str("set.count", &sets.len().to_string());
                        for (name, sha) in sets {
                            e.str("set.name", name).str("set.sha256", &sha.to_string());
                        }
                        let shown: Vec<String> =
                            sets.iter().map(|(n, d)| format!("{n}.txz {d}")).collect();
                        shown.join(", ")
                    }
                    ReleaseContents::Packages { packages, source } => {
                        e.str("base", "freebsd-pkgbase")
                            .str("release", rel)
                            .str("platform", &p.to_string())
                            .str("package.count", &packages.len().to_string());
                        for name in packages {
                            e.str("package", name);
                        }
                        e.str("source", source);
                        format!("pkgbase {}; {source}", packages.join(" "))
                    }
                };
                let id = e.finish();
                let mut state = ImageState::empty(p);
                state.history.push(state::HistoryEntry {
                    created_by: format!("{} ({shown})", stage.from_text),
                    empty_layer: false,
                    inherited: None,
                });
                (
                    PlannedBase::FreeBsdRelease {
                        release: rel.clone(),
                        key: id.clone(),
                    },
                    state,
                    id,
                )
            }
            Base::Image(reference) => {
                let p = platform.unwrap_or_else(Platform::default_for_host);
                let img = inputs.image(reference, &p).map_err(|e| err(e.into()))?;
                let id = KeyEncoder::new()
                    .str("base", "image")
                    .str("manifest", &img.manifest.to_string())
                    .finish();
                let mut state = ImageState::from_config_with(&img.config, &img.extras);
                // Its ONBUILD triggers ran in this stage (the resolver
                // put them after FROM); the new image does not keep them.
                state.docker.onbuild.clear();
                (
                    PlannedBase::Image {
                        reference: reference.clone(),
                        manifest: img.manifest,
                    },
                    state,
                    id,
                )
            }
            Base::Stage(i) => {
                let parent = stages
                    .iter()
                    .find(|s| s.index == *i)
                    .ok_or_else(|| err(PlanErrorKind::StageNotBuilt(*i)))?;
                let mut state = parent.state.clone();
                if let Some(p) = platform {
                    state.platform = p;
                }
                // Its ONBUILD triggers ran in this stage (see the resolver).
                state.docker.onbuild.clear();
                (PlannedBase::Stage(*i), state, parent.top_identity.clone())
            }
        };
        let root_os = match &stage.base {
            Base::Scratch => None,
            Base::FreeBsdRelease(_) => Some(RootOs {
                os: "freebsd".into(),
                known_from: format!("`{}`", stage.from_text),
                from_image: false,
            }),
            Base::Image(reference) => {
                let os = &base_state.platform.os;
                (!os.is_empty()).then(|| RootOs {
                    os: os.clone(),
                    known_from: format!("the config of image `{reference}`"),
                    from_image: true,
                })
            }
            Base::Stage(i) => stages
                .iter()
                .find(|s| s.index == *i)
                .and_then(|s| s.root_os.clone()),
        };
        let freebsd = match &stage.base {
            Base::FreeBsdRelease(rel) => {
                FreeBsdVersion::of_release(rel, &base_state.platform.architecture)
            }
            Base::Stage(i) => stages
                .iter()
                .find(|s| s.index == *i)
                .and_then(|s| s.freebsd.clone()),
            Base::Scratch | Base::Image(_) => None,
        };
        number += 1;
        let from_number = number;
        let mut state = base_state.clone();
        let mut steps = Vec::with_capacity(stage.steps.len());
        let mut identity = base_identity;
        let mut top_key = None;
        for step in &stage.steps {
            number += 1;
            let kind = if step.op.changes_filesystem() {
                let exec = ExecContext {
                    env: state.env.clone(),
                    user: state.user.clone(),
                    workdir: state.cwd().to_string(),
                    jail: state.jail.clone(),
                    shell: state.docker.shell.clone(),
                    platform: sources_platform.clone(),
                };
                let key = step_key(
                    &identity,
                    step,
                    &exec,
                    freebsd.as_ref(),
                    &stages,
                    inputs,
                    opts,
                )
                .map_err(|kind| PlanError {
                    location: step.location.clone(),
                    kind,
                })?;
                identity = key.clone();
                let parent = top_key.replace(key.clone());
                StepKind::Layer {
                    key,
                    parent,
                    exec: Box::new(exec),
                }
            } else {
                state::apply(&mut state, &step.op);
                StepKind::Metadata
            };
            let recorded = pinned_text(step, inputs).map_err(|kind| PlanError {
                location: step.location.clone(),
                kind,
            })?;
            state.history.push(state::HistoryEntry {
                created_by: recorded.clone(),
                empty_layer: matches!(kind, StepKind::Metadata),
                inherited: None,
            });
            steps.push(PlannedStep {
                number,
                step: step.clone(),
                recorded,
                kind,
            });
        }
        stages.push(PlannedStage {
            index: stage.index,
            name: stage.name.clone(),
            base,
            from_text: stage.from_text.clone(),
            from_number,
            location: stage.location.clone(),
            steps,
            base_state,
            state,
            top_identity: identity,
            top_key,
            freebsd,
            root_os,
        });
    }
    Ok(Plan {
        stages,
        total_steps: number,
    })
}

/// The step's text as history keeps it: an ADD of a git repository says
/// the commit each repository was pinned to (the inputs answer from what
/// the key asked).
fn pinned_text(step: &Step, inputs: &dyn PlanInputs) -> Result<String, PlanErrorKind> {
    let mut text = step.text.clone();
    if let Op::Add { sources, .. } = &step.op {
        for s in sources {
            if let AddSource::Git { url, reference } = s {
                let commit = inputs.git_commit(url, reference.as_deref())?;
                text.push_str(&format!(" (git {url} at commit {commit})"));
            }
        }
    }
    Ok(text)
}

/// The identity of the stage or image a COPY or a bind mount reads from:
/// an earlier stage's top identity, or an image's manifest digest.
fn source_identity(
    from: &CopyFrom,
    done: &[PlannedStage],
    inputs: &dyn PlanInputs,
    platform: &Platform,
) -> Result<Digest, PlanErrorKind> {
    Ok(match from {
        CopyFrom::Stage(i) => done
            .iter()
            .find(|s| s.index == *i)
            .ok_or(PlanErrorKind::CopyFromNotBuilt(*i))?
            .top_identity
            .clone(),
        CopyFrom::Image(r) => inputs.image(r, platform)?.manifest,
    })
}

fn step_key(
    parent: &Digest,
    step: &Step,
    exec: &ExecContext,
    freebsd: Option<&FreeBsdVersion>,
    done: &[PlannedStage],
    inputs: &dyn PlanInputs,
    opts: &PlanOptions,
) -> Result<Digest, PlanErrorKind> {
    let mut e = KeyEncoder::new();
    e.str("parent", &parent.to_string());
    key::encode_op(&mut e, &step.op);
    e.pairs(
        "arg",
        step.args.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    match &step.op {
        Op::Run { .. } | Op::Pkg { .. } => {
            e.pairs(
                "env",
                exec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            e.opt("user", exec.user.as_deref());
            e.str("workdir", &exec.workdir);
            e.pairs(
                "jail",
                exec.jail.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            if let (Some(shell), Op::Run { .. }) = (&exec.shell, &step.op) {
                // Only when set, so keys made before SHELL existed stay.
                e.list("shell", shell.iter().map(String::as_str));
            }
            if let Op::Run { mounts, .. } = &step.op {
                for m in mounts {
                    if let MountKind::Bind { from, source, .. } = &m.kind {
                        let digest = match from {
                            None => inputs.bound_context(std::slice::from_ref(source))?,
                            Some(f) => source_identity(f, done, inputs, &exec.platform)?,
                        };
                        e.str("mount.sources", &digest.to_string());
                    }
                }
            }
            if let Op::Pkg { .. } = step.op {
                // pkg(8) picks packages by ABI and OSVERSION, from the
                // repositories' current catalogue: a new catalogue is a
                // new step (see key.rs, version 2).
                e.opt("pkg.abi", freebsd.map(|v| v.abi.as_str()));
                e.opt(
                    "pkg.osversion",
                    freebsd.map(|v| v.osversion.to_string()).as_deref(),
                );
                let repos = inputs.pkg_repositories(freebsd.map(|v| v.abi.as_str()))?;
                e.str("pkg.repositories", &repos);
            }
        }
        Op::Add {
            sources, checksum, ..
        } => {
            e.str("workdir", &exec.workdir);
            let local: Vec<CopySource> = sources
                .iter()
                .filter_map(|s| match s {
                    AddSource::Context(c) => Some(c.clone()),
                    _ => None,
                })
                .collect();
            if !local.is_empty() {
                let digest = inputs.context_sources(&local)?;
                e.str("sources", &digest.to_string());
            }
            for s in sources {
                match s {
                    AddSource::Url(url) => {
                        let digest = inputs.remote_file(url, checksum.as_ref())?;
                        e.str("url.content", &digest.to_string());
                    }
                    AddSource::Git { url, reference } => {
                        let commit = inputs.git_commit(url, reference.as_deref())?;
                        e.str("git.commit", &commit);
                    }
                    AddSource::Context(_) => {}
                }
            }
        }
        Op::Copy { from, sources, .. } => {
            e.str("workdir", &exec.workdir);
            let digest = match from {
                None => inputs.context_sources(sources)?,
                Some(f) => source_identity(f, done, inputs, &exec.platform)?,
            };
            e.str("sources", &digest.to_string());
        }
        _ => {}
    }
    if let Some(nonce) = &opts.no_cache_nonce {
        e.str("no-cache", nonce);
    }
    Ok(e.finish())
}

#[cfg(test)]
mod tests;
