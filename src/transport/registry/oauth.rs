//! Identity tokens: what `docker login` stores for registries that sign
//! in through OAuth2 (Azure Container Registry, Harbor with OIDC, …). An
//! identity token is a refresh token; it is exchanged at the registry's
//! token service for an access token with `POST realm` and the form
//! `grant_type=refresh_token` (the distribution token spec's "OAuth2
//! token" flow).

use crate::keychain::Secret;

/// A `WWW-Authenticate: Bearer realm="…",service="…"` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub realm: String,
    pub service: Option<String>,
}

/// Parses a Bearer challenge; `None` for any other scheme.
pub fn parse_bearer(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(char::is_whitespace)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut realm = None;
    let mut service = None;
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, tail) = if let Some(q) = after.strip_prefix('"') {
            // A quoted string; `\"` escapes a quote.
            let mut value = String::new();
            let mut chars = q.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &q[end?..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        match key.as_str() {
            "realm" => realm = Some(value),
            "service" => service = Some(value),
            _ => {}
        }
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge {
        realm: realm?,
        service,
    })
}

/// Why an exchange failed: `denied` when the token service refused the
/// identity token (the user must sign in again).
#[derive(Debug)]
pub struct ExchangeError {
    pub denied: bool,
    pub message: String,
}

/// The largest token-service answer read.
pub const MAX_ANSWER: usize = 1 << 20;

/// Exchanges `refresh` for an access token for `scope`.
pub async fn exchange(
    http: &reqwest::Client,
    challenge: &Challenge,
    scope: &str,
    refresh: &Secret,
) -> Result<Secret, ExchangeError> {
    // Built before any await: the serializer is not `Send`.
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "refresh_token")
            .append_pair("client_id", "jbuild")
            .append_pair("scope", scope)
            .append_pair("refresh_token", refresh.expose());
        if let Some(s) = &challenge.service {
            form.append_pair("service", s);
        }
        form.finish()
    };
    let resp = http
        .post(&challenge.realm)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|e| ExchangeError {
            denied: false,
            message: format!(
                "cannot reach the token service {}: {}",
                challenge.realm,
                crate::report::error_chain(&e)
            ),
        })?;
    let status = resp.status();
    if !status.is_success() {
        return Err(ExchangeError {
            denied: matches!(status.as_u16(), 400 | 401 | 403),
            message: format!(
                "the token service {} refused the identity token ({status})",
                challenge.realm
            ),
        });
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        access_token: Option<String>,
        token: Option<String>,
    }
    let no_token = |e: String| ExchangeError {
        denied: false,
        message: format!("the token service {} sent no token: {e}", challenge.realm),
    };
    // A token answer is a few KiB; a bigger one is not read whole.
    let bytes = super::body::read_capped(resp, MAX_ANSWER + 1)
        .await
        .map_err(|(_, e)| no_token(crate::report::error_chain(&e)))?;
    if bytes.len() > MAX_ANSWER {
        return Err(no_token(format!(
            "its answer is larger than {} KiB",
            MAX_ANSWER / 1024
        )));
    }
    let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| no_token(e.to_string()))?;
    answer
        .access_token
        .or(answer.token)
        .map(Secret::new)
        .ok_or_else(|| ExchangeError {
            denied: false,
            message: format!("the token service {} sent no token", challenge.realm),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn parses_bearer_challenges() {
        let c = parse_bearer(
            r#"Bearer realm="https://auth.example.io/token",service="registry.example.io",scope="repository:a/b:pull""#,
        )
        .unwrap();
        assert_eq!(c.realm, "https://auth.example.io/token");
        assert_eq!(c.service.as_deref(), Some("registry.example.io"));
        let c = parse_bearer(r#"bearer  service="s, with comma" , realm="r\"q""#).unwrap();
        assert_eq!(
            (c.realm.as_str(), c.service.as_deref()),
            ("r\"q", Some("s, with comma"))
        );
        assert_eq!(parse_bearer(r#"Basic realm="Registry Realm""#), None);
        assert_eq!(parse_bearer(r#"Bearer service="no realm""#), None);
        assert_eq!(parse_bearer("Bearer"), None);
        assert_eq!(parse_bearer(r#"Bearer realm="unterminated"#), None);
    }

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    /// A token service on 127.0.0.1 that checks the form and answers
    /// `status` with `body`; returns its realm and the form it got.
    async fn token_service(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let realm = format!("http://{}/oauth2/token", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut b = [0u8; 1024];
            loop {
                let n = s.read(&mut b).await.unwrap();
                buf.extend_from_slice(&b[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, form)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if form.len() >= len || n == 0 {
                        let reply = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        s.write_all(reply.as_bytes()).await.unwrap();
                        return format!("{}\n{form}", head.lines().next().unwrap());
                    }
                }
            }
        });
        (realm, task)
    }

    #[tokio::test]
    async fn exchanges_an_identity_token_for_an_access_token() {
        let (realm, got) = token_service("200 OK", r#"{"access_token":"acc-1"}"#).await;
        let c = Challenge {
            realm,
            service: Some("reg.example".into()),
        };
        let token = exchange(
            &client(),
            &c,
            "repository:jails/base:pull,push",
            &Secret::new("refresh&secret"),
        )
        .await
        .unwrap();
        assert_eq!(token.expose(), "acc-1");
        let got = got.await.unwrap();
        assert!(got.starts_with("POST /oauth2/token "), "{got}");
        for field in [
            "grant_type=refresh_token",
            "refresh_token=refresh%26secret",
            "scope=repository%3Ajails%2Fbase%3Apull%2Cpush",
            "service=reg.example",
        ] {
            assert!(got.contains(field), "{field} in {got}");
        }
    }

    #[tokio::test]
    async fn a_refused_identity_token_is_denied_without_showing_it() {
        let (realm, _got) = token_service("401 Unauthorized", "{}").await;
        let c = Challenge {
            realm,
            service: None,
        };
        let e = exchange(&client(), &c, "s", &Secret::new("hunter2"))
            .await
            .unwrap_err();
        assert!(e.denied);
        assert!(!e.message.contains("hunter2"), "{}", e.message);
    }
}
