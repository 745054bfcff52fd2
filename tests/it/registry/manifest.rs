//! Manifest lists through the `jbuild` binary, against a real Distribution
//! registry: `manifest create/add/push` of two platform images read by
//! crane, regctl and skopeo; `pull --platform` of one child; lists with a
//! missing child or two images of one platform refused before any
//! request; `build --platform a,b --manifest`; a RUN step for a foreign
//! architecture refused before anything runs.
//!
//! crane and regctl come from the Go module proxy: `tests/run` installs
//! them (`go install`, pinned versions) into `$(go env GOPATH)/bin`.

use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use registry_support::proxy::Proxy;
use registry_support::{jbuild, run_bounded, run_ok, skopeo, Registry, LIMIT};
use serde_json::Value;

/// A Go tool from `tests/run`'s `go install`: on PATH, else in
/// `$(go env GOPATH)/bin` (default `~/go/bin`).
fn go_tool(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let gopath = Command::new("go")
        .args(["env", "GOPATH"])
        .output()
        .ok()
        .or_else(|| {
            Command::new("/usr/local/go/bin/go")
                .args(["env", "GOPATH"])
                .output()
                .ok()
        })
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join("go"));
    on_path
        .into_iter()
        .chain(gopath.into_iter().chain(home).map(|g| g.join("bin").join(name)))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} is not installed: `bash tests/run` installs it with `go install` (see tests/run)")
        })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn fails_with(out: &Output, code: i32, wanted: &[&str]) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr:\n{err}");
    for w in wanted {
        assert!(err.contains(w), "wanted `{w}` in:\n{err}");
    }
    err
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: not JSON:\n{s}"))
}

/// A build context of native instructions only: builds for any architecture.
fn native_context(dir: &Path) -> PathBuf {
    let ctx = dir.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("hello"), "hello from every platform\n").unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY hello /etc/hello\nSYSRC sshd_enable=YES\nLABEL org.example.kind=native\n",
    )
    .unwrap();
    ctx
}

/// Builds `ctx` for `platform`, tagged `tag`; returns the manifest digest.
fn build_for(home: &Path, ctx: &Path, platform: &str, tag: &str) -> String {
    let out = run_ok(
        jbuild(home)
            .args(["-q", "build", "--platform", platform, "-t", tag])
            .arg(ctx),
        LIMIT,
    );
    out.trim().to_string()
}

