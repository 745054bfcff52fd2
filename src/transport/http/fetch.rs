//! The transfer itself: tries, the `Range` that takes a cut body up
//! again, the bounds, and `file://`.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use futures_util::StreamExt;
use reqwest::header::{CONTENT_LENGTH, CONTENT_RANGE, ETAG, LAST_MODIFIED, RANGE, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Fetched, Head, Http, HttpError, Limits, Watch};
use crate::digest::Digest;
use crate::transport::registry::retry::{parse_retry_after, transient_status, Attempt};
use crate::transport::registry::{is_transient, range_start, tls_error};

/// Where the bytes go.
pub(super) trait Sink: Send {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), HttpError>;
    /// Forgets every byte written: the body starts again.
    async fn reset(&mut self) -> Result<(), HttpError>;
}

/// What an earlier download kept in the file the bytes go to: its first
/// `kept` bytes, at `path` (read again to be hashed and watched).
#[derive(Debug, Default)]
pub(super) struct Resume {
    pub path: PathBuf,
    pub kept: u64,
}

/// Into a file (the temporary one of [`Http::get_to_file`]).
pub(super) struct FileSink {
    file: tokio::io::BufWriter<tokio::fs::File>,
    path: PathBuf,
}

impl FileSink {
    pub(super) fn new(file: tokio::fs::File, path: &Path) -> FileSink {
        FileSink {
            file: tokio::io::BufWriter::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
        }
    }

    /// Writes from byte `at` on (after a kept prefix).
    pub(super) async fn seek(&mut self, at: u64) -> Result<(), HttpError> {
        use tokio::io::AsyncSeekExt;
        let path = self.path.clone();
        self.file
            .seek(std::io::SeekFrom::Start(at))
            .await
            .map(drop)
            .map_err(|source| HttpError::Write { path, source })
    }

    /// What is buffered, written (best effort: for a file kept unfinished).
    pub(super) async fn flush(&mut self) {
        let _ = self.file.flush().await;
    }

    /// Flushed, and fsynced when `synced`: ready to be renamed into place.
    pub(super) async fn finish(mut self, synced: bool) -> Result<(), HttpError> {
        let path = self.path.clone();
        let failed = |source| HttpError::Write { path, source };
        match self.file.flush().await {
            Ok(()) if synced => self.file.get_mut().sync_all().await.map_err(failed),
            Ok(()) => Ok(()),
            Err(e) => Err(failed(e)),
        }
    }
}

impl Sink for FileSink {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), HttpError> {
        self.file
            .write_all(chunk)
            .await
            .map_err(|source| HttpError::Write {
                path: self.path.clone(),
                source,
            })
    }

    async fn reset(&mut self) -> Result<(), HttpError> {
        let failed = |source| HttpError::Write {
            path: self.path.clone(),
            source,
        };
        self.file.flush().await.map_err(failed)?;
        self.file.get_mut().set_len(0).await.map_err(failed)?;
        self.seek(0).await
    }
}

/// Into memory (bounded by the caller's [`Limits`]).
#[derive(Default)]
pub(super) struct MemSink(pub Vec<u8>);

impl Sink for MemSink {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), HttpError> {
        self.0.extend_from_slice(chunk);
        Ok(())
    }

    async fn reset(&mut self) -> Result<(), HttpError> {
        self.0.clear();
        Ok(())
    }
}

/// Why one try did not bring the whole body.
enum Try {
    /// Worth another try, perhaps after the wait the server asked for.
    Again {
        error: HttpError,
        retry_after: Option<std::time::Duration>,
    },
    Final(HttpError),
}

impl From<HttpError> for Try {
    fn from(e: HttpError) -> Try {
        Try::Final(e)
    }
}

/// What has arrived so far, across tries.
struct Progress<'a, S> {
    sink: &'a mut S,
    watch: &'a mut dyn Watch,
    hasher: Sha256,
    have: u64,
    started: bool,
    max: Option<u64>,
    url: &'a str,
    /// A kept prefix not yet hashed nor shown to the watch: done once the
    /// server agrees to continue it, dropped when it does not.
    replay: Option<PathBuf>,
    /// Bytes from an earlier download in what was fetched.
    resumed: u64,
}

