//! The fetch phase: everything a plan needs from outside the recipe —
//! FROM and `COPY --from` images (found in the store or pulled, as
//! `--pull` says: [`super::bases`]), release MANIFESTs and pkgbase
//! catalogues, ADD URLs without a checksum (downloaded into the cache:
//! their digest keys the step), the commits of ADD's git repositories,
//! the build context's digests — got once, before the build is planned,
//! into the planner's [`crate::plan::Inputs`]. The planner reads only
//! those answers: it holds no client and can fetch nothing
//! ([`crate::plan`], "Three phases").
//!
//! What it does not fetch: the package repositories of PKG steps. Which
//! repositories a PKG step installs from is written in its root (the
//! image's `/etc/pkg` and `/usr/local/etc/pkg/repos`), which any earlier
//! step may change — a RUN too, whose output nothing knows before it
//! runs. Reading a base image's layers here would name the right
//! repositories only when no earlier step can write there, so it is not
//! done: the build loop reads the root when it reaches the step
//! ([`super::pkg_root`]) and fetches those catalogues then, into
//! [`FetchPhase::catalogues`], once a build; the step installs from the
//! very archives its key holds. (Packages are fetched by the step only,
//! and only when it runs.)
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
    /// The package repositories' catalogues fetched for PKG steps' keys
    /// when the build reached them ([`super::pkg_root`]), by url (their
    /// archives in the package cache): the steps read them instead of
    /// downloading them again, every step and platform of the build the
    /// same archive.
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

    /// Records what a PKG step found in its root (the build loop's
    /// answer, [`plan::Inputs::answer_pkg_root`]) and plans `build` again
    /// with it: the plan whose keys are final up to that step.
    pub(super) fn replan(
        &self,
        root: plan::PkgRoot,
        answer: String,
        build: &Build,
        opts: &PlanOptions,
    ) -> Result<plan::Plan, plan::PlanError> {
        self.inputs.borrow_mut().answer_pkg_root(root, answer);
        plan::plan(build, &self.inputs.borrow(), opts)
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
