//! `jbuild run` on FreeBSD, decided as data: the library's
//! `run_freebsd` over a FreeBSD image built here (files only, nothing to
//! run), the jail's host commands through a runner that records them,
//! compared with what jail(8) and jexec(8) take; the jail.conf entry
//! as jail.conf(5) reads it; the image's risky jail parameters refused
//! without the user's consent, as `jbuild create` refuses them, before
//! anything is made.

use crate::support::common::{jbuild, ok};

use std::fs;
use std::path::{Path, PathBuf};

use jbuild::create::run::jail::{run_freebsd, Attach, JailRunner, Places};
use jbuild::create::run::{Network, RunError, RunRequest};
use jbuild::exec::Outcome;
use jbuild::image::{LayerPolicy, Unpacker};
use jbuild::report::SilentReporter;
use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::store::Store;

#[derive(Default)]
struct Recorder {
    log: Vec<String>,
}

impl JailRunner for Recorder {
    fn command(&mut self, argv: &[String]) -> Result<(), RunError> {
        self.log.push(argv.join(" "));
        Ok(())
    }
    fn attach(&mut self, a: &Attach) -> Result<Outcome, RunError> {
        let env: Vec<String> = a.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.log
            .push(format!("attach {} [{}]", a.argv.join(" "), env.join(" ")));
        Ok(Outcome::Exited(5))
    }
}

/// `web:1`: a FreeBSD root of files with user `www`, its USER, WORKDIR,
/// ENV and CMD, and a jail parameter that needs consent.
fn image(t: &Path, root: &Path) {
    let ctx = t.join("ctx");
    fs::create_dir_all(ctx.join("rootfs/etc")).unwrap();
    fs::write(
        ctx.join("rootfs/etc/passwd"),
        "root:*:0:0:Charlie &:/root:/bin/sh\nwww:*:80:80:World Wide Web Owner:/nonexistent:/usr/sbin/nologin\n",
    )
    .unwrap();
    fs::create_dir_all(ctx.join("rootfs/usr/local/www")).unwrap();
    let arch = jbuild::config::host_architecture();
    fs::write(
        ctx.join("Jailfile"),
        format!(
            "FROM --platform=freebsd/{arch} scratch\nCOPY rootfs/ /\nJAIL allow.raw_sockets\n\
             ENV GREETING=hi\nUSER www\nWORKDIR /usr/local/www\nCMD [\"/usr/local/bin/serve\", \"-p\", \"80\"]\n"
        ),
    )
    .unwrap();
    ok(jbuild(root).args(["build", "-q", "-t", "web:1"]).arg(&ctx));
}

fn request(command: &[&str], remove: bool, data: &Path) -> RunRequest {
    RunRequest {
        image: "web:1".into(),
        name: Some("try".into()),
        command: command.iter().map(|s| s.to_string()).collect(),
        env: vec![("GREETING".into(), "given".into())],
        volumes: vec![format!("{}:/data:ro", data.display()).parse().unwrap()],
        network: Network::Host,
        remove,
        allowed_jail_params: vec![],
    }
}

