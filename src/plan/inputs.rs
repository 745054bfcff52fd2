//! What the planner reads: [`Inputs`], the answer to each [`Need`] of a
//! recipe, gathered before planning. The planner gets `&Inputs` — data,
//! no client, no source to ask — so it cannot fetch, pull or download
//! anything: a need without an answer is a [`NotFetched`] error.
//!
//! The answers come from an [`InputSource`], which only the fetch phase
//! asks ([`Inputs::fetch`]): the engine's reaches registries, mirrors,
//! repositories and the build context (`engine::fetch`); tests answer from
//! constants.
//!
//! One kind of answer comes later: what a PKG step finds in the root it
//! runs on ([`PkgRoot`]), which the build loop gives
//! ([`Inputs::answer_pkg_root`]) when it reaches the step and then plans
//! again. Until then the planner makes that step's key, and every key
//! built on it, pending ([`super::Pending`]); it never guesses one.

use super::error::{InputError, NotFetched, PlanErrorKind};
use super::needs::{needs, BaseKey, Need};
use super::{BaseImage, PkgRoot, PlanOptions, ReleaseContents};
use crate::digest::Digest;
use crate::image::Platform;
use crate::jailfile::{Build, CopySource};

/// Where the fetch phase gets the answer to each [`Need`] (see
/// [`super::needs`](mod@super::needs), "Adding a kind of need"). Each question is asked at
/// most once per need by [`Inputs::fetch`]; the defaults answer as a
/// build without a release mirror, downloads or git does.
pub trait InputSource {
    /// [`Need::Image`]: the manifest digest and config of an image named
    /// in FROM or `COPY --from`, for `platform`.
    fn image(&self, reference: &str, platform: &Platform) -> Result<BaseImage, InputError>;
    /// [`Need::Context`]: the content digest of what a COPY from the build
    /// context reads.
    fn context_sources(&self, sources: &[CopySource]) -> Result<Digest, InputError>;
    /// [`Need::BoundContext`]: the content digest of what a
    /// `RUN --mount=type=bind` of the build context shows: like
    /// [`InputSource::context_sources`], but with the files `.jailignore`
    /// leaves out too (a mount cannot hide them).
    fn bound_context(&self, paths: &[String]) -> Result<Digest, InputError> {
        let sources: Vec<CopySource> = paths.iter().cloned().map(CopySource::Path).collect();
        self.context_sources(&sources)
    }
    /// The distribution sets `FROM freebsd:<release>` is made of, as
    /// `(name, sha256)` from the release's verified MANIFEST, in
    /// extraction order.
    fn release(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<Vec<(String, Digest)>, InputError> {
        let _ = platform;
        Err(InputError::user(format!(
            "FROM freebsd:{release} needs a release mirror, which this build was not given"
        )))
    }
    /// [`Need::Release`]: what `FROM freebsd:<release>` is made of: its
    /// distribution sets ([`InputSource::release`]) unless the build makes
    /// this release's base from the pkgbase repository.
    fn release_contents(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<ReleaseContents, InputError> {
        self.release(release, platform).map(ReleaseContents::Sets)
    }
    /// [`Need::Url`]: the content digest of the file an ADD without
    /// `--checksum` downloads from `url`, downloaded now into jbuild's
    /// cache. (With `--checksum` the checksum is the digest, and the file
    /// is fetched, and checked against it, only when the step runs.)
    fn remote_file(&self, url: &str) -> Result<Digest, InputError> {
        Err(InputError::user(format!(
            "ADD {url}: this build cannot download files"
        )))
    }
    /// [`Need::Git`]: the commit (hex) the git repository `url` has at
    /// `reference` (its default branch when `None`): what an ADD of it is
    /// pinned to.
    fn git_commit(&self, url: &str, reference: Option<&str>) -> Result<String, InputError> {
        let _ = reference;
        Err(InputError::user(format!(
            "ADD {url}: this build cannot read git repositories"
        )))
    }
}

/// One answer, of the kind its [`Need`] asks.
#[derive(Debug, Clone)]
enum Answer {
    Image(Box<BaseImage>),
    Release(ReleaseContents),
    /// A text: a git commit.
    Text(String),
    /// A content digest: a download's, the build context's.
    Digest(Digest),
}

/// The answers the fetch phase got, by [`Need`], the failures with them:
/// a failed fetch is reported by the planner at the line that needed it.
/// Read-only to the planner.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    answers: Vec<(Need, Result<Answer, InputError>)>,
    /// What PKG steps found in the roots they run on, given by the build
    /// loop as it reaches them ([`Inputs::answer_pkg_root`]).
    pkg_roots: Vec<(PkgRoot, String)>,
}

impl Inputs {
    /// The answers to every need of `build` planned with `opts`, from
    /// `source`: [`super::needs::needs`], then [`Inputs::fetch`].
    pub fn gather(build: &Build, opts: &PlanOptions, source: &dyn InputSource) -> Inputs {
        let mut inputs = Inputs::default();
        inputs.fetch(&needs(build, opts), source);
        inputs
    }

