//! The Dockerfile instructions and flags docker and podman accept, through
//! the `jbuild` binary (issue 33 item 2): STOPSIGNAL, HEALTHCHECK, SHELL,
//! MAINTAINER and ONBUILD in the image config as Docker's image format keeps
//! them (read from `jbuild export`'s OCI layout, as a peer reads it), the
//! ONBUILD triggers run by the build that uses the image as FROM,
//! `COPY --link`, `--parents` and `--exclude`, and a continuation on the
//! last line. The trees are unpacked by umoci.

use crate::support::common::*;
use crate::support::lane;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// A build context under `dir` with `files` (path, content) and the
/// Jailfile `jailfile`.
fn context(dir: &Path, jailfile: &str, files: &[(&str, &str)]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), jailfile).unwrap();
    for (p, content) in files {
        let path = dir.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    dir.to_path_buf()
}

/// `jbuild build -t tag ctx`: its standard error (the build must succeed).
fn build(root: &Path, tag: &str, ctx: &Path, extra: &[&str]) -> String {
    let out = run(jbuild(root).args(["build", "-t", tag]).args(extra).arg(ctx));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "build {tag}: {err}");
    err
}

/// `image` exported to an OCI layout and unpacked by umoci: its config
/// (as the layout holds it) and its root.
fn exported(root: &Path, image: &str, work: &Path) -> (Value, PathBuf) {
    let (layout, rootfs) = export_unpacked(root, image, work);
    let blob = |digest: &str| -> Value {
        let hex = digest.strip_prefix("sha256:").unwrap();
        serde_json::from_slice(&fs::read(layout.join("blobs/sha256").join(hex)).unwrap()).unwrap()
    };
    let index: Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest = blob(index["manifests"][0]["digest"].as_str().unwrap());
    let config = blob(manifest["config"]["digest"].as_str().unwrap());
    (config, rootfs)
}

/// The paths of the regular files under `dir`, relative and sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

#[test]
fn stopsignal_healthcheck_shell_maintainer_and_onbuild_reach_the_config_and_triggers_run() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let parent = context(
        &t.path().join("parent"),
        "FROM scratch\n\
         COPY hello.txt /\n\
         STOPSIGNAL SIGINT\n\
         HEALTHCHECK --interval=30s --timeout=5s --start-period=1m30s --start-interval=500ms --retries=4 \\\n  CMD [\"/bin/check\", \"-q\"]\n\
         SHELL [\"/bin/ash\", \"-eo\", \"pipefail\", \"-c\"]\n\
         CMD echo hi\n\
         ONBUILD COPY greeting.txt /onbuild/\n\
         onbuild LABEL from.trigger=$TRIGGERED\n\
         MAINTAINER Jane Doe <jane@example.org>\n",
        &[("hello.txt", "hello\n")],
    );
    let err = build(&root, "parent:1", &parent, &[]);
    assert!(
        err.contains("MaintainerDeprecated") && err.contains("Jailfile:10:1"),
        "no deprecation note for MAINTAINER at its line:\n{err}"
    );
    let (config, _) = exported(&root, "parent:1", t.path());
    let c = &config["config"];
    assert_eq!(c["StopSignal"], "SIGINT", "{config}");
    assert_eq!(
        c["Healthcheck"],
        json!({
            "Test": ["CMD", "/bin/check", "-q"],
            "Interval": 30_000_000_000u64,
            "Timeout": 5_000_000_000u64,
            "StartPeriod": 90_000_000_000u64,
            "StartInterval": 500_000_000u64,
            "Retries": 4,
        })
    );
    assert_eq!(c["Shell"], json!(["/bin/ash", "-eo", "pipefail", "-c"]));
    // The shell form of CMD after SHELL runs through that shell.
    assert_eq!(
        c["Cmd"],
        json!(["/bin/ash", "-eo", "pipefail", "-c", "echo hi"])
    );
    assert_eq!(
        c["OnBuild"],
        json!([
            "COPY greeting.txt /onbuild/",
            "LABEL from.trigger=$TRIGGERED"
        ])
    );
    assert_eq!(
        c["Labels"]["org.opencontainers.image.authors"],
        "Jane Doe <jane@example.org>"
    );

    // The triggers run in the build FROM it, in its context and scope,
    // right after FROM; the new image keeps none of them, and inherits
    // the rest.
    let child = context(
        &t.path().join("child"),
        "ARG TRIGGERED=yes\nFROM parent:1\nARG TRIGGERED\nHEALTHCHECK NONE\n",
        &[("greeting.txt", "from the child's context\n")],
    );
    build(&root, "child:1", &child, &[]);
    let (config, rootfs) = exported(&root, "child:1", t.path());
    let c = &config["config"];
    assert_eq!(files(&rootfs), ["hello.txt", "onbuild/greeting.txt"]);
    assert_eq!(
        fs::read_to_string(rootfs.join("onbuild/greeting.txt")).unwrap(),
        "from the child's context\n"
    );
    assert_eq!(c["Labels"]["from.trigger"], "", "{config}");
    assert!(c.get("OnBuild").is_none(), "{config}");
    assert_eq!(c["Healthcheck"], json!({"Test": ["NONE"]}));
    assert_eq!(c["StopSignal"], "SIGINT");
    assert_eq!(c["Shell"], json!(["/bin/ash", "-eo", "pipefail", "-c"]));
    let history: Vec<&str> = config["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["created_by"].as_str())
        .collect();
    assert!(
        history.contains(&"COPY greeting.txt /onbuild/"),
        "{history:?}"
    );
}

