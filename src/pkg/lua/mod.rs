//! Package Lua scripts, run as pkg(8) 2.x runs them, against an image's
//! root on any host (issue 31 item 7; `docs/packages.md`).
//!
//! pkg runs each script of a package's `lua_scripts` (`pre-install`,
//! `post-install`, `pre-deinstall`, `post-deinstall`) in a fresh Lua 5.4
//! state with its `pkg` library and globals (pkg's `libpkg/lua_scripts.c`
//! and `libpkg/lua.c`); the ports tree's keywords make most of them
//! (`@sample` copies `foo.sample` to `foo` when `foo` is absent, and
//! removes `foo` on deinstall when it still matches). So does this module,
//! with one state per script:
//!
//! - globals `pkg_name`, `pkg_prefix`, `pkg_rootdir` (`/`: file functions
//!   take paths as the image sees them), `pkg_upgrade`, and `arg` when the
//!   script's first line is `-- args: …`;
//! - `pkg.print_msg`, `prefixed_path`, `filecmp`, `copy`, `stat`,
//!   `readdir`, `symlink` with pkg's return conventions (`files`);
//! - `pkg.exec` (and `exec_capture`) cannot run a FreeBSD program here:
//!   the script fails naming the command (shell and commands are the next
//!   issue's);
//! - the sandbox (`sandbox`): every path is resolved inside the root as
//!   the jail would resolve it, so a symlink never leads to the host, and
//!   a path climbing above the root with `..` is refused; `io.open`,
//!   `io.lines`, `os.remove`, `os.rename` are confined to the root;
//!   `os.execute`, `os.exit`, `io.popen`, `require` (no modules, C or
//!   Lua), `dofile`, `loadfile`, binary chunks and host temporary files are
//!   refused; `os.getenv` sees no host variable; what `print`, `io.write`
//!   and `io.stderr` print is collected with `pkg.print_msg`'s messages for
//!   the caller to show;
//! - bounded ([`Limits`]): instructions, memory and time, so a script that
//!   loops or allocates without end fails naming the package and script.
//!   `pcall`, `xpcall` and `coroutine.resume` cannot swallow that failure,
//!   and `__gc` finalizers (which Lua runs with hooks off) are refused.
//!   One C call that runs long on its own (a pathological `string.find`
//!   pattern on a long string) is bounded by the memory limit's input size,
//!   not interrupted: Lua checks limits between instructions.
//!
//! A refused operation, an escape or `pkg.exec` fails the script even when
//! the script catches the error: what it meant to do did not happen.
//!
//! Why mlua with `lua54` and `vendored`: it is the maintained Rust binding
//! of the reference interpreter (the one pkg links), builds Lua 5.4 from
//! the sources in the crates registry (no system liblua on Linux builders
//! or FreeBSD hosts, and the same interpreter everywhere), and gives the
//! memory limit and instruction hooks the bounds need. It builds offline
//! from the registry and for `x86_64-unknown-freebsd`.

mod files;
mod sandbox;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{ChunkMode, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Value, VmState};

/// Who runs a script: the package and which of its scripts it is.
#[derive(Debug, Clone)]
pub struct ScriptEnv {
    /// `pkg_name`.
    pub package: String,
    /// `pkg_prefix`, e.g. `/usr/local`: relative paths given to
    /// `pkg.prefixed_path` are under it.
    pub prefix: String,
    /// Which script, as errors name it: `post-install`, `pre-deinstall`…
    pub script: String,
    /// `pkg_upgrade`: the package replaces an installed version.
    pub upgrade: bool,
}

/// Bounds on one script.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Lua VM instructions (counted in steps of [`HOOK_STEP`]).
    pub instructions: u64,
    /// Bytes the Lua state may hold at once.
    pub memory: usize,
    /// Wall-clock time.
    pub time: Duration,
}

impl Default for Limits {
    /// Far above what pkg's keyword scripts need (an `@sample` runs within
    /// 10 000 instructions and 1 MiB): 200 million instructions, 64 MiB,
    /// 60 s.
    fn default() -> Limits {
        Limits {
            instructions: 200_000_000,
            memory: 64 << 20,
            time: Duration::from_secs(60),
        }
    }
}

/// Instructions between two checks of the limits.
pub const HOOK_STEP: u32 = 1000;

