//! `docker://NAME`: a repository of an OCI registry (the distribution
//! spec), as a [`Transport`].
//!
//! - Blobs the registry has are found with a HEAD and skipped; a blob
//!   read from another repository of the same registry is mounted
//!   (`POST …/uploads/?mount=…&from=…`; a 202 means "no", and the blob is
//!   uploaded).
//! - Uploads open a session (`POST …/uploads/`) and stream the file in one
//!   monolithic `PUT` with its size, hashed on the way: a file that does not
//!   match its descriptor is never committed. A failed upload starts over
//!   with a new session.
//! - Downloads stream into the file they are given, hashed on the way; a
//!   connection lost in the middle resumes with a `Range` request, and the
//!   whole blob is still checked at the end.
//! - Manifests are pushed as the exact bytes whose digest was computed.
//! - Every request is retried on connection errors, 408, 429 and 5xx
//!   (see [`retry`]), and signs in again once on a 401.
//!
//! The connection (scheme, certificates, credentials) is opened on first
//! use, so naming a registry costs nothing until it is reached.

mod blob;
mod body;
mod conn;
mod endpoint;
mod login;
pub mod oauth;
mod options;
mod pull;
pub mod reference;
pub mod retry;
mod signin;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use futures_util::StreamExt;
use oci_spec::image::{Descriptor, MediaType};
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, RANGE};
use reqwest::StatusCode;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::OnceCell;

pub use pull::{report, RegistryPuller};
pub use reference::RegistryRef;
pub use retry::RetryPolicy;

use self::blob::{file_stream, restart, CHUNK};
use self::conn::{Conn, Failed};
use super::{
    check_bytes, digest_of, BlobMounts, BlobOrigin, ManifestRole, Progress, Transport,
    TransportError,
};
use crate::digest::Digest;
use crate::image::MAX_DOCUMENT;
pub use blob::range_start;
pub use body::{head_of_body, read_capped};
pub use endpoint::{reach, Endpoint};
pub use login::{verify, VerifyError};
pub use options::{RegistryOperation, RegistryOptions};

/// What a manifest GET accepts: OCI and Docker manifests and indexes.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// One repository of a registry.
pub struct RegistryTransport {
    reference: RegistryRef,
    options: RegistryOptions,
    conn: OnceCell<Conn>,
    /// Manifests fetched by `resolve`, so `fetch_manifest` need not ask
    /// again.
    manifests: Mutex<Vec<(Digest, Vec<u8>)>>,
}

impl RegistryTransport {
    pub fn new(reference: RegistryRef, options: RegistryOptions) -> RegistryTransport {
        RegistryTransport {
            reference,
            options,
            conn: OnceCell::new(),
            manifests: Mutex::new(Vec::new()),
        }
    }

    pub fn reference(&self) -> &RegistryRef {
        &self.reference
    }

    async fn conn(&self) -> Result<&Conn, TransportError> {
        self.conn
            .get_or_try_init(|| Conn::open(&self.reference, &self.options))
            .await
    }

    fn location(&self) -> String {
        format!("docker://{}", self.reference.name())
    }

