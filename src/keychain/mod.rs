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
//! `get` asks these sources in order and the first that knows the registry
//! answers:
//!
//! 1. The environment: `JBUILD_REGISTRY_USERNAME` and
//!    `JBUILD_REGISTRY_PASSWORD`, for the one registry named by
//!    `JBUILD_REGISTRY_HOST` (all three, or none: credentials in the
//!    environment are never sent to a registry they were not meant for).
//! 2. containers' `auth.json` (podman, skopeo, buildah):
//!    `$REGISTRY_AUTH_FILE` when set, else
//!    `$XDG_RUNTIME_DIR/containers/auth.json` and
//!    `$XDG_CONFIG_HOME/containers/auth.json` (`~/.config/...`).
//! 3. docker's `config.json` in `$DOCKER_CONFIG` (else `~/.docker`):
//!    `credHelpers[registry]`, else `credsStore`, through the helper; then
//!    `auths` (base64 `user:password` in `auth`, or `identitytoken`).
//!
//! No answer means anonymous access.
//!
//! `store` writes where the answer will be found again: into the auth file
//! that already holds an entry for the registry, else where docker would
//! (the `credHelpers`/`credsStore` helper when one is configured, else
//! base64 in `config.json`, mode 0600, replaced atomically). `erase`
//! removes the registry from every file and helper that knows it.
//!
//! Docker Hub is keyed `https://index.docker.io/v1/` in these files (and
//! for helpers), a quirk kept for compatibility; `docker.io`,
//! `index.docker.io` and `registry-1.docker.io` all mean it.

mod file;
mod helper;
pub mod redact;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use file::AuthFile;

/// A password or token. It prints as `<redacted>` however it is formatted,
/// so it cannot reach a log or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
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
        Secret(s)
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

/// Where credentials are looked up and stored. Built from the environment
/// once (`from_env`); tests build it from a map of variables.
#[derive(Debug, Clone)]
pub struct Keychain {
    env_cred: Option<(String, String, Secret)>,
    /// containers auth.json files, in the order they are asked.
    auth_files: Vec<PathBuf>,
    docker_config: Option<PathBuf>,
    /// `$PATH` for finding helpers.
    path: Option<OsString>,
}

impl Keychain {
    pub fn from_env() -> Result<Keychain, KeychainError> {
        Keychain::from_vars(|name| std::env::var_os(name))
    }

    /// The keychain the given environment describes (`var` looks a variable
    /// up; empty values count as unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Result<Keychain, KeychainError> {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        let text = |name: &str| get(name).map(|v| v.to_string_lossy().into_owned());
        let env_cred = match (
            text("JBUILD_REGISTRY_HOST"),
            text("JBUILD_REGISTRY_USERNAME"),
            text("JBUILD_REGISTRY_PASSWORD"),
        ) {
            (None, None, None) => None,
            (Some(h), Some(u), Some(p)) => Some((canonical_registry(&h), u, Secret(p))),
            (h, u, p) => {
                let missing: Vec<&str> = [
                    ("JBUILD_REGISTRY_HOST", h.is_none()),
                    ("JBUILD_REGISTRY_USERNAME", u.is_none()),
                    ("JBUILD_REGISTRY_PASSWORD", p.is_none()),
                ]
                .iter()
                .filter(|(_, m)| *m)
                .map(|(n, _)| *n)
                .collect();
                return Err(KeychainError::Env {
                    message: format!(
                        "registry credentials in the environment are incomplete: {} not set\n  \
                         set all three of JBUILD_REGISTRY_HOST, JBUILD_REGISTRY_USERNAME and \
                         JBUILD_REGISTRY_PASSWORD, or none",
                        missing.join(" and ")
                    ),
                });
            }
        };
        let home = get("HOME").map(PathBuf::from);
        let mut auth_files = Vec::new();
        if let Some(f) = get("REGISTRY_AUTH_FILE") {
            auth_files.push(PathBuf::from(f));
        } else {
            if let Some(run) = get("XDG_RUNTIME_DIR") {
                auth_files.push(PathBuf::from(run).join("containers/auth.json"));
            }
            let config = get("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config")));
            if let Some(c) = config {
                auth_files.push(c.join("containers/auth.json"));
            }
        }
        let docker_config = get("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".docker")))
            .map(|d| d.join("config.json"));
        Ok(Keychain {
            env_cred,
            auth_files,
            docker_config,
            path: var("PATH"),
        })
    }

    /// The credential for `registry` (`host[:port]`), or `None` for
    /// anonymous access.
    pub fn get(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        let found = self.find(registry)?;
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

    fn find(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        let registry = canonical_registry(registry);
        if let Some((host, user, pass)) = &self.env_cred {
            if *host == registry {
                return Ok(Some(Credential::Basic {
                    username: user.clone(),
                    password: pass.clone(),
                }));
            }
        }
        for path in self.auth_files.iter().chain(&self.docker_config) {
            let Some(f) = AuthFile::load(path)? else {
                continue;
            };
            if let Some(program) = f.helper_for(&registry) {
                if let Some(c) = helper::get(&program, &server_url(&registry), self.path.as_ref())?
                {
                    return Ok(Some(c));
                }
            }
            if let Some(c) = f.inline(&registry)? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// Keeps `cred` for `registry` (see the module docs for where).
    pub fn store(&self, registry: &str, cred: &Credential) -> Result<(), KeychainError> {
        let registry = canonical_registry(registry);
        for path in &self.auth_files {
            if let Some(mut f) = AuthFile::load(path)? {
                if f.has_inline(&registry) {
                    f.set_inline(&registry, cred);
                    return f.save();
                }
            }
        }
        let Some(path) = &self.docker_config else {
            return Err(KeychainError::Env {
                message: "nowhere to store credentials: set HOME or DOCKER_CONFIG".into(),
            });
        };
        let mut f = AuthFile::load(path)?.unwrap_or_else(|| AuthFile::empty(path));
        if let Some(program) = f.helper_for(&registry) {
            helper::store(&program, &server_url(&registry), cred, self.path.as_ref())?;
            // docker keeps an empty entry so `docker login` lists the registry.
            if !f.has_entry(&registry) {
                f.set_placeholder(&registry);
                f.save()?;
            }
            return Ok(());
        }
        f.set_inline(&registry, cred);
        f.save()
    }

    /// Forgets `registry` everywhere jbuild can write; `true` if anything
    /// was removed.
    pub fn erase(&self, registry: &str) -> Result<bool, KeychainError> {
        let registry = canonical_registry(registry);
        let mut removed = false;
        for path in self.auth_files.iter().chain(&self.docker_config) {
            let Some(mut f) = AuthFile::load(path)? else {
                continue;
            };
            if let Some(program) = f.helper_for(&registry) {
                removed |= helper::erase(&program, &server_url(&registry), self.path.as_ref())?;
            }
            if f.remove(&registry) {
                f.save()?;
                removed = true;
            }
        }
        Ok(removed)
    }
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
