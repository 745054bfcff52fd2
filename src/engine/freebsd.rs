//! The FreeBSD parts of a build: where `FROM freebsd:<release>` comes
//! from, what PKG steps get (the shared package cache, a repository
//! override) and what they are keyed on, and which recipe jail parameters
//! need the user's consent. (Which paths never reach a layer is
//! [`crate::image::export::EXCLUDED_FROM_LAYERS`].)
//!
//! **PKG keying.** A PKG step's result depends on the repositories'
//! catalogue, which changes without the recipe changing, and on which
//! repositories the step's root names. Its key therefore holds (besides
//! ABI and OSVERSION, see [`crate::plan::FreeBsdVersion`]) what the step
//! finds in its root when the build reaches it (`FreeBsdEnv::pkg_root`,
//! in `engine::pkg_root`): the repository configuration in force (the
//! image's, `--pkg-repos` in place of its `/usr/local/etc/pkg/repos`)
//! and, unless offline, the digest of each enabled repository's catalogue
//! archive (the one pkg would read: `data.pkg`, else `packagesite.*`, as
//! its `meta.conf` says), fetched (`FreeBsdEnv::fetch_catalogue`) and
//! kept for the step to read. With `--pkg-offline` only the configuration
//! counts, so a cached step is reused even after the repository moved on.

use crate::blame::Blame;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::BuildError;
use super::mounts::StepMounts;
use crate::exec::{jail_params, BindMount, Mount};
use crate::jailfile::Op;
use crate::jailfile::Sharing;
use crate::pkg::mirror::Resolver;
use crate::pkg::repo_conf::MirrorType;
use crate::pkg::repository_files::{self, Fetched, Kept};
use crate::plan::{Plan, StepKind};
use crate::release::ReleaseSource;
use crate::transport::http::Http;

/// Where pkg(8) keeps downloaded packages in the jail.
pub const PKG_CACHE_TARGET: &str = "/var/cache/pkg";
/// Where pkg(8) reads repository configurations from, besides `/etc/pkg`.
pub const PKG_REPOS_TARGET: &str = "/usr/local/etc/pkg/repos";

/// Why the state of the package repositories, which PKG steps are keyed
/// on, is not known.
#[derive(Debug, thiserror::Error)]
pub enum PkgRepoError {
    #[error("cannot read the pkg repository directory {} (set [pkg] repos_dir or --pkg-repos to a directory of *.conf files)", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the catalogue of the pkg repository {url}, which PKG steps and pkgbase bases are keyed on (check the repository url, or build with --pkg-offline to key on the configuration only)")]
    Repository {
        url: String,
        #[source]
        source: Box<crate::pkg::repository::RepoError>,
    },
}

impl Blame for PkgRepoError {
    /// The repository directory and the repositories are the user's
    /// configuration, theirs to fix (exit code 1); an HTTP client that
    /// cannot be made is jbuild's fault.
    fn is_user_error(&self) -> bool {
        match self {
            PkgRepoError::Repository { source, .. } => source.is_user_error(),
            PkgRepoError::ReadDir { .. } | PkgRepoError::Read { .. } => true,
        }
    }
}

/// Who installs the packages of a `PKG` step (`[pkg] installer`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PkgInstaller {
    /// jbuild's own installer (`crate::pkg::install`), on every host and
    /// for every architecture.
    #[default]
    Jbuild,
    /// pkg(8) run in the build jail (`pkg install -y`): a FreeBSD host,
    /// its own architecture.
    Pkg,
}

impl PkgInstaller {
    /// `[pkg] installer` as the configuration gives it (`jbuild` when
    /// unset).
    pub fn from_setting(setting: Option<&str>) -> Result<PkgInstaller, String> {
        setting.map_or(Ok(PkgInstaller::default()), str::parse)
    }
}

