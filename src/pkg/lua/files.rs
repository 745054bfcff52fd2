//! The `pkg` library of package scripts, as pkg 2.x defines it in
//! `libpkg/lua.c`, over the image's root instead of a root descriptor.
//!
//! pkg resolves every path relative to the root (`openat(rootfd, …)`,
//! one leading `/` dropped); so does [`place`], as the jail would see the
//! path: symlinks are followed inside the root (an absolute target starts
//! again at the root, `..` stops at it, [`crate::fsutil::resolve_in_root`]),
//! and a path that itself climbs above the root is refused. The return
//! conventions are pkg's: `filecmp` 0 same, 1 different, 2 error; `copy`
//! nothing on success, 2 or -1 on failure; `stat` a table or nil; failures
//! of `readdir`/`symlink` nil, a message and an errno.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use mlua::{IntoLuaMulti, Lua, MultiValue, Table, Value};

use super::{Message, Shared, Stream};

/// The host path of `given` inside the root (see the module docs);
/// `follow_last` as [`crate::fsutil::resolve_in_root`]. A path climbing
/// above the root is recorded and refused.
pub(crate) fn place(shared: &Shared, given: &[u8], follow_last: bool) -> mlua::Result<PathBuf> {
    let path = Path::new(OsStr::from_bytes(given));
    let mut depth = 0usize;
    for c in path.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::ParentDir if depth == 0 => {
                let shown = String::from_utf8_lossy(given).into_owned();
                let mut seen = shared.seen.borrow_mut();
                seen.escape.get_or_insert_with(|| shown.clone());
                return Err(mlua::Error::runtime(format!(
                    "`{shown}` leads out of the image's root: refused"
                )));
            }
            Component::ParentDir => depth -= 1,
            _ => {}
        }
    }
    crate::fsutil::resolve_in_root(&shared.root, path, follow_last)
        .map_err(|e| mlua::Error::runtime(format!("{}: {e}", String::from_utf8_lossy(given))))
}

/// Lua's `luaL_fileresult` for a failure: nil, `what: strerror`, errno.
pub(crate) fn fail(lua: &Lua, what: Option<&[u8]>, e: &io::Error) -> mlua::Result<MultiValue> {
    let code = e.raw_os_error().unwrap_or(libc::EIO);
    let text = nix::errno::Errno::from_raw(code).desc();
    let message = match what {
        Some(w) => format!("{}: {text}", String::from_utf8_lossy(w)),
        None => text.to_string(),
    };
    (Value::Nil, message, code).into_lua_multi(lua)
}

/// The `pkg` table.
pub(crate) fn library(lua: &Lua, shared: &Rc<Shared>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let s = Rc::clone(shared);
    t.set(
        "print_msg",
        lua.create_function(move |_, msg: mlua::String| {
            s.seen.borrow_mut().messages.push(Message {
                stream: Stream::Message,
                text: msg.to_string_lossy(),
            });
            Ok(())
        })?,
    )?;
    let s = Rc::clone(shared);
    t.set(
        "prefixed_path",
        lua.create_function(move |lua, p: mlua::String| {
            let p = p.as_bytes();
            if p.starts_with(b"/") {
                return lua.create_string(&*p);
            }
            let mut out = s.prefix.as_bytes().to_vec();
            out.push(b'/');
            out.extend_from_slice(&p);
            lua.create_string(out)
        })?,
    )?;
    let s = Rc::clone(shared);
    t.set(
        "filecmp",
        lua.create_function(move |_, (a, b): (mlua::String, mlua::String)| {
            let a = place(&s, &a.as_bytes(), true)?;
            let b = place(&s, &b.as_bytes(), true)?;
            Ok(filecmp(&a, &b))
        })?,
    )?;
    let s = Rc::clone(shared);
    t.set(
        "copy",
        lua.create_function(move |lua, (src, dst): (mlua::String, mlua::String)| {
            let src = place(&s, &src.as_bytes(), true)?;
            let dst = place(&s, &dst.as_bytes(), false)?;
            match copy(&src, &dst) {
                Ok(()) => Ok(MultiValue::new()),
                Err(code) => code.into_lua_multi(lua),
            }
        })?,
    )?;
    let s = Rc::clone(shared);
    t.set(
        "stat",
        lua.create_function(move |lua, (p, into): (mlua::String, Option<Table>)| {
            let p = place(&s, &p.as_bytes(), false)?;
            let Ok(m) = fs::symlink_metadata(&p) else {
                return Ok(Value::Nil);
            };
            let t = match into {
                Some(t) => t,
                None => lua.create_table()?,
            };
            t.set("size", m.size())?;
            t.set("uid", m.uid())?;
            t.set("gid", m.gid())?;
            t.set("type", kind(&m))?;
            Ok(Value::Table(t))
        })?,
    )?;
    let s = Rc::clone(shared);
    t.set(
        "readdir",
        lua.create_function(move |lua, p: mlua::String| {
            let given = p.as_bytes().to_vec();
            let dir = place(&s, &given, true)?;
            let names = fs::read_dir(&dir).and_then(|entries| {
                entries
                    .map(|e| e.map(|e| e.file_name().as_bytes().to_vec()))
                    .collect::<io::Result<Vec<_>>>()
            });
            match names {
                Ok(mut names) => {
                    // Sorted: readdir(3) order is the filesystem's, and the
                    // same image must give the same script the same list.
                    names.sort();
                    let list = lua.create_table()?;
                    for (i, n) in names.iter().enumerate() {
                        list.raw_set(i + 1, lua.create_string(n)?)?;
                    }
                    Value::Table(list).into_lua_multi(lua)
                }
                Err(e) => fail(lua, Some(&given), &e),
            }
        })?,
    )?;
    let s = Rc::clone(shared);
    t.set(
        "symlink",
        lua.create_function(move |lua, (from, to): (mlua::String, mlua::String)| {
            let from = from.as_bytes().to_vec();
            let to = place(&s, &to.as_bytes(), false)?;
            match std::os::unix::fs::symlink(OsStr::from_bytes(&from), &to) {
                Ok(()) => true.into_lua_multi(lua),
                Err(e) => fail(lua, Some(&from), &e),
            }
        })?,
    )?;
    for name in ["exec", "exec_capture"] {
        let s = Rc::clone(shared);
        t.set(
            name,
            lua.create_function(move |_, argv: Table| {
                let words = argv
                    .sequence_values::<mlua::String>()
                    .map(|w| w.map(|w| w.to_string_lossy()))
                    .collect::<mlua::Result<Vec<_>>>()?;
                let command = words.join(" ");
                s.seen
                    .borrow_mut()
                    .exec
                    .get_or_insert_with(|| command.clone());
                Err::<(), _>(mlua::Error::runtime(format!(
                    "pkg.exec cannot run `{command}`: jbuild runs no FreeBSD program while it installs packages"
                )))
            })?,
        )?;
    }
    Ok(t)
}

