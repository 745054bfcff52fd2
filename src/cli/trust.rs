//! `jbuild generate-key-pair`, `sign`, `verify-signature` and
//! `verify-attestation`: signatures cosign understands (`jbuild::trust`).
//! An image is `docker://REF` in a registry, or one in the store.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::common::access::{place, RegistryArgs};
use super::common::keys::{password, signing_key, PASSWORD_VAR};
use super::{CmdResult, Ctx, Failure};
use jbuild::trust;

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild generate-key-pair\n  \
    COSIGN_PASSWORD=… jbuild generate-key-pair --output-key-prefix ci/release")]
pub struct GenerateKeyPairArgs {
    /// Write PREFIX.key (encrypted, as cosign writes it) and PREFIX.pub.
    #[arg(long, value_name = "PREFIX", default_value = "cosign")]
    output_key_prefix: PathBuf,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild sign --key cosign.key web:1.0\n  \
    jbuild sign --key cosign.key docker://registry.lan:5000/jails/web:1.0")]
pub struct SignArgs {
    /// The private key: cosign's encrypted key (password from
    /// $COSIGN_PASSWORD, else asked on a terminal), or a PKCS#8 or EC PEM
    /// key.
    #[arg(long, value_name = "KEY")]
    key: PathBuf,
    /// The image: `docker://REF` in a registry (the signature is pushed
    /// there, tagged `sha256-<digest>.sig`), else an image in the store
    /// (the signature is kept beside it and `jbuild push` carries it).
    image: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// What the verify commands take: the public key and the image.
#[derive(Args, Debug)]
pub struct Verifying {
    /// The public key (PEM), as `cosign.pub`.
    #[arg(long, value_name = "PUB")]
    key: PathBuf,
    /// The image: `docker://REF` in a registry, else an image in the store.
    image: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild verify-signature --key cosign.pub docker://registry.lan:5000/jails/web:1.0\n  \
    jbuild verify-signature --key cosign.pub web:1.0")]
pub struct VerifySignatureArgs {
    #[command(flatten)]
    target: Verifying,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild verify-attestation --key cosign.pub --type slsaprovenance docker://registry.lan:5000/jails/web:1.0")]
pub struct VerifyAttestationArgs {
    /// The predicate type: cosign's short names (`slsaprovenance`,
    /// `slsaprovenance1`, `spdxjson`, `cyclonedx`, `custom`) or a URI.
    /// Default: any.
    #[arg(long = "type", value_name = "TYPE")]
    predicate_type: Option<String>,
    #[command(flatten)]
    target: Verifying,
}

pub fn generate_key_pair(ctx: &Ctx, a: GenerateKeyPairArgs) -> CmdResult {
    let Some(pw) = password(true)? else {
        return Err(Failure::user(anyhow!(
            "no password for the new key: set {PASSWORD_VAR} (it may be empty) or run on a \
             terminal to be asked"
        )));
    };
    let files = trust::generate_key_pair(&a.output_key_prefix, &pw).map_err(Failure::from)?;
    if ctx.json {
        outln!(
            "{}",
            json!({"privateKey": files.private, "publicKey": files.public})
        );
    } else if !ctx.quiet {
        outln!("Private key written to {}", files.private.display());
        outln!("Public key written to {}", files.public.display());
    }
    Ok(())
}

pub fn sign(ctx: &Ctx, a: SignArgs) -> CmdResult {
    let key = signing_key(&a.key)?;
    let mut store = None;
    let place = place(ctx, &mut store, &a.image, &a.registry)?;
    let signed = trust::sign(place.as_ref(), &key).map_err(Failure::from)?;
    if ctx.json {
        outln!(
            "{}",
            serde_json::to_string(&signed).map_err(Failure::internal)?
        );
    } else if !ctx.quiet {
        outln!(
            "Signed {} ({}): {} now holds {} signature(s)",
            signed.image,
            signed.digest,
            signed.tag,
            signed.layers
        );
    }
    Ok(())
}

pub fn verify_signature(ctx: &Ctx, a: VerifySignatureArgs) -> CmdResult {
    let a = a.target;
    let key = trust::read_public_key(&a.key).map_err(Failure::from)?;
    let mut store = None;
    let place = place(ctx, &mut store, &a.image, &a.registry)?;
    let good = trust::verify_signatures(place.as_ref(), &key).map_err(Failure::from)?;
    if ctx.json {
        outln!(
            "{}",
            serde_json::to_string(&good).map_err(Failure::internal)?
        );
    } else {
        for v in &good {
            outln!(
                "Verified {} ({}): signed for {} by the key {}",
                v.image,
                v.digest,
                v.docker_reference,
                a.key.display()
            );
        }
    }
    Ok(())
}

pub fn verify_attestation(ctx: &Ctx, a: VerifyAttestationArgs) -> CmdResult {
    let t = &a.target;
    let key = trust::read_public_key(&t.key).map_err(Failure::from)?;
    let mut store = None;
    let place = place(ctx, &mut store, &t.image, &t.registry)?;
    let wanted = a.predicate_type.as_deref().map(trust::dsse::predicate_type);
    let good = trust::verify_attestations(place.as_ref(), &key, wanted).map_err(Failure::from)?;
    if ctx.json {
        outln!(
            "{}",
            serde_json::to_string(&good).map_err(Failure::internal)?
        );
    } else {
        for s in &good {
            // What the statement itself says it is about (its subject).
            let subjects: Vec<String> = s
                .subject
                .iter()
                .flat_map(|sub| {
                    sub.digest
                        .iter()
                        .map(move |(alg, hex)| format!("{}@{alg}:{hex}", sub.name))
                })
                .collect();
            outln!(
                "Verified an attestation of type {} about {}: subject {}",
                s.predicate_type,
                place.describe(),
                subjects.join(", ")
            );
        }
    }
    Ok(())
}
