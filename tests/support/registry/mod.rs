//! A real CNCF Distribution registry per test, and what tests put around
//! it: a fault-injecting proxy, a bearer-token issuer, a test CA, images.
//!
//! The registry is Debian's `docker-registry`, started through
//! `registry/start` on 127.0.0.1 on a free port, with its data in a temp
//! dir; it is killed when the [`Registry`] is dropped. Starting one declares
//! the distribution lane (`lane::require`): a machine without it fails these
//! tests, counted in the lane table (they never pass by skipping).
#![allow(dead_code)]

pub mod image;
pub mod proxy;
pub mod pty;
pub mod tls;
pub mod token;

use std::fs;

use super::lane::{self, Lane};

use jbuild::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// How a registry is set up.
#[derive(Default, Clone)]
pub struct Options {
    pub htpasswd: Option<PathBuf>,
    pub tls: Option<(PathBuf, PathBuf)>,
    /// realm URL, issuer, root certificate bundle
    pub token: Option<(String, String, PathBuf)>,
}

pub struct Registry {
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Child,
    log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Registry {
    /// A registry with no auth and no TLS.
    pub fn start() -> Registry {
        Registry::start_with(&Options::default())
    }

    pub fn start_with(opts: &Options) -> Registry {
        lane::require(Lane::Distribution);
        // A free port can be taken between our probe and the registry's
        // bind; then try another.
        let mut last = String::new();
        for _ in 0..5 {
            match Registry::try_start(opts, free_port()) {
                Ok(r) => return r,
                Err(log) => last = log,
            }
        }
        panic!("the registry did not start:\n{last}");
    }

    fn try_start(opts: &Options, port: u16) -> Result<Registry, String> {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("registry.log");
        let mut cmd = Command::new(repo().join("registry/start"));
        cmd.arg(port.to_string()).arg(dir.path().join("data"));
        if let Some(h) = &opts.htpasswd {
            cmd.arg("--htpasswd").arg(h);
        }
        if let Some((c, k)) = &opts.tls {
            cmd.arg("--tls").arg(c).arg(k);
        }
        if let Some((realm, issuer, bundle)) = &opts.token {
            cmd.arg("--token").arg(realm).arg(issuer).arg(bundle);
        }
        let out = fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("run registry/start");
        let mut r = Registry {
            port,
            dir,
            child,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = r.log();
            if text.contains("listening on") {
                return Ok(r);
            }
            if let Ok(Some(status)) = r.child.try_wait() {
                return Err(format!("exited with {status}:\n{text}"));
            }
            if Instant::now() > deadline {
                return Err(format!("not listening after 20 s:\n{text}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `127.0.0.1:PORT`, as an image reference names it.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The same as [`host`](Registry::host).
    pub fn addr(&self) -> String {
        self.host()
    }

    /// Everything the registry logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An htpasswd file (bcrypt, as Distribution requires) made by Apache's
/// `htpasswd` tool.
pub fn htpasswd(dir: &Path, users: &[(&str, &str)]) -> PathBuf {
    let path = dir.join("htpasswd");
    let mut text = String::new();
    for (u, p) in users {
        let out = Command::new("htpasswd")
            .args(["-Bbn", u, p])
            .output()
            .expect("htpasswd (Debian package apache2-utils) must be installed");
        assert!(out.status.success(), "htpasswd failed");
        text.push_str(String::from_utf8(out.stdout).unwrap().trim());
        text.push('\n');
    }
    fs::write(&path, text).unwrap();
    path
}

/// docker's config.json in `home/docker` with `user:password` for
/// `registry`, written as `docker login` would (nothing checked).
pub fn docker_login(home: &Path, registry: &str, user: &str, password: &str) {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    fs::create_dir_all(home.join("docker")).unwrap();
    fs::write(
        home.join("docker/config.json"),
        serde_json::json!({"auths": {registry: {"auth": auth}}}).to_string(),
    )
    .unwrap();
}

/// Runs `cmd` with a time limit; a command still running then is killed
/// and the test fails.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    run_with_input(cmd, b"", limit)
}

/// [`run_bounded`] with `input` on standard input.
pub fn run_with_input(cmd: &mut Command, input: &[u8], limit: Duration) -> Output {
    let out_dir = tempfile::tempdir().unwrap();
    let (i, o, e) = (
        out_dir.path().join("in"),
        out_dir.path().join("out"),
        out_dir.path().join("err"),
    );
    fs::write(&i, input).unwrap();
    let mut child = cmd
        .stdin(fs::File::open(&i).unwrap())
        .stdout(fs::File::create(&o).unwrap())
        .stderr(fs::File::create(&e).unwrap())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {cmd:?}: {err}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {limit:?}; stderr so far:\n{}",
                fs::read_to_string(&e).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: fs::read(&o).unwrap(),
        stderr: fs::read(&e).unwrap(),
    }
}

/// A plain HTTP client for requests a test sends to the registry itself.
pub fn http() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Requires exit code `code` and `wanted` in standard error.
pub fn fails_with(out: &Output, code: i32, wanted: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr:\n{err}");
    assert!(err.contains(wanted), "wanted `{wanted}` in:\n{err}");
}

/// Requires success; returns standard output.
pub fn succeeds(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs and requires success; returns stdout.
pub fn run_ok(cmd: &mut Command, limit: Duration) -> String {
    let out = run_bounded(cmd, limit);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub const LIMIT: Duration = Duration::from_secs(120);

/// `skopeo` with a private auth file and no system-wide policy surprises.
pub fn skopeo(home: &Path) -> Command {
    lane::require(Lane::Skopeo);
    let mut c = Command::new("skopeo");
    c.env("HOME", home)
        .env("REGISTRY_AUTH_FILE", home.join("skopeo-auth.json"))
        .arg("--insecure-policy");
    c
}

/// The `jbuild` binary with its state in `home/root`, and every credential
/// source pointed into `home` (nothing from the caller's environment).
pub fn jbuild(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_jbuild"));
    c.env("JBUILD_ROOT", home.join("root"))
        .env("HOME", home)
        .env("DOCKER_CONFIG", home.join("docker"))
        .env("JBUILD_CONFIG", home.join("jbuild.toml"))
        .env("RUST_LOG", "warn");
    for v in [
        "REGISTRY_AUTH_FILE",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "JBUILD_REGISTRY_HOST",
        "JBUILD_REGISTRY_USERNAME",
        "JBUILD_REGISTRY_PASSWORD",
        "SOURCE_DATE_EPOCH",
    ] {
        c.env_remove(v);
    }
    // The tests that read snapshots on disk were written for `dir`; those
    // of the other backends ask for theirs.
    c.env("JBUILD_BACKEND", "dir");
    if !home.join("jbuild.toml").exists() {
        fs::write(home.join("jbuild.toml"), "").unwrap();
    }
    c
}

/// A jbuild state root with one image in its store, in a temp dir.
pub struct World {
    pub tmp: tempfile::TempDir,
    pub store: Store,
    pub digests: std::collections::BTreeSet<String>,
    pub manifest: String,
}

impl World {
    pub fn new(big: usize) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("root/store")).unwrap();
        let (desc, digests) = image::make(&store, "app:1", "world", big);
        World {
            manifest: desc.digest().to_string(),
            tmp,
            store,
            digests,
        }
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    /// The store, as skopeo names it.
    pub fn oci_source(&self) -> String {
        format!("oci:{}:app:1", self.store.path().display())
    }
    pub fn skopeo(&self) -> Command {
        skopeo(self.tmp.path())
    }
}

impl World {
    /// `jbuild` working on this world's state root and credentials.
    pub fn jbuild(&self) -> Command {
        jbuild(self.tmp.path())
    }
}
