//! One connection to one registry repository: the scheme (HTTPS, or plain
//! HTTP where allowed), CA certificates, credentials, tokens, and every
//! request sent with retries.
//!
//! Every request is jbuild's own, on reqwest: the distribution API is a
//! handful of calls, and each answer is read closely — its headers
//! (`Retry-After`, `Content-Range`, `Location`) and at most a bounded head
//! of its body. (jbuild used oci-client until it measured that a registry
//! answering a push with a 50 MB error body cost 223 MB of memory:
//! oci-client reads error bodies whole and hides response headers.)
//! Credentials go only to this registry's own origin, never to an upload
//! `Location` on another host.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use reqwest::{RequestBuilder, Response, StatusCode};
use tokio::sync::Mutex;

use super::body::error_body;
use super::endpoint::{reach, Endpoint};
use super::oauth;
use super::options::{RegistryOperation, RegistryOptions};
use super::reference::RegistryRef;
use super::retry::{parse_retry_after, transient_status, Attempt, RetryPolicy};
use super::signin;
use crate::keychain::{Credential, DefaultKeychain, Keychain, Secret};
use crate::report::error_chain as chain;
use crate::transport::TransportError;

/// Why one attempt of [`Conn::retry`] did not give a value.
pub(super) enum Failed {
    /// Worth another try (connection error, 408, 429, 5xx); `message` says
    /// what happened, for when no try is left.
    Transient {
        retry_after: Option<Duration>,
        message: String,
    },
    /// A 401 before jbuild signed in again.
    Unauthorized,
    /// An answer or error that another try would not change.
    Final(TransportError),
}

/// Whether `url` goes to the registry at `base` (same scheme, host and
/// port): only then are credentials sent with it.
fn same_origin(url: &reqwest::Url, base: &str) -> bool {
    reqwest::Url::parse(base).is_ok_and(|b| b.origin() == url.origin())
}

/// Adds the `Authorization` header `h` gives, marked sensitive.
fn authorise(req: &mut reqwest::Request, h: &AuthHeader) {
    use base64::Engine as _;
    let value = match h {
        AuthHeader::None => return,
        AuthHeader::Bearer(t) => format!("Bearer {}", t.expose()),
        AuthHeader::Basic { username, password } => format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{username}:{}", password.expose()))
        ),
    };
    if let Ok(mut v) = reqwest::header::HeaderValue::from_str(&value) {
        v.set_sensitive(true);
        req.headers_mut().insert(reqwest::header::AUTHORIZATION, v);
    }
}

/// How a request is authorised, once worked out for an operation.
#[derive(Clone)]
enum AuthHeader {
    None,
    Bearer(Secret),
    Basic { username: String, password: Secret },
}

pub(super) struct Conn {
    http: reqwest::Client,
    /// `https://host[:port]` or `http://host[:port]`.
    pub base: String,
    /// The Basic credentials too, for registries that want them as such.
    basic: Option<(String, Secret)>,
    /// An identity token (OAuth2 refresh token) to exchange for access.
    identity: Option<Secret>,
    headers: Mutex<HashMap<u8, AuthHeader>>,
    policy: RetryPolicy,
    /// `docker://registry/repository`, for messages.
    pub location: String,
    /// The repository's path on the registry (`library/alpine`).
    repository: String,
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
        let location = format!("docker://{}", r.name());
        let registry = r.registry.clone();
        let Endpoint { http, base } = reach(&registry, options).await?;
        let timeout = options.timeout;
        let dirs = options.certs_dirs();

