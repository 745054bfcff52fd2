//! Checking a credential against a registry before keeping it, as
//! `docker login` does: `GET /v2/`, and when the registry challenges
//! (`401` with `WWW-Authenticate`), answer the challenge with the
//! credential:
//!
//! - `Basic realm=...`: the same request again with basic auth;
//! - `Bearer realm=URL,service=S`: ask `URL?service=S&account=USER` for a
//!   token with basic auth (docker's token spec; no scope, login asks for
//!   nothing but identity), then `GET /v2/` with that token.
//!
//! The registry's own error message (the spec's `errors[].message`) is
//! kept for the person reading; the credential never is.

use std::time::Duration;

use super::body::{head_of_body, read_capped};
use crate::keychain::Credential;

/// Why a login did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The registry (or its token service) said no: the user's mistake.
    #[error("{registry} rejected the credentials{user}: {detail}")]
    Rejected {
        registry: String,
        user: String,
        detail: String,
    },
    /// Nothing answered, or TLS failed: usually a wrong name, a missing CA
    /// or a registry that speaks only plain HTTP.
    #[error("cannot reach {url}: {detail}{}", tls_hint(detail))]
    Unreachable { url: String, detail: String },
    /// An answer jbuild cannot work with.
    #[error("{url}: {detail}")]
    Protocol { url: String, detail: String },
}

fn tls_hint(detail: &str) -> &'static str {
    if detail.to_ascii_lowercase().contains("certificate") {
        "\n  if the registry uses its own CA, put the CA certificate in \
         /etc/docker/certs.d/HOST:PORT/ca.crt (or the `certs_dir` set under [registries] \
         in the configuration file)"
    } else {
        ""
    }
}

impl VerifyError {
    /// Whether the person at the keyboard can fix it (exit 1) rather than
    /// the registry or jbuild being at fault (exit 2).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, VerifyError::Protocol { .. })
    }
}

/// Checks `cred` against the registry served at `base`
/// (`https://host[:port]`); `registry` names it in messages.
pub async fn verify(
    http: &reqwest::Client,
    registry: &str,
    base: &str,
    cred: &Credential,
) -> Result<(), VerifyError> {
    let (user, password) = match cred {
        Credential::Basic { username, password } => (username.as_str(), password.expose()),
        // docker's convention for a token sent where a password goes.
        Credential::IdentityToken(t) => ("<token>", t.expose()),
    };
    let url = format!("{base}/v2/");
    let first = send(http.get(&url), &url).await?;
    if first.status().is_success() {
        // No authentication at all: any credential "works", as with docker.
        return Ok(());
    }
    if first.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Err(unexpected(&url, first).await);
    }
    let challenge = first
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ");
    let rejected = |detail: String| VerifyError::Rejected {
        registry: registry.to_string(),
        user: format!(" for user `{user}`"),
        detail,
    };
    let parsed = http_auth::parse_challenges(&challenge).map_err(|e| VerifyError::Protocol {
        url: url.clone(),
        detail: format!("unreadable WWW-Authenticate header ({e})"),
    })?;
    let param = |c: &http_auth::ChallengeRef<'_>, name: &str| {
        c.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_unescaped())
    };
    if let Some(c) = parsed
        .iter()
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
    {
        let Some(realm) = param(c, "realm") else {
            return Err(VerifyError::Protocol {
                url,
                detail: "a Bearer challenge without a realm".into(),
            });
        };
        let mut query = vec![("account", user.to_string())];
        if let Some(s) = param(c, "service") {
            query.push(("service", s));
        }
        let token_url =
            reqwest::Url::parse_with_params(&realm, &query).map_err(|e| VerifyError::Protocol {
                url: url.clone(),
                detail: format!("the token realm `{realm}` is not a URL ({e})"),
            })?;
        let token_req = http.get(token_url).basic_auth(user, Some(password));
        let resp = send(token_req, &realm).await?;
        if matches!(resp.status().as_u16(), 401 | 403) {
            return Err(rejected(registry_message(resp).await));
        }
        if !resp.status().is_success() {
            return Err(unexpected(&realm, resp).await);
        }
        // A token answer is a few KiB; a bigger one is not read whole.
        let bytes = read_capped(resp, MAX_TOKEN_ANSWER + 1)
            .await
            .map_err(|(_, e)| VerifyError::Unreachable {
                url: realm.clone(),
                detail: error_chain(&e),
            })?;
        if bytes.len() > MAX_TOKEN_ANSWER {
            return Err(VerifyError::Protocol {
                url: realm.clone(),
                detail: format!(
                    "the token service's answer is larger than {} KiB; that is not a token",
                    MAX_TOKEN_ANSWER / 1024
                ),
            });
        }
        let body: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| VerifyError::Protocol {
                url: realm.clone(),
                detail: format!("the token service answered something that is not JSON ({e})"),
            })?;
        let token = ["token", "access_token"]
            .iter()
            .find_map(|k| {
                body.get(*k)
                    .and_then(|v| v.as_str())
                    .filter(|t| !t.is_empty())
            })
            .ok_or_else(|| VerifyError::Protocol {
                url: realm.clone(),
                detail: "the token service's answer holds no token".into(),
            })?
            .to_string();
        let resp = send(http.get(&url).bearer_auth(token), &url).await?;
        return check_final(resp, &url, rejected).await;
    }
    if parsed
        .iter()
        .any(|c| c.scheme.eq_ignore_ascii_case("basic"))
    {
        let resp = send(http.get(&url).basic_auth(user, Some(password)), &url).await?;
        return check_final(resp, &url, rejected).await;
    }
    Err(VerifyError::Protocol {
        url,
        detail: format!(
            "the registry asks for an authentication scheme jbuild does not speak: {challenge}"
        ),
    })
}

