//! A `PKG` step by jbuild's own installer ([`crate::pkg::install`]): the
//! packages installed into the step's root, on any host, for the build's
//! platform (the ABI is the root's userland's and the platform's, never
//! the host's). Its output is the step's: a line per repository read and
//! per package fetched and installed, the packages' messages; with
//! `--json`, a `package` event per package as well. What the packages'
//! scripts left for the jail's first start is written into the root as
//! the first-start script ([`crate::pkg::firstboot`]), said a line each,
//! and with `--json` a `deferred` event each.

use std::path::Path;

use super::error::BuildError;
use super::run::Run;
use crate::config::PkgScripts;
use crate::pkg::fetch::Cache;
use crate::pkg::firstboot::{self, Deferred};
use crate::pkg::install::{self, Event, InstallError, Outcome, Phase, Request, Scripts};
use crate::pkg::repository::Sources;
use crate::plan::ExecContext;
use crate::report::{Level, StepInfo, Stream};

/// Downloads at once (the measure: two unpackers saturate this
/// kind of machine; downloads wait on the network more than on it).
pub(super) const JOBS: usize = 4;

/// How a PKG line installs: its `--no-bootstrap` and its `--scripts=`
/// (or `[pkg] scripts`).
#[derive(Debug, Clone, Copy)]
pub(super) struct How {
    pub(super) bootstrap: bool,
    pub(super) scripts: PkgScripts,
}

/// Installs `packages` into `root` (see the module docs).
pub(super) fn install(
    run: &Run<'_, '_>,
    packages: &[String],
    how: How,
    ctx: &ExecContext,
    root: &Path,
    info: &StepInfo,
    file_flags: &dyn crate::fsutil::flags::FileFlags,
) -> Result<(), BuildError> {
    let env = run.env;
    let (work, cache) = scratch(run)?;
    let epoch = i64::try_from(run.opts.epoch).unwrap_or(i64::MAX);
    // The catalogues the fetch phase fetched for the step's key: read,
    // not downloaded again.
    let kept = run.inputs.catalogues.borrow();
    let resolver = env.freebsd.pkg_resolver();
    let req = Request {
        root,
        packages,
        platform_arch: &ctx.platform.architecture,
        repos_dir: env.freebsd.pkg_repos_dir.as_deref(),
        cache: &cache,
        http: &env.freebsd.http,
        jobs: JOBS,
        work: work.path(),
        time: epoch,
        clamp_mtime: Some(run.opts.epoch),
        bootstrap: how.bootstrap,
        limits: env.layer_policy.limits,
        file_flags,
        sources: Sources {
            resolver: Some(&resolver),
            kept: Some(&kept),
        },
        // pkg(8) reads it from its environment: the step's.
        ignore_osversion: ctx
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == crate::pkg::osversion::IGNORE_OSVERSION)
            .map(|(_, v)| v.as_str()),
        pkg_conf: &env.freebsd.pkg_conf,
        scripts: match how.scripts {
            PkgScripts::Refuse => Scripts::Refuse,
            PkgScripts::Defer => Scripts::Defer,
        },
    };
    reported(run, info, root, |events| install::install(&req, events))
}

/// A scratch directory for catalogues (removed when dropped), and the
/// package cache: jbuild's, else one in the scratch directory.
pub(super) fn scratch(run: &Run<'_, '_>) -> Result<(tempfile::TempDir, Cache), BuildError> {
    let work = tempfile::Builder::new()
        .prefix("jbuild-pkg-")
        .tempdir()
        .map_err(|e| BuildError::io("a scratch directory for package catalogues", e))?;
    let cache = match &run.env.freebsd.package_cache {
        Some(dir) => Cache::new(dir.clone()),
        None => Cache::new(work.path().join("packages")),
    };
    Ok((work, cache))
}

