//! Work a package's shell script asks for that cannot be carried out off
//! FreeBSD (cache rebuilders, and with `--scripts=defer` commands jbuild
//! does not know), kept for the jail's first start (issue 32): an rc.d
//! script with FreeBSD's `firstboot` keyword, run once when `/firstboot`
//! exists, listed in the build's output, its `--json` and the image.
//!
//! # How rc runs it
//!
//! FreeBSD's `/etc/rc` (`libexec/rc/rc` in freebsd-src, read at
//! `023fc80e`) leaves out every script whose `# KEYWORD:` line holds
//! `firstboot` unless the sentinel `${firstboot_sentinel}` (`/firstboot`
//! by default, `/etc/defaults/rc.conf`) exists; it looks for the sentinel
//! again after the local filesystems are mounted, runs the scripts of
//! `/etc/rc.d` and `${local_startup}` in rcorder(8)'s order, and at the
//! end removes the sentinel with `rm -rf` (after `chflags -R 0`). In a
//! jail the same `/etc/rc` runs (`exec.start = "/bin/sh /etc/rc"`), and
//! it leaves out `nojail` scripts, and `nojailvnet` ones in a jail without
//! its own network stack. So the script says `firstboot` and neither of
//! the other two: a jail without vnet, the usual kind, must run it too.
//!
//! Its `REQUIRE: FILESYSTEMS ldconfig` puts it after the local
//! filesystems are mounted and the library hints are made (a cache
//! rebuilder is a dynamically linked program of a package), and `BEFORE:
//! LOGIN` before the daemons of packages, which require `LOGIN`, so they
//! start with their caches made. It has no `rcvar`: rc.subr's
//! `run_rc_command` runs a script without one whatever rc.conf says, so
//! nothing needs enabling. It runs each command under `/bin/sh -c`, in
//! the order the packages' scripts asked for them, says which package's
//! script asked for it, goes on after a failure and says so, and removes
//! itself at the end; rc removes `/firstboot`, so nothing runs twice.
//!
//! # Where it lives
//!
//! `/usr/local/etc/rc.d/jbuild_firstboot`: the work is the packages', and
//! `/usr/local/etc/rc.d` is where packages' rc.d scripts go (rc reads it
//! through `local_startup`, by default `/usr/local/etc/rc.d`) and where
//! the ports' own first-boot scripts (`sysutils/firstboot-pkgs`,
//! `firstboot-freebsd-update`) put theirs. `/etc/rc.d` is the base
//! system's: pkgbase's `FreeBSD-rc` package owns it, and a file of ours
//! there would be a stranger to `pkg check` and `etcupdate`.
//!
//! The script's text is the whole record: a later PKG step reads the
//! commands back from it ([`read`]) and writes them again followed by its
//! own, and the build reads the final root's script for the image's
//! label, so a cached step, a `--cache-from` step and an image built
//! `FROM` this one all say what the root holds.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where the script is, in the image.
pub const SCRIPT: &str = "/usr/local/etc/rc.d/jbuild_firstboot";

/// rc's default `firstboot_sentinel`.
pub const SENTINEL: &str = "/firstboot";

/// The most commands one script holds (a package set defers a handful).
pub const MAX_COMMANDS: usize = 4096;

/// The largest script [`read`] reads back.
pub const MAX_SCRIPT_BYTES: u64 = 4 << 20;

/// The image config label that lists the script's commands (`jbuild
/// inspect` shows it as `firstStart`).
pub const LABEL: &str = "org.jbuild.firstboot";

/// The most bytes of [`LABEL`]'s value: the commands that do not fit are
/// counted as `omitted` (the script holds them all).
pub const MAX_LABEL_BYTES: usize = 32 * 1024;

/// The line that tells the script is jbuild's.
const MARK: &str = "# Written by jbuild";

/// The shell function each command line calls.
const RUN: &str = "jbuild_firstboot_run";

