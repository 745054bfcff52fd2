//! Work packages' scripts leave for the jail's first start (issue 32),
//! through the `jbuild` binary on Linux, with the packages of
//! `scripts.rs`'s repository: `fonts` (the `@fc` keyword's `fc-cache -s`
//! post-install, a cache rebuilder) and `weird` (a post-install running
//! `frobnicate`, a command jbuild does not know). The first-start script
//! and `/firstboot` are read from the step's layer by GNU tar, the
//! `deferred` events from `--json`, the record from `jbuild inspect`.
//! They share `scripts.rs`'s repository and `setup`.
#![cfg(target_os = "linux")]

use std::fs;

use serde_json::Value;

use super::scripts::{recipe, setup};
use super::{build_json, last_layer_listing};
use crate::support::common::{export_unpacked, jbuild, json_result, ok, run};

const SCRIPT: &str = "usr/local/etc/rc.d/jbuild_firstboot";

/// The `deferred` events of a `--json` stdout.
fn deferred_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "deferred")
        .collect()
}

/// `jbuild inspect TAG`'s `firstStart`.
fn first_start(root: &std::path::Path, tag: &str) -> Value {
    let out = ok(jbuild(root).args(["inspect", tag]));
    let doc: Value = serde_json::from_str(&out).unwrap();
    doc["firstStart"].clone()
}

#[test]
fn a_cache_rebuilder_waits_for_the_first_start_in_the_layer_json_and_inspect() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let dir = recipe(&s, "fonts", "PKG --no-bootstrap fonts");
    let stdout = build_json(&s.root, &dir, "fonts:1");
    let command = "fc-cache -s /usr/local/share/fonts/test";
    let events = deferred_events(&stdout);
    assert_eq!(events.len(), 1, "{stdout}");
    assert_eq!(events[0]["package"], "fonts-1.0");
    assert_eq!(events[0]["script"], "post-install");
    assert_eq!(events[0]["reason"], "rebuilder");
    assert!(
        events[0]["command"].as_str().unwrap().starts_with(command),
        "{}",
        events[0]
    );
    let said = super::said(&stdout);
    assert!(
        said.contains("fonts-1.0 post-install: `fc-cache -s /usr/local/share/fonts/test")
            && said.contains("deferred to the jail's first start"),
        "{said}"
    );
    // The step's layer holds the script (0555 root:wheel) and the sentinel.
    let (layout, rootfs) = export_unpacked(&s.root, "fonts:1", t.path());
    let listing = last_layer_listing(&layout);
    let line = |path: &str| {
        listing
            .lines()
            .find(|l| l.ends_with(path))
            .unwrap_or_else(|| panic!("{path}: {listing}"))
            .to_string()
    };
    assert!(line(SCRIPT).starts_with("-r-xr-xr-x 0/0 "), "{listing}");
    assert!(
        line(" firstboot").starts_with("-rw-r--r-- 0/0 "),
        "{listing}"
    );
    let script = fs::read_to_string(rootfs.join(SCRIPT)).unwrap();
    assert!(script.contains("# KEYWORD: firstboot\n"), "{script}");
    assert!(
        script.contains(&format!(
            "\tjbuild_firstboot_run 'fonts-1.0' 'post-install' 'rebuilder' '{command}"
        )),
        "{script}"
    );
    // The image says it.
    let fs_ = first_start(&s.root, "fonts:1");
    assert_eq!(
        fs_["script"], "/usr/local/etc/rc.d/jbuild_firstboot",
        "{fs_}"
    );
    assert_eq!(fs_["commands"][0]["package"], "fonts-1.0", "{fs_}");
    assert_eq!(fs_["omitted"], 0, "{fs_}");
    // A second fresh store: the same image, to the digest.
    let first = json_result(&stdout)["manifest"].clone();
    let other = t.path().join("other");
    ok(jbuild(&other)
        .args(["build", "-q", "-t", "base:1", "--platform", "freebsd/amd64"])
        .arg(&s.base));
    let again = build_json(&other, &dir, "fonts:1");
    assert!(first.is_string(), "{stdout}");
    assert_eq!(json_result(&again)["manifest"], first);
    // A cached build: the same image and record.
    let cached = build_json(&s.root, &dir, "fonts:2");
    assert_eq!(json_result(&cached)["manifest"], first);
}

#[test]
fn an_unknown_command_fails_the_step_by_default_and_waits_for_the_first_start_with_scripts_defer() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let dir = recipe(&s, "weird", "PKG --no-bootstrap weird");
    let out = run(jbuild(&s.root).args(["build", "-t", "weird:1"]).arg(&dir));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for part in ["weird-1.0", "post-install", "frobnicate"] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }

    // The flag, and a later PKG step adding its own after it.
    let dir = recipe(
        &s,
        "weird-defer",
        "PKG --no-bootstrap --scripts=defer weird\nPKG --no-bootstrap fonts",
    );
    let stdout = build_json(&s.root, &dir, "weird:2");
    let events = deferred_events(&stdout);
    assert_eq!(events[0]["reason"], "unknown", "{stdout}");
    assert_eq!(
        events[0]["command"], "frobnicate --all /usr/local",
        "{stdout}"
    );
    let listed: Vec<(Value, Value)> = first_start(&s.root, "weird:2")["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["package"].clone(), c["reason"].clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (Value::from("weird-1.0"), Value::from("unknown")),
            (Value::from("fonts-1.0"), Value::from("rebuilder")),
        ]
    );

    // The configuration's `[pkg] scripts = "defer"` does what the flag
    // does: the same step (its key), so the flag's step is reused, and
    // the image says the same.
    let config = t.path().join("config.toml");
    fs::write(&config, "[pkg]\nscripts = \"defer\"\n").unwrap();
    let dir = recipe(&s, "weird-config", "PKG --no-bootstrap weird");
    let stdout = ok(jbuild(&s.root)
        .env("JBUILD_CONFIG", &config)
        .args(["--json", "build", "-t", "weird:3"])
        .arg(&dir));
    let pkg_step = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["event"] == "step_done")
        .unwrap();
    assert_eq!(pkg_step["result"], "cached", "{stdout}");
    assert_eq!(
        first_start(&s.root, "weird:3")["commands"][0]["command"],
        "frobnicate --all /usr/local"
    );
}
