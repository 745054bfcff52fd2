//! PLACEHOLDER owned by wt-regtest (the keychain engineer): the credential
//! seam with exactly the agreed API, reading nothing (every registry is
//! anonymous). Their `src/keychain/` replaces this file at merge.

use std::fmt;

/// A password or token; prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    Basic { username: String, password: Secret },
    IdentityToken(Secret),
}

#[derive(Debug, thiserror::Error)]
pub enum KeychainError {
    #[error("{message}")]
    Env { message: String },
}

#[derive(Debug, Clone, Default)]
pub struct Keychain {}

impl Keychain {
    pub fn from_env() -> Result<Keychain, KeychainError> {
        Ok(Keychain {})
    }

    /// `registry` is the host[:port] as in the reference (docker.io for
    /// Docker Hub).
    pub fn get(&self, _registry: &str) -> Result<Option<Credential>, KeychainError> {
        Ok(None)
    }
}
