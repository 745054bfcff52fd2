//! The flags CI scripts use, each through the `jbuild` binary and, where a
//! registry is involved, against the real Distribution registry (and
//! skopeo reading what jbuild pushed): `--target`, `--label`,
//! `--annotation`, `--iidfile`, `push --digestfile`, `--pull=…`, `-f -`,
//! `--build-arg-file`, `build --push`.
//!
//! Every recipe here is made of native instructions, so nothing needs a
//! jail or root; the registry and skopeo must be installed (`tests/run`
//! installs them).

use crate::support::registry as registry_support;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use registry_support::proxy::Proxy;
use registry_support::{run_bounded, run_ok, Registry, LIMIT};
use serde_json::Value;

/// A state root and credentials of its own (`home/root`), and a build
/// context `home/ctx` holding `Jailfile` = `jailfile` and a file `site/a`.
struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new(jailfile: &str) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = tmp.path().join("ctx");
        fs::create_dir_all(ctx.join("site")).unwrap();
        fs::write(ctx.join("site/a"), "content of a\n").unwrap();
        fs::write(ctx.join("Jailfile"), jailfile).unwrap();
        Home { tmp }
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    fn ctx(&self) -> PathBuf {
        self.path("ctx")
    }
    fn jbuild(&self) -> Command {
        registry_support::jbuild(self.tmp.path())
    }
    fn skopeo(&self) -> Command {
        registry_support::skopeo(self.tmp.path())
    }
    /// `jbuild --json build ARGS… ctx`; its result event.
    fn build(&self, args: &[&str]) -> Value {
        let out = run_ok(
            self.jbuild()
                .args(["--json", "build"])
                .args(args)
                .arg(self.ctx()),
            LIMIT,
        );
        result(&out)
    }
    /// `jbuild build ARGS… ctx`, expected to fail.
    fn build_fails(&self, args: &[&str]) -> Output {
        run_bounded(self.jbuild().arg("build").args(args).arg(self.ctx()), LIMIT)
    }
    /// The image's config and manifest, as skopeo reads them at `reference`.
    fn skopeo_config_and_manifest(&self, reference: &str) -> (Value, Value) {
        let read = |extra: &[&str]| -> Value {
            let out = run_ok(
                self.skopeo()
                    .args(["inspect", "--tls-verify=false"])
                    .args(extra)
                    .arg(format!("docker://{reference}")),
                LIMIT,
            );
            serde_json::from_str(&out).unwrap()
        };
        (read(&["--config"]), read(&["--raw"]))
    }
    fn skopeo_digest(&self, reference: &str) -> String {
        run_ok(
            self.skopeo()
                .args(["inspect", "--tls-verify=false", "--format", "{{.Digest}}"])
                .arg(format!("docker://{reference}")),
            LIMIT,
        )
        .trim()
        .to_string()
    }
}

