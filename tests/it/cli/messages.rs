//! The command line as a user meets it: messages, exit codes, JSON.

use crate::support::common;

use std::fs;

use crate::support::lane::{self, Lane};
use common::*;

fn jailfile(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), text).unwrap();
    dir.to_path_buf()
}

#[test]
fn a_recipe_mistake_names_the_line_and_exits_1() {
    let t = tempfile::tempdir().unwrap();
    let ctx = jailfile(
        &t.path().join("c"),
        "FROM scratch\nSYSCR nginx_enable=YES\n",
    );
    let out = run(jbuild(&t.path().join("r")).arg("build").arg(&ctx));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Jailfile:2:1"), "{err}");
    assert!(
        err.contains("SYSRC"),
        "suggests the closest instruction: {err}"
    );
    assert!(err.starts_with("error: "), "{err}");
}

#[test]
fn a_failing_copy_names_the_step_and_nothing_is_tagged() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let ctx = jailfile(
        &t.path().join("c"),
        "FROM scratch\nSYSRC a=1\nCOPY missing.txt /etc/\n",
    );
    let out = run(jbuild(&root).args(["build", "-t", "bad:1"]).arg(&ctx));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Jailfile:3:1") && err.contains("missing.txt"),
        "{err}"
    );
    let images = ok(jbuild(&root).arg("images"));
    assert!(!images.contains("bad:1"), "{images}");
    // The step before it is cached and the failed one left no snapshot behind.
    let active = root.join("snapshots/dir/active");
    assert_eq!(fs::read_dir(&active).map(|d| d.count()).unwrap_or(0), 0);
}

