use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::blame::Blame;
use crate::jailfile::{Base, Build, Command, CopyFrom, CopyOp, CopySource, Op, Stage, SysrcOp};

/// Plans `b` as a build does: its needs gathered from `source` first,
/// then planned from what was gathered.
fn plan(b: &Build, source: &dyn InputSource, opts: &PlanOptions) -> Result<Plan, PlanError> {
    super::plan(b, &Inputs::gather(b, opts, source), opts)
}

struct Fake {
    context: RefCell<Digest>,
    sets: RefCell<Vec<(String, Digest)>>,
}

impl InputSource for Fake {
    fn image(&self, reference: &str, _: &Platform) -> Result<BaseImage, InputError> {
        let config: oci_spec::image::ImageConfiguration = serde_json::from_str(
            r#"{"architecture":"amd64","os":"freebsd","config":{"Env":["PATH=/bin"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":[]}}"#,
        )
        .unwrap();
        Ok(BaseImage {
            manifest: Digest::of(reference.as_bytes()),
            config,
            extras: Default::default(),
        })
    }
    fn context_sources(&self, _: &[CopySource]) -> Result<Digest, InputError> {
        Ok(self.context.borrow().clone())
    }
    fn release(&self, _: &str, _: &Platform) -> Result<Vec<(String, Digest)>, InputError> {
        Ok(self.sets.borrow().clone())
    }
}

fn fake() -> Fake {
    Fake {
        context: RefCell::new(Digest::of(b"context-1")),
        sets: RefCell::new(vec![("base".into(), Digest::of(b"base.txz 1"))]),
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
        mounts: vec![],
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
        steps: steps.into_iter().map(std::sync::Arc::new).collect(),
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
        warnings: vec![],
    }
}

