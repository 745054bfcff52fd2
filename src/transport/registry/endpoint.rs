//! Where a registry is reached: the scheme and the CA certificates docker's
//! `certs.d` convention gives for it.
//!
//! The scheme: HTTPS, except where plain HTTP is allowed (loopback,
//! `insecure`, `--tls-verify=false`), where the registry's `/v2/` is asked
//! once to find out which it speaks. A loopback registry is asked in plain
//! HTTP first: a registry on this machine nearly always is one (a test or
//! CI registry, a mirror), so the TLS handshake docker and crane try first
//! (and see fail) is a round trip saved; one that does speak TLS answers
//! plain HTTP with a `400` (Go's servers, nginx) or hangs up, and is then
//! asked over HTTPS. Other registries allowed plain HTTP are asked over
//! HTTPS first, as docker, podman and crane ask them: plain HTTP there
//! goes over a network. The answer to that `/v2/` is kept ([`Ping`]) for
//! the first sign-in, so the probe costs no request of its own.

use crate::blame::Blame;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::failure::tls_error;
use super::options::RegistryOptions;
use super::reference::{api_host, is_loopback};
use super::verifier::{AcceptsAnything, LazyVerifier};
use crate::report::error_chain as chain;
use crate::transport::TransportError;

const USER_AGENT: &str = concat!("jbuild/", env!("CARGO_PKG_VERSION"));

/// The TLS set-up of a registry's client: the certificate checked by a
/// [`LazyVerifier`] (the system's CA certificates and `certs`, read at the
/// first handshake), or not at all for `--tls-verify=false`, as podman and
/// skopeo mean it. ring is the crypto provider (aws-lc does not
/// cross-compile to FreeBSD here).
fn tls_config(certs: Vec<CertificateDer<'static>>, verify: bool) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = if verify {
        Arc::new(LazyVerifier::new(provider.clone(), certs))
    } else {
        Arc::new(AcceptsAnything(provider.clone()))
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // reqwest's own set-up offers HTTP/1.1 alone too (no `http2` feature).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// How to reach one registry: an HTTP client that trusts its CAs, and the
/// base URL of its API (`https://host[:port]`, or `http://` where allowed).
pub struct Endpoint {
    pub http: reqwest::Client,
    pub base: String,
    /// The registry's answer to `GET base/v2/` when the scheme was probed
    /// and the answer was one signing in reads (`200`, `401`).
    pub ping: Option<Ping>,
}

/// A registry's answer to `GET /v2/`: what signing in needs of it.
#[derive(Clone, Debug)]
pub struct Ping {
    pub status: reqwest::StatusCode,
    pub headers: reqwest::header::HeaderMap,
}

/// How much of a `/v2/` body is read so that its connection can serve the
/// next request (a registry answers `{}`); a longer body is left, and its
/// connection with it.
const PING_BODY: usize = 64 * 1024;

impl Ping {
    /// The answer `resp` as a [`Ping`] when signing in can use it, its body
    /// read (up to [`PING_BODY`]) so that the connection is kept.
    async fn keep(mut resp: reqwest::Response) -> Option<Ping> {
        let status = resp.status();
        if status != reqwest::StatusCode::OK && status != reqwest::StatusCode::UNAUTHORIZED {
            return None;
        }
        let ping = Ping {
            status,
            headers: resp.headers().clone(),
        };
        let mut read = 0;
        while let Ok(Some(chunk)) = resp.chunk().await {
            read += chunk.len();
            if read > PING_BODY {
                break;
            }
        }
        Some(ping)
    }
}

/// Why no HTTP client could be made for a server: a CA certificate file
/// that cannot be read or is not PEM (the user's to fix), or the HTTP
/// stack refusing its set-up (jbuild's fault).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("{} is not a PEM certificate: {message}", path.display())]
    NotPem { path: PathBuf, message: String },
    /// The cause is printed, not returned: reqwest's builder errors say
    /// little on their own.
    #[error("cannot set up HTTP: {}", chain(error))]
    Setup { error: reqwest::Error },
}

impl crate::blame::Blame for ClientError {
    fn is_user_error(&self) -> bool {
        !matches!(self, ClientError::Setup { .. })
    }
}