/// The largest token-service answer read.
const MAX_TOKEN_ANSWER: usize = 1 << 20;

async fn check_final(
    resp: reqwest::Response,
    url: &str,
    rejected: impl Fn(String) -> VerifyError,
) -> Result<(), VerifyError> {
    match resp.status().as_u16() {
        200..=299 => Ok(()),
        401 | 403 => Err(rejected(registry_message(resp).await)),
        _ => Err(unexpected(url, resp).await),
    }
}

async fn send(req: reqwest::RequestBuilder, url: &str) -> Result<reqwest::Response, VerifyError> {
    req.timeout(Duration::from_secs(60))
        .send()
        .await
        .map_err(|e| VerifyError::Unreachable {
            url: url.to_string(),
            detail: error_chain(&e),
        })
}

async fn unexpected(url: &str, resp: reqwest::Response) -> VerifyError {
    let status = resp.status();
    VerifyError::Protocol {
        url: url.to_string(),
        detail: format!(
            "unexpected answer {status}: {}",
            registry_message(resp).await
        ),
    }
}

/// The first `errors[].message` of a spec error body, else the status.
async fn registry_message(resp: reqwest::Response) -> String {
    let status = resp.status();
    // At most 64 KiB: an error body is a few hundred bytes, and one that
    // does not end must not fill the memory.
    let body = head_of_body(resp, 64 * 1024).await;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let msg = v["errors"][0]["message"]
        .as_str()
        .or_else(|| v["details"].as_str())
        .map(str::to_string);
    match msg {
        Some(m) if !m.is_empty() => format!("{m} ({status})"),
        _ => status.to_string(),
    }
}

/// A reqwest error with its causes (the TLS reason is several levels
/// down), without the URL's credentials (there are none in ours).
fn error_chain(e: &reqwest::Error) -> String {
    let mut s = crate::report::error_chain(e);
    if e.is_timeout() {
        s.push_str(
            ": timed out (the registry sent nothing for too long; \
             `timeout_secs` under [registries] in the configuration file sets how long)",
        );
    }
    s
}
