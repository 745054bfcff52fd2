//! A build's attestations: `build --provenance` and `build --sbom`, signed
//! with `--sign-with KEY` and kept beside the image in the store as cosign
//! keeps them in a registry (`sha256-<hex>.att`), so `jbuild push` (and
//! `build --push`) carries them; and reading a provenance back for
//! `jbuild verify`.
//!
//! An attestation is an in-toto statement whose subject is the image's
//! manifest digest, in a DSSE envelope signed as `cosign attest --key`
//! signs ([`crate::trust::attest`]): the SLSA v0.2 provenance
//! ([`super::provenance`], cosign's `--type slsaprovenance`) and the SPDX
//! 2.3 document ([`crate::sbom::document`], cosign's `--type spdxjson`).
//! Without a key the envelope has no signature: `jbuild verify` still
//! takes a build's arguments and base digests from it (the rebuild's
//! digest is the check), while cosign's `verify-attestation` and `jbuild
//! verify-attestation` refuse it, as they refuse any attestation no key
//! of theirs signed (docs/trust.md).

use super::env::{BuildOptions, BuildOutput};
use super::error::BuildError;
use super::provenance::{self, Provenance};
use crate::blame::Blame;
use crate::image::Platform;
use crate::sbom::{self, SbomError};
use crate::store::Store;
use crate::trust::{self, dsse, Place, PublicKey, Signed, SigningKey, StorePlace, TrustError};

/// What to attest about a build, and the key that signs (none: unsigned).
pub struct Attest<'a> {
    pub key: Option<&'a SigningKey>,
    /// The SLSA provenance.
    pub provenance: bool,
    /// The SBOM (SPDX 2.3).
    pub sbom: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    #[error("cannot make the build's provenance")]
    Provenance(#[source] Box<BuildError>),
    #[error("cannot make the image's SBOM")]
    Sbom(#[source] SbomError),
    /// Its messages name the image and what failed.
    #[error(transparent)]
    Trust(TrustError),
    /// An attached provenance that is not one jbuild wrote.
    #[error("the provenance attached to {image} is not one jbuild wrote")]
    NotOurs {
        image: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Blame for AttestError {
    fn is_user_error(&self) -> bool {
        match self {
            AttestError::Provenance(e) => e.is_user_error(),
            AttestError::Sbom(e) => e.is_user_error(),
            AttestError::Trust(e) => e.is_user_error(),
            AttestError::NotOurs { .. } => true,
        }
    }
}

/// Attests what `what` asks about the image `out` built (made with
/// `opts`), in `store` beside the image (which must have a name there):
/// one `.att` layer each, provenance first.
pub fn attest_build(
    store: &Store,
    out: &BuildOutput,
    opts: &BuildOptions,
    what: &Attest<'_>,
) -> Result<Vec<Signed>, AttestError> {
    let digest = out.manifest_digest.to_string();
    let place = StorePlace::find(store, &digest).map_err(AttestError::Trust)?;
    let mut done = Vec::new();
    if what.provenance {
        let p = provenance::predicate(out, opts).map_err(|e| AttestError::Provenance(e.into()))?;
        let value = serde_json::to_value(&p).expect("a provenance always serialises");
        done.push(
            trust::attest(&place, what.key, provenance::PREDICATE_TYPE, value)
                .map_err(AttestError::Trust)?,
        );
    }
    if what.sbom {
        // The image is a manifest: the platform only picks from an index.
        let doc = sbom::document(
            store,
            &digest,
            &Platform::default_for_host(),
            sbom::Format::Spdx,
        )
        .map_err(AttestError::Sbom)?;
        let value: serde_json::Value =
            serde_json::from_slice(&doc).expect("the SBOM is JSON jbuild wrote");
        done.push(
            trust::attest(&place, what.key, dsse::predicate_type("spdxjson"), value)
                .map_err(AttestError::Trust)?,
        );
    }
    Ok(done)
}

/// The provenance attached to the image `place` names, if it has one:
/// with `key`, one the key verifies (none attached, or none that passes,
/// is an error); without, the first one found, unverified (it only says
/// how to rebuild, and the rebuild's digest is the check).
pub fn attached_provenance(
    place: &dyn Place,
    key: Option<&PublicKey>,
) -> Result<Option<Provenance>, AttestError> {
    let statements = match key {
        Some(k) => trust::verify_attestations(place, k, Some(provenance::PREDICATE_TYPE)),
        None => trust::read_attestations(place, Some(provenance::PREDICATE_TYPE)),
    };
    let statements = match statements {
        Ok(s) => s,
        // Without a key, an image with no provenance (or none jbuild can
        // read) is simply rebuilt without one.
        Err(TrustError::NoAttestations { .. } | TrustError::NoneVerified { .. })
            if key.is_none() =>
        {
            return Ok(None)
        }
        Err(e) => return Err(AttestError::Trust(e)),
    };
    let Some(first) = statements.into_iter().next() else {
        return Ok(None);
    };
    serde_json::from_value(first.predicate)
        .map(Some)
        .map_err(|source| AttestError::NotOurs {
            image: place.describe(),
            source,
        })
}
