//! `jbuild push`, `jbuild pull` and `jbuild copy`: images between the store,
//! registries and OCI layouts, through the Transport seam.

use anyhow::anyhow;
use clap::Args;

use super::access::RegistryArgs;
use super::transfer::{copy_with, done, stdout_free};
use super::{CmdResult, Ctx, Failure};
use jbuild::image::{self, Platform, Unpacker};
use jbuild::transport::{
    self, CopyOptions, LayoutTransport, RegistryOptions, RegistryPuller, RegistryRef,
    RegistryTransport, Transport,
};

#[derive(Args, Debug)]
pub struct JobsArg {
    /// Blobs moved at the same time.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(super) jobs: u16,
}

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
    destination: Option<String>,
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
    reference: String,
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
    registry: RegistryArgs,
    #[command(flatten)]
    policy: super::access::PolicyArg,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild copy docker://localhost:5000/web:1.0 oci:/srv/images:web-1.0\n  \
    jbuild copy oci-archive:web.tar docker://registry.lan:5000/web:1.0\n  \
    jbuild copy web:1.0 localhost:5000/mirror/web:1.0")]
pub struct CopyArgs {
    /// `docker://REF`, `oci:DIR[:REF]`, `oci-archive:FILE[:REF]`, an image
    /// in the store, or else a registry reference.
    source: String,
    /// `docker://REF`, `oci:DIR[:TAG]`, `oci-archive:FILE[:TAG]`, or a
    /// registry reference.
    destination: String,
    /// From an index, copy only the manifest for this platform (default:
    /// the whole index).
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    platform: Option<String>,
    #[command(flatten)]
    jobs: JobsArg,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn is_location(s: &str) -> bool {
    s.starts_with("docker://") || s.starts_with("oci:") || s.starts_with("oci-archive:")
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

pub(super) fn registry_ref(s: &str) -> Result<RegistryRef, Failure> {
    RegistryRef::parse(s).map_err(|e| {
        Failure::user(anyhow!(
            "`{s}` is not a registry reference: {e} \
             (write host[:port]/repository[:tag], oci:DIR or oci-archive:FILE)"
        ))
    })
}

/// A destination and the tag to give the image there.
fn destination(
    s: &str,
    options: &RegistryOptions,
) -> Result<(Box<dyn Transport>, Option<String>), Failure> {
    if is_location(s) {
        let (t, tag) = transport::parse_location_with(s, options).map_err(Failure::from)?;
        // A registry reference pinned by digest alone has no tag to write.
        let tag = tag.filter(|t| !t.starts_with("sha256:"));
        return Ok((t, tag));
    }
    let r = registry_ref(s)?;
    let tag = r.tag.clone();
    Ok((Box::new(RegistryTransport::new(r, options.clone())), tag))
}

/// An image [`push_to`] sent.
pub(super) struct Pushed {
    /// The manifest digest at the destination.
    pub digest: String,
    /// The destination as the user would write it.
    pub place: String,
    pub tag: Option<String>,
}

/// Pushes the stored image `image` (name, digest or prefix) to `dest`:
/// the one way `jbuild push` and `jbuild build --push` send images.
pub(super) fn push_to(
    ctx: &Ctx,
    store: &jbuild::store::Store,
    image: &str,
    dest: &str,
    shown_as: &str,
    jobs: usize,
    options: &RegistryOptions,
) -> Result<Pushed, Failure> {
    let desc = Ctx::resolve_image(store, image)?;
    stdout_free(ctx, dest)?;
    let (dst, mut tag) = destination(dest, options)?;
    if tag.is_none() && (dest.starts_with("oci:") || dest.starts_with("oci-archive:")) {
        // As `export`: a layout gets the tag of the name the image was
        // found by, or of its only name.
        tag = Some(super::transfer::layout_tag(store, shown_as, dest)?);
    }
    let src = LayoutTransport::from_store(store.clone());
    let opts = CopyOptions {
        jobs,
        platform: None,
    };
    let out = copy_with(
        ctx,
        &src,
        desc.digest().as_ref(),
        dst.as_ref(),
        tag.as_deref(),
        &opts,
    )?;
    if !(dest.starts_with("oci:") || dest.starts_with("oci-archive:")) {
        // Signatures and attestations kept beside the image go with it.
        let digest = jbuild::store::descriptor_digest(&out).map_err(Failure::internal)?;
        jbuild::trust::carry(store, &digest, dst.as_ref()).map_err(Failure::from)?;
    }
    Ok(Pushed {
        digest: out.digest().to_string(),
        place: place(dst.as_ref(), &tag),
        tag,
    })
}

/// Writes `digest` (no newline, as docker and podman write theirs) to
/// `file` as `fsutil::output` writes a path the user names: a regular
/// file atomically (a script never reads half of it), a FIFO or device in
/// place, `-` to standard output.
pub(super) fn write_digest_file(
    flag: &str,
    file: &std::path::Path,
    digest: &str,
) -> Result<(), Failure> {
    jbuild::fsutil::output::write_output(file, digest.as_bytes())
        .map_err(|e| Failure::context(e, format!("{flag} {}: nothing written", file.display())))
}

pub fn push(ctx: &Ctx, args: PushArgs) -> CmdResult {
    let store = ctx.store()?;
    let dest = args
        .destination
        .clone()
        .unwrap_or_else(|| args.image.clone());
    let p = push_to(
        ctx,
        &store,
        &args.image,
        &dest,
        &args.image,
        args.jobs.jobs.into(),
        &args.registry.options(ctx)?,
    )?;
    if let Some(file) = &args.digestfile {
        write_digest_file("--digestfile", file, &p.digest)?;
    }
    done(ctx, &p.digest, &p.place, p.tag.as_deref());
    Ok(())
}

pub fn pull(ctx: &Ctx, args: PullArgs) -> CmdResult {
    let reference = args
        .reference
        .strip_prefix("docker://")
        .unwrap_or(&args.reference);
    registry_ref(reference)?;
    let want = platform(&args.platform)?.unwrap_or_else(Platform::default_for_host);
    let source = args.policy.guard(
        ctx,
        RegistryPuller {
            options: args.registry.options(ctx)?,
            jobs: args.jobs.jobs.into(),
        },
    );
    let store = ctx.store()?;
    let snapshotter = ctx.snapshotter()?;
    let reporter = ctx.reporter();
    let unpacker = Unpacker::new(
        &store,
        snapshotter.as_ref(),
        reporter.as_ref(),
        ctx.layer_policy(args.allow_setuid, args.allow_devices),
    );
    // Named only once its layers are unpacked: a refused image gets no name.
    let pulled = image::pull(&unpacker, &source, reference, &want).map_err(Failure::from)?;
    drop(reporter);
    done(ctx, pulled.descriptor.digest().as_ref(), &pulled.name, None);
    Ok(())
}

pub fn copy(ctx: &Ctx, args: CopyArgs) -> CmdResult {
    let options = args.registry.options(ctx)?;
    let opts = CopyOptions {
        jobs: args.jobs.jobs.into(),
        platform: platform(&args.platform)?,
    };
    let (src, reference): (Box<dyn Transport>, String) = if is_location(&args.source) {
        let (t, r) = transport::parse_location_limited(&args.source, &options, &ctx.layer_limits())
            .map_err(Failure::from)?;
        (t, r.unwrap_or_default())
    } else {
        let store = ctx.store()?;
        let found = store.resolve(&args.source).map_err(Failure::from)?;
        match found {
            Some(desc) => (
                Box::new(LayoutTransport::from_store(store)),
                desc.digest().to_string(),
            ),
            None => {
                let r = registry_ref(&args.source)?;
                let reference = r.reference();
                (
                    Box::new(RegistryTransport::new(r, options.clone())),
                    reference,
                )
            }
        }
    };
    stdout_free(ctx, &args.destination)?;
    let (dst, tag) = destination(&args.destination, &options)?;
    let out = copy_with(
        ctx,
        src.as_ref(),
        &reference,
        dst.as_ref(),
        tag.as_deref(),
        &opts,
    )
    .map_err(|f| super::transfer::DestinationFull::mark(f, &args.destination))?;
    done(
        ctx,
        out.digest().as_ref(),
        &place(dst.as_ref(), &tag),
        tag.as_deref(),
    );
    Ok(())
}
