//! Scripts that try to leave the root or to run forever: nothing outside
//! the root is touched, and each bound stops the script with an error
//! naming it and the line.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::super::{parse, run, CommandError, Env, Limits, Ran, ScriptError};
use super::Recorder;

/// A root and, beside it, a directory standing for the host's files.
struct Place {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("victim"), "host file\n").unwrap();
    fs::set_permissions(outside.join("victim"), fs::Permissions::from_mode(0o600)).unwrap();
    // Links in the image pointing at the host's path, absolutely and
    // relatively.
    std::os::unix::fs::symlink(&outside, root.join("abs")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("rel")).unwrap();
    std::os::unix::fs::symlink("../../../../../../..", root.join("up")).unwrap();
    Place {
        _dir: dir,
        root,
        outside,
    }
}

fn go(root: &Path, text: &str) -> Result<Ran, ScriptError> {
    run(
        root,
        &parse(text).unwrap(),
        &Env::default(),
        &mut Recorder::default(),
        &Limits::default(),
    )
}

/// The host side is as it was: one file, its content and mode.
fn untouched(p: &Place) {
    let names: Vec<_> = fs::read_dir(&p.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("victim")]);
    assert_eq!(
        fs::read_to_string(p.outside.join("victim")).unwrap(),
        "host file\n"
    );
    let mode = fs::metadata(p.outside.join("victim"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600);
}

#[test]
fn redirections_stay_in_the_root() {
    let p = place();
    let outside = p.outside.display();
    let text = format!(
        "echo a > /../../outside/new\necho b >> ../outside/victim\necho c > /abs/victim\necho d >> /rel/victim\necho e > {outside}/victim\necho f >> /up/outside/victim\ncat < /abs/victim || echo unreadable\n"
    );
    // The host's path exists in the image too: what goes through the
    // absolute link lands there.
    fs::create_dir_all(p.root.join(p.outside.strip_prefix("/").unwrap())).unwrap();
    fs::create_dir_all(p.root.join("outside")).unwrap();
    let ran = go(&p.root, &text).unwrap();
    untouched(&p);
    // `..` stops at the root; the links are followed as the jail would.
    assert_eq!(
        fs::read_to_string(p.root.join("outside/new")).unwrap(),
        "a\n"
    );
    assert_eq!(
        fs::read_to_string(p.root.join("outside/victim")).unwrap(),
        "b\nd\nf\n"
    );
    let abs_in_root = p.root.join(p.outside.strip_prefix("/").unwrap());
    assert_eq!(
        fs::read_to_string(abs_in_root.join("victim")).unwrap(),
        "e\n"
    );
    // Reading through the link reads the image's file, not the host's.
    assert_eq!(String::from_utf8(ran.stdout).unwrap(), "e\n");
}

#[test]
fn cd_stays_in_the_root() {
    let p = place();
    let ran = go(&p.root, "cd ../../../..; pwd; echo x > here; cd /abs 2>/dev/null || echo nodir; cd /rel 2>/dev/null || echo nodir; cd /up; pwd").unwrap();
    assert_eq!(
        String::from_utf8(ran.stdout).unwrap(),
        "/\nnodir\nnodir\n/up\n"
    );
    assert!(p.root.join("here").exists());
    untouched(&p);
}

