//! Bastille templates end to end: the templates under tests/data/bastille
//! convert, plan, and (those whose steps run on Linux) build on the `dir`
//! backend from a busybox base; `jbuild convert`'s Jailfile plans to the
//! same cache keys; malformed templates give file:line:col errors; and
//! `jbuild create` makes the jail root and a jail.conf entry.

use crate::support::common;
/// The corpus of templates in the BastilleBSD/templates layout.
mod corpus;
/// `jbuild create` of Bastille-built images.
mod create;
/// The template's place on the host never reaches the image.
mod paths;
/// SERVICE start and the steps after it.
mod services;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::jailconf_reader;
use common::{copy_tree, jbuild, ok, repo, run, static_busybox};
use jbuild::bastille::{self, Options};
use jbuild::digest::Digest;
use jbuild::image::Platform;
use jbuild::jailfile::{self, Build, CopySource};
use jbuild::plan::{self, BaseImage, InputError, InputSource, PlanOptions, StepKind};

fn templates() -> PathBuf {
    repo().join("tests/data/bastille")
}

/// Every template that should convert, with the arg file it uses.
const TEMPLATES: &[&str] = &[
    "nginx",
    "postgres",
    "redis",
    "webapp",
    "webbase",
    "php",
    "wordpress",
    "rcconf",
    "ports",
    "overlay",
    "jailmeta",
    "legacy",
    "minecraft",
];

/// The ones made only of steps that run on Linux (no PKG).
const BUILDABLE: &[&str] = &[
    "webapp",
    "wordpress",
    "rcconf",
    "overlay",
    "jailmeta",
    "legacy",
];

fn arg_file(dir: &Path) -> Option<PathBuf> {
    let p = dir.join("args.env");
    p.is_file().then_some(p)
}

struct Inputs {
    context: PathBuf,
}

impl InputSource for Inputs {
    fn image(&self, reference: &str, _: &Platform) -> Result<BaseImage, InputError> {
        Err(InputError::user(format!(
            "no image `{reference}` in this test"
        )))
    }
    fn context_sources(&self, sources: &[CopySource]) -> Result<Digest, InputError> {
        jbuild::engine::native::sources_digest(&self.context, sources, None)
            .map_err(InputError::user)
    }
    /// Planning only: a release's base set stands for the same digest in
    /// both plans compared (the bootstrap itself is tested in
    /// tests/it/release/mod.rs).
    fn release(&self, release: &str, _: &Platform) -> Result<Vec<(String, Digest)>, InputError> {
        Ok(vec![(
            "base.txz".into(),
            Digest::of(format!("base.txz of {release}").as_bytes()),
        )])
    }
}

fn layer_keys(build: &Build, context: &Path) -> Vec<String> {
    let inputs = Inputs {
        context: context.to_path_buf(),
    };
    let opts = PlanOptions::default();
    let gathered = plan::Inputs::gather(build, &opts, &inputs);
    let p = plan::plan(build, &gathered, &opts).expect("plans");
    p.stages
        .iter()
        .flat_map(|s| s.steps.iter())
        .filter_map(|s| match &s.kind {
            StepKind::Layer { key, .. } => Some(key.to_string()),
            StepKind::Metadata => None,
        })
        .collect()
}

