//! Checking a credential against a registry before keeping it, as
//! `docker login` does: sign in through the same flow pull and push use
//! ([`signin::sign_in`], with no scope: login asks for nothing but
//! identity), then `GET /v2/` with what it gave. A registry that asks for
//! nothing accepts any credential, as with docker.
//!
//! The registry's own error message (the spec's `errors[].message`) is
//! kept for the person reading; the credential never is.

use super::body::head_of_body;
use super::failure::{refusal_words, unanswered, user_of, Failure, Target};
use super::signin;
use crate::keychain::Credential;
use crate::transport::TransportError;

/// Checks `cred` against the registry served at `base`
/// (`https://host[:port]`); `registry` names it in messages. A refused
/// credential is [`TransportError::Denied`]; a registry that cannot be
/// reached, [`TransportError::Unreachable`] or [`TransportError::Tls`].
pub async fn verify(
    http: &reqwest::Client,
    registry: &str,
    base: &str,
    cred: &Credential,
) -> Result<(), TransportError> {
    let what = "check the credentials";
    let target = Target {
        location: registry,
        registry,
        user: Some(user_of(cred)),
    };
    let signed = signin::sign_in(http, base, None, Some(cred), None)
        .await
        .map_err(|f| f.into_error(&target, what))?;
    if signed.challenge.is_none() {
        return Ok(());
    }
    let url = format!("{base}/v2/");
    let mut req = http
        .get(&url)
        .build()
        .map_err(|e| unanswered(&target, what, &url, e))?;
    signed.header.apply(&mut req);
    let resp = http
        .execute(req)
        .await
        .map_err(|e| unanswered(&target, what, &url, e))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    // At most 64 KiB: an error body is a few hundred bytes, and one that
    // does not end must not fill the memory.
    let detail = refusal_words(&head_of_body(resp, 64 * 1024).await);
    let failure = match status.as_u16() {
        401 | 403 => Failure::Denied {
            url,
            status: status.as_u16(),
            detail,
        },
        _ => Failure::Protocol {
            url,
            detail: format!("unexpected answer {status} {detail}"),
        },
    };
    Err(failure.into_error(&target, what))
}
