//! Downloads over HTTP(S), streamed to a temporary file beside the
//! destination, hashed on the way, checked against the sha256 the caller
//! expects, fsynced, then renamed into place. A download that fails or
//! does not match leaves nothing behind.
//!
//! [`Http::download_streaming`] also hands the bytes, as they arrive, to a
//! consumer on the caller's thread (the extraction of a set), so that
//! nothing waits for the whole file; the verdict on the file still comes
//! from its whole sha256, and the caller keeps what it made only then.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use super::ReleaseError;
use crate::digest::{Digest, HashingWriter};
use crate::pipe::{pipe, PipeReader, PipeWriter};
use crate::report::{error_chain, Reporter};

/// Caps on what is held in memory: a MANIFEST is a few hundred bytes.
const MAX_SMALL: u64 = 1 << 20;

pub(crate) struct Http {
    client: reqwest::blocking::Client,
}

impl Http {
    pub(crate) fn new() -> Result<Http, ReleaseError> {
        // One TLS stack for the whole program: rustls with ring (aws-lc,
        // reqwest's default provider, does not build for FreeBSD here).
        // Installing fails harmlessly when a provider is already set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::blocking::Client::builder()
            .user_agent(concat!("jbuild/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            // The blocking client applies this to each read of the body,
            // not to the whole transfer: a ~200 MB base.txz on a slow line
            // is fine, a stalled one is given up.
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| ReleaseError::Http {
                url: String::new(),
                message: e.to_string(),
            })?;
        Ok(Http { client })
    }

    fn get(&self, url: &str) -> Result<reqwest::blocking::Response, ReleaseError> {
        let err = |message: String| ReleaseError::Http {
            url: url.to_string(),
            message,
        };
        let resp = self
            .client
            .get(url)
            .send()
            .map_err(|e| err(error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(err(format!("the server answered {}", resp.status())));
        }
        Ok(resp)
    }

    /// A small text file (a MANIFEST), whole.
    pub(crate) fn get_text(&self, url: &str) -> Result<String, ReleaseError> {
        let resp = self.get(url)?;
        let mut buf = Vec::new();
        resp.take(MAX_SMALL + 1)
            .read_to_end(&mut buf)
            .map_err(|e| ReleaseError::Http {
                url: url.to_string(),
                message: e.to_string(),
            })?;
        if buf.len() as u64 > MAX_SMALL {
            return Err(ReleaseError::Http {
                url: url.to_string(),
                message: "the file is larger than a MANIFEST can be (1 MiB)".into(),
            });
        }
        String::from_utf8(buf).map_err(|_| ReleaseError::Http {
            url: url.to_string(),
            message: "the file is not text".into(),
        })
    }
}

impl Http {
    /// Downloads `url` to `dest` if its sha256 is `expected` (otherwise
    /// nothing is written and the error names both digests), and
    /// meanwhile `consume` reads the bytes as they arrive (on this thread;
    /// the download runs on another one). Returns the size and what `consume` returned, once the whole
    /// file is in and its sha256 is `expected`.
    ///
    /// The download always runs to the end, even when `consume` stops
    /// early or fails: a set that does not match the MANIFEST is reported
    /// as that ([`ReleaseError::Mismatch`]), not as the garbage it made the
    /// consumer choke on; a transfer that breaks off is reported as that
    /// (and `consume` sees an error where the bytes stop, never a clean
    /// end). Either way `dest` is not written, and what `consume` made
    /// is the caller's to throw away.
    pub(crate) fn download_streaming<T>(
        &self,
        url: &str,
        dest: &Path,
        expected: &Digest,
        reporter: &dyn Reporter,
        consume: impl FnOnce(PipeReader) -> T,
    ) -> Result<(u64, T), ReleaseError> {
        let dir = dest.parent().expect("a cache file has a directory");
        fs::create_dir_all(dir).map_err(ReleaseError::io(dir))?;
        let resp = self.get(url)?;
        let name = url.rsplit('/').next().unwrap_or(url);
        reporter.transfer_start(url, &format!("downloading {name}"), resp.content_length());
        let tmp = tempfile::Builder::new()
            .prefix(".download-")
            .tempfile_in(dir)
            .map_err(ReleaseError::io(dir))?;
        let (tx, rx) = pipe();
        let (downloaded, consumed) = std::thread::scope(|s| {
            let downloader = s.spawn(move || pump(url, resp, tmp, dest, tx, reporter));
            let consumed = consume(rx);
            let downloaded = downloader.join().unwrap_or_else(|_| {
                Err(ReleaseError::Invalid("the download thread panicked".into()))
            });
            (downloaded, consumed)
        });
        reporter.transfer_done(url, false);
        let (got, size, tmp) = downloaded?;
        if &got != expected {
            return Err(ReleaseError::Mismatch {
                what: url.to_string(),
                expected: expected.clone(),
                got,
            });
        }
        tmp.as_file().sync_all().map_err(ReleaseError::io(dest))?;
        tmp.persist(dest)
            .map_err(|e| ReleaseError::io(dest)(e.error))?;
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok((size, consumed))
    }
}

/// The download thread of [`Http::download_streaming`]: every byte of
/// `resp` into the hash, the temporary file and (while someone reads) the
/// pipe.
fn pump(
    url: &str,
    resp: reqwest::blocking::Response,
    tmp: tempfile::NamedTempFile,
    dest: &Path,
    tx: PipeWriter,
    reporter: &dyn Reporter,
) -> Result<(Digest, u64, tempfile::NamedTempFile), ReleaseError> {
    let mut w = HashingWriter::new(io::BufWriter::with_capacity(1 << 20, tmp));
    let mut progress = Progress {
        inner: resp,
        done: 0,
        reported: 0,
        report: |n| reporter.transfer_progress(url, n),
    };
    let mut tx = Some(tx);
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match progress.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let message = format!("the transfer broke off: {e}");
                if let Some(tx) = tx {
                    tx.fail(io::Error::other(message.clone()));
                }
                return Err(ReleaseError::Http {
                    url: url.to_string(),
                    message,
                });
            }
        };
        if let Err(e) = w.write_all(&buf[..n]) {
            if let Some(tx) = tx {
                tx.fail(io::Error::other(format!("cannot keep the download: {e}")));
            }
            return Err(ReleaseError::io(dest)(e));
        }
        // Sent at once: the decoder should not wait for a full chunk
        // while the network pauses.
        let sent = |tx: &mut PipeWriter| tx.write_all(&buf[..n]).and_then(|()| tx.flush());
        if tx.as_mut().is_some_and(|tx| sent(tx).is_err()) {
            tx = None; // the consumer is done; the hash still needs the rest
        }
    }
    drop(tx);
    let (got, size, buf) = w.finish();
    let tmp = buf
        .into_inner()
        .map_err(|e| ReleaseError::io(dest)(e.into_error()))?;
    Ok((got, size, tmp))
}

