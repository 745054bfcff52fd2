//! docker's `config.json`, in `$DOCKER_CONFIG` (else `~/.docker`): the
//! helper `credHelpers[registry]` names, else the `credsStore` helper, else
//! what `auths` holds (see [`file`](super::file) and
//! [`helper`](super::helper)). It is where docker stores, so it is where
//! new credentials go.

use std::ffi::OsString;
use std::path::PathBuf;

use super::file::{erase_in, resolve_in, AuthFile};
use super::{helper, non_empty, server_url, Credential, Keychain, KeychainError};

/// The credentials docker's `config.json` and its helpers hold.
#[derive(Debug, Clone, Default)]
pub struct DockerConfigKeychain {
    /// `config.json`; `None` when neither `DOCKER_CONFIG` nor `HOME` is set.
    file: Option<PathBuf>,
    /// `$PATH`, for finding credential helpers.
    helpers: Option<OsString>,
}

impl DockerConfigKeychain {
    /// The file the given environment names (`var` looks a variable up;
    /// empty values count as unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> DockerConfigKeychain {
        let file = non_empty(&var, "DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| non_empty(&var, "HOME").map(|h| PathBuf::from(h).join(".docker")))
            .map(|d| d.join("config.json"));
        DockerConfigKeychain {
            file,
            helpers: var("PATH"),
        }
    }

    /// The credentials in `file` (docker's format: `auths`, `credHelpers`,
    /// `credsStore`), helpers found on `helpers` (a `$PATH`).
    pub fn at(file: PathBuf, helpers: Option<OsString>) -> DockerConfigKeychain {
        DockerConfigKeychain {
            file: Some(file),
            helpers,
        }
    }

    /// Keeps `cred` for `registry` (canonical) where docker would: with the
    /// helper the file names for it, else base64 in the file (mode 0600,
    /// replaced atomically).
    pub(super) fn store(&self, registry: &str, cred: &Credential) -> Result<(), KeychainError> {
        let Some(path) = &self.file else {
            return Err(KeychainError::Env {
                message: "nowhere to store credentials: set HOME or DOCKER_CONFIG".into(),
            });
        };
        let mut f = AuthFile::load(path)?.unwrap_or_else(|| AuthFile::empty(path));
        if let Some(program) = f.helper_for(registry) {
            helper::store(&program, &server_url(registry), cred, self.helpers.as_ref())?;
            // docker keeps an empty entry so `docker login` lists the registry.
            if !f.has_entry(registry) {
                f.set_placeholder(registry);
                f.save()?;
            }
            return Ok(());
        }
        f.set_inline(registry, cred);
        f.save()
    }

    /// Forgets `registry` (canonical) in the file and its helper; `true` if
    /// anything was removed.
    pub(super) fn erase(&self, registry: &str) -> Result<bool, KeychainError> {
        match &self.file {
            Some(path) => erase_in(path, registry, self.helpers.as_ref()),
            None => Ok(false),
        }
    }
}

impl Keychain for DockerConfigKeychain {
    fn resolve(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        match &self.file {
            Some(path) => resolve_in(path, registry, self.helpers.as_ref()),
            None => Ok(None),
        }
    }
}
