//! `jbuild create` on images other tools made: FreeBSD's official layout
//! (one layer, `cmd` in the config, no jail labels, made here by the
//! release script's own steps), buildah's (`--os freebsd`, an init as
//! Entrypoint), umoci's carried by skopeo in an oci-archive, and jbuild's
//! own. Every jail goes to the default places, moved under a temporary
//! directory by `JBUILD_TEST_HOST_ROOT`, and each entry is read back with
//! the small jail.conf(5) reader below (not jbuild's) and checked field by
//! field.
//!
//! The tools are real (Debian's buildah, umoci, skopeo, busybox-static,
//! GNU tar, gzip, xz); a missing one fails the test, naming it.

use crate::support::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{jbuild, ok, static_busybox};

/// One jail's parameters in file order: `name;` has no value.
type Params = Vec<(String, Option<String>)>;

/// jail.conf(5), as far as these entries need: `#` comments, `name {`,
/// `name;`, `name = value;`, values bare, in single quotes (literal) or in
/// double quotes (backslash escapes). Panics on anything else.
fn read_jail_conf(text: &str) -> Vec<(String, Params)> {
    let mut words: Vec<(String, bool)> = Vec::new(); // (word, quoted)
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '#' => while it.next_if(|&c| c != '\n').is_some() {},
            c if c.is_whitespace() => {}
            '{' | '}' | ';' | '=' => words.push((c.to_string(), false)),
            '\'' => words.push((it.by_ref().take_while(|&c| c != '\'').collect(), true)),
            '"' => {
                let mut w = String::new();
                while let Some(c) = it.next() {
                    match c {
                        '"' => break,
                        '\\' => match it.next() {
                            Some('n') => w.push('\n'),
                            Some(e) => w.push(e),
                            None => panic!("a backslash at the end"),
                        },
                        c => w.push(c),
                    }
                }
                words.push((w, true));
            }
            c => {
                let mut w = c.to_string();
                while let Some(c) = it.next_if(|c| !c.is_whitespace() && !"{};=".contains(*c)) {
                    w.push(c);
                }
                words.push((w, false));
            }
        }
    }
    let mut jails = Vec::new();
    let mut w = words.into_iter().peekable();
    while let Some((name, _)) = w.next() {
        assert_eq!(w.next().map(|x| x.0).as_deref(), Some("{"), "after {name}");
        let mut params = Vec::new();
        loop {
            let (p, _) = w.next().expect("an unclosed jail");
            if p == "}" {
                break;
            }
            let value = match w.next().map(|x| x.0).as_deref() {
                Some(";") => None,
                Some("=") => {
                    let v = w.next().expect("a value").0;
                    assert_eq!(w.next().map(|x| x.0).as_deref(), Some(";"), "after {p}");
                    Some(v)
                }
                other => panic!("`{p}` followed by {other:?}"),
            };
            params.push((p, value));
        }
        jails.push((name, params));
    }
    jails
}

/// The one jail in `conf`, named `name`, as `(param, value)` pairs.
fn entry(conf: &Path, name: &str) -> Params {
    let text = fs::read_to_string(conf).unwrap_or_else(|e| panic!("{}: {e}", conf.display()));
    let mut jails = read_jail_conf(&text);
    assert_eq!(jails.len(), 1, "{text}");
    let (n, params) = jails.remove(0);
    assert_eq!(n, name, "{text}");
    params
}

fn p(name: &str, value: &str) -> (String, Option<String>) {
    (name.into(), Some(value.into()))
}

fn f(name: &str) -> (String, Option<String>) {
    (name.into(), None)
}

fn need(tool: &str) {
    match tool {
        "umoci" => return crate::support::lane::require(crate::support::lane::Lane::Umoci),
        "skopeo" => return crate::support::lane::require(crate::support::lane::Lane::Skopeo),
        _ => {}
    }
    assert!(
        common::have(tool),
        "this test needs `{tool}` (tests/run installs it)"
    );
}

