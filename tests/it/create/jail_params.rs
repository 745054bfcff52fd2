//! Jail parameters in and out of images (docs/jails.md): `JAIL` written as
//! `org.freebsd.jail.*` labels (as skopeo reads them) and, on request, as
//! manifest annotations; images other tools made (umoci) becoming jails
//! only after the user agrees to their risky parameters; `jbuild inspect`
//! showing them; and `jbuild create --bundle`'s config.json checked
//! against the runtime-spec schema with python3-jsonschema.

use crate::support::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::jailconf_reader;
use common::{jbuild, ok, run};
use serde_json::{json, Value};

/// A context for an image of a FreeBSD root made only of files (no step
/// runs, so nothing needs a FreeBSD host), with users `root` and `www`.
fn context(dir: &Path, jailfile_tail: &str) -> PathBuf {
    let ctx = dir.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("passwd"),
        "root:*:0:0:Charlie &:/root:/bin/sh\nwww:*:80:80:World Wide Web Owner:/nonexistent:/usr/sbin/nologin\n",
    )
    .unwrap();
    fs::write(
        ctx.join("group"),
        "wheel:*:0:root\nwww:*:80:\nvideo:*:44:www\n",
    )
    .unwrap();
    fs::write(
        ctx.join("Jailfile"),
        format!("FROM --platform=freebsd/amd64 scratch\nCOPY passwd group /etc/\n{jailfile_tail}"),
    )
    .unwrap();
    ctx
}

fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(c: &mut Command) -> String {
    let out = run(c);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{c:?}: {err}");
    err
}

#[test]
fn jail_lines_become_org_freebsd_jail_labels_and_on_request_annotations() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let ctx = context(
        t.path(),
        "JAIL allow.sysvipc=1 allow.raw_sockets=0 securelevel=3 sysvshm=new\n",
    );
    ok(jbuild(&state)
        .args(["build", "-t", "plain:1", "--jail-annotations"])
        .arg(&ctx));
    ok(jbuild(&state).args(["build", "-t", "quiet:1"]).arg(&ctx));
    let layout = t.path().join("layout");
    for tag in ["plain", "quiet"] {
        ok(jbuild(&state)
            .args(["export", &format!("{tag}:1")])
            .arg(format!("oci:{}:{tag}", layout.display())));
    }
    let oci = |tag: &str| format!("oci:{}:{tag}", layout.display());
    let config: Value =
        serde_json::from_str(&tool("skopeo", &["inspect", "--config", &oci("plain")])).unwrap();
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["org.freebsd.jail.allow.sysvipc"], "required",
        "{labels}"
    );
    assert_eq!(labels["org.freebsd.jail.allow.raw_sockets"], "false");
    assert_eq!(labels["org.freebsd.jail.securelevel"], "3");
    assert_eq!(labels["org.freebsd.jail.sysvshm"], "new");
    assert!(
        !labels
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("org.jbuild.jail.")),
        "{labels}"
    );
    let manifest: Value =
        serde_json::from_str(&tool("skopeo", &["inspect", "--raw", &oci("plain")])).unwrap();
    let a = &manifest["annotations"];
    assert_eq!(a["org.freebsd.jail.allow.sysvipc"], "true", "{a}");
    assert_eq!(a["org.freebsd.jail.allow.raw_sockets"], "false");
    assert_eq!(a["org.freebsd.jail.securelevel"], "3");
    let quiet: Value =
        serde_json::from_str(&tool("skopeo", &["inspect", "--raw", &oci("quiet")])).unwrap();
    assert!(
        !quiet["annotations"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("org.freebsd.jail.")),
        "annotations only when asked: {quiet}"
    );

    // inspect: the parameters, and what `create` will ask consent for.
    let text = ok(jbuild(&state).args(["inspect", "--jail", "plain:1"]));
    assert!(
        text.lines().any(|l| l.starts_with("allow.sysvipc  (org.freebsd.jail.allow.sysvipc=required)  create asks consent (--allow-jail-param allow.sysvipc)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "securelevel=3  (org.freebsd.jail.securelevel=3)"),
        "{text}"
    );
    let listed: Value = serde_json::from_str(&ok(
        jbuild(&state).args(["--json", "inspect", "--jail", "plain:1"])
    ))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 4, "{listed}");
    assert_eq!(
        listed[0],
        json!({"name": "allow.raw_sockets", "value": "0", "label": "org.freebsd.jail.allow.raw_sockets",
               "labelValue": "false", "needsConsent": null, "invalid": null})
    );
    let full: Value =
        serde_json::from_str(&ok(jbuild(&state).args(["inspect", "plain:1"]))).unwrap();
    assert_eq!(full["jailParameters"], listed);
}

