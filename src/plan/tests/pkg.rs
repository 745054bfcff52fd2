//! PKG steps' keys: pending until the build reaches the step and says
//! what the step's root names ([`PkgRoot`]); then final, and every key
//! built on them (later steps, stages FROM the stage, `COPY --from` it)
//! chains from the finished key.

use super::*;

/// The key and what it waits for of each layer step, in plan order.
fn layers(p: &Plan) -> Vec<(Digest, Option<Pending>)> {
    p.stages
        .iter()
        .flat_map(|s| s.steps.iter())
        .filter_map(|s| match &s.kind {
            StepKind::Layer { key, pending, .. } => Some((key.clone(), pending.clone())),
            StepKind::Metadata => None,
        })
        .collect()
}

fn copy_from(stage: usize) -> Op {
    Op::Copy(CopyOp {
        from: Some(CopyFrom::Stage(stage)),
        sources: vec![CopySource::Path("/usr/local".into())],
        dest: "/usr/local".into(),
        chown: None,
        chmod: None,
        parents: false,
        exclude: vec![],
    })
}

/// Stage `a` (FROM a release): RUN, PKG, RUN; a stage that copies from
/// it; a stage that has nothing to do with it; the target, FROM `a`,
/// copying from both.
fn four_stages() -> Build {
    Build {
        stages: vec![
            stage(
                0,
                Some("a"),
                Base::FreeBsdRelease("14.3-RELEASE".into()),
                vec![
                    step(2, "RUN before", run("before")),
                    step(3, "PKG nginx", pkg(&["nginx"])),
                    step(4, "RUN after", run("after")),
                ],
            ),
            stage(1, None, Base::Scratch, vec![step(6, "COPY", copy_from(0))]),
            stage(2, None, Base::Scratch, vec![step(8, "RUN y", run("y"))]),
            stage(
                3,
                None,
                Base::Stage(0),
                vec![
                    step(10, "COPY", copy_from(1)),
                    step(11, "COPY", copy_from(2)),
                    step(12, "RUN x", run("x")),
                ],
            ),
        ],
        unused_build_args: vec![],
        warnings: vec![],
    }
}

#[test]
fn a_pkg_key_is_finished_from_its_root_and_what_builds_on_it_chains_from_it() {
    let (b, opts) = (four_stages(), amd64());
    let gathered = Inputs::gather(&b, &opts, &fake());
    let p0 = super::super::plan(&b, &gathered, &opts).unwrap();
    assert_eq!(
        p0.stages[0].freebsd,
        Some(FreeBsdVersion {
            abi: "FreeBSD:14:amd64".into(),
            osversion: 1_403_000
        })
    );
    let l0 = layers(&p0);
    // The PKG step waits for what its root (the RUN before it, for amd64)
    // names; what builds on it or reads it waits for it; the rest is
    // final.
    let root = PkgRoot {
        parent: l0[0].0.clone(),
        arch: "amd64".into(),
    };
    let waits: Vec<Option<Pending>> = l0.iter().map(|(_, w)| w.clone()).collect();
    let up = Some(Pending::Upstream);
    assert_eq!(
        waits,
        [
            None,
            Some(Pending::Awaits(root.clone())),
            up.clone(),
            up.clone(),
            None,
            up.clone(),
            up.clone(),
            up
        ]
    );
    let pending: Vec<bool> = p0.stages.iter().map(|s| s.pending).collect();
    assert_eq!(pending, [true, true, false, true]);

    // Answered: every key final.
    let answered = |answer: &str| {
        let mut inputs = gathered.clone();
        inputs.answer_pkg_root(root.clone(), answer.into());
        layers(&super::super::plan(&b, &inputs, &opts).unwrap())
    };
    let a = answered("repositories A");
    assert!(a.iter().all(|(_, w)| w.is_none()), "{a:?}");
    // The same answer is the same keys (a cache hit); what did not wait
    // kept its key.
    assert_eq!(a, answered("repositories A"));
    assert_eq!((&a[0], &a[4]), (&l0[0], &l0[4]));
    // Another answer (the root names other repositories, or theirs moved
    // on): the PKG step and everything on it change, nothing else.
    let other = answered("repositories B");
    let same: Vec<bool> = a.iter().zip(&other).map(|(x, y)| x.0 == y.0).collect();
    assert_eq!(same, [true, false, false, false, true, false, false, false]);

    // An answer for another root is not this step's.
    let mut inputs = gathered.clone();
    let elsewhere = PkgRoot {
        parent: Digest::of(b"another root"),
        ..root.clone()
    };
    inputs.answer_pkg_root(elsewhere, "repositories A".into());
    assert_eq!(layers(&super::super::plan(&b, &inputs, &opts).unwrap()), l0);
}

