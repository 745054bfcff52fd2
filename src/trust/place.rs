//! Where an image's signatures and attestations are kept: the registry
//! repository the image is in, or jbuild's store beside the image. Both
//! keep them as cosign does — a manifest tagged `sha256-<hex>.sig|.att` in
//! the image's repository — so a push can carry the store's to a registry.

use std::io::Write;

use oci_spec::image::{Descriptor, MediaType};

use super::TrustError;
use crate::digest::Digest;
use crate::store::{descriptor_digest, oci_digest, ImageName, Store, StoreLock};
use crate::transport::{
    self, ManifestRole, RegistryRef, RegistryTransport, Transport, TransportError,
};

/// One place that holds an image and its artifacts.
pub trait Place {
    /// The image as the user would name it (for messages).
    fn describe(&self) -> String;
    /// The repository a signature payload names (`host/repo`).
    fn repository(&self) -> String;
    /// The descriptor of the image the user named (manifest or index).
    fn subject(&self) -> Result<Descriptor, TrustError>;
    /// Its digest.
    fn subject_digest(&self) -> Result<Digest, TrustError> {
        Ok(descriptor_digest(&self.subject()?).map_err(crate::store::StoreError::from)?)
    }
    /// The manifest tagged `tag` in the image's repository, if there is one.
    fn artifact(&self, tag: &str) -> Result<Option<Vec<u8>>, TrustError>;
    /// A blob's bytes (refused beyond `max`).
    fn read_blob(&self, desc: &Descriptor, max: u64) -> Result<Vec<u8>, TrustError>;
    /// Stores `blobs`, then `manifest` tagged `tag`.
    fn write_artifact(
        &self,
        blobs: &[(Descriptor, Vec<u8>)],
        manifest: &[u8],
        tag: &str,
    ) -> Result<(), TrustError>;
}

fn manifest_descriptor(bytes: &[u8]) -> Descriptor {
    Descriptor::new(
        MediaType::ImageManifest,
        bytes.len() as u64,
        oci_digest(&Digest::of(bytes)),
    )
}

/// A repository in a registry (`docker://host/repo:tag`).
pub struct RegistryPlace {
    reference: RegistryRef,
    transport: RegistryTransport,
}

impl RegistryPlace {
    pub fn new(reference: RegistryRef, options: transport::RegistryOptions) -> RegistryPlace {
        RegistryPlace {
            transport: RegistryTransport::new(reference.clone(), options),
            reference,
        }
    }
}

impl Place for RegistryPlace {
    fn describe(&self) -> String {
        let r = &self.reference;
        match (&r.digest, &r.tag) {
            (Some(d), _) => format!("{}@{d}", r.name()),
            (None, Some(t)) => format!("{}:{t}", r.name()),
            (None, None) => r.name(),
        }
    }

    fn repository(&self) -> String {
        self.reference.name()
    }

    fn subject(&self) -> Result<Descriptor, TrustError> {
        Ok(transport::block_on(
            self.transport.resolve(&self.reference.reference()),
        )?)
    }

