//! Native instructions: steps that edit a root directory directly instead of
//! running a process inside it, so they work for a FreeBSD root on any host.
//!
//! | instruction | function | what it mirrors |
//! |---|---|---|
//! | `SYSRC [-f file] name=value` (`+=`, `-=`) | [`sysrc`] | FreeBSD's sysrc(8) |
//! | `SERVICE name enable\|disable` | [`service`] | `service name enable` |
//! | `LINE_IN_FILE line file` | [`line_in_file`] | Ansible's `lineinfile` (append only) |
//! | `RENDER path` | [`render`] | Bastille's RENDER |
//! | `COPY` | [`copy`] | Dockerfile COPY, with [`Ignore`] for `.jailignore` |
//!
//! Two rules hold for everything here:
//!
//! - Every path inside a root goes through [`resolve_in_root`], so neither
//!   a recipe nor a symlink planted by an earlier RUN step (`/etc ->
//!   /host/etc`, `rc.conf -> ../../../etc/passwd`) can make jbuild write
//!   outside the root.
//! - Small configuration files are replaced atomically (temporary file,
//!   fsync, rename) keeping their mode and owner; a file whose content would
//!   not change is not rewritten at all, so its mtime and the layer stay
//!   untouched.
//!
//! [`sources_digest`] is the cache-key side of COPY: it hashes exactly the
//! listing (`sources.rs`) that [`copy`] consumes.
//!
//! [`resolve_in_root`]: crate::fsutil::resolve_in_root

mod context;
mod copy;
mod ignore;
mod lineinfile;
mod render;
mod service;
mod sources;
mod sysrc;

pub use context::{hash_cache, sources_digest};
pub use copy::{copy, CopyOptions, CopyStats, Unpack};
pub use ignore::Ignore;
pub use lineinfile::line_in_file;
pub use render::{render, RenderStats};
pub use service::{service, service_rcvar};
pub use sysrc::{sysrc, SysrcChange};

use crate::blame::Blame;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::fsutil::resolve_in_root;

/// Why a native instruction failed. Paths inside a root are shown as the
/// jail sees them (`/etc/rc.conf`); the build engine adds the Jailfile
/// location.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// `cannot {action} `{path}`: {the I/O error}`, on one line (the I/O
    /// error kept by type, [`crate::blame::At`]).
    #[error(transparent)]
    Io(crate::blame::At<io::Error>),
    #[error("`{name}` is not a valid {what} name: use letters, digits and `_`, not starting with a digit")]
    InvalidName { name: String, what: &'static str },
    #[error(
        "`{name}` is not a valid service name: use the name of an rc.d script (letters, digits, \
         `_`, `-`, `.`, `+`)"
    )]
    InvalidService { name: String },
    #[error("invalid value for `{name}`: {reason}")]
    InvalidValue { name: String, reason: &'static str },
    #[error("`{path}` line {line}: {reason}; fix the file (e.g. with RUN) before editing it")]
    Syntax {
        path: PathBuf,
        line: usize,
        reason: &'static str,
    },
    #[error(
        "cannot add to or remove from `{name}`: its value in `{path}` line {line} is a shell \
         expression jbuild does not evaluate; set it with `SYSRC {name}=value` instead"
    )]
    NotLiteral {
        name: String,
        path: PathBuf,
        line: usize,
    },
    #[error("COPY source `{path}` matches nothing in the build context")]
    SourceNotFound { path: String },
    #[error(
        "COPY source `{path}` points outside the build context; only paths inside it can be copied"
    )]
    SourceEscapes { path: String },
    #[error("invalid pattern `{pattern}`{}: {reason}", origin_suffix(.origin))]
    BadPattern {
        pattern: String,
        origin: Option<PathBuf>,
        reason: String,
    },
    #[error(
        "COPY cannot read `{path}`: {what} are not copied (remove it or list it in .jailignore)"
    )]
    UnsupportedFile { path: PathBuf, what: &'static str },
    #[error("COPY inline file name `{name}` is not valid: give a plain file name without `/`")]
    InvalidInlineName { name: String },
    #[error("cannot write `{path}`: {reason}")]
    Conflict { path: PathBuf, reason: &'static str },
    /// ADD's archive was refused, as a hostile layer is.
    #[error("ADD cannot extract the {format} archive `{path}`")]
    Archive {
        path: PathBuf,
        format: &'static str,
        #[source]
        source: crate::layer::LayerError,
    },
}

fn origin_suffix(origin: &Option<PathBuf>) -> String {
    origin
        .as_ref()
        .map(|p| format!(" in `{}`", p.display()))
        .unwrap_or_default()
}

impl NativeError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> NativeError {
        let path = path.into();
        move |source| {
            NativeError::Io(crate::blame::At::new(
                format!("cannot {action} `{}`", path.display()),
                source,
            ))
        }
    }
}

