//! What a COPY reads, listed once for both sides of the step: [`copy`]
//! writes exactly the listing, and [`sources_digest`] hashes exactly the
//! listing (for the cache key), so the two can never disagree.
//!
//! Sources are paths relative to the source root (the build context, or
//! another stage's root for `--from`); a leading `/` means that root, and
//! `..` may not climb out of it. A source with `*`, `?`, `[` or `\` in it is
//! a glob (Go's `filepath.Match` syntax plus `**` components) matched
//! against the root's paths in name order; a match that is a directory is
//! not searched further. Symlinks in the middle of a literal source are
//! followed inside the root; everything else is listed as it is (a symlink
//! is a symlink, never followed). Sockets are skipped; FIFOs and device
//! nodes are refused.
//!
//! [`copy`]: super::copy
//! [`sources_digest`]: super::sources_digest

use rustc_hash::FxHashMap as HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::ignore::{compile_glob, Ignore};
use super::NativeError;
use crate::fsutil::resolve_in_root;
use crate::jailfile::CopySource;
use crate::layer::archive::{self, ArchiveFormat};

/// Everything one COPY reads, in the order it is written.
pub(crate) struct Listing<'a> {
    pub entries: Vec<Entry<'a>>,
    /// Top-level matches over all sources (a directory counts once).
    pub matches: usize,
    /// Whether some match is a directory (whose contents are copied).
    pub dir_match: bool,
}

pub(crate) enum Kind<'a> {
    File,
    Dir,
    Symlink(PathBuf),
    /// Another name for the file at this index of the listing.
    HardLink(usize),
    Inline(&'a str),
    /// A tar archive ADD extracts into the destination (only listed for
    /// ADD: see [`list_sources_as`]'s `unpack`).
    Archive(ArchiveFormat),
}

pub(crate) struct Entry<'a> {
    /// Where it goes relative to the destination directory: the path below
    /// a matched directory, or the name of a matched file.
    pub in_match: PathBuf,
    /// The host path to read (empty for inline content).
    pub host: PathBuf,
    pub meta: Option<fs::Metadata>,
    pub kind: Kind<'a>,
}

impl Entry<'_> {
    /// Permission bits as copied (before any `--chmod`).
    pub fn mode(&self) -> u32 {
        self.meta.as_ref().map_or(0o644, |m| m.mode() & 0o7777)
    }
}

struct Lister<'i> {
    root: PathBuf,
    /// `COPY --parents`: each match goes to its own path (after the
    /// source's `/./`, if any) below the destination, not its name.
    parents: bool,
    /// ADD: a source that is a tar archive is listed as one, to extract.
    unpack: bool,
    ignore: Option<&'i Ignore>,
    /// First listing index of each (device, inode) with several links.
    links: HashMap<(u64, u64), usize>,
    /// Directory listings read ahead by [`scan_parallel`].
    prefetched: HashMap<PathBuf, Vec<DirItem>>,
}

type DirItem = (std::ffi::OsString, fs::Metadata);

/// Lists what a COPY of `sources` from `src_root` reads, with `ignore`
/// applied (pass `None` for `--from` stage roots).
pub(crate) fn list_sources<'a>(
    src_root: &Path,
    sources: &'a [CopySource],
    ignore: Option<&Ignore>,
) -> Result<Listing<'a>, NativeError> {
    list_sources_as(src_root, sources, ignore, false, false)
}

