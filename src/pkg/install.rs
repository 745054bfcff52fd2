//! `pkg install` into an image's root, by jbuild itself: the one entry
//! that joins the other parts of [`crate::pkg`] in pkg(8)'s order.
//!
//! 1. The ABI from the root's userland and the build's platform
//!    ([`abi::of_root`]), never the host's.
//! 2. The image's repository configuration ([`repo_conf`]), with
//!    `--pkg-repos DIR` read in place of `/usr/local/etc/pkg/repos` (where
//!    pkg(8) would have it mounted); the enabled repositories only.
//! 3. Each repository's catalogue, its signatures checked against the
//!    trust its configuration names (keys and fingerprints read inside the
//!    image, as `pkg --rootdir` does) before a byte of it is parsed
//!    ([`repository::load_from`]: `file://`, `http://`, `https://`;
//!    `pkg+https://` by SRV mirrors then the host; a catalogue the fetch
//!    phase kept is read, not downloaded again).
//! 4. Resolution ([`resolve`]) against what the image's `local.sqlite`
//!    already has, as pkg's `pkg_jobs_need_upgrade` decides for each
//!    requested name and each installed dependency: a package the
//!    repository has at a newer version (`pkg_version_cmp`) is upgraded
//!    unless it is locked; at the same version it is kept, or reinstalled
//!    when what pkg compares differs ([`super::upgrade`]); at an older
//!    one it is kept and that is said. When the image has no `pkg` the `pkg`
//!    package is added to the request, as `pkg bootstrap` would have put
//!    it there first, unless [`Request::bootstrap`] is off.
//! 5. Each package fetched into jbuild's package cache, verified by its
//!    catalogue checksum, `jobs` at a time on worker threads, which read
//!    its manifests as it arrives (`pipeline`): the extraction (7.) takes
//!    the packages in install order as they are ready, while later ones
//!    are still downloading.
//! 6. A package whose shell script that runs at install (`pre-install`,
//!    `post-install`, `install`) is not shell, or for another ABI, is
//!    refused as it arrives, naming the package, the script and the line.
//!    This and every other refusal of a package (its checksum, a
//!    conflict, a hostile entry, a failing pre-install script) can come
//!    after packages before it were written into the root: a failed
//!    step's root is discarded, so nothing is committed.
//! 7. [`extract::install_fed`] with [`DbAndLua`] as its hooks: per package,
//!    Lua then shell pre-install scripts ([`shell`]: a failure stops the
//!    package), the image's owners read (so a user the scripts added owns
//!    the package's files), extraction, the package recorded in the
//!    database (one transaction, once its `@config` contents are known:
//!    pkg registers before extracting and commits after, which leaves the
//!    same rows), Lua then shell post-install scripts (their failures
//!    reported, not fatal, as pkg), the package's messages. The scripts'
//!    commands go to jbuild's own `pw`, `pwd_mkdb`, `certctl`, … or are
//!    deferred to the jail's first start ([`scripts`]; [`Outcome::deferred`]).
//! 8. When a script asked for `ldconfig`, the image's library hints are
//!    written once, after the last package, from the directories the
//!    image configures (as rc's `ldconfig` script does at boot).
//!
//! An upgrade is pkg's `pkg_add_upgrade` (`libpkg/pkg_add.c`): the same
//! steps, with the Lua scripts seeing `pkg_upgrade` true (pkg 2 has no
//! upgrade scripts of its own); over the old version's files, an
//! `@config` file still as the old version installed it replaced and one
//! the user changed kept with the new one beside it as `.pkgnew`; after
//! extraction the old version's files the new one does not install
//! removed, then its directories the new one does not list when empty
//! (`pkg_add_cleanup_old`); the database's rows of the old version
//! replaced by the new one's (keeping its `automatic` unless it is asked
//! for now); `upgrade` messages shown instead of `install` ones, within
//! their versions. The old version's pre-deinstall Lua then shell scripts
//! run before its files are removed (with `pkg_upgrade` true,
//! `PKG_UPGRADE=true`; their failures said and ignored, as pkg); a changed
//! `@config` file is merged with the new version's when it can be
//! (`AUTOMERGE`, [`super::merge3`]). The image's `pkg.conf`
//! ([`super::pkg_conf`]) says which files are left out (`FILES_IGNORE_*`)
//! and whether to merge.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::abi::{self, Abi, AbiError};
use super::db::{DbError, LocalDb, Previous, Record};
use super::extract::{self, ExtractError, HookError, Hooks, Opened, PackageFile};
use super::fetch::{self, Cache, FetchError};
use super::lua::{self, LuaError, ScriptEnv};
use super::manifest::{LuaScriptType, MessageType};
use super::osversion::{self, OsVersionError};
use super::pkg_conf::{self, FilesIgnore, PkgConfError};
use super::repo_conf::{self, RepoConfError, RepoConfig};
use super::repository::{self, RepoError, Repository};
use super::resolve::{self, ResolveError};
use super::sign::{SignError, Trust};
use super::upgrade;
pub use super::upgrade::Upgrade;
use super::version;
use crate::blame::Blame;
use crate::fsutil::flags::FileFlags;
use crate::layer::Limits;
use crate::transport::http::Http;

