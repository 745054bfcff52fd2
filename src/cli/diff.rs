//! `jbuild diff A B`: what changed between two images, each in the store
//! or in a registry (`docker://REF`).

use anyhow::anyhow;
use clap::{Args, ValueEnum};

use super::common::pulling::PullFlags;
use super::{CmdResult, Ctx, Failure};
use jbuild::compare::{self, Options, Sources};
use jbuild::image::Platform;
use jbuild::report::{PlainReporter, Reporter, SilentReporter};

#[derive(Args, Debug)]
#[command(
    after_help = "Files added (A), removed (D) and changed (C, with what changed: type, \
mode, owner, size, content, link target, device, flags) from image A to image B, read from \
their layers without unpacking either; then, when both have a pkg database, packages added \
(+), removed (-), upgraded (↑), downgraded (↓) or from another origin (~). Modification \
times and extended attributes are not compared.\n\n\
An image written `docker://REF` is read from the registry (through the pull policy, \
docs/policy.md) into the store's blobs for the comparison, not unpacked and not named, and \
taken away after it (blobs the store already held are not downloaded).\n\n\
Exit status, as diff(1): 0 the images are the same, 1 they differ, 2 trouble (an image not \
found, a damaged layer...).\n\n\
Examples:\n  jbuild diff base:14.1-p4 base:14.1-p5\n  \
jbuild diff --packages base:old base:new\n  jbuild diff --format json web:1 web:2 | jq .packages\n  \
jbuild diff web:1 docker://registry.example.org/web:2"
)]
pub struct DiffArgs {
    /// The image compared from: a name, digest or digest prefix in the
    /// store, or `docker://REF` in a registry.
    a: String,
    /// The image compared to.
    b: String,
    /// Only the packages (both images must have a pkg database).
    #[arg(long)]
    packages: bool,
    /// `table` (one line a change) or `json` (also the global --json).
    #[arg(long, value_enum, default_value_t = FormatArg::Table)]
    format: FormatArg,
    /// Platform to pick from multi-platform images.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
    /// How a `docker://` image is fetched.
    #[command(flatten)]
    pull: PullFlags,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    Table,
    Json,
}

/// The images differ: exit 1 after the differences were printed, with no
/// error message (they are the answer, not a failure).
#[derive(Debug, thiserror::Error)]
#[error("the images differ")]
pub struct Differ;

impl jbuild::blame::Blame for Differ {
    /// The answer to the user's question (exit 1, as diff(1)).
    fn is_user_error(&self) -> bool {
        true
    }
}

pub fn run(ctx: &Ctx, args: DiffArgs) -> CmdResult {
    let platform = match &args.platform {
        Some(p) => Platform::parse(p).map_err(|e| Failure::user(anyhow!("--platform: {e}")))?,
        None => Platform::default_for_host(),
    };
    let store = ctx.store()?;
    let options = Options {
        packages_only: args.packages,
    };
    let registry = args.pull.source(ctx, 4)?;
    let json = ctx.json || args.format == FormatArg::Json;
    // Standard output is the comparison's: a fetch's progress goes to
    // standard error, never as --json events.
    let reporter: Box<dyn Reporter> = match (ctx.quiet, json) {
        (true, _) => Box::new(SilentReporter),
        (false, true) => Box::new(PlainReporter::stderr()),
        (false, false) => ctx.reporter(),
    };
    let sources = Sources {
        store: &store,
        registry: Some(&registry),
        reporter: reporter.as_ref(),
    };
    let cmp =
        compare::images(&sources, &args.a, &args.b, &platform, options).map_err(Failure::from)?;
    drop(reporter);
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&cmp).map_err(Failure::internal)?
        );
    } else {
        out!("{}", cmp.table());
        if !ctx.quiet {
            for image in &cmp.without_database {
                eprintln!(
                    "note: {image} has no pkg database (/var/db/pkg/local.sqlite): packages \
                     are not compared"
                );
            }
        }
    }
    if cmp.differs() {
        return Err(Failure::from(Differ));
    }
    Ok(())
}
