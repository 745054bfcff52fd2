//! The commands a package's script runs to rebuild the hints:
//! `ldconfig` itself (`sbin/ldconfig/ldconfig.c`'s options), the rc.d
//! script `ldconfig` (`libexec/rc/rc.d/ldconfig`), and `service` for it
//! (what the ports tree's `@ldconfig` keyword runs:
//! `service ldconfig restart`).

use std::io::Write;
use std::path::Path;

use super::update::{Fail, Run};
use super::{image_machine, in_root, rcconf, Written, HINTS, HINTS32, HINTS_SOFT};
use crate::pkg::script::{CommandError, Io};

const USAGE: &str = "usage: ldconfig [-32] [-BRimr] [-f hints_file] [directory | file ...]";
const RC_USAGE: &str = "Usage: /etc/rc.d/ldconfig [fast|force|one|quiet](start|stop|restart|rcvar|enable|disable|delete|enabled|describe|extracommands)";

/// `ldconfig ARGS` in the image at `root`, as ldconfig(8).
pub fn ldconfig(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let (status, _) = exit(run_ldconfig(root, args, io.stdout, io.stderr), io.stderr)?;
    Ok(status)
}

/// The rc.d script: `/etc/rc.d/ldconfig COMMAND`.
pub fn rc_ldconfig(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let command = args.first().map(String::as_str).unwrap_or("");
    let bare = ["fast", "force", "one", "quiet"]
        .iter()
        .find_map(|p| command.strip_prefix(p))
        .unwrap_or(command);
    match bare {
        "start" | "restart" => {
            let (status, _) = exit(start(root, io.stdout, io.stderr), io.stderr)?;
            Ok(status)
        }
        // stop_cmd=":"; no rcvar: always enabled.
        "stop" | "enabled" => Ok(0),
        _ => {
            if !command.is_empty() {
                let _ = writeln!(
                    io.stderr,
                    "/etc/rc.d/ldconfig: unknown directive '{command}'."
                );
            }
            let _ = writeln!(io.stderr, "{RC_USAGE}");
            Ok(1)
        }
    }
}

/// `service [-v] [-E var=value] ldconfig COMMAND`; any other service is
/// [`CommandError::Unknown`], named with its words, for the caller to
/// defer or fail.
pub fn service(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-v" => i += 1,
            "-E" => i += 2,
            _ => break,
        }
    }
    match args.get(i).map(String::as_str) {
        Some("ldconfig") | Some("/etc/rc.d/ldconfig") => rc_ldconfig(root, &args[i + 1..], io),
        _ => Err(CommandError::Unknown {
            command: format!("service {}", args.join(" ")),
        }),
    }
}

/// A [`Fail::Exit`] as ldconfig ends: its message on stderr, status 1.
fn exit<T: Default>(r: Result<T, Fail>, stderr: &mut Vec<u8>) -> Result<(i32, T), CommandError> {
    match r {
        Ok(v) => Ok((0, v)),
        Err(Fail::Exit(msg)) => {
            let _ = writeln!(stderr, "ldconfig: {msg}");
            Ok((1, T::default()))
        }
        Err(Fail::Fault(e)) => Err(e.into()),
    }
}

/// ldconfig's `main`; returns the directories written (none for `-r`).
fn run_ldconfig(
    root: &Path,
    args: &[String],
    stdout: &mut Vec<u8>,
    stderr: &mut Vec<u8>,
) -> Result<Vec<String>, Fail> {
    let mut i = 0;
    let (mut is_32, mut is_soft) = (false, false);
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-aout" => return Err(Fail::Exit("aout is not supported".into())),
            "-elf" => {}
            "-32" => is_32 = true,
            "-soft" => is_soft = true,
            _ => break,
        }
        i += 1;
    }
    let mut hints = if is_soft {
        HINTS_SOFT
    } else if is_32 {
        HINTS32
    } else {
        HINTS
    }
    .to_string();
    let rest = &args[i..];
    let (mut rescan, mut merge, mut justread, mut insecure, mut force_be) =
        (rest.is_empty(), false, false, false, false);
    let mut operands: &[String] = &[];
    let mut j = 0;
    while j < rest.len() {
        let a = &rest[j];
        if a == "--" {
            j += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let mut letters = a[1..].char_indices();
        while let Some((at, c)) = letters.next() {
            match c {
                'B' => force_be = true,
                'R' => rescan = true,
                'i' => insecure = true,
                'm' => merge = true,
                'r' => justread = true,
                's' | 'v' => {}
                'f' => {
                    let inline = &a[1 + at + 1..];
                    if !inline.is_empty() {
                        hints = inline.to_string();
                    } else if let Some(next) = rest.get(j + 1) {
                        hints = next.clone();
                        j += 1;
                    } else {
                        return Err(Fail::Exit(format!(
                            "option requires an argument -- f\n{USAGE}"
                        )));
                    }
                    break;
                }
                other => return Err(Fail::Exit(format!("illegal option -- {other}\n{USAGE}"))),
            }
        }
        j += 1;
    }
    if j <= rest.len() {
        operands = &rest[j..];
    }
    let machine = image_machine(root)?;
    let mut run = Run::new(root, insecure, machine.order, stderr);
    if justread {
        run.list(&hints, stdout)?;
        return Ok(Vec::new());
    }
    run.update(&hints, operands, merge || rescan, force_be)
}

