//! `jbuild sbom`: an image's bill of materials from its pkg database.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, ValueEnum};

use super::{CmdResult, Ctx, Failure};
use jbuild::image::Platform;
use jbuild::sbom::{self, Format};

#[derive(Args, Debug)]
#[command(after_help = "Lists every package pkg(8) installed in the image (its \
/var/db/pkg/local.sqlite: name, version, origin, licenses, checksum, dependencies) \
and the FreeBSD release /bin/freebsd-version names. Nothing is unpacked or run.\n\n\
Examples:\n  jbuild sbom web:1 > web.spdx.json\n  \
jbuild sbom --format cyclonedx --output web.cdx.json web:1")]
pub struct SbomArgs {
    /// Image name, digest or digest prefix.
    image: String,
    /// The document's format: SPDX 2.3 or CycloneDX 1.5, as JSON.
    #[arg(long, value_enum, default_value_t = FormatArg::Spdx)]
    format: FormatArg,
    /// Write the document here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Platform to pick from a multi-platform image.
    #[arg(long, value_name = "OS/ARCH")]
    platform: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Spdx,
    Cyclonedx,
}

pub fn run(ctx: &Ctx, args: SbomArgs) -> CmdResult {
    let platform = match &args.platform {
        Some(p) => Platform::parse(p).map_err(|e| Failure::user(anyhow!("--platform: {e}")))?,
        None => Platform::default_for_host(),
    };
    let format = match args.format {
        FormatArg::Spdx => Format::Spdx,
        FormatArg::Cyclonedx => Format::CycloneDx,
    };
    let store = ctx.store()?;
    let inv = sbom::inventory(&store, &args.image, &platform, &Default::default())
        .map_err(Failure::from)?;
    if !inv.has_database && !ctx.quiet {
        // The document is still right (the image, no packages), but an
        // empty list should not pass for "nothing installed" unseen.
        eprintln!(
            "note: {} has no pkg database (/var/db/pkg/local.sqlite): the SBOM lists the image \
             and no packages",
            args.image
        );
    }
    let doc = sbom::render(&inv, format).map_err(Failure::from)?;
    match &args.output {
        Some(path) => jbuild::fsutil::output::write_output(path, &doc)
            .map_err(|e| Failure::context(e, "--output: nothing written"))?,
        None => out!("{}", String::from_utf8_lossy(&doc)),
    }
    Ok(())
}
