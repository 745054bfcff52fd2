//! sh(1)'s builtins as FreeBSD's sh has them: `: true false echo printf
//! test [ exit return break continue set shift export unset readonly
//! local read cd pwd command type which eval umask`; the text utilities
//! of [`super::text`] are dispatched from here too.

use super::shell::{Ctl, Found, Shell, Streams, R};

const BUILTINS: &[&str] = &[
    ":", "true", "false", "echo", "printf", "test", "[", "exit", "return", "break", "continue",
    "set", "shift", "export", "unset", "readonly", "local", "read", "cd", "pwd", "command", "type",
    "which", "eval", ".", "source", "exec", "trap", "wait", "ulimit", "umask", "alias", "unalias",
    "getopts", "jobs", "fg", "bg", "kill", "hash", "times", "[[",
];

/// The builtins and utilities that also exist as programs under
/// `/bin`, `/usr/bin` (`/bin/echo`, `/usr/bin/true`, `/usr/bin/grep`, …).
const UTILITIES: &[&str] = &[
    "true", "false", "echo", "printf", "test", "[", "which", "cat", "grep", "basename", "dirname",
    "head", "tr", "wc",
];

pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name) || super::text::is_text(name)
}

pub(crate) fn is_utility(name: &str) -> bool {
    UTILITIES.contains(&name)
}

fn err(s: &mut Streams, msg: &str) {
    s.err.extend_from_slice(format!("{msg}\n").as_bytes());
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(ch) if ch == '_' || ch.is_ascii_alphabetic())
        && c.all(|ch| ch == '_' || ch.is_ascii_alphanumeric())
}

