//! Stage selection: which stages of the recipe a build plans (the
//! `--target` and what it needs), and the platform each is planned for.
//! The planner and the list of what it needs ([`super::needs`]) both ask
//! here, so they cannot disagree.

use std::collections::BTreeSet;

use super::PlanOptions;
use crate::image::platform::BadPlatform;
use crate::image::Platform;
use crate::jailfile::{Base, Build, CopyFrom, CopyOp, MountKind, Op, Stage};

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
                Op::Copy(CopyOp {
                    from: Some(CopyFrom::Stage(s)),
                    ..
                }) => todo.push(*s),
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

/// The stages a plan with `opts` covers, in file order: the target
/// (`--target`, else the last stage) and the stages it needs.
pub(super) fn planned_stages<'b>(
    build: &'b Build,
    opts: &PlanOptions,
) -> impl Iterator<Item = &'b Stage> {
    let needed = match build.stages.len().checked_sub(1) {
        Some(last) => needed_stages(build, opts.target.unwrap_or(last).min(last)),
        None => BTreeSet::new(),
    };
    build
        .stages
        .iter()
        .filter(move |s| needed.contains(&s.index))
}

/// The platform a stage is planned for, when one is given: `--platform`,
/// else its FROM `--platform`. `None`: the base's own (the default for
/// `scratch`, a release and an image's lookup; the image's config after).
pub(super) fn stage_platform(
    stage: &Stage,
    opts: &PlanOptions,
) -> Result<Option<Platform>, BadPlatform> {
    Ok(match (&opts.platform, &stage.platform) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(p)) => Some(Platform::parse(p)?),
        (None, None) => None,
    })
}

impl crate::blame::Blame for UnknownTarget {
    /// `--target` names no stage of the user's recipe.
    fn is_user_error(&self) -> bool {
        true
    }
}
