//! The interpreter's state: variables, positional parameters, functions,
//! the working directory inside the root, options, and the budget of
//! [`Limits`] used so far.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use brush_parser::ast;

use super::limits::Used;
use super::{Env, Host, Limits, Ran, Script, ScriptError};

/// What a name runs.
pub(crate) enum Found {
    Function(std::rc::Rc<ast::FunctionBody>),
    Builtin,
    Native(super::files::Native),
    Host,
}

/// A variable's value and attributes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Var {
    pub value: String,
    pub exported: bool,
    pub readonly: bool,
}

/// `set -e`, `-x`, `-f`, `-u`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Opts {
    pub errexit: bool,
    pub xtrace: bool,
    pub noglob: bool,
    pub nounset: bool,
}

/// What a subshell copies and then forgets.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub vars: BTreeMap<String, Var>,
    pub var_bytes: usize,
    pub positional: Vec<String>,
    pub functions: BTreeMap<String, Rc<ast::FunctionBody>>,
    /// The working directory as the jail sees it (absolute, no `..`).
    pub cwd: String,
    pub opts: Opts,
    /// Per function call: the variables `local` saved, restored on return.
    pub locals: Vec<Vec<(String, Option<Var>)>>,
}

/// Why execution leaves the normal flow.
#[derive(Debug)]
pub(crate) enum Ctl {
    Break(u32),
    Continue(u32),
    Return(i32),
    Exit(i32),
    /// sh's own error (a readonly variable assigned, `${X?}` unset, bad
    /// arithmetic, a bad redirection): its message, then exit status 2.
    Error(String),
    Fail(ScriptError),
}

impl From<ScriptError> for Ctl {
    fn from(e: ScriptError) -> Self {
        Ctl::Fail(e)
    }
}

pub(crate) type R<T> = Result<T, Ctl>;

/// A command's standard streams while the interpreter runs: input read
/// from a cursor (`read` takes a line at a time), outputs gathered.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    pub input: Rc<Vec<u8>>,
    pub pos: usize,
    pub out: Vec<u8>,
    pub err: Vec<u8>,
}

impl Streams {
    pub fn with_input(input: Vec<u8>) -> Streams {
        Streams {
            input: Rc::new(input),
            ..Streams::default()
        }
    }

    /// The input not read yet.
    pub fn rest(&self) -> &[u8] {
        &self.input[self.pos.min(self.input.len())..]
    }
}

pub(crate) struct Shell<'h> {
    pub root: PathBuf,
    pub host: &'h mut dyn Host,
    pub limits: Limits,
    pub used: Used,
    pub state: State,
    /// `$?`.
    pub status: i32,
    /// `$0`.
    pub arg0: String,
    /// The line of the command running (1-based, in the script).
    pub line: usize,
    /// Added to a nested program's lines (`eval`, `$(…)`) to name the
    /// script's line.
    pub line_base: usize,
    /// Inside a condition (`if`, `while`, `!`, left of `&&`/`||`): `set -e`
    /// does not apply.
    pub condition: usize,
    /// The status of the last `$(…)` of the command being expanded (a
    /// command of assignments only exits with it).
    pub last_substitution: Option<i32>,
}

