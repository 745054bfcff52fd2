//! The build context's ignore file through the `jbuild` binary: jbuild's
//! `.jailignore`, else podman's `.containerignore`, else docker's
//! `.dockerignore` — a context brought from either is filtered as it was
//! there, and the build says which file it used.

use crate::support::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

/// A context whose `secret/key` must never reach the image, with the
/// ignore files given (name, text).
fn context(dir: &Path, ignore_files: &[(&str, &str)]) -> PathBuf {
    let ctx = dir.join("ctx");
    fs::create_dir_all(ctx.join("secret")).unwrap();
    fs::write(ctx.join("secret/key"), "do not ship").unwrap();
    fs::write(ctx.join("keep.txt"), "shipped").unwrap();
    fs::write(ctx.join("Jailfile"), "FROM scratch\nCOPY . /app/\n").unwrap();
    for (name, text) in ignore_files {
        fs::write(ctx.join(name), text).unwrap();
    }
    ctx
}

/// What the build copied: the names under `app/` of the image's only layer
/// (the `dir` backend's committed snapshot), sorted.
fn copied(root: &Path) -> Vec<String> {
    let committed = root.join("snapshots/dir/committed");
    let layer = fs::read_dir(&committed)
        .unwrap()
        .map(|e| e.unwrap().path().join("fs/app"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no snapshot under {} has app/", committed.display()));
    let mut names: Vec<String> = fs::read_dir(layer)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The ignore files a context holds (name, text), the one the build uses,
/// and what `COPY . /app/` copies.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static [&'static str],
);

#[test]
fn the_first_of_jailignore_containerignore_dockerignore_filters_the_context() {
    let t = tempfile::tempdir().unwrap();
    let cases: [Case; 3] = [
        (
            &[(".dockerignore", "secret\n")],
            ".dockerignore",
            &[".dockerignore", "Jailfile", "keep.txt"],
        ),
        (
            &[
                (".dockerignore", "keep.txt\n"),
                (".containerignore", "secret\n.*ignore\n"),
            ],
            ".containerignore",
            &["Jailfile", "keep.txt"],
        ),
        (
            &[
                (".dockerignore", "keep.txt\n"),
                (".containerignore", "keep.txt\n"),
                (".jailignore", "secret\nJailfile\n"),
            ],
            ".jailignore",
            &[
                ".containerignore",
                ".dockerignore",
                ".jailignore",
                "keep.txt",
            ],
        ),
    ];
    for (i, (files, used, want)) in cases.into_iter().enumerate() {
        let dir = t.path().join(format!("case{i}"));
        let root = dir.join("root");
        let ctx = context(&dir, files);
        let out = run(jbuild(&root).args(["build", "-t", "app:1"]).arg(&ctx));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "case {i}: {err}");
        assert!(
            err.contains(&format!("using the build context's {used}")),
            "case {i}: the build does not say it used {used}:\n{err}"
        );
        assert_eq!(copied(&root), want, "case {i} ({used})");
    }
    // No ignore file: everything is copied, and nothing is said about one.
    let dir = t.path().join("none");
    let root = dir.join("root");
    let ctx = context(&dir, &[]);
    let out = run(jbuild(&root).args(["build", "-t", "app:1"]).arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("using the build context's"), "{err}");
    assert_eq!(copied(&root), ["Jailfile", "keep.txt", "secret"]);
}
