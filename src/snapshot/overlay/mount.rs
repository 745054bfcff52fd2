//! The overlay mounts, as data first: the option string for a stack of
//! lower directories (with or without a writable upper), the rule that says
//! when a stack is too deep for one mount, and only then the system calls
//! (Linux only; elsewhere they fail with `Unsupported`).
//!
//! The kernel takes the whole option string in one page (4096 bytes) and
//! at most 500 lower directories. jbuild keeps every stack it mounts well
//! inside both: a committed snapshot whose stack would pass
//! [`lowerdir_budget`] or [`FLATTEN_LAYERS`] gets a flattened copy of its
//! whole tree, and its descendants stack on that copy instead (see
//! `overlay.rs`).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::flavour::Flavour;

/// The features jbuild turns off, and those with the inode index on (under
/// `userxattr` spelled as that option needs: [`Flavour::features`]).
pub use super::flavour::{FEATURES_INDEX, FEATURES_OFF};

/// What the kernel reads of a mount's options: one page, with its NUL.
pub const OPTIONS_MAX: usize = 4095;

/// The longest `lowerdir=` value jbuild leaves in a committed snapshot's
/// stack under `root` (the snapshot directory): what a page leaves once a
/// step on top of it has put its upper and work directories (keys are at
/// most 200 bytes), one more layer for the commit's flattening mount, and
/// the features beside it (the longer flavour's, so that a store flattens
/// at the same depth whichever flavour mounts it).
pub fn lowerdir_budget(root: &Path) -> usize {
    // An active snapshot's directory, its key escaped at worst (every
    // byte a `:`).
    let one_path = escape(root).len() + "/active/".len() + 2 * 200 + "/work".len();
    let features = [Flavour::Trusted, Flavour::UserXattr]
        .into_iter()
        .flat_map(|f| [f.features(true).len(), f.features(false).len()])
        .max()
        .unwrap_or(0);
    let reserve = 3 * (one_path + ",upperdir=".len()) + features + 16;
    OPTIONS_MAX.saturating_sub(reserve)
}

/// The most lower directories jbuild leaves in a stack (the kernel allows
/// 500; Docker's overlay2 stops at 128).
pub const FLATTEN_LAYERS: usize = 128;

/// A path as overlayfs reads it in an option: `\`, `:` and `,` escaped
/// with a backslash (chain IDs contain `:`).
pub fn escape(path: &Path) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.as_os_str().len() + 8);
    for &b in path.as_os_str().as_bytes() {
        if matches!(b, b'\\' | b':' | b',') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// The `lowerdir=` value for `lowers`, topmost first.
pub fn lowerdir(lowers: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, l) in lowers.iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        out.extend(escape(l));
    }
    out
}

/// Whether a stack of `lowers` (of snapshots under `root`) is too deep to
/// keep: more than [`FLATTEN_LAYERS`], or a `lowerdir=` past
/// [`lowerdir_budget`].
pub fn needs_flattening(lowers: &[PathBuf], root: &Path) -> bool {
    lowers.len() > FLATTEN_LAYERS || lowerdir(lowers).len() > lowerdir_budget(root)
}

/// The option string of a mount of `lowers` (topmost first) under the
/// writable `upper` (with its `work` directory), or read-only when `upper`
/// is `None`, in `flavour`.
pub fn options(lowers: &[PathBuf], upper: Option<(&Path, &Path)>, flavour: Flavour) -> OsString {
    let mut out = b"lowerdir=".to_vec();
    out.extend(lowerdir(lowers));
    if let Some((upper, work)) = upper {
        out.extend(b",upperdir=");
        out.extend(escape(upper));
        out.extend(b",workdir=");
        out.extend(escape(work));
    }
    out.push(b',');
    out.extend(flavour.features(upper.is_some()).as_bytes());
    OsString::from_vec(out)
}

/// Mounts an overlay with `options` at `target` (read-only when
/// `readonly`).
#[cfg(target_os = "linux")]
pub fn mount(options: &OsString, target: &Path, readonly: bool) -> io::Result<()> {
    use nix::mount::MsFlags;
    let flags = if readonly {
        MsFlags::MS_RDONLY
    } else {
        MsFlags::empty()
    };
    nix::mount::mount(
        Some("overlay"),
        target,
        Some("overlay"),
        flags,
        Some(options.as_os_str()),
    )
    .map_err(io::Error::from)
}

#[cfg(not(target_os = "linux"))]
pub fn mount(_: &OsString, _: &Path, _: bool) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "overlay mounts need Linux",
    ))
}

