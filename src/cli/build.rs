//! `jbuild build`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::engine::{self, BuildEnv, BuildOptions, FreeBsdEnv};
use jbuild::image::Platform;
use jbuild::layer::Compression;
use jbuild::release::ReleaseSource;
use jbuild::report::JsonReporter;
use jbuild::store::ImageName;

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The Jailfile (default: DIR/Jailfile).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Name (and tag) for the image; may be given several times.
    #[arg(short = 't', long = "tag", value_name = "NAME[:TAG]")]
    tags: Vec<String>,
    /// Set a build argument declared with ARG; `K` alone takes the value of
    /// the environment variable K.
    #[arg(long = "build-arg", value_name = "K=V")]
    build_args: Vec<String>,
    /// Run every step, using no cached result.
    #[arg(long)]
    no_cache: bool,
    /// The image's platform, e.g. freebsd/amd64 (default: FROM's, the base
    /// image's, or freebsd on this host's architecture).
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// Layer compression.
    #[arg(long, default_value = "gzip", value_parser = ["gzip", "zstd"])]
    compression: String,
    /// FreeBSD release mirror for `FROM freebsd:<release>` (default: the
    /// configuration's [freebsd] mirror, else https://download.freebsd.org/releases).
    #[arg(long, value_name = "URL")]
    mirror: Option<String>,
    /// Distribution sets to extract after base for `FROM freebsd:<release>`,
    /// e.g. `lib32` or `lib32,src`.
    #[arg(long, value_name = "SET,...", value_delimiter = ',')]
    sets: Vec<String>,
    /// A directory of pkg(8) repository configurations (*.conf) to use at
    /// /usr/local/etc/pkg/repos during PKG steps (default: [pkg] repos_dir).
    #[arg(long, value_name = "DIR")]
    pkg_repos: Option<PathBuf>,
    /// Do not ask package repositories whether their catalogue changed:
    /// PKG steps are keyed on the repository configuration only.
    #[arg(long)]
    pkg_offline: bool,
    /// Allow a JAIL parameter that weakens the build jail (allow.mount,
    /// allow.raw_sockets, devfs_ruleset=0, ...); may be given several times.
    #[arg(long = "allow-jail-param", value_name = "NAME")]
    allow_jail_params: Vec<String>,
    /// Push every step's result to this registry repository (no tag), so
    /// builds elsewhere can use it with --cache-from (docs/cache.md).
    #[arg(long = "cache-to", value_name = "REPO")]
    cache_to: Option<String>,
    /// Before running a step this machine has no result for, look it up
    /// in this registry repository (no tag); may be given several times.
    #[arg(long = "cache-from", value_name = "REPO")]
    cache_from: Vec<String>,
    /// The build context: COPY sources are taken from here. A Bastille
    /// template directory (with a Bastillefile) is built as one.
    #[arg(value_name = "DIR")]
    context: PathBuf,
    #[command(flatten)]
    template: super::bastille::TemplateArgs,
}

/// A failed step of a Bastille template, named at its Bastillefile line;
/// the build error stays the cause, so its chain reaches the report.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {source}")]
struct AtTemplateLine {
    at: String,
    #[source]
    source: engine::BuildError,
}