#[test]
fn a_run_jail_is_made_as_create_makes_it_started_attached_stopped_and_removed() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("root");
    image(t.path(), &state);
    let data = t.path().join("data");
    fs::create_dir(&data).unwrap();
    let store = Store::open(&state.join("store")).unwrap();
    let snapshots = DirSnapshotter::new(state.join("snapshots/dir")).unwrap();
    let unpacker = Unpacker::new(&store, &snapshots, &SilentReporter, LayerPolicy::default());
    let places = Places {
        path: Some(t.path().join("jails/try")),
        conf: Some(t.path().join("conf/try.conf")),
    };
    let (jail_root, conf): (PathBuf, PathBuf) =
        (places.path.clone().unwrap(), places.conf.clone().unwrap());

    // Without consent: refused naming the parameter, nothing made.
    let mut rec = Recorder::default();
    let e = run_freebsd(&unpacker, &request(&[], true, &data), &places, &mut rec).unwrap_err();
    assert!(
        e.to_string().contains("allow.raw_sockets")
            || format!("{e:?}").contains("allow.raw_sockets"),
        "{e:?}"
    );
    assert!(rec.log.is_empty() && !jail_root.exists() && !conf.exists());

    // Agreed, no --rm: made, started, attached, stopped; the jail stays.
    let mut req = request(&[], false, &data);
    req.allowed_jail_params = vec!["allow.raw_sockets".into()];
    let mut rec = Recorder::default();
    let ran = run_freebsd(&unpacker, &req, &places, &mut rec).unwrap();
    assert_eq!(ran.exit_code(), 5);
    let c = conf.display().to_string();
    assert_eq!(
        rec.log,
        [
            format!("/usr/sbin/jail -f {c} -c try"),
            "attach /usr/sbin/jexec -U www -d /usr/local/www try /usr/local/bin/serve -p 80 \
             [GREETING=given PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin]"
                .to_string(),
            format!("/usr/sbin/jail -f {c} -r try"),
        ]
    );
    let entry = fs::read_to_string(&conf).unwrap();
    let jr = jail_root.display().to_string();
    for want in [
        "try {".to_string(),
        format!("path = {jr};"),
        "persist;".into(),
        "ip4 = inherit;".into(),
        "ip6 = inherit;".into(),
        format!(
            "mount += '{} {jr}/data nullfs ro 0 0';",
            data.canonicalize().unwrap().display()
        ),
        "allow.raw_sockets;".into(),
        "mount.devfs;".into(),
    ] {
        assert!(entry.contains(&want), "want {want} in\n{entry}");
    }
    assert!(
        !entry.contains("exec.start"),
        "nothing starts with a run's jail:\n{entry}"
    );
    assert!(jail_root.join("etc/passwd").is_file() && jail_root.join("data").is_dir());
    assert_eq!(ran.kept.as_ref().map(|k| k.name.as_str()), Some("try"));

    // A command given (so --rm): the copied root unflagged and removed,
    // the entry gone.
    fs::remove_dir_all(&jail_root).unwrap();
    let mut req = request(&["/bin/sh", "-c", "exit 5"], true, &data);
    req.allowed_jail_params = vec!["allow.raw_sockets".into()];
    let mut rec = Recorder::default();
    let ran = run_freebsd(&unpacker, &req, &places, &mut rec).unwrap();
    assert!(ran.kept.is_none());
    assert_eq!(
        rec.log[1..],
        [
            "attach /usr/sbin/jexec -U www -d /usr/local/www try /bin/sh -c exit 5 \
             [GREETING=given PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin]"
                .to_string(),
            format!("/usr/sbin/jail -f {c} -r try"),
            format!("/bin/chflags -R 0 {jr}"),
            format!("/bin/rm -rf {jr}"),
        ]
    );
    assert!(!conf.exists(), "the entry's file is removed with --rm");
}

#[test]
fn a_linux_image_is_refused_on_freebsd_naming_what_it_needs() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("root");
    let arch = jbuild::config::host_architecture();
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("a"), "a").unwrap();
    fs::write(
        ctx.join("Jailfile"),
        format!("FROM --platform=linux/{arch} scratch\nCOPY a /a\nCMD [\"/a\"]\n"),
    )
    .unwrap();
    ok(jbuild(&state).args(["build", "-q", "-t", "l:1"]).arg(&ctx));
    let store = Store::open(&state.join("store")).unwrap();
    let snapshots = DirSnapshotter::new(state.join("snapshots/dir")).unwrap();
    let unpacker = Unpacker::new(&store, &snapshots, &SilentReporter, LayerPolicy::default());
    let mut req = request(&[], true, t.path());
    req.image = "l:1".into();
    let mut rec = Recorder::default();
    let e = run_freebsd(&unpacker, &req, &Places::default(), &mut rec).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "image l:1 is for linux/{arch}: its programs need a Linux host"
        )),
        "{e}"
    );
    assert!(rec.log.is_empty());
}
