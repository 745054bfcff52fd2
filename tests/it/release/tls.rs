//! Releases and package catalogues are reached as registries are: over
//! HTTPS from a server on 127.0.0.1 whose certificate comes from a CA
//! made here, refused with the `--cert-dir` advice until `--cert-dir`
//! names that CA; and a server that accepts and then says nothing is
//! given up after the configuration's `timeout_secs`, not after a
//! hard-coded two minutes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jbuild::blame::Blame;
use jbuild::pkg::repo_conf;
use jbuild::pkg::repository::{self, RepoError};
use jbuild::pkg::sign::Trust;
use jbuild::transport::http::{Http, HttpError};
use jbuild::transport::registry::RetryPolicy;
use jbuild::transport::RegistryOptions;
use rustls::pki_types::pem::PemObject as _;

use super::*;
use crate::support::pkgrepo::{pkg, Layout, RepoSpec};
use crate::support::registry::tls::TestCa;

/// An HTTPS front on 127.0.0.1 for the plain `upstream` server (one
/// request per connection, as [`Server`] answers), with `ca`'s server
/// certificate. Returns its `https://127.0.0.1:PORT`.
fn tls_front(upstream: &str, ca: &TestCa) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(&ca.server_cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&ca.server_key).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let (config, upstream) = (config.clone(), upstream.clone());
            std::thread::spawn(move || relay(s.unwrap(), config, &upstream));
        }
    });
    url
}

/// One request through TLS to the plain server and its answer back.
fn relay(s: TcpStream, config: Arc<rustls::ServerConfig>, upstream: &str) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = rustls::ServerConnection::new(config).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, s);
    let mut head = Vec::new();
    {
        let mut r = BufReader::new(&mut tls);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return, // a client that gave up on the certificate
                Ok(_) => {}
            }
            head.extend_from_slice(&line);
            if line == b"\r\n" {
                break;
            }
        }
    }
    let mut up = TcpStream::connect(upstream).unwrap();
    up.write_all(&head).unwrap();
    let mut answer = Vec::new();
    up.read_to_end(&mut answer).unwrap();
    let _ = tls.write_all(&answer);
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// A server that accepts connections and never answers.
fn silent() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s.unwrap());
        }
    });
    url
}

