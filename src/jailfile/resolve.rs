//! From instructions to a [`Build`]: stages, variable scopes, INCLUDE.
//!
//! Scoping follows Dockerfile's rules:
//!
//! - an ARG before the first FROM is *global*: usable in FROM lines, and
//!   inside a stage only after `ARG NAME` (without a value) re-declares it;
//! - an ARG inside a stage is in scope from its line to the end of the stage;
//! - `--build-arg NAME=value` overrides an ARG's default wherever NAME is
//!   declared;
//! - ENV is in scope from its line on, wins over an ARG of the same name,
//!   and is inherited by a stage built `FROM` an earlier stage.
//!
//! The per-instruction work (turning an [`Instruction`] into a [`Step`](super::resolved::Step))
//! lives in `ops.rs`; this file keeps the state it works on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::fsutil::input::Beneath;

use super::ast::{Body, Instruction, Keyword};
use super::diagnostic::{Diagnostic, Error, Result, Sources};
use super::resolved::{Base, Build, Location, Stage};
use super::text::{FileId, Span, Text};
use super::{include, lexer, parser, subst, suggest, validate};

/// The most instructions one load resolves, the Jailfile's and its
/// INCLUDEs' together. A recipe of real work has a few hundred; each
/// instruction costs far more to hold resolved (and planned) than its
/// line of text, so this, not the 16 MiB of text, is what bounds the
/// memory a recipe of many short lines takes.
pub(crate) const MAX_INSTRUCTIONS: usize = 10_000;

/// The variables of the stage being resolved.
#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    /// ARGs declared in this stage; `None` when declared without a value.
    pub args: BTreeMap<String, Option<String>>,
    pub env: BTreeMap<String, String>,
    /// Always absolute and normalised.
    pub workdir: String,
}

impl Scope {
    pub fn lookup(&self, name: &str) -> Option<String> {
        self.env
            .get(name)
            .cloned()
            .or_else(|| self.args.get(name).cloned().flatten())
    }
}

/// A name that may refer to a stage defined later; checked at the end.
struct Pending {
    name: String,
    span: Span,
    /// A COPY --from that looks like a stage name must be one; a FROM
    /// image that is not a later stage is simply an image.
    must_be_stage: bool,
}

pub(super) struct Resolver<'a> {
    pub sources: Sources,
    pub build_args: &'a BTreeMap<String, String>,
    pub used_args: BTreeSet<String>,
    pub globals: BTreeMap<String, Option<String>>,
    pub stages: Vec<Stage>,
    /// One per stage, parallel to `stages`; the last is the current one.
    pub scopes: Vec<Scope>,
    /// Files being included (identity, as shown), outermost first.
    pub includes: Vec<(PathBuf, PathBuf)>,
    /// Where INCLUDE may read: the Jailfile's directory and the context.
    beneath: Beneath,
    /// What substitution may still produce in this load.
    pub budget: subst::Budget,
    pending: Vec<Pending>,
    seen_instruction: bool,
    /// Instructions resolved so far (see [`MAX_INSTRUCTIONS`]).
    instructions: usize,
    /// Stands in for the scope before the first FROM.
    pub no_scope: Scope,
    /// See [`Build::warnings`].
    pub warnings: Vec<String>,
    triggers: Option<&'a dyn super::Triggers>,
}

/// Reads, parses and resolves `text` (the contents of `path`); INCLUDE
/// reads beneath `path`'s directory and `context`.
pub(crate) fn resolve(
    path: &Path,
    text: &str,
    build_args: &BTreeMap<String, String>,
    inputs: Option<&super::BuildInputs<'_>>,
) -> Result<Build, Diagnostic> {
    let context = inputs.map(|i| i.context);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut r = Resolver {
        sources: Sources::default(),
        build_args,
        used_args: BTreeSet::new(),
        globals: BTreeMap::new(),
        stages: Vec::new(),
        scopes: Vec::new(),
        includes: vec![(include::identity(path), path.to_path_buf())],
        beneath: Beneath::new(std::iter::once(dir).chain(context)),
        budget: subst::Budget::default(),
        pending: Vec::new(),
        seen_instruction: false,
        instructions: 0,
        no_scope: Scope::default(),
        warnings: Vec::new(),
        triggers: inputs.map(|i| i.triggers),
    };
    for (name, value) in inputs.iter().flat_map(|i| &i.platform_args) {
        r.globals.insert(name.clone(), Some(value.clone()));
    }
    let root = r.sources.add(path.to_path_buf(), text.to_string());
    let result = r.file(root, None).and_then(|()| r.finish(root));
    result.map_err(|e| r.sources.diagnostic(e))
}

