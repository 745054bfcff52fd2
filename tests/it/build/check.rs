//! `jbuild build --check` (issue 33 item 5): the recipes the build
//! refuses give the same error, at the same file, line and column,
//! without a step run or anything stored; the warnings (a RUN that PKG
//! would do, an ARG named like a secret, `COPY .` with no ignore file);
//! `--json`; every mistake of a recipe, in the order the build meets them.

use crate::support::common::*;

use std::fs;
use std::path::Path;

use serde_json::Value;

/// A context under `dir` with `Jailfile` and `a.txt`.
fn context(dir: &Path, jailfile: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), jailfile).unwrap();
    fs::write(dir.join("a.txt"), "a\n").unwrap();
}

/// The `error:` line of a failed command's standard error, without its
/// `error: ` and with what follows the location.
fn error_line(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("no error line in:\n{stderr}"))
        .to_string()
}

#[test]
fn check_finds_what_the_build_refuses_without_running_a_step() {
    let t = tempfile::tempdir().unwrap();
    // (recipe, extra flags, where the build stops, what it says)
    let cases: &[(&str, &[&str], &str, &str)] = &[
        (
            "FROM scratch\nCOPY a.txt /\nRUNN true\n",
            &[],
            "Jailfile:3:1",
            "unknown instruction `RUNN`",
        ),
        (
            "FROM scratch\nCOPY a.txt /\nCOPY missing.txt /m/\n",
            &[],
            "Jailfile:3:1",
            "COPY source `missing.txt` matches nothing in the build context",
        ),
        (
            "FROM scratch\nCOPY a.txt /\nRUN --mount=type=secret,id=tok,required=true true\n",
            &[],
            "Jailfile:3:1",
            "requires the secret `tok`",
        ),
        (
            "FROM scratch\nCOPY a.txt /\nJAIL allow.raw_sockets\nRUN true\n",
            &[],
            "Jailfile:",
            "allow.raw_sockets",
        ),
        (
            "FROM scratch\nCOPY a.txt /\nADD --keep-git-dir a.txt /x/\n",
            &[],
            "Jailfile:3:1",
            "--keep-git-dir is for a git repository source",
        ),
        (
            "FROM scratch AS empty\nLABEL only=metadata\nFROM scratch\nCOPY a.txt /\nCOPY --from=empty /etc/x /x\n",
            &[],
            "Jailfile:5:1",
            "that stage made no files",
        ),
        (
            "FROM scratch AS one\nCOPY a.txt /\n",
            &["--target", "two"],
            "",
            "has no stage `two`",
        ),
    ];
    for (i, (recipe, flags, at, says)) in cases.iter().enumerate() {
        let ctx = t.path().join(format!("ctx{i}"));
        context(&ctx, recipe);
        let root = t.path().join(format!("root{i}"));
        let built = run(jbuild(&root).arg("build").args(*flags).arg(&ctx));
        let build_err = String::from_utf8_lossy(&built.stderr).into_owned();
        assert_eq!(built.status.code(), Some(1), "case {i}: {build_err}");
        let build_error = error_line(&build_err);
        // A diagnostic names its place on the line after (`--> FILE:L:C`).
        assert!(
            build_err.contains(at) && build_error.contains(says),
            "case {i}: the build's error changed:\n{build_err}"
        );

        let root = t.path().join(format!("checked{i}"));
        let checked = run(jbuild(&root)
            .args(["build", "--check"])
            .args(*flags)
            .arg(&ctx));
        let out = String::from_utf8_lossy(&checked.stdout).into_owned();
        let err = String::from_utf8_lossy(&checked.stderr).into_owned();
        assert_eq!(checked.status.code(), Some(1), "case {i}: {out}{err}");
        let first = out.lines().next().unwrap_or_default();
        assert!(
            first.contains(at) && first.contains(": error: ") && first.contains(says),
            "case {i}: --check's first problem is not the build's ({build_error}):\n{out}"
        );
        // Nothing ran: no step was started, no layer made.
        assert!(!err.contains("[2/"), "case {i}: a step started:\n{err}");
        let made: usize = fs::read_dir(root.join("snapshots"))
            .map(|backends| {
                backends
                    .map(|b| b.unwrap().path().join("committed"))
                    .map(|c| fs::read_dir(c).map_or(0, |d| d.count()))
                    .sum()
            })
            .unwrap_or(0);
        assert_eq!(made, 0, "case {i}: --check committed snapshots");
    }
}

