//! The **Keychain** seam: credentials for a registry, found where the rest of
//! the container world keeps them, so `docker login`, `podman login` and
//! `jbuild login` all serve one another.
//!
//! Vocabulary. A *registry* is `host[:port]` as it appears in an image
//! reference (`docker.io` for Docker Hub, `registry.lan:5000`). A
//! *credential* is either a username with a password, or an *identity
//! token* (a refresh token some registries hand out at login, which
//! docker stores as `identitytoken`). A *credential helper* is a program
//! `docker-credential-<name>` that keeps secrets in an OS keyring and
//! speaks docker's `get`/`store`/`erase` protocol on stdin/stdout.
//!
//! Each place credentials are kept is a [`Keychain`] of its own, and the
//! keychain jbuild uses, [`DefaultKeychain`], asks them in order; the first
//! that knows the registry answers:
//!
//! 1. [`EnvKeychain`], the environment: `JBUILD_REGISTRY_USERNAME` and
//!    `JBUILD_REGISTRY_PASSWORD`, for the one registry named by
//!    `JBUILD_REGISTRY_HOST` (all three, or none: credentials in the
//!    environment are never sent to a registry they were not meant for).
//! 2. [`ContainersAuthKeychain`], containers' `auth.json` (podman, skopeo,
//!    buildah): `$REGISTRY_AUTH_FILE` when set, else
//!    `$XDG_RUNTIME_DIR/containers/auth.json` and
//!    `$XDG_CONFIG_HOME/containers/auth.json` (`~/.config/...`).
//! 3. [`DockerConfigKeychain`], docker's `config.json` in `$DOCKER_CONFIG`
//!    (else `~/.docker`): `credHelpers[registry]`, else `credsStore`,
//!    through the helper; then `auths` (base64 `user:password` in `auth`,
//!    or `identitytoken`).
//! 4. [`Anonymous`]: no answer means anonymous access.
//!
//! [`DefaultKeychain::store`] writes where the answer will be found again:
//! into the auth file that already holds an entry for the registry, else
//! where docker would (the `credHelpers`/`credsStore` helper when one is
//! configured, else base64 in `config.json`, mode 0600, replaced
//! atomically). [`DefaultKeychain::erase`] removes the registry from every
//! file and helper that knows it.
//!
//! Docker Hub is keyed `https://index.docker.io/v1/` in these files (and
//! for helpers), a quirk kept for compatibility; `docker.io`,
//! `index.docker.io` and `registry-1.docker.io` all mean it.

mod containers;
mod default;
mod docker;
mod env;
mod file;
mod helper;
mod multi;
pub mod redact;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

pub use containers::ContainersAuthKeychain;
pub use default::DefaultKeychain;
pub use docker::DockerConfigKeychain;
pub use env::EnvKeychain;
pub use multi::MultiKeychain;

/// A source of registry credentials. The one question a keychain answers:
/// what do I show `registry` to prove who I am?
///
/// An implementation writes [`resolve`](Keychain::resolve). It is given the
/// registry in its canonical form ([`canonical_registry`]: `docker.io` for
/// Docker Hub, else `host[:port]` in lowercase) and returns
///
/// - `Ok(Some(credential))` when it holds one for that registry;
/// - `Ok(None)` when it knows nothing of it: the next source is asked, and
///   when none answers the registry is used anonymously;
/// - `Err(..)` when the source itself is broken (a file that is not JSON,
///   a credential helper that fails). A broken source stops the search
///   rather than being skipped: skipping it would quietly send another
///   identity, or none, and the person would not learn why.
///
/// Callers ask with [`get`](Keychain::get), which takes the registry in any
/// spelling (`https://index.docker.io/v1/`, `Registry.LAN:5000`) and
/// remembers the secret it hands out for [`redact`], so nothing jbuild
/// prints afterwards can contain it.
///
/// Keychains compose: a [`MultiKeychain`] asks a list of them in order and
/// the first answer wins; whoever holds it never learns which source gave
/// the answer. [`DefaultKeychain`] is the list jbuild uses (see the module
/// documentation), and the one that can also [store](DefaultKeychain::store)
/// and [erase](DefaultKeychain::erase) credentials.
///
/// ```
/// use std::sync::Arc;
/// use jbuild::keychain::{Anonymous, EnvKeychain, Keychain, MultiKeychain};
///
/// let ci = EnvKeychain::from_vars(|name| match name {
///     "JBUILD_REGISTRY_HOST" => Some("registry.lan:5000".into()),
///     "JBUILD_REGISTRY_USERNAME" => Some("ci".into()),
///     "JBUILD_REGISTRY_PASSWORD" => Some("s3cret".into()),
///     _ => None,
/// })?;
/// let keychain = MultiKeychain::new(vec![Arc::new(ci), Arc::new(Anonymous)]);
/// assert!(keychain.get("Registry.LAN:5000")?.is_some());
/// assert_eq!(keychain.get("docker.io")?, None); // anonymous
/// # Ok::<(), jbuild::keychain::KeychainError>(())
/// ```
pub trait Keychain: fmt::Debug + Send + Sync {
    /// The credential this source holds for `registry` (canonical), or
    /// `None` when it knows nothing of it.
    fn resolve(&self, registry: &str) -> Result<Option<Credential>, KeychainError>;