impl Resolver<'_> {
    /// Resolves file `id`'s instructions, read one at a time. For an
    /// included file, `include` is the INCLUDE's path: until the file's
    /// first instruction turns out to be one jbuild knows, an error in it
    /// points there and quotes nothing of the file (it may be no recipe at
    /// all: `INCLUDE .env` must not print a line of it).
    fn file(&mut self, id: FileId, include: Option<&Text>) -> Result<()> {
        let text = self.sources.shared_text(id);
        let shown = self.sources.path(id);
        let not_a_recipe = |include: &Text| {
            Error::new(
                include.span(),
                format!(
                    "`{}` is not a Jailfile: it does not start with an instruction jbuild knows \
                     (its text is not shown)",
                    shown.display()
                ),
            )
            .with_help("INCLUDE names a file of Jailfile instructions: check the path")
        };
        let mut unproven = include;
        let lexed = lexer::lexer(id, &text);
        let lexed = match (lexed, unproven) {
            (Err(_), Some(inc)) => return Err(not_a_recipe(inc)),
            (l, _) => l?,
        };
        for raw in lexed {
            let raw = match (raw, unproven) {
                (Err(_), Some(inc)) => return Err(not_a_recipe(inc)),
                (r, _) => r?,
            };
            if let Some(inc) = unproven.take() {
                if Keyword::lookup(&raw.keyword.as_string()).is_none() {
                    return Err(not_a_recipe(inc));
                }
            }
            self.seen_instruction = true;
            self.instructions += 1;
            if self.instructions > MAX_INSTRUCTIONS {
                return Err(Error::new(
                    raw.keyword_span(),
                    format!(
                        "the recipe holds more than {MAX_INSTRUCTIONS} instructions (the Jailfile and its INCLUDEs together), the most one build reads"
                    ),
                )
                .with_help("a recipe of real work has a few hundred: is a file included over and over, or made by a loop?"));
            }
            let ins = parser::parse(raw)?;
            self.instruction(ins)?;
        }
        Ok(())
    }

    fn instruction(&mut self, ins: Instruction) -> Result<()> {
        match &ins.body {
            Body::Include(path) => self.include(path, ins.escape),
            Body::From { .. } => self.from(&ins),
            Body::Arg(decls) if self.scopes.is_empty() => {
                for (name, default) in decls {
                    self.warn_secret_arg(name);
                    let name = name.as_string();
                    let value = match self.build_arg(&name) {
                        Some(v) => Some(v),
                        None => match default {
                            Some(d) => Some(
                                subst::word(
                                    d,
                                    ins.escape,
                                    &|n| self.globals.get(n).cloned().flatten(),
                                    &self.budget,
                                )?
                                .value,
                            ),
                            // An automatic platform argument keeps its value.
                            None => self.globals.get(&name).cloned().flatten(),
                        },
                    };
                    self.globals.insert(name, value);
                }
                Ok(())
            }
            _ if self.scopes.is_empty() => Err(Error::new(
                ins.span(),
                format!(
                    "{} comes before the first FROM; only ARG may",
                    ins.keyword.name()
                ),
            )
            .with_help("start the Jailfile with FROM, e.g. `FROM freebsd:14.2-RELEASE`")),
            _ => {
                if let Some(step) = self.step(&ins)? {
                    if let Some(stage) = self.stages.last_mut() {
                        stage.steps.push(std::sync::Arc::new(step));
                    }
                }
                Ok(())
            }
        }
    }

    /// INCLUDE: the named file's instructions, resolved where it stands.
    fn include(&mut self, path: &Text, escape: char) -> Result<()> {
        let rel = subst::word(path, escape, &|n| self.lookup(n), &self.budget)?.value;
        let included = include::open(path, &rel, &mut self.sources, &self.includes, &self.beneath)?;
        self.includes.push((included.identity, included.path));
        self.file(included.file, Some(path))?;
        self.includes.pop();
        Ok(())
    }

    /// The `--build-arg` value for `name`, noting that it was used.
    pub(super) fn build_arg(&mut self, name: &str) -> Option<String> {
        let v = self.build_args.get(name).cloned();
        if v.is_some() {
            self.used_args.insert(name.to_string());
        }
        v
    }

    /// BuildKit's `SecretsUsedInArgOrEnv`, for an ARG: a name that looks
    /// like a secret's ([`validate::looks_secret`]) is warned about, since
    /// an ARG's value stays in the image's history.
    pub(super) fn warn_secret_arg(&mut self, name: &Text) {
        let n = name.as_string();
        if validate::looks_secret(&n) {
            let loc = self.location(name.span());
            self.warnings.push(format!(
                "{loc}: SecretsUsedInArgOrEnv: ARG `{n}` looks like it holds a secret, and an ARG's value is kept in the image's history; give secrets with `RUN --mount=type=secret,id=...` and `build --secret`"
            ));
        }
    }

    pub(super) fn location(&self, span: Span) -> Location {
        Location {
            file: self.sources.path(span.pos.file),
            line: span.pos.line,
            column: span.pos.col,
        }
    }

    /// Looks `name` up in the current scope (or the globals before FROM).
    pub(super) fn lookup(&self, name: &str) -> Option<String> {
        match self.scopes.last() {
            Some(scope) => scope.lookup(name),
            None => self.globals.get(name).cloned().flatten(),
        }
    }

    fn from(&mut self, ins: &Instruction) -> Result<()> {
        let Body::From {
            platform,
            image,
            alias,
        } = &ins.body
        else {
            return Ok(());
        };
        let esc = ins.escape;
        let globals = &self.globals;
        let lookup = |n: &str| globals.get(n).cloned().flatten();
        let budget = &self.budget;
        let from_text = format!(
            "FROM {}",
            subst::raw(&ins.args, esc, &lookup, budget)?.value
        );
        let platform = match platform {
            Some(p) => {
                let v = subst::word(p, esc, &lookup, budget)?.value;
                validate::platform(&v).map_err(|(m, h)| Error::new(p.span(), m).with_help(h))?;
                Some(v)
            }
            None => None,
        };
        let name = match alias {
            Some(a) => Some(self.stage_name(a)?),
            None => None,
        };
        let image_ref = subst::word(image, esc, &lookup, budget)?.value;
        let base = self.base(&image_ref, image, name.as_deref())?;
        let scope = match base {
            Base::Stage(i) => self
                .scopes
                .get(i)
                .map(|s| Scope {
                    args: BTreeMap::new(),
                    ..s.clone()
                })
                .unwrap_or_default(),
            _ => Scope {
                workdir: "/".into(),
                ..Scope::default()
            },
        };
        self.scopes.push(scope);
        // An image's triggers, or an earlier stage's own ONBUILDs: BuildKit
        // runs those as if that stage were built into an image first.
        let (triggers, of) = match (&base, self.triggers) {
            (Base::Image(reference), Some(t)) => {
                (t.onbuild(reference, platform.as_deref()), image_ref.clone())
            }
            (Base::Stage(i), _) => {
                let own = self.stages.get(*i).map(|s| {
                    s.steps
                        .iter()
                        .filter_map(|step| match &step.op {
                            super::resolved::Op::Onbuild(t) => Some(t.clone()),
                            _ => None,
                        })
                        .collect()
                });
                (own.unwrap_or_default(), format!("stage {image_ref}"))
            }
            _ => (Vec::new(), String::new()),
        };
        self.stages.push(Stage {
            index: self.stages.len(),
            name,
            base,
            platform,
            location: self.location(ins.span()),
            from_text,
            steps: Vec::new(),
        });
        for trigger in triggers {
            self.trigger(&of, &trigger, ins.span())?;
        }
        Ok(())
    }

    /// One ONBUILD trigger of the FROM image (or stage) `image`, resolved
    /// here as an instruction of this stage (Docker runs them right after
    /// FROM).
    /// Its text is the image's: a file of its own in messages, and held
    /// to what ONBUILD accepts, whatever made the image.
    fn trigger(&mut self, image: &str, trigger: &str, from: Span) -> Result<()> {
        let shown = PathBuf::from(format!("ONBUILD of {image}"));
        let id = self.sources.add(shown, trigger.to_string());
        let text = self.sources.shared_text(id);
        for (n, raw) in lexer::lexer(id, &text)?.enumerate() {
            let raw = raw?;
            if n > 0 {
                // Docker reads a trigger as one line; another tool's image
                // may hold anything.
                return Err(Error::new(
                    from,
                    format!("`{image}` has an ONBUILD trigger of more than one instruction"),
                )
                .with_help("an ONBUILD trigger is one instruction; build FROM another image"));
            }
            let upper = raw.keyword_upper();
            if matches!(
                upper.as_str(),
                "ONBUILD" | "FROM" | "MAINTAINER" | "INCLUDE"
            ) {
                return Err(Error::new(
                    from,
                    format!("`{image}` has an ONBUILD trigger jbuild refuses: `{upper}`"),
                )
                .with_help("ONBUILD triggers may not be ONBUILD, FROM, MAINTAINER or INCLUDE; build FROM another image"));
            }
            self.instructions += 1;
            if self.instructions > MAX_INSTRUCTIONS {
                return Err(Error::new(
                    from,
                    format!("the recipe and the ONBUILD triggers of `{image}` hold more than {MAX_INSTRUCTIONS} instructions, the most one build reads"),
                ));
            }
            let ins = parser::parse(raw)?;
            self.instruction(ins)?;
        }
        Ok(())
    }

    fn stage_name(&self, alias: &Text) -> Result<String> {
        let name = alias.as_string().to_lowercase();
        validate::stage_name(&name).map_err(|(m, h)| Error::new(alias.span(), m).with_help(h))?;
        if let Some(first) = self
            .stages
            .iter()
            .find(|s| s.name.as_deref() == Some(name.as_str()))
        {
            return Err(
                Error::new(alias.span(), format!("duplicate stage name `{name}`")).with_help(
                    format!(
                        "`{name}` is already the name of the stage at line {}; choose another name",
                        first.location.line
                    ),
                ),
            );
        }
        Ok(name)
    }

    /// What `FROM <image>` builds on.
    fn base(&mut self, image: &str, text: &Text, own_name: Option<&str>) -> Result<Base> {
        let err = |m: String, h: String| Error::new(text.span(), m).with_help(h);
        let lower = image.to_lowercase();
        if image.is_empty() {
            return Err(err(
                format!("`{}` expands to an empty image name", text.as_string()),
                "give the ARG a default or pass it with --build-arg".into(),
            ));
        }
        if let Some(i) = self.stage_index(&lower) {
            return Ok(Base::Stage(i));
        }
        if own_name == Some(lower.as_str()) {
            return Err(err(
                format!("stage `{lower}` cannot build FROM itself"),
                "name an earlier stage or an image".into(),
            ));
        }
        if lower == "scratch" {
            return Ok(Base::Scratch);
        }
        if let Some(tag) = lower.strip_prefix("freebsd:") {
            let release = validate::freebsd_release(tag).map_err(|(m, h)| err(m, h))?;
            return Ok(Base::FreeBsdRelease(release));
        }
        if lower == "freebsd" {
            return Err(err(
                "`freebsd` needs a release".into(),
                "write e.g. `FROM freebsd:14.2-RELEASE`".into(),
            ));
        }
        validate::image_reference(image).map_err(|(m, h)| err(m, h))?;
        if validate::stage_name(&lower).is_ok() {
            self.pending.push(Pending {
                name: lower,
                span: text.span(),
                must_be_stage: false,
            });
        }
        Ok(Base::Image(image.to_string()))
    }

    /// The index of the earlier stage called `name` (lowercase).
    pub(super) fn stage_index(&self, name: &str) -> Option<usize> {
        self.stages
            .iter()
            .position(|s| s.name.as_deref() == Some(name))
    }

    /// Records a COPY --from name that must turn out to be a stage.
    pub(super) fn expect_stage(&mut self, name: String, span: Span) {
        self.pending.push(Pending {
            name,
            span,
            must_be_stage: true,
        });
    }

    fn finish(&mut self, root: u32) -> Result<Build> {
        let start = Span::at(super::text::Pos::new(root, 1, 1));
        if self.stages.is_empty() {
            let (msg, help) = if self.seen_instruction {
                (
                    "no FROM instruction",
                    "a Jailfile needs at least one FROM, e.g. `FROM freebsd:14.2-RELEASE`",
                )
            } else {
                (
                    "the Jailfile is empty",
                    "start with FROM, e.g. `FROM freebsd:14.2-RELEASE`",
                )
            };
            return Err(Error::new(start, msg).with_help(help));
        }
        for p in std::mem::take(&mut self.pending) {
            if let Some(later) = self
                .stages
                .iter()
                .find(|s| s.name.as_deref() == Some(p.name.as_str()))
            {
                return Err(Error::new(p.span, format!("stage `{}` is defined later, at line {}", p.name, later.location.line))
                    .with_help("a stage can only use stages defined before it; move this instruction or that stage"));
            }
            if p.must_be_stage {
                let names = self.stages.iter().filter_map(|s| s.name.as_deref());
                let hint = suggest::did_you_mean(&p.name, names)
                    .map(|h| format!("{h} "))
                    .unwrap_or_default();
                return Err(Error::new(p.span, format!("unknown stage `{}`", p.name)).with_help(format!(
                    "{hint}--from names an earlier stage (by name or index); to copy from an image, give its tag: `--from={}:latest`",
                    p.name
                )));
            }
        }
        let mut unused: Vec<String> = self
            .build_args
            .keys()
            .filter(|k| !self.used_args.contains(*k))
            .cloned()
            .collect();
        unused.sort();
        Ok(Build {
            stages: std::mem::take(&mut self.stages),
            unused_build_args: unused,
            warnings: std::mem::take(&mut self.warnings),
        })
    }
}
