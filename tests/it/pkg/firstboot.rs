//! The first-start script jbuild writes for deferred package work
//! (`pkg::firstboot`), run by a real shell: busybox's, in a chroot of a
//! throwaway root, with a stand-in `/etc/rc.subr` that does what rc.subr's
//! `run_rc_command` does for a script without `rcvar` (its `start_cmd`),
//! and `/etc/rc`'s sentinel removal after it.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use jbuild::pkg::firstboot::{self, Deferred, Reason};

use crate::support::common::static_busybox;

const RC_SUBR: &str = "load_rc_config() { :; }
run_rc_command() {
\tcase \"$1\" in
\tstart|faststart|quietstart) eval \"$start_cmd\" ;;
\t*) echo \"unexpected $1\" >&2; return 1 ;;
\tesac
}
";

fn deferred(package: &str, command: &str) -> Deferred {
    Deferred {
        package: package.into(),
        script: "post-install".into(),
        command: command.into(),
        reason: Reason::Rebuilder,
    }
}

/// rc's part for one boot: the script when the sentinel is there (as
/// rcorder leaves `firstboot` scripts out otherwise), then the sentinel
/// removed. The script's output.
fn boot(root: &Path) -> (String, String) {
    if !root.join("firstboot").exists() || !root.join(&firstboot::SCRIPT[1..]).exists() {
        return (String::new(), String::new());
    }
    let out = Command::new("/usr/sbin/chroot")
        .arg(root)
        .args([
            "/bin/sh",
            "-c",
            &format!("set faststart; . {}", firstboot::SCRIPT),
        ])
        .env_clear()
        .env("PATH", "/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    fs::remove_file(root.join("firstboot")).unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_first_start_script_runs_each_command_once_in_order_goes_on_after_a_failure_and_removes_itself(
) {
    need!(Root, Busybox);
    let bb = static_busybox().expect("the busybox lane found it");
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    fs::create_dir_all(root.join("bin")).unwrap();
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::copy(&bb, root.join("bin/busybox")).unwrap();
    for tool in ["sh", "rm", "echo", "false", "cat"] {
        symlink("busybox", root.join("bin").join(tool)).unwrap();
    }
    fs::write(root.join("etc/rc.subr"), RC_SUBR).unwrap();
    // Two PKG steps: the second's commands after the first's.
    firstboot::write(
        root,
        &[
            deferred("fontconfig-2.15.0", "echo one >> /ran"),
            deferred("broken-1", "echo two >> /ran; false"),
        ],
    )
    .unwrap();
    firstboot::write(root, &[deferred("odd-1", "echo 'it'\\''s three' >> /ran")]).unwrap();
    let (out, err) = boot(root);
    assert_eq!(
        fs::read_to_string(root.join("ran")).unwrap(),
        "one\ntwo\nit's three\n"
    );
    assert!(
        out.contains(
            "jbuild_firstboot: fontconfig-2.15.0 post-install (rebuilder): echo one >> /ran"
        ),
        "{out}"
    );
    assert!(
        err.contains("jbuild_firstboot: broken-1 post-install: exit status 1; going on"),
        "{err}"
    );
    assert!(
        !root.join(&firstboot::SCRIPT[1..]).exists(),
        "the script removed itself"
    );
    // The next start runs nothing again.
    boot(root);
    assert_eq!(
        fs::read_to_string(root.join("ran")).unwrap(),
        "one\ntwo\nit's three\n"
    );
}
