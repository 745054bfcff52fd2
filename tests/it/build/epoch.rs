//! `SOURCE_DATE_EPOCH` and the local build cache, through the `jbuild`
//! binary: the clamp on file times is part of how a layer is exported, not
//! of what a step made, so one root builds with and without it (and in
//! either compression) to the digests a clean root gives for each, its
//! steps cached, and `jbuild verify` and `jbuild check --deep` agree.

use crate::support::common::{jbuild, ok, run};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::registry::{self as registry_support, Registry};

const EPOCH: &str = "1700000000";

const JAILFILE: &str = "FROM scratch\n\
COPY etc/ /etc/\n\
SYSRC sshd_enable=YES\n\
COPY b.txt /srv/b.txt\n";

/// The first step of [`JAILFILE`] alone: the same key, so building it
/// re-exports that step's snapshot and not the ones above it.
const PREFIX: &str = "FROM scratch\nCOPY etc/ /etc/\n";

/// A context whose files were written now, after `EPOCH`: the clamp
/// changes their times in a layer.
fn context(dir: &Path) -> PathBuf {
    let ctx = dir.join("ctx");
    fs::create_dir_all(ctx.join("etc/app")).unwrap();
    fs::write(ctx.join("Jailfile"), JAILFILE).unwrap();
    fs::write(ctx.join("Prefix.Jailfile"), PREFIX).unwrap();
    fs::write(ctx.join("etc/app/app.conf"), "port=80\n").unwrap();
    fs::write(ctx.join("b.txt"), "b\n").unwrap();
    ctx
}

/// Builds `jailfile` in `ctx` into `root` as `tag`, with `SOURCE_DATE_EPOCH`
/// set to `epoch` (or unset) and layers in `compression`: the manifest
/// digest and the JSON result.
fn build(
    root: &Path,
    ctx: &Path,
    jailfile: &str,
    epoch: Option<&str>,
    compression: &str,
    tag: &str,
) -> (String, serde_json::Value) {
    build_with(jbuild(root), ctx, jailfile, epoch, compression, tag, &[])
}

/// [`build`] with the command `c` (a state root and environment) and
/// `extra` build flags.
fn build_with(
    mut c: Command,
    ctx: &Path,
    jailfile: &str,
    epoch: Option<&str>,
    compression: &str,
    tag: &str,
    extra: &[&str],
) -> (String, serde_json::Value) {
    if let Some(e) = epoch {
        c.env("SOURCE_DATE_EPOCH", e);
    }
    c.args(["--json", "build", "-t", tag, "--compression", compression])
        .args(extra)
        .arg("-f")
        .arg(ctx.join(jailfile))
        .arg(ctx);
    let out = ok(&mut c);
    let result = crate::support::common::json_result(&out);
    let digest = result["manifest"].as_str().unwrap().to_string();
    (digest, result)
}

