//! Looking into a registry without pulling: `jbuild inspect docker://REF`
//! and `jbuild tags REPO`.

use anyhow::anyhow;
use clap::Args;
use jbuild::create::params;
use serde_json::json;

use super::access::RegistryArgs;
use super::registry::registry_ref;
use super::{CmdResult, Ctx, Failure};
use jbuild::image::Platform;
use jbuild::transport::{self, RegistryOptions, RegistryTransport};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild tags registry.lan:5000/jails/web\n  \
    jbuild tags --page-size 50 docker://ghcr.io/example/base")]
pub struct TagsArgs {
    /// The repository: `host[:port]/name` (also `docker://…`); `alpine`
    /// is `docker.io/library/alpine`.
    repository: String,
    /// Tags asked for per request (`?n=`); the registry's pages are
    /// followed to the end either way.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    page_size: Option<u32>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// `jbuild tags`: every tag of a repository, one per line (`--json`: one
/// object).
pub fn tags(ctx: &Ctx, a: TagsArgs) -> CmdResult {
    let raw = a
        .repository
        .strip_prefix("docker://")
        .unwrap_or(&a.repository);
    let r = registry_ref(raw)?;
    if r.digest.is_some()
        || raw
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'))
    {
        return Err(Failure::user(anyhow!(
            "`{raw}` names an image, not a repository: leave out the tag or digest \
             (jbuild tags {})",
            r.name()
        )));
    }
    let name = r.name();
    let t = RegistryTransport::new(r, a.registry.options(ctx)?);
    let tags = transport::block_on(t.list_tags(a.page_size)).map_err(Failure::from)?;
    if ctx.json {
        outln!("{}", json!({"repository": name, "tags": tags}));
    } else {
        for t in &tags {
            outln!("{t}");
        }
    }
    Ok(())
}

/// `jbuild inspect docker://REF`: the manifest (or index) and the image
/// configuration, and an index's platforms, as pretty JSON; `--raw`: the
/// manifest's bytes.
pub(super) fn inspect(
    reference: &str,
    platform: &Option<String>,
    raw: bool,
    options: RegistryOptions,
) -> CmdResult {
    let r = registry_ref(reference)?;
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
fn reference_suffix(r: &jbuild::transport::RegistryRef) -> String {
    match (&r.tag, &r.digest) {
        (_, Some(d)) => format!("@{d}"),
        (Some(t), None) => format!(":{t}"),
        (None, None) => String::new(),
    }
}