fn result(stdout: &str) -> Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "result")
        .unwrap_or_else(|| panic!("no result event in:\n{stdout}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit code 1 (the user's mistake) and `wanted` in the error.
fn fails_with(out: &Output, wanted: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    for w in wanted {
        assert!(err.contains(w), "`{w}` not in:\n{err}");
    }
}

fn names_in_store(h: &Home) -> String {
    run_ok(h.jbuild().arg("images"), LIMIT)
}

const TWO_STAGES: &str = "\
FROM scratch AS assemble
COPY site/ /build/
SYSRC -f /build/app.conf stage=assemble

FROM scratch AS final
LABEL from=jailfile kept=yes
COPY --from=assemble /build/ /srv/
SYSRC app_enable=YES
";

#[test]
fn target_builds_the_named_stage_and_what_it_needs_and_an_unknown_one_is_refused() {
    let h = Home::new(TWO_STAGES);
    let by_name = h.build(&["--target", "assemble", "-t", "asm:1"]);
    assert_eq!(by_name["steps_run"], 2, "{by_name}");
    let by_index = h.build(&["--target", "0"]);
    assert_eq!(by_index["manifest"], by_name["manifest"]);
    assert_eq!(by_index["steps_run"], 0, "the same stage is cached");
    let history = run_ok(h.jbuild().args(["history", "--no-trunc", "asm:1"]), LIMIT);
    assert!(history.contains("SYSRC -f /build/app.conf"), "{history}");
    assert!(!history.contains("app_enable"), "{history}");

    let whole = h.build(&[]);
    assert_ne!(whole["manifest"], by_name["manifest"]);
    assert_eq!(whole["steps_run"], 2, "only the final stage's steps run");

    let out = h.build_fails(&["--target", "web", "-t", "never:1"]);
    fails_with(
        &out,
        &["no stage `web`", "`assemble` (0), `final` (1)", "Jailfile"],
    );
    assert!(!names_in_store(&h).contains("never"));
}

#[test]
fn labels_and_annotations_reach_the_pushed_image_and_run_no_step_again() {
    let reg = Registry::start();
    let h = Home::new(TWO_STAGES);
    let plain = h.build(&[]);
    let name = format!("{}/ci/labels:1", reg.host());
    let labelled = h.build(&[
        "--label",
        "from=flag",
        "--label",
        "build.number=42",
        "--annotation",
        "org.opencontainers.image.source=https://example.org/repo",
        "--annotation",
        "ci.job=7=seven",
        "-t",
        &name,
        "--push",
    ]);
    assert_eq!(
        labelled["steps_run"], 0,
        "labels change no step: {labelled}"
    );
    assert_ne!(labelled["manifest"], plain["manifest"]);
    assert_ne!(labelled["config"], plain["config"]);

    let (config, manifest) = h.skopeo_config_and_manifest(&name);
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["from"], "flag", "--label wins over LABEL: {labels}");
    assert_eq!(labels["kept"], "yes", "{labels}");
    assert_eq!(labels["build.number"], "42", "{labels}");
    let annotations = &manifest["annotations"];
    assert_eq!(
        annotations["org.opencontainers.image.source"],
        "https://example.org/repo"
    );
    assert_eq!(annotations["ci.job"], "7=seven");
    assert!(annotations["org.opencontainers.image.created"].is_string());
    assert!(
        config["config"]["Labels"].get("ci.job").is_none(),
        "an annotation is not a label"
    );

    for (flag, bad) in [("--label", "=x"), ("--annotation", "novalue")] {
        let out = h.build_fails(&[flag, bad]);
        fails_with(&out, &[flag, bad, "NAME=VALUE"]);
    }
}

#[test]
fn iidfile_holds_the_digest_images_and_inspect_know() {
    let h = Home::new(TWO_STAGES);
    // A bare file name: written in the working directory.
    let out = run_ok(
        h.jbuild()
            .current_dir(h.tmp.path())
            .args(["build", "-q", "--iidfile", "image.id", "-t", "app:1"])
            .arg(h.ctx()),
        LIMIT,
    );
    let iid = fs::read_to_string(h.path("image.id")).unwrap();
    assert!(iid.starts_with("sha256:") && iid.len() == 71, "{iid:?}");
    assert_eq!(iid, out.trim(), "the digest build prints");
    let listed = run_ok(h.jbuild().args(["images", "--digests-only"]), LIMIT);
    assert_eq!(listed.trim(), iid);
    let inspected: Value =
        serde_json::from_str(&run_ok(h.jbuild().args(["inspect", &iid]), LIMIT)).unwrap();
    assert_eq!(inspected["config"]["os"], "freebsd", "{inspected}");
    // No leftover temporary file beside it.
    let beside: Vec<_> = fs::read_dir(h.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");

    let out = h.build_fails(&["--iidfile", "/nonexistent-dir/id"]);
    fails_with(&out, &["--iidfile", "/nonexistent-dir/id"]);
}

#[test]
fn push_digestfile_holds_the_digest_skopeo_reads() {
    let reg = Registry::start();
    let h = Home::new(TWO_STAGES);
    let built = h.build(&["-t", "app:1"]);
    let name = format!("{}/ci/app:1", reg.host());
    let file = h.path("pushed.digest");
    let printed = run_ok(
        h.jbuild()
            .args(["push", "--digestfile"])
            .arg(&file)
            .args(["app:1", &name]),
        LIMIT,
    );
    let digest = fs::read_to_string(&file).unwrap();
    assert_eq!(digest, h.skopeo_digest(&name));
    assert_eq!(digest, printed.trim());
    assert_eq!(digest, built["manifest"].as_str().unwrap());
}

/// A base image in the registry, reached through a proxy that logs every
/// request; builds FROM it in a fresh root.
struct PullWorld {
    _reg: Registry,
    proxy: Proxy,
    base: String,
    publisher: Home,
}

impl PullWorld {
    fn new() -> PullWorld {
        let reg = Registry::start();
        let proxy = Proxy::start(reg.port, vec![]);
        let base = format!("127.0.0.1:{}/ci/base:1", proxy.port);
        let publisher = Home::new("FROM scratch\nCOPY site/ /srv/\n");
        publisher.build(&["-t", &base, "--push"]);
        PullWorld {
            _reg: reg,
            proxy,
            base,
            publisher,
        }
    }

    /// Publishes a changed base under the same name; returns its digest.
    fn republish(&self) -> String {
        fs::write(self.publisher.ctx().join("site/a"), "changed\n").unwrap();
        let r = self.publisher.build(&["-t", &self.base, "--push"]);
        r["manifest"].as_str().unwrap().to_string()
    }

    fn user(&self) -> Home {
        Home::new(&format!("FROM {}\nSYSRC built=yes\n", self.base))
    }
}

/// The base digest a built image records (`org.opencontainers.image.base.digest`).
fn base_digest(h: &Home, image: &str) -> String {
    let v: Value =
        serde_json::from_str(&run_ok(h.jbuild().args(["inspect", image]), LIMIT)).unwrap();
    v["manifest"]["annotations"]["org.opencontainers.image.base.digest"]
        .as_str()
        .unwrap_or_else(|| panic!("no base digest in {v}"))
        .to_string()
}

#[test]
fn pull_never_fails_naming_the_image_without_a_request_and_builds_from_the_store() {
    let w = PullWorld::new();
    let h = w.user();
    w.proxy.clear_log();
    let out = h.build_fails(&["--pull=never"]);
    fails_with(&out, &[&w.base, "--pull=never", "not in the local store"]);
    assert_eq!(
        w.proxy.requests(),
        Vec::<String>::new(),
        "no request at all"
    );

    h.build(&["-t", "out:1"]);
    assert!(
        !w.proxy.requests().is_empty(),
        "the default pulls a missing image"
    );
    w.proxy.clear_log();
    let r = h.build(&["--pull=never", "-t", "out:1"]);
    assert_eq!(r["steps_run"], 0, "{r}");
    assert_eq!(w.proxy.requests(), Vec::<String>::new());
    // --pull=false is podman's spelling of never.
    h.build(&["--pull=false"]);
    assert_eq!(w.proxy.requests(), Vec::<String>::new());
}

#[test]
fn pull_always_asks_the_registry_once_and_takes_a_changed_base() {
    let w = PullWorld::new();
    let h = w.user();
    let first = h.build(&["-t", "out:1"]);
    let old_base = base_digest(&h, "out:1");

    // Unchanged: the manifest is asked for, no blob is fetched, no step runs.
    w.proxy.clear_log();
    let again = h.build(&["--pull", "-t", "out:1"]);
    let reqs = w.proxy.requests();
    let manifests: Vec<_> = reqs.iter().filter(|r| r.contains("/manifests/")).collect();
    let blobs: Vec<_> = reqs.iter().filter(|r| r.contains("/blobs/")).collect();
    assert_eq!(manifests.len(), 1, "{reqs:?}");
    assert_eq!(reqs.len(), 2, "the API check and the manifest: {reqs:?}");
    assert!(blobs.is_empty(), "{reqs:?}");
    assert_eq!(again["manifest"], first["manifest"]);
    assert_eq!(again["steps_run"], 0);

    // Changed: missing keeps the stored base; always takes the new one.
    let new_base = w.republish();
    assert_ne!(new_base, old_base);
    h.build(&["--pull=missing", "-t", "out:1"]);
    assert_eq!(base_digest(&h, "out:1"), old_base);
    let r = h.build(&["--pull=always", "-t", "out:1"]);
    assert_eq!(base_digest(&h, "out:1"), new_base);
    assert_eq!(r["steps_run"], 1, "the step on the new base runs: {r}");

    let out = h.build_fails(&["--pull=sometimes"]);
    fails_with(&out, &["--pull", "sometimes", "always, missing or never"]);
}

/// A two-platform build with `--pull=always` whose base is a two-platform
/// list in the registry, read by FROM and by COPY --from: the fetch phase
/// runs once for every pass (the check of both platforms, then both
/// builds), so the registry is asked for each platform's manifest once,
/// and for the list once per platform. (Before: the check pass and the
/// build pass each pulled, two pulls per base per platform.)
#[test]
fn pull_always_pulls_each_base_once_per_platform_in_a_multi_platform_build() {
    let reg = Registry::start();
    let proxy = Proxy::start(reg.port, vec![]);
    let base = format!("127.0.0.1:{}/ci/multi:1", proxy.port);
    let publisher = Home::new("FROM scratch\nCOPY site/ /srv/\n");
    let both = "freebsd/amd64,freebsd/arm64";
    publisher.build(&["--platform", both, "--manifest", "base:list"]);
    run_ok(
        publisher
            .jbuild()
            .args(["manifest", "push", "base:list", &base]),
        LIMIT,
    );
    let user = Home::new(&format!(
        "FROM {base}\nCOPY --from={base} /srv/a /copied\nSYSRC built=yes\n"
    ));
    proxy.clear_log();
    user.build(&[
        "--platform",
        both,
        "--manifest",
        "out:list",
        "--pull=always",
    ]);
    let reqs = proxy.requests();
    let gets = |what: &dyn Fn(&str) -> bool| {
        reqs.iter()
            .filter(|r| r.starts_with("GET ") && r.contains("/manifests/") && what(r))
            .count()
    };
    let by_digest: Vec<_> = reqs
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/manifests/sha256:"))
        .collect();
    let distinct: std::collections::BTreeSet<_> = by_digest.iter().collect();
    assert_eq!(distinct.len(), 2, "one manifest per platform: {reqs:?}");
    assert_eq!(
        by_digest.len(),
        2,
        "each platform's manifest once: {reqs:?}"
    );
    assert_eq!(
        gets(&|r| r.ends_with("/manifests/1")),
        2,
        "the list once per platform: {reqs:?}"
    );
}

/// `jbuild build -f - ARGS… ctx` with `stdin` on its standard input.
fn build_from_stdin(h: &Home, args: &[&str], stdin: &str) -> Output {
    let mut child = h
        .jbuild()
        .args(["--json", "build", "-f", "-"])
        .args(args)
        .arg(h.ctx())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.as_bytes().to_vec();
    // jbuild may stop reading early (too much): the pipe breaking then is
    // not the test's failure.
    let writer = std::thread::spawn(move || drop(input.write_all(&bytes)));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn a_jailfile_from_standard_input_builds_what_the_file_builds() {
    let recipe = "FROM scratch\nINCLUDE parts/copy.jail\nSYSRC from=stdin\n";
    let h = Home::new(recipe);
    fs::create_dir_all(h.ctx().join("parts")).unwrap();
    fs::write(h.ctx().join("parts/copy.jail"), "COPY site/ /srv/\n").unwrap();
    let from_file = h.build(&[]);

    // Another root, and a working directory where `parts/` does not exist:
    // INCLUDE resolves against the context.
    let other = Home::new("");
    fs::create_dir_all(other.ctx().join("parts")).unwrap();
    fs::write(other.ctx().join("parts/copy.jail"), "COPY site/ /srv/\n").unwrap();
    fs::remove_file(other.ctx().join("Jailfile")).unwrap();
    let out = build_from_stdin(&other, &[], recipe);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let from_stdin = result(&text(&out.stdout));
    assert_eq!(from_stdin["manifest"], from_file["manifest"]);
    assert_eq!(from_stdin["steps_run"], 2);

    let out = build_from_stdin(&other, &[], "FROM scratch\nCOPYY site/ /srv/\n");
    fails_with(&out, &["<stdin>:2:1", "COPYY"]);

    // Bounded as a Jailfile file is: 4 MiB.
    let mut big = String::from("FROM scratch\n");
    while big.len() <= 4 << 20 {
        big.push_str("# padding padding padding padding padding padding padding\n");
    }
    let out = build_from_stdin(&other, &[], &big);
    fails_with(&out, &["<stdin>", "more than 4 MiB"]);
    // Just under 4 MiB is read; but the image keeps its Jailfile in its
    // config, which may hold 4 MiB in all, so the build is refused there,
    // before anything is named (an image with a larger config is one no
    // command can read).
    let mut near = String::from("FROM scratch\nSYSRC a=b\n");
    while near.len() < (4 << 20) - 100 {
        near.push_str("# padding padding padding padding padding padding padding\n");
    }
    let out = build_from_stdin(&other, &[], &near);
    fails_with(
        &out,
        &[
            "the image config this build makes is",
            "org.jbuild.jailfile",
        ],
    );
    let fits = &near[..3 << 20];
    let fits = &fits[..fits.rfind('\n').unwrap() + 1];
    let out = build_from_stdin(&other, &[], fits);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn build_arg_files_give_values_that_build_arg_overrides() {
    let h = Home::new("FROM scratch\nARG A\nARG B\nARG C=default\nLABEL a=$A b=$B c=$C\n");
    let args = h.path("ci/args.conf");
    fs::create_dir_all(args.parent().unwrap()).unwrap();
    fs::write(
        &args,
        "# build arguments for CI\n\nA=from file\nB=file b\n  # indented comment\n",
    )
    .unwrap();
    let args = args.to_str().unwrap();
    h.build(&[
        "--build-arg-file",
        args,
        "--build-arg",
        "B=flag b",
        "-t",
        "x:1",
    ]);
    let v: Value =
        serde_json::from_str(&run_ok(h.jbuild().args(["inspect", "x:1"]), LIMIT)).unwrap();
    let labels = &v["config"]["config"]["Labels"];
    assert_eq!(labels["a"], "from file", "{labels}");
    assert_eq!(labels["b"], "flag b", "--build-arg wins: {labels}");
    assert_eq!(labels["c"], "default", "{labels}");

    fs::write(h.path("bad.conf"), "A=1\n\nJUST_A_NAME\n").unwrap();
    let bad = h.path("bad.conf");
    let out = h.build_fails(&["--build-arg-file", bad.to_str().unwrap()]);
    fails_with(&out, &[&format!("{}:3:", bad.display()), "no `=`"]);
    let out = h.build_fails(&["--build-arg-file", "/nonexistent/args.conf"]);
    fails_with(&out, &["/nonexistent/args.conf", "no such file"]);
}

#[test]
fn build_push_sends_every_name_and_skopeo_pulls_them() {
    let reg = Registry::start();
    let h = Home::new(TWO_STAGES);
    let a = format!("{}/ci/app:1", reg.host());
    let b = format!("{}/ci/app:latest", reg.host());
    let r = h.build(&["-t", &a, "-t", &b, "--push"]);
    let manifest = r["manifest"].as_str().unwrap();
    let pushed = r["pushed"].as_array().unwrap();
    assert_eq!(pushed.len(), 2, "{r}");
    for (p, name) in pushed.iter().zip([&a, &b]) {
        assert_eq!(p["digest"], manifest);
        assert!(p["name"].as_str().unwrap().contains(name.as_str()), "{p}");
        let layout = h.path(&format!("pulled-{}", name.rsplit(':').next().unwrap()));
        run_ok(
            h.skopeo()
                .args(["copy", "--src-tls-verify=false"])
                .arg(format!("docker://{name}"))
                .arg(format!("oci:{}:t", layout.display())),
            LIMIT,
        );
        assert_eq!(h.skopeo_digest(name), manifest);
    }

    // Without -t there is nothing to push: refused before anything runs.
    let fresh = Home::new(TWO_STAGES);
    let out = fresh.build_fails(&["--push"]);
    fails_with(&out, &["--push", "-t"]);
    assert!(
        !fresh.path("root/snapshots").exists() || dir_is_empty(&fresh.path("root/snapshots")),
        "nothing was built"
    );
}

fn dir_is_empty(p: &Path) -> bool {
    fs::read_dir(p)
        .map(|mut d| d.next().is_none())
        .unwrap_or(true)
}