#[test]
fn a_label_set_with_label_is_no_way_around_consent() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let ctx = context(
        t.path(),
        "LABEL org.freebsd.jail.allow.raw_sockets=required\n",
    );
    ok(jbuild(&state).args(["build", "-t", "base:1"]).arg(&ctx));
    // A build FROM it: its RUN steps would run with the parameter, so the
    // build asks before any step runs.
    let child = t.path().join("child");
    fs::create_dir_all(&child).unwrap();
    fs::write(child.join("Jailfile"), "FROM base:1\nRUN true\n").unwrap();
    let err = fails(jbuild(&state).args(["build", "-t", "child:1"]).arg(&child));
    assert!(
        err.contains("allow.raw_sockets (inherited from this stage's base)")
            && err.contains("--allow-jail-param allow.raw_sockets"),
        "{err}"
    );
    // And `create` asks, as for a JAIL line.
    let err = fails(
        jbuild(&state)
            .args(["create", "base:1", "app", "--path"])
            .arg(t.path().join("app"))
            .arg("--conf")
            .arg(t.path().join("app.conf")),
    );
    assert!(
        err.contains("--allow-jail-param allow.raw_sockets"),
        "{err}"
    );
}

/// umoci writes the labels, as another tool's image would carry them.
fn relabel(layout: &Path, from: &str, tag: &str, labels: &[&str]) {
    crate::support::lane::require(crate::support::lane::Lane::Umoci);
    let mut c = Command::new("umoci");
    c.args(["config", "--image"])
        .arg(format!("{}:{from}", layout.display()))
        .args(["--tag", tag]);
    for l in labels {
        c.arg(format!("--config.label={l}"));
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "umoci: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_image_another_tool_labelled_becomes_a_jail_only_after_the_user_agrees() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let ctx = context(t.path(), "CMD [\"/usr/local/bin/app\"]\n");
    ok(jbuild(&state).args(["build", "-t", "plain:1"]).arg(&ctx));
    let layout = t.path().join("layout");
    ok(jbuild(&state)
        .args(["export", "plain:1"])
        .arg(format!("oci:{}:plain", layout.display())));
    relabel(
        &layout,
        "plain",
        "mlock",
        &["org.freebsd.jail.allow.mlock=required"],
    );
    relabel(
        &layout,
        "plain",
        "old",
        &[
            "org.jbuild.jail.securelevel=2",
            "org.freebsd.jail.securelevel=3",
            "org.jbuild.jail.allow.raw_sockets=",
            "org.freebsd.jail.exec.prestart=touch /tmp/owned",
            "org.freebsd.jail.path=/",
        ],
    );
    for tag in ["mlock", "old"] {
        ok(jbuild(&state)
            .arg("import")
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("{tag}:1")));
    }
    let root = t.path().join("jails/app");
    let conf = t.path().join("jails/app.conf");
    let create = |image: &str, extra: &[&str]| {
        let mut c = jbuild(&state);
        c.args(["create", image, "app", "--path"])
            .arg(&root)
            .arg("--conf")
            .arg(&conf)
            .args(extra);
        c
    };

    // Refused, naming the parameter and how to agree; nothing written.
    let err = fails(&mut create("mlock:1", &[]));
    assert!(
        err.contains("allow.mlock (label org.freebsd.jail.allow.mlock: ")
            && err.contains("jbuild create --allow-jail-param allow.mlock"),
        "{err}"
    );
    assert!(!root.exists() && !conf.exists());
    // Agreeing to another parameter is not agreeing to this one.
    fails(&mut create(
        "mlock:1",
        &["--allow-jail-param", "allow.raw_sockets"],
    ));

    ok(&mut create(
        "mlock:1",
        &["--allow-jail-param", "allow.mlock"],
    ));
    let text = fs::read_to_string(&conf).unwrap();
    let parsed = jailconf_reader::read(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(parsed.jails.len(), 1, "{text}");
    let j = &parsed.jails[0];
    assert!(j.flag("allow.mlock"), "{text}");
    // No /bin/sh in this root: the host starts the command once the jail
    // persists (docs/create.md).
    assert!(
        j.value("exec.poststart")
            .ends_with("app /usr/local/bin/app"),
        "{text}"
    );

    // The configuration's list is consent too.
    fs::remove_dir_all(&root).unwrap();
    fs::remove_file(&conf).unwrap();
    let settings = t.path().join("jbuild.toml");
    fs::write(
        &settings,
        "[freebsd]\nallow_jail_params = [\"allow.mlock\"]\n",
    )
    .unwrap();
    ok(create("mlock:1", &[]).env("JBUILD_CONFIG", &settings));
    assert!(fs::read_to_string(&conf).unwrap().contains("allow.mlock;"));

    // Old labels are read, new ones win; commands on the host need
    // consent too, all named at once; jbuild keeps the jail's path.
    fs::remove_dir_all(&root).unwrap();
    fs::remove_file(&conf).unwrap();
    let err = fails(&mut create("old:1", &[]));
    assert!(
        err.contains("--allow-jail-param allow.raw_sockets --allow-jail-param exec.prestart"),
        "{err}"
    );
    assert!(!root.exists() && !conf.exists());
    ok(&mut create(
        "old:1",
        &[
            "--allow-jail-param",
            "allow.raw_sockets",
            "--allow-jail-param",
            "exec.prestart",
        ],
    ));
    let text = fs::read_to_string(&conf).unwrap();
    let parsed = jailconf_reader::read(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(parsed.jails.len(), 1, "{text}");
    let j = &parsed.jails[0];
    assert_eq!(j.value("securelevel"), "3", "{text}");
    assert_eq!(j.value("exec.prestart"), "touch /tmp/owned", "{text}");
    assert_eq!(j.value("path"), root.to_str().unwrap(), "{text}");
    assert!(text.contains("the image asks for path=/"), "{text}");
}

fn schema_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/schemas/runtime-spec");
    assert!(
        dir.join("config-schema.json").is_file(),
        "the runtime-spec schemas are missing from {}",
        dir.display()
    );
    dir.canonicalize().unwrap()
}

/// python3-jsonschema's verdict on `instance`: `Ok` or its complaint.
fn validate(instance: &Path) -> Result<(), String> {
    let dir = schema_dir();
    let out = Command::new("/usr/bin/python3")
        .args(["-m", "jsonschema", "--base-uri"])
        .arg(format!("file://{}/", dir.display()))
        .arg("-i")
        .arg(instance)
        .arg(dir.join("config-schema.json"))
        .output()
        .expect("python3 -m jsonschema (Debian's python3-jsonschema)");
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        _ => panic!(
            "jsonschema could not run: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
fn a_bundle_holds_the_process_and_jail_parameters_and_validates_against_the_runtime_spec() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let ctx = context(
        t.path(),
        "ENV LANG=C.UTF-8\n\
         WORKDIR /srv\n\
         USER www\n\
         ENTRYPOINT [\"/usr/local/bin/app\"]\n\
         CMD [\"--serve\"]\n\
         JAIL allow.mlock vnet enforce_statfs=1 sysvshm=new securelevel=3 allow.mount.tmpfs host.hostname=web\n",
    );
    ok(jbuild(&state).args(["build", "-t", "app:1"]).arg(&ctx));
    let dir = t.path().join("bundle");
    let err = fails(
        jbuild(&state)
            .args(["create", "app:1", "--bundle"])
            .arg(&dir),
    );
    assert!(
        err.contains("--allow-jail-param allow.mlock --allow-jail-param allow.mount.tmpfs --allow-jail-param enforce_statfs"),
        "{err}"
    );
    assert!(!dir.exists());
    ok(jbuild(&state)
        .args(["create", "app:1", "--bundle"])
        .arg(&dir)
        .args(["--allow-jail-param", "allow.mlock"])
        .args(["--allow-jail-param", "allow.mount.tmpfs"])
        .args(["--allow-jail-param", "enforce_statfs"]));
    assert!(dir.join("rootfs/etc/passwd").is_file());
    let config = dir.join("config.json");
    validate(&config).unwrap();
    let spec: Value = serde_json::from_str(&fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(spec["ociVersion"], "1.3.0");
    assert_eq!(spec["root"], json!({"path": "rootfs", "readonly": false}));
    assert_eq!(spec["hostname"], "web");
    let p = &spec["process"];
    assert_eq!(p["args"], json!(["/usr/local/bin/app", "--serve"]));
    assert_eq!(p["cwd"], "/srv");
    assert_eq!(
        p["user"],
        json!({"uid": 80, "gid": 80, "additionalGids": [44]})
    );
    assert_eq!(
        p["env"],
        json!([
            "LANG=C.UTF-8",
            "PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin",
            "HOME=/nonexistent"
        ])
    );
    assert_eq!(
        spec["mounts"],
        json!([
            {"destination": "/dev", "type": "devfs", "source": "devfs", "options": ["ruleset=4"]},
            {"destination": "/dev/fd", "type": "fdescfs", "source": "fdesc", "options": []},
        ])
    );
    assert_eq!(
        spec["freebsd"]["jail"],
        json!({"allow": {"mlock": true, "mount": ["tmpfs"]}, "vnet": "new", "enforceStatfs": 1,
               "sysvshm": "new", "host": "new"})
    );
    let a = &spec["annotations"];
    assert_eq!(a["org.freebsd.jail.securelevel"], "3", "{a}");
    assert_eq!(a["org.freebsd.jail.allow.mlock"], "true", "{a}");
    assert_eq!(a["org.freebsd.jail.vnet"], "new", "{a}");

    // The validator catches a field the schema refuses.
    for (field, bad) in [("vnet", json!("disable")), ("enforceStatfs", json!("1"))] {
        let mut broken = spec.clone();
        broken["freebsd"]["jail"][field] = bad;
        let path = t.path().join(format!("broken-{field}.json"));
        fs::write(&path, broken.to_string()).unwrap();
        assert!(validate(&path).is_err(), "{field} passed the schema");
    }

    // Not over an existing bundle.
    let err = fails(
        jbuild(&state)
            .args(["create", "app:1", "--bundle"])
            .arg(&dir)
            .args([
                "--allow-jail-param",
                "allow.mlock",
                "--allow-jail-param",
                "allow.mount.tmpfs",
            ])
            .args(["--allow-jail-param", "enforce_statfs"]),
    );
    assert!(err.contains("already exists"), "{err}");
}

/// The independent reader (tests/support/jailconf_reader.rs) reads the
/// forms jail.conf(5) shows, and refuses what jail(8) would not take.
#[test]
fn the_test_jailconf_reader_reads_the_manual_page_forms() {
    let text = r#"# global
exec.clean;
// a comment
web { /* a block
comment */
    ip4.addr = 10.1.1.1, 10.1.1.2;
    ip4.addr += 10.1.1.3;
    allow.nomount;
    exec.start = '/bin/sh /etc/rc';
    exec.stop = "echo \"it's\" \$HOME\\";
    host.hostname = web.lan;
}
"#;
    let conf = jailconf_reader::read(text).unwrap();
    assert_eq!(conf.globals.len(), 1);
    let web = conf.jail("web");
    assert_eq!(web.values("ip4.addr"), ["10.1.1.1", "10.1.1.2", "10.1.1.3"]);
    assert!(web.flag("allow.nomount"));
    assert_eq!(web.value("exec.start"), "/bin/sh /etc/rc");
    assert_eq!(web.value("exec.stop"), r#"echo "it's" $HOME\"#);
    assert_eq!(web.value("host.hostname"), "web.lan");
    for bad in [
        "web { path = /x }",
        "web { path = /x;",
        "web { exec.start = \"$HOME\"; }",
        "web { path = 'x; }",
        "}",
    ] {
        assert!(jailconf_reader::read(bad).is_err(), "{bad}");
    }
}

#[test]
fn an_image_stop_signal_is_said_in_the_entry_jail8_having_no_parameter_for_it() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let ctx = context(t.path(), "STOPSIGNAL SIGINT\n");
    ok(jbuild(&state).args(["build", "-t", "pg:1"]).arg(&ctx));
    let conf = t.path().join("pg.conf");
    ok(jbuild(&state)
        .args(["create", "pg:1", "pg", "--path"])
        .arg(t.path().join("pg"))
        .arg("--conf")
        .arg(&conf));
    let text = fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains("the image asks to be stopped with SIGINT (STOPSIGNAL)")
            && text.contains("set exec.stop"),
        "{text}"
    );
    // Nothing is written in its place.
    assert!(
        !text.contains("SIGINT;") && !text.contains("-INT"),
        "{text}"
    );
}
