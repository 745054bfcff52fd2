//! What a registry asks for when it answers `401`: its challenges, read
//! from every `WWW-Authenticate` header of the answer with the
//! `http-auth` crate — the one place jbuild reads them.
//!
//! A registry may offer more than one scheme, in one header
//! (`Basic realm="r", Bearer realm="…"`) or in several. jbuild chooses as
//! docker does: Bearer (a token from the token service the challenge
//! names) when it is offered, else Basic (the credentials with every
//! request). The order the registry lists them in does not matter, so
//! `jbuild login`, pull and push always choose the same one.

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};

/// The scheme jbuild answers a registry's challenge with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// Ask the token service at `realm` for a token.
    Bearer(Bearer),
    /// Send the user name and password with every request.
    Basic,
}

/// A `Bearer realm="…",service="…"` challenge: where the token service
/// is, and the `service` to name to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bearer {
    pub realm: String,
    pub service: Option<String>,
}

/// Why a registry's challenges cannot be answered. Each holds the
/// challenges as the registry sent them (they name no credential: a
/// challenge is what the registry asks for, not what jbuild answers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    #[error("unreadable WWW-Authenticate header `{header}` ({reason})")]
    Unreadable { header: String, reason: String },
    #[error("a Bearer challenge without a realm: `{header}`")]
    NoRealm { header: String },
    #[error("the registry asks for an authentication scheme jbuild does not speak: `{header}`")]
    UnknownScheme { header: String },
}

impl crate::blame::Blame for ChallengeError {
    /// The registry the user chose asks in a way jbuild does not speak.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// Reads every `WWW-Authenticate` header in `headers` and chooses:
/// Bearer if any challenge offers it, else Basic; `Ok(None)` when there is
/// no challenge at all. `Err` says why the challenges cannot be answered
/// (unreadable, a Bearer without a realm, only schemes jbuild does not
/// speak).
pub fn choose(headers: &HeaderMap) -> Result<Option<Challenge>, ChallengeError> {
    let values: Vec<&str> = headers
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    choose_from(&values)
}

/// [`choose`] over header values as text.
pub fn choose_from(values: &[&str]) -> Result<Option<Challenge>, ChallengeError> {
    if values.is_empty() {
        return Ok(None);
    }
    // Several headers are one list (RFC 9110, 5.3): read them together.
    let all = values.join(", ");
    let parsed = http_auth::parse_challenges(&all).map_err(|e| ChallengeError::Unreadable {
        header: all.clone(),
        reason: e.to_string(),
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
        let realm =
            param(c, "realm")
                .filter(|r| !r.is_empty())
                .ok_or_else(|| ChallengeError::NoRealm {
                    header: all.clone(),
                })?;
        return Ok(Some(Challenge::Bearer(Bearer {
            realm,
            service: param(c, "service"),
        })));
    }
    if parsed
        .iter()
        .any(|c| c.scheme.eq_ignore_ascii_case("basic"))
    {
        return Ok(Some(Challenge::Basic));
    }
    Err(ChallengeError::UnknownScheme { header: all })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(realm: &str, service: Option<&str>) -> Option<Challenge> {
        Some(Challenge::Bearer(Bearer {
            realm: realm.into(),
            service: service.map(Into::into),
        }))
    }

    #[test]
    fn bearer_wins_over_basic_in_any_order_and_header() {
        let b = r#"Bearer realm="https://auth.example.io/token",service="reg.example.io""#;
        let want = bearer("https://auth.example.io/token", Some("reg.example.io"));
        assert_eq!(choose_from(&[r#"Basic realm="r""#, b]).unwrap(), want);
        assert_eq!(choose_from(&[b, r#"Basic realm="r""#]).unwrap(), want);
        let one = format!(r#"Basic realm="r", {b}"#);
        assert_eq!(choose_from(&[one.as_str()]).unwrap(), want);
        assert_eq!(
            choose_from(&[r#"Basic realm="Registry Realm""#]).unwrap(),
            Some(Challenge::Basic)
        );
    }

    #[test]
    fn quoted_values_and_case_are_read_as_http_says() {
        assert_eq!(
            choose_from(&[r#"bearer service="s, with comma" , REALM="r\"q""#]).unwrap(),
            bearer("r\"q", Some("s, with comma"))
        );
    }

    #[test]
    fn challenges_that_cannot_be_answered_say_why() {
        assert_eq!(choose_from(&[]).unwrap(), None);
        let e = choose_from(&[r#"Bearer service="no realm""#]).unwrap_err();
        assert!(matches!(e, ChallengeError::NoRealm { .. }), "{e:?}");
        assert!(e.to_string().contains("without a realm"), "{e}");
        let e = choose_from(&[r#"Digest realm="r", nonce="n""#]).unwrap_err();
        assert!(matches!(e, ChallengeError::UnknownScheme { .. }), "{e:?}");
        assert!(e.to_string().contains("does not speak"), "{e}");
        let e = choose_from(&[r#"Bearer realm="unterminated"#]).unwrap_err();
        assert!(matches!(e, ChallengeError::Unreadable { .. }), "{e:?}");
        assert!(e.to_string().contains("unreadable"), "{e}");
    }

    #[test]
    fn every_header_of_an_answer_is_read() {
        let mut h = HeaderMap::new();
        h.append(WWW_AUTHENTICATE, r#"Basic realm="r""#.parse().unwrap());
        h.append(
            WWW_AUTHENTICATE,
            r#"Bearer realm="http://t/token",service="s""#.parse().unwrap(),
        );
        assert_eq!(choose(&h).unwrap(), bearer("http://t/token", Some("s")));
    }
}