#[test]
fn onbuild_triggers_docker_refuses_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    for (i, (line, says)) in [
        (
            "ONBUILD ONBUILD RUN true",
            "ONBUILD cannot trigger another ONBUILD",
        ),
        ("ONBUILD FROM scratch", "FROM cannot be an ONBUILD trigger"),
        (
            "ONBUILD MAINTAINER me",
            "MAINTAINER cannot be an ONBUILD trigger",
        ),
        (
            "ONBUILD COPY --bogus=1 a /b",
            "`--bogus` is not supported on COPY",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let ctx = context(
            &t.path().join(format!("c{i}")),
            &format!("FROM scratch\n{line}\n"),
            &[],
        );
        let out = run(jbuild(&root).args(["build", "-t", "x:1"]).arg(&ctx));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{line}: {err}");
        assert!(
            err.contains(says) && err.contains("Jailfile:2:"),
            "{line}: {err}"
        );
    }
}

#[test]
fn shell_sets_the_interpreter_of_later_shell_form_runs() {
    lane::require(lane::Lane::Root);
    lane::require(lane::Lane::Busybox);
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let bb = static_busybox().expect("the busybox lane found it");
    let ctx = context(
        &t.path().join("ctx"),
        "FROM --platform=linux/amd64 scratch\n\
         COPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
         RUN echo \"default:${MARK:-unset}\" > /before\n\
         SHELL [\"/bin/busybox\", \"env\", \"MARK=from-shell\", \"/bin/sh\", \"-c\"]\n\
         RUN echo \"shell:$MARK\" > /after\n\
         RUN [\"/bin/sh\", \"-c\", \"echo exec:${MARK:-unset} > /exec\"]\n",
        &[],
    );
    fs::copy(bb, ctx.join("busybox")).unwrap();
    build(&root, "sh:1", &ctx, &[]);
    let (config, rootfs) = exported(&root, "sh:1", t.path());
    let read = |p: &str| fs::read_to_string(rootfs.join(p)).unwrap();
    assert_eq!(read("before"), "default:unset\n");
    assert_eq!(read("after"), "shell:from-shell\n");
    // The exec form is not the shell's.
    assert_eq!(read("exec"), "exec:unset\n");
    assert_eq!(
        config["config"]["Shell"],
        json!(["/bin/busybox", "env", "MARK=from-shell", "/bin/sh", "-c"])
    );
}

#[test]
fn copy_link_parents_and_exclude() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = context(
        &t.path().join("ctx"),
        "FROM scratch\n\
         COPY --link top.txt /link/\n\
         COPY --link=false top.txt /nolink/\n\
         COPY --parents src/a/x.txt src/b /p/\n\
         COPY --parents ./src/./a/x.txt /q\n\
         COPY --parents src/*/x.txt /g/\n\
         COPY --exclude=**/*.log --exclude=b src /e/\n\
         COPY --exclude=*.txt src/a/ /f/\n",
        &[
            ("top.txt", "top\n"),
            ("src/a/x.txt", "x\n"),
            ("src/a/y.log", "y\n"),
            ("src/b/z.txt", "z\n"),
            ("src/c/x.txt", "cx\n"),
        ],
    );
    build(&root, "copy:1", &ctx, &[]);
    let (_, rootfs) = exported(&root, "copy:1", t.path());
    assert_eq!(
        files(&rootfs),
        [
            "e/a/x.txt",
            "e/c/x.txt",
            "f/y.log",
            "g/src/a/x.txt",
            "g/src/c/x.txt",
            "link/top.txt",
            "nolink/top.txt",
            "p/src/a/x.txt",
            "p/src/b/z.txt",
            "q/a/x.txt",
        ]
    );
}

#[test]
fn a_continuation_on_the_last_line_ends_the_instruction() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = context(
        &t.path().join("ctx"),
        "FROM scratch\nCOPY top.txt \\\n  /cont/ \\",
        &[("top.txt", "top\n")],
    );
    build(&root, "cont:1", &ctx, &[]);
    let (_, rootfs) = exported(&root, "cont:1", t.path());
    assert_eq!(files(&rootfs), ["cont/top.txt"]);
}