impl Shell<'_> {
    pub(crate) fn builtin(&mut self, name: &str, args: Vec<String>, s: &mut Streams) -> R<i32> {
        if super::text::is_text(name) {
            return self.text(name, &args, s);
        }
        match name {
            ":" | "true" => Ok(0),
            "false" => Ok(1),
            "echo" => Ok(echo(&args, s)),
            "printf" => Ok(super::printf::printf(&args, s)),
            "test" => Ok(self.test(&args, s, false)),
            "[" => Ok(self.test(&args, s, true)),
            "exit" => {
                let n = self.status_arg(args.first(), s)?;
                Err(Ctl::Exit(n))
            }
            "return" => {
                let n = self.status_arg(args.first(), s)?;
                Err(Ctl::Return(n))
            }
            "break" | "continue" => {
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.parse::<u32>() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(self.shell_error(format!("{name}: Illegal number: {a}"))),
                    },
                };
                Err(if name == "break" { Ctl::Break(n) } else { Ctl::Continue(n) })
            }
            "set" => self.set_builtin(args, s),
            "shift" => {
                let n = match args.first() {
                    None => 1,
                    Some(a) => match a.parse::<usize>() {
                        Ok(n) => n,
                        Err(_) => return Err(self.shell_error(format!("shift: Illegal number: {a}"))),
                    },
                };
                if n > self.state.positional.len() {
                    return Err(self.shell_error("shift: can't shift that many".into()));
                }
                self.state.positional.drain(..n);
                Ok(0)
            }
            "export" | "readonly" => self.export(name, &args, s),
            "local" => self.local(&args),
            "unset" => {
                let mut functions = false;
                for a in &args {
                    match a.as_str() {
                        "-f" => functions = true,
                        "-v" => functions = false,
                        n if functions => {
                            self.state.functions.remove(n);
                        }
                        n => self.unset(n)?,
                    }
                }
                Ok(0)
            }
            "read" => self.read(&args, s),
            "cd" => self.cd(&args, s),
            "pwd" => {
                let cwd = self.state.cwd.clone();
                s.out.extend_from_slice(format!("{cwd}\n").as_bytes());
                Ok(0)
            }
            "command" => self.command_builtin(args, s),
            "type" | "which" => {
                let mut status = 0;
                for a in &args {
                    match self.describe(a) {
                        Some(d) if name == "which" => {
                            if d.1.starts_with('/') {
                                s.out.extend_from_slice(format!("{}\n", d.1).as_bytes())
                            } else {
                                s.out.extend_from_slice(format!("{a}: shell built-in command\n").as_bytes())
                            }
                        }
                        Some((kind, _)) => s.out.extend_from_slice(format!("{a} is {kind}\n").as_bytes()),
                        None => {
                            if name == "type" {
                                err(s, &format!("{a}: not found"));
                            }
                            status = 1
                        }
                    }
                }
                Ok(status)
            }
            "eval" => {
                let text = args.join(" ");
                self.eval_text(&text, s)
            }
            "umask" if args.is_empty() => {
                s.out.extend_from_slice(b"0022\n");
                Ok(0)
            }
            "[[" => Err(self.unsupported("`[[ … ]]` (bash)")),
            "." | "source" => Err(self.unsupported(format!(
                "`{name}` (including another file: a package script has none of its own in the image to read)"
            ))),
            other => Err(self.unsupported(format!("`{other}`"))),
        }
    }

    fn status_arg(&self, a: Option<&String>, _s: &mut Streams) -> R<i32> {
        match a {
            None => Ok(self.status),
            Some(a) => match a.parse::<i64>() {
                Ok(n) if n >= 0 => Ok((n & 0xff) as i32),
                _ => Err(self.shell_error(format!("Illegal number: {a}"))),
            },
        }
    }

    fn set_builtin(&mut self, args: Vec<String>, s: &mut Streams) -> R<i32> {
        if args.is_empty() {
            let lines: Vec<String> = self
                .state
                .vars
                .iter()
                .map(|(k, v)| format!("{k}={}\n", quote(&v.value)))
                .collect();
            for l in lines {
                s.out.extend_from_slice(l.as_bytes());
            }
            return Ok(0);
        }
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a == "--" {
                self.state.positional = args[i + 1..].to_vec();
                return Ok(0);
            }
            let (on, flags) = match (a.strip_prefix('-'), a.strip_prefix('+')) {
                (Some(f), _) if !f.is_empty() => (true, f),
                (_, Some(f)) if !f.is_empty() => (false, f),
                _ => {
                    self.state.positional = args[i..].to_vec();
                    return Ok(0);
                }
            };
            if flags == "o" {
                i += 1;
                let Some(opt) = args.get(i) else {
                    return Ok(0);
                };
                let letter = match opt.as_str() {
                    "errexit" => 'e',
                    "xtrace" => 'x',
                    "noglob" => 'f',
                    "nounset" => 'u',
                    o => return Err(self.shell_error(format!("set: Illegal option -o {o}"))),
                };
                self.option(letter, on)?;
            } else {
                for c in flags.chars() {
                    self.option(c, on)?;
                }
            }
            i += 1;
        }
        Ok(0)
    }

    fn option(&mut self, c: char, on: bool) -> R<()> {
        let o = &mut self.state.opts;
        match c {
            'e' => o.errexit = on,
            'x' => o.xtrace = on,
            'f' => o.noglob = on,
            'u' => o.nounset = on,
            // Harmless: no jobs, no history, no interactive shell.
            'a' | 'b' | 'C' | 'h' | 'm' | 'n' | 'v' | 'E' | 'V' | 'I' | 'p' | 'P' | 'T' => {
                if c == 'a' || c == 'n' || c == 'C' {
                    return Err(self.unsupported(format!("`set -{c}`")));
                }
            }
            _ => return Err(self.shell_error(format!("set: Illegal option -{c}"))),
        }
        Ok(())
    }

    fn export(&mut self, name: &str, args: &[String], s: &mut Streams) -> R<i32> {
        let readonly = name == "readonly";
        let names: Vec<&String> = args.iter().filter(|a| *a != "-p").collect();
        if names.is_empty() {
            let lines: Vec<String> = self
                .state
                .vars
                .iter()
                .filter(|(_, v)| if readonly { v.readonly } else { v.exported })
                .map(|(k, v)| format!("{name} {k}={}\n", quote(&v.value)))
                .collect();
            for l in lines {
                s.out.extend_from_slice(l.as_bytes());
            }
            return Ok(0);
        }
        for a in names {
            let (n, v) = match a.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (a.as_str(), None),
            };
            if !valid_name(n) {
                return Err(self.shell_error(format!("{name}: {n}: bad variable name")));
            }
            if let Some(v) = v {
                self.set(n, v)?;
            } else if !self.state.vars.contains_key(n) {
                self.set(n, String::new())?;
                if !readonly {
                    // `export X` of an unset X marks it without a value;
                    // kept as empty (nothing here reads the environment).
                }
            }
            let var = self.state.vars.get_mut(n).expect("just set");
            if readonly {
                var.readonly = true;
            } else {
                var.exported = true;
            }
        }
        Ok(0)
    }

    fn local(&mut self, args: &[String]) -> R<i32> {
        if self.state.locals.is_empty() {
            return Err(self.shell_error("local: not in a function".into()));
        }
        for a in args {
            let (n, v) = match a.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (a.clone(), None),
            };
            if !valid_name(&n) {
                return Err(self.shell_error(format!("local: {n}: bad variable name")));
            }
            let old = self.state.vars.get(&n).cloned();
            self.state
                .locals
                .last_mut()
                .expect("in a function")
                .push((n.clone(), old.clone()));
            match v {
                Some(v) => self.set(&n, v)?,
                None if old.is_none() => {}
                None => {}
            }
        }
        Ok(0)
    }

    fn read(&mut self, args: &[String], s: &mut Streams) -> R<i32> {
        let mut raw = false;
        let mut names = Vec::new();
        for a in args {
            match a.as_str() {
                "-r" => raw = true,
                o if o.starts_with('-') && names.is_empty() => {
                    return Err(self.unsupported(format!("`read {o}`")));
                }
                n => names.push(n.to_string()),
            }
        }
        if names.is_empty() {
            return Err(self.shell_error("read: arg count".into()));
        }
        let rest = s.rest();
        if rest.is_empty() {
            for n in &names {
                self.set(n, String::new())?;
            }
            return Ok(1);
        }
        let mut line = String::new();
        let mut used = 0;
        let mut eof = true;
        let text = String::from_utf8_lossy(rest).into_owned();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            used += c.len_utf8();
            if c == '\n' {
                eof = false;
                break;
            }
            if c == '\\' && !raw {
                match chars.next() {
                    Some('\n') => {
                        used += 1;
                        continue;
                    }
                    Some(n) => {
                        used += n.len_utf8();
                        line.push('\u{0}');
                        line.push(n);
                        continue;
                    }
                    None => break,
                }
            }
            line.push(c);
        }
        s.pos += used;
        let ifs = self.get("IFS").unwrap_or(" \t\n").to_string();
        let values = split_read(&line, &ifs, names.len());
        for (i, n) in names.iter().enumerate() {
            let v = values
                .get(i)
                .cloned()
                .unwrap_or_default()
                .replace('\u{0}', "");
            self.set(n, v)?;
        }
        Ok(i32::from(eof))
    }

    fn cd(&mut self, args: &[String], s: &mut Streams) -> R<i32> {
        let target = match args.iter().find(|a| *a != "-P" && *a != "-L") {
            Some(d) if d == "-" => self.get("OLDPWD").unwrap_or("/").to_string(),
            Some(d) => d.clone(),
            None => self.get("HOME").unwrap_or("/").to_string(),
        };
        let logical = super::path::logical(&self.state.cwd, &target);
        let is_dir = super::path::host(&self.root, "/", &logical, true).is_ok_and(|h| h.is_dir());
        if !is_dir {
            err(s, &format!("cd: {target}: No such file or directory"));
            return Ok(2);
        }
        let old = std::mem::replace(&mut self.state.cwd, logical.clone());
        self.set("OLDPWD", old)?;
        self.set("PWD", logical)?;
        Ok(0)
    }

    /// What `name` is for `command -v`, `type`, `which`: a description
    /// and the word `command -v` prints.
    pub(crate) fn describe(&self, name: &str) -> Option<(String, String)> {
        match self.find(name) {
            Found::Function(_) => Some(("a shell function".into(), name.to_string())),
            Found::Builtin if name.contains('/') => Some((name.to_string(), name.to_string())),
            Found::Builtin => Some(("a shell builtin".into(), name.to_string())),
            Found::Native(_) if name.contains('/') => Some((name.to_string(), name.to_string())),
            Found::Native(_) => {
                let p = super::files::path_of(name);
                Some((p.clone(), p))
            }
            Found::Host if self.host.knows(name) => Some((name.to_string(), name.to_string())),
            Found::Host => None,
        }
    }

    fn command_builtin(&mut self, args: Vec<String>, s: &mut Streams) -> R<i32> {
        let mut i = 0;
        let mut mode = None;
        while let Some(a) = args.get(i) {
            match a.as_str() {
                "-v" | "-V" => mode = Some(a.clone()),
                "-p" => {}
                "--" => {
                    i += 1;
                    break;
                }
                _ => break,
            }
            i += 1;
        }
        let rest = &args[i.min(args.len())..];
        match mode.as_deref() {
            Some(m) => {
                let mut status = 0;
                for a in rest {
                    match self.describe(a) {
                        Some((kind, word)) => {
                            let line = if m == "-v" {
                                word
                            } else {
                                format!("{a} is {kind}")
                            };
                            s.out.extend_from_slice(format!("{line}\n").as_bytes());
                        }
                        None => {
                            if m == "-V" {
                                err(s, &format!("{a}: not found"));
                            }
                            status = 127;
                        }
                    }
                }
                Ok(status)
            }
            None => {
                let Some(name) = rest.first().cloned() else {
                    return Ok(0);
                };
                // `command name`: functions skipped.
                let found = match self.find(&name) {
                    Found::Function(_) => {
                        if let Some(n) = super::files::native(&name) {
                            Found::Native(n)
                        } else {
                            Found::Host
                        }
                    }
                    f => f,
                };
                self.count_command()?;
                self.run_found(&name, found, rest[1..].to_vec(), s)
            }
        }
    }
}

