//! COPY: Dockerfile's COPY semantics, writing into a root that may hold
//! hostile symlinks left by an earlier RUN step.
//!
//! What is read is the [listing](super::sources) shared with the cache key.
//! Where it goes:
//!
//! - a relative destination is relative to the WORKDIR;
//! - the destination is a directory when it ends in `/` (or is `.`), when
//!   there are several matches (several sources, or a glob matching several
//!   paths), when a match is a directory, or when it already is a directory
//!   in the root; it is created (0755, root) if missing;
//! - a matched directory contributes its *contents*; a matched file, symlink
//!   or inline source goes to `dest/<name>`, or to `dest` itself when the
//!   destination is a file path.
//!
//! What is kept: file and directory modes (unless `--chmod`, which applies
//! to files and directories alike, as in BuildKit), mtimes (the tar writer
//! clamps them), symlinks as symlinks (including a symlink that is itself a
//! source: unlike BuildKit, jbuild never follows it), hard links between
//! files of the same COPY. The owner is `--chown` or root (when jbuild runs
//! as root). Inline (heredoc) files get 0644 unless `--chmod`, and the time
//! of the build.
//!
//! Into the root: every path goes through [`resolve_in_root`]. Existing
//! directories on the way are followed inside the root and left as they are
//! (mode, owner, mtime); an existing file or symlink in the way of a copied
//! file or symlink is replaced, never written through; a copied directory
//! over an existing non-directory is an error, as is a file over a
//! directory.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use filetime::FileTime;

use super::sources::{list_sources_as, open_listed, Entry, Kind, Listing};
use super::{default_owner, ensure_dir, lexical, set_owner_mode, Ignore, NativeError};
use crate::fsutil::resolve_in_root;
use crate::jailfile::CopySource;

/// `--chown` (already resolved to numbers) and `--chmod`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyOptions {
    pub chown: Option<(u32, u32)>,
    pub chmod: Option<u32>,
    /// `--parents`: each source keeps its path below the destination.
    pub parents: bool,
    /// `--exclude` patterns (an ignore file's syntax), matched against
    /// each entry's path below its source.
    pub exclude: Vec<String>,
    /// ADD: sources that are tar archives are extracted into the
    /// destination (see [`Unpack`]).
    pub unpack: Option<Unpack>,
    /// Files keep the owner they have in the source (ADD's extracted
    /// archives) unless `chown` says otherwise; only as root.
    pub keep_owner: bool,
}

/// How ADD extracts an archive: into a scratch directory of its own
/// (made in `scratch`, removed after), through the layer applier within
/// `limits` ([`crate::layer::archive`]); from there its files are copied
/// as COPY copies a directory, so the destination in the root is reached
/// only through [`resolve_in_root`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpack {
    pub scratch: PathBuf,
    pub limits: crate::layer::Limits,
}

/// What a COPY wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyStats {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    /// Bytes of file content written.
    pub bytes: u64,
}

