//! A PKG step's key holds the repositories its root names, read when the
//! build reaches the step, through the `jbuild` binary on each backend
//! the machine has (`dir`; `overlay` as root; zfs-fuse): the base image's
//! `/usr/local/etc/pkg/repos/local.conf`, or one an earlier COPY puts
//! there, naming a repository served from 127.0.0.1 under `${ABI}`.
//! The same configuration and catalogue: a cache hit. That repository now
//! serving another catalogue (B's), or the configuration naming another
//! repository: the step runs and installs the package it now names.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::backends::{self, Backend};
use crate::support::common::{export_unpacked, run};
use crate::support::pkgrepo::image::{freebsd_tree, with};
use crate::support::pkgrepo::pkgfile::file;
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};
use jbuild::snapshot::testsuite::UnmountOnDrop;

use super::{installed, serve};

const ABI: &str = "FreeBSD:14:amd64";

/// (Re)writes the repository `www/<ABI>/<name>`: `app` at `version`,
/// installing `/usr/local/share/app/from` that says `which`.
pub(super) fn repo(www: &Path, name: &str, key: &Key, which: &str, version: &str) {
    let dir = www.join(ABI).join(name);
    let _ = fs::remove_dir_all(&dir);
    let app = with(
        "app",
        version,
        &[],
        vec![file("/usr/local/share/app/from", 0o644, which.as_bytes())],
        vec![],
    );
    let mut spec = RepoSpec::new(Layout::DataPkg, vec![app]);
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.write(&dir);
}

/// A repository configuration naming `www/${ABI}/<name>` on `port`
/// (FreeBSD's own turned off), trusting the image's fingerprints.
pub(super) fn local_conf(port: u16, name: &str) -> String {
    format!(
        "FreeBSD: {{ enabled: no }}\n\
         local: {{\n  url: \"http://127.0.0.1:{port}/${{ABI}}/{name}\",\n  \
         signature_type: \"fingerprints\",\n  fingerprints: \"/usr/share/keys/pkg\"\n}}\n"
    )
}

/// What one build did: steps run and cached, packages installed.
#[derive(Debug, PartialEq, Eq)]
struct Built {
    run: u64,
    cached: u64,
    installed: Vec<String>,
}

/// Builds `ctx` as `tag` for freebsd/amd64 on `b`.
fn build_on(b: &Backend, ctx: &Path, tag: &str) -> Built {
    let out = run(b
        .jbuild()
        .args(["--json", "build", "--platform", "freebsd/amd64", "-t", tag])
        .arg(ctx));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}: {stdout}\n{}",
        b.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let result = events
        .iter()
        .find(|e| e["event"] == "result")
        .unwrap_or_else(|| panic!("no result in {stdout}"));
    Built {
        run: result["steps_run"].as_u64().unwrap(),
        cached: result["steps_cached"].as_u64().unwrap(),
        installed: installed(&events),
    }
}

fn built(run: u64, cached: u64, installed: &[&str]) -> Built {
    Built {
        run,
        cached,
        installed: installed.iter().map(|s| s.to_string()).collect(),
    }
}

/// A directory holding `files` (name, content), one being the Jailfile.
fn context(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    for (name, content) in files {
        fs::write(dir.join(name), content).unwrap();
    }
    dir.to_path_buf()
}

