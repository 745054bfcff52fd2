//! Bastille templates on the command line: `jbuild convert` prints the
//! Jailfile a template translates to; `jbuild build DIR` builds a template
//! directly (see `build.rs`), with the same flags (`common::template`).

use std::path::PathBuf;

use clap::Args;

use super::common::template::{translate, TemplateArgs};
use super::{CmdResult, Ctx, Failure};

#[derive(Args, Debug)]
pub struct ConvertArgs {
    #[command(flatten)]
    template: TemplateArgs,
    /// Write the Jailfile here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The template directory (or its Bastillefile).
    #[arg(value_name = "DIR|FILE", default_value = ".")]
    path: PathBuf,
}

pub fn convert(ctx: &Ctx, a: ConvertArgs) -> CmdResult {
    let converted = translate(ctx, &a.path, &a.template, false)?;
    match &a.output {
        Some(out) => jbuild::fsutil::output::write_output(out, converted.jailfile.as_bytes())
            .map_err(|e| Failure::context(e, "--output: nothing written"))?,
        None => out!("{}", converted.jailfile),
    }
    if !ctx.quiet && !ctx.json {
        let mut needs: Vec<String> = converted
            .required
            .iter()
            .map(|n| format!("--build-arg {n}=VALUE "))
            .collect();
        if converted.base_from_arg {
            needs.insert(0, "--build-arg BASE=IMAGE ".into());
        }
        eprintln!(
            "build it with: jbuild build {}-f {} {}",
            needs.concat(),
            a.output
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "JAILFILE".into()),
            converted.context.display()
        );
    }
    Ok(())
}