/// Like [`list_sources`]; with `parents` (`COPY --parents`) each entry's
/// [`Entry::in_match`] is its whole path from the source root (or from a
/// `/./` in the source), as BuildKit keeps it. With `unpack` (ADD), a
/// source (not a file inside a source directory) that is a tar archive is
/// listed as [`Kind::Archive`], going to the destination directory itself.
pub(crate) fn list_sources_as<'a>(
    src_root: &Path,
    sources: &'a [CopySource],
    ignore: Option<&Ignore>,
    parents: bool,
    unpack: bool,
) -> Result<Listing<'a>, NativeError> {
    let mut out = Listing {
        entries: Vec::new(),
        matches: 0,
        dir_match: false,
    };
    let mut lister = Lister {
        root: src_root.to_path_buf(),
        parents,
        unpack,
        ignore,
        links: HashMap::default(),
        prefetched: HashMap::default(),
    };
    for source in sources {
        match source {
            CopySource::Inline { name, content } => {
                let plain =
                    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
                if !plain {
                    return Err(NativeError::InvalidInlineName { name: name.clone() });
                }
                out.matches += 1;
                let entry = Entry {
                    in_match: name.into(),
                    host: PathBuf::new(),
                    meta: None,
                    kind: Kind::Inline(content),
                };
                out.entries.push(entry);
            }
            CopySource::Path(source) => lister.list_path(source, &mut out)?,
        }
    }
    Ok(out)
}

