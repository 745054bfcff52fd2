//! Commands on the local store: images, inspect, history, tag, rmi, prune,
//! info.

use anyhow::anyhow;
use clap::Args;
use jbuild::blame::Blame;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::create::params::{self, ImageParam, Judgement};
use jbuild::image::list_format::{Format, Piece};
use jbuild::image::remove::{self, Removed};
use jbuild::image::{self, gc, list, Platform, JAILFILE_LABEL};
use jbuild::report::plain::bytes;
use jbuild::store::{ImageName, Store};
use jbuild::transport::{self, Location, RegistryOptions, RegistryRef, RegistryTransport};

#[derive(Args, Debug)]
#[command(
    after_help = "With -q (--quiet), only image IDs are printed, one per name as docker does.\n\n\
Format fields: {{.Name}} {{.Repository}} {{.Tag}} {{.ID}} {{.Digest}} {{.Created}} {{.CreatedSince}} \
{{.Size}} (unpacked) {{.CompressedSize}} {{.Platform}}; `table ...` aligns columns at \\t \
under a header; `json` prints one object per image.\n\n\
Examples:\n  jbuild images -q\n  jbuild images --format '{{.Repository}}:{{.Tag}} {{.Size}}'\n  \
jbuild images --filter reference='web:*' --filter dangling=false"
)]
pub struct ImagesArgs {
    /// Print only manifest digests.
    #[arg(long = "digests-only")]
    digests: bool,
    /// Print with a template (`{{.Repository}}:{{.Tag}}`, `table …`) or `json`.
    #[arg(long, value_name = "TEMPLATE")]
    format: Option<String>,
    /// Show only images that match: reference=PATTERN, label=KEY[=VALUE],
    /// dangling=true|false, before=IMAGE, since=IMAGE. Repeatable: filters
    /// of one key match either value, different keys must all match.
    #[arg(long, short = 'f', value_name = "KEY=VALUE")]
    filter: Vec<String>,
    /// Show whole image IDs (`sha256:` and 64 hex digits).
    #[arg(long = "no-trunc")]
    no_trunc: bool,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// Image name, digest or digest prefix.
    image: String,
    /// Print the Jailfile the image was built from.
    #[arg(long)]
    jailfile: bool,
    /// Print the jail(8) parameters the image asks for (its
    /// `org.freebsd.jail.*` labels), one a line, with those `jbuild
    /// create` asks consent for; with --json, as a list.
    #[arg(long, conflicts_with = "jailfile")]
    jail: bool,
    /// Platform to pick from a multi-platform image.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// With `docker://REF`: print the manifest (or index) exactly as the
    /// registry sent it.
    #[arg(long)]
    raw: bool,
    /// Print one line from a template: the fields of `images --format`
    /// (`{{.Repository}}`, `{{.ID}}`, `{{.Size}}`, ...) and the config's
    /// (`{{.Config.Env}}` or `{{.Env}}`: Entrypoint, Cmd, Env, WorkingDir,
    /// User, Labels, ExposedPorts, Volumes, StopSignal, Os, Architecture;
    /// lists and maps as JSON).
    #[arg(long, value_name = "TEMPLATE", conflicts_with_all = ["jailfile", "jail", "raw"])]
    format: Option<String>,
    #[command(flatten)]
    registry: super::common::access::RegistryArgs,
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
    /// Names, image IDs (digests or unique prefixes) to remove.
    #[arg(required = true)]
    names: Vec<String>,
    /// Remove every name of an image given by ID, and names of images a
    /// manifest list holds.
    #[arg(long, short = 'f')]
    force: bool,
}

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Also remove the build cache (every committed snapshot), the
    /// `RUN --mount=type=cache` directories no running build uses (PKG's
    /// package cache is one) and jbuild's own package cache.
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
    image::load_descriptor(store, &desc, p, reference).map_err(|e| {
        if e.is_malformed() {
            Failure::internal(e)
        } else {
            Failure::from(e)
        }
    })
}

