//! A `PKG` step by jbuild's own installer ([`crate::pkg::install`]): the
//! packages installed into the step's root, on any host, for the build's
//! platform (the ABI is the root's userland's and the platform's, never
//! the host's). Its output is the step's: a line per repository read and
//! per package fetched and installed, the packages' messages; with
//! `--json`, a `package` event per package as well.

use std::path::Path;

use super::error::BuildError;
use super::run::Run;
use crate::pkg::fetch::Cache;
use crate::pkg::install::{self, Event, Request};
use crate::pkg::repository::Sources;
use crate::plan::ExecContext;
use crate::report::{Level, StepInfo, Stream};

/// Downloads at once (the measure: two unpackers saturate this
/// kind of machine; downloads wait on the network more than on it).
const JOBS: usize = 4;

/// Installs `packages` into `root` (see the module docs).
pub(super) fn install(
    run: &Run<'_, '_>,
    packages: &[String],
    bootstrap: bool,
    ctx: &ExecContext,
    root: &Path,
    info: &StepInfo,
    file_flags: &dyn crate::fsutil::flags::FileFlags,
) -> Result<(), BuildError> {
    let env = run.env;
    let work = tempfile::Builder::new()
        .prefix("jbuild-pkg-")
        .tempdir()
        .map_err(|e| BuildError::io("a scratch directory for package catalogues", e))?;
    let cache = match &env.freebsd.package_cache {
        Some(dir) => Cache::new(dir.clone()),
        None => Cache::new(work.path().join("packages")),
    };
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
        bootstrap,
        limits: env.layer_policy.limits,
        file_flags,
        sources: Sources {
            resolver: Some(&resolver),
            kept: Some(&kept),
        },
    };
    let reporter = env.reporter;
    let say = |line: String| reporter.step_output(info, Stream::Stdout, line.as_bytes());
    let mut events = |e: Event| match e {
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
    let done = install::install(&req, &mut events).map_err(BuildError::from)?;
    if done.installed.is_empty() {
        reporter.message(Level::Info, &format!("{}: nothing to install", info.text));
    }
    Ok(())
}
