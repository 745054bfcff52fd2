//! From [`RawInstr`] to [`Instruction`]: which instruction it is, and its
//! arguments split into flags, words, `key=value` pairs, JSON arrays and
//! heredoc references. Only syntax is checked here; values (which may
//! contain variables) are checked by the resolver after substitution.

use super::ast::{
    Body, CommandSrc, CopySrc, HealthSrc, Instruction, Keyword, SourceSrc, KEYWORDS, UNSUPPORTED,
};
use super::diagnostic::{Error, Result};
use super::forms::{is_identifier, Parser};
use super::lexer::RawInstr;
use super::resolved::SysrcOp;
use super::suggest;
use super::text::Text;
use super::words::{find_unquoted, word_ranges};

/// Parses one instruction.
pub(crate) fn parse(raw: RawInstr) -> Result<Instruction> {
    let Some(keyword) = Keyword::lookup(&raw.keyword.as_string()) else {
        return Err(unknown(&raw));
    };
    let p = Parser {
        kw: keyword,
        args: &raw.args,
        escape: raw.escape,
        heredocs: &raw.heredocs,
    };
    let body = p.body()?;
    Ok(Instruction {
        keyword,
        keyword_text: raw.keyword,
        args: raw.args,
        heredocs: raw.heredocs,
        escape: raw.escape,
        body,
    })
}

fn unknown(raw: &RawInstr) -> Error {
    let word = raw.keyword.as_string();
    let upper = raw.keyword_upper();
    if let Some((name, advice)) = UNSUPPORTED.iter().find(|(n, _)| *n == upper) {
        return Error::new(
            raw.keyword_span(),
            format!("`{name}` is not supported by jbuild"),
        )
        .with_help(*advice);
    }
    let names = KEYWORDS.iter().map(|&(_, n, _)| n).chain(["LIF"]);
    let help = suggest::did_you_mean(&word, names).unwrap_or_else(|| {
        let all: Vec<&str> = KEYWORDS.iter().map(|&(_, n, _)| n).collect();
        format!("instructions are {}", all.join(", "))
    });
    Error::new(raw.keyword_span(), format!("unknown instruction `{word}`")).with_help(help)
}

