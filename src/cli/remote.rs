//! Looking into a registry without pulling: `jbuild tags REPO` (and
//! `jbuild inspect docker://REF`, in `images.rs` with `inspect`).

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::common::access::RegistryArgs;
use super::{CmdResult, Ctx, Failure};
use jbuild::transport::{self, Location, RegistryTransport};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild tags registry.lan:5000/jails/web\n  \
    jbuild tags --page-size 50 docker://ghcr.io/example/base")]
pub struct TagsArgs {
    /// The repository: `host[:port]/name` (also `docker://…`); `alpine`
    /// is `docker.io/library/alpine`.
    repository: Location,
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
    let location = a
        .repository
        .clone()
        .registry_named()
        .map_err(Failure::from)?;
    let (Location::Registry(name), Some(r)) = (&location, location.registry_ref()) else {
        return Err(Failure::user(anyhow!(
            "{location} is not a registry repository: name one as host[:port]/name"
        )));
    };
    if name.has_tag() || name.digest().is_some() {
        return Err(Failure::user(anyhow!(
            "`{name}` names an image, not a repository: leave out the tag or digest \
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
