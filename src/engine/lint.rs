//! `jbuild build --check`: the recipe parsed, resolved and planned, and
//! every check a build makes before its first step (jail parameters, steps
//! a host cannot run, required secrets) made, with no step run; what would
//! stop the build reported as an error at its file, line and column, and
//! constructs that work but surprise as warnings:
//!
//! - the resolver's own (a deprecated MAINTAINER, an ARG whose name looks
//!   like a secret's: BuildKit's `SecretsUsedInArgOrEnv`);
//! - `RunPkgInstall`: a RUN that only installs packages, which `PKG` does
//!   on any host (the PKG line is given);
//! - `CopyAllWithoutIgnore`: a `COPY .` (or ADD) of the whole context when
//!   the context has no ignore file, so `.git` and build output go in.
//!
//! Planning asks what a build asks (FROM images, pulled if missing; the
//! context's digests; a git ref's commit; an unchecked URL's content), so
//! `--check` finds every mistake the build would find before a step runs.
//!
//! Every mistake, not only the first: an instruction the build would stop
//! at (it does not parse, does not resolve, or planning refuses it) is
//! reported, then read as a blank (its lines emptied, so every other
//! place keeps its line and column) and the recipe is checked again, up
//! to [`MAX_ERRORS`] errors. What cannot be skipped that way ends the
//! search: a FROM (the stage's instructions would all fail after it), an
//! error in an INCLUDEd file or with no place, an instruction that cannot
//! be told apart (a heredoc without its end).

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;

use super::env::{BuildEnv, BuildOptions};
use super::error::BuildError;
use super::native::Ignore;
use crate::exec::Stream;
use crate::jailfile::{self, AddSource, Build, CopyOp, CopySource, Location, Op};
use crate::report::{Level, Reporter, StepInfo, StepResult};

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The build would stop here.
    Error,
    /// Works, but will surprise.
    Warning,
}

/// One problem `--check` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub severity: Severity,
    /// A short name for the kind of problem (`RunPkgInstall`), or `error`.
    pub code: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
}

impl Problem {
    fn at(severity: Severity, code: &str, location: Option<&Location>, message: String) -> Self {
        Problem {
            severity,
            code: code.to_string(),
            file: location.map(|l| l.file.display().to_string()),
            line: location.map(|l| l.line),
            column: location.map(|l| l.column),
            message,
        }
    }

    /// `file:line:col: severity: message`, as compilers print.
    pub fn line(&self) -> String {
        let at = match (&self.file, self.line, self.column) {
            (Some(f), Some(l), Some(c)) => format!("{f}:{l}:{c}: "),
            (Some(f), _, _) => format!("{f}: "),
            _ => String::new(),
        };
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        format!("{at}{severity}: {}", self.message)
    }
}

/// The most errors one check reports.
pub const MAX_ERRORS: usize = 100;

/// Checks the recipe `opts` names (its text `text` when given) as
/// `jbuild build --check` does: every problem found, errors first in the
/// order a build meets them. Nothing runs and nothing is stored, but what
/// planning fetches (FROM images, ADD's git mirrors and unchecked URLs).
pub fn check_recipe(env: &BuildEnv<'_>, opts: &BuildOptions, text: Option<&str>) -> Vec<Problem> {
    let text = match text {
        Some(t) => t.to_string(),
        None => match jailfile::read(&opts.jailfile) {
            Ok(t) => t,
            Err(d) => return vec![diagnostic(&d)],
        },
    };
    // The build's own reading, planning and checks, again after each error
    // with its instruction blanked; their warnings are the reporter's (the
    // resolver's come through it).
    // Each message once, however often the recipe is read again.
    let once = Once {
        inner: env.reporter,
        said: Default::default(),
    };
    let env = &BuildEnv {
        reporter: &once,
        executor: Default::default(),
        freebsd: env.freebsd.clone(),
        layer_policy: env.layer_policy.clone(),
        registry_cache: None,
        add: env.add.clone(),
        ..*env
    };
    let (mut problems, text) = match super::fetch::FetchPhase::new(env) {
        Ok(fetch) => errors(opts, &text, |t| super::run::check_text(&fetch, opts, t)),
        Err(e) => (vec![error(&e)], text),
    };
    for p in &mut problems {
        // An error about the recipe as a whole (`--target`) names it.
        if p.file.is_none() {
            p.file = Some(opts.jailfile.display().to_string());
        }
    }
    // The recipe without any FROM image's ONBUILD triggers: what the lints
    // read (a trigger is the base image's, not this recipe's).
    struct NoTriggers;
    impl jailfile::Triggers for NoTriggers {
        fn onbuild(&self, _: &str, _: Option<&str>) -> Vec<String> {
            Vec::new()
        }
    }
    let bare = jailfile::load_for_build(
        &opts.jailfile,
        &text,
        &opts.build_args,
        &jailfile::BuildInputs {
            context: &opts.context,
            triggers: &NoTriggers,
            platform_args: super::platform_args::predefined(opts.platform.as_ref()),
        },
    );
    if let Ok(build) = &bare {
        problems.extend(build.warnings.iter().map(|w| resolver_warning(w)));
        let ignore = Ignore::load_for(&opts.context, &opts.jailfile)
            .ok()
            .flatten();
        problems.extend(lints(build, ignore.is_some()));
    }
    problems
}