/// One command deferred to the jail's first start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// `name-version` of the package whose script asked for it.
    pub package: String,
    /// The script's type as pkg names it (`pre-install`, `post-install`).
    pub script: String,
    /// The command as `sh` runs it in the jail: its words after
    /// expansion, each quoted for `sh`.
    pub command: String,
    /// Why it waits: a cache rebuilder jbuild always defers, or a command
    /// jbuild does not know that `--scripts=defer` let through.
    pub reason: Reason,
}

/// Why a command was deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A cache or index rebuilder (`fc-cache`, `indexinfo`, …): only the
    /// target's own program can do it, and the jail runs fine until it has.
    Rebuilder,
    /// A command jbuild does not carry out, let through by
    /// `PKG --scripts=defer` (or `[pkg] scripts = "defer"`).
    Unknown,
}

impl Reason {
    /// The word the script, the output and `--json` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Rebuilder => "rebuilder",
            Reason::Unknown => "unknown",
        }
    }

    /// The reason a word names ([`Reason::as_str`]).
    pub fn parse(word: &str) -> Option<Reason> {
        match word {
            "rebuilder" => Some(Reason::Rebuilder),
            "unknown" => Some(Reason::Unknown),
            _ => None,
        }
    }

    /// What the word means, for people.
    pub fn explained(self) -> &'static str {
        match self {
            Reason::Rebuilder => "a cache rebuilder, run by the jail's own programs",
            Reason::Unknown => "a command jbuild does not carry out (--scripts=defer)",
        }
    }
}

/// Why the first-start script could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FirstbootError {
    #[error("cannot write {what} in the image ({})", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{SCRIPT} in the image is not jbuild's first-start script ({why}): jbuild will not add to it; remove it (or rename it) before this PKG line")]
    NotOurs { why: String },
    #[error("{SCRIPT} in the image would hold more than {MAX_COMMANDS} deferred commands")]
    TooMany,
}

impl crate::blame::Blame for FirstbootError {
    /// A script at our place that is not ours, or too many commands, is
    /// the recipe's; a failed write is the machine's unless the path is at
    /// fault (a file where a directory must be).
    fn is_user_error(&self) -> bool {
        match self {
            FirstbootError::Io { source, .. } => crate::fsutil::path_at_fault(source),
            FirstbootError::NotOurs { .. } | FirstbootError::TooMany => true,
        }
    }
}

/// Adds `new` to the first-start script of the image at `root` (made when
/// there is none, the commands an earlier step put there kept first), and
/// puts the `/firstboot` sentinel there; nothing at all when `new` is
/// empty. Returns every command the script now holds, in order.
pub fn write(root: &Path, new: &[Deferred]) -> Result<Vec<Deferred>, FirstbootError> {
    let mut all = read(root)?.unwrap_or_default();
    if new.is_empty() {
        return Ok(all);
    }
    all.extend(new.iter().cloned());
    if all.len() > MAX_COMMANDS {
        return Err(FirstbootError::TooMany);
    }
    let io_fail = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| FirstbootError::Io { what, path, source }
    };
    let script = Path::new(SCRIPT);
    let dir = script.parent().expect("the script is in a directory");
    make_dirs(root, dir).map_err(io_fail("the rc.d directory", dir))?;
    let at = crate::fsutil::resolve_in_root(root, script, false)
        .map_err(io_fail("the first-start script", script))?;
    crate::fsutil::write_renamed(&at, script_text(&all).as_bytes())
        .and_then(|()| owned(&at, 0o555))
        .map_err(io_fail("the first-start script", script))?;
    let sentinel = Path::new(SENTINEL);
    let at = crate::fsutil::resolve_in_root(root, sentinel, false)
        .map_err(io_fail("the first-start sentinel", sentinel))?;
    if fs::symlink_metadata(&at).is_err() {
        fs::write(&at, b"")
            .and_then(|()| owned(&at, 0o644))
            .map_err(io_fail("the first-start sentinel", sentinel))?;
    }
    Ok(all)
}