/// The package `pkg bootstrap` installs.
pub const PKG_PACKAGE: &str = "pkg";

/// What to install, where, and with what.
pub struct Request<'a> {
    /// The step's root: a FreeBSD tree.
    pub root: &'a Path,
    /// As written after `PKG`: `name`, `name-version` or `origin`.
    pub packages: &'a [String],
    /// The build's OCI architecture (`amd64`, `arm64`, …).
    pub platform_arch: &'a str,
    /// `--pkg-repos DIR`: read in place of `/usr/local/etc/pkg/repos`.
    pub repos_dir: Option<&'a Path>,
    pub cache: &'a Cache,
    pub http: &'a Http,
    /// Downloads at once.
    pub jobs: usize,
    /// Scratch for catalogues (removed by the caller).
    pub work: &'a Path,
    /// What the database records as the install time
    /// (`SOURCE_DATE_EPOCH`, else now).
    pub time: i64,
    /// No file's mtime is later (`SOURCE_DATE_EPOCH`).
    pub clamp_mtime: Option<u64>,
    /// Install `pkg` too when the image has none.
    pub bootstrap: bool,
    pub limits: Limits,
    pub file_flags: &'a dyn FileFlags,
    /// Catalogues kept from the step's key, and who finds SRV mirrors.
    pub sources: repository::Sources<'a>,
    /// `IGNORE_OSVERSION` as pkg's environment would set it (a PKG step's
    /// `ENV`), over the image's pkg.conf ([`osversion`]).
    pub ignore_osversion: Option<&'a str>,
    /// What jbuild's configuration sets over the image's `pkg.conf`.
    pub pkg_conf: &'a pkg_conf::Overrides,
    /// What a package's shell script may do that jbuild cannot carry out
    /// here (issue 32).
    pub scripts: Scripts,
}

/// What the installer does with a command of a package's shell script
/// that jbuild does not carry out itself (issue 32).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scripts {
    /// The step fails, naming the package, the script and the command.
    #[default]
    Refuse,
    /// The command is kept for the jail's first start
    /// ([`crate::pkg::firstboot`]): `PKG --scripts=defer`.
    Defer,
}

/// What happened, in order, for the caller to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The repositories read: name, url, catalogue SHA-256.
    Repository {
        name: String,
        url: String,
        catalogue_sha256: String,
    },
    /// Already in the image: kept.
    Kept { name: String, version: String },
    /// In the image at an older version than the repository's: replaced.
    Upgrading {
        name: String,
        from: String,
        to: String,
    },
    /// In the image at the repository's version, but what pkg compares
    /// (options, dependencies, shared libraries, …) differs: replaced.
    Reinstalling {
        name: String,
        version: String,
        /// pkg's words for what differs.
        reason: String,
    },
    /// In the package cache (downloaded now unless `cached`).
    Fetched {
        name: String,
        version: String,
        bytes: u64,
        cached: bool,
    },
    /// Installed: entries and bytes of content written.
    Installed {
        name: String,
        version: String,
        entries: u64,
        bytes: u64,
    },
    /// A line a package says to the user (its messages, its Lua output, a
    /// warning).
    Message { package: String, text: String },
    /// How far a phase that moves many bytes is, for a progress bar:
    /// `done` of about `total` bytes (downloads: the packages' sizes;
    /// installing: their content's, as their manifests' `flatsize` say).
    /// A phase's last event has `done == total`.
    Progress { phase: Phase, done: u64, total: u64 },
}

