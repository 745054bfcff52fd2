//! One instruction inside a stage → one [`Step`] (or a change of scope, for
//! ARG). Variables are substituted here, in the scope the instruction sits
//! in, and values are checked after substitution.

use std::collections::{BTreeMap, BTreeSet};

use super::ast::{Body, CommandSrc, CopySrc, HealthSrc, Instruction, Keyword, SourceSrc};
use super::diagnostic::{Error, Result};
use super::resolve::{Resolver, Scope};
use super::resolved::{
    url_file_name, AddSource, Command, CopyFrom, CopyOp, CopySource, Healthcheck, Op, Step, SysrcOp,
};
use super::text::Text;
use super::{forms, subst, validate};

impl Resolver<'_> {
    /// The step for `ins`, or `None` for instructions that only change
    /// the scope (ARG).
    pub(super) fn step(&mut self, ins: &Instruction) -> Result<Option<Step>> {
        let esc = ins.escape;
        if let Body::Arg(decls) = &ins.body {
            for (name, default) in decls {
                self.warn_secret_arg(name);
                self.declare_arg(&name.as_string(), default.as_ref(), esc)?;
            }
            return Ok(None);
        }
        let (text, refs) = self.history_text(ins)?;
        let args = match ins.keyword {
            Keyword::Run | Keyword::Pkg => self
                .scope()
                .args
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                .collect(),
            _ => self.referenced_args(&refs),
        };
        // Each step keeps its own copy of these values: counted, so a
        // large ARG and many RUN lines cannot multiply it without bound.
        self.budget.charge(
            args.iter().map(|(k, v)| k.len() + v.len()).sum(),
            ins.span(),
        )?;
        let op = self.op(ins)?;
        Ok(Some(Step {
            location: self.location(ins.span()),
            text,
            args,
            op,
        }))
    }

    fn scope(&self) -> &Scope {
        self.scopes.last().unwrap_or(&self.no_scope)
    }

    fn declare_arg(&mut self, name: &str, default: Option<&Text>, esc: char) -> Result<()> {
        let value = match (self.build_arg(name), default) {
            (Some(v), _) => Some(v),
            (None, Some(d)) => Some(self.word(d, esc)?),
            (None, None) => self.globals.get(name).cloned().flatten(),
        };
        if let Some(scope) = self.scopes.last_mut() {
            scope.args.insert(name.to_string(), value);
        }
        Ok(())
    }

    /// The ARGs (with values) among `refs` that ENV does not shadow.
    fn referenced_args(&self, refs: &BTreeSet<String>) -> BTreeMap<String, String> {
        let scope = self.scope();
        refs.iter()
            .filter(|r| !scope.env.contains_key(*r))
            .filter_map(|r| Some((r.clone(), scope.args.get(r).cloned().flatten()?)))
            .collect()
    }

    /// `KEYWORD args` after substitution (RUN/CMD/ENTRYPOINT: as written),
    /// heredoc bodies appended; and the variables it referenced.
    fn history_text(&self, ins: &Instruction) -> Result<(String, BTreeSet<String>)> {
        let lookup = |n: &str| self.lookup(n);
        let (mut text, mut refs) = if ins.keyword.substitutes() {
            let e = subst::raw(&ins.args, ins.escape, &lookup, &self.budget)?;
            (e.value, e.refs)
        } else {
            (ins.args.as_string(), BTreeSet::new())
        };
        text = format!("{} {text}", ins.keyword.name())
            .trim_end()
            .to_string();
        for h in &ins.heredocs {
            if matches!(ins.keyword, Keyword::Copy | Keyword::Add) && !h.quoted {
                let body = subst::heredoc(&h.body, ins.escape, &lookup, &self.budget)?;
                refs.extend(body.refs);
                let terminator = h.raw.rsplit('\n').next().unwrap_or_default();
                text = format!("{text}\n{}{terminator}", body.value);
            } else {
                text = format!("{text}\n{}", h.raw);
            }
        }
        Ok((text, refs))
    }

    pub(super) fn word(&self, t: &Text, esc: char) -> Result<String> {
        Ok(subst::word(t, esc, &|n| self.lookup(n), &self.budget)?.value)
    }

    /// A word that must not be empty after substitution.
    fn nonempty(&self, t: &Text, esc: char, what: &str) -> Result<String> {
        let v = self.word(t, esc)?;
        if v.is_empty() {
            return Err(Error::new(
                t.span(),
                format!("{what} is empty (`{}` expands to nothing)", t.as_string()),
            )
            .with_help("give the variable a value, e.g. with ARG name=default or --build-arg"));
        }
        Ok(v)
    }

    fn fields<'w>(&self, words: &'w [Text], esc: char) -> Result<Vec<(String, &'w Text)>> {
        let mut out = Vec::new();
        for w in words {
            for f in subst::fields(w, esc, &|n| self.lookup(n), &self.budget)?.value {
                out.push((f, w));
            }
        }
        Ok(out)
    }

    fn pairs(&self, pairs: &[(Text, Text)], esc: char, kw: &str) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (k, v) in pairs {
            let key = self.word(k, esc)?;
            if key.is_empty() || key.contains(|c: char| c.is_whitespace() || c == '=') {
                return Err(Error::new(k.span(), format!("invalid {kw} name `{key}`"))
                    .with_help("names must not be empty or contain whitespace or `=`"));
            }
            out.push((key, self.word(v, esc)?));
        }
        Ok(out)
    }

    fn op(&mut self, ins: &Instruction) -> Result<Op> {
        let esc = ins.escape;
        Ok(match &ins.body {
            Body::Env(pairs) => {
                let pairs = self.pairs(pairs, esc, "ENV")?;
                if let Some(scope) = self.scopes.last_mut() {
                    scope.env.extend(pairs.iter().cloned());
                }
                Op::Env(pairs)
            }
            Body::Label(pairs) => Op::Label(self.pairs(pairs, esc, "LABEL")?),
            Body::Run {
                network,
                mounts,
                command,
            } => {
                let mut resolved = Vec::new();
                for m in mounts {
                    resolved.push(self.run_mount(m, esc)?);
                }
                Op::Run {
                    command: command_of(command),
                    network: *network,
                    mounts: resolved,
                }
            }
            Body::Pkg(words) => self.pkg_op(words, ins)?,
            Body::Copy(c) => self.copy(c, ins)?,
            Body::Add(c) => self.add(c, ins)?,
            Body::Sysrc {
                file,
                name,
                op,
                value,
            } => self.sysrc_op(file.as_ref(), name, *op, value, esc)?,
            Body::Service { name, action } => self.service_op(name, action, esc)?,
            Body::LineInFile { line, file } => Op::LineInFile {
                line: self.word(line, esc)?,
                file: self.nonempty(file, esc, "the LINE_IN_FILE file")?,
            },
            Body::Render(path) => {
                let scope = self.scope();
                let mut vars: BTreeMap<String, String> = scope
                    .args
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                    .collect();
                vars.extend(scope.env.iter().map(|(k, v)| (k.clone(), v.clone())));
                Op::Render {
                    path: self.nonempty(path, esc, "the RENDER path")?,
                    vars,
                }
            }
            Body::Jail(params) => self.jail_op(params, esc)?,
            Body::User(u) => Op::User(self.nonempty(u, esc, "the USER")?),
            Body::Workdir(w) => {
                let path = self.nonempty(w, esc, "the WORKDIR")?;
                let dir = validate::join_workdir(&self.scope().workdir, &path);
                if let Some(scope) = self.scopes.last_mut() {
                    scope.workdir = dir.clone();
                }
                Op::Workdir(dir)
            }
            Body::Expose(words) => self.expose_op(words, ins)?,
            Body::Volume(words) => self.volume_op(words, ins)?,
            Body::Cmd(c) => Op::Cmd(command_of(c)),
            Body::Entrypoint(c) => Op::Entrypoint(command_of(c)),
            Body::StopSignal(t) => {
                let v = self.nonempty(t, esc, "the STOPSIGNAL")?;
                validate::signal(&v).map_err(|(m, h)| Error::new(t.span(), m).with_help(h))?;
                Op::StopSignal(v)
            }
            Body::Healthcheck(None) => Op::Healthcheck(Healthcheck {
                test: vec!["NONE".into()],
                ..Healthcheck::default()
            }),
            Body::Healthcheck(Some(h)) => Op::Healthcheck(healthcheck(h)?),
            Body::Onbuild(t) => Op::Onbuild(t.as_string()),
            Body::Shell(items) => Op::Shell(items.iter().map(Text::as_string).collect()),
            Body::Maintainer(t) => {
                let loc = self.location(ins.span());
                self.warnings.push(format!(
                    "{loc}: MaintainerDeprecated: MAINTAINER is deprecated; write LABEL org.opencontainers.image.authors=\"...\" (jbuild records it as that label)"
                ));
                Op::Label(vec![(
                    "org.opencontainers.image.authors".into(),
                    t.as_string(),
                )])
            }
            Body::Arg(_) | Body::From { .. } | Body::Include(_) => {
                return Err(Error::new(
                    ins.span(),
                    "internal error: instruction handled elsewhere",
                ))
            }
        })
    }

    fn pkg_op(&self, words: &[Text], ins: &Instruction) -> Result<Op> {
        let esc = ins.escape;
        let mut packages = Vec::new();
        let mut bootstrap = true;
        let mut scripts = None;
        for (p, w) in self.fields(words, esc)? {
            if p == "--no-bootstrap" && packages.is_empty() {
                bootstrap = false;
                continue;
            }
            if let Some(value) = p.strip_prefix("--scripts=").filter(|_| packages.is_empty()) {
                let mode = value.parse().map_err(|why: String| {
                    Error::new(w.span(), format!("PKG --scripts: {why}")).with_help(
                        "--scripts=refuse fails the step on a script command jbuild does not carry out; --scripts=defer keeps it for the jail's first start",
                    )
                })?;
                scripts = Some(mode);
                continue;
            }
            if p.starts_with('-') {
                return Err(Error::new(
                    w.span(),
                    format!("PKG takes package names, not options (`{p}`)"),
                )
                .with_help(
                    "PKG installs packages (`PKG [--no-bootstrap] [--scripts=refuse|defer] package ...`); use RUN for other pkg(8) options",
                ));
            }
            packages.push(p);
        }
        if packages.is_empty() {
            return Err(
                Error::new(ins.args.span(), "PKG has no packages after substitution")
                    .with_help("usage: PKG package ..."),
            );
        }
        Ok(Op::Pkg {
            packages,
            bootstrap,
            scripts,
        })
    }

    fn sysrc_op(
        &self,
        file: Option<&Text>,
        name: &Text,
        op: SysrcOp,
        value: &Text,
        esc: char,
    ) -> Result<Op> {
        let file = match file {
            Some(f) => self.nonempty(f, esc, "the SYSRC file")?,
            None => "/etc/rc.conf".to_string(),
        };
        let n = self.word(name, esc)?;
        if !forms::is_identifier(&n) {
            return Err(
                Error::new(name.span(), format!("invalid rc.conf variable name `{n}`"))
                    .with_help("names are letters, digits and `_`, e.g. SYSRC nginx_enable=YES"),
            );
        }
        Ok(Op::Sysrc {
            file,
            name: n,
            op,
            value: self.word(value, esc)?,
        })
    }

    fn service_op(&self, name: &Text, action: &Text, esc: char) -> Result<Op> {
        let n = self.nonempty(name, esc, "the service name")?;
        if n.contains(|c: char| c.is_whitespace() || c == '/' || c == '=') {
            return Err(
                Error::new(name.span(), format!("invalid service name `{n}`"))
                    .with_help("give the rc.d script's name, e.g. SERVICE nginx enable"),
            );
        }
        let a = self.word(action, esc)?;
        let enable = match a.to_ascii_lowercase().as_str() {
            "enable" | "on" | "yes" => true,
            "disable" | "off" | "no" => false,
            _ => {
                return Err(
                    Error::new(action.span(), format!("unknown SERVICE action `{a}`"))
                        .with_help("use enable or disable (on/off and yes/no also work)"),
                )
            }
        };
        Ok(Op::Service { name: n, enable })
    }

    fn jail_op(&self, params: &[(Text, Option<Text>)], esc: char) -> Result<Op> {
        let mut out = Vec::new();
        for (name, value) in params {
            let n = self.word(name, esc)?;
            if n.is_empty()
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                return Err(
                    Error::new(name.span(), format!("invalid jail parameter name `{n}`"))
                        .with_help(
                            "jail(8) parameters look like host.hostname=web or allow.raw_sockets",
                        ),
                );
            }
            let v = match value {
                Some(v) => self.word(v, esc)?,
                None => String::new(),
            };
            out.push((n, v));
        }
        Ok(Op::Jail(out))
    }

    fn expose_op(&self, words: &[Text], ins: &Instruction) -> Result<Op> {
        let esc = ins.escape;
        let mut ports: Vec<String> = Vec::new();
        let mut seen = BTreeSet::new();
        for (f, w) in self.fields(words, esc)? {
            for p in validate::ports(&f).map_err(|(m, h)| Error::new(w.span(), m).with_help(h))? {
                if seen.insert(p.clone()) {
                    ports.push(p);
                }
            }
        }
        if ports.is_empty() {
            return Err(Error::new(
                ins.args.span(),
                "EXPOSE has no ports after substitution",
            ));
        }
        Ok(Op::Expose(ports))
    }

    fn volume_op(&self, words: &[Text], ins: &Instruction) -> Result<Op> {
        let esc = ins.escape;
        let vols: Vec<String> = self
            .fields(words, esc)?
            .into_iter()
            .map(|(f, _)| f)
            .filter(|f| !f.is_empty())
            .collect();
        if vols.is_empty() {
            return Err(Error::new(
                ins.args.span(),
                "VOLUME has no paths after substitution",
            ));
        }
        Ok(Op::Volume(vols))
    }

    fn copy(&mut self, c: &CopySrc, ins: &Instruction) -> Result<Op> {
        let esc = ins.escape;
        let from = match &c.from {
            Some(f) => Some(self.copy_from(f, esc)?),
            None => None,
        };
        let chown = match &c.chown {
            Some(t) => Some(self.nonempty(t, esc, "--chown")?),
            None => None,
        };
        let chmod = match &c.chmod {
            Some(t) => Some(
                validate::chmod(&self.word(t, esc)?)
                    .map_err(|(m, h)| Error::new(t.span(), m).with_help(h))?,
            ),
            None => None,
        };
        let mut sources = Vec::new();
        for s in &c.sources {
            sources.push(match s {
                SourceSrc::Path(p) => CopySource::Path(self.nonempty(p, esc, "the COPY source")?),
                SourceSrc::Heredoc(k) => {
                    let Some(h) = ins.heredocs.get(*k) else {
                        continue;
                    };
                    let content = if h.quoted {
                        h.body.as_string()
                    } else {
                        subst::heredoc(&h.body, esc, &|n| self.lookup(n), &self.budget)?.value
                    };
                    CopySource::Inline {
                        name: h.name.clone(),
                        content,
                    }
                }
            });
        }
        let mut exclude = Vec::new();
        for t in &c.exclude {
            exclude.push(self.nonempty(t, esc, "--exclude")?);
        }
        let dest = self.nonempty(&c.dest, esc, "the COPY destination")?;
        if sources.len() > 1 && !dest.ends_with('/') {
            return Err(Error::new(c.dest.span(), format!("COPY has {} sources, so the destination `{dest}` must be a directory ending in `/`", sources.len()))
                .with_help(format!("write `{dest}/`")));
        }
        Ok(Op::Copy(CopyOp {
            from,
            sources,
            dest,
            chown,
            chmod,
            parents: c.parents,
            exclude,
        }))
    }

    /// ADD: COPY's sources told apart ([`AddSource::classify`]) and its
    /// flags checked as BuildKit checks them.
    fn add(&mut self, c: &CopySrc, ins: &Instruction) -> Result<Op> {
        let esc = ins.escape;
        let Op::Copy(CopyOp {
            sources,
            dest,
            chown,
            chmod,
            exclude,
            ..
        }) = self.copy(c, ins)?
        else {
            return Err(Error::new(ins.span(), "internal error: ADD is not a copy"));
        };
        let sources: Vec<AddSource> = sources
            .into_iter()
            .map(|s| match s {
                CopySource::Path(p) => AddSource::classify(&p),
                inline => AddSource::Context(inline),
            })
            .collect();
        let checksum = match &c.checksum {
            None => None,
            Some(t) => {
                let v = self.word(t, esc)?;
                let digest: crate::digest::Digest = v.parse().map_err(|_| {
                    Error::new(t.span(), format!("`--checksum={v}` is not a sha256 digest"))
                        .with_help("write --checksum=sha256:<64 hex digits>, the digest the build printed for the file")
                })?;
                if !matches!(sources.as_slice(), [AddSource::Url(_)]) {
                    return Err(Error::new(
                        t.span(),
                        "--checksum needs exactly one source, an http:// or https:// URL",
                    )
                    .with_help("give each URL an ADD line of its own"));
                }
                Some(digest)
            }
        };
        let span = c.dest.span();
        let git = sources.iter().any(|s| matches!(s, AddSource::Git { .. }));
        if c.keep_git_dir && !git {
            return Err(
                Error::new(ins.span(), "--keep-git-dir is for a git repository source")
                    .with_help("e.g. ADD --keep-git-dir https://example.org/repo.git#v1.0 /src/"),
            );
        }
        for s in &sources {
            if let AddSource::Url(u) = s {
                if dest.ends_with('/') && url_file_name(u).is_none() {
                    return Err(Error::new(
                        span,
                        format!("`{u}` names no file, so ADD cannot name it inside `{dest}`"),
                    )
                    .with_help("give the destination's file name: ADD URL /path/to/file"));
                }
            }
        }
        Ok(Op::Add {
            sources,
            dest,
            chown,
            chmod,
            exclude,
            checksum,
            keep_git_dir: c.keep_git_dir,
        })
    }

    /// `--from=`: an earlier stage by name or index, else an image.
    fn copy_from(&mut self, t: &Text, esc: char) -> Result<CopyFrom> {
        self.stage_or_image(t, esc, ("COPY --from", "COPY"))
    }

    /// An earlier stage by name or index, else an image, for `COPY
    /// --from=` and `RUN --mount=...,from=`; `(flag, instruction)` name
    /// them in messages.
    pub(super) fn stage_or_image(
        &mut self,
        t: &Text,
        esc: char,
        (flag, ins): (&str, &str),
    ) -> Result<CopyFrom> {
        let v = self.nonempty(t, esc, "--from")?;
        let current = self.stages.len().saturating_sub(1);
        let lower = v.to_lowercase();
        if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()) {
            return match v.parse::<usize>() {
                Ok(i) if i < current => Ok(CopyFrom::Stage(i)),
                Ok(i) if i == current => Err(Error::new(t.span(), format!("{flag}={i} is the stage this {ins} is in"))
                    .with_help("--from can only use an earlier stage")),
                _ => Err(Error::new(t.span(), format!("there is no stage {v} before this one (this is stage {current}, counting from 0)"))
                    .with_help("--from can only use an earlier stage")),
            };
        }
        if let Some(i) = self.stage_index(&lower) {
            if i == current {
                return Err(Error::new(
                    t.span(),
                    format!("{flag}={lower} is the stage this {ins} is in"),
                )
                .with_help("--from can only use an earlier stage"));
            }
            return Ok(CopyFrom::Stage(i));
        }
        if validate::stage_name(&lower).is_ok() {
            self.expect_stage(lower, t.span());
            return Ok(CopyFrom::Image(v));
        }
        validate::image_reference(&v).map_err(|(m, h)| Error::new(t.span(), m).with_help(h))?;
        Ok(CopyFrom::Image(v))
    }
}

