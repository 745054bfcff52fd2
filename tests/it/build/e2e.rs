//! End to end through the `jbuild` binary: examples build, images are
//! deterministic, cached rebuilds run nothing, real peers (skopeo, umoci)
//! read what jbuild writes.

use crate::support::common;
use crate::support::lane::{self, Lane};

use std::fs;
use std::path::Path;

use common::*;

fn build(root: &Path, tag: &str, ctx: &Path, extra: &[&str]) -> String {
    let mut c = jbuild(root);
    c.arg("build").arg("-t").arg(tag).args(extra).arg(ctx);
    ok(&mut c).trim().to_string()
}

fn json_result(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "result")
        .unwrap_or_else(|| panic!("no result event in:\n{stdout}"))
}

/// The examples that can build on this machine: the native-only ones
/// anywhere, the busybox one as root with busybox-static.
fn buildable_examples(tmp: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut v = vec![
        ("static-site", example("static-site", tmp)),
        ("multi-stage", example("multi-stage", tmp)),
    ];
    if lane::need_all(&[Lane::Root, Lane::Busybox]) {
        let bb = static_busybox().expect("the busybox lane found it");
        let ctx = example("busybox-linux", tmp);
        fs::copy(bb, ctx.join("busybox")).unwrap();
        v.push(("busybox-linux", ctx));
    }
    v
}

#[test]
fn every_buildable_example_builds_and_skopeo_reads_the_export() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    for (name, ctx) in buildable_examples(t.path()) {
        let digest = build(&root, &format!("{name}:test"), &ctx, &[]);
        assert!(digest.starts_with("sha256:"), "{name}: {digest}");
        let layout = t.path().join(format!("{name}-oci"));
        ok(jbuild(&root)
            .arg("export")
            .arg(format!("{name}:test"))
            .arg(format!("oci:{}:test", layout.display())));
        if !lane::need(Lane::Skopeo) {
            continue;
        }
        for src in [
            format!("oci:{}:test", layout.display()),
            format!("oci:{}:{name}:test", root.join("store").display()),
        ] {
            let out = std::process::Command::new("skopeo")
                .args(["inspect", &src])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "skopeo inspect {src}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["Digest"], digest, "{src}");
        }
    }
}

#[test]
fn static_site_content_is_rendered_as_the_recipe_says() {
    need!(Umoci);
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = example("static-site", t.path());
    build(
        &root,
        "site:1",
        &ctx,
        &[
            "--build-arg",
            "SITE_NAME=www.example.net",
            "--build-arg",
            "PORT=8080",
        ],
    );
    let layout = t.path().join("oci");
    ok(jbuild(&root)
        .arg("export")
        .arg("site:1")
        .arg(format!("oci:{}:1", layout.display())));
    let rootfs = t.path().join("rootfs");
    umoci_unpack(&format!("{}:1", layout.display()), &rootfs, true);
    let conf = fs::read_to_string(rootfs.join("usr/local/etc/nginx/conf.d/site.conf")).unwrap();
    assert!(
        conf.contains("listen 8080;") && conf.contains("server_name www.example.net;"),
        "{conf}"
    );
    assert!(
        conf.contains("try_files $uri $uri/ =404;"),
        "nginx's own variables are left alone: {conf}"
    );
    let rc = fs::read_to_string(rootfs.join("etc/rc.conf")).unwrap();
    assert!(rc.contains("nginx_enable=\"YES\""), "{rc}");
    assert!(rc.contains("syslogd_flags=\"-ss\""), "{rc}");
    assert!(rootfs.join("usr/local/www/site/css/site.css").is_file());
    let inspect: serde_json::Value =
        serde_json::from_str(&ok(jbuild(&root).args(["inspect", "site:1"]))).unwrap();
    let cfg = &inspect["config"]["config"];
    assert_eq!(cfg["ExposedPorts"], serde_json::json!({"8080/tcp": {}}));
    assert_eq!(cfg["WorkingDir"], "/usr/local/www/site");
    assert_eq!(cfg["Labels"]["org.freebsd.jail.allow.raw_sockets"], "false");
    assert_eq!(inspect["config"]["os"], "freebsd");
    let jailfile = ok(jbuild(&root).args(["inspect", "--jailfile", "site:1"]));
    assert_eq!(jailfile, fs::read_to_string(ctx.join("Jailfile")).unwrap());
}

