//! containers' `auth.json`, as podman, skopeo and buildah keep it:
//! `$REGISTRY_AUTH_FILE` when set, else `$XDG_RUNTIME_DIR/containers/auth.json`
//! (what `podman login` writes) and `$XDG_CONFIG_HOME/containers/auth.json`
//! (`~/.config/...`), asked in that order. The format is docker's
//! (see [`file`](super::file)), helpers included.

use std::ffi::OsString;
use std::path::PathBuf;

use super::file::{erase_in, resolve_in, AuthFile};
use super::{non_empty, Credential, Keychain, KeychainError};

/// The credentials in containers' `auth.json` files.
#[derive(Debug, Clone, Default)]
pub struct ContainersAuthKeychain {
    /// The files, in the order they are asked.
    files: Vec<PathBuf>,
    /// `$PATH`, for finding credential helpers.
    helpers: Option<OsString>,
}

impl ContainersAuthKeychain {
    /// The files the given environment names (`var` looks a variable up;
    /// empty values count as unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> ContainersAuthKeychain {
        let mut files = Vec::new();
        if let Some(f) = non_empty(&var, "REGISTRY_AUTH_FILE") {
            files.push(PathBuf::from(f));
        } else {
            if let Some(run) = non_empty(&var, "XDG_RUNTIME_DIR") {
                files.push(PathBuf::from(run).join("containers/auth.json"));
            }
            let config = non_empty(&var, "XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| non_empty(&var, "HOME").map(|h| PathBuf::from(h).join(".config")));
            if let Some(c) = config {
                files.push(c.join("containers/auth.json"));
            }
        }
        ContainersAuthKeychain {
            files,
            helpers: var("PATH"),
        }
    }

    /// Replaces the credential written for `registry` (canonical) in the
    /// first file that holds one; `false` when none does.
    pub(super) fn store_existing(
        &self,
        registry: &str,
        cred: &Credential,
    ) -> Result<bool, KeychainError> {
        for path in &self.files {
            if let Some(mut f) = AuthFile::load(path)? {
                if f.has_inline(registry) {
                    f.set_inline(registry, cred);
                    f.save()?;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Forgets `registry` (canonical) in every file and the helpers they
    /// name; `true` if anything was removed.
    pub(super) fn erase(&self, registry: &str) -> Result<bool, KeychainError> {
        let mut removed = false;
        for path in &self.files {
            removed |= erase_in(path, registry, self.helpers.as_ref())?;
        }
        Ok(removed)
    }
}

impl Keychain for ContainersAuthKeychain {
    fn resolve(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        for path in &self.files {
            if let Some(c) = resolve_in(path, registry, self.helpers.as_ref())? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }
}
