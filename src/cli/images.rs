//! Commands on the local store: images, inspect, history, tag, rmi, prune,
//! info.

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::image::{self, gc, Platform, JAILFILE_LABEL};
use jbuild::report::plain::bytes;
use jbuild::store::{ImageName, Store};

#[derive(Args, Debug)]
pub struct ImagesArgs {
    /// Print only manifest digests.
    #[arg(long = "digests-only")]
    digests: bool,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// Image name, digest or digest prefix.
    image: String,
    /// Print the Jailfile the image was built from.
    #[arg(long)]
    jailfile: bool,
    /// Platform to pick from a multi-platform image.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// With `docker://REF`: print the manifest (or index) exactly as the
    /// registry sent it.
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    registry: super::access::RegistryArgs,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    image: String,
    /// Show full instructions instead of cutting them at 60 characters.
    #[arg(long = "no-trunc")]
    no_trunc: bool,
}

#[derive(Args, Debug)]
pub struct TagArgs {
    /// The existing image (name, digest or prefix).
    source: String,
    /// The new name.
    target: String,
}

#[derive(Args, Debug)]
pub struct RmiArgs {
    /// Names to remove.
    #[arg(required = true)]
    names: Vec<String>,
}

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Also remove the build cache (every committed snapshot) and the
    /// `RUN --mount=type=cache` directories no running build uses (PKG's
    /// package cache is one).
    #[arg(long)]
    cache: bool,
}

fn platform(p: &Option<String>) -> Result<Platform, Failure> {
    match p {
        Some(p) => Platform::parse(p).map_err(|e| Failure::user(anyhow!("--platform: {e}"))),
        None => Ok(Platform::default_for_host()),
    }
}

fn load(store: &Store, reference: &str, p: &Platform) -> Result<image::LoadedImage, Failure> {
    let desc = Ctx::resolve_image(store, reference)?;
    // A stored manifest that does not load is damage in the store; an
    // index without the asked-for platform is the user's to fix.
    image::load_descriptor(store, &desc, p, reference).map_err(|e| Failure {
        user: !e.is_malformed() && e.is_user_error(),
        error: anyhow!(e),
    })
}

pub fn images(ctx: &Ctx, args: ImagesArgs) -> CmdResult {
    let store = ctx.store()?;
    let list = store.list().map_err(Failure::internal)?;
    let mut rows = Vec::new();
    for (name, desc) in &list {
        let digest = desc.digest().to_string();
        let any = Platform::default_for_host();
        let (platform, size) = if image::media::is_index(desc.media_type()) {
            // A list: how many platforms, and the layers of them all.
            match image::index::read_desc(&store, &name.to_string(), desc) {
                Ok(index) => {
                    let size = index
                        .manifests()
                        .iter()
                        .filter_map(|m| image::load_descriptor(&store, m, &any, &digest).ok())
                        .flat_map(|img| img.manifest.layers().clone())
                        .map(|l| (l.digest().to_string(), l.size()))
                        .collect::<std::collections::BTreeMap<_, _>>()
                        .values()
                        .sum::<u64>();
                    (format!("list of {}", index.manifests().len()), size)
                }
                Err(_) => ("(index)".to_string(), 0),
            }
        } else {
            match image::load_descriptor(&store, desc, &any, &digest) {
                Ok(img) => (
                    format!("{}/{}", img.config.os(), img.config.architecture()),
                    img.manifest.layers().iter().map(|l| l.size()).sum::<u64>(),
                ),
                Err(_) => ("(index)".to_string(), 0),
            }
        };
        rows.push((name.to_string(), digest, platform, size));
    }
    if ctx.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, d, p, s)| json!({"name": n, "digest": d, "platform": p, "size": s}))
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(Failure::internal)?
        );
        return Ok(());
    }
    if args.digests {
        for (_, d, _, _) in &rows {
            outln!("{d}");
        }
        return Ok(());
    }
    outln!(
        "{:<40} {:<19} {:<16} {:>10}",
        "NAME",
        "DIGEST",
        "PLATFORM",
        "SIZE"
    );
    for (n, d, p, s) in rows {
        outln!(
            "{:<40} {:<19} {:<16} {:>10}",
            n,
            &d[..d.len().min(19)],
            p,
            bytes(s)
        );
    }
    Ok(())
}

pub fn inspect(ctx: &Ctx, args: InspectArgs) -> CmdResult {
    if let Some(reference) = args.image.strip_prefix("docker://") {
        // In the registry, without storing anything.
        let options = args.registry.options(ctx)?;
        return super::remote::inspect(reference, &args.platform, args.raw, options);
    }
    if args.raw {
        return Err(Failure::user(anyhow!(
            "--raw is for images in a registry: jbuild inspect --raw docker://REF"
        )));
    }
    let store = ctx.store()?;
    let img = load(&store, &args.image, &platform(&args.platform)?)?;
    if args.jailfile {
        let text = img
            .config
            .config()
            .as_ref()
            .and_then(|c| c.labels().as_ref())
            .and_then(|l| l.get(JAILFILE_LABEL))
            .cloned();
        return match text {
            Some(t) => {
                out!("{t}");
                Ok(())
            }
            None => Err(Failure::user(anyhow!(
                "image `{}` carries no Jailfile (it was not built by jbuild)",
                args.image
            ))),
        };
    }
    let out = json!({
        "name": args.image,
        "digest": img.manifest_digest.to_string(),
        "manifest": img.manifest,
        "config": img.config,
    });
    outln!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(Failure::internal)?
    );
    Ok(())
}

