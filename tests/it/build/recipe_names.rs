//! The recipe and its ignore file as docker and podman find theirs (issue
//! 33 item 3), through the `jbuild` binary: without `-f`, the context's
//! `Jailfile`, else `Containerfile`, else `Dockerfile`; and a recipe's own
//! ignore file beside it (`Containerfile.dockerignore`,
//! `NAME.jailignore`, as BuildKit reads `<Dockerfile>.dockerignore`) wins
//! over the context's.

use crate::support::common::*;

use std::fs;
use std::path::Path;

/// The files under `app/` of the image `image`, from the `dir` backend's
/// snapshot that holds them (the image's only layer).
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

/// A context with `a.txt`, `b.txt`, `c.txt` and the given files.
fn context(dir: &Path, files: &[(&str, &str)]) {
    fs::create_dir_all(dir).unwrap();
    for n in ["a.txt", "b.txt", "c.txt"] {
        fs::write(dir.join(n), n).unwrap();
    }
    for (name, text) in files {
        let p = dir.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
}

#[test]
fn the_recipe_is_jailfile_else_containerfile_else_dockerfile() {
    let t = tempfile::tempdir().unwrap();
    let jail = ("Jailfile", "FROM scratch\nCOPY a.txt /app/\n");
    let container = ("Containerfile", "FROM scratch\nCOPY b.txt /app/\n");
    let docker = ("Dockerfile", "FROM scratch\nCOPY c.txt /app/\n");
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[docker], "c.txt"),
        (&[container], "b.txt"),
        (&[docker, container], "b.txt"),
        (&[docker, container, jail], "a.txt"),
    ];
    for (i, (files, want)) in cases.into_iter().enumerate() {
        let dir = t.path().join(format!("case{i}"));
        let ctx = dir.join("ctx");
        context(&ctx, files);
        let root = dir.join("root");
        ok(jbuild(&root).args(["build", "-t", "r:1"]).arg(&ctx));
        assert_eq!(copied(&root), [want], "case {i}");
    }

    // None of them: the message names all three, and -f.
    let ctx = t.path().join("empty");
    context(&ctx, &[]);
    let out = run(jbuild(&t.path().join("root")).args(["build"]).arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("looked for Jailfile, Containerfile, Dockerfile") && err.contains("-f FILE"),
        "{err}"
    );
}

#[test]
fn a_recipes_own_ignore_file_wins_over_the_contexts() {
    let t = tempfile::tempdir().unwrap();
    // Found in the context, beside the default recipe.
    let ctx = t.path().join("ctx");
    context(
        &ctx,
        &[
            ("Containerfile", "FROM scratch\nCOPY *.txt /app/\n"),
            (".dockerignore", "a.txt\n"),
            ("Containerfile.dockerignore", "b.txt\n"),
        ],
    );
    let root = t.path().join("root");
    let out = run(jbuild(&root).args(["build", "-t", "i:1"]).arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("using Containerfile.dockerignore, the recipe's own ignore file"),
        "{err}"
    );
    assert_eq!(copied(&root), ["a.txt", "c.txt"]);

    // Given with -f from elsewhere: its own `.jailignore` beside it wins
    // over its `.dockerignore` and over the context's.
    let recipes = t.path().join("recipes");
    fs::create_dir_all(&recipes).unwrap();
    fs::write(
        recipes.join("web.Dockerfile"),
        "FROM scratch\nCOPY *.txt /app/\n",
    )
    .unwrap();
    fs::write(recipes.join("web.Dockerfile.dockerignore"), "a.txt\n").unwrap();
    fs::write(recipes.join("web.Dockerfile.jailignore"), "c.txt\n").unwrap();
    let root = t.path().join("root2");
    let out = run(jbuild(&root)
        .args(["build", "-t", "i:2", "-f"])
        .arg(recipes.join("web.Dockerfile"))
        .arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("using web.Dockerfile.jailignore"), "{err}");
    assert_eq!(copied(&root), ["a.txt", "b.txt"]);
}