    /// GETs a manifest or index by tag or digest; returns its bytes and
    /// media type.
    async fn get_manifest(&self, reference: &str) -> Result<(Vec<u8>, String), TransportError> {
        let c = self.conn().await?;
        let url = c.url("manifests", reference);
        let what = format!("fetch manifest `{reference}`");
        let resp = c
            .send(RegistryOperation::Pull, &what, |h| {
                h.get(&url).header(ACCEPT, MANIFEST_ACCEPT)
            })
            .await?;
        match resp.status() {
            s if s.is_success() => {}
            StatusCode::NOT_FOUND => {
                return Err(TransportError::NotFound {
                    location: self.location(),
                    reference: reference.to_string(),
                })
            }
            _ => return Err(c.status_error(&what, resp).await),
        }
        let too_large = |size: u64| TransportError::TooLarge {
            location: self.location(),
            what: format!("manifest `{reference}`"),
            size,
            max: MAX_DOCUMENT,
        };
        if let Some(n) = resp.content_length().filter(|n| *n > MAX_DOCUMENT) {
            return Err(too_large(n));
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| TransportError::Registry {
                location: self.location(),
                message: c.network(&what, &e),
                user: false,
            })?;
            body.extend_from_slice(&chunk);
            if body.len() as u64 > MAX_DOCUMENT {
                return Err(too_large(body.len() as u64));
            }
        }
        // The document's own mediaType wins over the header (some
        // registries answer `application/json`).
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(rename = "mediaType")]
            media_type: Option<String>,
        }
        let own = serde_json::from_slice::<Head>(&body)
            .ok()
            .and_then(|h| h.media_type);
        let media_type = own
            .or(content_type)
            .ok_or_else(|| TransportError::Invalid {
                location: self.location(),
                what: format!("manifest `{reference}`"),
                reason: "it says neither in its body nor in its Content-Type what it is".into(),
            })?;
        Ok((body, media_type))
    }

    fn cached_manifest(&self, d: &Digest) -> Option<Vec<u8>> {
        let cache = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
        cache.iter().find(|(k, _)| k == d).map(|(_, v)| v.clone())
    }

    /// Streams the blob into `file` from byte `have` on, hashing into
    /// `hasher`; returns the new count. A cut connection returns what was
    /// written so far as `Err((have, error))`.
    async fn fetch_once(
        &self,
        c: &Conn,
        desc: &Descriptor,
        file: &mut tokio::io::BufWriter<tokio::fs::File>,
        hasher: &mut Sha256,
        mut have: u64,
        progress: Progress<'_>,
    ) -> Result<u64, (u64, Option<TransportError>)> {
        let url = c.url("blobs", desc.digest().as_ref());
        let what = format!("fetch blob {}", desc.digest());
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
        if !status.is_success() {
            return Err((have, Some(c.status_error(&what, resp).await)));
        }
        let resumed = status == StatusCode::PARTIAL_CONTENT
            && resp
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(range_start)
                == Some(have);
        if have > 0 && !resumed {
            // The registry sent the whole blob again: start over.
            restart(file, hasher).await.map_err(|e| (0, Some(e)))?;
            have = 0;
        }
        if let Some(n) = resp.headers().get(CONTENT_LENGTH) {
            tracing::debug!(?n, have, "blob body");
        }
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %crate::report::error_chain(&e), have, "blob body cut short");
                    return Err((have, None));
                }
            };
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
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(|e| {
                (
                    have,
                    Some(TransportError::io(
                        format!("cannot write blob {}", desc.digest()),
                        e,
                    )),
                )
            })?;
            have += chunk.len() as u64;
            progress(have);
        }
        Ok(have)
    }
}

#[async_trait]
impl Transport for RegistryTransport {
    fn describe(&self) -> String {
        self.location()
    }

    async fn resolve(&self, reference: &str) -> Result<Descriptor, TransportError> {
        let reference = if reference.is_empty() {
            self.reference.reference()
        } else {
            reference.to_string()
        };
        let (bytes, media_type) = self.get_manifest(&reference).await?;
        let digest = Digest::of(&bytes);
        if let Ok(asked) = reference.parse::<Digest>() {
            if asked != digest {
                return Err(TransportError::Mismatch {
                    location: self.location(),
                    what: format!("manifest {asked}"),
                    expected: asked.to_string(),
                    actual: digest.to_string(),
                });
            }
        }
        let desc = Descriptor::new(
            MediaType::from(media_type.as_str()),
            bytes.len() as u64,
            crate::store::oci_digest(&digest),
        );
        self.manifests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((digest, bytes));
        Ok(desc)
    }

