//! `jbuild create` from Bastille-built images: modes, owners and links in
//! the jail root, the jail.conf entry and its quoting, a failing CMD named
//! by its Bastillefile line, and image labels that would inject into
//! jail.conf or fstab refused.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

use super::busybox_base;
use crate::support::common::{jbuild, ok, run};
use crate::support::jailconf_reader;

#[test]
fn create_copies_modes_owners_and_links_and_quotes_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    let ctx = tmp.path().join("img");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM bb:base\n\
         RUN mkdir -p /srv /data && echo x > /srv/suid && chmod 4755 /srv/suid \
         && echo w > /srv/www && chown 80:80 /srv/www && ln -s suid /srv/link && ln /srv/www /srv/hard\n\
         JAIL allow.raw_sockets host.hostname=custom.lan\n\
         VOLUME /data\n\
         EXPOSE 8080\n\
         CMD [\"/bin/echo\", \"it's\", \"$HOME \\\"q\\\"\", \"a\\\\b\"]\n",
    )
    .unwrap();
    ok(jbuild(&state).args(["build", "-t", "img:1"]).arg(&ctx));
    let conf = tmp.path().join("jail.conf");
    fs::write(
        &conf,
        "# host jails\nother { path = /jails/other; }\napp {\n  path = \"/old\";\n}\n",
    )
    .unwrap();
    let root = tmp.path().join("jails/app");
    ok(jbuild(&state)
        .args(["create", "img:1", "app", "--path"])
        .arg(&root)
        .arg("--conf")
        .arg(&conf)
        .args(["--allow-jail-param", "allow.raw_sockets"]));

    let meta = |p: &str| fs::symlink_metadata(root.join(p)).unwrap();
    assert_eq!(meta("srv/suid").permissions().mode() & 0o7777, 0o4755);
    assert_eq!((meta("srv/www").uid(), meta("srv/www").gid()), (80, 80));
    assert_eq!(
        fs::read_link(root.join("srv/link")).unwrap(),
        PathBuf::from("suid")
    );
    assert_eq!(meta("srv/hard").ino(), meta("srv/www").ino());
    assert!(root.join("bin/busybox").is_file());

    let text = fs::read_to_string(&conf).unwrap();
    assert!(
        text.starts_with("# host jails\nother { path = /jails/other; }\n"),
        "{text}"
    );
    let parsed = jailconf_reader::read(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(parsed.jails.len(), 2, "{text}");
    assert_eq!(parsed.jail("other").value("path"), "/jails/other");
    let app = parsed.jail("app");
    assert_eq!(parsed.jails[1].name, "app");
    assert_eq!(app.value("path"), root.to_str().unwrap());
    assert_eq!(app.value("host.hostname"), "custom.lan");
    assert!(app.flag("allow.raw_sockets"), "{text}");
    // exec.start runs through /bin/sh -c, in the background (create::start):
    // splitting it gives the argv back.
    let start = app.value("exec.start");
    let start = start.strip_suffix(" &").expect("started in the background");
    assert_eq!(
        shlex::split(start).unwrap(),
        ["/bin/echo", "it's", "$HOME \"q\"", "a\\b"],
        "{start}"
    );
    assert!(text.contains("VOLUME /data"), "{text}");
    assert!(text.contains("EXPOSE 8080/tcp"), "{text}");

    // Again: the root is there, so nothing is overwritten.
    let out = run(jbuild(&state)
        .args(["create", "img:1", "app", "--path"])
        .arg(&root)
        .arg("--conf")
        .arg(&conf)
        .args(["--allow-jail-param", "allow.raw_sockets"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert_eq!(fs::read_to_string(&conf).unwrap(), text);
    // A name jail(8) would not take.
    let out = run(jbuild(&state)
        .args(["create", "img:1", "bad/name", "--path"])
        .arg(tmp.path().join("x"))
        .arg("--conf")
        .arg(tmp.path().join("x.conf")));
    assert_eq!(out.status.code(), Some(1));
    assert!(!tmp.path().join("x").exists());
}

#[test]
fn a_failing_cmd_names_the_bastillefile_line() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    let dir = tmp.path().join("fails");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("Bastillefile"),
        "SYSRC a=1\n# then\nCMD echo about to fail && exit 3\n",
    )
    .unwrap();
    let out = run(jbuild(&state)
        .args(["build", "-t", "fails", "--from", "bb:base"])
        .arg(&dir));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("fails/Bastillefile:3"), "{err}");
    assert!(err.contains("exit") && err.contains('3'), "{err}");
    // Nothing was tagged.
    let images = ok(jbuild(&state).arg("images"));
    assert!(!images.contains("fails"), "{images}");
}

