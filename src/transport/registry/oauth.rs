//! Identity tokens: what `docker login` stores for registries that sign
//! in through OAuth2 (Azure Container Registry, Harbor with OIDC, …). An
//! identity token is a refresh token; it is exchanged at the registry's
//! token service for an access token with `POST realm` and the form
//! `grant_type=refresh_token` (the distribution token spec's "OAuth2
//! token" flow).

use super::body::{head_of_body, read_capped};
use super::challenge::Bearer;
use super::failure::{refusal_words, Failure};
use crate::keychain::Secret;

/// The largest token-service answer read.
pub const MAX_ANSWER: usize = 1 << 20;

/// Exchanges `refresh` for an access token for `scope` (none: identity
/// only, as `jbuild login` asks).
pub async fn exchange(
    http: &reqwest::Client,
    challenge: &Bearer,
    scope: Option<&str>,
    refresh: &Secret,
) -> Result<Secret, Failure> {
    // Built before any await: the serializer is not `Send`.
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "refresh_token")
            .append_pair("client_id", "jbuild")
            .append_pair("refresh_token", refresh.expose());
        if let Some(scope) = scope {
            form.append_pair("scope", scope);
        }
        if let Some(s) = &challenge.service {
            form.append_pair("service", s);
        }
        form.finish()
    };
    let url = challenge.realm.clone();
    let resp = http
        .post(&url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|source| Failure::Request {
            url: url.clone(),
            source,
        })?;
    read_token(resp, &url, &[400, 401, 403]).await
}

/// A token service's answer: `{"token": …}` or `{"access_token": …}`,
/// read up to [`MAX_ANSWER`]; a status in `refusals` is a
/// `Failure::Denied`.
pub async fn read_token(
    resp: reqwest::Response,
    url: &str,
    refusals: &[u16],
) -> Result<Secret, Failure> {
    let status = resp.status();
    if refusals.contains(&status.as_u16()) {
        let body = head_of_body(resp, 64 * 1024).await;
        return Err(Failure::Denied {
            url: url.to_string(),
            status: status.as_u16(),
            detail: refusal_words(&body),
        });
    }
    if super::retry::transient_status(status.as_u16()) {
        return Err(Failure::Busy {
            url: url.to_string(),
            status,
        });
    }
    let protocol = |detail: String| Failure::Protocol {
        url: url.to_string(),
        detail,
    };
    if !status.is_success() {
        return Err(protocol(format!("the token service answered {status}")));
    }
    // A token answer is a few KiB; a bigger one is not read whole.
    let bytes = read_capped(resp, MAX_ANSWER + 1)
        .await
        .map_err(|(_, source)| Failure::Request {
            url: url.to_string(),
            source,
        })?;
    if bytes.len() > MAX_ANSWER {
        return Err(protocol(format!(
            "the token service's answer is larger than {} KiB; that is not a token",
            MAX_ANSWER / 1024
        )));
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(&bytes)
        .map_err(|e| protocol(format!("the token service's answer is not a token ({e})")))?;
    answer
        .token
        .filter(|t| !t.is_empty())
        .or(answer.access_token)
        .filter(|t| !t.is_empty())
        .map(Secret::new)
        .ok_or_else(|| protocol("the token service's answer holds no token".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        let c = Bearer {
            realm,
            service: Some("reg.example".into()),
        };
        let token = exchange(
            &client(),
            &c,
            Some("repository:jails/base:pull,push"),
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
        let c = Bearer {
            realm,
            service: None,
        };
        let e = exchange(&client(), &c, Some("s"), &Secret::new("hunter2"))
            .await
            .unwrap_err();
        assert!(matches!(e, Failure::Denied { status: 401, .. }), "{e:?}");
        assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
    }
}
