//! Bastille templates as a front end: a template directory (a
//! `Bastillefile`, or the legacy per-hook files `PKG`, `SYSRC`, `CMD`, ...)
//! is translated into Jailfile text, which the ordinary Jailfile parser,
//! planner and build engine then take as they are. So a Bastille template
//! and the Jailfile `jbuild convert` prints for it build the same steps
//! with the same cache keys.
//!
//! What the translation follows is Bastille's own `template.sh` (the
//! `BastilleBSD/bastille` repository, `usr/local/share/bastille/template.sh`)
//! and its template documentation (`docs/chapters/templates/hooks.rst`):
//!
//! - blank lines and lines starting with `#` are skipped; the first word is
//!   the instruction (any case), the rest its arguments;
//! - `${NAME}` is replaced by the ARG's value in the whole argument text
//!   before anything else (a `sed` list in Bastille), then the words are
//!   split with sh(1) quoting (Bastille `eval`s the line);
//! - ARG values: `--arg NAME=VALUE`, then a `NAME=` line of `--arg-file`,
//!   then the default on the `ARG` line; `ARG+` must end up non-empty;
//! - CMD runs its text with `/bin/sh -c`; CP copies from the template
//!   directory like `cp -a`; OVERLAY copies a directory of the template
//!   onto `/`; RENDER replaces `${NAME}` in files inside the jail.
//!
//! Instructions that only mean something for a running jail are kept with
//! the image (MOUNT, RDR, LIMITS, CONFIG set, TAGS: labels, VOLUME, EXPOSE,
//! JAIL parameters) or dropped with a note (RESTART). A `SERVICE name
//! start` is carried instead: each later command step starts the service
//! first, as it would be running in Bastille's live jail
//! (`services::with_services`). `docs/bastille.md` has the whole mapping.

mod conf;
mod emit;
mod include;
mod runtime;
mod services;
mod source;
mod symbolic;
mod translate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::jailfile::{self, Build, Diagnostic};

pub use conf::{templates_dir as configured_templates_dir, BASTILLE_CONF};
pub use emit::Origin;

/// The per-hook files of Bastille before 0.7 (still read after the
/// Bastillefile, in this order, by `template.sh`).
pub const HOOK_FILES: &[&str] = &[
    "LIMITS", "INCLUDE", "PRE", "FSTAB", "PF", "PKG", "OVERLAY", "CONFIG", "SYSRC", "SERVICE",
    "CMD", "RENDER",
];

/// The Bastille template directory of Bastille's default layout.
pub const DEFAULT_TEMPLATES_DIR: &str = "/usr/local/bastille/templates";

/// How to translate a template.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The base image: what `FROM` the translation starts with
    /// (`freebsd:14.3-RELEASE`, a local image, a registry reference).
    /// Empty: the Jailfile takes it as `--build-arg BASE=...`.
    pub from: String,
    /// `--arg NAME=VALUE`, highest precedence.
    pub args: BTreeMap<String, String>,
    /// `--arg-file FILE`: `NAME=VALUE` lines.
    pub arg_file: Option<PathBuf>,
    /// `--templates DIR`: where `INCLUDE category/template` looks after
    /// the templates directory of the including template.
    pub templates: Option<PathBuf>,
    /// Bastille's configured templates directory, looked in last
    /// (`[bastille] templates_dir`). `None`: `bastille_templatesdir` of
    /// `bastille_conf`.
    pub templates_dir: Option<PathBuf>,
    /// Bastille's configuration file (`None`: [`BASTILLE_CONF`]).
    pub bastille_conf: Option<PathBuf>,
    /// An `ARG+` given no value is left for the Jailfile's `--build-arg`
    /// (`jbuild convert`) instead of refused (a build of the template).
    pub leave_required: bool,
}