/// `ldconfig_start` of rc.d/ldconfig: the native hints, then the 32-bit
/// ones where rc.d makes them and the image has lib32. Returns the files
/// written.
pub(super) fn start(
    root: &Path,
    stdout: &mut Vec<u8>,
    stderr: &mut Vec<u8>,
) -> Result<Vec<Written>, Fail> {
    let vars = rcconf::load(root)?;
    let command = match vars.get("ldconfig_command") {
        "" => "/sbin/ldconfig",
        c => c,
    };
    if !executable(root, command)? {
        return Ok(Vec::new());
    }
    let ins: Vec<String> = if vars.yes("ldconfig_insecure") {
        vec!["-i".into()]
    } else {
        Vec::new()
    };
    let mut written = Vec::new();

    let mut ldc: Vec<String> = vec!["/lib".into(), "/usr/lib".into()];
    let mut paths = words(vars.get("ldconfig_paths"));
    paths.extend(local_lines(root, vars.get("ldconfig_local_dirs"))?);
    paths.push("/etc/ld-elf.so.conf".into());
    ldc.extend(readable(root, paths)?);
    let _ = writeln!(stdout, "ELF ldconfig path: {}", ldc.join(" "));
    let argv: Vec<String> = ["-elf".to_string()]
        .into_iter()
        .chain(ins.clone())
        .chain(ldc)
        .collect();
    let dirs = run_ldconfig(root, &argv, stdout, stderr)?;
    written.push(Written {
        path: HINTS.into(),
        dirs,
    });

    let machine = image_machine(root)?;
    if machine.has_lib32_arch && has_lib32(root)? {
        let mut paths = words(vars.get("ldconfig32_paths"));
        paths.extend(local_lines(root, vars.get("ldconfig_local32_dirs"))?);
        let ldc = readable(root, paths)?;
        let shown: String = ldc.iter().map(|d| format!(" {d}")).collect();
        let _ = writeln!(stdout, "32-bit compatibility ldconfig path:{shown}");
        let argv: Vec<String> = ["-32".to_string()]
            .into_iter()
            .chain(ins)
            .chain(ldc)
            .collect();
        let dirs = run_ldconfig(root, &argv, stdout, stderr)?;
        written.push(Written {
            path: HINTS32.into(),
            dirs,
        });
    }
    Ok(written)
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// `[ -x path ]` in the image.
fn executable(root: &Path, path: &str) -> Result<bool, Fail> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::metadata(in_root(root, path)?)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false))
}

/// The words kept by rc.d's `[ -r "${i}" ]`: those that exist (root
/// reads anything), a relative one from `/`, rc's working directory.
fn readable(root: &Path, words: Vec<String>) -> Result<Vec<String>, Fail> {
    let mut kept = Vec::new();
    for w in words {
        if std::fs::metadata(in_root(root, &w)?).is_ok() {
            kept.push(w);
        }
    }
    Ok(kept)
}

/// The image has a 32-bit userland: its rtld or `/usr/lib32`.
fn has_lib32(root: &Path) -> Result<bool, Fail> {
    Ok(in_root(root, "/libexec/ld-elf32.so.1")?.is_file() || in_root(root, "/usr/lib32")?.is_dir())
}

/// rc.d's `cat $(find DIR -type f) | sort -u` over each of `dirs`: every
/// line of the regular files under each directory (symlinks not
/// followed, as find does not), sorted bytewise, each once, split into
/// words as the unquoted expansion splits them.
fn local_lines(root: &Path, dirs: &str) -> Result<Vec<String>, Fail> {
    let mut out = Vec::new();
    for dir in dirs.split_whitespace() {
        let host = super::in_root_strictly(root, dir)?;
        if !host.is_dir() {
            continue;
        }
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let mut budget = MAX_LOCAL_BYTES;
        collect(&host, dir, 0, &mut lines, &mut budget)?;
        lines.sort();
        lines.dedup();
        for l in lines {
            out.extend(
                String::from_utf8_lossy(&l)
                    .split_whitespace()
                    .map(str::to_string),
            );
        }
    }
    Ok(out)
}

/// Bytes of list files read under one `ldconfig_local_dirs` entry.
const MAX_LOCAL_BYTES: u64 = 16 << 20;
/// How deep find is followed under one.
const MAX_DEPTH: usize = 16;

fn collect(
    host: &Path,
    shown: &str,
    depth: usize,
    lines: &mut Vec<Vec<u8>>,
    budget: &mut u64,
) -> Result<(), Fail> {
    use std::io::Read;
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let read_err = |source| {
        Fail::Fault(super::HintsError::Read {
            path: shown.into(),
            source,
        })
    };
    let mut entries: Vec<_> = std::fs::read_dir(host)
        .map_err(read_err)?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let kind = e.file_type().map_err(read_err)?;
        let sub = format!("{shown}/{name}");
        if kind.is_dir() {
            collect(&e.path(), &sub, depth + 1, lines, budget)?;
        } else if kind.is_file() {
            let mut bytes = Vec::new();
            std::fs::File::open(e.path())
                .and_then(|f| f.take(*budget).read_to_end(&mut bytes))
                .map_err(|source| {
                    Fail::Fault(super::HintsError::Read {
                        path: sub.into(),
                        source,
                    })
                })?;
            *budget -= bytes.len() as u64;
            lines.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        }
    }
    Ok(())
}
