//! The downloads overlap the extraction (issue 31): the server holds one
//! package's download back until jbuild says it has taken the packages
//! before it in install order for installing (their `fetched` lines come
//! as the extraction takes each one). Code that downloads every package
//! before it installs any says none of them while a download is held, and
//! the server lets it go only at its timeout.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::support::common::jbuild;
use crate::support::limits::{Answer, Server};
use crate::support::pkgrepo::platform::write_repo_for;

use super::amd64_base_served;

/// Who let the held download go: `None` while held, `Some(true)` the
/// test, `Some(false)` the server's timeout.
type Release = Arc<(Mutex<Option<bool>>, Condvar)>;

/// How long the server holds the download at most.
const HOLD: Duration = Duration::from_secs(20);

/// Serves the files under `dir`, holding the answer for a path that ends
/// with `held` until `release` says so (or [`HOLD`] has passed).
fn serve_holding(dir: PathBuf, held: &'static str, release: Release) -> Server {
    Server::start(move |r| {
        let path = r.path.replace("%3A", ":").replace("%2C", ",");
        if path.ends_with(held) {
            let (lock, cv) = &*release;
            let mut by = lock.lock().unwrap();
            let start = std::time::Instant::now();
            while by.is_none() && start.elapsed() < HOLD {
                by = cv.wait_timeout(by, Duration::from_millis(100)).unwrap().0;
            }
            by.get_or_insert(false);
        }
        match fs::read(dir.join(path.trim_start_matches('/'))) {
            Ok(body) => Answer::Reply {
                status: "200 OK",
                headers: vec![],
                body,
            },
            Err(_) => Answer::status("404 Not Found"),
        }
    })
}

#[test]
fn packages_are_installed_while_later_ones_are_still_downloading() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let release: Release = Arc::default();
    let r = release.clone();
    let (server, _key) = amd64_base_served(
        t.path(),
        &root,
        |dir, key| write_repo_for(dir, key, "FreeBSD:14:*"),
        move |www| serve_holding(www, "/All/app-2.1_3,1.pkg", r),
    );
    let app = t.path().join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(app.join("Jailfile"), "FROM base:1\nPKG app\n").unwrap();
    let mut child = jbuild(&root)
        .args(["--json", "build", "-t", "app:1"])
        .arg(&app)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // In install order pkg, libfoo, then app: libfoo taken for installing
    // while app's download is held.
    let mut said = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if e["event"] != "output" {
            continue;
        }
        let text = e["line"].as_str().unwrap_or_default().to_string();
        if text.starts_with("libfoo-1.0: fetched") {
            let (lock, cv) = &*release;
            lock.lock().unwrap().get_or_insert(true);
            cv.notify_all();
        }
        said.push(text);
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{said:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path.contains("/All/app-2.1_3")),
        "app was not downloaded"
    );
    assert_eq!(
        *release.0.lock().unwrap(),
        Some(true),
        "libfoo was not taken for installing while app was downloading: {said:?}"
    );
    // What is said does not depend on that timing: each package's line
    // when it is taken, in install order, the installs at the end.
    let fetched: Vec<&str> = said
        .iter()
        .filter(|l| l.contains(": fetched ("))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        fetched,
        ["pkg-2.1.2", "libfoo-1.0", "app-2.1_3,1"],
        "{said:?}"
    );
}
