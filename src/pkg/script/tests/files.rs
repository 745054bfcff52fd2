//! The file commands through the shared native-command signature
//! (`fn(root, args, io)`), as the installer's dispatch calls them.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::super::files;
use super::super::{CommandError, Io};

type Cmd = fn(&Path, &[String], &mut Io<'_>) -> Result<i32, CommandError>;

/// Runs a file command; its status and its stderr.
fn call(f: Cmd, root: &Path, args: &[&str]) -> (i32, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let status = f(root, &args, &mut io).unwrap();
    (status, String::from_utf8(err).unwrap())
}

fn image() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("etc")).unwrap();
    fs::write(
        dir.path().join("etc/master.passwd"),
        "root:*:0:0::0:0:Charlie &:/root:/bin/sh\nfoo:*:1001:1002::0:0:Foo:/home/foo:/bin/sh\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("etc/group"),
        "wheel:*:0:root\nbar:*:1003:\n",
    )
    .unwrap();
    dir
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn ids(p: &Path) -> (u32, u32) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid())
}

fn root_user() -> bool {
    nix::unistd::geteuid().is_root()
}

#[test]
fn install_d_makes_directories_with_owner_and_mode() {
    let d = image();
    let r = d.path();
    assert_eq!(
        call(
            files::install,
            r,
            &[
                "-d",
                "-o",
                "foo",
                "-g",
                "bar",
                "-m",
                "750",
                "/var/db/foo",
                "/var/run/foo"
            ]
        ),
        (0, String::new())
    );
    for p in ["var/db/foo", "var/run/foo"] {
        assert_eq!(mode(&r.join(p)), 0o750);
        if root_user() {
            assert_eq!(ids(&r.join(p)), (1001, 1003));
        }
    }
    assert_eq!(mode(&r.join("var/db")), 0o755, "parents are 0755");
    // Again on an existing directory: owner and mode set again.
    assert_eq!(
        call(files::install, r, &["-d", "-m", "700", "/var/db/foo"]).0,
        0
    );
    assert_eq!(mode(&r.join("var/db/foo")), 0o700);
}

#[test]
fn install_resolves_owners_in_the_image_at_the_time_of_the_call() {
    let d = image();
    let r = d.path();
    assert_eq!(
        call(files::install, r, &["-d", "-o", "newuser", "/home/new"]),
        (67, "install: unknown user newuser\n".to_string())
    );
    assert!(
        !r.join("home/new").exists(),
        "nothing made before the names are checked"
    );
    assert_eq!(
        call(files::install, r, &["-d", "-g", "nogroup", "/x"]),
        (67, "install: unknown group nogroup\n".to_string())
    );
    // A user added to the image's files (as `pw useradd` does) is found
    // by the next call.
    let mut pw = fs::read_to_string(r.join("etc/master.passwd")).unwrap();
    pw.push_str("newuser:*:2000:2000::0:0:New:/home/new:/bin/sh\n");
    fs::write(r.join("etc/master.passwd"), pw).unwrap();
    assert_eq!(
        call(
            files::install,
            r,
            &["-d", "-o", "newuser", "-g", "2001", "/home/new"]
        )
        .0,
        0
    );
    if root_user() {
        assert_eq!(ids(&r.join("home/new")), (2000, 2001));
    }
}

#[test]
fn install_n_reads_the_databases_of_that_directory() {
    let d = image();
    let r = d.path();
    fs::create_dir_all(r.join("other/etc")).unwrap();
    fs::write(
        r.join("other/etc/master.passwd"),
        "foo:*:3001:3002::0:0::/:/bin/sh\n",
    )
    .unwrap();
    fs::write(r.join("other/etc/group"), "bar:*:3003:\n").unwrap();
    assert_eq!(
        call(
            files::install,
            r,
            &["-N", "/other/etc/", "-d", "-o", "foo", "-g", "bar", "/d"]
        )
        .0,
        0
    );
    if root_user() {
        assert_eq!(ids(&r.join("d")), (3001, 3003));
    }
}

