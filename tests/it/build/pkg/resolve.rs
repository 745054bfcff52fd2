//! Resolution through `jbuild build`: a chain and a diamond installed
//! dependencies first and once, asked for by origin and by
//! `name-version`; two packages owning one path refused naming both, in
//! one install or one installed and one asked for; a
//! missing package and a missing version refused naming the repository
//! and the nearest names.

use std::fs;
use std::path::Path;

use crate::support::common::{export_unpacked, jbuild, run};
use crate::support::pkgrepo::image::with;
use crate::support::pkgrepo::pkgfile::file;
use crate::support::pkgrepo::{Layout, RepoSpec, Signing, TestPkg};

use super::{amd64_base, sqlite, stored};

fn node(name: &str, deps: &[&str]) -> TestPkg {
    with(
        name,
        "1.0",
        deps,
        vec![file(
            &format!("/usr/local/share/{name}/file"),
            0o644,
            b"x\n",
        )],
        vec![],
    )
}

/// Owns `/usr/local/bin/tool`, as does the other of `left` and `right`.
fn tool(name: &str) -> TestPkg {
    with(
        name,
        "1.0",
        &[],
        vec![file("/usr/local/bin/tool", 0o755, name.as_bytes())],
        vec![],
    )
}

fn packages() -> Vec<TestPkg> {
    vec![
        node("a", &["b"]),
        node("b", &["c"]),
        node("c", &[]),
        node("d", &["e", "f"]),
        node("e", &["g"]),
        node("f", &["g"]),
        node("g", &[]),
        tool("left"),
        tool("right"),
        node("top", &["left", "right"]),
    ]
}

/// `jbuild --json build` of `PKG --no-bootstrap <what>` as `tag`.
fn build(root: &Path, t: &Path, tag: &str, what: &str) -> std::process::Output {
    let ctx = t.join(tag.replace(':', "-"));
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        format!("FROM base:1\nPKG --no-bootstrap {what}\n"),
    )
    .unwrap();
    run(jbuild(root).args(["--json", "build", "-t", tag]).arg(&ctx))
}

fn refused(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

#[test]
fn chains_diamonds_conflicts_and_missing_names_through_a_build() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let (_server, _key) = amd64_base(t.path(), &root, |dir, key| {
        let mut spec = RepoSpec::new(Layout::DataPkg, packages());
        spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
        spec.write(dir);
    });

    let out = build(&root, t.path(), "graph:1", "test/d a-1.0");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "package" && e["what"] == "installed")
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    let at = |n: &str| {
        let at: Vec<usize> = (0..installed.len())
            .filter(|&i| installed[i] == n)
            .collect();
        assert_eq!(at.len(), 1, "{n} installed once: {installed:?}");
        at[0]
    };
    assert_eq!(installed.len(), 7, "{installed:?}");
    for (dep, of) in [
        ("b", "a"),
        ("c", "b"),
        ("e", "d"),
        ("f", "d"),
        ("g", "e"),
        ("g", "f"),
    ] {
        assert!(at(dep) < at(of), "{dep} before {of}: {installed:?}");
    }
    let (_, rootfs) = export_unpacked(&root, "graph:1", t.path());
    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(&db, "SELECT name, automatic FROM packages ORDER BY name"),
        "a|0\nb|1\nc|1\nd|0\ne|1\nf|1\ng|1\n"
    );
    assert_eq!(
        sqlite(
            &db,
            "SELECT p.name, d.name FROM deps d JOIN packages p ON p.id = d.package_id \
             ORDER BY 1, 2"
        ),
        "a|b\nb|c\nd|e\nd|f\ne|g\nf|g\n"
    );
    assert_eq!(super::pkgcheck::pkg_check(&db, &rootfs, &[]), 7);

    let before = stored(&root);
    let err = refused(&build(&root, t.path(), "conflict:1", "top"));
    assert!(
        // Refused before right-1.0 is written (the database would refuse
        // it too, at its commit); left-1.0 was written into the step's
        // root, which the failed step discards: nothing is stored.
        err.contains("`/usr/local/bin/tool` is installed by both left-1.0 and right-1.0"),
        "{err}"
    );
    let err = refused(&build(&root, t.path(), "missing:1", "lefty"));
    assert!(
        err.contains("`lefty` is in none of the repositories `FreeBSD`")
            && err.contains("nearest names are `left`"),
        "{err}"
    );
    let err = refused(&build(&root, t.path(), "version:1", "a-2.0"));
    assert!(
        err.contains("no version matching `a-2.0`") && err.contains("`1.0 (FreeBSD)`"),
        "{err}"
    );
    assert_eq!(stored(&root), before, "a refused build stored something");

    // A package the image has owns the path: refused the same way, naming
    // the installed one first, nothing stored (the database would refuse
    // it only when it records the new one).
    let out = build(&root, t.path(), "left:1", "left");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = stored(&root);
    let ctx = t.path().join("installed");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM left:1\nPKG --no-bootstrap right\n",
    )
    .unwrap();
    let err = refused(&run(jbuild(&root)
        .args(["--json", "build", "-t", "installed:1"])
        .arg(&ctx)));
    assert!(
        err.contains("`/usr/local/bin/tool` is installed by both left-1.0 and right-1.0")
            && err.contains("Jailfile:2"),
        "{err}"
    );
    assert_eq!(stored(&root), before, "a refused build stored something");
}
