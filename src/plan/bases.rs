//! The images a build reads, worked out before it is planned: every
//! `FROM <image>` and `COPY --from=<image>` (and `RUN --mount=from=<image>`)
//! of the stages the target needs, each with the platform the planner will
//! ask for it. The engine fetches exactly these (pulling as `--pull` says)
//! in its own phase, so [`super::plan`] only reads what is already in the
//! store.

use std::collections::BTreeSet;

use super::{needed_stages, PlanOptions};
use crate::image::Platform;
use crate::jailfile::{Base, Build, CopyFrom, MountKind, Op};

/// An image a build reads, as the planner asks for it: the reference as
/// the recipe wrote it, and the platform.
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

/// The images [`super::plan`] will ask [`super::PlanInputs::image`] for,
/// given the same `opts`, each once. A stage whose FROM `--platform`
/// cannot be read is left out: the planner reports it at its line.
pub fn images_read(build: &Build, opts: &PlanOptions) -> BTreeSet<BaseKey> {
    let mut out = BTreeSet::new();
    let Some(last) = build.stages.len().checked_sub(1) else {
        return out;
    };
    let needed = needed_stages(build, opts.target.unwrap_or(last).min(last));
    for stage in build.stages.iter().filter(|s| needed.contains(&s.index)) {
        // As the planner picks it: `--platform`, FROM's, else the default.
        let platform = match (&opts.platform, &stage.platform) {
            (Some(p), _) => p.clone(),
            (None, Some(p)) => match Platform::parse(p) {
                Ok(p) => p,
                Err(_) => continue,
            },
            (None, None) => Platform::default_for_host(),
        };
        if let Base::Image(r) = &stage.base {
            out.insert(BaseKey::new(r, &platform));
        }
        for step in &stage.steps {
            let froms: Vec<&CopyFrom> = match &step.op {
                Op::Copy { from: Some(f), .. } => vec![f],
                Op::Run { mounts, .. } => mounts
                    .iter()
                    .filter_map(|m| match &m.kind {
                        MountKind::Bind { from: Some(f), .. } => Some(f),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for f in froms {
                if let CopyFrom::Image(r) = f {
                    out.insert(BaseKey::new(r, &platform));
                }
            }
        }
    }
    out
}
