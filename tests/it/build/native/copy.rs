use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

use filetime::FileTime;
use jbuild::engine::native::{copy, CopyOptions, CopyStats, Ignore, NativeError};
use jbuild::jailfile::CopySource;

use super::{chmod, mode, Scratch};

fn srcs(paths: &[&str]) -> Vec<CopySource> {
    paths
        .iter()
        .map(|p| CopySource::Path(p.to_string()))
        .collect()
}

fn run(s: &Scratch, sources: &[&str], dest: &str) -> Result<CopyStats, NativeError> {
    copy(
        &s.ctx,
        &srcs(sources),
        dest,
        &s.root,
        "/",
        None,
        &CopyOptions::default(),
    )
}

/// Every path under `dir`, relative, sorted, directories with a `/`.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                out.push(format!("{rel}/"));
                walk(base, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn context(s: &Scratch) {
    for (rel, content) in [
        ("a.txt", "A"),
        ("b.txt", "B"),
        ("conf/app.conf", "app"),
        ("conf/sub/extra.conf", "extra"),
        ("other/deep/x.conf", "x"),
    ] {
        Scratch::write(&s.ctx, rel, content);
    }
}

#[test]
fn file_to_file_and_to_dir() {
    let s = Scratch::create();
    context(&s);
    let a = s.ctx.join("a.txt");
    chmod(&a, 0o751);
    let mtime = FileTime::from_unix_time(1_000_000_000, 0);
    filetime::set_file_mtime(&a, mtime).unwrap();

    let stats = run(&s, &["a.txt"], "/etc/b.conf").unwrap();
    assert_eq!(
        stats,
        CopyStats {
            files: 1,
            bytes: 1,
            ..Default::default()
        }
    );
    assert_eq!(s.read("etc/b.conf"), "A");
    let dest = s.root.join("etc/b.conf");
    assert_eq!(mode(&dest), 0o751);
    assert_eq!(
        FileTime::from_last_modification_time(&fs::metadata(&dest).unwrap()),
        mtime
    );
    assert_eq!(mode(&s.root.join("etc")), 0o755);

    run(&s, &["/a.txt"], "/opt/").unwrap();
    assert_eq!(s.read("opt/a.txt"), "A");
    // An existing directory is a directory even without the slash.
    run(&s, &["b.txt"], "/opt").unwrap();
    assert_eq!(s.read("opt/b.txt"), "B");
    // Relative to WORKDIR.
    copy(
        &s.ctx,
        &srcs(&["a.txt"]),
        "rel/",
        &s.root,
        "/srv",
        None,
        &CopyOptions::default(),
    )
    .unwrap();
    assert_eq!(s.read("srv/rel/a.txt"), "A");
}

#[test]
fn directory_contents_not_the_directory() {
    let s = Scratch::create();
    context(&s);
    run(&s, &["conf"], "/etc/app").unwrap();
    assert_eq!(
        tree(&s.root.join("etc/app")),
        ["app.conf", "sub/", "sub/extra.conf"]
    );
    // `.` is the whole context.
    run(&s, &["."], "/all/").unwrap();
    assert!(s.root.join("all/other/deep/x.conf").is_file());
}

#[test]
fn globs_and_several_sources() {
    let s = Scratch::create();
    context(&s);
    run(&s, &["*.txt"], "/g/").unwrap();
    assert_eq!(tree(&s.root.join("g")), ["a.txt", "b.txt"]);
    // A glob matching one file to a file path.
    run(&s, &["a.*"], "/single").unwrap();
    assert_eq!(s.read("single"), "A");
    // `**` finds files at any depth; each match lands under its own name.
    run(&s, &["**/*.conf"], "/flat/").unwrap();
    assert_eq!(
        tree(&s.root.join("flat")),
        ["app.conf", "extra.conf", "x.conf"]
    );
    // Several sources make the destination a directory, slash or not.
    let stats = run(&s, &["a.txt", "conf/sub", "b.txt"], "/multi").unwrap();
    assert_eq!(
        tree(&s.root.join("multi")),
        ["a.txt", "b.txt", "extra.conf"]
    );
    assert_eq!(stats.files, 3);
    // A glob matching directories copies their contents.
    run(&s, &["c*"], "/cdir/").unwrap();
    assert_eq!(
        tree(&s.root.join("cdir")),
        ["app.conf", "sub/", "sub/extra.conf"]
    );
}

#[test]
fn missing_and_escaping_sources() {
    let s = Scratch::create();
    context(&s);
    let err = run(&s, &["nope.txt"], "/x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "COPY source `nope.txt` matches nothing in the build context"
    );
    let err = run(&s, &["*.md"], "/x/").unwrap_err();
    assert_eq!(
        err.to_string(),
        "COPY source `*.md` matches nothing in the build context"
    );
    for bad in ["../x", "conf/../../x", "/../etc/passwd"] {
        let err = run(&s, &[bad], "/x").unwrap_err();
        assert!(
            matches!(&err, NativeError::SourceEscapes { path } if path == bad),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains("outside the build context"));
    }
    run(&s, &["conf/../a.txt"], "/ok").unwrap();
    assert_eq!(s.read("ok"), "A");
    // A context symlink climbing out is followed inside the context only.
    symlink("../../../../../../etc", s.ctx.join("up")).unwrap();
    let err = run(&s, &["up/passwd"], "/x").unwrap_err();
    assert!(matches!(err, NativeError::SourceNotFound { .. }), "{err}");
}

#[test]
fn chmod_and_chown() {
    let s = Scratch::create();
    context(&s);
    let opts = CopyOptions {
        chown: None,
        chmod: Some(0o600),
        ..CopyOptions::default()
    };
    copy(&s.ctx, &srcs(&["conf"]), "/c/", &s.root, "/", None, &opts).unwrap();
    assert_eq!(mode(&s.root.join("c/app.conf")), 0o600);
    assert_eq!(
        mode(&s.root.join("c/sub")),
        0o600,
        "as BuildKit: --chmod applies to directories too"
    );
    assert_eq!(
        mode(&s.root.join("c")),
        0o755,
        "the destination directory itself is created 0755"
    );
    need!(Root);
    let owner = |p: &str| {
        let m = fs::symlink_metadata(s.root.join(p)).unwrap();
        (m.uid(), m.gid())
    };
    assert_eq!(owner("c/app.conf"), (0, 0));
    std::os::unix::fs::chown(s.ctx.join("a.txt"), Some(777), Some(777)).unwrap();
    symlink("a.txt", s.ctx.join("conf/link")).unwrap();
    let opts = CopyOptions {
        chown: Some((1000, 2000)),
        chmod: None,
        ..CopyOptions::default()
    };
    copy(
        &s.ctx,
        &srcs(&["conf", "a.txt"]),
        "/o/",
        &s.root,
        "/",
        None,
        &opts,
    )
    .unwrap();
    for p in [
        "o/app.conf",
        "o/sub",
        "o/sub/extra.conf",
        "o/link",
        "o/a.txt",
    ] {
        assert_eq!(owner(p), (1000, 2000), "{p}");
    }
    run(&s, &["a.txt"], "/plain").unwrap();
    assert_eq!(
        owner("plain"),
        (0, 0),
        "COPY makes files root's, whoever owned the source"
    );
}

#[test]
fn symlinks_and_hard_links() {
    let s = Scratch::create();
    context(&s);
    symlink("a.txt", s.ctx.join("rel-link")).unwrap();
    symlink("/etc/passwd", s.ctx.join("conf/abs-link")).unwrap();
    fs::hard_link(s.ctx.join("a.txt"), s.ctx.join("conf/hard")).unwrap();

    let stats = run(&s, &["a.txt", "rel-link", "conf"], "/d/").unwrap();
    assert_eq!((stats.symlinks, stats.hardlinks), (2, 1));
    assert_eq!(
        fs::read_link(s.root.join("d/rel-link")).unwrap(),
        Path::new("a.txt")
    );
    assert_eq!(
        fs::read_link(s.root.join("d/abs-link")).unwrap(),
        Path::new("/etc/passwd")
    );
    let ino = |p: &str| fs::metadata(s.root.join(p)).unwrap().ino();
    assert_eq!(ino("d/a.txt"), ino("d/hard"));
    // A symlink given as the source is copied as a symlink too.
    run(&s, &["rel-link"], "/single-link").unwrap();
    assert!(fs::symlink_metadata(s.root.join("single-link"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn inline_sources() {
    let s = Scratch::create();
    let inline = |name: &str, content: &str| CopySource::Inline {
        name: name.into(),
        content: content.into(),
    };
    let opts = CopyOptions::default();
    copy(
        &s.ctx,
        &[inline("hello.sh", "echo hi\n")],
        "/usr/local/bin/",
        &s.root,
        "/",
        None,
        &opts,
    )
    .unwrap();
    assert_eq!(s.read("usr/local/bin/hello.sh"), "echo hi\n");
    assert_eq!(mode(&s.root.join("usr/local/bin/hello.sh")), 0o644);
    // A single inline source to a file path is that file.
    let opts = CopyOptions {
        chown: None,
        chmod: Some(0o755),
        ..CopyOptions::default()
    };
    copy(
        &s.ctx,
        &[inline("EOF", "#!/bin/sh\n")],
        "/etc/rc.local",
        &s.root,
        "/",
        None,
        &opts,
    )
    .unwrap();
    assert_eq!(s.read("etc/rc.local"), "#!/bin/sh\n");
    assert_eq!(mode(&s.root.join("etc/rc.local")), 0o755);
    let err = copy(
        &s.ctx,
        &[inline("../x", "")],
        "/",
        &s.root,
        "/",
        None,
        &CopyOptions::default(),
    );
    assert!(matches!(err, Err(NativeError::InvalidInlineName { .. })));
}

#[test]
fn jailignore_with_exceptions_and_directories() {
    let s = Scratch::create();
    context(&s);
    Scratch::write(&s.ctx, "debug.log", "log");
    Scratch::write(&s.ctx, "secret/key", "k");
    Scratch::write(&s.ctx, "build/keep.txt", "keep");
    Scratch::write(&s.ctx, "build/out/obj.o", "o");
    Scratch::write(&s.ctx, "build/empty/nothing", "n");
    Scratch::write(
        &s.ctx,
        ".jailignore",
        "# test\n*.log\nsecret\nbuild\n!build/keep.txt\nother/**\n",
    );
    let ignore = Ignore::load(&s.ctx).unwrap().unwrap();
    let opts = CopyOptions::default();
    copy(
        &s.ctx,
        &srcs(&["."]),
        "/app/",
        &s.root,
        "/",
        Some(&ignore),
        &opts,
    )
    .unwrap();
    assert_eq!(
        tree(&s.root.join("app")),
        [
            ".jailignore",
            "a.txt",
            "b.txt",
            "build/",
            "build/keep.txt",
            "conf/",
            "conf/app.conf",
            "conf/sub/",
            "conf/sub/extra.conf",
            "other/"
        ]
    );
    let err = copy(
        &s.ctx,
        &srcs(&["secret/key"]),
        "/k",
        &s.root,
        "/",
        Some(&ignore),
        &opts,
    )
    .unwrap_err();
    assert!(matches!(err, NativeError::SourceNotFound { .. }), "{err}");
    let err = copy(
        &s.ctx,
        &srcs(&["*.log"]),
        "/l/",
        &s.root,
        "/",
        Some(&ignore),
        &opts,
    )
    .unwrap_err();
    assert!(matches!(err, NativeError::SourceNotFound { .. }), "{err}");
    // --from stage roots get no ignore file.
    copy(
        &s.ctx,
        &srcs(&["secret/key"]),
        "/k",
        &s.root,
        "/",
        None,
        &opts,
    )
    .unwrap();
    assert!(Ignore::load(&s.root).unwrap().is_none());
}

#[test]
fn hostile_destination_symlinks_stay_inside() {
    let s = Scratch::create();
    context(&s);
    // An earlier RUN left these behind.
    fs::create_dir_all(s.root.join("usr/local")).unwrap();
    fs::create_dir_all(s.root.join("etc")).unwrap();
    symlink("/etc", s.root.join("usr/local/etc")).unwrap();
    symlink(&s.outside, s.root.join("opt")).unwrap();
    let victim = Scratch::write(&s.outside, "victim", "original");
    symlink(&victim, s.root.join("etc/app.conf")).unwrap();

    run(&s, &["a.txt"], "/usr/local/etc/").unwrap();
    assert_eq!(s.read("etc/a.txt"), "A");
    run(&s, &["conf"], "/opt/conf/").unwrap();
    run(&s, &["b.txt"], "/etc/app.conf").unwrap();

    assert_eq!(fs::read_to_string(&victim).unwrap(), "original");
    assert_eq!(tree(&s.outside), ["victim"]);
    let inside = s.root.join(s.outside.strip_prefix("/").unwrap());
    assert!(inside.join("conf/sub/extra.conf").is_file());
    assert!(
        fs::symlink_metadata(s.root.join("etc/app.conf"))
            .unwrap()
            .is_file(),
        "the link was replaced"
    );
    assert_eq!(s.read("etc/app.conf"), "B");
}

#[test]
fn conflicts_are_errors() {
    let s = Scratch::create();
    context(&s);
    Scratch::write(&s.root, "d/sub", "a file where a directory goes");
    fs::create_dir_all(s.root.join("f/app.conf")).unwrap();
    let err = run(&s, &["conf"], "/d/").unwrap_err();
    assert!(matches!(err, NativeError::Conflict { .. }), "{err}");
    let err = run(&s, &["conf"], "/f/").unwrap_err();
    assert!(err.to_string().contains("/f/app.conf"), "{err}");
}

#[test]
fn dangling_destination_symlink_is_created_inside() {
    let s = Scratch::create();
    context(&s);
    // `/srv/conf -> /data/deep/conf`, none of which exists yet.
    fs::create_dir(s.root.join("srv")).unwrap();
    symlink("/data/deep/conf", s.root.join("srv/conf")).unwrap();
    run(&s, &["."], "/srv/").unwrap();
    assert_eq!(s.read("data/deep/conf/app.conf"), "app");
    assert!(fs::symlink_metadata(s.root.join("srv/conf"))
        .unwrap()
        .file_type()
        .is_symlink());
}
