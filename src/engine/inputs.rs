//! The fetch phase's answers for a real build ([`Fetching`], the
//! engine's [`InputSource`]): FROM and `COPY --from` images found or
//! pulled ([`super::bases`]), COPY and bind-mount sources from the build
//! context, FreeBSD releases (and pkgbase catalogues), ADD's downloads and
//! git repositories — each asked once per build by
//! [`crate::plan::Inputs::fetch`], never by the planner.

use crate::blame::Blame;
use crate::report::Level;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use super::add::GitMirrors;
use super::bases::Bases;
use super::native::{self, Ignore};
use crate::digest::Digest;
use crate::image::Platform;
use crate::jailfile::CopySource;
use crate::plan::{BaseImage, BaseKey, InputError, InputSource, ReleaseContents};
use crate::release::{BaseMethod, PkgBase, Release};

/// Fetches for the fetch phase (`super::fetch::FetchPhase`, whose parts
/// these are): the network, the store, the build context. What the steps
/// need later is kept in the phase.
pub(super) struct Fetching<'f, 'a> {
    pub(super) bases: &'f Bases<'a>,
    pub(super) releases: &'f RefCell<HashMap<BaseKey, Release>>,
    pub(super) pkgbases: &'f RefCell<HashMap<BaseKey, PkgBase>>,
    pub(super) git: &'f RefCell<GitMirrors>,
    pub(super) downloads: &'f RefCell<HashMap<String, Digest>>,
    /// Where a pkgbase base's catalogue is kept for its install
    /// ([`super::fetch::FetchPhase::catalogues`]).
    pub(super) catalogues: &'f RefCell<crate::pkg::repository_files::Kept>,
    pub(super) context: &'f Path,
    pub(super) ignore: Option<&'f Ignore>,
    /// The commit the context was checked out at, when it is a git
    /// repository's: mixed into the digest of every context source.
    pub(super) context_revision: Option<&'f str>,
}

impl Fetching<'_, '_> {
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
}

/// The ONBUILD triggers of a FROM image, read as the planner will read
/// the image (the same platform, so the image is looked up once). A
/// failure is kept ([`Bases::keep_failure`]) for the fetch phase to
/// give the planner, which reports it at the FROM line.
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

impl InputSource for Fetching<'_, '_> {
    fn image(&self, reference: &str, platform: &Platform) -> Result<BaseImage, InputError> {
        let bases = self.bases;
        let key = BaseKey::new(reference, platform);
        let failed = bases.fetched().take_failure(&key);
        let img = failed
            .map_or_else(|| bases.fetch(reference, platform), Err)
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
        let source = self.bases.env().freebsd.release.as_ref().ok_or_else(|| {
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
            .insert(BaseKey::new(release, platform), r);
        Ok(sets)
    }

    fn release_contents(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<ReleaseContents, InputError> {
        let freebsd = &self.bases.env().freebsd;
        let source = freebsd.release.as_ref();
        let method = source.map(|s| s.method(release)).transpose();
        let method = method.map_err(|e| InputError::new(e.is_user_error(), e))?;
        let (Some(source), Some(BaseMethod::Pkgbase)) = (source, method) else {
            return self.release(release, platform).map(ReleaseContents::Sets);
        };
        let base = source
            .resolve_pkgbase(
                release,
                platform,
                freebsd.pkg_installer == super::freebsd::PkgInstaller::Pkg,
            )
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        // Kept for the install to read (`engine::pkgbase`: `Sources::kept`).
        let catalogue = freebsd
            .pkgbase_catalogue(&base.url, &mut self.catalogues.borrow_mut())
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        let contents = ReleaseContents::Packages {
            packages: base.packages.clone(),
            source: base.identity(&catalogue),
        };
        self.pkgbases
            .borrow_mut()
            .insert(BaseKey::new(release, platform), base);
        Ok(contents)
    }

    fn remote_file(&self, url: &str) -> Result<Digest, InputError> {
        let env = self.bases.env();
        let places = env
            .add
            .as_ref()
            .ok_or_else(|| InputError::internal(super::add::AddError::NoPlaces(url.to_string())))?;
        let max = env.layer_policy.limits.max_size;
        let (digest, _) = places
            .download(url, None, max)
            .map_err(|e| InputError::new(e.is_user_error(), e))?;
        env.reporter.message(
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
            .commit(self.bases.env().add.as_ref(), url, reference)
            .map_err(|e| InputError::new(e.is_user_error(), e))
    }
}
