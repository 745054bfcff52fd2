//! The fetch phase: everything a plan needs from outside the recipe —
//! FROM and `COPY --from` images (found in the store or pulled, as
//! `--pull` says: [`super::bases`]), release MANIFESTs and pkgbase
//! catalogues, the package repositories' state, ADD URLs without a
//! checksum (downloaded into the cache: their digest keys the step), the
//! commits of ADD's git repositories, the build context's digests — got
//! once, before the build is planned, into the planner's
//! [`crate::plan::Inputs`]. The planner reads only those answers: it holds
//! no client and can fetch nothing ([`crate::plan`], "Three phases").
//!
//! A multi-platform build shares one [`FetchPhase`] across its passes
//! (the check of every platform, then the builds): each image and release
//! is fetched once per platform, each URL and repository once.
//!
//! What the steps need later of what was fetched (the image to unpack,
//! the release's sets, the pkgbase packages, a download's cached file, a
//! git mirror) stays here, read by `run` after planning.
//!
//! A new kind of need: see [`crate::plan::needs`], "Adding a kind of
//! need"; its engine side is a method of [`Fetching`]'s `InputSource`
//! (in `inputs.rs`), and, when its steps need more than the planner's
//! answer, a field here.

use std::cell::{Ref, RefCell};
use std::collections::HashMap;
use std::path::Path;

use super::add::GitMirrors;
use super::bases::Bases;
use super::env::BuildEnv;
use super::error::BuildError;
use super::inputs::Fetching;
use super::native::Ignore;
use crate::digest::Digest;
use crate::image::{LoadedImage, Platform};
use crate::jailfile::Build;
use crate::pkg::repository_files::Kept;
use crate::plan::{self, BaseKey, Inputs, PlanOptions};
use crate::release::{PkgBase, Release};

/// The fetch phase of one build (all its platforms' passes).
pub struct FetchPhase<'a> {
    /// Images, and the build's pin (the store lock, see [`Bases`]).
    pub(super) bases: Bases<'a>,
    /// The planner's answers, every pass's needs.
    inputs: RefCell<Inputs>,
    /// Releases whose MANIFEST was read, by release and platform: the
    /// sets the FROM step extracts.
    pub(super) releases: RefCell<HashMap<BaseKey, Release>>,
    /// Releases made from the pkgbase repository, by release and
    /// platform: what the FROM step installs.
    pub(super) pkgbases: RefCell<HashMap<BaseKey, PkgBase>>,
    /// The git repositories ADD reads, mirrored and resolved once a
    /// build; the steps check their commits out of the mirrors.
    pub(super) git: RefCell<GitMirrors>,
    /// The content digest of each file ADD downloaded without a
    /// checksum: the step takes the file from the cache by it.
    pub(super) downloads: RefCell<HashMap<String, Digest>>,
    /// The package repositories' catalogues fetched for PKG steps' keys,
    /// by url (their archives in the package cache): the steps read them
    /// instead of downloading them again.
    pub(super) catalogues: RefCell<Kept>,
}

impl<'a> FetchPhase<'a> {
    /// Takes the build's pin.
    pub fn new(env: &'a BuildEnv<'a>) -> Result<FetchPhase<'a>, BuildError> {
        Ok(FetchPhase {
            bases: Bases::new(env)?,
            inputs: RefCell::new(Inputs::default()),
            releases: RefCell::default(),
            pkgbases: RefCell::default(),
            git: RefCell::default(),
            downloads: RefCell::default(),
            catalogues: RefCell::default(),
        })
    }

    pub(super) fn env(&self) -> &'a BuildEnv<'a> {
        self.bases.env()
    }

    /// Fetches what planning `build` with `opts` needs and was not
    /// fetched yet ([`plan::needs`]); the planner's inputs. `context` and
    /// `ignore`: the build context COPY and ADD read.
    pub(super) fn fetch(
        &self,
        build: &Build,
        opts: &PlanOptions,
        context: &Path,
        ignore: Option<&Ignore>,
        context_revision: Option<&str>,
    ) -> Ref<'_, Inputs> {
        let source = Fetching {
            bases: &self.bases,
            releases: &self.releases,
            pkgbases: &self.pkgbases,
            git: &self.git,
            downloads: &self.downloads,
            catalogues: &self.catalogues,
            context,
            ignore,
            context_revision,
        };
        let needs = plan::needs(build, opts);
        self.inputs.borrow_mut().fetch(&needs, &source);
        self.inputs.borrow()
    }

    /// The image fetched for `reference` on `platform` (as a stage's
    /// base: the only one fetched for it when the platform is the
    /// image's own).
    pub(super) fn image_of(
        &self,
        reference: &str,
        platform: &Platform,
    ) -> Result<LoadedImage, BuildError> {
        self.bases
            .fetched()
            .get_base(reference, platform)
            .ok_or_else(|| {
                BuildError::Step(format!(
                    "{reference} ({platform}) was not fetched before planning (a jbuild bug)"
                ))
            })
    }

    /// The digest of the file the fetch phase downloaded for `url` (an
    /// ADD without `--checksum`): the step takes it from the cache.
    pub(super) fn downloaded(&self, url: &str) -> Option<Digest> {
        self.downloads.borrow().get(url).cloned()
    }
}
