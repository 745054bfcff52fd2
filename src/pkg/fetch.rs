//! The packages of a resolved closure, downloaded (several at a time) and
//! kept in jbuild's package cache by their checksum, so every build and
//! every image on the machine shares one copy of each.
//!
//! Each package is checked against its catalogue entry before it is
//! kept: no more bytes than its `pkgsize`, then its `sum` (SHA-256 hex as
//! pkg up to 2.7 writes it, `2$` BLAKE2b-512 from pkg 2.8; see
//! [`super::checksum`]), as pkg checks a download
//! (`libpkg/repo/binary/fetch.c`). A package that does not match is an
//! error naming the repository and the package, and nothing of it is kept:
//! it is written to a temporary file in the cache directory (hashed as it
//! arrives) and renamed into place only once whole and verified, so the cache never holds a
//! file that did not verify (a build interrupted mid-download leaves at
//! most a temporary file, which the next `prune --cache` frees).
//!
//! Durable once for all: a download is verified in its temporary file and
//! not synced there; once every download has ended, the verified files are
//! made durable at once ([`crate::fsutil::sync_tree_of`]: one `syncfs` of
//! the cache's filesystem on Linux, one journal commit for all; fsynced
//! together elsewhere), then renamed to their checksums' names, then the
//! directory is synced once. A name in the cache still only ever holds a
//! verified, durable file; before, each package cost three syncs in a row
//! (its file, the temporary's directory, the cache's directory), most of a
//! large `PKG`'s fetch on a journaled disk (issue 31).
//!
//! A cached package is not hashed again: it got there only verified, and
//! extraction checks each file's content against the package's manifest
//! anyway ([`super::extract`]).
//!
//! Where the cache is: `Paths::package_cache` (`<root>/cache/packages`,
//! beside the release cache `<root>/cache/freebsd`); `jbuild prune
//! --cache` empties it.
//!
//! Sources: `http://`, `https://` and `file://`, through
//! [`crate::transport::http`], so the registries' rules hold for packages
//! too: `[registries] timeout_secs`, `--cert-dir`, proxies, retries, and a
//! transfer that breaks off taken up again where it stopped (`Range`).
//! (A `pkg+https://` repository's packages come from the mirror that
//! served its catalogue, `Repository::url`.)

use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::checksum::{BadChecksum, Checksum, Hasher, Kind};
use super::resolve::Chosen;
use crate::transport::http::{Http, HttpError, Limits, Watch};

/// The largest package read when its catalogue entry gives no `pkgsize`.
pub const MAX_PACKAGE: u64 = 8 << 30;

/// jbuild's package cache: verified package files named by checksum.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

/// One package of the closure, in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub name: String,
    pub version: String,
    pub repository: String,
    /// The verified package file in the cache.
    pub path: PathBuf,
    pub bytes: u64,
    /// Whether it was in the cache already (nothing was read from the
    /// repository).
    pub cached: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(
        "repository `{repo}`: package `{package}` ({url}) does not have the checksum its \
         catalogue gives ({want}, it has {got}): the repository changed under its catalogue, \
         or the download was damaged; nothing of it was kept"
    )]
    Checksum {
        repo: String,
        package: String,
        url: String,
        want: String,
        got: String,
    },
    #[error(
        "repository `{repo}`: package `{package}` ({url}) is larger than the {want} bytes its \
         catalogue gives; nothing of it was kept"
    )]
    TooLarge {
        repo: String,
        package: String,
        url: String,
        want: u64,
    },
    #[error(
        "repository `{repo}`: package `{package}` ({url}) has {got} bytes, not the {want} its \
         catalogue gives; nothing of it was kept"
    )]
    Size {
        repo: String,
        package: String,
        url: String,
        want: u64,
        got: u64,
    },
    #[error("repository `{repo}`: package `{package}`: its catalogue's sum is not one pkg writes")]
    BadSum {
        repo: String,
        package: String,
        #[source]
        source: BadChecksum,
    },
    #[error(
        "repository `{repo}`: package `{package}`: its path `{repopath}` is not below the \
         repository (absolute, empty or with `..`)"
    )]
    BadPath {
        repo: String,
        package: String,
        repopath: String,
    },
    #[error("repository `{repo}`: package `{package}`")]
    Http {
        repo: String,
        package: String,
        #[source]
        source: HttpError,
    },
    #[error("the package cache {}: cannot {what}", path.display())]
    Cache {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl crate::blame::Blame for FetchError {
    /// What the repository serves is the user's choice; the cache on this
    /// machine failing is the machine's.
    fn is_user_error(&self) -> bool {
        match self {
            FetchError::Cache { .. } => false,
            FetchError::Http { source, .. } => source.is_user_error(),
            _ => true,
        }
    }
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes the cache's directory, if it is not there, and opens it:
    /// before the downloads write in it, so that [`keep`]'s sync through
    /// it reports a failed writeback of any of them.
    pub(crate) fn create(&self) -> Result<fs::File, FetchError> {
        let err = |what| {
            let path = self.dir.clone();
            move |source| FetchError::Cache { what, path, source }
        };
        fs::create_dir_all(&self.dir).map_err(err("create"))?;
        fs::File::open(&self.dir).map_err(err("open"))
    }

    /// Where the package with checksum `sum` is kept: its checksum type
    /// and hash, as pkg writes them with `-` for `$` (`2-<base32>.pkg`,
    /// `1-<hex>.pkg`; a bare SHA-256 hex sum is type 1).
    pub fn path_of(&self, sum: &Checksum) -> PathBuf {
        let n = match sum.kind {
            Kind::Sha256Base32 => 0,
            Kind::Sha256Hex => 1,
            Kind::Blake2bBase32 => 2,
            Kind::Blake2sBase32 => 5,
        };
        self.dir.join(format!("{n}-{}.pkg", sum.encoded))
    }

    /// Empties the cache: every package and leftover temporary file.
    /// Returns the files removed and their bytes.
    pub fn clear(&self) -> io::Result<(u64, u64)> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((0, 0)),
            Err(e) => return Err(e),
        };
        let (mut files, mut bytes) = (0, 0);
        for entry in entries {
            let entry = entry?;
            let m = entry.metadata()?;
            if m.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
                files += 1;
                bytes += m.len();
            }
        }
        Ok((files, bytes))
    }
}

