//! The build-context digest: the cache-key side of COPY. It hashes the
//! [listing](super::sources) that [`copy`](super::copy) consumes, so what is
//! hashed is exactly what is copied.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
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
            Kind::File => (b'f', e.mode(), size),
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
            Kind::File => h.update(file_sha256(
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

/// What identifies a file's content without reading it, as long as this
/// process runs: ctime changes on every write, whatever mtime says.
#[derive(PartialEq, Eq, Hash)]
struct MemoKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Content hashes of files already read by this process (a build hashes
/// the context for every COPY step; most steps read the same files).
static MEMO: LazyLock<Mutex<HashMap<MemoKey, [u8; 32]>>> = LazyLock::new(Default::default);
const MEMO_LIMIT: usize = 1 << 20;

fn file_sha256(host: &Path, meta: &fs::Metadata) -> Result<[u8; 32], NativeError> {
    let key = MemoKey {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.len(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    };
    if let Some(sum) = MEMO.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(*sum);
    }
    let mut file = open_listed(host).map_err(NativeError::io("read", host))?;
    let mut h = Sha256::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(NativeError::io("read", host)(e)),
        }
    }
    let sum: [u8; 32] = h.finalize().into();
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if memo.len() >= MEMO_LIMIT {
        memo.clear();
    }
    memo.insert(key, sum);
    Ok(sum)
}
