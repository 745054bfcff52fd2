//! Planning a stage: its base (and what the base's identity is), then
//! each step in order — a metadata step edits the config, a layer step
//! gets its key ([`super::step`]).

use super::error::{PlanError, PlanErrorKind};
use super::inputs::Inputs;
use super::key::KeyEncoder;
use super::select::{planned_stages, stage_platform};
use super::state::{self, ImageState};
use super::step::{pinned_text, step_key};
use super::{
    ExecContext, FreeBsdVersion, Pending, Plan, PlanOptions, PlannedBase, PlannedStage,
    PlannedStep, ReleaseContents, RootOs, StepKind,
};
use crate::digest::Digest;
use crate::image::Platform;
use crate::jailfile::{Base, Build, Stage};

/// Plans `build` from what the fetch phase gathered: nothing runs and
/// nothing is fetched here.
pub fn plan(build: &Build, inputs: &Inputs, opts: &PlanOptions) -> Result<Plan, PlanError> {
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
    let mut stages: Vec<PlannedStage> = Vec::new();
    let mut number = 0;
    for stage in planned_stages(build, opts) {
        let planned = plan_stage(stage, &stages, inputs, opts, &mut number)?;
        stages.push(planned);
    }
    Ok(Plan {
        stages,
        total_steps: number,
    })
}

/// A stage's base as planned: what it is, the config it starts with, and
/// the identity of its filesystem.
struct StageBase {
    base: PlannedBase,
    state: ImageState,
    identity: Digest,
    /// Whether `identity` is pending (a stage's whose top is).
    pending: bool,
}

fn plan_stage(
    stage: &Stage,
    done: &[PlannedStage],
    inputs: &Inputs,
    opts: &PlanOptions,
    number: &mut usize,
) -> Result<PlannedStage, PlanError> {
    let err = |kind: PlanErrorKind| PlanError {
        location: stage.location.clone(),
        kind,
    };
    let platform = stage_platform(stage, opts).map_err(|e| err(e.into()))?;
    let sources_platform = platform.clone().unwrap_or_else(Platform::default_for_host);
    let base = stage_base(stage, platform, done, inputs).map_err(err)?;
    let root_os = root_os(stage, &base.state, done);
    let freebsd = match &stage.base {
        Base::FreeBsdRelease(rel) => {
            FreeBsdVersion::of_release(rel, &base.state.platform.architecture)
        }
        Base::Stage(i) => done
            .iter()
            .find(|s| s.index == *i)
            .and_then(|s| s.freebsd.clone()),
        Base::Scratch | Base::Image(_) => None,
    };
    *number += 1;
    let from_number = *number;
    let mut state = base.state.clone();
    let mut steps = Vec::with_capacity(stage.steps.len());
    let mut identity = base.identity;
    // Whether `identity` is pending: the base is a stage whose top is.
    let mut pending = base.pending;
    let mut top_key = None;
    for step in &stage.steps {
        *number += 1;
        let located = |kind| PlanError {
            location: step.location.clone(),
            kind,
        };
        let kind = if step.op.changes_filesystem() {
            let exec = ExecContext {
                env: state.env.clone(),
                user: state.user.clone(),
                workdir: state.cwd().to_string(),
                jail: state.jail.clone(),
                shell: state.docker.shell.clone(),
                platform: sources_platform.clone(),
            };
            let made = step_key(&identity, step, &exec, freebsd.as_ref(), done, inputs, opts)
                .map_err(located)?;
            let key = made.key;
            // A key built on a pending one is pending as a whole; a PKG
            // step's own answer is asked only once its parent is final.
            let step_pending = if pending || made.reads_pending {
                Some(Pending::Upstream)
            } else {
                made.awaits.map(Pending::Awaits)
            };
            pending = step_pending.is_some();
            identity = key.clone();
            let parent = top_key.replace(key.clone());
            StepKind::Layer {
                key,
                parent,
                exec: Box::new(exec),
                pending: step_pending,
            }
        } else {
            state::apply(&mut state, &step.op);
            StepKind::Metadata
        };
        let pinned = pinned_text(step, inputs).map_err(located)?;
        state.history.push(state::HistoryEntry {
            created_by: pinned.clone().unwrap_or_else(|| step.text.clone()),
            empty_layer: matches!(kind, StepKind::Metadata),
            inherited: None,
        });
        steps.push(PlannedStep {
            number: *number,
            step: step.clone(),
            pinned,
            kind,
        });
    }
    Ok(PlannedStage {
        index: stage.index,
        name: stage.name.clone(),
        base: base.base,
        from_text: stage.from_text.clone(),
        from_number,
        location: stage.location.clone(),
        steps,
        base_state: base.state,
        state,
        top_identity: identity,
        top_key,
        pending,
        freebsd,
        root_os,
    })
}