impl std::str::FromStr for PkgInstaller {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "jbuild" => Ok(PkgInstaller::Jbuild),
            "pkg" => Ok(PkgInstaller::Pkg),
            other => Err(format!(
                "[pkg] installer = \"{other}\": it is \"jbuild\" (the default) or \"pkg\""
            )),
        }
    }
}

impl std::fmt::Display for PkgInstaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PkgInstaller::Jbuild => "jbuild",
            PkgInstaller::Pkg => "pkg",
        })
    }
}

/// FreeBSD settings of a build (from the configuration file and flags).
#[derive(Debug, Clone, Default)]
pub struct FreeBsdEnv {
    /// Where releases come from; `None` refuses `FROM freebsd:<release>`.
    pub release: Option<ReleaseSource>,
    /// The host directory shared as `/var/cache/pkg` by PKG steps.
    pub pkg_cache: Option<PathBuf>,
    /// Repository configurations put at `/usr/local/etc/pkg/repos`.
    pub pkg_repos_dir: Option<PathBuf>,
    /// Key PKG steps on the configuration only (no network at planning).
    pub pkg_offline: bool,
    /// Who installs PKG steps' packages.
    pub pkg_installer: PkgInstaller,
    /// `[pkg] scripts`: what jbuild's installer does with a script command
    /// it does not carry out, where a PKG line does not say.
    pub pkg_scripts: crate::config::PkgScripts,
    /// jbuild's package cache (`cache/packages`), for its installer.
    pub package_cache: Option<PathBuf>,
    /// Jail parameters the user allowed although they weaken the jail.
    pub allowed_jail_params: Vec<String>,
    /// What repositories are asked with (the build's registry options:
    /// timeouts, `--cert-dir`, proxies).
    pub http: Arc<Http>,
    /// Who is asked for the SRV records of `pkg+` repositories (`[pkg]
    /// nameservers`); the host's resolv.conf when `None`.
    pub pkg_resolver: Option<Resolver>,
    /// `[pkg] files_ignore_glob`/`_regex`: over the image's pkg.conf.
    pub pkg_conf: crate::pkg::pkg_conf::Overrides,
}

impl FreeBsdEnv {
    /// The mounts a PKG step gets: the package cache as the cache mount
    /// it is (shared, and held for the step so `prune --cache` leaves it),
    /// and the repository override, read-only.
    pub(crate) fn pkg_mounts(&self) -> Result<StepMounts, BuildError> {
        let mut v = StepMounts::default();
        if let Some(cache) = &self.pkg_cache {
            v.add_cache_dir(cache, PKG_CACHE_TARGET, Sharing::Shared, 0o755, 0, 0)?;
        }
        if let Some(dir) = &self.pkg_repos_dir {
            v.mounts.push(Mount::Bind(BindMount {
                host: dir.clone(),
                target: PKG_REPOS_TARGET.into(),
                read_only: true,
            }));
        }
        Ok(v)
    }

    /// Who finds the SRV mirrors of `pkg+` repositories: `[pkg]
    /// nameservers`, else the host's resolv.conf.
    pub fn pkg_resolver(&self) -> Resolver {
        self.pkg_resolver.clone().unwrap_or_else(Resolver::system)
    }

    /// The catalogue of the repository `repo` at `url`, fetched as a PKG
    /// step reads it ([`repository_files::fetch`]: `meta.conf`, then the
    /// archive; a `pkg+` url with `mirror_type: srv` from its SRV mirrors,
    /// then the host) and kept in the package cache.
    pub(super) fn fetch_catalogue(
        &self,
        repo: &str,
        url: &str,
        mirror_type: MirrorType,
    ) -> Result<Fetched, PkgRepoError> {
        let fail = |source| PkgRepoError::Repository {
            url: url.to_string(),
            source: Box::new(source),
        };
        let io_fail = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PkgRepoError::Read { path, source }
        };
        let scratch_in = self
            .package_cache
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        fs::create_dir_all(&scratch_in).map_err(io_fail(&scratch_in))?;
        let work = tempfile::Builder::new()
            .prefix(".catalogue-")
            .tempdir_in(&scratch_in)
            .map_err(io_fail(&scratch_in))?;
        let fetched = repository_files::fetch(
            repo,
            url,
            mirror_type,
            &self.http,
            &self.pkg_resolver(),
            work.path(),
        )
        .map_err(fail)?;
        match &self.package_cache {
            Some(cache) => fetched.keep_in(cache).map_err(io_fail(cache)),
            // Nowhere to keep it: the step fetches it again.
            None => Ok(fetched),
        }
    }
}

