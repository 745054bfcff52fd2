//! One connection to one registry repository: the scheme (HTTPS, or plain
//! HTTP where allowed), CA certificates, credentials, tokens, and every
//! request sent with retries.
//!
//! oci-client does the token dance, uploads (one monolithic PUT streamed
//! from disk), mounts and manifest pushes. Requests whose answer jbuild
//! must read closely — HEAD of a blob, GET of a manifest, GET of a blob
//! with a `Range` to resume — are sent here with the same reqwest stack,
//! because oci-client does not show a response's headers (`Retry-After`,
//! `Content-Range`) to its caller.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;
use reqwest::{RequestBuilder, Response, StatusCode};
use tokio::sync::Mutex;

use super::body::{error_body, errors_in, short};
use super::endpoint::{load_certs, probe_scheme};
use super::oauth;
use super::reference::{api_host, is_loopback, RegistryRef};
use super::retry::{parse_retry_after, transient_status, Attempt, RetryPolicy};
use super::signin;
use super::RegistryOptions;
use crate::keychain::{Credential, Keychain, Secret};
use crate::transport::TransportError;

/// How a request is authorised, once worked out for an operation.
#[derive(Clone)]
enum AuthHeader {
    None,
    Bearer(Secret),
    Basic { username: String, password: Secret },
}

pub(super) struct Conn {
    pub oci: oci_client::Client,
    http: reqwest::Client,
    /// `https://host[:port]` or `http://host[:port]`.
    pub base: String,
    auth: RegistryAuth,
    /// The Basic credentials too, for registries that want them as such.
    basic: Option<(String, Secret)>,
    /// An identity token (OAuth2 refresh token) to exchange for access.
    identity: Option<Secret>,
    headers: Mutex<HashMap<u8, AuthHeader>>,
    policy: RetryPolicy,
    /// `docker://registry/repository`, for messages.
    pub location: String,
    pub oci_ref: oci_client::Reference,
    certs_hint: PathBuf,
    registry: String,
    timeout: Duration,
}

fn op_key(op: RegistryOperation) -> u8 {
    match op {
        RegistryOperation::Pull => 0,
        RegistryOperation::Push => 1,
    }
}

impl Conn {
    pub async fn open(r: &RegistryRef, options: &RegistryOptions) -> Result<Conn, TransportError> {
        // reqwest is built without a default crypto provider (aws-lc does
        // not cross-compile to FreeBSD here); ring is installed once.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let location = format!("docker://{}", r.name());
        let registry = r.registry.clone();
        let host = api_host(&registry).to_string();
        let dirs = options.certs_dirs();
        let pems = load_certs(&dirs, &registry).map_err(|e| TransportError::Registry {
            location: location.clone(),
            message: e,
            user: true,
        })?;
        // A silent registry (no TCP answer, a stalled TLS handshake, a
        // body that stops) fails the request after `timeout`; requests are
        // then retried within the retry policy's bound.
        let timeout = options.timeout;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .user_agent(USER_AGENT);
        let mut reqwest_certs = Vec::new();
        for (path, pem) in &pems {
            reqwest_certs.push(reqwest::Certificate::from_pem(pem).map_err(|e| {
                TransportError::Registry {
                    location: location.clone(),
                    message: format!("{} is not a PEM certificate: {e}", path.display()),
                    user: true,
                }
            })?);
        }
        if !reqwest_certs.is_empty() {
            builder = builder.tls_certs_merge(reqwest_certs);
        }
        let http = builder.build().map_err(|e| TransportError::Registry {
            location: location.clone(),
            message: format!("cannot set up HTTP: {}", chain(&e)),
            user: false,
        })?;

        let plain_ok = is_loopback(&registry) || options.insecure.contains(&registry);
        let scheme = if plain_ok {
            probe_scheme(&http, &host, timeout).await
        } else {
            "https"
        };
        let config = ClientConfig {
            protocol: if scheme == "http" {
                ClientProtocol::HttpsExcept(vec![host.clone()])
            } else {
                ClientProtocol::Https
            },
            use_monolithic_push: true,
            extra_root_certificates: pems
                .into_iter()
                .map(|(_, data)| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data,
                })
                .collect(),
            platform_resolver: None,
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            user_agent: USER_AGENT,
            ..ClientConfig::default()
        };
        let oci = oci_client::Client::try_from(config).map_err(|e| TransportError::Registry {
            location: location.clone(),
            message: format!("cannot set up the registry client: {e}"),
            user: false,
        })?;