#[test]
fn check_warns_and_passes_a_sound_recipe_and_speaks_json() {
    let t = tempfile::tempdir().unwrap();
    let ctx = t.path().join("ctx");
    context(
        &ctx,
        "FROM scratch\nARG DB_PASSWORD=hunter2\nCOPY . /src/\nRUN pkg install -y nginx curl\n",
    );
    let root = t.path().join("root");
    let checked = run(jbuild(&root).args(["build", "--check"]).arg(&ctx));
    let out = String::from_utf8_lossy(&checked.stdout).into_owned();
    assert!(
        checked.status.success(),
        "warnings alone failed the check:\n{out}"
    );
    for (at, says) in [
        (
            "Jailfile:2:5: warning: ",
            "ARG `DB_PASSWORD` looks like it holds a secret",
        ),
        (
            "Jailfile:3:1: warning: ",
            "`COPY .` copies the whole build context",
        ),
        ("Jailfile:4:1: warning: ", "write `PKG nginx curl`"),
    ] {
        assert!(
            out.lines().any(|l| l.contains(at) && l.contains(says)),
            "no `{at}{says}` in:\n{out}"
        );
    }
    // With an ignore file, `COPY .` is what the user meant.
    fs::write(ctx.join(".jailignore"), ".git\n").unwrap();
    let json = run(jbuild(&root).args(["--json", "build", "--check"]).arg(&ctx));
    assert!(json.status.success());
    let doc: Value = String::from_utf8_lossy(&json.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "check")
        .expect("a check event");
    assert_eq!(doc["errors"], 0, "{doc}");
    let codes: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["SecretsUsedInArgOrEnv", "RunPkgInstall"], "{doc}");
    assert_eq!(doc["problems"][1]["line"], 4);
    assert_eq!(doc["problems"][1]["column"], 1);
}

#[test]
fn check_reports_every_mistake_each_where_the_build_meets_it() {
    let t = tempfile::tempdir().unwrap();
    // Three mistakes in two stages: one that does not parse, one the
    // resolver refuses, one planning refuses (in the first stage).
    let lines = [
        "FROM scratch AS one",
        "COPY missing.txt /m/",
        "COPY a.txt /a.txt",
        "FROM scratch",
        "RUNN true",
        "COPY --from=one / /one/",
        "ADD --keep-git-dir \\",
        "    a.txt /x/",
        "COPY a.txt /ok/",
    ];
    let ctx = t.path().join("ctx");
    context(&ctx, &(lines.join("\n") + "\n"));
    let root = t.path().join("root");
    let checked = run(jbuild(&root).args(["--json", "build", "--check"]).arg(&ctx));
    assert_eq!(checked.status.code(), Some(1));
    let doc: Value = String::from_utf8_lossy(&checked.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "check")
        .expect("a check event");
    assert_eq!(doc["errors"], 3, "{doc}");
    let errors: Vec<(u64, u64, String)> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["severity"] == "error")
        .map(|p| {
            assert!(p["file"].as_str().unwrap().ends_with("Jailfile"), "{p}");
            (
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
                p["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let at: Vec<(u64, u64)> = errors.iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(at, [(5, 1), (7, 1), (2, 1)], "{doc}");

    // The build meets them in that order, one at a time: with the ones
    // before fixed (their lines emptied), it stops at the next, saying
    // what --check said.
    let mut fixed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    for (i, (line, col, message)) in errors.iter().enumerate() {
        let dir = t.path().join(format!("fixed{i}"));
        context(&dir, &(fixed.join("\n") + "\n"));
        let built = run(jbuild(&t.path().join(format!("b{i}")))
            .arg("build")
            .arg(&dir));
        let err = String::from_utf8_lossy(&built.stderr).into_owned();
        assert_eq!(built.status.code(), Some(1), "{err}");
        let first = message.split(" (help: ").next().unwrap();
        assert!(
            err.contains(&format!("Jailfile:{line}:{col}")) && err.contains(first),
            "mistake {i}: the build does not stop at {line}:{col} with `{first}`:\n{err}"
        );
        fixed[*line as usize - 1] = String::new();
        if *line == 7 {
            fixed[7] = String::new();
        }
    }
    // All three fixed: the recipe builds.
    let dir = t.path().join("all-fixed");
    context(&dir, &(fixed.join("\n") + "\n"));
    ok(jbuild(&t.path().join("b-all")).arg("build").arg(&dir));

    // The text form: one `FILE:LINE:COL: error:` line each.
    let plain = run(jbuild(&root).args(["build", "--check"]).arg(&ctx));
    let out = String::from_utf8_lossy(&plain.stdout).into_owned();
    for (line, col, _) in &errors {
        assert!(
            out.lines()
                .any(|l| l.contains(&format!("Jailfile:{line}:{col}: error: "))),
            "no error at {line}:{col} in:\n{out}"
        );
    }
    assert!(String::from_utf8_lossy(&plain.stderr).contains("3 errors found"));
}
