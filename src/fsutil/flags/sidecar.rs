//! FreeBSD file flags kept beside a tree, for hosts without `chflags(2)`.
//!
//! On Linux no file can carry `schg` or `uarch`, so [`super::HostFlags`]
//! drops what it is asked to set. A [`Sidecar`] keeps instead, for one
//! root, a table of paths (relative to the root) and their flags, and
//! answers [`FileFlags::get`] from it, so the code that sets flags (the
//! layer applier, the package installer) and the code that reads them
//! (the layer tar writer, `SCHILY.fflags`) meet as they would on FreeBSD.
//! Where the table is kept between the step that fills it and the export
//! that reads it is the snapshot's business (`snapshot::fflags`); this
//! module only holds it and writes it as text.
//!
//! FreeBSD keeps flags on the inode: every name of a hard-linked file has
//! them. The table is by path, so a lookup of a name it lacks looks for
//! another name of the same inode in the table (and clearing one name's
//! flags clears them for all its names). What a process does to a
//! flagged path behind the seam's back (a `rm` and a new file of the same
//! name in a RUN step) is not seen: on such hosts the writers of FreeBSD
//! roots are jbuild's own code, which goes through the seam.
//!
//! Bounded: at most [`MAX_TEXT`] bytes of text (about two thousand
//! flagged paths; a whole FreeBSD base system has a few dozen).
//! Deterministic: the text lists paths in byte order, whatever order they
//! were set in, and leaves out paths that no longer exist.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::FileFlags;

/// The most text a table is written as, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;

/// Flags of the paths under one root, kept in memory: see the module docs.
#[derive(Debug)]
pub struct Sidecar {
    root: PathBuf,
    table: Mutex<BTreeMap<PathBuf, u32>>,
}

/// Why a table's text could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("the file flags kept for {root} are damaged ({why})")]
    Damaged { root: PathBuf, why: &'static str },
    #[error(
        "file flags were set on more paths under {root} than jbuild keeps on a host without \
         chflags(2) ({bytes} bytes of {MAX_TEXT}); build this image on FreeBSD"
    )]
    TooMany { root: PathBuf, bytes: usize },
    #[error("cannot look at {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl crate::blame::Blame for SidecarError {
    /// Too many flags is the build's (it asks more than this host keeps);
    /// damage and I/O are the store's.
    fn is_user_error(&self) -> bool {
        matches!(self, SidecarError::TooMany { .. })
    }
}

impl Sidecar {
    /// An empty table for the tree at `root`.
    pub fn new(root: &Path) -> Sidecar {
        Sidecar {
            root: root.to_path_buf(),
            table: Mutex::default(),
        }
    }

    /// The table [`Sidecar::to_text`] wrote, for the tree at `root`.
    pub fn from_text(root: &Path, text: &str) -> Result<Sidecar, SidecarError> {
        let damaged = |why| SidecarError::Damaged {
            root: root.to_path_buf(),
            why,
        };
        if text.len() > MAX_TEXT {
            return Err(damaged("longer than jbuild writes"));
        }
        let mut table = BTreeMap::new();
        for entry in text.split(' ').filter(|e| !e.is_empty()) {
            let (path, flags) = entry.rsplit_once('=').ok_or_else(|| damaged("no `=`"))?;
            let flags = u32::from_str_radix(flags, 16).map_err(|_| damaged("flags not hex"))?;
            let path = unescape(path).ok_or_else(|| damaged("a bad escape"))?;
            let odd = |c: &[u8]| c.is_empty() || c == b"." || c == b"..";
            if path.as_os_str().as_bytes().split(|b| *b == b'/').any(odd) {
                return Err(damaged("a path that is not plainly inside the root"));
            }
            if flags != 0 {
                table.insert(path, flags);
            }
        }
        Ok(Sidecar {
            root: root.to_path_buf(),
            table: Mutex::new(table),
        })
    }

    /// The table as text, paths in byte order, without the paths that no
    /// longer exist under the root; empty when no path has flags.
    pub fn to_text(&self) -> Result<String, SidecarError> {
        let table = self.lock();
        let mut text = String::new();
        for (path, flags) in table.iter() {
            match fs::symlink_metadata(self.root.join(path)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(SidecarError::Io {
                        path: self.root.join(path),
                        source,
                    })
                }
            }
            if !text.is_empty() {
                text.push(' ');
            }
            escape(path, &mut text);
            text.push_str(&format!("={flags:x}"));
            if text.len() > MAX_TEXT {
                return Err(SidecarError::TooMany {
                    root: self.root.clone(),
                    bytes: text.len(),
                });
            }
        }
        Ok(text)
    }

    /// Whether no path has flags.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, u32>> {
        // A panic while holding it left a whole map behind: still usable.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `path` relative to the root, or an error for a path outside it.
    fn relative<'p>(&self, path: &'p Path) -> io::Result<&'p Path> {
        path.strip_prefix(&self.root)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is not under {}, whose file flags are kept here",
                        path.display(),
                        self.root.display()
                    ),
                )
            })
    }

    /// The paths in `table` that are other names of the inode of `path`
    /// (a hard-linked file), and their flags.
    fn same_inode(
        &self,
        table: &BTreeMap<PathBuf, u32>,
        path: &Path,
    ) -> io::Result<Vec<(PathBuf, u32)>> {
        let m = fs::symlink_metadata(path)?;
        if m.is_dir() || m.nlink() < 2 {
            return Ok(Vec::new());
        }
        let mut by_inode: HashMap<(u64, u64), Vec<(PathBuf, u32)>> = HashMap::new();
        for (p, f) in table {
            if let Ok(o) = fs::symlink_metadata(self.root.join(p)) {
                by_inode
                    .entry((o.dev(), o.ino()))
                    .or_default()
                    .push((p.clone(), *f));
            }
        }
        Ok(by_inode.remove(&(m.dev(), m.ino())).unwrap_or_default())
    }
}