/// The HTTP client for the server `host` (`host[:port]`, as docker's
/// `certs.d` names it): CA certificates from the `certs.d` directories of
/// `options` (or `--cert-dir`), the stall timeout on connecting and on
/// every read, the proxies of the environment (`HTTPS_PROXY`,
/// `HTTP_PROXY`, `NO_PROXY`, as reqwest reads them), and TLS checked
/// unless `--tls-verify=false`. Registries ([`reach`]) and every other
/// download ([`crate::transport::http`]) are reached through it.
pub fn client_for(host: &str, options: &RegistryOptions) -> Result<reqwest::Client, ClientError> {
    let pems = match &options.cert_dir {
        // podman's DIR/*.crt, or a certs.d tree: DIR/HOST:PORT/*.crt.
        Some(dir) => certs_in(dir).and_then(|mut own| {
            own.extend(certs_in(&dir.join(host))?);
            Ok(own)
        }),
        None => load_certs(&options.certs_dirs(), host),
    }?;
    let mut certs = Vec::new();
    for (path, pem) in &pems {
        let not_pem = |e: &dyn std::fmt::Display| ClientError::NotPem {
            path: path.clone(),
            message: e.to_string(),
        };
        for der in CertificateDer::pem_slice_iter(pem) {
            let der = der.map_err(|e| not_pem(&e))?;
            // Checked now, as the file is named, not at the first handshake.
            rustls::RootCertStore::empty()
                .add(der.clone())
                .map_err(|e| not_pem(&e))?;
            certs.push(der);
        }
    }
    // A silent server (no TCP answer, a stalled TLS handshake, a body
    // that stops) fails the request after `timeout`; requests are then
    // retried within the retry policy's bound.
    reqwest::Client::builder()
        .connect_timeout(options.timeout)
        .read_timeout(options.timeout)
        .user_agent(USER_AGENT)
        .tls_backend_preconfigured(tls_config(certs, options.tls_verify))
        .build()
        .map_err(|error| ClientError::Setup { error })
}

/// The [`Endpoint`] of `registry`: the client of [`client_for`], and the
/// scheme (plain HTTP only for loopback and `insecure` registries that
/// answer it, see the module's text). Used by every registry request and by
/// `jbuild login`.
pub async fn reach(registry: &str, options: &RegistryOptions) -> Result<Endpoint, TransportError> {
    let host = api_host(registry).to_string();
    let http = client_for(registry, options).map_err(|e| TransportError::Registry {
        location: format!("docker://{registry}"),
        user: e.is_user_error(),
        message: chain(&e),
    })?;
    let (scheme, ping) = if !options.plain_http_allowed(registry) {
        ("https", None)
    } else {
        let first = if is_loopback(registry) {
            Scheme::Http
        } else {
            Scheme::Https
        };
        probe_scheme(&http, &host, options.timeout, first).await
    };
    Ok(Endpoint {
        http,
        base: format!("{scheme}://{host}"),
        ping,
    })
}

/// The scheme a registry allowed plain HTTP is asked in first.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scheme {
    Http,
    Https,
}

/// For a registry allowed plain HTTP: plain HTTP if `first` is it and the
/// registry answers it as a registry does (`200` or `401`), else HTTPS if
/// it answers HTTPS (as docker tries first), else plain HTTP.
async fn probe_scheme(
    http: &reqwest::Client,
    host: &str,
    timeout: Duration,
    first: Scheme,
) -> (&'static str, Option<Ping>) {
    let probe = |scheme: &str| {
        http.get(format!("{scheme}://{host}/v2/"))
            .timeout(timeout.min(Duration::from_secs(10)))
            .send()
    };
    if first == Scheme::Http {
        match probe("http").await {
            Ok(resp) => {
                if let Some(ping) = Ping::keep(resp).await {
                    return ("http", Some(ping));
                }
            }
            Err(e) => tracing::debug!(error = %chain(&e), host, "no plain HTTP; trying HTTPS"),
        }
    }
    match probe("https").await {
        Ok(resp) => ("https", Ping::keep(resp).await),
        // It speaks TLS, with a certificate we do not trust: stay on HTTPS,
        // so the request fails with the certificate advice instead of a
        // confusing 400 from sending plain HTTP to a TLS port.
        Err(e) if matches!(tls_error(&e), Some(rustls::Error::InvalidCertificate(_))) => {
            ("https", None)
        }
        Err(e) => {
            tracing::debug!(error = %chain(&e), host, "no HTTPS; using plain HTTP");
            ("http", None)
        }
    }
}

/// A CA certificate file that `certs.d` names but that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}", path.display())]
pub struct CertError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl crate::blame::Blame for CertError {
    /// The certificates under `--cert-dir` or certs.d are the user's.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The PEM files docker's `certs.d` convention names for `registry`:
/// `DIR/HOST[:PORT]/*.crt`, from every directory in `dirs`.
pub fn load_certs(dirs: &[PathBuf], registry: &str) -> Result<Vec<(PathBuf, Vec<u8>)>, CertError> {
    let mut out = Vec::new();
    for dir in dirs {
        out.extend(certs_in(&dir.join(registry))?);
    }
    Ok(out)
}

/// The `*.crt` files in `dir` (none when it is missing), sorted by name.
pub fn certs_in(dir: &std::path::Path) -> Result<Vec<(PathBuf, Vec<u8>)>, CertError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "crt"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| match std::fs::read(&p) {
            Ok(pem) => Ok((p, pem)),
            Err(source) => Err(CertError { path: p, source }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certs_follow_docker_certs_d() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("reg.lan:5000");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("ca.crt"), b"PEM").unwrap();
        std::fs::write(d.join("client.key"), b"KEY").unwrap();
        std::fs::create_dir_all(t.path().join("other")).unwrap();
        std::fs::write(t.path().join("other/ca.crt"), b"X").unwrap();
        let got = load_certs(&[t.path().to_path_buf()], "reg.lan:5000").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, b"PEM");
        assert!(load_certs(&[t.path().to_path_buf()], "none:1")
            .unwrap()
            .is_empty());
    }
}
