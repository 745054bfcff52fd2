//! One Bastille instruction at a time into Jailfile lines. See the module
//! docs of `bastille` for the rules followed, and `docs/bastille.md` for
//! the table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::emit::{common_ancestor, word, Origin, Out};
use super::source::{is_name, read_lines, substitute, unquote, with_help, words, SrcLine};
use super::symbolic::{self, ScriptArg};
use super::{Converted, Options};
use crate::jailfile::Diagnostic;

pub(super) type R<T> = Result<T, Diagnostic>;

/// Values Bastille fills in from the running jail; a build has none, so
/// they stay as written unless given with `--arg`.
const BUILTINS: &[&str] = &["JAIL_NAME", "JAIL_IP", "JAIL_IP6"];

/// Every instruction the translation knows, for "did you mean".
const KNOWN: &[&str] = &[
    "ARG",
    "ARG+",
    "CMD",
    "CP",
    "COPY",
    "OVERLAY",
    "INCLUDE",
    "PKG",
    "HPKG",
    "MOUNT",
    "FSTAB",
    "RENDER",
    "LINE_IN_FILE",
    "LIF",
    "TAG",
    "TAGS",
    "CONFIG",
    "LIMITS",
    "RDR",
    "SERVICE",
    "SYSRC",
    "RESTART",
];

#[derive(Debug, Clone)]
pub(super) struct ArgVal {
    pub(super) name: String,
    /// As substituted into instruction lines (Bastille keeps quotes here;
    /// the shell removes them when the line is split).
    raw: String,
    /// Shell-unquoted: what RENDER writes into files.
    pub(super) value: String,
    /// The ARG line's value as Jailfile text (`${OTHER}` kept).
    pub(super) decl: String,
    /// Declared with ARG+: references fail the build when it has no value.
    required: bool,
}

/// The ARG context of one template (an INCLUDEd one gets its own, with
/// only the `--arg`s on the INCLUDE line, as `bastille template` does).
pub(super) struct Scope {
    pub(super) dir: PathBuf,
    /// The Bastillefile (`dir/Bastillefile` unless a file was named).
    pub(super) file: PathBuf,
    pub(super) cli: BTreeMap<String, String>,
    pub(super) arg_file: Option<(PathBuf, String)>,
    pub(super) args: Vec<ArgVal>,
}

impl Scope {
    fn find(&self, name: &str) -> Option<&ArgVal> {
        self.args.iter().rev().find(|a| a.name == name)
    }

    fn lookup(&self, name: &str) -> Option<String> {
        self.find(name).map(|a| a.raw.clone())
    }

    fn in_arg_file(&self, name: &str) -> Option<String> {
        let (_, text) = self.arg_file.as_ref()?;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_string)
    }
}

pub(super) struct Translator<'a> {
    pub(super) opts: &'a Options,
    out: Vec<(Origin, Out)>,
    notes: Vec<String>,
    dirs: Vec<PathBuf>,
    pub(super) stack: Vec<PathBuf>,
    pub(super) tags: Vec<String>,
    /// The value each ARG has in the Jailfile at this point.
    pub(super) emitted: BTreeMap<String, String>,
    /// ARG+ left for `--build-arg`.
    required: Vec<String>,
    /// The services a `SERVICE name start` left running in Bastille's live
    /// jail, in the order started: each later command step starts them
    /// first ([`Translator::run`]).
    pub(super) running: Vec<super::services::Running>,
}

