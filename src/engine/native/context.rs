//! The build-context digest: the cache-key side of COPY. It hashes the
//! [listing](super::sources) that [`copy`](super::copy) consumes, so what is
//! hashed is exactly what is copied.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{LazyLock, Mutex};

use sha2::{Digest as _, Sha256};

use super::sources::{list_sources, open_listed, Kind};
use super::{Ignore, NativeError};
use crate::digest::Digest;
use crate::jailfile::CopySource;

/// The content digest of what a COPY of `sources` from `src_root` would
/// read, with `ignore` applied, for the step's cache key.
///
/// The encoding, version 1 (integers little-endian, `bytes` is a u64 length
/// then the bytes):
///
/// ```text
/// "jbuild-copy-v1\0"  u64 matches  u8 dir_match
/// per entry: u8 tag  bytes in_match  u32 mode  u64 size  then by tag:
///   'f' file      32 bytes sha256 of the content
///   'd' directory nothing
///   'l' symlink   bytes target           (mode 0)
///   'h' hard link u64 index of the file (mode 0, size 0)
///   'i' inline    32 bytes sha256 of the content (mode 0644)
/// ```
///
/// Modification times and owners are left out on purpose: COPY sets the
/// owner itself (`--chown`, else root), and the tar writer clamps mtimes,
/// so neither a `touch` nor a checkout by another user changes the result.
pub fn sources_digest(
    src_root: &Path,
    sources: &[CopySource],
    ignore: Option<&Ignore>,
) -> Result<Digest, NativeError> {
    let listing = list_sources(src_root, sources, ignore)?;
    let mut h = Sha256::new();
    h.update(b"jbuild-copy-v1\0");
    h.update((listing.matches as u64).to_le_bytes());
    h.update([u8::from(listing.dir_match)]);
    let bytes = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    for e in &listing.entries {
        let size = e.meta.as_ref().map_or(0, |m| m.len());
        let (tag, mode, size) = match &e.kind {
            Kind::File | Kind::Archive(_) => (b'f', e.mode(), size),
            Kind::Dir => (b'd', e.mode(), 0),
            Kind::Symlink(_) => (b'l', 0, size),
            Kind::HardLink(_) => (b'h', 0, 0),
            Kind::Inline(c) => (b'i', 0o644, c.len() as u64),
        };
        h.update([tag]);
        bytes(&mut h, e.in_match.as_os_str().as_bytes());
        h.update(mode.to_le_bytes());
        h.update(size.to_le_bytes());
        match &e.kind {
            Kind::File | Kind::Archive(_) => h.update(file_sha256(
                &e.host,
                e.meta.as_ref().expect("files have metadata"),
            )?),
            Kind::Dir => {}
            Kind::Symlink(target) => bytes(&mut h, target.as_os_str().as_bytes()),
            Kind::HardLink(first) => h.update((*first as u64).to_le_bytes()),
            Kind::Inline(c) => h.update(Sha256::digest(c.as_bytes())),
        }
    }
    Ok(Digest::from_sha(h.finalize().into()))
}

/// What identifies a file's content without reading it: ctime changes on
/// every write, whatever mtime says.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct MemoKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Content hashes of files already read (a build hashes the context for
/// every COPY step; most steps read the same files), loaded from and saved
/// to the hash cache between runs.
static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(Default::default);
const MEMO_LIMIT: usize = 1 << 20;

#[derive(Default)]
struct Memo {
    sums: HashMap<MemoKey, [u8; 32]>,
    /// Entries looked up or added by this process.
    used: HashSet<MemoKey>,
    /// Entries were added since the cache was loaded.
    dirty: bool,
    /// The cache file to load on first use (see [`hash_cache::attach`]).
    file: Option<std::path::PathBuf>,
    loaded: bool,
}