#[test]
fn create_refuses_image_labels_that_would_inject_into_jail_conf_or_fstab() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    crate::support::lane::require(crate::support::lane::Lane::Umoci);
    // Images a registry could serve: jbuild's own LABEL checks would refuse
    // these, so umoci writes their configs.
    let ctx = tmp.path().join("plain");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM bb:base
LABEL a=b
",
    )
    .unwrap();
    ok(jbuild(&state).args(["build", "-t", "plain:1"]).arg(&ctx));
    let layout = tmp.path().join("layout");
    ok(jbuild(&state)
        .args(["export", "plain:1"])
        .arg(format!("oci:{}:plain", layout.display())));
    let cases: [(&str, &[&str], &str); 4] = [
        (
            "param",
            &["--config.label=org.jbuild.jail.x; exec.prestart=rm -rf /"],
            "not a jail parameter name",
        ),
        (
            "fstab",
            &[
                "--config.volume=/mnt",
                "--config.label=org.jbuild.fstab./mnt=/ /../../etc nullfs rw 0 0",
            ],
            "inside the jail",
        ),
        (
            "volume",
            &[
                "--config.volume=/../x",
                "--config.label=org.jbuild.fstab./../x=/ /../x nullfs rw 0 0",
            ],
            "inside the jail",
        ),
        (
            "rctl",
            &["--config.label=org.jbuild.rctl.memoryuse=1G/jail\njail:x:maxproc:deny=1"],
            "rctl limit",
        ),
    ];
    for (name, umoci_args, words) in cases {
        let out = std::process::Command::new("umoci")
            .args(["config", "--image"])
            .arg(format!("{}:plain", layout.display()))
            .arg("--tag")
            .arg(name)
            .args(umoci_args.iter().map(|a| a.replace("\\n", "\n")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "umoci: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ok(jbuild(&state)
            .arg("import")
            .arg(format!("oci:{}:{name}", layout.display()))
            .arg(format!("{name}:1")));
        let root = tmp.path().join("jails").join(name);
        let conf = tmp.path().join("jails").join(format!("{name}.conf"));
        let out = run(jbuild(&state)
            .args(["create", &format!("{name}:1"), name, "--bastille", "--path"])
            .arg(&root)
            .arg("--conf")
            .arg(&conf));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(words), "{name}: {err}");
        assert!(
            !root.exists() && !conf.exists(),
            "{name}: something was written"
        );
    }
    // Blanks in the root are escaped in fstab(5).
    let ctx = tmp.path().join("blank");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM bb:base\nVOLUME /data\nLABEL 'org.jbuild.fstab./data'='/tank/d /data nullfs ro 0 0'\n",
    )
    .unwrap();
    ok(jbuild(&state).args(["build", "-t", "blank:1"]).arg(&ctx));
    let root = tmp.path().join("my jails/blank");
    let conf = tmp.path().join("my jails/blank.conf");
    // A host path mounted into the jail is the user's to agree to.
    let out = jbuild(&state)
        .args(["create", "blank:1", "blank", "--path"])
        .arg(&root)
        .arg("--conf")
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("label org.jbuild.fstab./data: it mounts a host path into the jail")
            && err.contains("--allow-jail-param mount.fstab"),
        "{err}"
    );
    assert!(!root.exists() && !conf.exists());
    ok(jbuild(&state)
        .args(["create", "blank:1", "blank", "--path"])
        .arg(&root)
        .arg("--conf")
        .arg(&conf)
        .args(["--allow-jail-param", "mount.fstab"]));
    let fstab = fs::read_to_string(tmp.path().join("my jails/blank.fstab")).unwrap();
    let want = format!(
        "/tank/d {}/data nullfs ro 0 0\n",
        root.to_str().unwrap().replace(' ', "\\040")
    );
    assert_eq!(fstab, want);
}