/// A reporter that passes each message on once.
struct Once<'a> {
    inner: &'a dyn Reporter,
    said: std::sync::Mutex<BTreeSet<String>>,
}

impl Reporter for Once<'_> {
    fn step_start(&self, step: &StepInfo) {
        self.inner.step_start(step)
    }
    fn step_output(&self, step: &StepInfo, stream: Stream, line: &[u8]) {
        self.inner.step_output(step, stream, line)
    }
    fn step_done(&self, step: &StepInfo, result: StepResult, elapsed: Duration) {
        self.inner.step_done(step, result, elapsed)
    }
    fn transfer_start(&self, id: &str, what: &str, total: Option<u64>) {
        self.inner.transfer_start(id, what, total)
    }
    fn transfer_progress(&self, id: &str, done: u64) {
        self.inner.transfer_progress(id, done)
    }
    fn transfer_done(&self, id: &str, skipped: bool) {
        self.inner.transfer_done(id, skipped)
    }
    fn message(&self, level: Level, text: &str) {
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        if said.insert(text.to_string()) {
            self.inner.message(level, text)
        }
    }
    fn export_start(&self, id: &str, what: &str, differ: &str) {
        self.inner.export_start(id, what, differ)
    }
}

/// Every error `check` finds in `text`: each one's instruction blanked and
/// `check` asked again (see the module's documentation). The errors in
/// the order found, and the text with their instructions blanked.
fn errors(
    opts: &BuildOptions,
    text: &str,
    check: impl Fn(&str) -> Result<(), BuildError>,
) -> (Vec<Problem>, String) {
    let (starts, whole) = jailfile::instruction_starts(text);
    let file = opts.jailfile.display().to_string();
    let mut lines: Vec<&str> = text.split('\n').collect();
    let mut found = Vec::new();
    let mut skipped = BTreeSet::new();
    while let Err(e) = check(&lines.join("\n")) {
        let p = error(&e);
        let line = p.line.filter(|_| p.file.as_deref() == Some(file.as_str()));
        found.push(p);
        let Some(line) = line else { break };
        // The instruction the error is in: the last to start at or before it.
        let Some(k) = starts.iter().rposition(|&s| s <= line) else {
            break;
        };
        let start = starts[k];
        let end = match starts.get(k + 1) {
            Some(next) => next - 1,
            None if whole => lines.len() as u32,
            None => break,
        };
        let keyword = lines
            .get(start as usize - 1)
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default();
        if keyword.eq_ignore_ascii_case("FROM")
            || !skipped.insert(start)
            || found.len() >= MAX_ERRORS
        {
            break;
        }
        for l in start..=end.min(lines.len() as u32) {
            lines[l as usize - 1] = "";
        }
    }
    (found, lines.join("\n"))
}

/// A warning of the resolver (`FILE:LINE:COL: Code: message`) as a
/// problem.
fn resolver_warning(w: &str) -> Problem {
    let mut p = Problem::at(Severity::Warning, "warning", None, w.to_string());
    let Some((at, rest)) = w.split_once(": ") else {
        return p;
    };
    let mut parts = at.rsplitn(3, ':');
    let (col, line, file) = (parts.next(), parts.next(), parts.next());
    if let (Some(c), Some(l), Some(f)) = (col, line, file) {
        if let (Ok(c), Ok(l)) = (c.parse(), l.parse()) {
            let (code, message) = rest.split_once(": ").unwrap_or(("warning", rest));
            p.file = Some(f.to_string());
            p.line = Some(l);
            p.column = Some(c);
            p.code = code.to_string();
            p.message = message.to_string();
        }
    }
    p
}

