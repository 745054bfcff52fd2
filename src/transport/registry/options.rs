//! What the rest of the registry transport is told: which operation a
//! request is for, and how registries are reached ([`RegistryOptions`]).
//! It sits below every other file of `registry/`, so that the connection,
//! the endpoint and sign-in can all read it without reaching up into
//! `mod.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use super::retry::RetryPolicy;
use crate::keychain::Keychain;

/// What a request is for: a token service grants pull, or pull and push,
/// for a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryOperation {
    Pull,
    Push,
}

/// How registries are reached: which may use plain HTTP, where CA
/// certificates are, whose credentials, how hard to retry.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`) allowed plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// docker's `certs.d` directory; `None`: [`DEFAULT_CERTS_DIRS`].
    pub certs_dir: Option<PathBuf>,
    /// Credentials; `None`: [`DefaultKeychain::from_env`] when first needed.
    ///
    /// [`DefaultKeychain::from_env`]: crate::keychain::DefaultKeychain::from_env
    pub keychain: Option<Arc<dyn Keychain>>,
    pub retry: RetryPolicy,
    /// How long the registry may stay silent (connecting, in the TLS
    /// handshake, between reads) before a request times out.
    pub timeout: std::time::Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            insecure: Vec::new(),
            certs_dir: None,
            keychain: None,
            retry: RetryPolicy::default(),
            timeout: crate::config::RegistrySettings::default().timeout(),
        }
    }
}

impl RegistryOptions {
    /// The options the configuration file sets.
    pub fn from_settings(s: &crate::config::Settings) -> RegistryOptions {
        RegistryOptions {
            insecure: s.registries.insecure.clone(),
            certs_dir: s.registries.certs_dir.clone(),
            timeout: s.registries.timeout(),
            ..RegistryOptions::default()
        }
    }

    /// The `certs.d` directories asked for a registry's CA certificates.
    pub(crate) fn certs_dirs(&self) -> Vec<PathBuf> {
        match &self.certs_dir {
            Some(d) => vec![d.clone()],
            None => DEFAULT_CERTS_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

/// Where docker and podman look for a registry's CA certificates.
pub const DEFAULT_CERTS_DIRS: [&str; 2] = ["/etc/docker/certs.d", "/etc/containers/certs.d"];