fn command_of(c: &CommandSrc) -> Command {
    match c {
        CommandSrc::Shell(s) => Command::Shell(s.clone()),
        CommandSrc::Exec(v) => Command::Exec(v.clone()),
    }
}

/// A HEALTHCHECK's options checked as Docker checks them: durations of at
/// least a millisecond (or zero, the default), retries a count.
fn healthcheck(h: &HealthSrc) -> Result<Healthcheck> {
    let duration = |t: &Option<Text>, name: &str| -> Result<Option<u64>> {
        let Some(t) = t else { return Ok(None) };
        let v = t.as_string();
        let ns =
            validate::duration(&v).map_err(|(m, hint)| Error::new(t.span(), m).with_help(hint))?;
        if ns != 0 && ns < 1_000_000 {
            return Err(
                Error::new(t.span(), format!("--{name}={v} is less than a millisecond"))
                    .with_help("give at least 1ms, or 0 for the default"),
            );
        }
        Ok((ns != 0).then_some(ns))
    };
    let retries = match &h.retries {
        None => None,
        Some(t) => {
            let v = t.as_string();
            let n: u64 = v.parse().map_err(|_| {
                Error::new(t.span(), format!("--retries={v} is not a count"))
                    .with_help("give a whole number, e.g. --retries=3")
            })?;
            (n != 0).then_some(n)
        }
    };
    let test = match &h.command {
        CommandSrc::Shell(s) => vec!["CMD-SHELL".to_string(), s.clone()],
        CommandSrc::Exec(v) => std::iter::once("CMD".to_string())
            .chain(v.iter().cloned())
            .collect(),
    };
    Ok(Healthcheck {
        test,
        interval: duration(&h.interval, "interval")?,
        timeout: duration(&h.timeout, "timeout")?,
        start_period: duration(&h.start_period, "start-period")?,
        start_interval: duration(&h.start_interval, "start-interval")?,
        retries,
    })
}
