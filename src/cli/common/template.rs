//! The flags a Bastille template takes, and its translation: shared by
//! `jbuild convert` and `jbuild build DIR` (a template directory).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;

use crate::cli::{Ctx, Failure};
use jbuild::bastille::{self, Converted, Options};
use jbuild::report::Level;

/// The flags a Bastille template needs: it has no FROM, and its ARGs come
/// from `--arg` and `--arg-file`, as with `bastille template`.
#[derive(Args, Debug, Clone, Default)]
pub struct TemplateArgs {
    /// Bastille templates: the base image (freebsd:<release>, a local image
    /// or a registry reference); it becomes the FROM.
    #[arg(long, value_name = "IMAGE")]
    pub from: Option<String>,
    /// Bastille templates: an ARG value, NAME=VALUE (may be repeated; wins
    /// over --arg-file and the template's default).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// Bastille templates: a file of NAME=VALUE lines for the template's ARGs.
    #[arg(long = "arg-file", value_name = "FILE")]
    pub arg_file: Option<PathBuf>,
    /// Bastille templates: where `INCLUDE category/template` looks after the
    /// templates directory of the including template, and before Bastille's
    /// configured one (bastille.conf's bastille_templatesdir).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
}

impl TemplateArgs {
    /// Whether any Bastille-only flag was given.
    pub fn any(&self) -> bool {
        self.from.is_some()
            || !self.args.is_empty()
            || self.arg_file.is_some()
            || self.templates.is_some()
    }

    fn options(&self, ctx: &Ctx, for_build: bool) -> Result<Options, Failure> {
        let mut args = BTreeMap::new();
        for a in &self.args {
            let Some((k, v)) = a.split_once('=') else {
                return Err(Failure::user(anyhow!("--arg `{a}`: use --arg NAME=VALUE")));
            };
            args.insert(k.to_string(), v.to_string());
        }
        Ok(Options {
            from: self.from.clone().unwrap_or_default(),
            args,
            arg_file: self.arg_file.clone(),
            templates: self.templates.clone(),
            templates_dir: ctx.settings.bastille.templates_dir.clone(),
            bastille_conf: None,
            leave_required: !for_build,
        })
    }
}

/// Translates the template at `path` and checks the result parses; notes
/// go to the reporter as warnings.
pub fn translate(
    ctx: &Ctx,
    path: &std::path::Path,
    t: &TemplateArgs,
    for_build: bool,
) -> Result<Converted, Failure> {
    let opts = t.options(ctx, for_build)?;
    if for_build && opts.from.is_empty() {
        return Err(Failure::user(anyhow!(
            "a Bastille template has no FROM: give the base image with --from (e.g. --from freebsd:14.3-RELEASE, or an image in the local store)"
        )));
    }
    let converted = bastille::convert(path, &opts)?;
    converted.load()?;
    let reporter = ctx.reporter();
    for n in &converted.notes {
        reporter.message(Level::Warn, n);
    }
    Ok(converted)
}