fn copy() -> Op {
    Op::Copy(CopyOp {
        from: None,
        sources: vec![CopySource::Path("site".into())],
        dest: "/www/".into(),
        chown: None,
        chmod: None,
        parents: false,
        exclude: vec![],
    })
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
fn shell_reaches_the_key_of_a_later_shell_form_run_only_and_no_key_without_it() {
    let shell = |sh: &[&str]| {
        step(
            2,
            "SHELL",
            Op::Shell(sh.iter().map(|s| s.to_string()).collect()),
        )
    };
    let exec = Op::Run {
        command: Command::Exec(vec!["make".into()]),
        network: false,
        mounts: vec![],
    };
    let after = |sh: Option<&[&str]>| {
        let mut steps = vec![
            step(3, "SYSRC", sysrc()),
            step(4, "RUN make", run("make")),
            step(5, "RUN [make]", exec.clone()),
        ];
        if let Some(sh) = sh {
            steps.insert(0, shell(sh));
        }
        let k = keys(&plan(&build(steps), &fake(), &Default::default()).unwrap());
        k.into_iter().flatten().collect::<Vec<_>>()
    };
    let (none, bash, csh) = (
        after(None),
        after(Some(&["/bin/bash", "-c"])),
        after(Some(&["/bin/csh", "-c"])),
    );
    assert_eq!(none[0], bash[0], "SYSRC does not run a shell");
    assert_ne!(none[1], bash[1], "a shell-form RUN runs in the SHELL");
    assert_ne!(bash[1], csh[1]);
    // The exec form's key differs only through its parent's.
    assert_ne!(none[2], bash[2]);
    // A key made without SHELL is what it was before SHELL existed: the
    // encoding has no shell field then.
    let p = plan(
        &build(vec![step(4, "RUN make", run("make"))]),
        &fake(),
        &Default::default(),
    )
    .unwrap();
    let StepKind::Layer { exec, .. } = &p.stages[0].steps[0].kind else {
        panic!("RUN is a layer")
    };
    assert_eq!(exec.shell, None);
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
    std::sync::Arc::make_mut(&mut with_arg.stages[0].steps[0])
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
    let c = Op::Copy(CopyOp {
        from: Some(CopyFrom::Stage(1)),
        sources: vec![CopySource::Path("/out".into())],
        dest: "/".into(),
        chown: None,
        chmod: None,
        parents: false,
        exclude: vec![],
    });
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
            warnings: vec![],
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
            warnings: vec![],
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

fn release_build(release: &str, steps: Vec<Step>) -> Build {
    Build {
        stages: vec![stage(0, None, Base::FreeBsdRelease(release.into()), steps)],
        unused_build_args: vec![],
        warnings: vec![],
    }
}

fn pkg(names: &[&str]) -> Op {
    Op::Pkg {
        packages: names.iter().map(|s| s.to_string()).collect(),
        bootstrap: true,
        scripts: None,
    }
}

fn amd64() -> PlanOptions {
    PlanOptions {
        platform: Some(Platform::parse("freebsd/amd64").unwrap()),
        no_cache_nonce: None,
        ..Default::default()
    }
}

#[test]
fn a_release_base_is_keyed_on_its_sets_sha256() {
    let f = fake();
    let b = release_build("14.3-RELEASE", vec![step(2, "SYSRC a=b", sysrc())]);
    let base_key = |p: &Plan| match &p.stages[0].base {
        PlannedBase::FreeBsdRelease { key, .. } => key.clone(),
        other => panic!("{other:?}"),
    };
    let p1 = plan(&b, &f, &amd64()).unwrap();
    let p2 = plan(&b, &f, &amd64()).unwrap();
    assert_eq!(base_key(&p1), base_key(&p2));
    assert_eq!(keys(&p1), keys(&p2));
    // The base layer has its history entry, with the sets' digests.
    let h = &p1.stages[0].base_state.history;
    assert_eq!(h.len(), 1);
    assert!(
        !h[0].empty_layer
            && h[0]
                .created_by
                .contains(&Digest::of(b"base.txz 1").to_string())
    );

    // A re-rolled base.txz (new sha256): a new base and new keys after it.
    *f.sets.borrow_mut() = vec![("base".into(), Digest::of(b"base.txz 2"))];
    let p3 = plan(&b, &f, &amd64()).unwrap();
    assert_ne!(base_key(&p1), base_key(&p3));
    assert_ne!(keys(&p1), keys(&p3));
    // More sets: another base too.
    *f.sets.borrow_mut() = vec![
        ("base".into(), Digest::of(b"base.txz 1")),
        ("lib32".into(), Digest::of(b"lib32.txz 1")),
    ];
    assert_ne!(base_key(&p1), base_key(&plan(&b, &f, &amd64()).unwrap()));
}

/// A build whose releases come from the pkgbase repository.
struct Pkgbase {
    inner: Fake,
    contents: RefCell<ReleaseContents>,
}

impl InputSource for Pkgbase {
    fn image(&self, r: &str, p: &Platform) -> Result<BaseImage, InputError> {
        self.inner.image(r, p)
    }
    fn context_sources(&self, s: &[CopySource]) -> Result<Digest, InputError> {
        self.inner.context_sources(s)
    }
    fn release_contents(&self, _: &str, _: &Platform) -> Result<ReleaseContents, InputError> {
        Ok(self.contents.borrow().clone())
    }
}

#[test]
fn a_pkgbase_base_is_keyed_on_its_packages_and_catalogue() {
    let packages = |p: &[&str], source: &str| ReleaseContents::Packages {
        packages: p.iter().map(|s| s.to_string()).collect(),
        source: source.into(),
    };
    let f = Pkgbase {
        inner: fake(),
        contents: RefCell::new(packages(&["FreeBSD-set-minimal-jail"], "catalogue etag 1")),
    };
    let b = release_build("15.0-RELEASE", vec![step(2, "SYSRC a=b", sysrc())]);
    let base_key = |p: &Plan| match &p.stages[0].base {
        PlannedBase::FreeBsdRelease { key, .. } => key.clone(),
        other => panic!("{other:?}"),
    };
    let p1 = plan(&b, &f, &amd64()).unwrap();
    assert_eq!(base_key(&p1), base_key(&plan(&b, &f, &amd64()).unwrap()));
    let h = &p1.stages[0].base_state.history[0].created_by;
    assert!(
        h.contains("pkgbase FreeBSD-set-minimal-jail") && h.contains("catalogue etag 1"),
        "{h}"
    );
    // Not the key of the same release from its sets.
    let sets = plan(&b, &f.inner, &amd64()).unwrap();
    assert_ne!(base_key(&p1), base_key(&sets));
    // A new catalogue, or another set: another base, new keys after it.
    *f.contents.borrow_mut() = packages(&["FreeBSD-set-minimal-jail"], "catalogue etag 2");
    let p2 = plan(&b, &f, &amd64()).unwrap();
    assert_ne!(base_key(&p1), base_key(&p2));
    assert_ne!(keys(&p1), keys(&p2));
    *f.contents.borrow_mut() = packages(
        &["FreeBSD-set-minimal-jail", "FreeBSD-set-lib32"],
        "catalogue etag 1",
    );
    assert_ne!(base_key(&p1), base_key(&plan(&b, &f, &amd64()).unwrap()));
}

#[test]
fn freebsd_versions_of_releases() {
    let v = |r: &str, a: &str| FreeBsdVersion::of_release(r, a).unwrap();
    assert_eq!(v("14.3-RELEASE", "amd64").abi, "FreeBSD:14:amd64");
    assert_eq!(v("14.3-RELEASE-p2", "arm64").abi, "FreeBSD:14:aarch64");
    assert_eq!(v("13.5-RELEASE", "amd64").osversion, 1_305_000);
    assert_eq!(v("15.0-CURRENT", "riscv64").osversion, 1_500_000);
    assert_eq!(FreeBsdVersion::of_release("latest", "amd64"), None);
}

/// Inputs that fail: COPY's context as the system's fault, images as the
/// user's, with a cause below the error they give.
struct Failing;

#[derive(Debug, thiserror::Error)]
#[error("cannot read `site/index.html`")]
struct Unreadable(#[source] std::io::Error);

impl InputSource for Failing {
    fn image(&self, reference: &str, _: &Platform) -> Result<BaseImage, InputError> {
        Err(InputError::user(format!("no image `{reference}`")))
    }
    fn context_sources(&self, _: &[CopySource]) -> Result<Digest, InputError> {
        let io = std::io::Error::from_raw_os_error(libc::EIO);
        Err(InputError::internal(Unreadable(io)))
    }
}

/// An error and its causes, outermost first.
fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut v = vec![e];
    let mut cur = e.source();
    while let Some(c) = cur {
        v.push(c);
        cur = c.source();
    }
    v
}

#[test]
fn an_input_error_is_located_and_keeps_its_cause_and_its_kind() {
    let e = plan(
        &build(vec![step(2, "COPY site /www/", copy())]),
        &Failing,
        &amd64(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "Jailfile:2:1: cannot read `site/index.html`");
    assert!(!e.is_user_error());
    let causes = chain(&e);
    let io = causes
        .iter()
        .find_map(|c| c.downcast_ref::<std::io::Error>());
    assert_eq!(
        io.and_then(|e| e.raw_os_error()),
        Some(libc::EIO),
        "the I/O error is a cause: {causes:?}"
    );

    let mut b = build(vec![]);
    b.stages[0].base = Base::Image("web:1".into());
    let e = plan(&b, &Failing, &amd64()).unwrap_err();
    assert_eq!(e.to_string(), "Jailfile:1:1: no image `web:1`");
    assert!(e.is_user_error());

    let e = plan(&release_build("14.3-RELEASE", vec![]), &Failing, &amd64()).unwrap_err();
    assert!(e.to_string().contains("needs a release mirror"), "{e}");
    assert!(e.is_user_error());
}

#[test]
fn a_target_stage_is_planned_with_what_it_needs_and_named_by_name_or_index() {
    let s0 = stage(
        0,
        Some("base"),
        Base::Scratch,
        vec![step(2, "RUN a", run("a"))],
    );
    let s1 = stage(
        1,
        Some("tools"),
        Base::Stage(0),
        vec![step(4, "RUN b", run("b"))],
    );
    let s2 = stage(
        2,
        Some("final"),
        Base::Scratch,
        vec![step(6, "RUN c", run("c"))],
    );
    let b = Build {
        stages: vec![s0, s1, s2],
        unused_build_args: vec![],
        warnings: vec![],
    };
    assert_eq!(target_stage(&b, "tools").unwrap(), 1);
    assert_eq!(target_stage(&b, "TOOLS").unwrap(), 1);
    assert_eq!(target_stage(&b, "0").unwrap(), 0);
    let e = target_stage(&b, "web").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("`web`"), "{text}");
    assert!(
        text.contains("`base` (0), `tools` (1), `final` (2)"),
        "{text}"
    );
    assert!(target_stage(&b, "3").is_err());

    let opts = PlanOptions {
        target: Some(1),
        ..Default::default()
    };
    let p = plan(&b, &fake(), &opts).unwrap();
    assert_eq!(
        p.stages.iter().map(|s| s.index).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(p.target().index, 1);
    assert_eq!(p.total_steps, 4);
    // The same stage keys the same with or without --target.
    let whole = plan(&b, &fake(), &PlanOptions::default()).unwrap();
    assert_eq!(whole.target().index, 2);
}

/// Answers every kind of need: [`fake`]'s, and ADD's downloads and git
/// repositories.
struct Everything(Fake);

impl InputSource for Everything {
    fn image(&self, r: &str, p: &Platform) -> Result<BaseImage, InputError> {
        self.0.image(r, p)
    }
    fn context_sources(&self, s: &[CopySource]) -> Result<Digest, InputError> {
        self.0.context_sources(s)
    }
    fn release(&self, r: &str, p: &Platform) -> Result<Vec<(String, Digest)>, InputError> {
        self.0.release(r, p)
    }
    fn remote_file(&self, url: &str) -> Result<Digest, InputError> {
        Ok(Digest::of(url.as_bytes()))
    }
    fn git_commit(&self, url: &str, _: Option<&str>) -> Result<String, InputError> {
        Ok(Digest::of(url.as_bytes()).hex().to_string())
    }
}

/// A recipe that reads one of every kind of need.
const EVERY_NEED: &str = "FROM freebsd:14.3-RELEASE AS rel\n\
    PKG nginx\n\
    FROM web:1\n\
    COPY --from=tools:2 /a /a\n\
    COPY site /www/\n\
    RUN --mount=type=bind,source=src,target=/src true\n\
    ADD https://example.org/app.conf /etc/\n\
    ADD --checksum=sha256:0000000000000000000000000000000000000000000000000000000000000000 https://example.org/pinned.conf /etc/\n\
    ADD https://example.org/x.git#v1 /x\n\
    COPY --from=rel /etc/motd /etc/motd\n";

#[test]
fn the_planner_reads_only_what_was_fetched_and_names_what_was_not() {
    let b = crate::jailfile::load_str(
        std::path::Path::new("Jailfile"),
        EVERY_NEED,
        &Default::default(),
    )
    .unwrap();
    let opts = amd64();
    let all = needs(&b, &opts);
    let p = |s| Platform::parse(s).unwrap();
    let key = |r: &str| BaseKey::new(r, &p("freebsd/amd64"));
    assert_eq!(
        all,
        vec![
            Need::Release(key("14.3-RELEASE")),
            Need::Image(key("web:1")),
            Need::Image(key("tools:2")),
            Need::Context(vec![CopySource::Path("site".into())]),
            Need::BoundContext(vec!["src".into()]),
            Need::Url("https://example.org/app.conf".into()),
            Need::Git {
                url: "https://example.org/x.git".into(),
                reference: Some("v1".into()),
            },
        ],
        "a pinned URL is not fetched to plan"
    );
    let source = Everything(fake());
    plan(&b, &source, &opts).expect("everything fetched: planned");

    // Nothing fetched: a typed internal error, naming the first need.
    let e = super::plan(&b, &Inputs::default(), &opts).unwrap_err();
    match &e.kind {
        PlanErrorKind::NotFetched(NotFetched { need }) => assert_eq!(**need, all[0]),
        other => panic!("{other:?}"),
    }
    assert!(!e.is_user_error());
    assert!(
        e.to_string().contains("was not fetched before planning"),
        "{e}"
    );

    // Each need left out alone is the one named.
    for (i, left_out) in all.iter().enumerate() {
        let mut rest = all.clone();
        rest.remove(i);
        let mut inputs = Inputs::default();
        inputs.fetch(&rest, &source);
        let e = super::plan(&b, &inputs, &opts).unwrap_err();
        match &e.kind {
            PlanErrorKind::NotFetched(NotFetched { need }) => assert_eq!(**need, *left_out),
            other => panic!("{left_out}: {other:?}"),
        }
        assert!(!e.is_user_error(), "{e}");
    }
}

#[test]
fn a_failed_fetch_is_the_planners_error_at_the_line_that_needed_it() {
    let b = crate::jailfile::load_str(
        std::path::Path::new("Jailfile"),
        "FROM scratch\nCOPY a /a\nADD https://example.org/app.conf /etc/\n",
        &Default::default(),
    )
    .unwrap();
    // The default source cannot download: kept, and reported at line 3.
    let e = plan(&b, &fake(), &amd64()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Jailfile:3:1: ADD https://example.org/app.conf: this build cannot download files"
    );
    assert!(e.is_user_error());
}

mod pkg;
