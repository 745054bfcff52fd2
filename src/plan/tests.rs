use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::jailfile::{Command, Stage, SysrcOp};

struct Fake {
    context: RefCell<Digest>,
}

impl PlanInputs for Fake {
    fn image(&self, reference: &str, _: &Platform) -> Result<BaseImage, String> {
        let config: oci_spec::image::ImageConfiguration = serde_json::from_str(
            r#"{"architecture":"amd64","os":"freebsd","config":{"Env":["PATH=/bin"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":[]}}"#,
        )
        .unwrap();
        Ok(BaseImage {
            manifest: Digest::of(reference.as_bytes()),
            config,
        })
    }
    fn context_sources(&self, _: &[CopySource]) -> Result<Digest, String> {
        Ok(self.context.borrow().clone())
    }
}

fn fake() -> Fake {
    Fake {
        context: RefCell::new(Digest::of(b"context-1")),
    }
}

fn loc(line: u32) -> Location {
    Location {
        file: Arc::new(PathBuf::from("Jailfile")),
        line,
        column: 1,
    }
}

fn step(line: u32, text: &str, op: Op) -> Step {
    Step {
        location: loc(line),
        text: text.into(),
        args: BTreeMap::new(),
        op,
    }
}

fn run(cmd: &str) -> Op {
    Op::Run {
        command: Command::Shell(cmd.into()),
        network: false,
    }
}

fn stage(index: usize, name: Option<&str>, base: Base, steps: Vec<Step>) -> Stage {
    Stage {
        index,
        name: name.map(str::to_string),
        base,
        platform: None,
        location: loc(1),
        from_text: "FROM scratch".into(),
        steps,
    }
}

fn keys(plan: &Plan) -> Vec<Option<Digest>> {
    plan.stages
        .iter()
        .flat_map(|s| s.steps.iter())
        .map(|s| match &s.kind {
            StepKind::Layer { key, .. } => Some(key.clone()),
            StepKind::Metadata => None,
        })
        .collect()
}

fn build(steps: Vec<Step>) -> Build {
    Build {
        stages: vec![stage(0, None, Base::Scratch, steps)],
        unused_build_args: vec![],
    }
}

fn copy() -> Op {
    Op::Copy {
        from: None,
        sources: vec![CopySource::Path("site".into())],
        dest: "/www/".into(),
        chown: None,
        chmod: None,
    }
}

fn sysrc() -> Op {
    Op::Sysrc {
        file: "/etc/rc.conf".into(),
        name: "nginx_enable".into(),
        op: SysrcOp::Set,
        value: "YES".into(),
    }
}

#[test]
fn same_build_same_keys() {
    let b = build(vec![
        step(2, "RUN make", run("make")),
        step(3, "COPY site /www/", copy()),
    ]);
    let a = plan(&b, &fake(), &PlanOptions::default()).unwrap();
    let c = plan(&b, &fake(), &PlanOptions::default()).unwrap();
    assert_eq!(keys(&a), keys(&c));
    assert!(keys(&a).iter().all(Option::is_some));
}

#[test]
fn a_label_does_not_invalidate_later_layers_but_env_invalidates_run_only() {
    let base = vec![step(2, "RUN make", run("make")), step(3, "SYSRC", sysrc())];
    let mut with_label = base.clone();
    with_label.insert(
        0,
        step(1, "LABEL a=b", Op::Label(vec![("a".into(), "b".into())])),
    );
    let k0 = keys(&plan(&build(base.clone()), &fake(), &PlanOptions::default()).unwrap());
    let k1 = keys(&plan(&build(with_label), &fake(), &PlanOptions::default()).unwrap());
    assert_eq!(k0, k1[1..].to_vec());

    let env = |v: &str| step(4, "ENV", Op::Env(vec![("X".into(), v.into())]));
    let b1 = build(vec![
        env("1"),
        step(5, "SYSRC", sysrc()),
        step(6, "RUN make", run("make")),
    ]);
    let b2 = build(vec![
        env("2"),
        step(5, "SYSRC", sysrc()),
        step(6, "RUN make", run("make")),
    ]);
    let (k1, k2) = (
        keys(&plan(&b1, &fake(), &Default::default()).unwrap()),
        keys(&plan(&b2, &fake(), &Default::default()).unwrap()),
    );
    assert_eq!(k1[1], k2[1], "SYSRC does not see ENV");
    assert_ne!(k1[2], k2[2], "RUN runs with ENV");
}