impl Options {
    /// Bastille's configured templates directory.
    pub fn configured_templates_dir(&self) -> PathBuf {
        match &self.templates_dir {
            Some(d) => d.clone(),
            None => conf::templates_dir(
                self.bastille_conf
                    .as_deref()
                    .unwrap_or(Path::new(BASTILLE_CONF)),
            ),
        }
    }
}

/// A template translated into a Jailfile.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The Jailfile text.
    pub jailfile: String,
    /// The build context the Jailfile's COPY sources are relative to: the
    /// template directory, or the common ancestor of it and the templates
    /// it INCLUDEs.
    pub context: PathBuf,
    /// What was dropped or needs attention, as `path:line: message`.
    pub notes: Vec<String>,
    /// The name the Jailfile goes by in messages and history.
    pub path: PathBuf,
    /// No `--from` was given: the Jailfile starts `ARG BASE` / `FROM ${BASE}`.
    pub base_from_arg: bool,
    /// `ARG+` names given no value: the Jailfile needs `--build-arg NAME=...`.
    pub required: Vec<String>,
    origins: Vec<Origin>,
}

/// Whether `dir` looks like a Bastille template (a Bastillefile, or one of
/// the legacy hook files) rather than a Jailfile build context.
pub fn is_template(dir: &Path) -> bool {
    dir.join("Bastillefile").is_file() || HOOK_FILES.iter().any(|h| dir.join(h).is_file())
}

/// Translates the template at `path`: its directory, or a Bastillefile
/// (any name; its directory is the template's).
pub fn convert(path: &Path, opts: &Options) -> Result<Converted, Diagnostic> {
    let (dir, file) = if path.is_file() {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        (parent, Some(path))
    } else {
        (path.to_path_buf(), None)
    };
    if !dir.is_dir() {
        return Err(Diagnostic::for_file(
            path,
            format!("no Bastille template at `{}`", path.display()),
        ));
    }
    if file.is_none() && !is_template(&dir) {
        return Err(source::with_help(
            Diagnostic::for_file(
                &dir,
                format!(
                    "`{}` has no Bastillefile (nor legacy hook files such as PKG or CMD)",
                    dir.display()
                ),
            ),
            "give the template's directory, the one holding its Bastillefile",
        ));
    }
    translate::run(&dir, file, opts)
}

impl Converted {
    /// Parses the translation with the Jailfile parser. An error there
    /// (e.g. a port out of range) is shown at the Bastillefile line it
    /// came from.
    pub fn load(&self) -> Result<Build, Diagnostic> {
        let mut args = BTreeMap::new();
        if self.base_from_arg {
            // Only to check the rest parses; a build gives the real base.
            args.insert("BASE".to_string(), "scratch".to_string());
        }
        for name in &self.required {
            args.insert(name.clone(), format!("{name}-value"));
        }
        jailfile::load_str(&self.path, &self.jailfile, &args).map_err(|d| self.locate(d))
    }

    /// `path:line` of the Bastille instruction that line `line` (1-based)
    /// of the translation came from.
    pub fn origin(&self, line: u32) -> Option<String> {
        match self.origins.get((line as usize).checked_sub(1)?)? {
            Origin::Line(l) => Some(l.at()),
            _ => None,
        }
    }

    /// Points a diagnostic about the translation at its origin.
    pub fn locate(&self, d: Diagnostic) -> Diagnostic {
        if d.file != self.path || d.line == 0 {
            return d;
        }
        let translated = d.source_line.trim().to_string();
        match self.origins.get(d.line as usize - 1) {
            Some(Origin::Line(l)) => {
                let mut out = l.error_at(l.cmd_col, l.text.chars().count() as u32, d.message);
                out.help = Some(match d.help {
                    Some(h) => format!("{h} (translated to `{translated}`)"),
                    None => format!("translated to `{translated}`"),
                });
                out
            }
            Some(Origin::From) => Diagnostic {
                message: format!("--from: {}", d.message),
                ..d
            },
            _ => d,
        }
    }
}

#[cfg(test)]
mod tests;