pub(super) fn run(dir: &Path, file: Option<&Path>, opts: &Options) -> R<Converted> {
    let dir = canonical(dir)?;
    let file = file
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join("Bastillefile"));
    let arg_file = match &opts.arg_file {
        Some(p) => Some((
            p.clone(),
            std::fs::read_to_string(p).map_err(|e| {
                with_help(
                    Diagnostic::for_file(
                        p,
                        format!("cannot read --arg-file `{}`: {e}", p.display()),
                    ),
                    "give a file of NAME=VALUE lines",
                )
            })?,
        )),
        None => None,
    };
    for (k, v) in &opts.args {
        if !is_name(k) || v.contains('\n') {
            return Err(Diagnostic::for_file(
                &dir,
                format!("--arg `{k}`: use NAME=VALUE with a name of letters, digits and _ and a one-line value"),
            ));
        }
    }
    let mut t = Translator {
        opts,
        out: Vec::new(),
        notes: Vec::new(),
        dirs: Vec::new(),
        stack: Vec::new(),
        tags: Vec::new(),
        emitted: BTreeMap::new(),
        required: Vec::new(),
        running: Vec::new(),
    };
    // Named once the context is known (below): by its place in the build
    // context, never by its path on this host, which would make the
    // `org.jbuild.jailfile` label (and the image digest) depend on where
    // the template was checked out.
    t.header("");
    let from = match opts.from.trim() {
        "" => {
            // No base given: the Jailfile takes it as a build argument.
            t.header("# the base image: jbuild build --build-arg BASE=freebsd:14.3-RELEASE ...");
            t.header("ARG BASE");
            "${BASE}"
        }
        f => f,
    };
    t.out
        .push((Origin::From, Out::Text(format!("FROM {from}"))));
    let template_file = file.file_name().map(PathBuf::from).unwrap_or_default();
    let mut scope = Scope {
        dir: dir.clone(),
        file,
        cli: opts.args.clone(),
        arg_file,
        args: Vec::new(),
    };
    for b in BUILTINS {
        if let Some(v) = opts.args.get(*b) {
            t.declare_value(&mut scope, b, v.clone());
        }
    }
    t.template(&mut scope)?;
    let context = common_ancestor(&t.dirs);
    let mut text = String::new();
    let mut origins = Vec::new();
    // The first line and the context line, once the context is known
    // (before any ARG: parser directives end at the first line that is
    // not one). Both name places relative to the context only.
    let (o, _) = t.out.remove(0);
    text.push_str(&format!(
        "# Jailfile translated by jbuild from the Bastille template {}\n",
        in_context(&template_file, &dir, &context)
    ));
    origins.push(o);
    text.push_str(
        "# build context: the directory holding the template and the templates it INCLUDEs \
         (jbuild build -f THIS_FILE DIR)\n",
    );
    origins.push(Origin::Header);
    for (o, line) in &t.out {
        text.push_str(&line.render(&context));
        text.push('\n');
        origins.push(o.clone());
    }
    Ok(Converted {
        base_from_arg: opts.from.trim().is_empty(),
        jailfile: text,
        path: dir.join("Bastillefile.jailfile"),
        context,
        notes: t.notes,
        required: t.required,
        origins,
    })
}

