//! The flags every command that reaches a registry takes, as podman and
//! skopeo spell them: `--tls-verify=false`, `--cert-dir DIR` and
//! `--authfile FILE`, turned into the library's `RegistryOptions` over the
//! configuration file's `[registries]` and `$JBUILD_INSECURE_REGISTRIES`;
//! `--signature-policy`, `--jobs`; and the place an image argument names
//! for the commands that sign and verify.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::anyhow;
use clap::{ArgAction, Args};

use jbuild::keychain::DefaultKeychain;
use jbuild::transport::RegistryOptions;
use jbuild::trust::policy::{Guarded, Policy};

use crate::cli::{Ctx, Failure};
use jbuild::store::Store;
use jbuild::transport::Location;
use jbuild::trust::{Place, RegistryPlace, StorePlace};

/// `--authfile`: for login and logout, and through [`RegistryArgs`] for
/// every command that reaches a registry.
#[derive(Args, Debug, Clone, Default)]
pub struct AuthfileArg {
    /// The auth file (docker's JSON format) credentials are read from and
    /// `login` writes to, as podman's `--authfile`; also
    /// $REGISTRY_AUTH_FILE. Default: containers' auth.json, then docker's
    /// config.json.
    #[arg(long, value_name = "FILE")]
    pub authfile: Option<PathBuf>,
}

impl AuthfileArg {
    /// The keychain: every source, with the auth file named here in place
    /// of `$REGISTRY_AUTH_FILE`.
    pub fn keychain(&self) -> Result<DefaultKeychain, Failure> {
        DefaultKeychain::with_auth_file(self.authfile.as_deref()).map_err(Failure::from)
    }
}

/// How a command reaches registries.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Registry options")]
pub struct RegistryArgs {
    /// `--tls-verify=false`: registries may be reached over plain HTTP, and
    /// an HTTPS registry's certificate is not checked. For named registries
    /// only, set JBUILD_INSECURE_REGISTRIES=host:port,… (or [registries]
    /// insecure in the configuration file).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub tls_verify: bool,
    /// Trust the CA certificates (`*.crt`) in DIR, or in DIR/HOST:PORT/,
    /// in place of those in /etc/docker/certs.d/HOST:PORT/ (podman's
    /// flag).
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
    #[command(flatten)]
    pub auth: AuthfileArg,
}

impl RegistryArgs {
    /// The options: the configuration file's, then the environment's,
    /// then these flags.
    pub fn options(&self, ctx: &Ctx) -> Result<RegistryOptions, Failure> {
        let mut o = RegistryOptions::from_settings(&ctx.settings);
        o.tls_verify = self.tls_verify;
        if let Some(dir) = &self.cert_dir {
            if !dir.is_dir() {
                return Err(Failure::user(anyhow!(
                    "--cert-dir {}: not a directory; give the directory that holds the \
                     registry's CA certificate (ca.crt)",
                    dir.display()
                )));
            }
            o.cert_dir = Some(dir.clone());
        }
        if self.auth.authfile.is_some() {
            o.keychain = Some(Arc::new(self.auth.keychain()?));
        }
        Ok(o)
    }
}

/// `--signature-policy` of pull, build, create and import.
#[derive(Args, Debug)]
pub struct PolicyArg {
    /// The pull policy, a containers-policy.json(5) file, instead of the
    /// configuration's [trust] or /etc/containers/policy.json
    /// (docs/policy.md).
    #[arg(long, value_name = "FILE")]
    signature_policy: Option<PathBuf>,
}

impl PolicyArg {
    /// Checks the image `jbuild import` reads at `location` against the
    /// policy in force; the digest to copy, when the policy checked one.
    pub fn check_location(
        &self,
        ctx: &Ctx,
        location: &Location,
        options: &RegistryOptions,
    ) -> Result<Option<jbuild::digest::Digest>, Failure> {
        match Policy::find(self.signature_policy.as_deref(), &ctx.settings)
            .map_err(Failure::from)?
        {
            Some(policy) => policy
                .check_location(location, options)
                .map_err(Failure::from),
            None => Ok(None),
        }
    }

    /// `puller` behind the pull policy in force.
    pub fn guard(&self, ctx: &Ctx, puller: jbuild::transport::RegistryPuller) -> Guarded {
        Guarded::new(puller, self.signature_policy.as_deref(), &ctx.settings)
    }
}

#[derive(Args, Debug)]
pub struct JobsArg {
    /// Blobs moved at the same time.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
}

/// The place an image argument names: a registry for `docker://`, else
/// the store.
pub fn place<'a>(
    ctx: &Ctx,
    store: &'a mut Option<Store>,
    image: &str,
    registry: &RegistryArgs,
) -> Result<Box<dyn Place + 'a>, Failure> {
    let location = image.parse::<Location>().map_err(Failure::from)?;
    if let Some(r) = location.registry_ref() {
        return Ok(Box::new(RegistryPlace::new(r, registry.options(ctx)?)));
    }
    let store = store.insert(ctx.store()?);
    Ok(Box::new(
        StorePlace::find(store, image).map_err(Failure::from)?,
    ))
}
