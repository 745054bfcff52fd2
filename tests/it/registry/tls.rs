//! TLS and plain HTTP from the command line, against a real Distribution
//! registry: `--cert-dir` against TLS with a CA made here (or
//! `--tls-verify=false` without it), and `--tls-verify=false` and
//! `JBUILD_INSECURE_REGISTRIES` against plain HTTP on another host (an
//! address in a network namespace the test makes).

use crate::support::registry as registry_support;

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use registry_support::tls::TestCa;
use registry_support::{fails_with, run_bounded, run_ok, succeeds, text, Options, Registry, World};
use registry_support::{LIMIT, REGISTRY_BIN};

#[test]
fn tls_with_a_generated_ca_through_cert_dir_or_without_verification() {
    let w = World::new(0);
    let ca = TestCa::new(&w.path("ca"));
    let reg = Registry::start_with(&Options {
        tls: Some((ca.server_cert.clone(), ca.server_key.clone())),
        ..Options::default()
    });
    let host = reg.host();
    let certs = w.path("certs");
    fs::create_dir_all(&certs).unwrap();
    fs::copy(&ca.ca_cert, certs.join("ca.crt")).unwrap();
    let certs_s = certs.display().to_string();
    let dest = format!("{host}/app:1");

    // Without the CA: refused (exit 1, saying what to do).
    fails_with(
        &run_bounded(w.jbuild().args(["push", "app:1", &dest]), LIMIT),
        1,
        &format!("certs.d/{host}/ca.crt"),
    );
    succeeds(&run_bounded(
        w.jbuild()
            .args(["push", "--cert-dir", &certs_s, "app:1", &dest]),
        LIMIT,
    ));
    let out = run_ok(
        w.jbuild()
            .args(["tags", "--cert-dir", &certs_s, &format!("{host}/app")]),
        LIMIT,
    );
    assert_eq!(out.trim(), "1");
    let out = run_ok(
        w.jbuild().args([
            "inspect",
            "--cert-dir",
            &certs_s,
            &format!("docker://{dest}"),
        ]),
        LIMIT,
    );
    assert!(out.contains(&w.manifest), "{out}");
    // A manifest list goes the same way.
    run_ok(
        w.jbuild().args(["manifest", "create", "list:1", "app:1"]),
        LIMIT,
    );
    succeeds(&run_bounded(
        w.jbuild().args([
            "manifest",
            "push",
            "--cert-dir",
            &certs_s,
            "list:1",
            &format!("{host}/list:1"),
        ]),
        LIMIT,
    ));
    let out = run_ok(
        w.jbuild().args([
            "inspect",
            "--cert-dir",
            &certs_s,
            &format!("docker://{host}/list:1"),
        ]),
        LIMIT,
    );
    assert!(out.contains("\"freebsd/amd64\""), "{out}");
    // A certs.d tree works too: DIR/HOST:PORT/ca.crt.
    let tree = w.path("certs.d");
    fs::create_dir_all(tree.join(&host)).unwrap();
    fs::copy(&ca.ca_cert, tree.join(&host).join("ca.crt")).unwrap();
    let out = run_ok(
        w.jbuild().args([
            "tags",
            "--cert-dir",
            &tree.display().to_string(),
            &format!("{host}/app"),
        ]),
        LIMIT,
    );
    assert_eq!(out.trim(), "1");
    // Without the CA, --tls-verify=false still gets through.
    let out = run_ok(
        w.jbuild()
            .args(["tags", "--tls-verify=false", &format!("{host}/app")]),
        LIMIT,
    );
    assert_eq!(out.trim(), "1");
    // Spelt `localhost`, it is asked in plain HTTP first (a loopback
    // registry), answers that with a 400, and is reached over HTTPS.
    let out = run_ok(
        w.jbuild().args([
            "tags",
            "--tls-verify=false",
            &format!("localhost:{}/app", reg.port),
        ]),
        LIMIT,
    );
    assert_eq!(out.trim(), "1");
    let other = tempfile::tempdir().unwrap();
    succeeds(&run_bounded(
        registry_support::jbuild(other.path()).args(["pull", "--tls-verify=false", &dest]),
        LIMIT,
    ));
    fails_with(
        &run_bounded(
            w.jbuild()
                .args(["push", "--cert-dir", "/nonexistent", "app:1", &dest]),
            LIMIT,
        ),
        1,
        "--cert-dir /nonexistent: not a directory",
    );
}

