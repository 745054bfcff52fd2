//! Resolution over repositories written by the tests: chains, diamonds,
//! priorities, the request forms pkg accepts, conflicts, and what is
//! missing.

use jbuild::blame::Blame;
use std::path::Path;

use jbuild::pkg::repository::Repository;
use jbuild::pkg::resolve::{resolve, ResolveError};

use super::catalogue::load;
use crate::support::pkgrepo::{conf, pkg, Layout, RepoSpec, TestPkg};

fn repo(t: &Path, name: &str, priority: i64, packages: Vec<TestPkg>) -> Repository {
    let dir = t.join(name);
    RepoSpec::new(Layout::DataPkg, packages).write(&dir);
    load(&conf(name, &dir, &format!("priority: {priority}")), t).unwrap()
}

fn names(repos: &[Repository], requests: &[&str]) -> Vec<String> {
    let requests: Vec<String> = requests.iter().map(|s| s.to_string()).collect();
    resolve(repos, &requests)
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}-{}@{}{}",
                c.package.name,
                c.package.version,
                c.repository.name,
                if c.automatic { "" } else { "*" }
            )
        })
        .collect()
}

fn resolve_err(repos: &[Repository], requests: &[&str]) -> ResolveError {
    let requests: Vec<String> = requests.iter().map(|s| s.to_string()).collect();
    let e = resolve(repos, &requests).unwrap_err();
    assert!(e.is_user_error());
    e
}

#[test]
fn chains_and_diamonds_install_dependencies_first_and_once() {
    let t = tempfile::tempdir().unwrap();
    let repos = [repo(
        t.path(),
        "main",
        0,
        vec![
            pkg("app", "1.0", &["lib1"]),
            pkg("lib1", "1.0", &["lib2"]),
            pkg("lib2", "1.0", &[]),
            pkg("top", "1", &["left", "right"]),
            pkg("left", "1", &["base"]),
            pkg("right", "1", &["base"]),
            pkg("base", "1", &[]),
        ],
    )];
    assert_eq!(
        names(&repos, &["app"]),
        ["lib2-1.0@main", "lib1-1.0@main", "app-1.0@main*"]
    );
    assert_eq!(
        names(&repos, &["top"]),
        ["base-1@main", "left-1@main", "right-1@main", "top-1@main*"]
    );
    // Asked for twice, directly and as a dependency: once, and asked for.
    assert_eq!(
        names(&repos, &["lib2", "app"]),
        ["lib2-1.0@main*", "lib1-1.0@main", "app-1.0@main*"]
    );
}

#[test]
fn priority_wins_then_the_newer_version_and_dependencies_stay_in_their_repository() {
    let t = tempfile::tempdir().unwrap();
    let repos = [
        repo(
            t.path(),
            "low",
            0,
            vec![
                pkg("tool", "2.0", &[]),
                pkg("app", "1.10", &["dep"]),
                pkg("dep", "9", &[]),
            ],
        ),
        repo(
            t.path(),
            "high",
            5,
            vec![pkg("tool", "1.0", &[]), pkg("dep", "1", &[])],
        ),
        repo(t.path(), "same", 0, vec![pkg("app", "1.9", &[])]),
    ];
    // A higher priority wins over a newer version.
    assert_eq!(names(&repos, &["tool"]), ["tool-1.0@high*"]);
    // Equal priority: pkg's version order (1.10 > 1.9); the dependency
    // comes from the parent's repository although `high` has it.
    assert_eq!(names(&repos, &["app"]), ["dep-9@low", "app-1.10@low*"]);
}

#[test]
fn name_version_origin_and_case_are_accepted_as_pkg_does() {
    let t = tempfile::tempdir().unwrap();
    let repos = [repo(
        t.path(),
        "main",
        0,
        vec![pkg("py311-Foo", "2.1_1,1", &[])],
    )];
    assert_eq!(names(&repos, &["PY311-foo"]), ["py311-Foo-2.1_1,1@main*"]);
    assert_eq!(
        names(&repos, &["py311-Foo-2.1_1,1"]),
        ["py311-Foo-2.1_1,1@main*"]
    );
    assert_eq!(
        names(&repos, &["test/py311-Foo"]),
        ["py311-Foo-2.1_1,1@main*"]
    );
    let e = resolve_err(&repos, &["py311-Foo-3.0"]);
    assert!(matches!(e, ResolveError::NoSuchVersion { .. }), "{e}");
    assert!(e.to_string().contains("2.1_1,1 (main)"), "{e}");
}

#[test]
fn a_missing_package_names_the_repositories_and_the_nearest_names() {
    let t = tempfile::tempdir().unwrap();
    let repos = [
        repo(
            t.path(),
            "one",
            0,
            vec![pkg("nginx", "1.26", &[]), pkg("app", "1", &["libmissing"])],
        ),
        repo(
            t.path(),
            "two",
            0,
            vec![pkg("nginx-devel", "1.27", &[]), pkg("libmising", "1", &[])],
        ),
    ];
    let e = resolve_err(&repos, &["ngin"]);
    let s = e.to_string();
    assert!(matches!(e, ResolveError::NotFound { .. }), "{s}");
    assert!(s.contains("`one`, `two`") && s.contains("`nginx`"), "{s}");

    let e = resolve_err(&repos, &["app"]);
    let s = e.to_string();
    assert!(matches!(e, ResolveError::MissingDependency { .. }), "{s}");
    assert!(
        s.contains("`app-1` (repository `one`)") && s.contains("`libmissing`"),
        "{s}"
    );
    assert!(s.contains("`libmising`"), "nearest name: {s}");
}

#[test]
fn conflicting_packages_are_refused_naming_both() {
    let t = tempfile::tempdir().unwrap();
    let mut a = pkg("nginx", "1.26", &[]);
    a.conflicts = vec!["nginx-devel-*".into(), "angie".into()];
    let repos = [repo(
        t.path(),
        "main",
        0,
        vec![
            a,
            pkg("nginx-devel", "1.27", &[]),
            pkg("web", "1", &["nginx-devel"]),
            pkg("angie", "1", &[]),
        ],
    )];
    let e = resolve_err(&repos, &["web", "nginx"]);
    let s = e.to_string();
    assert!(matches!(e, ResolveError::Conflict { .. }), "{s}");
    assert!(
        s.contains("`nginx-1.26`") && s.contains("`nginx-devel-1.27`"),
        "{s}"
    );
    let e = resolve_err(&repos, &["angie", "nginx"]);
    assert!(e.to_string().contains("`angie-1`"), "{e}");
    // Each alone is fine.
    assert_eq!(names(&repos, &["nginx"]), ["nginx-1.26@main*"]);
}
