//! The planner's questions ([`PlanInputs`]) answered for a real build:
//! FROM and `COPY --from` images from what the fetch phase found
//! ([`super::bases`]), COPY and
//! bind-mount sources from the build context, FreeBSD releases and package
//! repositories — each asked once per build.

use crate::blame::Blame;
use crate::report::Level;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::bases::{Bases, Fetched};
use super::error::BuildError;
use super::freebsd::FreeBsdEnv;
use super::native::{self, Ignore};
use crate::digest::Digest;
use crate::image::{LoadedImage, Platform};
use crate::jailfile::CopySource;
use crate::plan::bases::BaseKey;
use crate::plan::{BaseImage, InputError, PlanInputs, ReleaseContents};
use crate::release::BaseMethod;

/// Answers the planner's questions from what the fetch phase found
/// ([`Fetched`]: images, read only) and the build context. It has no
/// image source: the planner cannot pull.
pub(super) struct Inputs<'a> {
    /// The FreeBSD settings (releases, package repositories).
    pub(super) freebsd: &'a FreeBsdEnv,
    pub(super) fetched: &'a Fetched,
    pub(super) context: &'a Path,
    pub(super) ignore: Option<&'a Ignore>,
    /// Releases whose MANIFEST was read, by `release|platform`.
    pub(super) releases: RefCell<HashMap<String, crate::release::Release>>,
    /// Releases made from the pkgbase repository, by `release|platform`.
    pub(super) pkgbases: RefCell<HashMap<String, crate::release::PkgBase>>,
    /// [`crate::engine::freebsd::FreeBsdEnv::pkg_repositories`] by ABI: asked once per build.
    pub(super) pkg_repos: RefCell<HashMap<Option<String>, String>>,
    /// The git repositories ADD reads, mirrored and resolved once a build.
    pub(super) git: RefCell<super::add::GitMirrors>,
    /// The content digest of each file ADD downloaded without a checksum.
    pub(super) downloads: RefCell<HashMap<String, Digest>>,
    /// Where ADD keeps what it downloads (none: ADD of a URL or git is refused).
    pub(super) add: Option<&'a super::add::AddPlaces>,
    /// The commit the context was checked out at, when it is a git
    /// repository's: mixed into the digest of every context source.
    pub(super) context_revision: Option<&'a str>,
    /// The most bytes one downloaded file may have (`[layers] max_size`).
    pub(super) max_download: u64,
    pub(super) reporter: &'a dyn crate::report::Reporter,
}

impl Inputs<'_> {
    /// `digest` of context files, with the commit the context was checked
    /// out at when it is a repository's (an encoding of jbuild's own).
    fn with_revision(&self, digest: Digest) -> Digest {
        match self.context_revision {
            None => digest,
            Some(commit) => {
                Digest::of(format!("jbuild context v1\ncommit {commit}\n{digest}\n").as_bytes())
            }
        }
    }

    /// The image the fetch phase found for `reference` on `platform`.
    pub(super) fn image_of(
        &self,
        reference: &str,
        platform: &Platform,
    ) -> Result<LoadedImage, BuildError> {
        let key = BaseKey::new(reference, platform);
        if let Some(e) = self.fetched.take_failure(&key) {
            return Err(e);
        }
        self.fetched.get_base(reference, platform).ok_or_else(|| {
            BuildError::Step(format!(
                "{reference} ({platform}) was not fetched before planning (a jbuild bug)"
            ))
        })
    }
}

/// The ONBUILD triggers of a FROM image, read as the planner will read
/// the image (the same platform, so the image is looked up once). A
/// failure is kept in [`Inputs::failed`] for the planner to report.
pub(super) struct Triggers<'i, 'a> {
    pub(super) bases: &'i Bases<'a>,
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
        match self.bases.fetch(image, &platform) {
            Ok(img) => img.extras.onbuild,
            Err(e) => {
                self.bases.keep_failure(BaseKey::new(image, &platform), e);
                Vec::new()
            }
        }
    }
}

impl PlanInputs for Inputs<'_> {
    fn image(&self, reference: &str, platform: &Platform) -> Result<BaseImage, InputError> {
        let img = self
            .image_of(reference, platform)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        Ok(BaseImage {
            manifest: img.manifest_digest,
            config: img.config,
            extras: img.extras,
        })
    }

    fn context_sources(&self, sources: &[CopySource]) -> Result<Digest, InputError> {
        native::sources_digest(self.context, sources, self.ignore)
            .map(|d| self.with_revision(d))
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }

    fn bound_context(&self, paths: &[String]) -> Result<Digest, InputError> {
        let sources: Vec<CopySource> = paths.iter().cloned().map(CopySource::Path).collect();
        native::sources_digest(self.context, &sources, None)
            .map(|d| self.with_revision(d))
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }

    fn release(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<Vec<(String, Digest)>, InputError> {
        let source = self.freebsd.release.as_ref().ok_or_else(|| {
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
        let source = self.freebsd.release.as_ref();
        let method = source.map(|s| s.method(release)).transpose();
        let method = method.map_err(|e| InputError::new(e.is_user_error(), e))?;
        let (Some(source), Some(BaseMethod::Pkgbase)) = (source, method) else {
            return self.release(release, platform).map(ReleaseContents::Sets);
        };
        let base = source
            .resolve_pkgbase(release, platform)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        let catalogue = self
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
        let places = self
            .add
            .ok_or_else(|| InputError::internal(super::add::AddError::NoPlaces(url.to_string())))?;
        let max = self.max_download;
        let (digest, _) = places
            .download(url, None, max)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        self.reporter.message(
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
            .commit(self.add, url, reference)
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }

    fn pkg_repositories(&self, abi: Option<&str>) -> Result<String, InputError> {
        let k = abi.map(str::to_string);
        if let Some(v) = self.pkg_repos.borrow().get(&k) {
            return Ok(v.clone());
        }
        let v = self
            .freebsd
            .pkg_repositories(abi)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        self.pkg_repos.borrow_mut().insert(k, v.clone());
        Ok(v)
    }
}