#[test]
fn ln_then_write_stays_in_the_root() {
    let p = place();
    let outside = p.outside.display();
    let text = format!(
        "ln -s {outside}/victim /l1\necho x > /l1\nln -s ../../outside/victim /l2\necho y > /l2\nln -sf /etc /l3\necho z > /l3/passwd\nln {outside}/victim /hard\n"
    );
    fs::create_dir_all(p.root.join(p.outside.strip_prefix("/").unwrap())).unwrap();
    fs::create_dir_all(p.root.join("outside")).unwrap();
    let ran = go(&p.root, &text).unwrap();
    untouched(&p);
    let abs_in_root = p.root.join(p.outside.strip_prefix("/").unwrap());
    assert_eq!(
        fs::read_to_string(abs_in_root.join("victim")).unwrap(),
        "x\n"
    );
    assert_eq!(
        fs::read_to_string(p.root.join("outside/victim")).unwrap(),
        "y\n"
    );
    assert_eq!(
        fs::read_to_string(p.root.join("etc/passwd")).unwrap(),
        "z\n"
    );
    // The hard link is to the image's file of that name.
    assert_eq!(fs::read_to_string(p.root.join("hard")).unwrap(), "x\n");
    assert!(
        ran.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
}

#[test]
fn rm_r_chmod_chown_cp_install_stay_in_the_root() {
    let p = place();
    let outside = p.outside.display();
    let text = format!(
        "rm -rf /abs/victim /rel/victim /up/outside/victim {outside}/victim\nrm -rf /abs /rel /up\n\
         chmod 777 {outside}/victim; chown -R 12:12 {outside}; chgrp 5 {outside}/victim\n\
         cp {outside}/victim /stolen; install -m 644 {outside}/victim /stolen2\n\
         install -d -m 700 {outside}/made; mkdir -p {outside}/made2; touch {outside}/t; mv {outside}/victim /moved\n\
         rm -rf /\necho done\n"
    );
    let ran = go(&p.root, &text).unwrap();
    untouched(&p);
    assert!(!p.root.join("abs").exists() && p.root.join("etc").exists());
    assert!(!p.root.join("stolen").exists() && !p.root.join("stolen2").exists());
    let err = String::from_utf8(ran.stderr).unwrap();
    assert!(err.contains("rm: \"/\" may not be removed"), "{err}");
    assert!(err.contains("cp: "), "{err}");
    assert_eq!(String::from_utf8(ran.stdout).unwrap(), "done\n");
}

#[test]
fn globs_stay_in_the_root() {
    let p = place();
    fs::write(p.root.join("etc/a.conf"), "").unwrap();
    fs::write(p.root.join("etc/b.conf"), "").unwrap();
    fs::write(p.root.join("etc/.hidden.conf"), "").unwrap();
    let outside = p.outside.display();
    let text = format!(
        "echo /etc/*.conf\necho ../../../etc/*.conf\necho /abs/* /rel/*\necho {outside}/*\necho /up/e*\ncd /etc; echo *.conf ../e*\necho '/etc/*' \"/etc/*\" /etc/\\*\n"
    );
    let ran = go(&p.root, &text).unwrap();
    let abs_in_root = p.root.join(p.outside.strip_prefix("/").unwrap());
    assert!(!abs_in_root.exists());
    assert_eq!(
        String::from_utf8(ran.stdout).unwrap(),
        format!(
            "/etc/a.conf /etc/b.conf\n../../../etc/a.conf ../../../etc/b.conf\n/abs/* /rel/*\n{outside}/*\n/up/etc\na.conf b.conf ../etc\n/etc/* /etc/* /etc/*\n"
        )
    );
    untouched(&p);
}

fn limited(text: &str, limits: Limits) -> ScriptError {
    let dir = tempfile::tempdir().unwrap();
    run(
        dir.path(),
        &parse(text).unwrap(),
        &Env::default(),
        &mut Recorder::default(),
        &limits,
    )
    .unwrap_err()
}

#[test]
fn endless_loop_stops() {
    let e = limited("echo start\nwhile :; do\n  :\ndone\n", Limits::default());
    assert!(matches!(&e, ScriptError::Limit { line: 2, .. }), "{e:?}");
    assert!(e.to_string().contains("100000 loop iterations"), "{e}");
    let e = limited(
        "for i in 1 2 3; do echo $i; done",
        Limits {
            loop_iterations: 2,
            ..Limits::default()
        },
    );
    assert!(matches!(e, ScriptError::Limit { .. }), "{e:?}");
}

#[test]
fn deep_recursion_stops() {
    let e = limited("f() {\n  f\n}\nf\n", Limits::default());
    assert!(e.to_string().contains("64 nested calls"), "{e}");
    let e = limited("X='eval \"$X\"'; eval \"$X\"", Limits::default());
    assert!(e.to_string().contains("nested calls"), "{e}");
    let e = limited("f() { echo $(f); }; f", Limits::default());
    assert!(e.to_string().contains("nested calls"), "{e}");
}

#[test]
fn huge_output_stops() {
    let limits = Limits {
        output_bytes: 1000,
        ..Limits::default()
    };
    let e = limited("while :; do echo 0123456789; done", limits.clone());
    assert!(e.to_string().contains("1000 bytes of output"), "{e}");
    let e = limited("while :; do echo 0123456789 >> /f; done", limits);
    assert!(e.to_string().contains("1000 bytes written to files"), "{e}");
}

#[test]
fn huge_variable_stops() {
    let e = limited("X=x\nwhile :; do\n  X=$X$X\ndone\n", Limits::default());
    assert!(matches!(&e, ScriptError::Limit { line: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("1048576 bytes"), "{e}");
}

#[test]
fn huge_variable_from_input_or_in_total_stops() {
    // `read` sets a variable without expanding a word: the variable's own
    // bound stops it.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("big"), "x".repeat(2 << 20)).unwrap();
    let e = go(dir.path(), "read X < /big").unwrap_err();
    assert!(e.to_string().contains("1048576 bytes in one variable (`X`)"), "{e}");
    // Many variables below the bound each, over ten times it together.
    let e = limited(
        "X=x; i=0; while [ $i -lt 19 ]; do X=$X$X; i=$((i+1)); done\nwhile :; do eval \"V$i=\\$X\"; i=$((i+1)); done\n",
        Limits::default(),
    );
    assert!(e.to_string().contains("10485760 bytes in all variables"), "{e}");
}

#[test]
fn growing_arguments_stop() {
    let e = limited("set -- a\nwhile :; do\n  set -- \"$@\" \"$@\"\ndone\n", Limits::default());
    assert!(matches!(&e, ScriptError::Limit { line: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("bytes in one command's words"), "{e}");
}

#[test]
fn too_many_commands_stop() {
    let e = limited(
        "while :; do :; done",
        Limits {
            commands: 50,
            ..Limits::default()
        },
    );
    assert!(e.to_string().contains("50 commands run"), "{e}");
}

#[test]
fn unknown_and_unsupported_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let e = go(dir.path(), "echo ok\nfrobnicate --now\n").unwrap_err();
    assert!(
        matches!(&e, ScriptError::Command { command, line: 2, source: CommandError::Unknown { .. } } if command == "frobnicate"),
        "{e:?}"
    );
    for (text, what) in [
        ("true\nsleep 1 &\n", "background job"),
        ("\ntrap 'rm -f /x' EXIT\n", "`trap`"),
        ("\nexec /bin/sh\n", "`exec`"),
        ("\n. /etc/rc.subr\n", "`.`"),
        ("\n[[ -n x ]]\n", "[["),
        ("\necho ${X/a/b}\n", "${X/pattern/string}"),
    ] {
        let e = go(dir.path(), text).unwrap_err();
        assert!(
            matches!(&e, ScriptError::Unsupported { line: 2, .. }),
            "{text}: {e:?}"
        );
        assert!(e.to_string().contains(what), "{e}");
    }
}

#[test]
fn parse_errors_name_the_line() {
    let e = parse("echo a\nif true; then\n  echo b\n").unwrap_err();
    assert!(matches!(e, ScriptError::Parse { .. }), "{e:?}");
    assert!(e.to_string().starts_with("line 3:"), "{e}");
    let e = parse("echo a\necho b )\n").unwrap_err();
    assert!(e.to_string().starts_with("line 2:"), "{e}");
}
