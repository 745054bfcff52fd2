//! A simple command: its assignments, words and redirections expanded,
//! then the command found in sh's order — a function, a builtin, one of
//! jbuild's own utilities and file commands (also under their FreeBSD
//! paths, `/bin/mkdir`, `/usr/bin/install`, …), else the caller's
//! [`super::Host`].

use brush_parser::ast::{self, CommandPrefixOrSuffixItem as Item, IoRedirect};

use super::shell::{Ctl, Found, Shell, Streams, R};
use super::{CommandError, Io, ScriptError};

/// Directories whose programs jbuild may carry out itself when a script
/// names them by path.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/usr/bin", "/usr/sbin"];

/// sh's special builtins: their assignments stay, their errors end the
/// script.
const SPECIAL: &[&str] = &[
    ":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set",
    "shift", "times", "trap", "unset",
];

impl Shell<'_> {
    pub(crate) fn simple(&mut self, c: &ast::SimpleCommand, s: &mut Streams) -> R<i32> {
        self.count_command()?;
        self.last_substitution = None;
        let mut assignments: Vec<&ast::Assignment> = Vec::new();
        let mut redirects: Vec<IoRedirect> = Vec::new();
        let mut words: Vec<String> = Vec::new();
        for item in c.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                Item::AssignmentWord(a, _) => assignments.push(a),
                Item::IoRedirect(r) => redirects.push(r.clone()),
                Item::Word(w) => words.extend(self.expand_fields(&w.value, s)?),
                Item::ProcessSubstitution(..) => {
                    return Err(self.unsupported("process substitution (bash)"))
                }
            }
        }
        if let Some(w) = &c.word_or_name {
            words.extend(self.expand_fields(&w.value, s)?);
        }
        for item in c.suffix.iter().flat_map(|p| p.0.iter()) {
            match item {
                Item::IoRedirect(r) => redirects.push(r.clone()),
                Item::Word(w) => words.extend(self.expand_fields(&w.value, s)?),
                // `export X=$y`: one word, not split.
                Item::AssignmentWord(_, w) => words.push(self.expand_string(&w.value, s)?),
                Item::ProcessSubstitution(..) => {
                    return Err(self.unsupported("process substitution (bash)"))
                }
            }
        }
        self.check_words(&words)?;
        let mut values = Vec::new();
        for a in &assignments {
            let name = match &a.name {
                ast::AssignmentName::VariableName(n) => n.clone(),
                ast::AssignmentName::ArrayElementName(..) => {
                    return Err(self.unsupported("arrays (bash)"))
                }
            };
            let value = match &a.value {
                ast::AssignmentValue::Scalar(w) => self.expand_string(&w.value, s)?,
                ast::AssignmentValue::Array(_) => return Err(self.unsupported("arrays (bash)")),
            };
            if a.append {
                return Err(self.unsupported("`+=` (bash)"));
            }
            values.push((name, value));
        }
        if self.state.opts.xtrace {
            let mut line: Vec<String> = values.iter().map(|(n, v)| format!("{n}={v}")).collect();
            line.extend(words.iter().cloned());
            s.err
                .extend_from_slice(format!("+ {}\n", line.join(" ")).as_bytes());
        }
        let Some(name) = words.first().cloned() else {
            // Assignments only: they stay; the status is the last `$(…)`'s.
            for (n, v) in values {
                self.set(&n, v)?;
            }
            let status = self.last_substitution.unwrap_or(0);
            return self.with_redirects(&redirects, s, |_, _| Ok(status));
        };
        let args: Vec<String> = words[1..].to_vec();
        let found = self.find(&name);
        // Assignments before a special builtin stay; before anything else
        // they hold for the command only.
        let keep = matches!(found, Found::Builtin) && SPECIAL.contains(&name.as_str());
        let mut saved = Vec::new();
        for (n, v) in values {
            if !keep {
                saved.push((n.clone(), self.state.vars.get(&n).cloned()));
            }
            self.set(&n, v)?;
        }
        let r = self.with_redirects(&redirects, s, |sh, s| sh.run_found(&name, found, args, s));
        for (n, old) in saved.into_iter().rev() {
            match old {
                Some(v) => {
                    let readonly = v.readonly;
                    self.set(&n, v.value)?;
                    if let Some(var) = self.state.vars.get_mut(&n) {
                        var.readonly = readonly;
                        var.exported = v.exported;
                    }
                }
                None => self.unset(&n)?,
            }
        }
        let status = r?;
        self.check_output(s)?;
        Ok(status)
    }

    /// A command's words together stay within one variable's bound (as
    /// FreeBSD's ARG_MAX bounds a command line): `set -- "$@" "$@"` in a
    /// loop cannot fill memory.
    pub(crate) fn check_words(&self, words: &[String]) -> R<()> {
        let total: usize = words.iter().map(|w| w.len() + 8).sum();
        if total > self.limits.variable_bytes {
            return Err(self.limit(format!(
                "{} bytes in one command's words",
                self.limits.variable_bytes
            )));
        }
        Ok(())
    }

    /// What `name` runs.
    pub(crate) fn find(&self, name: &str) -> Found {
        if !name.contains('/') {
            if let Some(f) = self.state.functions.get(name) {
                return Found::Function(std::rc::Rc::clone(f));
            }
            if super::builtins::is_builtin(name) {
                return Found::Builtin;
            }
            if let Some(n) = super::files::native(name) {
                return Found::Native(n);
            }
            return Found::Host;
        }
        let (dir, base) = name.rsplit_once('/').unwrap_or(("", name));
        if SYSTEM_DIRS.contains(&dir) {
            if super::builtins::is_utility(base) {
                return Found::Builtin;
            }
            if let Some(n) = super::files::native(base) {
                return Found::Native(n);
            }
        }
        Found::Host
    }

    pub(crate) fn run_found(
        &mut self,
        name: &str,
        found: Found,
        args: Vec<String>,
        s: &mut Streams,
    ) -> R<i32> {
        match found {
            Found::Function(body) => self.call(&body, args, s),
            Found::Builtin => {
                let base = name.rsplit('/').next().unwrap_or(name);
                self.builtin(base, args, s)
            }
            Found::Native(n) => {
                let base = name.rsplit('/').next().unwrap_or(name).to_string();
                let root = self.root.clone();
                let cx = super::files::Cx {
                    root: &root,
                    cwd: &self.state.cwd.clone(),
                    max_entries: self.limits.glob_matches,
                };
                let input = std::rc::Rc::clone(&s.input);
                let mut io = Io {
                    stdin: &input[s.pos.min(input.len())..],
                    stdout: &mut s.out,
                    stderr: &mut s.err,
                };
                let r = n(&cx, &args, &mut io);
                self.command_result(&base, r)
            }
            Found::Host => {
                let input = std::rc::Rc::clone(&s.input);
                let mut io = Io {
                    stdin: &input[s.pos.min(input.len())..],
                    stdout: &mut s.out,
                    stderr: &mut s.err,
                };
                let r = self.host.command(name, &args, &mut io);
                self.command_result(name, r)
            }
        }
    }

    /// A command's `Err` stops the script, naming it and the line.
    pub(crate) fn command_result(&self, name: &str, r: Result<i32, CommandError>) -> R<i32> {
        r.map_err(|source| {
            Ctl::Fail(ScriptError::Command {
                command: name.to_string(),
                line: self.line,
                source,
            })
        })
    }
}