/// Runs `install` (a call of the installer) into `root`, its events shown
/// as the output of the step `info` (and `package` events with `--json`),
/// then what it deferred written into `root` and said: what a PKG step
/// and a pkgbase base (`engine::pkgbase`) both do.
pub(super) fn reported(
    run: &Run<'_, '_>,
    info: &StepInfo,
    root: &Path,
    install: impl FnOnce(&mut dyn FnMut(Event)) -> Result<Outcome, InstallError>,
) -> Result<(), BuildError> {
    let reporter = run.env.reporter;
    let say = |line: String| reporter.step_output(info, Stream::Stdout, line.as_bytes());
    // A bar per phase (downloads, extraction; the two overlap) through
    // the reporter's transfers: on a terminal a bar, in a pipe a line now
    // and then, with --json its `transfer_*` events.
    let bar_id = |phase| format!("{}:pkg-{}", info.index, bar_name(phase));
    // The phases whose bar is open, and those whose bar has ended.
    let mut open_bars: Vec<Phase> = Vec::new();
    let mut ended: Vec<Phase> = Vec::new();
    let mut events = |e: Event| match e {
        Event::Progress { phase, done, total } => {
            if ended.contains(&phase) {
                return;
            }
            let id = bar_id(phase);
            if !open_bars.contains(&phase) {
                let what = match phase {
                    Phase::Fetch => "fetching packages",
                    Phase::Install => "installing packages",
                };
                reporter.transfer_start(&id, what, (total > 0).then_some(total));
                open_bars.push(phase);
            }
            reporter.transfer_progress(&id, done);
            if done >= total {
                reporter.transfer_done(&id, false);
                open_bars.retain(|p| *p != phase);
                ended.push(phase);
            }
        }
        Event::Repository {
            name,
            url,
            catalogue_sha256,
        } => say(format!(
            "repository {name}: {url} (catalogue sha256:{catalogue_sha256})"
        )),
        Event::Kept { name, version } => {
            say(format!("{name}-{version} is installed already: kept"))
        }
        Event::Upgrading { name, from, to } => say(format!("{name}-{from}: upgrading to {to}")),
        Event::Reinstalling {
            name,
            version,
            reason,
        } => say(format!("{name}-{version}: reinstalling ({reason})")),
        Event::Fetched {
            name,
            version,
            bytes,
            cached,
        } => {
            reporter.package(info, "fetched", &name, &version, bytes);
            let how = if cached {
                "in the package cache"
            } else {
                "fetched"
            };
            say(format!("{name}-{version}: {how} ({bytes} bytes)"))
        }
        Event::Installed {
            name,
            version,
            entries,
            bytes,
        } => {
            reporter.package(info, "installed", &name, &version, bytes);
            say(format!(
                "{name}-{version}: installed ({entries} entries, {bytes} bytes)"
            ))
        }
        Event::Message { package, text } => {
            for line in text.lines() {
                say(format!("{package}: {line}"));
            }
        }
    };
    let done = install(&mut events);
    for phase in open_bars {
        // Stopped by an error: the bar ends where it stood.
        reporter.transfer_done(&bar_id(phase), false);
    }
    let done = done.map_err(BuildError::from)?;
    firstboot::write(root, &done.deferred)?;
    say_deferred(run, info, &done.deferred);
    if done.installed.is_empty() {
        reporter.message(Level::Info, &format!("{}: nothing to install", info.text));
    }
    Ok(())
}

/// Each deferred command as a line of the step's output, and with
/// `--json` a `deferred` event.
fn say_deferred(run: &Run<'_, '_>, info: &StepInfo, deferred: &[Deferred]) {
    let reporter = run.env.reporter;
    for d in deferred {
        reporter.deferred(info, &d.package, &d.script, &d.command, d.reason.as_str());
        let line = format!(
            "{} {}: `{}` deferred to the jail's first start ({}; {})",
            d.package,
            d.script,
            d.command,
            d.reason.explained(),
            firstboot::SCRIPT
        );
        reporter.step_output(info, Stream::Stdout, line.as_bytes());
    }
}

fn bar_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Fetch => "fetch",
        Phase::Install => "install",
    }
}