        let keychain = match &options.keychain {
            Some(k) => k.clone(),
            None => Keychain::from_env().map_err(|e| TransportError::Registry {
                location: location.clone(),
                message: format!("cannot read credentials: {e}"),
                user: true,
            })?,
        };
        let cred = keychain
            .get(&registry)
            .map_err(|e| TransportError::Registry {
                location: location.clone(),
                message: format!("cannot read credentials: {e}"),
                user: true,
            })?;
        let (basic, identity) = match cred {
            Some(Credential::Basic { username, password }) => (Some((username, password)), None),
            Some(Credential::IdentityToken(t)) => (None, Some(t)),
            None => (None, None),
        };
        let auth = match &basic {
            Some((u, p)) => RegistryAuth::Basic(u.clone(), p.expose().to_string()),
            None => RegistryAuth::Anonymous,
        };
        Ok(Conn {
            oci,
            http,
            base: format!("{scheme}://{host}"),
            auth,
            basic,
            identity,
            headers: Mutex::new(HashMap::new()),
            policy: options.retry.clone(),
            location,
            oci_ref: r.to_oci(),
            certs_hint: dirs.into_iter().next().unwrap_or_default(),
            registry,
            timeout,
        })
    }

    /// `/v2/<repository>/<kind>/<reference>` on this registry.
    pub fn url(&self, kind: &str, reference: &str) -> String {
        format!(
            "{}/v2/{}/{kind}/{reference}",
            self.base,
            self.oci_ref.repository()
        )
    }

    /// Works out (once per operation, again after a 401) how requests are
    /// authorised: a bearer token from the registry's token service, Basic
    /// credentials, or nothing.
    async fn auth_header(
        &self,
        op: RegistryOperation,
        fresh: bool,
    ) -> Result<AuthHeader, TransportError> {
        let mut headers = self.headers.lock().await;
        if !fresh {
            if let Some(h) = headers.get(&op_key(op)) {
                return Ok(h.clone());
            }
        }
        if let Some(refresh) = &self.identity {
            let header = self.identity_access(refresh, op).await?;
            headers.insert(op_key(op), header.clone());
            return Ok(header);
        }
        // The token service is a server like any other: retried alike.
        let started = Instant::now();
        let mut attempt = 0;
        let basic = self.basic.as_ref().map(|(u, p)| (u.as_str(), p));
        let repository = self.oci_ref.repository().to_string();
        let answer = loop {
            attempt += 1;
            let result = signin::sign_in(&self.http, &self.base, &repository, op, basic).await;
            let Err(signin::Failure::Transient(message)) = result else {
                break result;
            };
            match self.policy.next_delay(
                attempt,
                Attempt::Transient { retry_after: None },
                started,
                Instant::now(),
                fastrand::f64(),
            ) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => break Err(signin::Failure::Transient(message)),
            }
        };
        let header = match answer {
            Ok(signin::Outcome::Token(token)) => {
                // oci-client stores a bearer token as it is, asking nothing.
                let bearer = RegistryAuth::Bearer(token.expose().to_string());
                self.oci
                    .auth(&self.oci_ref, &bearer, op)
                    .await
                    .map_err(|e| self.oci_error(e, "sign in"))?;
                AuthHeader::Bearer(token)
            }
            Ok(signin::Outcome::NoTokenService) => {
                // oci-client learns of Basic credentials by its own
                // sign-in (a `/v2/` request; no token body is read).
                self.oci
                    .auth(&self.oci_ref, &self.auth, op)
                    .await
                    .map_err(|e| self.oci_error(e, "sign in"))?;
                match &self.basic {
                    Some((u, p)) => AuthHeader::Basic {
                        username: u.clone(),
                        password: p.clone(),
                    },
                    None => AuthHeader::None,
                }
            }
            Err(signin::Failure::Denied(status, words)) => {
                return Err(self.denied("sign in", status, &words))
            }
            Err(signin::Failure::Transient(message)) => {
                return Err(TransportError::Registry {
                    location: self.location.clone(),
                    message: format!(
                        "{message} (gave up after {attempt} attempts in {:.0?}; try again later)",
                        started.elapsed()
                    ),
                    user: false,
                })
            }
            Err(signin::Failure::Request(what, e)) => return Err(self.request_failed(&what, &e)),
            Err(signin::Failure::Final(message)) => {
                return Err(TransportError::Registry {
                    location: self.location.clone(),
                    message: format!("cannot sign in: {message}"),
                    user: false,
                })
            }
        };
        headers.insert(op_key(op), header.clone());
        Ok(header)
    }

    /// An access token for `op` in exchange for the identity token, handed
    /// to oci-client too (it then skips its own sign-in).
    async fn identity_access(
        &self,
        refresh: &Secret,
        op: RegistryOperation,
    ) -> Result<AuthHeader, TransportError> {
        let what = "sign in with the identity token";
        let resp = self
            .http
            .get(format!("{}/v2/", self.base))
            .send()
            .await
            .map_err(|e| self.request_failed(what, &e))?;
        let challenge = resp
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(oauth::parse_bearer)
            .ok_or_else(|| TransportError::Registry {
                location: self.location.clone(),
                message: format!(
                    "{what}: the registry does not use token sign-in; \
                     sign in with a user name and password (`jbuild login {}`)",
                    self.registry
                ),
                user: true,
            })?;
        let scope = match op {
            RegistryOperation::Pull => format!("repository:{}:pull", self.oci_ref.repository()),
            RegistryOperation::Push => {
                format!("repository:{}:pull,push", self.oci_ref.repository())
            }
        };
        let access = oauth::exchange(&self.http, &challenge, &scope, refresh)
            .await
            .map_err(|e| {
                if e.denied {
                    self.denied(what, 401, &e.message)
                } else {
                    TransportError::Registry {
                        location: self.location.clone(),
                        message: format!("{what}: {}", e.message),
                        user: false,
                    }
                }
            })?;
        let bearer = RegistryAuth::Bearer(access.expose().to_string());
        self.oci
            .auth(&self.oci_ref, &bearer, op)
            .await
            .map_err(|e| self.oci_error(e, what))?;
        Ok(AuthHeader::Bearer(access))
    }

    /// Signs in for `op` if not yet done, so oci-client holds a token.
    pub async fn ensure_auth(&self, op: RegistryOperation) -> Result<(), TransportError> {
        self.auth_header(op, false).await.map(drop)
    }

    fn authorise(req: RequestBuilder, h: &AuthHeader) -> RequestBuilder {
        match h {
            AuthHeader::None => req,
            AuthHeader::Bearer(t) => req.bearer_auth(t.expose()),
            AuthHeader::Basic { username, password } => {
                req.basic_auth(username, Some(password.expose()))
            }
        }
    }

    /// Sends a request built by `build`, retrying as the policy says and
    /// signing in again once on a 401. Returns the first answer that is
    /// not worth retrying (which may be an error status: the caller reads
    /// it).
    pub async fn send(
        &self,
        op: RegistryOperation,
        what: &str,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Response, TransportError> {
        let started = Instant::now();
        let mut attempt = 0;
        let mut reauthed = false;
        loop {
            attempt += 1;
            let header = self.auth_header(op, false).await?;
            let (outcome, failure) = match Self::authorise(build(&self.http), &header).send().await
            {
                Ok(resp) if resp.status() == StatusCode::UNAUTHORIZED && !reauthed => {
                    reauthed = true;
                    self.auth_header(op, true).await?;
                    attempt -= 1;
                    continue;
                }
                Ok(resp) if transient_status(resp.status().as_u16()) => {
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, SystemTime::now()));
                    let status = resp.status();
                    let detail = error_body(resp).await;
                    (
                        Attempt::Transient { retry_after },
                        format!("{what}: the registry answered {status}{detail}"),
                    )
                }
                Ok(resp) => return Ok(resp),
                Err(e) if transient_request_error(&e) => (
                    Attempt::Transient { retry_after: None },
                    self.network(what, &e),
                ),
                Err(e) => return Err(self.request_failed(what, &e)),
            };
            match self
                .policy
                .next_delay(attempt, outcome, started, Instant::now(), fastrand::f64())
            {
                Some(wait) => {
                    tracing::debug!(%failure, ?wait, attempt, "retrying");
                    tokio::time::sleep(wait).await;
                }
                None => {
                    return Err(TransportError::Registry {
                        location: self.location.clone(),
                        message: format!(
                        "{failure} (gave up after {attempt} attempts in {:.0?}; try again later)",
                        started.elapsed()
                    ),
                        user: false,
                    })
                }
            }
        }
    }

    /// Runs an oci-client operation with the same retries, signing in
    /// again once when the registry says the token has expired.
    pub async fn retry_oci<T, F, Fut>(
        &self,
        op: RegistryOperation,
        what: &str,
        f: F,
    ) -> Result<T, TransportError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, OciDistributionError>>,
    {
        let started = Instant::now();
        let mut attempt = 0;
        let mut reauthed = false;
        // oci-client keeps its own token; make sure it has one for `op`.
        self.auth_header(op, false).await?;
        loop {
            attempt += 1;
            let e = match f().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let outcome = match classify(&e) {
                Class::Unauthorized if !reauthed => {
                    reauthed = true;
                    attempt -= 1;
                    self.auth_header(op, true).await?;
                    continue;
                }
                Class::Transient => Attempt::Transient { retry_after: None },
                Class::Unauthorized | Class::Final => Attempt::Final,
            };
            match self
                .policy
                .next_delay(attempt, outcome, started, Instant::now(), fastrand::f64())
            {
                Some(wait) => {
                    tracing::debug!(error = %e, ?wait, attempt, "retrying");
                    tokio::time::sleep(wait).await;
                }
                None => return Err(self.oci_error(e, what)),
            }
        }
    }

    /// An oci-client error as the user should read it.
    pub fn oci_error(&self, e: OciDistributionError, what: &str) -> TransportError {
        let status = match &e {
            OciDistributionError::ServerError { code, .. } => Some(*code),
            OciDistributionError::UnauthorizedError { .. } => Some(401),
            OciDistributionError::AuthenticationFailure(_) => Some(401),
            OciDistributionError::RequestError(r) => r.status().map(|s| s.as_u16()),
            _ => None,
        };
        if let OciDistributionError::RequestError(r) = &e {
            if r.status().is_none() {
                return self.request_failed(what, r);
            }
        }
        if let OciDistributionError::ServerError {
            code: 400, message, ..
        } = &e
        {
            // MANIFEST_BLOB_UNKNOWN (the spec's code for a manifest push).
            if message.contains("BLOB_UNKNOWN") {
                return TransportError::BlobUnknown {
                    location: self.location.clone(),
                    what: what.to_string(),
                    detail: errors_in(message.as_bytes()).unwrap_or_else(|| short(message)),
                };
            }
        }
        let detail = match &e {
            OciDistributionError::ServerError { message, .. } => {
                errors_in(message.as_bytes()).unwrap_or_else(|| short(message))
            }
            OciDistributionError::RegistryError { envelope, .. } => envelope
                .errors
                .iter()
                .map(|x| format!("{:?}: {}", x.code, x.message))
                .collect::<Vec<_>>()
                .join("; "),
            other => other.to_string(),
        };
        match status {
            Some(401) | Some(403) => self.denied(what, status.unwrap_or(401), &detail),
            Some(404) => TransportError::Registry {
                location: self.location.clone(),
                message: format!("{what}: not found ({detail}); check the name"),
                user: true,
            },
            _ => TransportError::Registry {
                location: self.location.clone(),
                message: format!("cannot {what}: {detail}"),
                user: matches!(status, Some(400..=499)),
            },
        }
    }

    pub fn denied(&self, what: &str, status: u16, detail: &str) -> TransportError {
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        };
        TransportError::Registry {
            location: self.location.clone(),
            message: if matches!(self.auth, RegistryAuth::Anonymous) {
                format!(
                    "{what}: access denied ({status}){detail}; sign in with `jbuild login {}`, \
                     or check that the repository exists and your account may use it",
                    self.registry
                )
            } else {
                format!(
                    "{what}: access denied ({status}){detail} with the credentials kept for {0}; \
                     check them with `jbuild login {0}`, and that the repository exists and \
                     your account may use it",
                    self.registry
                )
            },
            user: true,
        }
    }

    /// A final answer with an unexpected status, as an error.
    pub async fn status_error(&self, what: &str, resp: Response) -> TransportError {
        let status = resp.status();
        let detail = error_body(resp).await;
        match status.as_u16() {
            401 | 403 => self.denied(what, status.as_u16(), detail.trim_start_matches(": ")),
            code => TransportError::Registry {
                location: self.location.clone(),
                message: format!("{what}: the registry answered {status}{detail}"),
                user: (400..500).contains(&code),
            },
        }
    }

    /// A request or body that failed on the way, as a message.
    pub fn network(&self, what: &str, e: &reqwest::Error) -> String {
        if e.is_timeout() {
            return self.timed_out(what, e);
        }
        format!("{what}: {}", chain(e))
    }

    /// A request given up because the registry stayed silent.
    fn timed_out(&self, what: &str, e: &reqwest::Error) -> String {
        format!(
            "{what}: timed out: {} sent nothing for {} s ({}); raise `timeout_secs` under \
             [registries] in the configuration file if it is only slow",
            self.registry,
            self.timeout.as_secs(),
            chain(e)
        )
    }

    /// A request that got no answer: TLS trouble gets its own advice.
    fn request_failed(&self, what: &str, e: &reqwest::Error) -> TransportError {
        if e.is_timeout() {
            return TransportError::Registry {
                location: self.location.clone(),
                message: self.timed_out(what, e),
                user: false,
            };
        }
        let text = chain(e);
        if is_tls_error(&text) {
            return TransportError::Registry {
                location: self.location.clone(),
                message: format!(
                    "{what}: TLS failed ({text}); if the registry uses its own CA, put the CA \
                     certificate in {}/{}/ca.crt (or set `certs_dir` under [registries] in the \
                     configuration file); if it speaks plain HTTP, list \"{}\" under \
                     [registries] insecure",
                    self.certs_hint.display(),
                    self.registry,
                    self.registry
                ),
                user: true,
            };
        }
        TransportError::Registry {
            location: self.location.clone(),
            message: format!("{what}: {text}; check that the registry is up and reachable"),
            user: false,
        }
    }
}