#[test]
fn every_template_converts_plans_and_its_printed_jailfile_plans_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    for name in TEMPLATES {
        let dir = templates().join(name);
        let opts = Options {
            from: "freebsd:14.3-RELEASE".into(),
            arg_file: arg_file(&dir),
            ..Default::default()
        };
        let converted = bastille::convert(&dir, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        let build = converted.load().unwrap_or_else(|e| panic!("{name}: {e}"));
        let direct = layer_keys(&build, &converted.context);
        assert!(!direct.is_empty(), "{name}: no layer steps");

        // The CLI prints the same text; parsed from a file, it plans to the
        // same keys.
        let out = tmp.path().join(format!("{name}.Jailfile"));
        let mut c = jbuild(&tmp.path().join("state"));
        c.args(["convert", "--from", "freebsd:14.3-RELEASE", "-o"])
            .arg(&out)
            .arg(&dir);
        if let Some(a) = arg_file(&dir) {
            c.arg("--arg-file").arg(a);
        }
        ok(&mut c);
        let printed = fs::read_to_string(&out).unwrap();
        assert_eq!(printed, converted.jailfile, "{name}");
        let reparsed =
            jailfile::load(&out, &BTreeMap::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(layer_keys(&reparsed, &converted.context), direct, "{name}");
    }
}

#[test]
fn an_arg_changes_the_keys_of_the_steps_that_use_it() {
    let dir = templates().join("webapp");
    let keys = |port: &str| {
        let mut opts = Options {
            from: "freebsd:14.3-RELEASE".into(),
            arg_file: arg_file(&dir),
            ..Default::default()
        };
        opts.args.insert("APP_PORT".into(), port.into());
        let c = bastille::convert(&dir, &opts).unwrap();
        layer_keys(&c.load().unwrap(), &c.context)
    };
    let (a, b) = (keys("8080"), keys("9090"));
    assert_eq!(a.len(), b.len());
    // CP usr / and CP etc/motd come before anything reads APP_PORT.
    assert_eq!(a[..2], b[..2]);
    assert_ne!(a.last(), b.last());
}

/// (file, line, column, words the message must have)
const MALFORMED: &[(&str, u32, u32, &str)] = &[
    (
        "malformed/no-value.Bastillefile",
        2,
        7,
        "does not assign a value",
    ),
    ("malformed/bad-port.Bastillefile", 2, 17, "not a port"),
    ("malformed/host-path.Bastillefile", 1, 4, "path on the host"),
    ("malformed/typo.Bastillefile", 1, 3, "did you mean `PKG`"),
    ("malformed/quote.Bastillefile", 1, 5, "unbalanced quote"),
    (
        "malformed/remote-include.Bastillefile",
        1,
        9,
        "fetch it first",
    ),
    ("malformed/option-late.Bastillefile", 2, 24, "options first"),
];

#[test]
fn malformed_templates_fail_with_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    for (path, line, col, words) in MALFORMED {
        let p = templates().join(path);
        let out = run(jbuild(tmp.path())
            .args(["convert", "--from", "freebsd:14.3-RELEASE"])
            .arg(&p));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        let file = if p.is_dir() {
            "Bastillefile".to_string()
        } else {
            path.to_string()
        };
        let at = format!("{file}:{line}:{col}");
        assert!(err.contains(&at), "{path}: want {at} in\n{err}");
        assert!(err.contains(words), "{path}: want `{words}` in\n{err}");
        assert!(err.contains('^'), "{path}: no caret in\n{err}");
        // The build path says the same.
        let mut c = jbuild(tmp.path());
        c.args(["build", "--from", "freebsd:14.3-RELEASE"]);
        if p.is_dir() {
            c.arg(&p);
        } else {
            c.arg("-f").arg(&p).arg(p.parent().unwrap());
        }
        let out = run(&mut c);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        assert!(err.contains(&at), "{path}: want {at} in\n{err}");
    }
}

/// A state root with `bb:base`: busybox-static installed into a scratch
/// image, root's passwd and group, and the directories templates write to.
/// The jailmeta template's CONFIG lines weaken the jail: `create` makes it
/// only with the user's consent (docs/jails.md).
const JAILMETA_CONSENT: &[&str] = &[
    "--allow-jail-param",
    "allow.mlock",
    "--allow-jail-param",
    "enforce_statfs",
    "--allow-jail-param",
    "allow.mount.procfs",
    "--allow-jail-param",
    "mount.fstab",
];

