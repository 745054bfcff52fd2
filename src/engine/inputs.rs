//! The planner's questions ([`PlanInputs`]) answered for a real build:
//! FROM images from the store or pulled now (as `--pull` says), COPY and
//! bind-mount sources from the build context, FreeBSD releases and package
//! repositories — each asked once per build.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::env::BuildEnv;
use super::error::BuildError;
use super::native::{self, Ignore};
use super::pull_policy::PullPolicy;
use crate::digest::Digest;
use crate::image::{self, LoadedImage, Platform};
use crate::jailfile::CopySource;
use crate::plan::{BaseImage, InputError, PlanInputs, ReleaseContents};
use crate::release::BaseMethod;
use crate::report::Level;
use crate::store::StoreLock;

/// Answers the planner's questions from the store and the build context.
pub(super) struct Inputs<'a> {
    /// The store, the image source, the FreeBSD settings.
    pub(super) env: &'a BuildEnv<'a>,
    /// The build's *pin*, as a pull's ([`crate::image::pull`], "The pin"):
    /// the store lock held shared from before the first FROM is looked up
    /// until the image is tagged (these inputs live as long as the build).
    /// Until then no image names what the build stands on: its FROM image
    /// may be removed (`jbuild rmi`) once found, and between two steps
    /// nothing stands on the one just committed; nor are the blobs it
    /// writes named. `jbuild prune` and `check --repair` work under the
    /// lock held exclusively, so they wait for the build. It steps aside
    /// while the build pulls (see [`Inputs::load`]).
    pub(super) pin: RefCell<Option<StoreLock>>,
    pub(super) context: &'a Path,
    pub(super) ignore: Option<&'a Ignore>,
    pub(super) images: RefCell<HashMap<String, LoadedImage>>,
    /// Releases whose MANIFEST was read, by `release|platform`.
    pub(super) releases: RefCell<HashMap<String, crate::release::Release>>,
    /// Releases made from the pkgbase repository, by `release|platform`.
    pub(super) pkgbases: RefCell<HashMap<String, crate::release::PkgBase>>,
    /// [`crate::engine::freebsd::FreeBsdEnv::pkg_repositories`] by ABI: asked once per build.
    pub(super) pkg_repos: RefCell<HashMap<Option<String>, String>>,
    /// Images that could not be read when their ONBUILD triggers were
    /// asked for, by `reference|platform`, with why: the planner's
    /// question for the same image gets that error (at its FROM line),
    /// not a second pull.
    pub(super) failed: RefCell<HashMap<String, BuildError>>,
    /// The git repositories ADD reads, mirrored and resolved once a build.
    pub(super) git: RefCell<super::add::GitMirrors>,
    /// The content digest of each file ADD downloaded without a checksum.
    pub(super) downloads: RefCell<HashMap<String, Digest>>,
}

impl Inputs<'_> {
    /// The image `reference` names: from the store, else (when the build
    /// has a source) by its full name if an earlier pull stored it so,
    /// else pulled now — through the same transaction as `jbuild pull`, so
    /// an image whose layers are refused gets no name. `--pull=always`
    /// pulls it again (once a build); `--pull=never` never asks the source.
    pub(super) fn load(
        &self,
        reference: &str,
        platform: &Platform,
    ) -> Result<LoadedImage, BuildError> {
        let key = format!("{reference}|{platform}");
        if let Some(img) = self.images.borrow().get(&key) {
            return Ok(img.clone());
        }
        let store = self.env.store;
        let stored = image::load(store, reference, platform);
        let always = self.env.pull == PullPolicy::Always
            && self
                .env
                .image_source
                .is_some_and(|s| s.name(reference).is_some());
        let img = match (stored, self.env.image_source) {
            (Ok(img), None) => img,
            (Ok(img), Some(_)) if !always => img,
            (Ok(_) | Err(image::ImageError::NotFound(_)), Some(source)) => {
                let Some(name) = source.name(reference) else {
                    return Err(image::ImageError::NotFound(reference.to_string()).into());
                };
                if always || store.resolve(&name)?.is_none() {
                    if self.env.pull == PullPolicy::Never {
                        return Err(BuildError::NotPulled(reference.to_string()));
                    }
                    self.env
                        .reporter
                        .message(Level::Info, &format!("pulling {name} ({platform})"));
                    self.pin_aside(|| {
                        image::pull(&self.env.unpacker(), source, reference, platform)
                    })??;
                }
                image::load(store, &name, platform)?
            }
            (Err(e), _) => return Err(e.into()),
        };
        self.images.borrow_mut().insert(key, img.clone());
        Ok(img)
    }

    /// Runs `pull` with the build's pin dropped, then takes it again
    /// (waiting, if `prune` got the lock meanwhile). The pull holds a pin of
    /// its own while it runs; if it fails, it takes away what it added only
    /// when it can take the store lock exclusively, which this build's pin
    /// would refuse. Pulls happen while the build is planned, before any
    /// step (each image is looked up once a build), so the build has
    /// nothing unnamed to keep in the moment between the two pins.
    fn pin_aside<T>(&self, pull: impl FnOnce() -> T) -> Result<T, BuildError> {
        let held = self.pin.borrow_mut().take().is_some();
        let pulled = pull();
        if held {
            *self.pin.borrow_mut() = Some(StoreLock::shared(self.env.store)?);
        }
        Ok(pulled)
    }
}