fn parse_build_args(raw: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut out = BTreeMap::new();
    for a in raw {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match std::env::var(a) {
                Ok(v) => (a.clone(), v),
                Err(_) => continue, // docker: `--build-arg K` with K unset is ignored
            },
        };
        if k.is_empty() {
            return Err(Failure::user(anyhow!(
                "--build-arg `{a}`: the name is empty; use --build-arg NAME=VALUE"
            )));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// `--cache-from` / `--cache-to`: repositories without a tag or digest.
fn registry_cache(ctx: &Ctx, args: &BuildArgs) -> Result<Option<engine::RegistryCache>, Failure> {
    if args.cache_from.is_empty() && args.cache_to.is_none() {
        return Ok(None);
    }
    let repo = |flag: &str, s: &String| {
        engine::cache::parse_repository(s).map_err(|e| Failure::user(anyhow!("{flag} {s}: {e}")))
    };
    Ok(Some(engine::RegistryCache {
        from: args
            .cache_from
            .iter()
            .map(|s| repo("--cache-from", s))
            .collect::<Result<_, _>>()?,
        to: args
            .cache_to
            .as_ref()
            .map(|s| repo("--cache-to", s))
            .transpose()?,
        options: jbuild::transport::RegistryOptions::from_settings(&ctx.settings),
    }))
}

/// The FreeBSD settings: flags over the configuration file.
fn freebsd_env(ctx: &Ctx, args: &BuildArgs) -> Result<FreeBsdEnv, Failure> {
    let mut release = ReleaseSource::new(&ctx.paths, &ctx.settings.freebsd);
    if let Some(m) = &args.mirror {
        release.mirror = m.clone();
    }
    for set in &args.sets {
        let ok = !set.is_empty()
            && set
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || set == "base" {
            return Err(Failure::user(anyhow!(
                "--sets {set}: name distribution sets besides base as the release's MANIFEST does, e.g. --sets lib32,src"
            )));
        }
    }
    release.extra_sets = args.sets.clone();
    let pkg = &ctx.settings.pkg;
    let mut allowed = ctx.settings.freebsd.allow_jail_params.clone();
    allowed.extend(args.allow_jail_params.iter().cloned());
    Ok(FreeBsdEnv {
        release: Some(release),
        pkg_cache: Some(ctx.paths.pkg_cache()),
        pkg_repos_dir: args.pkg_repos.clone().or_else(|| pkg.repos_dir.clone()),
        pkg_offline: args.pkg_offline || pkg.offline,
        allowed_jail_params: allowed,
    })
}

pub fn run(ctx: &Ctx, args: BuildArgs) -> CmdResult {
    if !args.context.is_dir() {
        return Err(Failure::user(anyhow!(
            "build context `{}` is not a directory",
            args.context.display()
        )));
    }
    let jailfile = args
        .file
        .clone()
        .unwrap_or_else(|| args.context.join("Jailfile"));
    let bastille = match &args.file {
        Some(f) => f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("Bastillefile")),
        None => !jailfile.exists() && jbuild::bastille::is_template(&args.context),
    };
    let translated = if bastille {
        if !args.build_args.is_empty() {
            return Err(Failure::user(anyhow!(
                "--build-arg is for Jailfiles; a Bastille template takes its ARGs with --arg NAME=VALUE or --arg-file FILE"
            )));
        }
        let from = args.file.clone().unwrap_or_else(|| args.context.clone());
        Some(super::bastille::translate(
            ctx,
            &from,
            &args.template,
            true,
        )?)
    } else if args.template.any() {
        return Err(Failure::user(anyhow!(
            "--from, --arg and --arg-file are for Bastille templates, and `{}` is not one; for a Jailfile use --build-arg",
            args.context.display()
        )));
    } else {
        None
    };
    if translated.is_none() && !jailfile.is_file() {
        return Err(Failure::user(anyhow!(
            "no Jailfile at `{}`; give one with -f FILE",
            jailfile.display()
        )));
    }
    let tags = args
        .tags
        .iter()
        .map(|t| {
            t.parse::<ImageName>()
                .map_err(|e| Failure::user(anyhow!("-t {t}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let platform = args
        .platform
        .as_deref()
        .map(Platform::parse)
        .transpose()
        .map_err(|e| Failure::user(anyhow!("--platform: {e}")))?;
    let compression: Compression = args
        .compression
        .parse()
        .map_err(|e| Failure::user(anyhow!("--compression: {e}")))?;
    let epoch = jbuild::config::source_date_epoch().map_err(|e| Failure::user(anyhow!(e)))?;
    let (context, jailfile) = match &translated {
        Some(t) => (t.context.clone(), t.path.clone()),
        None => (args.context.clone(), jailfile),
    };
    let opts = BuildOptions {
        context,
        jailfile,
        tags,
        build_args: parse_build_args(&args.build_args)?,
        no_cache: args.no_cache,
        platform,
        compression,
        epoch,
        hash_cache: Some(ctx.paths.hash_cache()),
    };
    let cache = registry_cache(ctx, &args)?;
    let store = ctx.store()?;
    let snapshotter = ctx.snapshotter()?;
    let reporter = ctx.reporter();
    let puller = jbuild::transport::RegistryPuller {
        options: jbuild::transport::RegistryOptions::from_settings(&ctx.settings),
        jobs: 4,
    };
    // FROM images unpack as `jbuild pull` would, by the same [layers] settings.
    let mut env = BuildEnv::new(&store, snapshotter.as_ref(), reporter.as_ref())
        .with_freebsd(freebsd_env(ctx, &args)?)
        .with_image_source(&puller)
        .with_layers(ctx.layer_policy(false, false));
    if let Some(cache) = cache {
        env = env.with_registry_cache(cache);
    }
    let out = match &translated {
        Some(t) => engine::build_text(&env, &opts, &t.jailfile),
        None => engine::build(&env, &opts),
    }
    .map_err(|e| {
        let user = e.is_user_error();
        // A failed step of a template: name the Bastillefile line first.
        let at = match (&translated, &e) {
            (Some(t), engine::BuildError::Located { location, .. })
                if location.file.as_path() == t.path.as_path() =>
            {
                t.origin(location.line)
            }
            _ => None,
        };
        Failure {
            user,
            error: match at {
                Some(at) => AtTemplateLine { at, source: e }.into(),
                None => e.into(),
            },
        }
    })?;
    if ctx.json {
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "manifest": out.manifest_digest.to_string(),
            "config": out.config_digest.to_string(),
            "tags": opts.tags.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            "steps_run": out.steps_run,
            "steps_cached": out.steps_cached,
            "steps_fetched": out.steps_fetched,
        }));
    } else {
        if !ctx.quiet {
            let names: Vec<String> = opts.tags.iter().map(|t| t.to_string()).collect();
            eprintln!(
                "built {}{} ({} steps run, {} cached{})",
                out.manifest_digest,
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" as {}", names.join(", "))
                },
                out.steps_run,
                out.steps_cached,
                if out.steps_fetched > 0 {
                    format!(", {} fetched from the registry cache", out.steps_fetched)
                } else {
                    String::new()
                }
            );
        }
        outln!("{}", out.manifest_digest);
    }
    Ok(())
}