/// The base image `base:1`: a FreeBSD tree whose
/// `/usr/local/etc/pkg/repos/local.conf` names the repository `name`.
fn base(b: &Backend, t: &Path, key: &Key, port: u16, name: &str) {
    let ctx = t.join(format!("base-{}", b.name));
    let tree = ctx.join("tree");
    let _ = fs::remove_dir_all(&tree);
    // /etc/pkg/FreeBSD.conf names a repository nobody serves: it is off.
    let unused = format!("http://127.0.0.1:{port}/unused");
    freebsd_tree(&tree, "amd64", &unused, key);
    let repos = tree.join("usr/local/etc/pkg/repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(repos.join("local.conf"), local_conf(port, name)).unwrap();
    fs::write(ctx.join("Jailfile"), "FROM scratch\nCOPY tree/ /\n").unwrap();
    build_on(b, &ctx, "base:1");
}

/// The whole story on one backend.
fn follows_the_root_s_repositories(b: &Backend, t: &Path) {
    let key = Key::new(t, &format!("repo-{}", b.name));
    let www = t.join(format!("www-{}", b.name));
    repo(&www, "current", &key, "A", "1");
    let server = serve(www.clone());
    base(b, t, &key, server.port, "current");
    let app = context(
        &t.join(format!("app-{}", b.name)),
        &[("Jailfile", "FROM base:1\nPKG --no-bootstrap app\n")],
    );
    assert_eq!(
        build_on(b, &app, "app:1"),
        built(1, 0, &["app-1"]),
        "{}",
        b.name
    );
    // Nothing changed: a cache hit.
    assert_eq!(build_on(b, &app, "app:1"), built(0, 1, &[]), "{}", b.name);
    // The repository the base names serves B's catalogue now: the step
    // runs and installs B's app; then B's is the one cached.
    repo(&www, "current", &key, "B", "2");
    assert_eq!(
        build_on(b, &app, "app:1"),
        built(1, 0, &["app-2"]),
        "{}",
        b.name
    );
    assert_eq!(build_on(b, &app, "app:1"), built(0, 1, &[]), "{}", b.name);
    if b.name == "dir" {
        // What the root names that cannot be read: the user's to fix, at
        // the PKG line.
        let missing = t.join("no-such-repos");
        let out = run(b
            .jbuild()
            .args(["build", "--platform", "freebsd/amd64", "--pkg-repos"])
            .arg(&missing)
            .arg(&app));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("Jailfile:2") && stderr.contains("no-such-repos"),
            "{stderr}"
        );
        let (_, rootfs) = export_unpacked(&b.root, "app:1", t);
        assert_eq!(
            fs::read(rootfs.join("usr/local/share/app/from")).unwrap(),
            b"B"
        );
    }

    // The configuration a COPY puts in the image, naming `other` (A's).
    repo(&www, "other", &key, "A", "1");
    let copied = context(
        &t.join(format!("copied-{}", b.name)),
        &[
            (
                "Jailfile",
                "FROM base:1\nCOPY local.conf /usr/local/etc/pkg/repos/local.conf\n\
                 PKG --no-bootstrap app\n",
            ),
            ("local.conf", &local_conf(server.port, "other")),
        ],
    );
    assert_eq!(build_on(b, &copied, "copied:1"), built(2, 0, &["app-1"]));
    assert_eq!(build_on(b, &copied, "copied:1"), built(0, 2, &[]));
    // `other` moves on to B's catalogue: the COPY is cached, PKG runs.
    repo(&www, "other", &key, "B", "2");
    assert_eq!(build_on(b, &copied, "copied:1"), built(1, 1, &["app-2"]));
    // The COPY names another repository (C's): both run.
    repo(&www, "third", &key, "C", "3");
    fs::write(copied.join("local.conf"), local_conf(server.port, "third")).unwrap();
    assert_eq!(build_on(b, &copied, "copied:1"), built(2, 0, &["app-3"]));

    // The base names `third` now: the step runs, with C's app.
    base(b, t, &key, server.port, "third");
    assert_eq!(
        build_on(b, &app, "app:1"),
        built(1, 0, &["app-3"]),
        "{}",
        b.name
    );
    assert_eq!(build_on(b, &app, "app:1"), built(0, 1, &[]), "{}", b.name);
}

#[test]
fn a_pkg_step_follows_the_repositories_its_root_names() {
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let backends = backends::here(&t.path().join("roots"));
    for b in &backends.all {
        follows_the_root_s_repositories(b, t.path());
    }
}

/// `jbuild --json build` of `ctx` with its state under `home`, `extra`
/// flags given: steps run and fetched from the registry cache.
fn build_in(home: &Path, ctx: &Path, extra: &[&str]) -> (u64, u64) {
    use crate::support::registry as registry_support;
    fs::create_dir_all(home).unwrap();
    let mut c = registry_support::jbuild(home);
    c.args(["--json", "build", "-t", "app:1"])
        .args(extra)
        .arg(ctx);
    let out = registry_support::run_bounded(&mut c, registry_support::LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "result")
        .unwrap_or_else(|| panic!("no result in {stdout}"));
    let n = |k: &str| result[k].as_u64().unwrap();
    (n("steps_run"), n("steps_fetched"))
}

/// The keys a PKG step finishes when the build reaches it are looked up
/// in a `--cache-from` registry then: another machine restores the PKG
/// step and the step after it, and runs them when the repository moved
/// on.
#[test]
fn a_pkg_step_and_what_follows_it_are_restored_from_a_registry_cache() {
    let registry = crate::support::registry::Registry::start();
    let cache = format!("127.0.0.1:{}/cache", registry.port);
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    repo(&www, "current", &key, "A", "1");
    let server = serve(www.clone());
    let unused = format!("http://127.0.0.1:{}/unused", server.port);
    let ctx = context(
        &t.path().join("ctx"),
        &[
            (
                "Jailfile",
                "FROM --platform=freebsd/amd64 scratch\nCOPY tree/ /\n\
                 PKG --no-bootstrap app\nCOPY extra /extra\n",
            ),
            ("extra", "after the packages\n"),
        ],
    );
    freebsd_tree(&ctx.join("tree"), "amd64", &unused, &key);
    let repos = ctx.join("tree/usr/local/etc/pkg/repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(repos.join("local.conf"), local_conf(server.port, "current")).unwrap();

    let a = build_in(&t.path().join("a"), &ctx, &["--cache-to", &cache]);
    assert_eq!(a, (3, 0));
    let b = build_in(&t.path().join("b"), &ctx, &["--cache-from", &cache]);
    assert_eq!(b, (0, 3), "every step restored");
    // The repository moved on: the COPY before PKG is restored, PKG and
    // the COPY after it run.
    repo(&www, "current", &key, "B", "2");
    let c = build_in(&t.path().join("c"), &ctx, &["--cache-from", &cache]);
    assert_eq!(c, (2, 1));
}
