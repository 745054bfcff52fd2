//! The standard library a package script sees: pkg's overrides of `io`
//! and `os` (`lua_override_ios` in pkg's `libpkg/lua.c`), made to hold on
//! a host that is not the image's.
//!
//! - confined to the root, through [`files::place`]: `io.open`,
//!   `io.lines`, `os.remove` (a missing file is success, as pkg's),
//!   `os.rename`;
//! - refused, and the script failed even if it catches the error:
//!   `os.execute`, `os.exit`, `io.popen`, `io.input`, `io.output`,
//!   `io.tmpfile`, `os.tmpname`, `require` (no `package` library: neither C
//!   nor Lua modules), `dofile`, `loadfile`;
//! - `load` reads text only (a binary chunk is unchecked bytecode);
//!   `io.read` has no input; `os.getenv` sees no host variable (the build
//!   would otherwise depend on jbuild's environment); `os.setlocale` only
//!   answers "C" (the locale is the whole process's);
//! - `print`, `io.write`, `io.stdout:write` and `io.stderr:write` are
//!   collected in order with `pkg.print_msg`'s lines;
//! - `pcall`, `xpcall` and `coroutine.resume` pass a stopped script's
//!   error on instead of catching it, so a limit cannot be outrun; a
//!   metatable with `__gc` is refused (see [`PRELUDE`]).

use std::rc::Rc;

use mlua::{Function, IntoLuaMulti, Lua, MultiValue, Table, Value};

use super::files::{fail, place};
use super::{Message, Shared, Stream};