/// Copies `sources` from `src_root` to `dest` inside `dest_root` (see the
/// module docs). `ignore` is the build context's `.jailignore`; pass `None`
/// when `src_root` is another stage's root.
pub fn copy(
    src_root: &Path,
    sources: &[CopySource],
    dest: &str,
    dest_root: &Path,
    workdir: &str,
    ignore: Option<&Ignore>,
    opts: &CopyOptions,
) -> Result<CopyStats, NativeError> {
    let mut listing = list_sources_as(
        src_root,
        sources,
        ignore,
        opts.parents,
        opts.unpack.is_some(),
    )?;
    if !opts.exclude.is_empty() {
        exclude(&mut listing, &opts.exclude)?;
    }
    let dest_path = lexical(&Path::new("/").join(workdir).join(dest));
    let says_dir = opts.parents
        || dest.is_empty()
        || dest == "."
        || dest.ends_with('/')
        || dest.ends_with("/.");
    let is_dir = says_dir
        || listing.matches != 1
        || listing.dir_match
        || resolve_in_root(dest_root, &dest_path, true)
            .map_err(NativeError::io("resolve", &dest_path))?
            .is_dir();

    let mut w = Writer {
        root: dest_root,
        opts,
        owner: opts.chown.or_else(default_owner),
        chmod: opts.chmod,
        written: vec![None; listing.entries.len()],
        created_dirs: Vec::new(),
        made: HashMap::new(),
        stats: CopyStats::default(),
    };
    if is_dir {
        ensure_dir(dest_root, &dest_path)?;
        for (i, e) in listing.entries.iter().enumerate() {
            let target = dest_path.join(&e.in_match);
            if opts.parents {
                // The directories a kept path runs through that are not
                // sources themselves.
                ensure_dir(dest_root, target.parent().unwrap_or(&dest_path))?;
            }
            w.put(i, e, &target)?;
        }
    } else {
        ensure_dir(dest_root, dest_path.parent().unwrap_or(Path::new("/")))?;
        w.put(0, &listing.entries[0], &dest_path)?;
    }
    // Directory modes and times last: writing into a directory changes its
    // mtime, and a read-only mode would stop a rootless copy.
    for (host, mode, mtime) in w.created_dirs.iter().rev() {
        fs::set_permissions(host, fs::Permissions::from_mode(*mode))
            .map_err(NativeError::io("set mode of", host))?;
        filetime::set_file_times(host, *mtime, *mtime)
            .map_err(NativeError::io("set times of", host))?;
    }
    Ok(w.stats)
}

/// Leaves out what `--exclude` matches (the path below the entry's
/// source, as an ignore file's pattern matches it: the path or one of its
/// parents). A hard link whose first name is left out takes its place.
fn exclude(listing: &mut Listing<'_>, patterns: &[String]) -> Result<(), NativeError> {
    let ignore = Ignore::parse(&patterns.join("\n"), None)?;
    let entries = std::mem::take(&mut listing.entries);
    let mut moved: Vec<Option<usize>> = vec![None; entries.len()];
    for (i, mut e) in entries.into_iter().enumerate() {
        if ignore.excludes(&e.in_match) {
            continue;
        }
        if let Kind::HardLink(first) = e.kind {
            match moved.get(first).copied().flatten() {
                Some(to) => e.kind = Kind::HardLink(to),
                None => {
                    e.kind = Kind::File;
                    if let Some(slot) = moved.get_mut(first) {
                        *slot = Some(listing.entries.len());
                    }
                }
            }
        }
        if let Some(slot) = moved.get_mut(i) {
            *slot = Some(listing.entries.len());
        }
        listing.entries.push(e);
    }
    if listing.entries.is_empty() {
        listing.matches = 0;
    }
    Ok(())
}

struct Writer<'r> {
    root: &'r Path,
    opts: &'r CopyOptions,
    owner: Option<(u32, u32)>,
    chmod: Option<u32>,
    /// Host path each listing entry was written to (for hard links).
    written: Vec<Option<PathBuf>>,
    created_dirs: Vec<(PathBuf, u32, FileTime)>,
    /// Host path of each directory this copy created, by its path in the
    /// root: an entry directly inside one is placed without resolving its
    /// whole path again (one `lstat` per component per file was most of a
    /// 50,000-file COPY's lookups). Sound because a directory, once made,
    /// stays one for the whole copy: nothing here removes or replaces a
    /// directory, and it was made as a real directory, never a symlink.
    made: HashMap<PathBuf, PathBuf>,
    stats: CopyStats,
}