/// How often [`fetch_all_watched`] says how far the downloads are.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Puts every package of `closure` into `cache`, `jobs` at a time (at
/// least one), and returns them in the closure's order. The first error
/// (in the closure's order) is returned once the downloads under way have
/// finished; what verified before it stays cached.
pub fn fetch_all(
    closure: &[Chosen<'_>],
    cache: &Cache,
    http: &Http,
    jobs: usize,
) -> Result<Vec<Fetched>, FetchError> {
    fetch_all_watched(closure, cache, http, jobs, &mut |_| {})
}

/// [`fetch_all`], telling `progress` the bytes downloaded so far (all
/// packages together) every [`PROGRESS_EVERY`] and once at the end, on
/// the calling thread.
pub fn fetch_all_watched(
    closure: &[Chosen<'_>],
    cache: &Cache,
    http: &Http,
    jobs: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<Fetched>, FetchError> {
    let top = cache.create()?;
    let next = AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let arrived = AtomicU64::new(0);
    type Done = Result<(Fetched, Option<Pending>), FetchError>;
    let results: Mutex<Vec<Option<Done>>> = Mutex::new((0..closure.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        let (alive, ended) = std::sync::mpsc::channel::<()>();
        for _ in 0..jobs.clamp(1, closure.len().max(1)) {
            let alive = alive.clone();
            let (next, failed, arrived, results) = (&next, &failed, &arrived, &results);
            s.spawn(move || {
                let _alive = alive;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= closure.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = fetch_counted(&closure[i], cache, http, arrived);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
        drop(alive);
        // Every worker gone: the channel is closed.
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            ended.recv_timeout(PROGRESS_EVERY)
        {
            progress(arrived.load(Ordering::Relaxed));
        }
    });
    progress(arrived.load(Ordering::Relaxed));
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    // What verified is kept, whatever failed beside it.
    let (results, pending): (Vec<_>, Vec<_>) = results
        .into_iter()
        .flatten()
        .map(|r| match r {
            Ok((f, tmp)) => (Ok(f), tmp),
            Err(e) => (Err(e), None),
        })
        .unzip();
    keep(cache, &top, pending.into_iter().flatten().collect())?;
    // Packages not started (an error stopped the rest) are `None`: the
    // error is returned, the first in the closure's order.
    let mut out = Vec::with_capacity(closure.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(f) => out.push(f),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// One package into the cache.
pub fn fetch_one(c: &Chosen<'_>, cache: &Cache, http: &Http) -> Result<Fetched, FetchError> {
    let top = cache.create()?;
    let (f, tmp) = fetch_counted(c, cache, http, &AtomicU64::new(0))?;
    keep(cache, &top, tmp.into_iter().collect())?;
    Ok(f)
}

/// A download verified in its temporary file, not yet durable: renamed to
/// `dest` by [`keep`].
pub(crate) struct Pending {
    tmp: tempfile::TempPath,
    dest: PathBuf,
}

impl Pending {
    /// Where the verified download is until [`keep`] renames it.
    pub(crate) fn path(&self) -> &Path {
        &self.tmp
    }
}

/// Makes the verified downloads durable (at once: one `syncfs` of the
/// cache's filesystem through `top`, the cache's directory opened before
/// they were written, on Linux; fsynced together elsewhere), names them by
/// their checksums, then syncs the cache's directory once.
pub(crate) fn keep(cache: &Cache, top: &fs::File, pending: Vec<Pending>) -> Result<(), FetchError> {
    if pending.is_empty() {
        return Ok(());
    }
    let err = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Cache { what, path, source }
    };
    let files: Vec<PathBuf> = pending.iter().map(|p| p.tmp.to_path_buf()).collect();
    crate::fsutil::sync_tree_of(top, &cache.dir, &files).map_err(err("sync", &cache.dir))?;
    for p in pending {
        p.tmp
            .persist(&p.dest)
            .map_err(|e| err("keep", &p.dest)(e.error))?;
    }
    crate::fsutil::sync_dir(&cache.dir).map_err(err("sync", &cache.dir))
}

/// [`fetch_one`], adding the bytes that arrive to `arrived`; a download
/// comes back [`Pending`], for [`keep`].
pub(crate) fn fetch_counted(
    c: &Chosen<'_>,
    cache: &Cache,
    http: &Http,
    arrived: &AtomicU64,
) -> Result<(Fetched, Option<Pending>), FetchError> {
    let (repo, p) = (&c.repository.name, c.package);
    let package = format!("{}-{}", p.name, p.version);
    let sum = Checksum::parse(&p.sum).map_err(|source| FetchError::BadSum {
        repo: repo.clone(),
        package: package.clone(),
        source,
    })?;
    let dest = cache.path_of(&sum);
    let fetched = |bytes, cached| Fetched {
        name: p.name.clone(),
        version: p.version.clone(),
        repository: repo.clone(),
        path: dest.clone(),
        bytes,
        cached,
    };
    if let Ok(m) = fs::symlink_metadata(&dest) {
        if m.is_file() {
            return Ok((fetched(m.len(), true), None));
        }
    }
    let rel = Path::new(&p.repopath);
    let below = !p.repopath.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !below {
        return Err(FetchError::BadPath {
            repo: repo.clone(),
            package,
            repopath: p.repopath.clone(),
        });
    }
    let url = format!("{}/{}", c.repository.url, p.repopath);
    let cache_err = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Cache { what, path, source }
    };
    // Downloaded under a name of its own, renamed to its checksum's only
    // once verified; dropped (removed) on any error. What a failed or
    // killed download had is kept beside it (`.partial-<name>`) and
    // continued the next time; if the whole then has the wrong sum, it is
    // fetched once more from its first byte.
    let key = dest
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut again = true;
    let tmp = loop {
        let tmp = tempfile::Builder::new()
            .prefix(".fetch-")
            .tempfile_in(&cache.dir)
            .map_err(cache_err("create a temporary file in", &cache.dir))?
            .into_temp_path();
        let max = if p.pkgsize > 0 {
            p.pkgsize
        } else {
            MAX_PACKAGE
        };
        // The transport hashes every download with SHA-256 already: a
        // sum of that form (pkg up to 2.7) is taken from it, not hashed
        // twice.
        let mut watch = Hashing((sum.kind != Kind::Sha256Hex).then(|| sum.hasher()), arrived);
        let got = crate::transport::block_on(http.get_to_file_resuming_unsynced(
            &url,
            &tmp,
            &key,
            Limits::at_most(max),
            &mut watch,
        ))
        .map_err(|source| match source {
            HttpError::TooLarge { .. } => FetchError::TooLarge {
                repo: repo.clone(),
                package: package.clone(),
                url: url.clone(),
                want: max,
            },
            source => FetchError::Http {
                repo: repo.clone(),
                package: package.clone(),
                source,
            },
        })?;
        let have = match watch.0 {
            Some(h) => h.finish(),
            None => Checksum {
                kind: Kind::Sha256Hex,
                encoded: got.sha256.hex().to_string(),
            },
        };
        let right = (p.pkgsize == 0 || got.size == p.pkgsize) && have == sum;
        if !right && got.resumed > 0 && again {
            tracing::warn!(
                "the part of {package} an earlier download kept was not right; fetching it whole"
            );
            again = false;
            continue;
        }
        if p.pkgsize > 0 && got.size != p.pkgsize {
            return Err(FetchError::Size {
                repo: repo.clone(),
                package,
                url,
                want: p.pkgsize,
                got: got.size,
            });
        }
        if have != sum {
            return Err(FetchError::Checksum {
                repo: repo.clone(),
                package,
                url,
                want: sum.to_string(),
                got: have.to_string(),
            });
        }
        break (tmp, got.size);
    };
    let (tmp, size) = tmp;
    let f = fetched(size, false);
    Ok((f, Some(Pending { tmp, dest })))
}

/// Hashes a download as it arrives, in pkg's checksum of the package
/// (unless the transport's SHA-256 is that checksum), and counts its bytes.
struct Hashing<'a>(Option<Hasher>, &'a AtomicU64);

impl Watch for Hashing<'_> {
    fn bytes(&mut self, chunk: &[u8]) {
        if let Some(h) = &mut self.0 {
            h.write_all(chunk).expect("hashing cannot fail");
        }
        self.1.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
}