impl FreeBsdEnv {
    /// The identity of a pkgbase repository's catalogue, which a
    /// `FROM freebsd:<release>` built from it is keyed on: fetched as for
    /// PKG steps (`FreeBsdEnv::fetch_catalogue`: `meta.conf`, then the
    /// archive pkg would read) and kept in `kept`, so that the install
    /// reads the same archive instead of downloading it again; `offline`
    /// with `--pkg-offline`. The `[pkg]` settings that change what is
    /// installed (`files_ignore_*`) follow the catalogue's identity.
    pub fn pkgbase_catalogue(&self, url: &str, kept: &mut Kept) -> Result<String, PkgRepoError> {
        let conf = self.pkg_conf.key_text();
        if self.pkg_offline {
            return Ok(format!("offline{conf}"));
        }
        // Kept by the url the install looks it up by
        // (`repository::load_from`: no trailing `/`).
        let url = url.trim_end_matches('/');
        if let Some(f) = kept.get(url) {
            return Ok(format!("content {}", f.digest) + &conf);
        }
        // What `PkgBase::repo_conf` writes: SRV for a `pkg+` url.
        let mirror_type = if url.starts_with("pkg+") {
            MirrorType::Srv
        } else {
            MirrorType::default()
        };
        let f = self.fetch_catalogue(crate::release::pkgbase::REPO_NAME, url, mirror_type)?;
        let identity = format!("content {}", f.digest);
        kept.insert(url.to_string(), f);
        Ok(identity + &conf)
    }
}

/// The recipe's jail parameters that apply to a build step's jail. `JAIL`
/// lines describe the jail the image will run in; those that jbuild owns
/// or that act on the host (`name`, `path`, `exec.*`, `host.hostname`,
/// `ip4.addr`, `mount.*`, ... see [`jail_params::check_param`]) are for
/// that runtime jail only and are not applied while building.
pub fn build_jail_params(params: &[(String, String)]) -> Vec<(String, String)> {
    params
        .iter()
        .filter(|(k, v)| jail_params::check_param(k, v).is_ok())
        .cloned()
        .collect()
}

