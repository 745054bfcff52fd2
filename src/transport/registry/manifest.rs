//! Manifests and indexes in a registry repository: GET by tag or digest
//! (bounded by [`MAX_DOCUMENT`], the media type taken from the document
//! itself), and PUT as the exact bytes whose digest was computed.

use std::time::Instant;

use futures_util::StreamExt;
use oci_spec::image::{Descriptor, MediaType};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::StatusCode;

use super::body::{self, ErrorCode};
use super::conn::Conn;
use super::pace::Pace;
use super::{RegistryOperation, RegistryTransport};
use crate::digest::Digest;
use crate::image::MAX_DOCUMENT;
use crate::transport::{check_bytes, digest_of, ManifestRole, TransportError};

/// The header in which a registry says the digest of the manifest it
/// sends (the distribution spec's, from docker's).
const DOCKER_CONTENT_DIGEST: &str = "docker-content-digest";

/// What a manifest GET accepts: OCI and Docker manifests and indexes.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

impl RegistryTransport {
    /// GETs a manifest or index by tag or digest; returns its bytes and
    /// media type. Held to the transfer limits (`pace.rs`), as a blob is.
    pub(super) async fn get_manifest(
        &self,
        reference: &str,
    ) -> Result<(Vec<u8>, String), TransportError> {
        let c = self.conn().await?;
        let what = format!("fetch manifest `{reference}`");
        let mut pace = Pace::new(self.options.transfer, Instant::now());
        let left = pace.time_left(Instant::now());
        let run = self.get_manifest_paced(c, reference, &what, &mut pace);
        let r = match left {
            Some(d) => tokio::time::timeout(d, run).await,
            None => Ok(run.await),
        };
        r.unwrap_or_else(|_| Err(c.too_slow(&what, pace.past_deadline())))
    }

    async fn get_manifest_paced(
        &self,
        c: &Conn,
        reference: &str,
        what: &str,
        pace: &mut Pace,
    ) -> Result<(Vec<u8>, String), TransportError> {
        let what = what.to_string();
        let url = c.url("manifests", reference);
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
        pace.start_floor(Instant::now());
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
        let claimed = resp
            .headers()
            .get(DOCKER_CONTENT_DIGEST)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string());
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        loop {
            let chunk = match tokio::time::timeout(pace.tick(), stream.next()).await {
                Err(_) => {
                    pace.check(Instant::now(), true)
                        .map_err(|s| c.too_slow(&what, s))?;
                    continue;
                }
                Ok(None) => break,
                Ok(Some(chunk)) => chunk,
            };
            let chunk = chunk.map_err(|e| TransportError::Registry {
                location: self.location(),
                message: c.network(&what, &e),
                user: false,
            })?;
            pace.add(chunk.len() as u64, Instant::now());
            pace.check(Instant::now(), true)
                .map_err(|s| c.too_slow(&what, s))?;
            body.extend_from_slice(&chunk);
            if body.len() as u64 > MAX_DOCUMENT {
                return Err(too_large(body.len() as u64));
            }
        }
        if let Some(claimed) = claimed {
            self.check_claimed_digest(c, reference, &claimed, &body)?;
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

    /// The `Docker-Content-Digest` a registry sent with a manifest,
    /// compared with the digest of the bytes it sent: a registry whose
    /// header and content disagree is named. (The bytes' digest is what
    /// jbuild uses either way; a header of another algorithm than sha256
    /// cannot be compared and is let be.)
    fn check_claimed_digest(
        &self,
        c: &Conn,
        reference: &str,
        claimed: &str,
        body: &[u8],
    ) -> Result<(), TransportError> {
        let Some(hex) = claimed.strip_prefix("sha256:") else {
            tracing::debug!(claimed, "a Docker-Content-Digest of another algorithm");
            return Ok(());
        };
        let actual = Digest::of(body);
        if hex.eq_ignore_ascii_case(actual.hex()) {
            return Ok(());
        }
        let shown: String = claimed.chars().take(80).collect();
        Err(TransportError::Registry {
            location: self.location(),
            message: format!(
                "manifest `{reference}`: {} says in its Docker-Content-Digest header that it \
                 sent {shown}, but the bytes it sent are {actual}: the registry is lying about \
                 what it serves (or a proxy between changed the answer); pull by digest from a \
                 registry you trust",
                c.registry()
            ),
            user: true,
        })
    }

    pub(super) fn cached_manifest(&self, d: &Digest) -> Option<Vec<u8>> {
        let cache = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
        cache.iter().find(|(k, _)| k == d).map(|(_, v)| v.clone())
    }

    /// The descriptor of the manifest `reference` names (the tag or digest
    /// of the location's own name when `reference` is empty); its bytes
    /// are kept for [`RegistryTransport::read_manifest`].
    pub(super) async fn resolve_manifest(
        &self,
        reference: &str,
    ) -> Result<Descriptor, TransportError> {
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

    /// The checked bytes of the manifest `desc` describes, from the
    /// manifests `resolve` kept or from the registry.
    pub(super) async fn read_manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, TransportError> {
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

    /// PUTs the exact bytes of a manifest, by tag for a tagged root and
    /// by digest otherwise.
    pub(super) async fn put_manifest(
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
                // MANIFEST_BLOB_UNKNOWN, the spec's code for this (some
                // registries say BLOB_UNKNOWN).
                if status == StatusCode::BAD_REQUEST
                    && (detail.has(&ErrorCode::ManifestBlobUnknown)
                        || detail.has(&ErrorCode::BlobUnknown))
                {
                    return Err(TransportError::BlobUnknown {
                        location: self.location(),
                        what,
                        errors: detail,
                    });
                }
                Err(c.answered(&what, status, &detail))
            }
        }
    }
}
