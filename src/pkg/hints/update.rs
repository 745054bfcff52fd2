//! ldconfig's work (`sbin/ldconfig/elfhints.c`): the directory list
//! gathered from the command line (directories, and files listing them),
//! checked as `add_dir` checks them, written as `write_elf_hints` writes
//! it; and `-r`'s listing.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::format::{self, Order, MAX_DIRS};
use super::{in_root, in_root_strictly, read_small, HintsError};

/// Bytes read of one file that lists directories.
const MAX_LIST: u64 = 1 << 20;
/// Entries of one directory `-r` lists.
const MAX_LISTED: usize = 100_000;

/// How ldconfig stopped short: `errx(1, …)` with its message, or a fault
/// that stops the install.
#[derive(Debug)]
pub(crate) enum Fail {
    Exit(String),
    Fault(HintsError),
}

impl From<HintsError> for Fail {
    fn from(e: HintsError) -> Self {
        Fail::Fault(e)
    }
}

/// One run of ldconfig in the image at `root`.
pub(crate) struct Run<'a> {
    pub root: &'a Path,
    pub insecure: bool,
    pub native: Order,
    pub stderr: &'a mut Vec<u8>,
    dirs: Vec<String>,
}

impl<'a> Run<'a> {
    pub fn new(root: &'a Path, insecure: bool, native: Order, stderr: &'a mut Vec<u8>) -> Self {
        Run {
            root,
            insecure,
            native,
            stderr,
            dirs: Vec::new(),
        }
    }

    fn warn(&mut self, msg: &str) {
        let _ = writeln!(self.stderr, "ldconfig: {msg}");
    }

    /// `update_elf_hints`: the directories of `operands` (after those of
    /// the existing file when `merge`), written to `hints`. Returns the
    /// list written.
    pub fn update(
        &mut self,
        hints: &str,
        operands: &[String],
        merge: bool,
        force_be: bool,
    ) -> Result<Vec<String>, Fail> {
        let mut order = if force_be { Order::Big } else { self.native };
        if merge {
            if let Some(found) = self.read(hints, false)? {
                if force_be && found.order != Order::Big {
                    return Err(Fail::Exit(format!(
                        "\"{hints}\": incompatible endianness requested"
                    )));
                }
                order = found.order;
                for d in found.dirs {
                    self.add_dir(hints, &d, true)?;
                }
            }
        }
        for op in operands {
            let host = in_root(self.root, op)?;
            match fs::metadata(&host) {
                Err(e) => self.warn(&format!("warning: {op}: {}", strerror(&e))),
                Ok(m) if m.is_file() => self.read_dirs_from_file(hints, op)?,
                Ok(_) => self.add_dir(hints, op, false)?,
            }
        }
        self.write(hints, order)?;
        Ok(self.dirs.clone())
    }

    /// `add_dir`: the security checks unless trusted or `-i`, then the
    /// name once.
    fn add_dir(&mut self, hints: &str, name: &str, trusted: bool) -> Result<(), Fail> {
        if !trusted && !self.insecure {
            let host = in_root(self.root, name)?;
            match fs::metadata(&host) {
                Err(e) => {
                    self.warn(&format!("{name}: {}", strerror(&e)));
                    return Ok(());
                }
                Ok(m) if m.uid() != 0 => {
                    self.warn(&format!("{name}: ignoring directory not owned by root"));
                    return Ok(());
                }
                Ok(m) if m.mode() & 0o002 != 0 => {
                    self.warn(&format!("{name}: ignoring world-writable directory"));
                    return Ok(());
                }
                Ok(m) if m.mode() & 0o020 != 0 => {
                    self.warn(&format!("{name}: ignoring group-writable directory"));
                    return Ok(());
                }
                Ok(_) => {}
            }
        }
        if self.dirs.iter().any(|d| d == name) {
            return Ok(());
        }
        if self.dirs.len() >= MAX_DIRS {
            return Err(Fail::Exit(format!(
                "\"{hints}\": Too many directories in path"
            )));
        }
        self.dirs.push(name.to_string());
        Ok(())
    }