/// Refuses, before anything runs, a RUN or PKG step whose jail would be
/// weakened by a recipe parameter ([`crate::jailparam::needs_opt_in`]) the user
/// did not allow by name. The error names the JAIL line that set it (or
/// the FROM line, when it came with the stage's base). Parameters that no
/// step runs with are only stored in the image, and need no consent.
pub fn check_jail_params(plan: &Plan, allowed: &[String]) -> Result<(), BuildError> {
    for stage in &plan.stages {
        for (i, ps) in stage.steps.iter().enumerate() {
            let (StepKind::Layer { exec, .. }, Op::Run { .. } | Op::Pkg { .. }) =
                (&ps.kind, &ps.step.op)
            else {
                continue;
            };
            for (name, value) in build_jail_params(&exec.jail) {
                let Some(why) = crate::jailparam::needs_opt_in(&name, &value) else {
                    continue;
                };
                if allowed.contains(&name) {
                    continue;
                }
                let set_at = stage.steps[..i]
                    .iter()
                    .rev()
                    .find_map(|p| match &p.step.op {
                        Op::Jail(params) if params.iter().any(|(k, _)| *k == name) => {
                            Some(&p.step.location)
                        }
                        _ => None,
                    });
                let shown = if value.is_empty() {
                    name.clone()
                } else {
                    format!("{name}={value}")
                };
                let (location, whence) = match set_at {
                    Some(l) => (l, String::new()),
                    None => (
                        &stage.location,
                        " (inherited from this stage's base)".to_string(),
                    ),
                };
                return Err(BuildError::Step(format!(
                    "JAIL {shown}{whence}: {why}, and `{}` (line {}) would run with it; if the recipe really needs it, build with --allow-jail-param {name} (or list it in [freebsd] allow_jail_params)",
                    ps.step.text.lines().next().unwrap_or(""),
                    ps.step.location.line
                ))
                .located(location));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_only_parameters_stay_out_of_the_build_jail() {
        let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            build_jail_params(&p(&[
                ("exec.start", "/bin/sh /etc/rc"),
                ("host.hostname", "web"),
                ("ip4.addr", "10.0.0.2"),
                ("allow.raw_sockets", ""),
                ("mount.fstab", "/etc/fstab.web"),
                ("securelevel", "3"),
            ])),
            p(&[("allow.raw_sockets", ""), ("securelevel", "3")])
        );
    }

    #[test]
    fn a_pkgbase_catalogue_is_asked_once_and_kept_unless_offline() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("packagesite.pkg"), b"catalogue 1").unwrap();
        let url = format!("file://{}", t.path().display());
        let mut env = FreeBsdEnv::default();
        let mut kept = Kept::new();
        let first = env
            .pkgbase_catalogue(&format!("{url}/"), &mut kept)
            .unwrap();
        assert!(first.starts_with("content sha256:"), "{first}");
        // Kept by the url the install looks it up by (no trailing `/`),
        // and not asked again while kept.
        assert_eq!(kept[&url].archive, "packagesite.pkg");
        fs::write(t.path().join("packagesite.pkg"), b"catalogue 2").unwrap();
        assert_eq!(first, env.pkgbase_catalogue(&url, &mut kept).unwrap());
        assert_ne!(
            first,
            env.pkgbase_catalogue(&url, &mut Kept::new()).unwrap()
        );
        env.pkg_offline = true;
        assert_eq!(
            env.pkgbase_catalogue(&url, &mut Kept::new()).unwrap(),
            "offline"
        );
        env.pkg_offline = false;
        let e = env
            .pkgbase_catalogue("file:///no/such/repo", &mut kept)
            .unwrap_err();
        assert!(e.is_user_error(), "{e}");
        let e = crate::report::error_chain(&e);
        assert!(
            e.contains("packagesite.pkg") && e.contains("--pkg-offline"),
            "{e}"
        );
    }

    #[test]
    fn pkg_mounts_share_the_cache_and_the_repository_override() {
        let t = tempfile::tempdir().unwrap();
        let env = FreeBsdEnv {
            pkg_cache: Some(t.path().join("cache/pkg")),
            pkg_repos_dir: Some(t.path().join("repos")),
            ..Default::default()
        };
        let m = env.pkg_mounts().unwrap();
        assert!(t.path().join("cache/pkg").is_dir());
        assert_eq!(
            m.mounts
                .iter()
                .map(|m| match m {
                    Mount::Bind(b) => (b.target.as_str(), b.read_only),
                    other => panic!("{other:?}"),
                })
                .collect::<Vec<_>>(),
            [
                ("/var/cache/pkg", false),
                ("/usr/local/etc/pkg/repos", true)
            ]
        );
        // Held like any shared cache mount: prune --cache leaves it alone.
        assert_eq!(
            super::super::mounts::clear_cache_mounts(&t.path().join("cache")).unwrap(),
            0
        );
        drop(m);
        assert!(FreeBsdEnv::default()
            .pkg_mounts()
            .unwrap()
            .mounts
            .is_empty());
    }
}
