//! Blobs out of a registry repository: a HEAD to see whether it is there,
//! and a GET streamed into a file, hashed on the way, resumed with a
//! `Range` request where the connection was cut.

use std::io::SeekFrom;
use std::path::Path;
use std::time::Instant;

use futures_util::StreamExt;
use oci_spec::image::Descriptor;
use reqwest::header::{CONTENT_LENGTH, CONTENT_RANGE, RANGE};
use reqwest::StatusCode;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::blob::{range_start, range_total, CHUNK};
use super::conn::Conn;
use super::pace::Pace;
use super::sink::BlobSink;
use super::{RegistryOperation, RegistryTransport};
use crate::digest::Digest;
use crate::transport::{digest_of, Progress, TransportError};

/// Whether an answer's body is sent in chunks: its clean end, like a
/// `Content-Length` reached, is the end of the whole answer (a body that
/// is only ended by the connection closing may have been cut).
fn chunked(h: &reqwest::header::HeaderMap) -> bool {
    h.get(reqwest::header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
}

/// What a blob's download is called in messages.
fn fetch_what(desc: &Descriptor) -> String {
    format!("fetch blob {}", desc.digest())
}

/// How long a blob's body may pause before what came so far is waited
/// for in the file.
const IDLE_FLUSH: std::time::Duration = std::time::Duration::from_millis(20);

impl RegistryTransport {
    /// Whether the repository has the blob, by a HEAD.
    pub(super) async fn head_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
        let c = self.conn().await?;
        let url = c.url("blobs", desc.digest().as_ref());
        let what = format!("look for blob {}", desc.digest());
        // A HEAD needs push rights' token when pushing: ask with the
        // operation the copy is for. Pull scope is a subset of push.
        let resp = c
            .send(RegistryOperation::Pull, &what, |h| h.head(&url))
            .await?;
        match resp.status() {
            s if s.is_success() => Ok(resp
                .content_length()
                .is_none_or(|n| n == 0 || n == desc.size())),
            StatusCode::NOT_FOUND => Ok(false),
            // No read access yet (a repository about to be created).
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Ok(false),
            _ => Err(c.status_error(&what, resp).await),
        }
    }

    /// Streams the blob into `dest`, resuming a cut connection with a
    /// `Range` request, and checks the whole of it at the end; held to the
    /// transfer limits (`pace.rs`) throughout. `kept`: `dest` already
    /// holds that many bytes an earlier pull kept ([`crate::store::StagedBlob`]),
    /// continued from (see [`RegistryTransport::download_paced`]).
    pub(super) async fn download_blob(
        &self,
        desc: &Descriptor,
        dest: &Path,
        kept: u64,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let c = self.conn().await?;
        let mut pace = Pace::new(self.options.transfer, Instant::now());
        let left = pace.time_left(Instant::now());
        let run = self.download_paced(c, desc, dest, kept, progress, &mut pace);
        let r = match left {
            Some(d) => tokio::time::timeout(d, run).await,
            None => Ok(run.await),
        };
        r.unwrap_or_else(|_| Err(c.too_slow(&fetch_what(desc), pace.past_deadline())))
    }

    /// The download. With `kept` bytes already in `dest`, the hasher is
    /// rebuilt by reading them again (a buffer at a time) and the registry
    /// asked for the rest; nothing reads `dest` as it grows then, so
    /// whatever casts doubt on the kept bytes — a `200` (no ranges), a
    /// `206` for another range or size, a `416`, or a blob whose whole
    /// digest is wrong — starts the file again from its first byte, once.
    /// The bytes are hashed and written by the file's own thread
    /// ([`BlobSink`]), which also pushes them to the disk as they come.
    async fn download_paced(
        &self,
        c: &Conn,
        desc: &Descriptor,
        dest: &Path,
        kept: u64,
        progress: Progress<'_>,
        pace: &mut Pace,
    ) -> Result<(), TransportError> {
        let expected = digest_of(desc, &self.location())?;
        let io = |e| TransportError::io(format!("cannot write {}", dest.display()), e);
        let mut hasher = Sha256::new();
        let mut have = 0;
        if kept > 0 {
            have = hash_prefix(dest, kept.min(desc.size()), &mut hasher)
                .await
                .map_err(|e| TransportError::io(format!("cannot read {}", dest.display()), e))?;
        }
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(have == 0)
            .open(dest)
            .await
            .map_err(io)?;
        if have > 0 {
            file.set_len(have).await.map_err(io)?;
            file.seek(SeekFrom::Start(have)).await.map_err(io)?;
            progress(have);
        }
        let file = BlobSink::new(file.into_std().await, have, hasher, desc.size()).map_err(io)?;
        let mut fetch = Fetch {
            c,
            desc,
            file,
            // No one reads a file that held a kept prefix as it grows.
            rewrite: kept > 0,
            progress,
            pace,
        };
        // Bytes of an earlier pull in the file, not yet vouched for.
        let mut unchecked = have > 0;
        loop {
            let fetched = self.fetch_rest(&mut fetch, have).await;
            if let Err(e) = fetched {
                // What came is in the file, for a later pull to continue.
                let _ = fetch.file.flush().await;
                return Err(e);
            }
            let hasher = fetch.file.flush().await.map_err(io)?;
            let actual = Digest::from_sha(hasher.finalize().into());
            if actual == expected {
                return Ok(());
            }
            if !unchecked {
                return Err(c.wrong_content(&expected, &actual, String::new()));
            }
            tracing::warn!(
                "the part of blob {} an earlier pull kept was not right; fetching it whole",
                desc.digest()
            );
            fetch.file.restart().await.map_err(io)?;
            have = 0;
            unchecked = false;
        }
    }

    /// Fetches from byte `have` to the blob's end, with as many requests
    /// as the connection needs.
    async fn fetch_rest(&self, f: &mut Fetch<'_>, mut have: u64) -> Result<(), TransportError> {
        let desc = f.desc;
        let io = |e| TransportError::io(format!("cannot write blob {}", desc.digest()), e);
        // Each resumption must make progress; a body cut at the same
        // place again and again ends as an error after a few tries.
        let mut stalls = 0;
        // At least one request, unless a kept part is the whole blob (an
        // empty blob, or one that says it is, is still asked for).
        let mut ask = have == 0;
        while ask || have < desc.size() {
            ask = false;
            match self.fetch_once(f, have).await {
                Ok(n) => {
                    have = n;
                    if have == desc.size() {
                        break;
                    }
                    tracing::debug!(have, size = desc.size(), "blob body shorter than its size");
                }
                Err((_, Some(e))) => return Err(e),
                Err((n, None)) => {
                    if n == have {
                        stalls += 1;
                    } else {
                        stalls = 0;
                    }
                    have = n;
                }
            }
            f.pace
                .check(Instant::now(), true)
                .map_err(|s| f.c.too_slow(&fetch_what(desc), s))?;
            if stalls >= self.options.retry.max_attempts.max(1) {
                return Err(TransportError::Registry {
                    location: self.location(),
                    message: format!(
                        "fetch blob {}: the connection kept failing at byte {have} of {}; \
                         try again later",
                        desc.digest(),
                        desc.size()
                    ),
                    user: false,
                });
            }
            stalls += 1;
            f.file.flush().await.map_err(io)?;
        }
        Ok(())
    }

    /// Streams the blob into the file from byte `have` on; returns the
    /// new count. A cut connection returns what was written so far as
    /// `Err((have, error))`. A whole answer (not a range) that ends
    /// cleanly at another size than the blob's is the wrong content, not
    /// a cut to resume.
    async fn fetch_once(
        &self,
        f: &mut Fetch<'_>,
        mut have: u64,
    ) -> Result<u64, (u64, Option<TransportError>)> {
        let (c, desc, progress) = (f.c, f.desc, f.progress);
        let url = c.url("blobs", desc.digest().as_ref());
        let what = fetch_what(desc);
        let resp = c
            .send(RegistryOperation::Pull, &what, |h| {
                let r = h.get(&url);
                if have > 0 {
                    r.header(RANGE, format!("bytes={have}-"))
                } else {
                    r
                }
            })
            .await
            .map_err(|e| (have, Some(e)))?;
        f.pace.start_floor(Instant::now());
        let status = resp.status();
        if status == StatusCode::NOT_FOUND {
            return Err((
                have,
                Some(TransportError::Registry {
                    location: self.location(),
                    message: format!(
                        "blob {} is not in the repository, though a manifest names it",
                        desc.digest()
                    ),
                    user: true,
                }),
            ));
        }
        let range = resp
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let resumed = status == StatusCode::PARTIAL_CONTENT
            && range.as_deref().and_then(range_start) == Some(have);
        let cannot_write = |have, e| {
            let context = format!("cannot write blob {}", desc.digest());
            (have, Some(TransportError::io(context, e)))
        };
        if have > 0 && f.rewrite {
            // What the file holds came from an earlier pull: an answer that
            // does not continue it exactly is no reason to trust it.
            let other_size = range
                .as_deref()
                .and_then(range_total)
                .is_some_and(|t| t != desc.size());
            let unusable = status == StatusCode::RANGE_NOT_SATISFIABLE
                || (status == StatusCode::PARTIAL_CONTENT && (!resumed || other_size));
            if unusable || status == StatusCode::OK {
                tracing::debug!(%status, ?range, have, "the registry did not continue the blob: starting it again");
                f.file.restart().await.map_err(|e| cannot_write(have, e))?;
                have = 0;
                progress(0);
                if unusable {
                    // Asked again, without a range.
                    return Err((0, None));
                }
            }
        }
        if !status.is_success() {
            return Err((have, Some(c.status_error(&what, resp).await)));
        }
        // The registry sent the whole blob again: the bytes already in the
        // file are skipped, not written again. The file only grows (a pull
        // may be reading it as it does), and the digest checked at the end
        // covers it as written.
        let mut skip = if have > 0 && !resumed { have } else { 0 };
        // What this answer's body holds, when it is the whole blob: its
        // length, and (when it does not start where the file does) its
        // own digest, for the error if it is not the blob.
        let whole = status == StatusCode::OK
            && (resp.content_length().is_some() || chunked(resp.headers()));
        let mut body_len = 0u64;
        let mut body_hasher = (skip > 0).then(Sha256::new);
        if let Some(n) = resp.headers().get(CONTENT_LENGTH) {
            tracing::debug!(?n, have, "blob body");
        }
        let too_slow = |have, s| (have, Some(c.too_slow(&what, s)));
        let mut stream = resp.bytes_stream();
        loop {
            // When the body pauses, what came so far goes to the file,
            // where a pull reading the blob as it arrives finds it (a slow
            // registry does not hold back its first bytes); and the pace
            // is looked at, bytes or none.
            let wait = if f.file.pending() {
                IDLE_FLUSH.min(f.pace.tick())
            } else {
                f.pace.tick()
            };
            let next = match tokio::time::timeout(wait, stream.next()).await {
                Ok(next) => next,
                Err(_) => {
                    if f.file.pending() {
                        f.file.flush().await.map_err(|e| cannot_write(have, e))?;
                        progress(have);
                    }
                    f.pace
                        .check(Instant::now(), true)
                        .map_err(|s| too_slow(have, s))?;
                    continue;
                }
            };
            let Some(chunk) = next else { break };
            let mut chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %crate::report::error_chain(&e), have, "blob body cut short");
                    return Err((have, None));
                }
            };
            f.pace.add(chunk.len() as u64, Instant::now());
            f.pace
                .check(Instant::now(), true)
                .map_err(|s| too_slow(have, s))?;
            body_len += chunk.len() as u64;
            if let Some(h) = body_hasher.as_mut() {
                h.update(&chunk);
            }
            if skip > 0 {
                let n = chunk.len().min(usize::try_from(skip).unwrap_or(usize::MAX));
                let _ = chunk.split_to(n);
                skip -= n as u64;
                if chunk.is_empty() {
                    continue;
                }
            }
            if have + chunk.len() as u64 > desc.size() {
                return Err((
                    have,
                    Some(TransportError::Mismatch {
                        location: self.location(),
                        what: format!("size of {}", desc.digest()),
                        expected: desc.size().to_string(),
                        actual: format!("more than {}", desc.size()),
                    }),
                ));
            }
            let n = chunk.len() as u64;
            f.file
                .write(chunk)
                .await
                .map_err(|e| cannot_write(have, e))?;
            have += n;
            progress(have);
        }
        if whole && body_len != desc.size() {
            // The registry's whole answer, complete, and not this blob.
            let served = match body_hasher {
                Some(h) => h,
                None => f.file.flush().await.map_err(|e| cannot_write(have, e))?,
            }
            .finalize();
            let expected = digest_of(desc, &self.location()).map_err(|e| (have, Some(e)))?;
            let detail = format!(", {body_len} bytes where the manifest says {}", desc.size());
            return Err((
                have,
                Some(c.wrong_content(&expected, &Digest::from_sha(served.into()), detail)),
            ));
        }
        Ok(have)
    }
}

/// One blob's download under way: what each request of it shares.
struct Fetch<'a> {
    c: &'a Conn,
    desc: &'a Descriptor,
    /// The blob's file, hashed as it is written.
    file: BlobSink,
    /// No one reads the file as it grows (it held a kept prefix), so an
    /// answer that cannot continue it starts it again.
    rewrite: bool,
    progress: Progress<'a>,
    pace: &'a mut Pace,
}

/// Hashes the first `len` bytes of `path` into `hasher`, a buffer at a
/// time; returns how many there were (fewer when the file is shorter).
async fn hash_prefix(path: &Path, len: u64, hasher: &mut Sha256) -> std::io::Result<u64> {
    let mut f = tokio::fs::File::open(path).await?;
    let mut buf = vec![0u8; CHUNK];
    let mut done = 0u64;
    while done < len {
        let want = usize::try_from(len - done)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = f.read(&mut buf[..want]).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        done += n as u64;
    }
    Ok(done)
}