    /// Whether `need` has an answer (or a failure) already.
    pub fn has(&self, need: &Need) -> bool {
        self.answers.iter().any(|(n, _)| n == need)
    }

    /// Asks `source` for each of `needs` not answered yet (once: a
    /// multi-platform build gathers into one `Inputs` for every pass, so
    /// what every platform reads is fetched once, and what one platform
    /// reads once per platform).
    pub fn fetch(&mut self, needs: &[Need], source: &dyn InputSource) {
        for need in needs {
            if self.has(need) {
                continue;
            }
            let answer = match need {
                Need::Image(k) => source
                    .image(&k.reference, &k.platform)
                    .map(|i| Answer::Image(Box::new(i))),
                Need::Release(k) => source
                    .release_contents(&k.reference, &k.platform)
                    .map(Answer::Release),
                Need::Url(url) => source.remote_file(url).map(Answer::Digest),
                Need::Git { url, reference } => source
                    .git_commit(url, reference.as_deref())
                    .map(Answer::Text),
                Need::Context(sources) => source.context_sources(sources).map(Answer::Digest),
                Need::BoundContext(paths) => source.bound_context(paths).map(Answer::Digest),
            };
            self.answers.push((need.clone(), answer));
        }
    }

    /// The answer to `need`, of the kind `pick` takes: a failure as it
    /// came, nothing (or an answer of another kind) as [`NotFetched`].
    fn answer<'s, T: ?Sized>(
        &'s self,
        need: Need,
        pick: impl Fn(&'s Answer) -> Option<&'s T>,
    ) -> Result<&'s T, PlanErrorKind> {
        match self.answers.iter().find(|(n, _)| *n == need) {
            Some((_, Ok(a))) => pick(a).ok_or_else(|| NotFetched::of(need).into()),
            Some((_, Err(e))) => Err(PlanErrorKind::Input(e.clone())),
            None => Err(NotFetched::of(need).into()),
        }
    }

    pub(super) fn image(
        &self,
        reference: &str,
        platform: &Platform,
    ) -> Result<&BaseImage, PlanErrorKind> {
        let need = Need::Image(BaseKey::new(reference, platform));
        self.answer(need, |a| match a {
            Answer::Image(i) => Some(&**i),
            _ => None,
        })
    }

    pub(super) fn release(
        &self,
        release: &str,
        platform: &Platform,
    ) -> Result<&ReleaseContents, PlanErrorKind> {
        let need = Need::Release(BaseKey::new(release, platform));
        self.answer(need, |a| match a {
            Answer::Release(r) => Some(r),
            _ => None,
        })
    }

    fn text(&self, need: Need) -> Result<&str, PlanErrorKind> {
        self.answer(need, |a| match a {
            Answer::Text(t) => Some(t.as_str()),
            _ => None,
        })
    }

    fn digest(&self, need: Need) -> Result<&Digest, PlanErrorKind> {
        self.answer(need, |a| match a {
            Answer::Digest(d) => Some(d),
            _ => None,
        })
    }

    /// Records what a PKG step found in the root it runs on (see
    /// [`PkgRoot`]): the build loop's answer, given when the step is
    /// reached, after which the plan is made again. An answer given twice
    /// keeps the first (one build reads a root's repositories once).
    pub fn answer_pkg_root(&mut self, root: PkgRoot, answer: String) {
        if self.pkg_root(&root).is_none() {
            self.pkg_roots.push((root, answer));
        }
    }

    /// The build loop's answer for `root`, if the step was reached.
    pub(super) fn pkg_root(&self, root: &PkgRoot) -> Option<&str> {
        self.pkg_roots
            .iter()
            .find(|(r, _)| r == root)
            .map(|(_, a)| a.as_str())
    }

    /// The digest of the file ADD reads from `url`: its `--checksum`,
    /// else the digest of the file the fetch phase downloaded.
    pub(super) fn url(
        &self,
        url: &str,
        checksum: Option<&Digest>,
    ) -> Result<Digest, PlanErrorKind> {
        match checksum {
            Some(d) => Ok(d.clone()),
            None => self.digest(Need::Url(url.to_string())).cloned(),
        }
    }

    pub(super) fn git_commit(
        &self,
        url: &str,
        reference: Option<&str>,
    ) -> Result<&str, PlanErrorKind> {
        self.text(Need::Git {
            url: url.to_string(),
            reference: reference.map(str::to_string),
        })
    }

    pub(super) fn context_sources(&self, sources: &[CopySource]) -> Result<&Digest, PlanErrorKind> {
        self.digest(Need::Context(sources.to_vec()))
    }

    pub(super) fn bound_context(&self, paths: &[String]) -> Result<&Digest, PlanErrorKind> {
        self.digest(Need::BoundContext(paths.to_vec()))
    }
}
