//! `--pull=always|missing|never`: when a build asks the registry for a
//! FROM (or `COPY --from`) image, with podman's names.
//!
//! - `missing` (the default): only for an image the store lacks.
//! - `always`: every time, through the same pull transaction as `jbuild
//!   pull`: the reference is resolved again, a manifest that did not change
//!   costs the registry's API check and the manifest request and nothing
//!   else (the blobs are in the store), a changed one is pulled and named.
//! - `never`: not at all; an image the store lacks fails the build before
//!   any request is made.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    Always,
    #[default]
    Missing,
    Never,
}

/// A `--pull` value that is not a policy.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a pull policy: use always, missing or never")]
pub struct BadPullPolicy(pub String);

impl crate::blame::Blame for BadPullPolicy {
    /// A flag or setting the user wrote.
    fn is_user_error(&self) -> bool {
        true
    }
}

impl FromStr for PullPolicy {
    type Err = BadPullPolicy;

    /// podman's spellings: `true` is `always`, `false` is `never`
    /// (`newer`, which compares creation times, is not offered).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "always" | "true" => Ok(PullPolicy::Always),
            "missing" => Ok(PullPolicy::Missing),
            "never" | "false" => Ok(PullPolicy::Never),
            _ => Err(BadPullPolicy(s.to_string())),
        }
    }
}

impl fmt::Display for PullPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PullPolicy::Always => "always",
            PullPolicy::Missing => "missing",
            PullPolicy::Never => "never",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_spellings() {
        for (s, p) in [
            ("always", PullPolicy::Always),
            ("true", PullPolicy::Always),
            ("Missing", PullPolicy::Missing),
            ("never", PullPolicy::Never),
            ("false", PullPolicy::Never),
        ] {
            assert_eq!(s.parse::<PullPolicy>().unwrap(), p);
        }
        let e = "sometimes".parse::<PullPolicy>().unwrap_err();
        assert!(e.to_string().contains("always, missing or never"));
        assert_eq!(PullPolicy::default(), PullPolicy::Missing);
    }
}
