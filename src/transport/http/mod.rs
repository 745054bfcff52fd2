//! Plain downloads — release sets and MANIFESTs, pkgbase and package
//! catalogues, packages, `ADD <url>` — over the same HTTP stack as the
//! registries: the client of [`client_for`], so the configuration's
//! `[registries] timeout_secs`, `--cert-dir` and docker's `certs.d`,
//! `--tls-verify=false`, the environment's proxies (`HTTPS_PROXY`,
//! `HTTP_PROXY`, `NO_PROXY`) and the retry rules of [`RetryPolicy`] hold
//! for every byte jbuild fetches.
//!
//! # The API
//!
//! An [`Http`] is made once from the [`RegistryOptions`] a command
//! resolved, and shared (it keeps one client per server):
//!
//! - [`Http::get_to_file`] streams `url` into a temporary file beside
//!   `dest`, hashes it on the way, checks the sha256 when one is expected,
//!   fsyncs and renames it into place: a download that fails or does not
//!   match leaves nothing at `dest`. [`Http::get_to_file_watched`] also
//!   hands every byte, in order and once, to a [`Watch`] (progress, or a
//!   consumer that extracts as the bytes arrive).
//! - [`Http::get_bytes`] reads a small body (a MANIFEST, a `meta.conf`)
//!   whole, refused past `max` bytes.
//! - [`Http::head`] asks what identifies the current version of a file.
//!
//! `file://` URLs are read from the local file system the same way (no
//! retries: a local file does not come back). All are async; a synchronous
//! caller enters the process's runtime with [`block_on`](super::block_on).
//!
//! # Retries
//!
//! A request that gets no answer (refused, reset, silent past the
//! timeout) or a `408`, `429` or `5xx` is tried again after the waits of
//! [`RetryPolicy`]; a body that breaks off is taken up where it stopped
//! with a `Range` request (and when the server ignores the range, the
//! bytes already had are skipped), so a [`Watch`] never sees a byte twice.
//! TLS failures and other answers are final.

mod error;
mod fetch;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

pub use error::HttpError;

use crate::digest::Digest;
use crate::store::{stage_partial, StagedBlob};
use crate::transport::registry::{client_for, RegistryOptions, RetryPolicy};

/// The names of partial downloads ([`Http::get_to_file_resuming`]) start
/// with this: a dot, so a listing of the cache passes over them.
pub const PARTIAL_PREFIX: &str = ".partial-";

/// Bounds on one download.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// The most bytes taken; more is [`HttpError::TooLarge`] (checked
    /// against `Content-Length` before the body, and as it arrives).
    pub max_bytes: Option<u64>,
}

impl Limits {
    /// At most `max` bytes.
    pub fn at_most(max: u64) -> Limits {
        Limits {
            max_bytes: Some(max),
        }
    }
}

/// What a download kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub size: u64,
    pub sha256: Digest,
    /// Bytes of it an earlier, unfinished download had kept
    /// ([`Http::get_to_file_resuming`]); checked with the rest.
    pub resumed: u64,
}

/// What identifies the current version of a file, from a HEAD.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub length: Option<u64>,
}

/// Told about a download as it goes.
pub trait Watch: Send {
    /// The body starts; `length` as the server announced it.
    fn started(&mut self, _length: Option<u64>) {}
    /// The next bytes of the file, in order, each byte once (a transfer
    /// taken up again does not repeat them).
    fn bytes(&mut self, _chunk: &[u8]) {}
}

/// A [`Watch`] that wants to know nothing.
pub struct Unwatched;
impl Watch for Unwatched {}

/// Downloads over HTTP(S) and from `file://` (see the module's
/// documentation).
pub struct Http {
    options: RegistryOptions,
    /// One client per server (`host[:port]`): its CA certificates follow
    /// docker's `certs.d/HOST:PORT/`.
    clients: Mutex<HashMap<String, reqwest::Client>>,
}

