//! Fetching a resolved closure into jbuild's package cache: verified by
//! each package's catalogue checksum (both forms), shared by checksum,
//! several at a time, nothing kept of a package that does not verify, and
//! `jbuild prune --cache` frees it.

use std::fs;
use std::path::Path;

use jbuild::blame::Blame;
use jbuild::pkg::fetch::{fetch_all, Cache, FetchError};
use jbuild::pkg::repository::Repository;
use jbuild::pkg::resolve::resolve;
use jbuild::transport::http::Http;

use super::catalogue::load;
use crate::support::common::{jbuild, ok};
use crate::support::limits::{Answer, Server};
use crate::support::pkgrepo::{conf, pkg, Layout, RepoSpec, SumStyle, TestPkg};

fn repo(t: &Path, packages: Vec<TestPkg>, sums: SumStyle) -> Repository {
    let dir = t.join("repo");
    let mut spec = RepoSpec::new(Layout::DataPkg, packages);
    spec.sums = sums;
    spec.write(&dir);
    load(&conf("test", &dir, ""), t).unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_closure_is_fetched_verified_and_kept_by_checksum_in_both_sum_forms() {
    for sums in [SumStyle::Sha256Hex, SumStyle::Blake2b] {
        let t = tempfile::tempdir().unwrap();
        let mut packages = vec![pkg("app", "1.0", &["lib0", "lib1", "lib2", "lib3"])];
        for i in 0..4 {
            packages.push(pkg(&format!("lib{i}"), "1.0", &[]));
        }
        let r = [repo(t.path(), packages, sums)];
        let closure = resolve(&r, &["app".to_string()]).unwrap();
        let cache = Cache::new(t.path().join("cache"));
        let got = fetch_all(&closure, &cache, &Http::default(), 3).unwrap();
        assert_eq!(got.len(), 5, "{sums:?}");
        for (f, c) in got.iter().zip(&closure) {
            assert_eq!(f.name, c.package.name);
            assert!(!f.cached);
            let want = fs::read(t.path().join("repo").join(&c.package.repopath)).unwrap();
            assert_eq!(fs::read(&f.path).unwrap(), want, "{}", f.name);
            assert_eq!(f.bytes, want.len() as u64);
            // Named by the checksum: `<type>-<hash>.pkg`.
            let name = f.path.file_name().unwrap().to_string_lossy().into_owned();
            let sum = c.package.sum.replace('$', "-");
            let sum = if sum.contains('-') {
                sum
            } else {
                format!("1-{sum}")
            };
            assert_eq!(name, format!("{sum}.pkg"));
        }
        assert_eq!(files_in(cache.dir()).len(), 5, "no temporary files left");
        // A second build shares them: nothing is read from the repository.
        fs::remove_dir_all(t.path().join("repo/All")).unwrap();
        let again = fetch_all(&closure, &cache, &Http::default(), 3).unwrap();
        assert!(again.iter().all(|f| f.cached), "{again:?}");
    }
}

#[test]
fn a_package_that_does_not_match_its_checksum_is_refused_and_nothing_kept() {
    let t = tempfile::tempdir().unwrap();
    let r = [repo(
        t.path(),
        vec![pkg("app", "1.0", &["libfoo"]), pkg("libfoo", "2.0", &[])],
        SumStyle::Blake2b,
    )];
    // The mirror's file changes after the catalogue was made (same size).
    let file = t.path().join("repo/All/libfoo-2.0.pkg");
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&file, bytes).unwrap();
    let closure = resolve(&r, &["app".to_string()]).unwrap();
    let cache = Cache::new(t.path().join("cache"));
    let e = fetch_all(&closure, &cache, &Http::default(), 1).unwrap_err();
    assert!(matches!(e, FetchError::Checksum { .. }), "{e:?}");
    assert!(e.is_user_error());
    let text = e.to_string();
    assert!(
        text.contains("repository `test`") && text.contains("libfoo-2.0"),
        "{text}"
    );
    assert!(
        !files_in(cache.dir()).iter().any(|n| n.contains("libfoo")),
        "{:?}",
        files_in(cache.dir())
    );
    // libfoo comes first (dependencies first) and fails, so app is never
    // started: the cache holds nothing, not even a temporary file.
    assert_eq!(
        files_in(cache.dir()).len(),
        0,
        "{:?}",
        files_in(cache.dir())
    );
}