pub fn images(ctx: &Ctx, args: ImagesArgs) -> CmdResult {
    let store = ctx.store()?;
    let format = args.format.as_deref().map(Format::parse).transpose()?;
    let filters = list::Filters::parse(&store, &args.filter).map_err(Failure::from)?;
    let rows = list::list(&store, &filters).map_err(Failure::from)?;
    let now = std::time::SystemTime::now();
    if ctx.json && format.is_none() {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.name.to_string(),
                    "repository": r.repository(),
                    "tag": r.tag(),
                    "digest": r.digest,
                    "platform": r.platform,
                    "created": r.created,
                    "size": r.compressed,
                    "unpacked_size": r.unpacked,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(Failure::internal)?
        );
        return Ok(());
    }
    if args.digests {
        for r in &rows {
            outln!("{}", r.digest);
        }
        return Ok(());
    }
    // `images -q` is docker's: IDs only, over any --format (the global -q
    // means "results only" elsewhere).
    let format = match format {
        _ if ctx.quiet => Format::Lines(vec![Piece::Field("ID")]),
        Some(f) => f,
        None => Format::parse(
            "table {{.Name}}\t{{.ID}}\t{{.Platform}}\t{{.CreatedSince}}\t{{.Size}}\t{{.CompressedSize}}",
        )
        .map_err(Failure::internal)?,
    };
    for line in format.render(&rows, now, args.no_trunc) {
        outln!("{line}");
    }
    Ok(())
}

pub fn inspect(ctx: &Ctx, args: InspectArgs) -> CmdResult {
    let location = args.image.parse::<Location>().map_err(Failure::from)?;
    if let Some(reference) = location.registry_ref() {
        if args.jail {
            return Err(Failure::user(anyhow!(
                "--jail is for images in the store; `jbuild inspect docker://REF` shows them as jailParameters"
            )));
        }
        if args.format.is_some() {
            return Err(Failure::user(anyhow!(
                "--format is for images in the store: pull it first, or read `jbuild inspect docker://REF`'s JSON"
            )));
        }
        // In the registry, without storing anything.
        let options = args.registry.options(ctx)?;
        return remote_inspect(reference, &args.platform, args.raw, options);
    }
    if args.raw {
        return Err(Failure::user(anyhow!(
            "--raw is for images in a registry: jbuild inspect --raw docker://REF"
        )));
    }
    let store = ctx.store()?;
    let img = load(&store, &args.image, &platform(&args.platform)?)?;
    if let Some(template) = &args.format {
        let pieces = Format::parse_inspect(template).map_err(Failure::user)?;
        let found = store.find(&args.image).map_err(Failure::from)?;
        let digest = found.descriptor.digest().to_string();
        let rows = list::list(&store, &list::Filters::default()).map_err(Failure::from)?;
        // The row of the name it was found by, else any of its names.
        let row = rows
            .iter()
            .filter(|r| r.digest == digest)
            .min_by_key(|r| Some(r.name.to_string()) != found.name)
            .ok_or_else(|| Failure::internal(anyhow!("image {digest} is not listed")))?;
        let state = image::ImageState::from_config(&img.config);
        outln!(
            "{}",
            jbuild::image::list_format::render_inspect(
                &pieces,
                row,
                &state,
                std::time::SystemTime::now()
            )
        );
        return Ok(());
    }
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
    let mut config = serde_json::to_value(&img.config).map_err(Failure::internal)?;
    if let Some(c) = config.as_object_mut() {
        // Docker's fields the OCI config type has no place for.
        let inner = c.entry("config").or_insert_with(|| json!({}));
        if let Some(inner) = inner.as_object_mut() {
            img.extras.write_into(inner);
        }
    }
    let jail = params::from_config_json(&config);
    if args.jail {
        if ctx.json {
            outln!("{}", params::to_json(&jail));
        } else {
            for p in &jail {
                outln!("{}", jail_line(p));
            }
        }
        return Ok(());
    }
    let out = json!({
        "name": args.image,
        "digest": img.manifest_digest.to_string(),
        "manifest": img.manifest,
        "config": config,
        "jailParameters": params::to_json(&jail),
        "firstStart": first_start(&img.config),
    });
    outln!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(Failure::internal)?
    );
    Ok(())
}

