//! Hostile registries (issue 29: items 6, 9, 17 and 18), each a scripted
//! server on 127.0.0.1 in front of the real `jbuild` binary: a registry
//! that drips a blob a byte at a time (given up by the rate floor, and a
//! `prune` waiting behind it says so), one that is steady but never done
//! (given up at the deadline), one that stops reading a pushed blob, one
//! whose `Docker-Content-Digest` lies, one that serves another blob than
//! the one asked for, and one that echoes the bearer token jbuild obtained
//! in its errors.

use crate::support::hostile::{documents, Layer, Tar};
use crate::support::limits::{run_measured, Answer, Measured, Req, Server};
use crate::support::registry as registry_support;

use std::fs;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use jbuild::digest::Digest;

const REPO: &str = "hostile/app";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The most any run here may take: each is given up within seconds, and
/// the code before the limits ran for hours.
const LIMIT: Duration = Duration::from_secs(60);

/// Peak RSS a refused pull may reach (docs/security.md): the debug binary
/// starts near 28 MiB.
const MAX_RSS_KIB: i64 = 64 << 10;

/// An image of one small layer, as a registry serves it.
struct Image {
    manifest: Vec<u8>,
    config: Vec<u8>,
    layer: Vec<u8>,
}

impl Image {
    fn new() -> Image {
        let layer = Layer::tar(
            Tar::new()
                .file(b"etc/motd", &[b'x'; 8192])
                .file(b"etc/hosts", b"::1 localhost\n")
                .finish(),
        );
        let (config, manifest) = documents(
            std::slice::from_ref(&layer),
            std::slice::from_ref(&layer.diff_id),
        );
        Image {
            manifest,
            config,
            layer: layer.blob,
        }
    }

    fn blob_path(bytes: &[u8]) -> String {
        format!("/v2/{REPO}/blobs/{}", Digest::of(bytes))
    }
}

/// How the scripted registry serves the image: the layer's answer, and
/// the `Docker-Content-Digest` sent with the manifest.
struct Site {
    image: Image,
    layer: Box<dyn Fn(&Image) -> Answer + Send + Sync>,
    digest_header: Option<String>,
}

fn serve(site: &Site, req: &Req) -> Answer {
    let img = &site.image;
    match req.path.as_str() {
        "/v2/" => Answer::json("200 OK", b"{}"),
        p if p == format!("/v2/{REPO}/manifests/1") => {
            let mut headers = vec![("Content-Type".to_string(), MANIFEST.to_string())];
            if let Some(d) = &site.digest_header {
                headers.push(("Docker-Content-Digest".into(), d.clone()));
            }
            Answer::Reply {
                status: "200 OK",
                headers,
                body: img.manifest.clone(),
            }
        }
        p if p == Image::blob_path(&img.config) => Answer::json("200 OK", &img.config),
        p if p == Image::blob_path(&img.layer) => (site.layer)(img),
        _ => Answer::status("404 Not Found"),
    }
}

fn start(site: Site) -> (Server, Arc<Site>) {
    let site = Arc::new(site);
    let s = site.clone();
    (Server::start(move |req| serve(&s, req)), site)
}

/// A state root with `registries` as the configuration's `[registries]`.
fn home(registries: &str) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    fs::write(
        t.path().join("jbuild.toml"),
        format!("[registries]\n{registries}"),
    )
    .unwrap();
    t
}

fn pull(home: &Path, server: &Server, flags: &[&str]) -> Measured {
    let mut c = registry_support::jbuild(home);
    c.args(flags)
        .arg("pull")
        .arg(format!("{}/{REPO}:1", server.host()));
    let m = run_measured(&mut c, b"", LIMIT);
    eprintln!(
        "pull: exit {:?} after {:.1?}, peak RSS {} KiB",
        m.output.status.code(),
        m.elapsed,
        m.max_rss_kib
    );
    m
}