#[test]
fn a_changed_step_changes_every_later_key() {
    let b1 = build(vec![step(2, "RUN a", run("a")), step(3, "SYSRC", sysrc())]);
    let b2 = build(vec![step(2, "RUN b", run("b")), step(3, "SYSRC", sysrc())]);
    let (k1, k2) = (
        keys(&plan(&b1, &fake(), &Default::default()).unwrap()),
        keys(&plan(&b2, &fake(), &Default::default()).unwrap()),
    );
    assert_ne!(k1[0], k2[0]);
    assert_ne!(k1[1], k2[1]);
}

#[test]
fn copy_key_follows_context_content_and_args() {
    let b = build(vec![step(2, "COPY", copy())]);
    let f = fake();
    let k1 = keys(&plan(&b, &f, &Default::default()).unwrap());
    *f.context.borrow_mut() = Digest::of(b"context-2");
    let k2 = keys(&plan(&b, &f, &Default::default()).unwrap());
    assert_ne!(k1, k2);

    let mut with_arg = b.clone();
    with_arg.stages[0].steps[0]
        .args
        .insert("V".into(), "1".into());
    assert_ne!(keys(&plan(&with_arg, &f, &Default::default()).unwrap()), k2);
}

#[test]
fn no_cache_and_platform_change_keys() {
    let b = build(vec![step(2, "RUN a", run("a"))]);
    let k = keys(&plan(&b, &fake(), &Default::default()).unwrap());
    let nc = PlanOptions {
        no_cache_nonce: Some("n1".into()),
        ..Default::default()
    };
    assert_ne!(k, keys(&plan(&b, &fake(), &nc).unwrap()));
    let p = PlanOptions {
        platform: Some(Platform::parse("linux/amd64").unwrap()),
        ..Default::default()
    };
    assert_ne!(k, keys(&plan(&b, &fake(), &p).unwrap()));
}

#[test]
fn unused_stages_are_not_planned_and_copy_from_pulls_them_in() {
    let s0 = stage(
        0,
        Some("unused"),
        Base::Scratch,
        vec![step(2, "RUN x", run("x"))],
    );
    let s1 = stage(
        1,
        Some("builder"),
        Base::Scratch,
        vec![step(4, "RUN y", run("y"))],
    );
    let c = Op::Copy {
        from: Some(CopyFrom::Stage(1)),
        sources: vec![CopySource::Path("/out".into())],
        dest: "/".into(),
        chown: None,
        chmod: None,
    };
    let s2 = stage(
        2,
        None,
        Base::Image("base:1".into()),
        vec![step(6, "COPY --from=builder", c)],
    );
    let p = plan(
        &Build {
            stages: vec![s0, s1, s2],
            unused_build_args: vec![],
        },
        &fake(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        p.stages.iter().map(|s| s.index).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(p.total_steps, 4);
    // The image base's config is inherited.
    assert_eq!(
        p.target().state.env,
        vec![("PATH".to_string(), "/bin".to_string())]
    );
    assert_eq!(p.target().state.platform.os, "freebsd");
}

#[test]
fn entrypoint_clears_inherited_cmd_and_history_is_recorded() {
    let ep = Op::Entrypoint(Command::Exec(vec!["/usr/sbin/nginx".into()]));
    let s = stage(
        0,
        None,
        Base::Image("base:1".into()),
        vec![step(2, "ENTRYPOINT", ep), step(3, "RUN a", run("a"))],
    );
    let p = plan(
        &Build {
            stages: vec![s],
            unused_build_args: vec![],
        },
        &fake(),
        &Default::default(),
    )
    .unwrap();
    let st = &p.target().state;
    assert_eq!(st.cmd, None);
    assert_eq!(
        st.entrypoint.as_deref(),
        Some(&["/usr/sbin/nginx".to_string()][..])
    );
    let h: Vec<(&str, bool)> = st
        .history
        .iter()
        .map(|h| (h.created_by.as_str(), h.empty_layer))
        .collect();
    assert_eq!(h, vec![("ENTRYPOINT", true), ("RUN a", false)]);
}
