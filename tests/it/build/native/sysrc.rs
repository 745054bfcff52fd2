use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};

use jbuild::engine::native::{sysrc, NativeError, SysrcChange};
use jbuild::jailfile::SysrcOp::{Append, Remove, Set};

use super::{chmod, mode, Scratch};
use crate::support::lane::{self, Lane};

const RC: &str = "/etc/rc.conf";

fn with_rc(content: &str) -> Scratch {
    let s = Scratch::create();
    Scratch::write(&s.root, "etc/rc.conf", content);
    s
}

#[test]
fn set_new_creates_file_and_dirs() {
    let s = Scratch::create();
    let change = sysrc(&s.root, RC, "sshd_enable", Set, "YES").unwrap();
    assert_eq!(
        change,
        SysrcChange {
            name: "sshd_enable".into(),
            before: Some(String::new()),
            after: "YES".into()
        }
    );
    assert_eq!(s.read("etc/rc.conf"), "sshd_enable=\"YES\"\n");
    assert_eq!(mode(&s.root.join("etc/rc.conf")), 0o644);
    assert_eq!(mode(&s.root.join("etc")), 0o755);
}

#[test]
fn set_replaces_last_assignment_and_keeps_everything_else() {
    let before =
        "# header\r\nhostname=\"h\"\n\nsshd_enable=NO   # first\n  sshd_enable=\"NO\" # last\nzz=1";
    let s = with_rc(before);
    let change = sysrc(&s.root, RC, "sshd_enable", Set, "YES").unwrap();
    assert_eq!(change.before.as_deref(), Some("NO"));
    let expect = "# header\r\nhostname=\"h\"\n\nsshd_enable=NO   # first\n  sshd_enable=\"YES\" # last\nzz=1";
    assert_eq!(s.read("etc/rc.conf"), expect);
}

#[test]
fn set_replaces_unquoted_single_quoted_and_empty() {
    let s = with_rc("a=NO   # c\nb='x y'\nc=\nd= ;e=1\n");
    for (name, value) in [("a", "YES"), ("b", "z"), ("c", "1"), ("d", "2")] {
        sysrc(&s.root, RC, name, Set, value).unwrap();
    }
    assert_eq!(
        s.read("etc/rc.conf"),
        "a=\"YES\"   # c\nb='z'\nc=\"1\"\nd=\"2\" ;e=1\n"
    );
    // A single-quoted value that cannot stay single-quoted.
    sysrc(&s.root, RC, "b", Set, "it's").unwrap();
    assert!(s.read("etc/rc.conf").contains("b=\"it's\"\n"));
}

