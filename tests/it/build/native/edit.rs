//! SERVICE, LINE_IN_FILE and RENDER.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};

use jbuild::engine::native::{
    line_in_file, render, service, service_rcvar, NativeError, RenderStats,
};

use super::{chmod, mode, Scratch};

#[test]
fn service_enable_disable_idempotent() {
    let s = Scratch::create();
    Scratch::write(&s.root, "etc/rc.conf", "hostname=\"x\"\n");
    service(&s.root, "sshd", true).unwrap();
    let once = s.read("etc/rc.conf");
    let ino = fs::metadata(s.root.join("etc/rc.conf")).unwrap().ino();
    let again = service(&s.root, "sshd", true).unwrap();
    assert_eq!(again.before.as_deref(), Some("YES"));
    assert_eq!(s.read("etc/rc.conf"), once);
    assert_eq!(
        fs::metadata(s.root.join("etc/rc.conf")).unwrap().ino(),
        ino,
        "not rewritten"
    );
    assert_eq!(once, "hostname=\"x\"\nsshd_enable=\"YES\"\n");

    service(&s.root, "sshd", false).unwrap();
    service(&s.root, "sshd", false).unwrap();
    assert_eq!(
        s.read("etc/rc.conf"),
        "hostname=\"x\"\nsshd_enable=\"NO\"\n"
    );
}

#[test]
fn service_rcvar_from_script_or_name() {
    let s = Scratch::create();
    let script =
        "#!/bin/sh\n. /etc/rc.subr\nname=php_fpm\nrcvar=${name}_enable\nrun_rc_command \"$1\"\n";
    Scratch::write(&s.root, "usr/local/etc/rc.d/php-fpm", script);
    assert_eq!(service_rcvar(&s.root, "php-fpm").unwrap(), "php_fpm_enable");
    // No script yet: `-` becomes `_`.
    assert_eq!(
        service_rcvar(&s.root, "avahi-daemon").unwrap(),
        "avahi_daemon_enable"
    );
    service(&s.root, "php-fpm", true).unwrap();
    assert_eq!(s.read("etc/rc.conf"), "php_fpm_enable=\"YES\"\n");
    for bad in ["../x", "", "a/b", "-x", "a b"] {
        let err = service(&s.root, bad, true).unwrap_err();
        assert!(
            matches!(err, NativeError::InvalidService { .. }),
            "{bad}: {err}"
        );
    }
}

#[test]
fn line_in_file_cases() {
    let s = Scratch::create();
    // New file, with its directories.
    assert!(line_in_file(&s.root, "a b", "/etc/x/new.conf").unwrap());
    assert_eq!(s.read("etc/x/new.conf"), "a b\n");
    assert_eq!(mode(&s.root.join("etc/x/new.conf")), 0o644);
    // Present: untouched.
    let p = Scratch::write(&s.root, "etc/f", "one\ntwo\n");
    chmod(&p, 0o640);
    assert!(!line_in_file(&s.root, "one", "/etc/f").unwrap());
    // Absent: appended, mode kept.
    assert!(line_in_file(&s.root, "three", "etc/f").unwrap());
    assert_eq!(s.read("etc/f"), "one\ntwo\nthree\n");
    assert_eq!(mode(&p), 0o640);
    // Missing trailing newline: one is added first; the last line counts.
    Scratch::write(&s.root, "etc/g", "one");
    assert!(!line_in_file(&s.root, "one", "/etc/g").unwrap());
    assert!(line_in_file(&s.root, "two", "/etc/g").unwrap());
    assert_eq!(s.read("etc/g"), "one\ntwo\n");
    // A line that is only a prefix of an existing one is not "present".
    assert!(line_in_file(&s.root, "tw", "/etc/g").unwrap());
}

#[test]
fn line_in_file_through_hostile_symlink() {
    let s = Scratch::create();
    let target = Scratch::write(&s.outside, "hosts", "127.0.0.1 localhost\n");
    fs::create_dir(s.root.join("etc")).unwrap();
    symlink(&target, s.root.join("etc/hosts")).unwrap();
    line_in_file(&s.root, "10.0.0.1 db", "/etc/hosts").unwrap();
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "127.0.0.1 localhost\n"
    );
    let inside = s.root.join(target.strip_prefix("/").unwrap());
    assert_eq!(fs::read_to_string(inside).unwrap(), "10.0.0.1 db\n");
}

fn vars() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("PORT".into(), "8080".into()),
        ("HOST".into(), "example.org".into()),
    ])
}

#[test]
fn render_one_file() {
    let s = Scratch::create();
    let p = Scratch::write(
        &s.root,
        "usr/local/etc/app.conf",
        "listen ${HOST}:${PORT}; $PORT ${UNKNOWN}\n",
    );
    chmod(&p, 0o600);
    let stats = render(&s.root, "/usr/local/etc/app.conf", &vars()).unwrap();
    assert_eq!(
        stats,
        RenderStats {
            files: 1,
            changed: 1,
            binary: 0
        }
    );
    assert_eq!(
        s.read("usr/local/etc/app.conf"),
        "listen example.org:8080; $PORT ${UNKNOWN}\n"
    );
    assert_eq!(mode(&p), 0o600);
}

#[test]
fn render_tree_skips_binary_and_symlinks() {
    let s = Scratch::create();
    Scratch::write(&s.root, "srv/a.conf", "port=${PORT}\n");
    Scratch::write(&s.root, "srv/sub/deeper/b.txt", "${HOST}\n");
    Scratch::write(&s.root, "srv/same.txt", "nothing here ${NOPE}\n");
    fs::write(s.root.join("srv/bin.dat"), b"\0${PORT}\x01").unwrap();
    let outside = Scratch::write(&s.outside, "o.conf", "${PORT}\n");
    symlink(&outside, s.root.join("srv/link.conf")).unwrap();
    symlink(&s.outside, s.root.join("srv/linkdir")).unwrap();

    let stats = render(&s.root, "/srv", &vars()).unwrap();
    assert_eq!(
        stats,
        RenderStats {
            files: 4,
            changed: 2,
            binary: 1
        }
    );
    assert_eq!(s.read("srv/a.conf"), "port=8080\n");
    assert_eq!(s.read("srv/sub/deeper/b.txt"), "example.org\n");
    assert_eq!(
        fs::read(s.root.join("srv/bin.dat")).unwrap(),
        b"\0${PORT}\x01"
    );
    assert_eq!(fs::read_to_string(&outside).unwrap(), "${PORT}\n");
    let err = render(&s.root, "/missing", &vars()).unwrap_err();
    assert!(err.to_string().contains("`/missing`"), "{err}");
}