impl<S: Sink> Progress<'_, S> {
    fn start(&mut self, length: Option<u64>) -> Result<(), HttpError> {
        if let (Some(max), Some(len)) = (self.max, length) {
            if len > max {
                return Err(self.too_large(max));
            }
        }
        if !self.started {
            self.started = true;
            self.watch.started(length);
        }
        Ok(())
    }

    async fn take(&mut self, chunk: &[u8]) -> Result<(), HttpError> {
        if let Some(max) = self.max {
            if self.have + chunk.len() as u64 > max {
                return Err(self.too_large(max));
            }
        }
        self.hasher.update(chunk);
        self.sink.write(chunk).await?;
        self.watch.bytes(chunk);
        self.have += chunk.len() as u64;
        Ok(())
    }

    /// The kept prefix, hashed and shown to the watch (a buffer at a time).
    async fn replay(&mut self) -> Result<(), HttpError> {
        let Some(path) = self.replay.take() else {
            return Ok(());
        };
        let failed = |source| HttpError::Read {
            path: path.clone(),
            source,
        };
        let mut f = tokio::fs::File::open(&path).await.map_err(failed)?;
        let mut buf = vec![0u8; 256 << 10];
        let mut done = 0;
        while done < self.have {
            let want = usize::try_from(self.have - done)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            let n = f.read(&mut buf[..want]).await.map_err(failed)?;
            if n == 0 {
                return Err(failed(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.hasher.update(&buf[..n]);
            self.watch.bytes(&buf[..n]);
            done += n as u64;
        }
        self.resumed = self.have;
        Ok(())
    }

    /// The kept prefix is dropped: the body starts again at byte 0.
    async fn forget(&mut self) -> Result<(), HttpError> {
        self.replay = None;
        self.have = 0;
        self.sink.reset().await
    }

    fn too_large(&self, max: u64) -> HttpError {
        HttpError::TooLarge {
            url: self.url.to_string(),
            max,
        }
    }
}

fn parse(url: &str) -> Result<Url, HttpError> {
    let parsed = Url::parse(url).map_err(|e| HttpError::Url {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    match parsed.scheme() {
        "http" | "https" | "file" => Ok(parsed),
        other => Err(HttpError::Url {
            url: url.to_string(),
            reason: format!("jbuild fetches http://, https:// and file:// URLs, not {other}:"),
        }),
    }
}

/// The local path of a `file://` URL.
fn local_path(url: &Url) -> Result<PathBuf, HttpError> {
    url.to_file_path().map_err(|()| HttpError::Url {
        url: url.to_string(),
        reason: "not a local absolute path".into(),
    })
}

/// The whole body of `url` into `sink` (see the module's documentation
/// of [`super`]).
pub(super) async fn fetch<S: Sink>(
    http: &Http,
    url: &str,
    limits: Limits,
    sink: &mut S,
    watch: &mut dyn Watch,
    resume: Resume,
) -> Result<Fetched, HttpError> {
    let parsed = parse(url)?;
    let mut p = Progress {
        sink,
        watch,
        hasher: Sha256::new(),
        have: resume.kept,
        started: false,
        max: limits.max_bytes,
        url,
        replay: (resume.kept > 0).then_some(resume.path),
        resumed: 0,
    };
    if parsed.scheme() == "file" {
        p.forget().await?;
        read_local(&local_path(&parsed)?, &mut p).await?;
    } else {
        let client = http.client(&parsed)?;
        let first = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (error, retry_after) = match one_try(&client, http, &mut p).await {
                Ok(()) => break,
                Err(Try::Final(e)) => return Err(e),
                Err(Try::Again { error, retry_after }) => (error, retry_after),
            };
            let outcome = Attempt::Transient { retry_after };
            let next =
                http.retry()
                    .next_delay(attempt, outcome, first, Instant::now(), fastrand::f64());
            match next {
                Some(wait) => {
                    tracing::debug!(url, attempt, error = %error, "trying the download again");
                    tokio::time::sleep(wait).await;
                }
                None => return Err(error),
            }
        }
    }
    Ok(Fetched {
        size: p.have,
        sha256: Digest::from_sha(p.hasher.finalize().into()),
        resumed: p.resumed,
    })
}

/// As the error the user sees, and whether another try may go better.
fn unanswered(http: &Http, url: &str, e: reqwest::Error) -> Try {
    let url = url.to_string();
    if tls_error(&e).is_some() {
        let host = Url::parse(&url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| u.port().map_or(h.to_string(), |p| format!("{h}:{p}")))
            })
            .unwrap_or_default();
        return Try::Final(HttpError::Tls {
            url,
            host,
            source: e,
        });
    }
    let again = is_transient(&e);
    let error = if e.is_timeout() {
        HttpError::TimedOut {
            url,
            after: http.options.timeout,
            source: e,
        }
    } else if e.is_connect() {
        HttpError::Unreachable { url, source: e }
    } else {
        HttpError::BrokeOff { url, source: e }
    };
    match again {
        true => Try::Again {
            error,
            retry_after: None,
        },
        false => Try::Final(error),
    }
}

/// One GET, from where the last one stopped.
async fn one_try<S: Sink>(
    client: &reqwest::Client,
    http: &Http,
    p: &mut Progress<'_, S>,
) -> Result<(), Try> {
    let url = p.url;
    let mut req = client.get(url);
    if p.have > 0 {
        req = req.header(RANGE, format!("bytes={}-", p.have));
    }
    let resp = req.send().await.map_err(|e| unanswered(http, url, e))?;
    let status = resp.status();
    let failed = |status: StatusCode| HttpError::Status {
        url: url.to_string(),
        status: status.as_u16(),
    };
    let mut skip = 0;
    let length = match status {
        StatusCode::NOT_FOUND => {
            return Err(Try::Final(HttpError::NotFound {
                url: url.to_string(),
            }))
        }
        s if transient_status(s.as_u16()) => {
            let retry_after = resp
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            return Err(Try::Again {
                error: failed(s),
                retry_after,
            });
        }
        StatusCode::RANGE_NOT_SATISFIABLE if p.replay.is_some() => {
            // The kept part is not a part of this file (it is shorter, or
            // changed): asked again, from its first byte.
            p.forget().await?;
            return Err(Try::Again {
                error: failed(status),
                retry_after: None,
            });
        }
        StatusCode::PARTIAL_CONTENT if p.have > 0 => {
            let start = resp
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(range_start);
            if start != Some(p.have) && p.replay.is_some() {
                p.forget().await?;
                return Err(Try::Again {
                    error: HttpError::Protocol {
                        url: url.to_string(),
                        reason: format!(
                            "asked for the bytes from {}, the server sent a range starting at {start:?}",
                            p.have
                        ),
                    },
                    retry_after: None,
                });
            }
            if start != Some(p.have) {
                return Err(Try::Final(HttpError::Protocol {
                    url: url.to_string(),
                    reason: format!(
                        "asked for the bytes from {}, the server sent a range starting at {start:?}",
                        p.have
                    ),
                }));
            }
            resp.content_length().map(|n| n + p.have)
        }
        StatusCode::OK => {
            if p.replay.is_some() {
                // No ranges here, and the kept part not yet used: the
                // file starts again with this body.
                p.forget().await?;
            }
            // The whole body again (no ranges here): what came is skipped.
            skip = p.have;
            resp.content_length()
        }
        s => return Err(Try::Final(failed(s))),
    };
    p.start(length)?;
    // The server continues the kept part: it counts now.
    p.replay().await?;
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| unanswered(http, url, e))?;
        let mut c = &chunk[..];
        if skip > 0 {
            let n = (skip.min(c.len() as u64)) as usize;
            c = &c[n..];
            skip -= n as u64;
        }
        if !c.is_empty() {
            p.take(c).await?;
        }
    }
    if skip > 0 {
        return Err(Try::Final(HttpError::Protocol {
            url: url.to_string(),
            reason: "the file is shorter than the part already received".into(),
        }));
    }
    Ok(())
}