impl FileFlags for Sidecar {
    fn get(&self, path: &Path, seen: u32) -> io::Result<u32> {
        let table = self.lock();
        if table.is_empty() {
            return Ok(seen);
        }
        let Ok(rel) = self.relative(path) else {
            return Ok(seen);
        };
        if let Some(flags) = table.get(rel) {
            return Ok(seen | flags);
        }
        match self.same_inode(&table, path) {
            Ok(others) => Ok(others.first().map_or(seen, |(_, f)| seen | f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(seen),
            Err(e) => Err(e),
        }
    }

    fn set(&self, path: &Path, flags: u32) -> io::Result<()> {
        let rel = self.relative(path)?.to_path_buf();
        let mut table = self.lock();
        for (other, _) in self.same_inode(&table, path)? {
            table.remove(&other);
        }
        if flags == 0 {
            table.remove(&rel);
        } else {
            table.insert(rel, flags);
        }
        Ok(())
    }
}

/// Bytes written as themselves in the text; every other byte is `%XX`
/// (a backslash too, so no text starts with one: a ZFS label value that
/// does is stored hex-encoded, twice as long).
fn plain(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'%' | b'=' | b'\\')
}

fn escape(path: &Path, out: &mut String) {
    for &b in path.as_os_str().as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

fn unescape(text: &str) -> Option<PathBuf> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_sorted_escaped_and_round_trips() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for name in ["b", "a b", "c=%", "d", "gone"] {
            fs::write(root.join(name), "").unwrap();
        }
        let s = Sidecar::new(root);
        s.set(&root.join("d"), 0x2_0000).unwrap();
        s.set(&root.join("b"), 0x1).unwrap();
        s.set(&root.join("a b"), 0x4).unwrap();
        s.set(&root.join("c=%"), 0x10).unwrap();
        s.set(&root.join("gone"), 0x2).unwrap();
        fs::remove_file(root.join("gone")).unwrap();
        assert!(
            s.set(&root.join("gone"), 0x2).is_err(),
            "as chflags(2): ENOENT"
        );
        let text = s.to_text().unwrap();
        assert_eq!(text, "a%20b=4 b=1 c%3D%25=10 d=20000");
        let back = Sidecar::from_text(root, &text).unwrap();
        assert_eq!(back.get(&root.join("c=%"), 0).unwrap(), 0x10);
        assert_eq!(back.get(&root.join("d"), 0).unwrap(), 0x2_0000);
        assert_eq!(back.get(&root.join("none"), 0).unwrap(), 0);
        assert_eq!(back.to_text().unwrap(), text);
    }

    #[test]
    fn a_hard_link_shares_its_inode_flags() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::write(root.join("f"), "x").unwrap();
        fs::hard_link(root.join("f"), root.join("g")).unwrap();
        let s = Sidecar::new(root);
        s.set(&root.join("g"), 0x2_0000).unwrap();
        assert_eq!(s.get(&root.join("f"), 0).unwrap(), 0x2_0000);
        s.set(&root.join("f"), 0).unwrap();
        assert_eq!(s.get(&root.join("g"), 0).unwrap(), 0);
        assert!(s.is_empty());
    }

    #[test]
    fn damaged_or_escaping_text_is_refused() {
        let root = Path::new("/r");
        for bad in ["a", "a=zz", "../x=1", "/x=1", "a%2=1", "a/./b=1"] {
            assert!(Sidecar::from_text(root, bad).is_err(), "{bad}");
        }
        let s = Sidecar::new(root);
        assert!(s.set(Path::new("/elsewhere/x"), 1).is_err());
        assert_eq!(s.get(Path::new("/elsewhere/x"), 0).unwrap(), 0);
    }

    #[test]
    fn the_text_is_bounded() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let s = Sidecar::new(root);
        for i in 0..3000 {
            let p = root.join(format!("file-with-a-longish-name-{i:05}"));
            fs::write(&p, "").unwrap();
            s.set(&p, 0x2_0000).unwrap();
        }
        let e = s.to_text().unwrap_err();
        assert!(matches!(e, SidecarError::TooMany { .. }), "{e}");
        assert!(e.to_string().contains("build this image on FreeBSD"), "{e}");
    }
}