impl Writer<'_> {
    /// The owner `e` gets: `--chown`, else its own when the options keep
    /// owners (and jbuild runs as root), else the default.
    fn owner_of(&self, e: &Entry<'_>) -> Option<(u32, u32)> {
        use std::os::unix::fs::MetadataExt;
        match (&self.opts.chown, &e.meta) {
            (None, Some(m)) if self.opts.keep_owner && default_owner().is_some() => {
                Some((m.uid(), m.gid()))
            }
            _ => self.owner,
        }
    }

    /// ADD of a tar archive: extracted into a scratch directory as a
    /// hostile layer is applied, then copied to `target` as a directory.
    fn put_archive(
        &mut self,
        e: &Entry<'_>,
        format: crate::layer::archive::ArchiveFormat,
        target: &Path,
    ) -> Result<(), NativeError> {
        let Some(unpack) = &self.opts.unpack else {
            return Err(NativeError::Conflict {
                path: target.to_path_buf(),
                reason: "an archive is only extracted by ADD",
            });
        };
        let scratch = tempfile::Builder::new()
            .prefix("add-")
            .tempdir_in(&unpack.scratch)
            .map_err(NativeError::io("make a directory in", &unpack.scratch))?;
        let file = open_listed(&e.host).map_err(NativeError::io("read", &e.host))?;
        crate::layer::archive::extract(file, format, scratch.path(), &unpack.limits).map_err(
            |source| NativeError::Archive {
                path: e.host.clone(),
                format: format.name(),
                source,
            },
        )?;
        let inner = CopyOptions {
            chown: self.opts.chown,
            chmod: self.opts.chmod,
            parents: false,
            exclude: self.opts.exclude.clone(),
            unpack: None,
            keep_owner: true,
        };
        let dest = format!("{}/", target.display());
        let stats = copy(
            scratch.path(),
            &[CopySource::Path("/".into())],
            &dest,
            self.root,
            "/",
            None,
            &inner,
        )?;
        self.stats.files += stats.files;
        self.stats.dirs += stats.dirs;
        self.stats.symlinks += stats.symlinks;
        self.stats.hardlinks += stats.hardlinks;
        self.stats.bytes += stats.bytes;
        Ok(())
    }

    fn put(&mut self, index: usize, e: &Entry<'_>, target: &Path) -> Result<(), NativeError> {
        if let Kind::Dir = e.kind {
            return self.put_dir(e, target);
        }
        if let Kind::Archive(format) = e.kind {
            return self.put_archive(e, format, target);
        }
        let host = self.host_of(target)?;
        if matches!(e.kind, Kind::File) {
            // The common case, a file that is not there yet: made in place
            // (`O_EXCL` never follows a symlink in the way). Anything in
            // the way takes the general path below.
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&host)
            {
                Ok(file) => return self.fill(index, e, file, host, target),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(NativeError::io("write", target)(err)),
            }
        }
        match fs::symlink_metadata(&host) {
            Ok(m) if m.is_dir() => {
                return Err(NativeError::Conflict {
                    path: target.to_path_buf(),
                    reason: "a directory is in the way",
                });
            }
            Ok(_) if !matches!(e.kind, Kind::File | Kind::Inline(_)) => {
                fs::remove_file(&host).map_err(NativeError::io("replace", target))?;
            }
            _ => {}
        }
        let io = |action| NativeError::io(action, target);
        match &e.kind {
            Kind::File | Kind::Inline(_) => {
                let dir = host.parent().unwrap_or(self.root);
                let mut tmp = tempfile::Builder::new()
                    .prefix(".jbuild-")
                    .tempfile_in(dir)
                    .map_err(io("write"))?;
                let mode = self.chmod.unwrap_or(e.mode());
                let len = match &e.kind {
                    Kind::Inline(content) => {
                        io::Write::write_all(tmp.as_file_mut(), content.as_bytes())
                            .map_err(io("write"))?;
                        content.len() as u64
                    }
                    _ => {
                        let mut src =
                            open_listed(&e.host).map_err(NativeError::io("read", &e.host))?;
                        let n = io::copy(&mut src, tmp.as_file_mut()).map_err(io("write"))?;
                        let mtime =
                            FileTime::from_last_modification_time(e.meta.as_ref().expect("listed"));
                        filetime::set_file_handle_times(tmp.as_file(), Some(mtime), Some(mtime))
                            .map_err(io("set times of"))?;
                        n
                    }
                };
                set_owner_mode(tmp.as_file(), self.owner_of(e), mode)
                    .map_err(io("set owner and mode of"))?;
                tmp.persist(&host).map_err(|e| io("write")(e.error))?;
                self.stats.files += 1;
                self.stats.bytes += len;
            }
            Kind::Symlink(link) => {
                std::os::unix::fs::symlink(link, &host).map_err(io("create symlink"))?;
                if let Some((uid, gid)) = self.owner_of(e) {
                    std::os::unix::fs::lchown(&host, Some(uid), Some(gid))
                        .map_err(io("set owner of"))?;
                }
                let mtime = FileTime::from_last_modification_time(e.meta.as_ref().expect("listed"));
                filetime::set_symlink_file_times(&host, mtime, mtime)
                    .map_err(io("set times of"))?;
                self.stats.symlinks += 1;
            }
            Kind::HardLink(first) => {
                let first = self.written[*first]
                    .as_ref()
                    .expect("a hard link follows its first name");
                fs::hard_link(first, &host).map_err(io("create hard link"))?;
                self.stats.hardlinks += 1;
            }
            Kind::Dir | Kind::Archive(_) => unreachable!("handled above"),
        }
        self.written[index] = Some(host);
        Ok(())
    }

    /// Where `target` (a path in the root) is on the host, its last
    /// component not followed: beside the directory this copy made for
    /// its parent, else resolved in the root.
    fn host_of(&self, target: &Path) -> Result<PathBuf, NativeError> {
        if let (Some(parent), Some(name)) = (target.parent(), target.file_name()) {
            if let Some(dir) = self.made.get(parent) {
                return Ok(dir.join(name));
            }
        }
        resolve_in_root(self.root, target, false).map_err(NativeError::io("resolve", target))
    }

    /// The content, time, owner and mode of the source file `e` into the
    /// new `file` at `host`.
    fn fill(
        &mut self,
        index: usize,
        e: &Entry<'_>,
        mut file: fs::File,
        host: PathBuf,
        target: &Path,
    ) -> Result<(), NativeError> {
        let io = |action| NativeError::io(action, target);
        let mut src = open_listed(&e.host).map_err(NativeError::io("read", &e.host))?;
        let len = io::copy(&mut src, &mut file).map_err(io("write"))?;
        let mtime = FileTime::from_last_modification_time(e.meta.as_ref().expect("listed"));
        filetime::set_file_handle_times(&file, Some(mtime), Some(mtime))
            .map_err(io("set times of"))?;
        let mode = self.chmod.unwrap_or(e.mode());
        set_owner_mode(&file, self.owner_of(e), mode).map_err(io("set owner and mode of"))?;
        self.stats.files += 1;
        self.stats.bytes += len;
        self.written[index] = Some(host);
        Ok(())
    }

    /// A directory of the source: created with its mode unless it exists
    /// (followed inside the root if it is a symlink to one).
    fn put_dir(&mut self, e: &Entry<'_>, target: &Path) -> Result<(), NativeError> {
        let host =
            resolve_in_root(self.root, target, true).map_err(NativeError::io("resolve", target))?;
        match fs::symlink_metadata(&host) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {
                let reason = "it exists and is not a directory";
                return Err(NativeError::Conflict {
                    path: target.to_path_buf(),
                    reason,
                });
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(NativeError::io("inspect", target)(err)),
        }
        // A dangling symlink in the root may point into missing directories.
        if let Some(parent) = host.parent().filter(|p| !p.is_dir()) {
            let in_root = Path::new("/").join(parent.strip_prefix(self.root).unwrap_or(parent));
            ensure_dir(self.root, &in_root)?;
        }
        fs::create_dir(&host).map_err(NativeError::io("create directory", target))?;
        self.made.insert(target.to_path_buf(), host.clone());
        if let Some((uid, gid)) = self.owner_of(e) {
            std::os::unix::fs::lchown(&host, Some(uid), Some(gid))
                .map_err(NativeError::io("set owner of", target))?;
        }
        let mode = self.chmod.unwrap_or(e.mode());
        let mtime = FileTime::from_last_modification_time(e.meta.as_ref().expect("listed"));
        self.created_dirs.push((host, mode, mtime));
        self.stats.dirs += 1;
        Ok(())
    }
}