fn diagnostic(d: &jailfile::Diagnostic) -> Problem {
    let message = match &d.help {
        Some(h) => format!("{} (help: {h})", d.message),
        None => d.message.clone(),
    };
    Problem {
        severity: Severity::Error,
        code: "error".into(),
        file: Some(d.file.display().to_string()),
        line: (d.line > 0).then_some(d.line),
        column: (d.line > 0).then_some(d.column),
        message,
    }
}

/// The error a build would stop with, at its place in the recipe.
fn error(e: &BuildError) -> Problem {
    match e {
        BuildError::Jailfile(d) => diagnostic(d),
        BuildError::Located(at) => {
            let what = at
                .step
                .as_deref()
                .map(|s| format!("`{s}`: "))
                .unwrap_or_default();
            Problem::at(
                Severity::Error,
                "error",
                Some(&at.location),
                format!("{what}{}", crate::report::error_chain(&at.error)),
            )
        }
        BuildError::Plan(p) => Problem::at(
            Severity::Error,
            "error",
            Some(&p.location),
            crate::report::error_chain(&p.kind),
        ),
        other => Problem::at(
            Severity::Error,
            "error",
            None,
            crate::report::error_chain(other),
        ),
    }
}

/// The warnings of a resolved recipe (see the module's documentation).
fn lints(build: &Build, has_ignore_file: bool) -> Vec<Problem> {
    let mut out = Vec::new();
    for stage in &build.stages {
        for step in &stage.steps {
            match &step.op {
                Op::Run { command, .. } => {
                    if let Some(pkg) = super::foreign::pkg_line(command) {
                        out.push(Problem::at(
                            Severity::Warning,
                            "RunPkgInstall",
                            Some(&step.location),
                            format!("`{}` only installs packages: write `{pkg}`, which installs them on any host and for any architecture, with a package cache that never reaches the layer", step.text.lines().next().unwrap_or_default()),
                        ));
                    }
                }
                Op::Copy(CopyOp {
                    from: None,
                    sources,
                    ..
                }) if !has_ignore_file && sources.iter().any(whole_context) => {
                    out.push(copy_all(&step.location, "COPY"));
                }
                Op::Add { sources, .. }
                    if !has_ignore_file
                        && sources
                            .iter()
                            .any(|s| matches!(s, AddSource::Context(c) if whole_context(c))) =>
                {
                    out.push(copy_all(&step.location, "ADD"));
                }
                _ => {}
            }
        }
    }
    out
}

fn whole_context(source: &CopySource) -> bool {
    matches!(source, CopySource::Path(p) if matches!(p.trim_end_matches('/'), "" | "." | "./."))
}

fn copy_all(location: &Location, keyword: &str) -> Problem {
    Problem::at(
        Severity::Warning,
        "CopyAllWithoutIgnore",
        Some(location),
        format!("`{keyword} .` copies the whole build context, and it has no ignore file: its .git, build output and any secrets in it go into the image; add a .jailignore (or .dockerignore) listing what to leave out"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::Path;

    fn lint(text: &str, ignore: bool) -> Vec<(String, u32)> {
        let build = jailfile::load_str(Path::new("Jailfile"), text, &BTreeMap::new()).unwrap();
        lints(&build, ignore)
            .into_iter()
            .map(|p| (p.code, p.line.unwrap()))
            .collect()
    }

    #[test]
    fn warns_of_pkg_installs_and_whole_context_copies() {
        let text = "FROM scratch\nRUN pkg install -y nginx && pkg clean -ay\nRUN make\nCOPY . /src/\nCOPY ./ /x/\nCOPY a /y/\nADD . /z/\n";
        assert_eq!(
            lint(text, false),
            [
                ("RunPkgInstall".to_string(), 2),
                ("CopyAllWithoutIgnore".to_string(), 4),
                ("CopyAllWithoutIgnore".to_string(), 5),
                ("CopyAllWithoutIgnore".to_string(), 7),
            ]
        );
        assert_eq!(lint(text, true), [("RunPkgInstall".to_string(), 2)]);
    }
}
