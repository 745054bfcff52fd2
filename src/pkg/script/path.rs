//! Paths a script names, as the jail sees them: relative to the working
//! directory, resolved inside the image's root
//! ([`crate::fsutil::resolve_in_root`]: a symlink's absolute target
//! starts again at the root, `..` stops at it), so that no path a script
//! writes, reads or lists ever reaches the host's own files.

use std::io;
use std::path::{Component, Path, PathBuf};

/// `path` made absolute from `cwd` and normalised as the jail would name
/// it (`.` dropped, `..` climbing no higher than `/`), without following
/// links: for messages, `/dev/null` and `cd`.
pub fn logical(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        Path::new(cwd).join(path)
    };
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in joined.components() {
        match c {
            Component::Normal(n) => parts.push(n),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let mut out = String::from("/");
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(&p.to_string_lossy());
    }
    out
}

/// The host path of `path` (relative to `cwd`) inside `root`; the last
/// component is followed only with `follow_last` (to read or write a
/// file's content; not to create, replace, chown or remove the entry).
pub fn host(root: &Path, cwd: &str, path: &str, follow_last: bool) -> io::Result<PathBuf> {
    let joined = if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        Path::new(cwd).join(path)
    };
    let resolved = crate::fsutil::resolve_in_root(root, &joined, follow_last)?;
    debug_assert!(resolved.starts_with(root));
    Ok(resolved)
}

/// The message sh and FreeBSD's utilities give for an I/O error:
/// `strerror` without Rust's "(os error N)".
pub fn strerror(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => e.to_string(),
    }
}