/// A `file://` source, read in chunks.
async fn read_local<S: Sink>(path: &Path, p: &mut Progress<'_, S>) -> Result<(), HttpError> {
    let failed = |source| HttpError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut f = tokio::fs::File::open(path).await.map_err(failed)?;
    let len = f.metadata().await.map_err(failed)?.len();
    p.start(Some(len))?;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = f.read(&mut buf).await.map_err(failed)?;
        if n == 0 {
            return Ok(());
        }
        p.take(&buf[..n]).await?;
    }
}

/// See [`Http::head`].
pub(super) async fn head(http: &Http, url: &str) -> Result<Option<Head>, HttpError> {
    let parsed = parse(url)?;
    if parsed.scheme() == "file" {
        let path = local_path(&parsed)?;
        return match tokio::fs::metadata(&path).await {
            Ok(m) => Ok(Some(Head {
                etag: None,
                last_modified: m.modified().ok().map(httpdate::fmt_http_date),
                length: Some(m.len()),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(HttpError::Read { path, source }),
        };
    }
    let client = http.client(&parsed)?;
    let first = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let tried = match client.head(url).send().await {
            Err(e) => Err(unanswered(http, url, e)),
            Ok(r) if r.status() == StatusCode::NOT_FOUND => return Ok(None),
            Ok(r) if transient_status(r.status().as_u16()) => Err(Try::Again {
                error: HttpError::Status {
                    url: url.to_string(),
                    status: r.status().as_u16(),
                },
                retry_after: None,
            }),
            Ok(r) if r.status().is_success() => Ok(r),
            Ok(r) => Err(Try::Final(HttpError::Status {
                url: url.to_string(),
                status: r.status().as_u16(),
            })),
        };
        let error = match tried {
            Ok(r) => {
                let h = r.headers();
                let get = |name| {
                    h.get(name)
                        .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                        .map(str::to_string)
                };
                return Ok(Some(Head {
                    etag: get(ETAG),
                    last_modified: get(LAST_MODIFIED),
                    length: get(CONTENT_LENGTH).and_then(|v| v.parse().ok()),
                }));
            }
            Err(Try::Final(e)) => return Err(e),
            Err(Try::Again { error, .. }) => error,
        };
        let outcome = Attempt::Transient { retry_after: None };
        match http
            .retry()
            .next_delay(attempt, outcome, first, Instant::now(), fastrand::f64())
        {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return Err(error),
        }
    }
}