const USER_AGENT: &str = concat!("jbuild/", env!("CARGO_PKG_VERSION"));

enum Class {
    Transient,
    Unauthorized,
    Final,
}

fn classify(e: &OciDistributionError) -> Class {
    match e {
        OciDistributionError::ServerError { code, .. } if *code == 401 => Class::Unauthorized,
        OciDistributionError::ServerError { code, .. } if transient_status(*code) => {
            Class::Transient
        }
        OciDistributionError::UnauthorizedError { .. } => Class::Unauthorized,
        OciDistributionError::RequestError(r) => match r.status() {
            Some(s) if s == StatusCode::UNAUTHORIZED => Class::Unauthorized,
            Some(s) if transient_status(s.as_u16()) => Class::Transient,
            Some(_) => Class::Final,
            None if transient_request_error(r) => Class::Transient,
            None => Class::Final,
        },
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<String> = envelope
                .errors
                .iter()
                .map(|x| format!("{:?}", x.code).to_ascii_uppercase())
                .collect();
            if codes.iter().any(|c| c.contains("TOOMANYREQUESTS")) {
                Class::Transient
            } else if codes.iter().any(|c| c.contains("UNAUTHORIZED")) {
                Class::Unauthorized
            } else {
                Class::Final
            }
        }
        _ => Class::Final,
    }
}

/// Connection refused or reset, a timeout, a body cut short: worth another
/// try. A TLS failure is not: it will fail the same way.
fn transient_request_error(e: &reqwest::Error) -> bool {
    if is_tls_error(&chain(e)) {
        return false;
    }
    e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() || e.is_decode()
}

fn is_tls_error(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("certificate") || t.contains("tls") || t.contains("handshake")
}

/// An error and its causes on one line.
pub use crate::report::error_chain as chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_errors_are_not_retried() {
        assert!(is_tls_error("invalid peer certificate: UnknownIssuer"));
        assert!(!is_tls_error("connection refused"));
    }
}