#[test]
fn two_builds_into_two_empty_stores_give_the_same_digest() {
    let t = tempfile::tempdir().unwrap();
    for (name, ctx) in buildable_examples(t.path()) {
        if name == "busybox-linux" {
            continue; // `hostname` and uid output are deterministic, but keep this test unprivileged
        }
        for compression in ["gzip", "zstd"] {
            let a = build(
                &t.path().join(format!("a-{name}-{compression}")),
                "x:1",
                &ctx,
                &["--compression", compression],
            );
            let b = build(
                &t.path().join(format!("b-{name}-{compression}")),
                "x:1",
                &ctx,
                &["--compression", compression],
            );
            assert_eq!(a, b, "{name} with {compression}");
        }
    }
}

#[test]
fn a_second_build_with_nothing_changed_runs_no_step_and_a_change_reruns_from_there() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = example("static-site", t.path());
    let first = json_result(&ok(jbuild(&root)
        .args(["--json", "build", "-t", "s:1"])
        .arg(&ctx)));
    assert!(first["steps_run"].as_u64().unwrap() >= 6, "{first}");
    assert_eq!(first["steps_cached"], 0);
    let second = json_result(&ok(jbuild(&root)
        .args(["--json", "build", "-t", "s:1"])
        .arg(&ctx)));
    assert_eq!(second["steps_run"], 0, "{second}");
    assert_eq!(second["manifest"], first["manifest"]);

    // Touching a file changes nothing; editing one re-runs its COPY and what follows.
    let css = ctx.join("public/css/site.css");
    filetime::set_file_mtime(&css, filetime::FileTime::from_unix_time(1_000_000, 0)).unwrap();
    let touched = json_result(&ok(jbuild(&root)
        .args(["--json", "build", "-t", "s:1"])
        .arg(&ctx)));
    assert_eq!(
        touched["steps_run"], 0,
        "an mtime alone is not a change: {touched}"
    );
    fs::write(&css, "body { color: red; }\n").unwrap();
    let edited = json_result(&ok(jbuild(&root)
        .args(["--json", "build", "-t", "s:1"])
        .arg(&ctx)));
    let cached = edited["steps_cached"].as_u64().unwrap();
    assert_eq!(
        cached, 0,
        "the first COPY reads the edited file, so nothing before it is a layer: {edited}"
    );
    assert_ne!(edited["manifest"], first["manifest"]);

    let nocache = json_result(&ok(jbuild(&root)
        .args(["--json", "build", "--no-cache", "-t", "s:1"])
        .arg(&ctx)));
    assert_eq!(nocache["steps_cached"], 0);
    assert_eq!(
        nocache["manifest"], edited["manifest"],
        "native steps are deterministic, so --no-cache rebuilds the same image"
    );
}

#[test]
fn an_exported_archive_imports_elsewhere_and_builds_on() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let ctx = example("static-site", t.path());
    let digest = build(&a, "site:1", &ctx, &[]);
    let archive = t.path().join("site.tar");
    ok(jbuild(&a)
        .arg("export")
        .arg("site:1")
        .arg(format!("oci-archive:{}", archive.display())));
    ok(jbuild(&b)
        .arg("import")
        .arg(format!("oci-archive:{}", archive.display()))
        .arg("site:imported"));
    let images = ok(jbuild(&b).arg("images"));
    assert!(
        images.contains("site:imported") && images.contains(&digest[7..19]),
        "{images}"
    );

    // FROM an imported image unpacks its layers (verifying their diff IDs) and builds on them.
    let next = t.path().join("next");
    fs::create_dir_all(&next).unwrap();
    fs::write(
        next.join("Jailfile"),
        "FROM site:imported\nSYSRC extra_enable=YES\nLABEL stage=two\n",
    )
    .unwrap();
    let d2 = build(&b, "site:2", &next, &[]);
    let hist = ok(jbuild(&b).args(["history", "--no-trunc", "site:2"]));
    assert!(
        hist.contains("SYSRC extra_enable=YES")
            && hist.contains("COPY public/ /usr/local/www/site/"),
        "{hist}"
    );
    let inspect: serde_json::Value =
        serde_json::from_str(&ok(jbuild(&b).args(["inspect", "site:2"]))).unwrap();
    assert_eq!(
        inspect["manifest"]["layers"].as_array().unwrap().len(),
        8,
        "7 inherited layers + 1"
    );
    assert_eq!(
        inspect["manifest"]["annotations"]["org.opencontainers.image.base.digest"],
        digest
    );
    assert_ne!(d2, digest);
}

