//! Per-step planning: a layer step's key (what decides its result, see
//! the module's documentation) and the text its history records.

use super::error::PlanErrorKind;
use super::inputs::Inputs;
use super::key::{self, KeyEncoder};
use super::{ExecContext, FreeBsdVersion, PkgRoot, PlanOptions, PlannedBase, PlannedStage};
use crate::digest::Digest;
use crate::image::Platform;
use crate::jailfile::{AddSource, CopyFrom, CopyOp, MountKind, Op, Step};

/// The step's text as history keeps it where it is not the step's own: an
/// ADD of a git repository says the commit each repository was pinned to
/// (the inputs answer from what the key asked). `None`: the step's text.
pub(super) fn pinned_text(step: &Step, inputs: &Inputs) -> Result<Option<String>, PlanErrorKind> {
    let Op::Add { sources, .. } = &step.op else {
        return Ok(None);
    };
    let mut text = None;
    for s in sources {
        if let AddSource::Git { url, reference } = s {
            let commit = inputs.git_commit(url, reference.as_deref())?;
            let t = text.get_or_insert_with(|| step.text.clone());
            t.push_str(&format!(" (git {url} at commit {commit})"));
        }
    }
    Ok(text)
}

/// The identity of the stage or image a COPY or a bind mount reads from:
/// an earlier stage's top identity, or an image's manifest digest; and
/// whether that identity is pending (a stage's, [`PlannedStage::pending`]).
fn source_identity(
    from: &CopyFrom,
    done: &[PlannedStage],
    inputs: &Inputs,
    platform: &Platform,
) -> Result<(Digest, bool), PlanErrorKind> {
    Ok(match from {
        CopyFrom::Stage(i) => {
            let stage = done
                .iter()
                .find(|s| s.index == *i)
                .ok_or(PlanErrorKind::CopyFromNotBuilt(*i))?;
            if !has_files(stage, done) {
                return Err(PlanErrorKind::NothingToRead(*i));
            }
            (stage.top_identity.clone(), stage.pending)
        }
        CopyFrom::Image(r) => (inputs.image(r, platform)?.manifest.clone(), false),
    })
}

/// A layer step's key, and whether it is final.
pub(super) struct StepKey {
    pub(super) key: Digest,
    /// A PKG step whose root's answer is not in the inputs yet.
    pub(super) awaits: Option<PkgRoot>,
    /// It reads a stage whose identity is pending (`COPY --from`, a bind
    /// mount's `from=`).
    pub(super) reads_pending: bool,
}

/// Whether `stage`'s root has a layer to read: one of its own steps made
/// one, or its base has one (a release's sets, an image's layers, an
/// earlier stage's). A stage FROM scratch with only config instructions
/// has none, which the build would find only when the step reads it.
fn has_files(stage: &PlannedStage, done: &[PlannedStage]) -> bool {
    stage.top_key.is_some()
        || match &stage.base {
            PlannedBase::Scratch => false,
            PlannedBase::Stage(j) => done
                .iter()
                .find(|s| s.index == *j)
                .is_none_or(|s| has_files(s, done)),
            PlannedBase::FreeBsdRelease { .. } | PlannedBase::Image { .. } => true,
        }
}

pub(super) fn step_key(
    parent: &Digest,
    step: &Step,
    exec: &ExecContext,
    freebsd: Option<&FreeBsdVersion>,
    done: &[PlannedStage],
    inputs: &Inputs,
    opts: &PlanOptions,
) -> Result<StepKey, PlanErrorKind> {
    let mut awaits = None;
    let mut reads_pending = false;
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
                            None => inputs.bound_context(std::slice::from_ref(source))?.clone(),
                            Some(f) => {
                                let (d, pending) =
                                    source_identity(f, done, inputs, &exec.platform)?;
                                reads_pending |= pending;
                                d
                            }
                        };
                        e.str("mount.sources", &digest.to_string());
                    }
                }
            }
            if let Op::Pkg { scripts, .. } = &step.op {
                // Deferring lets a step through that refusing fails, and
                // puts the first-start script in its layer: a mode of its
                // own. Only when deferring, so the keys of PKG steps made
                // before the mode existed stay.
                let mode = scripts.unwrap_or(opts.pkg_scripts);
                if mode == crate::config::PkgScripts::Defer {
                    e.str("pkg.scripts", mode.as_str());
                }
                // pkg(8) picks packages by ABI and OSVERSION, from the
                // catalogues of the repositories the root names: a new
                // catalogue, or a root naming other repositories, is a new
                // step (see key.rs, version 2). What the root names is
                // known when the step is reached (the module docs, "Keys
                // finished when the step is reached").
                e.opt("pkg.abi", freebsd.map(|v| v.abi.as_str()));
                e.opt(
                    "pkg.osversion",
                    freebsd.map(|v| v.osversion.to_string()).as_deref(),
                );
                let root = PkgRoot {
                    parent: parent.clone(),
                    arch: exec.platform.architecture.clone(),
                };
                match inputs.pkg_root(&root) {
                    Some(answer) => {
                        e.str("pkg.root", answer);
                    }
                    None => {
                        e.field("pkg.root.pending", b"");
                        awaits = Some(root);
                    }
                }
            }
        }
        Op::Add {
            sources, checksum, ..
        } => {
            e.str("workdir", &exec.workdir);
            let local = super::needs::add_context_sources(sources);
            if !local.is_empty() {
                let digest = inputs.context_sources(&local)?;
                e.str("sources", &digest.to_string());
            }
            for s in sources {
                match s {
                    AddSource::Url(url) => {
                        let digest = inputs.url(url, checksum.as_ref())?;
                        e.str("url.content", &digest.to_string());
                    }
                    AddSource::Git { url, reference } => {
                        let commit = inputs.git_commit(url, reference.as_deref())?;
                        e.str("git.commit", commit);
                    }
                    AddSource::Context(_) => {}
                }
            }
        }
        Op::Copy(CopyOp { from, sources, .. }) => {
            e.str("workdir", &exec.workdir);
            let digest = match from {
                None => inputs.context_sources(sources)?.clone(),
                Some(f) => {
                    let (d, pending) = source_identity(f, done, inputs, &exec.platform)?;
                    reads_pending |= pending;
                    d
                }
            };
            e.str("sources", &digest.to_string());
        }
        _ => {}
    }
    if let Some(nonce) = &opts.no_cache_nonce {
        e.str("no-cache", nonce);
    }
    Ok(StepKey {
        key: e.finish(),
        awaits,
        reads_pending,
    })
}