impl<'h> Shell<'h> {
    pub fn new(root: &Path, env: &Env, host: &'h mut dyn Host, limits: &Limits) -> Shell<'h> {
        let mut vars = BTreeMap::new();
        let mut var_bytes = 0;
        for (k, v) in &env.vars {
            var_bytes += k.len() + v.len();
            vars.insert(
                k.clone(),
                Var {
                    value: v.clone(),
                    exported: true,
                    readonly: false,
                },
            );
        }
        for (k, v) in [
            ("IFS", " \t\n"),
            (
                "PATH",
                "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin",
            ),
        ] {
            if !vars.contains_key(k) {
                var_bytes += k.len() + v.len();
                vars.insert(
                    k.to_string(),
                    Var {
                        value: v.to_string(),
                        exported: k == "PATH",
                        readonly: false,
                    },
                );
            }
        }
        Shell {
            root: root.to_path_buf(),
            host,
            limits: limits.clone(),
            used: Used::default(),
            state: State {
                vars,
                var_bytes,
                positional: env.args.clone(),
                functions: BTreeMap::new(),
                cwd: "/".to_string(),
                opts: Opts::default(),
                locals: Vec::new(),
            },
            status: 0,
            arg0: "sh".to_string(),
            line: 1,
            line_base: 1,
            condition: 0,
            last_substitution: None,
        }
    }

    /// Runs the script whole: its status is the last command's, or
    /// `exit`'s.
    pub fn run_script(mut self, script: &Script) -> Result<Ran, ScriptError> {
        let mut s = Streams::default();
        let status = match self.program(&script.program, &mut s) {
            Ok(st) => st,
            Err(Ctl::Exit(n)) => n,
            Err(Ctl::Return(n)) => n,
            Err(Ctl::Break(_)) | Err(Ctl::Continue(_)) => self.status,
            Err(Ctl::Error(m)) => {
                s.err.extend_from_slice(format!("sh: {m}\n").as_bytes());
                2
            }
            Err(Ctl::Fail(e)) => return Err(e),
        };
        Ok(Ran {
            status,
            stdout: s.out,
            stderr: s.err,
        })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.state.vars.get(name).map(|v| v.value.as_str())
    }

    /// Sets a variable, within the limits; a readonly one is sh's error.
    pub fn set(&mut self, name: &str, value: String) -> R<()> {
        if value.len() > self.limits.variable_bytes {
            return Err(self.limit(format!(
                "{} bytes in one variable (`{name}`)",
                self.limits.variable_bytes
            )));
        }
        let old = self.state.vars.get(name);
        if old.is_some_and(|v| v.readonly) {
            return Err(self.shell_error(format!("{name}: is read only")));
        }
        let old_len = old.map_or(0, |v| name.len() + v.value.len());
        let total = self.state.var_bytes - old_len + name.len() + value.len();
        if total > self.limits.variable_bytes.saturating_mul(10) {
            return Err(self.limit(format!(
                "{} bytes in all variables",
                self.limits.variable_bytes.saturating_mul(10)
            )));
        }
        self.state.var_bytes = total;
        let exported = old.is_some_and(|v| v.exported);
        self.state.vars.insert(
            name.to_string(),
            Var {
                value,
                exported,
                readonly: false,
            },
        );
        Ok(())
    }

    pub fn unset(&mut self, name: &str) -> R<()> {
        if self.state.vars.get(name).is_some_and(|v| v.readonly) {
            return Err(self.shell_error(format!("{name}: is read only")));
        }
        if let Some(v) = self.state.vars.remove(name) {
            self.state.var_bytes -= name.len() + v.value.len();
        }
        Ok(())
    }

    /// A [`ScriptError::Limit`] at the current line.
    pub fn limit(&self, what: String) -> Ctl {
        Ctl::Fail(ScriptError::Limit {
            what,
            line: self.line,
        })
    }

    pub fn unsupported(&self, what: impl Into<String>) -> Ctl {
        Ctl::Fail(ScriptError::Unsupported {
            what: what.into(),
            line: self.line,
        })
    }

    /// An error sh reports and then exits with status 2 (a readonly
    /// variable assigned, `${X?}` unset, bad arithmetic): the script
    /// ends as sh ends it, non-zero; the message is kept for stderr.
    pub fn shell_error(&self, message: String) -> Ctl {
        Ctl::Error(format!("line {}: {message}", self.line))
    }

    /// Counts one command run against the limit.
    pub fn count_command(&mut self) -> R<()> {
        self.used.commands += 1;
        if self.used.commands > self.limits.commands {
            return Err(self.limit(format!("{} commands run", self.limits.commands)));
        }
        Ok(())
    }

    /// Counts one loop iteration against the limit.
    pub fn count_iteration(&mut self) -> R<()> {
        self.used.loop_iterations += 1;
        if self.used.loop_iterations > self.limits.loop_iterations {
            return Err(self.limit(format!("{} loop iterations", self.limits.loop_iterations)));
        }
        Ok(())
    }

    /// Enters one level of nesting (`what` for the error); pair with
    /// [`Shell::leave`].
    pub fn enter(&mut self, what: &str) -> R<()> {
        self.used.depth += 1;
        if self.used.depth > self.limits.call_depth {
            self.used.depth -= 1;
            return Err(self.limit(format!("{} nested calls ({what})", self.limits.call_depth)));
        }
        Ok(())
    }

    pub fn leave(&mut self) {
        self.used.depth -= 1;
    }

    /// Checks the streams against the output limit.
    pub fn check_output(&self, s: &Streams) -> R<()> {
        let max = self.limits.output_bytes;
        if s.out.len() > max || s.err.len() > max {
            return Err(self.limit(format!("{max} bytes of output")));
        }
        Ok(())
    }
}
