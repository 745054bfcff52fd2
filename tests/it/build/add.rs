//! `ADD` through the `jbuild` binary (issue 33 item 1): local files and
//! directories as COPY copies them; local tar archives in every
//! compression extracted (and a compressed file that is no archive copied
//! as it is); a hostile archive refused as a hostile layer is, nothing
//! written outside the destination; a local git repository pinned to the
//! commit its ref resolves to, in the step's key and its history. Trees
//! are unpacked by umoci from `jbuild export`.

use crate::support::common::*;
use crate::support::hostile::Tar;
use crate::support::limits::Server;
use crate::support::origins::{file_server, git, git_repo};

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// `jbuild build -t tag ctx`: its output (it must succeed).
fn build(root: &Path, tag: &str, ctx: &Path) -> String {
    let out = run(jbuild(root).args(["build", "-t", tag]).arg(ctx));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "build {tag}: {err}");
    err
}

/// The image's config and its root as umoci unpacks it.
fn exported(root: &Path, image: &str, work: &Path) -> (Value, PathBuf) {
    let (layout, rootfs) = export_unpacked(root, image, work);
    let blob = |digest: &str| -> Value {
        let hex = digest.strip_prefix("sha256:").unwrap();
        serde_json::from_slice(&fs::read(layout.join("blobs/sha256").join(hex)).unwrap()).unwrap()
    };
    let index = blob_index(&layout);
    let manifest = blob(index["manifests"][0]["digest"].as_str().unwrap());
    (blob(manifest["config"]["digest"].as_str().unwrap()), rootfs)
}

fn blob_index(layout: &Path) -> Value {
    serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap()
}

