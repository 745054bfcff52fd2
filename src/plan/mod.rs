//! The planner: a resolved Jailfile in, steps with cache keys out. Nothing
//! runs here, so caching can be tested with fake inputs (BuildKit's split
//! of what a step *is* from running it).
//!
//! Three phases, each in its own place:
//!
//! 1. **needs** ([`needs::needs`]): from the parsed recipe and the
//!    options alone, what the plan will read — images, releases, package
//!    repositories, ADD URLs and git repositories, build-context digests
//!    ([`Need`]), per platform where it matters;
//! 2. **fetch** (the engine's `engine::fetch`, or a test's
//!    [`InputSource`]): each need answered once, into [`Inputs`];
//! 3. **plan** ([`plan`]): stage selection (`select`), then each stage
//!    (`stage`) and each step's key (`step`), reading only `&Inputs`
//!    — data, with no client and no source to ask, so a pull or a
//!    download here cannot happen; a need without an answer is a
//!    [`NotFetched`] error (a bug), never a fetch.
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
//! - for PKG, also the FreeBSD ABI and OSVERSION of a release's root, and
//!   what the step finds in the root it runs on ([`PkgRoot`]): the
//!   root's ABI, its repository configuration (the image's
//!   `/etc/pkg/*.conf` and `/usr/local/etc/pkg/repos/*.conf`, with
//!   `--pkg-repos` in place of the latter) and the digest of each enabled
//!   repository's catalogue (see "Keys finished when the step is
//!   reached" below);
//! - for COPY, the content digest of its sources (including mode and owner,
//!   not mtimes) and the WORKDIR a relative destination is taken against;
//! - for ADD, the same for its context sources, the content digest of
//!   each URL's file (its `--checksum`, else the file the fetch phase
//!   downloaded: [`Need::Url`]) and the commit each git repository's
//!   ref resolves to ([`Need::Git`]), which the history records too
//!   ([`PlannedStep::recorded`]).
//! - for `RUN --mount`, each mount's options (type, target, id, sharing,
//!   mode, owner, size) and, for a bind mount, what it shows (the content
//!   digest of its source in the context, or the stage's or image's
//!   identity) — never a secret's value nor a cache mount's contents.
//!
//! Metadata instructions (ENV, LABEL, CMD, ...) have no key of their own;
//! they are history entries with `empty_layer` and edit the config.
//!
//! ## Keys finished when the step is reached
//!
//! A PKG step installs from the repositories its root names, and that
//! root is known only once its parent snapshot exists: a base image's
//! layers, a COPY of a `.conf` file, a RUN that writes one, a stage
//! copied from — any of them may set the repositories, and a RUN's
//! output cannot be known without running it. So the fetch phase cannot
//! answer it, and a key made without it names the wrong catalogue (a
//! repository that moved on would give a stale cache hit). The planner
//! therefore leaves such a key pending ([`Pending`]): the build loop, on
//! reaching the step, reads the parent snapshot (any backend's
//! `Snapshotter::view`), gives the answer ([`Inputs::answer_pkg_root`])
//! and plans again. The answer is keyed by the parent's identity and the
//! platform, so the new plan keeps every key it had that does not build
//! on this step, and every key that does (later steps, stages FROM this
//! one, `COPY --from` it) chains from the finished key, as if it had been
//! known from the start. (Reading the base image's layers for the
//! repository files in the fetch phase would be right only when no
//! earlier step can write them; a RUN can, so that is not done.)

mod error;
pub mod inputs;
pub mod key;
pub mod needs;
mod select;
mod stage;
pub mod state;
mod step;

use crate::digest::Digest;
use crate::image::Platform;
use crate::jailfile::{Location, Step};
pub use error::{InputError, NotFetched, PlanError, PlanErrorKind};
pub use inputs::{InputSource, Inputs};
pub use needs::{needs, BaseKey, Need};
pub use select::{needed_stages, target_stage, UnknownTarget};
pub use stage::plan;
pub use state::ImageState;
use std::sync::Arc;

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

/// What a PKG step reads from the root it runs on (its repository
/// configuration, ABI and the repositories' catalogues), asked of the
/// build loop when the step is reached (see "Keys finished when the step
/// is reached" in the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkgRoot {
    /// The identity of the root: the previous layer step's key, or the
    /// stage base's identity.
    pub parent: Digest,
    /// The OCI architecture the packages are for (the step's platform):
    /// with the root's userland, what the ABI is.
    pub arch: String,
}

/// Why a layer step's key is not final yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// It is a PKG step whose root's answer the build loop gives when it
    /// reaches the step (its parent is final).
    Awaits(PkgRoot),
    /// It builds on, or reads from, a step whose key is pending; it is
    /// final once that one is answered.
    Upstream,
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
    /// `[pkg] scripts`: what PKG steps without `--scripts=` do with a
    /// script command jbuild does not carry out (it changes their result,
    /// so it is in their keys).
    pub pkg_scripts: crate::config::PkgScripts,
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
        /// `Some`: `key` is not final (nothing may be looked up, reused
        /// or committed under it); the build loop answers it when it
        /// reaches the step and plans again.
        pending: Option<Pending>,
    },
}

#[derive(Debug, Clone)]
pub struct PlannedStep {
    /// 1-based across the whole plan (FROM lines count), for progress.
    pub number: usize,
    /// The resolved step, shared with the resolved file (a step can hold
    /// megabytes of values; re-planning makes the plan again).
    pub step: Arc<Step>,
    /// The step's text as history records it where it is not the step's
    /// own text: with the commit each git repository an ADD reads was
    /// pinned to ([`PlannedStep::recorded`]).
    pub pinned: Option<String>,
    pub kind: StepKind,
}

impl PlannedStep {
    /// The step's text as history and provenance record it: its text,
    /// with the commit each git repository an ADD reads was pinned to.
    pub fn recorded(&self) -> &str {
        self.pinned.as_deref().unwrap_or(&self.step.text)
    }
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
    /// Whether `top_identity` is pending (a PKG step of this stage, or of
    /// a stage it builds on or reads, is not answered yet).
    pub pending: bool,
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

    /// The stage's head: everything but its steps, and its base's state
    /// for its end state. What the build loop keeps of a stage while the
    /// plan may be made again, without a copy of every step's values (an
    /// ENV of a megabyte is in each state after it).
    pub fn head(&self) -> PlannedStage {
        PlannedStage {
            index: self.index,
            name: self.name.clone(),
            base: self.base.clone(),
            from_text: self.from_text.clone(),
            from_number: self.from_number,
            location: self.location.clone(),
            steps: Vec::new(),
            base_state: self.base_state.clone(),
            state: self.base_state.clone(),
            top_identity: self.top_identity.clone(),
            top_key: self.top_key.clone(),
            pending: self.pending,
            freebsd: self.freebsd.clone(),
            root_os: self.root_os.clone(),
        }
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

#[cfg(test)]
mod tests;
