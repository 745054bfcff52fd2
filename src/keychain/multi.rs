//! Keychains composed: go-containerregistry's `authn.NewMultiKeychain`.

use std::sync::Arc;

use super::{Credential, Keychain, KeychainError};

/// Keychains asked in order; the first that knows the registry answers, and
/// the first that fails stops the search (see [`Keychain::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct MultiKeychain {
    keychains: Vec<Arc<dyn Keychain>>,
}

impl MultiKeychain {
    pub fn new(keychains: Vec<Arc<dyn Keychain>>) -> MultiKeychain {
        MultiKeychain { keychains }
    }
}

impl Keychain for MultiKeychain {
    fn resolve(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        for k in &self.keychains {
            if let Some(c) = k.resolve(registry)? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }
}
