//! Registries from the command line, tried as a user would, against a real
//! Distribution registry: `jbuild login` asking on a terminal, `--authfile`,
//! `--tls-verify=false` and `JBUILD_INSECURE_REGISTRIES` against plain HTTP
//! on another host (an address in a network namespace the test makes),
//! `--cert-dir` against TLS with a CA made here, `jbuild tags` page by page
//! and `jbuild inspect docker://` storing nothing.

mod registry_support;
mod tar_support;

use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use registry_support::tls::TestCa;
use registry_support::{htpasswd, run_bounded, run_ok, run_with_input, Options, Registry, World};
use registry_support::{LIMIT, REGISTRY_BIN};
use sha2::{Digest as _, Sha256};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Requires exit code `code` and `wanted` in standard error.
fn fails_with(out: &Output, code: i32, wanted: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr:\n{err}");
    assert!(err.contains(wanted), "wanted `{wanted}` in:\n{err}");
}

fn succeeds(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Every file under the store, with its bytes: inspecting a registry must
/// leave it as it was.
fn store_files(w: &World) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![w.store.path().to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn http() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// PUTs `bytes` as the manifest `reference` of `repo` straight to the
/// registry (so a test can make many tags, or an index, quickly).
fn put_manifest(port: u16, repo: &str, reference: &str, media_type: &str, bytes: &[u8]) {
    let resp = http()
        .put(format!(
            "http://127.0.0.1:{port}/v2/{repo}/manifests/{reference}"
        ))
        .header("Content-Type", media_type)
        .body(bytes.to_vec())
        .send()
        .unwrap();
    assert!(resp.status().is_success(), "PUT {reference}: {resp:?}");
}

fn get_manifest(port: u16, repo: &str, reference: &str) -> Vec<u8> {
    let resp = http()
        .get(format!(
            "http://127.0.0.1:{port}/v2/{repo}/manifests/{reference}"
        ))
        .header("Accept", OCI_MANIFEST)
        .send()
        .unwrap();
    assert!(resp.status().is_success(), "GET {reference}: {resp:?}");
    resp.bytes().unwrap().to_vec()
}

/// Distribution 2.8 (Debian's `docker-registry`) answers a tag list whole
/// and ignores `?n=`. The pager stands in front of it and does what the
/// distribution spec says and Distribution 3 does: the tags Distribution
/// holds, in lexical order, `n` at a time after `last`, with
/// `Link: </v2/NAME/tags/list?n=N&last=T>; rel="next"` while more remain.
/// It logs every request line.
struct Pager {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Pager {
    fn start(upstream: u16) -> Pager {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = Pager::answer(&mut conn, upstream, &seen);
            }
        });
        Pager { port, log }
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn answer(
        conn: &mut std::net::TcpStream,
        upstream: u16,
        log: &Mutex<Vec<String>>,
    ) -> std::io::Result<()> {
        conn.set_read_timeout(Some(Duration::from_secs(10)))?;
        // jbuild tries HTTPS first on a loopback registry: a TLS hello
        // (0x16) is hung up on, so it falls back to plain HTTP.
        let mut first = [0u8; 1];
        if conn.peek(&mut first)? == 0 || first[0] == 0x16 {
            return Ok(());
        }
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut b)? == 1 {
            head.push(b[0]);
        }
        let head = text(&head);
        let target = head.split(' ').nth(1).unwrap_or("/").to_string();
        log.lock().unwrap().push(target.clone());
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let (status, body, link) = if path == "/v2/" {
            ("200 OK", "{}".to_string(), None)
        } else if let Some(name) = path
            .strip_prefix("/v2/")
            .and_then(|p| p.strip_suffix("/tags/list"))
        {
            let all = http()
                .get(format!("http://127.0.0.1:{upstream}/v2/{name}/tags/list"))
                .send()
                .unwrap()
                .bytes()
                .unwrap();
            let all: serde_json::Value = serde_json::from_slice(&all).unwrap();
            let mut tags: Vec<String> = all["tags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect();
            tags.sort();
            let param = |k: &str| {
                query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                    .map(str::to_string)
            };
            let n: usize = param("n").map_or(tags.len(), |n| n.parse().unwrap());
            let after: Vec<String> = match param("last") {
                Some(last) => tags.into_iter().filter(|t| *t > last).collect(),
                None => tags,
            };
            let page: Vec<String> = after.iter().take(n).cloned().collect();
            let link = (after.len() > n).then(|| {
                format!(
                    "</v2/{name}/tags/list?n={n}&last={}>; rel=\"next\"",
                    page.last().unwrap()
                )
            });
            let body = serde_json::json!({"name": name, "tags": page}).to_string();
            ("200 OK", body, link)
        } else {
            ("404 Not Found", "{}".to_string(), None)
        };
        let mut resp = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            body.len()
        );
        if let Some(l) = link {
            resp.push_str(&format!("Link: {l}\r\n"));
        }
        resp.push_str("\r\n");
        resp.push_str(&body);
        conn.write_all(resp.as_bytes())
    }
}