    /// `read_dirs_from_file`: the first word of each line that is not
    /// blank or a comment.
    fn read_dirs_from_file(&mut self, hints: &str, list: &str) -> Result<(), Fail> {
        let bytes = read_small(self.root, list, MAX_LIST)?.unwrap_or_default();
        for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = line.trim_ascii_start();
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let end = line
                .iter()
                .position(|b| b.is_ascii_whitespace())
                .unwrap_or(line.len());
            if !line[end..].trim_ascii().is_empty() {
                self.warn(&format!("{list}:{}: trailing characters ignored", n + 1));
            }
            match std::str::from_utf8(&line[..end]) {
                Ok(dir) => self.add_dir(hints, dir, false)?,
                Err(_) => self.warn(&format!("{list}:{}: not UTF-8, ignored", n + 1)),
            }
        }
        Ok(())
    }

    /// `read_elf_hints`: the file's directories, `None` when it is
    /// missing and need not exist.
    pub fn read(&mut self, hints: &str, must_exist: bool) -> Result<Option<format::Hints>, Fail> {
        let host = in_root(self.root, hints)?;
        let bytes = match fs::File::open(&host) {
            Ok(f) => {
                use std::io::Read;
                let mut v = Vec::new();
                f.take(format::MAX_FILE + 1)
                    .read_to_end(&mut v)
                    .map_err(|source| HintsError::Read {
                        path: hints.into(),
                        source,
                    })?;
                v
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => return Ok(None),
            Err(e) => {
                return Err(Fail::Exit(format!(
                    "Cannot open \"{hints}\": {}",
                    strerror(&e)
                )))
            }
        };
        format::decode(&bytes)
            .map(Some)
            .map_err(|why| Fail::Exit(format!("\"{hints}\": {why}")))
    }

    /// `write_elf_hints`, mode 0444, replacing the file whole.
    fn write(&mut self, hints: &str, order: Order) -> Result<(), Fail> {
        let (dir, name) = match hints.rsplit_once('/') {
            Some((d, n)) => (if d.is_empty() { "/" } else { d }, n),
            None => ("/", hints),
        };
        let dir_host = in_root_strictly(self.root, dir)?;
        if !dir_host.is_dir() {
            return Err(Fail::Exit(format!(
                "mkstemp({hints}.XXXXXX): No such file or directory"
            )));
        }
        let bytes = format::encode(&self.dirs, order);
        let fault = |source| {
            Fail::Fault(HintsError::Write {
                path: hints.into(),
                source,
            })
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".ldconfig-")
            .tempfile_in(&dir_host)
            .map_err(fault)?;
        tmp.write_all(&bytes).map_err(fault)?;
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(0o444))
            .map_err(fault)?;
        tmp.persist(dir_host.join(name))
            .map_err(|e| fault(e.error))?;
        Ok(())
    }

    /// `list_elf_hints` (`ldconfig -r`): the file, its directories, and
    /// each `lib*.so.N` in them (names sorted: readdir order is the
    /// filesystem's).
    pub fn list(&mut self, hints: &str, out: &mut Vec<u8>) -> Result<(), Fail> {
        let found = self.read(hints, true)?.unwrap_or(format::Hints {
            order: self.native,
            dirs: Vec::new(),
        });
        let _ = writeln!(out, "{hints}:");
        let _ = write!(out, "\tsearch directories:");
        for (i, d) in found.dirs.iter().enumerate() {
            let _ = write!(out, "{}{d}", if i == 0 { ' ' } else { ':' });
        }
        let _ = writeln!(out);
        let mut n = 0;
        for d in &found.dirs {
            let Ok(host) = in_root(self.root, d) else {
                continue;
            };
            let Ok(entries) = fs::read_dir(&host) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .take(MAX_LISTED)
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            names.sort();
            for name in names {
                if let Some((lib, vers)) = shared_library(&name) {
                    let _ = writeln!(out, "\t{n}:-l{lib}.{vers} => {d}/{name}");
                    n += 1;
                }
            }
        }
        Ok(())
    }
}

/// `libNAME.so.DIGITS` → (NAME, DIGITS), as `list_elf_hints` matches.
fn shared_library(name: &str) -> Option<(&str, &str)> {
    if name.len() < 9 || !name.starts_with("lib") {
        return None;
    }
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let vers_at = name.len() - digits;
    let stem = name[..vers_at].strip_suffix(".so.")?;
    stem.get(3..).map(|lib| (lib, &name[vers_at..]))
}

/// strerror(3)'s text for an I/O error.
pub(crate) fn strerror(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::shared_library;

    #[test]
    fn library_names_as_ldconfig_matches_them() {
        assert_eq!(shared_library("libc.so.7"), Some(("c", "7")));
        assert_eq!(shared_library("libxml2.so.16"), Some(("xml2", "16")));
        assert_eq!(shared_library("libfoo.so.1.2"), None);
        assert_eq!(shared_library("libfoo.so"), None);
        assert_eq!(shared_library("libx.so.0"), Some(("x", "0")));
        // `-l.12`, as FreeBSD prints it too.
        assert_eq!(shared_library("lib.so.12"), Some(("", "12")));
    }
}
