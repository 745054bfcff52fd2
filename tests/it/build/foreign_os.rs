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

/// Item 5 of issue 32: a Containerfile written for podman on FreeBSD,
/// each way such recipes install packages. `build --check` names the PKG
/// line to write at the RUN's line, and the build over a FreeBSD root
/// refuses the RUN with the same line, before anything runs.
#[test]
fn each_way_a_containerfile_runs_pkg_install_is_pointed_at_its_pkg_line() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let base = context(&t.path().join("base"), "FROM scratch\nCOPY a.txt /a.txt\n");
    ok(jbuild(&root)
        .args(["build", "-q", "-t", "base:1"])
        .arg(&base));
    for (run_line, pkg) in [
        ("RUN pkg install -y nginx && pkg clean -ay", "PKG nginx"),
        (
            "RUN pkg install --yes www/nginx security/sudo",
            "PKG www/nginx security/sudo",
        ),
        ("RUN /usr/sbin/pkg install -y nginx", "PKG nginx"),
        ("RUN ASSUME_ALWAYS_YES=yes pkg install redis", "PKG redis"),
        (
            "RUN env ASSUME_ALWAYS_YES=yes pkg install -y git && pkg clean -a -y",
            "PKG git",
        ),
        (
            "RUN pkg install -y \\\n    postgresql16-server \\\n    php83 \\\n    curl",
            "PKG postgresql16-server php83 curl",
        ),
        (
            "RUN [\"pkg\", \"install\", \"-y\", \"ca_root_nss\"]",
            "PKG ca_root_nss",
        ),
    ] {
        let app = t.path().join("app");
        fs::create_dir_all(&app).unwrap();
        let recipe = |from: &str| {
            fs::write(
                app.join("Containerfile"),
                format!("FROM {from}\n\n{run_line}\n"),
            )
            .unwrap()
        };
        // Over an empty root the RUN could run: a warning.
        recipe("scratch");
        let checked = run(jbuild(&root).args(["build", "--check"]).arg(&app));
        let out = String::from_utf8_lossy(&checked.stdout).into_owned();
        assert!(checked.status.success(), "{run_line}:\n{out}");
        assert!(
            out.lines()
                .any(|l| l.contains("Containerfile:3:1: warning: ")
                    && l.contains(&format!("write `{pkg}`, which installs them on any host"))),
            "{run_line}: no `{pkg}` in\n{out}"
        );
        // Over a FreeBSD root it cannot: the check's error and the build's.
        recipe("base:1");
        for args in [&["build", "--check"][..], &["build", "-t", "app:1"]] {
            let refused = run(jbuild(&root).args(args).arg(&app));
            let said = String::from_utf8_lossy(&refused.stdout).into_owned()
                + &String::from_utf8_lossy(&refused.stderr);
            assert_eq!(
                refused.status.code(),
                Some(1),
                "{args:?} {run_line}:\n{said}"
            );
            assert!(
                said.contains("Containerfile:3:1:")
                    && said.contains(&format!("`{pkg}` does the same as this line")),
                "{args:?} {run_line}: no `{pkg}` in\n{said}"
            );
        }
    }
}