    /// The credential for `registry` (`host[:port]`, in any spelling), or
    /// `None` for anonymous access.
    fn get(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        let found = self.resolve(&canonical_registry(registry))?;
        // Whatever jbuild prints from now on is scrubbed of it.
        match &found {
            Some(Credential::Basic { username, password }) => {
                redact::remember(Some(username), password.expose())
            }
            Some(Credential::IdentityToken(t)) => redact::remember(None, t.expose()),
            None => {}
        }
        Ok(found)
    }
}

/// The keychain that knows no registry: every request goes without
/// credentials. Last in [`DefaultKeychain`]'s list.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anonymous;

impl Keychain for Anonymous {
    fn resolve(&self, _registry: &str) -> Result<Option<Credential>, KeychainError> {
        Ok(None)
    }
}

/// A password or token. It prints as `<redacted>` however it is formatted,
/// so it cannot reach a log or an error message by accident; and making
/// one remembers it for [`redact`], so the text jbuild prints is scrubbed
/// of it even when someone else repeats it (a registry that echoes the
/// bearer token it was sent in its error body, a token service that
/// repeats the refresh token). Every credential jbuild holds — passwords,
/// identity and refresh tokens, the tokens a token service grants — is a
/// `Secret`, so none can be shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        let s = s.into();
        redact::remember(None, &s);
        Secret(s)
    }
    /// The secret itself, for the one place that sends it.
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

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret::new(s)
    }
}

/// What a registry is told to prove who we are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    Basic { username: String, password: Secret },
    IdentityToken(Secret),
}

impl Credential {
    fn secret(&self) -> &str {
        match self {
            Credential::Basic { password, .. } => password.expose(),
            Credential::IdentityToken(t) => t.expose(),
        }
    }
}

/// Credentials that could not be read or written. Every variant names the
/// file or program at fault; none carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum KeychainError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}\n  fix the file (it is JSON, as docker and podman write it) or remove it", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{message}")]
    Env { message: String },
    #[error("credential helper `{program}` {message}")]
    Helper { program: String, message: String },
}

impl crate::blame::Blame for KeychainError {
    /// The credential files, variables and helpers are the user's.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// `var(name)`, with an empty value counted as unset.
fn non_empty(var: &impl Fn(&str) -> Option<OsString>, name: &str) -> Option<OsString> {
    var(name).filter(|v| !v.is_empty())
}

/// Docker Hub under one name; every other registry as `host[:port]`,
/// lowercased, without a scheme or path.
pub fn canonical_registry(registry: &str) -> String {
    let r = registry
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = r.split('/').next().unwrap_or(r).to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".into()
        }
        _ => host,
    }
}

/// The key docker uses for `registry` in `auths` and with helpers.
fn server_url(canonical: &str) -> String {
    if canonical == "docker.io" {
        DOCKER_HUB_KEY.into()
    } else {
        canonical.into()
    }
}

const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

#[cfg(test)]
mod tests;