impl Default for Http {
    /// The defaults of [`RegistryOptions`] (not the configuration file's:
    /// use [`Http::from_settings`] or [`Http::new`] where there is one).
    fn default() -> Http {
        Http::new(RegistryOptions::default())
    }
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("timeout", &self.options.timeout)
            .field("cert_dir", &self.options.cert_dir)
            .field("tls_verify", &self.options.tls_verify)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// Downloads reached as `options` says (timeouts, certificates, TLS
    /// checks, retries).
    pub fn new(options: RegistryOptions) -> Http {
        Http {
            options,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// With the configuration file's options (and the environment's).
    pub fn from_settings(settings: &crate::config::Settings) -> Http {
        Http::new(RegistryOptions::from_settings(settings))
    }

    pub fn options(&self) -> &RegistryOptions {
        &self.options
    }

    fn retry(&self) -> &RetryPolicy {
        &self.options.retry
    }

    /// The client for `url`'s server, made at its first use.
    fn client(&self, url: &reqwest::Url) -> Result<reqwest::Client, HttpError> {
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => {
                return Err(HttpError::Url {
                    url: url.to_string(),
                    reason: "it names no host".into(),
                })
            }
        };
        let mut clients = self.clients.lock().expect("not poisoned");
        if let Some(c) = clients.get(&host) {
            return Ok(c.clone());
        }
        let c = client_for(&host, &self.options)?;
        clients.insert(host, c.clone());
        Ok(c)
    }

    /// Downloads `url` to `dest` (see the module's documentation). With
    /// `expected`, a file whose sha256 differs is not kept
    /// ([`HttpError::Mismatch`]).
    pub async fn get_to_file(
        &self,
        url: &str,
        dest: &Path,
        expected: Option<&Digest>,
        limits: Limits,
    ) -> Result<Fetched, HttpError> {
        self.get_to_file_watched(url, dest, expected, limits, &mut Unwatched)
            .await
    }

    /// [`Http::get_to_file`], telling `watch` every byte as it arrives.
    /// `watch` may see a whole body that is then refused: what it made of
    /// it is the caller's to throw away unless this returns `Ok`.
    pub async fn get_to_file_watched(
        &self,
        url: &str,
        dest: &Path,
        expected: Option<&Digest>,
        limits: Limits,
        watch: &mut dyn Watch,
    ) -> Result<Fetched, HttpError> {
        self.download(url, dest, None, expected, limits, watch, true)
            .await
    }

    /// [`Http::get_to_file_watched`] that keeps what arrived when it
    /// fails or is killed, and continues from it the next time: the bytes
    /// go to `.partial-KEY` beside `dest` (`key` names the content, e.g.
    /// its checksum's hex: letters, digits, `-` and `_`), kept within the
    /// options' [`PartialBounds`](crate::store::PartialBounds) and asked
    /// for from where they stop with `Range`. The kept bytes are handed to
    /// `watch` (read from the file) once the server has agreed to continue
    /// them, so `watch` still sees every byte once, in order; a server
    /// that sends the whole file, or refuses the range, starts it again
    /// before `watch` saw any. Nothing kept is trusted: the whole is
    /// checked against `expected` (or by the caller, with `watch`), and a
    /// file found wrong is not kept ([`Fetched::resumed`] says whether
    /// part of it came from before, so the caller may fetch it again).
    pub async fn get_to_file_resuming(
        &self,
        url: &str,
        dest: &Path,
        key: &str,
        expected: Option<&Digest>,
        limits: Limits,
        watch: &mut dyn Watch,
    ) -> Result<Fetched, HttpError> {
        self.download(url, dest, Some(key), expected, limits, watch, true)
            .await
    }

    /// [`Http::get_to_file_resuming`] without its two syncs (the file's
    /// and its directory's): `dest` is written and renamed, not yet
    /// durable. For a caller that downloads many files and makes them
    /// durable at once (one `syncfs`) before it names them anywhere
    /// durable: the package cache (`pkg::fetch`), where three syncs per
    /// package were most of the fetch's time on a journaled disk.
    pub async fn get_to_file_resuming_unsynced(
        &self,
        url: &str,
        dest: &Path,
        key: &str,
        limits: Limits,
        watch: &mut dyn Watch,
    ) -> Result<Fetched, HttpError> {
        self.download(url, dest, Some(key), None, limits, watch, false)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn download(
        &self,
        url: &str,
        dest: &Path,
        key: Option<&str>,
        expected: Option<&Digest>,
        limits: Limits,
        watch: &mut dyn Watch,
        synced: bool,
    ) -> Result<Fetched, HttpError> {
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| HttpError::Write { path, source }
        };
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(write_err(dir))?;
        let key = key.filter(|k| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !url.starts_with("file:")
        });
        let partial = match key {
            Some(k) => {
                let name = format!("{PARTIAL_PREFIX}{k}");
                stage_partial(
                    dir,
                    PARTIAL_PREFIX,
                    &name,
                    limits.max_bytes,
                    self.options.partials,
                )
                .map_err(write_err(&dir.join(name)))?
            }
            None => None,
        };
        let staged = match partial {
            Some(p) => p,
            None => StagedBlob::temporary(
                tempfile::Builder::new()
                    .prefix(".download-")
                    .tempfile_in(dir)
                    .map_err(write_err(dir))?,
            ),
        };
        let kept = staged.kept();
        let file = staged.as_file().try_clone().map_err(write_err(dest))?;
        let mut sink = fetch::FileSink::new(tokio::fs::File::from_std(file), dest);
        sink.seek(kept).await?;
        let resume = fetch::Resume {
            path: staged.path().to_path_buf(),
            kept,
        };
        let got = match fetch::fetch(self, url, limits, &mut sink, watch, resume).await {
            Ok(got) => got,
            Err(e) => {
                // Not worth keeping: more than allowed, or a file that
                // could not be written (a full disk is not filled further).
                if matches!(e, HttpError::TooLarge { .. } | HttpError::Write { .. }) {
                    staged.discard();
                } else {
                    // What came is in the file, for a later run to continue.
                    sink.flush().await;
                }
                return Err(e);
            }
        };
        sink.finish(synced).await?;
        if let Some(want) = expected {
            if &got.sha256 != want {
                staged.discard();
                return Err(HttpError::Mismatch {
                    url: url.to_string(),
                    expected: want.clone(),
                    got: got.sha256,
                });
            }
        }
        // `sink.finish` synced the file already when `synced`; unsynced,
        // the caller makes it durable before naming it anywhere durable.
        staged
            .persist_synced(dest, false)
            .map_err(write_err(dest))?;
        if synced {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(got)
    }

    /// The body of `url`, whole, if it is at most `max` bytes.
    pub async fn get_bytes(&self, url: &str, max: u64) -> Result<Vec<u8>, HttpError> {
        let mut sink = fetch::MemSink::default();
        let limits = Limits::at_most(max);
        fetch::fetch(
            self,
            url,
            limits,
            &mut sink,
            &mut Unwatched,
            Default::default(),
        )
        .await?;
        Ok(sink.0)
    }

    /// What identifies the current version of `url` (`None`: the server
    /// has no such file). For `file://`, the length and modification time.
    pub async fn head(&self, url: &str) -> Result<Option<Head>, HttpError> {
        fetch::head(self, url).await
    }
}

#[cfg(test)]
mod resume_tests;
#[cfg(test)]
mod tests;
