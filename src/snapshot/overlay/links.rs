//! Hard links through copy-up: the names of a file stay one file, as on
//! every other backend.
//!
//! A file with several names in a lower layer is one inode there. When a
//! step writes through one of its names, overlayfs copies that inode up
//! into the step's upper directory; without its inode *index* the copy
//! gets that one name, and the other names go on showing the lower inode,
//! unchanged. `dir` and ZFS change the one inode, so every name shows the
//! write — and the images differ. The same goes for removing or replacing
//! one name: the others' link count drops on a real file system, not in
//! the lower layer.
//!
//! With `index=on` (the trusted flavour's writable mounts) overlayfs keeps
//! the link: the first copy-up of such an inode goes to `work/index/<the
//! lower inode's file handle, in hex>`, each name the step touches is
//! linked to it, and a name it never touched is read through the index
//! while the mount lives. Neither the index nor those lookups outlive the
//! mount, and `commit` removes `work/`: so before unmounting, [`link_up`]
//! has the kernel link every such name into the upper directory too (a
//! no-op `utimensat` through the mount: overlayfs's own *link-up*, which
//! also makes the missing parent directories and keeps their times). The
//! layer is then a plain tree whose names share inodes exactly as the
//! step left them.
//!
//! Finding those names: an index entry's name is the hex of overlayfs's
//! `ovl_fb` (version, the magic `0xfb`, its length, flags, the handle type,
//! the lower file system's UUID, then the handle) of the lower inode. The
//! parent's layer directories are walked (as plain directories, not
//! through a mount) for files with several links, and each such inode's
//! handle (`name_to_handle_at(2)`) is looked up among the entries; its
//! names the step's tree still shows as that inode are linked up. The walk
//! costs a `stat` per file of the parent's layers, and is only made when
//! the index is not empty: a step that copied up no multiply-linked file
//! pays nothing.
//!
//! Without an index (the kernel allows it only where it can decode file
//! handles, i.e. with `CAP_DAC_READ_SEARCH` in the initial user namespace;
//! in a user namespace it falls back to `index=off`) the link cannot be
//! kept, nor can a commit tell a name written in place (whose other names
//! should follow) from a name replaced (whose other names should not).
//! [`check_unbroken`] then refuses a step that touched one name of a lower
//! multiply-linked file and left it in a state the other backends would
//! not, instead of committing a tree they would not make.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::flavour::Flavour;

/// A step's mount, as [`link_up`] and [`check_unbroken`] see it.
pub struct Step<'a> {
    /// The upper directory: what the step changed.
    pub upper: &'a Path,
    /// The work directory (its `index/`, when the kernel keeps one).
    pub work: &'a Path,
    /// The step's tree, still mounted.
    pub merged: &'a Path,
    /// The parent's tree (a view), and the layer directories it is made
    /// of, topmost first.
    pub parent: &'a Path,
    pub lowers: &'a [PathBuf],
    pub flavour: Flavour,
}

/// A file handle: `(type, bytes)`, as `name_to_handle_at(2)` gives it.
type Handle = (i32, Vec<u8>);

/// The inode of a lower file's names: `(device, inode)` in the parent's
/// tree.
type Inode = (u64, u64);

impl Step<'_> {
    /// Whether overlayfs keeps an inode index for this mount (it makes
    /// `work/index` on mounting when it does).
    pub fn has_index(&self) -> bool {
        self.work.join("index").is_dir()
    }
}

/// Links into the upper directory every name of a lower multiply-linked
/// file the step copied up that is still only read through the index, and
/// says how many names it linked. Call it while the step is mounted.
pub fn link_up(step: &Step<'_>) -> io::Result<usize> {
    let indexed = index_entries(&step.work.join("index"))?;
    if indexed.is_empty() {
        return Ok(0);
    }
    let mut linked = 0;
    // All the names of a lower inode are in the one layer that holds it;
    // a layer directory is walked as it is, not through a mount.
    for layer in step.lowers {
        for names in multi_link_names(layer, Path::new(""))?.into_values() {
            let first = layer.join(&names[0]);
            let Some(&copy_ino) = indexed.get(&handle_of(&first)?) else {
                continue;
            };
            let lower_ino = fs::symlink_metadata(&first)
                .map_err(|e| with_path(e, "stat", &first))?
                .ino();
            for name in &names {
                if link_one_up(step, name, lower_ino, copy_ino)? {
                    linked += 1;
                }
            }
        }
    }
    Ok(linked)
}