#[test]
fn a_package_larger_than_its_catalogue_says_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let r = [repo(
        t.path(),
        vec![pkg("app", "1.0", &[])],
        SumStyle::Sha256Hex,
    )];
    let file = t.path().join("repo/All/app-1.0.pkg");
    let mut bytes = fs::read(&file).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(&file, bytes).unwrap();
    let closure = resolve(&r, &["app".to_string()]).unwrap();
    let cache = Cache::new(t.path().join("cache"));
    let e = fetch_all(&closure, &cache, &Http::default(), 2).unwrap_err();
    assert!(matches!(e, FetchError::TooLarge { .. }), "{e:?}");
    assert!(e.to_string().contains("app-1.0"), "{e}");
    assert_eq!(files_in(cache.dir()), Vec::<String>::new());
}

#[test]
fn prune_cache_frees_the_package_cache() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("jbuild");
    let r = [repo(
        t.path(),
        vec![pkg("app", "1.0", &["libfoo"]), pkg("libfoo", "2.0", &[])],
        SumStyle::Sha256Hex,
    )];
    let closure = resolve(&r, &["app".to_string()]).unwrap();
    // Where the CLI keeps it: beside the release cache.
    let cache = Cache::new(root.join("cache/packages"));
    let got = fetch_all(&closure, &cache, &Http::default(), 2).unwrap();
    let bytes: u64 = got.iter().map(|f| f.bytes).sum();
    let out = ok(jbuild(&root).args(["--json", "prune", "--cache"]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["packages_removed"], 2, "{out}");
    assert_eq!(v["package_bytes_freed"], bytes, "{out}");
    assert_eq!(files_in(cache.dir()), Vec::<String>::new());
    let out = ok(jbuild(&root).args(["prune", "--cache"]));
    assert!(out.contains("0 cached packages"), "{out}");
}

#[test]
fn packages_are_fetched_over_http_and_checked_the_same_way() {
    let t = tempfile::tempdir().unwrap();
    let mut r = repo(
        t.path(),
        vec![pkg("app", "1.0", &["libfoo"]), pkg("libfoo", "2.0", &[])],
        SumStyle::Blake2b,
    );
    let dir = t.path().join("repo");
    let served = dir.clone();
    let server =
        Server::start(
            move |req| match fs::read(served.join(req.path.trim_start_matches('/'))) {
                Ok(body) => Answer::Reply {
                    status: "200 OK",
                    headers: vec![],
                    body,
                },
                Err(_) => Answer::status("404 Not Found"),
            },
        );
    r.url = format!("http://{}", server.host());
    let repos = [r];
    let closure = resolve(&repos, &["app".to_string()]).unwrap();
    let cache = Cache::new(t.path().join("cache"));
    let got = fetch_all(&closure, &cache, &Http::default(), 2).unwrap();
    assert_eq!(got.len(), 2);
    for f in &got {
        let want = fs::read(dir.join(format!("All/{}-{}.pkg", f.name, f.version))).unwrap();
        assert_eq!(fs::read(&f.path).unwrap(), want);
    }
    let paths: Vec<String> = server.requests().iter().map(|q| q.path.clone()).collect();
    assert!(
        paths.contains(&"/All/libfoo-2.0.pkg".to_string()),
        "{paths:?}"
    );
    // A tampered mirror over HTTP: refused, nothing kept.
    let file = dir.join("All/app-1.0.pkg");
    let mut bytes = fs::read(&file).unwrap();
    bytes[0] ^= 1;
    fs::write(&file, bytes).unwrap();
    let fresh = Cache::new(t.path().join("fresh"));
    let e = fetch_all(&closure, &fresh, &Http::default(), 2).unwrap_err();
    assert!(matches!(e, FetchError::Checksum { .. }), "{e:?}");
    assert!(e.to_string().contains("app-1.0"), "{e}");
    // Only libfoo, verified; no temporary file of app's.
    assert!(
        files_in(fresh.dir()).iter().all(|n| !n.starts_with('.')),
        "{:?}",
        files_in(fresh.dir())
    );
    assert_eq!(
        files_in(fresh.dir()).len(),
        1,
        "only libfoo: {:?}",
        files_in(fresh.dir())
    );
}