/// Where a collected line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// `pkg.print_msg`: pkg shows these to the user.
    Message,
    /// `print`, `io.write`, `io.stdout:write`.
    Stdout,
    /// `io.stderr:write`.
    Stderr,
}

/// One thing a script printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub stream: Stream,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LuaError {
    #[error("package `{package}`: its {script} Lua script failed: {reason}")]
    Failed {
        package: String,
        script: String,
        reason: String,
    },
    #[error("package `{package}`: its {script} Lua script returned {code} (pkg takes a non-zero return as failure)")]
    Returned {
        package: String,
        script: String,
        code: String,
    },
    #[error("package `{package}`: its {script} Lua script went over its limit of {limit} {what} and was stopped")]
    Limit {
        package: String,
        script: String,
        what: &'static str,
        limit: String,
    },
    #[error("package `{package}`: its {script} Lua script runs `{command}` (pkg.exec): jbuild runs no FreeBSD program while it installs packages; install it with pkg(8) on a FreeBSD host (`[pkg] installer = \"pkg\"`)")]
    Exec {
        package: String,
        script: String,
        command: String,
    },
    #[error("package `{package}`: its {script} Lua script reaches `{path}`, outside the image's root: refused")]
    Escape {
        package: String,
        script: String,
        path: String,
    },
    #[error("package `{package}`: its {script} Lua script uses {what}, which package scripts may not use in jbuild's sandbox")]
    Refused {
        package: String,
        script: String,
        what: String,
    },
    #[error("setting up the Lua interpreter")]
    Internal(#[source] mlua::Error),
}

impl crate::blame::Blame for LuaError {
    /// A script that fails is the package's (exit 1); only a state that
    /// cannot be made is jbuild's.
    fn is_user_error(&self) -> bool {
        !matches!(self, LuaError::Internal(_))
    }
}

/// What the sandbox noticed while the script ran.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub messages: Vec<Message>,
    pub escape: Option<String>,
    pub exec: Option<String>,
    pub refused: Option<String>,
}

/// What the functions given to the script share.
pub(crate) struct Shared {
    pub root: PathBuf,
    pub prefix: String,
    pub seen: RefCell<Seen>,
    /// Set once a limit is passed: from then on every check fails.
    pub exhausted: Cell<Option<&'static str>>,
}

/// Runs one script of `env.package` against the image at `root`; returns
/// what it printed, in order.
pub fn run(
    root: &Path,
    script: &str,
    env: &ScriptEnv,
    limits: Limits,
) -> Result<Vec<Message>, LuaError> {
    let libs = StdLib::COROUTINE
        | StdLib::TABLE
        | StdLib::IO
        | StdLib::OS
        | StdLib::STRING
        | StdLib::UTF8
        | StdLib::MATH;
    let lua = Lua::new_with(libs, LuaOptions::default()).map_err(LuaError::Internal)?;
    let shared = Rc::new(Shared {
        root: root.to_path_buf(),
        prefix: env.prefix.clone(),
        seen: RefCell::new(Seen::default()),
        exhausted: Cell::new(None),
    });
    setup(&lua, &shared, script, env).map_err(LuaError::Internal)?;
    lua.set_memory_limit(limits.memory)
        .map_err(LuaError::Internal)?;
    bound(&lua, &shared, limits).map_err(LuaError::Internal)?;

    let outcome = lua
        .load(script)
        .set_name(format!("={} {}", env.package, env.script))
        .set_mode(ChunkMode::Text)
        .call::<MultiValue>(());
    lua.remove_global_hook();
    judge(outcome, &shared, env, limits)
}

/// The globals, the `pkg` library and the sandbox.
fn setup(lua: &Lua, shared: &Rc<Shared>, script: &str, env: &ScriptEnv) -> mlua::Result<()> {
    let g = lua.globals();
    g.set("pkg_name", env.package.as_str())?;
    g.set("pkg_prefix", env.prefix.as_str())?;
    g.set("pkg_rootdir", "/")?;
    g.set("pkg_upgrade", env.upgrade)?;
    if let Some(line) = script.strip_prefix("-- args: ") {
        let line = line.split('\n').next().unwrap_or_default();
        g.set("arg", lua.create_sequence_from(tokenize(line))?)?;
    }
    g.set("pkg", files::library(lua, shared)?)?;
    sandbox::install(lua, shared)
}

