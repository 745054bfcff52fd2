//! One entry of a layer placed in the root: the rules of the module above
//! ([`super`]) applied entry by entry, with what the layer wrote so far
//! (for whiteouts, hard links and a path named twice) and what is set at
//! the end (directory metadata, file flags).

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use filetime::FileTime;

use super::super::header;
use super::super::limits::{human, Limits, MAX_NAME};
use super::super::reader::{Header, TarReader};
use super::super::{fflags, EntryProblem, LayerError};
use super::written::{Named, Written, ROOT};
use super::ApplyOptions;
use crate::diff::meta::make_dev;
use crate::fsutil::flags::{self, st_flags, FileFlags};
use crate::fsutil::resolve_in_root_with;

pub(crate) struct Applier<'a> {
    root: &'a Path,
    opts: &'a ApplyOptions,
    limits: &'a Limits,
    file_flags: &'a dyn FileFlags,
    /// Paths this layer created or replaced (whiteouts and opaque markers
    /// leave them alone), the directories holding one, and the symlinks it
    /// created (no later entry may lead through one): one compact tree,
    /// since it grows with every entry.
    written: Written,
    /// Directories (nodes of `written`) whose mode and mtime are set at
    /// the end.
    dirs: Vec<(u32, u32, FileTime)>,
    /// File flags (of nodes of `written`), set after everything else.
    flags: Vec<(u32, u32)>,
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
    /// Bytes of all entry paths so far (see [`Limits::max_path_bytes`]).
    path_bytes: u64,
    /// For copying file content (allocated once: zeroing it per file costs).
    buf: Vec<u8>,
    /// The directory (as named in the layer, and resolved) of the entry
    /// just applied, when that entry was a new regular file that replaced
    /// nothing: nothing on the way to it has changed since, so the next
    /// entry in the same directory is placed without resolving it again
    /// (tar writers list a directory's files together).
    same_dir: Option<(PathBuf, PathBuf)>,
    /// Whether the regular file just written replaced something.
    replaced: bool,
}

impl<'a> Applier<'a> {
    pub(crate) fn new(
        root: &'a Path,
        opts: &'a ApplyOptions,
        limits: &'a Limits,
        file_flags: &'a dyn FileFlags,
    ) -> Self {
        Applier {
            root,
            opts,
            limits,
            file_flags,
            written: Written::new(),
            dirs: Vec::new(),
            flags: Vec::new(),
            entries: 0,
            bytes: 0,
            path_bytes: 0,
            buf: vec![0u8; 128 * 1024],
            same_dir: None,
            replaced: false,
        }
    }
}

/// Bytes of one file after which their writeback is started while the
/// file is still being written (a large file does not wait for its end).
const WRITEBACK_STEP: u64 = 8 << 20;

/// `path` as a clean relative path, or why it cannot be one.
fn normalize(path: &[u8]) -> Result<PathBuf, EntryProblem> {
    if path.starts_with(b"/") {
        return Err(EntryProblem::Absolute);
    }
    let mut out = PathBuf::new();
    for c in Path::new(OsStr::from_bytes(path)).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir if out.pop() => {}
            Component::ParentDir => return Err(EntryProblem::Escapes),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(EntryProblem::Absolute),
        }
    }
    Ok(out)
}

fn mtime_of(h: &Header) -> FileTime {
    FileTime::from_unix_time(h.mtime, h.mtime_nsec)
}