/// Exit 1, each of `says` in the error, none of `never`.
fn refused(m: &Measured, says: &[&str], never: &[&str]) {
    eprintln!("{}", m.stderr().trim_end());
    assert_eq!(m.output.status.code(), Some(1), "{}", m.text());
    let err = m.stderr();
    for s in says {
        assert!(err.contains(s), "`{s}` not in:\n{}", m.text());
    }
    for n in never {
        assert!(!err.contains(n), "`{n}` in:\n{}", m.text());
    }
    assert!(m.max_rss_kib <= MAX_RSS_KIB, "peak RSS: {}", m.text());
}

/// A layer served one byte every `every`.
fn drip(every: Duration) -> Box<dyn Fn(&Image) -> Answer + Send + Sync> {
    Box::new(move |img| Answer::Drip {
        status: "200 OK",
        headers: vec![],
        body: img.layer.clone(),
        every,
    })
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < until, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_registry_that_drips_a_blob_fails_the_rate_floor_and_prune_says_it_waits() {
    let (server, site) = start(Site {
        image: Image::new(),
        layer: drip(Duration::from_millis(100)),
        digest_header: None,
    });
    // A floor of 1 KiB/s over 2 s; the stall timeout (60 s) never fires.
    let h = home("min_rate = 1024\nrate_window_secs = 2\n");
    let (hp, host) = (h.path().to_path_buf(), server.host());
    let pulling = std::thread::spawn(move || {
        let mut c = registry_support::jbuild(&hp);
        c.arg("pull").arg(format!("{host}/{REPO}:1"));
        run_measured(&mut c, b"", LIMIT)
    });
    let layer = Image::blob_path(&site.image.layer);
    wait_for("the layer's GET", Duration::from_secs(30), || {
        server.requests().iter().any(|r| r.path == layer)
    });
    // The pull holds the store lock now: prune waits for it, and says so.
    let prune = registry_support::run_bounded(
        registry_support::jbuild(h.path()).arg("prune"),
        registry_support::LIMIT,
    );
    let m = pulling.join().expect("the pull ran within its limit");
    eprintln!(
        "drip: exit {:?} after {:.1?}",
        m.output.status.code(),
        m.elapsed
    );
    refused(
        &m,
        &[
            &format!("the transfer with {}", server.host()),
            "B/s), below the floor of 1024 B/s",
            "rate_window_secs",
        ],
        &[],
    );
    assert!(m.elapsed < Duration::from_secs(20), "{}", m.text());
    let said = registry_support::text(&prune.stderr);
    eprintln!("prune: {said}");
    assert!(prune.status.success(), "prune:\n{said}");
    assert_eq!(
        said.matches("another jbuild is adding to or removing from the store")
            .count(),
        1,
        "prune's stderr:\n{said}"
    );
}

#[test]
fn a_steady_registry_that_never_finishes_meets_the_deadline() {
    let (server, _site) = start(Site {
        image: Image::new(),
        // 20 B/s: above a floor of 1 B/s, so only the deadline ends it.
        layer: drip(Duration::from_millis(50)),
        digest_header: None,
    });
    let h = home("min_rate = 1\nrate_window_secs = 1\nblob_deadline_secs = 3\n");
    let m = pull(h.path(), &server, &[]);
    refused(
        &m,
        &[
            &format!("fetch blob {}", Digest::of(&_site.image.layer)),
            &format!("the transfer with {}", server.host()),
            "had not finished after 3 s (`blob_deadline_secs`)",
            "B/s",
        ],
        &[],
    );
    assert!(m.elapsed < Duration::from_secs(20), "{}", m.text());
}

#[test]
fn the_environment_sets_the_floor_for_a_ci_job_without_a_file() {
    let (server, _site) = start(Site {
        image: Image::new(),
        layer: drip(Duration::from_millis(100)),
        digest_header: None,
    });
    let h = home("");
    let mut c = registry_support::jbuild(h.path());
    c.env("JBUILD_REGISTRY_MIN_RATE", "4096")
        .env("JBUILD_REGISTRY_RATE_WINDOW_SECS", "1")
        .arg("pull")
        .arg(format!("{}/{REPO}:1", server.host()));
    let m = run_measured(&mut c, b"", LIMIT);
    refused(&m, &["in the last 1 s", "below the floor of 4096 B/s"], &[]);
}

#[test]
fn a_docker_content_digest_that_lies_is_refused_naming_the_registry_and_both_digests() {
    let honest = Digest::of(&Image::new().manifest).to_string();
    let lie = Digest::of(b"another manifest").to_string();
    let (server, _site) = start(Site {
        image: Image::new(),
        layer: Box::new(|img| Answer::json("200 OK", &img.layer)),
        digest_header: Some(lie.clone()),
    });
    let h = home("");
    let m = pull(h.path(), &server, &[]);
    refused(
        &m,
        &[
            &server.host(),
            "Docker-Content-Digest",
            &format!("sent {lie}"),
            &format!("the bytes it sent are {honest}"),
        ],
        &[],
    );
    // A registry that tells the truth is pulled from as before.
    let (server, _site) = start(Site {
        image: Image::new(),
        layer: Box::new(|img| Answer::json("200 OK", &img.layer)),
        digest_header: Some(honest),
    });
    let m = pull(h.path(), &server, &[]);
    assert!(m.output.status.success(), "{}", m.text());
}

/// The registry's answer for the layer: complete, with an honest length,
/// and other bytes than the layer's.
fn other_content(body: fn(&[u8]) -> Vec<u8>) -> Box<dyn Fn(&Image) -> Answer + Send + Sync> {
    Box::new(move |img| Answer::json("200 OK", &body(&img.layer)))
}

#[test]
fn a_complete_but_different_blob_says_the_registry_served_the_wrong_content() {
    let img = Image::new();
    let shorter = |b: &[u8]| b[..b.len() - 24].to_vec();
    let flipped = |b: &[u8]| {
        let mut b = b.to_vec();
        b[600] ^= 0x20;
        b
    };
    for (name, body) in [
        ("shorter", shorter as fn(&[u8]) -> Vec<u8>),
        ("flipped", flipped),
    ] {
        let served = body(&img.layer);
        let (server, _site) = start(Site {
            image: Image::new(),
            layer: other_content(body),
            digest_header: None,
        });
        let h = home("");
        let m = pull(h.path(), &server, &[]);
        eprintln!("{name}: {}", m.stderr());
        let mut says = vec![
            format!(
                "the content {} served does not match its digest",
                server.host()
            ),
            format!(
                "expected {}, got {}",
                Digest::of(&img.layer),
                Digest::of(&served)
            ),
            "the registry served the wrong content".into(),
        ];
        if name == "shorter" {
            says.push(format!(
                "{} bytes where the manifest says {}",
                served.len(),
                img.layer.len()
            ));
        }
        let says: Vec<&str> = says.iter().map(String::as_str).collect();
        refused(&m, &says, &["kept failing"]);
    }
}

/// A registry with a token service on the same port that grants `token`
/// (to Basic credentials, or for an identity token), then echoes the token
/// it is sent in its errors: `echo500` answers 500 (retried: `--debug`
/// logs each try), `echo403` refuses.
fn echoing_registry(token: &str, host: Arc<OnceLock<String>>) -> Server {
    let token = token.to_string();
    Server::start(move |req| {
        let host = host.get().unwrap();
        let sent = req.header("authorization").unwrap_or("").to_string();
        if req.path.starts_with("/token") {
            return Answer::json(
                "200 OK",
                serde_json::json!({"token": token, "access_token": token, "refresh_token": token})
                    .to_string()
                    .as_bytes(),
            );
        }
        if sent != format!("Bearer {token}") {
            return Answer::Reply {
                status: "401 Unauthorized",
                headers: vec![(
                    "WWW-Authenticate".into(),
                    format!("Bearer realm=\"http://{host}/token\",service=\"echo\""),
                )],
                body: vec![],
            };
        }
        let echo = serde_json::json!({"errors": [{
            "code": "DENIED",
            "message": format!("you sent `{sent}`; token {token} is not for this"),
            "detail": format!("b64:{}", base64::engine::general_purpose::STANDARD.encode(&token)),
        }]})
        .to_string();
        let status = if req.path.ends_with("/echo500") {
            "500 Internal Server Error"
        } else {
            "403 Forbidden"
        };
        Answer::json(status, echo.as_bytes())
    })
}

#[test]
fn a_bearer_token_the_registry_echoes_is_never_shown() {
    let mut raw = [0u8; 12];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .unwrap();
    let token = format!("TOKN{}", hex::encode(raw));
    let host = Arc::new(OnceLock::new());
    let server = echoing_registry(&token, host.clone());
    host.set(server.host()).unwrap();
    let needles = [
        token.clone(),
        base64::engine::general_purpose::STANDARD.encode(&token)[..16].to_string(),
    ];
    // How the token is obtained: Basic credentials at the token service,
    // or an identity token exchanged for it.
    for how in ["basic", "identity"] {
        let h = home("timeout_secs = 5\n");
        let mut env = vec![];
        if how == "basic" {
            env.push(("JBUILD_REGISTRY_HOST", server.host()));
            env.push(("JBUILD_REGISTRY_USERNAME", "someone".to_string()));
            env.push(("JBUILD_REGISTRY_PASSWORD", "a-password".to_string()));
        } else {
            let file = h.path().join("auth.json");
            fs::write(
                &file,
                serde_json::json!({"auths": {server.host(): {"identitytoken": "an-identity-token"}}})
                    .to_string(),
            )
            .unwrap();
            env.push(("REGISTRY_AUTH_FILE", file.display().to_string()));
        }
        for tag in ["echo500", "echo403"] {
            let mut c = registry_support::jbuild(h.path());
            for (k, v) in &env {
                c.env(k, v);
            }
            c.args(["--debug", "pull"])
                .arg(format!("{}/{REPO}:{tag}", server.host()));
            let m = run_measured(&mut c, b"", LIMIT);
            let what = format!("{how}, {tag}");
            // A 500 is the registry's fault (exit 2), a 403 the user's (1).
            let code = if tag == "echo500" { 2 } else { 1 };
            assert_eq!(m.output.status.code(), Some(code), "{what}: {}", m.text());
            let all = format!("{}{}", m.stdout(), m.stderr());
            for n in &needles {
                assert!(!all.contains(n.as_str()), "{what}: `{n}` shown:\n{all}");
            }
            // The echo was there to be shown: in its place, `<redacted>`.
            assert!(
                m.stderr()
                    .contains("you sent `Bearer <redacted>`; token <redacted>"),
                "{what}: {}",
                m.text()
            );
        }
    }
}

/// A registry that opens upload sessions and then never reads a `PUT`:
/// the pushed bytes stop once the connection's buffers are full.
fn swallowing_registry() -> Server {
    Server::start(|req| {
        let p = req.path.as_str();
        match (req.method.as_str(), p) {
            (_, "/v2/") => Answer::json("200 OK", b"{}"),
            ("POST", _) if p.ends_with("/blobs/uploads/") => Answer::Reply {
                status: "202 Accepted",
                headers: vec![("Location".into(), "/upload/session".into())],
                body: vec![],
            },
            ("PUT", _) if p.starts_with("/upload/session") => Answer::Silent,
            _ => Answer::status("404 Not Found"),
        }
    })
}

#[test]
fn a_push_the_registry_stops_reading_fails_the_rate_floor() {
    let server = swallowing_registry();
    let h = home("min_rate = 1024\nrate_window_secs = 2\n");
    let store = jbuild::store::Store::open(&h.path().join("root/store")).unwrap();
    let name = format!("{}/{REPO}:1", server.host());
    // 24 MiB of noise: more than loopback's socket buffers hold.
    registry_support::image::make(&store, &name, "swallowed", 24 << 20);
    let mut c = registry_support::jbuild(h.path());
    c.args(["push", &name]);
    let m = run_measured(&mut c, b"", LIMIT);
    eprintln!(
        "push: exit {:?} after {:.1?}",
        m.output.status.code(),
        m.elapsed
    );
    refused(
        &m,
        &[
            "upload blob sha256:",
            &format!("the transfer with {}", server.host()),
            "below the floor of 1024 B/s",
        ],
        &[],
    );
    assert!(m.elapsed < Duration::from_secs(30), "{}", m.text());
}