/// The history lines of `config` joined, to look for a step's text.
fn history(config: &Value) -> String {
    config["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["created_by"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn archive(name: &str) -> Vec<u8> {
    Tar::new()
        .dir(format!("{name}/").as_bytes())
        .file(format!("{name}/data.txt").as_bytes(), name.as_bytes())
        .symlink(format!("{name}/link").as_bytes(), b"data.txt")
        .finish()
}

#[test]
fn add_extracts_local_archives_of_every_compression_and_copies_other_files() {
    let t = tempfile::tempdir().unwrap();
    let (root, ctx) = (t.path().join("root"), t.path().join("ctx"));
    let tar = archive("plain");
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(&archive("bzip2")).unwrap();
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(&archive("xz")).unwrap();
    write(&ctx.join("a.tar"), &tar);
    write(
        &ctx.join("b.tgz"),
        &crate::support::hostile::gzip(&archive("gzip")),
    );
    write(&ctx.join("c.tar.bz2"), &bz.finish().unwrap());
    write(&ctx.join("d.txz"), &xz.finish().unwrap());
    write(
        &ctx.join("e.tar.zst"),
        &crate::support::hostile::zstd(&archive("zstd")),
    );
    // Compressed, but no tar inside: copied as it is, as Docker does.
    let notes = crate::support::hostile::gzip(b"just text\n");
    write(&ctx.join("notes.txt.gz"), &notes);
    write(&ctx.join("dir/inner.txt"), b"inner\n");
    write(&ctx.join("file.txt"), b"file\n");
    write(
        &ctx.join("Jailfile"),
        b"FROM scratch\n\
          ADD a.tar b.tgz c.tar.bz2 d.txz e.tar.zst /x/\n\
          ADD notes.txt.gz /notes/\n\
          ADD dir /d/\n\
          ADD --chmod=0600 file.txt /f/renamed.txt\n\
          ADD [\"a.tar\", \"/y\"]\n",
    );
    build(&root, "add:1", &ctx);
    let (config, rootfs) = exported(&root, "add:1", t.path());
    let r = rootfs;
    for name in ["plain", "gzip", "bzip2", "xz", "zstd"] {
        let data = r.join("x").join(name).join("data.txt");
        assert_eq!(
            fs::read_to_string(&data).unwrap(),
            name,
            "{}",
            data.display()
        );
        let link = fs::read_link(r.join("x").join(name).join("link")).unwrap();
        assert_eq!(link, Path::new("data.txt"));
    }
    assert_eq!(fs::read(r.join("notes/notes.txt.gz")).unwrap(), notes);
    assert_eq!(
        fs::read_to_string(r.join("d/inner.txt")).unwrap(),
        "inner\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let f = r.join("f/renamed.txt");
    assert_eq!(fs::read_to_string(&f).unwrap(), "file\n");
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A single archive and a destination without `/`: a directory.
    assert_eq!(
        fs::read_to_string(r.join("y/plain/data.txt")).unwrap(),
        "plain"
    );
    assert!(history(&config).contains("ADD a.tar b.tgz"), "{config}");

    // The same recipe and context: the same image.
    build(&root, "add:2", &ctx);
    let twice = run(jbuild(&root).args(["images", "--format", "{{.ID}}"]));
    let ids = String::from_utf8_lossy(&twice.stdout).into_owned();
    let mut lines: Vec<&str> = ids.lines().collect();
    lines.dedup();
    assert_eq!(lines.len(), 1, "the same recipe gave two images:\n{ids}");
}

#[test]
fn add_refuses_hostile_archives_as_a_hostile_layer_is() {
    let t = tempfile::tempdir().unwrap();
    let canary = t.path().join("canary");
    fs::create_dir(&canary).unwrap();
    let up = |rel: &str| -> Vec<u8> {
        let mut p = b"../".repeat(12);
        p.extend_from_slice(&canary.join(rel).into_os_string().into_encoded_bytes()[1..]);
        p
    };
    let abs = canary.join("abs").into_os_string().into_encoded_bytes();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("dotdot", Tar::new().file(&up("dotdot"), b"x").finish()),
        (
            "through-symlink",
            Tar::new()
                .symlink(b"out", canary.as_os_str().as_encoded_bytes())
                .file(b"out/through", b"x")
                .finish(),
        ),
        (
            "hard-link-out",
            Tar::new().hard_link(b"h", &up("hard")).finish(),
        ),
        ("absolute", Tar::new().file(&abs, b"x").finish()),
        ("device", Tar::new().device(b"null", b'3', 1, 3).finish()),
    ];
    for (name, tar) in cases {
        let ctx = t.path().join(format!("ctx-{name}"));
        let root = t.path().join(format!("root-{name}"));
        write(
            &ctx.join("evil.tar.gz"),
            &crate::support::hostile::gzip(&tar),
        );
        write(
            &ctx.join("Jailfile"),
            b"FROM scratch\nADD evil.tar.gz /dest/\n",
        );
        let out = run(jbuild(&root).args(["build", "-t", "evil:1"]).arg(&ctx));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains("Jailfile:2:1")
                && err.contains("cannot extract the tar.gz archive")
                && err.contains("evil.tar.gz"),
            "{name}: the error does not name the line, the refusal and the archive:\n{err}"
        );
        let listed: Vec<_> = fs::read_dir(&canary).unwrap().collect();
        assert!(listed.is_empty(), "{name}: wrote outside: {listed:?}");
        let images = run(jbuild(&root).args(["images", "-q"]));
        assert!(images.stdout.is_empty(), "{name}: an image was named");
    }
}