/// The commands of the image's first-start script at `root`, in order;
/// `None` when there is none.
pub fn read(root: &Path) -> Result<Option<Vec<Deferred>>, FirstbootError> {
    let script = Path::new(SCRIPT);
    let io_fail = |source| FirstbootError::Io {
        what: "the first-start script",
        path: script.to_path_buf(),
        source,
    };
    let at = crate::fsutil::resolve_in_root(root, script, false).map_err(io_fail)?;
    let meta = match fs::symlink_metadata(&at) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_fail(e)),
    };
    if !meta.file_type().is_file() {
        return Err(FirstbootError::NotOurs {
            why: "not a regular file".into(),
        });
    }
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(FirstbootError::NotOurs {
            why: format!("larger than {MAX_SCRIPT_BYTES} bytes"),
        });
    }
    let text = fs::read(&at).map_err(io_fail)?;
    let text = String::from_utf8(text).map_err(|_| FirstbootError::NotOurs {
        why: "not UTF-8 text".into(),
    })?;
    parse(&text)
        .map(Some)
        .map_err(|why| FirstbootError::NotOurs { why })
}

/// [`LABEL`]'s value for `list`: compact JSON, `{"script": SCRIPT,
/// "commands": [{"package", "script", "command", "reason"}, …],
/// "omitted": N}`, at most [`MAX_LABEL_BYTES`] (the commands past it
/// counted in `omitted`); same list, same bytes.
pub fn label(list: &[Deferred]) -> String {
    let entry = |d: &Deferred| {
        serde_json::json!({
            "package": d.package,
            "script": d.script,
            "command": d.command,
            "reason": d.reason.as_str(),
        })
    };
    let render = |kept: &[serde_json::Value]| {
        serde_json::json!({
            "script": SCRIPT,
            "commands": kept,
            "omitted": list.len() - kept.len(),
        })
        .to_string()
    };
    // The empty list's length, room for the largest `omitted`, then each
    // entry and its comma.
    let mut size = render(&[]).len() + 20;
    let mut kept: Vec<serde_json::Value> = Vec::new();
    for d in list {
        let e = entry(d);
        size += e.to_string().len() + 1;
        if size > MAX_LABEL_BYTES {
            break;
        }
        kept.push(e);
    }
    render(&kept)
}