impl Applier<'_> {
    /// The limits on the number of entries, their paths and their sizes,
    /// checked before anything of the entry is written.
    pub(crate) fn within_limits(&mut self, h: &Header) -> Result<(), LayerError> {
        let limits = self.limits;
        let fail = |p| LayerError::entry(&h.path, p);
        let total = |what: &str, limit: String, key| LayerError::Limit {
            what: what.into(),
            limit,
            key,
        };
        if self.entries > limits.max_entries {
            let what = "it has more entries than";
            return Err(total(what, limits.max_entries.to_string(), "max_entries"));
        }
        for p in [&h.path, &h.linkname] {
            if p.len() > limits.max_path {
                let (len, max) = (p.len(), limits.max_path);
                return Err(fail(EntryProblem::PathTooLong { len, max }));
            }
        }
        if h.path.split(|&c| c == b'/').any(|c| c.len() > MAX_NAME) {
            return Err(fail(EntryProblem::NameTooLong));
        }
        self.path_bytes += (h.path.len() + h.linkname.len()) as u64;
        let max_path_bytes = limits.max_path_bytes();
        if self.path_bytes > max_path_bytes {
            let what = "its paths together are longer than";
            return Err(total(what, human(max_path_bytes), "max_entries"));
        }
        if h.size > limits.max_size {
            let (size, max) = (h.size, limits.max_size);
            return Err(fail(EntryProblem::TooLarge { size, max }));
        }
        Ok(())
    }

    pub(super) fn entry<R: Read>(
        &mut self,
        tar: &mut TarReader<R>,
        h: &Header,
    ) -> Result<(), LayerError> {
        self.entry_teed(tar, h, None)
    }

    /// [`Self::entry`], a regular file's content also written to `tee`
    /// as it is copied (a FreeBSD package checks it against its manifest:
    /// `pkg::extract`).
    pub(crate) fn entry_teed<R: Read>(
        &mut self,
        tar: &mut TarReader<R>,
        h: &Header,
        tee: Option<&mut dyn Write>,
    ) -> Result<(), LayerError> {
        let fail = |p| LayerError::entry(&h.path, p);
        let rel = normalize(&h.path).map_err(fail)?;
        if let Some(parent) = rel.parent() {
            if parent.iter().any(|c| c.as_bytes().starts_with(b".wh.")) {
                return Err(fail(EntryProblem::WhiteoutDir));
            }
        }
        let name = rel.file_name().map(OsStr::as_bytes).unwrap_or_default();
        if let Some(base) = name.strip_prefix(b".wh.") {
            return self.whiteout(h, &rel, base);
        }
        if rel.as_os_str().is_empty() && h.typeflag != header::DIRECTORY {
            return Err(fail(EntryProblem::Unsupported(
                "a non-directory in place of the root".into(),
            )));
        }
        match h.typeflag {
            header::DIRECTORY | header::REGULAR | header::HARD_LINK | header::SYMLINK => {}
            header::FIFO => {}
            header::CHAR_DEVICE | header::BLOCK_DEVICE if self.opts.allow_devices => {}
            header::CHAR_DEVICE | header::BLOCK_DEVICE => return Err(fail(EntryProblem::Device)),
            other => {
                let what = format!("tar type `{}`", other.escape_ascii());
                return Err(fail(EntryProblem::Unsupported(what)));
            }
        }
        // setgid on a directory only picks the group of new files; hard
        // links and symlinks have no bits of their own.
        let mode_matters = !matches!(
            h.typeflag,
            header::DIRECTORY | header::HARD_LINK | header::SYMLINK
        );
        if mode_matters && h.mode & 0o6000 != 0 && !self.opts.allow_setuid {
            return Err(fail(EntryProblem::Setuid(h.mode)));
        }
        // File capabilities raise privileges as setuid does (on Linux).
        let caps = h.xattrs.iter().any(|(k, _)| k == b"security.capability");
        if caps && !self.opts.allow_setuid {
            return Err(fail(EntryProblem::Capability));
        }
        let same_dir = self.same_dir.take();
        let host = match (same_dir, rel.parent(), rel.file_name()) {
            (Some((dir, host_dir)), Some(parent), Some(name)) if dir == parent => {
                host_dir.join(name)
            }
            _ => self.host(&rel, h)?,
        };
        let is_dir = h.typeflag == header::DIRECTORY;
        // Only a directory may come again where this layer wrote: no tar
        // writer names a path twice, and replacing a directory this layer
        // filled is how a symlink gets under its later entries.
        match self.written.named(self.rel(&host)) {
            Some(Named::Dir | Named::Implicit) if is_dir => {}
            Some(Named::Implicit) => return Err(fail(EntryProblem::ReplacesOwn)),
            Some(Named::Dir | Named::Other) => return Err(fail(EntryProblem::Duplicate)),
            None => {}
        }
        let node = self.mark_written(&host)?;
        let named = if is_dir { Named::Dir } else { Named::Other };
        self.written.set_named(node, named);
        match h.typeflag {
            header::DIRECTORY => self.directory(h, &host, node),
            header::REGULAR => {
                self.file(tar, h, &host, tee)?;
                if let (false, Some(dir), Some(host_dir)) =
                    (self.replaced, rel.parent(), host.parent())
                {
                    self.same_dir = Some((dir.to_path_buf(), host_dir.to_path_buf()));
                }
                Ok(())
            }
            header::HARD_LINK => self.hard_link(h, &host),
            header::SYMLINK => {
                self.replace(&host, false)?;
                std::os::unix::fs::symlink(OsStr::from_bytes(&h.linkname), &host)
                    .map_err(LayerError::fs("create the symlink", &host))?;
                self.written.set_symlink(node);
                self.metadata(h, &host, None)
            }
            _ => self.node(h, &host),
        }
    }

    /// The host path of `rel`, inside the root, with its missing parent
    /// directories created (and counted as written by this layer).
    fn host(&mut self, rel: &Path, h: &Header) -> Result<PathBuf, LayerError> {
        let host = self.resolve(rel, false, h)?;
        let mut missing = Vec::new();
        for dir in host.ancestors().skip(1) {
            if dir == self.root || fs::symlink_metadata(dir).is_ok() {
                break;
            }
            missing.push(dir.to_path_buf());
        }
        for dir in missing.into_iter().rev() {
            fs::create_dir(&dir).map_err(LayerError::fs("create the directory", &dir))?;
            self.mark_written(&dir)?;
        }
        Ok(host)
    }

    /// Clears the way for a new entry at `host`: removes what is there,
    /// unless it is a directory and `merge_dir` is set. Returns whether a
    /// directory was kept; its flags are cleared, so entries can be added
    /// to it and its metadata changed (the entry's own are set at the end).
    fn replace(&mut self, host: &Path, merge_dir: bool) -> Result<bool, LayerError> {
        match fs::symlink_metadata(host) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(LayerError::fs("read the metadata of", host)(e)),
            Ok(m) if m.is_dir() && merge_dir => {
                let flags = self.file_flags;
                let unlock = || match flags.get(host, st_flags(&m))? {
                    0 => Ok(()),
                    _ => flags.set(host, 0),
                };
                unlock().map_err(LayerError::fs("clear the file flags of", host))?;
                Ok(true)
            }
            Ok(_) => remove_any(host, self.file_flags)
                .map(|_| false)
                .map_err(LayerError::fs("remove", host)),
        }
    }

    fn directory(&mut self, h: &Header, host: &Path, node: u32) -> Result<(), LayerError> {
        let existed = self.replace(host, true)?;
        if existed {
            // The directory's extended attributes become the layer's.
            for (name, _) in crate::diff::meta::xattrs(host)
                .map_err(LayerError::fs("read the extended attributes of", host))?
            {
                if !h
                    .xattrs
                    .iter()
                    .any(|(k, _)| k.as_slice() == name.as_bytes())
                {
                    xattr::remove(host, &name)
                        .map_err(LayerError::fs("remove an extended attribute of", host))?;
                }
            }
        } else {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(host)
                .map_err(LayerError::fs("create the directory", host))?;
        }
        self.owner_and_xattrs(h, host, None)?;
        self.dirs.push((node, h.mode, mtime_of(h)));
        self.defer_flags(h, host)
    }

    fn file<R: Read>(
        &mut self,
        tar: &mut TarReader<R>,
        h: &Header,
        host: &Path,
        mut tee: Option<&mut dyn Write>,
    ) -> Result<(), LayerError> {
        let create = || {
            File::options()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(host)
        };
        // Most entries are new: try first, and clear the way only when
        // something is there (O_EXCL never follows a symlink in the way).
        self.replaced = false;
        let mut file = match create() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.replaced = true;
                self.replace(host, false)?;
                create()
            }
            created => created,
        }
        .map_err(LayerError::fs("create", host))?;
        let mut content = tar.content();
        // Of a large file, the writeback of each WRITEBACK_STEP is started
        // as soon as it is written (the rest when the file is whole).
        let (mut written, mut started) = (0u64, 0u64);
        loop {
            if self.opts.start_writeback && written - started >= WRITEBACK_STEP {
                crate::fsutil::durable::start(&file, started, written - started);
                started = written;
            }
            let n = match content.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(tar.truncated(e, &h.path)),
            };
            file.write_all(&self.buf[..n])
                .map_err(LayerError::fs("write", host))?;
            if let Some(t) = tee.as_mut() {
                t.write_all(&self.buf[..n])
                    .map_err(LayerError::fs("check the content of", host))?;
            }
            self.bytes += n as u64;
            written += n as u64;
        }
        if self.opts.start_writeback {
            crate::fsutil::durable::start(&file, started, 0);
        }
        self.metadata(h, host, Some(&file))
    }

    fn hard_link(&mut self, h: &Header, host: &Path) -> Result<(), LayerError> {
        let target_name = || String::from_utf8_lossy(&h.linkname).into_owned();
        let rel = normalize(&h.linkname)
            .map_err(|_| LayerError::entry(&h.path, EntryProblem::LinkEscapes(target_name())))?;
        let target = self.resolve(&rel, false, h)?;
        match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => {
                return Err(LayerError::entry(
                    &h.path,
                    EntryProblem::LinkToDir(target_name()),
                ))
            }
            Ok(_) => {}
            Err(_) => {
                return Err(LayerError::entry(
                    &h.path,
                    EntryProblem::LinkMissing(target_name()),
                ))
            }
        }
        if target == host {
            // A link to a lower layer's file at its own path: nothing to do.
            return Ok(());
        }
        self.replace(host, false)?;
        match link_no_follow(&target, host) {
            // link(2) refuses a file flagged immutable or append-only.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => self.link_locked(&target, host, e),
            linked => linked.map_err(LayerError::fs("create the hard link", host)),
        }
    }

    /// A hard link to `target`, a lower layer's file whose flags lock it:
    /// they are cleared for the link and set again at the end. `refused`
    /// is the first attempt's error, returned if no flag was in the way.
    fn link_locked(
        &mut self,
        target: &Path,
        host: &Path,
        refused: io::Error,
    ) -> Result<(), LayerError> {
        let unlock = |e| LayerError::fs("clear the file flags of", target)(e);
        let m = fs::symlink_metadata(target).map_err(unlock)?;
        let old = self.file_flags.get(target, st_flags(&m)).map_err(unlock)?;
        if old & fflags::LOCKING == 0 {
            return Err(LayerError::fs("create the hard link", host)(refused));
        }
        self.file_flags
            .set(target, old & !fflags::LOCKING)
            .map_err(unlock)?;
        let node = self.written.node(self.rel(target))?;
        self.flags.push((node, old));
        link_no_follow(target, host).map_err(LayerError::fs("create the hard link", host))
    }

    fn node(&mut self, h: &Header, host: &Path) -> Result<(), LayerError> {
        use nix::sys::stat::{mknod, Mode, SFlag};
        let kind = match h.typeflag {
            header::CHAR_DEVICE => SFlag::S_IFCHR,
            header::BLOCK_DEVICE => SFlag::S_IFBLK,
            _ => SFlag::S_IFIFO,
        };
        let mut dev = 0;
        if kind != SFlag::S_IFIFO {
            let (Ok(major), Ok(minor)) = (u32::try_from(h.devmajor), u32::try_from(h.devminor))
            else {
                return Err(LayerError::entry(&h.path, EntryProblem::DeviceNumber));
            };
            dev = make_dev(major, minor);
        }
        self.replace(host, false)?;
        mknod(
            host,
            kind,
            Mode::from_bits_truncate(0o600),
            dev as libc::dev_t,
        )
        .map_err(|e| LayerError::fs("create the special file", host)(e.into()))?;
        self.metadata(h, host, None)
    }

    /// Owner, mode, extended attributes and mtime of a non-directory
    /// (`file` is the open file, for regular files).
    fn metadata(&mut self, h: &Header, host: &Path, file: Option<&File>) -> Result<(), LayerError> {
        self.owner_and_xattrs(h, host, file)?;
        if h.typeflag != header::SYMLINK {
            let perms = fs::Permissions::from_mode(h.mode & 0o7777);
            // `host` is the entry just created, not a symlink.
            match file {
                Some(f) => f.set_permissions(perms),
                None => fs::set_permissions(host, perms),
            }
            .map_err(LayerError::fs("set the mode of", host))?;
        }
        let t = mtime_of(h);
        match file {
            Some(f) => filetime::set_file_handle_times(f, Some(t), Some(t)),
            None => filetime::set_symlink_file_times(host, t, t),
        }
        .map_err(LayerError::fs("set the times of", host))?;
        self.defer_flags(h, host)
    }

    /// Owner and extended attributes of `host` (through `file`, the open
    /// file, when there is one: no path lookup).
    fn owner_and_xattrs(
        &mut self,
        h: &Header,
        host: &Path,
        file: Option<&File>,
    ) -> Result<(), LayerError> {
        if self.opts.same_owner {
            let (Ok(uid), Ok(gid)) = (u32::try_from(h.uid), u32::try_from(h.gid)) else {
                return Err(LayerError::entry(
                    &h.path,
                    EntryProblem::Owner(h.uid.max(h.gid)),
                ));
            };
            match file {
                Some(f) => std::os::unix::fs::fchown(f, Some(uid), Some(gid)),
                None => std::os::unix::fs::lchown(host, Some(uid), Some(gid)),
            }
            .map_err(LayerError::fs("change the owner of", host))?;
        }
        for (name, value) in &h.xattrs {
            xattr::set(host, OsStr::from_bytes(name), value)
                .map_err(LayerError::fs("set an extended attribute of", host))?;
        }
        Ok(())
    }

    fn defer_flags(&mut self, h: &Header, host: &Path) -> Result<(), LayerError> {
        let flags = h.fflags.as_deref().map_or(0, fflags::from_text);
        if flags != 0 {
            let node = self.written.node(self.rel(host))?;
            self.flags.push((node, flags));
        }
        Ok(())
    }

    fn whiteout(&mut self, h: &Header, rel: &Path, base: &[u8]) -> Result<(), LayerError> {
        let dir_rel = rel.parent().unwrap_or(Path::new(""));
        let dir = self.resolve(dir_rel, true, h)?;
        if base == b".wh..opq" {
            if fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                self.clear_lower(&dir)?;
            }
            return Ok(());
        }
        if base.starts_with(b".wh.") {
            return Ok(());
        }
        if base.is_empty() || base == b"." || base == b".." {
            return Err(LayerError::entry(&h.path, EntryProblem::BadWhiteout));
        }
        let target = dir.join(OsStr::from_bytes(base));
        let rel = self.rel(&target);
        if self.written.named(rel).is_some() || fs::symlink_metadata(&target).is_err() {
            return Ok(());
        }
        if self.written.holds(rel) {
            // Only the lower content goes; what this layer put inside stays.
            return self.clear_lower(&target);
        }
        remove_any(&target, self.file_flags).map_err(LayerError::fs("remove", &target))
    }

    /// Notes that this layer wrote the host path `path`, and so something
    /// below each of its parents (an entry then records what it was).
    fn mark_written(&mut self, path: &Path) -> Result<u32, LayerError> {
        let rel = self.rel(path);
        self.written.mark(rel)
    }

    /// `host` relative to the root (every host path the applier makes is
    /// inside it: [`resolve_in_root_with`] returns no other).
    fn rel<'p>(&self, host: &'p Path) -> &'p Path {
        host.strip_prefix(self.root).unwrap_or(host)
    }

    /// The host path of `rel` ([`resolve_in_root_with`]), refusing a path
    /// that leads through a symlink this layer created.
    fn resolve(&self, rel: &Path, follow_last: bool, h: &Header) -> Result<PathBuf, LayerError> {
        let mut through = None;
        let result = resolve_in_root_with(self.root, rel, follow_last, &mut |link| {
            if self.written.is_symlink(self.rel(link)) {
                through = Some(link.strip_prefix(self.root).unwrap_or(link).to_path_buf());
                return Err(io::Error::other("through a symlink of this layer"));
            }
            Ok(())
        });
        if let Some(link) = through {
            let link = link.to_string_lossy().into_owned();
            return Err(LayerError::entry(
                &h.path,
                EntryProblem::ThroughSymlink(link),
            ));
        }
        result.map_err(|e| LayerError::entry(&h.path, EntryProblem::Fs(e)))
    }

    /// Removes what lower layers put in `dir`, keeping what this layer
    /// wrote. Directories this layer wrote, or wrote something into, stay,
    /// with their lower content cleared in turn.
    fn clear_lower(&self, dir: &Path) -> Result<(), LayerError> {
        for entry in fs::read_dir(dir).map_err(LayerError::fs("read the directory", dir))? {
            let path = entry
                .map_err(LayerError::fs("read the directory", dir))?
                .path();
            let rel = self.rel(&path);
            let keep = self.written.named(rel).is_some() || self.written.holds(rel);
            if !keep {
                remove_any(&path, self.file_flags).map_err(LayerError::fs("remove", &path))?;
            } else if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                self.clear_lower(&path)?;
            }
        }
        Ok(())
    }

    /// Directory modes and mtimes, then file flags. A directory replaced
    /// since its entry was applied is skipped (a later entry set its own).
    pub(crate) fn finish(&mut self) -> Result<(), LayerError> {
        for &(node, mode, mtime) in &self.dirs {
            let path = self.host_of(node);
            // A later entry may have replaced the directory, or one of its
            // parents by a symlink: then `path` leads elsewhere, maybe out.
            if !self.unaliased_dir(&path) {
                continue;
            }
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))
                .map_err(LayerError::fs("set the mode of", &path))?;
            filetime::set_symlink_file_times(&path, mtime, mtime)
                .map_err(LayerError::fs("set the times of", &path))?;
        }
        for &(node, flags) in &self.flags {
            let path = self.host_of(node);
            if self.unaliased(&path) {
                self.file_flags
                    .set(&path, flags)
                    .map_err(LayerError::fs("set the file flags of", &path))?;
            }
        }
        Ok(())
    }
}