#[test]
fn values_are_escaped() {
    let s = Scratch::create();
    sysrc(&s.root, RC, "x", Set, r#"a "b" $c `d` \e"#).unwrap();
    assert_eq!(
        s.read("etc/rc.conf"),
        "x=\"a \\\"b\\\" \\$c \\`d\\` \\\\e\"\n"
    );
    // And read back literally for +=.
    let change = sysrc(&s.root, RC, "x", Append, "f").unwrap();
    assert_eq!(change.after, r#"a "b" $c `d` \e f"#);
    let err = sysrc(&s.root, RC, "x", Set, "two\nlines").unwrap_err();
    assert!(matches!(err, NativeError::InvalidValue { .. }), "{err}");
}

#[test]
fn append_words() {
    let s = with_rc("cloned_interfaces=\"lo1\" # keep\n");
    // Unset: the value is the word.
    sysrc(&s.root, RC, "ifaces", Append, "em0").unwrap();
    sysrc(&s.root, RC, "cloned_interfaces", Append, "lo2 lo1").unwrap();
    assert_eq!(
        s.read("etc/rc.conf"),
        "cloned_interfaces=\"lo1 lo2\" # keep\nifaces=\"em0\"\n"
    );
    // Already present: the file is not rewritten at all.
    let p = s.root.join("etc/rc.conf");
    let ino = fs::metadata(&p).unwrap().ino();
    let change = sysrc(&s.root, RC, "cloned_interfaces", Append, "lo2").unwrap();
    assert_eq!(change.after, "lo1 lo2");
    assert_eq!(fs::metadata(&p).unwrap().ino(), ino);
}

#[test]
fn append_uses_defaults_when_unset_in_file() {
    let s = Scratch::create();
    Scratch::write(
        &s.root,
        "etc/defaults/rc.conf",
        "foo_flags=\"-a\"\t# default\n",
    );
    sysrc(&s.root, RC, "foo_flags", Append, "b").unwrap();
    assert_eq!(s.read("etc/rc.conf"), "foo_flags=\"-a b\"\n");
}

#[test]
fn remove_words() {
    let s = with_rc("kld_list='a b a c'\nx=\"one\"\n");
    let change = sysrc(&s.root, RC, "kld_list", Remove, "a").unwrap();
    assert_eq!(
        (change.before.as_deref(), change.after.as_str()),
        (Some("a b a c"), "b c")
    );
    sysrc(&s.root, RC, "x", Remove, "one").unwrap();
    sysrc(&s.root, RC, "unset_var", Remove, "z").unwrap();
    assert_eq!(
        s.read("etc/rc.conf"),
        "kld_list='b c'\nx=\"\"\nunset_var=\"\"\n"
    );
}

#[test]
fn expressions_are_not_guessed() {
    let s = with_rc("x=\"$y z\"\nw=`hostname`\n");
    let err = sysrc(&s.root, RC, "x", Append, "q").unwrap_err();
    assert!(
        matches!(err, NativeError::NotLiteral { line: 1, .. }),
        "{err}"
    );
    // Set edits a double-quoted expression in place, and appends after an
    // assignment sysrc does not edit.
    sysrc(&s.root, RC, "x", Set, "v").unwrap();
    sysrc(&s.root, RC, "w", Set, "h").unwrap();
    assert_eq!(s.read("etc/rc.conf"), "x=\"v\"\nw=`hostname`\nw=\"h\"\n");
}

#[test]
fn missing_trailing_newline_and_syntax_errors() {
    let s = with_rc("a=1");
    sysrc(&s.root, RC, "b", Set, "2").unwrap();
    assert_eq!(s.read("etc/rc.conf"), "a=1\nb=\"2\"\n");
    let s = with_rc("a=\"open\n");
    let err = sysrc(&s.root, RC, "a", Set, "2").unwrap_err();
    assert!(
        err.to_string()
            .contains("/etc/rc.conf` line 1: unterminated double quote"),
        "{err}"
    );
}

#[test]
fn other_file_with_f() {
    let s = Scratch::create();
    sysrc(
        &s.root,
        "/usr/local/etc/rc.conf.d/nginx",
        "nginx_flags",
        Set,
        "-g x",
    )
    .unwrap();
    assert_eq!(
        s.read("usr/local/etc/rc.conf.d/nginx"),
        "nginx_flags=\"-g x\"\n"
    );
    assert!(!s.root.join("etc/rc.conf").exists());
}

#[test]
fn bad_names_are_refused() {
    let s = Scratch::create();
    for bad in ["bad-name", "1x", "", "a b", "x=y"] {
        let err = sysrc(&s.root, RC, bad, Set, "1").unwrap_err();
        assert!(
            matches!(err, NativeError::InvalidName { .. }),
            "{bad}: {err}"
        );
    }
    let msg = sysrc(&s.root, RC, "bad-name", Set, "1")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("`bad-name` is not a valid rc.conf variable name"),
        "{msg}"
    );
    assert!(!s.root.join("etc").exists());
}

#[test]
fn keeps_mode_and_owner_of_existing_file() {
    let s = with_rc("a=1\n");
    let p = s.root.join("etc/rc.conf");
    chmod(&p, 0o600);
    let root = lane::need(Lane::Root);
    if root {
        std::os::unix::fs::chown(&p, Some(1234), Some(4321)).unwrap();
    }
    sysrc(&s.root, RC, "a", Set, "2").unwrap();
    assert_eq!(mode(&p), 0o600);
    if root {
        let m = fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 4321));
    }
}

#[test]
fn symlinked_rc_conf_stays_inside_the_root() {
    let s = Scratch::create();
    let secret = Scratch::write(&s.outside, "passwd", "root:*:0:0\n");
    fs::create_dir_all(s.root.join("etc")).unwrap();
    // Relative, climbing far above the root, then to the real outside file.
    let climb = format!(
        "{}{}",
        "../".repeat(40),
        secret.strip_prefix("/").unwrap().display()
    );
    symlink(&climb, s.root.join("etc/rc.conf")).unwrap();
    sysrc(&s.root, RC, "a", Set, "1").unwrap();
    // Absolute, as an earlier RUN could plant it.
    symlink(&secret, s.root.join("etc/other.conf")).unwrap();
    sysrc(&s.root, "/etc/other.conf", "b", Set, "2").unwrap();

    assert_eq!(fs::read_to_string(&secret).unwrap(), "root:*:0:0\n");
    let inside = s.root.join(secret.strip_prefix("/").unwrap());
    assert_eq!(fs::read_to_string(inside).unwrap(), "a=\"1\"\nb=\"2\"\n");
    assert!(fs::symlink_metadata(s.root.join("etc/rc.conf"))
        .unwrap()
        .file_type()
        .is_symlink());
}