/// Needs root and busybox-static (tests/run installs it): a test fails
/// without them rather than passing without running.
fn busybox_base(tmp: &Path) -> PathBuf {
    // These tests build jails.
    crate::support::lane::require(crate::support::lane::Lane::Root);
    crate::support::lane::require(crate::support::lane::Lane::Busybox);
    let bb = static_busybox().expect("the busybox lane found it");
    let ctx = tmp.join("bb");
    fs::create_dir_all(&ctx).unwrap();
    fs::copy(bb, ctx.join("busybox")).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\n\
         COPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
         RUN mkdir -p /etc /tmp /var/db /usr/local/etc && echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd \
         && echo 'www:x:80:80:www:/var/www:/bin/sh' >> /etc/passwd && echo 'root:x:0:' > /etc/group \
         && echo 'www:x:80:' >> /etc/group\n",
    )
    .unwrap();
    let state = tmp.join("state");
    ok(jbuild(&state).args(["build", "-t", "bb:base"]).arg(&ctx));
    state
}

fn read(root: &Path, p: &str) -> String {
    fs::read_to_string(root.join(p.trim_start_matches('/')))
        .unwrap_or_else(|e| panic!("{p} in {}: {e}", root.display()))
}

fn has_lines(text: &str, lines: &[&str]) {
    for l in lines {
        assert!(text.lines().any(|x| x == *l), "no line `{l}` in:\n{text}");
    }
}

