//! `FROM freebsd:<release>` and a RUN, on a Linux host: refused before any
//! step runs and before the release is downloaded (exit 1, naming the
//! line, the platform and the host), with or without cached steps; PKG
//! still runs there as it did (`release::pkg`).
#![cfg(target_os = "linux")]

use super::*;

#[test]
fn a_run_over_a_freebsd_release_is_refused_on_linux_before_anything_runs() {
    let t = tempfile::tempdir().unwrap();
    let (server, config) = served_release(t.path());
    let refused = |root: &Path, jailfile: &str| {
        let ctx = context(&t.path().join("ctx"), jailfile);
        let out = run(&mut build_cmd(root, &server, &ctx, &config));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        assert!(!stdout.contains("step_start"), "{stdout}");
        for want in [
            "`RUN mkdir -p /usr/local/www`",
            "this step would run FreeBSD programs (a freebsd/amd64 root, as `FROM freebsd:14.3` says)",
            &format!(
                "on this linux/{} host, which cannot run them",
                jbuild::config::host_architecture()
            ),
            "Build on FreeBSD",
        ] {
            assert!(stderr.contains(want), "want {want} in\n{stderr}");
        }
        stderr
    };

    // A fresh root: not a set is downloaded, nothing is stored.
    let root = t.path().join("fresh");
    let err = refused(&root, "FROM freebsd:14.3\nRUN mkdir -p /usr/local/www\n");
    assert!(err.contains("Jailfile:2:1"), "{err}");
    assert!(
        !server.requests().iter().any(|r| r.contains(".txz")),
        "{:?}",
        server.requests()
    );
    let made: Vec<String> = listing(&root.join("snapshots/dir"))
        .into_keys()
        .filter(|k| k.starts_with("committed/") || k.starts_with("active/"))
        .collect();
    assert_eq!(made, Vec::<String>::new());

    // The base and a step built and cached: refused all the same.
    let root = t.path().join("cached");
    let ctx = context(
        &t.path().join("ctx"),
        "FROM freebsd:14.3\nSYSRC hostname=web\n",
    );
    ok(&mut build_cmd(&root, &server, &ctx, &config));
    let before = listing(&root.join("snapshots"));
    let err = refused(
        &root,
        "FROM freebsd:14.3\nSYSRC hostname=web\nRUN mkdir -p /usr/local/www\n",
    );
    assert!(err.contains("Jailfile:3:1"), "{err}");
    assert_eq!(listing(&root.join("snapshots")), before);
}