/// The ONBUILD triggers of a FROM image, read as the planner will read
/// the image (the same platform, so the image is looked up once). A
/// failure is kept in [`Inputs::failed`] for the planner to report.
pub(super) struct Triggers<'i, 'a> {
    pub(super) inputs: &'i Inputs<'a>,
    /// `--platform`: wins over FROM's, as in the planner.
    pub(super) platform: Option<&'i Platform>,
    /// The images whose triggers are looked for (those of the stages the
    /// target needs); `None`: every image.
    pub(super) only: Option<std::collections::BTreeSet<String>>,
}

impl crate::jailfile::Triggers for Triggers<'_, '_> {
    fn onbuild(&self, image: &str, platform: Option<&str>) -> Vec<String> {
        if self.only.as_ref().is_some_and(|only| !only.contains(image)) {
            return Vec::new();
        }
        let platform = match (self.platform, platform.map(Platform::parse)) {
            (Some(p), _) => p.clone(),
            (None, Some(Ok(p))) => p,
            // The planner reports a platform it cannot read.
            (None, Some(Err(_))) => return Vec::new(),
            (None, None) => Platform::default_for_host(),
        };
        match self.inputs.load(image, &platform) {
            Ok(img) => img.extras.onbuild,
            Err(e) => {
                let key = format!("{image}|{platform}");
                self.inputs.failed.borrow_mut().insert(key, e);
                Vec::new()
            }
        }
    }
}

impl PlanInputs for Inputs<'_> {
    fn image(&self, reference: &str, platform: &Platform) -> Result<BaseImage, InputError> {
        let key = format!("{reference}|{platform}");
        if let Some(e) = self.failed.borrow_mut().remove(&key) {
            return Err(InputError::new(e.is_user_error(), e));
        }
        let img = self
            .load(reference, platform)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        Ok(BaseImage {
            manifest: img.manifest_digest,
            config: img.config,
            extras: img.extras,
        })
    }

    fn context_sources(&self, sources: &[CopySource]) -> Result<Digest, InputError> {
        native::sources_digest(self.context, sources, self.ignore)
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }

    fn bound_context(&self, paths: &[String]) -> Result<Digest, InputError> {
        let sources: Vec<CopySource> = paths.iter().cloned().map(CopySource::Path).collect();
        native::sources_digest(self.context, &sources, None)
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }

    fn release(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<Vec<(String, Digest)>, InputError> {
        let source = self.env.freebsd.release.as_ref().ok_or_else(|| {
            InputError::user(format!(
                "FROM freebsd:{release} needs a release mirror, which this build was not given"
            ))
        })?;
        let r = source
            .resolve(release, platform)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        let sets = r
            .sets
            .iter()
            .map(|s| (s.name.clone(), s.sha256.clone()))
            .collect();
        self.releases
            .borrow_mut()
            .insert(format!("{release}|{platform}"), r);
        Ok(sets)
    }

    fn release_contents(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<ReleaseContents, InputError> {
        let source = self.env.freebsd.release.as_ref();
        let method = source.map(|s| s.method(release)).transpose();
        let method = method.map_err(|e| InputError::new(e.is_user_error(), e))?;
        let (Some(source), Some(BaseMethod::Pkgbase)) = (source, method) else {
            return self.release(release, platform).map(ReleaseContents::Sets);
        };
        let base = source
            .resolve_pkgbase(release, platform)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        let catalogue = self
            .env
            .freebsd
            .pkgbase_catalogue(&base.url)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        let contents = ReleaseContents::Packages {
            packages: base.packages.clone(),
            source: base.identity(&catalogue),
        };
        self.pkgbases
            .borrow_mut()
            .insert(format!("{release}|{platform}"), base);
        Ok(contents)
    }

    fn remote_file(&self, url: &str, checksum: Option<&Digest>) -> Result<Digest, InputError> {
        if let Some(d) = checksum {
            return Ok(d.clone());
        }
        if let Some(d) = self.downloads.borrow().get(url) {
            return Ok(d.clone());
        }
        let places =
            self.env.add.as_ref().ok_or_else(|| {
                InputError::internal(super::add::AddError::NoPlaces(url.to_string()))
            })?;
        let max = self.env.layer_policy.limits.max_size;
        let (digest, _) = places
            .download(url, None, max)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        self.env.reporter.message(
            Level::Warn,
            &format!(
                "ADD {url} has no --checksum: the file downloaded is {digest}; \
                 pin it with `ADD --checksum={digest} {url} ...`"
            ),
        );
        self.downloads
            .borrow_mut()
            .insert(url.to_string(), digest.clone());
        Ok(digest)
    }

    fn git_commit(&self, url: &str, reference: Option<&str>) -> Result<String, InputError> {
        self.git
            .borrow_mut()
            .commit(self.env.add.as_ref(), url, reference)
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }

    fn pkg_repositories(&self, abi: Option<&str>) -> Result<String, InputError> {
        let k = abi.map(str::to_string);
        if let Some(v) = self.pkg_repos.borrow().get(&k) {
            return Ok(v.clone());
        }
        let v = self
            .env
            .freebsd
            .pkg_repositories(abi)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        self.pkg_repos.borrow_mut().insert(k, v.clone());
        Ok(v)
    }
}