impl Lister<'_> {
    fn list_path(&mut self, source: &str, out: &mut Listing<'_>) -> Result<(), NativeError> {
        // `--parents`: the components before the last `/./` are not kept.
        let mut pivot = 0;
        let mut parts: Vec<&str> = Vec::new();
        for (i, part) in source.split('/').enumerate() {
            if self.parents && part == "." && i > 0 {
                pivot = parts.len();
            }
            match part {
                "" | "." => {}
                ".." if parts.pop().is_some() => {}
                ".." => {
                    return Err(NativeError::SourceEscapes {
                        path: source.to_string(),
                    })
                }
                _ => parts.push(part),
            }
        }
        let not_found = || NativeError::SourceNotFound {
            path: source.to_string(),
        };
        let is_glob = |p: &&str| p.contains(['*', '?', '[', '\\']);
        let Some(first_glob) = parts.iter().position(is_glob) else {
            let logical = PathBuf::from(parts.join("/"));
            let host = self.resolve(&logical, false)?;
            let meta = match fs::symlink_metadata(&host) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(not_found()),
                Err(e) => return Err(NativeError::io("read", host)(e)),
            };
            let phys = host.strip_prefix(&self.root).unwrap_or(&host).to_path_buf();
            let hidden = |p: &Path| self.ignore.is_some_and(|i| i.is_ignored(p, meta.is_dir()));
            if !logical.as_os_str().is_empty() && (hidden(&logical) || hidden(&phys)) {
                return Err(not_found());
            }
            let kept = kept_path(&logical, pivot);
            return self.add_match(host, &phys, &kept, meta, out);
        };

        let pattern = parts.join("/");
        let matcher = compile_glob(&pattern).map_err(|e| NativeError::BadPattern {
            pattern: source.to_string(),
            origin: None,
            reason: e.kind().to_string(),
        })?;
        let rest = &parts[first_glob..];
        let depth = if rest.iter().any(|p| p.contains("**")) {
            usize::MAX
        } else {
            rest.len()
        };
        let prefix = PathBuf::from(parts[..first_glob].join("/"));
        let base = self.resolve(&prefix, true)?;
        if !base.is_dir() {
            return Err(not_found());
        }
        let base_phys = base.strip_prefix(&self.root).unwrap_or(&base).to_path_buf();
        let mut found = Vec::new();
        self.glob_walk(&base, &base_phys, &prefix, depth, &matcher, &mut found)?;
        if found.is_empty() {
            return Err(not_found());
        }
        for (host, phys, logical, meta) in found {
            let kept = kept_path(&logical, pivot);
            self.add_match(host, &phys, &kept, meta, out)?;
        }
        Ok(())
    }

    fn resolve(&self, rel: &Path, follow_last: bool) -> Result<PathBuf, NativeError> {
        resolve_in_root(&self.root, &Path::new("/").join(rel), follow_last)
            .map_err(NativeError::io("resolve", rel))
    }

    /// Collects the paths under `dir` matching `matcher` (on their logical
    /// path), not descending into matches, ignored directories or symlinks.
    fn glob_walk(
        &self,
        dir: &Path,
        phys: &Path,
        logical: &Path,
        depth: usize,
        matcher: &globset::GlobMatcher,
        found: &mut Vec<(PathBuf, PathBuf, PathBuf, fs::Metadata)>,
    ) -> Result<(), NativeError> {
        for (name, meta) in sorted_dir(dir)? {
            let (host, phys, logical) = (dir.join(&name), phys.join(&name), logical.join(&name));
            let hidden = |p: &Path| self.ignore.is_some_and(|i| i.is_ignored(p, meta.is_dir()));
            if hidden(&phys) || hidden(&logical) {
                continue;
            }
            if matcher.is_match(&logical) {
                found.push((host, phys, logical, meta));
            } else if meta.is_dir() && depth > 1 {
                self.glob_walk(&host, &phys, &logical, depth - 1, matcher, found)?;
            }
        }
        Ok(())
    }

    /// One match; `kept` is its path as `--parents` keeps it.
    fn add_match(
        &mut self,
        host: PathBuf,
        phys: &Path,
        kept: &Path,
        meta: fs::Metadata,
        out: &mut Listing<'_>,
    ) -> Result<(), NativeError> {
        out.matches += 1;
        if meta.is_dir() {
            out.dir_match = true;
            if self.parents && !kept.as_os_str().is_empty() {
                // The directory itself is kept too, with its mode.
                out.entries.push(Entry {
                    in_match: kept.to_path_buf(),
                    host: host.clone(),
                    meta: Some(meta),
                    kind: Kind::Dir,
                });
                return self.walk_tree(&host, phys, kept, out);
            }
            return self.walk_tree(&host, phys, Path::new(""), out);
        }
        let name = if self.parents {
            kept.to_path_buf()
        } else {
            phys.file_name().map(PathBuf::from).unwrap_or_default()
        };
        if !self.push(host, phys, name, meta, out)? {
            return Err(NativeError::UnsupportedFile {
                path: phys.to_path_buf(),
                what: "sockets",
            });
        }
        if self.unpack {
            if let Some(e) = out
                .entries
                .last_mut()
                .filter(|e| matches!(e.kind, Kind::File))
            {
                let mut f = open_listed(&e.host).map_err(NativeError::io("read", phys))?;
                if let Some(format) =
                    archive::sniff(&mut f).map_err(NativeError::io("read", phys))?
                {
                    e.kind = Kind::Archive(format);
                    e.in_match = PathBuf::new();
                    out.dir_match = true;
                }
            }
        }
        Ok(())
    }

    /// Lists the contents of a matched directory, pre-order, by name. A
    /// directory excluded by `.jailignore` but walked for an exception is
    /// listed only if something below it is.
    fn walk_tree(
        &mut self,
        dir: &Path,
        phys: &Path,
        in_match: &Path,
        out: &mut Listing<'_>,
    ) -> Result<(), NativeError> {
        let items = match self.prefetched.remove(dir) {
            Some(items) => items,
            None => {
                self.prefetched
                    .extend(scan_parallel(dir, phys, self.ignore));
                match self.prefetched.remove(dir) {
                    Some(items) => items,
                    None => sorted_dir(dir)?, // unreadable: report it as the walk would
                }
            }
        };
        for (name, meta) in items {
            let (host, phys, in_match) = (dir.join(&name), phys.join(&name), in_match.join(&name));
            if self
                .ignore
                .is_some_and(|i| i.is_ignored(&phys, meta.is_dir()))
            {
                continue;
            }
            if meta.is_dir() {
                let excluded = self.ignore.is_some_and(|i| i.excludes(&phys));
                let at = out.entries.len();
                out.entries.push(Entry {
                    in_match: in_match.clone(),
                    host: host.clone(),
                    meta: Some(meta),
                    kind: Kind::Dir,
                });
                self.walk_tree(&host, &phys, &in_match, out)?;
                if excluded && out.entries.len() == at + 1 {
                    out.entries.pop();
                }
            } else {
                self.push(host, &phys, in_match, meta, out)?;
            }
        }
        Ok(())
    }

    /// Lists one non-directory; `false` for a socket (skipped).
    fn push(
        &mut self,
        host: PathBuf,
        phys: &Path,
        in_match: PathBuf,
        meta: fs::Metadata,
        out: &mut Listing<'_>,
    ) -> Result<bool, NativeError> {
        let ft = meta.file_type();
        let kind = if ft.is_file() && meta.nlink() > 1 {
            let key = (meta.dev(), meta.ino());
            match self.links.get(&key) {
                Some(&first) => Kind::HardLink(first),
                None => {
                    self.links.insert(key, out.entries.len());
                    Kind::File
                }
            }
        } else if ft.is_file() {
            Kind::File
        } else if ft.is_symlink() {
            Kind::Symlink(fs::read_link(&host).map_err(NativeError::io("read link", phys))?)
        } else if ft.is_socket() {
            return Ok(false);
        } else {
            let what = if ft.is_fifo() {
                "FIFOs"
            } else {
                "device nodes"
            };
            return Err(NativeError::UnsupportedFile {
                path: phys.to_path_buf(),
                what,
            });
        };
        out.entries.push(Entry {
            in_match,
            host,
            meta: Some(meta),
            kind,
        });
        Ok(true)
    }
}

