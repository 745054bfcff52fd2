//! The SLSA provenance of a build: what went in (the Jailfile, the build
//! arguments, the target and platform, every image and release it read,
//! the context) and what each step was (its cache key), as the predicate of
//! an in-toto statement.
//!
//! The predicate is SLSA v0.2 (`https://slsa.dev/provenance/v0.2`): what
//! `cosign attest --type slsaprovenance` writes and `cosign
//! verify-attestation --type slsaprovenance` asks for. It holds no time and
//! nothing of the host, so two builds of the same inputs give the same
//! bytes; a secret (`--secret`) is never part of it — only the build
//! arguments the user passed. [`predicate`] makes it; `jbuild verify`
//! reads it back ([`Provenance`] is `Deserialize`) to rebuild with the
//! same arguments and base digests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::env::{BuildOptions, BuildOutput};
use super::error::BuildError;
pub use super::facts::{BuildFacts, StepRecord};
use super::native::{self, Ignore};
use crate::digest::Digest;
use crate::jailfile::CopySource;

/// The in-toto predicate type of [`Provenance`].
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v0.2";

/// What a jbuild build is, for `buildType`: a Jailfile built into an OCI
/// image by the rules of docs/verify.md.
pub const BUILD_TYPE: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/buildtypes/jailfile/v1");

/// The builder's identity: jbuild and its version.
pub const BUILDER_ID: &str = concat!(
    env!("CARGO_PKG_REPOSITORY"),
    "@v",
    env!("CARGO_PKG_VERSION")
);

/// The material `uri` of the build context.
pub const CONTEXT_URI: &str = "jbuild:context";
/// The prefix of an image material's `uri` (the reference as the
/// Jailfile names it follows).
pub const IMAGE_URI_PREFIX: &str = "docker://";
/// The prefix of a FreeBSD release material's `uri`.
pub const RELEASE_URI_PREFIX: &str = "freebsd:";

/// A SLSA v0.2 provenance predicate, as jbuild writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub builder: Builder,
    pub build_type: String,
    pub invocation: Invocation,
    pub build_config: BuildConfig,
    pub metadata: Metadata,
    pub materials: Vec<Material>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Builder {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    pub config_source: ConfigSource,
    pub parameters: Parameters,
}

/// The Jailfile: its digest and file name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSource {
    pub uri: String,
    pub digest: BTreeMap<String, String>,
    pub entry_point: String,
}

/// What the user chose: the build arguments given (never a secret), the
/// stage and the platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parameters {
    pub build_args: BTreeMap<String, String>,
    pub target: String,
    pub platform: String,
}

/// jbuild's own record of the build: every layer step and its cache key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildConfig {
    pub steps: Vec<StepRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub completeness: Completeness,
    pub reproducible: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completeness {
    pub parameters: bool,
    pub environment: bool,
    pub materials: bool,
}

/// Something the build read, by digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Material {
    pub uri: String,
    pub digest: BTreeMap<String, String>,
}

fn sha256(d: &Digest) -> BTreeMap<String, String> {
    [("sha256".to_string(), d.hex().to_string())].into()
}

/// The provenance of the build `out` (made with `opts`). Hashes the whole
/// build context (with its `.jailignore`), which only this asks for.
pub fn predicate(out: &BuildOutput, opts: &BuildOptions) -> Result<Provenance, BuildError> {
    let facts = &out.facts;
    let ignore = Ignore::load_for(&opts.context, &opts.jailfile).map_err(BuildError::Context)?;
    let context = native::sources_digest(
        &opts.context,
        &[CopySource::Path(".".into())],
        ignore.as_ref(),
    )
    .map_err(BuildError::Context)?;
    let mut materials = vec![Material {
        uri: CONTEXT_URI.into(),
        digest: sha256(&context),
    }];
    if let Some(source) = &opts.context_source {
        materials.push(Material {
            uri: source.uri.clone(),
            digest: source.digest.clone(),
        });
    }
    materials.extend(facts.images.iter().map(|(r, d)| Material {
        uri: format!("{IMAGE_URI_PREFIX}{r}"),
        digest: sha256(d),
    }));
    materials.extend(facts.releases.iter().map(|(r, d)| Material {
        uri: format!("{RELEASE_URI_PREFIX}{r}"),
        digest: sha256(d),
    }));
    materials.sort_by(|a, b| a.uri.cmp(&b.uri).then_with(|| a.digest.cmp(&b.digest)));
    // Where the Jailfile is on this host is nobody's business: its name.
    let entry_point = opts
        .jailfile
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Provenance {
        builder: Builder {
            id: BUILDER_ID.into(),
        },
        build_type: BUILD_TYPE.into(),
        invocation: Invocation {
            config_source: ConfigSource {
                uri: "jbuild:jailfile".into(),
                digest: facts
                    .jailfile_digest
                    .as_ref()
                    .map(sha256)
                    .unwrap_or_default(),
                entry_point,
            },
            parameters: Parameters {
                build_args: opts.build_args.clone(),
                target: facts.target.clone(),
                platform: facts.platform.clone(),
            },
        },
        build_config: BuildConfig {
            steps: facts.steps.clone(),
        },
        metadata: Metadata {
            completeness: Completeness {
                parameters: true,
                environment: false,
                materials: !facts.runs_processes,
            },
            reproducible: !facts.runs_processes,
        },
        materials,
    })
}

impl Provenance {
    /// The predicate as canonical JSON (sorted keys): the same build gives
    /// the same bytes.
    pub fn to_json(&self) -> Vec<u8> {
        crate::store::canonical_json(self)
    }

    /// The images the build read, by the reference the Jailfile wrote.
    pub fn images(&self) -> BTreeMap<String, Digest> {
        self.materials
            .iter()
            .filter_map(|m| {
                let reference = m.uri.strip_prefix(IMAGE_URI_PREFIX)?;
                let hex = m.digest.get("sha256")?;
                Some((reference.to_string(), format!("sha256:{hex}").parse().ok()?))
            })
            .collect()
    }
}