/// Detaches whatever is mounted at `target`; nothing mounted there (or no
/// `target` at all) is not an error.
#[cfg(target_os = "linux")]
pub fn unmount(target: &Path) -> io::Result<()> {
    match nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
pub fn unmount(_: &Path) -> io::Result<()> {
    Ok(())
}

/// Detaches every mount at or below `dir` (deepest first), as
/// `/proc/self/mountinfo` lists them, and says how many there were: what
/// tests and `OverlaySnapshotter::unmount_dead_views` use to leave no
/// mount behind.
#[cfg(target_os = "linux")]
pub fn unmount_under(dir: &Path) -> io::Result<usize> {
    let points = mounts_under(dir)?;
    for p in &points {
        unmount(p)?;
    }
    Ok(points.len())
}

#[cfg(not(target_os = "linux"))]
pub fn unmount_under(_: &Path) -> io::Result<usize> {
    Ok(0)
}

/// The mount points at or below `dir` (its canonical path), deepest
/// first, as `/proc/self/mountinfo` lists them.
#[cfg(target_os = "linux")]
pub fn mounts_under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let dir = std::fs::canonicalize(dir)?;
    let info = std::fs::read("/proc/self/mountinfo")?;
    let mut points: Vec<PathBuf> = info
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(|p| PathBuf::from(OsString::from_vec(unescape_octal(p))))
        .filter(|p| p.starts_with(&dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    points.dedup();
    Ok(points)
}

#[cfg(not(target_os = "linux"))]
pub fn mounts_under(_: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(Vec::new())
}

/// mountinfo writes a space, tab, newline or backslash in a path as `\NNN`
/// (octal).
#[cfg(target_os = "linux")]
fn unescape_octal(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let digits = s
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (s[i], digits) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Whether something is mounted at `path`: it is on another device than
/// the directory that holds it.
pub fn is_mounted(path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let here = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    Ok(here.dev() != std::fs::symlink_metadata(parent)?.dev())
}

/// Tries the mount jbuild needs (one lower, an upper, the features off)
/// in `flavour`, in a scratch directory under `dir`, and what a step does
/// with it: deletes a file of the lower layer's directory and replaces
/// that directory with a new one, which must leave a whiteout and a
/// directory marked opaque with `flavour`'s xattr in the upper directory
/// (a user namespace accepts a mount without `userxattr`, then fails
/// there). `Ok` when this process may use the overlay backend here.
pub fn probe(dir: &Path, flavour: Flavour) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let scratch = tempfile::Builder::new().prefix(".probe-").tempdir_in(dir)?;
    let [lower, upper, work, merged] =
        ["lower", "upper", "work", "merged"].map(|n| scratch.path().join(n));
    for d in [&lower, &upper, &work, &merged] {
        std::fs::create_dir(d)?;
    }
    std::fs::create_dir(lower.join("d"))?;
    std::fs::write(lower.join("d/f"), "")?;
    let opts = options(std::slice::from_ref(&lower), Some((&upper, &work)), flavour);
    mount(&opts, &merged, false)?;
    let used = is_mounted(&merged).and_then(|seen| {
        if !seen {
            return Err(io::Error::other("the mount did not appear"));
        }
        let d = merged.join("d");
        std::fs::remove_file(d.join("f"))?;
        std::fs::remove_dir(&d)?;
        std::fs::create_dir(&d)
    });
    unmount(&merged)?;
    used.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("a directory of a lower layer cannot be replaced through the mount ({e})"),
        )
    })?;
    let opaque = xattr::get(upper.join("d"), flavour.opaque_xattr())?;
    if opaque.as_deref() != Some(b"y") {
        return Err(io::Error::other(format!(
            "overlayfs did not mark a replaced directory with {}",
            flavour.opaque_xattr()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_escape_colons_and_commas() {
        let lowers = [
            PathBuf::from("/s/committed/chain-sha256:ab/fs"),
            PathBuf::from("/s/a,b\\c/fs"),
        ];
        let o = options(
            &lowers,
            Some((Path::new("/s/u"), Path::new("/s/w"))),
            Flavour::Trusted,
        );
        assert_eq!(
            o.as_bytes(),
            b"lowerdir=/s/committed/chain-sha256\\:ab/fs:/s/a\\,b\\\\c/fs,upperdir=/s/u,workdir=/s/w,redirect_dir=off,metacopy=off,index=on"
        );
        let ro = options(&lowers[..1], None, Flavour::UserXattr);
        assert_eq!(
            ro.as_bytes(),
            b"lowerdir=/s/committed/chain-sha256\\:ab/fs,userxattr,redirect_dir=nofollow,metacopy=off,index=off"
        );
        assert!(!ro.as_bytes().windows(5).any(|w| w == b"upper"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_octal(b"/tmp/a\\040b\\134c"), b"/tmp/a b\\c");
    }

    #[test]
    fn deep_or_long_stacks_are_flattened() {
        let root = Path::new("/var/db/jbuild/snapshots/overlay");
        let short =
            |n| -> Vec<PathBuf> { (0..n).map(|i| PathBuf::from(format!("/{i}"))).collect() };
        assert!(!needs_flattening(&short(FLATTEN_LAYERS), root));
        assert!(needs_flattening(&short(FLATTEN_LAYERS + 1), root));
        // Chain-ID layers under that root: 124 bytes and a colon each.
        let layer = |i: usize| root.join(format!("committed/chain-sha256:{i:064x}/fs"));
        assert_eq!(escape(&layer(0)).len(), 124);
        let budget = lowerdir_budget(root);
        assert_eq!(budget, 2660);
        let fit = (budget + 1) / 125;
        let long: Vec<PathBuf> = (0..=fit).map(layer).collect();
        assert!(!needs_flattening(&long[..fit], root));
        assert!(needs_flattening(&long, root));
        // The worst mount a step on such a stack makes still fits a page:
        // a key of 200 `:`, and the commit's flattening layer on top.
        let key = root.join(format!("active/{}", ":".repeat(200)));
        let mut lowers = vec![key.join("fs")];
        lowers.extend(long[..fit].iter().cloned());
        for flavour in [Flavour::Trusted, Flavour::UserXattr] {
            let o = options(&lowers, Some((&key.join("fs"), &key.join("work"))), flavour);
            assert!(o.len() <= OPTIONS_MAX, "{}", o.len());
        }
    }
}