/// The phases [`Event::Progress`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Packages downloaded into the package cache.
    Fetch,
    /// Package content written into the root.
    Install,
}

/// What [`install`] did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub abi: String,
    /// `(name, url, catalogue sha256)` of each enabled repository.
    pub repositories: Vec<(String, String, String)>,
    /// `name-version` in install order.
    pub installed: Vec<String>,
    /// What the packages' scripts left for the jail's first start, in
    /// install order.
    pub deferred: Vec<crate::pkg::firstboot::Deferred>,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Abi(#[from] AbiError),
    #[error(transparent)]
    Conf(#[from] RepoConfError),
    #[error(transparent)]
    Sign(#[from] SignError),
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error(transparent)]
    Resolve(Box<ResolveError>),
    #[error(transparent)]
    Fetch(Box<FetchError>),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Extract(#[from] ExtractError),
    #[error(transparent)]
    OsVersion(#[from] OsVersionError),
    #[error(transparent)]
    PkgConf(#[from] PkgConfError),
    /// A package's shell script that does not parse, refused before
    /// anything is written.
    #[error("package {package}")]
    Script {
        package: String,
        #[source]
        source: Box<ShellError>,
    },
    /// The library hints a script asked for could not be written.
    #[error("the library hints (`ldconfig`) a package's script asked for")]
    Hints(#[source] super::hints::HintsError),
    #[error("no repository is enabled for {abi} (none of the image's or --pkg-repos' *.conf files enables one)")]
    NoRepositories { abi: String },
}

impl From<ResolveError> for InstallError {
    fn from(e: ResolveError) -> Self {
        InstallError::Resolve(Box::new(e))
    }
}

impl From<upgrade::WeighError> for InstallError {
    fn from(e: upgrade::WeighError) -> Self {
        match e {
            upgrade::WeighError::Db(e) => InstallError::Db(e),
            upgrade::WeighError::Script { package, source } => {
                InstallError::Script { package, source }
            }
        }
    }
}

impl From<FetchError> for InstallError {
    fn from(e: FetchError) -> Self {
        InstallError::Fetch(Box::new(e))
    }
}

impl Blame for InstallError {
    fn is_user_error(&self) -> bool {
        match self {
            InstallError::Abi(e) => e.is_user_error(),
            InstallError::Conf(e) => e.is_user_error(),
            InstallError::Sign(e) => e.is_user_error(),
            InstallError::Repo(e) => e.is_user_error(),
            InstallError::Resolve(e) => e.is_user_error(),
            InstallError::Fetch(e) => e.is_user_error(),
            InstallError::Db(e) => e.is_user_error(),
            InstallError::Extract(e) => e.is_user_error(),
            InstallError::OsVersion(e) => e.is_user_error(),
            InstallError::PkgConf(e) => e.is_user_error(),
            InstallError::Script { source, .. } => source.is_user_error(),
            InstallError::Hints(e) => e.is_user_error(),
            InstallError::NoRepositories { .. } => true,
        }
    }
}

/// The enabled repositories of the image at `root` for `platform_arch`,
/// read and verified: what [`install`] resolves against, and what a
/// build step's key holds (their catalogues' digests).
pub fn repositories(
    root: &Path,
    platform_arch: &str,
    repos_dir: Option<&Path>,
    http: &Http,
    work: &Path,
    sources: repository::Sources<'_>,
) -> Result<(Abi, Vec<RepoConfig>, Vec<Repository>), InstallError> {
    let abi = abi::of_root(root, platform_arch)?;
    repositories_for(root, abi, repos_dir, http, work, sources)
}

/// [`repositories`] for `abi`, given rather than read from the root.
pub fn repositories_for(
    root: &Path,
    abi: Abi,
    repos_dir: Option<&Path>,
    http: &Http,
    work: &Path,
    sources: repository::Sources<'_>,
) -> Result<(Abi, Vec<RepoConfig>, Vec<Repository>), InstallError> {
    let confs: Vec<RepoConfig> = repo_conf::load_root_with(root, &abi, repos_dir)?
        .into_iter()
        .filter(|c| c.enabled)
        .collect();
    if confs.is_empty() {
        return Err(InstallError::NoRepositories {
            abi: abi.to_string(),
        });
    }
    let mut repos = Vec::with_capacity(confs.len());
    for (i, conf) in confs.iter().enumerate() {
        let trust = Trust::of_repo(conf, Some(root))?;
        let dir = work.join(format!("repo-{i}"));
        std::fs::create_dir_all(&dir).map_err(|source| RepoError::Read {
            repo: conf.name.clone(),
            path: dir.clone(),
            source,
        })?;
        repos.push(repository::load_from(conf, &trust, &dir, http, sources)?);
    }
    Ok((abi, confs, repos))
}

/// Installs `req.packages` into `req.root` (see the module docs);
/// `events` hears what happens as it happens.
pub fn install(req: &Request<'_>, events: &mut dyn FnMut(Event)) -> Result<Outcome, InstallError> {
    let abi = abi::of_root(req.root, req.platform_arch)?;
    install_for(req, abi, events)
}

/// [`install`] for `abi`, given rather than read from the root: a root
/// with no userland yet, which a pkgbase base starts from
/// (`engine::pkgbase`), whose ABI is its release's and the platform's.
pub fn install_for(
    req: &Request<'_>,
    abi: Abi,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome, InstallError> {
    let (abi, _, repos) = repositories_for(
        req.root,
        abi,
        req.repos_dir,
        req.http,
        req.work,
        req.sources,
    )?;
    for r in &repos {
        events(Event::Repository {
            name: r.name.clone(),
            url: r.url.clone(),
            catalogue_sha256: r.catalogue_sha256.clone(),
        });
    }
    check_osversion(req, &repos, abi.osversion, events)?;
    let conf = pkg_conf::read(req.root, req.pkg_conf)?;
    if let Some(text) = &conf.warning {
        events(Event::Message {
            package: "pkg.conf".into(),
            text: format!("warning: {text}"),
        });
    }
    let mut db = LocalDb::open_or_create(req.root, req.time)?;
    let installed: BTreeMap<String, super::db::Installed> = db
        .installed()?
        .into_iter()
        .map(|p| (p.name.to_ascii_lowercase(), p))
        .collect();
    let mut requests: Vec<String> = req.packages.to_vec();
    let has_pkg = installed.contains_key(PKG_PACKAGE) || req.packages.iter().any(|p| p == "pkg");
    if req.bootstrap && !has_pkg {
        requests.insert(0, PKG_PACKAGE.to_string());
    }
    let closure = resolve::resolve(&repos, &requests)?;
    // pkg_jobs_need_upgrade, for each requested name and each dependency
    // the image has (`upgrade::weigh`).
    let (todo, upgrades, verdicts) = upgrade::weigh(closure, &installed, &db, req.root)?;
    for v in verdicts {
        say_verdict(v, events);
    }
    let (automatic, digests) = records(&todo, &upgrades, req);
    let abi_text = abi.to_string();
    let opts = extract_options(req, &todo, &upgrades, &conf, &abi_text);
    // The downloads (and each package's manifests and checks) on worker
    // threads, the extraction here as the packages come (`pipeline`).
    let cache_dir = req.cache.create()?;
    let pipeline = pipeline::Pipeline::new(&todo, req, &cache_dir, Some(&abi_text));
    let bar = RefCell::new(pipeline::FetchBar::new(fetch_total(&todo, req)));
    let events = RefCell::new(events);
    // Every event goes through here, and says how far the downloads are
    // on the way (the extraction reports often).
    let say = |e: Event| {
        let tick = bar.borrow_mut().tick(&pipeline);
        let mut events = events.borrow_mut();
        if let Some(t) = tick {
            (*events)(t);
        }
        (*events)(e);
    };
    let mut hooks_events = say;
    let mut hooks = DbAndLua {
        db: &mut db,
        automatic: &automatic,
        digests: &digests,
        ignore: &conf.ignore,
        upgrades: &upgrades,
        events: &mut hooks_events,
        total: todo.iter().map(|c| c.package.flatsize).sum(),
        policy: req.scripts,
        asked: scripts::Asked::default(),
    };
    // A path a package the image keeps already owns, or one of an
    // earlier package of this install, refuses the package that would
    // write it before a file of it is written, naming both (the database
    // would refuse it only at its commit).
    let owned = hooks.db.owners(&opts.upgrading)?;
    let workers = pipeline.workers(req.jobs);
    let done = std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| pipeline.work());
        }
        let mut next = |i: usize| {
            let taken = pipeline.take(i, &mut || {
                if let Some(t) = bar.borrow_mut().tick(&pipeline) {
                    (*events.borrow_mut())(t);
                }
            });
            if let Ok(Some((f, _))) = &taken {
                say(Event::Fetched {
                    name: f.name.clone(),
                    version: f.version.clone(),
                    bytes: f.bytes,
                    cached: f.cached,
                });
            }
            taken.map(|t| t.map(|(_, opened)| opened))
        };
        let done = extract::install_fed(
            req.root,
            &mut next,
            &pipeline,
            &owned,
            &opts,
            req.file_flags,
            &mut hooks,
        );
        if done.is_err() {
            pipeline.stop();
        }
        done
    });
    let kept = pipeline.kept();
    let done = done?;
    kept?;
    let asked = std::mem::take(&mut hooks.asked);
    drop(hooks);
    if asked.hints {
        // Once, after the last package, as rc's ldconfig script would
        // at boot (scripts.rs).
        hints(req.root, &mut *events.borrow_mut())?;
    }
    let events = events.into_inner();
    if !bar.borrow().over() {
        let total = bar.borrow().total;
        events(bar.borrow().event(total));
    }
    let written = done.iter().map(|d| d.bytes).sum::<u64>();
    if !done.is_empty() {
        events(Event::Progress {
            phase: Phase::Install,
            done: written,
            total: written,
        });
    }
    for d in &done {
        events(Event::Installed {
            name: d.name.clone(),
            version: d.version.clone(),
            entries: d.entries,
            bytes: d.bytes,
        });
    }
    Ok(Outcome {
        abi: abi.to_string(),
        repositories: repos
            .iter()
            .map(|r| (r.name.clone(), r.url.clone(), r.catalogue_sha256.clone()))
            .collect(),
        installed: done
            .iter()
            .map(|d| format!("{}-{}", d.name, d.version))
            .collect(),
        deferred: asked.deferred,
    })
}

/// The library hints a script asked for (`ldconfig`, `service ldconfig
/// restart`), written from the directories the image configures, as
/// rc's `ldconfig` script does at boot ([`super::hints`]); what was
/// written said.
fn hints(root: &Path, events: &mut dyn FnMut(Event)) -> Result<(), InstallError> {
    let rebuilt = super::hints::rebuild(root).map_err(InstallError::Hints)?;
    let said = rebuilt.warnings.into_iter().chain(
        rebuilt
            .written
            .iter()
            .map(|w| format!("{}: {}", w.path, w.dirs.join(":"))),
    );
    for text in said {
        events(Event::Message {
            package: "ldconfig".into(),
            text,
        });
    }
    Ok(())
}

/// How the extraction goes for this install: the image's clamp, limits
/// and ABI, and what the packages being upgraded leave behind (their
/// `@config` contents, their names and files).
fn extract_options(
    req: &Request<'_>,
    todo: &[resolve::Chosen<'_>],
    upgrades: &BTreeMap<String, upgrade::Upgrade>,
    conf: &pkg_conf::PkgConf,
    abi_text: &str,
) -> extract::Options {
    extract::Options {
        clamp_mtime: req.clamp_mtime,
        limits: req.limits,
        abi: Some(abi_text.to_string()),
        previous_config: upgrades
            .values()
            .flat_map(|u| u.previous.config.clone())
            .collect(),
        upgrading: todo
            .iter()
            .filter(|c| upgrades.contains_key(&format!("{}-{}", c.package.name, c.package.version)))
            .map(|c| c.package.name.clone())
            .collect(),
        owned: upgrades
            .values()
            .flat_map(|u| u.previous.files.iter().cloned())
            .collect(),
        automerge: conf.automerge,
        ignore: conf.ignore.clone(),
        ..extract::Options::default()
    }
}

/// pkg's `is_valid_os_version` over every package of every catalogue
/// ([`osversion`]), unless `IGNORE_OSVERSION`; what is left out or
/// installed anyway said through `events`.
fn check_osversion(
    req: &Request<'_>,
    repos: &[Repository],
    image_osversion: u32,
    events: &mut dyn FnMut(Event),
) -> Result<(), InstallError> {
    let (ignore, said) = osversion::ignore_setting(req.ignore_osversion, req.root);
    for text in said {
        events(Event::Message {
            package: osversion::IGNORE_OSVERSION.into(),
            text,
        });
    }
    if ignore {
        return Ok(());
    }
    if let Some(newer) = osversion::check(repos, image_osversion)? {
        events(Event::Message {
            package: format!("repository {}", newer.repo),
            text: newer.message(),
        });
    }
    Ok(())
}

/// What [`upgrade::weigh`] decided of an installed package, said.
fn say_verdict(v: upgrade::Verdict, events: &mut dyn FnMut(Event)) {
    let kept = match v.decision {
        upgrade::Decision::Upgrade => {
            return events(Event::Upgrading {
                name: v.name,
                from: v.installed,
                to: v.offered,
            })
        }
        upgrade::Decision::Reinstall(reason) => {
            return events(Event::Reinstalling {
                name: v.name,
                version: v.offered,
                reason,
            })
        }
        upgrade::Decision::KeepNewer => Some(format!(
            "{}-{} is installed, newer than the repository's {} (`{}`): kept",
            v.name, v.installed, v.offered, v.repository
        )),
        upgrade::Decision::Keep => None,
    };
    if let Some(text) = kept {
        events(Event::Message {
            package: format!("{}-{}", v.name, v.installed),
            text,
        });
    }
    events(Event::Kept {
        name: v.name,
        version: v.installed,
    });
}

/// What the database records of each package to install, by
/// `name-version`: whether it is automatic (a dependency) and its
/// repository, and its catalogue digest.
fn records(
    todo: &[resolve::Chosen<'_>],
    upgrades: &BTreeMap<String, Upgrade>,
    req: &Request<'_>,
) -> (BTreeMap<String, (bool, String)>, BTreeMap<String, String>) {
    let automatic = todo
        .iter()
        .map(|c| {
            let label = format!("{}-{}", c.package.name, c.package.version);
            let asked = req.bootstrap && c.package.name == PKG_PACKAGE;
            // An upgrade keeps the old version's flag unless it is asked
            // for now.
            let automatic = match upgrades.get(&label) {
                Some(u) => u.automatic && c.automatic,
                None => c.automatic && !asked,
            };
            (label, (automatic, c.repository.name.clone()))
        })
        .collect();
    let digests = todo
        .iter()
        .map(|c| {
            (
                format!("{}-{}", c.package.name, c.package.version),
                c.package.digest.clone(),
            )
        })
        .collect();
    (automatic, digests)
}

/// The bytes to download: the sizes the catalogue gives of the packages
/// the cache does not have.
fn fetch_total(todo: &[resolve::Chosen<'_>], req: &Request<'_>) -> u64 {
    todo.iter()
        .filter(|c| {
            super::checksum::Checksum::parse(&c.package.sum)
                .map_or(true, |sum| !req.cache.path_of(&sum).is_file())
        })
        .map(|c| c.package.pkgsize)
        .sum()
}

mod hooks;
mod pipeline;
pub mod script_error;
pub mod scripts;
pub mod shell;
pub use hooks::DbAndLua;
pub use shell::ShellError;
