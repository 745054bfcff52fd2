//! `jbuild export` and `jbuild import`: the store to and from OCI layout
//! directories and archives, through the Transport seam; `jbuild save`
//! and `jbuild load`, docker's names for the same with an archive (a file
//! or the standard streams).

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

#[derive(Args, Debug)]
#[command(
    after_help = "The archive is an OCI archive (what `export IMAGE oci-archive:FILE` \
writes), with the image's full name as its reference, so `jbuild load` (and `skopeo copy \
oci-archive:FILE ...`) find it by name.\n\nExamples:\n  jbuild save -o web.tar web:1\n  \
jbuild save web:1 | ssh host jbuild load"
)]
pub struct SaveArgs {
    /// The image to save (name, digest or digest prefix).
    image: String,
    /// The archive to write; standard output when not given (refused on
    /// a terminal).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "The image is named as the archive names it (`jbuild save` writes \
the full name); an archive that names it otherwise (or not at all) leaves it untagged: \
`jbuild import oci-archive:FILE NAME` names it.\n\nExamples:\n  jbuild load -i web.tar\n  \
jbuild load < web.tar"
)]
pub struct LoadArgs {
    /// The archive to read; standard input when not given.
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    input: Option<std::path::PathBuf>,
    #[command(flatten)]
    policy: PolicyArg,
}

pub fn export(ctx: &Ctx, args: ExportArgs) -> CmdResult {
    let store = ctx.store()?;
    // Found before the destination is looked at: an image that is not
    // there is the first thing to say.
    Ctx::resolve_image(&store, &args.image)?;
    send(ctx, store, &args.image, args.destination)
}

/// `jbuild save`: export to an OCI archive named after the image.
pub fn save(ctx: &Ctx, args: SaveArgs) -> CmdResult {
    use std::io::IsTerminal;
    let store = ctx.store()?;
    let found = store.find(&args.image).map_err(Failure::from)?;
    let file = match args.output {
        Some(f) => f,
        None if std::io::stdout().is_terminal() => {
            return Err(Failure::user(anyhow!(
                "standard output is a terminal: give -o FILE, or send the archive into a file or a pipe"
            )))
        }
        None => "-".into(),
    };
    let to = Location::Archive {
        file,
        reference: found.name,
    };
    send(ctx, store, &args.image, to)
}

fn send(ctx: &Ctx, store: jbuild::store::Store, image: &str, to: Location) -> CmdResult {
    let args_image = image;
    stdout_free(ctx, &to)?;
    let to = to.explicit().map_err(Failure::from)?;
    let options = PushOptions {
        jobs: CopyOptions::default().jobs,
        registry: Default::default(),
    };
    let reporter = ctx.reporter();
    let p = publish::push(&store, args_image, &to, &options, reporter.as_ref())
        .map_err(Failure::from)
        .map_err(|f| DestinationFull::mark(f, &to))?;
    drop(reporter);
    done(ctx, &p.digest, &to.to_string(), p.tag.as_deref(), Some(&to));
    Ok(())
}

pub fn import(ctx: &Ctx, args: ImportArgs) -> CmdResult {
    let source = args.source.clone().explicit().map_err(Failure::from)?;
    receive(ctx, source, args.name.as_deref(), &args.policy, false)
}

/// `jbuild load`: import the archive's image under the name it carries.
pub fn load(ctx: &Ctx, args: LoadArgs) -> CmdResult {
    let source = Location::Archive {
        file: args.input.unwrap_or_else(|| "-".into()),
        reference: None,
    };
    receive(ctx, source, None, &args.policy, true)
}

/// Reads `source`'s image into the store as `name`, else as its
/// reference; `named_inside`: else as the full image name the archive's
/// only image carries (what `save` writes).
fn receive(
    ctx: &Ctx,
    source: Location,
    name: Option<&str>,
    policy: &PolicyArg,
    named_inside: bool,
) -> CmdResult {
    let open = OpenOptions {
        limits: ctx.layer_limits(),
        ..OpenOptions::default()
    };
    let src = source.open(&open).map_err(Failure::from)?;
    let mut reference = source.reference();
    if named_inside && reference.is_none() {
        reference = inside_name(src.as_ref())?;
    }
    // The pull policy's judgement comes before anything is copied; a
    // registry image is then copied by the digest it judged.
    let pinned = policy.check_location(ctx, &source, &open.registry)?;
    let name: Option<ImageName> = match (name, &reference) {
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

/// The ref name of the only image in `src` when it is an image name
/// (`repository:tag`, as `save` writes); a bare tag (`v1`, as `export`
/// and skopeo write) names nothing.
fn inside_name(src: &dyn jbuild::transport::Transport) -> Result<Option<String>, Failure> {
    let desc = jbuild::transport::block_on(src.resolve("")).map_err(Failure::from)?;
    Ok(desc
        .annotations()
        .as_ref()
        .and_then(|a| a.get("org.opencontainers.image.ref.name"))
        .filter(|r| r.contains('/') || r.contains(':'))
        .cloned())
}