fn verified(root: &Path, ctx: &Path, tag: &str) {
    let out = run(jbuild(root).args(["verify", tag, "--context"]).arg(ctx));
    assert!(
        out.status.success(),
        "verify {tag}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `check --deep`: nothing damaged (each layer's labels agree with its
/// parent's and with the layer made again under its own clamp).
fn checked(root: &Path) {
    checked_with(jbuild(root))
}

fn checked_with(mut c: Command) {
    let out = run(c.args(["--json", "check", "--deep"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: not JSON:\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["damaged"], serde_json::json!([]), "{v:#}");
}

#[test]
fn one_root_builds_with_and_without_source_date_epoch_to_a_clean_roots_digests() {
    let t = tempfile::tempdir().unwrap();
    let ctx = context(t.path());
    let clean = |name: &str, epoch, compression| {
        build(
            &t.path().join(name),
            &ctx,
            "Jailfile",
            epoch,
            compression,
            "app:1",
        )
        .0
    };
    let plain = clean("clean-plain", None, "gzip");
    let dated = clean("clean-dated", Some(EPOCH), "gzip");
    let dated_zstd = clean("clean-dated-zstd", Some(EPOCH), "zstd");
    assert_ne!(plain, dated, "the clamp must show in the layers");

    // Without, then with: the steps are cached, the layers exported anew.
    let root = t.path().join("plain-first");
    assert_eq!(
        build(&root, &ctx, "Jailfile", None, "gzip", "app:plain").0,
        plain
    );
    let (digest, result) = build(&root, &ctx, "Jailfile", Some(EPOCH), "gzip", "app:dated");
    assert_eq!(digest, dated, "{result}");
    assert_eq!(result["steps_run"], 0, "{result}");
    verified(&root, &ctx, "app:dated");
    verified(&root, &ctx, "app:plain");

    // A build of the first step alone, without: that step's layer is made
    // under the other clamp than the step above it...
    build(&root, &ctx, "Prefix.Jailfile", None, "gzip", "prefix:1");
    checked(&root);
    // ... and the whole recipe, with, still gives the clean digest.
    assert_eq!(
        build(&root, &ctx, "Jailfile", Some(EPOCH), "gzip", "app:dated").0,
        dated
    );
    checked(&root);

    // With, then without.
    let root = t.path().join("dated-first");
    assert_eq!(
        build(&root, &ctx, "Jailfile", Some(EPOCH), "gzip", "app:dated").0,
        dated
    );
    let (digest, result) = build(&root, &ctx, "Jailfile", None, "gzip", "app:plain");
    assert_eq!(digest, plain, "{result}");
    assert_eq!(result["steps_run"], 0, "{result}");
    verified(&root, &ctx, "app:plain");
    verified(&root, &ctx, "app:dated");
    checked(&root);

    // A blob of another compression made under the old clamp is not the
    // one this clamp gives: zstd without, gzip with, then zstd with.
    let root = t.path().join("compressions");
    build(&root, &ctx, "Jailfile", None, "zstd", "app:plain");
    assert_eq!(
        build(&root, &ctx, "Jailfile", Some(EPOCH), "gzip", "app:dated").0,
        dated
    );
    assert_eq!(
        build(&root, &ctx, "Jailfile", Some(EPOCH), "zstd", "app:zstd").0,
        dated_zstd
    );
    verified(&root, &ctx, "app:zstd");
    checked(&root);
}

/// A step fetched from the registry cache under this build's clamp, onto a
/// local layer last exported under another: the image is the clean root's,
/// and the fetched layer is not labelled with a chain ID mixed from both
/// clamps (which `check` would call damaged once the parent is exported
/// again under this clamp).
#[test]
fn a_step_fetched_onto_a_layer_of_another_clamp_is_labelled_consistently() {
    let registry = Registry::start();
    let cache = format!("{}/cache", registry.host());
    let t = tempfile::tempdir().unwrap();
    let ctx = context(t.path());
    let home = |name: &str| {
        let h = t.path().join(name);
        fs::create_dir_all(&h).unwrap();
        h
    };
    let jb = |home: &Path| registry_support::jbuild(home);
    let dated = build(
        &t.path().join("clean"),
        &ctx,
        "Jailfile",
        Some(EPOCH),
        "gzip",
        "app:1",
    )
    .0;

    // A runner fills the cache, with the clamp.
    let a = home("a");
    let to = ["--cache-to", cache.as_str()];
    let (digest, _) = build_with(jb(&a), &ctx, "Jailfile", Some(EPOCH), "gzip", "app:1", &to);
    assert_eq!(digest, dated);

    // Another has the first step, made without; the steps above it come
    // from the cache.
    let b = home("b");
    build_with(
        jb(&b),
        &ctx,
        "Prefix.Jailfile",
        None,
        "gzip",
        "prefix:1",
        &[],
    );
    let from = ["--cache-from", cache.as_str()];
    let (digest, result) = build_with(
        jb(&b),
        &ctx,
        "Jailfile",
        Some(EPOCH),
        "gzip",
        "app:1",
        &from,
    );
    assert_eq!(result["steps_fetched"], 2, "{result}");
    assert_eq!(digest, dated, "{result}");
    checked_with(jb(&b));
}

#[test]
fn a_source_date_epoch_past_the_year_9999_is_a_user_error_naming_it() {
    // Microseconds where seconds were meant: 1796000000 s is 2026, so
    // 1796000000000000 is far past the year 9999, which no RFC 3339
    // `created` can hold (it once panicked, exit 101).
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let root = dir.path().join("root");
    let out = run(jbuild(&root)
        .env("SOURCE_DATE_EPOCH", "1796000000000000")
        .args(["build", "-t", "far"])
        .arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("SOURCE_DATE_EPOCH=`1796000000000000` is after the year 9999")
            && err.contains("not milliseconds"),
        "{err}"
    );
    // The last second that can be written builds.
    let (digest, _) = build(
        &root,
        &ctx,
        "Jailfile",
        Some("253402300799"),
        "gzip",
        "last",
    );
    assert!(digest.starts_with("sha256:"), "{digest}");
}