impl Parser<'_> {
    fn body(&self) -> Result<Body> {
        let args = self.args;
        Ok(match self.kw {
            Keyword::From => self.from()?,
            Keyword::Arg => Body::Arg(self.arg()?),
            Keyword::Env => Body::Env(self.pairs(true)?),
            Keyword::Label => Body::Label(self.pairs(true)?),
            Keyword::Run => self.run()?,
            Keyword::Pkg => Body::Pkg(self.at_least_one(args)?),
            Keyword::Copy => Body::Copy(self.copy()?),
            Keyword::Add => Body::Add(self.copy()?),
            Keyword::Sysrc => self.sysrc()?,
            Keyword::Service => {
                let mut w = self
                    .exactly(args, 2, "a service name and an action")?
                    .into_iter();
                Body::Service {
                    name: w.next().unwrap_or_default(),
                    action: w.next().unwrap_or_default(),
                }
            }
            Keyword::LineInFile => {
                let mut w = self.exactly(args, 2, "a line and a file")?.into_iter();
                Body::LineInFile {
                    line: w.next().unwrap_or_default(),
                    file: w.next().unwrap_or_default(),
                }
            }
            Keyword::Render => Body::Render(self.one(args)?),
            Keyword::Include => Body::Include(self.one(args)?),
            Keyword::Jail => Body::Jail(
                self.at_least_one(args)?
                    .into_iter()
                    .map(|w| match find_unquoted(&w, '=', self.escape) {
                        Some(eq) => (w.slice(0, eq), Some(w.slice_from(eq + 1))),
                        None => (w, None),
                    })
                    .collect(),
            ),
            Keyword::User => Body::User(self.one(args)?),
            Keyword::Workdir if args.is_empty() => return Err(self.missing(args)),
            Keyword::Workdir => Body::Workdir(args.clone()),
            Keyword::Expose => Body::Expose(self.at_least_one(args)?),
            Keyword::Volume => Body::Volume(match self.json(args)? {
                Some(items) if items.is_empty() => return Err(self.missing(args)),
                Some(items) => items,
                None => self.at_least_one(args)?,
            }),
            Keyword::Cmd => Body::Cmd(self.command(args)?),
            Keyword::Entrypoint => Body::Entrypoint(self.command(args)?),
            Keyword::StopSignal => Body::StopSignal(self.one(args)?),
            Keyword::Healthcheck => Body::Healthcheck(self.healthcheck()?),
            Keyword::Onbuild => Body::Onbuild(self.onbuild()?),
            Keyword::Shell => match self.json(args)? {
                Some(items) if !items.is_empty() => Body::Shell(items),
                _ => {
                    return Err(Error::new(
                        args.span(),
                        "SHELL takes a JSON array: the shell and its options",
                    )
                    .with_help("e.g. SHELL [\"/bin/sh\", \"-c\"] or SHELL [\"/usr/local/bin/bash\", \"-eo\", \"pipefail\", \"-c\"]"))
                }
            },
            Keyword::Maintainer if args.is_empty() => return Err(self.missing(args)),
            Keyword::Maintainer => Body::Maintainer(args.clone()),
        })
    }

    /// `HEALTHCHECK [flags] CMD command` or `HEALTHCHECK NONE`.
    fn healthcheck(&self) -> Result<Option<HealthSrc>> {
        let names = [
            "interval",
            "timeout",
            "start-period",
            "start-interval",
            "retries",
        ];
        let (flags, rest) = self.flags(&names)?;
        let flag = |n: &str| flags.iter().find(|f| f.name == n).map(|f| f.value.clone());
        let kw_len = rest
            .chars
            .iter()
            .position(|(c, _)| c.is_whitespace())
            .unwrap_or(rest.len());
        let word = rest.slice(0, kw_len);
        let command = rest.slice_from(kw_len).trim();
        match word.as_string().to_ascii_uppercase().as_str() {
            "NONE" => {
                if let Some(f) = flags.first() {
                    return Err(
                        Error::new(f.value.span(), "HEALTHCHECK NONE takes no options").with_help(
                            "HEALTHCHECK NONE turns off a health check the base image has",
                        ),
                    );
                }
                if !command.is_empty() {
                    return Err(Error::new(
                        command.span(),
                        "HEALTHCHECK NONE takes no arguments",
                    ));
                }
                Ok(None)
            }
            "CMD" => Ok(Some(HealthSrc {
                interval: flag("interval"),
                timeout: flag("timeout"),
                start_period: flag("start-period"),
                start_interval: flag("start-interval"),
                retries: flag("retries"),
                command: self.command(&command)?,
            })),
            _ => Err(Error::new(
                if word.is_empty() {
                    rest.span()
                } else {
                    word.span()
                },
                format!(
                    "HEALTHCHECK expects CMD or NONE, found `{}`",
                    word.as_string()
                ),
            )
            .with_help(format!("usage: {}", self.kw.usage()))),
        }
    }

    /// The trigger after `ONBUILD`, checked now as the instruction it
    /// will be (it runs in the build that uses this image as FROM).
    fn onbuild(&self) -> Result<Text> {
        let args = self.args;
        if args.is_empty() {
            return Err(self.missing(args));
        }
        let kw_len = args
            .chars
            .iter()
            .position(|(c, _)| c.is_whitespace())
            .unwrap_or(args.len());
        let keyword = args.slice(0, kw_len);
        let trigger_args = args.slice_from(kw_len).trim();
        let upper = keyword.as_string().to_ascii_uppercase();
        let refused = match upper.as_str() {
            "ONBUILD" => Some("ONBUILD cannot trigger another ONBUILD"),
            "FROM" => Some("FROM cannot be an ONBUILD trigger"),
            "MAINTAINER" => Some("MAINTAINER cannot be an ONBUILD trigger"),
            "INCLUDE" => Some("INCLUDE cannot be an ONBUILD trigger: its path would be taken in another build's context"),
            _ => None,
        };
        if let Some(msg) = refused {
            return Err(Error::new(keyword.span(), msg)
                .with_help("ONBUILD takes an instruction the later build runs right after its FROM, e.g. ONBUILD COPY . /app/"));
        }
        parse(RawInstr {
            keyword,
            args: if trigger_args.is_empty() {
                Text::new(args.end)
            } else {
                trigger_args
            },
            heredocs: Vec::new(),
            escape: self.escape,
        })?;
        Ok(args.clone())
    }

    fn from(&self) -> Result<Body> {
        let (flags, rest) = self.flags(&["platform"])?;
        let words = self.words(&rest)?;
        let mut it = words.into_iter();
        let image = it.next().ok_or_else(|| self.missing(&rest))?;
        let alias = match it.next() {
            None => None,
            Some(w) if w.as_string().eq_ignore_ascii_case("as") => {
                Some(it.next().ok_or_else(|| {
                    Error::at(w.end, "`AS` needs a stage name")
                        .with_help("usage: FROM image AS name")
                })?)
            }
            Some(w) => {
                return Err(Error::new(
                    w.span(),
                    format!(
                        "expected `AS name` after the image, found `{}`",
                        w.as_string()
                    ),
                )
                .with_help(format!("usage: {}", self.kw.usage())))
            }
        };
        if let Some(extra) = it.next() {
            return Err(Error::new(
                extra.span(),
                format!("unexpected `{}` after the stage name", extra.as_string()),
            )
            .with_help(format!("usage: {}", self.kw.usage())));
        }
        Ok(Body::From {
            platform: flags.into_iter().next().map(|f| f.value),
            image,
            alias,
        })
    }

    fn arg(&self) -> Result<Vec<(Text, Option<Text>)>> {
        let mut out = Vec::new();
        for w in self.at_least_one(self.args)? {
            let (name, default) = match find_unquoted(&w, '=', self.escape) {
                Some(eq) => (w.slice(0, eq), Some(w.slice_from(eq + 1))),
                None => (w.clone(), None),
            };
            if !is_identifier(&name.as_string()) {
                return Err(Error::new(if name.is_empty() { w.span() } else { name.span() }, format!("invalid ARG name `{}`", name.as_string()))
                    .with_help("names are letters, digits and `_`, not starting with a digit: ARG name=default"));
            }
            out.push((name, default));
        }
        Ok(out)
    }

    /// `k=v k2="v 2"`, or the legacy `k value with spaces` (ENV, LABEL).
    fn pairs(&self, legacy: bool) -> Result<Vec<(Text, Text)>> {
        let args = self.args;
        let ranges = word_ranges(args, self.escape)?;
        // Each word is copied once and split in place: a value may be
        // megabytes long.
        let mut words = ranges.iter().map(|&(a, b)| args.slice(a, b));
        let Some(first) = words.next() else {
            return Err(self.missing(args));
        };
        if legacy && find_unquoted(&first, '=', self.escape).is_none() {
            let b = ranges.first().map_or(0, |&(_, b)| b);
            drop(words);
            let value = args.slice_from(b).trim();
            if value.is_empty() {
                let k = first.as_string();
                return Err(Error::at(
                    value.end,
                    format!("{} `{k}` needs a value", self.kw.name()),
                )
                .with_help(format!("write {} {k}=value", self.kw.name())));
            }
            return Ok(vec![(first, value)]);
        }
        let mut out = Vec::new();
        for mut w in std::iter::once(first).chain(words) {
            match find_unquoted(&w, '=', self.escape) {
                Some(0) => {
                    return Err(Error::new(
                        w.span(),
                        format!("missing name before `=` in `{}`", w.as_string()),
                    ))
                }
                Some(eq) => {
                    let key = w.split_off_front(eq);
                    let value = if w.len() > 1 {
                        w.split_off_front(1);
                        w
                    } else {
                        // Nothing after `=`: an empty value at its end.
                        Text::new(w.end)
                    };
                    out.push((key, value));
                }
                None => {
                    return Err(Error::new(
                        w.span(),
                        format!("expected key=value, found `{}`", w.as_string()),
                    )
                    .with_help("quote values that contain spaces: key=\"a b\""))
                }
            }
        }
        Ok(out)
    }

    fn run(&self) -> Result<Body> {
        let (flags, rest) = self.flags_repeating(&["network", "mount"], &["mount"])?;
        let mounts = flags
            .iter()
            .filter(|f| f.name == "mount")
            .map(|f| f.value.clone())
            .collect();
        let network = match flags.iter().find(|f| f.name == "network") {
            None => false,
            Some(f) => match f.value.as_string().as_str() {
                "host" => true,
                "none" | "default" => false,
                other => {
                    return Err(Error::new(
                        f.value.span(),
                        format!("unknown network mode `{other}`"),
                    )
                    .with_help("use --network=host, --network=none or --network=default"))
                }
            },
        };
        if rest.is_empty() {
            return Err(self.missing(&rest));
        }
        let command = match self.command(&rest)? {
            CommandSrc::Shell(s) => match self.heredocs {
                [] => CommandSrc::Shell(s),
                [h] if s.trim() == h.marker.as_string() => CommandSrc::Shell(h.body.as_string()),
                docs => {
                    let raws: Vec<&str> = docs.iter().map(|h| h.raw.as_str()).collect();
                    CommandSrc::Shell(format!("{s}\n{}", raws.join("\n")))
                }
            },
            exec => exec,
        };
        Ok(Body::Run {
            network,
            mounts,
            command,
        })
    }

    /// COPY, and ADD (which has no `--from` or `--parents`, and has
    /// `--checksum` and `--keep-git-dir`).
    fn copy(&self) -> Result<CopySrc> {
        let kw = self.kw.name();
        let (flags, rest) = if self.kw == Keyword::Add {
            self.flags_with(
                &[
                    "chown",
                    "chmod",
                    "link",
                    "exclude",
                    "checksum",
                    "keep-git-dir",
                ],
                &["exclude"],
                &["link", "keep-git-dir"],
            )?
        } else {
            self.flags_with(
                &["from", "chown", "chmod", "link", "parents", "exclude"],
                &["exclude"],
                &["link", "parents"],
            )?
        };
        let flag = |n: &str| flags.iter().find(|f| f.name == n).map(|f| f.value.clone());
        let mut sources = Vec::new();
        let dest;
        if let Some(items) = self.json(&rest)? {
            let Some((last, srcs)) = items.split_last().filter(|(_, s)| !s.is_empty()) else {
                return Err(Error::new(
                    rest.span(),
                    format!("{kw} needs at least one source and a destination"),
                )
                .with_help(format!("usage: {}", self.kw.usage())));
            };
            sources.extend(srcs.iter().cloned().map(SourceSrc::Path));
            dest = last.clone();
        } else {
            let words = self.words(&rest)?;
            let mut used = vec![false; self.heredocs.len()];
            for w in &words {
                let doc = self
                    .heredocs
                    .iter()
                    .position(|h| h.marker.start() == w.start());
                match doc {
                    Some(k)
                        if self
                            .heredocs
                            .get(k)
                            .is_some_and(|h| h.marker.len() == w.len()) =>
                    {
                        if let Some(u) = used.get_mut(k) {
                            *u = true;
                        }
                        sources.push(SourceSrc::Heredoc(k));
                    }
                    _ => sources.push(SourceSrc::Path(w.clone())),
                }
            }
            if let Some(k) = used.iter().position(|u| !u) {
                let m = self
                    .heredocs
                    .get(k)
                    .map(|h| h.marker.clone())
                    .unwrap_or_default();
                return Err(Error::new(
                    m.span(),
                    format!(
                        "heredoc `{}` must be a source argument of its own",
                        m.as_string()
                    ),
                )
                .with_help("usage: COPY <<name /dest/ (the heredoc's name is the file name)"));
            }
            match sources.pop() {
                Some(SourceSrc::Path(d)) if !sources.is_empty() => dest = d,
                Some(SourceSrc::Heredoc(k)) => {
                    let m = self
                        .heredocs
                        .get(k)
                        .map(|h| h.marker.clone())
                        .unwrap_or_default();
                    return Err(Error::at(
                        m.end,
                        format!("{kw} needs a destination after the heredoc"),
                    )
                    .with_help(format!("usage: {kw} <<name /dest/")));
                }
                _ => {
                    return Err(Error::at(
                        rest.end,
                        format!("{kw} needs at least one source and a destination"),
                    )
                    .with_help(format!("usage: {}", self.kw.usage())))
                }
            }
        }
        Ok(CopySrc {
            from: flag("from"),
            chown: flag("chown"),
            chmod: flag("chmod"),
            parents: flag("parents").is_some_and(|v| v.as_string() == "true"),
            exclude: flags
                .iter()
                .filter(|f| f.name == "exclude")
                .map(|f| f.value.clone())
                .collect(),
            checksum: flag("checksum"),
            keep_git_dir: flag("keep-git-dir").is_some_and(|v| v.as_string() == "true"),
            sources,
            dest,
        })
    }

    fn sysrc(&self) -> Result<Body> {
        const HELP: &str =
            "usage: SYSRC [-f file] name=value (or name+=value to append, name-=value to remove)";
        let words = self.at_least_one(self.args)?;
        let mut rest = words.as_slice();
        let mut file = None;
        if let Some((first, more)) = rest.split_first() {
            let opt = first.as_string();
            if opt == "-f" {
                let (f, more) = more
                    .split_first()
                    .ok_or_else(|| Error::at(first.end, "`-f` needs a file").with_help(HELP))?;
                file = Some(f.clone());
                rest = more;
            } else if opt.starts_with('-') {
                return Err(
                    Error::new(first.span(), format!("unknown SYSRC option `{opt}`"))
                        .with_help(HELP),
                );
            }
        }
        let Some((assign, more)) = rest.split_first() else {
            return Err(Error::at(self.args.end, "SYSRC needs an assignment").with_help(HELP));
        };
        let Some(eq) = find_unquoted(assign, '=', self.escape) else {
            let help = match more {
                [value] => format!("write `SYSRC {}={}`", assign.as_string(), value.as_string()),
                _ => HELP.to_string(),
            };
            return Err(Error::new(
                assign.span(),
                format!("expected name=value, found `{}`", assign.as_string()),
            )
            .with_help(help));
        };
        if let Some(extra) = more.first() {
            return Err(
                Error::new(extra.span(), "SYSRC takes one assignment per line").with_help(format!(
                    "write `SYSRC {}` on a line of its own",
                    extra.as_string()
                )),
            );
        }
        let (name, op) = match assign.char_at(eq.wrapping_sub(1)) {
            Some('+') => (assign.slice(0, eq - 1), SysrcOp::Append),
            Some('-') => (assign.slice(0, eq - 1), SysrcOp::Remove),
            _ => (assign.slice(0, eq), SysrcOp::Set),
        };
        if name.is_empty() {
            return Err(
                Error::new(assign.span(), "missing variable name before `=`").with_help(HELP),
            );
        }
        Ok(Body::Sysrc {
            file,
            name,
            op,
            value: assign.slice_from(eq + 1),
        })
    }
}