/// The commands [`label`] wrote, and how many it left out; `None` for a
/// value it did not write.
pub fn from_label(value: &str) -> Option<(Vec<Deferred>, u64)> {
    let v: serde_json::Value = serde_json::from_str(value).ok()?;
    let word = |e: &serde_json::Value, k: &str| e.get(k)?.as_str().map(str::to_string);
    let commands = v
        .get("commands")?
        .as_array()?
        .iter()
        .map(|e| {
            Some(Deferred {
                package: word(e, "package")?,
                script: word(e, "script")?,
                command: word(e, "command")?,
                reason: Reason::parse(&word(e, "reason")?)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((commands, v.get("omitted")?.as_u64()?))
}

/// The script for `list` (same list, same bytes).
pub fn script_text(list: &[Deferred]) -> String {
    let mut calls = String::new();
    for d in list {
        calls.push('\t');
        calls.push_str(RUN);
        for word in [
            d.package.as_str(),
            d.script.as_str(),
            d.reason.as_str(),
            d.command.as_str(),
        ] {
            calls.push(' ');
            calls.push_str(&quoted(word));
        }
        calls.push('\n');
    }
    format!(
        "#!/bin/sh
#
# PROVIDE: jbuild_firstboot
# REQUIRE: FILESYSTEMS ldconfig
# BEFORE: LOGIN
# KEYWORD: firstboot
#
{MARK}: what the packages' scripts asked for that could not be done
# when the image was built. rc(8) runs it at the jail's first start (while
# {SENTINEL} exists, which rc then removes); it runs each command once, in
# install order, and removes itself.

. /etc/rc.subr

name=\"jbuild_firstboot\"
desc=\"Package work deferred to the first start\"
start_cmd=\"jbuild_firstboot_start\"
stop_cmd=\":\"

# {RUN} PACKAGE SCRIPT REASON COMMAND
{RUN}()
{{
\techo \"${{name}}: $1 $2 ($3): $4\"
\t/bin/sh -c \"$4\"
\t_status=$?
\tif [ ${{_status}} -ne 0 ]; then
\t\techo \"${{name}}: $1 $2: exit status ${{_status}}; going on\" >&2
\tfi
}}

jbuild_firstboot_start()
{{
{calls}\trm -f {SCRIPT}
}}

load_rc_config $name
run_rc_command \"$1\"
"
    )
}

/// `word` as one `sh` word: single quotes, a quote inside as `'\''`.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The commands of a script [`script_text`] wrote; why not, otherwise.
fn parse(text: &str) -> Result<Vec<Deferred>, String> {
    if !text.lines().any(|l| l.starts_with(MARK)) {
        return Err(format!("no `{MARK}` line"));
    }
    let start = "jbuild_firstboot_start()\n{\n";
    let body = text
        .find(start)
        .map(|at| &text[at + start.len()..])
        .ok_or("no jbuild_firstboot_start function")?;
    let end = format!("\trm -f {SCRIPT}\n}}\n");
    let body = body
        .find(&end)
        .map(|at| &body[..at])
        .ok_or("the jbuild_firstboot_start function does not end as jbuild writes it")?;
    let mut list = Vec::new();
    let mut rest = body;
    let call = format!("\t{RUN}");
    while !rest.is_empty() {
        rest = rest
            .strip_prefix(call.as_str())
            .ok_or("a line of jbuild_firstboot_start that jbuild did not write")?;
        let mut words = Vec::new();
        while let Some(after) = rest.strip_prefix(' ') {
            let (word, left) = unquote(after)?;
            words.push(word);
            rest = left;
        }
        rest = rest
            .strip_prefix('\n')
            .ok_or("a command line without its end")?;
        let [package, script, reason, command]: [String; 4] = words
            .try_into()
            .map_err(|_| "a command line without its four words")?;
        let reason = Reason::parse(&reason).ok_or(format!("an unknown reason `{reason}`"))?;
        list.push(Deferred {
            package,
            script,
            command,
            reason,
        });
        if list.len() > MAX_COMMANDS {
            return Err(format!("more than {MAX_COMMANDS} commands"));
        }
    }
    Ok(list)
}

/// One word [`quoted`] wrote at the start of `s`, and what follows it.
fn unquote(mut s: &str) -> Result<(String, &str), String> {
    let mut word = String::new();
    loop {
        let inner = s.strip_prefix('\'').ok_or("a word that is not quoted")?;
        let close = inner.find('\'').ok_or("a quote left open")?;
        word.push_str(&inner[..close]);
        s = &inner[close + 1..];
        match s.strip_prefix("\\'") {
            Some(more) => {
                word.push('\'');
                s = more;
            }
            None => return Ok((word, s)),
        }
    }
}

/// Makes the directories of `dir` that are missing in `root`, as an
/// install would (0755, root:wheel), each resolved inside the root.
fn make_dirs(root: &Path, dir: &Path) -> io::Result<()> {
    let mut so_far = PathBuf::from("/");
    for part in dir.components().skip(1) {
        so_far.push(part);
        let at = crate::fsutil::resolve_in_root(root, &so_far, true)?;
        match fs::metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", so_far.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&at)?;
                owned(&at, 0o755)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `mode`, root:wheel (0:0; left as it is when jbuild cannot chown, not
/// being root).
fn owned(path: &Path, mode: u32) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    match std::os::unix::fs::lchown(path, Some(0), Some(0)) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests;