/// Replaces what a script must not reach (see the module docs).
pub(crate) fn install(lua: &Lua, shared: &Rc<Shared>) -> mlua::Result<()> {
    let g = lua.globals();
    let io: Table = g.get("io")?;
    let os: Table = g.get("os")?;

    for (table, name, what) in [
        (&os, "execute", "os.execute"),
        (&os, "exit", "os.exit"),
        (&os, "tmpname", "os.tmpname"),
        (&io, "popen", "io.popen"),
        (&io, "input", "io.input"),
        (&io, "output", "io.output"),
        (&io, "tmpfile", "io.tmpfile"),
        (&g, "require", "require"),
        (&g, "dofile", "dofile"),
        (&g, "loadfile", "loadfile"),
    ] {
        table.set(name, refusal(lua, shared, what)?)?;
    }

    let raw_open: Function = io.get("open")?;
    let s = Rc::clone(shared);
    io.set(
        "open",
        lua.create_function(move |lua, (name, mode): (mlua::String, Option<String>)| {
            let mode = mode.unwrap_or_else(|| "r".into());
            if !valid_mode(&mode) {
                return Err(mlua::Error::runtime(format!(
                    "bad argument #2 to 'open' (invalid mode '{mode}')"
                )));
            }
            let given = name.as_bytes().to_vec();
            let host = place(&s, &given, true)?;
            let out: MultiValue = raw_open.call((
                lua.create_string(host.as_os_str().as_encoded_bytes())?,
                mode,
            ))?;
            match out.front() {
                Some(Value::Nil) => {
                    let code = match out.get(2) {
                        Some(Value::Integer(c)) => *c as i32,
                        _ => libc::EIO,
                    };
                    fail(lua, Some(&given), &std::io::Error::from_raw_os_error(code))
                }
                _ => Ok(out),
            }
        })?,
    )?;
    let raw_lines: Function = io.get("lines")?;
    let s = Rc::clone(shared);
    io.set(
        "lines",
        lua.create_function(
            move |lua, (name, rest): (Option<mlua::String>, MultiValue)| {
                let Some(name) = name else {
                    return Err(refuse(&s, "io.lines without a file name (standard input)"));
                };
                let host = place(&s, &name.as_bytes(), true)?;
                let mut args = rest;
                args.push_front(Value::String(
                    lua.create_string(host.as_os_str().as_encoded_bytes())?,
                ));
                raw_lines.call::<MultiValue>(args)
            },
        )?,
    )?;
    let raw_close: Function = io.get("close")?;
    io.set(
        "close",
        lua.create_function(move |lua, file: Option<Value>| match file {
            Some(f) => raw_close.call::<MultiValue>(f),
            None => true.into_lua_multi(lua),
        })?,
    )?;
    io.set(
        "read",
        lua.create_function(|_, _: MultiValue| Ok(Value::Nil))?,
    )?;
    io.set("stdin", Value::Nil)?;

    let s = Rc::clone(shared);
    os.set(
        "remove",
        lua.create_function(move |lua, name: mlua::String| {
            let given = name.as_bytes().to_vec();
            let host = place(&s, &given, false)?;
            let Ok(meta) = std::fs::symlink_metadata(&host) else {
                // pkg answers a missing file with success.
                return true.into_lua_multi(lua);
            };
            let done = if meta.is_dir() {
                std::fs::remove_dir(&host)
            } else {
                std::fs::remove_file(&host)
            };
            match done {
                Ok(()) => true.into_lua_multi(lua),
                Err(e) => fail(lua, None, &e),
            }
        })?,
    )?;
    let s = Rc::clone(shared);
    os.set(
        "rename",
        lua.create_function(move |lua, (from, to): (mlua::String, mlua::String)| {
            let from = place(&s, &from.as_bytes(), false)?;
            let to = place(&s, &to.as_bytes(), false)?;
            match std::fs::rename(&from, &to) {
                Ok(()) => true.into_lua_multi(lua),
                Err(e) => fail(lua, None, &e),
            }
        })?,
    )?;
    os.set(
        "getenv",
        lua.create_function(|_, _: MultiValue| Ok(Value::Nil))?,
    )?;
    os.set(
        "setlocale",
        lua.create_function(|_, (locale, _): (Option<String>, MultiValue)| {
            Ok(match locale.as_deref() {
                None | Some("") | Some("C") | Some("POSIX") => Some("C"),
                Some(_) => None,
            })
        })?,
    )?;

    let s = Rc::clone(shared);
    let collect = lua.create_function(move |_, (stream, text): (String, mlua::String)| {
        let stream = if stream == "stderr" {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        let mut text = text.to_string_lossy();
        if text.ends_with('\n') {
            text.pop();
        }
        s.seen.borrow_mut().messages.push(Message { stream, text });
        Ok(())
    })?;
    let s = Rc::clone(shared);
    let stopped = lua.create_function(move |_, ()| Ok(s.exhausted.get().is_some()))?;
    let no_gc = refusal(lua, shared, "__gc finalizers (in setmetatable)")?;
    lua.load(PRELUDE)
        .set_name("=jbuild sandbox")
        .call::<()>((collect, stopped, no_gc))
}

/// A function that refuses `what`, and fails the script for it.
fn refusal(lua: &Lua, shared: &Rc<Shared>, what: &'static str) -> mlua::Result<Function> {
    let s = Rc::clone(shared);
    lua.create_function(move |_, _: MultiValue| Err::<(), _>(refuse(&s, what)))
}

fn refuse(shared: &Shared, what: &str) -> mlua::Error {
    shared
        .seen
        .borrow_mut()
        .refused
        .get_or_insert_with(|| what.to_string());
    mlua::Error::runtime(format!("{what} is not available to package scripts"))
}

/// `fopen`'s modes, as Lua's `io.open` checks them.
fn valid_mode(mode: &str) -> bool {
    let rest = match mode.as_bytes().first() {
        Some(b'r' | b'w' | b'a') => &mode[1..],
        _ => return false,
    };
    let rest = rest.strip_prefix('+').unwrap_or(rest);
    rest.bytes().all(|b| b == b'b')
}

/// Lua written here, given `collect(stream, text)`, `stopped()` and
/// `no_gc()`.
///
/// Lua runs two kinds of code with its hooks off, where no limit could
/// stop a loop: a message handler called for an error the hook raised,
/// and `__gc` finalizers. So a stopped script's handler is skipped, and a
/// metatable with `__gc` is refused (Lua marks an object for
/// finalization only in `setmetatable`).
const PRELUDE: &str = r#"
local collect, stopped, no_gc = ...
local raw_load, raw_pcall, raw_xpcall = load, pcall, xpcall
local raw_resume, pack, unpack, select, tostring, type, error =
  coroutine.resume, table.pack, table.unpack, select, tostring, type, error
local raw_setmetatable, rawget = setmetatable, rawget

setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then no_gc() end
  return raw_setmetatable(t, mt)
end

load = function(chunk, name, mode, ...)
  if select('#', ...) > 0 then return raw_load(chunk, name, "t", ...) end
  return raw_load(chunk, name, "t")
end

-- A stopped script's error goes on up: once a limit is passed, nothing
-- may catch the error and keep running.
local function passed(r)
  if not r[1] and stopped() then error(r[2], 0) end
  return unpack(r, 1, r.n)
end
pcall = function(...) return passed(pack(raw_pcall(...))) end
xpcall = function(f, handler, ...)
  local function h(e)
    if stopped() then return e end
    return handler(e)
  end
  return passed(pack(raw_xpcall(f, h, ...)))
end
coroutine.resume = function(...) return passed(pack(raw_resume(...))) end

local function text(what, ...)
  local out = {}
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    if type(v) ~= "string" and type(v) ~= "number" then
      error("bad argument #" .. i .. " to '" .. what .. "' (string expected, got " .. type(v) .. ")", 2)
    end
    out[i] = tostring(v)
  end
  return table.concat(out)
end

print = function(...)
  local out = {}
  for i = 1, select('#', ...) do out[i] = tostring((select(i, ...))) end
  collect("stdout", table.concat(out, "\t"))
end

local function stream(name)
  local s = {}
  s.write = function(self, ...) collect(name, text("write", ...)) return self end
  s.flush = function(self) return self end
  s.close = function() return true end
  s.setvbuf = function() return true end
  return s
end
io.stdout, io.stderr = stream("stdout"), stream("stderr")
io.write = function(...) collect("stdout", text("write", ...)) return io.stdout end
"#;
