//! Signing in at a registry: the one flow jbuild has, used by
//! `jbuild login`'s check, by pull and by push alike, so that they cannot
//! choose differently on the same registry.
//!
//! 1. `GET /v2/`. An answer other than `401` asks for nothing.
//! 2. A `401`'s challenges are read from every `WWW-Authenticate` header
//!    ([`challenge::choose`]): Bearer wins over Basic, as with docker.
//! 3. Bearer: the token service at the challenge's realm is asked for a
//!    token — `GET realm?service=S&scope=…&account=USER` with the user's
//!    Basic credentials (the distribution token spec; `scope` only when a
//!    repository is meant: login asks for none), or, for an identity
//!    token, `POST realm` with `grant_type=refresh_token` ([`oauth`]).
//!    Every request after that carries the token.
//! 4. Basic: every request carries the user name and password.
//!
//! Token-service answers are read up to [`oauth::MAX_ANSWER`] and refused
//! beyond it: a token service that answers 50 MB (or never stops) costs no
//! more memory than one that answers 1 KiB.

use super::challenge::{self, Bearer, Challenge};
use super::endpoint::Ping;
use super::failure::Failure;
use super::oauth;
use super::retry::transient_status;
use crate::keychain::{Credential, Secret};

/// How requests to a registry are authorised once signed in.
#[derive(Clone)]
pub enum AuthHeader {
    None,
    Bearer(Secret),
    Basic { username: String, password: Secret },
}

impl AuthHeader {
    /// Adds the `Authorization` header to `req`, marked sensitive.
    pub fn apply(&self, req: &mut reqwest::Request) {
        use base64::Engine as _;
        let value = match self {
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
}

/// What signing in gave.
pub struct SignedIn {
    /// What every request carries from now on.
    pub header: AuthHeader,
    /// The scheme chosen; `None` when `/v2/` asked for nothing.
    pub challenge: Option<Challenge>,
}

/// Signs in at the registry served at `base` (`https://host[:port]`) with
/// `cred` (or anonymously), for `scope` (`repository:NAME:pull`; `None`
/// for identity only, as login checks). `known` is the registry's answer
/// to `/v2/` when one was just had (the scheme's probe): step 1 is then
/// not asked again.
pub async fn sign_in(
    http: &reqwest::Client,
    base: &str,
    scope: Option<&str>,
    cred: Option<&Credential>,
    known: Option<Ping>,
) -> Result<SignedIn, Failure> {
    let url = format!("{base}/v2/");
    let ping = match known {
        Some(ping) => ping,
        None => {
            let resp = http
                .get(&url)
                .send()
                .await
                .map_err(|source| Failure::Request {
                    url: url.clone(),
                    source,
                })?;
            Ping {
                status: resp.status(),
                headers: resp.headers().clone(),
            }
        }
    };
    let status = ping.status;
    if transient_status(status.as_u16()) {
        return Err(Failure::Busy { url, status });
    }
    let challenge = if status == reqwest::StatusCode::UNAUTHORIZED {
        challenge::choose(&ping.headers).map_err(|e| Failure::Protocol {
            url: url.clone(),
            detail: e.to_string(),
        })?
    } else {
        None
    };
    let basic = |username: &String, password: &Secret| AuthHeader::Basic {
        username: username.clone(),
        password: password.clone(),
    };
    let header = match (&challenge, cred) {
        (Some(Challenge::Bearer(b)), Some(Credential::IdentityToken(refresh))) => {
            AuthHeader::Bearer(oauth::exchange(http, b, scope, refresh).await?)
        }
        (Some(Challenge::Bearer(b)), Some(Credential::Basic { username, password })) => {
            AuthHeader::Bearer(token(http, b, scope, Some((username, password))).await?)
        }
        (Some(Challenge::Bearer(b)), None) => {
            AuthHeader::Bearer(token(http, b, scope, None).await?)
        }
        (Some(Challenge::Basic), Some(Credential::IdentityToken(_))) => {
            return Err(Failure::Denied {
                url,
                status: 401,
                detail: "the registry wants a user name and password, and only an identity \
                         token is kept for it"
                    .into(),
            })
        }
        // A registry that asks for nothing at `/v2/` may still want the
        // credentials on a repository: they go along.
        (_, Some(Credential::Basic { username, password })) => basic(username, password),
        (_, _) => AuthHeader::None,
    };
    Ok(SignedIn { header, challenge })
}

/// A token from the token service `b` names, for `scope`, asked with
/// `basic` credentials (or anonymously).
async fn token(
    http: &reqwest::Client,
    b: &Bearer,
    scope: Option<&str>,
    basic: Option<(&String, &Secret)>,
) -> Result<Secret, Failure> {
    let mut params: Vec<(&str, &str)> = Vec::new();
    if let Some(s) = scope {
        params.push(("scope", s));
    }
    if let Some(s) = &b.service {
        params.push(("service", s));
    }
    if let Some((user, _)) = basic {
        params.push(("account", user));
    }
    let url = url::Url::parse_with_params(&b.realm, &params).map_err(|e| Failure::Protocol {
        url: b.realm.clone(),
        detail: format!("the token service `{}` is not a URL ({e})", b.realm),
    })?;
    let mut req = http.get(url);
    if let Some((user, password)) = basic {
        req = req.basic_auth(user, Some(password.expose()));
    }
    let resp = req.send().await.map_err(|source| Failure::Request {
        url: b.realm.clone(),
        source,
    })?;
    oauth::read_token(resp, &b.realm, &[401, 403]).await
}