fn sh(script: &str, args: &[&str]) {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .arg("sh")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tool(c: &mut Command) -> String {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A small root: busybox as /bin/sh (unless `shell` is false), a passwd
/// with `www`, and the extra files given.
fn rootfs(dir: &Path, shell: bool, files: &[(&str, &str)]) {
    let bb = static_busybox().expect("/bin/busybox from busybox-static");
    fs::create_dir_all(dir.join("bin")).unwrap();
    fs::create_dir_all(dir.join("etc")).unwrap();
    fs::copy(bb, dir.join("bin/busybox")).unwrap();
    if shell {
        std::os::unix::fs::symlink("busybox", dir.join("bin/sh")).unwrap();
    }
    fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nwww:x:80:80:www:/var/www:/usr/sbin/nologin\n",
    )
    .unwrap();
    for (path, text) in files {
        let at = dir.join(path);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        fs::write(at, text).unwrap();
    }
}

/// A state root and a host root, both in `tmp`.
struct World {
    state: PathBuf,
    host: PathBuf,
}

impl World {
    fn new(tmp: &Path) -> World {
        // It unpacks owners.
        crate::support::lane::require(crate::support::lane::Lane::Root);
        World {
            state: tmp.join("state"),
            host: tmp.join("host"),
        }
    }

    fn jbuild(&self) -> Command {
        let mut c = jbuild(&self.state);
        c.env("JBUILD_TEST_HOST_ROOT", &self.host)
            .env("JBUILD_CONFIG", self.state.join("none.toml"));
        c
    }

    /// `jbuild create IMAGE NAME [more]` at the default places.
    fn create(&self, image: &str, name: &str, more: &[&str]) -> String {
        // Nothing of this name may already be on the real host, so the
        // check below means what it says.
        let real = [
            PathBuf::from("/usr/local/jails").join(name),
            PathBuf::from(format!("/etc/jail.conf.d/{name}.conf")),
            PathBuf::from("/usr/local/bastille/jails").join(name),
        ];
        for r in &real {
            assert!(!r.exists(), "{} is there before the test", r.display());
        }
        let out = ok(self.jbuild().args(["create", image, name]).args(more));
        for r in &real {
            assert!(!r.exists(), "create wrote {} on the host", r.display());
        }
        out
    }

    fn at(&self, p: &str) -> PathBuf {
        self.host.join(p.trim_start_matches('/'))
    }

    fn path(&self, p: &str) -> String {
        self.at(p).to_str().unwrap().to_string()
    }
}

fn world(tmp: &Path) -> World {
    let w = World::new(tmp);
    fs::create_dir_all(&w.state).unwrap();
    fs::write(w.state.join("none.toml"), "").unwrap();
    w
}

/// The steps of `commit_container` in FreeBSD's
/// release/scripts/make-oci-image.sh, with GNU tools in place of
/// `sha256 -q` and `stat -f %z`: one gzip layer, a config whose command is
/// written `"cmd"` (lower case, as the script writes it), `"annotations":{}`
/// and the ref name `freebsd-IMAGE:VER`, the layout packed as a .txz.
const MAKE_OCI_IMAGE: &str = r#"
workdir=$1; image=$2; ver=$3; output=$4; oci_cmd=$5
( cd ${workdir}/rootfs && tar --sort=name -cf ${workdir}/rootfs.tar $(ls -A) )
diff_id=$(sha256sum < ${workdir}/rootfs.tar | cut -d' ' -f1)
gzip -f ${workdir}/rootfs.tar
create_time=$(date -u +%Y-%m-%dT%TZ)
root_hash=$(sha256sum < ${workdir}/rootfs.tar.gz | cut -d' ' -f1)
root_size=$(stat -c %s ${workdir}/rootfs.tar.gz)
config=
if [ -n "${oci_cmd}" ]; then
	config=",\"config\":{\"cmd\":[\"${oci_cmd}\"]}"
fi
echo "{\"created\":\"${create_time}\",\"architecture\":\"amd64\",\"os\":\"freebsd\"${config},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:${diff_id}\"]},\"history\":[{\"created\":\"${create_time}\",\"created_by\":\"make-oci-image.sh\"}]}" > ${workdir}/config.json
config_hash=$(sha256sum < ${workdir}/config.json | cut -d' ' -f1)
config_size=$(stat -c %s ${workdir}/config.json)
echo "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:${config_hash}\",\"size\":${config_size}},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:${root_hash}\",\"size\":${root_size}}],\"annotations\":{}}" > ${workdir}/manifest.json
manifest_hash=$(sha256sum < ${workdir}/manifest.json | cut -d' ' -f1)
manifest_size=$(stat -c %s ${workdir}/manifest.json)
mkdir -p ${workdir}/oci/blobs/sha256
echo "{\"imageLayoutVersion\": \"1.0.0\"}" > ${workdir}/oci/oci-layout
echo "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:${manifest_hash}\",\"size\":${manifest_size},\"annotations\":{\"org.opencontainers.image.ref.name\":\"freebsd-${image}:${ver}\"}}]}" > ${workdir}/oci/index.json
ln ${workdir}/rootfs.tar.gz ${workdir}/oci/blobs/sha256/${root_hash}
ln ${workdir}/config.json ${workdir}/oci/blobs/sha256/${config_hash}
ln ${workdir}/manifest.json ${workdir}/oci/blobs/sha256/${manifest_hash}
( cd ${workdir}/oci && tar --xz -cf ${output} $(ls -A) )
"#;

#[test]
fn freebsd_official_images_boot_with_rc_or_persist_when_they_have_no_shell() {
    for t in ["tar", "gzip", "xz", "sha256sum"] {
        need(t);
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = world(tmp.path());
    // freebsd-runtime: a shell as its command, and /etc/rc.
    let runtime = tmp.path().join("runtime");
    rootfs(&runtime.join("rootfs"), true, &[("etc/rc", "#!/bin/sh\n")]);
    let txz = tmp.path().join("freebsd-runtime.txz");
    sh(
        MAKE_OCI_IMAGE,
        &[
            runtime.to_str().unwrap(),
            "runtime",
            "15.0-RELEASE-amd64",
            txz.to_str().unwrap(),
            "/bin/sh",
        ],
    );
    // As shipped it is xz-compressed: a user unpacks it with xz first.
    let archive = tmp.path().join("freebsd-runtime.tar");
    sh(
        "xz -dc \"$1\" > \"$2\"",
        &[txz.to_str().unwrap(), archive.to_str().unwrap()],
    );
    ok(w.jbuild()
        .arg("import")
        .arg(format!("oci-archive:{}", archive.display()))
        .arg("freebsd-runtime:15.0"));
    // Its `"cmd"` read as Go tools read it: `Cmd`.
    let inspect: serde_json::Value =
        serde_json::from_str(&ok(w.jbuild().args(["inspect", "freebsd-runtime:15.0"]))).unwrap();
    assert_eq!(
        inspect["config"]["config"]["Cmd"],
        serde_json::json!(["/bin/sh"])
    );
    w.create("freebsd-runtime:15.0", "fbsdrt", &[]);
    let conf = fs::read_to_string(w.at("/etc/jail.conf.d/fbsdrt.conf")).unwrap();
    assert!(
        conf.contains("# the image's command `/bin/sh` is a shell for a terminal: use it with `jexec NAME /bin/sh`"),
        "{conf}"
    );
    let root = w.at("/usr/local/jails/fbsdrt");
    assert!(root.join("etc/rc").is_file());
    assert!(root.join("bin/busybox").is_file());
    assert_eq!(
        entry(&w.at("/etc/jail.conf.d/fbsdrt.conf"), "fbsdrt"),
        [
            p("path", &w.path("/usr/local/jails/fbsdrt")),
            p("host.hostname", "fbsdrt"),
            p("exec.start", "/bin/sh /etc/rc"),
            p("exec.stop", "/bin/sh /etc/rc.shutdown"),
            f("exec.clean"),
            f("mount.devfs"),
        ]
    );
    assert!(!w.at("/etc/jail.conf.d/fbsdrt.fstab").exists());

    // freebsd-static: no command, no shell, no rc. The layout imported as
    // a directory, by the ref name the script gives it.
    let stat = tmp.path().join("static");
    rootfs(&stat.join("rootfs"), false, &[]);
    let txz = tmp.path().join("freebsd-static.txz");
    sh(
        MAKE_OCI_IMAGE,
        &[
            stat.to_str().unwrap(),
            "static",
            "15.0-RELEASE-amd64",
            txz.to_str().unwrap(),
            "",
        ],
    );
    let layout = tmp.path().join("static-layout");
    fs::create_dir_all(&layout).unwrap();
    sh(
        "tar -C \"$1\" -xf \"$2\"",
        &[layout.to_str().unwrap(), txz.to_str().unwrap()],
    );
    ok(w.jbuild()
        .arg("import")
        .arg(format!(
            "oci:{}:freebsd-static:15.0-RELEASE-amd64",
            layout.display()
        ))
        .arg("freebsd-static:15.0"));
    w.create("freebsd-static:15.0", "fbsdst", &[]);
    assert_eq!(
        entry(&w.at("/etc/jail.conf.d/fbsdst.conf"), "fbsdst"),
        [
            p("path", &w.path("/usr/local/jails/fbsdst")),
            p("host.hostname", "fbsdst"),
            f("persist"),
            f("exec.clean"),
            f("mount.devfs"),
        ]
    );
}

#[test]
fn a_buildah_image_with_an_init_runs_it_in_bastilles_layout() {
    need("buildah");
    let tmp = tempfile::tempdir().unwrap();
    let w = world(tmp.path());
    let root = tmp.path().join("rootfs");
    rootfs(
        &root,
        true,
        &[("init", "#!/bin/sh\nexec s6-svscan /run/service\n")],
    );
    let policy = tmp.path().join("policy.json");
    fs::write(
        &policy,
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    // Its own storage, so nothing of buildah's lands outside tmp.
    let buildah = || {
        let mut c = Command::new("buildah");
        c.arg("--root")
            .arg(tmp.path().join("storage"))
            .arg("--runroot")
            .arg(tmp.path().join("run"))
            .args(["--storage-driver", "vfs"]);
        c
    };
    let ctr = tool(
        buildah()
            .args(["from", "--signature-policy"])
            .arg(&policy)
            .arg("scratch"),
    );
    let ctr = ctr.trim();
    tool(
        buildah()
            .args(["copy", ctr])
            .arg(format!("{}/", root.display()))
            .arg("/"),
    );
    tool(buildah().args([
        "config",
        "--os",
        "freebsd",
        "--arch",
        "amd64",
        "--entrypoint",
        r#"["/init"]"#,
        "--cmd",
        "/bin/sh",
        "--env",
        "PATH=/command:/usr/bin:/bin",
        "--workingdir",
        "/srv/app",
        "--user",
        "www",
        ctr,
    ]));
    let layout = tmp.path().join("buildah-layout");
    tool(
        buildah()
            .args(["commit", "--signature-policy"])
            .arg(&policy)
            .arg(ctr)
            .arg(format!("oci:{}:app", layout.display())),
    );
    ok(w.jbuild()
        .arg("import")
        .arg(format!("oci:{}:app", layout.display()))
        .arg("s6app:1"));

    w.create("s6app:1", "s6app", &["--bastille"]);
    let dir = "/usr/local/bastille/jails/s6app";
    assert!(w.at(&format!("{dir}/root/init")).is_file());
    assert_eq!(
        entry(&w.at(&format!("{dir}/jail.conf")), "s6app"),
        [
            p("path", &w.path(&format!("{dir}/root"))),
            p("host.hostname", "s6app"),
            // The init, not the shell; in the background so jail -c returns.
            p(
                "exec.start",
                "cd /srv/app && PATH=/command:/usr/bin:/bin /init &"
            ),
            p("exec.jail_user", "www"),
            f("exec.clean"),
            f("mount.devfs"),
            p("devfs_ruleset", "4"),
            p("enforce_statfs", "2"),
            p("securelevel", "2"),
            p("exec.consolelog", "/var/log/bastille/s6app_console.log"),
            p("mount.fstab", &w.path(&format!("{dir}/fstab"))),
        ]
    );
    assert_eq!(
        fs::read_to_string(w.at(&format!("{dir}/fstab"))).unwrap(),
        ""
    );
}

#[test]
fn an_umoci_image_carried_by_skopeo_runs_its_command_and_a_static_one_starts_from_the_host() {
    need("umoci");
    need("skopeo");
    let tmp = tempfile::tempdir().unwrap();
    let w = world(tmp.path());
    let layout = tmp.path().join("umoci-layout");
    let image = format!("{}:app", layout.display());
    let bundle = tmp.path().join("bundle");
    tool(
        Command::new("umoci")
            .arg("init")
            .arg("--layout")
            .arg(&layout),
    );
    tool(Command::new("umoci").args(["new", "--image", &image]));
    tool(
        Command::new("umoci")
            .args(["unpack", "--image", &image])
            .arg(&bundle),
    );
    rootfs(
        &bundle.join("rootfs"),
        true,
        &[("usr/local/bin/serve", "#!/bin/sh\nexec httpd -f \"$@\"\n")],
    );
    tool(
        Command::new("umoci")
            .args(["repack", "--image", &image])
            .arg(&bundle),
    );
    // The same image without a shell: a layer that deletes /bin/sh (before
    // the config: umoci unpacks no FreeBSD image).
    let again = tmp.path().join("bundle2");
    tool(
        Command::new("umoci")
            .args(["unpack", "--image", &image])
            .arg(&again),
    );
    fs::remove_file(again.join("rootfs/bin/sh")).unwrap();
    tool(
        Command::new("umoci")
            .args(["repack", "--image"])
            .arg(format!("{}:static", layout.display()))
            .arg(&again),
    );
    for tag in ["app", "static"] {
        tool(Command::new("umoci").args([
            "config",
            "--image",
            &format!("{}:{tag}", layout.display()),
            "--os",
            "freebsd",
            "--architecture",
            "amd64",
            "--config.entrypoint",
            "/usr/local/bin/serve",
            "--config.cmd=-p",
            "--config.cmd=8080 'x'",
            "--config.env=GREETING=hello world",
            // Not a name sh assigns: left out of the command line.
            "--config.env=x;reboot=1",
            "--config.user=80:80",
            "--config.workingdir=/var/www",
        ]));
    }
    let policy = tmp.path().join("policy.json");
    fs::write(
        &policy,
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    for (tag, name) in [("app", "umapp"), ("static", "umstatic")] {
        let archive = tmp.path().join(format!("{name}.tar"));
        tool(
            Command::new("skopeo")
                .arg("--policy")
                .arg(&policy)
                .arg("copy")
                .arg(format!("oci:{}:{tag}", layout.display()))
                .arg(format!("oci-archive:{}:{tag}", archive.display())),
        );
        ok(w.jbuild()
            .arg("import")
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(format!("{name}:1")));
    }

    w.create("umapp:1", "umapp", &[]);
    assert!(w.at("/usr/local/jails/umapp/usr/local/bin/serve").is_file());
    let start = "cd /var/www && GREETING='hello world' /usr/local/bin/serve -p \"8080 'x'\" &";
    assert_eq!(
        entry(&w.at("/etc/jail.conf.d/umapp.conf"), "umapp"),
        [
            p("path", &w.path("/usr/local/jails/umapp")),
            p("host.hostname", "umapp"),
            p("exec.start", start),
            p("exec.jail_user", "www"),
            p("exec.consolelog", "/var/log/jail_umapp_console.log"),
            f("exec.clean"),
            f("mount.devfs"),
        ]
    );

    // USER 80:80's group cannot be said in jail.conf: a comment says so.
    let conf = fs::read_to_string(w.at("/etc/jail.conf.d/umapp.conf")).unwrap();
    assert!(
        conf.contains("# USER 80:80: jail(8) runs www with the groups of its passwd entry"),
        "{conf}"
    );
    assert!(
        conf.contains("# ENV \"x;reboot\" is not a shell variable name: left out"),
        "{conf}"
    );

    // A uid the root's passwd does not know: refused, nothing written.
    tool(Command::new("umoci").args([
        "config",
        "--image",
        &image,
        "--tag",
        "nouser",
        "--config.user=1234",
    ]));
    ok(w.jbuild()
        .arg("import")
        .arg(format!("oci:{}:nouser", layout.display()))
        .arg("nouser:1"));
    let out = common::run(w.jbuild().args(["create", "nouser:1", "nouser"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("USER `1234` is not in its /etc/passwd"),
        "{err}"
    );
    assert!(!w.at("/usr/local/jails/nouser").exists());
    assert!(!w.at("/etc/jail.conf.d/nouser.conf").exists());

    w.create("umstatic:1", "umstatic", &[]);
    assert!(!w.at("/usr/local/jails/umstatic/bin/sh").exists());
    let host = "/usr/bin/env 'GREETING=hello world' /usr/sbin/daemon -f \
                -o /var/log/jail_umstatic_console.log /usr/sbin/jexec -U www -d /var/www \
                umstatic /usr/local/bin/serve -p \"8080 'x'\"";
    assert_eq!(
        entry(&w.at("/etc/jail.conf.d/umstatic.conf"), "umstatic"),
        [
            p("path", &w.path("/usr/local/jails/umstatic")),
            p("host.hostname", "umstatic"),
            f("persist"),
            p("exec.poststart", host),
            f("exec.clean"),
            f("mount.devfs"),
        ]
    );
}

#[test]
fn jbuilds_own_image_keeps_its_jail_parameters_under_the_configured_bastille_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let w = world(tmp.path());
    let ctx = tmp.path().join("ctx");
    rootfs(&ctx, true, &[]);
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=freebsd/amd64 scratch\n\
         COPY bin /bin\n\
         COPY etc /etc\n\
         JAIL host.hostname=www.example.org\n\
         ENV MODE=prod\n\
         CMD [\"/bin/busybox\", \"httpd\", \"-f\", \"-p\", \"80\"]\n",
    )
    .unwrap();
    ok(w.jbuild().args(["build", "-t", "own:1"]).arg(&ctx));
    fs::write(
        w.state.join("none.toml"),
        "[bastille]\nprefix = \"/srv/bastille\"\n",
    )
    .unwrap();
    w.create("own:1", "own", &["--bastille"]);
    let dir = "/srv/bastille/jails/own";
    assert!(w.at(&format!("{dir}/root/bin/busybox")).is_file());
    assert_eq!(
        entry(&w.at(&format!("{dir}/jail.conf")), "own"),
        [
            p("path", &w.path(&format!("{dir}/root"))),
            p("host.hostname", "www.example.org"),
            p("exec.start", "MODE=prod /bin/busybox httpd -f -p 80 &"),
            f("exec.clean"),
            f("mount.devfs"),
            p("devfs_ruleset", "4"),
            p("enforce_statfs", "2"),
            p("securelevel", "2"),
            p("exec.consolelog", "/var/log/bastille/own_console.log"),
            p("mount.fstab", &w.path(&format!("{dir}/fstab"))),
        ]
    );
}
