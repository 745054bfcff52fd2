//! Filesystem helpers shared by everything that writes into a root on behalf
//! of a recipe or a layer: resolving a path *inside* a root the way the
//! jail would see it, and writing files atomically; and telling an I/O
//! error about a path from a fault of the system. File flags (`schg`
//! and the like) are read and set through [`flags::FileFlags`]; files
//! written at a path the user names (`--iidfile`, `oci-archive:FILE`)
//! through [`output`]; jbuild's own directories under its root are
//! checked to be real directories before they are used ([`places`]).

pub mod durable;
pub mod flags;
pub mod input;
pub mod output;
pub mod places;

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

/// Symlinks followed while resolving one path before giving up (as Linux's
/// and FreeBSD's own limits do).
const MAX_SYMLINK_HOPS: u32 = 255;

/// Resolves `path` (absolute or relative, as a process inside `root` would
/// name it) to a host path that is guaranteed to lie under `root`.
///
/// Symlinks met on the way are followed as if `root` were `/`: an absolute
/// target restarts at `root`, and `..` never climbs above it. This is what
/// stops a recipe or a crafted layer from writing through `etc -> /etc` to
/// the host. The last component is followed only when `follow_last` is set
/// (set it to read or write a file's content; clear it to create, replace,
/// chown or remove the entry itself).
///
/// Missing components are fine: they are taken literally, so the result can
/// name something to be created.
pub fn resolve_in_root(root: &Path, path: &Path, follow_last: bool) -> io::Result<PathBuf> {
    resolve_in_root_with(root, path, follow_last, &mut |_| Ok(()))
}

/// [`resolve_in_root`], calling `visit` with the host path of every symlink
/// it follows, before following it; an error from `visit` stops there. The
/// layer applier uses it to refuse paths through symlinks a layer made.
pub fn resolve_in_root_with(
    root: &Path,
    path: &Path,
    follow_last: bool,
    visit: &mut dyn FnMut(&Path) -> io::Result<()>,
) -> io::Result<PathBuf> {
    walk(root, path, follow_last, visit, false).map_err(|e| match e {
        InRootError::Io(e) => e,
        InRootError::Outside { .. } => unreachable!("only a strict walk refuses"),
    })
}

/// Why [`resolve_in_root_strictly`] gave no path.
#[derive(Debug, thiserror::Error)]
pub enum InRootError {
    /// Followed by the host (mount(8) on a jail's fstab line, say), `path`
    /// would leave the root: through the symlink `link` (its place in the
    /// root) to `target`, an absolute path or one climbing above the root.
    #[error("{} leads out of the root{}", path.display(), through(link.as_ref()))]
    Outside {
        path: PathBuf,
        link: Option<(PathBuf, PathBuf)>,
    },
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl crate::blame::Blame for InRootError {
    /// A path that leads out of its root is the input's (a recipe, an
    /// image); a failed lookup as [`path_at_fault`] says.
    fn is_user_error(&self) -> bool {
        match self {
            InRootError::Outside { .. } => true,
            InRootError::Io(e) => path_at_fault(e),
        }
    }
}

fn through(link: Option<&(PathBuf, PathBuf)>) -> String {
    match link {
        Some((l, t)) => format!(" through the symlink {} -> {}", l.display(), t.display()),
        None => String::new(),
    }
}

/// [`resolve_in_root`] following the last component, for a path the host
/// itself will follow later (a mount point, which mount(8) resolves on the
/// host, outside the jail): the same path the jail sees, but a symlink on
/// the way whose target is absolute, or a `..` that would climb above the
/// root, is refused instead of being taken as the jail would take it — on
/// the host those lead out of the root.
pub fn resolve_in_root_strictly(root: &Path, path: &Path) -> Result<PathBuf, InRootError> {
    walk(root, path, true, &mut |_| Ok(()), true)
}

/// The resolver behind the functions above; `strict` refuses what would
/// lead the host out of the root.
fn walk(
    root: &Path,
    path: &Path,
    follow_last: bool,
    visit: &mut dyn FnMut(&Path) -> io::Result<()>,
    strict: bool,
) -> Result<PathBuf, InRootError> {
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut resolved: Vec<OsString> = Vec::new();
    let mut hops = 0;
    // The last symlink followed, for the error of a strict walk.
    let mut last_link: Option<(PathBuf, PathBuf)> = None;
    let outside = |link: Option<(PathBuf, PathBuf)>| InRootError::Outside {
        path: path.to_path_buf(),
        link,
    };
    while let Some(name) = pending.pop() {
        if name == ".." {
            if resolved.pop().is_none() && strict {
                return Err(outside(last_link));
            }
            continue;
        }
        if !follow_last && pending.is_empty() {
            resolved.push(name);
            break;
        }
        let candidate = join_all(root, &resolved).join(&name);
        match fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                visit(&candidate)?;
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "too many levels of symbolic links resolving {}",
                            path.display()
                        ),
                    )
                    .into());
                }
                let target = fs::read_link(&candidate)?;
                if strict {
                    let link = Path::new("/").join(join_all(Path::new(""), &resolved).join(&name));
                    if target.is_absolute() {
                        return Err(outside(Some((link, target))));
                    }
                    last_link = Some((link, target.clone()));
                } else if target.is_absolute() {
                    resolved.clear();
                }
                push_components(&mut pending, &target);
            }
            _ => resolved.push(name),
        }
    }
    Ok(join_all(root, &resolved))
}

