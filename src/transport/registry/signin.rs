//! Signing in with a user name and password (or anonymously) at a
//! registry's token service: the distribution token spec's `GET realm?
//! scope=…&service=…` with Basic credentials.
//!
//! The answer is read up to [`MAX_ANSWER`] and refused beyond it: a token
//! service that answers 50 MB (or never stops) costs no more memory than
//! one that answers 1 KiB.

use reqwest::header::WWW_AUTHENTICATE;

use super::body::{head_of_body, read_capped};
use super::oauth::{parse_bearer, MAX_ANSWER};
use super::options::RegistryOperation;
use super::retry::transient_status;
use crate::keychain::Secret;
use crate::report::error_chain as chain;

/// What the registry's `/v2/` asked for.
pub enum Outcome {
    /// A token from its token service.
    Token(Secret),
    /// No token service: Basic credentials or nothing.
    NoTokenService,
}

/// Why signing in failed.
pub enum Failure {
    /// Worth another try (connection error, 408, 429, 5xx): the message.
    Transient(String),
    /// The token service refused the credentials: status and its words.
    Denied(u16, String),
    /// A request that got no answer and will not get one by trying again
    /// (TLS trouble): what was being done, and the error.
    Request(String, reqwest::Error),
    /// Anything else: the message.
    Final(String),
}

/// Signs in for `op` on `repository` at `base` (`https://host[:port]`).
pub async fn sign_in(
    http: &reqwest::Client,
    base: &str,
    repository: &str,
    op: RegistryOperation,
    basic: Option<(&str, &Secret)>,
) -> Result<Outcome, Failure> {
    let request_failed = |what: &str, e: reqwest::Error| {
        let text = if e.is_timeout() {
            format!(
                "{what}: timed out: nothing came for longer than `timeout_secs` under \
                 [registries] allows ({})",
                chain(&e)
            )
        } else {
            format!("{what}: {}", chain(&e))
        };
        let tls = text.to_ascii_lowercase().contains("certificate");
        if !tls && (e.is_connect() || e.is_timeout() || e.is_request() || e.is_body()) {
            return Failure::Transient(text);
        }
        Failure::Request(what.to_string(), e)
    };
    let resp = http
        .get(format!("{base}/v2/"))
        .send()
        .await
        .map_err(|e| request_failed("cannot reach the registry", e))?;
    let challenge = resp
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_bearer);
    drop(resp);
    let Some(challenge) = challenge else {
        return Ok(Outcome::NoTokenService);
    };
    let scope = match op {
        RegistryOperation::Pull => format!("repository:{repository}:pull"),
        RegistryOperation::Push => format!("repository:{repository}:pull,push"),
    };
    let mut params = vec![("scope", scope.as_str())];
    if let Some(s) = &challenge.service {
        params.push(("service", s));
    }
    let url = url::Url::parse_with_params(&challenge.realm, &params).map_err(|e| {
        Failure::Final(format!(
            "the registry's token service `{}` is not a URL: {e}",
            challenge.realm
        ))
    })?;
    let mut req = http.get(url);
    if let Some((user, password)) = basic {
        req = req.basic_auth(user, Some(password.expose()));
    }
    let what = format!("ask the token service {} for a token", challenge.realm);
    let resp = req.send().await.map_err(|e| request_failed(&what, e))?;
    let status = resp.status();
    if !status.is_success() {
        let body = head_of_body(resp, 4096).await;
        let words = String::from_utf8_lossy(&body).trim().to_string();
        let words: String = words.chars().take(200).collect();
        return Err(match status.as_u16() {
            401 | 403 => Failure::Denied(status.as_u16(), words),
            code if transient_status(code) => {
                Failure::Transient(format!("{what}: it answered {status}"))
            }
            _ => Failure::Final(format!("{what}: it answered {status}: {words}")),
        });
    }
    let bytes = read_capped(resp, MAX_ANSWER + 1)
        .await
        .map_err(|(_, e)| request_failed(&what, e))?;
    if bytes.len() > MAX_ANSWER {
        return Err(Failure::Final(format!(
            "{what}: its answer is larger than {} KiB; that is not a token",
            MAX_ANSWER / 1024
        )));
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(&bytes)
        .map_err(|e| Failure::Final(format!("{what}: its answer is not a token ({e})")))?;
    answer
        .token
        .or(answer.access_token)
        .filter(|t| !t.is_empty())
        .map(|t| Outcome::Token(Secret::new(t)))
        .ok_or_else(|| Failure::Final(format!("{what}: its answer holds no token")))
}