/// The words of a `-- args:` line: split at blanks, a quoted word (`"…"`
/// or `'…'`) kept whole without its quotes.
fn tokenize(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else { break };
        let mut word = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            for c in chars.by_ref() {
                if c == first {
                    break;
                }
                word.push(c);
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        out.push(word);
    }
    out
}

/// The instruction and time bounds: a hook on every thread, coroutines
/// included (they inherit the global hook).
fn bound(lua: &Lua, shared: &Rc<Shared>, limits: Limits) -> mlua::Result<()> {
    let used = Cell::new(0u64);
    let deadline = Instant::now() + limits.time;
    let shared = Rc::clone(shared);
    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(HOOK_STEP),
        move |_, _| {
            if shared.exhausted.get().is_none() {
                used.set(used.get() + u64::from(HOOK_STEP));
                if used.get() > limits.instructions {
                    shared.exhausted.set(Some("instructions"));
                } else if Instant::now() > deadline {
                    shared.exhausted.set(Some("time"));
                }
            }
            match shared.exhausted.get() {
                Some(what) => Err(mlua::Error::runtime(format!(
                    "stopped: over the script's limit of {what}"
                ))),
                None => Ok(VmState::Continue),
            }
        },
    )
}

/// The script's outcome as pkg judges it, the sandbox's refusals first.
fn judge(
    outcome: mlua::Result<MultiValue>,
    shared: &Shared,
    env: &ScriptEnv,
    limits: Limits,
) -> Result<Vec<Message>, LuaError> {
    let (package, script) = (env.package.clone(), env.script.clone());
    let seen = std::mem::take(&mut *shared.seen.borrow_mut());
    if let Some(path) = seen.escape {
        return Err(LuaError::Escape {
            package,
            script,
            path,
        });
    }
    if let Some(command) = seen.exec {
        return Err(LuaError::Exec {
            package,
            script,
            command,
        });
    }
    if let Some(what) = seen.refused {
        return Err(LuaError::Refused {
            package,
            script,
            what,
        });
    }
    let limit = |what: &'static str| {
        let limit = match what {
            "instructions" => limits.instructions.to_string(),
            "memory" => format!("{} bytes of", limits.memory),
            _ => format!("{:?} of", limits.time),
        };
        let what = if what == "memory" || what == "time" {
            what
        } else {
            "Lua instructions"
        };
        (what, limit)
    };
    if let Some(what) = shared.exhausted.get() {
        let (what, limit) = limit(what);
        return Err(LuaError::Limit {
            package,
            script,
            what,
            limit,
        });
    }
    match outcome {
        Ok(values) => match values.into_iter().last() {
            Some(v) if nonzero(&v) => Err(LuaError::Returned {
                package,
                script,
                code: match v {
                    Value::String(s) => s.to_string_lossy(),
                    v => format!("{v:?}"),
                },
            }),
            _ => Ok(seen.messages),
        },
        Err(e) if is_memory(&e) => {
            let (what, limit) = limit("memory");
            Err(LuaError::Limit {
                package,
                script,
                what,
                limit,
            })
        }
        Err(e) => Err(LuaError::Failed {
            package,
            script,
            reason: reason(&e),
        }),
    }
}

/// pkg's test: `lua_tonumber` of the last value is not 0.
fn nonzero(v: &Value) -> bool {
    match v {
        Value::Integer(n) => *n != 0,
        Value::Number(n) => *n != 0.0,
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .is_some_and(|n| n != 0.0),
        _ => false,
    }
}

fn is_memory(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory(cause),
        _ => false,
    }
}

/// The message of an error without mlua's wrapping and traceback.
fn reason(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m
            .split("\nstack traceback:")
            .next()
            .unwrap_or_default()
            .to_string(),
        mlua::Error::CallbackError { cause, .. } => reason(cause),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{tokenize, Limits};

    #[test]
    fn the_default_limits_are_the_documented_ones() {
        let l = Limits::default();
        assert_eq!(l.instructions, 200_000_000);
        assert_eq!(l.memory, 64 << 20);
        assert_eq!(l.time, std::time::Duration::from_secs(60));
    }

    #[test]
    fn args_lines_split_at_blanks_and_keep_quoted_words() {
        assert_eq!(
            tokenize("etc/a.conf.sample  'etc/b c.conf'\r"),
            ["etc/a.conf.sample", "etc/b c.conf"]
        );
        assert!(tokenize("   ").is_empty());
    }
}