/// The template's Bastillefile as a path in the build context
/// (`./www/nginx/Bastillefile`), for the Jailfile's first comment line;
/// control characters (a line break would end the comment) shown as `?`.
fn in_context(file_name: &Path, dir: &Path, context: &Path) -> String {
    let rel = dir.strip_prefix(context).unwrap_or(Path::new(""));
    let shown = Path::new(".").join(rel).join(file_name);
    shown
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

pub(super) fn canonical(dir: &Path) -> R<PathBuf> {
    dir.canonicalize().map_err(|e| {
        Diagnostic::for_file(
            dir,
            format!("cannot open template `{}`: {e}", dir.display()),
        )
    })
}

impl Translator<'_> {
    fn header(&mut self, text: &str) {
        self.out.push((Origin::Header, Out::Text(text.to_string())));
    }

    pub(super) fn emit(&mut self, line: &SrcLine, text: String) {
        self.out.push((Origin::Line(line.clone()), Out::Text(text)));
    }

    pub(super) fn note(&mut self, line: &SrcLine, message: &str) {
        self.notes.push(format!("{}: {message}", line.at()));
        self.emit(line, format!("# jbuild: {}", message.replace('\n', " ")));
    }

    pub(super) fn template(&mut self, scope: &mut Scope) -> R<()> {
        let dir = scope.dir.clone();
        self.dirs.push(dir.clone());
        self.stack.push(dir.clone());
        // A legacy ARG file declares defaults (NAME=VALUE per line).
        let arg = dir.join("ARG");
        if arg.is_file() {
            for line in read_lines(&arg)? {
                let hook = hook_line(&line);
                let raw = hook.raw_args();
                self.arg(&hook, scope, &raw, &raw, false)?;
            }
        }
        let bf = scope.file.clone();
        if bf.is_file() {
            for line in read_lines(&bf)? {
                let cmd = line.cmd().to_ascii_uppercase();
                self.instruction(&line, &cmd, scope)?;
            }
        }
        for hook in super::HOOK_FILES {
            let path = dir.join(hook);
            if !path.is_file() {
                continue;
            }
            self.hook_file(&path, hook, scope)?;
        }
        self.stack.pop();
        Ok(())
    }

    /// A legacy per-hook file: each line is the arguments of the hook.
    fn hook_file(&mut self, path: &Path, hook: &str, scope: &mut Scope) -> R<()> {
        let lines = read_lines(path)?;
        let Some(first) = lines.first().map(hook_line) else {
            return Ok(());
        };
        match hook {
            // Fed to /bin/sh as a script, without ARG substitution.
            "CMD" | "PRE" => {
                let script = std::fs::read_to_string(path).unwrap_or_default();
                self.run(&first, &script);
            }
            // `pkg install -y $(cat PKG)`.
            "PKG" => {
                let all: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
                let w = words(&first, &all.join(" "))?;
                self.pkg(&first, &w)?;
            }
            "PF" => self.note(&first, "PF: Bastille never implemented this hook; ignored"),
            _ => {
                let cmd = match hook {
                    "FSTAB" => "MOUNT",
                    "CONFIG" => "OVERLAY",
                    h => h,
                };
                for line in &lines {
                    self.instruction(&hook_line(line), cmd, scope)?;
                }
            }
        }
        Ok(())
    }

    fn instruction(&mut self, line: &SrcLine, cmd: &str, scope: &mut Scope) -> R<()> {
        let raw = line.raw_args();
        for b in BUILTINS {
            if raw.contains(&format!("${{{b}}}")) && scope.lookup(b).is_none() {
                self.note(
                    line,
                    &format!("${{{b}}} is a value of the running jail; left as written (give --arg {b}=... to set it)"),
                );
            }
        }
        let valued = substitute(&raw, &|n| scope.lookup(n));
        if cmd != "CMD" {
            if let Some(name) = undeclared(&valued, scope) {
                return Err(with_help(
                    line.error_word(&format!("${{{name}}}"), format!("`${{{name}}}` is not a declared ARG")),
                    format!("declare it first with ARG {name}=default (Bastille would take it from the host's environment)"),
                ));
            }
        }
        let symbolic = substitute(&raw, &|n| self.keep(scope, n));
        match cmd {
            "ARG" => return self.arg(line, scope, &valued, &symbolic, false),
            "ARG+" => return self.arg(line, scope, &valued, &symbolic, true),
            "CMD" => {
                if valued.is_empty() {
                    return Err(line.error_cmd("CMD needs a command"));
                }
                let script = symbolic::script(&raw, &|n| self.script_arg(scope, n));
                self.run(line, &script);
                return Ok(());
            }
            // A start or stop: its text is a command, as CMD's.
            "SERVICE" if self.service_state(line, scope, &raw, &valued)? => return Ok(()),
            _ => {}
        }
        // The line with ${NAME} kept, where it means what Bastille's
        // substitution means; else with the values, as before.
        if symbolic != valued && self.same_words(&symbolic, &valued) {
            let (mark, tags) = (self.out.len(), self.tags.clone());
            if self.dispatch(line, cmd, scope, &symbolic).is_ok() {
                return Ok(());
            }
            self.out.truncate(mark);
            self.tags = tags;
        }
        self.dispatch(line, cmd, scope, &valued)
    }

    /// Whether `symbolic`, split into words and its placeholders replaced by
    /// the values, gives the words `valued` does.
    fn same_words(&self, symbolic: &str, valued: &str) -> bool {
        match (shlex::split(symbolic), shlex::split(valued)) {
            (Some(s), Some(v)) => {
                s.len() == v.len() && s.iter().zip(&v).all(|(s, v)| self.val(s) == *v)
            }
            _ => false,
        }
    }

    /// `s` with its placeholders replaced by the ARG values.
    pub(super) fn val(&self, s: &str) -> String {
        symbolic::resolve(s, &|n| self.emitted.get(n).cloned())
    }

    /// The placeholder for `${name}` when the Jailfile's ARG `name` has the
    /// value Bastille would substitute here; else the value.
    fn keep(&self, scope: &Scope, name: &str) -> Option<String> {
        let a = scope.find(name)?;
        if self.emitted.get(name) == Some(&a.value) {
            Some(symbolic::placeholder(name, a.required))
        } else {
            Some(a.raw.clone())
        }
    }

    pub(super) fn script_arg(&self, scope: &Scope, name: &str) -> Option<ScriptArg> {
        let a = scope.find(name)?;
        Some(ScriptArg {
            raw: a.raw.clone(),
            in_env: self.emitted.get(name) == Some(&a.value),
            required: a.required,
        })
    }

    fn dispatch(&mut self, line: &SrcLine, cmd: &str, scope: &mut Scope, args: &str) -> R<()> {
        match cmd {
            "ARG" | "ARG+" | "CMD" => unreachable!("handled by instruction"),
            "CP" | "COPY" => self.cp(line, &scope.dir, &words(line, args)?),
            "OVERLAY" => {
                let w = words(line, args)?;
                if w.is_empty() {
                    return Err(line.error_cmd("OVERLAY needs a directory of the template"));
                }
                for d in &w {
                    let d = d.trim_end_matches('/');
                    self.cp(line, &scope.dir, &[d.to_string(), "/".to_string()])?;
                }
                Ok(())
            }
            "INCLUDE" => self.include(line, scope, &words(line, args)?),
            "PKG" => self.pkg(line, &words(line, args)?),
            "HPKG" => {
                self.note(line, "HPKG: installed with the jail's own pkg, as PKG");
                self.pkg(line, &words(line, args)?)
            }
            "MOUNT" | "FSTAB" => self.mount(line, &words(line, args)?),
            "RENDER" => {
                let w = words(line, args)?;
                if w.len() != 1 {
                    return Err(with_help(
                        line.error_word(args, "RENDER takes one path inside the jail"),
                        "write one RENDER line per file or directory",
                    ));
                }
                let p = absolute(&w[0]);
                self.emit(line, format!("RENDER {}", word(&p)));
                Ok(())
            }
            "LINE_IN_FILE" | "LIF" => {
                let w = words(line, args)?;
                if w.len() != 2 {
                    return Err(with_help(
                        line.error_word(args, "LINE_IN_FILE takes a line and a file"),
                        "quote the line if it has spaces: LINE_IN_FILE \"nameserver 10.0.0.1\" /etc/resolv.conf",
                    ));
                }
                let f = absolute(&w[1]);
                self.emit(line, format!("LINE_IN_FILE {} {}", word(&w[0]), word(&f)));
                Ok(())
            }
            "TAG" | "TAGS" => self.tags(line, &words(line, args)?),
            "CONFIG" => self.config(line, &words(line, args)?),
            "LIMITS" => self.limits(line, &words(line, args)?),
            "RDR" => self.rdr(line, &words(line, args)?),
            "SERVICE" => self.service(line, &words(line, args)?),
            "SYSRC" => self.sysrc(line, &words(line, args)?),
            "RESTART" => {
                self.note(
                    line,
                    "RESTART: there is no running jail while building; ignored",
                );
                Ok(())
            }
            other => {
                let best = KNOWN
                    .iter()
                    .map(|k| (strsim::jaro_winkler(k, other), *k))
                    .fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a });
                let d = line.error_cmd(format!(
                    "unknown or unsupported Bastille instruction `{}`",
                    line.cmd()
                ));
                Err(if best.0 > 0.85 {
                    with_help(d, format!("did you mean `{}`?", best.1))
                } else {
                    with_help(d, "jbuild builds an image, not a running jail: apply this with bastille after `jbuild create`, or leave it out (see docs/bastille.md)")
                })
            }
        }
    }

    /// ARG NAME=default (and ARG+): the value from `--arg`, then the arg
    /// file, then the default. The Jailfile's ARG line keeps the default as
    /// written (`${OTHER}` in it too), so `--build-arg` works on the
    /// printed Jailfile; a value given on the command line is written in.
    fn arg(
        &mut self,
        line: &SrcLine,
        scope: &mut Scope,
        valued: &str,
        symbolic: &str,
        required: bool,
    ) -> R<()> {
        let (name, default) = match valued.split_once('=') {
            Some((n, d)) => (n.trim(), Some(d.to_string())),
            None => (valued.trim(), None),
        };
        if !is_name(name) {
            return Err(with_help(
                line.error_word(name, format!("`{name}` is not an ARG name")),
                "write ARG NAME=default with a name of letters, digits and _",
            ));
        }
        let (raw, from_default) = match scope.cli.get(name) {
            Some(v) => (v.clone(), false),
            None => match scope.in_arg_file(name) {
                Some(v) => (v, false),
                None => (default.clone().unwrap_or_default(), true),
            },
        };
        let value = if from_default {
            unquote(&raw)
        } else {
            raw.clone()
        };
        if value.is_empty() {
            if required && self.opts.leave_required {
                // Left for --build-arg: the default (read only when no
                // --build-arg gives one) fails the build, saying so.
                let text = format!("${{{name}}}");
                let decl = word(&symbolic::placeholder(name, true));
                self.push_arg(
                    scope,
                    ArgVal {
                        name: name.to_string(),
                        raw: text.clone(),
                        value: text,
                        decl: decl.clone(),
                        required: true,
                    },
                );
                self.emit(line, format!("ARG {name}={decl}"));
                self.required.push(name.to_string());
                return Ok(());
            }
            if required {
                let file = scope
                    .arg_file
                    .as_ref()
                    .map(|(p, _)| format!(" or a {name}= line in {}", p.display()))
                    .unwrap_or_else(|| " or a --arg-file with a NAME=VALUE line".into());
                return Err(with_help(
                    line.error_word(name, format!("required ARG `{name}` has no value")),
                    format!("give it with --arg {name}=VALUE{file}"),
                ));
            }
            self.notes.push(format!(
                "{}: no value for ARG `{name}`; it is empty",
                line.at()
            ));
        }
        // The default as written, when it means the value.
        let symbolic_default = symbolic
            .split_once('=')
            .map(|(_, d)| unquote(d))
            .filter(|d| from_default && symbolic::has(d) && self.val(d) == value);
        let decl = word(symbolic_default.as_deref().unwrap_or(&value));
        self.push_arg(
            scope,
            ArgVal {
                name: name.to_string(),
                raw,
                value,
                decl: decl.clone(),
                // Its references say it is required, with a value or not,
                // so a build with --arg and one with --build-arg agree.
                required,
            },
        );
        self.emit(line, format!("ARG {name}={decl}"));
        Ok(())
    }

    /// A value given with `--arg` for a name the template does not declare
    /// (JAIL_NAME and the other values of a running jail).
    fn declare_value(&mut self, scope: &mut Scope, name: &str, value: String) {
        let decl = word(&value);
        self.out
            .push((Origin::Header, Out::Text(format!("ARG {name}={decl}"))));
        self.push_arg(
            scope,
            ArgVal {
                name: name.to_string(),
                raw: value.clone(),
                value,
                decl,
                required: false,
            },
        );
    }

    fn push_arg(&mut self, scope: &mut Scope, a: ArgVal) {
        self.emitted.insert(a.name.clone(), a.value.clone());
        scope.args.push(a);
    }

    /// CMD: `jexec TARGET sh -c '<text>'`, with the jail's network; with
    /// the services a SERVICE start left running started first.
    pub(super) fn run(&mut self, line: &SrcLine, script: &str) {
        let script = super::services::with_services(&self.running, script);
        let argv = serde_json::to_string(&["/bin/sh", "-c", &script]).expect("strings serialise");
        self.emit(line, format!("RUN --network=host {argv}"));
    }

    fn pkg(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        let w: Vec<&String> = w.iter().filter(|p| p.as_str() != "-y").collect();
        if w.is_empty() {
            return Err(line.error_cmd("PKG needs at least one package"));
        }
        if let Some(flag) = w.iter().find(|p| self.val(p).starts_with('-')) {
            return Err(with_help(
                line.error_word(flag, format!("PKG option `{flag}` is not supported")),
                "PKG installs packages by name; for other pkg commands use CMD pkg ...",
            ));
        }
        let list: Vec<String> = w.iter().map(|p| word(p)).collect();
        self.emit(line, format!("PKG {}", list.join(" ")));
        Ok(())
    }

    /// CP/COPY and OVERLAY: `cp -a TEMPLATE/src ROOT/dest`. A directory
    /// without a trailing `/` lands inside `dest` when dest is `/` or ends
    /// in `/` (cp's rule for an existing directory), else it becomes
    /// `dest`; with a trailing `/` its contents are copied.
    fn cp(&mut self, line: &SrcLine, dir: &Path, w: &[String]) -> R<()> {
        let w: Vec<&String> = w
            .iter()
            .filter(|a| !matches!(a.as_str(), "-q" | "--quiet"))
            .collect();
        if w.len() != 2 {
            return Err(with_help(
                line.error_word(
                    &line.raw_args(),
                    "CP takes a source in the template and a destination in the jail",
                ),
                "CP usr / copies the template's usr directory to /usr",
            ));
        }
        let (sym_src, dest) = (w[0].as_str(), w[1].as_str());
        let src = self.val(sym_src);
        let src = src.as_str();
        if src.starts_with('/') {
            return Err(with_help(
                line.error_word(src, format!("`{src}` is a path on the host; an image can only take files from the template")),
                "copy the file into the template directory and name it relative to it",
            ));
        }
        let rel = Path::new(src);
        if rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(line.error_word(src, format!("`{src}` leaves the template directory")));
        }
        let path = dir.join(rel);
        let meta = std::fs::symlink_metadata(&path).map_err(|_| {
            with_help(
                line.error_word(
                    src,
                    format!("`{src}` is not in the template directory {}", dir.display()),
                ),
                "CP sources are relative to the template directory",
            )
        })?;
        let contents = src.ends_with('/') || src == ".";
        let dest_abs = absolute(dest);
        let target =
            if meta.is_dir() && !contents && (dest.ends_with('/') || self.val(&dest_abs) == "/") {
                let base = Path::new(sym_src)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("{}/{base}", dest_abs.trim_end_matches('/'))
            } else if meta.is_dir() {
                dest_abs
            } else {
                // A file keeps cp's reading of dest: a directory if it ends in /.
                if dest.ends_with('/') && !dest_abs.ends_with('/') {
                    format!("{dest_abs}/")
                } else {
                    dest_abs
                }
            };
        let source = dir.join(sym_src).components().collect::<PathBuf>();
        self.out.push((
            Origin::Line(line.clone()),
            Out::Copy {
                source: source.to_path_buf(),
                contents: meta.is_dir(),
                dest: target,
            },
        ));
        Ok(())
    }
}

/// The first `${NAME}` left after substitution that is not one of the
/// running jail's values.
fn undeclared(text: &str, scope: &Scope) -> Option<String> {
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        if let Some(end) = after.find('}') {
            let name = &after[..end];
            if is_name(name) && !BUILTINS.contains(&name) && scope.find(name).is_none() {
                return Some(name.to_string());
            }
        }
        rest = after;
    }
    None
}

/// A line of a legacy hook file: the whole line is the arguments.
fn hook_line(l: &SrcLine) -> SrcLine {
    SrcLine {
        args_col: l.cmd_col,
        ..l.clone()
    }
}

/// A path inside the jail: Bastille joins relative ones to the jail root.
pub(super) fn absolute(p: &str) -> String {
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("/{p}")
    }
}
