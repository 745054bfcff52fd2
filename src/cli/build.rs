//! `jbuild build`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::build::{self, BuildEnv, BuildOptions};
use jbuild::layer::Compression;
use jbuild::plan::Platform;
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
    /// The build context: COPY sources are taken from here.
    #[arg(value_name = "DIR")]
    context: PathBuf,
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
    if !jailfile.is_file() {
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
    let opts = BuildOptions {
        context: args.context.clone(),
        jailfile,
        tags,
        build_args: parse_build_args(&args.build_args)?,
        no_cache: args.no_cache,
        platform,
        compression,
        epoch,
        hash_cache: Some(ctx.paths.hash_cache()),
    };
    let store = ctx.store()?;
    let snapshotter = ctx.snapshotter()?;
    let reporter = ctx.reporter();
    let puller = jbuild::transport::RegistryPuller {
        options: jbuild::transport::RegistryOptions::from_settings(&ctx.settings),
        jobs: 4,
    };
    let env =
        BuildEnv::new(&store, snapshotter.as_ref(), reporter.as_ref()).with_image_source(&puller);
    let out = build::build(&env, &opts).map_err(|e| Failure {
        user: e.is_user_error(),
        error: e.into(),
    })?;
    if ctx.json {
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "manifest": out.manifest_digest.to_string(),
            "config": out.config_digest.to_string(),
            "tags": opts.tags.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            "steps_run": out.steps_run,
            "steps_cached": out.steps_cached,
        }));
    } else {
        if !ctx.quiet {
            let names: Vec<String> = opts.tags.iter().map(|t| t.to_string()).collect();
            eprintln!(
                "built {}{} ({} steps run, {} cached)",
                out.manifest_digest,
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" as {}", names.join(", "))
                },
                out.steps_run,
                out.steps_cached
            );
        }
        println!("{}", out.manifest_digest);
    }
    Ok(())
}