    fn artifact(&self, tag: &str) -> Result<Option<Vec<u8>>, TrustError> {
        transport::block_on(async {
            let desc = match self.transport.resolve(tag).await {
                Ok(d) => d,
                Err(TransportError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            Ok(Some(self.transport.fetch_manifest(&desc).await?))
        })
    }

    fn read_blob(&self, desc: &Descriptor, max: u64) -> Result<Vec<u8>, TrustError> {
        if desc.size() > max {
            return Err(TrustError::TooLarge {
                what: desc.digest().to_string(),
                size: desc.size(),
                max,
            });
        }
        let file = tempfile::NamedTempFile::new()
            .map_err(|e| TrustError::io("cannot make a temporary file", e))?;
        transport::block_on(self.transport.fetch_blob(desc, file.path(), &|_| {}))?;
        std::fs::read(file.path()).map_err(|e| TrustError::io("cannot read a fetched blob", e))
    }

    fn write_artifact(
        &self,
        blobs: &[(Descriptor, Vec<u8>)],
        manifest: &[u8],
        tag: &str,
    ) -> Result<(), TrustError> {
        let mut files = Vec::new();
        for (desc, bytes) in blobs {
            let mut f = tempfile::NamedTempFile::new()
                .map_err(|e| TrustError::io("cannot make a temporary file", e))?;
            f.write_all(bytes)
                .map_err(|e| TrustError::io("cannot write a temporary file", e))?;
            files.push((desc.clone(), f));
        }
        let t = &self.transport;
        transport::block_on(async {
            for (desc, f) in &files {
                if !t.has_blob(desc).await? {
                    t.push_blob(desc, f.path(), &|_| {}).await?;
                }
            }
            let desc = manifest_descriptor(manifest);
            t.push_manifest(manifest, &desc, ManifestRole::Root { tag: Some(tag) })
                .await?;
            t.finish().await?;
            Ok::<_, TrustError>(())
        })
    }
}

/// An image in jbuild's store; its artifacts are stored under its
/// repository's name with cosign's tags (`app:sha256-<hex>.sig`).
pub struct StorePlace<'a> {
    store: &'a Store,
    name: ImageName,
    image: Descriptor,
}

impl<'a> StorePlace<'a> {
    /// The image the user typed (a name, an ID or a digest); one found by
    /// digest is kept under its first name.
    pub fn find(store: &'a Store, reference: &str) -> Result<StorePlace<'a>, TrustError> {
        let found = store.find(reference)?;
        let names = match &found.name {
            Some(n) => vec![n.clone()],
            None => store.names_of(found.descriptor.digest())?,
        };
        let name = names
            .iter()
            .filter(|n| !is_artifact_name(n))
            .find_map(|n| ImageName::parse(n).ok())
            .ok_or_else(|| TrustError::Unnamed(reference.to_string()))?;
        Ok(StorePlace {
            store,
            name,
            image: found.descriptor,
        })
    }
}

/// Whether a store ref name is an artifact's (`repo:sha256-<hex>.sig`).
pub fn is_artifact_name(name: &str) -> bool {
    name.rsplit_once(':')
        .is_some_and(|(_, tag)| super::artifact::Kind::parse_tag(tag).is_some())
}

impl Place for StorePlace<'_> {
    fn describe(&self) -> String {
        self.name.tagged()
    }

    fn repository(&self) -> String {
        // `host/repo`, as a registry place names it: what a payload's
        // docker-reference and a statement's subject say once pushed.
        format!(
            "{}/{}",
            self.name.docker_registry(),
            self.name.docker_repository()
        )
    }

    fn subject(&self) -> Result<Descriptor, TrustError> {
        // The index entry carries the store's ref-name annotation; the
        // subject is the bare descriptor.
        Ok(Descriptor::new(
            self.image.media_type().clone(),
            self.image.size(),
            self.image.digest().clone(),
        ))
    }

    fn artifact(&self, tag: &str) -> Result<Option<Vec<u8>>, TrustError> {
        let name = self
            .name
            .with_tag(tag)
            .map_err(|e| TrustError::Name(e.to_string()))?;
        let Some(desc) = self.store.resolve(&name.tagged())? else {
            return Ok(None);
        };
        let d = descriptor_digest(&desc).map_err(crate::store::StoreError::from)?;
        Ok(Some(self.store.read_blob(&d, crate::image::MAX_DOCUMENT)?))
    }

    fn read_blob(&self, desc: &Descriptor, max: u64) -> Result<Vec<u8>, TrustError> {
        let d = descriptor_digest(desc).map_err(crate::store::StoreError::from)?;
        Ok(self.store.read_blob(&d, max)?)
    }

    fn write_artifact(
        &self,
        blobs: &[(Descriptor, Vec<u8>)],
        manifest: &[u8],
        tag: &str,
    ) -> Result<(), TrustError> {
        // Held until the tag names them, so a prune cannot take the blobs
        // in between.
        let _lock = StoreLock::shared(self.store)?;
        for (_, bytes) in blobs {
            self.store.put_bytes(bytes)?;
        }
        self.store.put_bytes(manifest)?;
        let name = self
            .name
            .with_tag(tag)
            .map_err(|e| TrustError::Name(e.to_string()))?;
        self.store.tag(&name, &manifest_descriptor(manifest))?;
        Ok(())
    }
}
