//! The keychain jbuild uses: every source, in the order the module
//! documentation gives, and the one place that writes credentials.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::containers::ContainersAuthKeychain;
use super::docker::DockerConfigKeychain;
use super::env::EnvKeychain;
use super::multi::MultiKeychain;
use super::{canonical_registry, Anonymous, Credential, Keychain, KeychainError};

/// The environment, containers' `auth.json`, docker's `config.json`, then
/// anonymous access. Built from the environment once (`from_env`); tests
/// build it from a map of variables.
#[derive(Debug, Clone)]
pub struct DefaultKeychain {
    containers: Arc<ContainersAuthKeychain>,
    /// The auth file named by `--authfile` or `$REGISTRY_AUTH_FILE`: where
    /// `store` writes, as podman does.
    named: Option<DockerConfigKeychain>,
    docker: Arc<DockerConfigKeychain>,
    sources: MultiKeychain,
}

impl DefaultKeychain {
    pub fn from_env() -> Result<DefaultKeychain, KeychainError> {
        DefaultKeychain::from_vars(|name| std::env::var_os(name))
    }

    /// [`DefaultKeychain::from_env`], with `auth_file` (`--authfile`, as
    /// podman names it) in place of `$REGISTRY_AUTH_FILE` when given.
    pub fn with_auth_file(auth_file: Option<&Path>) -> Result<DefaultKeychain, KeychainError> {
        DefaultKeychain::from_vars(|name| match (name, auth_file) {
            ("REGISTRY_AUTH_FILE", Some(f)) => Some(f.as_os_str().to_owned()),
            _ => std::env::var_os(name),
        })
    }

    /// The keychain the given environment describes (`var` looks a variable
    /// up; empty values count as unset).
    pub fn from_vars(
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<DefaultKeychain, KeychainError> {
        let env = EnvKeychain::from_vars(&var)?;
        let containers = Arc::new(ContainersAuthKeychain::from_vars(&var));
        let docker = Arc::new(DockerConfigKeychain::from_vars(&var));
        let named = super::non_empty(&var, "REGISTRY_AUTH_FILE")
            .map(|f| DockerConfigKeychain::at(PathBuf::from(f), var("PATH")));
        let sources = MultiKeychain::new(vec![
            Arc::new(env),
            containers.clone(),
            docker.clone(),
            Arc::new(Anonymous),
        ]);
        Ok(DefaultKeychain {
            containers,
            named,
            docker,
            sources,
        })
    }

    /// Keeps `cred` for `registry` where it will be found again: the auth
    /// file named by `--authfile` or `$REGISTRY_AUTH_FILE` (or the helper it
    /// names), else the containers `auth.json` that already holds a
    /// credential for it, else docker's `config.json` or its helper.
    pub fn store(&self, registry: &str, cred: &Credential) -> Result<(), KeychainError> {
        let registry = canonical_registry(registry);
        if let Some(named) = &self.named {
            return named.store(&registry, cred);
        }
        if self.containers.store_existing(&registry, cred)? {
            return Ok(());
        }
        self.docker.store(&registry, cred)
    }

    /// Forgets `registry` in every file and helper jbuild can write; `true`
    /// if anything was removed.
    pub fn erase(&self, registry: &str) -> Result<bool, KeychainError> {
        let registry = canonical_registry(registry);
        let from_containers = self.containers.erase(&registry)?;
        let from_docker = self.docker.erase(&registry)?;
        Ok(from_containers || from_docker)
    }
}

impl Keychain for DefaultKeychain {
    fn resolve(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        self.sources.resolve(registry)
    }
}
