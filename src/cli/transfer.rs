//! `jbuild export` and `jbuild import`: the store to and from OCI layout
//! directories and archives, through the Transport seam.

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::report::Reporter;
use jbuild::store::ImageName;
use jbuild::transport::{
    self, copy_image_with, CopyEvent, CopyOptions, LayoutTransport, Transport, TransportError,
};

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The image to export (name, digest or digest prefix).
    image: String,
    /// `oci:DIR[:TAG]` or `oci-archive:FILE[:TAG]`. Without TAG, the tag of
    /// the name IMAGE found, or of the image's only name.
    destination: String,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// `oci:DIR[:REF]` or `oci-archive:FILE[:REF]`; without REF, the only
    /// image there.
    source: String,
    /// The name to give the image in the store (default: REF, when it is a
    /// valid image name).
    name: Option<String>,
    #[command(flatten)]
    policy: super::access::PolicyArg,
}

/// A copy to a place the user named (`export`'s and `copy`'s destination)
/// ran out of space there: the error says so and names the place, so the
/// store, which only was read, is not blamed (nor `prune` suggested).
#[derive(Debug)]
pub(super) struct DestinationFull(String);

impl std::fmt::Display for DestinationFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: no space left on its filesystem", self.0)
    }
}

impl DestinationFull {
    /// `f`, said to be `destination`'s full disk when it is one.
    pub(super) fn mark(f: Failure, destination: &str) -> Failure {
        if !super::disk_full(&f.error) {
            return f;
        }
        Failure {
            user: true,
            error: f.error.context(DestinationFull(destination.to_string())),
        }
    }

    /// The mark on `e`, if a command put one.
    pub(super) fn find(e: &anyhow::Error) -> Option<&DestinationFull> {
        e.downcast_ref::<DestinationFull>()
    }

    /// The destination, as the user wrote it.
    pub(super) fn place(&self) -> &str {
        &self.0
    }
}

fn progress(reporter: &dyn Reporter) -> impl Fn(CopyEvent) + Send + Sync + '_ {
    move |ev| transport::registry::report(reporter, ev)
}

/// Copies one image and completes the destination (an archive is written
/// at `finish`).
fn copy(
    src: &dyn Transport,
    reference: &str,
    dst: &dyn Transport,
    tag: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<oci_spec::image::Descriptor, Failure> {
    copy_reporting(src, reference, dst, tag, &CopyOptions::default(), reporter)
}

fn copy_reporting(
    src: &dyn Transport,
    reference: &str,
    dst: &dyn Transport,
    tag: Option<&str>,
    options: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<oci_spec::image::Descriptor, Failure> {
    transport::block_on(async {
        let d = copy_image_with(src, reference, dst, tag, options, &progress(reporter)).await?;
        dst.finish().await?;
        Ok::<_, TransportError>(d)
    })
    .map_err(Failure::from)
}

/// [`copy`] with options, reporting as the flags say.
pub(super) fn copy_with(
    ctx: &Ctx,
    src: &dyn Transport,
    reference: &str,
    dst: &dyn Transport,
    tag: Option<&str>,
    options: &CopyOptions,
) -> Result<oci_spec::image::Descriptor, Failure> {
    let reporter = ctx.reporter();
    copy_reporting(src, reference, dst, tag, options, reporter.as_ref())
}

pub fn export(ctx: &Ctx, args: ExportArgs) -> CmdResult {
    let store = ctx.store()?;
    let desc = Ctx::resolve_image(&store, &args.image)?;
    stdout_free(ctx, &args.destination)?;
    let (dst, tag) = transport::parse_location(&args.destination).map_err(Failure::from)?;
    let tag = match tag {
        Some(t) => Some(t),
        None => Some(layout_tag(&store, &args.image, &args.destination)?),
    };
    let src = LayoutTransport::from_store(store);
    let reporter = ctx.reporter();
    let digest = desc.digest().to_string();
    let out = copy(
        &src,
        &digest,
        dst.as_ref(),
        tag.as_deref(),
        reporter.as_ref(),
    )
    .map_err(|f| DestinationFull::mark(f, &args.destination))?;
    done(
        ctx,
        out.digest().as_ref(),
        &args.destination,
        tag.as_deref(),
    );
    Ok(())
}

pub fn import(ctx: &Ctx, args: ImportArgs) -> CmdResult {
    let options = Default::default();
    let (src, reference) =
        transport::parse_location_limited(&args.source, &options, &ctx.layer_limits())
            .map_err(Failure::from)?;
    // The pull policy's judgement comes before anything is copied; a
    // registry image is then copied by the digest it judged.
    let pinned = args.policy.check_location(ctx, &args.source, &options)?;
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
    let out = copy(
        src.as_ref(),
        pinned.as_deref().or(reference.as_deref()).unwrap_or(""),
        &dst,
        tag.as_deref(),
        reporter.as_ref(),
    )?;
    done(
        ctx,
        out.digest().as_ref(),
        &tag.clone().unwrap_or_else(|| "(untagged)".into()),
        None,
    );
    Ok(())
}

/// The tag an `oci:` or `oci-archive:` destination given without one
/// gets: that of the stored name `typed` matched, or, when `typed` was an
/// ID or digest, of the image's only name. An image with no name, or
/// several, needs the tag said (`oci:DIR:TAG`): none is invented.
pub(super) fn layout_tag(
    store: &jbuild::store::Store,
    typed: &str,
    destination: &str,
) -> Result<String, Failure> {
    let found = store.find(typed).map_err(Failure::from)?;
    let name = match found.name {
        Some(n) => n,
        None => {
            let mut names = store
                .names_of(found.descriptor.digest())
                .map_err(Failure::from)?;
            if names.len() != 1 {
                let had = if names.is_empty() {
                    "has no name".to_string()
                } else {
                    format!("has {} names ({})", names.len(), names.join(", "))
                };
                return Err(Failure::user(anyhow!(
                    "{destination}: no tag given, and image {typed} {had}: say the tag, \
                     as {destination}:TAG"
                )));
            }
            names.remove(0)
        }
    };
    Ok(ImageName::parse(&name)
        .map(|n| n.tag().to_string())
        .unwrap_or(name))
}

/// Refuses `--json` with an archive written to standard output: both
/// would go there.
pub(super) fn stdout_free(ctx: &Ctx, destination: &str) -> Result<(), Failure> {
    if ctx.json && transport::writes_stdout(destination) {
        return Err(Failure::user(anyhow!(
            "{destination} writes the archive to standard output, where --json writes its \
             events: leave out --json, or write the archive to a file"
        )));
    }
    Ok(())
}

/// Says what was copied where: the digest on standard output, unless the
/// image itself went there (`oci-archive:-`).
pub(super) fn done(ctx: &Ctx, digest: &str, place: &str, tag: Option<&str>) {
    if transport::writes_stdout(place) {
        if !ctx.quiet {
            eprintln!("copied {digest} to {place}");
        }
    } else if ctx.json {
        outln!(
            "{}",
            json!({"event": "result", "digest": digest, "to": place, "tag": tag})
        );
    } else {
        if !ctx.quiet {
            eprintln!("copied {digest} to {place}");
        }
        outln!("{digest}");
    }
}