#[test]
fn a_second_pkg_step_awaits_the_first_ones_key() {
    let b = build(vec![
        step(2, "PKG a", pkg(&["a"])),
        step(3, "PKG b", pkg(&["b"])),
    ]);
    let opts = amd64();
    let mut inputs = Inputs::gather(&b, &opts, &fake());
    let p = super::super::plan(&b, &inputs, &opts).unwrap();
    // FROM scratch: the version is not known, the root still says it.
    assert_eq!(p.stages[0].freebsd, None);
    let l = layers(&p);
    let Some(Pending::Awaits(first)) = l[0].1.clone() else {
        panic!("{l:?}")
    };
    assert_eq!(l[1].1, Some(Pending::Upstream));
    inputs.answer_pkg_root(first, "one".into());
    let l = layers(&super::super::plan(&b, &inputs, &opts).unwrap());
    let second = PkgRoot {
        parent: l[0].0.clone(),
        arch: "amd64".into(),
    };
    assert_eq!(
        (l[0].1.clone(), l[1].1.clone()),
        (None, Some(Pending::Awaits(second.clone())))
    );
    // Given twice, the first answer stays: one build reads a root once.
    inputs.answer_pkg_root(second.clone(), "two".into());
    inputs.answer_pkg_root(second, "three".into());
    let done = layers(&super::super::plan(&b, &inputs, &opts).unwrap());
    assert!(done.iter().all(|(_, w)| w.is_none()));
    assert_eq!(done[0], l[0]);
}

#[test]
fn steps_without_pkg_never_wait() {
    let b = release_build(
        "14.3-RELEASE",
        vec![step(2, "RUN x", run("x")), step(3, "COPY", copy())],
    );
    let p = plan(&b, &fake(), &amd64()).unwrap();
    assert!(layers(&p).iter().all(|(_, w)| w.is_none()));
    assert!(!p.stages[0].pending);
}

#[test]
fn deferring_script_commands_is_a_key_of_its_own_the_flag_over_the_setting() {
    use crate::config::PkgScripts;
    let with = |scripts: Option<PkgScripts>| {
        let op = match pkg(&["a"]) {
            Op::Pkg {
                packages,
                bootstrap,
                ..
            } => Op::Pkg {
                packages,
                bootstrap,
                scripts,
            },
            other => unreachable!("{other:?}"),
        };
        build(vec![step(2, "PKG a", op)])
    };
    let key = |b: &Build, setting: PkgScripts| {
        let opts = PlanOptions {
            pkg_scripts: setting,
            ..amd64()
        };
        layers(&super::super::plan(b, &Inputs::gather(b, &opts, &fake()), &opts).unwrap())[0]
            .0
            .clone()
    };
    let (refuse, defer) = (PkgScripts::Refuse, PkgScripts::Defer);
    let plain = key(&with(None), refuse);
    // Refusing, written or not, is the key PKG steps had before the mode.
    assert_eq!(key(&with(Some(refuse)), refuse), plain);
    assert_eq!(key(&with(Some(refuse)), defer), plain);
    // Deferring, by the flag or the setting, is another step.
    let deferred = key(&with(Some(defer)), refuse);
    assert_ne!(deferred, plain);
    assert_eq!(key(&with(None), defer), deferred);
    assert_eq!(key(&with(Some(defer)), defer), deferred);
}