/// Links `name` up if the step's tree shows it as the lower inode
/// `lower_ino` (overlayfs shows an indexed copy under the inode number of
/// the lower file it came from, the layers being on one file system) while
/// the upper directory has nothing there; says whether it did.
fn link_one_up(step: &Step<'_>, name: &Path, lower_ino: u64, copy_ino: u64) -> io::Result<bool> {
    if exists(&step.upper.join(name))? {
        // Linked already, replaced, or whited out.
        return Ok(false);
    }
    let through = step.merged.join(name);
    match lstat_opt(&through)? {
        // Under a directory the step removed or replaced, or hidden by a
        // layer above this one.
        Some(seen) if !seen.is_dir() && seen.ino() == lower_ino => {
            let times = |s: i64, ns: i64| filetime::FileTime::from_unix_time(s, ns as u32);
            filetime::set_symlink_file_times(
                &through,
                times(seen.atime(), seen.atime_nsec()),
                times(seen.mtime(), seen.mtime_nsec()),
            )
            .map_err(|e| with_path(e, "link up", &through))?;
        }
        _ => return Ok(false),
    }
    let up = step.upper.join(name);
    let got = fs::symlink_metadata(&up).map_err(|e| with_path(e, "link up", &up))?;
    if got.ino() != copy_ino {
        return Err(io::Error::other(format!(
            "overlayfs did not link {} up to its indexed copy",
            up.display()
        )));
    }
    Ok(true)
}

/// The copies `index` holds, by the handle of the lower inode each was
/// copied from: the inode number of the copy.
fn index_entries(index: &Path) -> io::Result<HashMap<Handle, u64>> {
    let mut out = HashMap::new();
    for entry in fs::read_dir(index).map_err(|e| with_path(e, "read", index))? {
        let entry = entry.map_err(|e| with_path(e, "read", index))?;
        let Some(handle) = parse_index_name(entry.file_name().as_bytes()) else {
            // `#<n>`: a whiteout overlayfs shares between removed names.
            continue;
        };
        let meta = entry
            .metadata()
            .map_err(|e| with_path(e, "stat", &entry.path()))?;
        if !meta.is_dir() {
            out.insert(handle, meta.ino());
        }
    }
    Ok(out)
}

/// The lower inode's handle an index entry is named after (`ovl_fb`, in
/// hex: version, magic `0xfb`, length, flags, type, 16 bytes of UUID, the
/// handle), or `None` for a name of another form.
pub fn parse_index_name(name: &[u8]) -> Option<Handle> {
    let bytes = hex::decode(name).ok()?;
    let ok = bytes.len() > 21 && bytes[1] == 0xfb && usize::from(bytes[2]) == bytes.len();
    ok.then(|| (i32::from(bytes[4]), bytes[21..].to_vec()))
}

/// The names of every non-directory with several links under `rel` of the
/// tree `root`, by inode.
fn multi_link_names(root: &Path, rel: &Path) -> io::Result<HashMap<Inode, Vec<PathBuf>>> {
    let mut out: HashMap<Inode, Vec<PathBuf>> = HashMap::new();
    let top = fs::symlink_metadata(root.join(rel)).map_err(|e| with_path(e, "stat", rel))?;
    if !top.is_dir() {
        if top.nlink() > 1 {
            out.insert((top.dev(), top.ino()), vec![rel.to_path_buf()]);
        }
        return Ok(out);
    }
    let mut dirs = vec![rel.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let host = root.join(&dir);
        for entry in fs::read_dir(&host).map_err(|e| with_path(e, "read", &host))? {
            let entry = entry.map_err(|e| with_path(e, "read", &host))?;
            let rel = dir.join(entry.file_name());
            let meta = entry
                .metadata()
                .map_err(|e| with_path(e, "stat", &entry.path()))?;
            if meta.is_dir() {
                dirs.push(rel);
            } else if meta.nlink() > 1 {
                out.entry((meta.dev(), meta.ino())).or_default().push(rel);
            }
        }
    }
    Ok(out)
}

/// `name_to_handle_at(2)` of `path` itself (a symlink is not followed).
#[cfg(target_os = "linux")]
fn handle_of(path: &Path) -> io::Result<Handle> {
    /// `struct file_handle` with room for `MAX_HANDLE_SZ` bytes.
    #[repr(C)]
    struct FileHandle {
        handle_bytes: u32,
        handle_type: i32,
        f_handle: [u8; 128],
    }
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut fh = FileHandle {
        handle_bytes: 128,
        handle_type: 0,
        f_handle: [0; 128],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: `fh` is a `struct file_handle` whose `handle_bytes` says how
    // much room follows it; `c` is a NUL-terminated path.
    let r = unsafe {
        libc::name_to_handle_at(
            libc::AT_FDCWD,
            c.as_ptr(),
            std::ptr::addr_of_mut!(fh).cast(),
            &mut mount_id,
            0,
        )
    };
    if r != 0 {
        return Err(with_path(
            io::Error::last_os_error(),
            "get the file handle of",
            path,
        ));
    }
    let len = (fh.handle_bytes as usize).min(fh.f_handle.len());
    Ok((fh.handle_type, fh.f_handle[..len].to_vec()))
}

#[cfg(not(target_os = "linux"))]
fn handle_of(_: &Path) -> io::Result<Handle> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "file handles are Linux's",
    ))
}