impl Blame for NativeError {
    /// Whether the recipe, the build context or the root it edits is at
    /// fault (exit code 1): every refusal, and a file operation that failed
    /// on a path (missing, in the way, a loop, not readable). Other
    /// filesystem errors (a failing disk, a read-only filesystem) are the
    /// system's.
    fn is_user_error(&self) -> bool {
        match self {
            NativeError::Io(at) => crate::fsutil::path_at_fault(&at.error),
            NativeError::Archive { source, .. } => source.is_bad_input(),
            NativeError::InvalidName { .. }
            | NativeError::InvalidService { .. }
            | NativeError::InvalidValue { .. }
            | NativeError::Syntax { .. }
            | NativeError::NotLiteral { .. }
            | NativeError::SourceNotFound { .. }
            | NativeError::SourceEscapes { .. }
            | NativeError::BadPattern { .. }
            | NativeError::UnsupportedFile { .. }
            | NativeError::InvalidInlineName { .. }
            | NativeError::Conflict { .. } => true,
        }
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: a shell variable name, which is what an
/// rc.conf variable is.
pub(crate) fn is_var_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The owner new files and directories get when the recipe does not say:
/// root, as in an image. When jbuild does not run as root it cannot give
/// files away, so they stay the caller's (rootless test runs).
pub(crate) fn default_owner() -> Option<(u32, u32)> {
    nix::unistd::geteuid().is_root().then_some((0, 0))
}

/// A file's content and metadata, `None` if it does not exist.
pub(crate) fn read_optional(
    host: &Path,
    shown: &Path,
) -> Result<Option<(Vec<u8>, fs::Metadata)>, NativeError> {
    match fs::read(host) {
        Ok(bytes) => {
            let meta = fs::metadata(host).map_err(NativeError::io("read", shown))?;
            Ok(Some((bytes, meta)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NativeError::io("read", shown)(e)),
    }
}

/// Replaces the file at `host` with `bytes` atomically, with `mode` and,
/// when given, `owner` set before the rename so no reader ever sees the
/// file with the wrong permissions.
pub(crate) fn write_file_atomic(
    host: &Path,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    let dir = host.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".jbuild-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    set_owner_mode(tmp.as_file(), owner, mode)?;
    tmp.as_file().sync_all()?;
    tmp.persist(host).map_err(|e| e.error)?;
    crate::fsutil::sync_dir(dir)
}

/// chown before chmod: chown clears the set-id bits.
pub(crate) fn set_owner_mode(
    file: &fs::File,
    owner: Option<(u32, u32)>,
    mode: u32,
) -> io::Result<()> {
    if let Some((uid, gid)) = owner {
        let meta = file.metadata()?;
        if (meta.uid(), meta.gid()) != (uid, gid) {
            std::os::unix::fs::fchown(file, Some(uid), Some(gid))?;
        }
    }
    file.set_permissions(fs::Permissions::from_mode(mode))
}

/// Makes sure the directory `dir` (a path inside `root`) exists and returns
/// its host path. Existing symlinks on the way are followed inside the
/// root; missing directories (also those a symlink points to) are created
/// with mode 0755 and the default owner.
pub(crate) fn ensure_dir(root: &Path, dir: &Path) -> Result<PathBuf, NativeError> {
    let dir = lexical(dir);
    let host = resolve_in_root(root, &dir, true).map_err(NativeError::io("resolve", &dir))?;
    // Every existing component of `host` is a real directory (resolving
    // followed the symlinks), and the missing ones are taken literally.
    let mut walked = PathBuf::from("/");
    let mut at = root.to_path_buf();
    for part in host
        .strip_prefix(root)
        .unwrap_or(Path::new(""))
        .components()
    {
        walked.push(part);
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => {
                let reason = "it exists and is not a directory";
                return Err(NativeError::Conflict {
                    path: walked,
                    reason,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(NativeError::io("inspect", &walked)(e)),
        }
        fs::create_dir(&at).map_err(NativeError::io("create directory", &walked))?;
        let created = fs::File::open(&at).map_err(NativeError::io("open", &walked))?;
        set_owner_mode(&created, default_owner(), 0o755)
            .map_err(NativeError::io("set owner and mode of", &walked))?;
    }
    Ok(host)
}

/// `path` (taken from `/`) with `.` and `..` resolved by name, `..`
/// stopping at `/`, as Docker cleans a destination.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            std::path::Component::Normal(n) => out.push(n),
            std::path::Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// The host path of a file named by a recipe inside `root` (following
/// symlinks inside the root), with its parent directory created.
pub(crate) fn target_file(root: &Path, file: &str) -> Result<PathBuf, NativeError> {
    let shown = Path::new("/").join(file);
    let host = resolve_in_root(root, &shown, true).map_err(NativeError::io("resolve", &shown))?;
    let rel = host.strip_prefix(root).unwrap_or(&host);
    if let Some(parent) = rel.parent() {
        ensure_dir(root, parent)?;
    }
    Ok(host)
}

/// Writes `new` over the file `host` (shown to users as `shown`) if it
/// differs from `old`: keeping mode and owner of an existing file, or 0644
/// and the default owner for a new one.
pub(crate) fn replace_if_changed(
    host: &Path,
    shown: &Path,
    old: Option<&(Vec<u8>, fs::Metadata)>,
    new: &[u8],
) -> Result<bool, NativeError> {
    let (mode, owner) = match old {
        Some((bytes, _)) if bytes.as_slice() == new => return Ok(false),
        Some((_, meta)) => (meta.mode() & 0o7777, Some((meta.uid(), meta.gid()))),
        None => (0o644, default_owner()),
    };
    write_file_atomic(host, new, mode, owner).map_err(NativeError::io("write", shown))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn var_names() {
        for ok in ["a", "_", "sshd_enable", "A9_b"] {
            assert!(is_var_name(ok), "{ok}");
        }
        for bad in ["", "9a", "a-b", "a b", "a=b", "é"] {
            assert!(!is_var_name(bad), "{bad}");
        }
    }

    #[test]
    fn ensure_dir_stays_inside_and_refuses_files() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink("/elsewhere", root.join("usr")).unwrap();
        let host = ensure_dir(&root, Path::new("/usr/local/etc")).unwrap();
        assert_eq!(host, root.join("elsewhere/local/etc"));
        assert_eq!(fs::metadata(&host).unwrap().mode() & 0o7777, 0o755);
        fs::write(root.join("file"), "x").unwrap();
        assert!(matches!(
            ensure_dir(&root, Path::new("/file/sub")),
            Err(NativeError::Conflict { .. })
        ));
    }
}
