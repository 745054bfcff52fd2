//! `jbuild push`, `jbuild pull` and `jbuild copy`: images between the store,
//! registries and OCI layouts, through the Transport seam.

use anyhow::anyhow;
use clap::Args;

use super::common::access::{JobsArg, RegistryArgs};
use super::common::pulling::{PullFlags, Unpacking};
use super::common::{done, stdout_free, write_file, DestinationFull};
use super::{CmdResult, Ctx, Failure};
use jbuild::engine::publish::{self, PushOptions};
use jbuild::image::{self, Platform};
use jbuild::transport::{CopyOptions, LayoutTransport, Location, OpenOptions, Transport};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild push localhost:5000/web:1.0\n  \
    jbuild push web:1.0 registry.example.org/jails/web:1.0\n  \
    jbuild push web:1.0 oci-archive:web.tar")]
pub struct PushArgs {
    /// The image in the store (name, digest or digest prefix).
    image: String,
    /// Where to: a registry reference (`host[:port]/repo[:tag]`, also
    /// `docker://…`), `oci:DIR[:TAG]` or `oci-archive:FILE[:TAG]`. Without
    /// it, the image's name is the registry reference.
    destination: Option<Location>,
    #[command(flatten)]
    jobs: JobsArg,
    /// Write the digest of the manifest pushed (`sha256:…`) to FILE, as
    /// podman and skopeo do.
    #[arg(long, value_name = "FILE")]
    digestfile: Option<std::path::PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild pull localhost:5000/web:1.0\n  \
    jbuild pull --platform freebsd/arm64 ghcr.io/example/base:14.2\n  \
    jbuild pull registry.example.org/base@sha256:…")]
pub struct PullArgs {
    /// A registry reference: `alpine` is `docker.io/library/alpine:latest`.
    reference: Location,
    /// From an index, the manifest for this platform (`os/arch[/variant]`;
    /// default: freebsd on this host's architecture).
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    platform: Option<String>,
    #[command(flatten)]
    jobs: JobsArg,
    /// Keep setuid and setgid files (and file capabilities) in its layers,
    /// as FreeBSD's base has (`su`, `passwd`); without it, a layer holding
    /// one is refused. Also `allow_setuid = true` under [layers] in the
    /// configuration file.
    #[arg(long)]
    allow_setuid: bool,
    /// Create the device nodes its layers hold; without it, a layer holding
    /// one is refused. Also `allow_devices = true` under [layers].
    #[arg(long)]
    allow_devices: bool,
    #[command(flatten)]
    pull: PullFlags,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild copy docker://localhost:5000/web:1.0 oci:/srv/images:web-1.0\n  \
    jbuild copy oci-archive:web.tar docker://registry.lan:5000/web:1.0\n  \
    jbuild copy web:1.0 localhost:5000/mirror/web:1.0")]
pub struct CopyArgs {
    /// `docker://REF`, `oci:DIR[:REF]`, `oci-archive:FILE[:REF]`, an image
    /// in the store, or else a registry reference.
    source: Location,
    /// `docker://REF`, `oci:DIR[:TAG]`, `oci-archive:FILE[:TAG]`, or a
    /// registry reference.
    destination: Location,
    /// From an index, copy only the manifest for this platform (default:
    /// the whole index).
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    platform: Option<String>,
    #[command(flatten)]
    jobs: JobsArg,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn platform(p: &Option<String>) -> Result<Option<Platform>, Failure> {
    p.as_deref()
        .map(|s| Platform::parse(s).map_err(|e| Failure::user(anyhow!("--platform {s}: {e}"))))
        .transpose()
}

/// The destination as the user would write it, with the tag written.
fn place(dst: &dyn Transport, tag: &Option<String>) -> String {
    match tag {
        Some(t) => format!("{}:{t}", dst.describe()),
        None => dst.describe(),
    }
}

pub fn push(ctx: &Ctx, args: PushArgs) -> CmdResult {
    let store = ctx.store()?;
    let dest = args
        .destination
        .clone()
        .unwrap_or_else(|| Location::Named(args.image.clone()));
    stdout_free(ctx, &dest)?;
    let options = PushOptions {
        jobs: args.jobs.jobs.into(),
        registry: args.registry.options(ctx)?,
    };
    let reporter = ctx.reporter();
    let p = publish::push(&store, &args.image, &dest, &options, reporter.as_ref())
        .map_err(Failure::from)?;
    drop(reporter);
    if let Some(file) = &args.digestfile {
        write_file("--digestfile", file, &p.digest)?;
    }
    done(ctx, &p.digest, &p.place, p.tag.as_deref(), Some(&dest));
    Ok(())
}

pub fn pull(ctx: &Ctx, args: PullArgs) -> CmdResult {
    let location = args
        .reference
        .clone()
        .registry_named()
        .map_err(Failure::from)?;
    let Some(reference) = location.registry_ref().map(|r| r.to_string()) else {
        return Err(Failure::user(anyhow!(
            "{location}: jbuild pulls from registries; to read an OCI layout or archive into the \
             store, use `jbuild import {location}`"
        )));
    };
    let want = platform(&args.platform)?.unwrap_or_else(Platform::default_for_host);
    let source = args.pull.source(ctx, args.jobs.jobs.into())?;
    let unpacking = Unpacking::open(ctx, ctx.layer_policy(args.allow_setuid, args.allow_devices))?;
    // Named only once its layers are unpacked: a refused image gets no name.
    let pulled =
        image::pull(&unpacking.unpacker(), &source, &reference, &want).map_err(Failure::from)?;
    drop(unpacking);
    done(
        ctx,
        pulled.descriptor.digest().as_ref(),
        &pulled.name,
        None,
        None,
    );
    Ok(())
}

pub fn copy(ctx: &Ctx, args: CopyArgs) -> CmdResult {
    let open = OpenOptions {
        registry: args.registry.options(ctx)?,
        limits: ctx.layer_limits(),
    };
    let opts = CopyOptions {
        jobs: args.jobs.jobs.into(),
        platform: platform(&args.platform)?,
    };
    let (src, reference): (Box<dyn Transport>, String) = match &args.source {
        Location::Named(name) => {
            let store = ctx.store()?;
            let found = store.resolve(name).map_err(Failure::from)?;
            match found {
                Some(desc) => (
                    Box::new(LayoutTransport::from_store(store)),
                    desc.digest().to_string(),
                ),
                None => {
                    let at = args
                        .source
                        .clone()
                        .registry_named()
                        .map_err(Failure::from)?;
                    let t = at.open(&open).map_err(Failure::from)?;
                    (t, at.reference().unwrap_or_default())
                }
            }
        }
        at => {
            let t = at.open(&open).map_err(Failure::from)?;
            (t, at.reference().unwrap_or_default())
        }
    };
    stdout_free(ctx, &args.destination)?;
    let to = args
        .destination
        .clone()
        .registry_named()
        .map_err(Failure::from)?;
    let dst = to.open(&open).map_err(Failure::from)?;
    let tag = to.tag();
    let reporter = ctx.reporter();
    let out = publish::send(
        src.as_ref(),
        &reference,
        dst.as_ref(),
        tag.as_deref(),
        &opts,
        reporter.as_ref(),
    )
    .map_err(Failure::from)
    .map_err(|f| DestinationFull::mark(f, &args.destination))?;
    drop(reporter);
    done(
        ctx,
        out.digest().as_ref(),
        &place(dst.as_ref(), &tag),
        tag.as_deref(),
        Some(&to),
    );
    Ok(())
}
