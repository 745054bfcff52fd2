//! `jbuild create`: a jail (root + jail.conf entry) from an image.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::create::{self, CreateOptions, RootFrom};
use jbuild::image::Unpacker;
use jbuild::report::JsonReporter;

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The image in the local store: a name (`alpine` is
    /// docker.io/library/alpine:latest), an image ID or a digest prefix.
    #[arg(value_name = "IMAGE")]
    image: String,
    /// The jail's name.
    #[arg(value_name = "NAME")]
    name: String,
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
    /// On ZFS, the dataset to clone the image into (in the pool of the
    /// image's layers); by default PARENT/NAME when the root's parent
    /// directory is the mountpoint of dataset PARENT, else the root is
    /// copied.
    #[arg(long, value_name = "DATASET")]
    dataset: Option<String>,
}

pub fn run(ctx: &Ctx, a: CreateArgs) -> CmdResult {
    let prefix = a.bastille.then(|| {
        ctx.settings
            .bastille
            .prefix
            .clone()
            .unwrap_or_else(|| PathBuf::from("/usr/local/bastille"))
    });
    let mut opts = CreateOptions::new(&a.image, &a.name, a.path, a.conf, prefix);
    opts.dataset = a.dataset;
    let store = ctx.store()?;
    let snapshotter = ctx.snapshotter()?;
    let reporter = ctx.reporter();
    let unpacker = Unpacker::new(
        &store,
        snapshotter.as_ref(),
        reporter.as_ref(),
        ctx.layer_policy(false, false),
    );
    let made = create::create(&unpacker, &opts).map_err(|e| Failure {
        user: e.is_user_error(),
        error: anyhow!(e),
    })?;
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
                a.name,
                made.root.display(),
                made.conf.display()
            );
        }
        out!("{}", made.entry);
    }
    Ok(())
}
