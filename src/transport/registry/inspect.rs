//! Looking at an image in a registry without pulling it
//! (`jbuild inspect docker://REF`): its manifest or index as the registry
//! serves it, the platforms an index offers, and the manifest and
//! configuration of one of them. Nothing is stored: the configuration
//! blob passes through a temporary file, read to at most
//! [`MAX_DOCUMENT`], and every byte is checked against its digest.

use oci_spec::image::Descriptor;

use super::RegistryTransport;
use crate::digest::Digest;
use crate::image::{platform, Document, Platform, MAX_DOCUMENT};
use crate::transport::{Transport, TransportError};

/// What a registry holds under one reference.
#[derive(Debug, Clone)]
pub struct RemoteImage {
    /// `docker://registry/repository`.
    pub location: String,
    /// The descriptor of what the reference names (an index or a manifest).
    pub descriptor: Descriptor,
    /// Its exact bytes, as the registry sent them (`--raw`).
    pub raw: Vec<u8>,
    /// An index's entries: each manifest's digest and platform
    /// (`os/arch[/variant]`; `None` for an entry that says none). Empty for
    /// a single manifest.
    pub platforms: Vec<(String, Option<Platform>)>,
    /// The image manifest read: the one named, or the index's entry for
    /// the platform asked for (`None` when the index has none for it and
    /// no platform was asked for).
    pub manifest: Option<(Descriptor, serde_json::Value)>,
    /// That manifest's image configuration.
    pub config: Option<serde_json::Value>,
}

impl RegistryTransport {
    /// The image the transport's reference names. From an index, the
    /// manifest for `want` is read; without `want`, the one for
    /// [`Platform::default_for_host`] when the index has it.
    pub async fn inspect(&self, want: Option<&Platform>) -> Result<RemoteImage, TransportError> {
        let descriptor = self.resolve("").await?;
        let raw = self.fetch_manifest(&descriptor).await?;
        let invalid = |what: String, reason: String| TransportError::Invalid {
            location: self.location(),
            what,
            reason,
        };
        let doc = Document::parse(&descriptor, &raw)
            .map_err(|e| invalid(format!("manifest {}", descriptor.digest()), e.to_string()))?;
        let mut platforms = Vec::new();
        let chosen = match doc {
            Document::Manifest(m) => Some((descriptor.clone(), *m)),
            Document::Index(index) => {
                for d in index.manifests() {
                    let p = d.platform().as_ref().and_then(|p| {
                        let mut parsed =
                            Platform::parse(&format!("{}/{}", p.os(), p.architecture())).ok()?;
                        parsed.variant = p.variant().clone();
                        Some(parsed)
                    });
                    platforms.push((d.digest().to_string(), p));
                }
                let host = Platform::default_for_host();
                match platform::select(&index, want.unwrap_or(&host)) {
                    Ok(d) => Some(self.child_manifest(&d).await?),
                    Err(e) if want.is_some() => {
                        return Err(invalid("the index".into(), e.to_string()));
                    }
                    Err(_) => None,
                }
            }
        };
        let (manifest, config) = match chosen {
            Some((d, m)) => {
                let config = self.config(m.config()).await?;
                let json = serde_json::to_value(&m)
                    .map_err(|e| invalid(format!("manifest {}", d.digest()), e.to_string()))?;
                (Some((d, json)), Some(config))
            }
            None => (None, None),
        };
        Ok(RemoteImage {
            location: self.location(),
            descriptor,
            raw,
            platforms,
            manifest,
            config,
        })
    }

    /// An index's entry, which must be an image manifest.
    async fn child_manifest(
        &self,
        d: &Descriptor,
    ) -> Result<(Descriptor, oci_spec::image::ImageManifest), TransportError> {
        let bytes = self.fetch_manifest(d).await?;
        match Document::parse(d, &bytes) {
            Ok(Document::Manifest(m)) => Ok((d.clone(), *m)),
            Ok(Document::Index(_)) => Err(TransportError::Invalid {
                location: self.location(),
                what: format!("manifest {}", d.digest()),
                reason: "an index inside an index".into(),
            }),
            Err(e) => Err(TransportError::Invalid {
                location: self.location(),
                what: format!("manifest {}", d.digest()),
                reason: e.to_string(),
            }),
        }
    }

    /// The configuration blob `d` describes, checked and parsed.
    async fn config(&self, d: &Descriptor) -> Result<serde_json::Value, TransportError> {
        let what = format!("config {}", d.digest());
        if d.size() > MAX_DOCUMENT {
            return Err(TransportError::TooLarge {
                location: self.location(),
                what,
                size: d.size(),
                max: MAX_DOCUMENT,
            });
        }
        let file = tempfile::NamedTempFile::new()
            .map_err(|e| TransportError::io("cannot make a temporary file", e))?;
        self.fetch_blob(d, file.path(), &|_| {}).await?;
        let bytes = std::fs::read(file.path())
            .map_err(|e| TransportError::io(format!("cannot read {}", file.path().display()), e))?;
        // fetch_blob checked size and digest; this is the same check, kept
        // here so the bytes parsed are the bytes checked.
        if Digest::of(&bytes).to_string() != d.digest().to_string() {
            return Err(TransportError::Mismatch {
                location: self.location(),
                what,
                expected: d.digest().to_string(),
                actual: Digest::of(&bytes).to_string(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| TransportError::Invalid {
            location: self.location(),
            what,
            reason: format!("not JSON ({e})"),
        })
    }
}