/// `jbuild build FROM freebsd:14.3` from `mirror` with `extra` flags;
/// its output, killed after `limit`.
fn build_from(
    root: &Path,
    mirror: &str,
    ctx: &Path,
    config: &Path,
    extra: &[&str],
    limit: Duration,
) -> (Option<i32>, String, Duration) {
    let mut c = jbuild(root);
    c.env("JBUILD_CONFIG", config)
        .args([
            "--json",
            "build",
            "--platform",
            "freebsd/amd64",
            "--mirror",
            mirror,
        ])
        .args(extra)
        .arg(ctx)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = Instant::now();
    let mut child = c.spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the build still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn a_release_mirror_on_https_needs_its_ca_from_cert_dir() {
    let t = tempfile::tempdir().unwrap();
    let (server, config) = served_release(t.path());
    let ca = TestCa::new(&t.path().join("ca"));
    let certs = t.path().join("certs");
    fs::create_dir_all(&certs).unwrap();
    fs::copy(&ca.ca_cert, certs.join("ca.crt")).unwrap();
    let mirror = tls_front(&server.url, &ca);
    let root = t.path().join("root");
    let ctx = context(&t.path().join("ctx"), "FROM freebsd:14.3\n");
    let limit = Duration::from_secs(120);

    let (code, stderr, _) = build_from(&root, &mirror, &ctx, &config, &[], limit);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("TLS") && stderr.contains("--cert-dir") && stderr.contains("MANIFEST"),
        "{stderr}"
    );

    let cert_dir = certs.to_str().unwrap();
    let (code, stderr, _) = build_from(
        &root,
        &mirror,
        &ctx,
        &config,
        &["--cert-dir", cert_dir, "-t", "rel:1"],
        limit,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let asked = server.requests();
    assert!(
        asked.iter().any(|r| r.ends_with("/base.txz")),
        "the set came through the TLS front: {asked:?}"
    );
}

#[test]
fn a_silent_release_mirror_is_given_up_after_the_configured_timeout() {
    let t = tempfile::tempdir().unwrap();
    let config = t.path().join("config.toml");
    fs::write(&config, "[registries]\ntimeout_secs = 1\n").unwrap();
    let root = t.path().join("root");
    let ctx = context(&t.path().join("ctx"), "FROM freebsd:14.3\n");
    // Each of the retry policy's 6 tries waits 1 s, with waits of at most
    // 3.2 s between them: well under a minute. The old client waited
    // 120 s for one read.
    let (code, stderr, took) = build_from(
        &root,
        &silent(),
        &ctx,
        &config,
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("stayed silent for 1 s"), "{stderr}");
    assert!(took < Duration::from_secs(40), "{took:?}");
}

/// The repository configuration for `url`, read as PKG steps read it.
fn repo_at(url: &str, work: &Path) -> repo_conf::RepoConfig {
    let text = format!("test: {{ url: \"{url}\", signature_type: \"none\" }}\n");
    let texts = vec![(work.join("repo.conf"), text)];
    let abi = jbuild::pkg::abi::Abi {
        major: 14,
        minor: 3,
        arch: "amd64".into(),
        osversion: 1_403_000,
    };
    repo_conf::from_texts(&texts, &abi).unwrap().remove(0)
}

fn quick(cert_dir: Option<&Path>, timeout: Duration) -> Http {
    Http::new(RegistryOptions {
        cert_dir: cert_dir.map(Path::to_path_buf),
        timeout,
        retry: RetryPolicy {
            max_attempts: 2,
            base: Duration::from_millis(10),
            max_delay: Duration::from_millis(10),
            total: Duration::from_secs(30),
        },
        ..RegistryOptions::default()
    })
}

#[test]
fn a_catalogue_on_https_needs_its_ca_and_a_silent_one_times_out() {
    let t = tempfile::tempdir().unwrap();
    let served = t.path().join("www");
    RepoSpec::new(Layout::PackagesitePkg, vec![pkg("app", "1.0", &[])]).write(&served.join("repo"));
    let server = Server::start(&served);
    let ca = TestCa::new(&t.path().join("ca"));
    let certs = t.path().join("certs");
    fs::create_dir_all(&certs).unwrap();
    fs::copy(&ca.ca_cert, certs.join("ca.crt")).unwrap();
    let front = tls_front(&server.url, &ca);

    for scheme in ["", "pkg+"] {
        let conf = repo_at(&format!("{scheme}{front}/repo"), t.path());
        let trust = Trust::of_repo(&conf, None).unwrap();
        let work = tempfile::tempdir().unwrap();
        let http = quick(None, Duration::from_secs(10));
        let e = repository::load_with(&conf, &trust, work.path(), &http).unwrap_err();
        assert!(
            matches!(
                &e,
                RepoError::Fetch {
                    source: HttpError::Tls { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.is_user_error());

        let http = quick(Some(&certs), Duration::from_secs(10));
        let r = repository::load_with(&conf, &trust, work.path(), &http).unwrap();
        assert_eq!(r.packages[0].name, "app");
        assert_eq!(r.url, format!("{front}/repo"));
    }
    assert!(server
        .requests()
        .iter()
        .any(|r| r.contains("packagesite.pkg")));

    let conf = repo_at(&format!("{}/repo", silent()), t.path());
    let trust = Trust::of_repo(&conf, None).unwrap();
    let started = Instant::now();
    let e = repository::load_with(
        &conf,
        &trust,
        t.path(),
        &quick(None, Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(
        matches!(
            &e,
            RepoError::Fetch {
                source: HttpError::TimedOut { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
