//! The facts of a build its provenance is made of ([`BuildFacts`]),
//! gathered by the build loop from the plan and the images it read.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::jailfile::Op;
use crate::plan::{Plan, PlannedBase, StepKind};

/// The facts of a build that its provenance is made of, gathered by the
/// build loop (a field of [`super::BuildOutput`]).
#[derive(Debug, Clone, Default)]
pub struct BuildFacts {
    /// The sha256 of the Jailfile's text (INCLUDEs are part of the context).
    pub jailfile_digest: Option<Digest>,
    /// The stage built: its AS name, else its index.
    pub target: String,
    /// The image's platform (`freebsd/amd64`).
    pub platform: String,
    /// Every image the build read (FROM, `COPY --from`, bind mounts from
    /// an image): the reference as written, and the manifest used.
    pub images: Vec<(String, Digest)>,
    /// `FROM freebsd:<release>` bases: the release and jbuild's key over
    /// its sets' sha256 (from the release's MANIFEST).
    pub releases: Vec<(String, Digest)>,
    /// Every layer step of the stages built, in order.
    pub steps: Vec<StepRecord>,
    /// Whether a step ran a process (RUN, PKG), whose inputs jbuild
    /// cannot list (the network, the clock).
    pub runs_processes: bool,
}

impl BuildFacts {
    /// The facts of `plan`, once built; `images` are the images it read
    /// as `reference` and manifest digest.
    pub(super) fn of(
        plan: &Plan,
        jailfile_text: &str,
        images: impl IntoIterator<Item = (String, Digest)>,
    ) -> BuildFacts {
        let target = plan.target();
        let mut images: Vec<(String, Digest)> = images.into_iter().collect();
        images.sort();
        images.dedup();
        let mut facts = BuildFacts {
            jailfile_digest: Some(Digest::of(jailfile_text.as_bytes())),
            target: target.label(),
            platform: target.state.platform.to_string(),
            images,
            ..BuildFacts::default()
        };
        for stage in &plan.stages {
            if let PlannedBase::FreeBsdRelease { release, key } = &stage.base {
                facts.releases.push((release.clone(), key.clone()));
            }
            for ps in &stage.steps {
                if let StepKind::Layer { key, .. } = &ps.kind {
                    facts.runs_processes |= matches!(ps.step.op, Op::Run { .. } | Op::Pkg { .. });
                    facts.steps.push(StepRecord {
                        stage: stage.label(),
                        instruction: ps.recorded().to_string(),
                        key: key.clone(),
                    });
                }
            }
        }
        facts.releases.sort();
        facts.releases.dedup();
        facts
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The stage's AS name, else its index.
    pub stage: String,
    /// The instruction after ARG substitution.
    pub instruction: String,
    /// The step's cache key (its snapshot is `step-<key>`).
    pub key: Digest,
}