fn kind(m: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_file() {
        "reg"
    } else if t.is_dir() {
        "dir"
    } else if t.is_char_device() {
        "chr"
    } else if t.is_symlink() {
        "lnk"
    } else if t.is_socket() {
        "sock"
    } else if t.is_block_device() {
        "blk"
    } else if t.is_fifo() {
        "fifo"
    } else {
        "unknown"
    }
}

/// 0 when both are the same bytes, 1 when not, 2 when either cannot be
/// read (pkg's `lua_pkg_filecmp`).
fn filecmp(a: &Path, b: &Path) -> i64 {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else {
        return 2;
    };
    if ma.len() != mb.len() {
        return 1;
    }
    let (Ok(mut fa), Ok(mut fb)) = (fs::File::open(a), fs::File::open(b)) else {
        return 2;
    };
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let Ok(n) = read_full(&mut fa, &mut ba) else {
            return 2;
        };
        let Ok(m) = read_full(&mut fb, &mut bb) else {
            return 2;
        };
        if n != m || ba[..n] != bb[..m] {
            return 1;
        }
        if n == 0 {
            return 0;
        }
    }
}

fn read_full(f: &mut fs::File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// pkg's `lua_pkg_copy`: `dst` made new (never over an existing entry,
/// nor through a symlink), with the mode, owner and times of `src`.
/// File flags are not copied (the FileFlags seam records flags of what
/// packages install; a copy made by a script has none).
fn copy(src: &Path, dst: &Path) -> Result<(), i64> {
    let meta = fs::metadata(src).map_err(|_| 2)?;
    let mut from = fs::File::open(src).map_err(|_| 2)?;
    let mut to = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(meta.mode() & 0o7777)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dst)
        .map_err(|_| 2)?;
    io::copy(&mut from, &mut to).map_err(|_| 2)?;
    // The owner as the source's; a build without root keeps its own, as
    // every file it writes.
    if let Err(e) = std::os::unix::fs::fchown(&to, Some(meta.uid()), Some(meta.gid())) {
        if e.kind() != io::ErrorKind::PermissionDenied || nix::unistd::geteuid().is_root() {
            return Err(2);
        }
    }
    to.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))
        .map_err(|_| -1)?;
    let atime = filetime::FileTime::from_last_access_time(&meta);
    let mtime = filetime::FileTime::from_last_modification_time(&meta);
    filetime::set_file_handle_times(&to, Some(atime), Some(mtime)).map_err(|_| -1)?;
    to.sync_all().map_err(|_| -1)?;
    Ok(())
}