#[test]
fn an_earlier_stages_onbuild_runs_in_each_stage_from_it_and_not_in_theirs() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = context(
        &t.path().join("ctx"),
        "FROM scratch AS base\n\
         ONBUILD COPY mark.txt /from-trigger/\n\
         FROM base AS one\n\
         COPY one.txt /\n\
         FROM one AS two\n\
         COPY two.txt /\n\
         FROM base\n\
         COPY --from=two / /two/\n",
        &[("mark.txt", "m\n"), ("one.txt", "1\n"), ("two.txt", "2\n")],
    );
    build(&root, "stages:1", &ctx, &[]);
    let (config, rootfs) = exported(&root, "stages:1", t.path());
    // The last stage ran the trigger too; stage `two` got it through
    // `one`, which ran it, and did not run it again.
    assert_eq!(
        files(&rootfs),
        [
            "from-trigger/mark.txt",
            "two/from-trigger/mark.txt",
            "two/one.txt",
            "two/two.txt"
        ]
    );
    assert!(config["config"].get("OnBuild").is_none(), "{config}");
    let history: Vec<&str> = config["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["created_by"].as_str())
        .collect();
    assert_eq!(
        history
            .iter()
            .filter(|h| **h == "COPY mark.txt /from-trigger/")
            .count(),
        1,
        "{history:?}"
    );
}

/// Rewrites the config of the only image in the OCI layout `layout` with
/// `edit`, and the manifest and index with it (digests and sizes), as
/// another tool could have written the image.
fn edit_config(layout: &Path, edit: impl FnOnce(&mut Value)) {
    use sha2::{Digest, Sha256};
    let put = |bytes: &[u8]| -> (String, u64) {
        let hex = format!("{:x}", Sha256::digest(bytes));
        fs::write(layout.join("blobs/sha256").join(&hex), bytes).unwrap();
        (format!("sha256:{hex}"), bytes.len() as u64)
    };
    let read = |digest: &str| -> Value {
        let hex = digest.strip_prefix("sha256:").unwrap();
        serde_json::from_slice(&fs::read(layout.join("blobs/sha256").join(hex)).unwrap()).unwrap()
    };
    let index_path = layout.join("index.json");
    let mut index: Value = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
    let mut manifest = read(index["manifests"][0]["digest"].as_str().unwrap());
    let mut config = read(manifest["config"]["digest"].as_str().unwrap());
    edit(&mut config);
    let (digest, size) = put(&serde_json::to_vec(&config).unwrap());
    manifest["config"]["digest"] = json!(digest);
    manifest["config"]["size"] = json!(size);
    let (digest, size) = put(&serde_json::to_vec(&manifest).unwrap());
    index["manifests"][0]["digest"] = json!(digest);
    index["manifests"][0]["size"] = json!(size);
    fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
}

#[test]
fn another_tools_image_with_triggers_onbuild_refuses_is_refused_at_from() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let base = context(
        &t.path().join("base"),
        "FROM scratch\nCOPY a.txt /\n",
        &[("a.txt", "a\n")],
    );
    build(&root, "base:1", &base, &[]);
    let layout = t.path().join("layout");
    ok(jbuild(&root)
        .arg("export")
        .arg("base:1")
        .arg(format!("oci:{}:1", layout.display())));
    for (i, (triggers, says)) in [
        (
            json!(["COPY a.txt /x/\nFROM scratch"]),
            "an ONBUILD trigger of more than one instruction",
        ),
        (
            json!(["MAINTAINER someone"]),
            "has an ONBUILD trigger jbuild refuses: `MAINTAINER`",
        ),
        (
            json!(["FROM scratch"]),
            "has an ONBUILD trigger jbuild refuses: `FROM`",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let copy = t.path().join(format!("layout{i}"));
        copy_tree(&layout, &copy);
        edit_config(&copy, |c| c["config"]["OnBuild"] = triggers);
        let name = format!("odd{i}:1");
        ok(jbuild(&root)
            .arg("import")
            .arg(format!("oci:{}:1", copy.display()))
            .arg(&name));
        let ctx = context(
            &t.path().join(format!("child{i}")),
            &format!("FROM {name}\n"),
            &[("a.txt", "a\n")],
        );
        let out = run(jbuild(&root).args(["build", "-t", "c:1"]).arg(&ctx));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "case {i}: {err}");
        assert!(err.contains(says), "case {i}: {err}");
    }
}

/// A stage the target does not need is not built, and its FROM image is
/// not fetched to look for ONBUILD triggers either (BuildKit skips such a
/// stage whole): a registry on 127.0.0.1 that only counts connections
/// gets none, with and without `--target`.
#[test]
fn a_stage_the_target_does_not_need_is_not_fetched_for_its_triggers() {
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    // Accepts and drops every connection (jbuild's retries end quickly),
    // until the test ends and the thread with it.
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    let t = tempfile::tempdir().unwrap();
    let ctx = context(
        &t.path().join("ctx"),
        &format!(
            "FROM 127.0.0.1:{port}/unused:1 AS unused\nRUN true\n\
             FROM scratch AS app\nCOPY x /x\n\
             FROM 127.0.0.1:{port}/other:1 AS after\nRUN true\n"
        ),
        &[("x", "x\n")],
    );
    let root = t.path().join("root");
    build(&root, "app:1", &ctx, &["--target", "app"]);
    assert_eq!(seen.load(Ordering::SeqCst), 0, "a connection was made");

    // Without --target the last stage is built: its image is fetched (and
    // the registry that drops connections fails the build), the first
    // stage's still not.
    let out = run(jbuild(&root).args(["build", "-t", "after:1"]).arg(&ctx));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("other:1") && !err.contains("unused:1"),
        "{err}"
    );
}