/// `echo` as FreeBSD's sh has it: `-n` no newline, `-e` escapes (with
/// `\c` ending the output).
pub(crate) fn echo(args: &[String], s: &mut Streams) -> i32 {
    let mut newline = true;
    let mut escapes = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let Some(flags) = a.strip_prefix('-') else {
            break;
        };
        if flags.is_empty() || !flags.chars().all(|c| c == 'n' || c == 'e') {
            break;
        }
        newline &= !flags.contains('n');
        escapes |= flags.contains('e');
        i += 1;
    }
    let mut out = String::new();
    for (k, a) in args[i..].iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        if escapes {
            let (t, stop) = super::printf::escapes(a, true);
            out.push_str(&t);
            if stop {
                s.out.extend_from_slice(out.as_bytes());
                return 0;
            }
        } else {
            out.push_str(a);
        }
    }
    if newline {
        out.push('\n');
    }
    s.out.extend_from_slice(out.as_bytes());
    0
}

/// Splits a line read by `read` into `n` values (the last takes the
/// rest); `\0` marks a character escaped by a backslash (never a
/// separator).
fn split_read(line: &str, ifs: &str, n: usize) -> Vec<String> {
    let white = |c: char| ifs.contains(c) && c.is_whitespace();
    let line = line.trim_start_matches(white);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut escaped = false;
    while let Some(c) = chars.next() {
        if c == '\u{0}' {
            escaped = true;
            cur.push(c);
            continue;
        }
        if !escaped && ifs.contains(c) && out.len() + 1 < n {
            out.push(std::mem::take(&mut cur));
            while chars.peek().is_some_and(|&p| white(p)) {
                chars.next();
            }
            if !c.is_whitespace() {
                // A non-white separator already ended this value.
            }
            continue;
        }
        escaped = false;
        cur.push(c);
    }
    let last = cur.trim_end_matches(white).to_string();
    out.push(last);
    out
}

/// A value quoted for `set` and `export -p`.
fn quote(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,+@%=".contains(c))
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}