/// A network namespace of the test's own, with `ADDR` on its loopback
/// device: a host that is not 127.0.0.1, which jbuild allows no plain HTTP
/// unless told. A process is kept in it (`unshare -n sleep`) so commands
/// can join it with `nsenter`.
struct NetNs {
    holder: Child,
    registry: Option<Child>,
}

const ADDR: &str = "10.57.0.1";

impl NetNs {
    fn new() -> NetNs {
        let holder = Command::new("unshare")
            .args(["-n", "sleep", "600"])
            .spawn()
            .expect("unshare (util-linux) must be installed");
        let mine = fs::read_link("/proc/self/ns/net").unwrap();
        let path = format!("/proc/{}/ns/net", holder.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while fs::read_link(&path).ok().is_none_or(|l| l == mine) {
            assert!(Instant::now() < deadline, "unshare -n made no namespace");
            std::thread::sleep(Duration::from_millis(10));
        }
        let ns = NetNs {
            holder,
            registry: None,
        };
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["addr", "add", &format!("{ADDR}/32"), "dev", "lo"],
        ] {
            run_ok(ns.command("ip").args(args), LIMIT);
        }
        ns
    }

    /// `program` run inside the namespace.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/proc/{}/ns/net", self.holder.id()))
            .arg("--")
            .arg(program);
        c
    }

    /// `base` (a command with its environment) run inside the namespace.
    fn enter(&self, base: &Command) -> Command {
        let mut c = self.command(base.get_program());
        c.args(base.get_args());
        for (k, v) in base.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Distribution on ADDR:5000, plain HTTP, its data under `dir`.
    fn start_registry(&mut self, dir: &Path) -> String {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing"
        );
        let log = dir.join("registry.log");
        let out = fs::File::create(&log).unwrap();
        let child = self
            .command(registry_support::repo().join("registry/start"))
            .arg("5000")
            .arg(dir.join("data"))
            .env("REGISTRY_ADDR", ADDR)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        self.registry = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !fs::read_to_string(&log).unwrap().contains("listening on") {
            assert!(
                Instant::now() < deadline,
                "the registry did not start:\n{}",
                fs::read_to_string(&log).unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        format!("{ADDR}:5000")
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        for c in self
            .registry
            .iter_mut()
            .chain(std::iter::once(&mut self.holder))
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn plain_http_on_another_host_needs_tls_verify_false_or_the_insecure_list() {
    let w = World::new(0);
    let mut ns = NetNs::new();
    let host = ns.start_registry(w.tmp.path());
    let dest = format!("{host}/app:1");

    // Unasked, jbuild speaks HTTPS to it, and nothing is pushed.
    // `jbuild ARGS` in the namespace, on this world's state.
    let jbuild_in_ns = |args: &[&str]| run_bounded(&mut ns.enter(w.jbuild().args(args)), LIMIT);
    let tags_in_ns = |repo: &str| {
        let out = jbuild_in_ns(&["tags", "--tls-verify=false", &format!("{host}/{repo}")]);
        succeeds(&out).trim().to_string()
    };
    let refused = jbuild_in_ns(&["push", "app:1", &dest]);
    let err = text(&refused.stderr);
    // The user's environment, not jbuild's fault: exit 1, saying what to do.
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("https://{host}/")), "{err}");
    assert!(err.contains("--tls-verify=false"), "{err}");
    assert!(!fs::read_to_string(w.tmp.path().join("registry.log"))
        .unwrap()
        .contains("PUT /v2/app/manifests"));

    succeeds(&jbuild_in_ns(&[
        "push",
        "--tls-verify=false",
        "app:1",
        &dest,
    ]));
    assert_eq!(tags_in_ns("app"), "1");
    let out = succeeds(&jbuild_in_ns(&[
        "inspect",
        "--tls-verify=false",
        &format!("docker://{dest}"),
    ]));
    assert!(out.contains(&w.manifest), "{out}");

    // A build: FROM pulled and the result pushed with the same flag.
    let ctx = w.path("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        format!("FROM {host}/app:1\nCOPY hello /etc/hello\n"),
    )
    .unwrap();
    fs::write(ctx.join("hello"), "hi\n").unwrap();
    let built = format!("{host}/built:1");
    succeeds(&jbuild_in_ns(&[
        "build",
        "--tls-verify=false",
        "--push",
        "-t",
        &built,
        &ctx.display().to_string(),
    ]));
    assert_eq!(tags_in_ns("built"), "1");

    // For CI: the environment names the registry, no flag, no config file.
    succeeds(&run_bounded(
        &mut ns.enter(
            w.jbuild()
                .env(
                    "JBUILD_INSECURE_REGISTRIES",
                    format!("other.lan:5000,{host}"),
                )
                .args(["push", "app:1", &format!("{host}/app:2")]),
        ),
        LIMIT,
    ));
    let other = tempfile::tempdir().unwrap();
    succeeds(&run_bounded(
        &mut ns.enter(
            registry_support::jbuild(other.path())
                .env("JBUILD_INSECURE_REGISTRIES", &host)
                .args(["pull", &format!("{host}/app:2")]),
        ),
        LIMIT,
    ));
}

/// A machine with no CA certificates of its own (a minimal VM or container
/// image; here `SSL_CERT_FILE`/`SSL_CERT_DIR` name none, which is where
/// rustls-native-certs looks) still pushes to a plain-HTTP registry on
/// loopback, without reading them (the system's certificates are read at
/// the first TLS handshake, and plain HTTP has none: `--debug` shows when),
/// and, with `--cert-dir`, to a TLS one, where they are read.
#[test]
fn a_system_without_ca_certificates_still_reaches_plain_http_and_cert_dir_registries() {
    let w = World::new(0);
    let none = w.path("no-system-certs");
    fs::create_dir_all(&none).unwrap();
    let bare = |c: &mut Command| {
        c.env("SSL_CERT_FILE", none.join("none.pem"))
            .env("SSL_CERT_DIR", &none)
            .env("RUST_LOG", "warn");
    };

    // `jbuild --debug push ARGS…` with no system CA certificates.
    let push = |args: &[&str]| {
        let mut c = w.jbuild();
        bare(&mut c);
        let out = run_bounded(c.args(["--debug", "push"]).args(args), LIMIT);
        succeeds(&out);
        text(&out.stderr)
    };

    let plain = Registry::start();
    let stderr = push(&["app:1", &format!("{}/app:1", plain.host())]);
    for unwanted in [LOADING, "no CA certificates from the system"] {
        assert!(!stderr.contains(unwanted), "{stderr}");
    }

    let ca = TestCa::new(&w.path("ca"));
    let tls = Registry::start_with(&Options {
        tls: Some((ca.server_cert.clone(), ca.server_key.clone())),
        ..Options::default()
    });
    let certs = w.path("certs");
    fs::create_dir_all(&certs).unwrap();
    fs::copy(&ca.ca_cert, certs.join("ca.crt")).unwrap();
    let stderr = push(&[
        "--cert-dir",
        &certs.display().to_string(),
        "app:1",
        &format!("{}/app:1", tls.host()),
    ]);
    assert!(stderr.contains(LOADING), "{stderr}");
}

/// What `--debug` logs when the system's CA certificates are read.
const LOADING: &str = "loading the system's CA certificates";