/// Counts what is read and reports it every MiB.
struct Progress<R, F> {
    inner: R,
    done: u64,
    reported: u64,
    report: F,
}

impl<R: Read, F: FnMut(u64)> Read for Progress<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        if self.done - self.reported >= 1 << 20 || (n == 0 && self.done != self.reported) {
            self.reported = self.done;
            (self.report)(self.done);
        }
        Ok(n)
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

impl Http {
    /// What identifies the current version of the file at `url` without
    /// downloading it: its `ETag`, else `Last-Modified` and length. `None`
    /// when the server does not have it (404).
    pub(crate) fn head_identity(&self, url: &str) -> Result<Option<String>, ReleaseError> {
        let err = |message: String| ReleaseError::Http {
            url: url.to_string(),
            message,
        };
        let resp = self
            .client
            .head(url)
            .send()
            .map_err(|e| err(error_chain(&e)))?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(err(format!("the server answered {}", resp.status())));
        }
        let h = resp.headers();
        let get = |name: reqwest::header::HeaderName| {
            h.get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        if let Some(etag) = get(reqwest::header::ETAG) {
            return Ok(Some(format!("etag {etag}")));
        }
        match (
            get(reqwest::header::LAST_MODIFIED),
            get(reqwest::header::CONTENT_LENGTH),
        ) {
            (None, None) => Err(err(
                "the server gives neither ETag nor Last-Modified, so a change of the catalogue cannot be seen; use --pkg-offline".into(),
            )),
            (m, l) => Ok(Some(format!(
                "modified {} length {}",
                m.unwrap_or_default(),
                l.unwrap_or_default()
            ))),
        }
    }
}