#[test]
fn buildable_templates_build_on_busybox_and_create_makes_their_jails() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    // A copy, so modes git does not keep can be set.
    let tpl = tmp.path().join("templates");
    copy_tree(&templates(), &tpl);
    fs::set_permissions(
        tpl.join("overlay/usr/local/etc/app/main.conf"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let mut roots = BTreeMap::new();
    for name in BUILDABLE {
        let dir = tpl.join(name);
        let mut c = jbuild(&state);
        c.args(["build", "-t", &format!("{name}:1"), "--from", "bb:base"])
            .arg(&dir);
        if let Some(a) = arg_file(&dir) {
            c.arg("--arg-file").arg(a);
        }
        ok(&mut c);
        let root = tmp.path().join("jails").join(name);
        let conf = tmp.path().join("jails").join(format!("{name}.conf"));
        ok(jbuild(&state)
            .args(["create", &format!("{name}:1"), name, "--path"])
            .arg(&root)
            .arg("--conf")
            .arg(&conf)
            .args(JAILMETA_CONSENT));
        let text = fs::read_to_string(&conf).unwrap();
        let parsed = jailconf_reader::read(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
        assert_eq!(parsed.jails.len(), 1, "{text}");
        assert_eq!(parsed.jail(name).value("path"), root.to_str().unwrap());
        roots.insert(*name, (root, parsed));
    }

    let (r, _) = &roots["webapp"];
    assert_eq!(
        read(r, "/usr/local/etc/app/app.conf"),
        "name = shop\nlisten = 0.0.0.0:8080\nsecret = s3cr3t\nhome = ${HOME}\n"
    );
    assert_eq!(
        read(r, "/usr/local/etc/app/logging.conf"),
        "log_level = info\n"
    );
    assert_eq!(read(r, "/etc/motd"), "Welcome to the app jail\n");
    has_lines(
        &read(r, "/etc/rc.conf"),
        &[
            "shop_enable=\"YES\"",
            "shop_flags=\"--listen 0.0.0.0:8080\"",
        ],
    );
    has_lines(&read(r, "/etc/hosts"), &["127.0.0.1 shop.local"]);
    assert_eq!(read(r, "/var/db/shop/README"), "created by CMD\n");

    let (r, parsed) = &roots["wordpress"];
    assert_eq!(read(r, "/etc/resolv.conf"), "nameserver 9.9.9.9\n");
    let www = read(r, "/usr/local/etc/php-fpm.d/www.conf");
    has_lines(&www, &["listen = 127.0.0.1:9001", "; php83"]);
    let wp = read(r, "/usr/local/www/wordpress/wp-config.php");
    has_lines(
        &wp,
        &[
            "define('DB_NAME', 'wordpress');",
            "define('DB_HOST', 'db.local');",
            "// php 83",
        ],
    );
    has_lines(&read(r, "/etc/motd"), &["php_version=83"]);
    has_lines(
        &read(r, "/etc/rc.conf"),
        &[
            "syslogd_flags=\"-ss\"",
            "sendmail_enable=\"NONE\"",
            "php_fpm_enable=\"YES\"",
            "nginx_enable=\"YES\"",
        ],
    );
    assert_eq!(parsed.jails[0].name, "wordpress");

    let (r, _) = &roots["rcconf"];
    has_lines(
        &read(r, "/etc/rc.conf"),
        &[
            "hostname=\"builder.local\"",
            "ifconfig_lo1=\"inet 127.0.1.1/24\"",
            "sshd_enable=\"YES\"",
            "sendmail_enable=\"NONE\"",
        ],
    );
    has_lines(
        &read(r, "/etc/rc.conf.local"),
        &["cloned_interfaces=\"lo1\""],
    );

    let (r, _) = &roots["overlay"];
    let mode = |p: &str| {
        fs::symlink_metadata(r.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("etc/periodic/daily/999.cleanup"), 0o755);
    assert_eq!(mode("usr/local/bin/hello"), 0o755);
    assert_eq!(mode("usr/local/etc/app/main.conf"), 0o600);
    assert_eq!(
        fs::read_link(r.join("usr/local/etc/app/current.conf")).unwrap(),
        PathBuf::from("main.conf")
    );
    assert_eq!(read(r, "/usr/local/etc/app/conf.d/a.conf"), "a = 1\n");
    assert_eq!(read(r, "/opt/app-defaults/main.conf"), "main = yes\n");
    assert_eq!(read(r, "/opt/app-defaults/conf.d/a.conf"), "a = 1\n");
    // busybox from the base is still there under the overlay.
    assert!(r.join("bin/busybox").is_file());

    let (r, parsed) = &roots["jailmeta"];
    has_lines(&read(r, "/etc/jail-meta"), &["meta=yes"]);
    let j = parsed.jail("jailmeta");
    assert!(j.flag("allow.mlock"), "{j:?}");
    assert_eq!(j.value("enforce_statfs"), "1");
    assert!(j.flag("allow.mount.procfs"), "{j:?}");
    let fstab = PathBuf::from(j.value("mount.fstab"));
    let root = r.to_str().unwrap();
    has_lines(
        &fs::read_to_string(&fstab).unwrap(),
        &[
            &format!("/tank/data/www {root}/usr/local/www nullfs rw 0 0"),
            &format!("/tank/logs {root}/var/log/app nullfs ro 0 0"),
        ],
    );

    let (r, _) = &roots["legacy"];
    assert_eq!(read(r, "/etc/legacy.txt"), "one\ntwo\n");
    assert_eq!(read(r, "/usr/local/etc/legacy.conf"), "say hello\n");
    has_lines(
        &read(r, "/etc/rc.conf"),
        &["legacy_enable=\"YES\"", "legacy_flags=\"-v\""],
    );

    // Bastille's layout, with the LIMITS as rctl rules.
    let prefix = tmp.path().join("bastille");
    let dir = prefix.join("jails/meta");
    ok(jbuild(&state)
        .args(["create", "jailmeta:1", "meta", "--bastille", "--path"])
        .arg(dir.join("root"))
        .arg("--conf")
        .arg(dir.join("jail.conf"))
        .args(JAILMETA_CONSENT));
    assert!(dir.join("root/etc/jail-meta").is_file());
    // Written the way Bastille writes (and its tools grep) jail.conf.
    let text = fs::read_to_string(dir.join("jail.conf")).unwrap();
    for want in [
        format!("path = {};", dir.join("root").display()),
        format!("mount.fstab = {};", dir.join("fstab").display()),
        "exec.start = '/bin/sh /etc/rc';".to_string(),
        "host.hostname = meta;".to_string(),
    ] {
        assert!(text.contains(&want), "no `{want}` in\n{text}");
    }
    let conf = jailconf_reader::read(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(conf.jails.len(), 1, "{text}");
    let j = &conf.jails[0];
    assert_eq!(j.value("path"), dir.join("root").to_str().unwrap());
    assert_eq!(j.value("mount.fstab"), dir.join("fstab").to_str().unwrap());
    assert_eq!(j.value("devfs_ruleset"), "4");
    has_lines(
        &fs::read_to_string(dir.join("rctl.conf")).unwrap(),
        &[
            "jail:meta:memoryuse:deny=1G/jail",
            "jail:meta:maxproc:deny=200/jail",
        ],
    );
}

#[test]
fn the_printed_jailfile_rebuilds_the_template_entirely_from_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    let dir = tmp.path().join("webapp");
    copy_tree(&templates().join("webapp"), &dir);
    let args = ["--from", "bb:base", "--arg-file"];
    let direct = ok(jbuild(&state)
        .arg("--json")
        .arg("build")
        .args(args)
        .arg(dir.join("args.env"))
        .arg(&dir));
    let result = |out: &str| -> serde_json::Value {
        out.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["event"] == "result")
            .expect("a result event")
    };
    assert!(result(&direct)["steps_run"].as_u64().unwrap() > 0);
    let jf = tmp.path().join("webapp.Jailfile");
    ok(jbuild(&state)
        .arg("convert")
        .args(args)
        .arg(dir.join("args.env"))
        .arg("-o")
        .arg(&jf)
        .arg(&dir));
    let again = ok(jbuild(&state)
        .arg("--json")
        .args(["build", "-f"])
        .arg(&jf)
        .arg(&dir));
    let r = result(&again);
    assert_eq!(r["steps_run"], 0, "{again}");
    assert!(r["steps_cached"].as_u64().unwrap() >= 6, "{again}");

    // Converted with no values, the Jailfile keeps its ARGs: the template's
    // values as --build-arg rebuild it from the same cache.
    let plain = tmp.path().join("webapp.plain.Jailfile");
    ok(jbuild(&state)
        .args(["convert", "--from", "bb:base", "-o"])
        .arg(&plain)
        .arg(&dir));
    let text = fs::read_to_string(&plain).unwrap();
    for want in [
        "ARG APP_NAME=hello\n",
        "ARG APP_SECRET=\"${APP_SECRET:?is a required ARG: give --build-arg APP_SECRET=VALUE}\"\n",
        "ARG LISTEN=0.0.0.0:${APP_PORT}\n",
        "SYSRC ${APP_NAME}_enable=YES\n",
    ] {
        assert!(text.contains(want), "no `{want}` in\n{text}");
    }
    let with_args = ok(jbuild(&state)
        .arg("--json")
        .args([
            "build",
            "--build-arg",
            "APP_NAME=shop",
            "--build-arg",
            "APP_SECRET=s3cr3t",
            "-f",
        ])
        .arg(&plain)
        .arg(&dir));
    let r = result(&with_args);
    assert_eq!(r["steps_run"], 0, "{with_args}");
    assert!(r["steps_cached"].as_u64().unwrap() >= 6, "{with_args}");
    // Another value runs the steps that use it, from where it is first used.
    let other = ok(jbuild(&state)
        .arg("--json")
        .args([
            "build",
            "--build-arg",
            "APP_NAME=shop",
            "--build-arg",
            "APP_SECRET=s3cr3t",
        ])
        .args(["--build-arg", "APP_PORT=9090", "-t", "webapp:9090", "-f"])
        .arg(&plain)
        .arg(&dir));
    let r = result(&other);
    assert!(r["steps_run"].as_u64().unwrap() > 0, "{other}");
    let root = tmp.path().join("jails/w9090");
    ok(jbuild(&state)
        .args(["create", "webapp:9090", "w9090", "--path"])
        .arg(&root)
        .arg("--conf")
        .arg(tmp.path().join("jails/w9090.conf")));
    has_lines(
        &read(&root, "/etc/rc.conf"),
        &["shop_flags=\"--listen 0.0.0.0:9090\""],
    );
    // The required one, left out: exit 1, naming it and how to give it.
    let out = run(jbuild(&state)
        .args(["build", "--build-arg", "APP_NAME=shop", "-f"])
        .arg(&plain)
        .arg(&dir));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--build-arg APP_SECRET=VALUE"), "{err}");
}

#[test]
fn a_required_arg_is_refused_by_build_and_left_to_build_arg_by_convert() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = templates().join("argplus-missing");
    let out = run(jbuild(tmp.path())
        .args(["build", "--from", "freebsd:14.3-RELEASE"])
        .arg(&dir));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Bastillefile:3:6"), "{err}");
    assert!(err.contains("--arg DB_PASSWORD=VALUE"), "{err}");
    let jf = tmp.path().join("Jailfile");
    let out = run(jbuild(tmp.path())
        .args(["convert", "--from", "freebsd:14.3-RELEASE", "-o"])
        .arg(&jf)
        .arg(&dir));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("--build-arg DB_PASSWORD=VALUE"), "{err}");
    let text = fs::read_to_string(&jf).unwrap();
    assert!(
        text.contains("ARG DB_PASSWORD=\"${DB_PASSWORD:?is a required ARG: give --build-arg DB_PASSWORD=VALUE}\"\n"),
        "{text}"
    );
    let e = jailfile::load(&jf, &BTreeMap::new()).unwrap_err();
    assert!(
        e.to_string().contains("--build-arg DB_PASSWORD=VALUE"),
        "{e}"
    );
    let mut args = BTreeMap::new();
    args.insert("DB_PASSWORD".to_string(), "pw".to_string());
    let b = jailfile::load(&jf, &args).unwrap();
    assert!(b.stages[0]
        .steps
        .iter()
        .any(|s| s.text == "SYSRC app_db_password=\"pw\""));
}

