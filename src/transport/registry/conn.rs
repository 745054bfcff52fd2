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
use std::time::{Duration, Instant, SystemTime};

use reqwest::{RequestBuilder, Response, StatusCode};
use tokio::sync::Mutex;

use super::body::{error_body, ErrorBody};
use super::challenge::Challenge;
use super::endpoint::{reach, Endpoint, Ping};
use super::failure::{is_transient, unanswered, user_of, Target};
use super::options::{RegistryOperation, RegistryOptions};
use super::reference::RegistryRef;
use super::retry::{parse_retry_after, transient_status, Attempt, RetryPolicy};
use super::signin::{self, AuthHeader};
use crate::keychain::{Credential, DefaultKeychain, Keychain};
use crate::report::error_chain as chain;
use crate::transport::TransportError;

/// Why one attempt of [`Conn::retry`] did not give a value.
pub(super) enum Failed {
    /// Worth another try (connection error, 408, 429, 5xx); `message` says
    /// what happened, for when no try is left.
    Transient {
        retry_after: Option<Duration>,
        message: String,
        /// The error to give when no try is left, when it says more than
        /// `message` (a registry that cannot be reached).
        last: Option<TransportError>,
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

pub(super) struct Conn {
    http: reqwest::Client,
    /// `https://host[:port]` or `http://host[:port]`.
    pub base: String,
    /// The credentials kept for the registry, if any.
    cred: Option<Credential>,
    headers: Mutex<HashMap<u8, AuthHeader>>,
    /// The registry's `/v2/` answer from the scheme's probe, for the first
    /// sign-in (taken by it: signing in again asks afresh).
    ping: std::sync::Mutex<Option<Ping>>,
    policy: RetryPolicy,
    /// `docker://registry/repository`, for messages.
    pub location: String,
    /// The repository's path on the registry (`library/alpine`).
    repository: String,
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
        let Endpoint { http, base, ping } = reach(&registry, options).await?;
        let timeout = options.timeout;

        let cred = match &options.keychain {
            Some(k) => k.get(&registry),
            None => DefaultKeychain::from_env().and_then(|k| k.get(&registry)),
        }
        .map_err(|source| TransportError::Credentials {
            location: location.clone(),
            source,
        })?;
        Ok(Conn {
            http,
            base,
            cred,
            headers: Mutex::new(HashMap::new()),
            ping: std::sync::Mutex::new(ping),
            policy: options.retry.clone(),
            location,
            repository: r.repository.clone(),
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
        // The token service is a server like any other: retried alike.
        let started = Instant::now();
        let mut attempt = 0;
        let scope = match op {
            RegistryOperation::Pull => format!("repository:{}:pull", self.repository),
            RegistryOperation::Push => format!("repository:{}:pull,push", self.repository),
        };
        let signed = loop {
            attempt += 1;
            let known = if fresh {
                None
            } else {
                self.ping.lock().unwrap_or_else(|p| p.into_inner()).take()
            };
            let signing = signin::sign_in(
                &self.http,
                &self.base,
                Some(&scope),
                self.cred.as_ref(),
                known,
            );
            match signing.await {
                Err(f) if f.is_transient() => {
                    let wait = self.policy.next_delay(
                        attempt,
                        Attempt::Transient { retry_after: None },
                        started,
                        Instant::now(),
                        fastrand::f64(),
                    );
                    match wait {
                        Some(wait) => tokio::time::sleep(wait).await,
                        None => return Err(f.into_error(&self.target(), "sign in")),
                    }
                }
                Err(f) => return Err(f.into_error(&self.target(), "sign in")),
                Ok(signed) => break signed,
            }
        };
        // Only a bearer token is scoped to the operation; no header, or
        // Basic credentials, serve every operation, so a push's sign-in for
        // its `HEAD`s also serves its uploads (no second `GET /v2/`).
        if matches!(signed.challenge, Some(Challenge::Bearer(_))) {
            headers.insert(op_key(op), signed.header.clone());
        } else {
            for every in [RegistryOperation::Pull, RegistryOperation::Push] {
                headers.insert(op_key(every), signed.header.clone());
            }
        }
        Ok(signed.header)
    }

    /// Who asks, for errors.
    fn target(&self) -> Target<'_> {
        Target {
            location: &self.location,
            registry: &self.registry,
            user: self.cred.as_ref().map(user_of),
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
                    last,
                }) => (Attempt::Transient { retry_after }, (message, last)),
            };
            let (failure, last) = failure;
            match self
                .policy
                .next_delay(attempt, outcome, started, Instant::now(), fastrand::f64())
            {
                Some(wait) => {
                    tracing::debug!(%failure, ?wait, attempt, "retrying");
                    tokio::time::sleep(wait).await;
                }
                None => {
                    if let Some(e) = last {
                        return Err(e);
                    }
                    return Err(TransportError::Registry {
                        location: self.location.clone(),
                        message: format!(
                        "{failure} (gave up after {attempt} attempts in {:.0?}; try again later)",
                        started.elapsed()
                    ),
                        user: false,
                    });
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
            .map_err(|e| Failed::Final(self.request_failed(what, "", e)))?;
        if same_origin(req.url(), &self.base) {
            header.apply(&mut req);
        }
        let url = req.url().to_string();
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
                    last: None,
                })
            }
            Ok(resp) => Ok(resp),
            Err(e) if is_transient(&e) => Err(Failed::Transient {
                retry_after: None,
                message: self.network(what, &e),
                last: (e.is_connect() || e.is_timeout())
                    .then(|| self.request_failed(what, &url, e)),
            }),
            Err(e) => Err(Failed::Final(self.request_failed(what, &url, e))),
        }
    }

    pub fn denied(&self, what: &str, status: u16, detail: &str) -> TransportError {
        TransportError::Denied {
            location: self.location.clone(),
            what: what.to_string(),
            registry: self.registry.clone(),
            status,
            user: self.cred.as_ref().map(|c| user_of(c).to_string()),
            detail: detail.to_string(),
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
    pub fn answered(&self, what: &str, status: StatusCode, detail: &ErrorBody) -> TransportError {
        match status.as_u16() {
            401 | 403 => self.denied(what, status.as_u16(), &detail.words()),
            code => TransportError::Registry {
                location: self.location.clone(),
                message: format!("{what}: the registry answered {status}{detail}"),
                user: (400..500).contains(&code),
            },
        }
    }

    /// A transfer given up by its rate floor or deadline.
    pub fn too_slow(&self, what: &str, slow: super::pace::Slow) -> TransportError {
        TransportError::TooSlow {
            location: self.location.clone(),
            what: what.to_string(),
            registry: self.registry.clone(),
            slow,
        }
    }

    /// A whole blob the registry served that is not the blob `expected`
    /// names.
    pub fn wrong_content(
        &self,
        expected: &crate::digest::Digest,
        actual: &crate::digest::Digest,
        detail: String,
    ) -> TransportError {
        TransportError::WrongContent {
            location: self.location.clone(),
            registry: self.registry.clone(),
            expected: expected.to_string(),
            actual: actual.to_string(),
            detail,
        }
    }

    /// The registry, `host[:port]`, for messages.
    pub fn registry(&self) -> &str {
        &self.registry
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

    /// A request to `url` that got no answer: a registry that cannot be
    /// reached, TLS trouble, a stall.
    fn request_failed(&self, what: &str, url: &str, e: reqwest::Error) -> TransportError {
        unanswered(&self.target(), what, url, e)
    }
}
