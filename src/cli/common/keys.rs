//! Private keys and their passwords, as cosign asks for them: from
//! $COSIGN_PASSWORD, else at the terminal (`generate-key-pair`, `sign
//! --key`, `build --sign-with`).

use anyhow::anyhow;

use super::prompt;
use crate::cli::Failure;
use jbuild::keychain::Secret;
use jbuild::trust;

/// cosign's own variable for the private key's password.
pub const PASSWORD_VAR: &str = "COSIGN_PASSWORD";

/// The password from $COSIGN_PASSWORD, else asked on a terminal (twice
/// when `confirm`); `None` when neither can be had.
pub fn password(confirm: bool) -> Result<Option<Secret>, Failure> {
    if let Ok(p) = std::env::var(PASSWORD_VAR) {
        return Ok(Some(Secret::new(p)));
    }
    if !prompt::interactive() {
        return Ok(None);
    }
    let ask = |q: &str| {
        prompt::secret(q).map_err(|e| Failure::user(anyhow!("cannot read the password: {e}")))
    };
    let first = ask("Enter password for private key: ")?;
    if confirm && ask("Enter password for private key again: ")? != first {
        return Err(Failure::user(anyhow!("the passwords do not match")));
    }
    Ok(Some(Secret::new(first)))
}

/// The private key in `path`, its password from $COSIGN_PASSWORD or asked
/// on a terminal (`sign --key`, `build --sign-with`).
pub fn signing_key(path: &std::path::Path) -> Result<trust::SigningKey, Failure> {
    let mut failed = None;
    let key = trust::read_signing_key(path, &mut || match password(false) {
        Ok(p) => p,
        Err(f) => {
            failed = Some(f);
            None
        }
    });
    if let Some(f) = failed {
        return Err(f);
    }
    key.map_err(Failure::from)
}