#[test]
fn bad_arguments_exit_1_with_a_clear_message() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let out = run(jbuild(&root).args(["build", "/nonexistent-context"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a directory"));

    let ctx = jailfile(&t.path().join("c"), "FROM scratch\n");
    let out = run(jbuild(&root).args(["build", "-t", "UPPER:case"]).arg(&ctx));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(jbuild(&root)
        .args(["build", "--platform", "freebsd"])
        .arg(&ctx));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("os/arch"));
    let out = run(jbuild(&root).args(["inspect", "nope:1"]));
    assert_eq!(out.status.code(), Some(1));
    let out = run(jbuild(&root).args(["rmi", "nope:1"]));
    assert_eq!(out.status.code(), Some(1));
}

/// Usage mistakes clap finds are the user's like any other: exit 1 with
/// clap's message on standard error (clap alone would exit 2, jbuild's code
/// for its own faults); `--help` and `--version` succeed on standard output.
#[test]
fn usage_mistakes_exit_1_help_and_version_exit_0() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    for (args, says) in [
        (&["build", "--no-such-flag", "."][..], "unexpected argument"),
        (&["tag", "one:1"], "required"),
        (&["build", "--compression", "bzip9", "."], "invalid value"),
        (&["no-such-command"], "unrecognized subcommand"),
        (&[], "Usage"),
    ] {
        let out = run(jbuild(&root).args(args));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    for args in [&["--help"][..], &["--version"], &["build", "--help"]] {
        let out = run(jbuild(&root).args(args));
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
}

/// jbuild(1) says what every exit code means, and the README says the same.
#[test]
fn every_exit_code_is_documented() {
    let t = tempfile::tempdir().unwrap();
    let page = ok(jbuild(t.path()).arg("man"));
    let section = page
        .split(".SH \"EXIT STATUS\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no EXIT STATUS in jbuild(1):\n{page}"));
    let section = section.split("\n.SH").next().unwrap();
    for code in ["0", "1", "2"] {
        assert!(
            section.contains(&format!(".TP\n\\fB{code}\\fR")),
            "exit code {code} missing from jbuild(1):\n{section}"
        );
    }
    assert!(section.contains("unknown flag"), "{section}");
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for says in [
        "`0` success",
        "`1` a mistake in the recipe, arguments",
        "`2` an internal fault",
    ] {
        assert!(readme.contains(says), "README: {says}");
    }
}

#[test]
fn tag_rmi_history_and_json() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let ctx = jailfile(
        &t.path().join("c"),
        "FROM scratch\nENV A=1\nLINE_IN_FILE \"hello\" /etc/motd\nLABEL x=y\nCMD [\"/bin/sh\"]\n",
    );
    let digest = ok(jbuild(&root).args(["build", "-q", "-t", "one:1"]).arg(&ctx))
        .trim()
        .to_string();
    ok(jbuild(&root).args(["tag", "one:1", "two:2"]));
    ok(jbuild(&root).args(["tag", &digest[..20], "three:3"]));
    let list: serde_json::Value =
        serde_json::from_str(&ok(jbuild(&root).args(["--json", "images"]))).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["one:1", "three:3", "two:2"]);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["digest"] == digest));

    let hist: serde_json::Value =
        serde_json::from_str(&ok(jbuild(&root).args(["--json", "history", "two:2"]))).unwrap();
    let rows: Vec<(String, bool)> = hist
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["created_by"].as_str().unwrap().to_string(),
                h["empty_layer"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("ENV A=1".to_string(), true),
            ("LINE_IN_FILE \"hello\" /etc/motd".to_string(), false),
            ("LABEL x=y".to_string(), true),
            ("CMD [\"/bin/sh\"]".to_string(), true),
        ]
    );
    // --json rmi: one result naming what went and what failed (exit 1).
    let out = run(jbuild(&root).args(["--json", "rmi", "one:1", "nope:9", "two:2"]));
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(v["event"], "result");
    let removed: Vec<(&str, &str, &str)> = v["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["digest"].as_str().unwrap(),
                r["what"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        removed,
        vec![
            ("one:1", digest.as_str(), "untagged"),
            ("two:2", digest.as_str(), "untagged")
        ]
    );
    assert_eq!(v["failed"].as_array().unwrap().len(), 1);
    assert_eq!(v["failed"][0]["name"], "nope:9");
    assert!(v["failed"][0]["error"].as_str().unwrap().contains("nope:9"));
    let left = ok(jbuild(&root).arg("images"));
    assert!(
        left.contains("three:3") && !left.contains("one:1"),
        "{left}"
    );
    ok(jbuild(&root).args(["rmi", "three:3"]));
    let pruned = ok(jbuild(&root).args(["--json", "prune", "--cache"]));
    let v: serde_json::Value = serde_json::from_str(pruned.trim()).unwrap();
    assert!(
        v["blobs_removed"].as_u64().unwrap() >= 3,
        "manifest, config and the layer: {v}"
    );
    assert!(v["snapshots_removed"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn help_lists_the_commands() {
    let t = tempfile::tempdir().unwrap();
    let out = ok(jbuild(t.path()).arg("--help"));
    for cmd in [
        "build", "images", "inspect", "history", "tag", "rmi", "prune", "export", "import", "info",
        "convert", "create",
    ] {
        assert!(out.contains(cmd), "{cmd} missing from --help:\n{out}");
    }
}

#[test]
fn copy_from_a_stage_that_made_no_files_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let ctx = jailfile(
        &t.path().join("c"),
        "FROM scratch AS empty\nLABEL only=metadata\nFROM scratch\nCOPY --from=empty /etc/x /etc/x\n",
    );
    let out = run(jbuild(&t.path().join("r")).arg("build").arg(&ctx));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Jailfile:4:1") && err.contains("made no files"),
        "{err}"
    );
}

/// A step that fails while it runs, not because a process it ran failed
/// (a native edit, a `COPY --chown` owner, the working directory of a
/// RUN), is the recipe's mistake: exit 1, at the step's line, with the
/// cause on a `caused by:` line when the message does not already say it.
#[test]
fn a_step_that_cannot_be_carried_out_exits_1() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let mut cases = vec![
        (
            "FROM scratch\nSYSRC a=1\nLINE_IN_FILE \"x\" /etc\n",
            "`/etc`",
            false,
        ),
        (
            "FROM scratch\nSYSRC a=1\nCOPY --chown=nobody Jailfile /x\n",
            "`nobody`",
            false,
        ),
    ];
    if lane::need(Lane::Root) {
        // Checked before anything is started: no executor needs to work.
        cases.push((
            "FROM scratch\nSYSRC a=1\nLINE_IN_FILE \"x\" /w\nWORKDIR /w\nRUN true\n",
            "working directory /w",
            true,
        ));
    }
    for (i, (text, words, cause)) in cases.into_iter().enumerate() {
        let ctx = jailfile(&t.path().join(format!("c{i}")), text);
        let out = run(jbuild(&root).args(["build", "-t", "bad:1"]).arg(&ctx));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text}: {err}");
        let last = text.lines().count();
        assert!(
            err.contains(&format!("Jailfile:{last}:1")) && err.contains(words),
            "{text}: {err}"
        );
        assert_eq!(err.contains("\n  caused by: "), cause, "{text}: {err}");
    }
}

/// `jbuild images | head -1`, `jbuild check --repair | head`: a reader that
/// went away ends the output, not the command (no panic, same exit code);
/// a standard output that cannot be written (a full disk) is an error.
#[test]
fn a_closed_or_full_standard_output() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let ctx = jailfile(&t.path().join("c"), "FROM scratch\nSYSRC a=1\n");
    ok(jbuild(&root).args(["build", "-q", "-t", "one:1"]).arg(&ctx));
    for tag in ["one:2", "two:1", "three:1"] {
        ok(jbuild(&root).args(["tag", "one:1", tag]));
    }
    for args in [
        &["images"][..],
        &["check"],
        &["check", "--repair"],
        &["history", "one:1"],
        &["--json", "images"],
        &["--json", "build", "-t", "one:3", ctx.to_str().unwrap()],
    ] {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        drop(reader);
        let out = run(jbuild(&root).args(args).stdout(std::fs::File::from(writer)));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");

        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = run(jbuild(&root).args(args).stdout(full));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.matches("error: cannot write to standard output")
                .count(),
            1,
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let images = ok(jbuild(&root).arg("images"));
    assert_eq!(images.lines().count(), 6, "{images}");
}
