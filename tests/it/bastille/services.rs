//! `SERVICE name start` and the lines after it. Bastille applies a
//! template to a live jail, so a service a line starts runs for the lines
//! that follow (the official wordpress template restarts mysql-server and
//! then runs `mysql -e "CREATE DATABASE ..."`; nextcloud starts postgresql
//! and redis, then installs with `occ`). A build keeps no process between
//! steps, so each later command step starts the service first and stops
//! it after: the start is never lost.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::{busybox_base, read, templates};
use crate::support::common::{jbuild, ok, run};

/// A stand-in for FreeBSD's service(8) on the busybox root: `NAME start`
/// runs a daemon (a `sleep` whose pid it keeps, detached from the step's
/// output as a daemon is), `NAME onestop` ends it and says so; `broken`
/// fails.
const SERVICE: &str = r#"#!/bin/sh
[ "$1" = broken ] && exit 7
mkdir -p /var/run /var/db
case "$2" in
start|restart|onestart|onerestart)
    sleep 300 </dev/null >/dev/null 2>&1 &
    echo $! > "/var/run/$1.pid" ;;
onestop)
    kill "$(cat "/var/run/$1.pid")" && rm "/var/run/$1.pid" && echo "$1" >> /var/db/stopped ;;
*) exit 1 ;;
esac
"#;

#[test]
fn a_command_after_service_start_runs_with_the_service_running() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    let dir = tmp.path().join("svc");
    fs::create_dir_all(dir.join("usr/sbin")).unwrap();
    fs::write(dir.join("usr/sbin/service"), SERVICE).unwrap();
    fs::set_permissions(
        dir.join("usr/sbin/service"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fs::write(
        dir.join("Bastillefile"),
        "CP usr /\n\
         SERVICE demo start\n\
         CMD pid=$(cat /var/run/demo.pid) && test -n \"$pid\" && kill -0 \"$pid\" && echo 'demo was running' > /var/db/demo-seen\n",
    )
    .unwrap();
    ok(jbuild(&state)
        .args(["build", "-t", "svc:1", "--from", "bb:base"])
        .arg(&dir));
    let root = tmp.path().join("jails/svc");
    ok(jbuild(&state)
        .args(["create", "svc:1", "svc", "--path"])
        .arg(&root)
        .arg("--conf")
        .arg(tmp.path().join("jails/svc.conf")));
    assert_eq!(read(&root, "/var/db/demo-seen"), "demo was running\n");
    // Stopped cleanly at the end of the step, not killed with its jail.
    assert_eq!(read(&root, "/var/db/stopped"), "demo\n");
    assert!(!root.join("var/run/demo.pid").exists());

    // A start that fails fails the step after it, saying which start.
    fs::write(
        dir.join("Bastillefile"),
        "CP usr /\nSERVICE broken start\nCMD echo never\n",
    )
    .unwrap();
    let out = run(jbuild(&state)
        .args(["build", "-t", "broken:1", "--from", "bb:base"])
        .arg(&dir));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("svc/Bastillefile:3"), "{err}");
    assert!(
        err.contains(
            "`service broken start`, started for this step by an earlier SERVICE line, failed"
        ),
        "{err}"
    );
}

#[test]
fn the_official_templates_keep_their_starts_for_the_commands_after_them() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = templates().join("corpus");
    for (template, command, starts) in [
        (
            "www/wordpress",
            "mysql -e",
            &["service nginx start", "service mysql-server restart"][..],
        ),
        (
            "www/nextcloud",
            "occ maintenance:install",
            &["service postgresql start", "service redis start"][..],
        ),
    ] {
        let out = tmp.path().join(template.replace('/', "-"));
        ok(jbuild(&tmp.path().join("state"))
            .args(["convert", "--from", "freebsd:14.3-RELEASE", "-o"])
            .arg(&out)
            .arg(corpus.join(template)));
        let text = fs::read_to_string(&out).unwrap();
        let step = text
            .lines()
            .find(|l| l.starts_with("RUN ") && l.contains(command))
            .unwrap_or_else(|| panic!("{template}: no RUN with `{command}` in\n{text}"));
        for start in starts {
            let at = step
                .find(&format!("{start} || {{"))
                .unwrap_or_else(|| panic!("{template}: `{start}` is not in {step}"));
            assert!(at < step.find(command).unwrap(), "{template}: {step}");
        }
    }
}
