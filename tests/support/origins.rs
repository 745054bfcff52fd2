//! Where tests' content comes from besides a build context: a local git
//! repository (ADD and build contexts from git, verify) and an HTTP server
//! of files on 127.0.0.1 (ADD URLs, archive contexts). One place, so the
//! tests that need them set them up the same way.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use super::limits::{Answer, Server};

/// Runs `git args` in `dir` with no configuration of the machine's (no
/// system file, `HOME` is `dir`) and a fixed author; its standard output,
/// trimmed. A failing git fails the test.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository made at `dir` on branch `main`, `files` (paths relative to
/// it) written and committed as "one"; returns that commit.
pub fn git_repo(dir: &Path, files: &[(&str, &[u8])]) -> String {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    for (path, bytes) in files {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "one"]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A server on 127.0.0.1 answering each path of `files` (`/a/b`) with 200
/// and its bytes, and anything else with 404.
pub fn file_server(files: &[(&str, &[u8])]) -> Server {
    let files: BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|(p, b)| (p.to_string(), b.to_vec()))
        .collect();
    Server::start(move |req| match files.get(req.path.as_str()) {
        Some(body) => Answer::Reply {
            status: "200 OK",
            headers: vec![],
            body: body.clone(),
        },
        None => Answer::status("404 Not Found"),
    })
}
