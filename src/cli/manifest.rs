//! `jbuild manifest create|add|remove|inspect|push|rm`: manifest lists
//! (one image per platform) in the store, and their push, as podman's
//! verbs do. The lists are `jbuild::image::index`'s.

use anyhow::anyhow;
use clap::{Args, Subcommand};

use super::common::access::{JobsArg, RegistryArgs};
use super::common::{done, stdout_free};
use super::{CmdResult, Ctx, Failure};
use jbuild::engine::publish::{self, PushOptions};
use jbuild::image::index::{self, AddOptions};
use jbuild::image::Platform;
use jbuild::store::ImageName;
use jbuild::transport::Location;

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild manifest create web:1.0 web:1.0-amd64 web:1.0-arm64\n  \
    jbuild manifest add web:1.0 web:1.0-riscv64\n  \
    jbuild manifest inspect web:1.0\n  \
    jbuild manifest push web:1.0 registry.example.org/jails/web:1.0")]
pub struct ManifestArgs {
    #[command(subcommand)]
    command: ManifestCmd,
}

#[derive(Subcommand, Debug)]
enum ManifestCmd {
    /// Make a manifest list, with the given images in it.
    Create(CreateArgs),
    /// Add an image of the store to a list (its platform from its config).
    Add(AddArgs),
    /// Take an image out of a list, by its digest or name.
    Remove(RemoveArgs),
    /// Print a list's image index (JSON).
    Inspect(NameArg),
    /// Push every image of a list, then the list, after checking it.
    Push(PushArgs),
    /// Remove a list's name (its images stay until `jbuild prune`).
    Rm(NameArg),
}

#[derive(Args, Debug)]
struct CreateArgs {
    /// The list's name.
    name: String,
    /// Images in the store (name, digest or digest prefix).
    images: Vec<String>,
}

#[derive(Args, Debug)]
struct AddArgs {
    name: String,
    /// An image in the store (name, digest or digest prefix).
    image: String,
    /// List it under this platform instead of its config's.
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    platform: Option<String>,
    /// An annotation of the list's entry; may be given several times.
    #[arg(long = "annotation", value_name = "K=V")]
    annotations: Vec<String>,
}

#[derive(Args, Debug)]
struct RemoveArgs {
    name: String,
    /// The entry's digest (or a prefix of 6 hex digits or more), or an
    /// image of the store.
    entry: String,
}

#[derive(Args, Debug)]
struct NameArg {
    name: String,
}

#[derive(Args, Debug)]
struct PushArgs {
    name: String,
    /// Where to: a registry reference (`host[:port]/repo[:tag]`, also
    /// `docker://…`), `oci:DIR[:TAG]` or `oci-archive:FILE[:TAG]`. Without
    /// it, the list's name is the registry reference.
    destination: Option<Location>,
    #[command(flatten)]
    jobs: JobsArg,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn list_name(s: &str) -> Result<ImageName, Failure> {
    s.parse()
        .map_err(|e| Failure::user(anyhow!("manifest list name `{s}`: {e}")))
}

/// Prints a list's new digest.
fn changed(ctx: &Ctx, name: &ImageName, d: &oci_spec::image::Descriptor) {
    if ctx.json {
        outln!(
            "{}",
            serde_json::json!({"event": "result", "list": name.to_string(), "digest": d.digest().to_string()})
        );
    } else {
        outln!("{}", d.digest());
    }
}

pub fn run(ctx: &Ctx, args: ManifestArgs) -> CmdResult {
    let store = ctx.store()?;
    match args.command {
        ManifestCmd::Create(a) => {
            let name = list_name(&a.name)?;
            let d = index::create(&store, &name, &a.images).map_err(Failure::from)?;
            changed(ctx, &name, &d);
        }
        ManifestCmd::Add(a) => {
            let name = list_name(&a.name)?;
            let platform = a
                .platform
                .as_deref()
                .map(Platform::parse)
                .transpose()
                .map_err(|e| Failure::user(anyhow!("--platform: {e}")))?;
            let opts = AddOptions {
                platform,
                annotations: super::parse_pairs("--annotation", &a.annotations)?,
                replace_platform: false,
            };
            let d = index::add(&store, &name, &a.image, &opts, false).map_err(Failure::from)?;
            changed(ctx, &name, &d);
        }
        ManifestCmd::Remove(a) => {
            let name = list_name(&a.name)?;
            let d = index::remove(&store, &name, &a.entry).map_err(Failure::from)?;
            changed(ctx, &name, &d);
        }
        ManifestCmd::Inspect(a) => {
            let bytes = index::raw(&store, &list_name(&a.name)?).map_err(Failure::from)?;
            let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(Failure::internal)?;
            outln!(
                "{}",
                serde_json::to_string_pretty(&v).map_err(Failure::internal)?
            );
        }
        ManifestCmd::Rm(a) => {
            let name = list_name(&a.name)?;
            let d = index::delete(&store, &name).map_err(Failure::from)?;
            if ctx.json {
                outln!(
                    "{}",
                    serde_json::json!({"event": "result", "list": name.to_string(), "removed": d.digest().to_string()})
                );
            } else if !ctx.quiet {
                eprintln!("removed {name} ({})", d.digest());
            }
        }
        ManifestCmd::Push(a) => {
            let name = list_name(&a.name)?;
            let dest = a
                .destination
                .clone()
                .unwrap_or_else(|| Location::Named(a.name.clone()));
            let options = PushOptions {
                jobs: a.jobs.jobs.into(),
                registry: a.registry.options(ctx)?,
            };
            // Checked in the store first: no request is made for a list
            // with a missing child or two children of one platform.
            index::check(&store, &name).map_err(Failure::from)?;
            stdout_free(ctx, &dest)?;
            let reporter = ctx.reporter();
            let p = publish::push(&store, &a.name, &dest, &options, reporter.as_ref())
                .map_err(Failure::from)?;
            drop(reporter);
            done(ctx, &p.digest, &p.place, p.tag.as_deref(), Some(&dest));
        }
    }
    Ok(())
}