impl Applier<'_> {
    /// Whether `path` (under the root) exists and no directory on the way
    /// to it from the root is a symlink: so it names what it did when the
    /// entry was applied, inside the root.
    fn unaliased(&self, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(self.root) else {
            return false;
        };
        let mut at = self.root.to_path_buf();
        let mut parts = rel.components().peekable();
        while let Some(c) = parts.next() {
            at.push(c);
            match fs::symlink_metadata(&at) {
                Ok(m) if parts.peek().is_none() || m.is_dir() => {}
                _ => return false,
            }
        }
        true
    }

    /// The host path of a node of `written`.
    fn host_of(&self, node: u32) -> PathBuf {
        match node {
            ROOT => self.root.to_path_buf(),
            _ => self.root.join(self.written.path(node)),
        }
    }

    fn unaliased_dir(&self, path: &Path) -> bool {
        self.unaliased(path) && fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
    }
}

/// Removes a file or a whole directory tree, never following symlinks.
/// Flags such as `schg` that forbid it (EPERM) are cleared, and the
/// removal tried again: flags are rare, so they are not read up front.
fn remove_any(path: &Path, file_flags: &dyn FileFlags) -> io::Result<()> {
    let remove = || match fs::symlink_metadata(path)?.is_dir() {
        true => fs::remove_dir_all(path),
        false => fs::remove_file(path),
    };
    let result = remove();
    if result
        .as_ref()
        .is_err_and(|e| e.raw_os_error() == Some(libc::EPERM))
    {
        flags::clear_tree(file_flags, path)?;
        return remove();
    }
    result
}

/// `link(2)` that never follows a symlink at `target` (`linkat`, no flags).
fn link_no_follow(target: &Path, link: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let (t, l) = (c(target)?, c(link)?);
    // SAFETY: both are valid NUL-terminated strings for the duration of the call.
    if unsafe { libc::linkat(libc::AT_FDCWD, t.as_ptr(), libc::AT_FDCWD, l.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_or_refuses() {
        assert_eq!(normalize(b"./a/./b/").unwrap(), PathBuf::from("a/b"));
        assert_eq!(normalize(b"a/../b").unwrap(), PathBuf::from("b"));
        assert_eq!(normalize(b"./").unwrap(), PathBuf::new());
        assert!(matches!(normalize(b"../x"), Err(EntryProblem::Escapes)));
        assert!(matches!(
            normalize(b"a/../../x"),
            Err(EntryProblem::Escapes)
        ));
        assert!(matches!(normalize(b"/etc/x"), Err(EntryProblem::Absolute)));
    }
}