/// Pushes the components of `path` onto `stack` so that popping yields them
/// in order; `.` and root markers are dropped, `..` kept for the caller.
fn push_components(stack: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

fn join_all(root: &Path, parts: &[OsString]) -> PathBuf {
    let mut p = root.to_path_buf();
    for part in parts {
        p.push(part);
    }
    p
}

/// Whether an I/O error says something about the path it was about (it is
/// missing, in the way, not a directory, a loop, not permitted): the
/// user's to fix, rather than a fault of the system.
pub fn path_at_fault(e: &io::Error) -> bool {
    use io::ErrorKind as K;
    matches!(
        e.kind(),
        K::NotFound
            | K::AlreadyExists
            | K::NotADirectory
            | K::IsADirectory
            | K::DirectoryNotEmpty
            | K::InvalidInput
            | K::PermissionDenied
    ) || matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENAMETOOLONG))
}

/// Writes `bytes` to `path` so that readers see the old content or the new,
/// never a part: a temporary file beside it, fsync, rename, fsync of the
/// directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_replacing(path, bytes)?;
    sync_dir(parent_of(path))
}

/// [`write_atomic`] without the fsync of the directory: the content is
/// durable before the name, and the name becomes durable with the
/// caller's next sync of the directory (several renames, one sync).
pub fn write_replacing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// [`write_replacing`] without any sync: readers still see the old content
/// or the new, never a part, but a crash may lose either. For a tree that
/// is synced whole before anything names it ([`sync_all_at_once`]).
pub fn write_renamed(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(parent_of(path))?;
    tmp.write_all(bytes)?;
    if sync {
        tmp.as_file().sync_all()?;
        record_sync(tmp.path());
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The directory `path` is in (`.` for a bare name): `iid` alone has the
/// parent "", which cannot be opened to be synced.
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// fsyncs a directory, so a rename in it survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()?;
    record_sync(dir);
    Ok(())
}

/// Threads [`sync_all_at_once`] uses at most.
const SYNC_THREADS: usize = 8;

/// fsyncs every path in `paths` (files and directories) at the same time,
/// each on its own thread (at most `SYNC_THREADS` at once), and returns
/// once all are durable, with the first error met if any failed.
///
/// Why at once: a journalling filesystem commits every sync in flight
/// together (ext4's jbd2 joins waiters to the running transaction; ZFS's
/// ZIL writes one block for all of them), so N independent syncs cost
/// about one commit's wait instead of N in a row. Only for syncs that do
/// not depend on each other: whatever must be durable *before* one of
/// these goes in an earlier call.
pub fn sync_all_at_once(paths: &[PathBuf]) -> io::Result<()> {
    let sync = |p: &PathBuf| {
        fs::File::open(p)
            .and_then(|f| f.sync_all())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot sync {}: {e}", p.display())))?;
        record_sync(p);
        Ok(())
    };
    if paths.len() < 2 {
        return paths.iter().try_for_each(sync);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || -> io::Result<()> {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match paths.get(i) {
                Some(p) => sync(p)?,
                None => return Ok(()),
            }
        }
    };
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..paths.len().min(SYNC_THREADS))
            .map(|_| s.spawn(work))
            .collect();
        threads
            .into_iter()
            .try_for_each(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

/// Makes every path in `paths` durable, all of them entries of one tree
/// on the filesystem of `top` (the tree's top directory, at `top_path`,
/// opened before anything in it was written, so that a failed writeback
/// of any of its files is reported here).
///
/// Linux: one `syncfs` of that filesystem: every dirty page and every
/// metadata change on it is written and the disk's cache flushed, with one
/// wait for the journal. The `fsync`s of N paths at once
/// ([`sync_all_at_once`]) reach the journal at different moments — a
/// thread is started for each, and each file's writeback adds to the
/// journal as it starts — so the late ones wait for a second commit (a
/// trace of a 2 MB copy to a new layout on ext4 with a journal: two commit
/// waits for its 8 paths, 7 threads started). The cost: `syncfs` also
/// writes what other processes left dirty on the same filesystem.
/// Elsewhere: [`sync_all_at_once`].
pub fn sync_tree_of(top: &fs::File, top_path: &Path, paths: &[PathBuf]) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        nix::unistd::syncfs(top).map_err(io::Error::from)?;
        record("syncfs", top_path);
        for p in paths {
            record_sync(p);
        }
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (top, top_path);
        sync_all_at_once(paths)
    }
}

