//! A RUN over a root known to hold FreeBSD programs, on a Linux host,
//! through the `jbuild` binary: refused before any step runs (exit 1,
//! naming the Jailfile line, the image's platform and the host), even when
//! an earlier step is cached; the same base labelled `linux/<arch>` runs
//! its RUN. (`FROM freebsd:<release>` is in `release::run_refused`.)
#![cfg(target_os = "linux")]

use crate::support::common::{jbuild, ok, run, static_busybox};
use crate::support::lane::{self, Lane};

use std::fs;
use std::path::{Path, PathBuf};

fn context(dir: &Path, jailfile: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), jailfile).unwrap();
    fs::write(dir.join("a.txt"), "a\n").unwrap();
    dir.to_path_buf()
}

/// Every snapshot of the `dir` backend, committed or active.
fn snapshots(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for kind in ["committed", "active"] {
        if let Ok(rd) = fs::read_dir(root.join("snapshots/dir").join(kind)) {
            out.extend(rd.map(|e| format!("{kind}/{}", e.unwrap().file_name().to_string_lossy())));
        }
    }
    out.sort();
    out
}

#[test]
fn a_run_over_an_image_whose_config_says_freebsd_is_refused_before_anything_runs() {
    let arch = jbuild::config::host_architecture();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    // jbuild's own default for FROM scratch: os freebsd in the config.
    let base = context(&t.path().join("base"), "FROM scratch\nCOPY a.txt /a.txt\n");
    ok(jbuild(&root)
        .args(["build", "-q", "-t", "base:1"])
        .arg(&base));
    let app = t.path().join("app");
    // The first steps built and cached: the refusal still comes first.
    context(&app, "FROM base:1\nCOPY a.txt /b.txt\n");
    ok(jbuild(&root).args(["build", "-q", "-t", "app:0"]).arg(&app));
    let before = snapshots(&root);
    fs::write(
        app.join("Jailfile"),
        "FROM base:1\nCOPY a.txt /b.txt\nRUN pkg install -y nginx\n",
    )
    .unwrap();

    let out = run(jbuild(&root)
        .args(["--json", "build", "-t", "app:1"])
        .arg(&app));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let error = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "error")
        .map(|v| v.to_string())
        .unwrap_or_default()
        + &stderr;
    for want in [
        "Jailfile:3:1: `RUN pkg install -y nginx`",
        &format!("a freebsd/{arch} root, as the config of image `base:1` says"),
        &format!("on this linux/{arch} host, which cannot run them"),
        &format!("build it with --platform linux/{arch}"),
        "`PKG nginx` does the same as this line",
    ] {
        assert!(error.contains(want), "want {want} in\n{error}");
    }
    // Nothing ran, not even the cached steps' reuse.
    assert!(!stdout.contains("step_start"), "{stdout}");
    assert_eq!(snapshots(&root), before);

    // The same base labelled as what it holds: its RUN runs.
    if lane::need(Lane::Root) && lane::need(Lane::Busybox) {
        fs::copy(static_busybox().unwrap(), base.join("busybox")).unwrap();
        fs::write(
            base.join("Jailfile"),
            format!("FROM --platform=linux/{arch} scratch\nCOPY busybox /bin/busybox\n"),
        )
        .unwrap();
        ok(jbuild(&root)
            .args(["build", "-q", "-t", "base:1"])
            .arg(&base));
        fs::write(
            app.join("Jailfile"),
            "FROM base:1\nRUN [\"/bin/busybox\", \"touch\", \"/ran\"]\n",
        )
        .unwrap();
        ok(jbuild(&root).args(["build", "-q", "-t", "app:1"]).arg(&app));
    }
}
