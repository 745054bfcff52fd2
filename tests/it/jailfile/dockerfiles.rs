//! Ten Dockerfiles in the shape of BuildKit's parser test files
//! (`tests/data/dockerfiles/<name>/Dockerfile`, written for jbuild: line
//! continuations with comments and empty lines in them, the `# escape=`
//! directive and a comment that ends the directives, JSON and shell
//! forms, every variable form, heredocs, the configuration instructions,
//! stages and their arguments, flags, a byte order mark and CRLF), each
//! with its meaning beside it (`expected`: every stage and the resolved
//! instructions, one a line), as Docker's reference documents it.
//!
//! `JBUILD_BLESS=1` writes `expected` from what jbuild reads: for a new
//! file only, and then read it line by line against the reference.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::fs;
use std::path::Path;

struct NoTriggers;

impl jbuild::jailfile::Triggers for NoTriggers {
    fn onbuild(&self, _: &str, _: Option<&str>) -> Vec<String> {
        Vec::new()
    }
}

/// What jbuild makes of `file` in a build for freebsd/amd64 on
/// freebsd/arm64 (BuildKit's platform arguments predefined): its stages
/// and their steps.
fn meaning(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    let platform_args = [
        ("TARGETPLATFORM", "freebsd/amd64"),
        ("TARGETOS", "freebsd"),
        ("TARGETARCH", "amd64"),
        ("TARGETVARIANT", ""),
        ("BUILDPLATFORM", "freebsd/arm64"),
        ("BUILDOS", "freebsd"),
        ("BUILDARCH", "arm64"),
        ("BUILDVARIANT", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let inputs = jbuild::jailfile::BuildInputs {
        context: file.parent().unwrap(),
        triggers: &NoTriggers,
        platform_args,
    };
    let build = jbuild::jailfile::load_for_build(file, &text, &BTreeMap::new(), &inputs)
        .unwrap_or_else(|d| panic!("{}: {d}", file.display()));
    let mut out = String::new();
    for stage in &build.stages {
        writeln!(
            out,
            "stage {} {:?} base={:?} platform={:?}",
            stage.index, stage.name, stage.base, stage.platform
        )
        .unwrap();
        for step in &stage.steps {
            write!(out, "  {}: {:?}", step.location.line, step.op).unwrap();
            // The ARGs in scope: a RUN's environment.
            if !step.args.is_empty() {
                write!(out, " args={:?}", step.args).unwrap();
            }
            out.push('\n');
        }
    }
    out
}

#[test]
fn buildkit_shaped_dockerfiles_mean_what_docker_says() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dockerfiles");
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert_eq!(names.len(), 10, "{names:?}");
    let mut wrong = Vec::new();
    for case in names {
        let got = meaning(&case.join("Dockerfile"));
        let expected = case.join("expected");
        if std::env::var_os("JBUILD_BLESS").is_some() && !expected.exists() {
            fs::write(&expected, &got).unwrap();
        }
        let want = fs::read_to_string(&expected).unwrap_or_default();
        if got != want {
            wrong.push(format!(
                "{}:\n--- expected\n{want}--- jbuild reads\n{got}",
                case.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