/// What the image's packages left for the jail's first start, from its
/// `org.jbuild.firstboot` label: `{"script", "commands": [{"package",
/// "script", "command", "reason"}], "omitted"}`, or null.
fn first_start(config: &oci_spec::image::ImageConfiguration) -> serde_json::Value {
    use jbuild::pkg::firstboot;
    let value = config
        .config()
        .as_ref()
        .and_then(|c| c.labels().as_ref())
        .and_then(|l| l.get(firstboot::LABEL));
    // The label as it is, once it reads as jbuild writes it.
    value
        .filter(|v| firstboot::from_label(v).is_some())
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// `allow.mlock  (org.freebsd.jail.allow.mlock=required)  create asks consent: ...`
fn jail_line(p: &ImageParam) -> String {
    let note = match &p.judgement {
        Judgement::Fine => String::new(),
        Judgement::Owned => "  jbuild create sets it".into(),
        Judgement::NeedsConsent(why) => {
            format!(
                "  create asks consent (--allow-jail-param {}): {why}",
                p.name()
            )
        }
        Judgement::Invalid(why) => format!("  refused: {why}"),
    };
    format!("{}  ({}={}){note}", p.shown(), p.label.label, p.label.raw)
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
    let desc = Ctx::resolve_image(&store, &args.source)?;
    // The type decides: a full index is the user's to fix (`rmi`).
    store.tag(&target, &desc).map_err(Failure::from)?;
    Ok(())
}

pub fn rmi(ctx: &Ctx, args: RmiArgs) -> CmdResult {
    let store = ctx.store()?;
    let jails = jbuild::snapshot::clones::jails_of(ctx.snapshotter()?.as_ref())
        .map_err(Failure::internal)?;
    let mut failed = Vec::new();
    let (mut removed_json, mut failed_json) = (Vec::new(), Vec::new());
    for removal in remove::remove(&store, &args.names, args.force, &jails) {
        match removal.outcome {
            Ok(removed) => {
                for r in removed {
                    match r {
                        Removed::Untagged { name, digest } if ctx.json => removed_json.push(
                            json!({"name": name, "digest": digest.to_string(), "what": "untagged"}),
                        ),
                        Removed::Unlisted { digest } if ctx.json => removed_json.push(
                            json!({"name": null, "digest": digest.to_string(), "what": "unlisted"}),
                        ),
                        Removed::Untagged { name, digest } if !ctx.quiet => {
                            outln!("untagged {name} ({digest})")
                        }
                        Removed::Unlisted { digest } if !ctx.quiet => {
                            outln!("removed unnamed image {digest}")
                        }
                        _ => {}
                    }
                }
            }
            Err(e) => {
                failed_json.push(json!({"name": removal.reference, "error": e.to_string()}));
                failed.push(e)
            }
        }
    }
    if ctx.json {
        outln!(
            "{}",
            json!({"event": "result", "removed": removed_json, "failed": failed_json})
        );
    }
    let user = failed.iter().all(|e| e.is_user_error());
    let mut failed = failed.into_iter();
    match (failed.next(), failed.len()) {
        (None, _) => Ok(()),
        (Some(one), 0) => Err(Failure {
            user,
            error: one.into(),
        }),
        (Some(first), _) => Err(Failure {
            user,
            error: anyhow!(
                "{}",
                std::iter::once(first)
                    .chain(failed)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }),
    }
}

pub fn prune(ctx: &Ctx, args: PruneArgs) -> CmdResult {
    let store = ctx.store()?;
    let sn = ctx.snapshotter()?;
    let summary = gc::prune(&store, sn.as_ref(), args.cache)?;
    let mounts = if args.cache {
        ctx.check_places(&["cache", "cache/mounts"])?;
        let dir = ctx.paths.mount_cache();
        jbuild::engine::mounts::clear_cache_mounts(&dir).map_err(|e| {
            Failure::internal(anyhow!("clearing cache mounts in {}: {e}", dir.display()))
        })?
    } else {
        0
    };
    let (packages, package_bytes) = if args.cache {
        ctx.check_places(&["cache"])?;
        let dir = ctx.paths.package_cache();
        if dir.exists() {
            ctx.check_places(&["cache/packages"])?;
        }
        jbuild::pkg::fetch::Cache::new(&dir).clear().map_err(|e| {
            Failure::internal(anyhow!("clearing the package cache {}: {e}", dir.display()))
        })?
    } else {
        (0, 0)
    };
    if ctx.json {
        outln!(
            "{}",
            json!({"snapshots_removed": summary.snapshots_removed, "blobs_removed": summary.blobs_removed.len(), "bytes_freed": summary.bytes_freed(), "partial_bytes_freed": summary.partial_bytes_removed, "cache_mounts_removed": mounts, "packages_removed": packages, "package_bytes_freed": package_bytes, "kept_for_jails": summary.kept_for_jails.iter().map(|(s, j)| json!({"snapshot": s, "jails": j})).collect::<Vec<_>>()})
        );
    } else if !ctx.quiet {
        for (snapshot, jails) in &summary.kept_for_jails {
            outln!(
                "kept layer {snapshot}: jail {} stands on it",
                jails.join(", ")
            );
        }
        outln!(
            "removed {} snapshots and {} blobs ({}){}",
            summary.snapshots_removed,
            summary.blobs_removed.len(),
            bytes(summary.bytes_freed()),
            if args.cache {
                format!(
                    ", {mounts} cache mounts and {packages} cached packages ({})",
                    bytes(package_bytes)
                )
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
        "mode": jbuild::exec::rootless::mode().describe(),
        "platform": Platform::default_for_host().to_string(),
        "freebsd_mirror": jbuild::release::ReleaseSource::new(&ctx.paths, &ctx.settings.freebsd).mirror,
        "pkg_cache": ctx.paths.pkg_cache(),
        "pkg_installer": pkg_installer(ctx),
        "package_cache": ctx.paths.package_cache(),
        "pkg_repositories": pkg_repositories(ctx),
        "pull_policy": pull_policy(ctx),
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

/// Who installs PKG steps' packages (`[pkg] installer`).
fn pkg_installer(ctx: &Ctx) -> String {
    let chosen =
        jbuild::engine::freebsd::PkgInstaller::from_setting(ctx.settings.pkg.installer.as_deref());
    match chosen {
        Ok(jbuild::engine::freebsd::PkgInstaller::Jbuild) => {
            "jbuild (its own installer, any host and architecture)".into()
        }
        Ok(jbuild::engine::freebsd::PkgInstaller::Pkg) => "pkg (pkg(8) in the build jail)".into(),
        Err(e) => format!("unusable: {e}"),
    }
}

/// The repository configurations PKG steps read without `--pkg-repos`:
/// the image's, with `[pkg] repos_dir`'s files in place of its
/// `/usr/local/etc/pkg/repos`, each named with its repositories.
fn pkg_repositories(ctx: &Ctx) -> String {
    let image = "the image's /etc/pkg/*.conf";
    let Some(dir) = &ctx.settings.pkg.repos_dir else {
        return format!("{image} and /usr/local/etc/pkg/repos/*.conf");
    };
    let mut files: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".conf"))
            .collect(),
        Err(e) => return format!("{image}, then {} (unreadable: {e})", dir.display()),
    };
    files.sort();
    format!("{image}, then {} ({})", dir.display(), files.join(", "))
}

/// The pull policy `pull`, `FROM` and `create` would use without
/// `--signature-policy`: where it comes from and its default requirements.
fn pull_policy(ctx: &Ctx) -> String {
    match jbuild::trust::policy::Policy::find(None, &ctx.settings) {
        Ok(Some(policy)) => {
            let default: Vec<&str> = policy.default.iter().map(|r| r.name()).collect();
            format!("{} (default: {})", policy.origin, default.join(", "))
        }
        Ok(None) => "none (every image is accepted)".to_string(),
        Err(e) => format!("unusable: {e}"),
    }
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

/// `jbuild inspect docker://REF`: the manifest (or index) and the image
/// configuration, and an index's platforms, as pretty JSON; `--raw`: the
/// manifest's bytes.
fn remote_inspect(
    r: RegistryRef,
    platform: &Option<String>,
    raw: bool,
    options: RegistryOptions,
) -> CmdResult {
    let want = platform
        .as_deref()
        .map(|p| Platform::parse(p).map_err(|e| Failure::user(anyhow!("--platform: {e}"))))
        .transpose()?;
    let name = r.name();
    let shown = format!("{name}{}", reference_suffix(&r));
    let t = RegistryTransport::new(r, options);
    let image = transport::block_on(t.inspect(want.as_ref())).map_err(Failure::from)?;
    if raw {
        out!("{}", String::from_utf8_lossy(&image.raw));
        return Ok(());
    }
    let platforms: Vec<_> = image
        .platforms
        .iter()
        .map(|(digest, p)| json!({"digest": digest, "platform": p.as_ref().map(|p| p.to_string())}))
        .collect();
    let out = json!({
        "name": shown,
        "digest": image.descriptor.digest().to_string(),
        "mediaType": image.descriptor.media_type().to_string(),
        "platforms": platforms,
        "manifestDigest": image.manifest.as_ref().map(|(d, _)| d.digest().to_string()),
        "manifest": image.manifest.as_ref().map(|(_, m)| m),
        "config": image.config,
        "jailParameters": image
            .config
            .as_ref()
            .map(|c| params::to_json(&params::from_config_json(c))),
    });
    outln!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(Failure::internal)?
    );
    Ok(())
}

/// `:tag` or `@digest`, as the reference has it.
fn reference_suffix(r: &RegistryRef) -> String {
    match (&r.tag, &r.digest) {
        (_, Some(d)) => format!("@{d}"),
        (Some(t), None) => format!(":{t}"),
        (None, None) => String::new(),
    }
}