pub fn history(ctx: &Ctx, args: HistoryArgs) -> CmdResult {
    let store = ctx.store()?;
    let img = load(&store, &args.image, &Platform::default_for_host())?;
    let mut sizes = img.manifest.layers().iter().map(|l| l.size());
    let mut rows = Vec::new();
    for h in img.config.history().iter().flatten() {
        let empty = h.empty_layer().unwrap_or(false);
        let size = if empty { 0 } else { sizes.next().unwrap_or(0) };
        rows.push((h.created_by().clone().unwrap_or_default(), empty, size));
    }
    if ctx.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(c, e, s)| json!({"created_by": c, "empty_layer": e, "size": s}))
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(Failure::internal)?
        );
        return Ok(());
    }
    outln!("{:>10}  CREATED BY", "SIZE");
    for (created_by, empty, size) in rows.iter().rev() {
        let one_line = created_by.replace('\n', " ");
        let shown: String = if args.no_trunc || one_line.chars().count() <= 60 {
            one_line
        } else {
            one_line.chars().take(57).chain("...".chars()).collect()
        };
        outln!(
            "{:>10}  {}",
            if *empty {
                "-".to_string()
            } else {
                bytes(*size)
            },
            shown
        );
    }
    Ok(())
}

pub fn tag(ctx: &Ctx, args: TagArgs) -> CmdResult {
    let store = ctx.store()?;
    let target: ImageName = args
        .target
        .parse()
        .map_err(|e| Failure::user(anyhow!("{}: {e}", args.target)))?;
    let desc = store
        .resolve(&args.source)
        .map_err(Failure::internal)?
        .ok_or_else(|| Failure::user(anyhow!("no image `{}` in the store", args.source)))?;
    store.tag(&target, &desc).map_err(Failure::internal)?;
    Ok(())
}

pub fn rmi(ctx: &Ctx, args: RmiArgs) -> CmdResult {
    let store = ctx.store()?;
    let mut missing = Vec::new();
    for n in &args.names {
        let name: ImageName = n.parse().map_err(|e| Failure::user(anyhow!("{n}: {e}")))?;
        match store.untag(&name).map_err(Failure::internal)? {
            Some(d) => {
                if !ctx.quiet {
                    outln!("untagged {name} ({})", d.digest());
                }
            }
            None => missing.push(n.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(Failure::user(anyhow!(
            "no image named {} in the store",
            missing.join(", ")
        )));
    }
    Ok(())
}

pub fn prune(ctx: &Ctx, args: PruneArgs) -> CmdResult {
    let store = ctx.store()?;
    let sn = ctx.snapshotter()?;
    let summary = gc::prune(&store, sn.as_ref(), args.cache).map_err(Failure::internal)?;
    let mounts = if args.cache {
        let dir = ctx.paths.mount_cache();
        jbuild::engine::mounts::clear_cache_mounts(&dir).map_err(|e| {
            Failure::internal(anyhow!("clearing cache mounts in {}: {e}", dir.display()))
        })?
    } else {
        0
    };
    if ctx.json {
        outln!(
            "{}",
            json!({"snapshots_removed": summary.snapshots_removed, "blobs_removed": summary.blobs_removed.len(), "bytes_freed": summary.bytes_freed(), "cache_mounts_removed": mounts})
        );
    } else if !ctx.quiet {
        outln!(
            "removed {} snapshots and {} blobs ({}){}",
            summary.snapshots_removed,
            summary.blobs_removed.len(),
            bytes(summary.bytes_freed()),
            if args.cache {
                format!(", and {mounts} cache mounts")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

pub fn info(ctx: &Ctx) -> CmdResult {
    let executor = match jbuild::exec::host_executor() {
        Ok(e) => e.name().to_string(),
        Err(e) => format!("none ({e})"),
    };
    let chosen = ctx.backend()?;
    let v = json!({
        "root": ctx.paths.root(),
        "store": ctx.paths.store(),
        "backend": chosen.snapshotter.backend(),
        "backend_reason": chosen.reason,
        "snapshots": chosen.location,
        "differ": chosen.snapshotter.differ().name(),
        "config": ctx.settings.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none (defaults)".into()),
        "config_searched": config_searched(ctx),
        "executor": executor,
        "platform": Platform::default_for_host().to_string(),
        "freebsd_mirror": jbuild::release::ReleaseSource::new(&ctx.paths, &ctx.settings.freebsd).mirror,
        "pkg_cache": ctx.paths.pkg_cache(),
        "version": super::VERSION,
    });
    if ctx.json {
        outln!("{v}");
    } else {
        for (k, val) in v.as_object().into_iter().flatten() {
            if let Some(files) = val.as_array() {
                // One line per file: `config_searched  /etc/jbuild/config.toml (not found)`.
                for f in files {
                    outln!(
                        "{k:<16} {} ({})",
                        f["path"].as_str().unwrap_or(""),
                        f["state"].as_str().unwrap_or("")
                    );
                }
                continue;
            }
            outln!(
                "{k:<16} {}",
                val.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| val.to_string())
            );
        }
    }
    Ok(())
}

/// The configuration files looked for, in order, each `used`, `not found`,
/// or `not read` (one before it was used).
fn config_searched(ctx: &Ctx) -> Vec<serde_json::Value> {
    jbuild::config::Settings::search_list()
        .into_iter()
        .map(|path| {
            let state = if ctx.settings.source.as_ref() == Some(&path) {
                "used"
            } else if path.exists() {
                "not read"
            } else {
                "not found"
            };
            json!({"path": path, "state": state})
        })
        .collect()
}
