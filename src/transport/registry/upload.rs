//! Blobs into a registry repository: uploaded in one monolithic `PUT`
//! streamed from the file, or mounted from another repository of the same
//! registry without an upload.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use oci_spec::image::Descriptor;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use reqwest::StatusCode;

use super::blob::file_stream;
use super::conn::Failed;
use super::pace::Pace;
use super::{RegistryOperation, RegistryTransport};
use crate::transport::{digest_of, BlobMounts, BlobOrigin, Progress, TransportError};

impl RegistryTransport {
    /// Uploads the file `src`: a session, then one monolithic `PUT`.
    pub(super) async fn upload_blob(
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
        let bad: Arc<Mutex<Option<String>>> = Default::default();
        // The stream is `'static`; it counts bytes here, and this task
        // reports them.
        let sent = Arc::new(AtomicU64::new(0));
        let what = format!("upload blob {digest}");
        // Set once the session is open and the PUT starts: the rate floor
        // runs from then on (a blob whose bytes have all gone, waiting for
        // the registry's answer, is held to the deadline alone).
        let putting = Arc::new(AtomicBool::new(false));
        let mut pace = Pace::new(self.options.transfer, Instant::now());
        // A session, then one monolithic PUT streamed from the file; a
        // failure starts over with a new session (a broken PUT may have
        // left part of the bytes in the old one).
        let upload = c.retry(RegistryOperation::Push, &what, |reauthed| {
            let (what, digest, bad, sent, expected) = (&what, &digest, &bad, &sent, &expected);
            let putting = &putting;
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
                putting.store(true, Ordering::Relaxed);
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
        let mut tick = tokio::time::interval(pace.tick().min(Duration::from_millis(200)));
        let result = loop {
            tokio::select! {
                r = &mut upload => break r,
                _ = tick.tick() => {
                    let now = Instant::now();
                    let moved = sent.load(Ordering::Relaxed);
                    progress(moved);
                    if putting.load(Ordering::Relaxed) {
                        pace.start_floor(now);
                    }
                    pace.counted(moved, now);
                    if let Err(slow) = pace.check(now, moved < size) {
                        // Dropping the upload ends its request.
                        break Err(c.too_slow(&what, slow));
                    }
                }
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
