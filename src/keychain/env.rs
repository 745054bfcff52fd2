//! Credentials in the environment, for CI: `JBUILD_REGISTRY_USERNAME` and
//! `JBUILD_REGISTRY_PASSWORD` for the one registry `JBUILD_REGISTRY_HOST`
//! names. All three or none: a user name and password without a host would
//! be sent to whichever registry asked first.

use std::ffi::OsString;

use super::{canonical_registry, non_empty, Credential, Keychain, KeychainError, Secret};

/// The credential the `JBUILD_REGISTRY_*` variables give, for their one
/// registry.
#[derive(Debug, Clone, Default)]
pub struct EnvKeychain {
    /// Registry (canonical), user name, password.
    cred: Option<(String, String, Secret)>,
}

impl EnvKeychain {
    /// The keychain the given environment describes (`var` looks a variable
    /// up; empty values count as unset). Some but not all three variables
    /// set is an error that names the missing ones.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Result<EnvKeychain, KeychainError> {
        let text = |name: &str| non_empty(&var, name).map(|v| v.to_string_lossy().into_owned());
        let cred = match (
            text("JBUILD_REGISTRY_HOST"),
            text("JBUILD_REGISTRY_USERNAME"),
            text("JBUILD_REGISTRY_PASSWORD"),
        ) {
            (None, None, None) => None,
            (Some(h), Some(u), Some(p)) => Some((canonical_registry(&h), u, Secret::new(p))),
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
        Ok(EnvKeychain { cred })
    }
}

impl Keychain for EnvKeychain {
    fn resolve(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        Ok(match &self.cred {
            Some((host, user, pass)) if host == registry => Some(Credential::Basic {
                username: user.clone(),
                password: pass.clone(),
            }),
            _ => None,
        })
    }
}