#[test]
fn tags_lists_every_tag_and_follows_link_headers_page_by_page() {
    let w = World::new(0);
    let reg = Registry::start();
    let host = reg.host();
    run_ok(
        w.jbuild()
            .args(["push", "app:1", &format!("{host}/jails/app:1")]),
        LIMIT,
    );
    let manifest = get_manifest(reg.port, "jails/app", "1");
    let mut want: Vec<String> = vec!["1".into()];
    for i in 0..120 {
        let tag = format!("v{i:03}");
        put_manifest(reg.port, "jails/app", &tag, OCI_MANIFEST, &manifest);
        want.push(tag);
    }
    want.sort();

    // Distribution itself, in one page.
    let out = run_ok(
        w.jbuild().args(["tags", &format!("{host}/jails/app")]),
        LIMIT,
    );
    let mut got: Vec<String> = out.lines().map(str::to_string).collect();
    got.sort();
    assert_eq!(got, want);

    // Pages of 7, followed through `Link` to the end, in order.
    let pager = Pager::start(reg.port);
    let paged = format!("127.0.0.1:{}/jails/app", pager.port);
    let out = run_ok(
        w.jbuild()
            .args(["tags", "--page-size", "7", &format!("docker://{paged}")]),
        LIMIT,
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
    let lists: Vec<String> = pager
        .requests()
        .into_iter()
        .filter(|r| r.contains("/tags/list"))
        .collect();
    assert_eq!(lists.len(), want.len().div_ceil(7), "{lists:#?}");
    assert_eq!(lists[0], "/v2/jails/app/tags/list?n=7");
    assert!(lists[1..].iter().all(|r| r.contains("last=")), "{lists:#?}");

    let json = run_ok(w.jbuild().args(["--json", "tags", &paged]), LIMIT);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["tags"].as_array().unwrap().len(), want.len());

    fails_with(
        &run_bounded(
            w.jbuild().args(["tags", &format!("{host}/jails/app:1")]),
            LIMIT,
        ),
        1,
        "names an image, not a repository",
    );
    let missing = run_bounded(w.jbuild().args(["tags", &format!("{host}/nothing")]), LIMIT);
    assert_eq!(missing.status.code(), Some(1), "{}", text(&missing.stderr));
}