#[test]
fn add_of_a_local_git_repository_is_pinned_to_its_commit() {
    let t = tempfile::tempdir().unwrap();
    let (root, ctx, repo) = (
        t.path().join("root"),
        t.path().join("ctx"),
        t.path().join("repo"),
    );
    let first = git_repo(&repo, &[("src/app.txt", b"v1\n")]);
    git(&repo, &["tag", "v1"]);
    let url = format!("file://{}", repo.display());
    write(
        &ctx.join("Jailfile"),
        format!(
            "FROM scratch\n\
             ADD {url}#main /src/\n\
             ADD --keep-git-dir {url}#v1 /kept/\n"
        )
        .as_bytes(),
    );
    build(&root, "git:1", &ctx);
    let (config, rootfs) = exported(&root, "git:1", &mkdir(t.path().join("one")));
    let r = rootfs;
    assert_eq!(
        fs::read_to_string(r.join("src/src/app.txt")).unwrap(),
        "v1\n"
    );
    assert!(
        !r.join("src/.git").exists(),
        ".git kept without --keep-git-dir"
    );
    assert!(r.join("kept/.git").is_dir(), "--keep-git-dir left out .git");
    let h = history(&config);
    assert!(
        h.contains(&format!(
            "ADD {url}#main /src/ (git {url} at commit {first})"
        )),
        "the history does not pin the commit:\n{h}"
    );

    // A new commit on the branch: the branch's step runs again with it,
    // the tag's stays cached.
    write(&repo.join("src/app.txt"), b"v2\n");
    git(&repo, &["commit", "-q", "-am", "two"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    let out = run(jbuild(&root).args(["build", "-t", "git:2"]).arg(&ctx));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (config, rootfs) = exported(&root, "git:2", &mkdir(t.path().join("two")));
    let r = rootfs;
    assert_eq!(
        fs::read_to_string(r.join("src/src/app.txt")).unwrap(),
        "v2\n"
    );
    assert_eq!(
        fs::read_to_string(r.join("kept/src/app.txt")).unwrap(),
        "v1\n"
    );
    assert!(history(&config).contains(&format!("at commit {second}")));

    // A ref the repository lacks: the user's mistake, at the line.
    write(
        &ctx.join("Jailfile"),
        format!("FROM scratch\nADD {url}#nope /src/\n").as_bytes(),
    );
    let out = run(jbuild(&root).args(["build", "-t", "git:3"]).arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Jailfile:2:1") && err.contains("nope"),
        "{err}"
    );
}

fn mkdir(p: PathBuf) -> PathBuf {
    fs::create_dir_all(&p).unwrap();
    p
}

/// The sha256 of `bytes` as `sha256:<hex>`.
fn sha256(bytes: &[u8]) -> String {
    jbuild::digest::Digest::of(bytes).to_string()
}

/// Files in `root`'s ADD download cache.
fn cached_downloads(root: &Path) -> Vec<String> {
    match fs::read_dir(root.join("cache/add/url")) {
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("sha256-"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn add_of_a_url_is_checked_against_its_checksum_and_cached_by_it() {
    let archive = crate::support::hostile::gzip(&archive("remote"));
    let conf = b"listen 80\n".to_vec();
    let server = file_server(&[("/files/app.tar.gz", &archive), ("/files/app.conf", &conf)]);
    let base = format!("http://{}/files", server.host());
    let t = tempfile::tempdir().unwrap();
    let (root, ctx) = (t.path().join("root"), t.path().join("ctx"));
    let right = sha256(&archive);
    write(
        &ctx.join("Jailfile"),
        format!(
            "FROM scratch\n\
             ADD --checksum={right} {base}/app.tar.gz /opt/\n\
             ADD {base}/app.conf /etc/app/conf\n"
        )
        .as_bytes(),
    );
    let err = build(&root, "url:1", &ctx);
    let pin = sha256(&conf);
    assert!(
        err.contains(&format!("--checksum={pin}")),
        "the build does not say how to pin the unchecked download:\n{err}"
    );
    let (config, rootfs) = exported(&root, "url:1", &mkdir(t.path().join("one")));
    // A downloaded archive is not extracted, as Docker does.
    let got = rootfs.join("opt/app.tar.gz");
    assert_eq!(fs::read(&got).unwrap(), archive);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&got).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(fs::read(rootfs.join("etc/app/conf")).unwrap(), conf);
    assert!(history(&config).contains("ADD --checksum="), "{config}");
    let fetched = |s: &Server, p: &str| s.requests().iter().filter(|r| r.path == p).count();
    assert_eq!(fetched(&server, "/files/app.tar.gz"), 1);

    // Again: the checked file's step is cached by its checksum, and it is
    // not fetched again.
    build(&root, "url:2", &ctx);
    assert_eq!(fetched(&server, "/files/app.tar.gz"), 1, "fetched again");

    // A wrong checksum: exit 1, nothing stored, no image.
    let root = t.path().join("root-wrong");
    let wrong = sha256(b"something else");
    write(
        &ctx.join("Jailfile"),
        format!("FROM scratch\nADD --checksum={wrong} {base}/app.tar.gz /opt/\n").as_bytes(),
    );
    let out = run(jbuild(&root).args(["build", "-t", "url:3"]).arg(&ctx));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Jailfile:2:1") && err.contains(&wrong) && err.contains(&right),
        "the error names neither the line nor both digests:\n{err}"
    );
    assert_eq!(cached_downloads(&root), Vec::<String>::new());
    let images = run(jbuild(&root).args(["images", "-q"]));
    assert!(images.stdout.is_empty(), "an image was named");
}
