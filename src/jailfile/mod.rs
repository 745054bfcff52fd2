//! The Jailfile language: parse (with spans), expand INCLUDEs, substitute
//! variables with Dockerfile's ARG/ENV scoping, and hand the planner a
//! [`resolved::Build`]. See `docs/jailfile.md` for the language itself.
//!
//! The pipeline, one file per stage of it:
//!
//! ```text
//! text ──lexer──▶ RawInstr ──parser──▶ Instruction (ast) ──resolve/ops──▶ Build
//!        (lines, continuations,         (flags, words,       (stages, scopes, INCLUDE,
//!         heredoc bodies)                key=value, JSON)     substitution, checks)
//! ```
//!
//! Helpers on the way: `line` (physical lines, for the lexer and
//! `heredoc`), `heredoc` (markers and bodies, for the lexer),
//! `forms` (flags, JSON arrays, word counts, for the parser), `words`
//! (arguments split at unquoted whitespace, for both), `subst`
//! (variable substitution), `include` (INCLUDE, for the resolver),
//! `validate` (image references, releases, ports, modes) and `suggest`
//! ("did you mean").
//!
//! Every character keeps its file, line and column (`text`), so any error
//! becomes a [`Diagnostic`] that shows the source line with a caret.

pub mod arg_file;
mod ast;
mod diagnostic;
mod forms;
mod heredoc;
mod include;
mod lexer;
mod line;
mod mounts;
mod ops;
mod parser;
mod pattern;
mod resolve;
pub mod resolved;
mod subst;
mod suggest;
mod text;
mod validate;
mod words;

use std::collections::BTreeMap;
use std::path::Path;

pub use diagnostic::Diagnostic;
pub use resolved::*;

/// Reads the Jailfile at `path`, expands INCLUDEs (paths relative to the
/// including file, files beneath the Jailfile's directory; cycles are an
/// error), parses and resolves it.
/// `build_args` are the `--build-arg` values.
pub fn load(path: &Path, build_args: &BTreeMap<String, String>) -> Result<Build, Diagnostic> {
    load_str(path, &read(path)?, build_args)
}

/// Reads a Jailfile's text, with the error a user should see when it
/// cannot be read.
pub fn read(path: &Path) -> Result<String, Diagnostic> {
    read_text(path).map_err(|e| {
        Diagnostic::for_file(
            path,
            format!("cannot read Jailfile `{}`: {}", path.display(), why(&e)),
        )
    })
}

/// Reads a Jailfile's text from `input` (standard input, for `-f -`),
/// bounded as a file is; `shown` names it in messages.
pub fn read_from(input: impl std::io::Read, shown: &Path) -> Result<String, Diagnostic> {
    read_bounded(input).map_err(|e| {
        Diagnostic::for_file(
            shown,
            format!(
                "cannot read the Jailfile from {}: {}",
                shown.display(),
                why(&e)
            ),
        )
    })
}

/// The recipe names a build context is searched for, in order, when no
/// `-f` names one: jbuild's own, then podman's and buildah's, then
/// docker's (as docker and podman look for theirs).
pub const RECIPE_NAMES: [&str; 3] = ["Jailfile", "Containerfile", "Dockerfile"];

/// The recipe in the context directory `dir`: the first of
/// [`RECIPE_NAMES`] that is there, or `None`.
pub fn find_recipe(dir: &Path) -> Option<std::path::PathBuf> {
    RECIPE_NAMES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.symlink_metadata().is_ok())
}

/// The most one Jailfile or included file may hold. Recipes are text of a
/// few KiB; this only stops `-f /dev/zero` or a mistyped path to a disk
/// image from filling memory.
pub const MAX_FILE: u64 = 4 << 20;

/// Reads a Jailfile or an included file as UTF-8, at most [`MAX_FILE`]
/// bytes (more is an error of kind `FileTooLarge`).
pub(crate) fn read_text(path: &Path) -> std::io::Result<String> {
    read_bounded(std::fs::File::open(path)?)
}

fn read_bounded(input: impl std::io::Read) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    input.take(MAX_FILE + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE {
        return Err(std::io::ErrorKind::FileTooLarge.into());
    }
    Ok(text)
}

/// Why a Jailfile or included file could not be read, in plain words.
pub(crate) fn why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
        std::io::ErrorKind::FileTooLarge => format!(
            "more than {} MiB; a Jailfile is a short text recipe: is this the right file?",
            MAX_FILE >> 20
        ),
        _ => e.to_string(),
    }
}

/// Like [`load`], with the text given; `path` names the file in messages
/// and is the base for relative INCLUDE paths. INCLUDE reads only beneath
/// `path`'s directory.
pub fn load_str(
    path: &Path,
    text: &str,
    build_args: &BTreeMap<String, String>,
) -> Result<Build, Diagnostic> {
    resolve::resolve(path, text, build_args, None)
}

/// What a build tells the resolver besides the recipe and `--build-arg`.
pub struct BuildInputs<'a> {
    /// INCLUDE reads beneath the build context too (a Jailfile given with
    /// `-f` from elsewhere may include the context's files).
    pub context: &'a Path,
    /// The ONBUILD triggers of FROM images.
    pub triggers: &'a dyn Triggers,
    /// The automatic platform arguments (`TARGETARCH`, `BUILDOS`, ...):
    /// global ARGs with these values, in a stage after `ARG NAME`.
    pub platform_args: BTreeMap<String, String>,
}

/// Where the resolver finds the ONBUILD triggers of an image a FROM
/// names: they run, as instructions of the new build, right after it.
pub trait Triggers {
    /// The image's triggers (its config's `OnBuild`), for the platform
    /// the FROM asks for (`--platform`, after substitution) or the
    /// build's. An image that cannot be read has none here: the planner
    /// reads it again and reports why.
    fn onbuild(&self, image: &str, platform: Option<&str>) -> Vec<String>;
}

/// Like [`load_str`], for a build (see [`BuildInputs`]).
pub fn load_for_build(
    path: &Path,
    text: &str,
    build_args: &BTreeMap<String, String>,
    inputs: &BuildInputs<'_>,
) -> Result<Build, Diagnostic> {
    resolve::resolve(path, text, build_args, Some(inputs))
}

/// The lines the instructions of `text` start on, and whether the whole
/// text was read (a lexing error, such as a heredoc without its end, stops
/// it): what `build --check` needs to skip an instruction it reported and
/// read on. Instruction `k` spans its start line up to the line before
/// the next one's start.
pub fn instruction_starts(text: &str) -> (Vec<u32>, bool) {
    let Ok(lexed) = lexer::lexer(0, text) else {
        return (Vec::new(), false);
    };
    let mut starts = Vec::new();
    for raw in lexed {
        match raw {
            Ok(raw) => starts.push(raw.keyword_span().pos.line),
            Err(_) => return (starts, false),
        }
    }
    (starts, true)
}