/// Each entry of an index: (os/arch, digest).
fn entries(index: &Value) -> Vec<(String, String)> {
    index["manifests"]
        .as_array()
        .unwrap_or_else(|| panic!("not an index: {index}"))
        .iter()
        .map(|m| {
            (
                format!(
                    "{}/{}",
                    m["platform"]["os"].as_str().unwrap(),
                    m["platform"]["architecture"].as_str().unwrap()
                ),
                m["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_pushed_list_is_read_by_crane_regctl_and_skopeo_and_pulled_by_platform() {
    let crane = go_tool("crane");
    let regctl = go_tool("regctl");
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("a");
    fs::create_dir_all(&home).unwrap();
    let ctx = native_context(t.path());
    let amd = build_for(&home, &ctx, "freebsd/amd64", "app:amd64");
    let arm = build_for(&home, &ctx, "freebsd/arm64", "app:arm64");
    assert_ne!(amd, arm);

    let made = run_ok(
        jbuild(&home).args(["manifest", "create", "app:1", "app:amd64"]),
        LIMIT,
    );
    let added = run_ok(
        jbuild(&home).args([
            "manifest",
            "add",
            "app:1",
            "app:arm64",
            "--annotation",
            "org.example.note=arm",
        ]),
        LIMIT,
    );
    assert_ne!(made, added, "adding a child makes a new index");
    let local = json(&run_ok(
        jbuild(&home).args(["manifest", "inspect", "app:1"]),
        LIMIT,
    ));
    let want = vec![
        ("freebsd/amd64".to_string(), amd.clone()),
        ("freebsd/arm64".to_string(), arm.clone()),
    ];
    assert_eq!(entries(&local), want);
    assert_eq!(
        local["manifests"][1]["annotations"]["org.example.note"],
        "arm"
    );

    let dest = format!("{}/jails/app:1", reg.host());
    let pushed = run_ok(
        jbuild(&home).args(["manifest", "push", "app:1", &dest]),
        LIMIT,
    );
    assert_eq!(
        pushed.trim(),
        added.trim(),
        "the registry has the list's digest"
    );

    // crane: the index, and each child by platform.
    let index = json(&run_ok(
        Command::new(&crane).args(["manifest", "--insecure", &dest]),
        LIMIT,
    ));
    assert_eq!(entries(&index), want);
    for (platform, digest) in &want {
        let arch = platform.rsplit('/').next().unwrap();
        let config = json(&run_ok(
            Command::new(&crane).args(["config", "--insecure", "--platform", platform, &dest]),
            LIMIT,
        ));
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["os"], "freebsd");
        let child = run_ok(
            Command::new(&crane).args(["digest", "--insecure", "--platform", platform, &dest]),
            LIMIT,
        );
        assert_eq!(child.trim(), digest);
    }
    // regctl: the raw index, and the arm64 image's config.
    let host = format!("reg={},tls=disabled", reg.host());
    let regctl_cmd = || {
        let mut c = Command::new(&regctl);
        c.env("HOME", t.path()).args(["--host", &host]);
        c
    };
    let raw = run_ok(
        regctl_cmd().args(["manifest", "get", "--format", "raw-body", &dest]),
        LIMIT,
    );
    assert_eq!(entries(&json(&raw)), want);
    let inspected = json(&run_ok(
        regctl_cmd().args(["image", "inspect", "--platform", "freebsd/arm64", &dest]),
        LIMIT,
    ));
    assert_eq!(inspected["architecture"], "arm64");
    let child = run_ok(
        regctl_cmd().args(["image", "digest", "--platform", "freebsd/arm64", &dest]),
        LIMIT,
    );
    assert_eq!(child.trim(), arm);
    // skopeo: the raw index, and the arm64 image.
    let docker = format!("docker://{dest}");
    let raw = run_ok(
        skopeo(t.path()).args(["inspect", "--raw", "--tls-verify=false", &docker]),
        LIMIT,
    );
    assert_eq!(entries(&json(&raw)), want);
    let arm_seen = json(&run_ok(
        skopeo(t.path()).args([
            "inspect",
            "--tls-verify=false",
            "--override-os",
            "freebsd",
            "--override-arch",
            "arm64",
            &docker,
        ]),
        LIMIT,
    ));
    assert_eq!(arm_seen["Architecture"], "arm64");
    // skopeo names the image by the list's digest, as the reference resolves.
    assert_eq!(arm_seen["Digest"], pushed.trim());
    assert_eq!(arm_seen["Labels"]["org.example.kind"], "native");

    // Another root pulls the arm64 child.
    let other = t.path().join("b");
    fs::create_dir_all(&other).unwrap();
    let pulled = run_ok(
        jbuild(&other).args(["pull", "--platform", "freebsd/arm64", &dest]),
        LIMIT,
    );
    assert_eq!(pulled.trim(), arm);
    let stored = json(&run_ok(jbuild(&other).args(["inspect", &dest]), LIMIT));
    assert_eq!(stored["digest"], arm.as_str());
    assert_eq!(stored["config"]["architecture"], "arm64");
    run_ok(jbuild(&other).args(["check"]), LIMIT);
}

#[test]
fn a_list_with_a_missing_child_or_a_platform_twice_is_refused_before_any_request() {
    let reg = Registry::start();
    let proxy = Proxy::start(reg.port, vec![]);
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("a");
    fs::create_dir_all(&home).unwrap();
    let ctx = native_context(t.path());
    build_for(&home, &ctx, "freebsd/amd64", "app:amd64");
    let arm = build_for(&home, &ctx, "freebsd/arm64", "app:arm64");
    let dest = |tag: &str| format!("127.0.0.1:{}/jails/app:{tag}", proxy.port);

    // Two images for freebsd/amd64: `manifest add --platform` says so.
    run_ok(
        jbuild(&home).args(["manifest", "create", "app:dup", "app:amd64"]),
        LIMIT,
    );
    run_ok(
        jbuild(&home).args([
            "manifest",
            "add",
            "--platform",
            "freebsd/amd64",
            "app:dup",
            "app:arm64",
        ]),
        LIMIT,
    );
    let out = run_bounded(
        jbuild(&home).args(["manifest", "push", "app:dup", &dest("dup")]),
        LIMIT,
    );
    fails_with(
        &out,
        1,
        &["two images for freebsd/amd64", "jbuild manifest remove"],
    );
    assert_eq!(
        proxy.requests(),
        Vec::<String>::new(),
        "no request for a refused list"
    );

    // The arm64 image's config gone from the store.
    run_ok(
        jbuild(&home).args(["manifest", "create", "app:gap", "app:amd64", "app:arm64"]),
        LIMIT,
    );
    let manifest = fs::read(
        home.join("root/store/blobs/sha256")
            .join(&arm["sha256:".len()..]),
    )
    .unwrap();
    let config = json(&text(&manifest))["config"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    fs::remove_file(
        home.join("root/store/blobs/sha256")
            .join(&config["sha256:".len()..]),
    )
    .unwrap();
    let out = run_bounded(
        jbuild(&home).args(["manifest", "push", "app:gap", &dest("gap")]),
        LIMIT,
    );
    fails_with(
        &out,
        1,
        &["freebsd/arm64", &arm, "config", &config, "missing"],
    );
    assert_eq!(
        proxy.requests(),
        Vec::<String>::new(),
        "no request for a refused list"
    );

    // Once the duplicate is removed, the list goes out.
    run_ok(
        jbuild(&home).args(["manifest", "remove", "app:dup", &arm]),
        LIMIT,
    );
    run_ok(
        jbuild(&home).args(["manifest", "push", "app:dup", &dest("dup")]),
        LIMIT,
    );
    assert!(!proxy.uploads().is_empty());
}

#[test]
fn build_for_two_platforms_into_a_list_and_the_store_keeps_its_children() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("a");
    fs::create_dir_all(&home).unwrap();
    let ctx = native_context(t.path());
    let build = |extra: &[&str]| {
        let mut c = jbuild(&home);
        c.args([
            "--json",
            "build",
            "--platform",
            "freebsd/amd64,freebsd/arm64",
            "--manifest",
            "web:1",
        ])
        .args(extra)
        .arg(&ctx);
        let out = run_ok(&mut c, LIMIT);
        out.lines()
            .map(json)
            .find(|v| v["event"] == "result")
            .unwrap_or_else(|| panic!("no result in:\n{out}"))
    };
    let first = build(&[]);
    assert_eq!(first["list"], "web:1");
    let images = first["images"].as_array().unwrap();
    assert_eq!(images.len(), 2);
    assert_eq!(images[0]["platform"], "freebsd/amd64");
    assert_eq!(images[1]["platform"], "freebsd/arm64");
    assert!(images.iter().all(|i| i["steps_run"] == 2), "{first}");

    let list = json(&run_ok(
        jbuild(&home).args(["manifest", "inspect", "web:1"]),
        LIMIT,
    ));
    let want: Vec<(String, String)> = images
        .iter()
        .map(|i| {
            (
                i["platform"].as_str().unwrap().to_string(),
                i["manifest"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(entries(&list), want);
    for (platform, _) in &want {
        let img = json(&run_ok(
            jbuild(&home).args(["inspect", "--platform", platform, "web:1"]),
            LIMIT,
        ));
        assert_eq!(
            img["config"]["architecture"],
            platform.rsplit('/').next().unwrap()
        );
    }

    // Built again: every step cached, the same list (same platforms replaced).
    let again = build(&[]);
    assert_eq!(again["digest"], first["digest"]);
    assert!(again["images"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["steps_run"] == 0 && i["steps_cached"] == 2));
    assert_eq!(
        entries(&json(&run_ok(
            jbuild(&home).args(["manifest", "inspect", "web:1"]),
            LIMIT
        ))),
        want
    );

    // A changed recipe: each platform's new image takes the old one's place.
    fs::write(ctx.join("hello"), "hello again\n").unwrap();
    let changed = build(&[]);
    let now = entries(&json(&run_ok(
        jbuild(&home).args(["manifest", "inspect", "web:1"]),
        LIMIT,
    )));
    let platforms: Vec<&str> = now.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(platforms, ["freebsd/amd64", "freebsd/arm64"]);
    assert_eq!(now[1].1, changed["images"][1]["manifest"].as_str().unwrap());
    assert_ne!(now, want);

    // The children have no name but the list's: prune keeps them, check is clean.
    run_ok(jbuild(&home).args(["prune"]), LIMIT);
    run_ok(jbuild(&home).args(["check"]), LIMIT);
    let listed = json(&run_ok(jbuild(&home).args(["--json", "images"]), LIMIT));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["name"], "web:1");
    assert_eq!(listed[0]["platform"], "list of 2");
    let out = tempfile::tempdir().unwrap();
    let layout = format!("oci:{}", out.path().join("l").display());
    run_ok(
        jbuild(&home).args(["manifest", "push", "web:1", &layout]),
        LIMIT,
    );

    // Scripts read what a command did from --json.
    let copy = json(&run_ok(
        jbuild(&home).args(["--json", "manifest", "create", "web:copy", &now[0].1]),
        LIMIT,
    ));
    assert_eq!(copy["event"], "result");
    assert_eq!(copy["list"], "web:copy");
    let removed = json(&run_ok(
        jbuild(&home).args(["--json", "manifest", "rm", "web:copy"]),
        LIMIT,
    ));
    assert_eq!(removed["removed"], copy["digest"]);

    // Without the list's name, prune frees its children.
    run_ok(jbuild(&home).args(["manifest", "rm", "web:1"]), LIMIT);
    run_ok(jbuild(&home).args(["prune"]), LIMIT);
    let blobs = fs::read_dir(home.join("root/store/blobs/sha256"))
        .unwrap()
        .count();
    assert_eq!(blobs, 0, "every blob of the list was freed");
    run_ok(jbuild(&home).args(["check"]), LIMIT);

    // Several platforms need a list, and a list is not an image name.
    let out = run_bounded(
        jbuild(&home)
            .args(["build", "--platform", "freebsd/amd64,freebsd/arm64"])
            .arg(&ctx),
        LIMIT,
    );
    fails_with(&out, 1, &["--manifest"]);
    let out = run_bounded(
        jbuild(&home)
            .args([
                "build",
                "--platform",
                "freebsd/amd64,freebsd/arm64",
                "--manifest",
                "w:2",
                "-t",
                "w:3",
            ])
            .arg(&ctx),
        LIMIT,
    );
    fails_with(&out, 1, &["-t names one image"]);
}

#[test]
fn a_run_step_for_a_foreign_architecture_fails_before_anything_runs() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("a");
    fs::create_dir_all(&home).unwrap();
    let ctx = native_context(t.path());
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY hello /etc/hello\nRUN echo built > /etc/built\n",
    )
    .unwrap();
    let host = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no foreign architecture chosen for a {other} host"),
    };
    let foreign = if host == "amd64" { "arm64" } else { "amd64" };
    let both = format!("freebsd/{host},freebsd/{foreign}");
    for args in [
        vec!["--platform".to_string(), format!("freebsd/{foreign}")],
        vec![
            "--platform".to_string(),
            both,
            "--manifest".into(),
            "web:1".into(),
        ],
    ] {
        let out = run_bounded(
            jbuild(&home)
                .args(["--json", "build"])
                .args(&args)
                .arg(&ctx),
            LIMIT,
        );
        let err = fails_with(
            &out,
            1,
            &[
                "Jailfile:3",
                "RUN echo built > /etc/built",
                &format!("freebsd/{foreign}"),
                &format!("{host} host"),
            ],
        );
        let stdout = text(&out.stdout);
        assert!(
            !stdout.contains("step_start"),
            "a step started ({args:?}):\n{stdout}\n{err}"
        );
    }
    let images = json(&run_ok(jbuild(&home).args(["--json", "images"]), LIMIT));
    assert_eq!(images, serde_json::json!([]), "nothing was built");
}

#[test]
fn a_list_stitched_from_images_each_runner_pushed_as_docs_platforms_says() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let ctx = native_context(t.path());
    let repo = format!("{}/jails/web", reg.host());
    // One root per "runner", each pushing its architecture's image.
    let mut built = Vec::new();
    for arch in ["amd64", "arm64"] {
        let runner = t.path().join(arch);
        fs::create_dir_all(&runner).unwrap();
        let tag = format!("{repo}:1.0-{arch}");
        built.push(build_for(&runner, &ctx, &format!("freebsd/{arch}"), &tag));
        run_ok(jbuild(&runner).args(["push", &tag]), LIMIT);
    }
    // The stitching job starts empty.
    let job = t.path().join("job");
    fs::create_dir_all(&job).unwrap();
    let mut names = Vec::new();
    for arch in ["amd64", "arm64"] {
        let tag = format!("{repo}:1.0-{arch}");
        run_ok(
            jbuild(&job).args(["pull", "--platform", &format!("freebsd/{arch}"), &tag]),
            LIMIT,
        );
        names.push(tag);
    }
    run_ok(
        jbuild(&job)
            .args(["manifest", "create", "web:1.0"])
            .args(&names),
        LIMIT,
    );
    let dest = format!("{repo}:1.0");
    run_ok(
        jbuild(&job).args(["manifest", "push", "web:1.0", &dest]),
        LIMIT,
    );
    let raw = run_ok(
        skopeo(t.path()).args([
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{dest}"),
        ]),
        LIMIT,
    );
    assert_eq!(
        entries(&json(&raw)),
        vec![
            ("freebsd/amd64".to_string(), built[0].clone()),
            ("freebsd/arm64".to_string(), built[1].clone()),
        ]
    );
}

#[test]
fn build_for_two_platforms_with_push_sends_the_list_and_both_images() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("a");
    fs::create_dir_all(&home).unwrap();
    let ctx = native_context(t.path());
    let registry = Registry::start();
    let list = format!("{}/web:multi", registry.host());
    let out = run_ok(
        jbuild(&home)
            .args([
                "--json",
                "build",
                "--platform",
                "freebsd/amd64,freebsd/arm64",
            ])
            .args(["--manifest", &list, "--push"])
            .arg(&ctx),
        LIMIT,
    );
    let result = out
        .lines()
        .map(json)
        .find(|v| v["event"] == "result")
        .unwrap_or_else(|| panic!("no result in:\n{out}"));
    let raw = run_ok(
        skopeo(t.path())
            .args(["inspect", "--raw", "--tls-verify=false"])
            .arg(format!("docker://{list}")),
        LIMIT,
    );
    let index = json(&raw);
    let want: Vec<(String, String)> = result["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["platform"].as_str().unwrap().to_string(),
                i["manifest"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(entries(&index), want, "the pushed list holds both images");
    let repo = list.rsplit_once(':').unwrap().0;
    for (platform, digest) in &want {
        let child = json(&run_ok(
            skopeo(t.path())
                .args(["inspect", "--config", "--tls-verify=false"])
                .arg(format!("docker://{repo}@{digest}")),
            LIMIT,
        ));
        assert_eq!(
            child["architecture"],
            platform.rsplit('/').next().unwrap(),
            "the {platform} image was pushed"
        );
    }
}