/// What was made durable, and what was renamed, in order, in the
/// library's own tests (`("sync", path)`, `("rename", new path)`,
/// `("syncfs", the directory synced through)`): how they
/// check what was durable before what, without strace.
#[cfg(test)]
pub(crate) static SYNCED: std::sync::Mutex<Vec<(&'static str, PathBuf)>> =
    std::sync::Mutex::new(Vec::new());

/// Notes in `SYNCED` that `path` was just synced (tests only).
#[cfg_attr(not(test), inline(always))]
pub(crate) fn record_sync(path: &Path) {
    record("sync", path);
}

/// Notes in `SYNCED` that `what` just happened to `path` (tests only).
#[cfg_attr(not(test), inline(always))]
pub(crate) fn record(what: &'static str, path: &Path) {
    #[cfg(test)]
    SYNCED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((what, path.to_path_buf()));
    #[cfg(not(test))]
    let _ = (what, path);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn symlinks_stay_inside_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::create_dir_all(root.join("usr/lib")).unwrap();
        symlink("/etc", root.join("etc-abs")).unwrap();
        symlink("../../../../..", root.join("usr/up")).unwrap();
        symlink("usr/lib", root.join("lib")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();

        let r = |p: &str, f| resolve_in_root(root, Path::new(p), f).unwrap();
        assert_eq!(r("/etc-abs/passwd", true), root.join("etc/passwd"));
        assert_eq!(r("usr/up/etc/shadow", true), root.join("etc/shadow"));
        assert_eq!(r("/../../x", true), root.join("x"));
        assert_eq!(r("/lib/libc.so", true), root.join("usr/lib/libc.so"));
        // The last component itself is kept when not following.
        assert_eq!(r("/lib", false), root.join("lib"));
        assert_eq!(r("/lib", true), root.join("usr/lib"));
        assert!(resolve_in_root(root, Path::new("loop1/x"), true).is_err());

        // Strictly: what stays inside whoever follows it is the jail's
        // answer; what the host would follow out is refused, naming the link.
        let strict = |p: &str| resolve_in_root_strictly(root, Path::new(p));
        assert_eq!(
            strict("/lib/libc.so").unwrap(),
            root.join("usr/lib/libc.so")
        );
        assert_eq!(strict("/usr/lib/../x").unwrap(), root.join("usr/x"));
        let out = |p: &str| match strict(p) {
            Err(InRootError::Outside { link, .. }) => link,
            other => panic!("{p}: {other:?}"),
        };
        assert_eq!(
            out("/etc-abs/passwd"),
            Some(("/etc-abs".into(), "/etc".into()))
        );
        assert_eq!(
            out("/usr/up/etc"),
            Some(("/usr/up".into(), "../../../../..".into()))
        );
        assert_eq!(out("/../x"), None);
        assert!(matches!(strict("loop1/x"), Err(InRootError::Io(_))));
    }

    #[test]
    fn write_atomic_replaces() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
    }
}
