//! Why a registry request, or signing in, came to nothing — as types, so
//! that the exit code follows what happened and never the words of a
//! message: no connection (refused, a name that does not resolve), a
//! registry silent for longer than `timeout_secs` and TLS trouble are the
//! user's environment to fix (exit 1, [`TransportError::Unreachable`],
//! [`TransportError::TimedOut`], [`TransportError::Tls`]), as are refused
//! credentials ([`TransportError::Denied`]).

use reqwest::StatusCode;

use crate::report::error_chain as chain;
use crate::transport::TransportError;

/// Who asked, for the error: the image's location, the registry, and
/// whose credentials went with the request (`<token>` for an identity
/// token, as docker writes it; `None`: no credentials).
pub struct Target<'a> {
    pub location: &'a str,
    pub registry: &'a str,
    pub user: Option<&'a str>,
}

/// The user a credential names, for [`Target::user`].
pub fn user_of(cred: &crate::keychain::Credential) -> &str {
    match cred {
        crate::keychain::Credential::Basic { username, .. } => username,
        crate::keychain::Credential::IdentityToken(_) => "<token>",
    }
}

/// rustls's own error among `e`'s causes: a TLS failure (a certificate
/// from an unknown CA or for another name, a handshake with something that
/// does not speak TLS).
pub fn tls_error(e: &reqwest::Error) -> Option<&rustls::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(t) = c.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        // `io::Error::source` skips the error it wraps, and the TLS stream
        // wraps rustls's error in an `io::Error` wrapped in another: look
        // inside each.
        let mut io = c.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(|e| e.get_ref()) {
            if let Some(t) = inner.downcast_ref::<rustls::Error>() {
                return Some(t);
            }
            io = inner.downcast_ref::<std::io::Error>();
        }
        cur = c.source();
    }
    None
}

/// Whether `e` is a TLS failure.
pub fn is_tls(e: &reqwest::Error) -> bool {
    tls_error(e).is_some()
}

/// Whether the TLS failure is a certificate made for another name.
fn wrong_name(e: &reqwest::Error) -> bool {
    use rustls::{CertificateError as C, Error as E};
    matches!(
        tls_error(e),
        Some(E::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. }
        ))
    )
}

/// Connection refused or reset, a timeout, a body cut short: worth another
/// try. A TLS failure is not: it will fail the same way.
pub fn is_transient(e: &reqwest::Error) -> bool {
    !is_tls(e)
        && (e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() || e.is_decode())
}

/// A request to `url` that got no answer, as the error the user sees.
pub fn unanswered(t: &Target, what: &str, url: &str, e: reqwest::Error) -> TransportError {
    let mut url = url.to_string();
    if let Ok(mut u) = reqwest::Url::parse(&url) {
        u.set_query(None);
        url = u.to_string();
    }
    if is_tls(&e) {
        return TransportError::Tls {
            wrong_name: wrong_name(&e),
            location: t.location.to_string(),
            what: what.to_string(),
            url,
            registry: t.registry.to_string(),
            source: e,
        };
    }
    if e.is_timeout() {
        return TransportError::TimedOut {
            location: t.location.to_string(),
            what: what.to_string(),
            url,
            source: e,
        };
    }
    if e.is_connect() {
        return TransportError::Unreachable {
            location: t.location.to_string(),
            what: what.to_string(),
            url,
            user: t.user.map(str::to_string),
            source: e,
        };
    }
    TransportError::Registry {
        location: t.location.to_string(),
        message: format!("{what}: {}; check that the registry is up", chain(&e)),
        user: false,
    }
}

/// Why signing in failed.
#[derive(Debug)]
pub enum Failure {
    /// No answer from `url`.
    Request { url: String, source: reqwest::Error },
    /// `url` (the registry or its token service) refused the credentials,
    /// or access: 401 or 403, with the server's words.
    Denied {
        url: String,
        status: u16,
        detail: String,
    },
    /// 408, 429 or 5xx from `url`: worth another try.
    Busy { url: String, status: StatusCode },
    /// An answer jbuild cannot work with.
    Protocol { url: String, detail: String },
}

impl Failure {
    /// Whether another try may go better.
    pub fn is_transient(&self) -> bool {
        match self {
            Failure::Request { source, .. } => is_transient(source),
            Failure::Busy { .. } => true,
            Failure::Denied { .. } | Failure::Protocol { .. } => false,
        }
    }

    /// As the error the user sees.
    pub fn into_error(self, t: &Target, what: &str) -> TransportError {
        match self {
            Failure::Request { url, source } => unanswered(t, what, &url, source),
            Failure::Denied {
                url,
                status,
                detail,
            } => TransportError::Denied {
                location: t.location.to_string(),
                what: format!("{what} at {url}"),
                registry: t.registry.to_string(),
                status,
                user: t.user.map(str::to_string),
                detail,
            },
            Failure::Busy { url, status } => TransportError::Registry {
                location: t.location.to_string(),
                message: format!("{what}: {url} answered {status}; try again later"),
                user: false,
            },
            Failure::Protocol { url, detail } => TransportError::Registry {
                location: t.location.to_string(),
                message: format!("{what}: {url}: {detail}"),
                user: false,
            },
        }
    }
}

/// The words of a refusal, for [`Failure::Denied`]: the first
/// `errors[].message` of a spec error body (or a token service's
/// `details`), else nothing; scrubbed of every secret jbuild holds.
pub fn refusal_words(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let msg = v["errors"][0]["message"]
        .as_str()
        .or_else(|| v["details"].as_str())
        .unwrap_or_default();
    // Scrubbed before it is cut: a secret cut in half is no longer found.
    crate::keychain::redact::scrub(msg)
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blame::Blame;

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_and_the_users() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = format!("http://127.0.0.1:{port}/v2/?scope=x");
        let e = reqwest::Client::new().get(&url).send().await.unwrap_err();
        assert!(is_transient(&e) && !is_tls(&e));
        let t = Target {
            location: "docker://r/a",
            registry: "r",
            user: Some("alice"),
        };
        let err = unanswered(&t, "sign in", &url, e);
        assert!(
            matches!(&err, TransportError::Unreachable { url, user: Some(u), .. }
                if url.ends_with("/v2/") && u == "alice"),
            "{err:?}"
        );
        assert!(err.is_user_error());
    }
}