/// The base of `stage`, for `platform` (`--platform` or FROM's; `None`:
/// the default, or an image's own).
fn stage_base(
    stage: &Stage,
    platform: Option<Platform>,
    done: &[PlannedStage],
    inputs: &Inputs,
) -> Result<StageBase, PlanErrorKind> {
    Ok(match &stage.base {
        Base::Scratch => {
            let p = platform.unwrap_or_else(Platform::default_for_host);
            let identity = KeyEncoder::new()
                .str("base", "scratch")
                .str("platform", &p.to_string())
                .finish();
            StageBase {
                base: PlannedBase::Scratch,
                state: ImageState::empty(p),
                identity,
                pending: false,
            }
        }
        Base::FreeBsdRelease(rel) => {
            let p = platform.unwrap_or_else(Platform::default_for_host);
            let contents = inputs.release(rel, &p)?;
            release_base(stage, rel, p, contents)
        }
        Base::Image(reference) => {
            let p = platform.unwrap_or_else(Platform::default_for_host);
            let img = inputs.image(reference, &p)?;
            let identity = KeyEncoder::new()
                .str("base", "image")
                .str("manifest", &img.manifest.to_string())
                .finish();
            let mut state = ImageState::from_config_with(&img.config, &img.extras);
            // Its ONBUILD triggers ran in this stage (the resolver
            // put them after FROM); the new image does not keep them.
            state.docker.onbuild.clear();
            StageBase {
                base: PlannedBase::Image {
                    reference: reference.clone(),
                    manifest: img.manifest.clone(),
                },
                state,
                identity,
                pending: false,
            }
        }
        Base::Stage(i) => {
            let parent = done
                .iter()
                .find(|s| s.index == *i)
                .ok_or(PlanErrorKind::StageNotBuilt(*i))?;
            let mut state = parent.state.clone();
            if let Some(p) = platform {
                state.platform = p;
            }
            // Its ONBUILD triggers ran in this stage (see the resolver).
            state.docker.onbuild.clear();
            StageBase {
                base: PlannedBase::Stage(*i),
                state,
                identity: parent.top_identity.clone(),
                pending: parent.pending,
            }
        }
    })
}

/// `FROM freebsd:<release>` for platform `p`, made of `contents`: keyed
/// on the sets (or the pkgbase packages and their source), which its
/// history line shows.
fn release_base(stage: &Stage, rel: &str, p: Platform, contents: &ReleaseContents) -> StageBase {
    let mut e = KeyEncoder::new();
    let shown = match contents {
        ReleaseContents::Sets(sets) => {
            e.str("base", "freebsd-release")
                .str("release", rel)
                .str("platform", &p.to_string())
                .str("set.count", &sets.len().to_string());
            for (name, sha) in sets {
                e.str("set.name", name).str("set.sha256", &sha.to_string());
            }
            let shown: Vec<String> = sets.iter().map(|(n, d)| format!("{n}.txz {d}")).collect();
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
    let identity = e.finish();
    let mut state = ImageState::empty(p);
    state.history.push(state::HistoryEntry {
        created_by: format!("{} ({shown})", stage.from_text),
        empty_layer: false,
        inherited: None,
    });
    StageBase {
        base: PlannedBase::FreeBsdRelease {
            release: rel.to_string(),
            key: identity.clone(),
        },
        state,
        identity,
        pending: false,
    }
}

/// What the root of `stage` holds programs for, and how that is known.
fn root_os(stage: &Stage, base_state: &ImageState, done: &[PlannedStage]) -> Option<RootOs> {
    match &stage.base {
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
        Base::Stage(i) => done
            .iter()
            .find(|s| s.index == *i)
            .and_then(|s| s.root_os.clone()),
    }
}