/// Fails when the step, mounted without an index, left a lower
/// multiply-linked file in a state another backend would not: one of its
/// names written in place or replaced (the upper directory cannot say
/// which) while another name is still the lower file, or two of its names
/// copied up apart, or a name removed while others stay (their link count
/// is the lower file's). Costs a look at each entry of the upper
/// directory, and a walk of the parent's tree only when one of them is a
/// name of such a file.
pub fn check_unbroken(step: &Step<'_>) -> io::Result<Option<Broken>> {
    let mut touched = Vec::new();
    touched_names(step, Path::new(""), &mut touched)?;
    if touched.is_empty() {
        return Ok(None);
    }
    let touched: HashSet<PathBuf> = touched.into_iter().collect();
    for names in multi_link_names(step.parent, Path::new(""))?.into_values() {
        if !names.iter().any(|n| touched.contains(n)) {
            continue;
        }
        let mut uppers = HashSet::new();
        let mut left = None;
        for name in &names {
            match lstat_opt(&step.upper.join(name))? {
                Some(m) if !is_whiteout(&m) => {
                    uppers.insert(m.ino());
                }
                Some(_) => {}
                None if touched.contains(name) => {}
                None => left = left.or(Some(name)),
            }
        }
        if let Some(left) = left {
            let changed = names.iter().find(|n| touched.contains(*n)).unwrap_or(left);
            return Ok(Some(Broken {
                changed: changed.clone(),
                other: left.clone(),
            }));
        }
        if uppers.len() > 1 {
            return Ok(Some(Broken {
                changed: names[0].clone(),
                other: names[1].clone(),
            }));
        }
    }
    Ok(None)
}

/// A lower file with several names that a step without an index changed
/// through `changed` while `other` is another of its names.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken {
    pub changed: PathBuf,
    pub other: PathBuf,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the step changed /{}, a name of a file that is also /{}, and overlayfs without its \
             inode index (which the kernel gives only to root outside any user namespace) \
             cannot keep such names one file as the other backends do, so the layer would \
             differ from theirs; build as root, or use --backend dir",
            self.changed.display(),
            self.other.display()
        )
    }
}

/// The names of lower multiply-linked files the upper directory's entries
/// under `rel` touch: a non-directory or whiteout over one, or a
/// directory that replaced (opaque) or removed one holding some.
fn touched_names(step: &Step<'_>, rel: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let dir = step.upper.join(rel);
    for entry in fs::read_dir(&dir).map_err(|e| with_path(e, "read", &dir))? {
        let entry = entry.map_err(|e| with_path(e, "read", &dir))?;
        let rel = rel.join(entry.file_name());
        let meta = entry
            .metadata()
            .map_err(|e| with_path(e, "stat", &entry.path()))?;
        let Some(below) = lstat_opt(&step.parent.join(&rel))? else {
            continue;
        };
        let replaced = !meta.is_dir() || is_opaque(&entry.path(), step.flavour)?;
        if !replaced && below.is_dir() {
            touched_names(step, &rel, out)?;
        } else if below.is_dir() {
            for names in multi_link_names(step.parent, &rel)?.into_values() {
                out.extend(names);
            }
        } else if below.nlink() > 1 {
            out.push(rel);
        }
    }
    Ok(())
}

fn is_opaque(dir: &Path, flavour: Flavour) -> io::Result<bool> {
    match xattr::get(dir, flavour.opaque_xattr()) {
        Ok(v) => Ok(v.as_deref() == Some(b"y")),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(false),
        Err(e) => Err(with_path(e, "read the xattrs of", dir)),
    }
}

fn is_whiteout(m: &fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    m.file_type().is_char_device() && m.rdev() == 0
}

fn exists(path: &Path) -> io::Result<bool> {
    lstat_opt(path).map(|m| m.is_some())
}

/// `lstat`, or `None` when nothing is there (or a file is where a
/// directory on the way should be).
fn lstat_opt(path: &Path) -> io::Result<Option<fs::Metadata>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => Ok(None),
        Err(e) => Err(with_path(e, "stat", path)),
    }
}

fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_give_the_lower_handle() {
        // What Linux 6.18 named the index entry of an ext4 file (handle
        // type 1, FILEID_INO32_GEN: inode 9978845, generation 0x190f3c19).
        let name = b"00fb1d000100000000000000000000000000000000dd439800193c0f19";
        assert_eq!(
            parse_index_name(name),
            Some((1, vec![0xdd, 0x43, 0x98, 0x00, 0x19, 0x3c, 0x0f, 0x19]))
        );
        assert_eq!(parse_index_name(b"#4"), None);
        // A length that is not the name's, or another magic.
        assert_eq!(parse_index_name(&name[..name.len() - 2]), None);
        let mut other = name.to_vec();
        other[2..4].copy_from_slice(b"fc");
        assert_eq!(parse_index_name(&other), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_handle_names_the_inode_not_the_name() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("a"), "a").unwrap();
        fs::hard_link(t.path().join("a"), t.path().join("b")).unwrap();
        fs::write(t.path().join("c"), "c").unwrap();
        let h = |n: &str| handle_of(&t.path().join(n));
        match h("a") {
            Ok(a) => {
                assert_eq!(a, h("b").unwrap());
                assert_ne!(a, h("c").unwrap());
            }
            // A file system without handles (some tmpfs): nothing to check.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            Err(e) => panic!("{e}"),
        }
    }
}