    async fn fetch_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
        if desc.size() > MAX_DOCUMENT {
            return Err(TransportError::TooLarge {
                location: self.location(),
                what: format!("manifest {}", desc.digest()),
                size: desc.size(),
                max: MAX_DOCUMENT,
            });
        }
        let digest = digest_of(desc, &self.location())?;
        let bytes = match self.cached_manifest(&digest) {
            Some(b) => b,
            None => self.get_manifest(&digest.to_string()).await?.0,
        };
        check_bytes(&bytes, desc, &self.location())?;
        Ok(bytes)
    }

    async fn has_blob(&self, desc: &Descriptor) -> Result<bool, TransportError> {
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

    async fn fetch_blob(
        &self,
        desc: &Descriptor,
        dest: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let c = self.conn().await?;
        let expected = digest_of(desc, &self.location())?;
        let io = |e| TransportError::io(format!("cannot write {}", dest.display()), e);
        let file = tokio::fs::File::create(dest).await.map_err(io)?;
        let mut file = tokio::io::BufWriter::with_capacity(CHUNK, file);
        let mut hasher = Sha256::new();
        let mut have = 0;
        // Each resumption must make progress; a body cut at the same
        // place again and again ends as an error after a few tries.
        let mut stalls = 0;
        loop {
            match self
                .fetch_once(c, desc, &mut file, &mut hasher, have, progress)
                .await
            {
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
            file.flush().await.map_err(io)?;
        }
        file.flush().await.map_err(io)?;
        let actual = Digest::from_sha(hasher.finalize().into());
        if actual != expected {
            return Err(TransportError::Mismatch {
                location: self.location(),
                what: format!("content of {expected}"),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(())
    }

    async fn push_blob(
        &self,
        desc: &Descriptor,
        src: &Path,
        progress: Progress<'_>,
    ) -> Result<(), TransportError> {
        let c = self.conn().await?;
        let expected = digest_of(desc, &self.location())?;
        let digest = expected.to_string();
        let size = desc.size();
        // Set by the stream when the file is not what the descriptor says.
        let bad: std::sync::Arc<Mutex<Option<String>>> = Default::default();
        // The stream is `'static`; it counts bytes here, and this task
        // reports them.
        let sent = std::sync::Arc::new(AtomicU64::new(0));
        let what = format!("upload blob {digest}");
        // A session, then one monolithic PUT streamed from the file; a
        // failure starts over with a new session (a broken PUT may have
        // left part of the bytes in the old one).
        let upload = c.retry(RegistryOperation::Push, &what, |reauthed| {
            let (what, digest, bad, sent, expected) = (&what, &digest, &bad, &sent, &expected);
            async move {
                let start = c.url("blobs", "uploads/");
                let resp = c
                    .send_once(RegistryOperation::Push, what, |h| h.post(&start), reauthed)
                    .await?;
                if resp.status() != StatusCode::ACCEPTED {
                    return Err(Failed::Final(c.status_error(what, resp).await));
                }
                let put = upload_url(&c.base, &resp, digest).ok_or_else(|| {
                    Failed::Final(TransportError::Registry {
                        location: c.location.clone(),
                        message: format!(
                            "{what}: the registry started an upload without a usable Location"
                        ),
                        user: false,
                    })
                })?;
                let resp = c
                    .send_once(
                        RegistryOperation::Push,
                        what,
                        |h| {
                            let stream = file_stream(
                                src.to_path_buf(),
                                size,
                                expected.clone(),
                                bad.clone(),
                                sent.clone(),
                            );
                            h.put(put.clone())
                                .header(CONTENT_TYPE, "application/octet-stream")
                                .header(CONTENT_LENGTH, size)
                                .body(reqwest::Body::wrap_stream(stream))
                        },
                        reauthed,
                    )
                    .await;
                if bad.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                    // The file is not the blob: no other try will change it.
                    return Ok(());
                }
                let resp = resp?;
                match resp.status() {
                    StatusCode::CREATED | StatusCode::NO_CONTENT | StatusCode::OK => Ok(()),
                    _ => Err(Failed::Final(c.status_error(what, resp).await)),
                }
            }
        });
        tokio::pin!(upload);
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
        let result = loop {
            tokio::select! {
                r = &mut upload => break r,
                _ = tick.tick() => progress(sent.load(Ordering::Relaxed)),
            }
        };
        if let Some(reason) = bad.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(TransportError::Mismatch {
                location: format!("{}", src.display()),
                what: format!("blob {digest}"),
                expected: format!("{size} bytes with digest {digest}"),
                actual: reason,
            });
        }
        if result.is_ok() {
            progress(size);
        }
        result
    }

    async fn push_manifest(
        &self,
        bytes: &[u8],
        desc: &Descriptor,
        role: ManifestRole<'_>,
    ) -> Result<(), TransportError> {
        check_bytes(bytes, desc, &self.location())?;
        let c = self.conn().await?;
        let target = match role {
            ManifestRole::Root { tag: Some(tag) } => self.reference.with_reference(tag),
            _ => self.reference.with_reference(desc.digest().as_ref()),
        };
        let content_type = desc
            .media_type()
            .to_string()
            .parse::<reqwest::header::HeaderValue>()
            .map_err(|_| TransportError::Invalid {
                location: self.location(),
                what: format!("manifest {}", desc.digest()),
                reason: "its media type cannot be sent as a header".into(),
            })?;
        let body = bytes::Bytes::copy_from_slice(bytes);
        let what = format!("push manifest {}", target.reference());
        let url = c.url("manifests", &target.reference());
        let resp = c
            .send(RegistryOperation::Push, &what, |h| {
                h.put(&url)
                    .header(CONTENT_TYPE, content_type.clone())
                    .body(body.clone())
            })
            .await?;
        match resp.status() {
            StatusCode::CREATED | StatusCode::OK | StatusCode::ACCEPTED => Ok(()),
            status => {
                let detail = body::error_body(resp).await;
                // MANIFEST_BLOB_UNKNOWN, the spec's code for this.
                if status == StatusCode::BAD_REQUEST && detail.contains("BLOB_UNKNOWN") {
                    return Err(TransportError::BlobUnknown {
                        location: self.location(),
                        what,
                        detail: detail.trim_start_matches(": ").to_string(),
                    });
                }
                Err(c.answered(&what, status, &detail))
            }
        }
    }

    async fn finish(&self) -> Result<(), TransportError> {
        Ok(())
    }

    fn mounts(&self) -> Option<&dyn BlobMounts> {
        Some(self)
    }
}

#[async_trait]
impl BlobMounts for RegistryTransport {
    fn origin(&self) -> BlobOrigin {
        BlobOrigin {
            registry: self.reference.registry.clone(),
            repository: self.reference.repository.clone(),
        }
    }

    async fn mount_blob(
        &self,
        desc: &Descriptor,
        from: &BlobOrigin,
    ) -> Result<bool, TransportError> {
        if from.registry != self.reference.registry || from.repository == self.reference.repository
        {
            return Ok(false);
        }
        let c = self.conn().await?;
        let what = format!("mount blob {} from {}", desc.digest(), from.repository);
        let mut url = reqwest::Url::parse(&c.url("blobs", "uploads/")).map_err(|e| {
            TransportError::Registry {
                location: self.location(),
                message: format!("{what}: {e}"),
                user: false,
            }
        })?;
        url.query_pairs_mut()
            .append_pair("mount", desc.digest().as_ref())
            .append_pair("from", &from.repository);
        let resp = c
            .send(RegistryOperation::Push, &what, |h| h.post(url.clone()))
            .await?;
        match resp.status() {
            StatusCode::CREATED => Ok(true),
            // 202: the registry started an upload instead; upload.
            status => {
                tracing::debug!(%status, "cross-repository mount refused; uploading");
                Ok(false)
            }
        }
    }
}

/// Where the monolithic `PUT` of an upload goes: the session's `Location`
/// (absolute, or relative to the registry) with `digest=` added to what
/// query it has.
fn upload_url(base: &str, resp: &reqwest::Response, digest: &str) -> Option<reqwest::Url> {
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    let mut url = reqwest::Url::parse(base).ok()?.join(location).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.query_pairs_mut().append_pair("digest", digest);
    Some(url)
}