#[test]
fn include_category_template_from_the_command_line_and_its_error() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("mine/site");
    fs::create_dir_all(&site).unwrap();
    fs::write(
        site.join("Bastillefile"),
        "# a site of my own on the corpus' database and web server\n\
         INCLUDE databases/postgresql16-server\nINCLUDE www/nginx --arg SERVER_NAME=site.example\nPKG py311-django\n",
    )
    .unwrap();
    let corpus = templates().join("corpus");
    let printed = ok(jbuild(tmp.path())
        .args(["convert", "--from", "freebsd:14.3-RELEASE", "--templates"])
        .arg(&corpus)
        .arg(&site));
    for want in [
        "PKG postgresql${PG_VERSION}-server postgresql${PG_VERSION}-contrib\n",
        r#"RUN --network=host ["/bin/sh","-c","service postgresql initdb"]"#,
        "ARG SERVER_NAME=site.example\n",
        "PKG py311-django\n",
    ] {
        assert!(printed.contains(want), "no `{want}` in\n{printed}");
    }
    // Without --templates: the line, and every place looked in.
    let out = run(jbuild(tmp.path())
        .args(["convert", "--from", "freebsd:14.3-RELEASE"])
        .arg(&site));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("site/Bastillefile:2:9"), "{err}");
    assert!(
        err.contains("template `databases/postgresql16-server` not found"),
        "{err}"
    );
    assert!(
        err.contains(
            &tmp.path()
                .join("databases/postgresql16-server")
                .display()
                .to_string()
        ),
        "{err}"
    );
    assert!(err.contains("--templates DIR"), "{err}");
}
