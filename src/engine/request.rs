//! One build, from request to published image: what `jbuild build` asks
//! of the library in one call ([`run`]), as uv's commands call one
//! function each. The command line resolves its flags into a
//! [`BuildRequest`] and prints the [`BuildSummary`]; every step between —
//! the build (one platform, or several into a manifest list), the files it
//! writes, its attestations, the pushes — happens here, against the one
//! store and the one set of registry options in the [`BuildEnv`] and the
//! request.

use std::path::PathBuf;

use super::attest::{self, Attest, AttestError};
use super::env::{BuildEnv, BuildOptions, BuildOutput};
use super::error::BuildError;
use super::platforms::{build_platforms, ListOutput};
use super::provenance;
use super::publish::{self, PushError, PushOptions, Pushed};
use super::run::{build, build_text};
use crate::fsutil::output::{write_output, OutputError};
use crate::image::index::{self, IndexError};
use crate::image::Platform;
use crate::store::ImageName;
use crate::transport::Location;
use crate::trust::Signed;

/// Everything one build is asked to do.
pub struct BuildRequest<'a> {
    pub options: BuildOptions,
    /// The recipe's text when it is not read from `options.jailfile`
    /// (standard input, a translated Bastille template).
    pub text: Option<String>,
    /// Several platforms, built into the manifest list `list`; empty with
    /// no list: the one platform `options.platform` says.
    pub platforms: Vec<Platform>,
    pub list: Option<ImageName>,
    /// What to attest about the image (one image only), and the key.
    pub attest: Attest<'a>,
    /// Where the image's digest is written (`--iidfile`).
    pub iidfile: Option<PathBuf>,
    /// Where the build's SLSA provenance predicate is written
    /// (`--provenance-file`).
    pub provenance_file: Option<PathBuf>,
    /// Where the image (or the list) is pushed once built and attested,
    /// and how.
    pub destinations: Vec<Location>,
    pub push: PushOptions,
}

/// What a build made and where it went.
pub enum BuildSummary {
    /// One image.
    Image {
        output: BuildOutput,
        /// Its attestations, in the order made.
        attested: Vec<Signed>,
        pushed: Vec<Pushed>,
    },
    /// One image per platform, in a manifest list.
    List {
        output: ListOutput,
        pushed: Vec<Pushed>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A file the build was asked to write (`--iidfile`,
    /// `--provenance-file`): nothing was written to it.
    #[error("{flag} {}: nothing written", file.display())]
    Output {
        flag: &'static str,
        file: PathBuf,
        #[source]
        source: OutputError,
    },
    #[error(transparent)]
    Attest(#[from] AttestError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Push(#[from] PushError),
}

impl crate::blame::Blame for RequestError {
    /// Whether the user can fix it rather than it being a fault of
    /// jbuild's or the system's.
    fn is_user_error(&self) -> bool {
        match self {
            RequestError::Build(e) => e.is_user_error(),
            RequestError::Output { source, .. } => source.is_user_error(),
            RequestError::Attest(e) => e.is_user_error(),
            RequestError::Index(e) => e.is_user_error(),
            RequestError::Push(e) => e.is_user_error(),
        }
    }
}

/// Builds, writes the files asked for, attests and pushes, in that order:
/// a file or attestation is made only for an image that was built, a push
/// only for an image whose attestations are made (they go with it).
pub fn run(env: &BuildEnv<'_>, req: &BuildRequest<'_>) -> Result<BuildSummary, RequestError> {
    let opts = &req.options;
    if let Some(list) = &req.list {
        let output = build_platforms(env, opts, req.text.as_deref(), &req.platforms, list)?;
        let mut pushed = Vec::new();
        for to in &req.destinations {
            // No request is made for a list with a missing child or two
            // children of one platform.
            index::check(env.store, list)?;
            let name = list.to_string();
            pushed.push(publish::push(
                env.store,
                &name,
                to,
                &req.push,
                env.reporter,
            )?);
        }
        return Ok(BuildSummary::List { output, pushed });
    }
    let output = match &req.text {
        Some(text) => build_text(env, opts, text)?,
        None => build(env, opts)?,
    };
    let digest = output.manifest_digest.to_string();
    if let Some(file) = &req.iidfile {
        write("--iidfile", file, digest.as_bytes())?;
    }
    if let Some(file) = &req.provenance_file {
        let predicate = provenance::predicate(&output, opts)?;
        write("--provenance-file", file, &predicate.to_json())?;
    }
    let attested = if req.attest.provenance || req.attest.sbom {
        attest::attest_build(env.store, &output, opts, &req.attest)?
    } else {
        Vec::new()
    };
    let mut pushed = Vec::new();
    for to in &req.destinations {
        // By digest: the image this build made, whatever its names point
        // at by now.
        pushed.push(publish::push(
            env.store,
            &digest,
            to,
            &req.push,
            env.reporter,
        )?);
    }
    Ok(BuildSummary::Image {
        output,
        attested,
        pushed,
    })
}

/// Writes `bytes` to `file` as `fsutil::output` writes a path the user
/// names: a regular file atomically (a script never reads half of it), a
/// FIFO or device in place, `-` to standard output.
fn write(flag: &'static str, file: &std::path::Path, bytes: &[u8]) -> Result<(), RequestError> {
    write_output(file, bytes).map_err(|source| RequestError::Output {
        flag,
        file: file.to_path_buf(),
        source,
    })
}
