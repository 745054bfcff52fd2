//! `jbuild create`: a jail (root + jail.conf entry) from an image.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::common::pulling::{PullFlags, Unpacking};
use super::{CmdResult, Ctx, Failure};
use jbuild::create::bundle::BundleOptions;
use jbuild::create::{self, CreateOptions, RootFrom};
use jbuild::image::Unpacker;
use jbuild::report::JsonReporter;

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The image in the local store: a name (`alpine` is
    /// docker.io/library/alpine:latest), an image ID or a digest prefix;
    /// or `docker://REF`, pulled first when the store does not hold it
    /// (through the pull policy, docs/policy.md).
    #[arg(value_name = "IMAGE")]
    image: String,
    /// The jail's name (with --bundle: the hostname, when the image
    /// gives none).
    #[arg(value_name = "NAME", required_unless_present = "bundle")]
    name: Option<String>,
    /// The jail's root (default /usr/local/jails/NAME; with --bastille
    /// PREFIX/jails/NAME/root).
    #[arg(long, value_name = "DIR")]
    path: Option<PathBuf>,
    /// The jail.conf file the entry goes into, replacing an entry of the
    /// same name (default /etc/jail.conf.d/NAME.conf; with --bastille
    /// PREFIX/jails/NAME/jail.conf).
    #[arg(long, value_name = "FILE")]
    conf: Option<PathBuf>,
    /// Lay the jail out as Bastille does (PREFIX from the configuration
    /// file's [bastille] prefix, default /usr/local/bastille).
    #[arg(long)]
    bastille: bool,
    /// Agree to a jail parameter the image asks for that weakens the jail
    /// or acts on the host (allow.mlock, allow.raw_sockets,
    /// exec.prestart, ...); may be given several times. Also
    /// `allow_jail_params` in the configuration's [freebsd] section.
    #[arg(long = "allow-jail-param", value_name = "NAME")]
    allow_jail_params: Vec<String>,
    /// Write an OCI runtime bundle for ocijail or runj instead of a jail:
    /// DIR/rootfs and DIR/config.json (runtime-spec 1.3, its `freebsd`
    /// section from the image's jail parameters; docs/jails.md).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["path", "conf", "bastille", "dataset"])]
    bundle: Option<PathBuf>,
    /// On ZFS, the dataset to clone the image into (in the pool of the
    /// image's layers); by default PARENT/NAME when the root's parent
    /// directory is the mountpoint of dataset PARENT, else the root is
    /// copied.
    #[arg(long, value_name = "DATASET")]
    dataset: Option<String>,
    /// How a `docker://` image is pulled.
    #[command(flatten)]
    pull: PullFlags,
}

pub fn run(ctx: &Ctx, a: CreateArgs) -> CmdResult {
    if let Some(dir) = &a.bundle {
        return bundle(ctx, &a, dir);
    }
    let name = a.name.clone().unwrap_or_default();
    let prefix = a.bastille.then(|| {
        ctx.settings
            .bastille
            .prefix
            .clone()
            .unwrap_or_else(|| PathBuf::from(create::BASTILLE_PREFIX))
    });
    let unpacking = Unpacking::open(ctx, ctx.layer_policy(false, false))?;
    let unpacker = unpacking.unpacker();
    let image = pulled(ctx, &a, &unpacker)?;
    let mut opts = CreateOptions::new(&image, &name, a.path, a.conf, prefix);
    opts.allowed_jail_params = allowed_jail_params(ctx, &a.allow_jail_params);
    opts.dataset = a.dataset;
    let made = create::create(&unpacker, &opts).map_err(Failure::from)?;
    if ctx.json {
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "root": made.root,
            "conf": made.conf,
            "fstab": made.fstab,
            "rctl": made.rctl,
            "clone": match &made.root_from {
                RootFrom::Clone { dataset, layer } => json!({"dataset": dataset, "layer": layer}),
                RootFrom::Copy { .. } => serde_json::Value::Null,
            },
        }));
    } else {
        if !ctx.quiet {
            let how = match &made.root_from {
                RootFrom::Clone { dataset, layer } => {
                    format!(" (ZFS dataset {dataset}, a clone of layer {layer})")
                }
                RootFrom::Copy { why: Some(why) } => format!(" (a copy: {why})"),
                RootFrom::Copy { why: None } => String::new(),
            };
            eprintln!(
                "created jail {} in {}{how}; its entry is in {}",
                name,
                made.root.display(),
                made.conf.display()
            );
        }
        out!("{}", made.entry);
    }
    Ok(())
}

/// The store's name of the image, pulled first if it is a `docker://`
/// reference the store does not hold.
fn pulled(ctx: &Ctx, a: &CreateArgs, unpacker: &Unpacker<'_>) -> Result<String, Failure> {
    let source = a.pull.source(ctx, 4)?;
    create::pull_missing(unpacker, &source, &a.image).map_err(Failure::from)
}

/// `--allow-jail-param` over the configuration's list.
fn allowed_jail_params(ctx: &Ctx, given: &[String]) -> Vec<String> {
    jbuild::jailparam::allowed(&ctx.settings.freebsd.allow_jail_params, given)
}

/// `create --bundle DIR IMAGE [NAME]`.
fn bundle(ctx: &Ctx, a: &CreateArgs, dir: &std::path::Path) -> CmdResult {
    let unpacking = Unpacking::open(ctx, ctx.layer_policy(false, false))?;
    let unpacker = unpacking.unpacker();
    let opts = BundleOptions {
        image: pulled(ctx, a, &unpacker)?,
        dir: dir.to_path_buf(),
        name: a.name.clone(),
        allowed_jail_params: allowed_jail_params(ctx, &a.allow_jail_params),
    };
    let made = create::bundle::bundle(&unpacker, &opts).map_err(Failure::from)?;
    if ctx.json {
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "rootfs": made.rootfs,
            "config": made.config,
        }));
    } else if !ctx.quiet {
        eprintln!(
            "wrote the bundle {}: {} and {}",
            dir.display(),
            made.rootfs.display(),
            made.config.display()
        );
    }
    Ok(())
}
