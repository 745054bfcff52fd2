//! docs/ci.md's two job scripts, cut out of the page and run as written:
//! two "runners" (empty state roots) build the `static-site` example for
//! amd64 and arm64 against a real Distribution registry with the shared
//! cache, a third empty runner rebuilds amd64 and runs no step, and the
//! assemble job pushes an index that skopeo reads with both platforms.
//! The registry wants credentials, which the scripts log in with.
//! A change to the page that breaks the pipeline fails here.

use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use registry_support::{htpasswd, jbuild, repo, run_ok, skopeo, Options, Registry, LIMIT};
use serde_json::Value;

/// The fenced `sh` block of docs/ci.md whose second line starts with
/// `# <name>:` (the first is the `#!/bin/sh` line).
fn script(doc: &str, name: &str) -> String {
    let mut blocks = doc.split("```sh\n").skip(1);
    let block = blocks
        .find(|b| {
            b.lines()
                .nth(1)
                .is_some_and(|l| l.starts_with(&format!("# {name}:")))
        })
        .unwrap_or_else(|| panic!("docs/ci.md has no ```sh block starting `# {name}:`"));
    block
        .split("```")
        .next()
        .expect("split yields a first part")
        .to_string()
}

/// `sh SCRIPT` as a runner would run it: jbuild on PATH, its state in
/// `home/root`, working directory `home/work`.
fn runner(home: &Path, script: &Path, env: &[(&str, &str)]) -> Command {
    let bin = home.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let link = bin.join("jbuild");
    if !link.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jbuild"), &link).unwrap();
    }
    let work = home.join("work");
    fs::create_dir_all(&work).unwrap();
    // The environment jbuild(home) would have, on a `sh` command.
    let template = jbuild(home);
    let mut c = Command::new("sh");
    c.arg(script).current_dir(&work);
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.env("PATH", path);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// The step results of a `--json` build's events.
fn step_results(events: &str) -> Vec<String> {
    events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "step_done")
        .map(|e| e["result"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_pipeline_in_docs_ci_md_runs_as_written() {
    let doc = fs::read_to_string(repo().join("docs/ci.md")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let scripts = tmp.path().join("ci");
    fs::create_dir_all(&scripts).unwrap();
    let build: PathBuf = scripts.join("build.sh");
    let assemble: PathBuf = scripts.join("assemble.sh");
    fs::write(&build, script(&doc, "ci/build.sh")).unwrap();
    fs::write(&assemble, script(&doc, "ci/assemble.sh")).unwrap();

    // A registry that wants credentials, as a CI's does: the scripts log in
    // from REGISTRY_USER / REGISTRY_PASSWORD.
    let registry = Registry::start_with(&Options {
        htpasswd: Some(htpasswd(tmp.path(), &[("ci", "s3cret-pw")])),
        ..Options::default()
    });
    let image = format!("{}/app", registry.host());
    let context = repo().join("Jailfile.examples/static-site");
    let context = context.to_str().unwrap();
    let common = [
        ("IMAGE", image.as_str()),
        ("TAG", "1.4"),
        ("CONTEXT", context),
        ("REGISTRY_USER", "ci"),
        ("REGISTRY_PASSWORD", "s3cret-pw"),
    ];
    let run_build = |name: &str, arch: &str| -> (String, Vec<String>) {
        let home = tmp.path().join(name);
        let mut env = common.to_vec();
        env.push(("ARCH", arch));
        run_ok(&mut runner(&home, &build, &env), LIMIT);
        let work = home.join("work");
        let id = fs::read_to_string(work.join("image-id")).unwrap();
        let events = fs::read_to_string(work.join("build-events.json")).unwrap();
        (id.trim().to_string(), step_results(&events))
    };

    // Two native runners, each with an empty root.
    let (amd64, first) = run_build("runner-amd64", "amd64");
    let (arm64, _) = run_build("runner-arm64", "arm64");
    assert!(
        first.iter().any(|r| r == "done"),
        "the first build ran steps: {first:?}"
    );
    assert_ne!(amd64, arm64, "one image per platform");

    // A later run on a wiped runner: every step comes from the shared cache.
    let (again, results) = run_build("runner-amd64-again", "amd64");
    assert_eq!(again, amd64, "the cached build gives the same image");
    assert!(
        !results.iter().any(|r| r == "done"),
        "no step runs on a wiped runner with the shared cache: {results:?}"
    );
    assert!(
        results.iter().any(|r| r == "fetched"),
        "steps were restored from the registry: {results:?}"
    );

    // The assemble job.
    let home = tmp.path().join("assemble");
    let mut env = common.to_vec();
    env.push(("ARCHS", "amd64 arm64"));
    run_ok(&mut runner(&home, &assemble, &env), LIMIT);

    let raw = run_ok(
        skopeo(tmp.path())
            .args([
                "inspect",
                "--raw",
                "--tls-verify=false",
                "--creds",
                "ci:s3cret-pw",
            ])
            .arg(format!("docker://{image}:1.4")),
        LIMIT,
    );
    let index: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let mut platforms: Vec<String> = index["manifests"]
        .as_array()
        .expect("an index lists manifests")
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or_default(),
                m["platform"]["architecture"].as_str().unwrap_or_default()
            )
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["freebsd/amd64", "freebsd/arm64"]);
    for arch in ["amd64", "arm64"] {
        let config = run_ok(
            skopeo(tmp.path())
                .args([
                    "inspect",
                    "--config",
                    "--tls-verify=false",
                    "--creds",
                    "ci:s3cret-pw",
                ])
                .args(["--override-os", "freebsd", "--override-arch", arch])
                .arg(format!("docker://{image}:1.4")),
            LIMIT,
        );
        let config: Value = serde_json::from_str(&config).unwrap();
        assert_eq!(config["architecture"], arch);
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.version"], "1.4",
            "--label reached the {arch} image"
        );
    }
}
