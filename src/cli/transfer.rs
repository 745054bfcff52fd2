//! `jbuild export` and `jbuild import`: the store to and from OCI layout
//! directories and archives, through the Transport seam.

use anyhow::anyhow;
use clap::Args;

use super::common::access::PolicyArg;
use super::common::{done, stdout_free, DestinationFull};
use super::{CmdResult, Ctx, Failure};
use jbuild::engine::publish::{self, PushOptions};
use jbuild::store::ImageName;
use jbuild::transport::{CopyOptions, LayoutTransport, Location, OpenOptions};

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The image to export (name, digest or digest prefix).
    image: String,
    /// `oci:DIR[:TAG]` or `oci-archive:FILE[:TAG]`. Without TAG, the tag of
    /// the name IMAGE found, or of the image's only name.
    destination: Location,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// `oci:DIR[:REF]` or `oci-archive:FILE[:REF]`; without REF, the only
    /// image there.
    source: Location,
    /// The name to give the image in the store (default: REF, when it is a
    /// valid image name).
    name: Option<String>,
    #[command(flatten)]
    policy: PolicyArg,
}

pub fn export(ctx: &Ctx, args: ExportArgs) -> CmdResult {
    let store = ctx.store()?;
    let to = args.destination.clone();
    // Found before the destination is looked at: an image that is not
    // there is the first thing to say.
    Ctx::resolve_image(&store, &args.image)?;
    stdout_free(ctx, &to)?;
    let to = to.explicit().map_err(Failure::from)?;
    let options = PushOptions {
        jobs: CopyOptions::default().jobs,
        registry: Default::default(),
    };
    let reporter = ctx.reporter();
    let p = publish::push(&store, &args.image, &to, &options, reporter.as_ref())
        .map_err(Failure::from)
        .map_err(|f| DestinationFull::mark(f, &to))?;
    drop(reporter);
    done(ctx, &p.digest, &to.to_string(), p.tag.as_deref(), Some(&to));
    Ok(())
}

pub fn import(ctx: &Ctx, args: ImportArgs) -> CmdResult {
    let source = args.source.clone().explicit().map_err(Failure::from)?;
    let open = OpenOptions {
        limits: ctx.layer_limits(),
        ..OpenOptions::default()
    };
    let src = source.open(&open).map_err(Failure::from)?;
    let reference = source.reference();
    // The pull policy's judgement comes before anything is copied; a
    // registry image is then copied by the digest it judged.
    let pinned = args.policy.check_location(ctx, &source, &open.registry)?;
    let name: Option<ImageName> = match (&args.name, &reference) {
        (Some(n), _) => Some(n.parse().map_err(|e| Failure::user(anyhow!("{n}: {e}")))?),
        (None, Some(r)) => r.parse().ok(),
        (None, None) => None,
    };
    let store = ctx.store()?;
    let dst = LayoutTransport::from_store(store);
    let reporter = ctx.reporter();
    let tag = name.as_ref().map(|n| n.to_string());
    let pinned = pinned.map(|d| d.to_string());
    let out = publish::send(
        src.as_ref(),
        pinned.as_deref().or(reference.as_deref()).unwrap_or(""),
        &dst,
        tag.as_deref(),
        &CopyOptions::default(),
        reporter.as_ref(),
    )
    .map_err(Failure::from)?;
    drop(reporter);
    done(
        ctx,
        out.digest().as_ref(),
        &tag.clone().unwrap_or_else(|| "(untagged)".into()),
        None,
        None,
    );
    Ok(())
}
