//! What the rest of the registry transport is told: which operation a
//! request is for, and how registries are reached ([`RegistryOptions`]).
//! It sits below every other file of `registry/`, so that the connection,
//! the endpoint and sign-in can all read it without reaching up into
//! `mod.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use super::pace::TransferLimits;
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
    /// `false` (`--tls-verify=false`): every registry this command reaches
    /// may use plain HTTP, and an HTTPS one is not asked for a certificate
    /// jbuild trusts.
    pub tls_verify: bool,
    /// docker's `certs.d` directory; `None`: [`DEFAULT_CERTS_DIRS`].
    pub certs_dir: Option<PathBuf>,
    /// `--cert-dir DIR`: the `*.crt` CA certificates in DIR itself (as
    /// podman means it) and in `DIR/HOST:PORT/` (a `certs.d` tree) are
    /// trusted, in place of the `certs.d` directories'.
    pub cert_dir: Option<PathBuf>,
    /// Credentials; `None`: [`DefaultKeychain::from_env`] when first needed.
    ///
    /// [`DefaultKeychain::from_env`]: crate::keychain::DefaultKeychain::from_env
    pub keychain: Option<Arc<dyn Keychain>>,
    pub retry: RetryPolicy,
    /// How long the registry may stay silent (connecting, in the TLS
    /// handshake, between reads) before a request times out.
    pub timeout: std::time::Duration,
    /// The rate floor and deadline every blob and manifest is held to.
    pub transfer: TransferLimits,
    /// How much of unfinished downloads is kept for the next run to
    /// continue (`[registries] keep_partial_mib`, `keep_partial_hours`).
    pub partials: crate::store::PartialBounds,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            insecure: Vec::new(),
            tls_verify: true,
            certs_dir: None,
            cert_dir: None,
            keychain: None,
            retry: RetryPolicy::default(),
            timeout: crate::config::RegistrySettings::default().timeout(),
            transfer: TransferLimits::default(),
            partials: crate::store::PartialBounds::default(),
        }
    }
}

impl RegistryOptions {
    /// The options the configuration file sets, with the registries
    /// [`INSECURE_ENV`] names added to its `insecure` list.
    pub fn from_settings(s: &crate::config::Settings) -> RegistryOptions {
        RegistryOptions::from_settings_with(s, |name| std::env::var(name).ok())
    }

    /// [`RegistryOptions::from_settings`] with the environment given (`var`
    /// looks a variable up).
    pub fn from_settings_with(
        s: &crate::config::Settings,
        var: impl Fn(&str) -> Option<String>,
    ) -> RegistryOptions {
        let mut insecure = s.registries.insecure.clone();
        for r in var(INSECURE_ENV)
            .as_deref()
            .map(insecure_list)
            .unwrap_or_default()
        {
            if !insecure.contains(&r) {
                insecure.push(r);
            }
        }
        let mut r = s.registries.clone();
        for (name, key) in [
            (MIN_RATE_ENV, &mut r.min_rate),
            (RATE_WINDOW_ENV, &mut r.rate_window_secs),
            (BLOB_DEADLINE_ENV, &mut r.blob_deadline_secs),
        ] {
            let Some(v) = var(name).filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            match v.trim().replace('_', "").parse::<u64>() {
                Ok(n) => *key = Some(n),
                Err(_) => tracing::warn!(
                    "{name}={v:?} is not a whole number; using the configuration file's value"
                ),
            }
        }
        RegistryOptions {
            insecure,
            certs_dir: s.registries.certs_dir.clone(),
            timeout: s.registries.timeout(),
            transfer: TransferLimits::from_settings(&r),
            partials: crate::store::PartialBounds::from_settings(&s.registries),
            ..RegistryOptions::default()
        }
    }

    /// Whether `registry` (`host[:port]`) may be reached over plain HTTP.
    pub(crate) fn plain_http_allowed(&self, registry: &str) -> bool {
        !self.tls_verify
            || super::reference::is_loopback(registry)
            || self.insecure.iter().any(|i| i == registry)
    }

    /// The `certs.d` directories asked for a registry's CA certificates.
    pub(crate) fn certs_dirs(&self) -> Vec<PathBuf> {
        match &self.certs_dir {
            Some(d) => vec![d.clone()],
            None => DEFAULT_CERTS_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

/// The environment variable naming registries allowed plain HTTP, as
/// `[registries] insecure` does in the configuration file: `host[:port]`
/// separated by commas or white space (`registry.lan:5000,10.0.0.7:5000`),
/// for CI jobs that have no configuration file.
pub const INSECURE_ENV: &str = "JBUILD_INSECURE_REGISTRIES";

/// The environment variables that set `[registries] min_rate`,
/// `rate_window_secs` and `blob_deadline_secs`, winning over the file:
/// for CI jobs that have no configuration file.
pub const MIN_RATE_ENV: &str = "JBUILD_REGISTRY_MIN_RATE";
pub const RATE_WINDOW_ENV: &str = "JBUILD_REGISTRY_RATE_WINDOW_SECS";
pub const BLOB_DEADLINE_ENV: &str = "JBUILD_REGISTRY_BLOB_DEADLINE_SECS";

/// The registries an [`INSECURE_ENV`] value names, lowercased as
/// references are.
pub fn insecure_list(value: &str) -> Vec<String> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|r| r.trim().trim_end_matches('/').to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect()
}

/// Where docker and podman look for a registry's CA certificates.
pub const DEFAULT_CERTS_DIRS: [&str; 2] = ["/etc/docker/certs.d", "/etc/containers/certs.d"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_adds_insecure_registries() {
        let mut settings = crate::config::Settings::default();
        settings.registries.insecure = vec!["a.lan:5000".into()];
        let o = RegistryOptions::from_settings_with(&settings, |n| {
            (n == INSECURE_ENV).then(|| " B.lan:5000, a.lan:5000 10.0.0.7:80/,".to_string())
        });
        assert_eq!(o.insecure, ["a.lan:5000", "b.lan:5000", "10.0.0.7:80"]);
        assert!(o.plain_http_allowed("10.0.0.7:80"));
        assert!(o.plain_http_allowed("127.0.0.1:5000"));
        assert!(!o.plain_http_allowed("c.lan:5000"));
        let off = RegistryOptions {
            tls_verify: false,
            ..o
        };
        assert!(off.plain_http_allowed("c.lan:5000"));
    }

    #[test]
    fn the_environment_wins_over_the_file_for_transfer_limits() {
        let settings = crate::config::Settings::parse(
            "[registries]\nmin_rate = 10\nrate_window_secs = 7\nblob_deadline_secs = 99\n",
        )
        .unwrap();
        let o = RegistryOptions::from_settings_with(&settings, |_| None);
        assert_eq!(o.transfer.min_rate, 10);
        assert_eq!(o.transfer.window, std::time::Duration::from_secs(7));
        let o = RegistryOptions::from_settings_with(&settings, |n| match n {
            MIN_RATE_ENV => Some("2_048".into()),
            RATE_WINDOW_ENV => Some("nonsense".into()),
            BLOB_DEADLINE_ENV => Some("0".into()),
            _ => None,
        });
        assert_eq!(o.transfer.min_rate, 2048);
        assert_eq!(o.transfer.window, std::time::Duration::from_secs(7));
        assert_eq!(o.transfer.deadline, None);
    }
}