        let cred = match &options.keychain {
            Some(k) => k.get(&registry),
            None => DefaultKeychain::from_env().and_then(|k| k.get(&registry)),
        }
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
        Ok(Conn {
            http,
            base,
            basic,
            identity,
            headers: Mutex::new(HashMap::new()),
            policy: options.retry.clone(),
            location,
            repository: r.repository.clone(),
            certs_hint: dirs.into_iter().next().unwrap_or_default(),
            registry,
            timeout,
        })
    }

    /// `/v2/<repository>/<kind>/<reference>` on this registry.
    pub fn url(&self, kind: &str, reference: &str) -> String {
        format!("{}/v2/{}/{kind}/{reference}", self.base, self.repository)
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
        let repository = self.repository.clone();
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
            Ok(signin::Outcome::Token(token)) => AuthHeader::Bearer(token),
            Ok(signin::Outcome::NoTokenService) => match &self.basic {
                Some((u, p)) => AuthHeader::Basic {
                    username: u.clone(),
                    password: p.clone(),
                },
                None => AuthHeader::None,
            },
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

    /// An access token for `op` in exchange for the identity token.
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
            RegistryOperation::Pull => format!("repository:{}:pull", self.repository),
            RegistryOperation::Push => {
                format!("repository:{}:pull,push", self.repository)
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
        Ok(AuthHeader::Bearer(access))
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
        self.retry(op, what, |reauthed| {
            self.send_once(op, what, &build, reauthed)
        })
        .await
    }

    /// Runs `attempt` (told whether jbuild has signed in again already)
    /// until it returns a value or a final error: a transient failure is
    /// tried again as the policy says, a 401 once after signing in again.
    /// Used for one request ([`Conn::send`]) and for sequences that must be
    /// started over as a whole (an upload: a new session, then its `PUT`).
    pub async fn retry<T, F, Fut>(
        &self,
        op: RegistryOperation,
        what: &str,
        attempt_fn: F,
    ) -> Result<T, TransportError>
    where
        F: Fn(bool) -> Fut,
        Fut: Future<Output = Result<T, Failed>>,
    {
        let started = Instant::now();
        let mut attempt = 0;
        let mut reauthed = false;
        loop {
            attempt += 1;
            let (outcome, failure) = match attempt_fn(reauthed).await {
                Ok(v) => return Ok(v),
                Err(Failed::Final(e)) => return Err(e),
                Err(Failed::Unauthorized) if reauthed => return Err(self.denied(what, 401, "")),
                Err(Failed::Unauthorized) => {
                    reauthed = true;
                    attempt -= 1;
                    self.auth_header(op, true).await?;
                    continue;
                }
                Err(Failed::Transient {
                    retry_after,
                    message,
                }) => (Attempt::Transient { retry_after }, message),
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

    /// One request, authorised for `op` when it goes to this registry (an
    /// upload `Location` on another host gets no credentials). A 401 is
    /// [`Failed::Unauthorized`] until jbuild has signed in again
    /// (`reauthed`), then an answer like any other.
    pub async fn send_once(
        &self,
        op: RegistryOperation,
        what: &str,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
        reauthed: bool,
    ) -> Result<Response, Failed> {
        let header = self.auth_header(op, false).await.map_err(Failed::Final)?;
        let mut req = build(&self.http)
            .build()
            .map_err(|e| Failed::Final(self.request_failed(what, &e)))?;
        if same_origin(req.url(), &self.base) {
            authorise(&mut req, &header);
        }
        match self.http.execute(req).await {
            Ok(resp) if resp.status() == StatusCode::UNAUTHORIZED && !reauthed => {
                Err(Failed::Unauthorized)
            }
            Ok(resp) if transient_status(resp.status().as_u16()) => {
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, SystemTime::now()));
                let status = resp.status();
                let detail = error_body(resp).await;
                Err(Failed::Transient {
                    retry_after,
                    message: format!("{what}: the registry answered {status}{detail}"),
                })
            }
            Ok(resp) => Ok(resp),
            Err(e) if transient_request_error(&e) => Err(Failed::Transient {
                retry_after: None,
                message: self.network(what, &e),
            }),
            Err(e) => Err(Failed::Final(self.request_failed(what, &e))),
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
            message: if self.basic.is_none() && self.identity.is_none() {
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
        self.answered(what, status, &detail)
    }

    /// [`Conn::status_error`] once the body is read: `detail` is what
    /// [`error_body`] made of it.
    pub fn answered(&self, what: &str, status: StatusCode, detail: &str) -> TransportError {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_errors_are_not_retried() {
        assert!(is_tls_error("invalid peer certificate: UnknownIssuer"));
        assert!(!is_tls_error("connection refused"));
    }
}
