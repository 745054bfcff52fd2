//! Release downloads, on [`transport::http`](crate::transport::http): the
//! same client as registries (the configuration's timeouts, `--cert-dir`
//! and `certs.d`, proxies, retries), streamed to a temporary file beside
//! the destination, hashed on the way, checked against the MANIFEST's
//! sha256, fsynced, then renamed into place. A download that fails or
//! does not match leaves nothing behind.
//!
//! [`download_streaming`] also hands the bytes, as they arrive, to a
//! consumer on the caller's thread (the extraction of a set), so that
//! nothing waits for the whole file; the verdict on the file still comes
//! from its whole sha256, and the caller keeps what it made only then.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::ReleaseError;
use crate::digest::Digest;
use crate::pipe::{pipe, PipeReader, PipeWriter};
use crate::report::Reporter;
use crate::transport::block_on;
use crate::transport::http::{Http, HttpError, Limits, Watch};

/// Caps on what is held in memory: a MANIFEST is a few hundred bytes.
const MAX_SMALL: u64 = 1 << 20;

/// A small text file (a MANIFEST), whole.
pub(crate) fn get_text(http: &Http, url: &str) -> Result<String, ReleaseError> {
    let bytes = block_on(http.get_bytes(url, MAX_SMALL))?;
    String::from_utf8(bytes)
        .map_err(|_| ReleaseError::Invalid(format!("{url}: the file is not text")))
}

/// Hands what arrives to the consumer's pipe (while it reads) and reports
/// progress every MiB.
struct ToPipe<'a> {
    tx: Option<PipeWriter>,
    url: &'a str,
    reporter: &'a dyn Reporter,
    label: String,
    done: u64,
    reported: u64,
}

impl Watch for ToPipe<'_> {
    fn started(&mut self, length: Option<u64>) {
        self.reporter.transfer_start(self.url, &self.label, length);
    }

    fn bytes(&mut self, chunk: &[u8]) {
        self.done += chunk.len() as u64;
        if self.done - self.reported >= 1 << 20 {
            self.reported = self.done;
            self.reporter.transfer_progress(self.url, self.done);
        }
        // Sent at once: the decoder should not wait for a full chunk while
        // the network pauses.
        let sent = |tx: &mut PipeWriter| tx.write_all(chunk).and_then(|()| tx.flush());
        if self.tx.as_mut().is_some_and(|tx| sent(tx).is_err()) {
            self.tx = None; // the consumer is done; the hash still needs the rest
        }
    }
}

/// Downloads `url` to `dest` if its sha256 is `expected` (otherwise
/// nothing is written and the error names both digests), and meanwhile
/// `consume` reads the bytes as they arrive (on this thread; the download
/// runs on another one). Returns the size and what `consume` returned,
/// once the whole file is in and its sha256 is `expected`.
///
/// The download always runs to the end, even when `consume` stops early
/// or fails: a set that does not match the MANIFEST is reported as that
/// ([`ReleaseError::Mismatch`]), not as the garbage it made the consumer
/// choke on; a transfer that breaks off (past its retries) is reported as
/// that (and `consume` sees an error where the bytes stop, never a clean
/// end). Either way `dest` is not written, and what `consume` made is the
/// caller's to throw away.
pub(crate) fn download_streaming<T>(
    http: &Http,
    url: &str,
    dest: &Path,
    expected: &Digest,
    reporter: &dyn Reporter,
    consume: impl FnOnce(PipeReader) -> T,
) -> Result<(u64, T), ReleaseError> {
    let (tx, rx) = pipe();
    let name = url.rsplit('/').next().unwrap_or(url);
    let mut watch = ToPipe {
        tx: Some(tx),
        url,
        reporter,
        label: format!("downloading {name}"),
        done: 0,
        reported: 0,
    };
    let (downloaded, consumed) = std::thread::scope(|s| {
        let downloader = s.spawn(|| {
            // Continued from what a failed or killed download kept
            // (`.partial-<sha256>` beside `dest`); checked whole.
            let got = block_on(http.get_to_file_resuming(
                url,
                dest,
                expected.hex(),
                Some(expected),
                Limits::default(),
                &mut watch,
            ));
            match (&got, watch.tx.take()) {
                // A file that does not match came whole: a clean end.
                (Ok(_) | Err(HttpError::Mismatch { .. }), _) | (_, None) => {}
                (Err(e), Some(tx)) => tx.fail(io::Error::other(format!("{e}"))),
            }
            got
        });
        let consumed = consume(rx);
        let downloaded = downloader.join().unwrap_or_else(|_| {
            Err(HttpError::Consumer {
                url: url.to_string(),
                message: "the download thread panicked".into(),
            })
        });
        (downloaded, consumed)
    });
    if watch.done != watch.reported {
        reporter.transfer_progress(url, watch.done);
    }
    reporter.transfer_done(url, false);
    match downloaded {
        Ok(got) => Ok((got.size, consumed)),
        Err(HttpError::Mismatch { expected, got, .. }) => Err(ReleaseError::Mismatch {
            what: url.to_string(),
            expected,
            got,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Writes `text` to `dest` atomically (temp file, fsync, rename).
pub(crate) fn write_atomic(dest: &Path, text: &[u8]) -> Result<(), ReleaseError> {
    let dir = dest.parent().expect("a cache file has a directory");
    fs::create_dir_all(dir).map_err(ReleaseError::io(dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".write-")
        .tempfile_in(dir)
        .map_err(ReleaseError::io(dir))?;
    tmp.write_all(text).map_err(ReleaseError::io(dest))?;
    tmp.as_file().sync_all().map_err(ReleaseError::io(dest))?;
    tmp.persist(dest)
        .map_err(|e| ReleaseError::io(dest)(e.error))?;
    Ok(())
}