/// The issue's round trip: COPY, delete, rename, chmod, hard link, symlink,
/// a 200-character name and a non-ASCII name; the exported image unpacked
/// by umoci must match the built root.
#[test]
fn umoci_unpacks_exactly_the_tree_that_was_built() {
    need!(Root, Busybox, Umoci);
    let bb = static_busybox().expect("the busybox lane found it");
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = t.path().join("ctx");
    fs::create_dir_all(ctx.join("files/sub")).unwrap();
    fs::copy(bb, ctx.join("busybox")).unwrap();
    for (name, body) in [
        ("delete-me", "x"),
        ("rename-me", "r"),
        ("perm", "p"),
        ("target", "t"),
        ("owned", "o"),
        ("sub/deep", "d"),
    ] {
        fs::write(ctx.join("files").join(name), body).unwrap();
    }
    let long = "n".repeat(200);
    fs::write(
        ctx.join("Jailfile"),
        format!(
            "FROM --platform=linux/amd64 scratch\n\
             COPY busybox /bin/busybox\n\
             RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
             COPY files/ /data/\n\
             RUN rm /data/delete-me && mv /data/rename-me /data/renamed && chmod 0600 /data/perm \\\n\
              && ln /data/target /data/hardlink && ln -s target /data/symlink && chown 1234:5678 /data/owned\n\
             RUN echo long > /data/{long} && echo ü > '/data/ünïcödé-日本.txt' && rm -r /data/sub && chmod 4755 /data/target\n"
        ),
    )
    .unwrap();
    build(&root, "rt:1", &ctx, &[]);
    let layout = t.path().join("oci");
    ok(jbuild(&root)
        .arg("export")
        .arg("rt:1")
        .arg(format!("oci:{}:1", layout.display())));
    let unpacked = t.path().join("unpacked");
    umoci_unpack(&format!("{}:1", layout.display()), &unpacked, false);

    // The built root is the top snapshot of the build.
    let committed = root.join("snapshots/dir/committed");
    let top = fs::read_dir(&committed)
        .unwrap()
        .map(|e| e.unwrap().path())
        // Only the last step's snapshot has the long name (counting
        // entries picked by read_dir order when two snapshots tied).
        .find(|p| p.join("fs/data").join(&long).exists())
        .expect("a committed snapshot with the last step's file");
    let built = snapshot_tree(&top.join("fs"));
    let got = snapshot_tree(&unpacked);
    assert!(
        built.contains_key(&format!("data/{long}")) && built.contains_key("data/ünïcödé-日本.txt")
    );
    assert!(!built.contains_key("data/delete-me") && !built.contains_key("data/sub"));
    assert_eq!(built["data/owned"].uid, 1234);
    assert_eq!(built["data/target"].mode, 0o4755);
    assert_eq!(
        built["data/hardlink"].link_group,
        built["data/target"].link_group
    );
    assert!(built["data/hardlink"].link_group.is_some());
    let diff: Vec<_> = built
        .keys()
        .chain(got.keys())
        .filter(|k| built.get(*k) != got.get(*k))
        .collect();
    assert!(diff.is_empty(), "trees differ at {diff:?}");
}