fn file_sha256(host: &Path, meta: &fs::Metadata) -> Result<[u8; 32], NativeError> {
    let key = MemoKey {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.len(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    };
    {
        let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
        hash_cache::ensure_loaded(&mut memo);
        if let Some(sum) = memo.sums.get(&key).copied() {
            memo.used.insert(key);
            return Ok(sum);
        }
    }
    let mut file = open_listed(host).map_err(NativeError::io("read", host))?;
    let mut h = Sha256::new();
    io::copy(&mut file, &mut h).map_err(NativeError::io("read", host))?;
    let sum: [u8; 32] = h.finalize().into();
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if memo.sums.len() >= MEMO_LIMIT {
        memo.sums.clear();
    }
    memo.sums.insert(key, sum);
    memo.used.insert(key);
    memo.dirty = true;
    Ok(sum)
}

/// The on-disk hash cache: what makes a fully cached rebuild cost a `stat`
/// per context file instead of reading it (git's index does the same).
///
/// Format, version 1: the magic `jbuild-hashes-v1\n`, then fixed records of
/// 88 bytes, integers little-endian: dev u64, ino u64, size u64, mtime s
/// i64, mtime ns i64, ctime s i64, ctime ns i64, sha256 \[32\]. A file that
/// is missing, of another version or damaged is ignored: the cache is only
/// ever a shortcut to a hash that can be recomputed.
pub mod hash_cache {
    use super::*;

    const MAGIC: &[u8] = b"jbuild-hashes-v1\n";
    const RECORD: usize = 88;
    /// Entries whose ctime is this close to the save are not persisted:
    /// timestamps advance by clock ticks, so a file written again within
    /// the same tick could keep its ctime (git's "racily clean" problem).
    const RACY_SECS: i64 = 2;
    /// Past this many entries (about 17 MiB) only those this build used are
    /// kept, so hashes of contexts long gone do not pile up.
    const KEEP_ALL_UP_TO: usize = 200_000;

    /// Names the cache file this process uses: it is read when a content
    /// hash is first needed (a build with no COPY from the context never
    /// reads it), and [`save`] writes it back.
    pub fn attach(path: &Path) {
        let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
        memo.file = Some(path.to_path_buf());
        memo.loaded = false;
    }

    pub(super) fn ensure_loaded(memo: &mut Memo) {
        if !memo.loaded {
            memo.loaded = true;
            if let Some(path) = memo.file.clone() {
                load_into(memo, &path);
            }
        }
    }

    /// Loads the cache at `path` into this process's memo now; returns how
    /// many entries it held.
    pub fn load(path: &Path) -> usize {
        load_into(&mut MEMO.lock().unwrap_or_else(|e| e.into_inner()), path)
    }

    fn load_into(memo: &mut Memo, path: &Path) -> usize {
        let Ok(data) = fs::read(path) else { return 0 };
        let Some(body) = data.strip_prefix(MAGIC) else {
            return 0;
        };
        if body.len() % RECORD != 0 {
            return 0;
        }
        let u = |b: &[u8], i: usize| {
            u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
        };
        memo.sums.reserve(body.len() / RECORD);
        for r in body.chunks_exact(RECORD) {
            let key = MemoKey {
                dev: u(r, 0),
                ino: u(r, 1),
                size: u(r, 2),
                mtime: (u(r, 3) as i64, u(r, 4) as i64),
                ctime: (u(r, 5) as i64, u(r, 6) as i64),
            };
            let sum: [u8; 32] = r[56..88].try_into().expect("32 bytes");
            memo.sums.insert(key, sum);
        }
        body.len() / RECORD
    }

    /// Writes the memo to `path` (atomically) if it gained entries; returns
    /// how many were written.
    pub fn save(path: &Path) -> io::Result<usize> {
        let memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
        if !memo.dirty {
            return Ok(0);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(i64::MAX);
        let mut out = Vec::with_capacity(MAGIC.len() + memo.sums.len() * RECORD);
        out.extend_from_slice(MAGIC);
        let mut n = 0;
        let keep_all = memo.sums.len() <= KEEP_ALL_UP_TO;
        let keep = |k: &MemoKey| k.ctime.0 < now - RACY_SECS && (keep_all || memo.used.contains(k));
        for (k, sum) in memo.sums.iter().filter(|(k, _)| keep(k)) {
            for v in [
                k.dev,
                k.ino,
                k.size,
                k.mtime.0 as u64,
                k.mtime.1 as u64,
                k.ctime.0 as u64,
                k.ctime.1 as u64,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(sum);
            n += 1;
        }
        drop(memo);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        crate::fsutil::write_atomic(path, &out)?;
        Ok(n)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn round_trips_and_skips_racy_entries() {
            let t = tempfile::tempdir().unwrap();
            let old = t.path().join("old");
            fs::write(&old, b"content").unwrap();
            // An old ctime cannot be set directly; a fresh file is racy and must not be saved.
            let meta = fs::metadata(&old).unwrap();
            let sum = file_sha256(&old, &meta).unwrap();
            assert_eq!(sum, <[u8; 32]>::from(Sha256::digest(b"content")));
            let cache = t.path().join("cache/hashes");
            save(&cache).unwrap();
            let data = fs::read(&cache).unwrap();
            assert!(data.starts_with(MAGIC));
            assert_eq!((data.len() - MAGIC.len()) % RECORD, 0);
            let key_present = |data: &[u8]| {
                data[MAGIC.len()..]
                    .chunks_exact(RECORD)
                    .any(|r| r[56..] == sum)
            };
            assert!(
                !key_present(&data),
                "a file changed just now is not persisted"
            );
            // A damaged cache is ignored, not trusted.
            fs::write(&cache, b"jbuild-hashes-v1\nshort").unwrap();
            assert_eq!(load(&cache), 0);
        }
    }
}