#[test]
fn install_usage_and_mode_errors() {
    let d = image();
    let r = d.path();
    assert_eq!(
        call(files::install, r, &["-d", "-m", "u+q", "/x"]),
        (64, "install: invalid file mode: u+q\n".to_string())
    );
    assert_eq!(call(files::install, r, &["onlyone"]).0, 64);
    assert_eq!(call(files::install, r, &["-Z", "a", "b"]).0, 64);
    assert_eq!(
        call(files::install, r, &["/missing", "/dst"]),
        (
            71,
            "install: /missing: No such file or directory\n".to_string()
        )
    );
}

#[test]
fn install_copies_files_and_replaces_a_symlink_at_the_destination() {
    let d = image();
    let r = d.path();
    fs::write(r.join("src"), "content").unwrap();
    fs::write(r.join("target_of_link"), "keep").unwrap();
    std::os::unix::fs::symlink("/target_of_link", r.join("dst")).unwrap();
    assert_eq!(
        call(
            files::install,
            r,
            &["-c", "-m", "0640", "-o", "foo", "/src", "/dst"]
        )
        .0,
        0
    );
    assert_eq!(fs::read_to_string(r.join("dst")).unwrap(), "content");
    assert!(!fs::symlink_metadata(r.join("dst"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_to_string(r.join("target_of_link")).unwrap(),
        "keep"
    );
    assert_eq!(mode(&r.join("dst")), 0o640);
    fs::create_dir(r.join("dir")).unwrap();
    assert_eq!(call(files::install, r, &["/src", "/dst", "/dir"]).0, 0);
    assert_eq!(mode(&r.join("dir/src")), 0o755);
    assert!(r.join("dir/dst").is_file());
}

#[test]
fn mkdir_messages_and_modes() {
    let d = image();
    let r = d.path();
    assert_eq!(
        call(files::mkdir, r, &["/a/b"]),
        (1, "mkdir: /a/b: No such file or directory\n".to_string())
    );
    assert_eq!(call(files::mkdir, r, &["-p", "-m", "700", "/a/b"]).0, 0);
    assert_eq!((mode(&r.join("a")), mode(&r.join("a/b"))), (0o755, 0o700));
    assert_eq!(
        call(files::mkdir, r, &["/a"]),
        (1, "mkdir: /a: File exists\n".to_string())
    );
    assert_eq!(call(files::mkdir, r, &["-p", "/a"]).0, 0);
}

#[test]
fn chmod_octal_and_symbolic() {
    let d = image();
    let r = d.path();
    let f = r.join("f");
    fs::write(&f, "").unwrap();
    let set = |m: u32| fs::set_permissions(&f, fs::Permissions::from_mode(m)).unwrap();
    for (from, spec, want) in [
        (0o666, "u+x,go-w", 0o744),
        (0o777, "a=r", 0o444),
        (0o644, "4755", 0o4755),
        (0o600, "g=u", 0o660),
        (0o640, "o+r", 0o644),
        (0o644, "+x", 0o755),
        (0o750, "u-x,g+s", 0o2650),
        (0o644, "a+X", 0o644),
    ] {
        set(from);
        assert_eq!(call(files::chmod, r, &[spec, "/f"]).0, 0, "{spec}");
        assert_eq!(mode(&f), want, "{from:o} {spec}");
    }
    assert_eq!(
        call(files::chmod, r, &["z+x", "/f"]),
        (1, "chmod: invalid file mode: z+x\n".to_string())
    );
    fs::create_dir_all(r.join("t/u")).unwrap();
    fs::write(r.join("t/u/v"), "").unwrap();
    assert_eq!(call(files::chmod, r, &["-R", "go-rwx", "/t"]).0, 0);
    assert_eq!(
        (mode(&r.join("t/u")), mode(&r.join("t/u/v"))),
        (0o700, 0o600)
    );
}

#[test]
fn chown_and_chgrp() {
    let d = image();
    let r = d.path();
    fs::create_dir_all(r.join("t/u")).unwrap();
    fs::write(r.join("t/u/v"), "").unwrap();
    assert_eq!(call(files::chown, r, &["-R", "foo:bar", "/t"]).0, 0);
    assert_eq!(call(files::chgrp, r, &["wheel", "/t/u/v"]).0, 0);
    if root_user() {
        assert_eq!(ids(&r.join("t")), (1001, 1003));
        assert_eq!(ids(&r.join("t/u")), (1001, 1003));
        assert_eq!(ids(&r.join("t/u/v")), (1001, 0));
    }
    assert_eq!(
        call(files::chown, r, &["nobody2", "/t"]),
        (1, "chown: nobody2: illegal user name\n".to_string())
    );
    assert_eq!(
        call(files::chown, r, &["foo:nogroup", "/t"]),
        (1, "chown: nogroup: illegal group name\n".to_string())
    );
    assert_eq!(
        call(files::chown, r, &["foo", "/missing"]),
        (
            1,
            "chown: /missing: No such file or directory\n".to_string()
        )
    );
}

#[test]
fn ln_rm_rmdir_touch_mv_cp() {
    let d = image();
    let r = d.path();
    assert_eq!(call(files::touch, r, &["/f"]).0, 0);
    assert!(r.join("f").is_file());
    assert_eq!(call(files::ln, r, &["-s", "f", "/l"]).0, 0);
    assert_eq!(fs::read_link(r.join("l")).unwrap(), Path::new("f"));
    assert_eq!(
        call(files::ln, r, &["-s", "g", "/l"]),
        (1, "ln: /l: File exists\n".to_string())
    );
    assert_eq!(call(files::ln, r, &["-sf", "g", "/l"]).0, 0);
    assert_eq!(fs::read_link(r.join("l")).unwrap(), Path::new("g"));
    assert_eq!(
        call(files::rm, r, &["/nope"]),
        (1, "rm: /nope: No such file or directory\n".to_string())
    );
    assert_eq!(call(files::rm, r, &["-f", "/nope"]).0, 0);
    fs::create_dir_all(r.join("d/e")).unwrap();
    fs::write(r.join("d/e/x"), "x").unwrap();
    assert_eq!(
        call(files::rm, r, &["/d"]),
        (1, "rm: /d: is a directory\n".to_string())
    );
    assert_eq!(
        call(files::rmdir, r, &["/d"]),
        (1, "rmdir: /d: Directory not empty\n".to_string())
    );
    fs::set_permissions(r.join("d/e/x"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(call(files::cp, r, &["-p", "/d/e/x", "/copy"]).0, 0);
    assert_eq!(
        (
            fs::read_to_string(r.join("copy")).unwrap(),
            mode(&r.join("copy"))
        ),
        ("x".to_string(), 0o600)
    );
    assert_eq!(call(files::cp, r, &["-R", "/d", "/d2"]).0, 0);
    assert_eq!(fs::read_to_string(r.join("d2/e/x")).unwrap(), "x");
    assert_eq!(call(files::mv, r, &["/copy", "/d"]).0, 0);
    assert!(r.join("d/copy").is_file() && !r.join("copy").exists());
    assert_eq!(call(files::rm, r, &["-r", "/d", "/l"]).0, 0);
    assert!(!r.join("d").exists() && fs::symlink_metadata(r.join("l")).is_err());
    fs::create_dir_all(r.join("p/q")).unwrap();
    assert_eq!(call(files::rmdir, r, &["-p", "/p/q"]).0, 0);
    assert!(!r.join("p").exists());
}

#[test]
fn recursive_walks_stop_at_the_limit() {
    let d = image();
    let r = d.path();
    fs::create_dir(r.join("many")).unwrap();
    for i in 0..20 {
        fs::write(r.join(format!("many/{i}")), "").unwrap();
    }
    let cx = files::Cx {
        root: r,
        cwd: "/",
        max_entries: 10,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let rm = files::native("rm").unwrap();
    let e = rm(&cx, &["-rf".to_string(), "/many".to_string()], &mut io).unwrap_err();
    assert!(matches!(e, CommandError::Limit { .. }), "{e:?}");
    let chmod = files::native("chmod").unwrap();
    let e = chmod(
        &cx,
        &[
            "-R".to_string(),
            "700".to_string(),
            "/etc".to_string(),
            "/".to_string(),
        ],
        &mut io,
    )
    .unwrap_err();
    assert!(e.to_string().contains("10 entries"), "{e}");
}
