//! Registries from the command line, tried as a user would, against a real
//! Distribution registry: `jbuild login` asking on a terminal, `--authfile`,
//! `jbuild tags` page by page and `jbuild inspect docker://` storing nothing.
//! TLS and plain HTTP from the command line: tests/it/registry/tls.rs.

use crate::support::registry as registry_support;

use std::fs;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use registry_support::pty::{wait, Pty};
use registry_support::LIMIT;
use registry_support::{
    fails_with, htpasswd, http, run_bounded, run_ok, run_with_input, succeeds, text,
};
use registry_support::{Options, Registry, World};
use sha2::{Digest as _, Sha256};

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
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