/// `logical` without its first `pivot` components: what `COPY --parents`
/// keeps of a source's path.
fn kept_path(logical: &Path, pivot: usize) -> PathBuf {
    logical.components().skip(pivot).collect()
}

/// Reads the listings (names and metadata, sorted) of every directory under
/// `dir` on several threads, skipping what `.jailignore` skips entirely.
///
/// Listing a big context is one `stat` per file, most of it kernel path
/// lookups; spreading it over the cores is what keeps a fully cached
/// rebuild of a 50,000-file context fast. Directories that cannot be read
/// are left out: the sequential walk reads them again and reports why.
fn scan_parallel(
    dir: &Path,
    phys: &Path,
    ignore: Option<&Ignore>,
) -> HashMap<PathBuf, Vec<DirItem>> {
    use std::sync::{Condvar, Mutex};

    struct Shared {
        queue: Vec<(PathBuf, PathBuf)>,
        busy: usize,
        done: HashMap<PathBuf, Vec<DirItem>>,
    }
    let shared = Mutex::new(Shared {
        queue: vec![(dir.to_path_buf(), phys.to_path_buf())],
        busy: 0,
        done: HashMap::default(),
    });
    let wake = Condvar::new();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let worker = || loop {
        let (d, p) = {
            let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(work) = g.queue.pop() {
                    g.busy += 1;
                    break work;
                }
                if g.busy == 0 {
                    return;
                }
                g = wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        };
        let items = sorted_dir(&d).ok();
        let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(items) = items {
            for (name, meta) in &items {
                let sub = p.join(name);
                if meta.is_dir() && !ignore.is_some_and(|i| i.is_ignored(&sub, true)) {
                    g.queue.push((d.join(name), sub));
                }
            }
            g.done.insert(d, items);
        }
        g.busy -= 1;
        drop(g);
        wake.notify_all();
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(worker);
        }
        worker();
    });
    shared.into_inner().unwrap_or_else(|e| e.into_inner()).done
}

fn sorted_dir(dir: &Path) -> Result<Vec<DirItem>, NativeError> {
    let mut items = Vec::new();
    for entry in fs::read_dir(dir).map_err(NativeError::io("list", dir))? {
        let entry = entry.map_err(NativeError::io("list", dir))?;
        let meta = entry
            .metadata()
            .map_err(NativeError::io("inspect", entry.path()))?;
        items.push((entry.file_name(), meta));
    }
    items.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(items)
}

/// Opens a listed file for reading without following a symlink that
/// replaced it since it was listed.
pub(crate) fn open_listed(host: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(host)
}
