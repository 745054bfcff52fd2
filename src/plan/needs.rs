//! What a plan needs from outside the recipe, worked out before it is
//! planned: the [`Need`]s of the stages the target needs, each with the
//! platform the planner will read it for. The engine's fetch phase
//! (`engine::fetch`) gets an answer to each — pulling images, reading
//! release MANIFESTs, downloading ADD URLs,
//! mirroring git repositories, hashing the build context — into
//! [`super::Inputs`], and the planner reads only those answers.
//!
//! ## Adding a kind of need
//!
//! 1. a variant of [`Need`] (and its line in `Need`'s `Display`);
//! 2. where the recipe asks for it, a push in [`needs`] (through
//!    `super::select`, as the planner picks stages and platforms);
//! 3. a question of [`super::InputSource`] and its answer in
//!    `Inputs::fetch` (a variant of `inputs::Answer`, and a reader such as
//!    `Inputs::url`);
//! 4. the engine's answer in `engine::fetch` (`Fetching`'s impl of
//!    `InputSource`), keeping whatever the steps need later (a path, a
//!    mirror) in `FetchPhase`;
//! 5. the planner reads it with the reader: a need it finds missing is a
//!    [`super::NotFetched`] error, never a fetch.

use std::fmt;

use super::select::{planned_stages, stage_platform};
use super::PlanOptions;
use crate::image::Platform;
use crate::jailfile::{AddSource, Base, Build, CopyFrom, CopyOp, CopySource, MountKind, Op};

/// An image or a release as a build reads it: the reference as the
/// recipe wrote it (or the release's name), and the platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BaseKey {
    pub reference: String,
    pub platform: Platform,
}

impl BaseKey {
    pub fn new(reference: &str, platform: &Platform) -> BaseKey {
        BaseKey {
            reference: reference.to_string(),
            platform: platform.clone(),
        }
    }
}

/// One thing the planner reads from outside the recipe, before anything
/// runs. Images and releases are read per platform; the rest once a
/// build. (What a PKG step reads from the root it runs on is known only
/// when the step is reached: [`super::PkgRoot`], not a need.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// A `FROM`, `COPY --from` or `RUN --mount=from=` image: its manifest
    /// digest and config.
    Image(BaseKey),
    /// `FROM freebsd:<release>` (the key's reference is the release): its
    /// sets from the verified MANIFEST, or its pkgbase packages and
    /// catalogue.
    Release(BaseKey),
    /// An ADD URL without `--checksum`: the digest of its file, downloaded
    /// into jbuild's cache.
    Url(String),
    /// An ADD git repository: the commit its ref (the default branch
    /// when `None`) resolves to.
    Git {
        url: String,
        reference: Option<String>,
    },
    /// The content digest of what a COPY or ADD reads from the build
    /// context (`.jailignore` applied).
    Context(Vec<CopySource>),
    /// The content digest of what a `RUN --mount=type=bind` of the build
    /// context shows (nothing left out: a mount cannot hide files).
    BoundContext(Vec<String>),
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Image(k) => write!(f, "image `{}` ({})", k.reference, k.platform),
            Need::Release(k) => write!(f, "FreeBSD release {} ({})", k.reference, k.platform),
            Need::Url(url) => write!(f, "the file ADD downloads from {url}"),
            Need::Git { url, reference } => write!(
                f,
                "the commit of git repository {url} at {}",
                reference.as_deref().unwrap_or("its default branch")
            ),
            Need::Context(sources) => {
                let names: Vec<String> = sources
                    .iter()
                    .map(|s| match s {
                        CopySource::Path(p) => p.clone(),
                        CopySource::Inline { name, .. } => format!("<<{name}"),
                    })
                    .collect();
                write!(f, "the digest of build context sources {}", names.join(" "))
            }
            Need::BoundContext(paths) => {
                write!(f, "the digest of bind-mounted context {}", paths.join(" "))
            }
        }
    }
}

/// What [`super::plan`] will read, given the same `opts`, each once, in
/// the order it reads them. A stage whose FROM `--platform` cannot be
/// read is left out: the planner reports it at its line.
pub fn needs(build: &Build, opts: &PlanOptions) -> Vec<Need> {
    let mut out = Vec::new();
    for stage in planned_stages(build, opts) {
        let Ok(given) = stage_platform(stage, opts) else {
            continue;
        };
        let platform = given.unwrap_or_else(Platform::default_for_host);
        match &stage.base {
            Base::Scratch | Base::Stage(_) => {}
            Base::FreeBsdRelease(rel) => add(&mut out, Need::Release(BaseKey::new(rel, &platform))),
            Base::Image(r) => add(&mut out, Need::Image(BaseKey::new(r, &platform))),
        }
        for step in &stage.steps {
            step_needs(&step.op, &platform, &mut out);
        }
    }
    out
}

/// The sources of an ADD that are the build context's.
pub(super) fn add_context_sources(sources: &[AddSource]) -> Vec<CopySource> {
    sources
        .iter()
        .filter_map(|s| match s {
            AddSource::Context(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn add(out: &mut Vec<Need>, need: Need) {
    if !out.contains(&need) {
        out.push(need);
    }
}

/// What one step reads, as [`super::step`] keys it.
fn step_needs(op: &Op, platform: &Platform, out: &mut Vec<Need>) {
    let from = |f: &CopyFrom| match f {
        CopyFrom::Image(r) => Some(Need::Image(BaseKey::new(r, platform))),
        CopyFrom::Stage(_) => None,
    };
    match op {
        Op::Run { mounts, .. } => {
            for m in mounts {
                if let MountKind::Bind {
                    from: f, source, ..
                } = &m.kind
                {
                    let need = match f {
                        None => Some(Need::BoundContext(vec![source.clone()])),
                        Some(f) => from(f),
                    };
                    need.into_iter().for_each(|n| add(out, n));
                }
            }
        }
        Op::Copy(CopyOp {
            from: f, sources, ..
        }) => match f {
            None => add(out, Need::Context(sources.clone())),
            Some(f) => from(f).into_iter().for_each(|n| add(out, n)),
        },
        Op::Add {
            sources, checksum, ..
        } => {
            let local = add_context_sources(sources);
            if !local.is_empty() {
                add(out, Need::Context(local));
            }
            for s in sources {
                match s {
                    AddSource::Url(url) if checksum.is_none() => add(out, Need::Url(url.clone())),
                    AddSource::Git { url, reference } => add(
                        out,
                        Need::Git {
                            url: url.clone(),
                            reference: reference.clone(),
                        },
                    ),
                    AddSource::Url(_) | AddSource::Context(_) => {}
                }
            }
        }
        _ => {}
    }
}