#[test]
fn inspect_docker_shows_manifest_config_and_platforms_and_stores_nothing() {
    let w = World::new(0);
    let reg = Registry::start();
    let host = reg.host();
    run_ok(
        w.jbuild().args(["push", "app:1", &format!("{host}/app:1")]),
        LIMIT,
    );
    let before = store_files(&w);
    let remote = format!("docker://{host}/app:1");

    let out = run_ok(w.jbuild().args(["inspect", &remote]), LIMIT);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["digest"], w.manifest);
    assert_eq!(v["manifestDigest"], w.manifest);
    assert_eq!(v["config"]["os"], "freebsd");
    assert_eq!(v["manifest"]["layers"].as_array().unwrap().len(), 2);
    assert_eq!(v["platforms"], serde_json::json!([]));

    let raw = run_bounded(w.jbuild().args(["inspect", "--raw", &remote]), LIMIT);
    let raw = succeeds(&raw);
    assert_eq!(
        format!("sha256:{}", hex::encode(Sha256::digest(raw.as_bytes()))),
        w.manifest
    );

    // An index of two platforms (one manifest twice: enough to choose by).
    let size = raw.len();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": w.manifest, "size": size,
             "platform": {"os": "freebsd", "architecture": "amd64"}},
            {"mediaType": OCI_MANIFEST, "digest": w.manifest, "size": size,
             "platform": {"os": "freebsd", "architecture": "arm64", "variant": "v8"}},
        ],
    })
    .to_string();
    put_manifest(reg.port, "app", "multi", OCI_INDEX, index.as_bytes());
    let multi = format!("docker://{host}/app:multi");
    let out = run_ok(
        w.jbuild()
            .args(["inspect", "--platform", "freebsd/arm64", &multi]),
        LIMIT,
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mediaType"], OCI_INDEX);
    let platforms: Vec<&str> = v["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["platform"].as_str().unwrap())
        .collect();
    assert_eq!(platforms, ["freebsd/amd64", "freebsd/arm64/v8"]);
    assert_eq!(v["manifestDigest"], w.manifest);
    assert_eq!(v["config"]["architecture"], "amd64");

    fails_with(
        &run_bounded(
            w.jbuild()
                .args(["inspect", "--platform", "linux/riscv64", &multi]),
            LIMIT,
        ),
        1,
        "freebsd/amd64, freebsd/arm64/v8",
    );
    fails_with(
        &run_bounded(
            w.jbuild()
                .args(["inspect", &format!("docker://{host}/app:nope")]),
            LIMIT,
        ),
        1,
        "no image `nope`",
    );
    assert!(before == store_files(&w), "inspect changed the store");
}

/// A pseudo-terminal: the child's standard input, output and error are
/// its terminal side; everything the child writes is collected from the
/// other side.
struct Pty {
    master: fs::File,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    fn spawn(cmd: &mut Command) -> (Pty, Child) {
        let nix::pty::OpenptyResult { master, slave } = nix::pty::openpty(None, None).unwrap();
        let slave: OwnedFd = slave;
        let child = cmd
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .unwrap();
        let master = fs::File::from(master);
        let mut reader = master.try_clone().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the child's side is closed.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        (Pty { master, seen }, child)
    }

    fn seen(&self) -> String {
        text(&self.seen.lock().unwrap())
    }

    /// Waits until the child has written `s`.
    fn expect(&self, s: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.seen().contains(s) {
            assert!(
                Instant::now() < deadline,
                "no `{s}` on the terminal; it shows:\n{}",
                self.seen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_line(&mut self, s: &str) {
        self.master.write_all(format!("{s}\n").as_bytes()).unwrap();
    }
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn login_asks_on_a_terminal_without_echo_and_keeps_what_docker_keeps() {
    let home = tempfile::tempdir().unwrap();
    let hp = htpasswd(home.path(), &[("alice", "wonder-land")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let (mut pty, mut child) =
        Pty::spawn(registry_support::jbuild(home.path()).args(["login", &reg.host()]));
    pty.expect("Username: ");
    pty.type_line("alice");
    pty.expect("Password: ");
    pty.type_line("wonder-land");
    let status = wait(&mut child);
    // Let the reader take the last bytes.
    std::thread::sleep(Duration::from_millis(200));
    let screen = pty.seen();
    assert!(status.success(), "{status}; the terminal shows:\n{screen}");
    assert!(
        screen.contains("alice"),
        "the user name is echoed:\n{screen}"
    );
    assert!(
        !screen.contains("wonder-land"),
        "the password was echoed:\n{screen}"
    );
    assert!(screen.contains("Login succeeded: alice at"), "{screen}");
    let config: serde_json::Value =
        serde_json::from_slice(&fs::read(home.path().join("docker/config.json")).unwrap()).unwrap();
    assert_eq!(
        config["auths"][reg.host()]["auth"],
        b64("alice:wonder-land")
    );

    // Not a terminal: no question, an error saying what to do.
    let other = tempfile::tempdir().unwrap();
    let out = run_with_input(
        registry_support::jbuild(other.path()).args(["login", &reg.host(), "-u", "alice"]),
        b"wonder-land\n",
        LIMIT,
    );
    fails_with(&out, 1, "--password-stdin");
    assert!(!text(&out.stderr).contains("Password:"));
    let out = run_with_input(
        registry_support::jbuild(other.path()).args(["login", &reg.host()]),
        b"",
        LIMIT,
    );
    fails_with(&out, 1, "login needs a user name");
    assert!(!other.path().join("docker/config.json").exists());
}

#[test]
fn authfile_is_where_login_writes_and_push_pull_and_tags_read() {
    let w = World::new(0);
    let hp = htpasswd(w.tmp.path(), &[("ci", "pipeline-pw")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let host = reg.host();
    let authfile = w.path("ci/auth.json");
    let authfile_s = authfile.display().to_string();
    succeeds(&run_with_input(
        w.jbuild().args([
            "login",
            &host,
            "-u",
            "ci",
            "--password-stdin",
            "--authfile",
            &authfile_s,
        ]),
        b"pipeline-pw\n",
        LIMIT,
    ));
    let kept: serde_json::Value = serde_json::from_slice(&fs::read(&authfile).unwrap()).unwrap();
    assert_eq!(kept["auths"][&host]["auth"], b64("ci:pipeline-pw"));
    assert!(!w.path("docker/config.json").exists());

    let dest = format!("{host}/ci/app:1");
    let anonymous = run_bounded(w.jbuild().args(["push", "app:1", &dest]), LIMIT);
    assert_eq!(
        anonymous.status.code(),
        Some(1),
        "{}",
        text(&anonymous.stderr)
    );
    succeeds(&run_bounded(
        w.jbuild()
            .args(["push", "--authfile", &authfile_s, "app:1", &dest]),
        LIMIT,
    ));
    // $REGISTRY_AUTH_FILE is the same thing.
    let out = run_ok(
        w.jbuild()
            .env("REGISTRY_AUTH_FILE", &authfile)
            .args(["tags", &format!("{host}/ci/app")]),
        LIMIT,
    );
    assert_eq!(out.trim(), "1");
    let other = tempfile::tempdir().unwrap();
    succeeds(&run_bounded(
        registry_support::jbuild(other.path()).args(["pull", "--authfile", &authfile_s, &dest]),
        LIMIT,
    ));

    let out = run_ok(
        w.jbuild()
            .args(["logout", &host, "--authfile", &authfile_s]),
        LIMIT,
    );
    assert!(out.contains("Removed the credentials"), "{out}");
    let kept: serde_json::Value = serde_json::from_slice(&fs::read(&authfile).unwrap()).unwrap();
    assert!(kept["auths"].get(&host).is_none(), "{kept}");
}

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
